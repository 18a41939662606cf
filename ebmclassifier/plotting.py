"""Figures of the reports: reliability diagrams, OOD score histograms, robustness,
risk-coverage curves (``compare``), accuracy curves and matrices of continual learning
(``continual``).

Every function builds a :class:`matplotlib.figure.Figure` directly (no pyplot state, so it is
safe on headless machines and in loops), returns it, and saves a PNG when given ``path``.
A model (or continual method) keeps one colour and one marker in every figure:
:func:`model_style` is the one mapping every function draws a named series with.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._utils.atomic import atomic_write
from .metrics import aurc, expected_calibration_error, ood_metrics, risk_coverage_curve, top_label

__all__ = [
    "model_style",
    "plot_reliability_diagram",
    "plot_ood_histograms",
    "plot_accuracy_vs_epsilon",
    "plot_risk_coverage",
    "plot_task_curves",
    "plot_accuracy_matrices",
]


#: The colour and marker of each model of ``compare`` and each method of ``continual``: a model
#: and its temperature-scaled twin share a hue (dark and light), and so do the continual
#: methods built on one loss. A name not listed gets a colour and marker of :data:`_SPARE`,
#: fixed by the name.
MODEL_STYLES: dict[str, tuple[str, str]] = {
    # compare
    "ce": ("#1f77b4", "o"),
    "ce_ts": ("#aec7e8", "s"),
    "ce_ens": ("#17becf", "D"),
    "ngebm": ("#ff7f0e", "^"),
    "ngebm_ts": ("#ffbb78", "v"),
    "ngebm_ens": ("#8c564b", "P"),
    "jem": ("#2ca02c", "X"),
    "jem_ts": ("#98df8a", "*"),
    # continual (its "ce", fine-tuning with cross-entropy, is compare's "ce")
    "joint": ("black", "s"),
    "ce_batch": ("#9467bd", "v"),
    "ce_k1": ("#c5b0d5", "<"),
    "ce_cond": ("#e377c2", ">"),
    "ce_batch_cond": ("#f7b6d2", "d"),
    "ce_replay": ("#d62728", "P"),
    "ce_batch_replay": ("#ff9896", "X"),
    "ce_k1_replay": ("#9edae5", "*"),
    "ngebm_batch": ("#c49c94", "^"),
    "ngebm_batch_replay": ("#7f7f7f", "h"),
    "jem_batch": ("#bcbd22", "D"),
    "ce_lwf": ("#dbdb8d", "p"),
    "ngebm_generated": ("#ad494a", "H"),
    "jem_generated": ("#6b6ecf", "8"),
}
_SPARE = (("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3"), "ov^sDP")


def model_style(name: str) -> dict:
    """The colour and marker a model is drawn with in every figure.

    Parameters
    ----------
    name : str
        A model of ``compare`` (``"ce"``, ``"ce_ts"``, ``"ngebm"``, ``"jem"``, ...), a method
        of ``continual``, or any other name (given a spare colour and marker chosen by the
        name, so it is the same in every figure too).

    Returns
    -------
    style : dict
        ``{"color": ..., "marker": ...}``, keyword arguments of ``Axes.plot``.

    Examples
    --------
    >>> model_style("ngebm")
    {'color': '#ff7f0e', 'marker': '^'}
    >>> model_style("my_model") == model_style("my_model")
    True
    """
    if name in MODEL_STYLES:
        color, marker = MODEL_STYLES[name]
    else:
        colors, markers = _SPARE
        key = zlib.crc32(str(name).encode())
        color, marker = colors[key % len(colors)], markers[key // len(colors) % len(markers)]
    return {"color": color, "marker": marker}


def finish_figure(fig: Figure, path, ax=None, title: str | None = None) -> Figure:
    """Title and legend of a one-panel figure (``ax``), then save it to ``path``.

    The one way the reports save a figure (a PNG at 100 dpi). The legend goes right of the
    panel, where it covers no data; the figure's constrained layout makes room for it.
    """
    if ax is not None:
        if title is not None:
            ax.set_title(title)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    if isinstance(path, str | os.PathLike):  # replaced at once, whole or not at all
        with atomic_write(path) as file:
            fig.savefig(file, format=os.path.splitext(path)[1].lstrip(".") or None, dpi=100)
    elif path is not None:  # a file object
        fig.savefig(path, dpi=100)
    return fig


def check_named_dict(value, name: str, what: str) -> None:
    """A TypeError naming ``name`` unless ``value`` is a non-empty dict (of one curve per
    name); ``what`` says what it maps to, e.g. ``"of model name to accuracies"``."""
    if not isinstance(value, dict) or not value:
        raise TypeError(f"{name} must be a non-empty dict {what}. Got {type(value).__name__!r}.")


def _bin_statistics(confidence: np.ndarray, correct: np.ndarray, n_bins: int):
    """Per equal-width confidence bin: edges, counts, accuracy and mean confidence.

    Bin ``b`` holds ``[b / n_bins, (b + 1) / n_bins)``, the last one also 1.0, as the
    calibration errors of :mod:`ebmclassifier.metrics` bin. Accuracy and mean confidence are
    NaN in an empty bin: there is nothing to measure there.
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(index, weights=correct, minlength=n_bins) / counts
        mean_confidence = np.bincount(index, weights=confidence, minlength=n_bins) / counts
    return edges, counts, accuracy, mean_confidence


