"""The test of whether the class priors moved (issue #49): its decision, its level, its seed.

Synthetic posteriors of a known model, so that the right decision is known: three unit-variance
Gaussian classes in one dimension (means -2, 0 and 2), training priors ``TRAIN``; the exact
posteriors (``calibrated``) or those of a biased model (over-confident and favouring class 0,
the way a poorly calibrated network is). Rates over many seeded draws are checked against
binomial bounds (a one-in-a-thousand chance each way for a test of the right level), never one
draw.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from scipy.special import logsumexp, softmax
from scipy.stats import binom, chi2
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import make_blobs
from sklearn.frozen import FrozenEstimator

from ebmclassifier import DistributionalConstraint, NGEBMClassifier, load
from ebmclassifier.distributional import (
    bayes_correction,
    calibrated_log_proba,
    em_priors,
    fit_temperature,
    prior_shift_statistic,
    prior_shift_test,
    shift_test,
)
from ebmclassifier.distributional._em_estimate import SHIFT_ATTRIBUTES
from ebmclassifier.distributional.shift_test import _em_batched

from ..user_line import assert_at_users_line

FIXTURES = Path(__file__).parents[1] / "fixtures" / "saved"
MEANS = np.array([-2.0, 0.0, 2.0])
TRAIN = np.array([0.5, 0.3, 0.2])
SHIFTED = np.array([0.2, 0.3, 0.5])
#: The biased model: logits twice too sharp and class 0 favoured by one nat.
SHARPNESS, FAVOUR = 2.0, np.array([1.0, 0.0, 0.0])


def _sample(shares, n, rng):
    y = rng.choice(3, size=n, p=shares)
    return rng.normal(MEANS[y], 1.0), y


def _posteriors(x, biased=False):
    """``p(y|x)`` under ``TRAIN``: exact, or the biased model's."""
    logits = -0.5 * (x[:, None] - MEANS) ** 2 + np.log(TRAIN)
    return softmax(SHARPNESS * logits + FAVOUR if biased else logits, axis=1)


def _draw(shares, n, rng, biased=False):
    return _posteriors(_sample(shares, n, rng)[0], biased)


def _level_bounds(n_draws, alpha):
    """The counts of detections that a test of level ``alpha`` stays within, but for a chance
    of one in a thousand on each side."""
    return binom.ppf(0.001, n_draws, alpha), binom.isf(0.001, n_draws, alpha)


# ---------------------------------------------------------------- the statistic


def test_the_statistic_is_twice_the_log_likelihood_gain_written_independently():
    rng = np.random.default_rng(0)
    proba = _draw(SHIFTED, 50, rng)
    priors = np.array([0.3, 0.3, 0.4])
    log_likelihood = logsumexp(np.log(proba) + np.log(priors / TRAIN), axis=1).sum()
    expected = 2 * (log_likelihood - logsumexp(np.log(proba), axis=1).sum())
    np.testing.assert_allclose(prior_shift_statistic(proba, TRAIN, priors), expected, rtol=1e-12)
    assert prior_shift_statistic(proba, TRAIN, TRAIN) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("pseudo_count", [0.0, 1.0, 10.0])
def test_the_statistic_is_not_negative_at_em_s_estimate(pseudo_count):
    rng = np.random.default_rng(1)
    for _ in range(20):
        proba = _draw(TRAIN, 30, rng, biased=True)
        priors, _ = em_priors(proba, TRAIN, pseudo_count=pseudo_count)
        assert prior_shift_statistic(proba, TRAIN, priors) >= -1e-9


def test_the_statistic_is_batched_over_leading_axes():
    rng = np.random.default_rng(2)
    sets = np.stack([_draw(TRAIN, 40, rng) for _ in range(4)])
    priors = rng.dirichlet(np.ones(3), size=4)
    batched = prior_shift_statistic(sets, TRAIN, priors)
    looped = [prior_shift_statistic(s, TRAIN, p) for s, p in zip(sets, priors, strict=True)]
    np.testing.assert_allclose(batched, looped, rtol=1e-12)


