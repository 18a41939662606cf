"""Loaders on files the tests write in the standard formats; the offline benchmarks."""

import pickle
import tracemalloc
import zipfile

import numpy as np
import pytest
from scipy.io import savemat

from ebmclassifier.datasets import (
    load_array_file,
    load_cifar10,
    load_cifar100,
    load_digits_ood,
    load_mnist1d,
    load_named_dataset,
    load_svhn,
    make_ood_suite,
)

# ----------------------------------------------------------------------------- digits


@pytest.mark.parametrize("shape, sample_shape", [("flat", (64,)), ("image", (1, 8, 8))])
def test_load_digits_ood(shape, sample_shape):
    data = load_digits_ood(shape=shape, random_state=3)
    assert data.X_train.shape == (1257,) + sample_shape
    assert data.X_test.shape == (540,) + sample_shape
    assert data.X_train.dtype == np.float32 and data.y_train.dtype == np.int64
    assert data.X_train.min() == 0.0 and data.X_train.max() == 1.0
    # stratified: every class in both splits in about the same proportion
    assert np.all(np.abs(np.bincount(data.y_test) / 540 - np.bincount(data.y_train) / 1257) < 0.01)
    assert set(data.ood) == {"uniform", "inverted", "permuted"}
    for X_ood in data.ood.values():
        assert X_ood.shape == data.X_test.shape and X_ood.dtype == np.float32
    np.testing.assert_array_equal(data.ood["inverted"], 1.0 - data.X_test)
    flat_test = data.X_test.reshape(540, -1)
    flat_perm = data.ood["permuted"].reshape(540, -1)
    np.testing.assert_array_equal(np.sort(flat_perm, axis=1), np.sort(flat_test, axis=1))
    assert not np.array_equal(flat_perm, flat_test)
    assert 0.0 <= data.ood["uniform"].min() and data.ood["uniform"].max() <= 1.0
    assert abs(data.ood["uniform"].mean() - 0.5) < 0.01


def test_load_digits_ood_is_reproducible_and_seeded():
    a, b, c = load_digits_ood(random_state=1), load_digits_ood(random_state=1), load_digits_ood()
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.ood["uniform"], b.ood["uniform"])
    assert not np.array_equal(a.X_train, c.X_train)


def test_load_digits_ood_bad_shape():
    with pytest.raises(ValueError, match="shape must be one of"):
        load_digits_ood(shape="square")


def test_make_ood_suite_keeps_channels_together():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(4, 3, 5, 5)).astype(np.float32)
    X[:, 1] = X[:, 0] + 10  # channel 1 tied to channel 0 at each position
    permuted = make_ood_suite(X, 0.0, 11.0, kinds=["permuted"], random_state=0)["permuted"]
    np.testing.assert_allclose(permuted[:, 1], permuted[:, 0] + 10)
    with pytest.raises(ValueError, match="Unknown OOD kinds"):
        make_ood_suite(X, 0.0, 1.0, kinds=["rotated"])
    with pytest.raises(ValueError, match="low < high"):
        make_ood_suite(X, 1.0, 1.0)


# ----------------------------------------------------------------------------- MNIST-1D


@pytest.fixture(scope="module")
def mnist1d_data():
    state = np.random.get_state()  # noqa: NPY002 (mnist1d uses the global generator)
    data = load_mnist1d()
    after = np.random.get_state()  # noqa: NPY002 (mnist1d uses the global generator)
    return data, state, after


def test_load_mnist1d_default_is_the_benchmark_and_leaves_global_rng(mnist1d_data):
    data, before, after = mnist1d_data
    assert data.X_train.shape == (4000, 1, 40) and data.X_test.shape == (1000, 1, 40)
    assert data.X_train.dtype == np.float32 and data.y_train.dtype == np.int64
    assert set(np.unique(data.y_test)) == set(range(10))
    assert before[0] == after[0] and np.array_equal(before[1], after[1])
    assert data.input_range == (data.X_train.min(), data.X_train.max())
    assert data.ood["uniform"].shape == (1000, 1, 40)


