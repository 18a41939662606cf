"""Reading a saved file as hostile input: every size bounded before it is read or allocated.

A file that :func:`ebmclassifier.load` reads is a zip archive of two members, a JSON document
and either ``weights.pt`` (torch's own zip of tensors) or an inner ``.ebm`` file. Anyone can
write one, so before anything is decompressed, parsed or allocated (the limits are those of
:class:`FileLimits`, each refusal a ``ValueError`` naming the file and the limit):

- the archive's table of contents is read only if it takes at most 1 MiB, and must list exactly
  the two members of its format, unencrypted, stored or deflated;
- a member's declared size is at most ``json_bytes`` (the JSON) or ``weights_bytes`` (the
  weights or the inner file), and at most ``compression_ratio`` times its compressed size; it is
  read 1 MiB at a time and reading stops at the limit whatever its header declared;
- the JSON is nested at most ``depth`` deep, counted on its bytes before it is parsed (Python's
  parser would raise ``RecursionError``, and so would the decoding after it);
- ``weights.pt``'s records are stored, not compressed (``torch.save`` never compresses), and
  with the table of contents they tile the member byte for byte, so that torch's zip reader
  (miniz), which allocates a record's declared size, finds the records that were checked here
  and no others; torch reads them with ``weights_only=True`` (tensors and plain containers, no
  code), and the structure it returns is walked, at most ``depth`` deep and ``weights_values``
  values counted as a tree (a list the pickle shares a thousand times counts a thousand times),
  before anything uses it.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import struct
import zipfile
from dataclasses import dataclass

import numpy as np
import torch

from .._utils.parameters import ParamChecker

__all__ = ["FileLimits", "parse_json", "read_members", "read_weights"]

#: A member is read this much at a time, and a single read of the archive's table of contents
#: (or of anything else) may not take more.
_PIECE = 1 << 20
_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


@dataclass(frozen=True)
class FileLimits:
    """The most that :func:`ebmclassifier.load` reads, decompresses or allocates for a file.

    A file beyond any of them is refused with a ``ValueError`` naming the file and the limit,
    before the member is decompressed, parsed or its arrays allocated. The defaults hold every
    file the library writes for networks of up to about 170 million float32 parameters with an
    Adam state (2 GiB); pass ``load(path, limits=FileLimits(weights_bytes=...))`` for larger
    ones, from a source you trust.

    Parameters
    ----------
    json_bytes : int, default=64 MiB
        The size of the JSON member (``metadata.json``, ``distributional.json``), declared and
        read.
    weights_bytes : int, default=2 GiB
        The size of ``weights.pt`` (or of the inner ``estimator.ebm`` of a
        ``DistributionalConstraint`` file), declared and read.
    compression_ratio : float, default=100
        A member's size over its compressed size (``save`` stores members uncompressed: 1).
    depth : int, default=32
        How deep the JSON and the structure of ``weights.pt`` nest (a saved file: under 10).
    array_bytes : int, default=64 MiB
        The memory of one array of the metadata (``classes``, ``vocabulary_``, ...): its items
        times the item size of the dtype it declares.
    weights_values : int, default=1 million
        The values (tensors, numbers, containers) of the structure of ``weights.pt``, counted as
        a tree.

    Examples
    --------
    >>> from ebmclassifier.saving import FileLimits
    >>> FileLimits().weights_bytes == 2**31
    True
    >>> FileLimits(weights_bytes=2**33).weights_bytes  # for a larger model of one's own
    8589934592
    """

    json_bytes: int = 64 * 2**20
    weights_bytes: int = 2**31
    compression_ratio: float = 100.0
    depth: int = 32
    array_bytes: int = 64 * 2**20
    weights_values: int = 1_000_000

    def __post_init__(self) -> None:
        check = ParamChecker.of(vars(self), "FileLimits")
        for name in ("json_bytes", "weights_bytes", "depth", "array_bytes", "weights_values"):
            check.integer(name, 1)
        check.real("compression_ratio", 1.0)
        check.raise_if_any()


class Refused(ValueError):
    """A file beyond a limit, or not of the form it must have; the message says which."""


class _BoundedReads:
    """A binary file whose single reads take at most :data:`_PIECE` bytes.

    zipfile reads an archive's table of contents in one read of the size its end record
    declares, and builds an object per entry: bounding the read bounds the entries.
    """

    def __init__(self, file):
        self._file = file

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            here = self._file.tell()
            n = self._file.seek(0, io.SEEK_END) - here
            self._file.seek(here)
        if n > _PIECE:
            raise Refused(f"its table of contents takes more than the {_PIECE} bytes load reads")
        return self._file.read(n)

    def __getattr__(self, name):
        return getattr(self._file, name)


def _check_member(info: zipfile.ZipInfo, name: str, limits: FileLimits) -> None:
    """The member ``info``'s header: unencrypted, stored or deflated, its declared size within
    ``limits.<name>`` and the compression ratio."""
    limit = getattr(limits, name)
    if info.flag_bits & 0x1:
        raise Refused(f"its member {info.filename!r} is encrypted")
    if info.compress_type not in _COMPRESSIONS:
        raise Refused(
            f"its member {info.filename!r} is compressed with method {info.compress_type}"
        )
    if info.file_size > limit:
        raise Refused(
            f"its member {info.filename!r} declares {info.file_size} bytes, more than the "
            f"{limit} that load reads (FileLimits.{name})"
        )
    if info.file_size > limits.compression_ratio * max(info.compress_size, 1):
        raise Refused(
            f"its member {info.filename!r} declares {info.file_size} bytes compressed into "
            f"{info.compress_size}, a ratio over the {limits.compression_ratio:g} that load "
            "accepts (FileLimits.compression_ratio)"
        )


def _read_member(archive: zipfile.ZipFile, info, limit: int, name: str) -> bytes:
    """The member, read a piece at a time and stopped at ``limit`` whatever its header says;
    it must hold the size its header declares."""
    pieces, size = [], 0
    with archive.open(info) as member:
        while piece := member.read(_PIECE):
            size += len(piece)
            if size > limit:
                raise Refused(
                    f"its member {info.filename!r} holds more than the {limit} bytes that load "
                    f"reads (FileLimits.{name})"
                )
            pieces.append(piece)
    if size != info.file_size:
        raise Refused(
            f"its member {info.filename!r} declares {info.file_size} bytes but holds {size}"
        )
    return b"".join(pieces)


def read_members(
    file, kinds: dict[str, tuple[str, str]], limits: FileLimits
) -> tuple[str, dict[str, bytes]]:
    """``(kind, {name: bytes})`` of the archive ``file`` (an open binary file), which must hold
    exactly the members of one of ``kinds`` (its JSON member first); raises :class:`Refused`
    (or zipfile's errors for a file that is no zip archive)."""
    with zipfile.ZipFile(_BoundedReads(file)) as archive:
        infos = archive.infolist()
        found = sorted(info.filename for info in infos)
        kind = next((k for k, names in kinds.items() if sorted(names) == found), None)
        if kind is None:
            expected = " or ".join(str(list(names)) for names in kinds.values())
            raise Refused(
                "it is not a file written by ebmclassifier.saving.save or "
                f"DistributionalConstraint.save: it holds the members {found[:10]}, where a "
                f"saved file holds {expected}"
            )
        json_member, _ = kinds[kind]
        members = {}
        for info in infos:
            name = "json_bytes" if info.filename == json_member else "weights_bytes"
            _check_member(info, name, limits)
        for info in infos:
            name = "json_bytes" if info.filename == json_member else "weights_bytes"
            members[info.filename] = _read_member(archive, info, getattr(limits, name), name)
        return kind, members


# ---------------------------------------------------------------- JSON

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENING = np.zeros(256, np.int8)
_OPENING[list(b"[]{}")] = (1, -1, 1, -1)


def json_depth(data: bytes) -> int:
    """How deep the arrays and objects of the JSON text ``data`` nest, counted on its bytes
    (escapes dropped, then strings, then all but brackets), a megabyte at a time."""
    brackets = _STRING.sub(b"", _ESCAPE.sub(b"", data)).translate(None, _NOT_BRACKET)
    deepest = level = 0
    for start in range(0, len(brackets), _PIECE):
        steps = _OPENING[
            np.frombuffer(brackets, np.uint8, min(_PIECE, len(brackets) - start), start)
        ]
        levels = level + np.cumsum(steps, dtype=np.int64)
        deepest, level = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def parse_json(data: bytes, member: str, limits: FileLimits) -> dict:
    """The JSON object ``data``, nested at most ``limits.depth`` deep."""
    depth = json_depth(data)
    if depth > limits.depth:
        raise Refused(
            f"its {member} nests {depth} deep, deeper than the {limits.depth} that load reads "
            "(FileLimits.depth)"
        )
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError, a 5000-digit number
        raise Refused(f"its {member} is not JSON ({err})") from None
    if not isinstance(value, dict):
        raise Refused(f"its {member} is a JSON {type(value).__name__}, not an object")
    return value


# ---------------------------------------------------------------- weights.pt

_END = struct.Struct(zipfile.structEndArchive)
_END64 = struct.Struct(zipfile.structEndArchive64)
_LOCATOR = struct.Struct(zipfile.structEndArchive64Locator)
_LOCAL = struct.Struct(zipfile.structFileHeader)
_DESCRIPTOR = b"PK\x07\x08"


def _table_start(data: bytes, entries: int) -> int | None:
    """Where the table of contents of ``entries`` entries starts, as the end records declare
    it: the end record last, without a comment, after torch's zip64 end record and locator if
    present, all agreeing, and the table right before them. None if the end is not so."""
    end = len(data) - _END.size
    if end < 0 or data[end : end + 4] != zipfile.stringEndArchive:
        return None
    *_, n_entries, size, start, comment = _END.unpack_from(data, end)
    table_end = end
    record = end - _LOCATOR.size - _END64.size
    if record >= 0 and data[record : record + 4] == zipfile.stringEndArchive64:
        locator = _LOCATOR.unpack_from(data, end - _LOCATOR.size)
        fields = _END64.unpack_from(data, record)
        if locator[0] != zipfile.stringEndArchive64Locator or locator[2] != record:
            return None
        if fields[1] != _END64.size - 12 or fields[-3:] != (n_entries, size, start):
            return None
        table_end = record
    if comment or n_entries != entries or start + size != table_end:
        return None
    return start


def _descriptor(data: bytes, position: int, info: zipfile.ZipInfo) -> int | None:
    """The size of the data descriptor at ``position`` that repeats ``info``'s CRC and sizes
    (with or without its signature, 32- or 64-bit sizes), or None."""
    start = position + 4 if data[position : position + 4] == _DESCRIPTOR else position
    if data[start : start + 4] != struct.pack("<L", info.CRC):
        return None
    for sizes in (struct.Struct("<LL"), struct.Struct("<QQ")):
        if sizes.unpack_from(data, start + 4) == (info.compress_size, info.file_size):
            return start - position + 4 + sizes.size
    return None


def _tiles(data: bytes, infos: list[zipfile.ZipInfo], table_start: int) -> bool:
    """Whether the stored records (each with its data descriptor, as torch writes them), the
    table of contents and its end records cover ``data`` exactly: no byte left over in which a
    reader could find another archive."""
    if _table_start(data, len(infos)) != table_start:
        return False
    position = 0
    for info in sorted(infos, key=lambda info: info.header_offset):
        if info.header_offset != position or position + _LOCAL.size > table_start:
            return False
        header = _LOCAL.unpack_from(data, position)
        flags, method, name_size, extra_size = (header[i] for i in (3, 4, 10, 11))
        if header[0] != zipfile.stringFileHeader or flags & 0x1 or method != zipfile.ZIP_STORED:
            return False
        if info.file_size != info.compress_size:
            return False
        position += _LOCAL.size + name_size + extra_size + info.compress_size
        if flags & 0x8:
            descriptor = _descriptor(data, position, info)
            if descriptor is None:
                return False
            position += descriptor
    return position == table_start


def _check_torch_archive(data: bytes) -> None:
    try:
        with zipfile.ZipFile(_BoundedReads(io.BytesIO(data))) as archive:
            infos, table_start = archive.infolist(), archive.start_dir
    except (zipfile.BadZipFile, EOFError, struct.error) as err:
        raise Refused(f"its weights.pt is not a file of torch.save ({err})") from None
    names = [info.filename for info in infos]
    if len(set(names)) != len(names) or not _tiles(data, infos, table_start):
        raise Refused(
            "its weights.pt is not laid out as torch.save writes it (stored records, one after "
            "the other, then the table of contents)"
        )


def _walk(saved, limits: FileLimits) -> None:
    """Count the values of ``saved`` as a tree, at most ``limits.weights_values``, refusing a
    structure deeper than ``limits.depth``; stops at the first limit passed."""
    stack, count = [(saved, 1)], 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > limits.weights_values:
            raise Refused(
                f"its weights.pt holds more than the {limits.weights_values} values that load "
                "reads (FileLimits.weights_values)"
            )
        if depth > limits.depth:
            raise Refused(
                f"its weights.pt nests deeper than the {limits.depth} that load reads "
                "(FileLimits.depth)"
            )
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend((item, depth + 1) for item in value)


def read_weights(data: bytes, device: torch.device, limits: FileLimits) -> dict:
    """``{"tensors": {name: tensor}, "states": {name: state}}`` of ``weights.pt`` on ``device``."""
    _check_torch_archive(data)
    try:
        saved = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    except pickle.UnpicklingError as err:
        raise Refused(
            f"its weights hold more than tensors, and load() unpickles nothing else "
            f"({str(err).splitlines()[0]})"
        ) from None
    except (RuntimeError, EOFError, KeyError, ValueError, TypeError, struct.error) as err:
        raise Refused(f"its weights.pt is not a file torch can read ({err})") from None
    _walk(saved, limits)
    if not (
        isinstance(saved, dict)
        and set(saved) == {"tensors", "states"}
        and isinstance(saved["tensors"], dict)
        and all(isinstance(v, torch.Tensor) for v in saved["tensors"].values())
        and isinstance(saved["states"], dict)
        and all(isinstance(v, dict) for v in saved["states"].values())
    ):
        raise Refused(
            "its weights.pt is not a dict of 'tensors' (name: tensor) and 'states' (name: state "
            "dict)"
        )
    return saved