@pytest.mark.parametrize("pseudo_count", [0.0, 1.0])
def test_batched_em_stops_on_the_step_that_moves_by_tol_as_em_priors(pseudo_count):
    rng = np.random.default_rng(16)
    proba = _draw(SHIFTED, 40, rng, biased=True)
    *_, first_step = em_priors(
        proba, TRAIN, pseudo_count=pseudo_count, max_iter=1, return_step=True
    )
    expected, n_iter = em_priors(proba, TRAIN, pseudo_count=pseudo_count, tol=first_step)
    assert n_iter == 1  # a step of exactly tol ends EM
    batched = _em_batched(proba[None], TRAIN, pseudo_count, first_step, 1000)
    np.testing.assert_array_equal(batched[0], expected)


@pytest.mark.parametrize("pseudo_count", [0.0, 1.0])
def test_batched_em_equals_em_priors_on_each_set(pseudo_count):
    rng = np.random.default_rng(3)
    sets = np.stack([_draw(rng.dirichlet(np.ones(3)), 60, rng, biased=True) for _ in range(6)])
    batched = _em_batched(sets, TRAIN, pseudo_count, 1e-8, 1000)
    for one, priors in zip(sets, batched, strict=True):
        expected, _ = em_priors(one, TRAIN, pseudo_count=pseudo_count, tol=1e-8, max_iter=1000)
        np.testing.assert_allclose(priors, expected, rtol=0, atol=1e-15)


# ---------------------------------------------------------------- the decision


def test_a_shift_is_detected_and_no_shift_is_not_on_a_calibrated_model():
    rng = np.random.default_rng(4)
    reference = _draw(TRAIN, 500, rng)
    shifted = [
        prior_shift_test(_draw(SHIFTED, 200, rng), TRAIN, reference, random_state=s)
        for s in range(8)
    ]
    assert all(r.shift_detected and r.weight > 0.5 for r in shifted)
    assert all(r.p_value <= 1 / 201 for r in shifted)  # beyond every resample
    for result in shifted:
        assert result.source == "reference" and result.n_resamples == 200
        assert result.alpha == 0.05
        assert result.threshold == np.quantile(result.null_statistics, 0.95)
        assert result.weight == pytest.approx(1 - result.threshold / result.statistic)


@pytest.mark.slow  # a rate over 200 bootstrapped tests (5 s); CI runs it
@pytest.mark.parametrize("biased", [False, True], ids=["calibrated", "biased"])
def test_the_false_alarm_rate_without_shift_is_the_level(biased):
    """On 200 no-shift draws, each with its own bootstrap, the test fires at its level: also
    for a biased model, whose bias the held-out posteriors carry into the threshold."""
    rng = np.random.default_rng(5)
    reference = _draw(TRAIN, 400, rng, biased)
    results = [
        prior_shift_test(
            _draw(TRAIN, 200, rng, biased), TRAIN, reference, n_resamples=50, random_state=seed
        )
        for seed in range(200)
    ]
    low, high = _level_bounds(200, 0.05)
    assert low <= sum(r.shift_detected for r in results) <= high
    assert all(r.weight == 0.0 for r in results if not r.shift_detected)


def test_the_chi_square_threshold_fires_on_a_biased_model_without_shift():
    """Why the threshold is bootstrapped: Wilks's chi-square law (2 degrees of freedom) holds
    for the calibrated posteriors and fails for the biased ones, whose bias grows with n."""
    rng = np.random.default_rng(6)
    threshold = chi2.isf(0.05, df=2)
    rates = {}
    for biased in (False, True):
        draws = [_draw(TRAIN, 1000, rng, biased) for _ in range(100)]
        statistics = [prior_shift_statistic(p, TRAIN, em_priors(p, TRAIN)[0]) for p in draws]
        rates[biased] = np.mean(np.array(statistics) > threshold)
    assert rates[False] <= binom.isf(0.001, 100, 0.05) / 100
    assert rates[True] > 0.5


