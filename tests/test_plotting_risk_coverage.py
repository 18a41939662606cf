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
