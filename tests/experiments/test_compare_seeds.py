"""A seed far from the others is named, with its value (#50: one of JEM's three seeds scored an
OOD set at AUROC 0.002, the median said 1.000, the verdict called it a tie and the report never
said that a seed had failed); each per-model figure shows the seed its caption names."""

import numpy as np
import pytest

from ebmclassifier import cli
from ebmclassifier.experiments import compare
from ebmclassifier.experiments._seeds import (
    FAR_FROM_OTHERS,
    FAR_SPREAD_RATIO,
    far_seeds,
    far_text,
    median_seed,
)
from ebmclassifier.experiments._verdicts import _compare_best

from .compare_stand_ins import SoftmaxRegression, stand_in_registry


def _per_seed(*values):
    return {"median": float(np.median(values)), "min": min(values), "max": max(values),
            "n": len(values), "per_seed": dict(enumerate(values))}  # fmt: skip


@pytest.mark.parametrize("failed", [0, 1, 2, 3, 4])
def test_a_failed_seed_is_found_wherever_it_is(failed):
    values = [0.999, 1.0, 0.998, 0.997, 1.0]
    values[failed] = 0.002  # an inverted score
    assert far_seeds(_per_seed(*values[:3] if failed < 3 else values)) == {failed: 0.002}


def test_far_means_beyond_the_distance_and_beyond_the_others_spread():
    # the distance to the others' median: just under and just over FAR_FROM_OTHERS
    assert far_seeds(_per_seed(0.9, 0.9, 0.9 - FAR_FROM_OTHERS * 0.99)) == {}
    assert far_seeds(_per_seed(0.9, 0.9, 0.9 - FAR_FROM_OTHERS * 1.01)) == {
        2: pytest.approx(0.6475)
    }
    # the others' own spread: a seed as far as FAR_SPREAD_RATIO times it is not far
    others = (0.5, 0.6)  # median 0.55, spread 0.1
    at = 0.55 + FAR_SPREAD_RATIO * 0.1 * 0.99
    assert far_seeds(_per_seed(*others, at)) == {}
    beyond = 0.55 + FAR_SPREAD_RATIO * 0.1 * 1.01
    assert far_seeds(_per_seed(*others, beyond)) == {2: beyond}
    # two seeds cannot say which one is off; a summary without per-seed values says nothing
    assert far_seeds(_per_seed(0.0, 1.0)) == {}
    assert far_seeds({"median": 0.5, "min": 0.0, "max": 1.0, "n": 3}) == {}


def test_the_median_seed_is_the_one_whose_figure_is_the_median():
    assert median_seed(_per_seed(0.900, 0.641, 0.605)) == 1
    assert median_seed(_per_seed(0.605, 0.900, 0.641)) == 2
    assert median_seed(_per_seed(0.3, 0.1)) == 1  # even: the lower of the two middle values
    assert median_seed(_per_seed(0.9, 0.4, 0.1, 0.2)) == 3
    assert median_seed(_per_seed(0.5, 0.5, 0.5)) == 1  # equal values: in the seeds' order
    assert median_seed({"median": 0.5}) is None


def test_a_tie_of_medians_names_the_failed_seed_behind_it():
    # the issue: "ngebm / approx_mass and jem / energy tied (1.000)" with JEM's seed 1 at 0.002
    line = _compare_best(
        {
            "ngebm / approx_mass": _per_seed(1.0, 1.0, 0.999),
            "jem / energy": _per_seed(1.0, 0.002, 1.0),
        },
        lower=False,
    )
    assert line == (
        "ngebm / approx_mass and jem / energy tied (1.000); but jem / energy's seed 1 reads "
        "0.002, far from its other seeds"
    )
    text = far_text("jem / energy's AUROC on inverted", _per_seed(1.0, 0.002, 1.0), auroc=True)
    assert text.startswith("jem / energy's AUROC on inverted: seed 1 at 0.002 against 1.000, 1.000")
    assert "(below 0.5: that seed's score ranks the set as more in-distribution" in text


class _FailsAtSeedOne(SoftmaxRegression):
    """Trains at every seed but 1; at seed 1 it learns nothing and its OOD scores are inverted:
    a fit that fails without raising."""

    def fit(self, X, y):
        if self.random_state == 1:
            self.max_epochs = 0
        return super().fit(X, y)

    def score_ood(self, X, method="energy"):
        scores = super().score_ood(X, method)
        return -scores if self.random_state == 1 else scores


@pytest.mark.slow
def test_a_compare_run_with_a_failed_seed_names_it_in_the_terminal_and_the_report(
    capsys, monkeypatch, tmp_path
):
    registry = stand_in_registry()
    registry["ngebm"] = type(registry["ngebm"])(
        "ngebm", "fails at seed 1", build=lambda params: _FailsAtSeedOne(**params)
    )
    monkeypatch.setattr(compare, "default_models", lambda: registry)
    out = tmp_path / "report"
    status = cli.main(["compare", "--data", "digits", "--models", "ce,ngebm", "--seeds", "3",
                       "--epochs", "20", "--max-test", "200", "--n-attack", "20",
                       "--detectors", "none", "--out", str(out), "--no-progress"])  # fmt: skip
    printed = capsys.readouterr().out
    assert status == 0
    (line,) = [line for line in printed.splitlines() if "Seeds far from the others" in line]
    assert "ngebm's accuracy: seed 1 at " in line
    # its OOD score, inverted at seed 1 (the stand-in's energy ranks the OOD sets below the
    # test digits at the seeds that trained, so seed 1's is the one near 1)
    assert "ngebm / energy's AUROC on inverted: seed 1 at " in line
    report = (out / "report.md").read_text()
    assert line[2:] in report  # the same sentence in "What the numbers say"
    # the figures: ngebm's OOD histogram shows the median seed, not seed 1, and its caption
    # names seed 1 with its values
    caption = next(text for text in report.splitlines() if text.startswith("*`ood_ngebm.png"))
    shown = caption.split("`ngebm / energy`, seed ")[1][0]
    assert shown in "02" and f"seed {shown}, the seed of the median AUROC over seeds" in caption
    assert "; seeds far from the others on uniform: seed 1 at " in caption
