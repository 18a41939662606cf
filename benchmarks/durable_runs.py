"""The probes of issue #41's runs half on the installed library: threads, checkpoints, kills.

Each probe fits small networks (150 points of three Gaussian blobs in 4 dimensions) and says
what became of a run that was shared, mixed, killed or interrupted:

- ``threads``: two seeded clones fitted at once in two threads, against the fit done alone
  (NG-EBM with Gaussian noise and a sampled negative, JEM, the Gumbel latent model; ``--trials``
  times each); and whether the caller's torch generator is the same before and after.
- ``grid``: ``GridSearchCV`` of a JEM over two learning rates under joblib's threading backend
  (``n_jobs=2``) against the same search run sequentially: the split scores.
- ``mix``: a ``Checkpoint`` of epoch 3 with one of its four files (``optimizer.pt``,
  ``params.pt``, ``history.json``, ``training_state.pt``) taken from epoch 4, then resumed
  (``LoadInitState``).
- ``steps``: the checkpoint folder copied just before each rename or removal of epoch 3's write
  (as a kill at that point would leave it), each copy resumed to the end.
- ``sigkills``: a checkpointed 20-epoch fit in a forked process, SIGKILLed at a random moment
  (``--kills`` times), resumed from its folder. The moments are drawn over the length of a
  checkpointed fit (of a saving stream in ``streams``), so that kills land in any epoch.
- ``streams``: a class-incremental stream with replay (``fit`` on classes 0-1, ``partial_fit``
  on class 2), saved with ``save`` after each epoch and resumed as ``docs/user_guide/saving.md``
  says: killed right after task 1's last file (NG-EBM and JEM), then an NG-EBM stream SIGKILLed
  at a random moment (``--stream-kills`` times, ``random_state`` cycling over
  ``--stream-seeds`` seeds).
- ``interrupts``: SIGINT sent to ``ebmclassifier compare --epochs 50`` (in a forked process,
  once its first fit trains a batch) whose ``--out`` folder holds a previous ``report.md``.
- ``ctrl_c``: a fit of 5 epochs receiving SIGINT (Ctrl-C) at the end of epoch 2.
- ``memory``: ``fit`` of ``module__hidden_sizes=(10**6, 10**6)`` (a network of ~4e12 bytes).

The outcomes:

- **bitwise**: the resumed (or threaded) fit's ``predict_proba`` equals the uninterrupted fit
  done alone to the last bit (``off d`` gives the largest difference otherwise). Also the grid
  search's split scores.
- **refused**: a ``ValueError`` (a mixed checkpoint, a network too large for the memory)
  instead of a silent resume or an allocator error; the JSON file keeps its message.
- **intact**: what was there before is unchanged: the caller's torch generator (``threads``),
  the previous ``report.md``, with exit status 130 and nothing else written (``interrupts``),
  the estimator after Ctrl-C, which holds the 2 epochs that ran and predicts exactly as a
  2-epoch fit (``ctrl_c``, which also says whether ``KeyboardInterrupt`` was raised:
  **stopped**).

All probes (about 1.5 minutes on two shared cores, one torch thread)::

    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 python benchmarks/durable_runs.py
    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/durable_runs.py --probes mix steps

``--json PATH`` also writes the rows, with each refusal's message and where the kills landed.

It is a measurement, not a test: it asserts nothing. Public names only, with two tricks the
probes need: ``steps`` replaces ``os.replace`` and ``os.unlink`` for the length of one fit
(the library calls them through the ``os`` module), and ``interrupts`` wraps
``NGEBMClassifier.train_step`` (skorch's) in the forked command to learn that a fit trains.
``PYTHONPATH=other/checkout`` measures another version: on the commit before issue #41
(``e6d2ca2``) every probe but the Ctrl-C estimator's state reports a difference, a refusal of a
run a kill left, a moved generator, a replaced report or an allocator error (issue #41's note;
``docs/user_guide/saving.md``, "Resuming a killed run exactly").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from joblib import parallel_backend
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from skorch.callbacks import Callback, Checkpoint, LoadInitState
from skorch.history import History

import ebmclassifier
from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier, cli, load
from ebmclassifier.augment import GaussianNoise

Row = dict[str, str]
EPOCHS = 6  # of the checkpointed fits (mix, steps)
STREAM_EPOCHS = (3, 4)  # epochs of the stream's two tasks


def blobs() -> tuple[np.ndarray, np.ndarray]:
    """150 points of three Gaussian blobs in 4 dimensions, seeded."""
    rng = np.random.default_rng(0)
    centers = np.array([[2.0, 0, 0, 0], [-2.0, 0, 0, 0], [0, 2.0, 0, 0]])
    labels = rng.integers(0, 3, size=150)
    points = centers[labels] + 0.5 * rng.standard_normal((150, 4))
    return points.astype(np.float32), labels


X, Y = blobs()


def row(probe: str, case: str, outcome: str, detail: str = "") -> Row:
    return {"probe": probe, "case": case, "outcome": outcome, "detail": detail}


def difference(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


def same(a, b) -> str:
    """``bitwise``, or ``off`` and the largest absolute difference."""
    d = difference(a, b)
    return "bitwise" if d == 0 else f"off {d:.2g}"


def tally(outcomes: list[str]) -> str:
    """``bitwise x12`` or ``bitwise x7, refused x5``."""
    return ", ".join(f"{k} x{n}" for k, n in sorted(Counter(outcomes).items()))


def fork_and_kill(target: Callable[[], object], delay: float | None) -> int | None:
    """Run ``target`` in a forked process, SIGKILL it after ``delay`` seconds (unless None)."""
    process = multiprocessing.get_context("fork").Process(target=target)
    process.start()
    if delay is not None:
        time.sleep(delay)
        os.kill(process.pid, signal.SIGKILL)
    process.join()
    return process.exitcode


class Killed(Exception):
    """Raised by :class:`KillAt`: the run ends there, its files as they were written."""


class KillAt(Callback):
    """Stop the fit (an exception) at the end of epoch ``at``."""

    def __init__(self, at: int):
        self.at = at

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.at:
            raise Killed


class SigkillAt(Callback):
    """SIGKILL this process at the end of epoch ``at``."""

    def __init__(self, at: int):
        self.at = at

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.at:
            os.kill(os.getpid(), signal.SIGKILL)


class CopyAt(Callback):
    """Copy the folder ``source`` to ``target`` at the end of epoch ``at``."""

    def __init__(self, at: int, source: Path, target: Path):
        self.at, self.source, self.target = at, source, target

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.at:
            shutil.copytree(self.source, self.target)


class SaveEachEpoch(Callback):
    """The guide's recipe: ``save`` at the end of each epoch."""

    def __init__(self, path: Path):
        self.path = path

    def on_epoch_end(self, net, **kwargs):
        net.save(self.path)


