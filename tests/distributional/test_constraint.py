"""DistributionalConstraint and its functional core (issue #25).

References: finite differences for the dual's gradient and Hessian, a direct primal solve
(minimum KL under the constraints, scipy's SLSQP), quapy's EMQ and abstention's EM for the
priors, a hand computation for the Bayes correction, fairlearn's demographic parity metric.
"""

from __future__ import annotations

import pickle
import warnings
import zipfile

import numpy as np
import pytest
from scipy import optimize
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ebmclassifier import DistributionalConstraint, NGEBMClassifier, load
from ebmclassifier.distributional import (
    bayes_correction,
    bbse_priors,
    check_reachable,
    demographic_parity,
    dual_objective,
    em_priors,
    feasibility_margin,
    solve_dual,
    tilted_log_proba,
)

TOL = 1e-6


@pytest.fixture(scope="module")
def data():
    X, y = make_blobs(300, n_features=4, centers=3, cluster_std=2.5, random_state=0)
    clf = LogisticRegression().fit(X[:200], y[:200])
    return clf, X[200:], y[200:]


def _phi_random(seed=0, n_classes=3):
    """A smooth feature of (x, y), pickle-safe through a module-level class."""
    return _Linear(np.random.default_rng(seed).normal(size=(4, n_classes)))


class _Linear:
    def __init__(self, weights):
        self.weights = weights

    def __call__(self, X):
        return np.tanh(np.asarray(X) @ self.weights)


def _moments(model, X, constraints):
    proba = model.predict_proba(X)
    return np.array([np.mean(np.sum(proba * phi(X), axis=1)) for phi, _ in constraints])


# ---------------------------------------------------------------- the functional core


def test_dual_gradient_and_hessian_match_finite_differences():
    rng = np.random.default_rng(0)
    log_p = np.log(rng.dirichlet(np.ones(4), size=6))
    features = rng.normal(size=(6, 4, 3))
    target = rng.normal(size=3) * 0.1
    lam = rng.normal(size=3)
    _, gradient, hessian = dual_objective(lam, log_p, features, target)
    numeric = optimize.approx_fprime(
        lam, lambda v: dual_objective(v, log_p, features, target)[0], 1e-7
    )
    np.testing.assert_allclose(gradient, numeric, atol=1e-6)
    numeric_h = np.stack(
        [
            optimize.approx_fprime(
                lam, lambda v, k=k: dual_objective(v, log_p, features, target)[1][k], 1e-7
            )
            for k in range(3)
        ]
    )
    np.testing.assert_allclose(hessian, numeric_h, atol=1e-5)
    assert np.all(np.linalg.eigvalsh(hessian) > -1e-12)


def _primal_solve(proba, features, target):
    """min mean_i KL(q_i || p_i) under the moment constraints, by SLSQP on q directly."""
    n, k = proba.shape

    def kl(flat):
        q = np.clip(flat.reshape(n, k), 1e-300, None)
        return np.sum(q * (np.log(q) - np.log(proba))) / n

    def kl_grad(flat):
        q = np.clip(flat.reshape(n, k), 1e-300, None)
        return ((np.log(q) - np.log(proba) + 1) / n).ravel()

    constraints = [
        {"type": "eq", "fun": lambda f: f.reshape(n, k).sum(axis=1) - 1},
        {
            "type": "eq",
            "fun": lambda f: np.einsum("iy,iym->m", f.reshape(n, k), features) / n - target,
        },
    ]
    result = optimize.minimize(
        kl,
        proba.ravel(),
        jac=kl_grad,
        method="SLSQP",
        bounds=[(0, 1)] * (n * k),
        constraints=constraints,
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert result.success, result.message
    return result.x.reshape(n, k)


@pytest.mark.parametrize("solver", ["trust-exact", "newton-cg", "l-bfgs-b"])
def test_projection_equals_direct_primal_solve(solver):
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(3) * 2, size=5)
    features = rng.normal(size=(5, 3, 2))
    # a target reached by some strictly positive posteriors: the moments of a random q
    q = rng.dirichlet(np.ones(3), size=5)
    target = np.einsum("iy,iym->m", q, features) / 5
    lam, _, residual = solve_dual(np.log(proba), features, target, solver=solver, tol=1e-10)
    adapted = np.exp(tilted_log_proba(np.log(proba), features, lam))
    np.testing.assert_allclose(adapted, _primal_solve(proba, features, target), atol=TOL)
    assert residual < TOL


