"""The two files of every command's report: ``report.md`` and ``results.json``.

The one writer of both, for ``compare`` (:mod:`~ebmclassifier.experiments.report`) and
``continual`` (:mod:`~ebmclassifier.experiments._continual_report`); the figures are drawn and
saved by :mod:`ebmclassifier.plotting`. A Ctrl-C while a command writes its report takes effect
once the report is whole (:func:`interrupts_deferred`), so that the report in ``--out`` is
always one run's: the previous one, or this one complete.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .._utils.atomic import write_file

__all__ = ["InterruptedAfterReport", "interrupts_deferred", "jsonable", "save_report"]


class InterruptedAfterReport(KeyboardInterrupt):
    """Ctrl-C arrived while the report was written; it was finished first."""


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back SIGINT (Ctrl-C) for the block, then raise :class:`InterruptedAfterReport`.

    In the main thread only (the one Python delivers signals to); elsewhere the block runs as
    it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
    if received:
        raise InterruptedAfterReport(
            "interrupted while the report was written; it was written whole first"
        )


def jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def save_report(out, markdown: str, payload: dict) -> None:
    """Write a command's report into the folder ``out``: ``report.md`` and ``results.json``.

    Parameters
    ----------
    out : str or path-like
        The folder; created if needed. Each file is replaced at once, whole or not at all.
    markdown : str
        The text of ``report.md``.
    payload : dict
        The content of ``results.json``; numpy values become plain ones and keys starting
        with ``_`` (the arrays kept for the figures) are left out.

    Returns
    -------
    None

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as out:
    ...     save_report(out, "# A report", {"accuracy": np.float32(0.5), "_arrays": [1]})
    ...     json.loads(Path(out, "results.json").read_text())
    {'accuracy': 0.5}
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(jsonable(payload), indent=2)  # before writing: nothing half-written
    write_file(out / "report.md", markdown)
    write_file(out / "results.json", text)
