"""A checkpoint cannot mix epochs, and no kill while it is written loses the run.

skorch's ``Checkpoint`` writes one file per ``save_params`` call. The training state records
what the others hold and refuses a mix; the files of a Checkpoint that saves the training state
are replaced together, so that a process killed at any moment leaves a complete set, the
previous epoch's or the new one, which resumes bitwise. Kills are simulated by copying the
checkpoint's folder just before each rename or removal of the write (what a SIGKILL at that
moment leaves), and one is a real SIGKILL of a fitting process.
"""

import io
import multiprocessing
import os
import random
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback, Checkpoint, LoadInitState
from skorch.history import History

from ebmclassifier import NGEBMClassifier
from ebmclassifier._estimator.checkpoint import state_digest

from ..kills import Kill, Tell

EPOCHS = 6
FILES = ("criterion.pt", "optimizer.pt", "params.pt", "training_state.pt", "history.json")


def make(**kw) -> NGEBMClassifier:
    params = dict(module__hidden_sizes=(8,), max_epochs=EPOCHS, batch_size=32, random_state=0)
    return NGEBMClassifier(**{**params, **kw})


def _checkpoint(folder: Path) -> Checkpoint:
    return Checkpoint(monitor=None, dirname=str(folder), f_training_state="training_state.pt")


class CopyAt(Callback):
    """Copy the checkpoint's folder at the end of epoch ``at``, after it was written."""

    def __init__(self, at: int, folder: Path, to: Path):
        self.at, self.folder, self.to = at, folder, to

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.at:
            shutil.copytree(self.folder, self.to)


def _resume(folder: Path, X, y, epochs: int = EPOCHS):
    """The saving guide's recipe: the epochs done from history.json, then LoadInitState."""
    history = folder / "history.json"
    done = len(History.from_file(str(history))) if history.exists() else 0
    checkpoint = _checkpoint(folder)
    callbacks = [checkpoint, LoadInitState(checkpoint)]
    return make(max_epochs=epochs - done, callbacks=callbacks).fit(X, y)


def _assert_same_fit(resumed, uninterrupted, X):
    assert len(resumed.history) == len(uninterrupted.history)
    for (name, a), b in zip(
        resumed.module_.state_dict().items(),
        uninterrupted.module_.state_dict().values(),
        strict=True,
    ):
        assert torch.equal(a, b), name
    np.testing.assert_array_equal(resumed.predict_proba(X), uninterrupted.predict_proba(X))


@pytest.fixture(scope="module")
def uninterrupted(small_blobs):
    X, y = small_blobs
    return make().fit(X, y)


@pytest.fixture(scope="module")
def two_epochs(small_blobs, tmp_path_factory):
    """A checkpoint's folder after epoch 3 and after epoch 4 of the same run."""
    X, y = small_blobs
    root = tmp_path_factory.mktemp("two_epochs")
    folder = root / "run"
    with pytest.raises(KeyError, match="killed"):
        make(callbacks=[_checkpoint(folder), CopyAt(3, folder, root / "3"), Kill(4)]).fit(X, y)
    return root / "3", folder


# ---------------------------------------------------------------- files of two epochs


def test_a_state_has_the_digest_it_had_when_saved(uninterrupted):
    optimizer = uninterrupted.optimizer_.state_dict()
    saved = io.BytesIO()
    torch.save(optimizer, saved)
    loaded = torch.load(io.BytesIO(saved.getvalue()), weights_only=True)
    assert state_digest(loaded) == state_digest(optimizer)
    loaded["state"][0]["step"] += 1  # one more step: another state
    assert state_digest(loaded) != state_digest(optimizer)
    loaded["state"][0]["step"] -= 1
    loaded["param_groups"][0]["lr"] *= 0.5
    assert state_digest(loaded) != state_digest(optimizer)


@pytest.mark.parametrize(
    "newer, problem",
    [
        ("params.pt", "the module's state is not the one it was written with"),
        ("optimizer.pt", "the optimizer's state is not the one it was written with"),
        ("history.json", "it was written after epoch 3, the history after epoch 4"),
        ("training_state.pt", "it was written after epoch 4, the history after epoch 3"),
    ],
)
def test_a_checkpoint_of_two_epochs_files_is_refused(
    small_blobs, two_epochs, tmp_path, newer, problem
):
    # a kill after optimizer.pt and before params.pt left an epoch-4 optimizer beside epoch-3
    # weights, which LoadInitState took (the 3 of 12 kills: 2.2e-2 in predict_proba)
    X, y = small_blobs
    epoch_3, epoch_4 = two_epochs
    mixed = tmp_path / "mixed"
    shutil.copytree(epoch_3, mixed)
    shutil.copy(epoch_4 / newer, mixed / newer)
    with pytest.raises(ValueError, match=f"does not match the other checkpoint files: {problem}"):
        _resume(mixed, X, y)


def test_files_given_beside_a_checkpoint_win_and_its_own_are_not_read(small_blobs, tmp_path):
    # as skorch's load_params: an f_history given explicitly is the one read, and the
    # checkpoint's history.json is then not read at all (here it is gone). The files' names
    # are formatted from the net's history (skorch's), so the net is the run's own
    folder = tmp_path / "run"
    net = make(max_epochs=3, callbacks=[_checkpoint(folder)]).fit(*small_blobs)
    moved = tmp_path / "elsewhere.json"
    (folder / "history.json").rename(moved)
    net.load_params(checkpoint=_checkpoint(folder), f_history=str(moved))
    assert len(net.history) == 3
    expected = torch.load(folder / "params.pt", weights_only=True)
    for name, tensor in net.module_.state_dict().items():
        assert torch.equal(tensor, expected[name]), name


