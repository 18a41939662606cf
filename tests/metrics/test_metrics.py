"""Metrics against hand computations and independent references (netcal, sklearn, numpy)."""

import numpy as np
import pytest
import torch
from netcal.metrics import ECE, MCE
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV

from ebmclassifier.metrics import (
    aurc,
    classwise_calibration_error,
    ece_scorer,
    expected_calibration_error,
    maximum_calibration_error,
    mce_scorer,
    ood_metrics,
    risk_coverage_curve,
    threshold_at_tpr,
)


def _reference_bins(confidence, n_bins):
    """Equal-width bin index of each confidence, written out independently of netcal."""
    return np.minimum((confidence * n_bins).astype(int), n_bins - 1)


def _reference_ece_mce(confidence, hit, n_bins):
    bins = _reference_bins(confidence, n_bins)
    ece, mce = 0.0, 0.0
    for b in range(n_bins):
        in_bin = bins == b
        if in_bin.any():
            gap = abs(hit[in_bin].mean() - confidence[in_bin].mean())
            ece += in_bin.mean() * gap
            mce = max(mce, gap)
    return ece, mce


def _random_proba(rng, n, k, sharpness=3.0):
    logits = sharpness * rng.normal(size=(n, k))
    proba = np.exp(logits)
    return proba / proba.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------------------- calibration


def test_ece_mce_hand_computed():
    # 5 bins of width 0.2. Top-label confidences 0.9, 0.9 (one right, one wrong) land in
    # [0.8, 1]: gap |0.5 - 0.9| = 0.4, weight 2/4; 0.7 (right) in [0.6, 0.8): gap 0.3,
    # weight 1/4; 0.5 (wrong) in [0.4, 0.6): gap 0.5, weight 1/4.
    proba = np.array([[0.9, 0.05, 0.05], [0.9, 0.05, 0.05], [0.3, 0.7, 0.0], [0.5, 0.3, 0.2]])
    y = np.array([0, 1, 1, 2])
    assert expected_calibration_error(y, proba, n_bins=5) == pytest.approx(
        0.4 * 2 / 4 + 0.3 / 4 + 0.5 / 4
    )
    assert maximum_calibration_error(y, proba, n_bins=5) == pytest.approx(0.5)


def test_perfect_and_worst_calibration():
    # always right at confidence 1: ECE 0; always wrong at confidence 1: ECE 1
    proba = np.eye(3)[[0, 1, 2, 0]]
    assert expected_calibration_error([0, 1, 2, 0], proba) == pytest.approx(0.0, abs=1e-12)
    assert expected_calibration_error([1, 2, 0, 1], proba) == pytest.approx(1.0)


@pytest.mark.parametrize("n_bins", [1, 10, 15])
def test_ece_mce_match_netcal_multiclass_and_numpy_reference(n_bins):
    rng = np.random.default_rng(0)
    proba = _random_proba(rng, 500, 4)
    # labels drawn from the probabilities, so the model is roughly calibrated but not exactly
    y = np.array([rng.choice(4, p=p) for p in proba])
    ece = expected_calibration_error(y, proba, n_bins=n_bins)
    mce = maximum_calibration_error(y, proba, n_bins=n_bins)
    # netcal's own multi-class path (argmax and max taken by netcal)
    assert ece == pytest.approx(ECE(bins=n_bins).measure(proba, y), rel=1e-10)
    assert mce == pytest.approx(MCE(bins=n_bins).measure(proba, y), rel=1e-10)
    ref_ece, ref_mce = _reference_ece_mce(proba.max(1), proba.argmax(1) == y, n_bins)
    assert ece == pytest.approx(ref_ece, rel=1e-10)
    assert mce == pytest.approx(ref_mce, rel=1e-10)


def test_ece_is_top_label_when_few_labels_present():
    # netcal alone reads "<= 2 distinct labels" as a binary problem; top-label ECE must not
    rng = np.random.default_rng(1)
    proba = _random_proba(rng, 200, 5)
    y = rng.integers(0, 2, size=200)
    ref_ece, _ = _reference_ece_mce(proba.max(1), proba.argmax(1) == y, 15)
    assert expected_calibration_error(y, proba) == pytest.approx(ref_ece, rel=1e-10)


