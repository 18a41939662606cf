"""Temperature scaling, with or without class biases: the calibration before label-shift EM.

Alexandari, Kundaje & Shrikumar (2020) find EM (Saerens et al., 2002) hard to beat at label
shift once the posteriors are calibrated on a labelled held-out split by *bias-corrected
temperature scaling* (BCTS):

    log q(y|x) = log softmax_y (a z(x)[y] + b_y),    a = 1 / T,

with ``z(x)[y] = log p(y|x)`` (the logits up to a per-sample constant, which the softmax
ignores), ``a`` and ``b`` minimising the negative log-likelihood of the ``n`` held-out labels,

    NLL(a, b) = mean_i [logsumexp_y (a z_i[y] + b_y) - a z_i[y_i] - b_{y_i}]
                + penalty / (2 n) ((a - 1)^2 + sum_y b_y^2).

Plain temperature scaling (Guo et al., 2017) is ``b = 0``. The NLL is convex in ``(a, b)`` (a
log-partition minus a linear term: the dual ``g(λ)`` of
:mod:`~ebmclassifier.distributional.posteriors` with features ``(z_i[y], onehot(y))``); at its
minimum without the penalty, the calibrated posteriors meet the moments of the labels:
``mean_i E_q[z_i] = mean_i z_i[y_i]`` and, with the biases, ``mean_i q(y|x_i) =`` the share of
``y`` among the held-out labels. That minimum does not exist when some ``a z + b`` ranks every
held-out label first (then ``T -> 0`` and ``|b| -> inf``): on digits, 7 errors among 252
held-out samples were enough. ``penalty`` is the weight of a Gaussian prior of unit variance
on ``a`` around 1 (no change) and on each bias around 0, which keeps the solution finite
(``penalty=0``: the maximum-likelihood fit of the paper). Newton's method in a trust region
(scipy's ``trust-exact``) with the exact Hessian solves it. Arrays: ``log_proba`` is ``(n, K)``
(``-inf`` where a class has probability 0; it stays 0), ``y`` is ``(n,)`` of integers in
``0..K-1``.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

__all__ = ["calibrated_log_proba", "fit_temperature"]


def calibrated_log_proba(
    log_proba: np.ndarray,
    temperature: float,
    bias: np.ndarray,
    *,
    return_log_partition: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``log softmax_y (log p(y|x) / T + b_y)``: the posteriors after (bias-corrected) scaling.

    For a model with logits ``f`` and energy ``E(x) = -logsumexp_y f(x)[y]``, the calibrated
    logits ``f / T + b`` have the energy ``E(x) / T - log Z(x)``, with the log partition
    ``log Z(x) = logsumexp_y (log p(y|x) / T + b_y)``.

    Parameters
    ----------
    log_proba : ndarray of shape (n, K)
        ``log p(y|x)``; ``-inf`` stays ``-inf``.
    temperature : float
        ``T > 0`` (``inf`` gives ``softmax(b)`` for every sample).
    bias : ndarray of shape (K,)
        ``b``; zeros for plain temperature scaling.
    return_log_partition : bool, default=False
        Also return ``log Z(x)``.

    Returns
    -------
    log_proba : ndarray of shape (n, K)
    log_partition : ndarray of shape (n,)
        With ``return_log_partition=True`` only.

    Examples
    --------
    >>> log_p = np.log([[0.8, 0.2]])
    >>> np.exp(calibrated_log_proba(log_p, 2.0, np.zeros(2))).round(3)  # softer
    array([[0.667, 0.333]])
    >>> np.exp(calibrated_log_proba(log_p, 1.0, np.log([1.0, 4.0]))).round(3)  # a class bias
    array([[0.5, 0.5]])
    """
    support = np.isfinite(log_proba)
    scores = np.where(support, np.where(support, log_proba, 0.0) / temperature, -np.inf) + bias
    log_partition = logsumexp(scores, axis=1, keepdims=True)
    calibrated = scores - log_partition
    return (calibrated, log_partition[:, 0]) if return_log_partition else calibrated


