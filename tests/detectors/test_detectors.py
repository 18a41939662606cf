"""Post-hoc OOD detectors against hand computations, and the feature extraction they rely on."""

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from ebmclassifier import NGEBMClassifier
from ebmclassifier.detectors import (
    DETECTORS,
    KNNDetector,
    MahalanobisDetector,
    ViMDetector,
    fit_detector,
    last_layer_parameters,
    penultimate_features,
)
from ebmclassifier.metrics import ood_metrics

from ..precision import assert_close_f32


@pytest.fixture(scope="module")
def features():
    """Training features of three classes, test features and far-away OOD features."""
    rng = np.random.default_rng(0)
    centers = rng.normal(scale=4.0, size=(3, 5))
    mixing = rng.normal(size=(5, 5))  # a correlated, non-diagonal covariance
    y = np.repeat([0, 1, 2], 40)
    train = centers[y] + rng.normal(size=(120, 5)) @ mixing
    test = centers[np.repeat([0, 1, 2], 10)] + rng.normal(size=(30, 5)) @ mixing
    ood = rng.normal(scale=4.0, size=(30, 5)) + 12.0
    return train, y, test, ood


@pytest.fixture(scope="module")
def fitted_ce():
    """A small cross-entropy model on blobs: train and held-out inputs."""
    rng = np.random.default_rng(1)
    centers = np.array([[3.0, 0, 0, 0], [-3.0, 0, 0, 0], [0, 3.0, 0, 0]])
    y = rng.integers(0, 3, size=90)
    X = (centers[y] + rng.normal(size=(90, 4))).astype(np.float32)
    clf = NGEBMClassifier(
        beta=0, max_epochs=5, module__hidden_sizes=(16, 6), batch_size=32, random_state=0
    ).fit(X[:60], y[:60])
    return clf, X[:60], y[:60], X[60:]


# ----------------------------------------------------------------------------- Mahalanobis


def _reference_mahalanobis(train, y, test):
    """Lee et al. Eqs. 1-2 written out: class means, tied covariance /N, min squared distance."""
    classes = np.unique(y)
    means = np.array([train[y == c].mean(axis=0) for c in classes])
    scatter = sum(np.outer(x - means[c], x - means[c]) for x, c in zip(train, y, strict=True))
    precision = np.linalg.inv(scatter / len(train))
    distances = [[(x - m) @ precision @ (x - m) for m in means] for x in test]
    return np.min(distances, axis=1), means, scatter / len(train)


def test_mahalanobis_matches_the_paper_computed_by_hand(features):
    train, y, test, ood = features
    expected, means, covariance = _reference_mahalanobis(train, y, np.r_[test, ood])
    detector = MahalanobisDetector().fit(train, y)
    np.testing.assert_allclose(detector.means_, means, rtol=1e-12)
    np.testing.assert_allclose(detector.covariance_, covariance, rtol=1e-10)
    np.testing.assert_allclose(detector.score_ood(np.r_[test, ood]), expected, rtol=1e-8)


def test_mahalanobis_ledoit_wolf_shrinks_the_shared_covariance(features):
    train, y, test, _ = features
    empirical = MahalanobisDetector().fit(train, y).covariance_
    shrunk = MahalanobisDetector(covariance="ledoit_wolf").fit(train, y)
    delta = shrunk.covariance_estimator_.shrinkage_
    assert 0 < delta < 1
    mu = np.trace(empirical) / len(empirical)
    target = (1 - delta) * empirical + delta * mu * np.eye(len(empirical))
    np.testing.assert_allclose(shrunk.covariance_, target, rtol=1e-10)
    means = shrunk.means_
    precision = np.linalg.inv(target)
    expected = [min((x - m) @ precision @ (x - m) for m in means) for x in test]
    np.testing.assert_allclose(shrunk.score_ood(test), expected, rtol=1e-8)


def test_mahalanobis_takes_any_labels(features):
    train, y, test, _ = features
    names = np.array(["cat", "dog", "owl"])[y]
    by_name = MahalanobisDetector().fit(train, names)
    assert by_name.classes_.tolist() == ["cat", "dog", "owl"]
    np.testing.assert_allclose(
        by_name.score_ood(test), MahalanobisDetector().fit(train, y).score_ood(test)
    )


# ----------------------------------------------------------------------------- KNN


