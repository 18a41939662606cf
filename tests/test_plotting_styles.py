"""Figures as a set: one colour and marker per model in every figure (every plotting function
takes them from plotting.model_style, whatever the order or company of the series), and
legends beside the data, never over it."""

import numpy as np
import pytest
from matplotlib.colors import to_hex

from ebmclassifier.plotting import (
    MODEL_STYLES,
    model_style,
    plot_accuracy_vs_epsilon,
    plot_ood_histograms,
    plot_reliability_diagram,
    plot_risk_coverage,
    plot_task_curves,
)


def _hex(color):
    return to_hex(color, keep_alpha=False)


def _line_styles(fig):
    return {
        line.get_label().split(" (")[0]: (_hex(line.get_color()), line.get_marker())
        for line in fig.axes[0].get_lines()
    }


def _expected(*names):
    return {n: (_hex(model_style(n)["color"]), model_style(n)["marker"]) for n in names}


def test_the_mapping_gives_every_model_its_own_colour_and_marker():
    pairs = [(_hex(color), marker) for color, marker in MODEL_STYLES.values()]
    assert len(set(pairs)) == len(pairs)
    assert len({_hex(color) for color, _ in MODEL_STYLES.values()}) == len(MODEL_STYLES)
    # a name outside the mapping gets a spare style, the same every time
    assert model_style("my_model") == model_style("my_model")
    assert model_style("ngebm") == {"color": MODEL_STYLES["ngebm"][0], "marker": "^"}


@pytest.mark.parametrize("order", [("ce", "ngebm", "jem"), ("jem", "ngebm"), ("ngebm",)])
def test_curves_take_the_models_style_in_any_order_or_company(order):
    rng = np.random.default_rng(0)
    epsilons = [0.0, 0.1, 0.2]
    fig = plot_accuracy_vs_epsilon(epsilons, {m: rng.uniform(size=(2, 3)) for m in order})
    assert _line_styles(fig) == _expected(*order)
    y = rng.integers(0, 3, 30)
    fig = plot_risk_coverage(y, {m: rng.dirichlet(np.ones(3), size=30) for m in order})
    assert _line_styles(fig) == _expected(*order)
    fig = plot_task_curves({m: [0.9, 0.5] for m in order})
    assert _line_styles(fig) == _expected(*order)
    # the band over seeds is the line's colour
    fig = plot_accuracy_vs_epsilon(epsilons, {m: rng.uniform(size=(2, 3)) for m in order})
    bands = [_hex(band.get_facecolor()[0]) for band in fig.axes[0].collections]
    assert bands == [_expected(m)[m][0] for m in order]


def test_continual_methods_have_styles_of_their_own_too():
    from ebmclassifier.experiments.continual import METHODS

    assert set(METHODS) <= set(MODEL_STYLES)


@pytest.mark.parametrize("model", ["ce", "ngebm", "jem"])
def test_single_model_figures_take_its_colour(model):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), size=50)
    fig = plot_reliability_diagram(rng.integers(0, 3, 50), proba, n_bins=5, model=model)
    diagram = fig.axes[1]
    accuracy_bars = diagram.containers[0]
    assert {_hex(bar.get_facecolor()) for bar in accuracy_bars} == {
        _hex(model_style(model)["color"])
    }
    fig = plot_ood_histograms(rng.normal(size=50), {"noise": rng.normal(2, size=50)}, model=model)
    in_distribution = fig.axes[0].containers[0]
    assert _hex(in_distribution[0].get_facecolor()) == _hex(model_style(model)["color"])


def _figure(kind):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3) * 0.3, size=200)  # bars up to 1.0 in many bins
    y = rng.integers(0, 3, 200)
    if kind == "reliability":
        return plot_reliability_diagram(y, proba, n_bins=10, title="ngebm", model="ngebm")
    if kind == "ood":
        sets = ("uniform", "inverted", "permuted")
        scores_out = {name: rng.normal(i, size=99) for i, name in enumerate(sets)}
        return plot_ood_histograms(rng.normal(size=99), scores_out)
    if kind == "robustness":
        return plot_accuracy_vs_epsilon([0, 0.1], {"ce": [0.9, 0.1], "jem": [0.95, 0.9]})
    if kind == "risk_coverage":
        return plot_risk_coverage(y, {"ce": proba, "ngebm": proba[::-1]})
    return plot_task_curves({m: [0.9, 0.5, 0.3] for m in ("joint", "ce", "ce_batch", "ce_k1")})


@pytest.mark.parametrize("kind", ["reliability", "ood", "robustness", "risk_coverage", "tasks"])
def test_no_legend_covers_a_panel(kind):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = _figure(kind)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)  # the constrained layout places the legends
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), ax
        # and inside the figure, not cut off at its edge
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 + 0.5
        assert fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1 + 0.5
