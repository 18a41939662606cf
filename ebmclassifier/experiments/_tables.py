"""Summaries over seeds, the markdown tables and the plain-sentence verdicts of ``compare``.

Every number is summarised over seeds as ``median [min, max]``; a gap is called clear (outside
the seed spread) only when the seed ranges do not overlap.
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
                "false_positive_rate": _stat([r["ood_decisions"][score]["false_positive_rate"]
                                              for r in have]),
                "miss_rate": {
                    name: _stat([r["ood_decisions"][score]["miss_rate"][name] for r in have])
                    for name in have[0]["ood_decisions"][score]["miss_rate"]
                },
            }
            for score, have in scores.items()
        }  # fmt: skip
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
    epsilons = results["epsilons"]
    j = _attack_index(epsilons)
    unavailable = results.get("unavailable", {})
    models_out = {k: v for k, v in unavailable.items() if " / " not in k}  # whole models
    main_rows = []
    for model, s in summary.items():
        sc = s["scalars"]
        if s["robust_accuracy"]:
            robust = _fmt(s["robust_accuracy"][j])
        else:  # a recalibrated model keeps its base's predictions; an ensemble is not attacked
            robust = "= base model" if model in results.get("calibrated", {}) else "not attacked"
        main_rows.append(
            [model, _fmt(sc.get("accuracy")), _fmt(sc.get("ece")), _fmt(sc.get("nll")),
             _fmt(s["aurc"].get("max_softmax"), 4), robust,
             _fmt_time(sc.get("seconds_per_epoch"), 4), _fmt_time(sc.get("cost_vs_ce"), 2)]
        )  # fmt: skip
    norm = _NORMS[results["config"]["norm"]]
    main = _table(
        ["model", "accuracy", "ECE", "NLL", "AURC", f"acc. {norm} PGD eps={epsilons[j]:.3g}",
         "s / epoch", "cost x CE"],
        main_rows, models_out,
    )  # fmt: skip
    load = results.get("machine_load")
    note = load and busy_note(load["start"], load["end"], load["threads"])
    main += f"\n\n{note}" if note else ""
    sets = list(results["data"]["ood_sets"])
    per_score = [(f"{model} / {score}", model, score) for model, s in summary.items()
                 for score in s["ood"]]  # fmt: skip
    ood_tables = {
        metric: _table(["model / score"] + sets, [
            [label] + [_fmt(summary[m]["ood"][score][name][metric]) for name in sets]
            for label, m, score in per_score
        ], unavailable)
        for metric in ("auroc", "fpr95")
    }  # fmt: skip
    decisions = _table(
        ["model / score", "FPR: test flagged"] + [f"missed: {name}" for name in sets],
        [[label, _fmt(d["false_positive_rate"])] + [_fmt(d["miss_rate"][n]) for n in sets]
         for label, m, score in per_score
         for d in [summary[m]["ood_decisions"][score]]],
        unavailable,
    )  # fmt: skip
    aurc_table = _table(
        ["model / score", "AURC"],
        [[label, _fmt(summary[m]["aurc"][score], 4)] for label, m, score in per_score],
        unavailable,
    )
    robust_rows = [
        [model] + [_fmt(st) for st in s["robust_accuracy"]]
        for model, s in summary.items()
        if s["robust_accuracy"]
    ]
    robust = _table(["model"] + [f"eps={e:.3g}" for e in epsilons], robust_rows, models_out)
    return {
        "main": main,
        "aurc": aurc_table,
        "ood_auroc": ood_tables["auroc"],
        "ood_fpr95": ood_tables["fpr95"],
        "ood_decisions": decisions,
        "robust": robust,
    }


def _compare_best(candidates: dict, lower: bool, digits: int = 3) -> str | None:
    """'A (x) beats B (y), clearly / within the seed spread' for {label: stat}."""
    ranked = sorted(
        ((label, st) for label, st in candidates.items() if st is not None),
        key=lambda item: item[1]["median"],
        reverse=not lower,
    )
    if len(ranked) < 2:
        return None
    (best, b), (second, s) = ranked[0], ranked[1]
    if f"{b['median']:.{digits}f}" == f"{s['median']:.{digits}f}":
        return f"{best} and {second} tied ({b['median']:.{digits}f})"
    clear = _clear_gap(b, s, higher=not lower)
    if clear is None:
        how = "one seed, so no spread to judge the gap by"
    else:
        how = "clearly: no seed overlap" if clear else "within the seed spread"
    return f"{best} ({b['median']:.{digits}f}) ahead of {second} ({s['median']:.{digits}f}), {how}"


def _clear_gap(a: dict, b: dict, higher: bool = True) -> bool | None:
    """Whether the seeds of the stat ahead all beat those of the other (no overlap); None when
    either has a single seed. ``higher``: the larger median is ahead."""
    if a["n"] == 1 or b["n"] == 1:
        return None
    ahead, behind = (a, b) if (a["median"] >= b["median"]) == higher else (b, a)
    return ahead["min"] > behind["max"] if higher else ahead["max"] < behind["min"]


def _spread(a: dict, b: dict, higher: bool = True) -> str:
    """Whether the gap between two stats is outside the seed spread (no overlap) or not."""
    clear = _clear_gap(a, b, higher)
    if clear is None:
        return "one seed"
    return "outside the seed spread" if clear else "within the seed spread"


def _calibration_regime(summary: dict) -> str | None:
    """Whether CE is miscalibrated here: its ECE against temperature scaling's."""
    ce, ts = (summary.get(m, {}).get("scalars", {}).get("ece") for m in ("ce", "ce_ts"))
    if ce is None or ts is None:
        return None
    text = (
        f"Calibration regime: CE's ECE is {ce['median']:.3f}, {ts['median']:.3f} after "
        f"temperature scaling on the held-out split"
    )
    temperature = summary["ce_ts"]["scalars"].get("temperature")
    if temperature is not None:
        side = "over" if temperature["median"] > 1 else "under"
        text += f" (T = {temperature['median']:.2f}: CE is {side}-confident)"
    spread = _spread(ce, ts, higher=False)
    if ce["median"] > ts["median"] and spread == "outside the seed spread":
        text += f", a gap {spread}: here calibration matters"
    else:
        text += f" ({spread}): CE is about as calibrated as temperature scaling makes it here"
    others = [
        f"{m} {s['scalars']['ece']['median']:.3f}"
        for m in ("ngebm", "jem", "ce_ens", "ngebm_ens")
        if (s := summary.get(m)) and "ece" in s["scalars"]
    ]
    if others:
        text += "; without a held-out split: " + ", ".join(others)
    return text + "."


