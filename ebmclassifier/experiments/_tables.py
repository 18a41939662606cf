"""Summaries over seeds and the markdown tables of ``compare``'s report.

Every number is summarised over seeds as ``median [min, max]``. Each model's headline OOD
score (:func:`headline_score`), fixed before any data is seen, is read here, once, for the
summary table, the verdicts and the histograms alike.
"""

from __future__ import annotations

import numpy as np

from ._timing import UNRELIABLE, UNRELIABLE_NOTE, busy_note, mark_spread

SCALARS = ("accuracy", "ece", "mce", "classwise_ece", "nll", "seconds_per_epoch", "cost_vs_ce")
_NORMS = {"linf": "L-inf", "l2": "L2"}
LOWER_IS_BETTER = {"ece", "mce", "classwise_ece", "nll", "seconds_per_epoch", "cost_vs_ce"}


def _stat(runs, value) -> dict | None:
    """The summary over seeds of ``value(run)``, from the runs that have one (not None).

    ``median``, ``min``, ``max``, ``n`` (seeds) and ``per_seed`` (``{seed: value}``, which
    names the seed behind a figure: :func:`~._seeds.far_seeds`, :func:`~._seeds.median_seed`).
    """
    per_seed = {r["seed"]: float(v) for r in runs if (v := value(r)) is not None}
    if not per_seed:
        return None
    values = list(per_seed.values())
    return {
        "median": float(np.median(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "n": len(values),
        "per_seed": per_seed,
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
        ``{model: {"headline": score, "scalars": {metric: stat}, "aurc": {score: stat},
        "ood": {score: {set: {metric: stat}}}, "ood_decisions": {score:
        {"false_positive_rate": stat, "miss_rate": {set: stat}}}, "robust_accuracy": [stat per
        epsilon] or None}}`` with ``stat`` a dict of ``median``, ``min``, ``max``, ``n``
        (seeds) and ``per_seed`` (``{seed: value}``).
    """
    summary = {}
    for model in results["models"]:
        runs = [r for r in results["runs"] if r["model"] == model]
        if not runs:
            continue  # every fit failed; listed under "failures"
        scalars = {
            k: _stat(runs, lambda r, k=k: r.get(k))
            for k in SCALARS + ("temperature", "divergences")
        }
        ood, decisions, aurc = _score_summaries(runs)
        robust = None
        if runs[0]["robust_accuracy"] is not None:
            robust = [
                _stat(runs, lambda r, j=j: r["robust_accuracy"][j])
                for j in range(len(runs[0]["robust_accuracy"]))
            ]
        summary[model] = {
            "headline": runs[0].get("headline"),
            "scalars": {k: v for k, v in scalars.items() if v is not None},
            "aurc": aurc,
            "ood": ood,
            "ood_decisions": decisions,
            "robust_accuracy": robust,
        }
    return summary


def _score_summaries(runs: list) -> tuple[dict, dict, dict]:
    """The OOD, OOD-decision and AURC summaries of one model's runs, by score."""
    # a detector may be unavailable at some seeds: each score over the seeds that have it
    scores = {score: [r for r in runs if score in r["ood"]] for r in runs for score in r["ood"]}
    ood = {
        score: {
            name: {
                m: _stat(have, lambda r, s=score, n=name, m=m: r["ood"][s][n][m]) for m in metrics
            }
            for name, metrics in have[0]["ood"][score].items()
        }
        for score, have in scores.items()
    }
    decisions = {
        score: {
            "false_positive_rate": _stat(
                have, lambda r, s=score: r["ood_decisions"][s]["false_positive_rate"]
            ),
            "miss_rate": {
                name: _stat(have, lambda r, s=score, n=name: r["ood_decisions"][s]["miss_rate"][n])
                for name in have[0]["ood_decisions"][score]["miss_rate"]
            },
        }
        for score, have in scores.items()
    }
    aurc = {score: _stat(have, lambda r, s=score: r["aurc"][s]) for score, have in scores.items()}
    return ood, decisions, aurc


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
    notes = [UNRELIABLE_NOTE] if UNRELIABLE in main else []
    notes += [note] if (note := busy_machine_note(results)) else []
    return "\n\n".join([main, *notes])


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


def headline_score(model_summary: dict, sets) -> tuple[str, dict] | None:
    """The OOD score that stands for a model on ``sets``, and its AUROC on the worst of them.

    The score is the model's ``headline``, fixed before any data was seen
    (:func:`~._measure.headline_of`: ``ce``'s energy, the standard energy-based detector of Liu
    et al. 2020; every other model's estimator default ``ood_method``). It is never chosen on
    the AUROCs it is then judged by: picking each model's best of three scores on the very
    sets it is judged on would flatter every model by the luck of that choice.

    Parameters
    ----------
    model_summary : dict
        One model's entry of :func:`summarise`.
    sets : sequence of str
        The OOD sets it is judged on.

    Returns
    -------
    (score, stat) or None
        ``stat``: the AUROC summary (median, min, max, n) on the set where its median is the
        lowest. None when the score does not cover every set.
    """
    return _worst_set(model_summary, sets, model_summary.get("headline"))


def headline_detector(results: dict, model_summary: dict, sets) -> tuple[str, dict] | None:
    """The post-hoc detector on the model's features the report judges, and its worst-set AUROC,
    as :func:`headline_score`: the first of ``--detectors`` (``results["headline_detector"]``),
    fixed by its place in the option before any data is seen; None without detectors."""
    return _worst_set(model_summary, sets, results.get("headline_detector"))


def _worst_set(model_summary: dict, sets, score: str | None) -> tuple[str, dict] | None:
    by_set = model_summary["ood"].get(score, {})
    if score is None or not sets or any(name not in by_set for name in sets):
        return None
    return score, min((by_set[name]["auroc"] for name in sets), key=lambda st: st["median"])


def ood_entries(results: dict, summary: dict, sets) -> dict[str, tuple[str, dict]]:
    """``{label: (score, worst-set AUROC stat)}``: the OOD contenders of the summary on
    ``sets``: ``ce`` (its energy), ``ce + detector`` (the first of ``--detectors`` on its
    features) and every other model with an OOD score of its own (its headline score), each
    score fixed in advance (:func:`headline_score`). Temperature-scaled models are left out:
    they rescale their base model's max softmax."""
    calibrated = results.get("calibrated", {})
    entries = {}
    for model, s in summary.items():
        if model in calibrated:
            continue
        headline = headline_score(s, sets)
        if headline is not None:
            entries[model] = headline
        detector = headline_detector(results, s, sets) if model == "ce" else None
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
