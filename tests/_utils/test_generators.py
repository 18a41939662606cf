"""Each fit draws from generators of its own: seeded fits that share a process stay bitwise.

Seeding went through torch's process-global generator: two seeded clones fitted in two threads
ended 0.40 (NG-EBM) and 0.029 (JEM) off the fit done alone, and GridSearchCV under joblib's
threading backend gave other scores than run one after the other.
"""

import threading

import numpy as np
import pytest
import torch
from joblib import parallel_backend
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from torch.utils.data import Dataset

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier
from ebmclassifier._utils.generators import (
    FitGenerators,
    derived_seed,
    draw_seed,
    draws_from_global_rng,
    global_rng,
)
from ebmclassifier.augment import GaussianNoise

FITS = {
    "ngebm": lambda: NGEBMClassifier(
        max_epochs=3, batch_size=16, module__hidden_sizes=(8,), negatives=1,
        augmentation=GaussianNoise(0.1), random_state=0,
    ),
    "jem": lambda: JEMClassifier(
        max_epochs=2, batch_size=16, module__hidden_sizes=(8,), sgld_steps=3, buffer_size=30,
        random_state=0,
    ),
    "latent": lambda: LatentStructureClassifier(
        n_latent=3, gradient="gumbel", max_epochs=3, batch_size=16, random_state=0
    ),
    # dropout draws from torch's global generator: such fits take turns under a lock
    "dropout": lambda: NGEBMClassifier(
        max_epochs=3, batch_size=16, module__hidden_sizes=(8,), module__dropout=0.5,
        random_state=0,
    ),
    # an augmentation without a generator keyword: the same
    "plain_augmentation": lambda: NGEBMClassifier(
        max_epochs=3, batch_size=16, module__hidden_sizes=(8,), random_state=0,
        augmentation=lambda x: x + 0.1 * torch.randn_like(x),
    ),
}  # fmt: skip


def _in_threads(fits: list) -> list:
    """Run each of ``fits`` (callables) in a thread of its own, all at once."""
    results = [None] * len(fits)
    barrier = threading.Barrier(len(fits))

    def run(i):
        barrier.wait()
        results[i] = fits[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fits))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize("name", sorted(FITS))
def test_seeded_fits_in_two_threads_equal_the_fit_done_alone(small_blobs, name):
    X, y = small_blobs
    alone = FITS[name]().fit(X, y).predict_proba(X)
    before = torch.get_rng_state()
    fitted = _in_threads([lambda: FITS[name]().fit(X, y)] * 2)
    for clf in fitted:
        np.testing.assert_array_equal(clf.predict_proba(X), alone)
    assert torch.equal(torch.get_rng_state(), before)  # the caller's generator untouched


@pytest.mark.parametrize("name", sorted(FITS))
def test_a_fit_neither_reads_nor_moves_torchs_global_generator(small_blobs, name):
    X, y = small_blobs
    before = torch.get_rng_state()
    try:
        torch.manual_seed(123)  # whatever the caller's state, the fit is the same
        a = FITS[name]().fit(X, y).predict_proba(X)
        moved = not torch.equal(torch.get_rng_state(), torch.manual_seed(123).get_state())
        torch.manual_seed(456)
        b = FITS[name]().fit(X, y).predict_proba(X)
    finally:
        torch.set_rng_state(before)
    np.testing.assert_array_equal(a, b)
    assert not moved


class NoisyPairs(Dataset):
    """A user's dataset whose items are drawn at random from torch's global generator."""

    def __init__(self, X, y):
        self.X, self.y = torch.as_tensor(X), y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i] + 0.1 * torch.randn(self.X.shape[1:]), self.y[i]


def _host_data(name: str, X, y, folder):
    """A float32 memmap of ``X`` (read batch by batch, JEM's buffer fitted chunk by chunk), or
    a Dataset whose items are noisy (its labels yielded with the samples)."""
    if name == "dataset":
        return NoisyPairs(X, y), None
    memmap = np.lib.format.open_memmap(folder / "x.npy", "w+", np.float32, X.shape)
    memmap[:] = X
    memmap.flush()
    return np.load(folder / "x.npy", mmap_mode="r"), y