def test_knn_is_the_kth_neighbour_distance_by_brute_force(features):
    train, _, test, ood = features
    queries = np.r_[test, ood]
    z_train = train / np.linalg.norm(train, axis=1, keepdims=True)
    z = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    for k in (1, 7):
        brute = np.array([np.sort(np.linalg.norm(z_train - q, axis=1))[k - 1] for q in z])
        detector = KNNDetector(n_neighbors=k).fit(train)
        np.testing.assert_allclose(detector.score_ood(queries), brute, rtol=1e-10, atol=1e-12)


def test_knn_ignores_the_feature_length():
    train = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    detector = KNNDetector(n_neighbors=2).fit(train)
    np.testing.assert_allclose(detector.score_ood([[2.0, 2.0]]), detector.score_ood([[0.1, 0.1]]))


# ----------------------------------------------------------------------------- ViM


def _reference_vim(train, test, W, b, D):
    """ViM by numpy: origin, principal subspace from an SVD, alpha, the virtual-logit softmax."""
    origin = np.linalg.lstsq(W, -b, rcond=None)[0]  # minimum-norm solution of W o + b = 0
    _, _, vt = np.linalg.svd(train - origin, full_matrices=True)
    principal = vt[:D].T  # top-D right singular vectors = eigenvectors of (X - o)^T (X - o)

    def residual(x):
        centred = x - origin
        return np.linalg.norm(centred - centred @ principal @ principal.T, axis=1)

    alpha = (train @ W.T + b).max(axis=1).mean() / residual(train).mean()
    logits = test @ W.T + b
    virtual = alpha * residual(test)
    vim_probability = np.exp(virtual) / (np.exp(virtual) + np.exp(logits).sum(axis=1))
    return vim_probability, origin, alpha


def test_vim_matches_the_paper_on_a_tiny_case():
    rng = np.random.default_rng(3)
    train = rng.normal(size=(30, 4)) * [3.0, 2.0, 0.5, 0.2] + [1.0, -1.0, 0.0, 0.5]
    test = rng.normal(size=(8, 4)) * 2.0
    W, b = rng.normal(size=(3, 4)), rng.normal(size=3)
    probability, origin, alpha = _reference_vim(train, test, W, b, D=2)
    vim = ViMDetector(n_components=2).fit(train, weight=W, bias=b)
    np.testing.assert_allclose(vim.origin_, origin, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(W @ vim.origin_ + b, 0, atol=1e-10)  # logits vanish at o
    assert vim.alpha_ == pytest.approx(alpha, rel=1e-10)
    # score_ood is the log-odds of the paper's ViM probability
    scores = vim.score_ood(test)
    np.testing.assert_allclose(1 / (1 + np.exp(-scores)), probability, rtol=1e-9)
    np.testing.assert_allclose(
        scores, np.log(probability) - np.log1p(-probability), rtol=1e-8, atol=1e-10
    )


def test_vim_residual_is_the_distance_to_the_principal_plane():
    # b = 0 puts o at 0; the training set's second moment is diag(50, 32, 0.02, 0.08), so the
    # principal plane (D = 2) is the first two axes and the residual of x is |(x_3, x_4)|.
    train = np.concatenate([np.diag([5.0, 4.0, 0.1, 0.2]), -np.diag([5.0, 4.0, 0.1, 0.2])])
    W, b = np.array([[1.0, 0.5, 0, 0], [-1.0, 0, 0, 0]]), np.zeros(2)
    vim = ViMDetector(n_components=2).fit(train, weight=W, bias=b)
    # max logits of the 8 rows: 5, 2, 0, 0, 5, 0, 0, 0 -> mean 1.5; residuals: mean 0.6 / 8
    assert vim.alpha_ == pytest.approx(1.5 / 0.075, rel=1e-12)
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    expected = 20.0 * 5.0 - np.log(np.exp(2.0) + np.exp(-1.0))
    np.testing.assert_allclose(vim.score_ood(x), [expected], rtol=1e-12)


def test_vim_default_subspace_is_half_the_features(features):
    train, *_ = features
    W, b = np.ones((2, 5)), np.zeros(2)
    assert ViMDetector().fit(train, weight=W, bias=b).n_components_ == 2


# ----------------------------------------------------------------------------- shared contract


def _fit(name, train, y, **params):
    detector = DETECTORS[name](**params)
    if name == "vim":
        rng = np.random.default_rng(0)
        return detector.fit(train, y, weight=rng.normal(size=(3, 5)), bias=rng.normal(size=3))
    return detector.fit(train, y)


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_far_ood_scores_higher_and_conventions_hold(features, name):
    train, y, test, ood = features
    params = {"n_neighbors": 5} if name == "knn" else {}
    detector = _fit(name, train, y, **params)
    s_in, s_out = detector.score_ood(test), detector.score_ood(ood)
    assert ood_metrics(s_in, s_out)["auroc"] > 0.9
    np.testing.assert_array_equal(detector.score_samples(test), -s_in)
    # torch tensors are accepted, and cloning keeps the parameters
    torch_scores = detector.score_ood(torch.tensor(test))
    np.testing.assert_allclose(torch_scores, s_in)
    assert clone(detector).get_params() == detector.get_params()


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_scoring_before_fit_or_with_other_features_fails(features, name):
    train, y, test, _ = features
    with pytest.raises(NotFittedError):
        DETECTORS[name]().score_ood(test)
    params = {"n_neighbors": 5} if name == "knn" else {}
    with pytest.raises(ValueError, match="features"):
        _fit(name, train, y, **params).score_ood(test[:, :3])


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda t, y: MahalanobisDetector(covariance="diag").fit(t, y), "'covariance' param"),
        (lambda t, y: MahalanobisDetector().fit(t, None), "needs the training labels"),
        (lambda t, y: KNNDetector(n_neighbors=0).fit(t), "'n_neighbors' parameter"),
        (lambda t, y: KNNDetector(n_neighbors=500).fit(t), "at most the number of training"),
        (
            lambda t, y: ViMDetector(n_components=5).fit(t, weight=np.ones((3, 5)), bias=[0] * 3),
            "below the number of features",
        ),
        (
            lambda t, y: ViMDetector().fit(t, weight=np.ones((3, 4)), bias=np.zeros(3)),
            "weight must have shape",
        ),
    ],
)
def test_bad_input_is_named(features, make, match):
    train, y, _, _ = features
    with pytest.raises(ValueError, match=match):
        make(train, y)


