"""DistributionalConstraint: a thin face over :mod:`ebmclassifier.distributional.posteriors`.

The face validates, calls the core's functions on arrays (the EM of the priors, the dual solve,
the tilt, the Bayes offset) and keeps what they return; it spells no formula of its own.
"""

from __future__ import annotations

import warnings
from numbers import Real

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._utils.generators import draw_seed
from .._utils.parameters import ParamChecker, is_int
from ..saving._files import save_constraint
from ._em_estimate import SHIFT_ATTRIBUTES, em_estimate
from ._source import (
    calibration_labels,
    class_vector,
    fit_calibration,
    is_share_array,
    source_priors,
)
from .calibration import calibrated_log_proba
from .posteriors import PSEUDO_COUNT, bayes_offset, check_reachable, solve_dual, tilted_log_proba

__all__ = ["DistributionalConstraint"]

_METHODS = ("projection", "bayes")
_SOLVERS = ("trust-exact", "newton-cg", "l-bfgs-b")
_CALIBRATIONS = (None, "temperature", "bcts")


_HELDOUT_UNUSED = (
    "heldout samples are used by the test of the shift of priors='em' only; {reason} runs no "
    "test: leave heldout out."
)


def _is_em(priors) -> bool:
    return isinstance(priors, str) and priors == "em"


def _base_has(name: str):  # for available_if: a method the base estimator has
    return lambda self: hasattr(self.estimator, name)


