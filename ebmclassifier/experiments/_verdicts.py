"""The plain-sentence verdicts of ``compare``: who is best on each criterion, and by how much.

A gap between two models is called clear only when it is larger than the spread over seeds
(the two [min, max] ranges do not overlap) *and* at least :data:`CLEAR_GAP` between the
medians: a gap of 0.001 in AUROC with no seed overlap is real in these runs but matters to
nobody, and the sentences say so (:func:`gap_kind`). :func:`key_verdicts` are the few the
terminal prints; :func:`verdicts` adds the per-set and per-detector detail of ``report.md``.
"""

from __future__ import annotations

from ._tables import LOWER_IS_BETTER, NEAR_SET, _attack_index, far_sets, ood_entries
from .models import OOD_SCORES

#: The smallest gap between two medians called clear: one hundredth, i.e. one point of
#: accuracy, ECE, AUROC or risk (AURC), 0.01 nats of NLL.
CLEAR_GAP = 0.01


def gap_kind(a: dict, b: dict, higher: bool = True) -> str:
    """How the gap between two summaries over seeds reads.

    Parameters
    ----------
    a, b : dict
        Summaries with ``median``, ``min``, ``max`` and ``n`` (seeds).
    higher : bool, default=True
        Whether the larger median is ahead.

    Returns
    -------
    kind : {"one seed", "overlap", "small", "clear"}
        ``"one seed"``: either has a single seed, no spread to judge by; ``"overlap"``: the
        seed ranges overlap; ``"small"``: they do not, but the medians differ by less than
        :data:`CLEAR_GAP`; ``"clear"``: neither.
    """
    if a["n"] == 1 or b["n"] == 1:
        return "one seed"
    ahead, behind = (a, b) if (a["median"] >= b["median"]) == higher else (b, a)
    apart = ahead["min"] > behind["max"] if higher else ahead["max"] < behind["min"]
    if not apart:
        return "overlap"
    return "clear" if abs(a["median"] - b["median"]) >= CLEAR_GAP else "small"


def _compare_best(candidates: dict, lower: bool, digits: int = 3) -> str | None:
    """'A (x) ahead of B (y), <how the gap reads>' for ``{label: stat}``."""
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
    gap = abs(b["median"] - s["median"])
    how = {
        "one seed": "one seed, so no spread to judge the gap by",
        "overlap": "within the seed spread",
        "small": f"no seed overlap, but a gap of {gap:.2g}, under the {CLEAR_GAP:g} called clear",
        "clear": f"clearly: no seed overlap and a gap of at least {CLEAR_GAP:g}",
    }[gap_kind(b, s, higher=not lower)]
    return f"{best} ({b['median']:.{digits}f}) ahead of {second} ({s['median']:.{digits}f}), {how}"


def _spread(a: dict, b: dict, higher: bool = True) -> str:
    """The gap between two stats in a few words (:func:`gap_kind`)."""
    return {
        "one seed": "one seed",
        "overlap": "within the seed spread",
        "small": f"outside the seed spread but under {CLEAR_GAP:g}",
        "clear": "a clear gap",
    }[gap_kind(a, b, higher)]


def _direction(metric: str) -> str:
    return "lower is better" if metric in LOWER_IS_BETTER else "higher is better"


def _temperature_text(temperature: float, ce: dict, ts: dict) -> str:
    """What the fitted temperature did, as measured: which way it moved CE's confidences (T
    is fitted to the held-out split's NLL) and what that did to the test ECE. CE is called
    over- or under-confident only when the test ECE clearly agrees."""
    text = f"the fitted T = {temperature:.2f}"
    if f"{temperature:.2f}" == "1.00":
        return text + " leaves CE's confidences as they are"
    side = "over" if temperature > 1 else "under"
    text += f" {'softens' if side == 'over' else 'sharpens'} CE's confidences (T fits the "
    text += "held-out split's NLL)"
    if f"{ts['median']:.3f}" == f"{ce['median']:.3f}":
        return text + " and leaves the test ECE as it was"
    if ts["median"] > ce["median"]:
        return f"{text} but raises the test ECE: the test split shows no {side}-confidence to fix"
    text += " and lowers the test ECE"
    if _spread(ce, ts, higher=False) == "a clear gap":
        text += f": CE is {side}-confident here"
    return text


