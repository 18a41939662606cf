"""Out-of-distribution test sets made from held-out data: noise and label-destroying transforms.

Every loader in :mod:`ebmclassifier.datasets` that returns an OOD suite builds it here, so the
suites mean the same thing across data sets.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

#: The OOD sets :func:`make_ood_suite` builds, by name: noise, inverted and permuted samples.
OOD_KINDS = ("uniform", "inverted", "permuted")


def make_ood_suite(
    X_held_out: np.ndarray,
    low: float,
    high: float,
    kinds=OOD_KINDS,
    random_state=None,
) -> dict[str, np.ndarray]:
    """Out-of-distribution sets of the same shape as held-out in-distribution data.

    - ``"uniform"``: i.i.d. uniform noise over the input range ``[low, high]`` (the usual
      "noise" OOD set of Grathwohl et al. 2020 and Liu et al. 2020).
    - ``"inverted"``: each sample mirrored in the range, ``low + high - x`` (dark strokes on a
      light background for images; a sign flip for standardised signals).
    - ``"permuted"``: each sample's positions shuffled by its own random permutation, channels
      kept together, so the marginal distribution of values is kept and the structure is lost.

    Parameters
    ----------
    X_held_out : ndarray of shape (n, d) or (n, C, ...)
        In-distribution samples never seen in training (the test split). Flat input of shape
        (n, d) is permuted over its d features; shaped input over its positions.
    low, high : float
        The input range, usually the minimum and maximum of the training data.
    kinds : sequence of str, default=("uniform", "inverted", "permuted")
        Which sets to build.
    random_state : int, RandomState or None, default=None
        Seeds the noise and the permutations.

    Returns
    -------
    suite : dict of str to ndarray
        ``{kind: X_ood}``, each of the same shape and dtype as ``X_held_out``.

    References
    ----------
    .. [1] Grathwohl et al., "Your Classifier is Secretly an Energy Based Model and You Should
       Treat it Like One", ICLR 2020, table 3.

    Examples
    --------
    >>> X = np.array([[0.0, 0.25, 1.0]], dtype=np.float32)
    >>> make_ood_suite(X, 0.0, 1.0, kinds=["inverted"])["inverted"]
    array([[1.  , 0.75, 0.  ]], dtype=float32)
    """
    X_held_out = np.asarray(X_held_out)
    unknown = [k for k in kinds if k not in OOD_KINDS]
    if unknown:
        raise ValueError(f"Unknown OOD kinds {unknown!r}; choose from {OOD_KINDS!r}.")
    if X_held_out.ndim < 2 or X_held_out.shape[0] == 0:
        raise ValueError(
            f"X_held_out must have shape (n, ...) with n >= 1. Got {X_held_out.shape!r}."
        )
    if not low < high:
        raise ValueError(f"The input range must have low < high. Got low={low!r}, high={high!r}.")
    rng = check_random_state(random_state)
    dtype = X_held_out.dtype
    suite = {}
    for kind in kinds:
        if kind == "uniform":
            suite[kind] = rng.uniform(low, high, size=X_held_out.shape).astype(dtype)
        elif kind == "inverted":
            suite[kind] = (low + high - X_held_out).astype(dtype)
        else:
            suite[kind] = _permute_positions(X_held_out, rng)
    return suite


def _permute_positions(X: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    """Shuffle each sample's positions independently; (n, d) over d, (n, C, ...) over '...'."""
    n = X.shape[0]
    flat = X.reshape(n, -1) if X.ndim == 2 else X.reshape(n, X.shape[1], -1)
    order = np.argsort(rng.uniform(size=(n, flat.shape[-1])), axis=1)
    if X.ndim == 2:
        permuted = np.take_along_axis(flat, order, axis=1)
    else:
        permuted = np.take_along_axis(flat, order[:, None, :], axis=2)
    return permuted.reshape(X.shape)
