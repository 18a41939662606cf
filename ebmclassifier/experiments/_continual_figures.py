"""The figures of ``python -m ebmclassifier continual``: accuracy curves and matrices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from .._atomic import save_figure

__all__ = ["accuracy_curves", "accuracy_matrices"]


def accuracy_curves(summary: list[dict], out: Path, data: str) -> str:
    """Average accuracy over the classes seen against the number of tasks, every method.

    Returns the file name written into ``out``.
    """
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    colors = colormaps["tab20"].colors
    for i, row in enumerate(summary):
        curve = row["curve"]
        style = "--" if row["method"] == "joint" else ":" if "replay" in row["method"] else "-"
        ax.plot(
            range(1, len(curve) + 1),
            curve,
            style,
            marker="o",
            label=row["method"],
            color=colors[(2 * i) % 20 + (2 * i) // 20],
        )
    ax.set_xticks(range(1, len(summary[0]["curve"]) + 1))
    ax.set_xlabel("number of tasks learned")
    ax.set_ylabel("average accuracy (classes seen)")
    ax.set_ylim(0, 1)
    ax.set_title(f"split {data}: median over seeds")
    ax.legend(fontsize=7)
    name = f"continual_{data}_curves.png"
    save_figure(fig, out / name, dpi=120)
    return name


def accuracy_matrices(runs: list[dict], out: Path, data: str) -> str:
    """One heat map per method of the accuracy matrix (median over seeds).

    Returns the file name written into ``out``.
    """
    methods = list(dict.fromkeys(r["method"] for r in runs))
    cols = min(len(methods), 3)
    rows = -(-len(methods) // cols)
    fig = Figure(figsize=(3.2 * cols, 3 * rows), layout="constrained")
    for i, method in enumerate(methods):
        ax = fig.add_subplot(rows, cols, i + 1)
        stack = [r["accuracy_matrix"] for r in runs if r["method"] == method]
        n = len(stack[0])
        matrix = np.full((len(stack), n, n), np.nan)
        for s, m in enumerate(stack):
            for t, row in enumerate(m):
                matrix[s, t, : len(row)] = row
        median = np.median(matrix, axis=0)
        image = ax.imshow(median, vmin=0, vmax=1, cmap="viridis")
        for t in range(n):
            for j in range(t + 1):
                ax.text(
                    j,
                    t,
                    f"{median[t, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if median[t, j] < 0.6 else "black",
                )
        ax.set_title(method, fontsize=9)
        ax.set_xlabel("task evaluated")
        ax.set_ylabel("after task")
    fig.colorbar(image, ax=fig.axes, shrink=0.6)
    name = f"continual_{data}_matrices.png"
    save_figure(fig, out / name, dpi=120)
    return name