def test_binary_ece_is_top_label():
    rng = np.random.default_rng(2)
    p1 = rng.uniform(size=300)
    proba = np.column_stack([1 - p1, p1])
    y = (rng.uniform(size=300) < p1**2).astype(int)
    ref_ece, _ = _reference_ece_mce(proba.max(1), proba.argmax(1) == y, 10)
    assert expected_calibration_error(y, proba, n_bins=10) == pytest.approx(ref_ece, rel=1e-10)


def test_classwise_ece_matches_reference():
    rng = np.random.default_rng(3)
    proba = _random_proba(rng, 400, 3, sharpness=1.5)
    y = rng.integers(0, 3, size=400)
    expected = np.mean(
        [_reference_ece_mce(proba[:, k], (y == k).astype(float), 15)[0] for k in range(3)]
    )
    assert classwise_calibration_error(y, proba) == pytest.approx(expected, rel=1e-10)


def test_classes_map_labels_to_columns():
    rng = np.random.default_rng(4)
    proba = _random_proba(rng, 100, 3)
    y = rng.integers(0, 3, size=100)
    classes = np.array(["cat", "dog", "emu"])
    for metric in (
        expected_calibration_error,
        maximum_calibration_error,
        classwise_calibration_error,
    ):
        assert metric(classes[y], proba, classes=classes) == pytest.approx(metric(y, proba))
    # classes order matters: column k is classes[k]
    shuffled = np.array(["dog", "cat", "emu"])
    remapped = np.array([1, 0, 2])[y]
    assert expected_calibration_error(classes[y], proba, classes=shuffled) == pytest.approx(
        expected_calibration_error(remapped, proba)
    )


@pytest.mark.parametrize(
    "y, proba, kwargs, match",
    [
        (["a", "b"], [[0.5, 0.5], [0.2, 0.8]], {}, "column indices"),
        ([0, 3], [[0.5, 0.5], [0.2, 0.8]], {}, "column indices"),
        ([0.5, 1], [[0.5, 0.5], [0.2, 0.8]], {}, "column indices"),
        (["a", "z"], [[0.5, 0.5], [0.2, 0.8]], {"classes": ["a", "b"]}, "'z'"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"classes": ["a", "b", "c"]}, "3 entries"),
        ([0, 1], [0.5, 0.8], {}, "2-D"),
        ([0], [[0.5, 0.5], [0.2, 0.8]], {}, "one label per row"),
        ([0, 1], [[1.5, -0.5], [0.2, 0.8]], {}, r"\[0, 1\]"),
        ([0, 1], [[np.nan, 0.5], [0.2, 0.8]], {}, "finite"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"n_bins": 0}, "n_bins"),
        # issue #14: rows that are no distribution, repeated classes, a huge n_bins
        ([0, 1], [[0.5, 0.4], [0.2, 0.8]], {}, "row 0 sums to 0.9"),
        ([0, 1], [[0.9, 0.9], [0.2, 0.8]], {}, "row 0 sums to 1.8"),
        (["a", "a"], [[0.5, 0.5], [0.2, 0.8]], {"classes": ["a", "a"]}, r"\['a'\] occur more"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"n_bins": 10**9}, "at most 10,000"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"n_bins": True}, "n_bins"),
    ],
)
def test_calibration_input_errors(y, proba, kwargs, match):
    for metric in (expected_calibration_error, maximum_calibration_error):
        with pytest.raises(ValueError, match=match):
            metric(y, proba, **kwargs)


def test_float32_rounding_of_predict_proba_is_accepted():
    rng = np.random.default_rng(0)
    proba = torch.softmax(torch.randn(500, 10, generator=torch.Generator().manual_seed(0)), 1)
    y = rng.integers(0, 10, 500)
    assert np.abs(proba.numpy().sum(1) - 1).max() > 0  # float32 rows do not sum exactly to 1
    assert 0 <= expected_calibration_error(y, proba.numpy()) <= 1


def test_ece_scorer_negates_and_works_in_grid_search():
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = LogisticRegression(max_iter=500).fit(X, labels)
    expected = expected_calibration_error(labels, clf.predict_proba(X), classes=clf.classes_)
    assert expected > 0
    assert ece_scorer(clf, X, labels) == pytest.approx(-expected)
    assert mce_scorer(clf, X, labels) == pytest.approx(
        -maximum_calibration_error(labels, clf.predict_proba(X), classes=clf.classes_)
    )
    search = GridSearchCV(
        LogisticRegression(max_iter=500), {"C": [0.01, 1.0]}, scoring=ece_scorer, cv=3
    ).fit(X, labels)
    assert np.all(search.cv_results_["mean_test_score"] <= 0)


