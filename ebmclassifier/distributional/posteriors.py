"""Distributional constraints on a classifier's predictions: the functional core, on arrays.

A classifier's posteriors ``p(y|x)`` are tilted by an energy term per constraint,

    p_λ(y|x) ∝ p(y|x) exp(Σ_k λ_k φ_k(x, y)),

with ``λ`` chosen so that the average over the (unlabelled) deployment samples ``x_1..x_n`` of
the expected features meets the targets: ``mean_i Σ_y p_λ(y|x_i) φ_k(x_i, y) = μ_k``. Among all
choices of posteriors ``q(·|x_i)`` meeting the constraints, ``p_λ`` is the one closest to ``p``
in ``mean_i KL(q(·|x_i) || p(·|x_i))`` (the information projection of Csiszár, 1975, that GDC
uses for generative models, Khalifa, Elsahar & Dymetman, 2021); ``λ`` minimises the convex dual

    g(λ) = mean_i logsumexp_y (log p(y|x_i) + λ·φ(x_i, y)) - λ·μ,

whose gradient is the constraint residual ``mean_i E_{p_λ}[φ(x_i, ·)] - μ`` and whose Hessian
is the average covariance ``mean_i Cov_{p_λ(·|x_i)}[φ(x_i, ·)]`` (:func:`dual_objective`).

Also here: the EM of Saerens, Latinne & Decaestecker (2002) that estimates deployment class
priors by maximum likelihood (:func:`em_priors`), the closed-form Bayes correction for known
priors (:func:`bayes_correction`), black-box shift estimation from a confusion matrix (Lipton,
Wang & Smola, 2018; :func:`bbse_priors`), and the demographic-parity constraints
(:func:`demographic_parity`). The estimator face is
:class:`~ebmclassifier.DistributionalConstraint`. Arrays: ``log_proba`` is ``(n, K)`` (``-inf``
where a class has probability 0), ``features`` is ``(n, K, m)`` (``φ_k(x_i, y)``), ``target``
is ``(m,)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import optimize, sparse
from scipy.special import logsumexp

from .._utils.parameters import ParamChecker

__all__ = [
    "bayes_correction",
    "bayes_offset",
    "bbse_priors",
    "check_reachable",
    "demographic_parity",
    "dual_objective",
    "em_priors",
    "feasibility_margin",
    "solve_dual",
    "tilted_log_proba",
]

#: ``t*`` of :func:`feasibility_margin` at or below which a target is on the boundary (HiGHS
#: returns an exact 0 there; a tiny positive ``t*`` is a tiny target share, still reachable).
BOUNDARY = 0.0


def tilted_log_proba(
    log_proba: np.ndarray,
    features: np.ndarray,
    lam: np.ndarray,
    *,
    return_log_partition: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``log p_λ(y|x)``: the log posteriors tilted by ``λ·φ(x, y)`` and renormalised.

    ``log p_λ(y|x_i) = s_i(y) - log Z_λ(x_i)`` with the scores ``s_i(y) = log p(y|x_i) +
    λ·φ(x_i, y)`` and the log partition ``log Z_λ(x_i) = logsumexp_y s_i(y)``.

    Parameters
    ----------
    log_proba : ndarray of shape (n, K)
        ``log p(y|x_i)``; ``-inf`` for a class of probability 0 (it stays 0). A class offset
        (the Bayes correction's :func:`bayes_offset`) may be added to it first.
    features : ndarray of shape (n, K, m)
        ``φ_k(x_i, y)``; ``m`` may be 0.
    lam : ndarray of shape (m,)
        ``λ``.
    return_log_partition : bool, default=False
        Also return ``log Z_λ(x_i)``, which the tilted energy subtracts
        (``E_λ(x) = E(x) - log Z_λ(x)`` when ``log_proba`` is the model's).

    Returns
    -------
    log_proba : ndarray of shape (n, K)
        ``log p_λ(y|x_i)``.
    log_partition : ndarray of shape (n,)
        ``log Z_λ(x_i)``, with ``return_log_partition=True`` only.

    Examples
    --------
    >>> log_p = np.log([[0.5, 0.5]])
    >>> np.exp(tilted_log_proba(log_p, np.eye(2)[None], np.array([np.log(3.0), 0.0])))
    array([[0.75, 0.25]])
    >>> _, log_z = tilted_log_proba(log_p, np.eye(2)[None], np.zeros(2), return_log_partition=True)
    >>> log_z.tolist()  # no tilt: the posteriors already sum to 1
    [0.0]
    """
    scores = log_proba + features @ lam
    log_partition = logsumexp(scores, axis=1, keepdims=True)
    tilted = scores - log_partition
    return (tilted, log_partition[:, 0]) if return_log_partition else tilted


