"""An interrupted command stops: Ctrl-C (SIGINT) exits non-zero and leaves the report alone.

skorch ends a fit on a ``KeyboardInterrupt`` and returns as if it had run its course; the
command then measured the partly trained model and replaced the previous report with one that
said "150 epochs per model" for a model that trained 97, and exited 0. The command runs in a
forked process (no second import of torch), which tells the test when a fit has begun.
"""

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ebmclassifier import cli
from ebmclassifier._estimator.base import EBMClassifierBase
from ebmclassifier.experiments._report_files import InterruptedAfterReport, interrupts_deferred

COMMANDS = {
    "compare": [
        "compare", "--data", "digits", "--models", "ce", "--seeds", "1", "--epochs", "50",
        "--max-train", "200", "--max-test", "100", "--n-attack", "20", "--no-progress",
    ],
    "continual": [
        "continual", "--data", "digits", "--tasks", "0,1/2,3", "--methods", "ce",
        "--seeds", "1", "--epochs", "50", "--hidden", "8", "--quiet",
    ],
}  # fmt: skip


@pytest.fixture(autouse=True)
def _ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt in these tests and in the commands they fork, however
    pytest was started: a shell starts a background job (``pytest &``) with SIGINT ignored,
    Python then installs no handler, and the job and its children ignore Ctrl-C."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _interrupted(argv: list[str]) -> int:
    """Run the command line in a forked process, SIGINT it once a fit trains its first
    batch; its exit status."""
    context = multiprocessing.get_context("fork")
    training = context.Event()

    def command():
        step = EBMClassifierBase.train_step

        def tell_then_step(self, *args, **kwargs):  # inside skorch's loop
            training.set()
            return step(self, *args, **kwargs)

        EBMClassifierBase.train_step = tell_then_step
        os._exit(cli.main(argv))

    process = context.Process(target=command)
    process.start()
    while not training.wait(timeout=0.1):
        assert process.is_alive(), f"the command ended before a fit began: {process.exitcode}"
    os.kill(process.pid, signal.SIGINT)
    process.join(timeout=300)
    return process.exitcode


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_ctrl_c_stops_the_command_and_leaves_the_previous_report(tmp_path, command, capfd):
    out = tmp_path / "out"
    out.mkdir()
    previous = {"report.md": "# the previous run's report\n", "results.json": '{"runs": []}'}
    for name, text in previous.items():
        (out / name).write_text(text)
    status = _interrupted([*COMMANDS[command], "--out", str(out)])
    assert status == 130
    assert {p.name: p.read_text() for p in out.iterdir()} == previous  # nothing else written
    assert "interrupted" in capfd.readouterr().err


def test_a_fit_interrupted_in_a_callback_raises_after_skorchs_clean_up(small_blobs):
    X, y = small_blobs
    from skorch.callbacks import Callback

    ended = []

    class CtrlC(Callback):
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 2:
                signal.raise_signal(signal.SIGINT)  # as Ctrl-C: Python raises KeyboardInterrupt

        def on_train_end(self, net, **kwargs):
            ended.append(len(net.history))

    clf = EBMClassifierBase(max_epochs=5, module__hidden_sizes=(8,), callbacks=[CtrlC()])
    with pytest.raises(
        KeyboardInterrupt, match="training was interrupted: 2 of this call's 5 epochs"
    ):
        clf.fit(X, y)
    assert ended == [2]  # skorch's on_train_end ran first
    assert clf.predict(X).shape == (len(X),)  # the estimator keeps what it trained


def test_early_stopping_is_no_interrupt(small_blobs):
    from skorch.callbacks import EarlyStopping
    from skorch.dataset import ValidSplit

    X, y = small_blobs
    stop = EarlyStopping(patience=1, threshold=100.0)  # no epoch improves that much
    clf = EBMClassifierBase(max_epochs=20, train_split=ValidSplit(3), callbacks=[stop])
    assert len(clf.fit(X, y).history) == 2


def test_ctrl_c_while_the_report_is_written_takes_effect_after_it():
    written = []
    with pytest.raises(InterruptedAfterReport, match="written whole first"):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
            written.append("report.md")
    assert written == ["report.md"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    outside = []
    thread = threading.Thread(target=lambda: outside.append(_deferred_in_a_thread()))
    thread.start()
    thread.join()
    assert outside == ["ran"]


def _deferred_in_a_thread() -> str:
    with interrupts_deferred():  # no signal handler can be set here: the block just runs
        return "ran"


@pytest.mark.slow
def test_these_tests_pass_when_pytest_starts_with_ctrl_c_ignored():
    # as `python -m pytest &` from a script: every Ctrl-C test failed, the commands ran on.
    # One command (a forked child inherits the handler, as each does) and the in-process ones
    def ignore_ctrl_c():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    this = Path(__file__)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n0", "-p", "no:cacheprovider", str(this),
         "-k", "not pytest_starts_with_ctrl_c_ignored and not continual"],
        preexec_fn=ignore_ctrl_c, capture_output=True, text=True, timeout=600,
        cwd=this.parents[2],
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "4 passed" in run.stdout, run.stdout[-3000:]