def test_vim_without_a_residual_says_so():
    rank_one = np.outer(np.arange(1.0, 11.0), [1.0, 2.0, 0.0])
    with pytest.raises(ValueError, match="Lower n_components"):
        ViMDetector(n_components=2).fit(rank_one, weight=np.eye(3), bias=np.zeros(3))


# ----------------------------------------------------------------------------- features


def test_penultimate_features_batched_equal_unbatched_and_feed_the_logits(fitted_ce):
    clf, X_train, _, X_test = fitted_ce
    once = penultimate_features(clf, X_test, batch_size=-1)
    # batch composition changes BLAS blocking, so float32 rounding may differ in the last bit
    assert_close_f32(penultimate_features(clf, X_test, batch_size=7), once)
    assert once.shape == (len(X_test), 6) and once.dtype == np.float32
    with torch.no_grad():
        direct = clf.module_.penultimate(torch.tensor(X_test)).numpy()
    np.testing.assert_array_equal(once, direct)
    W, b = last_layer_parameters(clf)
    proba = np.exp(once @ W.T + b - logsumexp(once @ W.T + b, axis=1, keepdims=True))
    np.testing.assert_allclose(proba, clf.predict_proba(X_test), atol=1e-5)
    # a module works as well as the estimator
    np.testing.assert_array_equal(penultimate_features(clf.module_, X_test), once)


def test_penultimate_features_restore_the_train_mode(fitted_ce):
    clf, _, _, X_test = fitted_ce
    clf.module_.train()
    clf.module_.net[1].eval()  # a submodule switched by hand stays switched
    penultimate_features(clf, X_test)
    assert clf.module_.training and not clf.module_.net[1].training
    clf.module_.eval()


class _Doubling(torch.nn.Module):
    """The feature protocol without parameters: penultimate(x) = 2x, an identity last layer."""

    def __init__(self):
        super().__init__()
        self.last_layer = torch.nn.Identity()

    def penultimate(self, x):
        return 2 * x

    def forward(self, x):
        return self.last_layer(self.penultimate(x))


