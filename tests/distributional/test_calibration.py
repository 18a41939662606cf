"""(Bias-corrected) temperature scaling before label-shift EM (issue #32).

References: scipy's BFGS on the same penalised NLL written independently (``log_softmax`` of
``z / T + b``, numerical gradients), finite differences for the gradient and Hessian, closed
forms (a symmetric binary case, constant posteriors, the moment conditions of the optimum),
abstention's ``TempScaling(bias_positions="all")``, and the face's predictions against the
core's functions called by hand.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import optimize
from scipy.special import log_softmax, logsumexp
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.naive_bayes import GaussianNB

from ebmclassifier import DistributionalConstraint, NGEBMClassifier, load
from ebmclassifier.distributional import (
    bayes_correction,
    calibrated_log_proba,
    em_priors,
    fit_temperature,
)
from ebmclassifier.distributional.calibration import _nll

FIXTURES = Path(__file__).parents[1] / "fixtures" / "saved"


def _held_out(seed=0, n=300, n_classes=4, scale=3.0):
    """Over-confident log posteriors (logits ``scale`` times the true ones) and labels drawn
    from the true ones, with a class shift: not separable, T near ``scale``."""
    rng = np.random.default_rng(seed)
    true_logits = rng.normal(size=(n, n_classes)) + np.linspace(0.0, 1.0, n_classes)
    proba = np.exp(log_softmax(true_logits, axis=1))
    y = np.array([rng.choice(n_classes, p=p) for p in proba])
    return log_softmax(scale * true_logits, axis=1), y


def _reference(log_proba, y, bias, penalty):
    """``(T, calibrated log posteriors)`` by BFGS on the NLL written here, independently."""
    n, n_classes = log_proba.shape

    def nll(params):
        a, b = params[0], (params[1:] if bias else np.zeros(n_classes))
        fit = -np.mean(log_softmax(a * log_proba + b, axis=1)[np.arange(n), y])
        center = np.r_[1.0, np.zeros(len(params) - 1)]
        return fit + penalty / (2 * n) * np.sum((params - center) ** 2)

    start = np.r_[1.0, np.zeros(n_classes if bias else 0)]
    params = optimize.minimize(nll, start, method="BFGS", options={"gtol": 1e-10}).x
    b = params[1:] if bias else np.zeros(n_classes)
    return 1 / params[0], log_softmax(params[0] * log_proba + b, axis=1)


# ---------------------------------------------------------------- the core


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("penalty", [0.0, 1.0])
def test_fit_temperature_matches_bfgs_on_the_same_nll(bias, penalty):
    log_proba, y = _held_out()
    temperature, b, residual = fit_temperature(log_proba, y, bias=bias, penalty=penalty)
    expected_t, expected = _reference(log_proba, y, bias, penalty)
    assert residual < 1e-8 and 2.0 < temperature < 4.5
    np.testing.assert_allclose(temperature, expected_t, rtol=1e-5)
    np.testing.assert_allclose(calibrated_log_proba(log_proba, temperature, b), expected, atol=1e-5)
    assert bias or not b.any()


@pytest.mark.parametrize("bias", [False, True])
def test_the_nll_gradient_and_hessian_match_finite_differences(bias):
    log_proba, y = _held_out(n=40)
    log_proba[0, 1] = -np.inf  # a class of probability 0 stays out
    support = np.isfinite(log_proba)
    args = (np.where(support, log_proba, 0.0), y, support, bias, 0.7)
    theta = np.random.default_rng(1).normal(size=1 + (4 if bias else 0))
    _, gradient, hessian = _nll(theta, *args)
    numeric = optimize.approx_fprime(theta, lambda t: _nll(t, *args)[0], 1e-7)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)
    columns = [
        optimize.approx_fprime(theta, lambda t, k=k: _nll(t, *args)[1][k], 1e-7)
        for k in range(len(theta))
    ]
    np.testing.assert_allclose(hessian, np.array(columns), atol=1e-5)


def test_closed_forms_of_the_maximum_likelihood_fit():
    # symmetric binary: 3 of 4 right at confidence 0.9, so T makes the confidence 0.75
    log_p = np.log([[0.9, 0.1], [0.9, 0.1], [0.9, 0.1], [0.1, 0.9]])
    temperature, _, _ = fit_temperature(log_p, np.array([0, 0, 1, 1]), bias=False, penalty=0.0)
    np.testing.assert_allclose(temperature, np.log(9) / np.log(3), rtol=1e-8)
    # posteriors that say nothing: the biases make them the held-out class shares (T has no
    # effect here, so a vanishing penalty pins it)
    y = np.array([0, 0, 0, 1, 2, 2])
    log_p = np.log(np.full((6, 3), 1 / 3))
    temperature, b, _ = fit_temperature(log_p, y, penalty=1e-9)
    np.testing.assert_allclose(
        np.exp(calibrated_log_proba(log_p, temperature, b)[0]), [0.5, 1 / 6, 1 / 3]
    )
    # the optimum's moment conditions: mean posteriors = shares, mean E_q[z] = mean z_true
    log_p, y = _held_out(seed=2)
    temperature, b, _ = fit_temperature(log_p, y, penalty=0.0, tol=1e-12)
    q = np.exp(calibrated_log_proba(log_p, temperature, b))
    np.testing.assert_allclose(q.mean(axis=0), np.bincount(y) / len(y), atol=1e-9)
    np.testing.assert_allclose(
        np.mean(np.sum(q * log_p, axis=1)), np.mean(log_p[np.arange(len(y)), y]), atol=1e-9
    )


def test_bcts_equals_abstention_temp_scaling():
    calibration = pytest.importorskip("abstention.calibration", reason="abstention does not import")
    log_p, y = _held_out(seed=3)
    ours = np.exp(calibrated_log_proba(log_p, *fit_temperature(log_p, y, penalty=0.0)[:2]))
    calibrate = calibration.TempScaling(bias_positions="all")(log_p, np.eye(4)[y])
    np.testing.assert_allclose(ours, calibrate(log_p), atol=1e-4)


def test_the_penalty_keeps_a_separable_held_out_split_finite():
    log_p, y = _held_out(seed=4)
    y = log_p.argmax(axis=1)  # every label its most probable class: no ML optimum
    temperature, b, residual = fit_temperature(log_p, y, penalty=1.0)
    assert residual < 1e-8 and 0.05 < temperature < 1.0 and np.abs(b).max() < 10
    assert np.all(np.isfinite(calibrated_log_proba(log_p, temperature, b)))


def test_fit_temperature_errors():
    log_p, y = _held_out(seed=5)
    with pytest.raises(ValueError, match=r"1/T = .* <= 0.*worse than a uniform guess"):
        fit_temperature(log_p, log_p.argmin(axis=1), bias=False)
    with pytest.raises(ValueError, match=r"classes at positions \[3\] .* none"):
        fit_temperature(log_p, np.minimum(y, 2), penalty=0.0)


def test_calibrated_log_proba_keeps_zeros_and_gives_the_log_partition():
    with np.errstate(divide="ignore"):
        log_p = np.log(np.array([[0.7, 0.3, 0.0], [0.2, 0.2, 0.6]]))
        out, log_z = calibrated_log_proba(
            log_p, 2.0, np.array([0.1, -0.2, 0.3]), return_log_partition=True
        )
    assert out[0, 2] == -np.inf
    np.testing.assert_allclose(np.exp(out).sum(axis=1), 1.0)
    scores = np.where(np.isfinite(log_p), log_p / 2.0, -np.inf) + [0.1, -0.2, 0.3]
    np.testing.assert_allclose(log_z, logsumexp(scores, axis=1))


# ---------------------------------------------------------------- the face


@pytest.fixture(scope="module")
def fitted():
    """An NG-EBM on imbalanced blobs, a stratified held-out split, a shifted deployment."""
    X, y = make_blobs(600, n_features=4, centers=3, cluster_std=2.5, random_state=2)
    X = X.astype(np.float32)
    order = np.argsort(y, kind="stable")
    train = np.r_[order[:120], order[200:280], order[400:440]]
    held = np.r_[order[120:160], order[280:310], order[440:460]]
    deploy = np.r_[order[160:170], order[310:330], order[460:600]]
    clf = NGEBMClassifier(module__hidden_sizes=(16,), max_epochs=30, lr=0.01, random_state=0)
    clf.fit(X[train], y[train])
    return clf, (X[held], y[held]), X[deploy], X


@pytest.mark.parametrize("calibration", ["temperature", "bcts"])
def test_the_face_calibrates_then_adapts_as_the_core_by_hand(fitted, calibration):
    clf, (X_val, y_val), X_deploy, X = fitted
    adapted = DistributionalConstraint(clf, priors="em", calibration=calibration, shift_test=False)
    adapted.fit(X_deploy, calibration_set=(X_val, y_val))
    temperature, b, _ = fit_temperature(
        clf.predict_log_proba(X_val).astype(float), y_val, bias=calibration == "bcts"
    )
    np.testing.assert_allclose(adapted.temperature_, temperature, rtol=1e-4)
    np.testing.assert_allclose(adapted.calibration_bias_, b, atol=1e-4)
    assert calibration == "bcts" or not adapted.calibration_bias_.any()
    shares = np.bincount(y_val) / len(y_val)  # the calibration set's, not class_prior_
    assert not np.allclose(shares, clf.class_prior_)

    def calibrated(Z):
        return np.exp(calibrated_log_proba(clf.predict_log_proba(Z).astype(float), temperature, b))

    priors, _ = em_priors(calibrated(X_deploy), shares)
    np.testing.assert_allclose(adapted.prior_, priors, atol=1e-4)
    expected = bayes_correction(calibrated(X), shares, priors)
    np.testing.assert_allclose(adapted.predict_proba(X), expected, atol=1e-4)
    with torch.no_grad():
        logits = clf.module_(torch.from_numpy(X)).double().numpy()
    adapted_logits = logits / temperature + b + adapted._class_offset_
    np.testing.assert_allclose(adapted.energy(X), -logsumexp(adapted_logits, axis=1), atol=1e-4)
    explicit = DistributionalConstraint(
        clf,
        priors="em",
        calibration=calibration,
        train_priors=clf.class_prior_,
        shift_test=False,
    )
    explicit.fit(X_deploy, calibration_set=(X_val, y_val))
    np.testing.assert_allclose(
        explicit.prior_, em_priors(calibrated(X_deploy), clf.class_prior_)[0], atol=1e-4
    )


def test_a_calibrated_adaptation_saves_loads_and_clones(fitted):
    clf, (X_val, y_val), X_deploy, X = fitted
    adapted = DistributionalConstraint(clf, priors="em", calibration="bcts")
    adapted.fit(X_deploy, calibration_set=(X_val, y_val))
    buffer = io.BytesIO()
    adapted.save(buffer)
    restored = load(buffer, device="cpu")
    assert restored.calibration == "bcts" and restored.temperature_ == adapted.temperature_
    np.testing.assert_array_equal(restored.calibration_bias_, adapted.calibration_bias_)
    np.testing.assert_allclose(restored.predict_proba(X), adapted.predict_proba(X), atol=1e-6)
    np.testing.assert_allclose(restored.energy(X), adapted.energy(X), atol=1e-5)
    assert clone(adapted).get_params()["calibration"] == "bcts"
    uncalibrated = DistributionalConstraint(clf, priors="em").fit(X_deploy)
    assert uncalibrated.temperature_ is None and uncalibrated.calibration_bias_ is None
    old = load(FIXTURES / "distributional.ebm", device="cpu")  # written before calibration
    assert old.calibration is None and old.temperature_ is None and old.calibration_bias_ is None


@pytest.mark.parametrize(
    ("kwargs", "fit_kwargs", "match"),
    [
        ({"calibration": "bcts"}, {}, r"calibration='bcts' is fitted on labelled held-out"),
        ({}, {"calibration_set": "set"}, r"calibration_set is given, but calibration=None"),
        ({"calibration": "platt"}, {}, r"'calibration' parameter"),
        (
            {"calibration": "bcts"},
            {"calibration_set": [1, 2, 3]},
            r"must be a pair \(X_val, y_val\)",
        ),
        (
            {"calibration": "bcts"},
            {"calibration_set": "bad labels"},
            r"labels \[7\] that are not classes",
        ),
        ({"calibration": "bcts"}, {"calibration_set": "missing class"}, r"has none of \[2\]"),
        ({"calibration": "bcts"}, {"calibration_set": "short"}, r"same number of samples"),
    ],
)
def test_bad_calibration_input_is_refused_at_fit(kwargs, fit_kwargs, match):
    X, y = make_blobs(90, n_features=3, centers=3, random_state=0)
    clf = GaussianNB().fit(X, y)
    sets = {
        "bad labels": (X, np.where(y == 0, 7, y)),
        "missing class": (X[y != 2], y[y != 2]),
        "short": (X, y[:-1]),
        "set": (X, y),
    }
    if isinstance(fit_kwargs.get("calibration_set"), str):
        fit_kwargs = {"calibration_set": sets[fit_kwargs["calibration_set"]]}
    with pytest.raises(ValueError, match=match):
        DistributionalConstraint(clf, priors="em", **kwargs).fit(X, **fit_kwargs)