def _calibration_regime(summary: dict) -> str | None:
    """Whether CE is miscalibrated here: its ECE against temperature scaling's, and what the
    fitted temperature did (:func:`_temperature_text`)."""
    ce, ts = (summary.get(m, {}).get("scalars", {}).get("ece") for m in ("ce", "ce_ts"))
    if ce is None or ts is None:
        return None
    text = (
        f"Calibration regime (ECE, lower is better): CE's ECE is {ce['median']:.3f}, "
        f"{ts['median']:.3f} after temperature scaling on the held-out split"
    )
    spread = _spread(ce, ts, higher=False)
    if ce["median"] > ts["median"] and spread == "a clear gap":
        text += f", {spread}: here calibration matters"
    elif spread == "a clear gap":
        text += f" ({spread}): temperature scaling does harm here"
    else:
        text += f" ({spread}): CE is about as calibrated as temperature scaling makes it here"
    temperature = summary["ce_ts"]["scalars"].get("temperature")
    if temperature is not None:
        text += "; " + _temperature_text(temperature["median"], ce, ts)
    others = [
        f"{m} {s['scalars']['ece']['median']:.3f}"
        for m in ("ngebm", "jem", "ce_ens", "ngebm_ens")
        if (s := summary.get(m)) and "ece" in s["scalars"]
    ]
    if others:
        text += "; without a held-out split: " + ", ".join(others)
    return text + "."


def _entry_labels(entries: dict) -> dict:
    """``{"model / score": stat}`` of :func:`~._tables.ood_entries`."""
    return {
        f"{'ce' if label == 'ce + detector' else label} / {score}": stat
        for label, (score, stat) in entries.items()
    }


def _worst_set_line(results: dict, summary: dict, sets: list[str], what: str) -> str | None:
    """Who detects the OOD sets ``sets`` best, each contender judged on its worst set: the
    summary table's OOD row (:func:`~._tables.ood_entries`) in a sentence."""
    text = _compare_best(_entry_labels(ood_entries(results, summary, sets)), lower=False)
    return text and f"{what}: {text}."


def _gap_to(own: dict, baseline: dict, name: str, higher: bool = True) -> str:
    """``+0.013 vs ce, within the seed spread``, or ``level with ce``."""
    if f"{own['median']:.3f}" == f"{baseline['median']:.3f}":
        return f"level with {name}"
    gap = own["median"] - baseline["median"]
    return f"{gap:+.3f} vs {name}, {_spread(own, baseline, higher)}"


def _ood_line(results: dict, name: str, summary: dict) -> str | None:
    """Who detects the OOD set ``name`` best, each model by its headline score (fixed in
    advance), and how the energy models stand against CE's energy, the detector on CE's
    features and a CE ensemble."""
    entries = ood_entries(results, summary, [name])
    text = _compare_best(_entry_labels(entries), lower=False)
    if not text:
        return None
    line = f"OOD AUROC on {name} (higher is better; each model's headline score): {text}."
    labels = {"ce": "CE energy", "ce + detector": "CE + {}", "ce_ens": "CE ensemble / {}"}
    baselines = {
        labels[label].format(score): stat
        for label, (score, stat) in entries.items()
        if label in labels
    }
    if not baselines:
        return line
    line += " Baselines: " + ", ".join(f"{k} {v['median']:.3f}" for k, v in baselines.items())
    for model in ("ngebm", "jem", "ngebm_ens"):
        if model in entries:
            score, own = entries[model]
            gaps = "; ".join(_gap_to(own, v, k) for k, v in baselines.items())
            line += f"; {model} / {score} {own['median']:.3f} ({gaps})"
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
            lines.append(
                f"{detector} on each model's features, OOD AUROC on {name} (higher is "
                f"better): {text}."
            )
    return lines