def _mark_empty_bins(ax, edges: np.ndarray, empty: np.ndarray, label: str | None) -> None:
    """A hatched grey band over each empty bin (one legend entry)."""
    for i, b in enumerate(np.flatnonzero(empty)):
        ax.axvspan(
            edges[b],
            edges[b + 1],
            facecolor="none",
            edgecolor="0.6",
            hatch="//",
            linewidth=0,
            label=label if i == 0 else None,
        )


def plot_reliability_diagram(
    y_true,
    y_proba,
    n_bins: int = 15,
    *,
    classes=None,
    title: str | None = None,
    model: str | None = None,
    path=None,
) -> Figure:
    """Reliability diagram of the top-label confidence, with the number of samples per bin.

    Top: accuracy per confidence bin (in the model's colour) against the diagonal of perfect
    calibration; the red hatched bar runs from it to the bin's mean confidence, so its height
    is the bin's gap ``|acc - conf|`` (ECE is their average weighted by the counts; Guo et al.
    2017, eq. 3). Bottom: the number of samples in each bin, written over its bar. An empty bin
    has no bar in either panel: it is hatched grey, so that it reads as "no data", not as a
    bin of zero accuracy or of perfect calibration. The legend sits above the diagram, where
    it covers no bar. Binning as in
    :func:`~ebmclassifier.metrics.expected_calibration_error` (equal width over [0, 1]).

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
        Put in front of the diagram's title, e.g. the model's name. The ECE is always shown.
    model : str or None, default=None
        The model whose colour the accuracy bars take (:func:`model_style`); None: ``"ce"``'s.
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure
        ``fig.axes[0]`` is the count panel, ``fig.axes[1]`` the diagram.

    Examples
    --------
    >>> import numpy as np
    >>> proba = np.array([[0.9, 0.1], [0.15, 0.85], [0.65, 0.35], [0.45, 0.55]])
    >>> fig = plot_reliability_diagram([0, 1, 1, 1], proba, n_bins=5, title="toy")
    >>> counts, diagram = fig.axes
    >>> [text.get_text() for text in counts.texts]  # samples in the non-empty bins
    ['1', '1', '2']
    """
    confidence, correct = top_label(y_true, y_proba, classes)
    ece = expected_calibration_error(y_true, y_proba, n_bins, classes=classes)
    edges, counts, accuracy, mean_confidence = _bin_statistics(confidence, correct, n_bins)
    full, width = counts > 0, 0.9 / n_bins
    centres = (edges[:-1] + edges[1:])[full] / 2
    fig = Figure(figsize=(6, 7.4), layout="constrained")
    grid = fig.add_gridspec(2, 1, height_ratios=(3, 1))
    count_ax = fig.add_subplot(grid[1])
    ax = fig.add_subplot(grid[0], sharex=count_ax)
    color = model_style(model or "ce")["color"]
    ax.bar(centres, accuracy[full], width, color=color, edgecolor="black", label="accuracy")
    # hatched, not filled: where the gap lies inside the accuracy bar (under-confidence) the
    # bar's own top stays visible
    ax.bar(
        centres,
        mean_confidence[full] - accuracy[full],
        width,
        bottom=accuracy[full],
        facecolor="none",
        edgecolor="0.1",
        hatch="\\\\",
        linewidth=1,
        label="gap to the mean confidence",
    )
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect calibration")
    _mark_empty_bins(ax, edges, ~full, "empty bin (no samples)")
    ax.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy")
    ax.tick_params(labelbottom=False)
    ax.set_title(f"ECE {ece:.3f}" if title is None else f"{title}, ECE {ece:.3f}")
    # under the figure, not in the diagram: a bar may reach 1.0 in any bin
    fig.legend(
        *ax.get_legend_handles_labels(),
        loc="outside lower center",
        ncol=2,
        fontsize="small",
        frameon=False,
    )
    for x, count in zip(centres, counts[full], strict=True):
        count_ax.text(x, count, str(count), ha="center", va="bottom", fontsize="x-small")
    count_ax.bar(centres, counts[full], width, color="0.5")
    _mark_empty_bins(count_ax, edges, ~full, None)
    count_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    count_ax.set(
        xlabel="confidence (top label)",
        ylabel=f"samples (n = {len(confidence)})",
        ylim=(0, counts.max() * 1.25),
    )
    return finish_figure(fig, path)


