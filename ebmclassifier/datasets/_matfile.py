"""A reader of MATLAB 5 files (``.mat``) for numeric arrays, in Python: no native parser to crash.

scipy's ``loadmat`` parses in compiled code, and a crafted file (one flags byte of a
``savemat`` file changed) kills the process with a segmentation fault that no Python code can
catch. The loaders need numeric arrays only (SVHN's ``X`` and ``y``), so this module reads the
Level 5 MAT-file format for them, checking every length against the bytes that hold it:

- the 128-byte header: the version (0x0100) and the byte order ("IM" little-, "MI" big-endian);
- data elements, each an 8-byte tag (type, length) or a 4-byte "small data element" tag;
- ``miMATRIX`` elements of a numeric class (double, single, (u)int8..64; the logical flag gives
  bool), real, of two or more dimensions, their data stored in the class's type or a smaller one
  that casts to it exactly (MATLAB stores small integers of a double array as ``miUINT8``);
- ``miCOMPRESSED`` elements (zlib, as MATLAB writes its -v7 files), decompressed no further than
  the matrix they announce, which may not exceed ``max_bytes`` nor the 1032:1 limit of deflate.

A variable the caller asks for that is anything else (complex, sparse, text, cell, struct,
object) is a ``ValueError`` naming the file and the variable; other variables are skipped
unread. The format: MathWorks, "MAT-File Format", Level 5 MAT-files (2021), chapter 1.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Collection
from math import prod

import numpy as np

__all__ = ["read_mat"]

HEADER = 128
MI_MATRIX, MI_COMPRESSED = 14, 15
#: miINT8 .. miUINT64: the numeric types of data elements.
MI_TYPES = {
    1: "i1",
    2: "u1",
    3: "i2",
    4: "u2",
    5: "i4",
    6: "u4",
    7: "f4",
    9: "f8",
    12: "i8",
    13: "u8",
}
#: mxDOUBLE_CLASS .. mxUINT64_CLASS: the numeric array classes.
MX_CLASSES = {
    6: "f8",
    7: "f4",
    8: "i1",
    9: "u1",
    10: "i2",
    11: "u2",
    12: "i4",
    13: "u4",
    14: "i8",
    15: "u8",
}
MX_NAMES = {
    1: "cell",
    2: "struct",
    3: "object",
    4: "char",
    5: "sparse",
    16: "function handle",
    17: "opaque",
}
COMPLEX, LOGICAL = 0x0800, 0x0200
DEFLATE_RATIO = 1032  # the most that deflate expands its input


class _Problem(Exception):
    """What is wrong with the file, turned into a ValueError naming it by :func:`read_mat`."""


class _Elements:
    """Data elements in ``buffer[start:end]``, in byte order ``order`` ("<" or ">")."""

    def __init__(self, buffer, start: int, end: int, order: str):
        self.buffer, self.position, self.end, self.order = buffer, start, end, order

    def _uint32(self, at: int) -> int:
        return int(np.frombuffer(self.buffer, self.order + "u4", 1, at)[0])

    def next(self) -> tuple[int, int, int]:
        """``(type, data start, data length)`` of the next element; moves past it."""
        at = self.position
        if at + 8 > self.end:
            raise _Problem(f"a data element's tag at byte {at} runs past the end ({self.end})")
        first = self._uint32(at)
        if first >> 16:  # small data element: the length in the upper half, data in 4 bytes
            kind, length, start, stop = first & 0xFFFF, first >> 16, at + 4, at + 8
            if length > 4:
                raise _Problem(f"a small data element at byte {at} claims {length} bytes (max 4)")
        else:
            kind, length, start = first, self._uint32(at + 4), at + 8
            stop = start + length + (-length % 8 if kind != MI_COMPRESSED else 0)
        if start + length > self.end:
            raise _Problem(
                f"a data element at byte {at} claims {length} bytes, but only "
                f"{self.end - start} remain"
            )
        self.position = min(stop, self.end)
        return kind, start, length

    def expect(self, kinds: Collection[int], what: str) -> tuple[int, int, int]:
        kind, start, length = self.next()
        if kind not in kinds:
            raise _Problem(f"{what} has data type {kind}, expected one of {sorted(kinds)}")
        return kind, start, length


def _header(buffer) -> str:
    """The byte order of a MAT 5 file, after checking its header."""
    if len(buffer) < HEADER:
        raise _Problem(f"it has {len(buffer)} bytes, fewer than the 128 of a MAT-file header")
    endian = bytes(buffer[126:128])
    if endian not in (b"IM", b"MI"):
        raise _Problem("its header lacks the MAT 5 byte-order mark (a MAT 4 file, or no MAT-file)")
    order = "<" if endian == b"IM" else ">"
    version = int(np.frombuffer(buffer, order + "u2", 1, 124)[0])
    if version != 0x0100:
        hint = " (an HDF5-based -v7.3 file; save it with -v7)" if version == 0x0200 else ""
        raise _Problem(f"its header gives version {version:#06x}, not 0x0100 of MAT 5{hint}")
    return order


def _name(elements: _Elements) -> tuple[int, tuple[int, ...], str]:
    """``(flags, dimensions, name)``: the first three subelements of a matrix."""
    _, start, length = elements.expect({6}, "the array flags")
    if length != 8:
        raise _Problem(f"the array flags hold {length} bytes, not 8")
    flags = elements._uint32(start)
    _, start, length = elements.expect({5}, "the dimensions")
    if length % 4 or length < 8:
        raise _Problem(f"the dimensions take {length} bytes: not two or more int32")
    dims = tuple(
        int(d) for d in np.frombuffer(elements.buffer, elements.order + "i4", length // 4, start)
    )
    _, start, length = elements.expect({1, 16}, "the array name")
    try:
        name = bytes(elements.buffer[start : start + length]).decode("ascii")
    except UnicodeDecodeError:
        raise _Problem("an array name is not ASCII") from None
    return flags, dims, name


def _numeric(elements: _Elements, flags: int, dims: tuple[int, ...], name: str) -> np.ndarray:
    """The values of a numeric matrix whose flags, dimensions and name were read."""
    mx_class = flags & 0xFF
    if mx_class not in MX_CLASSES:
        kind = MX_NAMES.get(mx_class, f"class {mx_class}")
        raise _Problem(f"the variable {name!r} is a {kind} array; only numeric arrays are read")
    if flags & COMPLEX:
        raise _Problem(f"the variable {name!r} is complex; only real arrays are read")
    if any(d < 0 for d in dims):
        raise _Problem(f"the variable {name!r} has negative dimensions {dims}")
    kind, start, length = elements.expect(MI_TYPES, f"the data of {name!r}")
    stored = np.dtype(elements.order + MI_TYPES[kind])
    target = np.dtype(MX_CLASSES[mx_class]).newbyteorder("=")
    if not np.can_cast(stored, target, "safe"):
        raise _Problem(f"the variable {name!r} of type {target} is stored as {stored}")
    count = prod(dims)
    if length != count * stored.itemsize:
        raise _Problem(
            f"the variable {name!r} of shape {dims} needs {count * stored.itemsize} bytes of "
            f"{stored}; its data element holds {length}"
        )
    values = np.frombuffer(elements.buffer, stored, count, start).reshape(dims, order="F")
    values = values.astype(target, copy=stored != target)
    return values.astype(bool) if flags & LOGICAL else values


def _matrix(buffer, start: int, end: int, order: str, names: Collection[str]):
    """``(name, array or None)`` of the matrix in ``buffer[start:end]``; None if not wanted."""
    elements = _Elements(buffer, start, end, order)
    flags, dims, name = _name(elements)
    if name not in names:
        return name, None
    return name, _numeric(elements, flags, dims, name)


def _decompressed(buffer, start: int, length: int, order: str, max_bytes: int) -> bytes:
    """The matrix element inside an ``miCOMPRESSED`` element, and no byte more."""
    stream = zlib.decompressobj()
    compressed = buffer[start : start + length]
    at = start - 8
    try:
        head = stream.decompress(compressed, 8)
        if len(head) < 8:
            raise _Problem(f"the compressed element at byte {at} holds no whole tag")
        kind, inner = (int(v) for v in np.frombuffer(head, order + "u4", 2))
        if kind != MI_MATRIX:
            raise _Problem(
                f"the compressed element at byte {at} holds data type {kind}, not a matrix"
            )
        limit = min(max_bytes, DEFLATE_RATIO * length)
        if inner > limit:
            raise _Problem(
                f"the compressed element at byte {at} claims a matrix of {inner} bytes, more "
                f"than {limit} (the limit, or {DEFLATE_RATIO} times its {length} bytes)"
            )
        body = stream.decompress(stream.unconsumed_tail, inner)
        ended = len(body) == inner and len(stream.decompress(stream.unconsumed_tail, 8)) < 8
    except zlib.error as err:
        raise _Problem(f"the compressed element at byte {at} is corrupt ({err})") from None
    if not (ended and stream.eof):  # at its end, zlib has checked the stream's checksum
        raise _Problem(
            f"the compressed element at byte {at} does not end with its matrix of {inner} bytes"
        )
    return head + body


def read_mat(path, names: Collection[str], max_bytes: int = 2**31) -> dict[str, np.ndarray]:
    """The numeric arrays ``names`` of a MAT 5 file, those it holds (a name may be missing).

    Parameters
    ----------
    path : str, path-like or binary file object
        A file object is read from its position to its end.
    names : collection of str
        The variables to read; the others are skipped.
    max_bytes : int, default=2**31
        The largest matrix element read (its data and tags), compressed or not.

    Returns
    -------
    dict of str to ndarray
        Arrays in MATLAB's shape (two or more dimensions), of the variable's class's dtype
        (bool for logical arrays), read-only where no conversion was needed.

    Raises
    ------
    ValueError
        Naming the file and what is wrong with it: any length, type or flag that does not
        fit the format or the bytes that hold it, or a requested variable that is not a real
        numeric array.
    """
    named = isinstance(path, str | os.PathLike)
    shown = repr(os.fspath(path) if named else getattr(path, "name", f"<{type(path).__name__}>"))
    try:
        if named:
            with open(path, "rb") as file:
                buffer = file.read()
        else:
            buffer = path.read()
        order = _header(buffer)
        arrays = {}
        top = _Elements(buffer, HEADER, len(buffer), order)
        while top.position < len(buffer):
            kind, start, length = top.expect({MI_MATRIX, MI_COMPRESSED}, "a variable")
            if kind == MI_COMPRESSED:
                inner = _decompressed(buffer, start, length, order, max_bytes)
                kind, start, length = _Elements(inner, 0, len(inner), order).next()
                buffer_of = inner
            else:
                if length > max_bytes:
                    raise _Problem(f"a variable claims {length} bytes, more than {max_bytes}")
                buffer_of = buffer
            name, values = _matrix(buffer_of, start, start + length, order, names)
            if values is not None:
                arrays[name] = values
        return arrays
    except _Problem as problem:
        raise ValueError(f"{shown} is not a readable MATLAB file (MAT 5): {problem}.") from None
    except MemoryError:
        raise ValueError(f"{shown}: its arrays do not fit in memory.") from None