def test_penultimate_features_of_a_module_without_parameters(fitted_ce):
    # its device is the CPU, as for the compositions' experts (_device.module_device)
    _, _, _, X_test = fitted_ce
    np.testing.assert_array_equal(penultimate_features(_Doubling(), X_test), 2 * X_test)


def test_penultimate_features_take_what_predict_takes(fitted_ce):
    # reversed views (negative strides, which torch refuses) and numpy integers, as the
    # estimators' predict takes them (issues #14, #16)
    clf, _, _, X_test = fitted_ce
    once = penultimate_features(clf, X_test, batch_size=-1)
    # The same rows in another order, or batches of another size: equal up to float32
    # rounding (matmul kernels may sum in another order for another batch layout), not bitwise.
    assert_close_f32(penultimate_features(clf, X_test[::-1], batch_size=-1), once[::-1])
    assert_close_f32(penultimate_features(clf.module_, X_test[::-1]), once[::-1])
    assert_close_f32(penultimate_features(clf, X_test, batch_size=np.int64(16)), once)


def test_penultimate_features_use_the_inference_batch_size(fitted_ce):
    _, X_train, y_train, X_test = fitted_ce
    clf = NGEBMClassifier(
        beta=0, max_epochs=1, module__hidden_sizes=(6,), iterator_valid__batch_size=7
    ).fit(X_train, y_train)
    sizes = []
    hook = clf.module_.net[0].register_forward_hook(lambda m, args, out: sizes.append(len(out)))
    try:
        penultimate_features(clf, X_test)
    finally:
        hook.remove()
    assert sizes == [7, 7, 7, 7, 2]


def test_penultimate_features_bad_input(fitted_ce):
    clf, _, _, X_test = fitted_ce
    # the estimator's own validation, with the message of its predict
    with pytest.raises(ValueError, match="X has 3 features, but NGEBMClassifier is expecting 4"):
        penultimate_features(clf, X_test[:, :3])
    for bad in (0, -2, 2.0, True, "16"):
        with pytest.raises(ValueError, match=f"batch_size must be an int >= 1, -1 .* Got {bad!r}"):
            penultimate_features(clf, X_test, batch_size=bad)
    with pytest.raises(NotFittedError):
        penultimate_features(NGEBMClassifier(), X_test)
    with pytest.raises(TypeError, match="penultimate"):
        penultimate_features(torch.nn.Linear(4, 3), X_test)


def test_detectors_are_fitted_on_the_training_data_only(fitted_ce):
    clf, X_train, y_train, X_test = fitted_ce
    train_features = penultimate_features(clf, X_train)

    seen = []

    class Recording(KNNDetector):
        def fit(self, features, y=None):
            seen.append(np.array(features))
            return super().fit(features, y)

    knn = fit_detector(Recording(n_neighbors=1), clf, X_train, y_train)
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], train_features)
    # with k = 1 a sample in the fit is its own neighbour: held-out samples are not
    assert np.all(knn.score_ood(penultimate_features(clf, X_test)) > 1e-4)
    np.testing.assert_allclose(knn.score_ood(train_features), 0, atol=1e-6)

    maha = fit_detector(MahalanobisDetector(), clf, X_train, y_train)
    means = [train_features[y_train == c].mean(axis=0) for c in maha.classes_]
    np.testing.assert_allclose(maha.means_, means, rtol=1e-6)

    vim = fit_detector(ViMDetector(n_components=3), clf, X_train)
    W, b = last_layer_parameters(clf)
    np.testing.assert_array_equal(vim.coef_, W)
    expected = ViMDetector(n_components=3).fit(train_features, weight=W, bias=b)
    assert vim.alpha_ == pytest.approx(expected.alpha_)


# ----------------------------------------------------------------------------- pytorch-ood


def _pytorch_ood_detectors():
    """pytorch-ood imports torchvision, whose PyPI wheel does not load beside a CPU build of
    torch: the comparison is skipped there, and runs wherever both import."""
    return pytest.importorskip(
        "pytorch_ood.detector",
        reason="pytorch-ood does not import here (it needs torchvision, which does not load "
        "with this torch build)",
    )


