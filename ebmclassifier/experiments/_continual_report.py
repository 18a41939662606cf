"""The continual command's report: the summary over seeds, its table, the figures, report.md.

:func:`~ebmclassifier.experiments.continual.run_continual` makes the runs; this module turns
them into what ``python -m ebmclassifier continual`` prints and writes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..plotting import plot_accuracy_matrices, plot_task_curves
from ._continual_methods import merge_coinciding, method_notes
from ._report_files import save_report

__all__ = ["format_table", "summarize_runs", "write_continual_report"]


def summarize_runs(runs: list[dict]) -> list[dict]:
    """Per (data, method): median, min and max over seeds of the final metrics.

    Methods whose accuracy matrices are identical on every seed of a data set are one row,
    under the first one's name, with the others in ``same_as``.

    Parameters
    ----------
    runs : list of dict
        From :func:`run_continual`.

    Returns
    -------
    list of dict
        ``data``, ``method``, ``seeds``, ``same_as`` and for each of ``average_accuracy``,
        ``forgetting``, ``ece`` (after the last task), ``ood_auroc`` (mean over the tasks
        before the last) and ``bytes_stored`` a ``(median, min, max)`` triple; ``curve``, the
        median average accuracy after each task.

    Examples
    --------
    >>> from ebmclassifier.experiments.continual import run_continual
    >>> runs = run_continual(methods=["ce"], tasks="0,1/2,3", epochs=1, progress=False)
    >>> row = summarize_runs(runs)[0]
    >>> row["method"], len(row["curve"]), len(row["average_accuracy"]), row["same_as"]
    ('ce', 2, 3, [])
    """
    rows = []
    for data, method in dict.fromkeys((r["data"], r["method"]) for r in runs):
        group = [r for r in runs if r["data"] == data and r["method"] == method]
        row = {"data": data, "method": method, "seeds": [r["seed"] for r in group]}
        final = {
            "average_accuracy": [r["steps"][-1]["average_accuracy"] for r in group],
            "forgetting": [r["steps"][-1]["forgetting"] or 0.0 for r in group],
            "ece": [r["steps"][-1]["ece"] for r in group],
            "ood_auroc": [
                float(np.mean([s["ood_auroc"] for s in r["steps"][:-1]]))
                if len(r["steps"]) > 1
                else float("nan")
                for r in group
            ],
            "bytes_stored": [r.get("bytes_stored", 0) for r in group],
        }
        for key, values in final.items():
            row[key] = (float(np.median(values)), float(np.min(values)), float(np.max(values)))
        curves = np.array([[s["average_accuracy"] for s in r["steps"]] for r in group])
        row["curve"] = np.median(curves, axis=0).tolist()
        row["same_as"] = []
        rows.append(row)
    return merge_coinciding(rows, runs)


def format_table(summary: list[dict]) -> str:
    """A markdown table of :func:`summarize_runs`'s rows: median [min-max] over seeds.

    A row that stands for methods with identical results names them all (``ce_batch =
    ce_k1``).

    Parameters
    ----------
    summary : list of dict

    Returns
    -------
    str

    Examples
    --------
    >>> row = {"data": "digits", "method": "ce", "seeds": [0], "average_accuracy": (0.2,) * 3,
    ...        "forgetting": (0.9,) * 3, "ece": (0.5,) * 3, "ood_auroc": (0.6,) * 3,
    ...        "bytes_stored": (0.0,) * 3, "same_as": []}
    >>> format_table([row]).splitlines()[2].split(" | ")[:4]
    ['| digits', 'ce', '0.200 [0.200-0.200]', '0.900 [0.900-0.900]']
    """
    keys = ("average_accuracy", "forgetting", "ece", "ood_auroc")
    lines = [
        "| data | method | final average accuracy | forgetting | ECE | OOD AUROC (unseen) "
        "| bytes stored |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary:
        cells = [f"{row[k][0]:.3f} [{row[k][1]:.3f}-{row[k][2]:.3f}]" for k in keys]
        cells.append(_size(row["bytes_stored"][0]))
        name = " = ".join([row["method"], *row["same_as"]])
        lines.append(f"| {row['data']} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _size(n_bytes: float) -> str:
    """``0``, ``31.2 KiB``, ``1.5 MiB``."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes:.0f}"


def _median_matrices(runs: list[dict]) -> dict[str, np.ndarray]:
    """Method -> its accuracy matrix, the median over seeds (NaN above the diagonal)."""
    matrices = {}
    for method in dict.fromkeys(r["method"] for r in runs):
        stack = [r["accuracy_matrix"] for r in runs if r["method"] == method]
        n = len(stack[0])
        matrix = np.full((len(stack), n, n), np.nan)
        for s, m in enumerate(stack):
            for t, row in enumerate(m):
                matrix[s, t, : len(row)] = row
        matrices[method] = np.median(matrix, axis=0)
    return matrices


def _figures(runs: list[dict], summary: list[dict], out: Path) -> list[str]:
    """Per data set, the accuracy curves and the accuracy matrices; their file names (a
    method that another's row stands for is not drawn)."""
    names = []
    for data in dict.fromkeys(r["data"] for r in runs):
        rows = [s for s in summary if s["data"] == data]
        shown = {row["method"] for row in rows}
        curves = {row["method"]: row["curve"] for row in rows}
        styles = {m: "--" if m == "joint" else ":" if "replay" in m else "-" for m in curves}
        name = f"continual_{data}_curves.png"
        plot_task_curves(
            curves, styles=styles, title=f"split {data}: median over seeds", path=out / name
        )
        names.append(name)
        name = f"continual_{data}_matrices.png"
        drawn = [r for r in runs if r["data"] == data and r["method"] in shown]
        plot_accuracy_matrices(_median_matrices(drawn), path=out / name)
        names.append(name)
    return names


def write_continual_report(runs: list[dict], out, command: str = "") -> list[str]:
    """Write ``report.md``, ``results.json`` and the figures into ``out``.

    Through the reports' one writer (:func:`~ebmclassifier.experiments._report_files.save_report`)
    and the figures of :mod:`ebmclassifier.plotting`.

    Parameters
    ----------
    runs : list of dict
        From :func:`run_continual`.
    out : str or path-like
        The folder; created if needed.
    command : str, default=""
        The command line that reproduces the run, written into the report.

    Returns
    -------
    list of str
        The figures' file names.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from ebmclassifier.experiments.continual import run_continual
    >>> runs = run_continual(methods=["ce"], tasks="0,1/2,3", epochs=1, progress=False)
    >>> with tempfile.TemporaryDirectory() as out:
    ...     figures = write_continual_report(runs, out)
    ...     files = sorted(path.name for path in Path(out).iterdir())
    >>> files
    ['continual_digits_curves.png', 'continual_digits_matrices.png', 'report.md', 'results.json']
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize_runs(runs)
    figures = _figures(runs, summary, out)
    text = [
        "# Class-incremental learning",
        "",
        f"`{command}`" if command else "",
        "",
        "Median [min-max] over seeds, after the last task; forgetting as Chaudhry et al. "
        "(2018); OOD AUROC: the energy, the classes not yet seen against those seen, mean "
        "over the tasks before the last; bytes stored: what a method keeps besides its "
        "network after the last task (median).",
        "",
        format_table(summary),
        "",
        *method_notes(summary),
        "",
    ]
    text += [f"![{name}]({name})" for name in figures]
    payload = {"command": command, "summary": summary, "runs": runs}
    save_report(out, "\n".join(text) + "\n", payload)
    return figures