def dual_objective(
    lam: np.ndarray, log_proba: np.ndarray, features: np.ndarray, target: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """The dual ``g(λ)`` of the information projection, its gradient and its Hessian.

    ``g(λ) = mean_i logsumexp_y (log p(y|x_i) + λ·φ(x_i, y)) - λ·μ``; gradient
    ``mean_i E_{p_λ}[φ(x_i, ·)] - μ`` (the constraint residual); Hessian
    ``mean_i Cov_{p_λ(·|x_i)}[φ(x_i, ·)]`` (positive semi-definite: ``g`` is convex).

    Parameters
    ----------
    lam : ndarray of shape (m,)
    log_proba : ndarray of shape (n, K)
    features : ndarray of shape (n, K, m)
    target : ndarray of shape (m,)
        ``μ``.

    Returns
    -------
    value : float
    gradient : ndarray of shape (m,)
    hessian : ndarray of shape (m, m)

    Examples
    --------
    >>> value, grad, hess = dual_objective(
    ...     np.zeros(2), np.log([[0.5, 0.5]]), np.eye(2)[None], np.array([0.5, 0.5]))
    >>> float(value), grad.tolist(), hess.tolist()
    (0.0, [0.0, 0.0], [[0.25, -0.25], [-0.25, 0.25]])
    """
    scores = log_proba + features @ lam
    norm = logsumexp(scores, axis=1)
    q = np.exp(scores - norm[:, None])
    n = len(log_proba)
    mean_phi = np.einsum("iy,iyk->ik", q, features)
    value = float(norm.mean() - lam @ target)
    gradient = mean_phi.mean(axis=0) - target
    second = np.einsum("iy,iyk,iyl->kl", q, features, features) / n
    hessian = second - mean_phi.T @ mean_phi / n
    return value, gradient, hessian


def _identifiable_basis(log_proba: np.ndarray, features: np.ndarray) -> np.ndarray:
    """An orthonormal basis ``U`` (m, r) of the directions of ``λ`` that change ``p_λ``.

    A direction ``v`` with ``v·φ(x_i, y)`` constant over the classes of positive probability
    of every sample leaves ``p_λ`` unchanged (one-hot features summing to one are the common
    case); solving in ``λ = U θ`` makes the dual strictly convex and returns the minimum-norm
    ``λ``, so that ``λ = 0`` when the targets are already met.
    """
    support = np.isfinite(log_proba)
    reference = np.argmax(log_proba, axis=1)
    base = features[np.arange(len(features)), reference]  # (n, m)
    diffs = (features - base[:, None, :])[support]
    if not diffs.size:
        return np.zeros((features.shape[2], 0))
    _, sv, vt = np.linalg.svd(diffs, full_matrices=False)
    rank = int(np.sum(sv > sv[0] * 1e-10)) if sv[0] > 0 else 0
    return vt[:rank].T


def solve_dual(
    log_proba: np.ndarray,
    features: np.ndarray,
    target: np.ndarray,
    *,
    tol: float = 1e-8,
    max_iter: int = 1000,
    solver: str = "trust-exact",
) -> tuple[np.ndarray, int, float]:
    """``λ`` minimising :func:`dual_objective`, by one of scipy's optimisers.

    The inputs must be feasible (see :func:`feasibility_margin`); the solve stops when the
    Euclidean norm of the residual ``mean_i E_{p_λ}[φ] - μ`` is below ``tol``.

    Parameters
    ----------
    log_proba : ndarray of shape (n, K)
    features : ndarray of shape (n, K, m)
    target : ndarray of shape (m,)
    tol : float, default=1e-8
    max_iter : int, default=1000
    solver : {"trust-exact", "newton-cg", "l-bfgs-b"}, default="trust-exact"
        Newton's method in a trust region with the exact Hessian, Newton-CG (Hessian-vector
        products of the exact Hessian), or L-BFGS (gradient only).

    Returns
    -------
    lam : ndarray of shape (m,)
        The minimum-norm solution.
    n_iter : int
        The optimiser's iterations.
    residual : float
        ``max_k |mean_i E_{p_λ}[φ_k] - μ_k|`` at ``lam``.

    Examples
    --------
    >>> lam, n_iter, residual = solve_dual(
    ...     np.log([[0.5, 0.5], [0.5, 0.5]]), np.eye(2)[None].repeat(2, 0), np.array([0.75, 0.25]))
    >>> np.round(lam, 6).tolist(), residual < 1e-8
    ([0.549306, -0.549306], True)
    """
    basis = _identifiable_basis(log_proba, features)
    reduced = features @ basis
    reduced_target = target @ basis

    def fun(theta):
        value, gradient, _ = dual_objective(theta, log_proba, reduced, reduced_target)
        return value, gradient

    def hess(theta):
        return dual_objective(theta, log_proba, reduced, reduced_target)[2]

    theta0 = np.zeros(basis.shape[1])
    n_iter = 0
    if basis.shape[1] and np.linalg.norm(fun(theta0)[1]) > tol:
        options: dict = {"maxiter": max_iter}
        if solver == "trust-exact":
            options["gtol"] = tol
        elif solver == "newton-cg":
            options["xtol"] = tol * 1e-2
        else:
            options.update(gtol=tol, ftol=0.0, maxcor=max(10, basis.shape[1]))
        kwargs = {"hess": hess} if solver != "l-bfgs-b" else {}
        result = optimize.minimize(fun, theta0, jac=True, method=solver, options=options, **kwargs)
        theta0, n_iter = result.x, int(result.nit)
    lam = basis @ theta0
    _, gradient, _ = dual_objective(lam, log_proba, features, target)
    return lam, n_iter, float(np.max(np.abs(gradient), initial=0.0))


def feasibility_margin(log_proba: np.ndarray, features: np.ndarray, target: np.ndarray) -> float:
    """How far inside the achievable moments the targets are: ``t*`` of a linear program.

    The moments ``mean_i Σ_y q_i(y) φ(x_i, y)`` of posteriors ``q_i`` supported where ``p`` is
    form a polytope; ``p_λ`` reaches exactly its relative interior, the image of the ``q`` with
    every ``q_i(y) > 0`` on the support. The program ``max t`` subject to ``q_i(y) >= t`` on
    the support, ``Σ_y q_i(y) = 1`` and the moments equal to ``μ`` (scipy's HiGHS) answers:
    ``t* > 0`` means a finite ``λ`` exists; ``-inf`` means no ``q`` meets the targets at all.

    Parameters
    ----------
    log_proba : ndarray of shape (n, K)
    features : ndarray of shape (n, K, m)
    target : ndarray of shape (m,)

    Returns
    -------
    float
        ``t*``, or ``-inf`` when the program is infeasible.

    Examples
    --------
    >>> log_p, phi = np.log([[0.5, 0.5], [0.9, 0.1]]), np.eye(2)[None].repeat(2, 0)
    >>> feasibility_margin(log_p, phi, np.array([0.7, 0.3])) > 0
    True
    >>> feasibility_margin(log_p, phi, np.array([1.0, 0.0]))
    0.0
    """
    n, n_classes, m = features.shape
    rows, cols = np.nonzero(np.isfinite(log_proba))
    n_vars = len(rows) + 1  # q on the support, then t
    eq_sum = sparse.csr_matrix((np.ones(len(rows)), (rows, np.arange(len(rows)))), (n, n_vars))
    moments = features[rows, cols].T / n  # (m, n_support)
    eq_moments = sparse.hstack([sparse.csr_matrix(moments), sparse.csr_matrix((m, 1))])
    a_eq = sparse.vstack([eq_sum, eq_moments]).tocsr()
    b_eq = np.concatenate([np.ones(n), target])
    # t - q_iy <= 0
    a_ub = sparse.hstack(
        [-sparse.identity(len(rows), format="csr"), sparse.csr_matrix(np.ones((len(rows), 1)))]
    ).tocsr()
    cost = np.zeros(n_vars)
    cost[-1] = -1.0
    bounds = [(0, None)] * len(rows) + [(None, 1.0)]
    result = optimize.linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(len(rows)),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=bounds,
        method="highs",
    )
    if result.status == 2:
        return -np.inf
    if result.status != 0:  # numerical trouble: let the solve and its residual speak
        return np.inf
    return max(0.0, float(result.x[-1]))


