"""compare's verdicts: a gap is clear only beyond the seed spread AND at least CLEAR_GAP; each
model is judged by one OOD score, on its worst set."""

import copy

import pytest

from ebmclassifier.experiments._tables import headline_score, ood_entries, summarise
from ebmclassifier.experiments._verdicts import (
    CLEAR_GAP,
    _compare_best,
    _spread,
    gap_kind,
    key_verdicts,
    verdicts,
)


def _st(median, low, high, n=3):
    return {"median": median, "min": low, "max": high, "n": n}


@pytest.mark.parametrize(
    "candidates, lower, verdict, spread",
    [
        # a large gap, no overlap: clear
        ({"a": _st(0.9, 0.88, 0.92), "b": _st(0.8, 0.7, 0.85)}, False,
         "a (0.900) ahead of b (0.800), clearly: no seed overlap and a gap of at least 0.01",
         "a clear gap"),
        ({"a": _st(0.1, 0.05, 0.12), "b": _st(0.2, 0.15, 0.3)}, True,
         "a (0.100) ahead of b (0.200), clearly: no seed overlap and a gap of at least 0.01",
         "a clear gap"),
        # the seed ranges overlap: never clear, however large the gap between the medians
        ({"a": _st(0.9, 0.8, 0.92), "b": _st(0.85, 0.7, 0.86)}, False,
         "a (0.900) ahead of b (0.850), within the seed spread", "within the seed spread"),
        ({"a": _st(0.1, 0.05, 0.2), "b": _st(0.2, 0.15, 0.3)}, True,
         "a (0.100) ahead of b (0.200), within the seed spread", "within the seed spread"),
        # a tiny gap with no overlap (the issue's "ce / mahalanobis (1.000) ahead of ngebm /
        # approx_mass (0.999), clearly"): outside the spread, but too small to call
        ({"a": _st(1.0, 1.0, 1.0), "b": _st(0.999, 0.998, 0.9995)}, False,
         "a (1.000) ahead of b (0.999), no seed overlap, but a gap of 0.001, under the 0.01 "
         "called clear", "outside the seed spread but under 0.01"),
        ({"a": _st(1.0, 1.0, 1.0), "b": _st(0.9994, 0.9993, 0.9995)}, False,
         "a (1.000) ahead of b (0.999), no seed overlap, but a gap of 0.0006, under the 0.01 "
         "called clear", "outside the seed spread but under 0.01"),
        ({"a": _st(0.1, 0.1, 0.1, n=1), "b": _st(0.2, 0.2, 0.2, n=1)}, True,
         "a (0.100) ahead of b (0.200), one seed, so no spread to judge the gap by", "one seed"),
        ({"a": _st(0.1, 0.0, 0.2), "b": _st(0.1, 0.1, 0.1)}, True, "a and b tied (0.100)",
         "within the seed spread"),
    ],
)  # fmt: skip
def test_a_gap_is_clear_only_beyond_the_seed_spread_and_the_minimum(
    candidates, lower, verdict, spread
):
    # one rule in every verdict (_compare_best, _spread)
    assert _compare_best(candidates, lower=lower) == verdict
    assert _spread(candidates["a"], candidates["b"], higher=not lower) == spread


def test_the_minimum_gap_is_the_boundary():
    behind = _st(0.80, 0.79, 0.80)
    just_under = _st(0.80 + CLEAR_GAP * 0.9, 0.805, 0.82)
    at_least = _st(0.80 + CLEAR_GAP * 1.1, 0.805, 0.82)
    assert gap_kind(just_under, behind) == "small" and gap_kind(at_least, behind) == "clear"
    # lower is better: the same gap, mirrored
    assert gap_kind(_st(0.2, 0.19, 0.2), _st(0.25, 0.24, 0.26), higher=False) == "clear"
    assert gap_kind(_st(0.2, 0.19, 0.2), _st(0.205, 0.201, 0.21), higher=False) == "small"


def _with_auroc(results, model, score, set_name, values):
    """``results`` with ``model``'s ``score`` AUROC on ``set_name`` replaced, seed by seed."""
    for run in results["runs"]:
        if run["model"] == model:
            run["ood"][score][set_name]["auroc"] = values[run["seed"]]
    return results


def test_no_verdict_calls_a_tiny_gap_clear(results):
    results = copy.deepcopy(results[0])
    for score in ("energy", "max_softmax", "approx_mass"):
        for name in ("uniform", "inverted", "permuted"):  # ce's energy far ahead, by 0.001
            _with_auroc(results, "ce", score, name, {0: 1.0, 1: 1.0})
            _with_auroc(results, "ngebm", score, name, {0: 0.999, 1: 0.9985})
    lines = verdicts(results, summarise(results))
    far = [line for line in key_verdicts(results, summarise(results)) if "Far OOD" in line]
    assert far == [
        "Far OOD (AUROC on the worst of uniform, inverted, permuted; each model's headline "
        "score): ce / energy (1.000) ahead of ngebm / energy (0.999), no seed overlap, but a "
        "gap of 0.0012, under the 0.01 called clear."
    ]
    assert not any("OOD" in line and "clearly" in line for line in lines)


def test_each_model_is_judged_by_one_score_on_its_worst_set(results):
    results = copy.deepcopy(results[0])
    # ngebm: energy is best on uniform, approx_mass on its worst set (the deployable choice)
    _with_auroc(results, "ngebm", "energy", "uniform", {0: 0.99, 1: 0.99})
    _with_auroc(results, "ngebm", "energy", "inverted", {0: 0.40, 1: 0.42})
    _with_auroc(results, "ngebm", "approx_mass", "uniform", {0: 0.90, 1: 0.92})
    _with_auroc(results, "ngebm", "approx_mass", "inverted", {0: 0.80, 1: 0.82})
    _with_auroc(results, "ngebm", "approx_mass", "permuted", {0: 0.85, 1: 0.85})
    summary = summarise(results)
    sets = ["uniform", "inverted", "permuted"]
    worst = {
        score: min(summary["ngebm"]["ood"][score][s]["auroc"]["median"] for s in sets)
        for score in ("energy", "max_softmax", "approx_mass")
    }
    score, stat = headline_score("ngebm", summary["ngebm"], sets)
    assert score == max(worst, key=worst.get) == "approx_mass"
    assert stat["median"] == pytest.approx(0.81)
    # ce stands for the standard baseline, its energy score, whatever scores best
    assert headline_score("ce", summary["ce"], sets)[0] == "energy"
    entries = ood_entries(results, summary, sets)
    assert list(entries) == ["ce", "ngebm"]  # ce_ts rescales ce's max softmax: left out
