"""Figures for the comparison report: reliability diagrams, OOD score histograms, robustness.

Every function builds a :class:`matplotlib.figure.Figure` directly (no pyplot state, so it is
safe on headless machines and in loops), returns it, and saves a PNG when given ``path``.
"""

from __future__ import annotations

import os

import numpy as np
from matplotlib.figure import Figure
from netcal.presentation import ReliabilityDiagram

from .metrics import _top_label, expected_calibration_error, ood_metrics

__all__ = ["plot_reliability_diagram", "plot_ood_histograms", "plot_accuracy_vs_epsilon"]


def _finish(fig: Figure, path, ax=None, title: str | None = None) -> Figure:
    """Title, legend and layout of a one-panel figure (``ax``), then save it to ``path``."""
    if ax is not None:
        if title is not None:
            ax.set_title(title)
        ax.legend(fontsize="small")
        fig.tight_layout()
    if path is not None:
        fig.savefig(os.fspath(path), dpi=100)
    return fig


def plot_reliability_diagram(
    y_true, y_proba, n_bins: int = 15, *, classes=None, title: str | None = None, path=None
) -> Figure:
    """Reliability diagram of the top-label confidence (netcal's ``ReliabilityDiagram``).

    Top: the share of samples per confidence bin. Bottom: accuracy per bin against the
    diagonal of perfect calibration, the gap to it in red. Binning as in
    :func:`~ebmclassifier.metrics.expected_calibration_error` (equal width over [0, 1]);
    empty bins are drawn on the diagonal.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels: column indices of ``y_proba``, or labels of ``classes``.
    y_proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities.
    n_bins : int, default=15
        Number of confidence bins.
    classes : array-like of shape (n_classes,), default=None
        The label of each column (``estimator.classes_``).
    title : str or None, default=None
        Appended to the panel titles, e.g. the model's name. The ECE is always shown.
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    confidence, correct = _top_label(y_true, y_proba, classes)
    ece = expected_calibration_error(y_true, y_proba, n_bins, classes=classes)
    suffix = f"ECE {ece:.3f}" if title is None else f"{title}, ECE {ece:.3f}"
    fig = Figure(figsize=(6, 6))
    # a 1-D confidence with 0/1 hits is netcal's binary mode: exactly the top-label diagram
    ReliabilityDiagram(bins=n_bins).plot(confidence, correct, title_suffix=suffix, fig=fig)
    return _finish(fig, path)


def plot_ood_histograms(
    scores_in,
    scores_out: dict,
    *,
    score_name: str = "OOD score",
    title: str | None = None,
    bins: int = 50,
    path=None,
) -> Figure:
    """Histograms of an OOD score on in-distribution data and on each OOD set.

    Parameters
    ----------
    scores_in : array-like of shape (n_in,)
        Scores of held-out in-distribution samples (higher = more OOD, as ``score_ood``).
    scores_out : dict of str to array-like
        Scores of each OOD set, by name; each legend entry shows its AUROC against
        ``scores_in``.
    score_name : str, default="OOD score"
        The x-axis label, e.g. ``"energy"``.
    title : str or None, default=None
        Figure title, e.g. the model's name.
    bins : int, default=50
        Number of histogram bins over the pooled range of all scores.
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    if not isinstance(scores_out, dict) or not scores_out:
        raise TypeError(
            "scores_out must be a non-empty dict of OOD set name to scores, e.g. "
            f"{{'uniform': scores}}. Got {type(scores_out).__name__}."
        )
    scores_in = np.asarray(scores_in, dtype=np.float64)
    pooled = np.concatenate(
        [scores_in] + [np.asarray(s, dtype=np.float64) for s in scores_out.values()]
    )
    edges = np.histogram_bin_edges(pooled[np.isfinite(pooled)], bins=bins)
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot(1, 1, 1)
    ax.hist(scores_in, bins=edges, density=True, alpha=0.6, label="in-distribution (test)")
    for name, scores in scores_out.items():
        auroc = ood_metrics(scores_in, scores)["auroc"]
        ax.hist(
            np.asarray(scores, dtype=np.float64), bins=edges, density=True, alpha=0.45,
            histtype="stepfilled", label=f"{name} (AUROC {auroc:.3f})",
        )  # fmt: skip
    ax.set_xlabel(f"{score_name} (higher = more OOD)")
    ax.set_ylabel("density")
    return _finish(fig, path, ax, title)


def plot_accuracy_vs_epsilon(
    epsilons,
    accuracies: dict,
    *,
    norm: str = "linf",
    title: str | None = None,
    path=None,
) -> Figure:
    """Accuracy under attack against the attack radius, one curve per model.

    Parameters
    ----------
    epsilons : array-like of shape (n_eps,)
        Attack radii, as given to :func:`~ebmclassifier.metrics.adversarial_accuracy`.
    accuracies : dict of str to array-like of shape (n_eps,) or (n_seeds, n_eps)
        Accuracies per model. With several seeds the median is drawn and the band spans
        the minimum to the maximum.
    norm : str, default="linf"
        The attack's norm, for the axis label.
    title : str or None, default=None
        Figure title.
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    epsilons = np.asarray(epsilons, dtype=np.float64)
    if not isinstance(accuracies, dict) or not accuracies:
        raise TypeError(
            "accuracies must be a non-empty dict of model name to accuracies. "
            f"Got {type(accuracies).__name__}."
        )
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot(1, 1, 1)
    for name, acc in accuracies.items():
        acc = np.atleast_2d(np.asarray(acc, dtype=np.float64))
        if acc.shape[1] != epsilons.size:
            raise ValueError(
                f"accuracies[{name!r}] has {acc.shape[1]} values per seed but there are "
                f"{epsilons.size} epsilons."
            )
        (line,) = ax.plot(epsilons, np.median(acc, axis=0), marker="o", label=name)
        if acc.shape[0] > 1:
            ax.fill_between(
                epsilons, acc.min(axis=0), acc.max(axis=0), color=line.get_color(), alpha=0.2
            )
    ax.set_xlabel(f"epsilon ({'L-inf' if norm == 'linf' else 'L2'} PGD)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    return _finish(fig, path, ax, title)
