"""The MAT 5 reader of the SVHN loader: scipy's files read exactly, hostile bytes a ValueError.

scipy's ``loadmat`` dies with a segmentation fault on a crafted file, so the reader is ours
(``ebmclassifier.datasets._matfile``). It is checked against ``scipy.io.savemat``'s files of
every numeric class, against files written here byte by byte (big-endian, MATLAB's narrowed
storage), and fuzzed: every byte of the header and the tags changed, the file cut at every one
of them and extended, always giving the arrays or a ``ValueError`` naming the file. Where
scipy's own reader is the reference, it runs in a separate process, so that its crash fails a
test instead of killing pytest.
"""

import concurrent.futures
import io
import multiprocessing
import struct
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.io import savemat

from ebmclassifier.datasets import load_svhn
from ebmclassifier.datasets._matfile import read_mat

CLASSES = ["float64", "float32", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
           "uint64", "bool"]  # fmt: skip
SHAPES = [(3, 4), (2, 3, 4), (32, 32, 3, 5), (0, 3), (1, 1), (5,)]


def _savemat_bytes(arrays: dict, compress: bool = False) -> bytes:
    file = io.BytesIO()
    savemat(file, arrays, do_compression=compress)
    return file.getvalue()


def _read(raw: bytes, tmp_path: Path, names=("X", "y")) -> dict:
    file = io.BytesIO(raw)
    file.name = str(tmp_path / "file.mat")  # as an open file names itself
    return read_mat(file, names)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("dtype", CLASSES)
def test_every_numeric_class_of_savemat_reads_back_exactly(tmp_path, dtype, compress):
    rng = np.random.default_rng(0)
    arrays = {}
    for i, shape in enumerate(SHAPES):
        values = rng.integers(0, 100, size=shape) if dtype != "bool" else rng.random(shape) > 0.5
        arrays[f"v{i}"] = values.astype(dtype)
    read = _read(_savemat_bytes({**arrays, "text": "skipped"}, compress), tmp_path, arrays)
    for name, values in arrays.items():
        expected = values.reshape(1, -1) if values.ndim == 1 else values  # savemat's row vector
        assert read[name].dtype == expected.dtype, name
        np.testing.assert_array_equal(read[name], expected, err_msg=name)
    assert set(read) == set(arrays)


def _element(kind: int, data: bytes, order: str) -> bytes:
    return struct.pack(order + "II", kind, len(data)) + data + bytes(-len(data) % 8)


def _matrix(name: str, values: np.ndarray, mx_class: int, mi_type: int, order: str, flags=0):
    body = _element(6, struct.pack(order + "II", mx_class | flags, 0), order)
    body += _element(5, struct.pack(order + f"{values.ndim}i", *values.shape), order)
    body += _element(1, name.encode(), order)  # a full tag, not savemat's small element
    body += _element(mi_type, values.astype(order + values.dtype.str[1:]).tobytes("F"), order)
    return _element(14, body, order)


def _header(order: str) -> bytes:
    mark = b"IM" if order == "<" else b"MI"
    return (
        b"MATLAB 5.0 MAT-file, written by hand".ljust(116)
        + bytes(8)
        + (struct.pack(order + "H", 0x0100) + mark)
    )


@pytest.mark.parametrize("order", ["<", ">"])
def test_files_written_by_hand_big_endian_and_narrowed_storage(tmp_path, order):
    # MATLAB stores a double array of small integers as miUINT8; a logical array as uint8
    X = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    y = np.array([[1.0], [2.0], [10.0]])
    mask = np.array([[1, 0, 1]], dtype=np.uint8)
    raw = (
        _header(order)
        + _matrix("X", X, 9, 2, order)
        + _matrix("y", y.astype(np.uint8), 6, 2, order)
    )
    raw += _matrix("mask", mask, 9, 2, order, flags=0x0200)
    compressed = zlib.compress(_matrix("z", np.arange(6.0).reshape(2, 3), 6, 9, order))
    raw += struct.pack(order + "II", 15, len(compressed)) + compressed
    read = _read(raw, tmp_path, ("X", "y", "mask", "z"))
    np.testing.assert_array_equal(read["X"], X)
    assert read["y"].dtype == np.float64 and read["y"].tolist() == y.tolist()
    assert read["mask"].dtype == bool and read["mask"].tolist() == [[True, False, True]]
    np.testing.assert_array_equal(read["z"], np.arange(6.0).reshape(2, 3))