def _ood_line(name: str, summary: dict) -> str | None:
    """Who detects the OOD set ``name`` best, against CE's energy and the post-hoc detectors."""
    # each model by its best score of its own on this set, so the sentence compares models
    # (the detectors on its features have their own line, _detector_lines)
    best = {
        m: max(
            ((k, v) for k, v in s["ood"].items() if k in OOD_SCORES or m == "ce"),
            key=lambda kv: kv[1][name]["auroc"]["median"],
        )
        for m, s in summary.items()
    }
    c = {f"{m} / {score}": by_set[name]["auroc"] for m, (score, by_set) in best.items()}
    text = _compare_best(c, lower=False)
    if not text:
        return None
    line = f"OOD AUROC on {name} (each model's best score): {text}."
    ce_scores = summary.get("ce", {}).get("ood", {})
    if "energy" not in ce_scores:
        return line
    baselines = {"CE energy": ce_scores["energy"][name]["auroc"]}
    detectors = {k: v[name]["auroc"] for k, v in ce_scores.items() if k not in OOD_SCORES}
    if detectors:
        top = max(detectors, key=lambda k: detectors[k]["median"])
        baselines[f"CE + {top}"] = detectors[top]
    if "ce_ens" in best:
        score, by_set = best["ce_ens"]
        baselines[f"CE ensemble / {score}"] = by_set[name]["auroc"]
    line += " Baselines: " + ", ".join(f"{k} {v['median']:.3f}" for k, v in baselines.items())
    for m in ("ngebm", "jem", "ngebm_ens"):
        if m in best:
            score, by_set = best[m]
            own = by_set[name]["auroc"]
            gaps = [
                f"level with {k}"
                if abs(own["median"] - v["median"]) < 5e-4
                else f"{own['median'] - v['median']:+.3f} vs {k}, {_spread(own, v)}"
                for k, v in baselines.items()
            ]
            line += f"; {m} / {score} {own['median']:.3f} ({'; '.join(gaps)})"
    return line + "."


def _detector_lines(name: str, summary: dict) -> list[str]:
    """Per post-hoc detector: whose penultimate features serve it best on the OOD set
    ``name`` (does energy training make the features better for it?)."""
    detectors = {k for s in summary.values() for k in s["ood"] if k not in OOD_SCORES}
    lines = []
    for detector in sorted(detectors):
        c = {
            f"{m} features": s["ood"][detector][name]["auroc"]
            for m, s in summary.items()
            if detector in s["ood"]
        }
        text = _compare_best(c, lower=False)
        if text:
            lines.append(f"{detector} on each model's features, OOD AUROC on {name}: {text}.")
    return lines


def verdicts(results: dict, summary: dict) -> list[str]:
    """Plain sentences: who is best on each criterion, whether CE is miscalibrated on this data,
    and how the energy methods compare with the CE model's energy score (the standard
    energy-based OOD detector) and the best post-hoc detector on the CE model.

    A gap is called clear (outside the seed spread) only when the seed ranges do not overlap.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison`.
    summary : dict
        From :func:`summarise`.

    Returns
    -------
    lines : list of str
    """
    lines = []
    # a recalibrated model keeps its base model's predictions: no rival for accuracy
    same_predictions = {m for m, spec in results.get("calibrated", {}).items() if spec}
    for metric, label in (("accuracy", "Accuracy"), ("ece", "ECE"), ("nll", "NLL")):
        c = {
            m: s["scalars"].get(metric)
            for m, s in summary.items()
            if metric != "accuracy" or m not in same_predictions
        }
        text = _compare_best(c, metric in LOWER_IS_BETTER)
        if text:
            lines.append(f"{label}: {text}.")
    regime = _calibration_regime(summary)
    if regime:
        lines.append(regime)
    c = {m: s["aurc"].get("max_softmax") for m, s in summary.items()}
    text = _compare_best(c, lower=True, digits=4)
    if text:
        lines.append(f"AURC (max-softmax confidence; lower is better): {text}.")
    j = _attack_index(results["epsilons"])
    c = {m: s["robust_accuracy"][j] for m, s in summary.items() if s["robust_accuracy"]}
    text = _compare_best(c, lower=False)
    if text:
        lines.append(f"Robust accuracy at eps={results['epsilons'][j]:.3g}: {text}.")
    for name in results["data"]["ood_sets"]:
        line = _ood_line(name, summary)
        if line:
            lines.append(line)
        lines += _detector_lines(name, summary)
    return lines


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
