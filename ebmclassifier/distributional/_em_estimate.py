"""EM as :class:`~ebmclassifier.DistributionalConstraint` runs it, and when not to trust it.

:func:`em_estimate` runs :func:`~ebmclassifier.distributional.em_priors` on the ``n`` samples
of ``X``, tests whether the priors moved at all
(:func:`~ebmclassifier.distributional.prior_shift_test`: EM's estimate is adopted, shrunk
towards the training priors by the test's weight, only when the shift is detected), gives the
class shares the projection meets, and warns, with the numbers, for each reason the estimate
cannot be trusted (:func:`warn_untrusted_em`; :func:`warn_unreferenced_test` when the test has
no held-out samples). Each check has a stated meaning:

- **too few samples**: ``n < MIN_SAMPLES_PER_CLASS * K``. The sampling error of a class share
  alone, ``sqrt(π(1 - π) / n)``, is then more than a third of the share ``1 / K`` of a balanced
  class, whatever the model;
- **not converged**: EM stopped at ``max_iter`` with a last change of a prior above ``tol``;
- **a prior on the boundary**: ``π'(y) < BOUNDARY_FRACTION π(y) / n``, below a hundredth of
  what one pseudo-sample of the training distribution keeps (``π(y) / (n + 1)``, the default
  ``em_pseudo_count``). The Bayes correction then divides the class's odds by more than
  ``100 n``: every sample of it in ``X`` gets a probability near 0. The maximum-likelihood EM
  (``em_pseudo_count=0``) goes there whenever the posteriors cannot tell a rare class from
  another; with ``em_pseudo_count = s``, ``π'(y) >= s π(y) / (n + s)``, so it does not for any
  ``s >= 0.01 (n + s) / n``.
"""

from __future__ import annotations

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._utils.warn import warn_user
from .posteriors import bayes_correction, em_priors
from .shift_test import PriorShiftTest, prior_shift_test

__all__ = [
    "BOUNDARY_FRACTION",
    "MIN_SAMPLES_PER_CLASS",
    "SHIFT_ATTRIBUTES",
    "em_estimate",
    "shift_record",
    "warn_untrusted_em",
    "warn_unreferenced_test",
]

#: Fewer samples of ``X`` than this many per class make EM's estimate noise-dominated.
MIN_SAMPLES_PER_CLASS = 10
#: A prior below this fraction of ``π(y) / n`` counts as pushed to the boundary.
BOUNDARY_FRACTION = 0.01
#: The fitted attributes that record EM's estimate and the test of the shift (None without).
SHIFT_ATTRIBUTES = (
    "em_prior_",
    "prior_shift_detected_",
    "shift_statistic_",
    "shift_threshold_",
    "shift_p_value_",
    "shift_weight_",
    "shift_threshold_source_",
)


def em_estimate(
    proba: np.ndarray,
    train_priors: np.ndarray,
    *,
    pseudo_count: float,
    tol: float,
    max_iter: int,
    labels: list,
    test: dict | None = None,
) -> tuple[np.ndarray, np.ndarray, int, dict]:
    """The priors to adapt to, the class shares the projection meets on ``X``, EM's steps and
    the record of the test (:data:`SHIFT_ATTRIBUTES`).

    EM's priors ``π̂``; with ``test`` (the keyword arguments of
    :func:`~ebmclassifier.distributional.prior_shift_test` beyond ``proba``,
    ``train_priors`` and EM's, and ``source``, what the record calls the held-out samples),
    ``π + w (π̂ - π)`` with the test's weight ``w`` (``π`` itself, no adaptation, without a
    detected shift). The shares are the average on ``X`` of the posteriors Bayes-corrected to
    them, ``π' + s (π̂ - π) / n`` at EM's fixed point (the M step without the pseudo-counts):
    the projection onto them is that Bayes correction, as at the maximum-likelihood fixed point
    (``s = 0``), where they are ``π̂``. Warns as :func:`warn_untrusted_em` says.
    """
    priors, n_iter, step = em_priors(
        proba,
        train_priors,
        pseudo_count=pseudo_count,
        tol=tol,
        max_iter=max_iter,
        return_step=True,
    )
    warn_untrusted_em(
        priors,
        train_priors,
        len(proba),
        n_iter,
        step,
        labels=labels,
        pseudo_count=pseudo_count,
        tol=tol,
        max_iter=max_iter,
    )
    record = dict.fromkeys(SHIFT_ATTRIBUTES, None)
    record["em_prior_"] = priors
    adopted = priors
    if test is not None:
        test = dict(test)
        source = test.pop("source")
        if test.get("reference") is None:
            warn_unreferenced_test()
        options = {"pseudo_count": pseudo_count, "tol": tol, "max_iter": max_iter}
        result = prior_shift_test(proba, train_priors, **test, priors=priors, **options)
        record.update(shift_record(result, source))
        adopted = train_priors + result.weight * (priors - train_priors)
    return adopted, bayes_correction(proba, train_priors, adopted).mean(axis=0), n_iter, record


