"""Plots return Figures, write PNGs, and draw what the metrics compute."""

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from ebmclassifier.plotting import (
    plot_accuracy_vs_epsilon,
    plot_ood_histograms,
    plot_reliability_diagram,
)


def _is_png(path):
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_pyplot_figures_are_left_open(tmp_path):
    import matplotlib.pyplot as plt

    before = len(plt.get_fignums())
    plot_reliability_diagram([0, 1], [[0.9, 0.1], [0.3, 0.7]], path=tmp_path / "r.png")
    assert len(plt.get_fignums()) == before
    assert matplotlib.get_backend()  # importing the module set no interactive requirement


def test_reliability_diagram_png_and_bars(tmp_path):
    # same hand example as test_metrics: bins of width 0.2; accuracy 0.5 in [0.8, 1],
    # 1 in [0.6, 0.8), 0 in [0.4, 0.6)
    proba = np.array([[0.9, 0.05, 0.05], [0.9, 0.05, 0.05], [0.3, 0.7, 0.0], [0.5, 0.3, 0.2]])
    y = np.array([0, 1, 1, 2])
    path = tmp_path / "reliability.png"
    fig = plot_reliability_diagram(y, proba, n_bins=5, title="toy", path=path)
    assert isinstance(fig, Figure) and _is_png(path)
    diagram = fig.axes[1]
    assert "toy, ECE 0.400" in diagram.get_title()
    accuracy_bars = [p.get_height() for p in diagram.containers[0]]
    # empty bins are drawn on the diagonal (bin centres 0.1 and 0.3)
    np.testing.assert_allclose(accuracy_bars, [0.1, 0.3, 0.0, 1.0, 0.5])


def test_ood_histograms_png(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "ood.png"
    fig = plot_ood_histograms(
        rng.normal(size=200),
        {"uniform": rng.normal(3, size=100), "inverted": rng.normal(0.5, size=100)},
        score_name="energy",
        title="ce",
        path=path,
    )
    assert isinstance(fig, Figure) and _is_png(path)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0].startswith("in-distribution") and labels[1].startswith("uniform (AUROC 0.9")
    with pytest.raises(TypeError, match="dict"):
        plot_ood_histograms([0.0], [1.0])


def test_accuracy_vs_epsilon_png(tmp_path):
    eps = [0.0, 0.1, 0.2]
    path = tmp_path / "robust.png"
    per_seed = [[0.9, 0.5, 0.1], [0.95, 0.6, 0.2], [0.92, 0.4, 0.1]]
    fig = plot_accuracy_vs_epsilon(
        eps, {"ce": per_seed, "ngebm": [0.9, 0.7, 0.4]}, norm="l2", path=path
    )
    assert isinstance(fig, Figure) and _is_png(path)
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.92, 0.5, 0.1])  # median over seeds
    assert "L2" in ax.get_xlabel()
    with pytest.raises(ValueError, match="3 epsilons"):
        plot_accuracy_vs_epsilon(eps, {"ce": [0.9, 0.5]})
