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
    # issue #15: the empty bins [0, 0.2) and [0.2, 0.4) get no bar (they used to be drawn on
    # the diagonal, as if perfectly calibrated); the bin [0.4, 0.6) is a real accuracy of 0
    np.testing.assert_allclose(accuracy_bars, [0.0, 1.0, 0.5])
    np.testing.assert_allclose([p.get_x() + p.get_width() / 2 for p in diagram.containers[0]],
                               [0.5, 0.7, 0.9])  # fmt: skip
    # the red gap bars run from the accuracy to the bin's mean confidence (0.5, 0.7, 0.9)
    gaps = diagram.containers[1]
    np.testing.assert_allclose([p.get_y() + p.get_height() for p in gaps], [0.5, 0.7, 0.9])


def _hatched_spans(ax):
    return sorted(
        (round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6))
        for p in ax.patches
        if p.get_hatch() == "//"
    )


def test_reliability_diagram_marks_empty_bins_and_writes_the_counts(tmp_path):
    rng = np.random.default_rng(0)
    # confidences only in [0.5, 0.6) and [0.8, 1]: bins 0-4 and 6-7 of 10 are empty
    confidence = np.r_[rng.uniform(0.5, 0.6, 7), rng.uniform(0.8, 1.0, 30), 1.0]
    proba = np.c_[confidence, 1 - confidence]
    y = (rng.uniform(size=confidence.size) > confidence).astype(int)
    fig = plot_reliability_diagram(y, proba, n_bins=10, path=tmp_path / "r.png")
    counts_ax, diagram = fig.axes
    expected_counts = np.histogram(confidence, bins=np.linspace(0, 1, 11))[0]
    assert expected_counts.sum() == confidence.size and (expected_counts == 0).sum() == 7
    full = np.flatnonzero(expected_counts)
    # one count label per non-empty bin, over its bar
    labels = {round(t.get_position()[0], 6): t.get_text() for t in counts_ax.texts}
    assert labels == {round((b + 0.5) / 10, 6): str(expected_counts[b]) for b in full}
    assert [p.get_height() for p in counts_ax.containers[0]] == list(expected_counts[full])
    # every empty bin is hatched in both panels, and has no accuracy bar
    empty = [
        (round(b / 10, 6), round((b + 1) / 10, 6)) for b in np.flatnonzero(expected_counts == 0)
    ]
    assert _hatched_spans(diagram) == empty and _hatched_spans(counts_ax) == empty
    assert len(diagram.containers[0]) == len(full)
    (legend,) = fig.legends  # under the figure, where it covers no bar
    legend = [t.get_text() for t in legend.get_texts()]
    assert "empty bin (no samples)" in legend


def test_reliability_bins_reproduce_the_ece():
    # the diagram's bins against netcal's ECE (through expected_calibration_error): the
    # count-weighted mean of |accuracy - mean confidence| over the drawn bins is the ECE;
    # confidences on a bin edge (0.6 lies below linspace's 0.6000000000000001) land alike
    from ebmclassifier.metrics import expected_calibration_error, top_label
    from ebmclassifier.plotting import _bin_statistics

    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(3) * 0.5, size=400)
    proba[:30] = [0.6, 0.3, 0.1]  # top-label confidence 0.6, a bin edge for n_bins=5 and 10
    proba[30:40] = [0.3, 0.3, 0.4]
    proba[40:50] = [1.0, 0.0, 0.0]
    y = rng.integers(0, 3, size=400)
    for n_bins in (5, 10, 15):
        confidence, correct = top_label(y, proba, None)
        _, counts, accuracy, mean_conf = _bin_statistics(confidence, correct, n_bins)
        full = counts > 0
        ece = np.sum(counts[full] / 400 * np.abs(accuracy[full] - mean_conf[full]))
        assert counts.sum() == 400 and np.isnan(accuracy[~full]).all()
        np.testing.assert_allclose(ece, expected_calibration_error(y, proba, n_bins), atol=1e-12)


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