def check_reachable(
    log_proba: np.ndarray, features: np.ndarray, target, names: list[str], joint: bool = True
) -> None:
    """Raise a ``ValueError`` naming the constraint whose target no finite ``λ`` reaches.

    First each constraint alone: its moment ranges, over posteriors on the model's support,
    over ``(mean_i min_y φ_k(x_i, y), mean_i max_y φ_k(x_i, y))``, open (the ends need an
    infinite ``λ``), or is that one value when ``φ_k`` is constant in ``y``. Then, with
    ``joint``, all together by :func:`feasibility_margin`. Called before the solve, so an
    unreachable target is an error, never a diverging solve.

    Parameters
    ----------
    log_proba : ndarray of shape (n, K)
    features : ndarray of shape (n, K, m)
    target : array-like of shape (m,)
    names : list of str
        How the error names each constraint.
    joint : bool, default=True
        Also check the constraints together (a linear program over ``n K`` variables).

    Returns
    -------
    None

    Examples
    --------
    >>> log_p, phi = np.log([[0.5, 0.5], [0.9, 0.1]]), np.eye(2)[None].repeat(2, 0)
    >>> check_reachable(log_p, phi, [0.6, 0.4], ["a", "b"])
    >>> check_reachable(log_p, phi, [1.0, 0.0], ["a", "b"])
    Traceback (most recent call last):
    ...
    ValueError: The target 1.0 of a cannot be met on X: ...
    """
    support = np.isfinite(log_proba)
    low = np.where(support[..., None], features, np.inf).min(axis=1).mean(axis=0).tolist()
    high = np.where(support[..., None], features, -np.inf).max(axis=1).mean(axis=0).tolist()
    targets = np.asarray(target, dtype=float).tolist()
    for k, name in enumerate(names):
        span = max(1.0, abs(low[k]), abs(high[k])) * 1e-9
        constant = high[k] - low[k] <= span
        inside = abs(targets[k] - low[k]) <= span if constant else low[k] < targets[k] < high[k]
        if not inside:
            raise ValueError(
                f"The target {targets[k]!r} of {name} cannot be met on X: the model's "
                f"posteriors on X reach only "
                + (
                    f"{low[k]!r}"
                    if constant
                    else f"values strictly between {low[k]!r} and {high[k]!r}"
                )
                + " for it (no finite λ; a share of exactly 0 or 1 is the boundary)."
            )
    if joint and len(names) > 1 and feasibility_margin(log_proba, features, targets) <= BOUNDARY:
        raise ValueError(
            f"The targets of {', '.join(names)} cannot be met together on X: each alone is "
            "reachable, but no posteriors give all of them at once (the targets lie outside "
            "the relative interior of the achievable moments). Relax one of them."
        )