def test_without_reference_the_threshold_is_wilks_s_chi_square():
    """Without held-out posteriors the threshold is the chi-square law's: the level holds on a
    calibrated model, not on a biased one (what the docs say it costs), and a shift that
    empties a class is detected (which resampling the deployment samples could not do: no
    reweighting brings the class back)."""
    rng = np.random.default_rng(7)
    counts = {}
    for biased in (False, True):
        results = [prior_shift_test(_draw(TRAIN, 500, rng, biased), TRAIN) for _ in range(100)]
        assert {(r.source, r.n_resamples, r.null_statistics.size) for r in results} == {
            ("chi2", 0, 0)
        }
        assert {r.threshold for r in results} == {chi2.isf(0.05, df=2)}
        counts[biased] = sum(r.shift_detected for r in results)
    assert counts[False] <= _level_bounds(100, 0.05)[1] < counts[True]
    absent = prior_shift_test(_draw(np.array([0.6, 0.4, 0.0]), 200, rng), TRAIN)
    assert absent.shift_detected and absent.p_value == chi2.sf(absent.statistic, df=2)
    assert absent.weight == pytest.approx(1 - absent.threshold / absent.statistic)


@pytest.mark.slow  # a rate over 40 bootstrapped tests with a calibration refitted per resample
def test_a_calibration_fitted_on_the_reference_is_refitted_per_resample():
    """BCTS fitted on the held-out samples makes EM find their class shares on them almost
    exactly, whatever its error elsewhere; refitting it on each (stratified) resample puts
    that error in the null law. A stratified held-out split: its shares are ``TRAIN``."""
    rng = np.random.default_rng(8)
    y_held = np.repeat(np.arange(3), (TRAIN * 60).round().astype(int))
    raw_held = _posteriors(rng.normal(MEANS[y_held], 1.0), biased=True)
    temperature, bias, _ = fit_temperature(np.log(raw_held), y_held)

    def calibrated(p):
        return softmax(np.log(p) / temperature + bias, axis=1)

    refitted, in_sample = 0, 0
    for seed in range(20):
        proba = calibrated(_draw(TRAIN, 1000, rng, biased=True))
        options = {"n_resamples": 30, "random_state": seed}
        refitted += prior_shift_test(
            proba, TRAIN, raw_held, reference_labels=y_held, calibration="bcts", **options
        ).shift_detected
        in_sample += prior_shift_test(proba, TRAIN, calibrated(raw_held), **options).shift_detected
    assert refitted <= _level_bounds(20, 0.05)[1] < in_sample


# ---------------------------------------------------------------- the seed and the arguments


def test_the_threshold_is_reproducible_with_a_seed():
    rng = np.random.default_rng(9)
    reference, proba = _draw(TRAIN, 300, rng), _draw(TRAIN, 200, rng)
    first = prior_shift_test(proba, TRAIN, reference, random_state=11)
    again = prior_shift_test(proba, TRAIN, reference, random_state=11)
    assert (first.threshold, first.p_value, first.weight) == (
        again.threshold,
        again.p_value,
        again.weight,
    )
    generator = prior_shift_test(proba, TRAIN, reference, random_state=np.random.default_rng(11))
    assert generator.threshold == first.threshold
    others = {prior_shift_test(proba, TRAIN, reference, random_state=s).threshold for s in range(5)}
    assert len(others) == 5  # the seed is what fixes it


