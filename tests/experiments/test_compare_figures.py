"""compare's figures as a set: each model in its one colour in every figure, the OOD histograms
of the score the tables headline, no figure repeating another."""

import copy

import numpy as np
import pytest
from matplotlib.colors import to_hex

import ebmclassifier.experiments._report_figures as figures_module
import ebmclassifier.experiments.report as report
from ebmclassifier.experiments._tables import _fmt, headline_detector, headline_score, summarise
from ebmclassifier.plotting import model_style

# compare's report drawn end to end (every figure of every model, 1.4 s): CI runs it
pytestmark = pytest.mark.slow


def _draw(results, tmp_path, monkeypatch):
    """The figures write_report draws, by file name, with the arguments each was drawn from."""
    figures = {}
    for name in ("plot_reliability_diagram", "plot_ood_histograms", "plot_risk_coverage",
                 "plot_accuracy_vs_epsilon"):  # fmt: skip
        original = getattr(figures_module, name)

        def recording(*args, _original=original, **kwargs):
            fig = _original(*args, **kwargs)
            figures[kwargs["path"].name] = (fig, args, kwargs)
            return fig

        monkeypatch.setattr(figures_module, name, recording)
    captions = report.write_report(results, tmp_path)["figures"]
    assert set(figures) == set(captions)
    return results, figures, captions


@pytest.fixture(scope="module")
def drawn(results, tmp_path_factory):
    """The stand-in run's figures, drawn once for the module's tests."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _draw(results[0], tmp_path_factory.mktemp("figures"), monkeypatch)[:2]


def _hex(color):
    return to_hex(color, keep_alpha=False)


def test_each_model_keeps_its_colour_in_every_figure(drawn):
    results, figures = drawn
    seen = {}  # model -> {figure: colour}
    assert not [name for name in figures if name.startswith("ood_ce_")]  # no detector here
    for name, (fig, _, _) in figures.items():
        if name.startswith("reliability_"):
            model = name[len("reliability_") : -4]
            seen.setdefault(model, {})[name] = _hex(fig.axes[1].containers[0][0].get_facecolor())
        elif name.startswith("ood_"):
            model = name[len("ood_") : -4]
            seen.setdefault(model, {})[name] = _hex(fig.axes[0].containers[0][0].get_facecolor())
        else:
            for line in fig.axes[0].get_lines():
                model = line.get_label().split(" (")[0]
                seen.setdefault(model, {})[name] = _hex(line.get_color())
    assert set(seen) == set(results["models"]) - set(results["skipped"])
    for model, colours in seen.items():
        assert set(colours.values()) == {_hex(model_style(model)["color"])}, model
    assert len(seen["ngebm"]) == 4  # reliability, OOD, risk-coverage, robustness


def test_the_ood_histograms_show_each_models_headline_score(drawn):
    results, figures = drawn
    summary = summarise(results)
    sets = list(results["data"]["ood_sets"])
    first = {r["model"]: r["_figure_data"] for r in results["runs"] if r["seed"] == 0}
    histograms = {name: drawn for name, drawn in figures.items() if name.startswith("ood_")}
    assert sorted(histograms) == ["ood_ce.png", "ood_ngebm.png"]  # not ce_ts: ce's rescaled
    for name, (_, args, kwargs) in histograms.items():
        model = name[len("ood_") : -4]
        score, _ = headline_score(summary[model], sets)
        assert kwargs["score_name"] == score and kwargs["title"] == f"{model} / {score}, seed 0"
        scores_in, scores_out = first[model]["scores"][score]
        np.testing.assert_array_equal(args[0], scores_in)
        assert list(args[1]) == sets
        for set_name in sets:
            np.testing.assert_array_equal(args[1][set_name], scores_out[set_name])


def test_robustness_is_one_figure_of_every_model(drawn):
    results, figures = drawn
    assert not [name for name in figures if name.startswith("robustness_")]
    _, args, _ = figures["robustness.png"]
    curves = args[1]
    assert list(curves) == ["ce", "ngebm"]  # ce_ts has ce's predictions: not attacked
    for model, seeds in curves.items():
        assert seeds == [r["robust_accuracy"] for r in results["runs"] if r["model"] == model]


def test_the_detector_the_table_pairs_with_ce_has_its_histogram(results, tmp_path, monkeypatch):
    # the issue: the winning far-OOD detector had no histogram. Two detectors on ce's
    # features (copies of its energy's measurements, knn's scores shifted so they differ);
    # knn, the first of --detectors, is the one the summary table judges, so it is drawn
    results = copy.deepcopy(results[0])
    for run in results["runs"]:
        if run["model"] == "ce":
            for detector, shift in (("knn", 1.0), ("mahalanobis", 2.0)):
                for measured in ("ood", "ood_decisions", "aurc"):
                    run[measured][detector] = copy.deepcopy(run[measured]["energy"])
                if "_figure_data" in run:
                    s_in, s_out = run["_figure_data"]["scores"]["energy"]
                    shifted = (s_in + shift, {k: v + shift for k, v in s_out.items()})
                    run["_figure_data"]["scores"][detector] = shifted
    results["headline_detector"] = "knn"
    results, figures, captions = _draw(results, tmp_path, monkeypatch)
    histograms = sorted(name for name in figures if name.startswith("ood_"))
    assert histograms == ["ood_ce.png", "ood_ce_knn.png", "ood_ngebm.png"]
    _, args, kwargs = figures["ood_ce_knn.png"]
    first = next(r for r in results["runs"] if r["model"] == "ce" and r["seed"] == 0)
    np.testing.assert_array_equal(args[0], first["_figure_data"]["scores"]["knn"][0])
    assert kwargs["model"] == "ce" and kwargs["title"] == "ce / knn, seed 0"
    sets = list(results["data"]["ood_sets"])
    worst = headline_detector(results, summarise(results)["ce"], sets)[1]
    worst_set = next(s for s in sets if summarise(results)["ce"]["ood"]["knn"][s]["auroc"] == worst)
    values = ", ".join(f"{worst['per_seed'][s]:.3f}" for s in (0, 1))
    assert captions["ood_ce_knn.png"] == (
        "`ce / knn`, the detector the summary table pairs with it, seed 0, the seed of the "
        f"median AUROC over seeds on its worst far-OOD set, {worst_set}: "
        f"{_fmt(worst)} (seeds 0, 1: {values})."
    )
    assert "ood_ce_knn.png" in (tmp_path / "report.md").read_text()


def test_the_risk_coverage_figure_keeps_every_curve_in_view(drawn):
    results, figures = drawn
    fig, args, kwargs = figures["risk_coverage.png"]
    ax = fig.axes[0]
    top = ax.get_ylim()[1]
    for line in ax.get_lines():
        coverage, risk = line.get_xdata(), line.get_ydata()
        assert risk[coverage >= 0.1].max() <= top
    assert list(args[1]) == [m for m in results["models"] if m not in results["skipped"]]