#: EM's default Dirichlet pseudo-count ``s`` (:func:`em_priors`): one pseudo-sample of the
#: training distribution; chosen by the measurements in docs/distributional.md.
PSEUDO_COUNT = 1.0


def em_priors(
    proba: np.ndarray,
    train_priors: np.ndarray,
    *,
    pseudo_count: float = PSEUDO_COUNT,
    tol: float = 1e-8,
    max_iter: int = 1000,
    return_step: bool = False,
) -> tuple[np.ndarray, int] | tuple[np.ndarray, int, float]:
    """Deployment class priors by EM (Saerens et al., 2002), under a Dirichlet prior.

    From ``π^0 = π`` (the training priors), repeat the E step
    ``w^t_i(y) = p(y|x_i) π^t(y) / π(y) / Σ_y' p(y'|x_i) π^t(y') / π(y')`` and the M step

        π^{t+1}(y) = (Σ_i w^t_i(y) + s π(y)) / (n + s)

    until ``max_y |π^{t+1}(y) - π^t(y)| <= tol``. This is EM for the maximum a posteriori
    estimate under a Dirichlet prior ``Dir(1 + s π)`` on the deployment priors ``π'``: each
    step increases ``Σ_i log Σ_y p(y|x_i) π'(y) / π(y) + s Σ_y π(y) log π'(y)`` (Dempster,
    Laird & Rubin, 1977), whose maximum is unique for ``s > 0``. The pseudo-count ``s`` counts
    samples of the training distribution added to the ``n`` of ``X``: the estimate shrinks
    towards ``π`` (no shift) by ``s / (n + s)``, and every class keeps
    ``π'(y) >= s π(y) / (n + s)``, so that a class the posteriors cannot tell from another is
    never driven to the simplex's boundary. ``s = 0`` is the maximum-likelihood EM of Saerens
    et al., whose estimate sits on the boundary (a prior of 1e-19 for a rare class present in
    ``X``, whose samples then get probability ~0) whenever the likelihood is largest there.
    Šulc & Matas (2019) estimate test-time priors under a Dirichlet hyperprior too.

    Parameters
    ----------
    proba : ndarray of shape (n, K)
        ``p(y|x_i)`` of the model trained under ``train_priors``.
    train_priors : ndarray of shape (K,)
        ``π``, all positive.
    pseudo_count : float >= 0, default=1.0
        ``s``, in samples (:data:`PSEUDO_COUNT`: one pseudo-sample); ``0`` is maximum
        likelihood.
    tol : float > 0, default=1e-8
    max_iter : int >= 1, default=1000
    return_step : bool, default=False
        Also return the last step's ``max_y |π^{t+1}(y) - π^t(y)|``.

    Returns
    -------
    priors : ndarray of shape (K,)
        ``π'``.
    n_iter : int
        EM steps taken (``max_iter`` when it stopped before ``tol``).
    step : float
        With ``return_step=True`` only: the largest change of a prior at the last step.

    References
    ----------
    .. [1] Saerens, Latinne & Decaestecker, "Adjusting the outputs of a classifier to new a
       priori probabilities: a simple procedure", Neural Computation 14(1), 2002.
    .. [2] Šulc & Matas, "Improving CNN classifiers by estimating test-time priors", ICCV
       Workshops 2019.
    .. [3] Dempster, Laird & Rubin, "Maximum likelihood from incomplete data via the EM
       algorithm", JRSS B 39(1), 1977 (section 3: EM for the posterior mode).

    Examples
    --------
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]])
    >>> priors, n_iter = em_priors(proba, np.array([0.5, 0.5]))
    >>> bool(priors[0] > proba[:, 0].mean())
    True
    >>> ml, _ = em_priors(proba, np.array([0.5, 0.5]), pseudo_count=0.0)
    >>> bool(ml[0] > priors[0] > 0.5)  # the pseudo-counts shrink it towards the training priors
    True
    """
    check = ParamChecker.of({"pseudo_count": pseudo_count, "tol": tol, "max_iter": max_iter})
    check.real("pseudo_count", 0.0)
    check.real("tol", 0.0, low_open=True)
    check.integer("max_iter", 1)
    check.raise_if_any()
    train_priors = np.asarray(train_priors, dtype=float)
    n_samples = len(proba)
    pseudo = pseudo_count * train_priors
    priors, step, n_iter = train_priors.copy(), np.inf, 0
    while n_iter < max_iter and step > tol:
        posterior = bayes_correction(proba, train_priors, priors)
        new = (posterior.sum(axis=0) + pseudo) / (n_samples + pseudo_count)
        step = float(np.max(np.abs(new - priors)))
        priors, n_iter = new, n_iter + 1
    return (priors, n_iter, step) if return_step else (priors, n_iter)