def test_load_mnist1d_matches_the_package():
    from mnist1d.data import get_dataset_args, make_dataset

    data = load_mnist1d(num_samples=600, seed=7, ood_kinds=())
    # the reference: the package's own generator (no download), same arguments
    args = get_dataset_args()
    args.num_samples, args.seed = 600, 7
    state = np.random.get_state()  # noqa: NPY002 (mnist1d uses the global generator)
    raw = make_dataset(args)
    np.random.set_state(state)  # noqa: NPY002
    np.testing.assert_allclose(data.X_test[:, 0, :], raw["x_test"], rtol=1e-6)
    np.testing.assert_array_equal(data.y_train, raw["y"])


def test_load_mnist1d_flat():
    data = load_mnist1d(shape="flat", num_samples=200, seed=0, ood_kinds=())
    assert data.X_train.shape == (160, 40) and data.X_test.shape == (40, 40)
    assert data.ood == {}


# ----------------------------------------------------------------------------- CIFAR / SVHN


def _cifar_rows(rng, n):
    return rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)


def _write_pickle(path, obj):
    # protocol 2 and bytes keys, as the Python-2 pickles of the official archives
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


@pytest.fixture
def cifar10_dir(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": _cifar_rows(rng, 3), b"labels": list(rng.integers(0, 10, size=3))}
        _write_pickle(folder / name, batch)
        batches[name] = batch
    names = [f"class{k}".encode() for k in range(10)]
    _write_pickle(folder / "batches.meta", {b"label_names": names})
    return tmp_path, batches


def test_load_cifar10(cifar10_dir):
    root, batches = cifar10_dir
    for where in (root, root / "cifar-10-batches-py"):
        data = load_cifar10(where)
        assert data.X_train.shape == (15, 3, 32, 32) and data.X_test.shape == (3, 3, 32, 32)
        assert data.X_train.dtype == np.float32 and data.y_train.dtype == np.int64
    rows = batches["data_batch_2"][b"data"]
    # row layout: 1,024 red values (row-major 32x32), then green, then blue
    image = data.X_train[3]
    assert image[0, 0, 1] == pytest.approx(rows[0, 1] / 255)
    assert image[1, 2, 0] == pytest.approx(rows[0, 1024 + 64] / 255)
    assert image[2, 31, 31] == pytest.approx(rows[0, 3071] / 255)
    np.testing.assert_array_equal(data.y_test, batches["test_batch"][b"labels"])
    assert data.target_names[3] == "class3"
    assert 0.0 <= data.X_train.min() and data.X_train.max() <= 1.0


def test_load_cifar10_missing_files(cifar10_dir):
    root, _ = cifar10_dir
    (root / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3.*cifar-10-batches-py"):
        load_cifar10(root)


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_cifar_batches_load_under_every_pickle_protocol(cifar10_dir, protocol):
    # protocol 4 frames the pickle, protocol 5 writes numpy's bytes as one bytearray8
    root, batches = cifar10_dir
    folder = root / "cifar-10-batches-py"
    for name, batch in batches.items():
        (folder / name).write_bytes(pickle.dumps(batch, protocol=protocol))
    data = load_cifar10(root)
    np.testing.assert_array_equal(data.y_test, batches["test_batch"][b"labels"])
    np.testing.assert_allclose(data.X_test.reshape(3, -1), batches["test_batch"][b"data"] / 255)


def _peak_bytes(call):
    """The most memory Python and numpy held during ``call()`` (tracemalloc)."""
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def _refused_unallocated(folder, batch: bytes):
    """``load_cifar10`` refuses a test batch with a ValueError naming it, and holds at most a
    megabyte meanwhile (the good batches are 12 KiB)."""
    (folder / "test_batch").write_bytes(batch)

    def load():
        with pytest.raises(ValueError, match="test_batch"):
            load_cifar10(folder)

    assert _peak_bytes(load) < 2**20


# a pickle's counted values: opcode, the width of its count, the protocol that has it
COUNTED = {
    "FRAME": (b"\x95", 8, 4),
    "BINBYTES8": (b"\x8e", 8, 4),
    "BINUNICODE8": (b"\x8d", 8, 4),
    "BYTEARRAY8": (b"\x96", 8, 5),
    "BINBYTES": (b"B", 4, 3),
    "BINUNICODE": (b"X", 4, 2),
    "BINSTRING": (b"T", 4, 2),
    "LONG4": (b"\x8b", 4, 2),
}


@pytest.mark.parametrize("opcode", sorted(COUNTED))
@pytest.mark.parametrize("claimed", ["a gigabyte", "2**31 - 1", "the most its count holds"])
def test_a_cifar_batch_claiming_more_bytes_than_it_holds_is_refused_unallocated(
    cifar10_dir, opcode, claimed
):
    # Python's unpickler allocates a bytes8 or a bytearray8 before reading it, and its file
    # reader allocates any counted value: a 20-byte file claiming 2**62 bytes raised
    # MemoryError, one claiming a gigabyte got it (overcommitted)
    code, width, protocol = COUNTED[opcode]
    size = {"a gigabyte": 2**30, "2**31 - 1": 2**31 - 1}.get(claimed, 2 ** (8 * width) - 1)
    count = size.to_bytes(width, "little")
    batch = bytes([0x80, protocol]) + code + count + b"\x00" * 16
    _refused_unallocated(cifar10_dir[0] / "cifar-10-batches-py", batch)


class _Reduced:
    """Pickles as ``function(*args)``: a crafted batch."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


@pytest.mark.parametrize("rows", [10**5, 10**8])
@pytest.mark.parametrize("how", ["reconstruct", "ndarray"])
def test_a_cifar_batch_declaring_an_array_larger_than_its_file_is_refused_unallocated(
    cifar10_dir, rows, how
):
    # numpy's array pickle builds an empty array of a declared shape, then fills it: a 300-byte
    # batch declaring 10**5 images got 307 MB of them (zeros: valid CIFAR), 10**8 MemoryError
    from numpy._core.multiarray import _reconstruct

    def array(shape, dtype):
        if how == "reconstruct":
            return _Reduced(_reconstruct, np.ndarray, shape, np.dtype(dtype).char.encode())
        return _Reduced(np.ndarray, shape, np.dtype(dtype))

    batch = {b"data": array((rows, 3072), np.uint8), b"labels": array((rows,), np.int64)}
    folder = cifar10_dir[0] / "cifar-10-batches-py"
    _refused_unallocated(folder, pickle.dumps(batch, protocol=2))


@pytest.mark.parametrize(
    "label_mode, key", [("fine", b"fine_labels"), ("coarse", b"coarse_labels")]
)
def test_load_cifar100(tmp_path, label_mode, key):
    rng = np.random.default_rng(1)
    written = {}
    for name, n in [("train", 5), ("test", 2)]:
        written[name] = {
            b"data": _cifar_rows(rng, n),
            b"fine_labels": list(rng.integers(0, 100, size=n)),
            b"coarse_labels": list(rng.integers(0, 20, size=n)),
        }
        _write_pickle(tmp_path / name, written[name])
    data = load_cifar100(tmp_path, label_mode=label_mode)
    assert data.X_train.shape == (5, 3, 32, 32) and data.X_test.shape == (2, 3, 32, 32)
    np.testing.assert_array_equal(data.y_train, written["train"][key])
    np.testing.assert_allclose(data.X_test.reshape(2, -1), written["test"][b"data"] / 255)
    assert data.target_names is None
    with pytest.raises(ValueError, match="label_mode"):
        load_cifar100(tmp_path, label_mode="medium")
    with pytest.raises(FileNotFoundError, match="train, test"):
        load_cifar100(tmp_path / "elsewhere")


def test_load_svhn(tmp_path):
    rng = np.random.default_rng(2)
    written = {}
    for name, n in [("train_32x32.mat", 4), ("test_32x32.mat", 3), ("extra_32x32.mat", 2)]:
        X = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
        y = rng.integers(1, 11, size=(n, 1)).astype(np.uint8)
        y[0, 0] = 10  # the digit 0
        savemat(tmp_path / name, {"X": X, "y": y})
        written[name] = (X, y)
    data = load_svhn(tmp_path)
    X, y = written["train_32x32.mat"]
    assert data.X_train.shape == (4, 3, 32, 32) and data.X_test.shape == (3, 3, 32, 32)
    # X[h, w, c, i] in the file is sample i, channel c, row h, column w
    assert data.X_train[2, 1, 5, 7] == pytest.approx(X[5, 7, 1, 2] / 255)
    expected = y.ravel().astype(np.int64)
    expected[expected == 10] = 0
    np.testing.assert_array_equal(data.y_train, expected)
    assert data.y_train[0] == 0 and data.y_train.max() <= 9
    assert load_svhn(tmp_path, include_extra=True).X_train.shape == (6, 3, 32, 32)
    (tmp_path / "test_32x32.mat").unlink()
    with pytest.raises(FileNotFoundError, match="test_32x32.mat"):
        load_svhn(tmp_path)


@pytest.mark.parametrize(
    "test_split, match",
    [
        (None, "not a readable MATLAB file"),
        ({"X": np.zeros((32, 32, 3, 2), np.uint8)}, r"lacks the variable\(s\) \['y'\]"),
        ({"X": np.zeros((32, 32, 3, 2)), "y": np.array([[1], [2]])}, "must be uint8"),
        ({"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[1], [2], [3]])}, "1..10"),
        ({"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[0], [2]])}, "1..10"),
    ],
)
def test_malformed_svhn_file_names_it(tmp_path, test_split, match):
    good = {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[1], [10]])}
    savemat(tmp_path / "train_32x32.mat", good)
    if test_split is None:
        (tmp_path / "test_32x32.mat").write_bytes(b"garbage, not MATLAB")
    else:
        savemat(tmp_path / "test_32x32.mat", test_split)
    with pytest.raises(ValueError, match="test_32x32.mat") as info:
        load_svhn(tmp_path)
    assert info.match(match)


# ----------------------------------------------------------------------------- user files


def test_load_array_file_npz(tmp_path):
    X = np.arange(24, dtype=np.float64).reshape(4, 1, 2, 3)
    y = np.array(["a", "b", "a", "c"])
    np.savez(tmp_path / "data.npz", X=X, y=y)
    X_read, y_read = load_array_file(tmp_path / "data.npz")
    assert X_read.dtype == np.float32 and X_read.shape == (4, 1, 2, 3)
    np.testing.assert_array_equal(X_read, X)
    np.testing.assert_array_equal(y_read, y)
    np.savez(tmp_path / "bad.npz", features=X, y=y)
    with pytest.raises(ValueError, match="'X' and 'y'"):
        load_array_file(tmp_path / "bad.npz")


def test_load_array_file_csv_last_column(tmp_path):
    (tmp_path / "plain.csv").write_text("0.5,1,3\n1.5,2,1\n2.5,3,3\n")
    X, y = load_array_file(str(tmp_path / "plain.csv"))
    np.testing.assert_array_equal(X, [[0.5, 1], [1.5, 2], [2.5, 3]])
    assert y.dtype == np.int64 and y.tolist() == [3, 1, 3]


def test_load_array_file_csv_target_column(tmp_path):
    (tmp_path / "named.csv").write_text("height,target,width\n1.0,cat,2.0\n3.0,dog,4.0\n")
    X, y = load_array_file(tmp_path / "named.csv")
    np.testing.assert_array_equal(X, [[1.0, 2.0], [3.0, 4.0]])
    assert y.tolist() == ["cat", "dog"]
    with pytest.raises(ValueError, match="label column 'height'.*must be numeric"):
        load_array_file(tmp_path / "named.csv", target="height")
    (tmp_path / "numeric.csv").write_text("a,b,c\n1,2.5,3\n4,5.5,6\n")
    X, y = load_array_file(tmp_path / "numeric.csv", target="a")
    np.testing.assert_array_equal(X, [[2.5, 3], [5.5, 6]])
    assert y.tolist() == [1, 4]
    with pytest.raises(ValueError, match="'colour' not found"):
        load_array_file(tmp_path / "named.csv", target="colour")


def test_load_array_file_csv_header_with_last_label(tmp_path):
    (tmp_path / "h.csv").write_text("a,b,label\n1,2,x\n3,4,y\n")
    X, y = load_array_file(tmp_path / "h.csv")
    assert X.shape == (2, 2) and y.tolist() == ["x", "y"]


def test_load_array_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        load_array_file(tmp_path / "missing.csv")
    (tmp_path / "data.txt").write_text("1,2\n")
    with pytest.raises(ValueError, match=r"\.npz"):
        load_array_file(tmp_path / "data.txt")
    (tmp_path / "ragged.csv").write_text("1,2,3\n4,5\n")
    with pytest.raises(ValueError, match="3 cells"):
        load_array_file(tmp_path / "ragged.csv")


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("empty_label.csv", "a,b,target\n1,2,x\n3,4,\n", "label cell of line 3 is empty"),
        ("semicolons.csv", "1;2;0\n3;4;1\n", "separated by ';'"),
        ("labels_only.csv", "target\ncat\ndog\n", "single column"),
        ("huge.csv", "1,2,0\n1e39,4,1\n", "line 2 holds a value beyond float32"),
        ("infinite.csv", "1,inf,0\n3,4,1\n", "line 1 holds a value beyond float32"),
    ],
)
def test_malformed_csv_names_the_file_and_row(tmp_path, name, text, match):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=name) as info:
        load_array_file(tmp_path / name)
    assert info.match(match)


@pytest.mark.parametrize(
    "X, match",
    [
        (np.ones((3, 2)) * (1 + 1j), "complex values would lose their imaginary part"),
        (np.array([[1.0, 1e300], [0, 0], [0, 0]]), "sample 0 of X holds a value beyond float32"),
        (np.array([["a", "b"], ["c", "d"], ["e", "f"]]), "X must be real numbers"),
    ],
)
def test_npz_features_that_float32_would_change(tmp_path, X, match):
    np.savez(tmp_path / "bad.npz", X=X, y=np.array([0, 1, 0]))
    original = X.copy()
    with pytest.raises(ValueError, match=match):
        load_array_file(tmp_path / "bad.npz")
    np.testing.assert_array_equal(X, original)


def _with(value, at, dtype=np.float64, shape=(6, 2, 2)):
    X = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    X[at] = value
    return X


@pytest.mark.parametrize(
    "X, match",
    [
        # float32 and float16 were passed through unchecked; NaN is never "beyond float32"
        (_with(np.inf, (4, 1, 0), np.float32), "sample 4 of X holds a value beyond float32"),
        (_with(-np.inf, (1, 0, 1), np.float16), "sample 1 of X holds a value beyond float32"),
        (_with(np.nan, (3, 0, 0)), "sample 3 of X holds NaN"),
        (_with(np.nan, (2, 1, 1), np.float32), "sample 2 of X holds NaN"),
        (np.zeros((0, 4)), r"X holds no samples \(shape \(0, 4\)\)"),
        (np.zeros((6, 0)), "the samples of X hold no values"),
        (np.arange(6.0), r"one sample per row.*got shape \(6,\).*X.reshape\(-1, 1\)"),
        (np.float64(1.0), r"got shape \(\)"),
    ],
)
def test_npz_without_finite_samples_is_refused(tmp_path, X, match):
    y = np.arange(len(X)) % 2 if X.ndim else np.array([0])
    np.savez(tmp_path / "bad.npz", X=X, y=y)
    with pytest.raises(ValueError, match="bad.npz") as info:
        load_array_file(tmp_path / "bad.npz")
    assert info.match(match)


def test_csv_with_nan_names_its_line(tmp_path):
    (tmp_path / "gaps.csv").write_text("a,b,target\n1,2,x\n3,4,y\n5,nan,x\n6,NaN,y\n")
    with pytest.raises(ValueError, match="gaps.csv'.*line 4 holds NaN"):
        load_array_file(tmp_path / "gaps.csv")


def test_empty_labels_are_refused_by_name():
    from ebmclassifier.datasets.named import _check_class_labels

    with pytest.raises(ValueError, match="'none.npz': y holds no labels"):
        _check_class_labels(np.array([], dtype=np.int64), "none.npz")


@pytest.mark.parametrize(
    "content",
    [b"not a zip file at all", None],  # None: a real .npz cut in half
)
def test_unreadable_npz_is_one_value_error(tmp_path, content):
    path = tmp_path / "broken.npz"
    if content is None:
        np.savez(path, X=np.zeros((50, 4)), y=np.zeros(50))
        content = path.read_bytes()[: path.stat().st_size // 2]
    path.write_bytes(content)
    with pytest.raises(ValueError, match="broken.npz.*not a readable .npz"):
        load_array_file(path)


def test_npz_with_pickled_objects_is_refused_unread(tmp_path):
    np.savez(tmp_path / "objects.npz", X=np.zeros((2, 2)), y=np.array([{"a": 1}, None]))
    with pytest.raises(ValueError, match="objects.npz.*plain arrays"):
        load_array_file(tmp_path / "objects.npz")


# ----------------------------------------------------------------------------- by name


def test_load_named_dataset_from_file(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 5)).astype(np.float32)
    y = np.repeat(["a", "b"], 50)
    np.savez(tmp_path / "mine.npz", X=X, y=y)
    data = load_named_dataset(str(tmp_path / "mine.npz"))
    assert data.kind == "file" and len(data.y_train) == 70 and len(data.y_test) == 30
    assert set(data.ood) == {"uniform", "inverted", "permuted"}
    assert data.ood["uniform"].shape == (30, 5)
    with pytest.raises(ValueError, match="--data-dir"):
        load_named_dataset("cifar10")
    with pytest.raises(ValueError, match="Unknown data"):
        load_named_dataset("imagenet")


def test_load_named_dataset_adds_the_other_data_set_as_ood(cifar10_dir):
    root, _ = cifar10_dir
    rng = np.random.default_rng(3)
    for name in ("train_32x32.mat", "test_32x32.mat"):
        X = rng.integers(0, 256, size=(32, 32, 3, 5), dtype=np.uint8)
        savemat(root / name, {"X": X, "y": rng.integers(1, 11, size=(5, 1))})
    data = load_named_dataset("cifar10", data_dir=root)
    assert set(data.ood) == {"uniform", "inverted", "permuted", "svhn"}
    assert data.ood["svhn"].shape == (3, 3, 32, 32)  # as many as the test split
    assert data.kind == "cifar10" and data.input_range == (0.0, 1.0)


def _svhn_files(folder, rng, n=5, names=("train_32x32.mat", "test_32x32.mat")):
    for name in names:
        X = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
        savemat(folder / name, {"X": X, "y": rng.integers(1, 11, size=(n, 1))})


@pytest.mark.parametrize(
    "data, other, test_file, train_files",
    [
        ("cifar10", "svhn", "test_32x32.mat", {"train_32x32.mat"}),
        ("svhn", "cifar10", "test_batch", {f"data_batch_{i}" for i in range(1, 6)}),
    ],
)
def test_the_other_data_set_as_ood_reads_its_test_file_only(
    cifar10_dir, monkeypatch, data, other, test_file, train_files
):
    # It used to read the other set whole (SVHN's 73,257 training images, or CIFAR-10's five
    # training batches) to keep a few of its test images.
    import ebmclassifier.datasets.files as files

    root, _ = cifar10_dir
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (root / "cifar-10-batches-py" / name).rename(root / name)  # one folder for both sets
    _svhn_files(root, np.random.default_rng(3))
    whole = files.load_cifar10(root) if other == "cifar10" else files.load_svhn(root)
    read = []
    for reader in ("_unpickle", "_svhn_split"):
        original = getattr(files, reader)
        monkeypatch.setattr(
            files, reader, lambda path, _read=original: read.append(path.name) or _read(path)
        )
    loaded = load_named_dataset(data, data_dir=root)
    assert test_file in read and not train_files & set(read)
    # the same images as before: test images of the other set, at most as many as the test split
    n = min(len(loaded.y_test), len(whole.y_test))
    assert loaded.ood[other].shape == (n, 3, 32, 32)
    flat = whole.X_test.reshape(len(whole.X_test), -1)
    for image in loaded.ood[other].reshape(len(loaded.ood[other]), -1):
        assert (flat == image).all(axis=1).any()


def test_loaders_read_one_split_when_asked(cifar10_dir, tmp_path):
    root, _ = cifar10_dir
    folder = root / "cifar-10-batches-py"
    whole = load_cifar10(root)
    train, test = load_cifar10(root, subset="train"), load_cifar10(root, subset="test")
    assert sorted(test) == ["X_test", "input_range", "target_names", "y_test"]
    assert sorted(train) == ["X_train", "input_range", "target_names", "y_train"]
    np.testing.assert_array_equal(train.X_train, whole.X_train)
    np.testing.assert_array_equal(test.y_test, whole.y_test)
    assert test.target_names[3] == "class3"
    for i in range(1, 6):
        (folder / f"data_batch_{i}").unlink()  # the test split needs no training batch
    np.testing.assert_array_equal(load_cifar10(root, subset="test").X_test, whole.X_test)
    with pytest.raises(FileNotFoundError, match="data_batch_1"):
        load_cifar10(root)
    with pytest.raises(ValueError, match="subset must be 'all', 'train' or 'test'. Got 'val'"):
        load_cifar10(root, subset="val")
    _svhn_files(tmp_path, np.random.default_rng(4), names=("test_32x32.mat",))
    assert load_svhn(tmp_path, subset="test").X_test.shape == (5, 3, 32, 32)
    assert "X_train" not in load_svhn(tmp_path, include_extra=True, subset="test")
    with pytest.raises(FileNotFoundError, match="train_32x32.mat"):
        load_svhn(tmp_path, subset="train")
    cifar100 = tmp_path / "cifar-100-python"
    cifar100.mkdir()
    split = {b"data": _cifar_rows(np.random.default_rng(5), 2), b"fine_labels": [1, 99],
             b"coarse_labels": [0, 19]}  # fmt: skip
    _write_pickle(cifar100 / "test", split)
    coarse = load_cifar100(tmp_path, label_mode="coarse", subset="test")
    assert coarse.y_test.tolist() == [0, 19] and "X_train" not in coarse
    with pytest.raises(FileNotFoundError, match="train"):
        load_cifar100(tmp_path, subset="train")


# ---------------------------------------------------------------- CIFAR files are untrusted


class _WritesAFile:
    """A pickle payload that would create a file when unpickled with plain ``pickle.load``."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


def _write_cifar10(folder, batch_for):
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(pickle.dumps(batch_for(name)))


def test_cifar_batch_that_would_run_code_is_refused_unread(tmp_path):
    rng = np.random.default_rng(0)
    victim = tmp_path / "created_by_the_pickle"
    good = {b"data": _cifar_rows(rng, 2), b"labels": [1, 2]}
    evil = {b"data": _cifar_rows(rng, 2), b"labels": [1, 2], b"x": _WritesAFile(victim)}
    _write_cifar10(tmp_path / "c", lambda name: evil if name == "data_batch_3" else good)
    # the payload is real: plain pickle would have created the file
    with pytest.raises(ValueError, match=r"data_batch_3.*global io\.open is not allowed"):
        load_cifar10(tmp_path / "c")
    assert not victim.exists()
    pickle.loads((tmp_path / "c" / "data_batch_3").read_bytes())
    assert victim.exists()


@pytest.mark.parametrize(
    "batch, match",
    [
        ([1, 2, 3], "holds a list, not a dict"),
        ({b"labels": [1, 2]}, r"lacks the key\(s\) \['data'\]"),
        ({b"data": np.zeros((2, 3072), np.float32), b"labels": [1, 2]}, "must be uint8"),
        ({b"data": np.zeros((2, 100), np.uint8), b"labels": [1, 2]}, "rows of 3,072"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 2, 3]}, "2 images but 3"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 10]}, "outside 0..9"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1.5, 2.0]}, "list of integers"),
    ],
)
def test_malformed_cifar10_batch_names_the_file(tmp_path, batch, match):
    rng = np.random.default_rng(0)
    good = {b"data": _cifar_rows(rng, 2), b"labels": [1, 2]}
    _write_cifar10(tmp_path, lambda name: batch if name == "test_batch" else good)
    with pytest.raises(ValueError, match="test_batch") as info:
        load_cifar10(tmp_path)
    assert info.match(match)


