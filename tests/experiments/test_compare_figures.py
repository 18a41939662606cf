"""compare's figures as a set: each model in its one colour in every figure, the OOD histograms
of the score the tables headline, no figure repeating another."""

import numpy as np
import pytest
from matplotlib.colors import to_hex

import ebmclassifier.experiments._report_figures as figures_module
import ebmclassifier.experiments.report as report
from ebmclassifier.experiments._tables import headline_score, summarise
from ebmclassifier.plotting import model_style


@pytest.fixture()
def drawn(results, tmp_path, monkeypatch):
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
    results, _ = results
    captions = report.write_report(results, tmp_path)["figures"]
    assert set(figures) == set(captions)
    return results, figures


def _hex(color):
    return to_hex(color, keep_alpha=False)


def test_each_model_keeps_its_colour_in_every_figure(drawn):
    results, figures = drawn
    seen = {}  # model -> {figure: colour}
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
        score, _ = headline_score(model, summary[model], sets)
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