def bayes_offset(train_priors: np.ndarray, priors: np.ndarray) -> np.ndarray:
    """``log π'(y) - log π(y)``: the Bayes correction as a class offset of the log posteriors.

    Added to ``log p(y|x)`` and renormalised (:func:`tilted_log_proba` without features), it
    gives the posteriors of :func:`bayes_correction` in log space; that is how
    :class:`~ebmclassifier.DistributionalConstraint` applies new priors to any
    sample. :func:`bayes_correction` keeps the product in probability space, where
    :func:`em_priors` iterates it.

    Parameters
    ----------
    train_priors : ndarray of shape (K,)
        ``π``, positive.
    priors : ndarray of shape (K,)
        ``π'``, non-negative; a class of prior 0 gets the offset ``-inf``.

    Returns
    -------
    ndarray of shape (K,)

    Examples
    --------
    >>> proba, train, new = np.array([[0.5, 0.5]]), np.array([0.5, 0.5]), np.array([0.8, 0.2])
    >>> offset = bayes_offset(train, new)
    >>> tilted = tilted_log_proba(np.log(proba) + offset, np.zeros((1, 2, 0)), np.zeros(0))
    >>> np.allclose(np.exp(tilted), bayes_correction(proba, train, new))
    True
    """
    with np.errstate(divide="ignore"):
        return np.log(priors) - np.log(train_priors)


