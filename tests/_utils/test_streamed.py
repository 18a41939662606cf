"""Data as the user holds it: torch Datasets, memmaps and uint8 images, read batch by batch.

The reference of each test is the array path the estimators had before (a float32 copy of all
the data): the same data held another way must give the same fit, bit for bit, because the
checks, the statistics and the batches are the same, only read differently.
"""

import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from skorch.callbacks import Callback
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier
from ebmclassifier._utils.streamed import ArrayRows, DatasetRows, StreamedDataset, is_streamed

from ..estimators import params, tiny

PARAMS = params("ngebm", max_epochs=2, batch_size=128, module__hidden_sizes=(16,))
INFERENCE = ("predict", "predict_proba", "predict_log_proba", "energy", "score_samples")


class Pairs(Dataset):
    """A user's map-style dataset: ``(sample, label)`` pairs, or samples alone."""

    def __init__(self, X, y=None):
        self.X, self.y = X, y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i] if self.y is None else (self.X[i], self.y[i])


@pytest.fixture(scope="module")
def images():
    """Digits as uint8 images of shape (1, 8, 8) (pixel values 0..240), their labels."""
    X, y = load_digits(return_X_y=True)
    return (X[:900] * 15).astype(np.uint8).reshape(-1, 1, 8, 8), y[:900]


@pytest.fixture(scope="module")
def flat(images):
    X, y = images
    return X.reshape(len(X), -1), y


@pytest.fixture(scope="module")
def reference(flat):
    """The array path: NG-EBM fitted on the float32 copy of the images."""
    X, y = flat
    return NGEBMClassifier(**PARAMS).fit(X.astype(np.float32), y)


def _same_fit(a, b, X) -> None:
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X), strict=True)
    assert a.fd_step_size_ == b.fd_step_size_
    assert torch.equal(a.input_min_, b.input_min_) and torch.equal(a.input_std_, b.input_std_)


def _training_set(monkeypatch, clf):
    """Fit ``clf`` as it is called next, recording what skorch was given to train on."""
    seen = []
    original = type(clf)._train

    def spy(self, X, y, sample_weight=None):
        seen.append(X)
        return original(self, X, y, sample_weight)

    monkeypatch.setattr(type(clf), "_train", spy)
    return seen


# ---------------------------------------------------------------- datasets


def test_a_tensor_dataset_trains_as_its_tensors(flat, reference):
    X, y = flat
    Xt = torch.from_numpy(X.astype(np.float32))
    for clf in (
        NGEBMClassifier(**PARAMS).fit(TensorDataset(Xt, torch.from_numpy(y))),  # y=None
        NGEBMClassifier(**PARAMS).fit(TensorDataset(Xt, torch.from_numpy(y)), y),  # skorch's
    ):
        _same_fit(clf, reference, X.astype(np.float32))
        np.testing.assert_array_equal(
            clf.predict_proba(TensorDataset(Xt)), reference.predict_proba(Xt)
        )


def test_a_dataset_yielding_labels_trains_with_y_none(flat, reference):
    X, y = flat
    clf = NGEBMClassifier(**PARAMS).fit(Pairs(X, y))
    _same_fit(clf, reference, X.astype(np.float32))
    assert clf.score(Pairs(X, y)) == reference.score(X.astype(np.float32), y)


def test_a_dataset_of_samples_trains_with_y_and_keeps_string_labels(flat):
    X, y = flat
    names = np.array(list("abcdefghij"))[y]
    by_array = NGEBMClassifier(**PARAMS).fit(X.astype(np.float32), names)
    by_dataset = NGEBMClassifier(**PARAMS).fit(Pairs(X), names)
    assert by_dataset.classes_.tolist() == list("abcdefghij")
    np.testing.assert_array_equal(by_dataset.predict(Pairs(X)), by_array.predict(X))


def test_y_must_agree_with_the_labels_the_dataset_yields(flat):
    X, y = flat
    with pytest.raises(ValueError, match="y differs from the labels the dataset yields"):
        NGEBMClassifier(**PARAMS).fit(Pairs(X, y), (y + 1) % 10)
    with pytest.raises(ValueError, match="y differs"):
        NGEBMClassifier(**PARAMS).fit(TensorDataset(torch.tensor(X), torch.tensor(y)), y[::-1])


def test_a_data_loader_is_refused_naming_the_fix(flat):
    X, y = flat
    loader = DataLoader(Pairs(X, y), batch_size=32, num_workers=0)
    with pytest.raises(TypeError, match=r"fit\(loader.dataset\).*batch_size=32"):
        NGEBMClassifier(**PARAMS).fit(loader)
    with pytest.raises(TypeError, match="DataLoader"):
        NGEBMClassifier(**PARAMS).fit(X, y).predict(loader)