def plot_ood_histograms(
    scores_in,
    scores_out: dict,
    *,
    score_name: str = "OOD score",
    title: str | None = None,
    model: str | None = None,
    bins: int = 50,
    path=None,
) -> Figure:
    """Histograms of an OOD score on in-distribution data and on each OOD set.

    The in-distribution samples are a filled histogram in the model's colour; each OOD set is
    an outline, drawn alike in every figure (the first set solid black, the second dashed,
    ...). Each bar is the share of its set's samples, so sets of different sizes compare. A
    positive score whose values span more than two decades (a gradient norm, a distance) gets
    logarithmic bins and axis, so the in-distribution samples are not squeezed into one bin.

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
    model : str or None, default=None
        The model whose colour the in-distribution histogram takes (:func:`model_style`);
        None: ``"ce"``'s.
    bins : int, default=50
        Number of histogram bins over the pooled range of all scores.
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> fig = plot_ood_histograms(rng.normal(0, 1, 100), {"noise": rng.normal(2, 1, 100)})
    >>> fig.axes[0].get_xlabel()
    'OOD score (higher = more OOD)'
    """
    check_named_dict(
        scores_out, "scores_out", "of OOD set name to scores, e.g. {'uniform': scores}"
    )
    scores_in = np.asarray(scores_in, dtype=np.float64)
    scores_out = {name: np.asarray(s, dtype=np.float64) for name, s in scores_out.items()}
    pooled = np.concatenate([scores_in, *scores_out.values()])
    edges, log = _histogram_edges(pooled[np.isfinite(pooled)], bins)
    fig = Figure(figsize=(8.5, 4), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.hist(
        scores_in,
        bins=edges,
        weights=np.full(len(scores_in), 1 / len(scores_in)),
        color=model_style(model or "ce")["color"],
        alpha=0.6,
        label="in-distribution (test)",
    )
    for i, (name, scores) in enumerate(scores_out.items()):
        auroc = ood_metrics(scores_in, scores)["auroc"]
        ax.hist(
            scores,
            bins=edges,
            weights=np.full(len(scores), 1 / len(scores)),
            histtype="step",
            linewidth=1.6,
            **_OOD_SET_LINES[i % len(_OOD_SET_LINES)],
            label=f"{name} (AUROC {auroc:.3f})",
        )
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(f"{score_name} (higher = more OOD)")
    ax.set_ylabel("share of the set's samples")
    return finish_figure(fig, path, ax, title)


#: The outline of the i-th OOD set in every histogram: black and grey, no model's colour.
_OOD_SET_LINES = tuple(
    {"color": color, "linestyle": style}
    for style in ("-", "--", ":")
    for color in ("black", "0.55")
)


def _histogram_edges(values: np.ndarray, bins: int) -> tuple[np.ndarray, bool]:
    """Bin edges over ``values``, and whether they are logarithmic (positive values spanning
    more than two decades)."""
    if values.size and values.min() > 0 and values.max() > 100 * values.min():
        return np.geomspace(values.min(), values.max(), bins + 1), True
    return np.histogram_bin_edges(values, bins=bins), False


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

    Examples
    --------
    >>> fig = plot_accuracy_vs_epsilon([0.0, 0.1, 0.2], {"ce": [0.95, 0.6, 0.2]})
    >>> len(fig.axes)
    1
    """
    epsilons = np.asarray(epsilons, dtype=np.float64)
    check_named_dict(accuracies, "accuracies", "of model name to accuracies")
    fig = Figure(figsize=(7.2, 4), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    for name, acc in accuracies.items():
        acc = np.atleast_2d(np.asarray(acc, dtype=np.float64))
        if acc.shape[1] != epsilons.size:
            raise ValueError(
                f"accuracies[{name!r}] has {acc.shape[1]} values per seed but there are "
                f"{epsilons.size} epsilons."
            )
        (line,) = ax.plot(epsilons, np.median(acc, axis=0), label=name, **model_style(name))
        if acc.shape[0] > 1:
            ax.fill_between(
                epsilons, acc.min(axis=0), acc.max(axis=0), color=line.get_color(), alpha=0.2
            )
    ax.set_xlabel(f"epsilon ({'L-inf' if norm == 'linf' else 'L2'} PGD)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    return finish_figure(fig, path, ax, title)


def plot_risk_coverage(
    y_true,
    predictions: dict,
    *,
    classes=None,
    title: str | None = None,
    min_coverage: float = 0.1,
    path=None,
) -> Figure:
    """Risk-coverage curves of several models or confidence measures, AURC in the legend.

    Each curve is :func:`~ebmclassifier.metrics.risk_coverage_curve`: the error rate of the
    samples a selective classifier accepts against the share it accepts, from the most
    confident sample (left) to all of them (right, the plain error rate). Lower is better;
    the legend gives each curve's :func:`~ebmclassifier.metrics.aurc` with as many decimals as
    it takes to tell the curves apart (and two significant digits of the smallest).

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
    min_coverage : float in [0, 1), default=0.1
        The y-axis spans every curve's risks at coverages of at least this share. Below it
        (shaded) a curve rests on a few samples, one error among the first five answered is a
        risk of 0.2, and one curve's spike there would flatten all the others against the
        axis; such a spike leaves the top edge (drawn, not dropped). 0 spans every point.
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
    if not 0 <= min_coverage < 1:
        raise ValueError(f"min_coverage must be in [0, 1). Got {min_coverage!r}.")
    curves, areas = {}, {}
    for name, prediction in predictions.items():
        y_pred, confidence = prediction if isinstance(prediction, tuple) else (prediction, None)
        curves[name] = risk_coverage_curve(y_true, y_pred, confidence, classes=classes)[:2]
        areas[name] = aurc(y_true, y_pred, confidence, classes=classes)
    decimals = _distinct_decimals(list(areas.values()))
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for name, (coverage, risk) in curves.items():
        # the model's marker at ten places along the curve, so it is told apart in grey print
        ax.plot(
            coverage,
            risk,
            markevery=max(1, len(coverage) // 10),
            label=f"{name} (AURC {areas[name]:.{decimals}f})",
            **model_style(name),
        )
    _risk_axes(ax, curves.values(), min_coverage)
    return finish_figure(fig, path, ax, title)


def _risk_axes(ax, curves, min_coverage: float) -> None:
    """Axes of :func:`plot_risk_coverage`: y up to the highest risk at ``min_coverage`` or more,
    the few-sample left end shaded."""
    top = max(float(risk[coverage >= min_coverage].max()) for coverage, risk in curves)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, top * 1.08 if top > 0 else 0.01)
    if min_coverage > 0:
        ax.axvspan(0, min_coverage, color="0.92", zorder=0)
        ax.text(
            min_coverage / 2,
            0.98,
            f"under {min_coverage:.0%}:\nfew samples",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize="x-small",
            color="0.35",
        )
    ax.set_xlabel("coverage (share of samples answered)")
    ax.set_ylabel("selective risk (error rate of the answered)")
    ax.grid(alpha=0.3)


def _distinct_decimals(values, least: int = 3, most: int = 8) -> int:
    """The fewest decimals, at least ``least``, at which the values that differ read differently
    and the smallest non-zero one shows two significant digits (at most ``most``).

    Examples
    --------
    >>> _distinct_decimals([0.208, 0.333]), _distinct_decimals([0.0017, 0.0008, 0.0097])
    (3, 5)
    """
    values = [float(v) for v in values]
    nonzero = [abs(v) for v in values if v != 0]
    for decimals in range(least, most):
        distinct = len({f"{v:.{decimals}f}" for v in values}) == len(set(values))
        if distinct and (not nonzero or min(nonzero) >= 10 ** (1 - decimals)):
            return decimals
    return most


def plot_task_curves(
    curves: dict[str, list[float]],
    *,
    styles: dict[str, str] | None = None,
    title: str | None = None,
    path=None,
) -> Figure:
    """Average accuracy over the classes seen against the number of tasks learned, per method.

    Parameters
    ----------
    curves : dict of str to list of float
        Method name -> its average accuracy after each task (all of one length).
    styles : dict of str to str or None, default=None
        Method name -> matplotlib line style (``"-"`` for a method not named).
    title : str or None, default=None
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_task_curves({"joint": [0.9, 0.8], "naive": [0.9, 0.4]}, styles={"joint": "--"})
    >>> [line.get_label() for line in fig.axes[0].lines]
    ['joint', 'naive']
    """
    check_named_dict(curves, "curves", "of method name to accuracies")
    styles = styles or {}
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.add_subplot()
    n_tasks = len(next(iter(curves.values())))
    for method, curve in curves.items():
        ax.plot(
            range(1, len(curve) + 1),
            curve,
            styles.get(method, "-"),
            label=method,
            **model_style(method),
        )
    ax.set_xticks(range(1, n_tasks + 1))
    ax.set_xlabel("number of tasks learned")
    ax.set_ylabel("average accuracy (classes seen)")
    ax.set_ylim(0, 1)
    return finish_figure(fig, path, ax, title)


def plot_accuracy_matrices(matrices: dict[str, np.ndarray], *, path=None) -> Figure:
    """One heat map per method of an accuracy matrix: task evaluated against task learned.

    Parameters
    ----------
    matrices : dict of str to ndarray of shape (n_tasks, n_tasks)
        Method name -> ``A[t, j]``, the accuracy on task ``j`` after learning task ``t``
        (lower triangle; the rest is not drawn as numbers).
    path : str, path-like or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure
        One panel per method, then the colour bar.

    Examples
    --------
    >>> import numpy as np
    >>> fig = plot_accuracy_matrices({"naive": np.array([[0.9, np.nan], [0.1, 0.95]])})
    >>> fig.axes[0].get_title(), [text.get_text() for text in fig.axes[0].texts]
    ('naive', ['0.90', '0.10', '0.95'])
    """
    check_named_dict(matrices, "matrices", "of method name to accuracy matrices")
    cols = min(len(matrices), 3)
    rows = -(-len(matrices) // cols)
    fig = Figure(figsize=(3.2 * cols, 3 * rows), layout="constrained")
    for i, (method, matrix) in enumerate(matrices.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        image = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis")
        for t in range(len(matrix)):
            for j in range(t + 1):
                ax.text(
                    j,
                    t,
                    f"{matrix[t, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if matrix[t, j] < 0.6 else "black",
                )
        ax.set_title(method, fontsize=9)
        ax.set_xlabel("task evaluated")
        ax.set_ylabel("after task")
    fig.colorbar(image, ax=fig.axes, shrink=0.6)
    return finish_figure(fig, path)