def test_precomputed_priors_are_used_as_given():
    rng = np.random.default_rng(10)
    reference, proba = _draw(TRAIN, 300, rng), _draw(SHIFTED, 100, rng)
    priors, _ = em_priors(proba, TRAIN)
    result = prior_shift_test(proba, TRAIN, reference, random_state=0)
    given = prior_shift_test(proba, TRAIN, reference, priors=priors, random_state=0)
    np.testing.assert_array_equal(result.priors, priors)
    np.testing.assert_array_equal(given.priors, result.priors)
    assert given.statistic == result.statistic and given.threshold == result.threshold


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, r"alpha must be a float in the range \(0.0, 1.0\]"),
        ({"alpha": 1.0}, r"alpha must be a float in the range \(0, 1\)"),
        ({"n_resamples": 0}, r"n_resamples must be an int >= 1"),
        ({"max_iter": 0}, r"max_iter must be an int >= 1"),
        ({"proba": np.ones((10, 2)) / 2}, r"proba must be an array of shape \(n_samples, 3\)"),
        ({"reference": np.ones((0, 3))}, r"reference must hold at least one sample"),
        ({"pseudo_count": -1.0}, r"pseudo_count must be"),
        (
            {"reference": np.ones((5, 2)) / 2},
            r"reference must be an array of shape \(n_samples, 3\)",
        ),
        ({"calibration": "platt"}, r"calibration must be one of None, 'temperature', 'bcts'"),
        ({"calibration": "bcts"}, r"pass reference too"),
        (
            {"calibration": "bcts", "reference": np.ones((4, 3)) / 3},
            r"reference_labels must be the integer labels 0..2 of the 4 rows",
        ),
        (
            {"reference": np.ones((4, 3)) / 3, "reference_labels": np.zeros(4, int)},
            r"reference_labels are used with a calibration only",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs, match):
    kwargs = {"proba": np.ones((10, 3)) / 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        prior_shift_test(train_priors=TRAIN, **kwargs)


@pytest.mark.slow  # a statistic over bootstrapped tests on many draws: CI runs it
def test_adopting_the_weighted_priors_is_no_worse_than_none_without_shift():
    """The gate's purpose, on the biased model without shift: the NLL of the adopted priors
    is no worse than no correction's on most draws, where EM alone is worse on most."""
    rng = np.random.default_rng(12)
    reference = _draw(TRAIN, 400, rng, biased=True)
    worse_em, worse_gate = 0, 0
    for seed in range(40):
        x, y = _sample(TRAIN, 500, rng)
        proba = _posteriors(x, biased=True)
        result = prior_shift_test(proba, TRAIN, reference, n_resamples=50, random_state=seed)
        adopted = TRAIN + result.weight * (result.priors - TRAIN)

        def nll(priors, proba=proba, y=y):
            corrected = bayes_correction(proba, TRAIN, priors)
            return -np.mean(np.log(corrected[np.arange(len(y)), y]))

        worse_em += nll(result.priors) > nll(TRAIN) + 1e-12
        worse_gate += nll(adopted) > nll(TRAIN) + 1e-12
    assert worse_em >= 30 and worse_gate <= _level_bounds(40, 0.05)[1]


# ---------------------------------------------------------------- the estimator


class _Table(ClassifierMixin, BaseEstimator):
    """``p(y|x)`` read from a table by the row index in ``X[:, 0]``; records ``TRAIN``."""

    def __init__(self, table):
        self.table = table

    def fit(self, X=None, y=None):
        self.classes_ = np.arange(3)
        self.class_prior_ = TRAIN
        return self

    def predict_proba(self, X):
        return np.asarray(self.table)[np.asarray(X)[:, 0].astype(int)]


@pytest.fixture(scope="module")
def table():
    """Rows 0-299: no shift; 300-599: shifted; 600-999: held-out; 1000-1119: a labelled,
    stratified calibration set (the biased model's, its labels returned)."""
    rng = np.random.default_rng(13)
    y_cal = np.repeat(np.arange(3), (TRAIN * 120).round().astype(int))
    parts = [
        _draw(TRAIN, 300, rng, biased=True),
        _draw(SHIFTED, 300, rng, biased=True),
        _draw(TRAIN, 400, rng, biased=True),
        _posteriors(rng.normal(MEANS[y_cal], 1.0), biased=True),
    ]
    return _Table(np.concatenate(parts)).fit(), y_cal


def _rows(start, stop):
    return np.arange(start, stop, dtype=float)[:, None]


NO_SHIFT, SHIFT, HELDOUT = _rows(0, 300), _rows(300, 600), _rows(600, 1000)


def test_the_face_adapts_to_a_shift_by_the_test_s_weight(table):
    clf, _ = table
    adapted = DistributionalConstraint(clf, priors="em", random_state=0)
    adapted.fit(SHIFT, heldout=HELDOUT)
    proba = clf.predict_proba(SHIFT)
    expected = prior_shift_test(proba, TRAIN, clf.predict_proba(HELDOUT), random_state=0)
    assert adapted.prior_shift_detected_ is True and adapted.shift_threshold_source_ == "heldout"
    assert adapted.shift_statistic_ == pytest.approx(expected.statistic, rel=1e-9)
    assert adapted.shift_threshold_ == pytest.approx(expected.threshold, rel=1e-9)
    assert adapted.shift_p_value_ == expected.p_value
    assert adapted.shift_weight_ == pytest.approx(expected.weight, rel=1e-9)
    assert 0.5 < adapted.shift_weight_ <= 1
    np.testing.assert_allclose(adapted.em_prior_, em_priors(proba, TRAIN)[0], atol=1e-9)
    adopted = TRAIN + adapted.shift_weight_ * (adapted.em_prior_ - TRAIN)
    np.testing.assert_allclose(adapted.prior_, adopted, atol=1e-12)
    np.testing.assert_allclose(
        adapted.predict_proba(SHIFT), bayes_correction(proba, TRAIN, adopted), atol=1e-6
    )


@pytest.mark.parametrize("method", ["projection", "bayes"])
def test_the_face_leaves_the_model_alone_without_a_detected_shift(table, method):
    clf, _ = table
    adapted = DistributionalConstraint(clf, priors="em", method=method, random_state=0)
    adapted.fit(NO_SHIFT, heldout=HELDOUT)
    assert adapted.prior_shift_detected_ is False and adapted.shift_weight_ == 0.0
    assert adapted.shift_statistic_ <= adapted.shift_threshold_
    np.testing.assert_array_equal(adapted.prior_, TRAIN)
    assert not np.allclose(adapted.em_prior_, TRAIN, atol=1e-2)  # EM moved: the bias
    np.testing.assert_allclose(
        adapted.predict_proba(_rows(0, 1000)), clf.predict_proba(_rows(0, 1000)), atol=1e-9
    )


def test_shift_test_false_adapts_always_and_records_no_test(table):
    clf, _ = table
    adapted = DistributionalConstraint(clf, priors="em", shift_test=False).fit(NO_SHIFT)
    np.testing.assert_array_equal(adapted.prior_, adapted.em_prior_)
    for name in SHIFT_ATTRIBUTES[1:]:
        assert getattr(adapted, name) is None


def test_the_calibration_set_is_the_reference_after_a_calibration(table):
    clf, y_cal = table
    calibration_set = (_rows(1000, 1120), y_cal)
    adapted = DistributionalConstraint(
        clf, priors="em", calibration="bcts", shift_resamples=40, random_state=0
    )
    adapted.fit(SHIFT, calibration_set=calibration_set)
    assert adapted.shift_threshold_source_ == "calibration_set" and adapted.prior_shift_detected_
    calibrated = calibrated_log_proba(
        np.log(clf.predict_proba(SHIFT)), adapted.temperature_, adapted.calibration_bias_
    )
    expected = prior_shift_test(
        np.exp(calibrated),
        TRAIN,
        clf.predict_proba(calibration_set[0]),
        reference_labels=y_cal,
        calibration="bcts",
        n_resamples=40,
        random_state=0,
    )
    assert adapted.shift_threshold_ == pytest.approx(expected.threshold, rel=1e-9)
    # held-out samples given besides: they are the reference, calibrated as X is
    adapted.fit(SHIFT, calibration_set=calibration_set, heldout=HELDOUT)
    assert adapted.shift_threshold_source_ == "heldout"


def test_without_held_out_samples_it_warns_and_takes_the_chi_square_threshold(table):
    clf, _ = table
    adapted = DistributionalConstraint(clf, priors="em", random_state=0)
    with pytest.warns(UserWarning, match="no held-out samples .* heldout=X_held") as record:
        adapted.fit(SHIFT)
    assert_at_users_line(record, __file__)
    assert adapted.shift_threshold_source_ == "chi2" and adapted.prior_shift_detected_
    assert adapted.shift_threshold_ == chi2.isf(0.05, df=2)


def test_the_threshold_of_the_face_is_reproducible_with_random_state(table):
    clf, _ = table
    fitted = [
        DistributionalConstraint(clf, priors="em", random_state=seed).fit(SHIFT, heldout=HELDOUT)
        for seed in (3, 3, 4)
    ]
    assert fitted[0].shift_threshold_ == fitted[1].shift_threshold_ != fitted[2].shift_threshold_
    np.testing.assert_array_equal(fitted[0].prior_, fitted[1].prior_)
    legacy = DistributionalConstraint(clf, priors="em", random_state=np.random.RandomState(0))
    assert legacy.fit(SHIFT, heldout=HELDOUT).prior_shift_detected_  # scikit-learn's kind too


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"shift_test": "yes"}, r"'shift_test' parameter .* must be a bool"),
        ({"shift_significance": 0.0}, r"'shift_significance' .* range \(0.0, 1.0\]"),
        ({"shift_significance": 1.0}, r"'shift_significance' .* range \(0, 1\)"),
        ({"shift_resamples": 0}, r"'shift_resamples' .* an int >= 1"),
        ({"random_state": "0"}, r"'random_state' .* None, an int, a numpy Generator"),
    ],
)
def test_bad_test_parameters_are_refused_at_fit(table, kwargs, match):
    clf, _ = table
    with pytest.raises(ValueError, match=match):
        DistributionalConstraint(clf, priors="em", **kwargs).fit(SHIFT)