def test_what_a_dataset_cannot_give_is_refused_before_training(flat):
    X, y = flat

    class Stream(IterableDataset):
        def __iter__(self):
            yield from zip(X, y, strict=True)

    with pytest.raises(TypeError, match="IterableDataset"):
        NGEBMClassifier(**PARAMS).fit(Stream())
    with pytest.raises(ValueError, match="dataset yields samples without labels; pass y"):
        NGEBMClassifier(**PARAMS).fit(Pairs(X))
    ragged = [np.zeros(4), np.zeros(5)] * 10
    with pytest.raises(ValueError, match="different shapes"):
        NGEBMClassifier(**PARAMS).fit(Pairs(ragged, np.arange(20) % 2))
    with pytest.raises(TypeError, match="arrays or tensors of numbers"):
        NGEBMClassifier(**PARAMS).fit(Pairs(["a", "b"] * 5, np.arange(10) % 2))
    clf = NGEBMClassifier(**PARAMS).fit(X, y)
    with pytest.raises(ValueError, match="X has 63 features"):
        clf.predict(Pairs(X[:, :63]))


def test_nan_far_into_float_data_is_found_by_chunks(tmp_path, monkeypatch):
    """The first chunk goes through scikit-learn's checks, the others are checked by chunks."""
    monkeypatch.setattr("ebmclassifier._utils.streamed.CHUNK_ELEMENTS", 64 * 100)
    X = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.float32, (1000, 64))
    X[:] = 1.0
    X[731, 5] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity .* in sample 731"):
        NGEBMClassifier(**PARAMS).fit(X, np.arange(1000) % 3)
    with pytest.raises(ValueError, match="NaN or infinity .* in sample 731"):
        NGEBMClassifier(**PARAMS).fit(Pairs(X, np.arange(1000) % 3))


def test_sample_weights_travel_with_a_dataset(flat):
    X, y = flat
    weights = np.where(np.arange(len(y)) % 4 == 0, 0.0, 1.0 + (y % 3))
    by_array = NGEBMClassifier(**PARAMS).fit(X.astype(np.float32), y, sample_weight=weights)
    by_dataset = NGEBMClassifier(**PARAMS).fit(Pairs(X, y), sample_weight=weights)
    _same_fit(by_dataset, by_array, X.astype(np.float32))


def test_a_class_incremental_partial_fit_reads_the_dataset_labels(flat):
    X, y = flat
    first, later = y < 5, y >= 5
    clf = NGEBMClassifier(
        **PARAMS, beta=0, class_incremental=True, replay_per_class=0, generated_per_class=0
    )
    clf.partial_fit(Pairs(X[first], y[first]))
    clf.partial_fit(Pairs(X[later], y[later]))
    assert clf.classes_.tolist() == list(range(10))
    with pytest.raises(ValueError, match="^NGEBMClassifier replays .* replay_per_class=0"):
        NGEBMClassifier(**PARAMS, class_incremental=True).fit(Pairs(X, y))


# ---------------------------------------------------------------- arrays in their own dtype


def test_uint8_images_stay_uint8_on_the_device(images, monkeypatch):
    X, y = images
    params = dict(max_epochs=1, batch_size=128, module__hidden_size=16, random_state=0)
    clf = NGEBMClassifier(**params)
    seen = _training_set(monkeypatch, clf)
    clf.fit(X, y)
    assert seen[0].dtype == torch.uint8 and seen[0].shape == X.shape
    monkeypatch.undo()
    reference = NGEBMClassifier(**params).fit(X.astype(np.float32), y)
    _same_fit(clf, reference, X.astype(np.float32))


def test_a_memmap_is_read_batch_by_batch_by_the_loaders_workers(
    flat, reference, tmp_path, monkeypatch
):
    X, y = flat
    memmap = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.uint8, X.shape)
    memmap[:] = X
    memmap.flush()
    memmap = np.load(tmp_path / "x.npy", mmap_mode="r")
    clf = NGEBMClassifier(**PARAMS, iterator_train__num_workers=2)
    seen = _training_set(monkeypatch, clf)
    clf.fit(memmap, y)
    assert isinstance(seen[0], StreamedDataset) and seen[0].rows.array is memmap
    _same_fit(clf, reference, X.astype(np.float32))


