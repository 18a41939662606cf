"""A fit killed after any epoch and resumed ends bitwise where the uninterrupted fit ends.

Two ways to resume, both through documented hooks: skorch's ``Checkpoint`` with the training
state as one more file (``f_training_state``) and ``LoadInitState``; and ``save`` after each
epoch, then ``load`` and ``partial_fit``. The kill is an exception raised by the last callback
of an epoch, after the checkpoint was written: like a killed process, it skips on_train_end.
"""

import multiprocessing
import os
import random
import signal
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback, Checkpoint, LoadInitState

from ebmclassifier import JEMClassifier, NGEBMClassifier, load
from ebmclassifier._divergence import Divergence, Rollback
from ebmclassifier.recipes import paper_callbacks

from ..estimators import params, tiny
from ..kills import Kill, SaveEachEpoch, Tell

EPOCHS = 6
COMMON = dict(max_epochs=EPOCHS, batch_size=32)
JEM = dict(COMMON, sgld_steps=3, buffer_size=40)
ESTIMATORS = {
    "ngebm": lambda **kw: tiny("ngebm", **{**COMMON, **kw}),
    "jem": lambda **kw: tiny("jem", **{**JEM, **kw}),
    "jem_uniform": lambda **kw: tiny(
        "jem", **{**JEM, "buffer_init": "uniform", "sampler": "proximal", **kw}
    ),
    "latent": lambda **kw: tiny("latent", **{**COMMON, "gradient": "gumbel", **kw}),
}


def _checkpoint(folder: Path) -> Checkpoint:
    return Checkpoint(monitor=None, dirname=str(folder), f_training_state="training_state.pt")


@contextmanager
def _global_generators_elsewhere(seed: int):
    """torch's and numpy's global generators seeded with ``seed`` for the block, then back."""
    numpy_state = np.random.get_state()  # noqa: NPY002 (what random_state=None reads)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        np.random.seed(seed)  # noqa: NPY002
        try:
            yield
        finally:
            np.random.set_state(numpy_state)  # noqa: NPY002


def _killed_and_resumed(make, X, y, folder: Path, kill: int, how: str, callbacks=()):
    """Fit until killed after epoch ``kill``, then resume ``how`` for the epochs left, with
    torch's and numpy's global generators elsewhere, as in a new process."""
    callbacks = list(callbacks)
    saving = _checkpoint(folder) if how == "checkpoint" else SaveEachEpoch(folder / "run.ebm")
    with pytest.raises(KeyError, match="killed"):
        make(callbacks=[*callbacks, saving, Kill(kill)]).fit(X, y)
    with _global_generators_elsewhere(987):
        if how == "checkpoint":
            resumed = make(max_epochs=EPOCHS - kill,
                           callbacks=[*callbacks, saving, LoadInitState(saving)])  # fmt: skip
            return resumed.fit(X, y)
        resumed = load(folder / "run.ebm", callbacks=[*callbacks, saving])
        assert len(resumed.history) == kill
        return resumed.set_params(max_epochs=EPOCHS - kill).partial_fit(X, y)


def _assert_same_fit(resumed, uninterrupted, X):
    assert len(resumed.history) == len(uninterrupted.history) == EPOCHS
    for (name, a), b in zip(resumed.module_.state_dict().items(),
                            uninterrupted.module_.state_dict().values(), strict=True):  # fmt: skip
        assert torch.equal(a, b), name
    np.testing.assert_array_equal(resumed.predict_proba(X), uninterrupted.predict_proba(X))
    if hasattr(uninterrupted, "replay_buffer_"):
        assert torch.equal(resumed.replay_buffer_.samples, uninterrupted.replay_buffer_.samples)
        assert resumed.sgld_step_size_ == uninterrupted.sgld_step_size_