def test_em_priors_equal_quapy_emq():
    quapy_aggregative = pytest.importorskip(
        "quapy.method.aggregative", reason="quapy does not import: no EMQ to compare with"
    )
    rng = np.random.default_rng(2)
    proba = rng.dirichlet(np.ones(4), size=200) * 0.5 + np.eye(4)[rng.integers(0, 4, 200)] * 0.5
    train = np.array([0.4, 0.3, 0.2, 0.1])
    ours, _ = em_priors(proba, train, pseudo_count=0.0, tol=1e-13, max_iter=100_000)
    theirs, _ = quapy_aggregative.EMQ.EM(train, proba, epsilon=1e-13)
    np.testing.assert_allclose(ours, theirs, atol=TOL)


def test_em_priors_equal_abstention_em():
    label_shift = pytest.importorskip(
        "abstention.label_shift", reason="abstention does not import: no EM to compare with"
    )
    rng = np.random.default_rng(3)
    proba = rng.dirichlet(np.ones(3) * 0.7, size=150)
    # held-out labels whose shares are the training priors
    valid_labels = np.eye(3)[np.repeat([0, 1, 2], [30, 20, 50])]
    train = valid_labels.mean(axis=0)
    adapter = label_shift.EMImbalanceAdapter(
        estimate_priors_from_valid_labels=True, tolerance=1e-13, max_iterations=100_000
    )
    func = adapter(
        tofit_initial_posterior_probs=proba,
        valid_posterior_probs=rng.dirichlet(np.ones(3), size=100),
        valid_labels=valid_labels,
    )
    ours, _ = em_priors(proba, train, pseudo_count=0.0, tol=1e-13, max_iter=100_000)
    np.testing.assert_allclose(ours, func.multipliers * train, atol=TOL)
    np.testing.assert_allclose(bayes_correction(proba, train, ours), func(proba), atol=TOL)


def test_bayes_correction_by_hand():
    proba = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    train, new = np.array([0.5, 0.25, 0.25]), np.array([0.1, 0.1, 0.8])
    # row 0: 0.2*0.2, 0.3*0.4, 0.5*3.2 = 0.04, 0.12, 1.6 -> / 1.76
    expected = np.array([[0.04, 0.12, 1.6], [0.12, 0.12, 0.32]])
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(bayes_correction(proba, train, new), expected, rtol=1e-12)


def test_bbse_recovers_priors_of_a_perfect_confusion():
    y = np.repeat([0, 1, 2], 50)
    rng = np.random.default_rng(4)
    pred = np.where(rng.random(150) < 0.8, y, (y + 1) % 3)
    target_y = np.repeat([0, 1, 2], [10, 30, 60])
    target_pred = np.where(rng.random(100) < 0.8, target_y, (target_y + 1) % 3)
    joint = np.zeros((3, 3))
    np.add.at(joint, (pred, y), 1 / 150)
    b = np.bincount(target_pred, minlength=3) / 100
    expected = np.linalg.solve(joint, b) / 3
    expected = np.clip(expected, 0, None) / np.clip(expected, 0, None).sum()
    np.testing.assert_allclose(bbse_priors(y, pred, target_pred, 3), expected, atol=1e-12)


def test_bbse_against_abstention_clips_the_weight_of_a_class_never_predicted():
    label_shift = pytest.importorskip(
        "abstention.label_shift", reason="abstention does not import: no BBSE to compare with"
    )
    y = np.repeat([0, 1, 2], 100)
    rng = np.random.default_rng(0)
    pred = np.where(rng.random(300) < 0.8, y, (y + 1) % 3)
    target_pred = np.repeat([0, 1], [70, 30])  # class 2 never predicted: w = C^-1 b < 0 there
    eye = np.eye(3)
    weights = label_shift.BBSEImbalanceAdapter()(
        valid_labels=eye[y],
        tofit_initial_posterior_probs=eye[target_pred],
        valid_posterior_probs=eye[pred],
    ).multipliers  # its w, negative values set to 0
    expected = weights * np.bincount(y) / len(y)
    np.testing.assert_allclose(bbse_priors(y, pred, target_pred, 3), expected / expected.sum())
    assert expected[2] == 0