def test_ece_scorer_with_a_library_estimator(small_blobs):
    from ebmclassifier import NGEBMClassifier

    X, y = small_blobs
    labels = np.array(["a", "b", "c"])[y]
    search = GridSearchCV(
        NGEBMClassifier(max_epochs=3, random_state=0, module__hidden_sizes=(16,)),
        {"beta": [0.0, 0.5]},
        scoring=ece_scorer,
        cv=2,
    ).fit(X, labels)
    best = search.best_estimator_
    expected = expected_calibration_error(labels, best.predict_proba(X), classes=best.classes_)
    assert ece_scorer(best, X, labels) == pytest.approx(-expected)
    assert search.best_score_ <= 0


# ----------------------------------------------------------------------------- OOD


def _reference_aupr(scores, positive):
    """Trapezoidal area under precision(recall) from thresholds at every distinct score."""
    points = [(0.0, 1.0)]
    for t in np.unique(scores)[::-1]:
        flagged = scores >= t
        tp = np.sum(flagged & positive)
        points.append((tp / positive.sum(), tp / flagged.sum()))
    recall, precision = np.array(points).T
    return np.trapezoid(precision, recall)


def test_ood_metrics_match_references():
    rng = np.random.default_rng(5)
    scores_in = rng.normal(0.0, 1.0, size=300)
    scores_out = rng.normal(1.0, 1.5, size=200)
    m = ood_metrics(scores_in, scores_out)
    scores = np.concatenate([scores_in, scores_out])
    is_ood = np.r_[np.zeros(300, bool), np.ones(200, bool)]
    assert m["auroc"] == pytest.approx(roc_auc_score(is_ood, scores))
    assert m["aupr_out"] == pytest.approx(_reference_aupr(scores, is_ood))
    assert m["aupr_in"] == pytest.approx(_reference_aupr(-scores, ~is_ood))
    # brute force, pytorch-ood's (OOD positive): lowest FPR over thresholds that flag >= 95%
    # of the OOD samples (flagged: score >= t)
    fprs = [np.mean(scores_in >= t) for t in scores if np.mean(scores_out >= t) >= 0.95]
    assert m["fpr95_out"] == pytest.approx(min(fprs))
    # brute force, the papers' (in-distribution positive): lowest share of OOD kept over
    # thresholds that keep >= 95% of the in-distribution samples (kept: score <= t)
    kept = [np.mean(scores_out <= t) for t in scores if np.mean(scores_in <= t) >= 0.95]
    assert m["fpr95_in"] == pytest.approx(min(kept))
    assert m["fpr95"] == m["fpr95_in"]


def test_fpr95_constructed_case():
    # 19 of 20 OOD scores (exactly 95%) lie above 0.9, one is hidden at 0; in-distribution
    # scores are 0.00 .. 0.99, of which 0.91 .. 0.99 (9 of 100) are >= the threshold 0.905.
    scores_in = np.arange(100) / 100
    scores_out = np.r_[0.905 + 0.005 * np.arange(19), 0.0]
    assert ood_metrics(scores_in, scores_out)["fpr95_out"] == pytest.approx(0.09)


def test_fpr95_in_constructed_case():
    # The papers' convention (issue #26): keep 95 of the 100 in-distribution scores 0.00 ..
    # 0.99, i.e. threshold 0.94; of the 20 OOD scores 0.50, 0.55, ..., 1.45 those <= 0.94
    # (0.50 .. 0.90, nine of them) are kept: FPR 9 / 20.
    scores_in = np.arange(100) / 100
    scores_out = 0.5 + 0.05 * np.arange(20)
    assert threshold_at_tpr(scores_in, 0.95) == pytest.approx(0.94)
    m = ood_metrics(scores_in, scores_out)
    assert m["fpr95_in"] == pytest.approx(9 / 20) and m["fpr95"] == m["fpr95_in"]
    # pytorch-ood's on the same scores: flag 19 of 20 OOD scores (>= 0.55): 45 of 100 in-dist.
    assert m["fpr95_out"] == pytest.approx(0.45)