@pytest.mark.parametrize("name", ["memmap", "dataset"])
def test_seeded_fits_of_host_data_in_threads_equal_the_fit_done_alone(small_blobs, tmp_path, name):
    # issue #38's data read batch by batch: the batch order, the DataLoader's workers' seed
    # and JEM's buffer from the fit's generators; a user's Dataset under the library's lock
    X, y = small_blobs
    data = _host_data(name, X, y, tmp_path)
    make = FITS["jem"] if name == "memmap" else FITS["ngebm"]
    before = torch.get_rng_state()
    try:
        torch.manual_seed(123)
        alone = make().fit(*data).predict_proba(X)
        moved = not torch.equal(torch.get_rng_state(), torch.manual_seed(123).get_state())
        torch.manual_seed(456)
        fitted = _in_threads([lambda: make().fit(*data)] * 2)
        moved = moved or not torch.equal(torch.get_rng_state(), torch.manual_seed(456).get_state())
    finally:
        torch.set_rng_state(before)
    for clf in fitted:
        np.testing.assert_array_equal(clf.predict_proba(X), alone)
    assert not moved


def test_grid_search_in_threads_scores_as_run_one_after_the_other(small_blobs):
    X, y = small_blobs
    search = GridSearchCV(
        FITS["jem"](), {"lr": [1e-3, 1e-2]}, cv=2, scoring="neg_log_loss", n_jobs=2
    )
    sequential = clone(search).set_params(n_jobs=1).fit(X, y).cv_results_
    with parallel_backend("threading", n_jobs=2):
        threaded = clone(search).fit(X, y).cv_results_
    for key in ("split0_test_score", "split1_test_score"):
        np.testing.assert_array_equal(threaded[key], sequential[key])


# ---------------------------------------------------------------- the generators themselves


def test_each_purpose_and_epoch_has_a_stream_of_its_own():
    seeds = set()
    for epoch in range(3):
        generators = FitGenerators(seed=5, epoch=0)
        generators.begin(epoch)
        seeds |= {generators.seed_for(p) for p in ("shuffle", "augment", "sampler", "latent")}
    assert len(seeds) == 12
    assert derived_seed(5, 1, 2) == derived_seed(5, 1, 2) < 2**63


def test_the_fit_seed_reads_random_state_as_scikit_learn_does():
    from sklearn.utils import check_random_state

    def theirs(random_state):
        return int(check_random_state(random_state).randint(0, 2**31 - 1))

    for random_state in (0, 7, np.int64(3), 2**31):
        assert draw_seed(random_state) == theirs(random_state)
        assert draw_seed(np.random.RandomState(random_state)) == theirs(random_state)
    state = np.random.get_state()  # noqa: NPY002 (the global generator is what None reads)
    ours = draw_seed(None)
    np.random.set_state(state)  # noqa: NPY002
    assert ours == theirs(None)  # numpy's global generator, as random_state=None reads it
    for bad in (np.random.default_rng(0), "0", 1.5):
        with pytest.raises(ValueError, match="cannot be used to seed"):
            draw_seed(bad)


def test_the_calls_purposes_keep_their_streams_apart_and_by_position():
    generators = FitGenerators(seed=5, epoch=2)
    assert generators.seed_for("split") == 5  # early stopping's split: the fit's seed, as
    ours, theirs = generators.random_state("split"), np.random.RandomState(5)  # an int made it
    assert ours.randint(1 << 30, size=3).tolist() == theirs.randint(1 << 30, size=3).tolist()
    seeds = {generators.seed_for(p) for p in ("grow", "generated", "buffer", "sampler")}
    assert len(seeds) == 4
    a = generators.at_position("reservoir", 40).integers(1 << 30, size=4)
    b = FitGenerators(seed=5, epoch=9).at_position("reservoir", 40).integers(1 << 30, size=4)
    c = generators.at_position("reservoir", 41).integers(1 << 30, size=4)
    assert (a == b).all() and not (a == c).all()  # the stream's position, not the epoch


def test_a_generator_held_across_epochs_draws_each_epochs_stream():
    # skorch builds the training iterator once per call: it holds the generator
    generators = FitGenerators(seed=0, epoch=0)
    held = generators("augment", "cpu")
    generators.begin(2)
    drawn = torch.rand(3, generator=held)
    fresh = FitGenerators(seed=0, epoch=0)
    fresh.begin(2)  # a run resumed at epoch 2
    assert torch.equal(torch.rand(3, generator=fresh("augment", "cpu")), drawn)


def test_global_rng_forks_seeds_and_restores_also_on_error():
    before = torch.get_rng_state()
    with pytest.raises(KeyError):
        with global_rng(7):
            inside = torch.rand(2)
            raise KeyError
    assert torch.equal(torch.get_rng_state(), before)
    with global_rng(7):
        assert torch.equal(torch.rand(2), inside)


def test_random_layers_are_found():
    assert draws_from_global_rng(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.RReLU()))
    assert draws_from_global_rng(torch.nn.Sequential(torch.nn.Dropout2d(0.2)))
    assert not draws_from_global_rng(
        torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0))
    )