def bayes_correction(proba: np.ndarray, train_priors: np.ndarray, priors: np.ndarray) -> np.ndarray:
    """``p'(y|x) ∝ p(y|x) π'(y) / π(y)``: the posteriors under new class priors.

    Exact when only the class priors change between training and deployment (label shift:
    ``p(x|y)`` fixed) and ``p`` is the calibrated posterior under ``π``.

    Parameters
    ----------
    proba : ndarray of shape (n, K)
    train_priors : ndarray of shape (K,)
        ``π``, positive.
    priors : ndarray of shape (K,)
        ``π'``, non-negative (a class of prior 0 gets probability 0).

    Returns
    -------
    ndarray of shape (n, K)

    Examples
    --------
    >>> bayes_correction(np.array([[0.5, 0.5]]), np.array([0.5, 0.5]), np.array([0.8, 0.2]))
    array([[0.8, 0.2]])
    """
    weighted = proba * (np.asarray(priors) / np.asarray(train_priors))
    return weighted / weighted.sum(axis=1, keepdims=True)


def bbse_priors(
    y_true: np.ndarray, y_pred: np.ndarray, y_pred_target: np.ndarray, n_classes: int
) -> np.ndarray:
    """Black-box shift estimation (Lipton, Wang & Smola, 2018) of the deployment priors.

    With ``C[i, j] = P(ŷ = i, y = j)`` on a labelled held-out split of the training
    distribution and ``b[i] = P(ŷ = i)`` on the deployment samples, the importance weights
    ``w = C^{-1} b`` (least squares) give ``π'(y) = w(y) π(y)``, with ``π`` the held-out
    split's class shares; negative values are clipped to 0 and the result renormalised.

    Parameters
    ----------
    y_true, y_pred : ndarray of shape (n_heldout,)
        Labels and hard predictions on the held-out split, as integers in ``0..K-1``.
    y_pred_target : ndarray of shape (n,)
        Hard predictions on the deployment samples, in ``0..K-1``.
    n_classes : int

    Returns
    -------
    ndarray of shape (n_classes,)

    References
    ----------
    .. [1] Lipton, Wang & Smola, "Detecting and correcting for label shift with black box
       predictors", ICML 2018.

    Examples
    --------
    >>> y_true = np.array([0, 0, 1, 1]); y_pred = np.array([0, 0, 1, 1])
    >>> bbse_priors(y_true, y_pred, np.array([0, 1, 1, 1]), 2).tolist()
    [0.25, 0.75]
    """
    joint = np.zeros((n_classes, n_classes))
    np.add.at(joint, (y_pred, y_true), 1.0)
    joint /= len(y_true)
    predicted = np.bincount(y_pred_target, minlength=n_classes) / len(y_pred_target)
    weights = np.linalg.lstsq(joint, predicted, rcond=None)[0]
    heldout_priors = np.bincount(y_true, minlength=n_classes) / len(y_true)
    priors = np.clip(weights * heldout_priors, 0.0, None)
    return priors / priors.sum()