def test_bbse_gives_a_class_absent_from_the_heldout_labels_prior_zero():
    # a perfect confusion on classes 0, 1: w(y) = target share / held-out share of y
    # = (0.25 / 0.5, 0.75 / 0.5), priors w(y) * 0.5; class 2, never held out, gets 0
    y, pred = np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1])
    priors = bbse_priors(y, pred, np.array([0, 1, 1, 1]), n_classes=3)
    np.testing.assert_allclose(priors, [0.25, 0.75, 0.0])


def test_check_reachable_alone_refuses_both_ends_and_takes_a_constant_features_one_value():
    log_p = np.log([[0.5, 0.5], [0.9, 0.1]])
    share0 = np.eye(2)[None, :, :1].repeat(2, 0)  # phi = 1[y = 0]: the mean share is in (0, 1)
    check_reachable(log_p, share0, [0.5], ["share"], joint=False)
    for end in (0.0, 1.0):  # reached only with an infinite lambda, which the error says
        match = f"target {end} of share.*strictly between.*no finite λ"
        with pytest.raises(ValueError, match=match):
            check_reachable(log_p, share0, [end], ["share"], joint=False)
    constant = np.full((2, 2, 1), 0.25)  # phi(x, y) = 0.25 whatever y: every q gives 0.25
    check_reachable(log_p, constant, [0.25], ["c"], joint=False)
    with pytest.raises(ValueError, match="target 0.3 of c.*reach only 0.25"):
        check_reachable(log_p, constant, [0.3], ["c"], joint=False)


def test_feasibility_margin_against_brute_force_one_hot():
    """Two samples, two classes: the achievable mean share of class 0 is (min, max)."""
    log_p = np.log(np.array([[0.5, 0.5], [1.0, 1e-300]]))
    log_p[1, 1] = -np.inf  # sample 1 gives class 1 probability 0: its q_1 is [1, 0]
    phi = np.eye(2)[None].repeat(2, 0)
    # share of class 0 = (q_0 + 1) / 2 with q_0 in (0, 1): reachable in (0.5, 1)
    assert feasibility_margin(log_p, phi, np.array([0.75, 0.25])) > 0.1
    assert feasibility_margin(log_p, phi, np.array([0.5, 0.5])) == 0.0
    assert feasibility_margin(log_p, phi, np.array([0.3, 0.7])) == -np.inf


# ---------------------------------------------------------------- the estimator


@pytest.mark.parametrize("solver", ["trust-exact", "newton-cg", "l-bfgs-b"])
def test_known_priors_are_met(data, solver):
    clf, X, _ = data
    priors = {0: 0.7, 1: 0.2, 2: 0.1}
    adapted = DistributionalConstraint(clf, priors=priors, solver=solver).fit(X)
    np.testing.assert_allclose(adapted.predict_proba(X).mean(axis=0), [0.7, 0.2, 0.1], atol=TOL)
    assert adapted.converged_ and adapted.residual_ < TOL
    np.testing.assert_allclose(adapted.prior_, [0.7, 0.2, 0.1])
    assert adapted.lambda_.shape == (3,)


def test_prior_zero_class_gets_probability_zero(data):
    clf, X, _ = data
    adapted = DistributionalConstraint(clf, priors={0: 0.0, 1: 0.5, 2: 0.5}).fit(X)
    proba = adapted.predict_proba(X)
    assert np.all(proba[:, 0] == 0) and adapted.lambda_[0] == -np.inf
    np.testing.assert_allclose(proba.mean(axis=0), [0, 0.5, 0.5], atol=TOL)
    assert set(adapted.predict(X)) <= {1, 2}


