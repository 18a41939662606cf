"""Every member of a saved file against every limit of ``FileLimits``, at the bound and one past.

A limit is a property of every member it bounds, in both formats (an estimator's file:
``metadata.json`` and ``weights.pt``; a ``DistributionalConstraint``'s: ``distributional.json``
and ``estimator.ebm``, itself an estimator's file read under the same limits), so each test
walks the members and each bound: a file exactly at a limit loads, one unit under it is
refused naming the member and the limit, and where several members exceed a limit, the one
named is the first that ``load`` reads. Each size, depth and count is computed here from the
file with zipfile, json and torch, not with the reader's own code.
"""

from __future__ import annotations

import copy
import io
import json
import math
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
import torch

from ebmclassifier import DistributionalConstraint, load
from ebmclassifier.saving import FileLimits

#: The members of each format, in the order load reads them; the inner file's with its name.
ESTIMATOR = ("metadata.json", "weights.pt")
CONSTRAINT = ("distributional.json", "estimator.ebm")
JSON_MEMBERS = ("metadata.json", "distributional.json")
#: Limits high enough for any file here but the one limit a test sets.
LIFTED = dict(json_bytes=2**30, weights_bytes=2**30, depth=10**6, array_bytes=2**30)


@pytest.fixture(scope="module")
def estimator_bytes(_shared_models):
    buffer = io.BytesIO()
    _shared_models("ngebm").save(buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def constraint_bytes(_shared_models, small_blobs):
    X, _ = small_blobs
    base = copy.deepcopy(_shared_models("ngebm"))
    buffer = io.BytesIO()
    DistributionalConstraint(base, priors={0: 0.5, 1: 0.3, 2: 0.2}).fit(X).save(buffer)
    return buffer.getvalue()


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _archive(members: list[tuple[str, bytes]], deflated=()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members:
            kind = zipfile.ZIP_DEFLATED if name in deflated else zipfile.ZIP_STORED
            with warnings.catch_warnings():  # a duplicate name, when a test wants one
                warnings.simplefilter("ignore", UserWarning)
                archive.writestr(name, data, compress_type=kind)
    return buffer.getvalue()


def _padded(data: bytes, member: str, size: int) -> bytes:
    """The file ``data`` with its JSON ``member`` padded by trailing blanks to ``size`` bytes."""
    members = _members(data)
    members[member] = members[member] + b" " * (size - len(members[member]))
    return _archive(list(members.items()))


def _write(tmp_path, data: bytes):
    path = tmp_path / "file.ebm"
    path.write_bytes(data)
    return path


def _loads(path, **limits) -> None:
    load(path, limits=FileLimits(**{**LIFTED, **limits}))


def _refused(path, match: str, **limits) -> str:
    with pytest.raises(ValueError, match=match) as info:
        _loads(path, **limits)
    assert str(path) in str(info.value)
    return str(info.value)


def _files(estimator_bytes, constraint_bytes) -> dict[str, tuple[bytes, list[tuple[str, ...]]]]:
    """name -> (file, its members as paths from the outer file, in the order load reads them)."""
    inner = [("estimator.ebm", name) for name in ESTIMATOR]
    return {
        "estimator": (estimator_bytes, [(name,) for name in ESTIMATOR]),
        "constraint": (constraint_bytes, [("distributional.json",), *inner]),
    }


def _member(data: bytes, path: tuple[str, ...]) -> bytes:
    for name in path:
        data = _members(data)[name]
    return data


# ---------------------------------------------------------------- bytes


def _largest_of_its_kind(data: bytes, path: tuple[str, ...]) -> tuple[bytes, int]:
    """``(file, size)``: the file with the member at ``path`` the largest of the members its
    limit bounds (a JSON member padded with blanks beyond the other JSON member), its size."""
    if path[-1] not in JSON_MEMBERS or "distributional.json" not in _members(data):
        return data, len(_member(data, path))
    other = ("estimator.ebm", "metadata.json") if len(path) == 1 else ("distributional.json",)
    size = max(len(_member(data, other)), len(_member(data, path))) + 100
    if len(path) == 1:
        return _padded(data, path[0], size), size
    outer = _members(data)
    outer["estimator.ebm"] = _padded(outer["estimator.ebm"], path[-1], size)
    return _archive(list(outer.items())), size


@pytest.mark.parametrize("kind", ["estimator", "constraint"])
def test_each_member_loads_at_its_byte_limit_and_is_refused_one_byte_under(
    kind, estimator_bytes, constraint_bytes, tmp_path
):
    data, paths = _files(estimator_bytes, constraint_bytes)[kind]
    # the inner weights.pt is inside estimator.ebm, larger: never the largest of its kind
    paths = [p for p in paths if p != ("estimator.ebm", "weights.pt")]
    for path in paths:
        field = "json_bytes" if path[-1] in JSON_MEMBERS else "weights_bytes"
        file, size = _largest_of_its_kind(data, path)
        saved = _write(tmp_path, file)
        _loads(saved, **{field: size})
        where = "in its estimator.ebm, .*" if len(path) == 2 else ""
        _refused(
            saved,
            f"{where}'{path[-1]}' declares {size} bytes, more than the {size - 1} .*{field}",
            **{field: size - 1},
        )


def test_every_header_is_checked_before_any_member_is_read(estimator_bytes, tmp_path):
    """metadata.json comes first in the file: 30 MB of it (deflated) must not be read when
    weights.pt, after it, declares more than its limit."""
    members = _members(estimator_bytes)
    members["metadata.json"] = members["metadata.json"][:-1] + b" " * 30_000_000 + b"}"
    saved = _write(tmp_path, _archive(list(members.items()), deflated={"metadata.json"}))
    weights = len(members["weights.pt"])
    tracemalloc.start()
    try:
        _refused(
            saved,
            "'weights.pt' declares .*FileLimits.weights_bytes",
            weights_bytes=weights - 1,
            compression_ratio=1e9,
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak


# ---------------------------------------------------------------- compression ratio


def _ratio_bounds(size: int, compressed: int) -> tuple[float, float]:
    """The smallest float ratio r with size <= r * compressed, and the float just under it."""
    ratio = size / compressed
    while ratio * compressed < size:
        ratio = math.nextafter(ratio, math.inf)
    while math.nextafter(ratio, 0) * compressed >= size:
        ratio = math.nextafter(ratio, 0)
    return ratio, math.nextafter(ratio, 0)


@pytest.mark.parametrize("name", ESTIMATOR)
def test_each_member_deflated_loads_at_its_ratio_and_is_refused_just_under(
    name, estimator_bytes, tmp_path
):
    members = _members(estimator_bytes)
    raw = members[name]
    pad = 100_000 if name == "metadata.json" else 0
    for _ in range(20):
        # blanks that compress well, as many as make the ratio an integer (a bound met exactly);
        # weights.pt compresses a little, to a ratio between two floats
        members[name] = raw + b" " * pad
        saved = _write(tmp_path, _archive(list(members.items()), deflated={name}))
        with zipfile.ZipFile(saved) as archive:
            info = archive.getinfo(name)
        if name != "metadata.json" or info.file_size % info.compress_size == 0:
            break
        pad += -info.file_size % info.compress_size  # the next multiple of this size
    assert name != "metadata.json" or info.file_size % info.compress_size == 0
    assert info.file_size > info.compress_size, "the member must compress for this test"
    ratio, under = _ratio_bounds(info.file_size, info.compress_size)
    _loads(saved, compression_ratio=max(ratio, 1.0))
    _refused(
        saved,
        f"'{name}' declares {info.file_size} bytes compressed into {info.compress_size}, "
        ".*FileLimits.compression_ratio",
        compression_ratio=under,
    )


# ---------------------------------------------------------------- depth and values


def _json_depth(value) -> int:
    """How deep JSON arrays and objects nest (an object holding a number: 1)."""
    if isinstance(value, dict):
        return 1 + max((_json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_json_depth(v) for v in value), default=0)
    return 0


def _tree(value, depth: int = 1) -> tuple[int, int]:
    """``(deepest, values)`` of a structure counted as a tree: the root at depth 1, each key,
    value and item one deeper than its container, a shared object counted each time."""
    deepest, count = depth, 1
    if isinstance(value, dict):
        children = [item for pair in value.items() for item in pair]
    elif isinstance(value, list | tuple | set | frozenset):
        children = list(value)
    else:
        children = []
    for child in children:
        d, c = _tree(child, depth + 1)
        deepest, count = max(deepest, d), count + c
    return deepest, count


def _depths(data: bytes, paths) -> list[tuple[str, int]]:
    """``(member, depth)`` in the order load reads them."""
    found = []
    for path in paths:
        raw = _member(data, path)
        if path[-1] in JSON_MEMBERS:
            found.append((path[-1], _json_depth(json.loads(raw))))
        elif path[-1] == "weights.pt":
            weights = torch.load(io.BytesIO(raw), weights_only=True)
            found.append(("weights.pt", _tree(weights)[0]))
    return found


@pytest.mark.parametrize("kind", ["estimator", "constraint"])
def test_every_depth_limit_refuses_the_first_member_read_that_is_deeper(
    kind, estimator_bytes, constraint_bytes, tmp_path
):
    data, paths = _files(estimator_bytes, constraint_bytes)[kind]
    saved = _write(tmp_path, data)
    depths = _depths(data, paths)
    deepest = max(depth for _, depth in depths)
    _loads(saved, depth=deepest)
    for limit in range(1, deepest):
        first = next(name for name, depth in depths if depth > limit)
        message = _refused(saved, f"its {first} nests .*than the {limit} ", depth=limit)
        assert "FileLimits.depth" in message


@pytest.mark.parametrize("kind", ["estimator", "constraint"])
def test_the_weights_load_at_their_number_of_values_and_are_refused_one_under(
    kind, estimator_bytes, constraint_bytes, tmp_path
):
    data, paths = _files(estimator_bytes, constraint_bytes)[kind]
    saved = _write(tmp_path, data)
    weights = next(p for p in paths if p[-1] == "weights.pt")
    _, values = _tree(torch.load(io.BytesIO(_member(data, weights)), weights_only=True))
    _loads(saved, weights_values=values)
    _refused(
        saved, f"more than the {values - 1} values .*weights_values", weights_values=values - 1
    )


def _arrays(value) -> list[int]:
    """The bytes of every array the metadata declares (items times the dtype's size)."""
    found = []
    if isinstance(value, dict):
        if "__array__" in value:
            flat = np.asarray(value["__array__"], dtype=object).ravel()
            found.append(len(flat) * np.dtype(value["dtype"]).itemsize)
        for item in value.values():
            found += _arrays(item)
    elif isinstance(value, list):
        for item in value:
            found += _arrays(item)
    return found


def test_the_largest_array_loads_at_its_bytes_and_is_refused_one_byte_under(
    estimator_bytes, tmp_path
):
    saved = _write(tmp_path, estimator_bytes)
    largest = max(_arrays(json.loads(_members(estimator_bytes)["metadata.json"])))
    _loads(saved, array_bytes=largest)
    _refused(
        saved,
        f"{largest} bytes, more than the {largest - 1} .*array_bytes",
        array_bytes=largest - 1,
    )


# ---------------------------------------------------------------- names


def _renamed(name: str) -> list[str]:
    return [f"./{name}", f"x/{name}", name.upper(), f"{name} ", f"{name}/", f"{name}.bak"]


@pytest.mark.parametrize("kind", ["estimator", "constraint"])
def test_every_member_renamed_duplicated_or_joined_by_another_is_refused(
    kind, estimator_bytes, constraint_bytes, tmp_path
):
    data, _ = _files(estimator_bytes, constraint_bytes)[kind]
    members = list(_members(data).items())
    files = [members + [("extra.txt", b"x")]]
    for i, (name, raw) in enumerate(members):
        files.append(members + [(name, raw)])  # twice
        files += [[*members[:i], (other, raw), *members[i + 1 :]] for other in _renamed(name)]
    for file in files:
        saved = _write(tmp_path, _archive(file))
        _refused(saved, "it holds the members")
    inner = [m for m in members if m[0] == "estimator.ebm"]
    for name, raw in _members(inner[0][1]).items() if inner else []:
        for other in [*_renamed(name), None]:
            inner_members = list(_members(inner[0][1]).items())
            if other is None:
                inner_members.append((name, raw))
            else:
                inner_members = [(other if n == name else n, r) for n, r in inner_members]
            outer = dict(members)
            outer["estimator.ebm"] = _archive(inner_members)
            saved = _write(tmp_path, _archive(list(outer.items())))
            _refused(saved, "in its estimator.ebm, .*it holds the members")


def test_every_record_of_the_weights_duplicated_is_refused(estimator_bytes, tmp_path):
    """weights.pt is torch's own zip: a record twice would let torch's reader pick either."""
    members = _members(estimator_bytes)
    records = list(_members(members["weights.pt"]).items())
    rebuilt = dict(members, **{"weights.pt": _archive(records)})
    _loads(_write(tmp_path, _archive(list(rebuilt.items()))))  # rewritten alone: it loads
    for i in range(len(records)):
        twice = [*records[: i + 1], records[i], *records[i + 1 :]]
        file = dict(members, **{"weights.pt": _archive(twice)})
        saved = _write(tmp_path, _archive(list(file.items())))
        _refused(saved, "its weights.pt is not laid out as torch.save writes it")


@pytest.mark.parametrize("piece", [1, 2, 3, 5])
def test_the_depth_is_counted_across_every_boundary_of_its_pieces(monkeypatch, piece):
    # json_depth counts a megabyte of brackets at a time: with pieces of a few bytes, every
    # length of text meets a boundary at each place (a last piece whole or cut short, the
    # deepest point at, just before or just after a boundary), against a count one byte a time
    from ebmclassifier.saving import _archive

    monkeypatch.setattr(_archive, "_PIECE", piece)
    rng = np.random.default_rng(piece)
    for length in range(1, 4 * piece + 3):
        for _ in range(20):
            opened = np.cumsum(rng.choice([1, -1], size=length)) >= 0
            text = "".join("[" if o else "]" for o in opened)
            level, deepest = 0, 0
            for char in text:
                level += 1 if char == "[" else -1
                deepest = max(deepest, level)
            assert _archive.json_depth(f'{{"a": "[[", "b": {text}}}'.encode()) == deepest + 1
