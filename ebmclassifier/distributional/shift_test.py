"""Did the class priors move? A likelihood-ratio test with a bootstrapped threshold.

Label-shift EM (:func:`~ebmclassifier.distributional.em_priors`) always moves the priors: on
deployment samples drawn without any shift it fits their sampling noise, and on a model whose
posteriors are biased it fits the bias, and the Bayes correction to that estimate makes the
predictions worse than none. The test here tells a shift from both, so that the adaptation
happens only when the shift is there. Its statistic is the likelihood ratio of EM's (MAP)
priors ``π̂`` against the training priors ``π`` on the ``n`` deployment posteriors,

    Λ = 2 Σ_i log Σ_y p(y|x_i) π̂(y) / π(y)

(the log-likelihood at ``π`` is 0: each term is ``log Σ_y p(y|x_i) = 0``). Wilks's theorem
would give it a chi-square law with ``K - 1`` degrees of freedom under no shift, for a
calibrated model; a model's posteriors are not calibrated, and its bias makes ``Λ`` grow with
``n`` under no shift. So its threshold is bootstrapped from the model's own posteriors on
held-out samples of the training distribution (no shift there, by construction): ``n`` of
them drawn with replacement, ``n_resamples`` times, ``Λ`` computed on each, the ``1 - alpha``
quantile taken. The model's bias is then in the null law. Without held-out samples there is
nothing to resample the null from (the deployment samples themselves cannot stand for it:
reweighting them to the training priors cannot bring back a class that is absent from them),
and the test falls back on Wilks's chi-square law, which ignores the bias. Arrays: ``proba``
is ``(n, K)``, ``reference`` is ``(m, K)``, priors are ``(K,)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._utils.generators import numpy_generator, numpy_streams
from .._utils.parameters import ParamChecker
from .calibration import calibrated_log_proba, fit_temperature
from .posteriors import PSEUDO_COUNT, em_priors

__all__ = ["PriorShiftTest", "prior_shift_statistic", "prior_shift_test"]

#: The largest ``resamples x n x K`` block that the bootstrap's EM holds at once (float64).
BLOCK_ITEMS = 2**22
#: Where the threshold came from (:attr:`PriorShiftTest.source`).
SOURCES = ("reference", "chi2", "given")
#: The calibrations a reference may have been fitted by.
CALIBRATIONS = (None, "temperature", "bcts")


@dataclass(frozen=True)
class PriorShiftTest:
    """The outcome of :func:`prior_shift_test`, its fields as it returns them.

    Parameters
    ----------
    statistic : float
        ``Λ`` on the deployment posteriors.
    threshold : float
        The ``1 - alpha`` quantile of ``Λ`` under no shift, bootstrapped.
    shift_detected : bool
        ``statistic > threshold``.
    p_value : float
        ``(1 + #{Λ_b >= Λ}) / (1 + n_resamples)`` over the bootstrapped ``Λ_b``.
    weight : float
        In ``[0, 1]``: how far to move the priors from ``π`` to ``π̂``; ``0`` without a
        detected shift, ``1 - threshold / Λ`` with one (:func:`prior_shift_test`).
    priors : ndarray of shape (K,)
        ``π̂``, EM's estimate on the deployment posteriors.
    alpha : float
        The level of the test.
    n_resamples : int
        The bootstrap's resamples.
    source : {"reference", "chi2", "given"}
        Where the null law came from: the held-out posteriors, Wilks's chi-square law (no
        held-out posteriors), or the ``null_statistics`` of an earlier test.
    null_statistics : ndarray of shape (n_resamples,)
        The bootstrapped ``Λ_b`` (empty for ``"chi2"``): pass them to
        :func:`prior_shift_test` to test another deployment set of the same size against the
        same held-out samples without resampling.

    Examples
    --------
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
    >>> result = prior_shift_test(proba, np.array([0.5, 0.5]), proba, n_resamples=20,
    ...                           random_state=0)
    >>> result.shift_detected, result.weight, result.source, result.null_statistics.shape
    (False, 0.0, 'reference', (20,))
    """

    statistic: float
    threshold: float
    shift_detected: bool
    p_value: float
    weight: float
    priors: np.ndarray
    alpha: float
    n_resamples: int
    source: str
    null_statistics: np.ndarray


def prior_shift_statistic(
    proba: np.ndarray, train_priors: np.ndarray, priors: np.ndarray
) -> np.ndarray:
    """``Λ = 2 Σ_i log Σ_y p(y|x_i) π'(y) / π(y)``: the log-likelihood ratio of ``π'`` to ``π``.

    The likelihood of the unlabelled samples under deployment priors ``π'`` (Saerens, Latinne
    & Decaestecker, 2002), relative to the training priors ``π``; batched over leading axes.

    Parameters
    ----------
    proba : ndarray of shape (..., n, K)
        ``p(y|x_i)`` of the model trained under ``train_priors``.
    train_priors : ndarray of shape (K,)
        ``π``, positive.
    priors : ndarray of shape (..., K)
        ``π'``, one per leading index of ``proba``.

    Returns
    -------
    ndarray of shape (...)
        ``Λ``; a 0-d array for one set of samples. At EM's estimate ``π'`` (maximum likelihood
        or MAP, :func:`~ebmclassifier.distributional.em_priors`) it is ``>= 0``.

    Examples
    --------
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2]])
    >>> float(prior_shift_statistic(proba, np.array([0.5, 0.5]), np.array([0.5, 0.5])))
    0.0
    >>> lr = prior_shift_statistic(proba, np.array([0.5, 0.5]), np.array([0.9, 0.1]))
    >>> bool(np.isclose(lr, 2 * (np.log(0.9 * 1.8 + 0.1 * 0.2) + np.log(0.8 * 1.8 + 0.2 * 0.2))))
    True
    """
    ratio = np.asarray(priors, dtype=float) / np.asarray(train_priors, dtype=float)
    mixed = np.einsum("...iy,...y->...i", proba, ratio)
    return 2.0 * np.log(mixed).sum(axis=-1)


def _em_batched(
    proba: np.ndarray, train_priors: np.ndarray, pseudo_count: float, tol: float, max_iter: int
) -> np.ndarray:
    """:func:`em_priors` on each of ``B`` sets at once: ``proba`` (B, n, K) -> (B, K).

    The same E and M steps, from the same start; a set stops changing once its own largest
    change of a prior is at or below ``tol`` (as :func:`em_priors` stops).
    """
    n_sets, n_samples, _ = proba.shape
    pseudo = pseudo_count * train_priors
    priors = np.broadcast_to(train_priors, (n_sets, len(train_priors))).copy()
    active = np.arange(n_sets)
    for _ in range(max_iter):
        weighted = proba[active] * (priors[active] / train_priors)[:, None, :]
        weighted /= weighted.sum(axis=2, keepdims=True)
        new = (weighted.sum(axis=1) + pseudo) / (n_samples + pseudo_count)
        step = np.max(np.abs(new - priors[active]), axis=1)
        priors[active] = new
        active = active[step > tol]
        if not active.size:
            break
    return priors


def _stratified(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A bootstrap resample of the rows of ``labels`` within each class (its shares kept)."""
    counts = np.bincount(labels)
    return np.concatenate(
        [rng.choice(np.flatnonzero(labels == c), size=k) for c, k in enumerate(counts) if k]
    )