def test_general_constraints_and_priors_together(data):
    clf, X, _ = data
    phi = _phi_random()
    base_moment = _moments(clf, X, [(phi, 0)])[0]
    constraints = [(phi, base_moment + 0.05)]
    adapted = DistributionalConstraint(
        clf, priors={0: 0.4, 1: 0.4, 2: 0.2}, constraints=constraints
    ).fit(X)
    np.testing.assert_allclose(_moments(adapted, X, constraints), [base_moment + 0.05], atol=TOL)
    np.testing.assert_allclose(adapted.predict_proba(X).mean(axis=0), [0.4, 0.4, 0.2], atol=TOL)
    assert adapted.lambda_.shape == (4,)


def test_lambda_zero_when_targets_already_met(data):
    clf, X, _ = data
    mean = clf.predict_proba(X).mean(axis=0)
    adapted = DistributionalConstraint(clf, priors=dict(enumerate(mean))).fit(X)
    assert adapted.n_iter_ == 0
    np.testing.assert_allclose(adapted.lambda_, 0, atol=1e-12)
    np.testing.assert_allclose(adapted.predict_proba(X), clf.predict_proba(X), atol=1e-12)
    phi = _phi_random(1)
    constraints = [(phi, _moments(clf, X, [(phi, 0)])[0])]
    adapted = DistributionalConstraint(clf, constraints=constraints).fit(X)
    np.testing.assert_allclose(adapted.lambda_, 0, atol=1e-12)


def test_em_meets_its_priors_and_matches_bayes(data):
    clf, X, y = data
    rng = np.random.default_rng(0)
    others = np.flatnonzero(y != 0)
    keep = np.concatenate([np.flatnonzero(y == 0), others[rng.random(len(others)) < 0.2]])
    train = np.full(3, 1 / 3)  # make_blobs draws the three classes equally
    proj = DistributionalConstraint(clf, priors="em", train_priors=train, shift_test=False)
    proj.fit(X[keep])
    bayes = DistributionalConstraint(
        clf, priors="em", train_priors=train, method="bayes", shift_test=False
    )
    bayes.fit(X[keep])
    expected, _ = em_priors(clf.predict_proba(X[keep]), train, tol=1e-8)
    np.testing.assert_allclose(proj.prior_, expected)
    np.testing.assert_allclose(bayes.prior_, expected)
    # the projection meets the M step without the pseudo-count s: π' + s (π' - π) / n
    n, s = len(keep), proj.em_pseudo_count
    shares = expected + s * (expected - train) / n
    np.testing.assert_allclose(proj.predict_proba(X[keep]).mean(axis=0), shares, atol=TOL)
    np.testing.assert_allclose(proj.predict_proba(X), bayes.predict_proba(X), atol=1e-5)
    assert proj.prior_[0] > 0.5 and proj.em_n_iter_ > 0
    # maximum likelihood (s = 0): the average prediction on X is EM's priors themselves
    ml = DistributionalConstraint(
        clf, priors="em", train_priors=train, em_pseudo_count=0, shift_test=False
    )
    ml.fit(X[keep])
    np.testing.assert_allclose(ml.predict_proba(X[keep]).mean(axis=0), ml.prior_, atol=TOL)


def test_bayes_differs_from_projection_for_given_priors(data):
    clf, X, _ = data
    priors = {0: 0.6, 1: 0.3, 2: 0.1}
    bayes = DistributionalConstraint(
        clf, priors=priors, method="bayes", train_priors=[1 / 3] * 3
    ).fit(X)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(
        bayes.predict_proba(X), bayes_correction(proba, np.ones(3) / 3, np.array([0.6, 0.3, 0.1]))
    )
    # the Bayes correction does not match the average prediction on X; the projection does
    assert np.max(np.abs(bayes.predict_proba(X).mean(axis=0) - [0.6, 0.3, 0.1])) > 1e-3


def test_train_priors_from_class_prior_(data):
    from sklearn.naive_bayes import GaussianNB

    _, X, y = data
    nb = GaussianNB().fit(X, y)
    adapted = DistributionalConstraint(nb, priors={0: 0.2, 1: 0.2, 2: 0.6}, method="bayes").fit(X)
    np.testing.assert_allclose(
        adapted.predict_proba(X),
        bayes_correction(nb.predict_proba(X), nb.class_prior_, np.array([0.2, 0.2, 0.6])),
        atol=1e-12,
    )