def test_predictions_on_a_dataset_equal_those_on_the_array(flat, reference, tmp_path):
    X, y = flat
    Xf = X.astype(np.float32)
    memmap = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.uint8, X.shape)
    memmap[:] = X
    held = {"uint8": X, "memmap": memmap, "samples": Pairs(X), "pairs": Pairs(X, y)}
    for name, data in held.items():
        for method in INFERENCE:
            expected = getattr(reference, method)(Xf)
            np.testing.assert_array_equal(getattr(reference, method)(data), expected, name)
        for ood in ("energy", "max_softmax", "approx_mass"):
            expected = reference.score_ood(Xf, method=ood)
            np.testing.assert_array_equal(reference.score_ood(data, method=ood), expected)
    state = torch.get_rng_state()  # a DataLoader draws its workers' seed at every pass
    reference.predict(Pairs(X))
    NGEBMClassifier(**PARAMS).fit(Pairs(X, y))
    assert torch.equal(torch.get_rng_state(), state)
    workers = NGEBMClassifier(**PARAMS, iterator_valid__num_workers=2).fit(Xf, y)
    np.testing.assert_array_equal(workers.energy(Pairs(X)), reference.energy(Xf))
    flags = reference.calibrate_ood(Pairs(X[:300])).predict_ood(Pairs(X))
    np.testing.assert_array_equal(flags, reference.calibrate_ood(Xf[:300]).predict_ood(Xf))


def test_the_latent_classifier_reads_datasets_and_its_trees_refuse_them(flat):
    X, y = flat
    Xf = X.astype(np.float32)
    params = dict(max_epochs=1, random_state=0)
    by_array = LatentStructureClassifier(**params).fit(Xf, y)
    by_dataset = LatentStructureClassifier(**params).fit(Pairs(X, y))
    np.testing.assert_array_equal(by_dataset.transform(Pairs(X)), by_array.transform(Xf))
    np.testing.assert_array_equal(by_dataset.predict_latent(X), by_array.predict_latent(Xf))
    ids = np.random.RandomState(0).randint(1, 9, (40, 5)).astype(np.uint8)  # token ids
    trees = LatentStructureClassifier(structure="dependency_tree", **params)
    trees.fit(ids, np.arange(40) % 2)  # uint8 ids are ids, not pixels
    assert trees.vocabulary_.dtype == np.int64
    with pytest.raises(TypeError, match="reads X as an array here"):
        trees.predict(Pairs(ids))


def test_jem_fits_its_informative_start_by_chunks(images):
    X, y = images
    params = dict(max_epochs=1, sgld_steps=2, buffer_size=64, random_state=0)
    by_array = JEMClassifier(**params).fit(X.astype(np.float32), y)
    by_dataset = JEMClassifier(**params).fit(Pairs(X, y))
    # float64 class sums against torch's float32 mean and variance
    a, b = by_array.replay_buffer_.start, by_dataset.replay_buffer_.start
    torch.testing.assert_close(b.means, a.means, rtol=0, atol=1e-4)
    torch.testing.assert_close(b.stds, a.stds, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="informative_covariance='diag'"):
        JEMClassifier(**params, informative_covariance="lowrank").fit(X, y)


def test_which_input_is_read_in_batches():
    assert is_streamed(np.zeros((2, 3), np.uint8)) and is_streamed(torch.zeros(2, 3).half())
    assert not is_streamed(np.zeros((2, 3), np.float64)) and not is_streamed(np.zeros((2, 3)))
    assert not is_streamed(TensorDataset(torch.zeros(2))) and is_streamed(Pairs([1]))
    assert isinstance(DatasetRows(Pairs(np.zeros((3, 2)))).batch(np.arange(2)), torch.Tensor)
    rows = ArrayRows(np.arange(12, dtype=np.uint8).reshape(6, 2))
    assert rows.batch(np.array([4, 1])).tolist() == [[8, 9], [2, 3]]


# ---------------------------------------------------------------- larger than the memory limit