class KeptOpen(io.StringIO):
    def close(self):
        pass


def test_files_of_two_epochs_are_refused_also_as_file_objects(small_blobs):
    X, y = small_blobs
    saved = {}

    class SaveInMemory(Callback):
        def on_epoch_end(self, net, **kwargs):
            files = {key: io.BytesIO() for key in ("f_params", "f_optimizer", "f_training_state")}
            files["f_history"] = KeptOpen()  # skorch closes the history's file
            net.save_params(**files)
            saved[len(net.history)] = {key: f.getvalue() for key, f in files.items()}

    make(max_epochs=4, callbacks=[SaveInMemory()]).fit(X, y)

    def files(epochs: dict) -> dict:
        wrap = {"f_history": io.StringIO}
        return {k: wrap.get(k, io.BytesIO)(saved[epochs.get(k, 3)][k]) for k in saved[3]}

    make(max_epochs=0).fit(X, y).load_params(**files({}))  # one epoch's files load
    for key, name in [("f_params", "module"), ("f_optimizer", "optimizer")]:
        with pytest.raises(ValueError, match=f"the {name}'s state is not the one"):
            make(max_epochs=0).fit(X, y).load_params(**files({key: 4}))


def test_outside_a_fit_one_of_the_checkpoints_files_is_written_at_once(small_blobs, tmp_path):
    # the set is the Checkpoint's during a fit; after it, save_params(f_params=<its file>)
    # must not wait for the rest of a set that no epoch will write (it stayed staged)
    X, y = small_blobs
    clf = make(max_epochs=2, callbacks=[_checkpoint(tmp_path)]).fit(X, y)
    params = tmp_path / "params.pt"
    params.unlink()
    clf.save_params(f_params=params)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)
    fresh = make(max_epochs=0).fit(X, y)
    fresh.load_params(f_params=params)
    np.testing.assert_array_equal(fresh.predict_proba(X), clf.predict_proba(X))


# ---------------------------------------------------------------- a kill while writing


class Watch(Callback):
    """Before the checkpoint: whether its write in this epoch is watched."""

    def __init__(self, epochs, watching: dict):
        self.epochs, self.watching = epochs, watching

    def on_epoch_end(self, net, **kwargs):
        self.watching["on"] = len(net.history) in self.epochs


class Unwatch(Callback):
    def __init__(self, watching: dict):
        self.watching = watching

    def on_epoch_end(self, net, **kwargs):
        self.watching["on"] = False


@pytest.mark.slow
def test_a_kill_at_any_step_of_the_write_leaves_a_set_that_resumes_bitwise(
    small_blobs, tmp_path, monkeypatch
):
    # skorch's Checkpoint replaced its files one by one: a kill between params.pt and the
    # history left no complete set, and the whole run was lost
    X, y = small_blobs
    epochs = 3
    uninterrupted = make(max_epochs=epochs).fit(X, y)
    folder, snapshots = tmp_path / "run", tmp_path / "kills"
    snapshots.mkdir()
    watching, taken = {"on": False}, []
    real_replace, real_unlink = os.replace, os.unlink

    def snapshot():
        if watching["on"] and folder.exists():
            taken.append(snapshots / str(len(taken)))
            shutil.copytree(folder, taken[-1])

    monkeypatch.setattr(os, "replace", lambda *a: (snapshot(), real_replace(*a))[1])
    monkeypatch.setattr(os, "unlink", lambda *a: (snapshot(), real_unlink(*a))[1])
    watch = [Watch({1, 2}, watching), _checkpoint(folder), Unwatch(watching)]
    make(max_epochs=epochs, callbacks=watch).fit(X, y)
    monkeypatch.undo()
    # per epoch: 5 files staged, the journal, 5 renames, the journal removed
    assert len(taken) == 2 * 12
    done = []
    for copy in taken:
        history = copy / "history.json"
        done.append(len(History.from_file(str(history))) if history.exists() else 0)
        _assert_same_fit(_resume(copy, X, y, epochs), uninterrupted, X)
    assert done == [0] * 7 + [1] * 5 + [1] * 7 + [2] * 5  # the history's rename commits


# ---------------------------------------------------------------- a real SIGKILL


@pytest.mark.slow
def test_a_fit_killed_by_sigkill_at_a_random_moment_resumes_bitwise(small_blobs, tmp_path):
    X, y = small_blobs
    epochs, folder = 20, tmp_path / "run"  # 5 batches an epoch
    uninterrupted = make(max_epochs=epochs).fit(X, y)
    context = multiprocessing.get_context("fork")  # no second import of torch: seconds here
    event = context.Event()
    tell = Tell(event, random.Random(0).randrange(1, 90))
    process = context.Process(
        target=lambda: make(max_epochs=epochs, callbacks=[tell, _checkpoint(folder)]).fit(X, y)
    )
    process.start()
    event.wait(timeout=300)
    os.kill(process.pid, signal.SIGKILL)  # lands a moment after that batch, anywhere
    process.join()
    assert process.exitcode == -signal.SIGKILL, "the fit ended before the kill"
    history = folder / "history.json"
    done = len(History.from_file(str(history))) if history.exists() else 0
    checkpoint = _checkpoint(folder)
    callbacks = [checkpoint, LoadInitState(checkpoint)]
    resumed = make(max_epochs=epochs - done, callbacks=callbacks).fit(X, y)
    _assert_same_fit(resumed, uninterrupted, X)
