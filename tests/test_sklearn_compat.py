"""Every estimator against scikit-learn's contract and its composition tools."""

import inspect

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier.latent.classifier import LatentStructureClassifier

from .estimators import params
from .precision import run_sklearn_check

# Small and quick, yet good enough for check_classifiers_train (accuracy > 0.83).
CHECKED = [
    NGEBMClassifier(max_epochs=10, lr=1e-2, module__hidden_sizes=(32,), random_state=0),
    # tiny buffer and short chains: the checks fit dozens of times
    JEMClassifier(
        max_epochs=10,
        lr=1e-2,
        module__hidden_sizes=(32,),
        sgld_steps=3,
        buffer_size=64,
        random_state=0,
    ),
    # 10 epochs as the others: check_class_weight_classifiers needs a fit that has converged
    LatentStructureClassifier(n_latent=3, max_epochs=10, lr=5e-2, random_state=0),
]

SKORCH_INIT = (
    "skorch's NeuralNet.__init__ sets history_, initialized_ and virtual_params_; every skorch "
    "net fails this check"
)


JEM_EQUIVALENCE = (
    "JEM draws one SGLD chain per sample of positive weight, and the repeated data have more of "
    "them (and shuffle differently), so its samples differ; weight 0 = dropping holds exactly "
    "(tests/test_sample_weight.py)"
)


def expected_failed_checks(estimator):
    failing = {
        "check_no_attributes_set_in_init": SKORCH_INIT,
    }
    if isinstance(estimator, JEMClassifier):
        failing["check_sample_weight_equivalence_on_dense_data"] = JEM_EQUIVALENCE
    return failing


# check_set_params fuzzes every parameter with -inf, inf and None, keeping each fuzz value while
# it moves on; skorch's set_params re-initializes the callbacks whenever they are set, so once
# ``callbacks=-inf`` is in place every later set_params raises TypeError inside skorch. The check
# passes (it only warns, suggesting to validate in fit, which our own parameters do); the
# warning is about skorch's callbacks, so it is silenced here rather than printed 40 times.
@pytest.mark.filterwarnings("ignore:TypeError occurred during set_params:UserWarning")
@pytest.mark.slow  # about 150 checks of three estimators, each fitting 10-epoch networks
@parametrize_with_checks(CHECKED, expected_failed_checks=expected_failed_checks)
def test_sklearn_contract(estimator, check, monkeypatch):
    # sample_weight equivalence at float32 precision (tests/precision.py): it passes there
    # for NG-EBM and the latent classifier, and held at float64's 1e-7 by luck only
    run_sklearn_check(check, estimator, monkeypatch)


SMOKE_VALUES = [-1, 3.0, "helloworld", np.array([1.0, 4.0]), [1], {}, []]


@pytest.mark.parametrize("estimator", CHECKED, ids=lambda e: type(e).__name__)
def test_init_and_set_params_take_any_value_of_every_parameter(estimator):
    # scikit-learn's check_do_not_raise_errors_in_init_or_set_params, over every parameter of
    # __init__'s full signature: the check reads the class's signature, which help() shows
    # short (the class's own and the common training parameters), so it sees fewer
    Estimator = type(estimator)
    names = [
        name
        for name, p in inspect.signature(Estimator.__init__).parameters.items()
        if name != "self" and p.kind is not p.VAR_KEYWORD
    ]
    assert len(names) > len(inspect.signature(Estimator).parameters)
    for value in SMOKE_VALUES:
        for name in names:
            if name == "callbacks":
                continue  # skorch's set_params initializes the callbacks: see below
            Estimator(**{name: value}).set_params(**{name: value})
    # skorch's set_params initializes the callbacks as soon as they are set, so a bad value
    # raises there instead of in fit; every skorch net does
    with pytest.raises(TypeError):
        Estimator(callbacks="helloworld").set_params(callbacks="helloworld")


FAST = params("ngebm", max_epochs=4, lr=1e-2, module__hidden_sizes=(32,))


def test_grid_search_over_beta(small_blobs):
    X, y = small_blobs
    search = GridSearchCV(NGEBMClassifier(**FAST), {"beta": [0.0, 0.25, 0.5]}, cv=2).fit(X, y)
    assert search.best_params_["beta"] in (0.0, 0.25, 0.5)
    assert search.best_estimator_.beta == search.best_params_["beta"]
    refit = clone(NGEBMClassifier(**FAST)).set_params(**search.best_params_).fit(X, y)
    np.testing.assert_array_equal(refit.predict_proba(X), search.predict_proba(X))


def test_pipeline_and_cross_val_score(small_blobs):
    X, y = small_blobs
    pipe = make_pipeline(StandardScaler(), NGEBMClassifier(**FAST))
    scores = cross_val_score(pipe, X * 100 + 5, y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.7
    pipe.fit(X, y)
    direct = NGEBMClassifier(**FAST).fit(StandardScaler().fit_transform(X), y)
    np.testing.assert_allclose(
        pipe.predict_proba(X), direct.predict_proba(StandardScaler().fit(X).transform(X)), rtol=1e-5
    )
    assert pipe.score_samples(X).shape == (len(X),)


@pytest.mark.parametrize("method", ["sigmoid", "isotonic", "temperature"])
def test_calibrated_classifier_cv(small_blobs, method):
    X, y = small_blobs
    calibrated = CalibratedClassifierCV(NGEBMClassifier(**FAST), method=method, cv=2).fit(X, y)
    proba = calibrated.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert calibrated.score(X, y) > 0.7