class GroupShareDifference:
    """``φ(x, y) = 1[y = c] (1[g(x) = a] / s_a - 1[g(x) = b] / s_b)``, for parity constraints.

    Its average under ``p`` is the predicted share of class ``c`` in group ``a`` minus that in
    group ``b`` when ``s_a``, ``s_b`` are the groups' shares of the samples it was built on.
    A module-level class, so that a constraint made of it pickles.
    """

    def __init__(self, group, column: int, a, b, share_a: float, share_b: float, n_classes: int):
        self.group, self.column, self.a, self.b = group, column, a, b
        self.share_a, self.share_b, self.n_classes = share_a, share_b, n_classes

    def __call__(self, X) -> np.ndarray:
        groups = _groups(X, self.group)
        out = np.zeros((len(groups), self.n_classes))
        out[:, self.column] = (groups == self.a) / self.share_a - (groups == self.b) / self.share_b
        return out


def _groups(X, group) -> np.ndarray:
    if callable(group):
        return np.asarray(group(X))
    return np.asarray(X)[:, group]


def demographic_parity(
    X, group: int | Callable, label, classes
) -> list[tuple[GroupShareDifference, float]]:
    """Constraints that make the predicted share of ``label`` equal in every group of ``X``.

    For groups ``g_0, g_1, ...`` (sorted) of the samples ``X``, one constraint per group
    ``g_j, j >= 1``: ``mean_{i: g(x_i) = g_j} p(label|x_i) - mean_{i: g(x_i) = g_0}
    p(label|x_i) = 0``. Projecting on them (the constraints of
    :class:`~ebmclassifier.DistributionalConstraint` fitted on the same ``X``) tilts the
    ``label`` logit by one constant per group, the common share being whatever is closest to
    the model; the tilt of a group is the same at predict time.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The deployment samples the meta-estimator will be fitted on (the group shares are
        taken from them).
    group : int or callable
        The column of ``X`` holding the group, or ``group(X) -> (n_samples,)`` group labels.
    label : hashable
        The class whose predicted share must be equal across groups.
    classes : array-like of shape (n_classes,)
        The classifier's ``classes_``.

    Returns
    -------
    list of (callable, float)
        ``constraints`` for :class:`~ebmclassifier.DistributionalConstraint`.

    Examples
    --------
    >>> Xg = np.c_[np.zeros(4), [0, 0, 1, 1]]
    >>> constraints = demographic_parity(Xg, 1, "yes", ["no", "yes"])
    >>> len(constraints), constraints[0][0](Xg)[:, 1].tolist()
    (1, [-2.0, -2.0, 2.0, 2.0])
    """
    classes = list(np.asarray(classes).tolist())
    if label not in classes:
        raise ValueError(f"label must be one of the classes {classes!r}. Got {label!r} instead.")
    groups = _groups(X, group)
    values, counts = np.unique(groups, return_counts=True)
    if len(values) < 2:
        raise ValueError(f"group must give at least 2 groups on X. Got {values.tolist()!r}.")
    shares = counts / counts.sum()
    column = classes.index(label)
    return [
        (
            GroupShareDifference(group, column, g, values[0], shares[j], shares[0], len(classes)),
            0.0,
        )
        for j, g in enumerate(values[1:], start=1)
    ]