def test_agrees_with_pytorch_ood(features):
    detectors = _pytorch_ood_detectors()
    train, y, test, ood = features
    queries = np.r_[test, ood]
    t_train, t_queries = torch.tensor(train).float(), torch.tensor(queries).float()

    theirs = detectors.KNN(None, k=5).fit_features(t_train, torch.tensor(y))
    np.testing.assert_allclose(
        KNNDetector(n_neighbors=5).fit(train).score_ood(queries),
        theirs.predict_features(t_queries).numpy(),
        rtol=1e-4,
        atol=1e-5,
    )

    # pytorch-ood scales the squared distance by a positive constant (1/2, and its covariance
    # is not divided by N): the same ranking, a constant ratio
    theirs = detectors.Mahalanobis(None).fit_features(t_train, torch.tensor(y))
    ratio = theirs.predict_features(t_queries).numpy() / MahalanobisDetector().fit(
        train, y
    ).score_ood(queries)
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-3)
    assert ratio[0] > 0

    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(3, 5)), rng.normal(size=3)
    theirs = detectors.ViM(None, d=2, w=torch.tensor(W).float(), b=torch.tensor(b).float())
    theirs.fit_features(t_train, torch.tensor(y))
    ours = ViMDetector(n_components=2).fit(train, weight=W, bias=b)
    np.testing.assert_allclose(
        ours.score_ood(queries), theirs.predict_features(t_queries).numpy(), rtol=1e-3, atol=1e-3
    )


# ------------------------------------------------- ViM's subspace from the features' rank (#26)


def _low_rank_features(n, n_features, rank, seed=0):
    """``n`` features of exact rank ``rank`` around the origin 0 (W x + 0 has logits 0 at 0)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, rank)) @ rng.normal(size=(rank, n_features))


def test_vim_auto_is_half_the_features_bounded_by_their_rank():
    # 40 rows of 256 features span 40 dimensions (wine's ~100 rows of a 256-wide layer, as
    # compare met them): half the features (128) would leave no residual; auto takes r - 1.
    W, b = np.random.default_rng(1).normal(size=(3, 256)), np.zeros(3)
    train = _low_rank_features(40, 256, 40)
    assert np.linalg.matrix_rank(train) == 40  # numpy's own rank, an independent count
    with pytest.raises(ValueError, match="no residual outside a principal subspace of 128"):
        ViMDetector(n_components=None).fit(train, weight=W, bias=b)
    vim = ViMDetector().fit(train, weight=W, bias=b)  # "auto", the default
    assert vim.n_components == "auto" and vim.n_components_ == 39
    # the same fit as an explicit n_components of r - 1
    explicit = ViMDetector(n_components=39).fit(train, weight=W, bias=b)
    test = np.random.default_rng(2).normal(size=(5, 256))
    np.testing.assert_allclose(vim.score_ood(test), explicit.score_ood(test))
    # a rank below N // 2 but above it by the tolerance: 10 exact dimensions plus 1e-12 noise
    noisy = _low_rank_features(40, 256, 10) + 1e-12 * np.random.default_rng(3).normal(
        size=(40, 256)
    )
    assert ViMDetector().fit(noisy, weight=W, bias=b).n_components_ == 9


def test_vim_auto_equals_half_when_the_features_have_the_rank():
    W, b = np.random.default_rng(1).normal(size=(3, 8)), np.zeros(3)
    train = np.random.default_rng(0).normal(size=(100, 8))
    auto = ViMDetector().fit(train, weight=W, bias=b)
    half = ViMDetector(n_components=None).fit(train, weight=W, bias=b)
    assert auto.n_components_ == half.n_components_ == 4
    assert auto.alpha_ == half.alpha_
    np.testing.assert_array_equal(auto.residual_basis_, half.residual_basis_)


def test_vim_auto_on_features_of_rank_one_says_what_to_do():
    W, b = np.eye(3), np.zeros(3)
    with pytest.raises(ValueError, match=r"span 1 dimension\(s\) .*\(ViM needs rank >= 2\)"):
        ViMDetector().fit(_low_rank_features(20, 3, 1), weight=W, bias=b)


@pytest.mark.parametrize("bad", ["half", "AUTO", ""])
def test_vim_n_components_refuses_other_strings(bad):
    with pytest.raises(ValueError, match="must be 'auto', None or an int"):
        ViMDetector(n_components=bad).fit(np.eye(4), weight=np.eye(4), bias=np.zeros(4))