def shift_record(result: PriorShiftTest, source: str) -> dict:
    """The fitted attributes of :data:`SHIFT_ATTRIBUTES` from a test's ``result``, plain."""
    return {
        "em_prior_": result.priors,
        "prior_shift_detected_": result.shift_detected,
        "shift_statistic_": result.statistic,
        "shift_threshold_": result.threshold,
        "shift_p_value_": result.p_value,
        "shift_weight_": result.weight,
        "shift_threshold_source_": source,
    }


def warn_unreferenced_test() -> None:
    """Warn that the test of the shift has no held-out samples, and what that costs."""
    warn_user(
        "DistributionalConstraint: priors='em' tests whether the class priors moved before it "
        "adapts, and no held-out samples were given to bootstrap the test's threshold from: it "
        "takes the threshold of Wilks's chi-square law instead, which holds for calibrated "
        "posteriors only. A model whose posteriors are biased is then adapted to its own bias, "
        "the more often the larger X is. Pass fit(X, heldout=X_held) with samples of the "
        "training distribution the model was not trained on (or calibration= with "
        "calibration_set=), or shift_test=False to adapt without the test."
    )


def warn_untrusted_em(
    priors: np.ndarray,
    train_priors: np.ndarray,
    n_samples: int,
    n_iter: int,
    step: float,
    *,
    labels: list,
    pseudo_count: float,
    tol: float,
    max_iter: int,
) -> None:
    """Warn, with the numbers, for each reason not to trust EM's ``priors`` (module notes).

    Parameters
    ----------
    priors, train_priors : ndarray of shape (K,)
        ``π'`` (EM's) and ``π``.
    n_samples : int
        ``n``, the samples of ``X``.
    n_iter, step : int, float
        EM's steps and its last step's largest change of a prior.
    labels : list
        The classes, to name them.
    pseudo_count, tol, max_iter : float, float, int
        The ``em_pseudo_count``, ``tol`` and ``max_iter`` EM ran with.
    """
    n_classes = len(priors)
    if n_samples < MIN_SAMPLES_PER_CLASS * n_classes:
        share = 1.0 / n_classes
        error = float(np.sqrt(share * (1.0 - share) / n_samples))
        warn_user(
            f"DistributionalConstraint: EM estimates {n_classes} class priors from "
            f"{n_samples} samples of X, fewer than {MIN_SAMPLES_PER_CLASS} per class "
            f"({MIN_SAMPLES_PER_CLASS * n_classes}): the sampling error of a balanced class's "
            f"share {share:.3g} is {error:.3g} ({error / share:.0%} of it) before any error of "
            "the model. The estimate cannot be trusted: fit on more deployment samples, or "
            "pass the priors if they are known.",
        )
    if n_iter >= max_iter and step > tol:
        warn_user(
            f"DistributionalConstraint: EM stopped after max_iter={max_iter} steps with a "
            f"last change of {step:.3g} in a prior, above tol={tol}; raise max_iter (or tol).",
            ConvergenceWarning,
        )
    limit = BOUNDARY_FRACTION * train_priors / n_samples
    low = np.flatnonzero(priors < limit)
    if low.size:
        shown = ", ".join(
            f"{labels[k]!r}: {priors[k]:.3g} (training prior {train_priors[k]:.3g})" for k in low
        )
        warn_user(
            f"DistributionalConstraint: EM pushed the priors of {low.size} class(es) to the "
            f"boundary of the simplex, below {BOUNDARY_FRACTION} of their training prior / n "
            f"(n = {n_samples}): {shown}. Every sample of such a class in X now gets a "
            "probability near 0. em_pseudo_count=s keeps each prior at or above s * training "
            f"prior / (n + s), the maximum a posteriori estimate under a Dirichlet prior; it is "
            f"{pseudo_count!r} here: raise it (the default, 1.0, is one pseudo-sample of the "
            "training distribution).",
        )