def test_truncated_cifar_batch_is_a_value_error(tmp_path):
    rng = np.random.default_rng(0)
    good = {b"data": _cifar_rows(rng, 2), b"labels": [1, 2]}
    _write_cifar10(tmp_path, lambda name: good)
    path = tmp_path / "data_batch_1"
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(ValueError, match="data_batch_1.*not a CIFAR batch"):
        load_cifar10(tmp_path)


def test_cifar100_labels_checked_against_the_label_mode(tmp_path):
    split = {
        "data": np.zeros((2, 3072), np.uint8),
        "fine_labels": [42, 97],
        "coarse_labels": [8, 25],
    }
    for name in ("train", "test"):
        (tmp_path / name).write_bytes(pickle.dumps(split))
    assert load_cifar100(tmp_path).y_test.tolist() == [42, 97]
    with pytest.raises(ValueError, match="'coarse_labels' holds 25, outside 0..19"):
        load_cifar100(tmp_path, label_mode="coarse")


def test_npz_whose_members_are_not_npy_arrays(tmp_path):
    # np.load hands back raw bytes for a member that is no .npy array (here a pickle)
    path = tmp_path / "evil.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", pickle.dumps(np.zeros(3)))
        archive.writestr("y.npy", pickle.dumps(np.zeros(3)))
    with pytest.raises(ValueError, match="evil.npz.*must be stored in the archive as .npy"):
        load_array_file(path)