def test_the_two_fpr95_conventions_differ_and_mirror():
    # OOD positive on (in, out) is in-distribution positive on the mirrored problem
    # (-out, -in): the OOD samples become the ones to keep. Up to the tie rule, they agree.
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=400), rng.normal(1.0, 1.5, size=300)
    assert ood_metrics(a, b)["fpr95_out"] == pytest.approx(ood_metrics(-b, -a)["fpr95_in"])
    assert ood_metrics(a, b)["fpr95_in"] != pytest.approx(ood_metrics(a, b)["fpr95_out"])


@pytest.mark.parametrize(
    "scores, tpr, expected",
    [([0.4, 0.1, 0.3, 0.2], 0.75, 0.3), ([0.4, 0.1, 0.3, 0.2], 0.76, 0.4),
     ([0.4, 0.1, 0.3, 0.2], 0.01, 0.1), (list(range(100)), 0.9, 89), ([5.0], 0.95, 5.0)],
)  # fmt: skip
def test_threshold_at_tpr_is_the_kth_smallest(scores, tpr, expected):
    # k = ceil(tpr * n): 0.75 * 4 = 3 -> 3rd smallest; 0.76 * 4 = 3.04 -> 4th; 0.9 * 100
    # rounds to 90.00000000000001 in floating point and still means the 90th
    t = threshold_at_tpr(scores, tpr)
    assert t == expected
    assert np.mean(np.asarray(scores) <= t) >= tpr  # it keeps at least tpr


@pytest.mark.parametrize("tpr", [0, 1, 1.5, -0.1, True, "0.95", float("nan")])
def test_threshold_at_tpr_refuses_a_bad_tpr(tpr):
    with pytest.raises(ValueError, match="tpr must be a float in the open interval"):
        threshold_at_tpr([0.1, 0.2], tpr)


def test_calibrate_ood_uses_threshold_at_tpr():
    from sklearn.datasets import make_blobs

    from ebmclassifier import NGEBMClassifier

    X, y = make_blobs(120, n_features=4, centers=3, random_state=0)
    clf = NGEBMClassifier(max_epochs=2, random_state=0).fit(X[:80], y[:80])
    for method in ("energy", "max_softmax", "approx_mass"):
        clf.calibrate_ood(X[80:], tpr=0.9, method=method)
        scores = clf.score_ood(X[80:], method=method)
        assert clf.ood_threshold_ == threshold_at_tpr(scores, 0.9)
        assert clf.ood_threshold_ == np.sort(scores)[35]  # ceil(0.9 * 40) = 36th smallest


def test_ood_metrics_perfect_and_reversed():
    perfect = ood_metrics([0.0, 0.1, 0.2], [1.0, 2.0])
    assert perfect == pytest.approx({"auroc": 1.0, "aupr_in": 1.0, "aupr_out": 1.0, "fpr95": 0.0,
                                     "fpr95_in": 0.0, "fpr95_out": 0.0})  # fmt: skip
    # oriented the wrong way: every in-distribution sample is flagged before any OOD one
    reversed_ = ood_metrics([1.0, 2.0], [0.0, 0.1, 0.2])
    assert reversed_["auroc"] == pytest.approx(0.0)
    assert reversed_["fpr95"] == reversed_["fpr95_in"] == reversed_["fpr95_out"] == 1.0


def test_ood_metrics_aupr_in_is_aupr_out_of_the_mirrored_problem():
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=50), rng.normal(0.5, size=70)
    assert ood_metrics(a, b)["aupr_in"] == pytest.approx(ood_metrics(-b, -a)["aupr_out"])


@pytest.mark.parametrize(
    "scores_in, scores_out", [([], [1.0]), ([0.0, np.nan], [1.0]), ([[0.0]], [1.0])]
)
def test_ood_metrics_input_errors(scores_in, scores_out):
    with pytest.raises(ValueError, match="scores_in"):
        ood_metrics(scores_in, scores_out)


def test_ood_metrics_accepts_tensors():
    m = ood_metrics(torch.tensor([0.0, 0.5]), torch.tensor([1.0, 0.2]))
    assert m["auroc"] == pytest.approx(0.75)


# ----------------------------------------------------------------------- selective classification


def _aurc_of_one_order(error_in_order):
    """Geifman et al.'s sum for one ranking: mean over k of the error rate of the top k."""
    errors = np.asarray(error_in_order, dtype=float)
    return np.mean([errors[:k].sum() / k for k in range(1, errors.size + 1)])