@pytest.mark.parametrize(
    "kwargs", [{"priors": TRAIN}, {"priors": "em", "shift_test": False}], ids=["given", "off"]
)
def test_held_out_samples_without_a_test_are_refused(table, kwargs):
    clf, _ = table
    with pytest.raises(ValueError, match="heldout samples are used by the test .* leave heldout"):
        DistributionalConstraint(clf, **kwargs).fit(SHIFT, heldout=HELDOUT)


# ---------------------------------------------------------------- saving


@pytest.fixture(scope="module")
def ngebm():
    """An NG-EBM on blobs, its held-out split, and a deployment set where class 2 dominates."""
    X, y = make_blobs(800, n_features=4, centers=3, cluster_std=2.0, random_state=3)
    X = X.astype(np.float32)
    clf = NGEBMClassifier(max_epochs=10, module__hidden_sizes=(8,), random_state=0)
    clf.fit(X[:300], y[:300])
    deploy = np.r_[np.flatnonzero(y[450:] == 2)[:100], np.flatnonzero(y[450:] == 0)[:10]] + 450
    return FrozenEstimator(clf), X[300:450], X[deploy]


def test_the_test_is_saved_and_loaded_with_the_constraint(ngebm):
    clf, X_held, X_deploy = ngebm
    adapted = DistributionalConstraint(
        clf, priors="em", shift_significance=0.1, shift_resamples=50, random_state=7
    ).fit(X_deploy, heldout=X_held)
    assert adapted.prior_shift_detected_
    buffer = io.BytesIO()
    adapted.save(buffer)
    restored = load(buffer, device="cpu")
    assert restored.get_params(deep=False).keys() == adapted.get_params(deep=False).keys()
    for name in ("shift_test", "shift_significance", "shift_resamples", "random_state"):
        assert getattr(restored, name) == getattr(adapted, name)
    for name in SHIFT_ATTRIBUTES:
        np.testing.assert_array_equal(getattr(restored, name), getattr(adapted, name))
    assert type(restored.prior_shift_detected_) is bool
    np.testing.assert_array_equal(restored.prior_, adapted.prior_)
    np.testing.assert_allclose(restored.predict_proba(X_deploy), adapted.predict_proba(X_deploy))
    refitted = clone(restored).fit(X_deploy, heldout=X_held)  # the same seed: the same test
    assert refitted.shift_threshold_ == adapted.shift_threshold_
    np.testing.assert_allclose(refitted.prior_, adapted.prior_, rtol=1e-6)
    off = DistributionalConstraint(clf, priors="em", shift_test=False).fit(X_deploy)
    buffer = io.BytesIO()
    off.save(buffer)
    assert load(buffer, device="cpu").prior_shift_detected_ is None