def _null_sets(pool, rows, calibration, rng):
    """The rows of ``pool`` as posteriors ``(size, n, K)``; with a ``calibration``
    ``(kind, labels)``, each set recalibrated by a fit on a stratified resample of the pool."""
    if calibration is None:
        return pool[rows]
    kind, labels = calibration
    with np.errstate(divide="ignore"):
        log_pool = np.log(pool)
    sets = np.empty((*rows.shape, pool.shape[1]))
    for j, drawn in enumerate(rows):
        fitted = _stratified(labels, rng)
        temperature, bias, _ = fit_temperature(
            log_pool[fitted], labels[fitted], bias=kind == "bcts"
        )
        sets[j] = np.exp(calibrated_log_proba(log_pool[drawn], temperature, bias))
    return sets


def _null_statistics(
    pool: np.ndarray,
    calibration: tuple[str, np.ndarray] | None,
    n_samples: int,
    train_priors: np.ndarray,
    *,
    n_resamples: int,
    pseudo_count: float,
    tol: float,
    max_iter: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``Λ`` on ``n_resamples`` draws of ``n_samples`` rows of ``pool`` with replacement
    (recalibrated per draw with a ``calibration``), in blocks of at most
    :data:`BLOCK_ITEMS`. The rows and the calibrations' resamples come from two streams of
    ``rng``, so that the statistics do not depend on the blocks."""
    per_block = max(1, BLOCK_ITEMS // (n_samples * pool.shape[1]))
    rows_rng, calibration_rng = numpy_streams(rng, 2)
    statistics = []
    for start in range(0, n_resamples, per_block):
        size = min(per_block, n_resamples - start)
        rows = rows_rng.choice(len(pool), size=(size, n_samples), replace=True)
        sets = _null_sets(pool, rows, calibration, calibration_rng)
        priors = _em_batched(sets, train_priors, pseudo_count, tol, max_iter)
        statistics.append(prior_shift_statistic(sets, train_priors, priors))
    return np.concatenate(statistics)


def _check(proba, train_priors, reference, alpha, n_resamples, pseudo_count, tol, max_iter):
    values = {"alpha": alpha, "n_resamples": n_resamples, "pseudo_count": pseudo_count}
    check = ParamChecker.of({**values, "tol": tol, "max_iter": max_iter})
    check.real("alpha", 0.0, 1.0, low_open=True)
    check.satisfies("alpha", alpha != 1, "a float in the range (0, 1)")
    check.integer("n_resamples", 1)
    check.real("pseudo_count", 0.0)
    check.real("tol", 0.0, low_open=True)
    check.integer("max_iter", 1)
    n_classes = len(train_priors)
    for name, value in (("proba", proba), ("reference", reference)):
        if value is not None and (value.ndim != 2 or value.shape[1] != n_classes):
            check.add(
                f"{name} must be an array of shape (n_samples, {n_classes}), one column per "
                f"class of train_priors. Got shape {value.shape}."
            )
        elif value is not None and len(value) < 1:
            check.add(f"{name} must hold at least one sample. Got none.")
    check.raise_if_any()


def _check_calibration(reference, labels, calibration, n_classes: int) -> None:
    check = ParamChecker.of({"calibration": calibration})
    check.choice("calibration", CALIBRATIONS)
    if calibration is not None and reference is None:
        check.add("calibration is fitted on the held-out samples: pass reference too.")
    elif calibration is not None and (
        labels is None
        or labels.shape != (len(reference),)
        or not np.issubdtype(labels.dtype, np.integer)
        or labels.min() < 0
        or labels.max() >= n_classes
    ):
        check.add(
            f"reference_labels must be the integer labels 0..{n_classes - 1} of the "
            f"{len(reference)} rows of reference, with calibration={calibration!r}."
        )
    elif calibration is None and labels is not None:
        check.add("reference_labels are used with a calibration only: pass calibration too.")
    check.raise_if_any()


def _given_null(null_statistics) -> np.ndarray:
    null = np.asarray(null_statistics, dtype=float)
    if null.ndim != 1 or not len(null) or not np.all(np.isfinite(null)):
        raise ValueError(
            "null_statistics must be the finite, one-dimensional null_statistics of an earlier "
            f"prior_shift_test. Got an array of shape {null.shape}."
        )
    return null


def _decide(statistic: float, null: np.ndarray | None, alpha: float, n_classes: int) -> dict:
    """The threshold, decision, p-value and weight of ``statistic`` against the bootstrapped
    ``null``, or (None) Wilks's chi-square law with ``K - 1`` degrees of freedom."""
    if null is None:
        law = stats.chi2(df=n_classes - 1)
        threshold, p_value = float(law.isf(alpha)), float(law.sf(statistic))
    else:
        threshold = float(np.quantile(null, 1.0 - alpha))
        p_value = float((1 + np.sum(null >= statistic)) / (1 + len(null)))
    detected = bool(statistic > threshold)
    weight = 1.0 - threshold / statistic if detected else 0.0
    return {
        "threshold": threshold,
        "shift_detected": detected,
        "p_value": p_value,
        "weight": float(weight),
    }


def prior_shift_test(
    proba: np.ndarray,
    train_priors: np.ndarray,
    reference: np.ndarray | None = None,
    *,
    reference_labels: np.ndarray | None = None,
    calibration: str | None = None,
    alpha: float = 0.05,
    n_resamples: int = 200,
    pseudo_count: float = PSEUDO_COUNT,
    tol: float = 1e-8,
    max_iter: int = 1000,
    priors: np.ndarray | None = None,
    null_statistics: np.ndarray | None = None,
    random_state: int | np.random.Generator | None = None,
) -> PriorShiftTest:
    """Test whether the class priors of the deployment samples differ from the training priors.

    The statistic is the likelihood ratio ``Λ`` of EM's priors ``π̂`` (the MAP estimate of
    :func:`~ebmclassifier.distributional.em_priors` with ``pseudo_count``) against the
    training priors ``π`` on ``proba`` (:func:`prior_shift_statistic`); the shift is detected
    when ``Λ`` exceeds the ``1 - alpha`` quantile of its bootstrapped law under no shift
    (module notes): ``n`` rows of ``reference``, the model's posteriors on held-out samples of
    the training distribution, drawn with replacement ``n_resamples`` times, ``Λ`` computed on
    each with the same EM. When the held-out samples also fitted the calibration of the
    posteriors (``calibration``), each resample refits it on a stratified bootstrap resample of
    them, so that the calibration's own error is in the null law too. Costs ``n_resamples`` EM
    runs on ``n`` samples, batched (and as many calibrations, with ``calibration``). Without
    ``reference``, the threshold is the ``1 - alpha`` quantile of Wilks's chi-square law with
    ``K - 1`` degrees of freedom, right for calibrated posteriors only: a biased model's ``Λ``
    exceeds it more often than ``alpha`` under no shift, the more often the larger ``n``.

    ``weight = max(0, 1 - threshold / Λ)`` says how far to move from ``π`` to ``π̂``: ``0``
    without a detected shift, growing continuously from the threshold on, towards 1 for a
    shift far beyond it; a positive-part James-Stein shrinkage (James & Stein, 1961) with the
    threshold as its constant, the part of ``Λ`` that no shift explains as well.

    Parameters
    ----------
    proba : ndarray of shape (n, K)
        ``p(y|x_i)`` on the deployment samples, of the model trained under ``train_priors``.
    train_priors : ndarray of shape (K,)
        ``π``, positive.
    reference : ndarray of shape (m, K) or None, default=None
        The same model's ``p(y|x)`` on held-out samples of the training distribution (not
        those it was fitted on: its posteriors there are sharper than anywhere else), after the
        same calibration as ``proba`` (before it, with ``calibration``). ``m`` may differ from
        ``n``. None: Wilks's chi-square law instead.
    reference_labels : ndarray of shape (m,) or None, default=None
        The labels of the held-out samples, integers in ``0..K-1``, with ``calibration`` only.
    calibration : {None, "temperature", "bcts"}, default=None
        The calibration that ``proba`` had, fitted on ``(reference, reference_labels)`` by
        :func:`~ebmclassifier.distributional.fit_temperature` (default penalty);
        ``train_priors`` are then the class shares of ``reference_labels``.
    alpha : float in (0, 1), default=0.05
        The level: the share of no-shift deployment sets on which the shift is detected, when
        ``reference`` is of the deployment's distribution.
    n_resamples : int >= 1, default=200
        Bootstrap resamples.
    pseudo_count : float >= 0, default=1.0
        EM's Dirichlet pseudo-count ``s``, for ``π̂`` and in every resample.
    tol : float > 0, default=1e-8
        EM's tolerance, as :func:`~ebmclassifier.distributional.em_priors`.
    max_iter : int >= 1, default=1000
    priors : ndarray of shape (K,) or None, default=None
        ``π̂`` when it is already computed on ``proba`` with the same ``pseudo_count``, ``tol``
        and ``max_iter`` (EM is not run again); None runs it.
    null_statistics : ndarray of shape (n_resamples,) or None, default=None
        The ``null_statistics`` of an earlier test of a deployment set of the same size ``n``
        against the same held-out samples (and the same EM): reused instead of resampling,
        ``reference`` and ``n_resamples`` unused. For many deployment sets of one size (a
        stream of batches), the bootstrap's cost is paid once.
    random_state : int, numpy Generator or None, default=None
        Seeds the bootstrap's own generator (``numpy.random.default_rng``); an int makes the
        threshold reproducible, None draws fresh entropy.

    Returns
    -------
    PriorShiftTest
        ``statistic``, ``threshold``, ``shift_detected``, ``p_value``, ``weight``, ``priors``
        (``π̂``), ``alpha``, ``n_resamples``, ``source`` (``"reference"``, ``"chi2"``
        or ``"given"``) and ``null_statistics``.

    References
    ----------
    .. [1] Saerens, Latinne & Decaestecker, "Adjusting the outputs of a classifier to new a
       priori probabilities: a simple procedure", Neural Computation 14(1), 2002 (section 2.4:
       the likelihood-ratio test of a change in the priors).
    .. [2] Efron & Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall, 1993
       (chapter 16: hypothesis testing with the bootstrap).
    .. [3] Wilks, "The large-sample distribution of the likelihood ratio for testing composite
       hypotheses", Annals of Mathematical Statistics 9(1), 1938.
    .. [4] James & Stein, "Estimation with quadratic loss", Proc. Fourth Berkeley Symposium,
       1961.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> def posteriors(labels):  # a calibrated model of two classes, equal training priors
    ...     scores = rng.normal(1.5 * (2 * labels - 1))
    ...     p1 = 1 / (1 + np.exp(-3.0 * scores))
    ...     return np.c_[1 - p1, p1]
    >>> held_out = posteriors(rng.integers(0, 2, 400))
    >>> train = np.array([0.5, 0.5])
    >>> shifted = posteriors((rng.random(300) < 0.8).astype(int))  # 80 % of class 1
    >>> result = prior_shift_test(shifted, train, held_out, random_state=0)
    >>> result.shift_detected, result.priors.round(1).tolist()
    (True, [0.2, 0.8])
    >>> prior_shift_test(posteriors(rng.integers(0, 2, 300)), train, held_out,
    ...                  random_state=0).shift_detected
    False
    """
    proba = np.asarray(proba, dtype=float)
    train_priors = np.asarray(train_priors, dtype=float)
    reference = None if reference is None else np.asarray(reference, dtype=float)
    labels = None if reference_labels is None else np.asarray(reference_labels)
    _check(proba, train_priors, reference, alpha, n_resamples, pseudo_count, tol, max_iter)
    _check_calibration(reference, labels, calibration, len(train_priors))
    options = {"pseudo_count": pseudo_count, "tol": tol, "max_iter": max_iter}
    if priors is None:
        priors = em_priors(proba, train_priors, **options)[0]
    statistic = float(prior_shift_statistic(proba, train_priors, priors))
    if null_statistics is not None:
        null, source = _given_null(null_statistics), "given"
    elif reference is not None:
        null = _null_statistics(
            reference,
            None if calibration is None else (calibration, labels),
            len(proba),
            train_priors,
            n_resamples=n_resamples,
            rng=numpy_generator(random_state),
            **options,
        )
        source = "reference"
    else:
        null, source = None, "chi2"
    return PriorShiftTest(
        statistic=statistic,
        **_decide(statistic, null, alpha, len(train_priors)),
        priors=np.asarray(priors, dtype=float),
        alpha=float(alpha),
        n_resamples=0 if null is None else len(null),
        source=source,
        null_statistics=np.zeros(0) if null is None else null,
    )
