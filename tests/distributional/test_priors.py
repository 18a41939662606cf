"""Where DistributionalConstraint finds the training priors, and two bugs of issue #32.

``priors="em"`` needs no ``train_priors`` for the library's estimators (their ``class_prior_``)
nor for scikit-learn's classifiers that record their priors (``class_prior_``, ``priors_``,
``class_log_prior_``, through a Pipeline, a FrozenEstimator or a CalibratedClassifierCV): each is
checked against ``em_priors`` called by hand with the priors read off the estimator (EM's
adaptation without the test of the shift, ``shift_test=False``: the test is
``test_shift_test.py``'s). The bugs:
an array ``priors`` failed with "truth value of an array is ambiguous", and the public methods
before ``fit`` raised ``AttributeError: classes_`` instead of ``NotFittedError``.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_blobs
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB, MultinomialNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from ebmclassifier import (
    DistributionalConstraint,
    JEMClassifier,
    LatentStructureClassifier,
    NGEBMClassifier,
    load,
)
from ebmclassifier.distributional import em_priors

SMALL = {"max_epochs": 5, "lr": 0.02, "random_state": 0}
SHARES = np.array([92, 61, 31]) / 184


@pytest.fixture(scope="module")
def data():
    """Training labels about 3:2:1; deployment samples where class 2 dominates."""
    X, y = make_blobs(400, n_features=4, centers=3, cluster_std=2.0, random_state=1)
    train = np.r_[
        np.flatnonzero(y == 0)[:92], np.flatnonzero(y == 1)[:61], np.flatnonzero(y == 2)[:31]
    ]
    deploy = np.r_[np.flatnonzero(y == 0)[-10:], np.flatnonzero(y == 2)[-60:]]
    return X[train].astype(np.float32), y[train], X[deploy].astype(np.float32)


def _em_by_hand(estimator, X_deploy, train_priors):
    return em_priors(estimator.predict_proba(X_deploy), np.asarray(train_priors), tol=1e-8)[0]


@pytest.mark.parametrize(
    "build",
    [
        lambda: NGEBMClassifier(module__hidden_sizes=(8,), **SMALL),
        lambda: JEMClassifier(module__hidden_sizes=(8,), sgld_steps=2, buffer_size=20, **SMALL),
        lambda: LatentStructureClassifier(n_latent=3, **SMALL),
    ],
    ids=["ngebm", "jem", "latent"],
)
def test_em_takes_our_estimators_class_prior_without_train_priors(data, build):
    X, y, X_deploy = data
    clf = build().fit(X, y)
    np.testing.assert_allclose(clf.class_prior_, SHARES)
    adapted = DistributionalConstraint(clf, priors="em", shift_test=False).fit(X_deploy)
    np.testing.assert_allclose(adapted.prior_, _em_by_hand(clf, X_deploy, SHARES), atol=1e-6)
    explicit = DistributionalConstraint(clf, priors="em", train_priors=SHARES, shift_test=False)
    np.testing.assert_allclose(explicit.fit(X_deploy).predict_proba(X), adapted.predict_proba(X))
    bayes = DistributionalConstraint(clf, priors={0: 0.2, 1: 0.2, 2: 0.6}, method="bayes")
    assert bayes.fit(X_deploy).converged_  # method="bayes" reads it too


def _fitted_sklearn(X, y):
    positive = MinMaxScaler().fit(X)
    return {
        "GaussianNB (class_prior_)": (GaussianNB().fit(X, y), SHARES),
        "LDA (priors_)": (LinearDiscriminantAnalysis().fit(X, y), SHARES),
        "LDA given priors": (
            LinearDiscriminantAnalysis(priors=[0.2, 0.3, 0.5]).fit(X, y),
            [0.2, 0.3, 0.5],
        ),
        "MultinomialNB (class_log_prior_)": (
            make_pipeline(positive, MultinomialNB()).fit(X, y),
            SHARES,
        ),
        "Pipeline(StandardScaler, LDA)": (
            make_pipeline(StandardScaler(), LinearDiscriminantAnalysis()).fit(X, y),
            SHARES,
        ),
        "FrozenEstimator(GaussianNB)": (
            FrozenEstimator(GaussianNB().fit(X, y)),
            SHARES,
        ),
    }


@pytest.mark.parametrize(
    "name",
    [
        "GaussianNB (class_prior_)",
        "LDA (priors_)",
        "LDA given priors",
        "MultinomialNB (class_log_prior_)",
        "Pipeline(StandardScaler, LDA)",
        "FrozenEstimator(GaussianNB)",
    ],
)
def test_em_reads_what_scikit_learn_classifiers_record(data, name):
    X, y, X_deploy = data
    estimator, priors = _fitted_sklearn(X, y)[name]
    adapted = DistributionalConstraint(estimator, priors="em", shift_test=False).fit(X_deploy)
    np.testing.assert_allclose(adapted.prior_, _em_by_hand(estimator, X_deploy, priors), atol=1e-9)


def test_em_reads_calibrated_classifier_cv_through_its_fitted_classifiers(data):
    X, y, X_deploy = data
    calibrated = CalibratedClassifierCV(GaussianNB(), cv=3).fit(X, y)
    priors = np.mean([c.estimator.class_prior_ for c in calibrated.calibrated_classifiers_], 0)
    assert not np.allclose(priors, SHARES, atol=1e-6)  # each saw its training folds
    adapted = DistributionalConstraint(calibrated, priors="em", shift_test=False).fit(X_deploy)
    np.testing.assert_allclose(adapted.prior_, _em_by_hand(calibrated, X_deploy, priors), atol=1e-9)


def test_an_estimator_that_records_no_priors_is_named(data):
    X, y, X_deploy = data
    with pytest.raises(ValueError, match="LogisticRegression records none.*pass train_priors"):
        DistributionalConstraint(LogisticRegression().fit(X, y), priors="em").fit(X_deploy)


def test_a_class_never_trained_on_is_named(data):
    X, y, X_deploy = data
    clf = NGEBMClassifier(module__hidden_sizes=(8,), **SMALL)
    clf.partial_fit(X[y != 2], y[y != 2], classes=[0, 1, 2])
    with pytest.raises(ValueError, match=r"0 for \[2\]: it was never trained on them"):
        DistributionalConstraint(clf, priors="em").fit(X_deploy)


def test_priors_as_an_array_in_the_order_of_classes(data):
    X, y, X_deploy = data
    clf = GaussianNB().fit(X, y)
    as_dict = DistributionalConstraint(clf, priors={0: 0.2, 1: 0.3, 2: 0.5}).fit(X_deploy)
    for priors in (np.array([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5]):
        adapted = DistributionalConstraint(clf, priors=priors).fit(X_deploy)
        np.testing.assert_array_equal(adapted.predict_proba(X), as_dict.predict_proba(X))
        bayes = DistributionalConstraint(clf, priors=priors, method="bayes").fit(X_deploy)
        np.testing.assert_allclose(bayes.prior_, [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match=r"one share per class, in the order of .*\[0, 1, 2\]"):
        DistributionalConstraint(clf, priors=np.array([0.5, 0.5])).fit(X_deploy)
    with pytest.raises(ValueError, match="'priors' parameter"):
        DistributionalConstraint(clf, priors=np.eye(3) / 3).fit(X_deploy)


def test_an_array_priors_is_saved_and_loaded(data):
    X, y, X_deploy = data
    clf = NGEBMClassifier(module__hidden_sizes=(8,), **SMALL).fit(X, y)
    adapted = DistributionalConstraint(clf, priors=np.array([0.2, 0.3, 0.5])).fit(X_deploy)
    buffer = io.BytesIO()
    adapted.save(buffer)
    restored = load(buffer, device="cpu")
    np.testing.assert_array_equal(restored.priors, [0.2, 0.3, 0.5])
    np.testing.assert_allclose(restored.predict_proba(X), adapted.predict_proba(X), atol=1e-6)


@pytest.mark.parametrize(
    "call",
    [
        lambda a, X: a.predict(X),
        lambda a, X: a.predict_proba(X),
        lambda a, X: a.predict_log_proba(X),
        lambda a, X: a.score(X, np.zeros(len(X), dtype=int)),
        lambda a, X: a.energy(X),
        lambda a, X: a.score_ood(X),
        lambda a, X: a.score_ood(X, method="max_softmax"),
        lambda a, X: a.save(io.BytesIO()),
    ],
    ids=[
        "predict",
        "predict_proba",
        "predict_log_proba",
        "score",
        "energy",
        "score_ood",
        "score_ood_max_softmax",
        "save",
    ],  # fmt: skip
)
def test_every_public_method_before_fit_raises_not_fitted(data, call):
    X, y, _ = data
    clf = NGEBMClassifier(module__hidden_sizes=(8,), **SMALL).fit(X, y)
    with pytest.raises(NotFittedError, match="DistributionalConstraint instance is not fitted"):
        call(DistributionalConstraint(clf, priors="em"), X)
