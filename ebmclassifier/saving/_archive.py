"""Reading a saved file as hostile input: every size bounded before it is read or allocated.

A file that :func:`ebmclassifier.load` reads is a zip archive of two members, a JSON document
and either ``weights.pt`` (torch's own zip of tensors) or an inner ``.ebm`` file. Anyone can
write one, so before anything is decompressed, parsed or allocated (the limits are those of
:class:`FileLimits`, each refusal a ``ValueError`` naming the file and the limit):

- the archive's table of contents is read only if it takes at most 1 MiB, and must list exactly
  the members of its format (:class:`Layout`), unencrypted, stored or deflated;
- a member's declared size is at most ``json_bytes`` (the JSON) or ``weights_bytes`` (the
  other members together: the weights, an inner file, a pipeline's parts), and at most
  ``compression_ratio`` times its compressed size; it is read 1 MiB at a time and reading stops
  at the limit whatever its header declared;
- the JSON is UTF-8 (Python's parser also reads UTF-16 and UTF-32, in which a byte of a
  character can pass for a bracket or a quote) nested at most ``depth`` deep, counted on its
  bytes before it is parsed (Python's parser would raise ``RecursionError``, and so would the
  decoding after it);
- ``weights.pt``'s records are stored, not compressed (``torch.save`` never compresses), and
  with the table of contents they tile the member byte for byte, so that torch's zip reader
  (miniz), which allocates a record's declared size, finds the records that were checked here
  and no others; torch reads them with ``weights_only=True`` (tensors and plain containers, no
  code), and the structure it returns is walked, at most ``depth`` deep and ``weights_values``
  values counted as a tree (a list the pickle shares a thousand times counts a thousand times),
  before anything uses it; each tensor is dense (its values take no more bytes than its storage
  holds: a tensor expanded from one value would be allocated whole by a copy or a cast) and
  all of them, each counted once, declare at most ``weights_bytes``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import re
import struct
import zipfile
from dataclasses import dataclass

import numpy as np
import torch

from .._utils.atomic import atomic_write
from .._utils.parameters import ParamChecker

__all__ = [
    "NOT_AN_ARCHIVE",
    "FileLimits",
    "Layout",
    "check_sizes",
    "checked_json",
    "json_depth",
    "opened",
    "parse_json",
    "read_file",
    "read_members",
    "read_weights",
    "shown",
    "state_bytes",
    "write_archive",
    "zip_infos",
]

#: A member is read this much at a time, and a single read of the archive's table of contents
#: (or of anything else) may not take more.
_PIECE = 1 << 20
_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
#: What zipfile raises on bytes that are no archive, or whose end records point outside it.
NOT_AN_ARCHIVE = (
    zipfile.BadZipFile,
    EOFError,
    struct.error,
    NotImplementedError,
    ValueError,
    OverflowError,
    OSError,
)


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
        The size of the JSON member (``metadata.json``, ``distributional.json``,
        ``composite.json``, a pipeline's skops ``schema.json``), declared and read.
    weights_bytes : int, default=2 GiB
        The size of ``weights.pt`` (or of the inner ``estimator.ebm`` of a
        ``DistributionalConstraint`` file, or of the other members of a pipeline's file
        together), declared and read; also the bytes its tensors declare, each counted once.
    compression_ratio : float, default=100
        A member's size over its compressed size (``save`` stores members uncompressed: 1).
    depth : int, default=32
        How deep the JSON and the structure of ``weights.pt`` nest (a saved file: under 10).
    skops_depth : int, default=200
        How deep the ``schema.json`` of the scikit-learn part of a pipeline's file nests
        (skops's own format, deeper than the metadata: a pipeline of a ``ColumnTransformer``
        nests 23 deep, and each composite around it adds 4 to 6); skops reads it recursively,
        and 400 levels are within Python's recursion limit.
    array_bytes : int, default=64 MiB
        The memory of one array of the metadata (``classes``, ``vocabulary_``, ...): its items
        times the item size of the dtype it declares (for a string dtype without a length,
        ``"<U"``, that of its longest item).
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
    skops_depth: int = 200
    array_bytes: int = 64 * 2**20
    weights_values: int = 1_000_000

    def __post_init__(self) -> None:
        check = ParamChecker.of(vars(self), "FileLimits")
        names = ("json_bytes", "weights_bytes", "depth", "skops_depth", "array_bytes")
        for name in (*names, "weights_values"):
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


def _check_member(info: zipfile.ZipInfo, name: str, limits: FileLimits, what: str) -> None:
    """The member ``info``'s header: unencrypted, stored or deflated, its declared size within
    ``limits.<name>`` and the compression ratio; ``what`` names its archive ("its")."""
    limit, member = getattr(limits, name), f"{what} member {info.filename!r}"
    if info.flag_bits & 0x1:
        raise Refused(f"{member} is encrypted")
    if info.compress_type not in _COMPRESSIONS:
        raise Refused(f"{member} is compressed with method {info.compress_type}")
    if info.file_size > limit:
        raise Refused(
            f"{member} declares {info.file_size} bytes, more than the {limit} that load reads "
            f"(FileLimits.{name})"
        )
    if info.file_size > limits.compression_ratio * max(info.compress_size, 1):
        raise Refused(
            f"{member} declares {info.file_size} bytes compressed into {info.compress_size}, a "
            f"ratio over the {limits.compression_ratio:g} that load accepts "
            "(FileLimits.compression_ratio)"
        )


def _read_member(archive: zipfile.ZipFile, info, limit: int, name: str) -> bytes:
    """The member, read a piece at a time and stopped at ``limit`` whatever its header says;
    it must hold the size its header declares."""
    pieces, size = [], 0
    try:
        opened_member = archive.open(info)
    except UnicodeDecodeError as err:  # its local header's name, marked UTF-8
        raise Refused(
            f"its member {info.filename!r} is named in bytes that are not UTF-8 ({err})"
        ) from None
    with opened_member as member:
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


@dataclass(frozen=True)
class Layout:
    """The members of one format's archive: its JSON member, the members it always holds
    besides, and a pattern of the further members it may hold (a pipeline's estimators)."""

    json: str
    required: tuple[str, ...]
    further: str | None = None

    def matches(self, names: list[str]) -> bool:
        """Whether ``names`` (each once) are exactly this layout's members."""
        fixed = {self.json, *self.required}
        rest = [name for name in names if name not in fixed]
        further = re.compile(self.further or "(?!)")
        return (
            len(set(names)) == len(names)
            and fixed <= set(names)
            and all(further.fullmatch(name) for name in rest)
        )


def zip_infos(file, what: str = "its") -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    """zipfile's reader of the binary ``file`` and its entries, its table of contents read
    within :data:`_PIECE` bytes; a name that is not UTF-8 where its entry says it is
    (zipfile's ``UnicodeDecodeError``), a :class:`Refused`."""
    try:
        archive = zipfile.ZipFile(_BoundedReads(file))
    except UnicodeDecodeError as err:
        raise Refused(
            f"{what} table of contents names a member in bytes that are not UTF-8 ({err})"
        ) from None
    return archive, archive.infolist()


def read_members(
    file, layouts: dict[str, Layout], limits: FileLimits
) -> tuple[str, dict[str, bytes]]:
    """``(kind, {name: bytes})`` of the archive ``file`` (an open binary file), which must hold
    exactly the members of one of ``layouts``; raises :class:`Refused` (or zipfile's errors
    for a file that is no zip archive). The JSON member is read within ``json_bytes``, the
    others within ``weights_bytes`` together."""
    archive, infos = zip_infos(file)
    with archive:
        found = [info.filename for info in infos]
        kind = next((k for k, layout in layouts.items() if layout.matches(found)), None)
        if kind is None:
            expected = " or ".join(
                str([layout.json, *layout.required, *([layout.further] if layout.further else [])])
                for layout in layouts.values()
            )
            raise Refused(
                "it is not a file written by ebmclassifier.saving.save or "
                f"DistributionalConstraint.save: it holds the members {sorted(found)[:10]}, "
                f"where a saved file holds {expected}"
            )
        json_member = layouts[kind].json
        check_sizes(infos, json_member, limits)
        members = {}
        for info in infos:
            name = "json_bytes" if info.filename == json_member else "weights_bytes"
            members[info.filename] = _read_member(archive, info, getattr(limits, name), name)
        return kind, members


def check_sizes(
    infos: list[zipfile.ZipInfo], json_member: str, limits: FileLimits, what: str = "its"
) -> None:
    """Each member's header (:func:`_check_member`): ``json_member`` within ``json_bytes``, the
    others within ``weights_bytes`` together; ``what`` names the archive ("its")."""
    for info in infos:
        name = "json_bytes" if info.filename == json_member else "weights_bytes"
        _check_member(info, name, limits, what)
    total = sum(info.file_size for info in infos if info.filename != json_member)
    if total > limits.weights_bytes:
        raise Refused(
            f"{what} members besides {json_member!r} declare {total} bytes together, more than "
            f"the {limits.weights_bytes} that load reads (FileLimits.weights_bytes)"
        )


def read_file(path, layouts: dict[str, Layout], limits: FileLimits) -> tuple[str, dict]:
    """:func:`read_members` of the file at ``path`` (or the binary, seekable file object); a
    file that is no zip archive, or whose end records point outside it (zipfile then seeks
    before its start: ``ValueError`` on a file object, ``OSError`` on a file), is a
    :class:`Refused` too. A path that cannot be opened raises ``open``'s error."""
    with opened(path) as file:
        try:
            return read_members(file, layouts, limits)
        except Refused:
            raise
        except NOT_AN_ARCHIVE as err:
            raise Refused(
                f"it is not a file written by ebmclassifier.saving.save or "
                f"DistributionalConstraint.save ({type(err).__name__}: {err})"
            ) from None


def write_archive(path, members: dict) -> None:
    """A zip archive of ``members`` (name -> str or bytes) at ``path``, whole or not at all.

    A path is replaced at once (:func:`~ebmclassifier._utils.atomic.atomic_write`): the old file
    stays until the new one is complete and synced. A file object receives the complete archive
    in one ``write`` call, or nothing when building it fails.
    """

    def fill(file) -> None:
        with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED) as archive:
            for name, data in members.items():
                archive.writestr(name, data)

    if isinstance(path, str | os.PathLike):
        with atomic_write(path) as file:
            fill(file)
        return
    buffer = io.BytesIO()
    fill(buffer)
    path.write(buffer.getvalue())