class DistributionalConstraint(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """A fitted classifier whose average prediction on deployment data meets constraints.

    Fitted on *unlabelled* deployment samples ``x_1..x_n``, it tilts the base estimator's
    posteriors by one energy term per constraint,
    ``p_λ(y|x) ∝ p(y|x) exp(Σ_k λ_k φ_k(x, y))``, with ``λ`` such that
    ``mean_i Σ_y p_λ(y|x_i) φ_k(x_i, y) = μ_k`` for every constraint: the posteriors closest
    to the model (in average KL divergence) that meet the targets on ``X`` (the information
    projection of GDC, Khalifa, Elsahar & Dymetman, 2021). ``λ`` minimises a convex dual
    (:func:`~ebmclassifier.distributional.dual_objective`) by scipy's optimisers, after a
    linear program has checked that the targets can be met at all.

    What is wanted is said in one or more of three ways:

    - ``priors={label: share}`` (or an array in the order of ``classes_``): the deployment
      class priors (``φ`` = one-hot of ``y``).
      ``method="projection"`` makes the *average prediction on X* equal to them;
      ``method="bayes"`` instead applies the closed form ``p(y|x) π'(y) / π(y)``, exact under
      label shift for a calibrated model, whose average on ``X`` is in general *not* ``π'``.
      A class of prior 0 is allowed: its probability becomes 0 everywhere.
    - ``priors="em"``: the deployment priors estimated on ``X`` by the EM of Saerens et al.
      (2002), then the adaptation. EM counts ``em_pseudo_count`` samples of the training
      distribution besides ``X`` (the maximum a posteriori estimate under a Dirichlet prior,
      :func:`~ebmclassifier.distributional.em_priors`), so that a class present in ``X`` is
      never driven to a prior of 0; ``em_pseudo_count=0`` is the maximum-likelihood EM. It
      warns, with the numbers, when ``X`` is too small for the classes, when EM did not
      converge, and when a prior is pushed to the boundary. Before adapting, it tests whether
      the priors moved at all (``shift_test``,
      :func:`~ebmclassifier.distributional.prior_shift_test`: EM's likelihood ratio against a
      threshold bootstrapped from the model's posteriors on held-out samples): without a
      detected shift it keeps the training priors (the model is left as it is), with one it
      moves them towards EM's by the test's weight. Both methods then give the Bayes
      correction under the adopted priors.
    - ``constraints=[(phi, target), ...]``: ``phi(X) -> (n_samples, n_classes)`` gives
      ``φ_k(x, y)``; e.g. :func:`~ebmclassifier.distributional.demographic_parity`.

    For the library's estimators the adapted logits are ``f(x)[y] + λ·φ(x, y)``, so the
    adapted energy is ``E_λ(x) = -logsumexp_y (f(x)[y] + λ·φ(x, y))`` (:meth:`energy`,
    :meth:`score_ood`): the constraint is one more energy term, added with no retraining.

    With ``calibration``, the base posteriors are first calibrated on labelled held-out
    samples (``fit(X, calibration_set=(X_val, y_val))``): ``log softmax(f(x) / T + b)``, by
    temperature scaling (``b = 0``) or bias-corrected temperature scaling (BCTS, Alexandari,
    Kundaje & Shrikumar, 2020, which they pair with EM); everything above then applies to the
    calibrated model (:func:`~ebmclassifier.distributional.fit_temperature`).

    Parameters
    ----------
    estimator : fitted classifier
        Anything fitted with ``predict_proba`` and ``classes_``: the library's estimators, a
        :class:`~sklearn.pipeline.Pipeline`, a scikit-learn classifier. It is used as it is,
        never refitted; wrap it in :class:`sklearn.frozen.FrozenEstimator` for ``clone`` (and
        so a grid search) to keep it fitted.
    priors : dict, array-like of shape (n_classes,), "em" or None, default=None
        ``{label: share}`` for every class, or the shares in the order of ``classes_``
        (non-negative, summing to 1), or ``"em"``.
    constraints : list of (callable, float) or None, default=None
        Moment constraints ``(phi, target)``; with ``priors`` too, both hold.
    method : {"projection", "bayes"}, default="projection"
        ``"bayes"`` needs ``priors`` and no ``constraints``.
    train_priors : dict, array-like of shape (n_classes,) or None, default=None
        The class priors ``π`` the base estimator was trained under, needed by
        ``priors="em"`` and ``method="bayes"``. ``None`` takes, with ``calibration``, the
        class shares of the calibration set (the calibrated posteriors' own); without, what
        the estimator records: ``class_prior_`` (the library's estimators, the shares of their
        training labels; naive Bayes), ``priors_`` (discriminant analysis) or
        ``exp(class_log_prior_)``, also through a ``Pipeline``'s last step, a
        ``FrozenEstimator`` or a ``CalibratedClassifierCV``. Other estimators need it, e.g.
        ``np.bincount(y_train) / len(y_train)`` in the order of ``classes_``.
    em_pseudo_count : float >= 0, default=1.0
        ``s``, the weight of EM's Dirichlet prior ``Dir(1 + s π)`` on the deployment priors,
        in samples: EM estimates them as if ``s`` samples drawn from the training priors ``π``
        were added to the ``n`` of ``X``, which keeps every prior at or above
        ``s π(y) / (n + s)`` and moves the estimate towards ``π`` by ``s / (n + s)`` (at most
        ``2 s / (n + s)`` in L1). ``0`` is the maximum-likelihood EM, whose priors reach 0 for
        a rare class the posteriors cannot tell from another (its samples then get probability
        ~0). Used by ``priors="em"`` only.
    solver : {"trust-exact", "newton-cg", "l-bfgs-b"}, default="trust-exact"
        The scipy optimiser of the dual (the first two use its exact Hessian).
    tol : float, default=1e-8
        The solve stops when the norm of the constraint residual is below ``tol``; EM when a
        step changes no prior by more than ``tol``.
    max_iter : int, default=1000
        Iterations of the solver, of EM, and of the calibration's.
    calibration : {None, "temperature", "bcts"}, default=None
        Calibrate the base posteriors on ``fit``'s ``calibration_set`` before anything else:
        temperature scaling (Guo et al., 2017) or bias-corrected temperature scaling.
    shift_test : bool, default=True
        With ``priors="em"``, adapt only when a test detects that the priors moved
        (:func:`~ebmclassifier.distributional.prior_shift_test`), its threshold bootstrapped
        from the model's posteriors on ``fit``'s ``heldout`` samples (or on the
        ``calibration_set``, recalibrated per resample; without either, Wilks's chi-square
        law, which ignores the model's bias: ``fit`` warns); with a detected shift, move the
        priors from the training priors towards EM's by the test's ``shift_weight_``.
        ``False`` adapts to EM's priors always (for a shift known to be there; the behaviour
        before the test existed).
    shift_significance : float in (0, 1), default=0.05
        The test's level: the share of deployment sets without a shift on which it detects
        one, when the held-out samples are of the deployment's distribution.
    shift_resamples : int >= 1, default=200
        The test's bootstrap resamples (each an EM run on ``n`` samples; with a calibration
        set, a calibration too).
    random_state : None, int, numpy Generator or RandomState, default=None
        Seeds the test's bootstrap; an int makes its threshold reproducible.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    prior_ : ndarray of shape (n_classes,)
        The deployment priors: given, or estimated by EM; with ``constraints`` alone, the
        adapted average prediction on ``X``.
    lambda_ : ndarray of shape (n_constraints,)
        ``λ``: first one per class when ``priors`` is given (in the order of ``classes_``,
        ``-inf`` for a class of prior 0; defined up to a common constant, the minimum-norm one
        is given), then one per constraint.
    n_iter_ : int
        Iterations of the dual solver (0 when the targets were already met).
    em_n_iter_ : int or None
        EM's iterations with ``priors="em"``.
    em_prior_ : ndarray of shape (n_classes,) or None
        EM's estimate with ``priors="em"``, adopted or not (``prior_`` is what was adopted).
    prior_shift_detected_ : bool or None
        Whether the test detected a shift (None without a test: ``shift_test=False``, given
        priors, or a file saved before the test existed).
    shift_statistic_, shift_threshold_, shift_p_value_ : float or None
        The test's likelihood ratio on ``X``, its threshold (the ``1 - shift_significance``
        quantile of its bootstrapped law without a shift) and its bootstrap p-value.
    shift_weight_ : float or None
        How far ``prior_`` moved from the training priors towards ``em_prior_``, in
        ``[0, 1]``: 0 without a detected shift.
    shift_threshold_source_ : {"heldout", "calibration_set", "chi2"} or None
        What the threshold was bootstrapped from; ``"chi2"``: no held-out samples were given,
        and the threshold is that of Wilks's chi-square law.
    residual_ : float
        ``max_k |mean_i E_{p_λ}[φ_k] - μ_k|`` on ``X`` (0 for ``method="bayes"``, which has no
        constraint to meet).
    converged_ : bool
    temperature_ : float or None
        ``T`` of the calibration (None without one).
    calibration_bias_ : ndarray of shape (n_classes,) or None
        ``b`` of the calibration (zeros for ``"temperature"``; None without one).

    References
    ----------
    .. [1] Khalifa, Elsahar & Dymetman, "A Distributional Approach to Controlled Text
       Generation", ICLR 2021.
    .. [2] Saerens, Latinne & Decaestecker, "Adjusting the outputs of a classifier to new a
       priori probabilities: a simple procedure", Neural Computation 14(1), 2002.
    .. [3] Alexandari, Kundaje & Shrikumar, "Maximum likelihood with bias-corrected
       calibration is hard-to-beat at label shift adaptation", ICML 2020.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from ebmclassifier import DistributionalConstraint
    >>> clf = LogisticRegression().fit(X, y)
    >>> adapted = DistributionalConstraint(clf, priors={0: 0.6, 1: 0.2, 2: 0.2}).fit(X)
    >>> np.round(adapted.predict_proba(X).mean(axis=0), 6).tolist()
    [0.6, 0.2, 0.2]
    """

    #: What :meth:`save` writes besides ``priors`` and ``train_priors``, and
    #: :func:`~ebmclassifier.load` restores: plain parameters, fitted values, and the fitted
    #: arrays (private ones too).
    _saved_params = (
        *("method", "solver", "tol", "max_iter", "calibration", "em_pseudo_count"),
        *("shift_test", "shift_significance", "shift_resamples", "random_state"),
    )
    #: What a file written before a parameter existed meant by it: files written before
    #: ``em_pseudo_count`` were fitted by the maximum-likelihood EM, those written before
    #: ``shift_test`` adapted to EM's priors without a test.
    _saved_param_defaults = {"em_pseudo_count": 0.0, "shift_test": False}
    _saved_attributes = (
        *("prior_", "lambda_", "n_iter_", "em_n_iter_", "residual_", "converged_"),
        "temperature_",
        *("prior_shift_detected_", "shift_statistic_", "shift_threshold_", "shift_p_value_"),
        *("shift_weight_", "shift_threshold_source_"),
    )
    _saved_arrays = (
        *("prior_", "lambda_", "_class_offset_", "_user_lambda_", "calibration_bias_"),
        "em_prior_",
    )
    #: What a file written before an attribute existed gives for it: no calibration, no test.
    _saved_defaults = {
        "temperature_": None,
        "calibration_bias_": None,
        **dict.fromkeys(SHIFT_ATTRIBUTES, None),
    }

    def __init__(
        self,
        estimator,
        priors=None,
        constraints=None,
        method="projection",
        train_priors=None,
        solver="trust-exact",
        tol=1e-8,
        max_iter=1000,
        calibration=None,
        em_pseudo_count=PSEUDO_COUNT,
        shift_test=True,
        shift_significance=0.05,
        shift_resamples=200,
        random_state=None,
    ):
        self.estimator = estimator
        self.priors = priors
        self.constraints = constraints
        self.method = method
        self.train_priors = train_priors
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.calibration = calibration
        self.em_pseudo_count = em_pseudo_count
        self.shift_test = shift_test
        self.shift_significance = shift_significance
        self.shift_resamples = shift_resamples
        self.random_state = random_state

    # ---------------------------------------------------------------- validation

    def _check_params(self) -> None:
        check = ParamChecker(self)
        check.choice("method", _METHODS)
        check.choice("solver", _SOLVERS)
        check.real("tol", 0.0, low_open=True)
        check.integer("max_iter", 1)
        check.choice("calibration", _CALIBRATIONS)
        check.real("em_pseudo_count", 0.0)
        check.satisfies("shift_test", isinstance(self.shift_test, bool), "a bool")
        check.real("shift_significance", 0.0, 1.0, low_open=True)
        check.satisfies(
            "shift_significance", self.shift_significance != 1, "a float in the range (0, 1)"
        )
        check.integer("shift_resamples", 1)
        check.satisfies(
            "random_state",
            self.random_state is None
            or is_int(self.random_state)
            or isinstance(self.random_state, np.random.Generator | np.random.RandomState),
            "None, an int, a numpy Generator or a RandomState",
        )
        priors = self.priors
        check.satisfies(
            "priors",
            priors is None or _is_em(priors) or isinstance(priors, dict) or is_share_array(priors),
            'a dict {label: share}, an array of shares in the order of classes_, "em" or None',
        )
        constraints = self.constraints
        ok = constraints is None or (
            isinstance(constraints, list | tuple)
            and all(
                isinstance(c, tuple | list)
                and len(c) == 2
                and callable(c[0])
                and isinstance(c[1], Real)
                and np.isfinite(c[1])
                for c in constraints
            )
        )
        check.satisfies("constraints", ok, "a list of (callable phi, finite float target)")
        if priors is None and not constraints:
            check.add(
                "DistributionalConstraint needs priors or constraints: pass priors={label: "
                'share}, priors="em" or constraints=[(phi, target)].'
            )
        if self.method == "bayes" and (priors is None or constraints):
            check.add(
                "The 'method' parameter of DistributionalConstraint is 'bayes', which applies "
                "new class priors: pass priors and no constraints, or use method='projection'."
            )
        check.raise_if_any()

    def _train_priors(self) -> np.ndarray:
        needed_by = f"priors={self.priors!r}" if _is_em(self.priors) else "method='bayes'"
        return source_priors(
            self.train_priors,
            self.estimator,
            self.classes_.tolist(),
            self._source_shares,
            needed_by,
        )

    def _log_proba(self, X) -> np.ndarray:
        """``log p(y|x)`` of the base estimator, float64, ``-inf`` for probability 0."""
        if hasattr(self.estimator, "predict_log_proba"):
            log_proba = np.asarray(self.estimator.predict_log_proba(X), dtype=float)
        else:
            with np.errstate(divide="ignore"):
                log_proba = np.log(np.asarray(self.estimator.predict_proba(X), dtype=float))
        return log_proba - logsumexp(log_proba, axis=1, keepdims=True)

    def _calibrated(self, X) -> tuple[np.ndarray, np.ndarray | float]:
        """``(log q(y|x), log Z(x))`` of the calibrated base (:func:`calibrated_log_proba`);
        ``(log p(y|x), 0)`` without a calibration."""
        log_proba = self._log_proba(X)
        if self.temperature_ is None:
            return log_proba, 0.0
        return calibrated_log_proba(
            log_proba, self.temperature_, self.calibration_bias_, return_log_partition=True
        )

    def _features(self, X, n_samples: int) -> np.ndarray:
        """``φ_k(x_i, y)`` of the constraints, (n, K, m), each checked."""
        n_classes = len(self.classes_)
        columns = []
        for k, (phi, _) in enumerate(self.constraints or ()):
            values = np.asarray(phi(X), dtype=float)
            if values.shape != (n_samples, n_classes):
                raise ValueError(
                    f"constraints[{k}]'s phi must return an array of shape (n_samples, "
                    f"n_classes) = {(n_samples, n_classes)}. Got shape {values.shape}."
                )
            if not np.all(np.isfinite(values)):
                raise ValueError(
                    f"constraints[{k}]'s phi returned non-finite values (NaN or inf) on X."
                )
            columns.append(values)
        return np.stack(columns, axis=2) if columns else np.zeros((n_samples, n_classes, 0))

    # ---------------------------------------------------------------- fit

    def fit(self, X, y=None, *, calibration_set=None, heldout=None):
        """Find ``λ`` on the unlabelled deployment samples ``X``.

        Parameters
        ----------
        X : array-like
            Deployment samples, as the base estimator takes them; at least 2.
        y : None
            Ignored: the adaptation needs no labels.
        calibration_set : (X_val, y_val) or None, default=None
            Labelled held-out samples of the training distribution (every class present),
            needed by ``calibration``: the temperature (and biases) are fitted on them first,
            and their class shares become the training priors unless ``train_priors`` is given.
            With ``priors="em"`` and ``shift_test``, the test of the shift bootstraps its
            threshold from them too (unless ``heldout`` is given), refitting the calibration on
            each resample.
        heldout : array-like or None, default=None
            Samples of the training distribution that the base estimator was not trained on
            (a held-out split; no labels needed), for the test of the shift of
            ``priors="em"``: its threshold is bootstrapped from the model's (calibrated)
            posteriors on them. Without them and without ``calibration_set``, the threshold is
            that of Wilks's chi-square law, which ignores the model's bias, and ``fit`` warns.

        Returns
        -------
        self : DistributionalConstraint

        Raises
        ------
        ValueError
            For bad parameters, an unfitted estimator, fewer than 2 samples, a ``phi`` of the
            wrong shape or non-finite values, targets no posteriors can meet (naming the
            constraint), training priors that are missing or not positive, and a
            ``calibration_set`` that is missing, not a labelled pair, or lacks a class.

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> clf = LogisticRegression().fit(X, y)
        >>> adapted = DistributionalConstraint(
        ...     clf, priors="em", train_priors=[1 / 3] * 3, shift_test=False)
        >>> X_deploy = np.repeat(X[y != 2], 2, axis=0)  # 54 samples, none of class 2
        >>> adapted.fit(X_deploy).prior_.round(3).tolist()  # class 2 near its floor (1/3) / 55
        [0.516, 0.478, 0.006]
        >>> X_held = X[::2]  # held-out samples of the training distribution, for the test
        >>> tested = adapted.set_params(shift_test=True, random_state=0)
        >>> tested.fit(X_deploy, heldout=X_held).prior_shift_detected_
        True
        """
        self._check_params()
        try:
            check_is_fitted(self.estimator)
        except NotFittedError:
            raise NotFittedError(
                f"The 'estimator' of DistributionalConstraint must be fitted. Got an unfitted "
                f"{type(self.estimator).__name__}: fit it first (a clone unfits it; wrap a "
                "fitted one in sklearn.frozen.FrozenEstimator to keep it through clone)."
            ) from None
        n_samples = X.shape[0] if hasattr(X, "shape") else len(X)  # arrays, frames, tensors
        if n_samples < 2:
            raise ValueError(
                f"X must hold at least 2 samples for DistributionalConstraint.fit (the "
                f"constraints are on the average over X). Got {n_samples}."
            )
        self.classes_ = np.asarray(self.estimator.classes_)
        self._fit_calibration(calibration_set)
        log_proba = self._calibrated(X)[0]
        user_features = self._features(X, n_samples)
        user_targets = np.array([t for _, t in self.constraints or ()], dtype=float)
        self.em_n_iter_ = None
        for name in SHIFT_ATTRIBUTES:
            setattr(self, name, None)
        priors = shares = None
        if self.priors is not None:
            priors, shares = self._estimate_priors(log_proba, calibration_set, heldout)
        elif heldout is not None:
            raise ValueError(_HELDOUT_UNUSED.format(reason="priors=None"))
        if self.method == "bayes":
            self._fit_bayes(priors)
            self.prior_ = priors
        else:
            average = self._fit_projection(log_proba, shares, user_features, user_targets)
            self.prior_ = average if priors is None else priors
        return self

    def _fit_calibration(self, calibration_set) -> None:
        """``temperature_``, ``calibration_bias_`` (None without a calibration) and the
        calibration set's class shares, the default training priors after it."""
        self.temperature_, self.calibration_bias_, self._source_shares = fit_calibration(
            self.calibration,
            calibration_set,
            self._log_proba,
            self.classes_.tolist(),
            tol=self.tol,
            max_iter=self.max_iter,
        )

    def _estimate_priors(
        self, log_proba: np.ndarray, calibration_set, heldout
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(prior_, the class shares the projection meets on X)``: given priors are both;
        with ``"em"``, those of :func:`~._em_estimate.em_estimate`, which also gives the
        record of the test of the shift (``em_prior_``, ``prior_shift_detected_``, ...)."""
        if not _is_em(self.priors):
            if heldout is not None:
                raise ValueError(_HELDOUT_UNUSED.format(reason=f"priors={self.priors!r}"))
            priors = class_vector("priors", self.priors, self.classes_.tolist())
            return priors, priors
        priors, shares, self.em_n_iter_, record = em_estimate(
            np.exp(log_proba),
            self._train_priors(),
            pseudo_count=self.em_pseudo_count,
            tol=self.tol,
            max_iter=self.max_iter,
            labels=self.classes_.tolist(),
            test=self._test_arguments(calibration_set, heldout),
        )
        for name, value in record.items():
            setattr(self, name, value)
        return priors, shares

    def _test_arguments(self, calibration_set, heldout) -> dict | None:
        """The arguments of :func:`~.shift_test.prior_shift_test` for the test of the shift
        (and ``source``, what the held-out samples were), or None without a test."""
        if not self.shift_test:
            if heldout is not None:
                raise ValueError(_HELDOUT_UNUSED.format(reason="shift_test=False"))
            return None
        random_state = self.random_state
        if isinstance(random_state, np.random.RandomState):  # scikit-learn's: draw a seed
            random_state = draw_seed(random_state)
        test = {
            "alpha": self.shift_significance,
            "n_resamples": self.shift_resamples,
            "random_state": random_state,
        }
        if heldout is not None:
            reference = np.exp(self._calibrated(heldout)[0])
            return {**test, "reference": reference, "source": "heldout"}
        if calibration_set is not None:
            X_val, codes, _ = calibration_labels(calibration_set, self.classes_.tolist())
            return {
                **test,
                "reference": np.exp(self._log_proba(X_val)),
                "reference_labels": codes,
                "calibration": self.calibration,
                "source": "calibration_set",
            }
        return {**test, "reference": None, "source": "chi2"}

    def _fit_bayes(self, priors: np.ndarray) -> None:
        offset = bayes_offset(self._train_priors(), priors)
        self.lambda_ = offset
        self._class_offset_, self._user_lambda_ = offset, np.zeros(0)
        self.n_iter_, self.residual_, self.converged_ = 0, 0.0, True

    def _fit_projection(self, log_proba, shares, user_features, user_targets) -> np.ndarray:
        """Solve for ``λ``: the class ``shares`` (None without priors), then the user's
        constraints; returns the adapted average prediction on ``X``."""
        n_samples, n_classes = log_proba.shape
        offset = np.zeros(n_classes)
        names = [f"constraints[{k}]" for k in range(len(user_targets))]
        features, targets = user_features, user_targets
        if shares is not None:
            offset[shares == 0] = -np.inf  # classes of prior 0 get probability 0
            kept = np.flatnonzero(shares > 0)
            onehot = np.broadcast_to(np.eye(n_classes)[:, kept], (n_samples, n_classes, len(kept)))
            features = np.concatenate([onehot, user_features], axis=2)
            targets = np.concatenate([shares[kept], user_targets])
            labels = self.classes_.tolist()
            names = [f"priors[{labels[c]!r}]" for c in kept] + names
        masked = log_proba + offset
        empty = ~np.any(np.isfinite(masked), axis=1)
        if np.any(empty):
            raise ValueError(
                f"The estimator gives sample {int(np.argmax(empty))} of X probability only "
                "to classes of prior 0 in 'priors': no posterior can meet them."
            )
        # Priors alone on full support are always reachable (q_i = shares for every i), and
        # EM's shares are the mean of posteriors of the model's support: the joint program is
        # needed only for zeros in the posteriors or for constraints of the user's. It also
        # could not tell the maximum-likelihood EM's share of 1e-19 (its usual limit for a
        # class absent from X) from 0.
        joint = bool(len(user_targets)) or (
            not _is_em(self.priors) and not np.all(np.isfinite(masked[:, shares > 0]))
        )
        check_reachable(masked, features, targets, names, joint=joint)
        lam, self.n_iter_, self.residual_ = solve_dual(
            masked, features, targets, tol=self.tol, max_iter=self.max_iter, solver=self.solver
        )
        self.converged_ = bool(self.residual_ <= self.tol)
        if not self.converged_:
            warnings.warn(
                f"DistributionalConstraint: the {self.solver} solve stopped after "
                f"{self.n_iter_} iterations with a constraint residual of {self.residual_:.3g} "
                f"> tol={self.tol}; raise max_iter or tol.",
                ConvergenceWarning,
                stacklevel=3,
            )
        n_kept = features.shape[2] - len(user_targets)
        if shares is not None:
            offset[shares > 0] = lam[:n_kept]
        self._class_offset_ = offset
        self._user_lambda_ = lam[n_kept:]
        self.lambda_ = np.concatenate([offset, self._user_lambda_]) if shares is not None else lam
        return np.exp(tilted_log_proba(masked, features, lam)).mean(axis=0)

    # ---------------------------------------------------------------- predict

    def _tilted(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(log p_λ(y|x), log Z_λ(x))`` (:func:`~.posteriors.tilted_log_proba`) on ``X``."""
        check_is_fitted(self, "lambda_")
        log_proba, log_z_calibration = self._calibrated(X)
        features = self._features(X, len(log_proba))  # (n, K, 0) without constraints
        tilted, log_z = tilted_log_proba(
            log_proba + self._class_offset_, features, self._user_lambda_, return_log_partition=True
        )
        return tilted, log_z + log_z_calibration

    def predict_log_proba(self, X) -> np.ndarray:
        """``log p_λ(y|x)``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            ``-inf`` for a class of prior 0.

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> clf = LogisticRegression().fit(X, y)
        >>> adapted = DistributionalConstraint(clf, priors={0: 0.5, 1: 0.5, 2: 0.0}).fit(X)
        >>> bool(np.all(adapted.predict_log_proba(X)[:, 2] == -np.inf))
        True
        """
        return self._tilted(X)[0]

    def predict_proba(self, X) -> np.ndarray:
        """``p_λ(y|x)``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples, n_classes)

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> clf = LogisticRegression().fit(X, y)
        >>> adapted = DistributionalConstraint(clf, priors={0: 0.5, 1: 0.3, 2: 0.2}).fit(X)
        >>> adapted.predict_proba(X).mean(axis=0).round(6).tolist()
        [0.5, 0.3, 0.2]
        """
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """The most probable class under ``p_λ``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,)

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> clf = LogisticRegression().fit(X, y)
        >>> adapted = DistributionalConstraint(clf, priors={0: 0.98, 1: 0.01, 2: 0.01}).fit(X)
        >>> int(np.sum(adapted.predict(X) == 0)) > int(np.sum(clf.predict(X) == 0))
        True
        """
        log_proba = self._tilted(X)[0]  # checks that self is fitted, before classes_
        return self.classes_[np.argmax(log_proba, axis=1)]

    @available_if(_base_has("energy"))
    def energy(self, X) -> np.ndarray:
        """The adapted energy ``E_λ(x) = -logsumexp_y (f(x)[y] + λ·φ(x, y))``.

        With ``f(x)[y] = log p(y|x) - E(x)`` (the base estimator's logits up to their
        per-sample constant), ``E_λ(x) = E(x) - logsumexp_y (log p(y|x) + λ·φ(x, y))``.
        Available when the base estimator has ``energy``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,)
            Lower = more typical.

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> adapted = DistributionalConstraint(clf.fit(X, y), priors={0: 0.6, 1: 0.2, 2: 0.2})
        >>> adapted.fit(X).energy(X).shape
        (40,)
        """
        log_z = self._tilted(X)[1]  # checks that self is fitted, before the base is called
        energy = np.asarray(self.estimator.energy(X), dtype=float)
        return (energy if self.temperature_ is None else energy / self.temperature_) - log_z

    @available_if(_base_has("energy"))
    def score_ood(self, X, method=None) -> np.ndarray:
        """OOD scores of the adapted model: higher = more likely out-of-distribution.

        Parameters
        ----------
        X : array-like
        method : {"energy", "max_softmax"} or None, default=None
            ``"energy"`` (``None``): :meth:`energy`; ``"max_softmax"``: ``-max_y p_λ(y|x)``.
            ``"approx_mass"`` needs the input gradient of ``λ·φ``, which a ``phi`` on arrays
            does not give: use the base estimator's.

        Returns
        -------
        ndarray of shape (n_samples,)

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> adapted = DistributionalConstraint(clf.fit(X, y), priors={0: 0.6, 1: 0.2, 2: 0.2})
        >>> bool(np.all(adapted.fit(X).score_ood(X) == adapted.energy(X)))
        True
        """
        check_is_fitted(self, "lambda_")
        if method in (None, "energy"):
            return self.energy(X)
        if method == "max_softmax":
            return -self.predict_proba(X).max(axis=1)
        raise ValueError(
            "The 'method' argument of DistributionalConstraint.score_ood must be one of "
            f"'energy', 'max_softmax' or None. Got {method!r} instead."
        )

    def save(self, path) -> None:
        """Write the fitted meta-estimator to one file, without pickle.

        A zip of JSON and the base estimator's own :func:`~ebmclassifier.saving.save` file;
        :func:`ebmclassifier.load` reads it back. Only ``priors`` adaptations over the
        library's estimators (bare or in a ``FrozenEstimator``) are saved: ``constraints``
        are callables, and a scikit-learn base has no safe format; for those a ``ValueError``
        says to pickle.

        Parameters
        ----------
        path : str, path-like or file object

        Returns
        -------
        None

        Examples
        --------
        >>> import io
        >>> from ebmclassifier import NGEBMClassifier, load
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> adapted = DistributionalConstraint(clf.fit(X, y), priors={0: 0.5, 1: 0.3, 2: 0.2})
        >>> buffer = io.BytesIO()
        >>> adapted.fit(X).save(buffer)
        >>> restored = load(buffer, device="cpu")
        >>> np.allclose(restored.predict_proba(X), adapted.predict_proba(X))
        True
        """
        save_constraint(self, path)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags
