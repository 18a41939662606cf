"""EM under a Dirichlet prior on the deployment priors (issue #39).

The maximum-likelihood EM of Saerens et al. drives the prior of a rare class that *is* present
to 0 when its posteriors overlap a neighbour's, and every sample of it then gets probability
~0. The arrays here are the exact posteriors of three unit-variance Gaussian classes in one
dimension (means -3, 0 and 0.5: classes 1 and 2 overlap) under balanced training priors, on a
deployment sample where class 2 holds 9 of 300 samples: the maximum-likelihood prior of class 2
is ~1e-12, the Bayes-corrected NLL is worse than no correction. References: a direct
maximisation of the log posterior by scipy (the MAP), quapy's EMQ and a plain loop of the
maximum-likelihood EM (``em_pseudo_count=0``, the old behaviour).
"""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator

from ebmclassifier import DistributionalConstraint, load
from ebmclassifier.distributional import bayes_correction, em_priors

from ..user_line import assert_at_users_line

FIXTURES = Path(__file__).parents[1] / "fixtures" / "saved"
#: The documented default of ``em_pseudo_count``: one pseudo-sample.
DEFAULT_PSEUDO_COUNT = 1.0
TRAIN = np.full(3, 1 / 3)
MEANS = np.array([-3.0, 0.0, 0.5])


def _gaussian_posteriors(shares, n, seed):
    """``(p(y|x_i), y_i)``: the exact posteriors of the module's three classes, balanced
    training priors, for ``n`` samples drawn with class ``shares``."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), rng.multinomial(n, shares))
    x = rng.normal(MEANS[y], 1.0)
    return softmax(-0.5 * (x[:, None] - MEANS) ** 2, axis=1), y


@pytest.fixture(scope="module")
def rare():
    """Class 2 present (9 of 300) and overlapping class 1: the boundary case."""
    proba, y = _gaussian_posteriors((0.5, 0.47, 0.03), 300, seed=17)
    assert np.bincount(y).tolist() == [159, 132, 9]
    return proba, y


def _nll(proba, y):
    return float(-np.mean(np.log(proba[np.arange(len(y)), y])))


def _saerens_ml(proba, train, tol, max_iter):
    """The maximum-likelihood EM as the library ran it before issue #39, written out."""
    priors = train.copy()
    for _ in range(max_iter):
        weighted = proba * (priors / train)
        new = (weighted / weighted.sum(axis=1, keepdims=True)).mean(axis=0)
        step, priors = np.max(np.abs(new - priors)), new
        if step <= tol:
            break
    return priors


class _Table(ClassifierMixin, BaseEstimator):
    """``p(y|x)`` read from a table by the row index in ``X[:, 0]``."""

    def __init__(self, table):
        self.table = table

    def fit(self, X=None, y=None):
        self.classes_ = np.arange(np.asarray(self.table).shape[1])
        return self

    def predict_proba(self, X):
        return np.asarray(self.table)[np.asarray(X)[:, 0].astype(int)]


def _rows(start, stop):
    return np.arange(start, stop, dtype=float)[:, None]


# ---------------------------------------------------------------- the functional core


@pytest.mark.parametrize("pseudo_count", [0.3, 1.0, 10.0])
def test_map_em_maximises_the_log_posterior(pseudo_count):
    """EM's fixed point against scipy maximising ``Σ_i log Σ_y p(y|x_i) π'(y)/π(y) +
    s Σ_y π(y) log π'(y)`` over the simplex (softmax parameters), written independently."""
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4) * 0.5, size=80)
    train = np.array([0.4, 0.3, 0.2, 0.1])

    def negative_log_posterior(theta):
        log_priors = theta - logsumexp(theta)
        likelihood = logsumexp(np.log(proba) + log_priors - np.log(train), axis=1).sum()
        return -(likelihood + pseudo_count * train @ log_priors)

    result = optimize.minimize(negative_log_posterior, np.zeros(4), method="BFGS", tol=1e-12)
    expected = softmax(result.x)
    ours, _ = em_priors(proba, train, pseudo_count=pseudo_count, tol=1e-13, max_iter=100_000)
    np.testing.assert_allclose(ours, expected, atol=1e-6)
    assert np.all(ours >= pseudo_count * train / (len(proba) + pseudo_count))


def test_the_default_keeps_a_rare_present_class_above_its_floor(rare):
    proba, y = rare
    n = len(proba)
    priors, _ = em_priors(proba, TRAIN)
    floor = DEFAULT_PSEUDO_COUNT * TRAIN[2] / (n + DEFAULT_PSEUDO_COUNT)
    assert priors[2] >= floor
    ml, _ = em_priors(proba, TRAIN, pseudo_count=0.0)
    assert ml[2] < 0.01 * TRAIN[2] / n  # the maximum-likelihood estimate: on the boundary
    # and the prior error is no worse than the maximum-likelihood one
    true = np.bincount(y) / n
    assert np.abs(priors - true).sum() <= np.abs(ml - true).sum()


def test_the_default_correction_is_no_worse_than_none_in_nll(rare):
    proba, y = rare
    corrected = bayes_correction(proba, TRAIN, em_priors(proba, TRAIN)[0])
    assert _nll(corrected, y) <= _nll(proba, y)
    ml = bayes_correction(proba, TRAIN, em_priors(proba, TRAIN, pseudo_count=0.0)[0])
    assert _nll(ml, y) > _nll(proba, y)  # what the default avoids


def test_pseudo_count_zero_is_the_old_maximum_likelihood_em(rare):
    proba, _ = rare
    ours, _ = em_priors(proba, TRAIN, pseudo_count=0.0, tol=1e-8, max_iter=1000)
    np.testing.assert_array_equal(ours, _saerens_ml(proba, TRAIN, 1e-8, 1000))


def test_em_stops_on_the_step_that_moves_by_tol_or_less():
    # one-hot posteriors, 3 of class 0 and 1 of class 1: the first step moves the priors from
    # (0.5, 0.5) to exactly (0.75, 0.25), a step of exactly 0.25, and the next by 0
    proba = np.eye(2)[[0, 0, 0, 1]]
    priors, n_iter = em_priors(proba, np.array([0.5, 0.5]), pseudo_count=0.0, tol=0.25)
    assert n_iter == 1
    np.testing.assert_array_equal(priors, [0.75, 0.25])
    _, n_iter = em_priors(proba, np.array([0.5, 0.5]), pseudo_count=0.0, tol=0.2)
    assert n_iter == 2


def test_pseudo_count_zero_equals_quapy_emq(rare):
    quapy_aggregative = pytest.importorskip(
        "quapy.method.aggregative", reason="quapy does not import: no EMQ to compare with"
    )
    proba, _ = _gaussian_posteriors((0.5, 0.3, 0.2), 300, seed=0)  # an interior optimum
    ours, _ = em_priors(proba, TRAIN, pseudo_count=0.0, tol=1e-13, max_iter=100_000)
    theirs, _ = quapy_aggregative.EMQ.EM(TRAIN, proba, epsilon=1e-13)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pseudo_count": -1.0}, r"pseudo_count must be a finite float in the range \[0.0, inf\)"),
        ({"pseudo_count": np.inf}, r"pseudo_count must be .* Got inf"),
        ({"pseudo_count": "1"}, r"pseudo_count must be .* Got '1'"),
        ({"tol": 0.0, "max_iter": 0}, r"tol must be(.|\n)*max_iter must be"),
    ],
)
def test_em_priors_refuses_bad_arguments(rare, kwargs, match):
    with pytest.raises(ValueError, match=match):
        em_priors(rare[0], TRAIN, **kwargs)


# ---------------------------------------------------------------- the estimator


@pytest.fixture(scope="module")
def table(rare):
    """The rare case's posteriors (rows 0-299), then 300 held-out samples of the training
    distribution (rows 300-599, balanced), for the calibrations."""
    proba, _ = rare
    held, y_held = _gaussian_posteriors(TRAIN, 300, seed=1)
    return _Table(np.r_[proba, held]).fit(), (_rows(300, 600), y_held)


@pytest.mark.parametrize("method", ["projection", "bayes"])
@pytest.mark.parametrize("calibration", [None, "temperature", "bcts"])
def test_every_variant_keeps_the_rare_class_and_its_nll(rare, table, method, calibration):
    proba, y = rare
    clf, calibration_set = table
    n = len(proba)
    # the training priors: given, or after a calibration the calibration set's class shares
    if calibration is None:
        kwargs, fit_kwargs, train = {"train_priors": TRAIN}, {}, TRAIN
    else:
        kwargs, fit_kwargs = {}, {"calibration_set": calibration_set}
        train = np.bincount(calibration_set[1]) / len(calibration_set[1])
    adapted = DistributionalConstraint(
        clf, priors="em", method=method, calibration=calibration, shift_resamples=50, **kwargs
    ).fit(_rows(0, n), **fit_kwargs)
    floor = DEFAULT_PSEUDO_COUNT * train[2] / (n + DEFAULT_PSEUDO_COUNT)
    assert adapted.prior_[2] >= floor
    assert _nll(adapted.predict_proba(_rows(0, n)), y) <= _nll(proba, y)  # no correction


def test_em_pseudo_count_zero_is_the_maximum_likelihood_estimate(rare, table):
    proba, _ = rare
    clf, _ = table
    adapted = DistributionalConstraint(
        clf, priors="em", train_priors=TRAIN, em_pseudo_count=0, method="bayes", shift_test=False
    )
    with pytest.warns(UserWarning, match="boundary"):
        adapted.fit(_rows(0, len(proba)))
    # the face reads log p(y|x) back through exp: equal to rounding
    np.testing.assert_allclose(adapted.prior_, _saerens_ml(proba, TRAIN, 1e-8, 1000), rtol=1e-9)
    default = DistributionalConstraint(
        clf, priors="em", train_priors=TRAIN, method="bayes", shift_test=False
    )
    assert default.fit(_rows(0, len(proba))).prior_[2] > 100 * adapted.prior_[2]


def test_the_default_is_documented_and_cloned(table):
    clf, _ = table
    adapted = DistributionalConstraint(clf, priors="em")
    assert adapted.get_params()["em_pseudo_count"] == DEFAULT_PSEUDO_COUNT
    tuned = clone(adapted.set_params(em_pseudo_count=2.5))
    assert tuned.get_params()["em_pseudo_count"] == 2.5


@pytest.mark.parametrize("value", [-1.0, np.nan, np.inf, "1", True, None, [1.0]])
def test_a_bad_em_pseudo_count_is_refused_at_fit(table, value):
    clf, _ = table
    expected = re.escape(
        "The 'em_pseudo_count' parameter of DistributionalConstraint must be a finite float in "
        "the range [0.0, inf)."
    )
    with pytest.raises(ValueError, match=expected):
        DistributionalConstraint(clf, priors="em", train_priors=TRAIN, em_pseudo_count=value).fit(
            _rows(0, 50)
        )


# ---------------------------------------------------------------- the warnings


def test_too_few_samples_warn_with_the_numbers(table):
    clf, _ = table
    adapted = DistributionalConstraint(clf, priors="em", train_priors=TRAIN, shift_test=False)
    with pytest.warns(UserWarning) as record:
        adapted.fit(_rows(0, 29))
    messages = [str(w.message) for w in record if "fewer than" in str(w.message)]
    assert len(messages) == 1
    assert_at_users_line(record, __file__)
    # a balanced share 1/3 has a sampling error of sqrt(1/3 * 2/3 / 29) = 0.0875, 26% of it
    assert "3 class priors from 29 samples of X, fewer than 10 per class (30)" in messages[0]
    assert "is 0.0875 (26% of it)" in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adapted.fit(_rows(0, 30))  # 10 per class: no warning


def test_em_not_converged_warns_with_iterations_and_last_change(rare, table):
    proba, _ = rare
    clf, _ = table
    adapted = DistributionalConstraint(clf, priors="em", train_priors=TRAIN, max_iter=3)
    with pytest.warns(ConvergenceWarning, match="EM stopped") as record:
        adapted.fit(_rows(0, len(proba)))
    message = next(str(w.message) for w in record if "EM stopped" in str(w.message))
    assert "after max_iter=3 steps with a last change of " in message
    _, _, step = em_priors(proba, TRAIN, tol=1e-8, max_iter=3, return_step=True)
    assert f"with a last change of {step:.3g} in a prior" in message
    assert "above tol=1e-08" in message and adapted.em_n_iter_ == 3


def test_a_prior_on_the_boundary_warns_naming_the_class_and_its_value(rare, table):
    proba, _ = rare
    clf, _ = table
    ml, _ = em_priors(proba, TRAIN, pseudo_count=0.0)
    adapted = DistributionalConstraint(
        clf, priors="em", train_priors=TRAIN, em_pseudo_count=0.0, shift_test=False
    )
    with pytest.warns(UserWarning, match="boundary") as record:
        adapted.fit(_rows(0, len(proba)))
    message = next(str(w.message) for w in record if "boundary" in str(w.message))
    assert "1 class(es)" in message and f"2: {ml[2]:.3g} (training prior 0.333)" in message
    assert "(n = 300)" in message and "it is 0.0 here" in message
    with warnings.catch_warnings():  # the default keeps it off the boundary: no warning
        warnings.simplefilter("error")
        DistributionalConstraint(clf, priors="em", train_priors=TRAIN, shift_test=False).fit(
            _rows(0, 300)
        )


# ---------------------------------------------------------------- saving


def test_em_pseudo_count_is_saved_and_an_old_file_means_maximum_likelihood(tmp_path):
    from sklearn.datasets import make_blobs

    from ebmclassifier import NGEBMClassifier

    X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    X = X.astype(np.float32)
    clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0).fit(X, y)
    clf = FrozenEstimator(clf)  # so that a clone refits the adaptation only
    for value in (DEFAULT_PSEUDO_COUNT, 2.5, np.float32(0.5)):
        adapted = DistributionalConstraint(
            clf, priors="em", em_pseudo_count=value, shift_test=False
        ).fit(X)
        buffer = io.BytesIO()
        adapted.save(buffer)
        restored = load(buffer, device="cpu")
        assert restored.em_pseudo_count == value
        np.testing.assert_array_equal(restored.prior_, adapted.prior_)
        np.testing.assert_allclose(clone(restored).fit(X).prior_, adapted.prior_, rtol=1e-6)
    # a file written before em_pseudo_count existed was fitted by the maximum-likelihood EM
    old = load(FIXTURES / "distributional.ebm", device="cpu")
    assert old.em_pseudo_count == 0.0
