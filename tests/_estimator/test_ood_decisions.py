"""calibrate_ood / predict_ood on every estimator (issue #17)."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.datasets import make_blobs
from sklearn.exceptions import NotFittedError

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier
from ebmclassifier._estimator.inference import OODDecisionMixin

X, Y = make_blobs(300, n_features=4, centers=3, random_state=0)
X = X.astype(np.float32)
TRAIN, CAL, TEST = slice(0, 150), slice(150, 250), slice(250, 300)
SMALL = dict(max_epochs=3, random_state=0)


@pytest.fixture(scope="module")
def fitted():
    models = [
        NGEBMClassifier(**SMALL),
        JEMClassifier(buffer_size=64, sgld_steps=3, **SMALL),
        LatentStructureClassifier(n_latent=3, **SMALL),
    ]
    return [m.fit(X[TRAIN], Y[TRAIN]) for m in models]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["ngebm", "jem", "latent"])
@pytest.mark.parametrize("method", ["energy", "max_softmax", "approx_mass"])
@pytest.mark.parametrize("tpr", [0.5, 0.9, 0.95, 0.99])
def test_calibration_flags_the_expected_fraction_of_its_own_data(fitted, index, method, tpr):
    clf = fitted[index]
    assert clf.calibrate_ood(X[CAL], tpr=tpr, method=method) is clf
    assert clf.ood_method_ == method
    flagged = clf.predict_ood(X[CAL])
    n = len(flagged)
    # at most one sample off the requested fraction (ties at the threshold keep more)
    assert abs(flagged.sum() - round((1 - tpr) * n)) <= 1
    scores = clf.score_ood(X[TEST], method=method)
    np.testing.assert_array_equal(clf.predict_ood(X[TEST]), scores > clf.ood_threshold_)


def test_default_method_is_the_ood_method_parameter(fitted):
    clf = fitted[0]
    clf.calibrate_ood(X[CAL])
    assert clf.ood_method_ == clf.ood_method == "approx_mass"
    expected = np.sort(clf.score_ood(X[CAL]))[int(np.ceil(0.95 * 100)) - 1]
    assert clf.ood_threshold_ == pytest.approx(expected)


class _Constant(OODDecisionMixin, BaseEstimator):
    ood_method = "energy"

    def fit(self, X, y=None):
        return self

    def __sklearn_is_fitted__(self):
        return True

    def score_ood(self, X, method=None):
        return np.zeros(len(X))


def test_ties_keep_everything():
    model = _Constant().calibrate_ood(np.zeros((10, 2)))
    assert not model.predict_ood(np.zeros((4, 2))).any()


@pytest.mark.parametrize("tpr", [0, 1, -0.1, 1.5, np.nan, True, "0.9", None])
def test_bad_tpr(fitted, tpr):
    with pytest.raises(ValueError, match="tpr must be a float in the open interval"):
        fitted[0].calibrate_ood(X[CAL], tpr=tpr)


def test_unknown_method(fitted):
    with pytest.raises(ValueError, match="Unknown score_ood method 'mahalanobis'"):
        fitted[0].calibrate_ood(X[CAL], method="mahalanobis")


def test_before_fit_and_before_calibration():
    with pytest.raises(NotFittedError):
        NGEBMClassifier().calibrate_ood(X[CAL])
    clf = NGEBMClassifier(**SMALL).fit(X[TRAIN], Y[TRAIN])
    with pytest.raises(NotFittedError, match="call calibrate_ood"):
        clf.predict_ood(X[TEST])


def test_product_of_experts_has_ood_decisions_too():
    from sklearn.frozen import FrozenEstimator

    from ebmclassifier import ProductOfExperts

    experts = [
        NGEBMClassifier(max_epochs=2, random_state=s).fit(X[TRAIN], Y[TRAIN]) for s in (0, 1)
    ]
    poe = ProductOfExperts([(f"e{k}", FrozenEstimator(e)) for k, e in enumerate(experts)])
    poe.fit(X[TRAIN], Y[TRAIN])
    poe.calibrate_ood(X[CAL], tpr=0.9, method="energy")
    flagged = poe.predict_ood(X[CAL])
    assert abs(flagged.sum() - 10) <= 1
    np.testing.assert_array_equal(
        poe.predict_ood(X[TEST]), poe.score_ood(X[TEST], method="energy") > poe.ood_threshold_
    )
    poe.set_params(e1=NGEBMClassifier(max_epochs=2, random_state=2)).fit(X[CAL], Y[CAL])
    assert not hasattr(poe, "ood_threshold_") and not hasattr(poe, "ood_method_")
    with pytest.raises(NotFittedError, match="call calibrate_ood"):
        poe.predict_ood(X[TEST])


@pytest.mark.parametrize(
    "train",
    [
        lambda clf: clf.fit(X[CAL], Y[CAL]),
        lambda clf: clf.partial_fit(X[CAL], Y[CAL]),
        lambda clf: clf.set_params(warm_start=True).fit(X[CAL], Y[CAL]),
    ],
    ids=["fit", "partial_fit", "warm_start"],
)
def test_training_again_drops_the_threshold(train):
    clf = NGEBMClassifier(**SMALL).fit(X[TRAIN], Y[TRAIN]).calibrate_ood(X[CAL])
    train(clf)  # other weights: the threshold was calibrated on other scores
    assert not hasattr(clf, "ood_threshold_") and not hasattr(clf, "ood_method_")
    with pytest.raises(NotFittedError, match="call calibrate_ood"):
        clf.predict_ood(X[TEST])


def test_a_refused_continued_fit_keeps_the_threshold():
    clf = NGEBMClassifier(**SMALL).fit(X[TRAIN], Y[TRAIN]).calibrate_ood(X[CAL])
    with pytest.raises(ValueError, match="not seen"):
        clf.partial_fit(X[CAL], Y[CAL] + 5)  # refused before training: the weights are kept
    assert clf.predict_ood(X[TEST]).shape == (50,)