def test_demographic_parity_against_fairlearn():
    metrics = pytest.importorskip("fairlearn.metrics", reason="fairlearn does not import")
    rng = np.random.default_rng(5)
    X, y = make_blobs(400, n_features=3, centers=2, cluster_std=3.0, random_state=1)
    group = (X[:, 0] + rng.normal(size=400) > np.median(X[:, 0])).astype(float)
    group[rng.random(400) < 0.2] = 2.0  # a third group
    Xg = np.c_[X, group]
    clf = LogisticRegression().fit(Xg[:200], y[:200])
    Xd = Xg[200:]

    def parity_difference(model):
        # fairlearn's selection rate of the expected predictions: each sample twice,
        # predicted 1 with weight p(1|x) and 0 with weight p(0|x)
        p1 = model.predict_proba(Xd)[:, 1]
        y_pred = np.r_[np.ones(200), np.zeros(200)]
        return metrics.demographic_parity_difference(
            y_pred,
            y_pred,
            sensitive_features=np.r_[Xd[:, 3], Xd[:, 3]],
            sample_weight=np.r_[p1, 1 - p1],
        )

    constraints = demographic_parity(Xd, 3, 1, clf.classes_)
    adapted = DistributionalConstraint(FrozenEstimator(clf), constraints=constraints).fit(Xd)
    assert parity_difference(clf) > 0.05
    assert parity_difference(adapted) < TOL
    assert len(constraints) == 2 and adapted.converged_


def test_pickle_clone_and_pipeline(data):
    clf, X, _ = data
    dc = DistributionalConstraint(FrozenEstimator(clf), constraints=[(_phi_random(), 0.0)])
    dc.fit(X)
    restored = pickle.loads(pickle.dumps(dc))
    np.testing.assert_array_equal(restored.predict_proba(X), dc.predict_proba(X))
    np.testing.assert_array_equal(clone(dc).fit(X).predict_proba(X), dc.predict_proba(X))
    # as the last step of a Pipeline fitted on unlabelled data, and over a Pipeline
    pipe = make_pipeline(
        DistributionalConstraint(FrozenEstimator(clf), priors="em", train_priors=[1 / 3] * 3)
    )
    assert pipe.fit(X).predict(X).shape == (100,)
    base = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, data[2])
    dc = DistributionalConstraint(base, priors={0: 0.5, 1: 0.25, 2: 0.25}).fit(X)
    np.testing.assert_allclose(dc.predict_proba(X).mean(axis=0), [0.5, 0.25, 0.25], atol=TOL)
    assert dc.score(X, data[2]) > 0.5


@pytest.fixture(scope="module")
def ngebm():
    X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    X = X.astype(np.float32)
    return NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0).fit(X, y), X


def test_energy_is_that_of_the_adapted_logits(ngebm):
    clf, X = ngebm
    adapted = DistributionalConstraint(clf, priors={0: 0.5, 1: 0.3, 2: 0.2}).fit(X)
    logits = clf.forward(X).double().numpy()
    expected = -np.log(np.exp(logits + adapted.lambda_).sum(axis=1))
    np.testing.assert_allclose(adapted.energy(X), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adapted.score_ood(X), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        adapted.score_ood(X, "max_softmax"), -adapted.predict_proba(X).max(axis=1)
    )
    with pytest.raises(ValueError, match="'method' argument"):
        adapted.score_ood(X, "approx_mass")
    assert not hasattr(DistributionalConstraint(LogisticRegression()), "energy")


@pytest.mark.parametrize("frozen", [False, True])
def test_save_and_load_without_pickle(ngebm, frozen, tmp_path):
    clf, X = ngebm
    base = FrozenEstimator(clf) if frozen else clf
    adapted = DistributionalConstraint(
        base, priors={0: 0.0, 1: 0.3, 2: 0.7}, train_priors=[0.2, 0.3, 0.5]
    ).fit(X)
    adapted.save(tmp_path / "adapted.ebm")
    restored = load(tmp_path / "adapted.ebm")
    np.testing.assert_array_equal(restored.predict_proba(X), adapted.predict_proba(X))
    np.testing.assert_array_equal(restored.energy(X), adapted.energy(X))
    assert isinstance(restored.estimator, FrozenEstimator) == frozen
    assert restored.get_params(deep=False)["priors"] == adapted.priors
    np.testing.assert_array_equal(restored.train_priors, [0.2, 0.3, 0.5])
    assert restored.lambda_[0] == -np.inf and restored.converged_ == adapted.converged_