def test_risk_coverage_and_aurc_by_hand():
    # confidences 0.9 (right), 0.8 (wrong), 0.8 (right), 0.6 (wrong)
    y_true, y_pred, confidence = [0, 1, 1, 0], [0, 0, 1, 1], [0.9, 0.8, 0.8, 0.6]
    coverage, risk, thresholds = risk_coverage_curve(y_true, y_pred, confidence)
    np.testing.assert_allclose(coverage, [1 / 4, 3 / 4, 1])
    np.testing.assert_allclose(risk, [0, 1 / 3, 1 / 2])
    np.testing.assert_allclose(thresholds, [0.9, 0.8, 0.6])
    # k = 1..4: 0/1, (0 + 1/2)/2 (half an error expected from the tie), 1/3, 2/4
    assert aurc(y_true, y_pred, confidence) == pytest.approx((0 + 1 / 4 + 1 / 3 + 1 / 2) / 4)
    assert aurc(y_true, y_pred, confidence) == pytest.approx(13 / 48)


def test_aurc_without_ties_is_the_plain_sum():
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, 3, 50)
    y_pred = np.where(rng.random(50) < 0.7, y_true, (y_true + 1) % 3)
    confidence = rng.random(50)
    errors = (y_true != y_pred)[np.argsort(-confidence)]
    assert aurc(y_true, y_pred, confidence) == pytest.approx(_aurc_of_one_order(errors))
    coverage, risk, _ = risk_coverage_curve(y_true, y_pred, confidence)
    np.testing.assert_allclose(coverage, np.arange(1, 51) / 50)
    assert aurc(y_true, y_pred, confidence) == pytest.approx(risk.mean())


def test_aurc_with_ties_is_the_mean_over_tie_orders():
    import itertools

    confidence = np.array([0.9, 0.5, 0.5, 0.5, 0.2, 0.2, 0.7])
    error = np.array([1, 0, 1, 1, 0, 1, 0])
    orders = [
        p for p in itertools.permutations(range(7)) if np.all(np.diff(confidence[list(p)]) <= 0)
    ]
    assert len(orders) == 3 * 2 * 2 * 1  # 3! orders of the 0.5 group times 2! of the 0.2 group
    expected = np.mean([_aurc_of_one_order(error[list(p)]) for p in orders])
    y_true = np.zeros(7, dtype=int)
    assert aurc(y_true, error, confidence) == pytest.approx(expected, rel=1e-12)
    # and so it does not depend on the order the samples come in
    shuffled = np.random.default_rng(1).permutation(7)
    assert aurc(y_true, error[shuffled], confidence[shuffled]) == pytest.approx(expected)


def test_selective_metrics_from_probabilities():
    proba = np.array([[0.7, 0.2, 0.1], [0.1, 0.5, 0.4], [0.3, 0.3, 0.4], [0.05, 0.9, 0.05]])
    labels = np.array(["a", "b", "c"])
    y_true = np.array(["a", "c", "c", "b"])
    y_pred = labels[proba.argmax(axis=1)]
    expected = aurc(y_true, y_pred, proba.max(axis=1))
    assert aurc(y_true, proba, classes=labels) == pytest.approx(expected)
    by_margin = np.sort(proba, axis=1)[:, -1] - np.sort(proba, axis=1)[:, -2]
    assert aurc(y_true, proba, by_margin, classes=labels) == pytest.approx(
        aurc(y_true, y_pred, by_margin)
    )
    curve = risk_coverage_curve(y_true, proba, classes=labels)
    for got, want in zip(
        curve, risk_coverage_curve(y_true, y_pred, proba.max(axis=1)), strict=True
    ):
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize(
    "args, match",
    [
        (([0, 1], [0, 1]), "confidence is needed"),
        (([0, 1], [0, 1], [0.5]), "confidence must be a 1-D array of 2"),
        (([0, 1], [0, 1], [0.5, np.nan]), "non-finite"),
        (([0, 1, 1], [0, 1]), "same shape"),
        (([], [], []), "non-empty"),
    ],
)
def test_selective_metrics_bad_input(args, match):
    for metric in (aurc, risk_coverage_curve):
        with pytest.raises(ValueError, match=match):
            metric(*args)