def shown(path) -> str:
    """``path`` for a message: the file's name, or what a file object is."""
    if isinstance(path, str | os.PathLike):
        return repr(os.fspath(path))
    return f"<{type(path).__name__} object>"


@contextlib.contextmanager
def opened(path):
    """A binary file of ``path``: opened here, or the file object given."""
    if isinstance(path, str | os.PathLike):
        with open(path, "rb") as file:
            yield file
    else:
        yield path


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


def checked_json(data: bytes, member: str, depth: int, limit: str) -> str:
    """The text of the JSON ``data`` if it is UTF-8 nested at most ``depth`` deep (the limit
    ``FileLimits.<limit>``), before anything parses it.

    UTF-8 first: Python's parser reads UTF-16 and UTF-32 too, in which a byte of a character
    can pass for a quote or a bracket to the count on bytes; in UTF-8 no byte of a character
    is one.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise Refused(
            f"its {member} is not UTF-8 text (byte {err.start}: {err.reason}), as save writes it"
        ) from None
    found = json_depth(data)
    if found > depth:
        raise Refused(
            f"its {member} nests {found} deep, deeper than the {depth} that load reads "
            f"(FileLimits.{limit})"
        )
    return text


def parse_json(data: bytes, member: str, limits: FileLimits) -> dict:
    """The JSON object ``data``: UTF-8, nested at most ``limits.depth`` deep."""
    text = checked_json(data, member, limits.depth, "depth")
    try:
        value = json.loads(text)
    except ValueError as err:  # JSONDecodeError, a 5000-digit number, a byte-order mark
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
        name = data[position + _LOCAL.size : position + _LOCAL.size + name_size]
        if name != info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437"):
            return False  # the record is not the one the table of contents names
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
        archive, infos = zip_infos(io.BytesIO(data), "its weights.pt's")
        with archive:
            table_start = archive.start_dir
    except Refused:
        raise
    except NOT_AN_ARCHIVE as err:
        raise Refused(f"its weights.pt is not a file of torch.save ({err})") from None
    names = [info.filename for info in infos]
    if len(set(names)) != len(names) or not _tiles(data, infos, table_start):
        raise Refused(
            "its weights.pt is not laid out as torch.save writes it (stored records, one after "
            "the other, then the table of contents)"
        )


def _walk(saved, limits: FileLimits) -> list[torch.Tensor]:
    """The tensors of ``saved``, its values counted as a tree, at most ``limits.weights_values``,
    refusing a structure deeper than ``limits.depth``; stops at the first limit passed."""
    stack, count, tensors = [(saved, 1)], 0, []
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
        if isinstance(value, torch.Tensor):
            tensors.append(value)
        elif isinstance(value, dict):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend((item, depth + 1) for item in value)
    return tensors


def _declared(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _check_tensors(tensors: list[torch.Tensor], limits: FileLimits) -> None:
    """Each tensor dense (its values take no more bytes than its storage holds), and all of
    them, each counted once, at most ``limits.weights_bytes``: what copies and casts of them
    allocate (an optimizer's ``load_state_dict`` casts its state to the weights' dtype)."""
    distinct = {id(tensor): tensor for tensor in tensors}.values()
    for tensor in distinct:
        held = tensor.untyped_storage().nbytes()
        if _declared(tensor) > held:
            raise Refused(
                f"its weights.pt holds a tensor of {tensor.numel()} values of {tensor.dtype} "
                f"({_declared(tensor)} bytes) over {held} bytes of storage: a view that a copy "
                "or a cast would allocate whole"
            )
    total = sum(_declared(tensor) for tensor in distinct)
    if total > limits.weights_bytes:
        raise Refused(
            f"its weights.pt declares tensors of more than the {limits.weights_bytes} bytes "
            f"that load reads ({total} bytes, each tensor counted once; FileLimits.weights_bytes)"
        )


def state_bytes(state) -> int:
    """The bytes the tensors of ``state`` (a part of what :func:`read_weights` returned, so
    walked within the limits already) declare, each counted once."""
    stack, distinct = [state], {}
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            distinct[id(value)] = value
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend(value)
    return sum(_declared(tensor) for tensor in distinct.values())


#: What ``torch.load`` raises on a pickle or records it cannot read (a storage whose type is
#: not one, a key it does not find, a cut pickle).
_NOT_TORCH = (
    RuntimeError,
    EOFError,
    KeyError,
    ValueError,
    TypeError,
    AttributeError,
    IndexError,
    OverflowError,
    struct.error,
)


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
    except _NOT_TORCH as err:
        raise Refused(
            f"its weights.pt is not a file torch can read ({type(err).__name__}: {err})"
        ) from None
    _check_tensors(_walk(saved, limits), limits)
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