def _best_of(summary: dict, metric: str, label: str, exclude=()) -> str | None:
    """'<label> (lower is better): A (x) ahead of B (y), <how the gap reads>'."""
    c = {m: s["scalars"].get(metric) for m, s in summary.items() if m not in exclude}
    text = _compare_best(c, metric in LOWER_IS_BETTER)
    return text and f"{label} ({_direction(metric)}): {text}."


def _against_baseline(summary: dict, metric: str, label: str, exclude=()) -> str | None:
    """Every model against the cross-entropy baseline ``ce`` on ``metric``, the gap and how it
    reads against the seeds; without ``ce``, :func:`_best_of`."""
    base = summary.get("ce", {}).get("scalars", {}).get(metric)
    if base is None:
        return _best_of(summary, metric, label, exclude)
    higher = metric not in LOWER_IS_BETTER
    others = [
        f"{m} {st['median']:.3f} ({_gap_to(st, base, 'ce', higher)})"
        for m, s in summary.items()
        if m != "ce" and m not in exclude and (st := s["scalars"].get(metric)) is not None
    ]
    if not others:
        return None
    return (
        f"{label} ({_direction(metric)}), against the cross-entropy baseline ce "
        f"({base['median']:.3f}): " + ", ".join(others) + "."
    )


def key_verdicts(results: dict, summary: dict) -> list[str]:
    """The verdicts the terminal prints, one per row of the summary table: whether CE is
    miscalibrated here, the best ECE, every model's accuracy against CE's, far OOD and held-out
    classes (each contender by its headline score on its worst set), robustness. Each names
    its direction (lower or higher is better). Arguments and result as :func:`verdicts`.
    """
    # a recalibrated model keeps its base model's predictions: no rival for accuracy
    same_predictions = set(results.get("calibrated", {}))
    lines = [
        _calibration_regime(summary),
        _best_of(summary, "ece", "ECE"),
        _against_baseline(summary, "accuracy", "Accuracy", exclude=same_predictions),
    ]
    sets = far_sets(results)
    what = (
        f"Far OOD (AUROC on the worst of {', '.join(sets)}, higher is better; each model by "
        "its headline score, fixed in advance)"
    )
    lines.append(_worst_set_line(results, summary, sets, what))
    if NEAR_SET in results["data"]["ood_sets"]:
        what = "Held-out classes (AUROC, higher is better; each model by its headline score)"
        lines.append(_worst_set_line(results, summary, [NEAR_SET], what))
    j = _attack_index(results["epsilons"])
    c = {m: s["robust_accuracy"][j] for m, s in summary.items() if s["robust_accuracy"]}
    text = _compare_best(c, lower=False)
    eps = results["epsilons"][j]
    lines.append(text and f"Robust accuracy at eps={eps:.3g} (higher is better): {text}.")
    return [line for line in lines if line]


def verdicts(results: dict, summary: dict) -> list[str]:
    """Every verdict of ``report.md``: :func:`key_verdicts`, then NLL and AURC, and per OOD set
    how the energy methods compare with the CE model's energy score (the standard energy-based
    OOD detector) and the headline post-hoc detector on the CE model (each by the score fixed
    in advance), and whose features serve each detector best.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison`.
    summary : dict
        From :func:`~ebmclassifier.experiments._tables.summarise`.

    Returns
    -------
    lines : list of str
    """
    lines = key_verdicts(results, summary) + [_best_of(summary, "nll", "NLL")]
    c = {m: s["aurc"].get("max_softmax") for m, s in summary.items()}
    text = _compare_best(c, lower=True, digits=4)
    lines.append(text and f"AURC (max-softmax confidence; lower is better): {text}.")
    for name in results["data"]["ood_sets"]:
        lines += [_ood_line(results, name, summary), *_detector_lines(name, summary)]
    return [line for line in lines if line]