#: Run in a fresh interpreter (a forked one inherits the freed memory of the tests before it):
#: a warm-up fit (the lazy imports and allocations of a first fit), then the address space
#: capped at what the process maps now (the memmap included) plus ``budget`` MiB, then a fit
#: on the memmap as it is and one on its float32 copy, which the array path made (``fit``
#: copied every input to float32, then to a tensor). torch reports a failed allocation as a
#: RuntimeError.
CHILD = """
import resource, sys
import numpy as np
from ebmclassifier import NGEBMClassifier

def mapped():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmSize:"))

params = dict(max_epochs=1, batch_size=256, module__hidden_sizes=(16,), random_state=0)
X = np.load(sys.argv[1], mmap_mode="r")
y = np.arange(len(X)) % 4
NGEBMClassifier(**params).fit(X[:300].astype(np.float32), y[:300]).predict(X[:300])
limit = mapped() + int(sys.argv[2]) * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
for name, data in [("stream", lambda: X), ("copy", lambda: np.asarray(X, np.float32))]:
    try:
        NGEBMClassifier(**params).fit(data(), y).predict(X)
        print(name, "ok")
    except (MemoryError, RuntimeError) as err:
        failed = isinstance(err, MemoryError) or "allocate" in str(err)
        print(name, "MemoryError" if failed else repr(err))
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc are Linux's")
def test_a_memmap_trains_under_a_memory_limit_the_float_copy_exceeds(tmp_path):
    """Under ``RLIMIT_AS`` (``ulimit -v``) 32 MiB above what the process maps, a 12 MiB uint8
    memmap trains; its float32 copy (48 MiB), which the array path makes, cannot be made."""
    path = tmp_path / "images.npy"
    X = np.lib.format.open_memmap(path, "w+", np.uint8, (3000, 4096))
    X[:] = np.random.RandomState(0).randint(0, 256, X.shape, dtype=np.uint8)
    X.flush()
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), "32"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["stream", "ok", "copy", "MemoryError"], run.stdout


# ---------------------------------------------------------------- every chunk boundary (#47)
# The checks read streamed input a chunk at a time (the first chunk through scikit-learn's
# validate_data, the others by the library's own loop), so a non-finite value is a property
# of every position where the chunks meet, not of one position: the first and last row of
# each chunk, and a last chunk of one row. Chunks of ROWS rows of FEATURES values here.

ROWS, FEATURES = 4, 4
BAD = (np.nan, np.inf, -np.inf)


def _boundaries(n: int, rows: int = ROWS) -> list[int]:
    """The first and the last row of every chunk of ``rows`` rows of ``n``."""
    return sorted({p for s in range(0, n, rows) for p in (s, min(s + rows, n) - 1)})


class _NoTraining(Callback):
    """Fails the test if training begins: the refusal must come before it."""

    def on_train_begin(self, net, **kwargs):
        raise AssertionError("training began on input the checks should have refused")


def _holders(X: np.ndarray, y: np.ndarray, tmp_path) -> dict:
    """The streamed ways of holding ``X`` (float32 memmap, float16 array, a Dataset of
    pairs, a Dataset of samples with y) as ``name -> (X, y)``."""
    memmap = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.float32, X.shape)
    memmap[:] = X
    return {
        "memmap": (memmap, y),
        "float16": (X.astype(np.float16), y),
        "pairs": (Pairs(X, y), None),
        "samples": (Pairs(X), y),
    }


@pytest.mark.parametrize("n", [3 * ROWS, 3 * ROWS + 1], ids=["whole chunks", "one-row last"])
def test_a_non_finite_value_at_every_chunk_boundary_is_refused_before_training(
    n, tmp_path, monkeypatch
):
    monkeypatch.setattr("ebmclassifier._utils.streamed.CHUNK_ELEMENTS", ROWS * FEATURES)
    y = np.arange(n) % 3
    positions = _boundaries(n)
    assert positions[-1] == n - 1 and (n % ROWS != 1 or positions[-2] == n - 2)
    for k, row in enumerate(positions):
        X = np.ones((n, FEATURES), np.float32)
        X[row, k % FEATURES] = BAD[k % len(BAD)]
        for name, (held, labels) in _holders(X, y, tmp_path).items():
            clf = tiny("ngebm", callbacks=[("no_training", _NoTraining())])
            with pytest.raises(ValueError, match="NaN|infinity") as info:
                clf.fit(held, labels)
            if row >= ROWS:  # beyond the first chunk, the library's loop names the sample
                assert f"in sample {row};" in str(info.value), (name, row)


@pytest.mark.parametrize("n", [3 * ROWS, 3 * ROWS + 1], ids=["whole chunks", "one-row last"])
def test_predict_refuses_a_non_finite_value_at_every_chunk_boundary(
    n, tmp_path, monkeypatch, fitted_model
):
    clf = fitted_model("ngebm")  # on small_blobs: FEATURES features
    monkeypatch.setattr("ebmclassifier._utils.streamed.CHUNK_ELEMENTS", ROWS * FEATURES)
    for k, row in enumerate(_boundaries(n)):
        X = np.ones((n, FEATURES), np.float32)
        X[row, k % FEATURES] = BAD[k % len(BAD)]
        for name, (held, _) in _holders(X, None, tmp_path).items():
            if name == "pairs":
                continue  # inference reads samples
            with pytest.raises(ValueError, match="NaN|infinity") as info:
                clf.predict_proba(held)
            if row >= ROWS:
                assert f"in sample {row};" in str(info.value), (name, row)
