"""The plain-sentence verdicts of ``compare``: who is best on each criterion, and by how much.

A gap between two models is called clear only when the two [min, max] ranges over seeds are
apart by at least :data:`NOISE_MARGIN`: more than the seeds spread, and more than a figure
moves when the same seeds run on another machine (float kernels differ between CPUs, and
sampling amplifies the difference), so a clear verdict does not turn on noise. Ranges that
overlap by more than the margin are *within the seed spread*; ranges whose nearest ends are
closer than the margin, apart or overlapping, are *within noise*: another machine, or more
seeds, can settle them either way (:func:`gap_kind`). A seed far from the others, which a
median hides, is named with its value (:mod:`~._seeds`). :func:`key_verdicts` are the few the
terminal prints; :func:`verdicts` adds the per-set and per-detector detail of ``report.md``.
"""

from __future__ import annotations

from ._seeds import far_seeds, far_text
from ._tables import LOWER_IS_BETTER, NEAR_SET, _attack_index, far_sets, ood_entries
from .models import OOD_SCORES

#: How far apart the seed ranges of two figures must be for a gap to be called clear: two
#: hundredths (two points of accuracy, ECE, AUROC or risk; 0.02 nats of NLL), more than the
#: figures of the same seeds moved between two machines (docs/compare.md, "How a verdict
#: reads"). Since a median lies inside its range, a clear gap between medians is at least as
#: large.
NOISE_MARGIN = 0.02


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
    kind : {"one seed", "overlap", "noise", "clear"}
        ``"one seed"``: either has a single seed, no spread to judge by; ``"clear"``: the seed
        ranges are apart by at least :data:`NOISE_MARGIN`; ``"overlap"``: they overlap by at
        least that much; ``"noise"``: their nearest ends are closer than the margin (apart or
        overlapping), where another machine's rounding or more seeds can tip the verdict.
    """
    if a["n"] == 1 or b["n"] == 1:
        return "one seed"
    return _edge_kind(_edge_gap(a, b, higher))


def _edge_gap(a: dict, b: dict, higher: bool) -> float:
    """How far apart the seed ranges are (negative: how much they overlap), the model ahead
    by its median first."""
    ahead, behind = (a, b) if (a["median"] >= b["median"]) == higher else (b, a)
    return ahead["min"] - behind["max"] if higher else behind["min"] - ahead["max"]


def _edge_kind(gap: float) -> str:
    if gap >= NOISE_MARGIN:
        return "clear"
    return "overlap" if gap <= -NOISE_MARGIN else "noise"


def _noise_words(gap: float) -> str:
    """``within noise (...)``: how close the ranges' ends are, and what would settle it."""
    where = "touching" if gap == 0 else f"{'apart' if gap > 0 else 'overlapping'} by {abs(gap):.2g}"
    return (
        f"within noise: the seed ranges are {where}, under the {NOISE_MARGIN:g} a figure can "
        "move on another machine; more seeds would tell"
    )


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
    far = "".join(
        f"; but {label}'s {seeds}, far from its other seeds"
        for label, st in ((best, b), (second, s))
        if (seeds := _far_seeds_words(st, digits))
    )
    if f"{b['median']:.{digits}f}" == f"{s['median']:.{digits}f}":
        return f"{best} and {second} tied ({b['median']:.{digits}f}){far}"
    kind = gap_kind(b, s, higher=not lower)
    how = {
        "one seed": "one seed, so no spread to judge the gap by",
        "overlap": "within the seed spread",
        "clear": f"clearly: the seed ranges are apart by at least {NOISE_MARGIN:g}",
    }.get(kind) or _noise_words(_edge_gap(b, s, higher=not lower))
    ahead = f"{best} ({b['median']:.{digits}f}) ahead of {second} ({s['median']:.{digits}f})"
    return f"{ahead}, {how}{far}"


def _far_seeds_words(stat: dict, digits: int = 3) -> str:
    """``"seed 1 reads 0.002"`` for the far seeds of ``stat`` (:func:`~._seeds.far_seeds`)."""
    far = far_seeds(stat)
    return " and ".join(f"seed {seed} reads {value:.{digits}f}" for seed, value in far.items())


def _spread(a: dict, b: dict, higher: bool = True) -> str:
    """The gap between two stats in a few words (:func:`gap_kind`)."""
    return {
        "one seed": "one seed",
        "overlap": "within the seed spread",
        "noise": "within noise",
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
    lines.append(_far_seeds_line(results, summary))
    return [line for line in lines if line]


def _far_seeds_line(results: dict, summary: dict) -> str | None:
    """Every seed far from the others (:func:`~._seeds.far_seeds`) among the figures the
    summary table and the verdicts stand on, each with its value and the other seeds': each
    model's accuracy, ECE and robust accuracy at the middle radius, and each OOD contender's
    headline AUROC on every OOD set (not only its worst: a seed may fail on another)."""
    j = _attack_index(results["epsilons"])
    said = []
    for model, s in summary.items():
        said.append(far_text(f"{model}'s accuracy", s["scalars"].get("accuracy")))
        said.append(far_text(f"{model}'s ECE", s["scalars"].get("ece")))
        if s["robust_accuracy"]:
            eps = results["epsilons"][j]
            said.append(
                far_text(f"{model}'s robust accuracy at eps={eps:.3g}", s["robust_accuracy"][j])
            )
    for name in results["data"]["ood_sets"]:
        for label, (score, stat) in ood_entries(results, summary, [name]).items():
            model = "ce" if label == "ce + detector" else label
            said.append(far_text(f"{model} / {score}'s AUROC on {name}", stat, auroc=True))
    said = [text for text in said if text]
    if not said:
        return None
    return (
        "Seeds far from the others, which the medians above hide (a failed or a lucky fit): "
        + "; ".join(said)
        + "."
    )


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
