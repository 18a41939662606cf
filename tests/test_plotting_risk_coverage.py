"""The risk-coverage figure draws what risk_coverage_curve and aurc compute."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from ebmclassifier.metrics import aurc, risk_coverage_curve
from ebmclassifier.plotting import plot_risk_coverage


def test_risk_coverage_figure_draws_the_curves(tmp_path):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 40)
    proba = rng.dirichlet(np.ones(3), size=40)
    other = rng.random(40)
    path = tmp_path / "rc.png"
    fig = plot_risk_coverage(
        y, {"softmax": proba, "random": (proba, other)}, title="toy", path=path
    )
    assert isinstance(fig, Figure)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = fig.axes[0].get_lines()
    for line, confidence in zip(lines, (None, other), strict=True):
        coverage, risk, _ = risk_coverage_curve(y, proba, confidence)
        np.testing.assert_allclose(line.get_xdata(), coverage)
        np.testing.assert_allclose(line.get_ydata(), risk)
        assert f"{aurc(y, proba, confidence):.3f}" in line.get_label()
    assert fig.axes[0].get_title() == "toy"


def test_risk_coverage_figure_bad_input():
    with pytest.raises(TypeError, match="non-empty dict"):
        plot_risk_coverage([0, 1], [[0.9, 0.1], [0.2, 0.8]])


def _selective(n_samples, errors_at, rng):
    """Labels 0, predictions and a confidence ranking where the samples ranked ``errors_at``
    (0 = the most confident) are the errors."""
    y_pred = np.zeros(n_samples, dtype=int)
    y_pred[errors_at] = 1
    confidence = np.linspace(1.0, 0.5, n_samples)
    order = rng.permutation(n_samples)  # the samples in any order, the ranking kept
    return np.zeros(n_samples, dtype=int), (y_pred[order], confidence[order])


def test_every_curve_stays_in_view_and_every_aurc_reads_apart():
    # The digits figure: three models with a few errors among 540 samples, and JEM,
    # whose most confident sample is wrong: its spike to risk 1 at the left end flattened
    # the other curves against the axis, and the legend read "AURC 0.001" three times.
    rng = np.random.default_rng(0)
    n = 540
    y = np.zeros(n, dtype=int)  # every _selective call has labels 0
    predictions = {
        "ce": _selective(n, [400, 450, 500, 520, 530, 539], rng)[1],
        "ce_ts": _selective(n, [420, 470, 505, 525, 535, 539], rng)[1],
        "ngebm": _selective(n, [480, 510, 530, 539], rng)[1],
        "jem": _selective(n, [0, 300, 400, 500, 539], rng)[1],
    }
    areas = {name: aurc(y, *prediction) for name, prediction in predictions.items()}
    assert len({f"{a:.3f}" for a in areas.values()}) < len(areas)  # the old legend's clash
    fig = plot_risk_coverage(y, predictions)
    ax = fig.axes[0]
    bottom, top = ax.get_ylim()
    for line in ax.get_lines():
        coverage, risk = line.get_xdata(), line.get_ydata()
        informative = risk[coverage >= 0.1]
        assert bottom <= informative.min() and informative.max() <= top, line.get_label()
    jem = risk_coverage_curve(y, *predictions["jem"])[1]
    assert jem.max() == 1.0 and top < 0.1  # zoomed to the curves, not to JEM's spike
    labels = [line.get_label() for line in ax.get_lines()]
    numbers = [label.split("AURC ")[1].rstrip(")") for label in labels]
    assert len(set(numbers)) == len(areas)  # four different areas read differently
    for number, area in zip(numbers, areas.values(), strict=True):
        assert float(number) == pytest.approx(area, abs=0.6 * 10 ** -len(number.split(".")[1]))


def test_min_coverage_zero_spans_every_point_and_bad_values_are_refused():
    y = np.zeros(20, dtype=int)
    spike = _selective(20, [0, 19], np.random.default_rng(1))[1]
    fig = plot_risk_coverage(y, {"jem": spike}, min_coverage=0)
    assert fig.axes[0].get_ylim()[1] >= 1.0
    with pytest.raises(ValueError, match=r"min_coverage must be in \[0, 1\)"):
        plot_risk_coverage(y, {"jem": spike}, min_coverage=1.0)