@pytest.fixture(scope="module")
def uninterrupted(small_blobs):
    X, y = small_blobs
    return {name: make().fit(X, y) for name, make in ESTIMATORS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("how", ["checkpoint", "save"])
@pytest.mark.parametrize("kill", [2, 4])
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_a_killed_fit_resumes_bitwise(small_blobs, uninterrupted, tmp_path, name, kill, how):
    X, y = small_blobs
    resumed = _killed_and_resumed(ESTIMATORS[name], X, y, tmp_path, kill, how)
    _assert_same_fit(resumed, uninterrupted[name], X)


def test_without_the_training_state_jem_resumes_elsewhere(small_blobs, uninterrupted, tmp_path):
    # the bug: the replay buffer restarted its chains (4.5e-3 in predict_proba on the run)
    X, y = small_blobs
    checkpoint = Checkpoint(monitor=None, dirname=str(tmp_path))
    with pytest.raises(KeyError):
        ESTIMATORS["jem"](callbacks=[checkpoint, Kill(3)]).fit(X, y)
    resumed = ESTIMATORS["jem"](max_epochs=3, callbacks=[checkpoint, LoadInitState(checkpoint)])
    resumed.fit(X, y)
    assert not np.array_equal(resumed.predict_proba(X), uninterrupted["jem"].predict_proba(X))


@pytest.mark.parametrize("threads", [1, 2])
def test_the_promise_holds_with_one_and_two_threads(small_blobs, tmp_path, threads):
    X, y = small_blobs
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        uninterrupted = ESTIMATORS["jem"]().fit(X, y)
        resumed = _killed_and_resumed(ESTIMATORS["jem"], X, y, tmp_path, 3, "checkpoint")
    finally:
        torch.set_num_threads(before)
    _assert_same_fit(resumed, uninterrupted, X)


# ---------------------------------------------------------------- the learning-rate schedule


def _schedule():  # a warm-up over epochs 0-1 (5 batches each), decays at the kill points
    return paper_callbacks(warmup_iters=7, lr_milestones=[2, 4], lr_decay=0.5)


@pytest.mark.parametrize("how", ["checkpoint", "save"])
@pytest.mark.parametrize("kill", [2, 4])
def test_a_scheduled_fit_resumes_bitwise(small_blobs, tmp_path, kill, how):
    # skorch's LRScheduler rebuilt its scheduler from the epoch count: the warm-up restarted
    # and a fit resumed at a milestone decayed twice
    X, y = small_blobs
    make = ESTIMATORS["ngebm"]
    uninterrupted = make(callbacks=_schedule()).fit(X, y)
    resumed = _killed_and_resumed(make, X, y, tmp_path, kill, how, callbacks=_schedule())
    _assert_same_fit(resumed, uninterrupted, X)
    lr = resumed.optimizer_.param_groups[0]["lr"]
    assert lr == uninterrupted.optimizer_.param_groups[0]["lr"] == pytest.approx(1e-3 * 0.25)


def test_partial_fit_continues_the_schedule(small_blobs):
    X, y = small_blobs
    uninterrupted = ESTIMATORS["ngebm"](callbacks=_schedule()).fit(X, y)
    continued = ESTIMATORS["ngebm"](max_epochs=2, callbacks=_schedule()).fit(X, y)
    continued.set_params(max_epochs=EPOCHS - 2).partial_fit(X, y)
    _assert_same_fit(continued, uninterrupted, X)


def test_a_checkpoint_before_an_epoch_scheduler_is_refused(small_blobs, tmp_path):
    X, y = small_blobs
    clf = ESTIMATORS["ngebm"](callbacks=[_checkpoint(tmp_path), *_schedule()])
    with pytest.raises(ValueError, match="Put the Checkpoint after the schedulers"):
        clf.fit(X, y)


# ---------------------------------------------------------------- torch's own random state


@pytest.mark.parametrize("how", ["checkpoint", "save"])
def test_without_random_state_the_generators_are_resumed(small_blobs, tmp_path, how):
    X, y = small_blobs

    def make(**kw):
        return ESTIMATORS["jem"](random_state=None, **kw)

    # unseeded: each call draws its seed from numpy's global generator (scikit-learn's rule)
    with _global_generators_elsewhere(0):
        uninterrupted = make().fit(X, y)
    with _global_generators_elsewhere(0):
        resumed = _killed_and_resumed(make, X, y, tmp_path, 3, how)
    _assert_same_fit(resumed, uninterrupted, X)


# ---------------------------------------------------------------- JEM's roll-backs


class ForcedDivergenceJEM(JEMClassifier):
    """JEM whose second batch of epoch 5 diverges four times in a row.

    The third failure in a row drops the newest snapshot for an older one: only a policy
    resumed with its snapshots rolls back as the uninterrupted fit does.
    """

    def compute_loss(self, X, y, training, sample_weight=None):
        loss, logits = super().compute_loss(X, y, training, sample_weight)
        failures = self.__dict__.setdefault("_forced", 0)
        if training and len(self.history) == 5 and len(self.history[-1]["batches"]) == 2:
            if failures < 4:
                self._forced = failures + 1
                (rollback,) = [cb for _, cb in self.callbacks_ if isinstance(cb, Rollback)]
                return rollback.diverged(Divergence("forced", "model"), loss, logits)
        return loss, logits


def test_a_resumed_fit_rolls_back_to_the_snapshots_of_the_interrupted_one(small_blobs, tmp_path):
    X, y = small_blobs

    def make(**kw):
        return ForcedDivergenceJEM(**params("jem", **{**JEM, **kw}))

    with pytest.warns(RuntimeWarning, match="recovered from 4 divergence"):
        uninterrupted = make().fit(X, y)
    assert [e["reason"] for e in uninterrupted.history[4, "divergences"]] == ["forced"] * 4
    with pytest.warns(RuntimeWarning, match="recovered from 4 divergence"):
        resumed = _killed_and_resumed(make, X, y, tmp_path, 3, "checkpoint")
    _assert_same_fit(resumed, uninterrupted, X)
    assert resumed.n_divergences_ == 4


# ---------------------------------------------------------------- checkpoint files


def test_checkpoint_files_of_two_epochs_are_refused(small_blobs, tmp_path):
    # a process killed while the Checkpoint wrote its files leaves some of the next epoch
    X, y = small_blobs
    checkpoint = _checkpoint(tmp_path)
    with pytest.raises(KeyError):
        ESTIMATORS["jem"](callbacks=[checkpoint, Kill(3)]).fit(X, y)
    kept = (tmp_path / "training_state.pt").read_bytes()
    with pytest.raises(KeyError):
        ESTIMATORS["jem"](callbacks=[checkpoint, Kill(4)]).fit(X, y)
    (tmp_path / "training_state.pt").write_bytes(kept)
    resumed = ESTIMATORS["jem"](callbacks=[checkpoint, LoadInitState(checkpoint)])
    with pytest.raises(ValueError, match="does not match the other checkpoint files: it was "
                       "written after epoch 3, the history after epoch 4"):  # fmt: skip
        resumed.fit(X, y)


def _text_for_the_counts(call):  # set as it stands before the check
    call["before"]["arrays"].pop("class_count_")
    call["before"]["tensors"]["class_count_"] = "1e9"


def _epochs_left_as_text(call):
    call["epochs_left"] = "4"


def _another_attribute(call):  # with none left, kept for a later 0-epoch call
    call["epochs_left"] = 0
    call["before"]["tensors"]["predict_proba"] = torch.zeros(1)


def _before_as_a_list(call):
    call["before"] = [torch.zeros(1)]


@pytest.mark.parametrize(
    "forge", [_text_for_the_counts, _epochs_left_as_text, _another_attribute, _before_as_a_list]
)
def test_a_forged_record_of_the_interrupted_call_is_refused(small_blobs, tmp_path, forge):
    # the training state's "call" restores attributes of the estimator when loaded for
    # partial_fit: only the attributes a call keeps, as tensors, with an int of epochs left
    X, y = small_blobs
    checkpoint = _checkpoint(tmp_path)
    with pytest.raises(KeyError):
        ESTIMATORS["ngebm"](callbacks=[checkpoint, Kill(2)]).fit(X, y)
    path = tmp_path / "training_state.pt"
    state = torch.load(path, weights_only=True)
    assert state["call"]["epochs_left"] == EPOCHS - 2
    forge(state["call"])
    torch.save(state, path)
    fresh = ESTIMATORS["ngebm"](max_epochs=0).fit(X, y)
    with pytest.raises(ValueError, match="record of the interrupted call is not one that "
                       "NGEBMClassifier writes"):  # fmt: skip
        fresh.load_params(checkpoint=checkpoint)


# ---------------------------------------------------------------- a class-incremental stream

STREAM_EPOCHS = (3, 4)  # epochs of the calls on task 1 (fit) and task 2 (partial_fit)
STREAM_PARAMS = dict(
    module__hidden_sizes=(8,), batch_size=16, random_state=0, class_incremental=True,
    replay_per_class=5,
)  # fmt: skip
STREAM = {
    "ngebm": lambda **kw: NGEBMClassifier(**{**STREAM_PARAMS, **kw}),
    "jem": lambda **kw: JEMClassifier(**{**STREAM_PARAMS, **kw}, sgld_steps=3, buffer_size=40),
}


def _tasks(X, y):
    first = y != 2
    return [(X[first], y[first]), (X[~first], y[~first])]


def _stream(clf, tasks, start: int = 0):
    """Train on the tasks from ``start``: ``fit`` on the first, ``partial_fit`` on the others."""
    for t in range(start, len(tasks)):
        clf.set_params(max_epochs=STREAM_EPOCHS[t])
        clf.fit(*tasks[t]) if t == 0 else clf.partial_fit(*tasks[t])
    return clf


def _finish_stream(make, path: Path, tasks, reading: str = "skip"):
    """The saving guide's reading: load the last file, finish the task it was saved in for
    the epochs its call had left (none: ``"skip"`` goes on, ``"zero epochs"`` calls
    ``partial_fit`` for 0 epochs), and go on with the next tasks."""
    if not path.exists():  # killed before the first epoch ended
        return _stream(make(), tasks)
    resumed = load(path, callbacks=None)  # the file's callbacks are the test's
    ends = np.cumsum(STREAM_EPOCHS)
    task = int(np.searchsorted(ends, len(resumed.history)))  # the call the file was saved in
    left = int(ends[task] - len(resumed.history))
    if left or reading == "zero epochs":
        resumed.set_params(max_epochs=left).partial_fit(*tasks[task])
    return _stream(resumed, tasks, start=task + 1)


def _assert_same_stream(resumed, uninterrupted, X):
    assert len(resumed.history) == len(uninterrupted.history) == sum(STREAM_EPOCHS)
    for (key, a), b in zip(resumed.module_.state_dict().items(),
                           uninterrupted.module_.state_dict().values(), strict=True):  # fmt: skip
        assert torch.equal(a, b), key
    for attribute in ("reservoir_X_", "reservoir_y_", "reservoir_seen_"):
        assert torch.equal(getattr(resumed, attribute), getattr(uninterrupted, attribute))
    np.testing.assert_array_equal(resumed.class_count_, uninterrupted.class_count_)
    np.testing.assert_array_equal(resumed.predict_proba(X), uninterrupted.predict_proba(X))


@pytest.fixture(scope="module")
def uninterrupted_streams(small_blobs):
    return {name: _stream(make(), _tasks(*small_blobs)) for name, make in STREAM.items()}


@pytest.mark.parametrize(
    "name, kill, reading",
    [
        ("ngebm", 2, "skip"),  # in the first call
        ("ngebm", 3, "skip"),  # after the first call's last epoch: none left, go on
        ("ngebm", 3, "zero epochs"),  # ... or end it with partial_fit for 0 epochs
        ("ngebm", 6, "skip"),  # in the second call
        ("ngebm", 7, "skip"),  # after the last epoch of all
        ("jem", 3, "skip"),
        ("jem", 4, "skip"),
    ],
)
@pytest.mark.slow
def test_a_killed_class_incremental_stream_with_replay_resumes_bitwise(
    small_blobs, uninterrupted_streams, tmp_path, name, kill, reading
):
    # a file saved in the last epoch of task 1 restored the reservoir as it was before task 1:
    # going on with task 2 lost task 1's replay (35 rows for 50, 0.31 off in predict_proba);
    # and a resumed call counted its chunk's classes twice
    X, y = small_blobs
    tasks = _tasks(X, y)
    uninterrupted = uninterrupted_streams[name]
    assert len(uninterrupted.reservoir_y_) == 15  # the replay really stores every class
    path = tmp_path / "run.ebm"
    with pytest.raises(KeyError, match="killed"):
        _stream(STREAM[name](callbacks=[SaveEachEpoch(path), Kill(kill)]), tasks)
    with _global_generators_elsewhere(987):
        resumed = _finish_stream(STREAM[name], path, tasks, reading)
    _assert_same_stream(resumed, uninterrupted, X)


class SelfKill(Callback):
    """SIGKILL this process at the end of epoch ``at``, after the callbacks before it."""

    def __init__(self, at: int):
        self.at = at

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.at:
            os.kill(os.getpid(), signal.SIGKILL)


def _killed(stream, event=None) -> None:
    """Run ``stream()`` in a forked process (no second import of torch), SIGKILLed by the
    parent as soon as ``event`` is set (the kill lands a moment later, anywhere), or by
    itself."""
    process = multiprocessing.get_context("fork").Process(target=stream)
    process.start()
    if event is not None:
        event.wait(timeout=300)
        os.kill(process.pid, signal.SIGKILL)
    process.join()
    assert process.exitcode == -signal.SIGKILL, "the stream ended before the kill"


@pytest.mark.parametrize(
    "name, seed, kill",
    [("ngebm", 0, None), ("ngebm", 1, None), ("ngebm", 2, None), ("jem", 0, 3)],
)
@pytest.mark.slow
def test_a_stream_killed_by_sigkill_resumes_bitwise(small_blobs, tmp_path, name, seed, kill):
    # real SIGKILLs of a process streaming the tasks: just after a random batch (seeded) of
    # the 37 the stream trains, and at the boundary of the two tasks (kill=3: right after the
    # file of task 1's last epoch was written)
    X, y = small_blobs
    tasks, path = _tasks(X, y), tmp_path / "run.ebm"

    def make(**kw):
        return STREAM[name](**{**kw, "random_state": seed})

    uninterrupted = _stream(make(), tasks)
    event = multiprocessing.get_context("fork").Event()
    if kill is None:
        callbacks = [SaveEachEpoch(path), Tell(event, random.Random(seed).randrange(1, 34))]
    else:
        callbacks, event = [SaveEachEpoch(path), SelfKill(kill)], None
    _killed(lambda: _stream(make(callbacks=callbacks), tasks), event)
    _assert_same_stream(_finish_stream(make, path, tasks), uninterrupted, X)
