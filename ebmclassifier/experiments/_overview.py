"""What ``compare`` prints: the README's summary table, one column per data set, and the
verdicts that matter (:func:`~._verdicts.key_verdicts`); ``report.md`` keeps every table, the
per-set and per-detector verdicts and the figures.

The table's cells list models in the order of the row's label, ``a / b / c``, medians over
seeds. Its OOD rows judge each contender on its worst set with one score, fixed before any
data is seen (:func:`~._tables.ood_entries`): the score a user would deploy without knowing
which OOD set comes, the one the histograms of ``report.md`` show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ._tables import (
    _NORMS,
    NEAR_SET,
    _attack_index,
    _one_line,
    _table,
    busy_machine_note,
    far_sets,
    ood_entries,
)
from ._timing import UNRELIABLE, UNRELIABLE_NOTE, mark_spread

#: How the OOD contenders are named in the summary table's labels.
_OOD_LABELS = {"ce": "ce energy", "ce + detector": "detector on ce"}


def _row(what: str, cells: list[dict[str, str]], labels: dict | None = None) -> list[str] | None:
    """One row of the summary: ``what: a / b / c`` and, per data set, its values in that
    order (``n/a`` for a model the data set lacks); None when no data set has a value.
    ``labels`` renames entries in the row's label."""
    names = list(dict.fromkeys(name for cell in cells for name in cell))
    if not names:
        return None
    label = f"{what}: " + " / ".join((labels or {}).get(name, name) for name in names)
    return [label] + [" / ".join(cell.get(name, "n/a") for name in names) for cell in cells]


def _median(stat, digits: int = 3) -> str:
    return "n/a" if stat is None else f"{stat['median']:.{digits}f}"


def _cost(stat) -> str:
    """A cost ratio's median, marked unreliable when its seeds spread widely."""
    return "n/a" if stat is None else mark_spread(_median(stat, 2), stat["min"], stat["max"])


def _scalar_cells(
    all_results, summaries, metric: str, keep: Callable, fmt: Callable = _median
) -> list[dict[str, str]]:
    return [
        {m: fmt(s["scalars"].get(metric)) for m, s in summary.items() if keep(results, m)}
        for results, summary in zip(all_results, summaries, strict=True)
    ]


def _ood_cells(all_results, summaries, sets_of: Callable) -> list[dict[str, str]]:
    cells = []
    for results, summary in zip(all_results, summaries, strict=True):
        entries = ood_entries(results, summary, sets_of(results))
        cells.append(
            {
                label: _median(stat) + (f" ({score})" if label == "ce + detector" else "")
                for label, (score, stat) in entries.items()
            }
        )
    return cells


def _robust_row(all_results, summaries) -> list[str] | None:
    cells, radii = [], []
    for results, summary in zip(all_results, summaries, strict=True):
        j = _attack_index(results["epsilons"])
        radii.append(f"{results['epsilons'][j]:.3g}")
        cells.append(
            {
                m: _median(s["robust_accuracy"][j])
                for m, s in summary.items()
                if s["robust_accuracy"]
            }
        )
    norm = _NORMS[all_results[0]["config"]["norm"]]
    if len(set(radii)) == 1:
        eps = f"eps {radii[0]}"
    else:
        names = [results["data"]["name"] for results in all_results]
        eps = "eps " + ", ".join(f"{r} ({n})" for r, n in zip(radii, names, strict=True))
    return _row(f"accuracy under {norm} PGD, {eps}", cells)


def overview_table(all_results: Sequence[dict], summaries: Sequence[dict]) -> str:
    """The summary table of one or several data sets, as the README shows it.

    Rows: ECE of every model; accuracy (a temperature-scaled model keeps its base model's);
    far-OOD AUROC on the worst far set and, with ``--ood-classes``, the AUROC on the held-out
    classes (CE's energy, the first of ``--detectors`` on CE's features, each other model's
    headline score: every one fixed in advance); accuracy under PGD at the middle radius;
    training cost per epoch against CE (marked ``(unreliable)`` when its seeds spread widely,
    :func:`~._timing.mark_spread`, and then explained under the table).

    Parameters
    ----------
    all_results : sequence of dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison`, one per data set.
    summaries : sequence of dict
        Their :func:`~._tables.summarise`.

    Returns
    -------
    table : str
        Markdown, one column per data set.
    """
    n_far = {len(far_sets(r)) for r in all_results}
    worst = f"worst of {n_far.pop()} sets" if len(n_far) == 1 else "worst set"
    rows = [
        _row("ECE", _scalar_cells(all_results, summaries, "ece", lambda r, m: True)),
        _row(
            "accuracy",
            _scalar_cells(
                all_results, summaries, "accuracy", lambda r, m: m not in r.get("calibrated", {})
            ),
        ),
        _row(f"far-OOD AUROC, {worst}", _ood_cells(all_results, summaries, far_sets), _OOD_LABELS),
    ]
    if any(NEAR_SET in r["data"]["ood_sets"] for r in all_results):
        near = _ood_cells(all_results, summaries, lambda r: [NEAR_SET])
        rows.append(_row(f"{NEAR_SET} AUROC", near, _OOD_LABELS))
    rows.append(_robust_row(all_results, summaries))
    cost = _scalar_cells(
        all_results,
        summaries,
        "cost_vs_ce",
        lambda r, m: m != "ce" and m not in r.get("calibrated", {}),
        fmt=_cost,
    )
    rows.append(_row("training cost per epoch, x ce", cost))
    header = [""] + [results["data"]["name"] for results in all_results]
    table = _table(header, [row for row in rows if row is not None])
    return table + (f"\n\n{UNRELIABLE_NOTE}" if UNRELIABLE in table else "")


def terminal_text(all_results: Sequence[dict], printed: Sequence[dict], out) -> str:
    """What the command prints: the summary table, each data set's key verdicts (with what was
    not available and whether the machine was busy), where the report is.

    Parameters
    ----------
    all_results : sequence of dict
        The results of each data set.
    printed : sequence of dict
        :func:`~ebmclassifier.experiments.report.write_report`'s return value per data set
        (its ``summary`` and ``key_verdicts``).
    out : str or path-like
        The report's folder.

    Returns
    -------
    text : str
    """
    seeds = all_results[0]["config"]["seeds"]
    lines = [
        f"Summary: medians over {seeds} seed{'s' if seeds > 1 else ''} (their ranges, every "
        "table and the figures are in the report)",
        "",
        overview_table(all_results, [p["summary"] for p in printed]),
        "",
    ]
    for results, tabs in zip(all_results, printed, strict=True):
        said = [f"- {line}" for line in tabs["key_verdicts"]]
        missing = results.get("unavailable", {})
        if missing:
            said.append(
                "- Not available: "
                + "; ".join(f"{label} ({_one_line(why, 120)})" for label, why in missing.items())
            )
        note = busy_machine_note(results)
        said += [f"- {note}"] if note else []
        if said:
            lines += [f"{results['data']['name']}:", *said, ""]
    n_figures = sum(len(tabs["figures"]) for tabs in printed)
    lines.append(
        f"Report: {Path(out) / 'report.md'} (every table, the verdicts per OOD set and detector, "
        f"{n_figures} figures with captions) and results.json."
    )
    return "\n".join(lines)