def test_string_labels_and_a_saved_bayes_correction(ngebm, tmp_path):
    _, X = ngebm
    y = np.array(["ant", "bee", "cat"])[make_blobs(60, n_features=4, centers=3, random_state=0)[1]]
    clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0).fit(X, y)
    priors = {"ant": 0.2, "bee": 0.5, "cat": 0.3}
    adapted = DistributionalConstraint(
        clf, priors=priors, method="bayes", train_priors={"ant": 0.4, "bee": 0.4, "cat": 0.2}
    ).fit(X)
    expected = bayes_correction(
        clf.predict_proba(X), np.array([0.4, 0.4, 0.2]), np.array([0.2, 0.5, 0.3])
    )
    np.testing.assert_allclose(adapted.predict_proba(X), expected, rtol=1e-5)
    assert set(adapted.predict(X)) <= {"ant", "bee", "cat"}
    adapted.save(tmp_path / "bayes.ebm")
    restored = load(tmp_path / "bayes.ebm")
    np.testing.assert_array_equal(restored.predict_proba(X), adapted.predict_proba(X))
    assert restored.train_priors == adapted.train_priors and restored.method == "bayes"
    projected = DistributionalConstraint(clf, priors=priors).fit(X)
    np.testing.assert_allclose(projected.predict_proba(X).mean(axis=0), [0.2, 0.5, 0.3], atol=TOL)


def test_save_refuses_what_needs_pickle(data, ngebm, tmp_path):
    clf, X, _ = data
    with pytest.raises(ValueError, match="LogisticRegression. Pickle"):
        DistributionalConstraint(clf, priors={0: 0.2, 1: 0.2, 2: 0.6}).fit(X).save(tmp_path / "a")
    net, Xn = ngebm
    adapted = DistributionalConstraint(net, constraints=[(_phi_random(), 0.0)]).fit(Xn)
    with pytest.raises(ValueError, match="cannot write 'constraints'"):
        adapted.save(tmp_path / "b")
    with pytest.raises(ValueError, match="not a file written by .* or DistributionalConstraint"):
        (tmp_path / "c").write_bytes(b"not a zip")
        load(tmp_path / "c")


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"priors": {0: 0.5, 1: 0.3, 2: 0.3}}, "'priors'.*sum to 1"),
        ({"priors": {0: -0.1, 1: 0.6, 2: 0.5}}, "'priors'.*non-negative"),
        ({"priors": {0: 0.5, 1: 0.5, 7: 0.0}}, "unknown labels \\[7\\]"),
        ({"priors": {0: 0.5, 1: 0.5}}, "missing \\[2\\]"),
        ({"priors": "EM"}, "'priors' parameter"),
        ({}, "needs priors or constraints"),
        ({"priors": "em"}, "train_priors"),
        ({"priors": "em", "train_priors": [0.5, 0.5, 0]}, "positive for every class"),
        ({"priors": {0: 0.2, 1: 0.2, 2: 0.6}, "method": "bayes"}, "train_priors"),
        ({"constraints": [(_phi_random(), 0.0)], "method": "bayes"}, "'method'"),
        ({"constraints": [("phi", 0.0)]}, "'constraints'"),
        ({"constraints": [(lambda X: np.ones((len(X), 2)), 0.5)]}, "constraints\\[0\\].*shape"),
        ({"constraints": [(lambda X: np.full((len(X), 3), np.nan), 0.5)]}, "non-finite"),
        ({"constraints": [(_phi_random(), 5.0)]}, "target 5.0 of constraints\\[0\\]"),
        ({"tol": 0.0, "max_iter": 0, "solver": "bfgs"}, "'solver'(.|\n)*'tol'(.|\n)*'max_iter'"),
    ],
)
def test_bad_input_is_refused_at_fit(data, kwargs, match):
    clf, X, _ = data
    with pytest.raises(ValueError, match=match):
        DistributionalConstraint(clf, **kwargs).fit(X)


