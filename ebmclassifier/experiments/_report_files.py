"""The two files of every command's report: ``report.md`` and ``results.json``.

The one writer of both, for ``compare`` (:mod:`~ebmclassifier.experiments.report`) and
``continual`` (:mod:`~ebmclassifier.experiments._continual_report`); the figures are drawn and
saved by :mod:`ebmclassifier.plotting`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .._utils.atomic import write_file

__all__ = ["jsonable", "save_report"]


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
