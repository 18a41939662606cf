"""MAPIE's split conformal classifier wraps the estimators (issue #15); coverage holds."""

import numpy as np
import pytest
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier.datasets import load_digits_ood

mapie_classification = pytest.importorskip("mapie.classification")
mapie_metrics = pytest.importorskip("mapie.metrics.classification")

LEVEL = 0.9


@pytest.fixture(scope="module")
def digits():
    data = load_digits_ood(random_state=0)
    scaler = StandardScaler().fit(data.X_train)
    X_fit, X_cal, y_fit, y_cal = train_test_split(
        scaler.transform(data.X_train), data.y_train, test_size=0.4, random_state=0
    )
    return X_fit, y_fit, X_cal, y_cal, scaler.transform(data.X_test), data.y_test


def _coverage_bound(n_cal: int, n_test: int) -> float:
    # The guarantee is P(y in set) >= LEVEL over calibration and test draws. Given the
    # calibration split, coverage is Beta-distributed with variance ~ LEVEL(1-LEVEL)/(n_cal+2);
    # the test split's coverage adds a binomial mean's LEVEL(1-LEVEL)/n_test. Allow three
    # standard deviations of the two below the level.
    sd = np.sqrt(LEVEL * (1 - LEVEL) * (1 / (n_cal + 2) + 1 / n_test))
    return LEVEL - 3 * sd


@pytest.mark.parametrize(
    "estimator",
    [
        NGEBMClassifier(beta=0.0, max_epochs=5, random_state=0),
        NGEBMClassifier(beta=0.5, max_epochs=5, random_state=0),
        JEMClassifier(max_epochs=2, buffer_size=200, sgld_steps=5, random_state=0),
    ],
    ids=["ce", "ngebm", "jem"],
)
@pytest.mark.parametrize("prefit", [True, False])
def test_split_conformal_wraps_the_estimator_and_covers(digits, estimator, prefit):
    X_fit, y_fit, X_cal, y_cal, X_test, y_test = digits
    # labels that are not 0..9 (MAPIE 1.6 cannot take string labels: it calls isnan on y)
    labels = np.arange(10) * 10 + 3
    if prefit:
        estimator.fit(X_fit, labels[y_fit])
    conformal = mapie_classification.SplitConformalClassifier(
        estimator, confidence_level=LEVEL, prefit=prefit
    )
    if not prefit:
        conformal.fit(X_fit, labels[y_fit])
    conformal.conformalize(X_cal, labels[y_cal])
    points, sets = conformal.predict_set(X_test)
    assert sets.shape == (len(X_test), 10, 1) and set(points) <= set(labels)
    # columns follow the sorted labels (the estimator's classes_)
    column = np.searchsorted(np.unique(labels), labels[y_test])
    coverage = sets[np.arange(len(X_test)), column, 0].mean()
    assert coverage == mapie_metrics.classification_coverage_score(y_test, sets)[0]
    assert coverage >= _coverage_bound(len(X_cal), len(X_test))
    assert 0 < mapie_metrics.classification_mean_width_score(sets)[0] < 10
