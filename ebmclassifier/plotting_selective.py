"""The risk-coverage figure of selective classification.

Like :mod:`ebmclassifier.plotting`, it builds a :class:`matplotlib.figure.Figure` directly (no
pyplot state), returns it, and saves a PNG when given ``path``.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from .metrics import aurc, risk_coverage_curve
from .plotting import check_named_dict, finish_figure

__all__ = ["plot_risk_coverage"]


def plot_risk_coverage(
    y_true, predictions: dict, *, classes=None, title: str | None = None, path=None
) -> Figure:
    """Risk-coverage curves of several models or confidence measures, AURC in the legend.

    Each curve is :func:`~ebmclassifier.metrics.risk_coverage_curve`: the error rate of the
    samples a selective classifier accepts against the share it accepts, from the most
    confident sample (left) to all of them (right, the plain error rate). Lower is better;
    the legend gives each curve's :func:`~ebmclassifier.metrics.aurc`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    predictions : dict
        ``{name: y_proba}`` or ``{name: (y_pred, confidence)}``: the probabilities of
        ``predict_proba`` (confidence ``max_k p_k``), or labels or probabilities with a
        confidence of one's own (higher = more confident, e.g. ``-score_ood``).
    classes : array-like of shape (n_classes,), default=None
        The label of each probability column (``estimator.classes_``).
    title : str or None, default=None
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> proba = np.array([[0.9, 0.1], [0.4, 0.6], [0.6, 0.4], [0.2, 0.8]])
    >>> fig = plot_risk_coverage(  # errors on samples 1 and 2
    ...     [0, 0, 1, 1], {"softmax": proba, "other": (proba, [0.8, 0.7, 0.1, 0.6])})
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['softmax (AURC 0.208)', 'other (AURC 0.333)']
    """
    check_named_dict(predictions, "predictions", "{name: y_proba} or {name: (y_pred, confidence)}")
    fig = Figure(figsize=(6, 4.5))
    ax = fig.add_subplot()
    for name, prediction in predictions.items():
        y_pred, confidence = prediction if isinstance(prediction, tuple) else (prediction, None)
        coverage, risk, _ = risk_coverage_curve(y_true, y_pred, confidence, classes=classes)
        area = aurc(y_true, y_pred, confidence, classes=classes)
        ax.plot(coverage, risk, marker="." if len(coverage) < 50 else None,
                label=f"{name} (AURC {area:.3f})")  # fmt: skip
    ax.set_xlabel("coverage (share of samples answered)")
    ax.set_ylabel("selective risk (error rate of the answered)")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    return finish_figure(fig, path, ax, title)
