"""The quick demonstration: NG-EBM against plain cross-entropy on scikit-learn's digits.

``python -m ebmclassifier demo`` trains ``NGEBMClassifier()`` and its ``beta=0`` baseline
(cross-entropy only, the same network and schedule) on standardized ``load_digits``
(70/30 stratified split) for a few seeds and prints test accuracy, expected calibration error
and the OOD AUROC of each ``score_ood`` method against uniform noise over the input range.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from ..energy import OOD_METHODS
from ..metrics import expected_calibration_error, ood_metrics
from ..ngebm import NGEBMClassifier
from ._command import QUIET_FIT
from .standardize import _standardized_digits

__all__ = ["digits_with_noise", "format_demo", "run_demo"]

MODELS = {"ce (beta=0)": 0.0, "ngebm (beta=0.5)": 0.5}


def digits_with_noise(seed: int) -> tuple[np.ndarray, ...]:
    """The demo's data: standardized digits split 70/30, and uniform noise as the OOD set.

    The benchmarks that follow the demo's protocol (``benchmarks/ngebm_fd_quality.py``) call
    it too, so that both measure on the same data.

    Parameters
    ----------
    seed : int
        Fixes the stratified split and the noise.

    Returns
    -------
    X_train, X_test, y_train, y_test : ndarray
        ``load_digits`` split 70/30 and standardized on the training part.
    noise : ndarray of the shape of ``X_test``
        Uniform over the training data's range, feature by feature.

    Examples
    --------
    >>> X_train, X_test, y_train, y_test, noise = digits_with_noise(0)
    >>> X_train.shape, noise.shape
    ((1257, 64), (540, 64))
    """
    X_train, X_test, y_train, y_test = _standardized_digits(seed)
    rng = np.random.default_rng(seed)
    noise = rng.uniform(X_train.min(axis=0), X_train.max(axis=0), size=X_test.shape)
    return X_train, X_test, y_train, y_test, noise


def run_demo(
    seeds: Sequence[int] = (0, 1, 2), max_epochs: int = 50, progress: bool = True
) -> list[dict]:
    """Fit both models for each seed and measure them.

    Parameters
    ----------
    seeds : sequence of int, default=(0, 1, 2)
        Each seed fixes the split, the noise and the estimator's ``random_state``.
    max_epochs : int, default=50
    progress : bool, default=True
        Show a progress bar.

    Returns
    -------
    list of dict
        One row per (model, seed) with ``model``, ``seed``, ``accuracy``, ``ece`` and
        ``auroc_<method>`` for each OOD method (uniform noise as the OOD set; higher is
        better, 0.5 is chance).

    Examples
    --------
    >>> rows = run_demo(seeds=(0,), max_epochs=2, progress=False)
    >>> [row["model"] for row in rows]
    ['ce (beta=0)', 'ngebm (beta=0.5)']
    >>> sorted(rows[0])
    ['accuracy', 'auroc_approx_mass', 'auroc_energy', 'auroc_max_softmax', 'ece', 'model', 'seed']
    """
    rows = []
    jobs = [(seed, name) for seed in seeds for name in MODELS]
    data = {}  # the current seed's split and noise, shared by both models
    for seed, name in tqdm(jobs, desc="demo", disable=not progress):
        if seed not in data:
            data = {seed: digits_with_noise(seed)}
        X_train, X_test, y_train, y_test, noise = data[seed]
        clf = NGEBMClassifier(
            beta=MODELS[name], max_epochs=max_epochs, random_state=seed, **QUIET_FIT
        )
        clf.fit(X_train, y_train)
        row = {
            "model": name,
            "seed": seed,
            "accuracy": clf.score(X_test, y_test),
            "ece": expected_calibration_error(
                y_test, clf.predict_proba(X_test), classes=clf.classes_
            ),
        }
        for method in OOD_METHODS:
            scores = ood_metrics(clf.score_ood(X_test, method), clf.score_ood(noise, method))
            row[f"auroc_{method}"] = scores["auroc"]
        rows.append(row)
    return rows


def format_demo(rows: list[dict]) -> str:
    """A plain-text table of the medians over seeds (min-max in brackets).

    Parameters
    ----------
    rows : list of dict
        From :func:`run_demo`.

    Returns
    -------
    table : str
        One line per model, then a line saying what the numbers are.

    Examples
    --------
    >>> rows = [
    ...     {"model": "ce", "seed": s, "accuracy": a, "ece": 0.02, "auroc_energy": 0.7,
    ...      "auroc_max_softmax": 0.7, "auroc_approx_mass": 0.1}
    ...     for s, a in [(0, 0.97), (1, 0.98), (2, 0.96)]
    ... ]
    >>> print(format_demo(rows).splitlines()[1])  # doctest: +NORMALIZE_WHITESPACE
    ce  0.970 [0.960-0.980]  0.020 [0.020-0.020]  0.700 [0.700-0.700]  0.700 [0.700-0.700]
        0.100 [0.100-0.100]
    """
    columns = ["accuracy", "ece"] + [f"auroc_{m}" for m in OOD_METHODS]
    lines = [f"{'model':<18}" + "".join(f"{c:>24}" for c in columns)]
    for name in dict.fromkeys(r["model"] for r in rows):
        cells = []
        for column in columns:
            values = np.array([r[column] for r in rows if r["model"] == name])
            cells.append(f"{np.median(values):.3f} [{values.min():.3f}-{values.max():.3f}]")
        lines.append(f"{name:<18}" + "".join(f"{c:>24}" for c in cells))
    seeds = sorted({r["seed"] for r in rows})
    lines.append(
        f"median [min-max] over seeds {seeds}; OOD = uniform noise over the input range, "
        "AUROC 0.5 = chance"
    )
    return "\n".join(lines)


def _run_command(args) -> int:
    rows = run_demo(range(args.seeds), max_epochs=args.epochs, progress=args.progress)
    print(format_demo(rows))
    return 0