def _nll(
    theta: np.ndarray, z: np.ndarray, y: np.ndarray, support: np.ndarray, bias: bool, penalty: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """The (penalised) NLL of the module's notes at ``theta = (a, b)``, its gradient, Hessian.

    ``z`` is ``log p`` with 0 off the ``support``; ``b`` is absent without ``bias``.
    """
    n, n_classes = z.shape
    b = theta[1:] if bias else np.zeros(n_classes)
    scores = np.where(support, theta[0] * z + b, -np.inf)
    log_partition = logsumexp(scores, axis=1)
    q = np.exp(scores - log_partition[:, None])
    rows = np.arange(n)
    mean_z = np.sum(q * z, axis=1)  # E_q[z_i]
    value = np.mean(log_partition - scores[rows, y])
    gradient = [np.mean(mean_z - z[rows, y])]
    hessian = np.array([[np.mean(np.sum(q * z * z, axis=1) - mean_z**2)]])
    if bias:
        gradient += list(q.mean(axis=0) - np.bincount(y, minlength=n_classes) / n)
        cross = np.mean(q * z - q * mean_z[:, None], axis=0)
        block = np.diag(q.mean(axis=0)) - q.T @ q / n
        hessian = np.block([[hessian, cross[None, :]], [cross[:, None], block]])
    center = np.zeros_like(theta)
    center[0] = 1.0
    rho = penalty / n
    value += rho / 2 * np.sum((theta - center) ** 2)
    gradient = np.asarray(gradient) + rho * (theta - center)
    return float(value), gradient, hessian + rho * np.eye(len(theta))


def fit_temperature(
    log_proba: np.ndarray,
    y: np.ndarray,
    *,
    bias: bool = True,
    penalty: float = 1.0,
    tol: float = 1e-8,
    max_iter: int = 1000,
) -> tuple[float, np.ndarray, float]:
    """``T`` and ``b`` of (bias-corrected) temperature scaling, by maximum likelihood.

    Minimises the penalised ``NLL(a, b)`` of the module's notes over ``a = 1 / T`` and, with
    ``bias``, ``b`` (defined up to a common constant: the one of mean 0 is returned).

    Parameters
    ----------
    log_proba : ndarray of shape (n, K)
        ``log p(y|x_i)`` of the model on held-out samples.
    y : ndarray of shape (n,)
        Their labels, integers in ``0..K-1``; with ``bias``, every class at least once.
    bias : bool, default=True
        Bias-corrected temperature scaling (Alexandari et al., 2020); ``False``: plain
        temperature scaling (Guo et al., 2017).
    penalty : float, default=1.0
        The weight of the Gaussian prior on ``(a, b)`` (unit variance, around ``(1, 0)``);
        ``0`` for the maximum-likelihood fit, which does not exist when some ``a z + b`` ranks
        every held-out label first.
    tol : float, default=1e-8
        On the norm of the gradient of the penalised NLL.
    max_iter : int, default=1000

    Returns
    -------
    temperature : float
        ``T``.
    bias : ndarray of shape (K,)
        ``b`` (zeros without ``bias``).
    residual : float
        The largest absolute component of the NLL's gradient at the solution.

    Raises
    ------
    ValueError
        For a fitted ``T <= 0`` (the labels agree with the model less than a uniform guess),
        and, without a penalty, a class without a held-out sample (with ``bias``).

    References
    ----------
    .. [1] Alexandari, Kundaje & Shrikumar, "Maximum likelihood with bias-corrected
       calibration is hard-to-beat at label shift adaptation", ICML 2020.
    .. [2] Guo, Pleiss, Sun & Weinberger, "On calibration of modern neural networks", ICML 2017.

    Examples
    --------
    >>> log_p = np.log([[0.9, 0.1], [0.9, 0.1], [0.9, 0.1], [0.1, 0.9]])
    >>> y = np.array([0, 0, 1, 1])
    >>> temperature, b, _ = fit_temperature(log_p, y, bias=False, penalty=0.0)
    >>> round(temperature, 6)  # 3 right out of 4 at confidence 0.9: T makes it 0.75
    2.0
    >>> np.exp(calibrated_log_proba(log_p, temperature, b)).max(axis=1).round(6).tolist()
    [0.75, 0.75, 0.75, 0.75]
    """
    n, n_classes = log_proba.shape
    if bias and penalty == 0 and len(np.unique(y)) < n_classes:
        missing = np.setdiff1d(np.arange(n_classes), y).tolist()
        raise ValueError(
            f"Bias-corrected temperature scaling without a penalty needs held-out samples of "
            f"every class; classes at positions {missing!r} of classes_ have none (their bias "
            "would be -inf). Add samples of them, or use penalty > 0."
        )
    support = np.isfinite(log_proba)
    z = np.where(support, log_proba, 0.0)
    args = (z, np.asarray(y), support, bias, penalty)
    theta = np.zeros(1 + (n_classes if bias else 0))
    theta[0] = 1.0  # no change

    def fun(theta):
        return _nll(theta, *args)[:2]

    def hess(theta):
        return _nll(theta, *args)[2]

    result = optimize.minimize(
        fun,
        theta,
        jac=True,
        hess=hess,
        method="trust-exact",
        options={"gtol": tol, "maxiter": max_iter},
    )
    theta = result.x
    residual = float(np.max(np.abs(fun(theta)[1])))
    if theta[0] <= 0:
        raise ValueError(
            f"Temperature scaling fitted 1/T = {theta[0]!r} <= 0: on these held-out samples the "
            "model's posteriors predict the labels worse than a uniform guess. Check that the "
            "labels are those of the model's classes_ (and in their order)."
        )
    b = theta[1:] - theta[1:].mean() if bias else np.zeros(n_classes)
    return float(1.0 / theta[0]), b, residual