def test_joint_infeasibility_names_the_constraints(data):
    clf, X, _ = data

    def share0(X):
        return np.tile([1.0, 0.0, 0.0], (len(X), 1))

    def share_not0(X):
        return np.tile([0.0, 1.0, 1.0], (len(X), 1))

    # each alone is reachable; together the shares would sum to 1.4
    # the error names the pair and the fix
    match = "constraints\\[0\\], constraints\\[1\\] cannot be met together.*Relax one of them"
    with pytest.raises(ValueError, match=match):
        DistributionalConstraint(clf, constraints=[(share0, 0.7), (share_not0, 0.7)]).fit(X)


class _TableClassifier(ClassifierMixin, BaseEstimator):
    """p(y|x) read from a table by the row index in X[:, 0] (exact zeros allowed)."""

    def __init__(self, table):
        self.table = table

    def fit(self, X, y=None):
        self.classes_ = np.arange(np.asarray(self.table).shape[1])
        return self

    def predict_proba(self, X):
        return np.asarray(self.table)[np.asarray(X)[:, 0].astype(int)]


def test_boundary_target_is_refused_before_the_solve():
    # class 2 has probability 0 on sample 0 and 0.5 on sample 1: its share is in (0, 0.5)
    table = _TableClassifier([[0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]).fit(None)
    X = np.array([[0.0], [1.0]])
    adapted = DistributionalConstraint(table, priors={0: 0.45, 1: 0.45, 2: 0.1}).fit(X)
    np.testing.assert_allclose(adapted.predict_proba(X).mean(axis=0), [0.45, 0.45, 0.1], atol=TOL)
    assert adapted.predict_proba(X)[0, 2] == 0
    for share in (0.6, 0.5):  # beyond, and on, the boundary
        with pytest.raises(ValueError, match="priors\\[2\\] cannot be met"):
            DistributionalConstraint(
                table, priors={0: (1 - share) / 2, 1: (1 - share) / 2, 2: share}
            ).fit(X)
    # a sample whose only classes have prior 0
    with pytest.raises(ValueError, match="sample 0 of X"):
        DistributionalConstraint(table, priors={0: 0.0, 1: 0.0, 2: 1.0}).fit(X)


def test_unfitted_estimator_and_small_X(data):
    clf, X, _ = data
    with pytest.raises(NotFittedError, match="'estimator'.*must be fitted.*FrozenEstimator"):
        DistributionalConstraint(LogisticRegression(), priors="em").fit(X)
    for rows in (X[:0], X[:1]):
        with pytest.raises(ValueError, match="at least 2 samples"):
            DistributionalConstraint(clf, priors={0: 0.2, 1: 0.2, 2: 0.6}).fit(rows)


def test_early_stop_warns_with_the_residual(data):
    clf, X, _ = data
    with pytest.warns(ConvergenceWarning, match="residual of"):
        dc = DistributionalConstraint(clf, priors={0: 0.9, 1: 0.05, 2: 0.05}, max_iter=1)
        dc.fit(X)
    assert not dc.converged_
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DistributionalConstraint(clf, priors={0: 0.9, 1: 0.05, 2: 0.05}).fit(X)


def test_load_refuses_a_constraint_nested_as_the_base(ngebm, tmp_path):
    clf, X = ngebm
    adapted = DistributionalConstraint(clf, priors={0: 0.2, 1: 0.3, 2: 0.5}).fit(X)
    adapted.save(tmp_path / "inner.ebm")
    with zipfile.ZipFile(tmp_path / "inner.ebm") as archive:
        text = archive.read("distributional.json")
    with zipfile.ZipFile(tmp_path / "nested.ebm", "w") as archive:
        archive.writestr("distributional.json", text)
        archive.writestr("estimator.ebm", (tmp_path / "inner.ebm").read_bytes())
    with pytest.raises(ValueError, match="not a file of format 'ebmclassifier.saving'"):
        load(tmp_path / "nested.ebm")
    assert load(tmp_path / "inner.ebm").prior_.tolist() == [0.2, 0.3, 0.5]