# ---------------------------------------------------------------- threads, grid


def threaded_estimators() -> dict[str, Callable[[], object]]:
    """name -> a seeded estimator whose fit draws besides the batch order."""
    return {
        "NG-EBM (noise, negatives=1)": lambda: NGEBMClassifier(
            max_epochs=15,
            batch_size=16,
            module__hidden_sizes=(16,),
            negatives=1,
            augmentation=GaussianNoise(0.1),
            random_state=0,
            n_threads=1,
        ),
        "JEM": jem,
        "latent (Gumbel)": lambda: LatentStructureClassifier(
            n_latent=3, gradient="gumbel", max_epochs=6, batch_size=16, random_state=0, n_threads=1
        ),
    }


def jem() -> JEMClassifier:
    return JEMClassifier(
        max_epochs=4,
        batch_size=16,
        module__hidden_sizes=(16,),
        sgld_steps=3,
        buffer_size=60,
        random_state=0,
        n_threads=1,
    )


def fitted_in_two_threads(make: Callable[[], object]) -> list:
    fitted = [None, None]

    def fit(i: int) -> None:
        fitted[i] = make().fit(X, Y)

    threads = [threading.Thread(target=fit, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return fitted


def probe_threads(trials: int) -> list[Row]:
    rows, kept = [], True
    for name, make in threaded_estimators().items():
        worst = 0.0
        for _ in range(trials):
            before = torch.get_rng_state()
            alone = make().fit(X, Y).predict_proba(X)
            for clf in fitted_in_two_threads(make):
                worst = max(worst, difference(clf.predict_proba(X), alone))
            kept = kept and torch.equal(before, torch.get_rng_state())
        outcome = "bitwise" if worst == 0 else f"off {worst:.2g}"
        rows.append(row("threads", f"{name}: 2 clones in threads vs alone", outcome))
    generator = "intact" if kept else "moved"
    rows.append(row("threads", "caller's torch generator over all fits", generator))
    return rows


def probe_grid() -> list[Row]:
    search = GridSearchCV(jem(), {"lr": [1e-3, 1e-2]}, cv=2, scoring="neg_log_loss", n_jobs=2)
    sequential = clone(search).set_params(n_jobs=1).fit(X, Y).cv_results_
    with parallel_backend("threading", n_jobs=2):
        threaded = clone(search).fit(X, Y).cv_results_
    splits = ("split0_test_score", "split1_test_score")
    worst = max(difference(threaded[k], sequential[k]) for k in splits)
    outcome = "bitwise" if worst == 0 else f"off {worst:.2g}"
    return [row("grid", "GridSearchCV(JEM) threading vs sequential, split scores", outcome)]


# ---------------------------------------------------------------- checkpoints


def ngebm(**params) -> NGEBMClassifier:
    defaults = {"module__hidden_sizes": (8,), "max_epochs": EPOCHS, "batch_size": 32}
    return NGEBMClassifier(**{**defaults, "random_state": 0, **params})


def checkpoint(folder: Path) -> Checkpoint:
    return Checkpoint(monitor=None, dirname=str(folder), f_training_state="training_state.pt")


def epochs_saved(folder: Path) -> int:
    history = folder / "history.json"
    return len(History.from_file(str(history))) if history.exists() else 0


def resumed(folder: Path, epochs: int) -> NGEBMClassifier:
    """The guide's ``LoadInitState`` recipe: the epochs left, from the checkpoint in ``folder``."""
    callback = checkpoint(folder)
    left = epochs - epochs_saved(folder)
    return ngebm(max_epochs=left, callbacks=[callback, LoadInitState(callback)]).fit(X, Y)


def resume_outcome(folder: Path, reference, epochs: int) -> tuple[str, str]:
    """(outcome, detail) of resuming the checkpoint in ``folder`` to ``epochs``."""
    try:
        clf = resumed(folder, epochs)
    except ValueError as err:
        return "refused", str(err)
    except Exception as err:  # an outcome to report, not to hide
        return f"error {type(err).__name__}", str(err)
    return same(clf.predict_proba(X), reference.predict_proba(X)), ""


def probe_mix(root: Path) -> list[Row]:
    reference = ngebm().fit(X, Y)
    run, third = root / "run", root / "epoch3"
    with contextlib.suppress(Killed):
        ngebm(callbacks=[checkpoint(run), CopyAt(3, run, third), KillAt(4)]).fit(X, Y)
    rows = []
    for newer in ("optimizer.pt", "params.pt", "history.json", "training_state.pt"):
        mixed = root / f"mixed_{newer}"
        shutil.copytree(third, mixed)
        shutil.copy(run / newer, mixed / newer)
        outcome, detail = resume_outcome(mixed, reference, EPOCHS)
        rows.append(row("mix", f"epoch-3 checkpoint with epoch 4's {newer}", outcome, detail))
    return rows


class Watch(Callback):
    """Sets ``state["on"]`` for the write of epoch ``at``'s checkpoint (put it before it)."""

    def __init__(self, state: dict, at: int):
        self.state, self.at = state, at

    def on_epoch_end(self, net, **kwargs):
        self.state["on"] = len(net.history) == self.at


class Unwatch(Callback):
    """Clears ``state["on"]`` (put it after the checkpoint)."""

    def __init__(self, state: dict):
        self.state = state

    def on_epoch_end(self, net, **kwargs):
        self.state["on"] = False


@contextlib.contextmanager
def copies_before_each_step(folder: Path, copies: Path, state: dict):
    """While ``state["on"]``, copy ``folder`` before each ``os.replace`` and ``os.unlink``."""
    taken: list[Path] = []
    replace, unlink = os.replace, os.unlink

    def copy() -> None:
        if state["on"] and folder.exists():
            taken.append(copies / str(len(taken)))
            shutil.copytree(folder, taken[-1])

    def copy_then_replace(*args, **kwargs):
        copy()
        return replace(*args, **kwargs)

    def copy_then_unlink(*args, **kwargs):
        copy()
        return unlink(*args, **kwargs)

    os.replace, os.unlink = copy_then_replace, copy_then_unlink
    try:
        yield taken
    finally:
        os.replace, os.unlink = replace, unlink


def probe_steps(root: Path) -> list[Row]:
    epochs, run, state = 4, root / "run", {"on": False}
    reference = ngebm(max_epochs=epochs).fit(X, Y)
    (root / "kills").mkdir()
    with copies_before_each_step(run, root / "kills", state) as taken:
        callbacks = [Watch(state, 3), checkpoint(run), Unwatch(state)]
        ngebm(max_epochs=epochs, callbacks=callbacks).fit(X, Y)
    outcomes = [resume_outcome(copy, reference, epochs)[0] for copy in taken]
    case = f"killed before each of the {len(taken)} renames/removals of epoch 3's write"
    return [row("steps", case, tally(outcomes))]


def probe_sigkills(root: Path, kills: int, seed: int) -> list[Row]:
    epochs = 20
    reference = ngebm(max_epochs=epochs).fit(X, Y)
    start = time.perf_counter()  # the checkpointed fit: the kills' moments span all of it
    ngebm(max_epochs=epochs, callbacks=[checkpoint(root / "timed")]).fit(X, Y)
    seconds = time.perf_counter() - start
    outcomes, landed = [], []
    for k in range(kills):
        folder = root / str(k)
        delay = random.Random(seed + k).uniform(0.1, 1.0) * seconds

        def run(folder: Path = folder) -> None:
            ngebm(max_epochs=epochs, callbacks=[checkpoint(folder)]).fit(X, Y)

        fork_and_kill(run, delay)
        landed.append(epochs_saved(folder))
        outcomes.append(resume_outcome(folder, reference, epochs)[0])
    case = f"checkpointed fit of {epochs} epochs, {kills} SIGKILLs at random moments"
    detail = f"epochs saved when killed: {landed}"
    return [row("sigkills", case, tally(outcomes), detail)]


# ---------------------------------------------------------------- streams


def incremental(name: str, seed: int = 0, **params):
    shared = {"module__hidden_sizes": (8,), "batch_size": 16, "random_state": seed}
    shared |= {"class_incremental": True, "replay_per_class": 5, **params}
    if name == "JEM":
        return JEMClassifier(**shared, sgld_steps=3, buffer_size=40)
    return NGEBMClassifier(**shared)


def tasks() -> list[tuple[np.ndarray, np.ndarray]]:
    first = Y != 2
    return [(X[first], Y[first]), (X[~first], Y[~first])]


def stream(clf, start: int = 0):
    """``fit`` on task 0, then ``partial_fit`` on the next, from task ``start``."""
    for t in range(start, len(STREAM_EPOCHS)):
        clf.set_params(max_epochs=STREAM_EPOCHS[t])
        if t == 0:
            clf.fit(*tasks()[t])
        else:
            clf.partial_fit(*tasks()[t])
    return clf


def finished(name: str, seed: int, path: Path):
    """The stream resumed from ``path`` as the guide says (or run whole if nothing was saved)."""
    if not path.exists():
        return stream(incremental(name, seed))
    clf = load(path, callbacks=None)
    ends = np.cumsum(STREAM_EPOCHS)
    t = int(np.searchsorted(ends, len(clf.history)))
    left = int(ends[t] - len(clf.history))
    if left:
        clf.set_params(max_epochs=left).partial_fit(*tasks()[t])
    return stream(clf, t + 1)


def killed_at_the_boundary(root: Path, name: str) -> Row:
    reference = stream(incremental(name))
    path = root / f"boundary_{name}.ebm"
    callbacks = [SaveEachEpoch(path), SigkillAt(STREAM_EPOCHS[0])]
    fork_and_kill(lambda: stream(incremental(name, callbacks=callbacks)), None)
    clf = finished(name, 0, path)
    rows = f"{len(clf.reservoir_y_)} of {len(reference.reservoir_y_)}"
    counts = np.array_equal(clf.class_count_, reference.class_count_)
    detail = f"reservoir rows {rows}, class_count_ equal: {counts}"
    case = f"{name} stream SIGKILLed right after task 1's last file"
    return row("streams", case, same(clf.predict_proba(X), reference.predict_proba(X)), detail)


def killed_at_random(root: Path, kills: int, seeds: int, seed: int) -> Row:
    outcomes, landed = [], []
    for k in range(kills):
        clf_seed = k % seeds
        reference = stream(incremental("NG-EBM", clf_seed))
        path = root / f"random_{k}.ebm"
        start = time.perf_counter()  # the saving stream: the kill's moment spans all of it
        stream(incremental("NG-EBM", clf_seed, callbacks=[SaveEachEpoch(root / "timed.ebm")]))
        delay = random.Random(seed + k).uniform(0.1, 1.0) * (time.perf_counter() - start)

        def run(path: Path = path, clf_seed: int = clf_seed) -> None:
            stream(incremental("NG-EBM", clf_seed, callbacks=[SaveEachEpoch(path)]))

        fork_and_kill(run, delay)
        landed.append(len(load(path, callbacks=None).history) if path.exists() else 0)
        clf = finished("NG-EBM", clf_seed, path)
        outcomes.append(same(clf.predict_proba(X), reference.predict_proba(X)))
    case = f"NG-EBM stream, {kills} SIGKILLs at random moments (seeds 0-{seeds - 1})"
    return row("streams", case, tally(outcomes), f"epochs saved when killed: {landed}")


def probe_streams(root: Path, kills: int, seeds: int, seed: int) -> list[Row]:
    rows = [killed_at_the_boundary(root, name) for name in ("NG-EBM", "JEM")]
    return [*rows, killed_at_random(root, kills, seeds, seed)]


# ---------------------------------------------------------------- interrupts, memory

COMPARE = (
    "compare --data digits --models ce --seeds 1 --epochs 50 --max-train 200 --max-test 100 "
    "--n-attack 20 --no-progress"
).split()


def compare_interrupted(out: Path, errors: Path) -> int | None:
    """Run ``compare`` in a forked process, SIGINT it once a fit trains; its exit status.
    Its standard error goes to ``errors``."""
    context = multiprocessing.get_context("fork")
    training = context.Event()

    def command() -> None:
        with open(errors, "w") as file, open(os.devnull, "w") as quiet:
            os.dup2(file.fileno(), 2)  # the command's own words, for the JSON's detail
            os.dup2(quiet.fileno(), 1)  # a summary, if the command went on to write its report
        step = NGEBMClassifier.train_step  # compare's "ce" is an NGEBMClassifier

        def tell_then_step(self, *args, **kwargs):
            training.set()
            return step(self, *args, **kwargs)

        NGEBMClassifier.train_step = tell_then_step
        os._exit(cli.main([*COMPARE, "--out", str(out)]))

    process = context.Process(target=command)
    process.start()
    while not training.wait(timeout=0.1):
        if not process.is_alive():
            return process.exitcode
    os.kill(process.pid, signal.SIGINT)
    process.join()
    return process.exitcode


def probe_interrupts(root: Path) -> list[Row]:
    out = root / "out"
    out.mkdir()
    (out / "report.md").write_text("previous")
    status = compare_interrupted(out, root / "stderr.txt")
    unchanged = (out / "report.md").read_text() == "previous"
    files = sorted(path.name for path in out.iterdir())
    intact = status == 130 and unchanged and files == ["report.md"]
    said = " ".join((root / "stderr.txt").read_text().split())
    detail = f"exit {status}, report.md unchanged: {unchanged}, files in --out: {files}; {said}"
    case = "SIGINT during compare --epochs 50 over an existing report"
    return [row("interrupts", case, "intact" if intact else "changed", detail)]


class CtrlCAt(Callback):
    """SIGINT this process (as Ctrl-C does) at the end of epoch ``at``."""

    def __init__(self, at: int):
        self.at = at

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.at:
            signal.raise_signal(signal.SIGINT)


def probe_ctrl_c() -> list[Row]:
    clf = ngebm(max_epochs=5, callbacks=[CtrlCAt(2)])
    try:
        clf.fit(X, Y)
        stopped, detail = "returned", ""
    except KeyboardInterrupt as err:
        stopped, detail = "stopped", f"KeyboardInterrupt: {err}"
    two = ngebm(max_epochs=2).fit(X, Y)
    kept = same(clf.predict_proba(X), two.predict_proba(X))
    intact = "intact" if len(clf.history) == 2 and kept == "bitwise" else "changed"
    detail += f"; len(history) {len(clf.history)}, vs a 2-epoch fit: {kept}"
    case = "fit of 5 epochs, Ctrl-C at the end of epoch 2 (estimator vs a 2-epoch fit)"
    return [row("ctrl_c", case, f"{stopped}, {intact}", detail)]


def probe_memory() -> list[Row]:
    clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(10**6, 10**6))
    try:
        clf.fit(X, Y)
        outcome, detail = "fitted", ""
    except ValueError as err:
        outcome, detail = "refused", str(err)
    except Exception as err:  # the allocator's error: an outcome to report
        outcome, detail = f"error {type(err).__name__}", str(err)
    return [row("memory", "fit of module__hidden_sizes=(10**6, 10**6)", outcome, detail)]


# ---------------------------------------------------------------- the command

PROBES = "threads grid mix steps sigkills streams interrupts ctrl_c memory".split()


def run_probe(name: str, args: argparse.Namespace, root: Path) -> list[Row]:
    folder = root / name
    folder.mkdir()
    calls = {
        "threads": lambda: probe_threads(args.trials),
        "grid": probe_grid,
        "mix": lambda: probe_mix(folder),
        "steps": lambda: probe_steps(folder),
        "sigkills": lambda: probe_sigkills(folder, args.kills, args.seed),
        "streams": lambda: probe_streams(folder, args.stream_kills, args.stream_seeds, args.seed),
        "interrupts": lambda: probe_interrupts(folder),
        "ctrl_c": probe_ctrl_c,
        "memory": probe_memory,
    }
    return calls[name]()


def parsed(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", nargs="+", choices=PROBES, default=PROBES, metavar="NAME")
    parser.add_argument("--trials", type=int, default=3, help="threads: trials per model")
    parser.add_argument("--kills", type=int, default=12, help="sigkills: kills (default 12)")
    parser.add_argument("--stream-kills", type=int, default=12, help="streams: random kills")
    parser.add_argument("--stream-seeds", type=int, default=3, help="streams: random_states")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kills' moments")
    parser.add_argument("--json", type=Path, help="also write the rows (with details) here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parsed(argv)
    torch.set_num_threads(1)  # the figures of issue #41's note: one torch thread
    warnings.filterwarnings("ignore")  # skorch's and sklearn's, about the tiny fits
    print(f"ebmclassifier {ebmclassifier.__file__}, torch {torch.__version__}, 1 torch thread")
    print("\n| probe | case | outcome |\n|---|---|---|", flush=True)
    rows, seconds = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.probes:
            start = time.perf_counter()
            for found in run_probe(name, args, Path(tmp)):
                rows.append(found)
                print(f"| {found['probe']} | {found['case']} | {found['outcome']} |", flush=True)
            seconds[name] = round(time.perf_counter() - start, 1)
    print("\nseconds: " + ", ".join(f"{name} {s:g}" for name, s in seconds.items()))
    if args.json:
        record = {"library": ebmclassifier.__file__, "torch": torch.__version__}
        record |= {"argv": sys.argv[1:], "seconds": seconds, "rows": rows}
        args.json.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
