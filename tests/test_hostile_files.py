"""Hostile data files (issue #26): every bad file is one ``ValueError`` naming the file.

Regression tests for the cases found by hand, then property families over random bytes,
truncations and forged ``.npy`` headers in files named ``.csv``, ``.npz`` and ``.mat`` (the
loaders raise a ``ValueError`` naming the file, never another exception type; each family
counts its cases and asserts that both the data and the refusals occurred), and every pair of
a parameter's role and a class saved for it (``load`` refuses a class of another role, naming
the parameter). Crafted model files: ``tests/saving/test_saving_hostile.py``.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.io import savemat

from ebmclassifier import NGEBMClassifier, load
from ebmclassifier.datasets import load_array_file, load_named_dataset, load_svhn

from .test_hostile_inputs import FAST


def _npy(shape, descr="<f8", data: bytes = b"") -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return header.getvalue() + data


def _npz(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, raw in members.items():
            archive.writestr(name, raw)
    return path


def _svhn_folder(folder: Path, train: bytes) -> Path:
    savemat(folder / "test_32x32.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": [[1], [2]]})
    (folder / "train_32x32.mat").write_bytes(train)
    return folder


def _svhn_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "whole.mat"
    savemat(path, {"X": np.zeros((32, 32, 3, 3), np.uint8), "y": np.array([[1], [2], [10]])})
    return path.read_bytes()


# ----------------------------------------------------------------------------- regressions


def test_binary_file_named_csv_is_a_value_error(tmp_path):
    # it raised UnicodeDecodeError (a ValueError subclass naming no file)
    path = tmp_path / "data.csv"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match="data.csv.*not UTF-8 text.*np.savez") as info:
        load_array_file(path)
    assert not isinstance(info.value, UnicodeDecodeError)


def test_npz_with_a_0d_y_is_a_value_error(tmp_path):
    # it raised IndexError: tuple index out of range
    path = tmp_path / "data.npz"
    np.savez(path, X=np.zeros((3, 2)), y=np.array(1))
    with pytest.raises(ValueError, match=r"data.npz.*shape \(\).*shape \(n_samples,\)"):
        load_array_file(path)


def test_npz_header_claiming_more_than_the_file_holds_is_refused_unallocated(tmp_path):
    # a header claiming 10^12 float64 in a few bytes raised MemoryError (7.28 TiB)
    path = _npz(
        tmp_path / "data.npz",
        {"X.npy": _npy((10**6, 10**6), data=b"\0" * 16), "y.npy": _npy((2,), "<i8", b"\0" * 16)},
    )
    with pytest.raises(ValueError, match=r"data.npz.*'X' claims shape \(1000000, 1000000\)"):
        load_array_file(path)


def test_npz_header_claiming_less_than_the_file_holds_is_refused(tmp_path):
    path = _npz(
        tmp_path / "data.npz",
        {"X.npy": _npy((2, 1), data=b"\0" * 32), "y.npy": _npy((2,), "<i8", b"\0" * 16)},
    )
    with pytest.raises(ValueError, match=r"'X' claims .*16 bytes.*holds 32 bytes"):
        load_array_file(path)


def test_npz_written_by_numpy_still_loads(tmp_path):
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / f"{save.__name__}.npz"
        X = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
        save(path, X=X, y=np.array(["a", "b", "a"]))
        X_read, y_read = load_array_file(path)
        np.testing.assert_array_equal(X_read, X.astype(np.float32))
        assert y_read.tolist() == ["a", "b", "a"]


@pytest.mark.parametrize("cut", [0, 21, 28, 100])
def test_truncated_svhn_mat_is_a_value_error(tmp_path, cut):
    # a cut at 21 or 28 bytes raised IndexError inside scipy's version check
    folder = _svhn_folder(tmp_path, _svhn_bytes(tmp_path)[:cut])
    with pytest.raises(ValueError, match="train_32x32.mat.*not a readable MATLAB file.*again"):
        load_svhn(folder)


@pytest.mark.parametrize("name", ["max_train", "max_test"])
@pytest.mark.parametrize("value", [0, -5, 2.5, True, "10"])
def test_load_named_dataset_refuses_a_bad_size(name, value):
    # max_train=0 gave an empty training set, -5 numpy's "negative dimensions"
    with pytest.raises(ValueError, match=f"{name} must be an int >= 1 or None. Got {value!r}"):
        load_named_dataset("digits", **{name: value})


# ----------------------------------------------------------------------------- properties
#
# Each family runs its hypothesis examples inside a plain test that counts their outcomes, and
# asserts how many it generated and that each outcome it claims occurred: a family whose files
# were all refused for one trivial reason (or all read) would prove nothing.


def _outcome(load, path: Path) -> str:
    """Load: "data", or "ValueError" naming the file; any other exception fails."""
    try:
        load()
    except ValueError as err:
        assert type(err) is not UnicodeDecodeError, err
        assert path.name in str(err), err
        return "ValueError"
    except FileNotFoundError:
        return "FileNotFoundError"  # the loader's own documented error for a missing file
    return "data"


def test_random_bytes_named_csv_are_a_value_error_or_data(tmp_path_factory):
    outcomes = Counter()

    @settings(FAST, max_examples=50)
    @given(data=st.binary(max_size=600), text=st.text(max_size=60))
    def family(data, text):
        folder = tmp_path_factory.mktemp("csv")
        for i, raw in enumerate((data, text.encode("utf-8", "surrogatepass"), b"1,2\n" + data)):
            path = folder / f"data{i}.csv"
            path.write_bytes(raw)
            outcomes[_outcome(lambda p=path: load_array_file(p), path)] += 1

    family()
    assert sum(outcomes.values()) == 3 * 50, outcomes
    assert outcomes["ValueError"] > 0 and outcomes["data"] > 0, outcomes


@st.composite
def npz_members(draw):
    """``(shape, descr, data, y_shape)``: a member X.npy whose header's shape and dtype agree
    with its data and with y's length, or disagree (data cut short or too long, a shape up to
    10**7 claimed over a few bytes, a y of another shape)."""
    descr = draw(st.sampled_from(["<f8", "<f4", "|u1", "<i8", "<c16", "|b1", "<U3"]))
    if draw(st.booleans()):  # all agree: a small X, one label per row
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=2, max_size=3)))
        data = bytes(int(np.prod(shape)) * np.dtype(descr).itemsize)
        return shape, descr, data, (shape[0],)
    shape = tuple(draw(st.lists(st.integers(0, 10**7), min_size=0, max_size=3)))
    y_shape = draw(st.sampled_from([(), (0,), (2,), (2, 1)]))
    return shape, descr, bytes(draw(st.integers(0, 256))), y_shape


def test_forged_npy_headers_in_npz_are_a_value_error(tmp_path_factory):
    outcomes = Counter()

    @settings(FAST, max_examples=100)
    @given(member=npz_members())
    def family(member):
        shape, descr, data, y_shape = member
        y = np.zeros(y_shape, np.int64)
        path = _npz(
            tmp_path_factory.mktemp("npz") / "data.npz",
            {"X.npy": _npy(shape, descr, data), "y.npy": _npy(y_shape, "<i8", y.tobytes())},
        )
        outcome = _outcome(lambda: load_array_file(path), path)
        forged = len(data) != int(np.prod(shape)) * np.dtype(descr).itemsize
        assert outcome == "ValueError" or not forged, (shape, descr, len(data))
        outcomes["forged" if forged else "agreeing", outcome] += 1

    family()
    assert sum(outcomes.values()) == 100, outcomes
    assert outcomes["forged", "ValueError"] > 0 and outcomes["agreeing", "data"] > 0, outcomes


def test_truncated_flipped_or_extended_svhn_mat_is_a_value_error(tmp_path_factory):
    # anywhere in the file, tags included: scipy's reader died on such files with a
    # segmentation fault; the loader's own reader (datasets/_matfile.py) refuses them
    # (tests/datasets/test_matfile.py changes every header and tag byte in turn)
    outcomes = Counter()

    @settings(FAST, max_examples=100)
    @given(
        cut=st.one_of(st.none(), st.integers(0, 10**5)),
        flips=st.lists(st.integers(0, 10**5), max_size=4),
        tail=st.binary(max_size=24),
    )
    def family(cut, flips, tail):
        folder = tmp_path_factory.mktemp("mat")
        raw = bytearray(_svhn_bytes(folder))
        for position in flips:
            raw[position % len(raw)] ^= 0xFF
        end = len(raw) if cut is None else cut % (len(raw) + 1)
        _svhn_folder(folder, bytes(raw[:end]) + tail)
        outcomes[_outcome(lambda: load_svhn(folder), folder / "train_32x32.mat")] += 1

    family()
    assert sum(outcomes.values()) == 100, outcomes
    assert outcomes["ValueError"] > 0 and outcomes["data"] > 0, outcomes


CLASSES = {  # a trusted class of each kind, and whether it may stand for each role
    "torch.nn.modules.module:Module": {"module"},
    "torch.nn.modules.linear:Linear": {"module"},
    "torch.nn.modules.loss:CrossEntropyLoss": {"criterion", "module"},
    "torch.nn.modules.loss:MSELoss": {"criterion", "module"},
    "torch.optim.sgd:SGD": {"optimizer"},
    "torch.utils.data.dataloader:DataLoader": {"iterator_train", "iterator_valid"},
    "ebmclassifier._utils.data:TensorBatchIterator": {"iterator_train", "iterator_valid"},
    "torch.utils.data.dataset:TensorDataset": {"dataset"},
    "skorch.dataset:Dataset": {"dataset"},
    "torch.utils.data.dataset:IterableDataset": set(),
    "torch.utils.data.datapipes.iter.fileopener:FileOpenerIterDataPipe": set(),
    "ebmclassifier.nn:MLP": {"module"},
}
ROLES = ["criterion", "optimizer", "iterator_train", "iterator_valid", "dataset", "module"]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(24, 3)).astype(np.float32), np.arange(24) % 2
    path = tmp_path_factory.mktemp("saved") / "model.ebm"
    NGEBMClassifier(max_epochs=1, module__hidden_sizes=(4,), random_state=0).fit(X, y).save(path)
    return path.read_bytes()


def _load_with_class(file: Path, saved_model: bytes, name: str, path: str) -> str:
    """Load ``saved_model`` with the parameter ``name`` naming the class ``path``: "refused"
    (naming the parameter), "loaded", or "constructor" (a network this data cannot build)."""
    file.write_bytes(saved_model)
    with zipfile.ZipFile(file) as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    metadata = json.loads(members["metadata.json"])
    metadata["params"][name] = {"__class__": path}
    members["metadata.json"] = json.dumps(metadata)
    _npz(file, members)
    try:
        loaded = load(file)
    except (ValueError, TypeError) as err:
        if f"parameter {name!r} the class {path!r}, but" in str(err):
            return "refused"
        assert name == "module" and name in CLASSES[path], err  # the right kind, other sizes
        return "constructor"
    assert loaded.get_params()[name].__name__ == path.split(":")[1]
    return "loaded"


def test_a_saved_class_loads_only_in_its_role(tmp_path, saved_model):
    # every (role, class) pair, not a sample of them
    outcomes = Counter()
    for name in ROLES:
        for path in sorted(CLASSES):
            outcome = _load_with_class(tmp_path / "model.ebm", saved_model, name, path)
            assert (outcome == "refused") == (name not in CLASSES[path]), (name, path, outcome)
            outcomes[outcome] += 1
    refusals = sum(name not in roles for roles in CLASSES.values() for name in ROLES)
    assert outcomes["refused"] == refusals == 58, outcomes
    assert outcomes["loaded"] + outcomes["constructor"] == 72 - refusals, outcomes
    assert outcomes["loaded"] > 0, outcomes