def _rewritten(path, target, change):
    """``path`` (a constraint file) written to ``target`` with its JSON changed by ``change``."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    metadata = json.loads(members["distributional.json"])
    change(metadata)
    members["distributional.json"] = json.dumps(metadata)
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return target


def test_an_old_file_loads_without_the_test_and_adapts_as_it_was_fitted(tmp_path):
    old = load(FIXTURES / "distributional.ebm", device="cpu")
    assert old.shift_test is False  # written before the test existed
    assert all(getattr(old, name) is None for name in SHIFT_ATTRIBUTES)
    # an old file of priors="em" (the fixture's, as an EM adaptation would have written it)
    X = np.load(FIXTURES / "distributional_expected.npz")["X"]

    def as_em(metadata):
        metadata["priors"] = "em"
        metadata["fitted"]["em_n_iter_"] = 12

    old_em = load(_rewritten(FIXTURES / "distributional.ebm", tmp_path / "em.ebm", as_em))
    assert old_em.shift_test is False and old_em.em_pseudo_count == 0.0
    np.testing.assert_allclose(old_em.predict_proba(X), old.predict_proba(X))
    # refitted as it was fitted: EM, always adapted (its estimator predates class_prior_)
    refitted = clone(old_em).set_params(train_priors=np.full(3, 1 / 3)).fit(X[:30])
    assert refitted.prior_shift_detected_ is None
    np.testing.assert_array_equal(refitted.prior_, refitted.em_prior_)
    assert not np.allclose(refitted.prior_, 1 / 3, atol=1e-3)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda m: m["fitted"].update(prior_shift_detected_="yes"), "must be a bool"),
        (lambda m: m["fitted"].update(shift_threshold_="1.0"), "must be a number"),
        (lambda m: m["fitted"].update(shift_threshold_source_=3), "must be a string"),
        (lambda m: m["fitted"].update(em_prior_=["a"]), "em_prior_ is not an array of numbers"),
        (lambda m: m["params"].update(shift_resamples=0), "'shift_resamples' .* int >= 1"),
    ],
)
def test_a_crafted_record_of_the_test_is_refused(tmp_path, change, match):
    path = _rewritten(FIXTURES / "distributional.ebm", tmp_path / "crafted.ebm", change)
    with pytest.raises(ValueError, match=match):
        load(path, device="cpu")


def test_given_null_statistics_give_the_same_decision_without_resampling():
    rng = np.random.default_rng(14)
    reference = _draw(TRAIN, 300, rng)
    first = prior_shift_test(_draw(TRAIN, 200, rng), TRAIN, reference, random_state=0)
    assert first.null_statistics.shape == (200,) and first.source == "reference"
    for shares in (TRAIN, SHIFTED):
        proba = _draw(shares, 200, rng)
        resampled = prior_shift_test(proba, TRAIN, reference, random_state=0)
        reused = prior_shift_test(proba, TRAIN, null_statistics=first.null_statistics)
        assert reused.source == "given" and reused.n_resamples == 200
        for name in ("statistic", "threshold", "shift_detected", "p_value", "weight"):
            assert getattr(reused, name) == getattr(resampled, name)
    with pytest.raises(ValueError, match="null_statistics must be the finite"):
        prior_shift_test(proba, TRAIN, null_statistics=np.array([1.0, np.nan]))


def test_the_decision_at_the_threshold_and_one_step_past_it():
    """Detected only strictly above the threshold; the weight starts at 0 there."""
    rng = np.random.default_rng(15)
    proba = _draw(SHIFTED, 100, rng)
    statistic = prior_shift_test(proba, TRAIN).statistic
    at = prior_shift_test(proba, TRAIN, null_statistics=np.full(20, statistic))
    assert at.threshold == statistic and not at.shift_detected and at.weight == 0.0
    assert at.p_value == 1.0  # every resample reaches the statistic
    below = np.nextafter(statistic, 0.0)
    past = prior_shift_test(proba, TRAIN, null_statistics=np.full(20, below))
    assert past.shift_detected and 0.0 < past.weight < 1e-12
    assert past.p_value == 1 / 21


def test_the_face_passes_its_level_and_resamples_to_the_test(table):
    clf, _ = table
    adapted = DistributionalConstraint(
        clf, priors="em", shift_significance=0.5, shift_resamples=30, random_state=2
    ).fit(NO_SHIFT, heldout=HELDOUT)
    expected = prior_shift_test(
        clf.predict_proba(NO_SHIFT),
        TRAIN,
        clf.predict_proba(HELDOUT),
        alpha=0.5,
        n_resamples=30,
        random_state=2,
    )
    assert adapted.shift_threshold_ == pytest.approx(expected.threshold, rel=1e-9)
    assert adapted.shift_p_value_ == expected.p_value
    assert adapted.shift_threshold_ < np.quantile(expected.null_statistics, 0.95)


@pytest.mark.parametrize("calibration", [None, "temperature", "bcts"])
def test_the_null_statistics_do_not_depend_on_the_blocks(monkeypatch, calibration):
    """Every block boundary: blocks of 1, 2, 3 and 7 resamples (the last one shorter) give
    the statistics of one block, as many as asked."""
    rng = np.random.default_rng(17)
    y_held = np.repeat(np.arange(3), (TRAIN * 60).round().astype(int))
    reference = _posteriors(rng.normal(MEANS[y_held], 1.0), biased=True)
    proba = _draw(TRAIN, 30, rng, biased=True)
    options = {"reference_labels": y_held, "calibration": calibration} if calibration else {}
    whole = prior_shift_test(proba, TRAIN, reference, n_resamples=10, random_state=4, **options)
    for per_block in (1, 2, 3, 7):
        monkeypatch.setattr(shift_test, "BLOCK_ITEMS", per_block * 30 * 3)
        blocks = prior_shift_test(
            proba, TRAIN, reference, n_resamples=10, random_state=4, **options
        )
        np.testing.assert_allclose(blocks.null_statistics, whole.null_statistics, rtol=1e-12)


@pytest.mark.parametrize("calibration", ["temperature", "bcts"])
def test_each_resample_refits_the_calibration_it_names(calibration):
    """With a calibration, every null statistic is that of a set calibrated by a fit of that
    kind (temperature only: no class bias) on a stratified resample of the held-out set: the
    sets, written out here from the two streams the bootstrap draws from."""
    rng = np.random.default_rng(18)
    y_held = np.repeat(np.arange(3), (TRAIN * 60).round().astype(int))
    reference = _posteriors(rng.normal(MEANS[y_held], 1.0), biased=True)
    proba = _draw(TRAIN, 30, rng, biased=True)
    result = prior_shift_test(
        proba,
        TRAIN,
        reference,
        reference_labels=y_held,
        calibration=calibration,
        n_resamples=4,
        random_state=5,
    )
    rows_rng, calibration_rng = map(
        np.random.default_rng, np.random.default_rng(5).integers(2**63, size=2)
    )
    rows = rows_rng.choice(len(reference), size=(4, 30), replace=True)
    for drawn, statistic in zip(rows, result.null_statistics, strict=True):
        fitted = np.concatenate(
            [
                calibration_rng.choice(np.flatnonzero(y_held == c), size=k)
                for c, k in enumerate(np.bincount(y_held))
            ]
        )
        temperature, bias, _ = fit_temperature(
            np.log(reference[fitted]), y_held[fitted], bias=calibration == "bcts"
        )
        assert calibration == "bcts" or not bias.any()
        calibrated = softmax(np.log(reference[drawn]) / temperature + bias, axis=1)
        expected = prior_shift_statistic(calibrated, TRAIN, em_priors(calibrated, TRAIN)[0])
        assert statistic == pytest.approx(expected, rel=1e-6)
