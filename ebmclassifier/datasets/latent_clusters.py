"""The controllable synthetic task of the SPIGOT-mechanics paper: a classifier per hidden cluster.

Each sample belongs to one of K clusters (the latent z). Its label is decided by that cluster's own
linear classifier, so a model that recovers z can solve the task with K linear decoders, and a
single linear model cannot.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP, the unstructured synthetic experiment.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_latent_clusters"]

_PARAM_KEYS = ("centers", "weights", "thresholds")


def _check_positive_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")


def _check_params(params, n_clusters: int, n_features: int) -> None:
    if not isinstance(params, dict) or set(params) != set(_PARAM_KEYS):
        got = sorted(params) if isinstance(params, dict) else type(params).__name__
        raise ValueError(
            f"params must be the dict returned with return_params=True, with keys "
            f"{_PARAM_KEYS}; got {got!r}."
        )
    expected = {
        "centers": (n_clusters, n_features),
        "weights": (n_clusters, n_features),
        "thresholds": (n_clusters,),
    }
    for key, shape in expected.items():
        got = np.shape(params[key])
        if got != shape:
            raise ValueError(
                f"params[{key!r}] has shape {got!r} but n_clusters={n_clusters} and "
                f"n_features={n_features} need {shape!r}; pass the same n_clusters and "
                "n_features as for the draw that produced params."
            )


def make_latent_clusters(
    n_samples: int = 5000,
    n_clusters: int = 3,
    n_features: int = 100,
    *,
    noise: float = 0.1,
    params: dict | None = None,
    return_params: bool = False,
    random_state=None,
):
    """Draw the latent-cluster classification task of [1]_.

    Generative process: centres ``c_k ~ N(0, I_d)`` and weights ``w_k ~ N(0, I_d)`` for
    ``k = 1..K``; per sample ``z ~ Uniform{1..K}``, ``x = c_z + noise * eps`` with
    ``eps ~ N(0, I_d)``, and ``y = [w_z . x > b_z]``, where the threshold ``b_k`` is the mean of
    ``w_k . x`` over the samples of cluster k in the draw that creates the parameters (so each
    cluster's labels are balanced). A test set drawn with ``params`` from a training draw reuses
    its centres, weights *and* thresholds.

    Parameters
    ----------
    n_samples : int, default=5000
    n_clusters : int, default=3
        K, the number of latent clusters.
    n_features : int, default=100
        d, the input dimension.
    noise : float, default=0.1
        Standard deviation of the isotropic noise around the centres.
    params : dict or None, default=None
        ``{"centers": (K, d), "weights": (K, d), "thresholds": (K,)}`` from an earlier call with
        ``return_params=True``; ``None`` draws new ones (thresholds estimated on this draw).
    return_params : bool, default=False
        Also return the generating parameters.
    random_state : int, RandomState instance or None
        Seeds parameters (when drawn) and samples.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), int64 in {0, 1}
    z : ndarray of shape (n_samples,), int64 in {0..K-1}
        The true cluster of each sample.
    params : dict
        Only with ``return_params=True``; pass it back as ``params`` to draw a test set.

    References
    ----------
    .. [1] Mihaylova, Niculae & Martins (2020), EMNLP, the unstructured synthetic experiment.

    Examples
    --------
    >>> X, y, z, params = make_latent_clusters(200, 3, 5, return_params=True, random_state=0)
    >>> X.shape, np.unique(z).tolist()
    ((200, 5), [0, 1, 2])
    >>> X_test, y_test, z_test = make_latent_clusters(50, 3, 5, params=params, random_state=1)
    >>> X_test.shape
    (50, 5)
    """
    _check_positive_int("n_samples", n_samples, 1)
    _check_positive_int("n_clusters", n_clusters, 1)
    _check_positive_int("n_features", n_features, 1)
    if not isinstance(noise, Real) or isinstance(noise, bool) or not noise >= 0:
        raise ValueError(f"noise must be a non-negative float; got {noise!r}.")
    rng = check_random_state(random_state)
    if params is None:
        centers = rng.standard_normal((n_clusters, n_features))
        weights = rng.standard_normal((n_clusters, n_features))
        thresholds = None
    else:
        _check_params(params, n_clusters, n_features)
        centers = np.asarray(params["centers"], dtype=np.float64)
        weights = np.asarray(params["weights"], dtype=np.float64)
        thresholds = np.asarray(params["thresholds"], dtype=np.float64)

    z = rng.randint(n_clusters, size=n_samples).astype(np.int64)
    X = centers[z] + noise * rng.standard_normal((n_samples, n_features))
    scores = np.einsum("nd,nd->n", weights[z], X)
    if thresholds is None:
        # Within-cluster mean score; a cluster absent from this draw gets w_k . c_k, its mean
        # in expectation.
        thresholds = np.einsum("kd,kd->k", weights, centers)
        for k in range(n_clusters):
            if np.any(z == k):
                thresholds[k] = scores[z == k].mean()
    y = (scores > thresholds[z]).astype(np.int64)
    if return_params:
        params = {"centers": centers, "weights": weights, "thresholds": thresholds}
        return X, y, z, params
    return X, y, z