def _set(raw: bytes, position: int, value: int) -> bytes:
    return raw[:position] + bytes([value]) + raw[position + 1 :]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda raw: raw[:100], "fewer than the 128"),
        (lambda raw: raw[:124] + b"\x00\x02IM" + raw[128:], "version 0x0200.*-v7.3"),
        (lambda raw: raw[:126] + b"XX" + raw[128:], "byte-order mark"),
        (lambda raw: raw[:-3], "claims .* bytes, but only"),
        (lambda raw: raw + b"\x0e\x00\x00", "tag at byte .* runs past the end"),
        (lambda raw: raw[:145] + b"\xbd" + raw[146:], "'X' is complex"),  # scipy: signal 11
        (lambda raw: raw[:144] + b"\x05" + raw[145:], "'X' is a sparse array"),
        (
            lambda raw: _set(raw, raw.index(b"\x01\x00\x01\x00y") - 24, 9),
            "'y' of type uint8 is stored as float64",
        ),
    ],
    ids=["short", "v7.3", "byte-order", "cut", "extended", "complex", "sparse", "narrowing"],
)
def test_what_is_wrong_is_said_naming_the_file(tmp_path, change, message):
    raw = _savemat_bytes({"X": np.zeros((32, 32, 3, 5), np.uint8), "y": np.ones((5, 1))})
    with pytest.raises(ValueError, match=f"file.mat' is not a readable MATLAB file.*{message}"):
        _read(change(raw), tmp_path)


def test_a_compressed_bomb_is_refused_before_it_is_inflated(tmp_path):
    body = _matrix("X", np.zeros((1000, 1000), np.uint8), 9, 2, "<")
    bomb = zlib.compress(body, 9)
    raw = _header("<") + struct.pack("<II", 15, len(bomb)) + bomb
    assert len(read_mat(_write(tmp_path, raw), ["X"])["X"]) == 1000
    with pytest.raises(ValueError, match=r"claims a matrix of 1000\d+ bytes, more than 100000"):
        read_mat(_write(tmp_path, raw), ["X"], max_bytes=100_000)
    forged = bytearray(raw)  # a tag claiming more than deflate can expand its bytes to
    inner = zlib.decompress(bomb)
    forged[136:] = zlib.compress(inner[:4] + struct.pack("<I", 10**9) + inner[8:], 9)
    forged[132:136] = struct.pack("<I", len(forged) - 136)
    with pytest.raises(ValueError, match="claims a matrix of 1000000000 bytes, more than"):
        read_mat(_write(tmp_path, bytes(forged)), ["X"])


def _write(tmp_path: Path, raw: bytes) -> Path:
    path = tmp_path / "file.mat"
    path.write_bytes(raw)
    return path


# ---------------------------------------------------------------- fuzzing every structural byte


def _svhn_raw(compress: bool, fill: int = 0) -> bytes:
    X = np.full((32, 32, 3, 5), fill, np.uint8)
    return _savemat_bytes({"X": X, "y": np.array([[1], [2], [10], [3], [4]])}, compress)


def _structure(compress: bool) -> list[int]:
    """Every byte but X's pixel values: where two files with other pixels agree."""
    zeros, full = np.frombuffer(_svhn_raw(compress), np.uint8), _svhn_raw(compress, 255)
    if compress:
        return list(range(len(zeros)))  # every byte of a zlib stream is structure
    return np.flatnonzero(zeros == np.frombuffer(full, np.uint8)).tolist()


def _arrays_or_value_error(raw: bytes, folder: Path) -> str:
    """Read ``raw``: "arrays" or "ValueError" (naming the file); anything else fails."""
    try:
        arrays = _read(raw, folder)
    except ValueError as err:
        assert "file.mat" in str(err), err
        return "ValueError"
    assert all(isinstance(v, np.ndarray) and v.ndim >= 2 for v in arrays.values())
    return "arrays"


@pytest.mark.parametrize("compress", [False, True])
def test_every_header_and_tag_byte_changed_cut_or_extended(tmp_path, compress):
    raw = _svhn_raw(compress)
    assert _arrays_or_value_error(raw, tmp_path) == "arrays"
    outcomes = {"arrays": 0, "ValueError": 0}
    for position in _structure(compress):
        for value in {raw[position] ^ 0xFF, raw[position] ^ 0x01, 0x00, 0xBD, 0x7F}:
            changed = raw[:position] + bytes([value]) + raw[position + 1 :]
            outcomes[_arrays_or_value_error(changed, tmp_path)] += 1
        outcomes[_arrays_or_value_error(raw[:position], tmp_path)] += 1
        inserted = raw[:position] + b"\x0e\x00\x00\x00\xff\xff\xff\x7f" + raw[position:]
        outcomes[_arrays_or_value_error(inserted, tmp_path)] += 1
    for tail in (b"\x00", bytes(8), b"\x0f\x00\x00\x00\x04\x00\x00\x00abcd", raw[128:]):
        outcomes[_arrays_or_value_error(raw + tail, tmp_path)] += 1
    assert outcomes["ValueError"] > 0 and outcomes["arrays"] > 0, outcomes


