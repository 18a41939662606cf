"""Summaries over seeds and the markdown tables of ``compare``'s report.

Every number is summarised over seeds as ``median [min, max]``. Each model's headline OOD
score (:func:`headline_score`) is chosen here, once, for the summary table, the verdicts and
the histograms alike.
"""

from __future__ import annotations

import numpy as np

from ._timing import busy_note, mark_spread
from .models import OOD_SCORES

SCALARS = ("accuracy", "ece", "mce", "classwise_ece", "nll", "seconds_per_epoch", "cost_vs_ce")
_NORMS = {"linf": "L-inf", "l2": "L2"}
LOWER_IS_BETTER = {"ece", "mce", "classwise_ece", "nll", "seconds_per_epoch", "cost_vs_ce"}


def _stat(values) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "median": float(np.median(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "n": len(values),
    }


def summarise(results: dict) -> dict:
    """Summaries over seeds of every measurement.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison`.

    Returns
    -------
    summary : dict
        ``{model: {"scalars": {metric: stat}, "aurc": {score: stat}, "ood": {score: {set:
        {metric: stat}}}, "ood_decisions": {score: {"false_positive_rate": stat, "miss_rate":
        {set: stat}}}, "robust_accuracy": [stat per epsilon] or None}}`` with ``stat`` a dict
        of ``median``, ``min``, ``max`` and ``n`` (seeds).
    """
    summary = {}
    for model in results["models"]:
        runs = [r for r in results["runs"] if r["model"] == model]
        if not runs:
            continue  # every fit failed; listed under "failures"
        scalars = {
            k: _stat([r.get(k) for r in runs]) for k in SCALARS + ("temperature", "divergences")
        }
        # a detector may be unavailable at some seeds: each score over the seeds that have it
        scores = {score: [r for r in runs if score in r["ood"]] for r in runs for score in r["ood"]}
        ood = {
            score: {
                name: {m: _stat([r["ood"][score][name][m] for r in have]) for m in metrics}
                for name, metrics in have[0]["ood"][score].items()
            }
            for score, have in scores.items()
        }
        decisions = {
            score: {
                "false_positive_rate": _stat(
                    [r["ood_decisions"][score]["false_positive_rate"] for r in have]
                ),
                "miss_rate": {
                    name: _stat([r["ood_decisions"][score]["miss_rate"][name] for r in have])
                    for name in have[0]["ood_decisions"][score]["miss_rate"]
                },
            }
            for score, have in scores.items()
        }
        robust = None
        if runs[0]["robust_accuracy"] is not None:
            per_eps = np.array([r["robust_accuracy"] for r in runs])
            robust = [_stat(per_eps[:, j]) for j in range(per_eps.shape[1])]
        summary[model] = {
            "scalars": {k: v for k, v in scalars.items() if v is not None},
            "aurc": {
                score: _stat([r["aurc"][score] for r in have]) for score, have in scores.items()
            },
            "ood": ood,
            "ood_decisions": decisions,
            "robust_accuracy": robust,
        }
    return summary


def _fmt(stat, digits: int = 3) -> str:
    if stat is None:
        return "n/a"
    if stat["n"] == 1 or stat["min"] == stat["max"]:
        return f"{stat['median']:.{digits}f}"
    return f"{stat['median']:.{digits}f} [{stat['min']:.{digits}f}, {stat['max']:.{digits}f}]"


def busy_machine_note(results: dict) -> str | None:
    """The sentence saying the machine was busy during this data set's run, or None."""
    load = results.get("machine_load")
    return load and busy_note(load["start"], load["end"], load["threads"])


def _fmt_time(stat, digits: int) -> str:
    """A timing: :func:`_fmt`, marked unreliable when its seeds spread widely."""
    text = _fmt(stat, digits)
    return text if stat is None else mark_spread(text, stat["min"], stat["max"])


def _table(header: list[str], rows: list[list[str]], unavailable: dict | None = None) -> str:
    """A markdown table; each of ``unavailable`` (``{label: reason}``) adds a row
    ``label | not available: reason`` with the other cells empty."""
    rows = rows + [
        [label, f"not available: {_one_line(why)}"] + [""] * (len(header) - 2)
        for label, why in (unavailable or {}).items()
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _one_line(reason: str, limit: int = 200) -> str:
    """A reason fit for a table cell: one line, no pipes, at most ``limit`` characters."""
    text = " ".join(str(reason).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _attack_index(epsilons) -> int:
    """The epsilon the main table reports: the middle one of the non-zero radii."""
    nonzero = [i for i, e in enumerate(epsilons) if e > 0]
    return nonzero[len(nonzero) // 2] if nonzero else 0


def tables(results: dict, summary: dict) -> dict[str, str]:
    """The report's markdown tables.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison`.
    summary : dict
        From :func:`summarise`.

    Returns
    -------
    tables : dict of str to str
        ``main``, ``aurc``, ``ood_auroc``, ``ood_fpr95``, ``ood_decisions`` and ``robust``.
    """
    return {
        "main": _main_table(results, summary),
        **_score_tables(results, summary),
        "robust": _robust_table(results, summary),
    }


def _whole_models_out(results: dict) -> dict:
    """The models that could not run at all (not one of their scores), with the reason."""
    return {k: v for k, v in results.get("unavailable", {}).items() if " / " not in k}


def _main_table(results: dict, summary: dict) -> str:
    """One row per model: accuracy, calibration, AURC, robustness and cost."""
    epsilons = results["epsilons"]
    j = _attack_index(epsilons)
    rows = []
    for model, s in summary.items():
        sc = s["scalars"]
        if s["robust_accuracy"]:
            robust = _fmt(s["robust_accuracy"][j])
        else:  # a recalibrated model keeps its base's predictions; an ensemble is not attacked
            robust = "= base model" if model in results.get("calibrated", {}) else "not attacked"
        rows.append(
            [
                model,
                _fmt(sc.get("accuracy")),
                _fmt(sc.get("ece")),
                _fmt(sc.get("nll")),
                _fmt(s["aurc"].get("max_softmax"), 4),
                robust,
                _fmt_time(sc.get("seconds_per_epoch"), 4),
                _fmt_time(sc.get("cost_vs_ce"), 2),
            ]
        )
    norm = _NORMS[results["config"]["norm"]]
    header = ["model", "accuracy", "ECE", "NLL", "AURC"]
    header += [f"acc. {norm} PGD eps={epsilons[j]:.3g}", "s / epoch", "cost x CE"]
    main = _table(header, rows, _whole_models_out(results))
    note = busy_machine_note(results)
    return main + (f"\n\n{note}" if note else "")


def _score_tables(results: dict, summary: dict) -> dict[str, str]:
    """One row per model and OOD score: AUROC, FPR95, the decisions at the threshold, AURC."""
    unavailable = results.get("unavailable", {})
    sets = list(results["data"]["ood_sets"])
    per_score = [
        (f"{model} / {score}", model, score) for model, s in summary.items() for score in s["ood"]
    ]
    found = {
        f"ood_{metric}": _table(
            ["model / score"] + sets,
            [
                [label] + [_fmt(summary[m]["ood"][score][name][metric]) for name in sets]
                for label, m, score in per_score
            ],
            unavailable,
        )
        for metric in ("auroc", "fpr95")
    }
    found["ood_decisions"] = _table(
        ["model / score", "FPR: test flagged"] + [f"missed: {name}" for name in sets],
        [
            [label, _fmt(d["false_positive_rate"])] + [_fmt(d["miss_rate"][n]) for n in sets]
            for label, m, score in per_score
            for d in [summary[m]["ood_decisions"][score]]
        ],
        unavailable,
    )
    found["aurc"] = _table(
        ["model / score", "AURC"],
        [[label, _fmt(summary[m]["aurc"][score], 4)] for label, m, score in per_score],
        unavailable,
    )
    return found


def _robust_table(results: dict, summary: dict) -> str:
    """Accuracy under attack at every radius, one row per attacked model."""
    rows = [
        [model] + [_fmt(st) for st in s["robust_accuracy"]]
        for model, s in summary.items()
        if s["robust_accuracy"]
    ]
    header = ["model"] + [f"eps={e:.3g}" for e in results["epsilons"]]
    return _table(header, rows, _whole_models_out(results))


#: The OOD set of ``--ood-classes`` (near OOD); every other set counts as far OOD.
NEAR_SET = "held-out classes"


def far_sets(results: dict) -> list[str]:
    """The far-OOD sets of a run: every OOD set but the held-out classes."""
    return [name for name in results["data"]["ood_sets"] if name != NEAR_SET]


def headline_score(model: str, model_summary: dict, sets) -> tuple[str, dict] | None:
    """The OOD score that stands for ``model`` on ``sets``, and its AUROC on the worst of them.

    ``ce``: its energy score, the standard energy-based detector (Liu et al. 2020), which the
    energy-trained models are meant to improve. Every other model: the one of its own scores
    (``energy``, ``max_softmax``, ``approx_mass``) whose AUROC on its worst set is the
    highest (medians over seeds), the score a user would deploy for these sets. None when no
    score covers every set.

    Returns
    -------
    (score, stat) or None
        ``stat``: the AUROC summary (median, min, max, n) on the worst set.
    """
    return _best_worst_set(model_summary, sets, ("energy",) if model == "ce" else OOD_SCORES)


def best_detector(model_summary: dict, sets) -> tuple[str, dict] | None:
    """The post-hoc detector on the model's features whose worst-set AUROC is the highest, as
    :func:`headline_score` chooses a score; None without detectors."""
    detectors = [k for k in model_summary["ood"] if k not in OOD_SCORES]
    return _best_worst_set(model_summary, sets, detectors)


def _best_worst_set(model_summary: dict, sets, scores) -> tuple[str, dict] | None:
    best = None
    for score in scores:
        by_set = model_summary["ood"].get(score, {})
        if not sets or any(name not in by_set for name in sets):
            continue
        worst = min((by_set[name]["auroc"] for name in sets), key=lambda st: st["median"])
        if best is None or worst["median"] > best[1]["median"]:
            best = (score, worst)
    return best


def ood_entries(results: dict, summary: dict, sets) -> dict[str, tuple[str, dict]]:
    """``{label: (score, worst-set AUROC stat)}``: the OOD contenders of the summary on
    ``sets``: ``ce`` (its energy), ``ce + detector`` (the best detector on its features), and
    every other model with an OOD score of its own (its headline score). Temperature-scaled
    models are left out: they rescale their base model's max softmax."""
    calibrated = results.get("calibrated", {})
    entries = {}
    for model, s in summary.items():
        if model in calibrated:
            continue
        headline = headline_score(model, s, sets)
        if headline is not None:
            entries[model] = headline
        detector = best_detector(s, sets) if model == "ce" else None
        if detector is not None:
            entries["ce + detector"] = detector
    return entries


def unavailable_rows(specs, runs: list, failures: list) -> dict:
    """``{row label: reason}`` for what could not be fitted on this data: a model none of whose
    fits succeeded (or whose base model's did not), a detector on a model's features."""
    measured = {r["model"] for r in runs}
    errors = {f["model"]: f["error"] for f in reversed(failures)}  # the first seed's error
    unavailable = {}
    for spec in specs:
        if spec.name in measured:
            continue
        base = spec.calibrates or spec.name
        why = errors.get(base, "no fit succeeded")
        unavailable[spec.name] = why if base == spec.name else f"its base model {base!r}: {why}"
    for run in runs:
        for detector, why in run.get("unavailable", {}).items():
            unavailable.setdefault(f"{run['model']} / {detector}", why)
    return unavailable