# ---------------------------------------------------------------- scipy as the reference


class _Scipy:
    """scipy's reader in a process of its own, restarted after it crashes."""

    def __init__(self):
        self.pool, self.crashes = None, 0

    def read(self, raw: bytes):
        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=context)
        try:  # the worker imports scipy.io alone, not this module
            mat = self.pool.submit(scipy.io.loadmat, io.BytesIO(raw)).result(timeout=600)
        except concurrent.futures.process.BrokenProcessPool:
            self.crashes += 1
            self.pool.shutdown(wait=False)
            self.pool = None
            return "crashed"
        except Exception as err:  # scipy's own error for a bad file
            return type(err).__name__
        return {k: mat[k] for k in ("X", "y") if k in mat}


@pytest.fixture(scope="module")
def scipy_reader():
    reader = _Scipy()
    yield reader
    if reader.pool is not None:
        reader.pool.shutdown()
    print(f"\nscipy's loadmat crashed on {reader.crashes} of the fuzzed files")


@pytest.mark.slow  # scipy reads in a process of its own
def test_scipy_dies_on_the_crafted_file_and_the_reader_says_why(scipy_reader, tmp_path):
    # the reason the reader is ours: one byte changed makes scipy's loadmat die (signal 11 in
    # scipy 1.17); the intact file shows that the worker itself reads files
    raw = bytearray(_savemat_bytes({"X": np.zeros((32, 32, 3, 5), np.uint8), "y": np.ones((5, 1))}))
    assert isinstance(scipy_reader.read(bytes(raw)), dict)
    raw[145] = 0xBD
    outcome = scipy_reader.read(bytes(raw))
    assert outcome == "crashed", (
        f"scipy {scipy.__version__} gave {outcome!r} on the crafted file instead of dying: the "
        "reason this module's docstring gives for a reader of our own no longer holds here"
    )
    with pytest.raises(ValueError, match="train_32x32.mat.*'X' is complex.*download it again"):
        (tmp_path / "train_32x32.mat").write_bytes(bytes(raw))
        load_svhn(tmp_path, subset="train")


STRUCTURE = {compress: _structure(compress) for compress in (False, True)}


@st.composite
def fuzzed_svhn(draw):
    """A savemat SVHN file with its structural bytes flipped, and cut or extended."""
    compress = draw(st.booleans())
    raw = bytearray(_svhn_raw(compress))
    for position in draw(st.lists(st.sampled_from(STRUCTURE[compress]), min_size=1, max_size=4)):
        raw[position] ^= draw(st.integers(1, 255))
    end = draw(st.one_of(st.none(), st.integers(0, len(raw))))
    tail = draw(st.binary(max_size=16))
    return bytes(raw[:end]) + tail


@pytest.mark.slow  # scipy reads in a process of its own
def test_fuzzed_files_give_scipys_arrays_or_a_value_error(scipy_reader, tmp_path):
    # counted: a family where our reader refused everything would prove nothing
    outcomes = Counter()

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(raw=fuzzed_svhn())
    def family(raw):
        try:
            ours = _read(raw, tmp_path)
        except ValueError as err:
            assert "file.mat" in str(err)
            outcomes["ours: ValueError"] += 1
            return
        assert set(ours) <= {"X", "y"}, set(ours)
        assert all(isinstance(v, np.ndarray) and v.ndim >= 2 for v in ours.values())
        reference = scipy_reader.read(raw)
        if not isinstance(reference, dict):  # scipy died or refused: ours are arrays above
            outcomes[f"ours: arrays, scipy: {reference}"] += 1
            return
        assert set(ours) == set(reference)  # both read it: the same arrays
        for name, values in ours.items():
            np.testing.assert_array_equal(values, reference[name])
        outcomes["both: the same arrays"] += 1

    family()
    assert sum(outcomes.values()) == 100, outcomes
    assert outcomes["ours: ValueError"] > 0 and outcomes["both: the same arrays"] > 0, outcomes
