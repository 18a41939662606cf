"""LatentStructureClassifier: scikit-learn contract, composition, and the surrogate's scaling."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import v_measure_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from skorch.dataset import ValidSplit
from torch import nn

from ebmclassifier import DivergenceError
from ebmclassifier.datasets import make_latent_clusters
from ebmclassifier.latent import GRADIENTS, project_simplex
from ebmclassifier.latent.categorical.networks import BilinearDecoder
from ebmclassifier.latent.classifier import LatentStructureClassifier
from ebmclassifier.nn import MLP

FAST = dict(max_epochs=4, lr=5e-2, random_state=0)

# The scikit-learn contract (parametrize_with_checks) is in test_sklearn_compat.py.


@pytest.fixture(scope="module")
def clusters():
    """An easy latent-cluster task: K = 3 well separated clusters in 10 dimensions."""
    X, y, z, params = make_latent_clusters(600, 3, 10, return_params=True, random_state=0)
    X_te, y_te, z_te = make_latent_clusters(300, 3, 10, params=params, random_state=1)
    return X.astype(np.float32), y, z, X_te.astype(np.float32), y_te, z_te


@pytest.fixture(scope="module")
def fitted(clusters):
    X, y, *_ = clusters
    return LatentStructureClassifier(3, max_epochs=5, lr=1e-2, random_state=0).fit(X, y)


def _true_decoders(clf, X, y, z):
    """Set the decoder of latent k to the logistic regression fitted on true cluster k."""
    with torch.no_grad():
        weight, bias = clf.module_.decoder.weight, clf.module_.decoder.bias
        weight.zero_()
        bias.zero_()
        for k in range(weight.shape[0]):
            model = LogisticRegression(C=100.0, max_iter=5000).fit(X[z == k], y[z == k])
            weight[k, 1] = torch.as_tensor(model.coef_[0])
            bias[k, 1] = float(model.intercept_[0])


@pytest.mark.parametrize("gradient", ["ste", "softmax", "gumbel_st", "sfe"])
def test_encoder_learns_the_clusters_from_fixed_true_decoders(clusters, gradient):
    """End to end, the encoder's update has the right sign: starting from a partition that
    merges clusters (V-measure 0 for seed 2), it finds the latent of each cluster's decoder.
    SPIGOT, SPIGOT-CE and -EG are left out: with these very confident decoders, the
    linearisation gamma favours the decoder whose extrapolated logits are largest, and they
    stay in a merged partition (see the example's notes)."""
    X, y, z, X_te, _, z_te = clusters
    frozen = [("decoder.*", {"lr": 0.0})]
    clf = LatentStructureClassifier(
        3,
        gradient=gradient,
        lr=2e-2,
        batch_size=128,
        max_epochs=0,
        random_state=2,
        optimizer__param_groups=frozen,
    ).fit(X, y)
    assert v_measure_score(z_te, clf.predict_latent(X_te)) < 0.1
    _true_decoders(clf, X, y, z)
    clf.set_params(max_epochs=6).partial_fit(X, y)
    assert v_measure_score(z_te, clf.predict_latent(X_te)) > 0.95


def test_latent_outputs(clusters, fitted):
    X, *_ = clusters
    marginals = fitted.transform(X)
    assert marginals.shape == (len(X), 3)
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0, rtol=1e-5)
    latent = fitted.predict_latent(X)
    assert latent.shape == (len(X),) and latent.dtype == np.int64
    np.testing.assert_array_equal(latent, marginals.argmax(axis=1))
    assert fitted.score_ood(X).shape == fitted.score_ood(X, "approx_mass").shape == (len(X),)


def test_transform_is_a_pipeline_step(clusters):
    X, y, *_ = clusters
    pipe = make_pipeline(LatentStructureClassifier(3, **FAST), LogisticRegression()).fit(X, y)
    assert pipe.predict(X).shape == (len(X),)


def test_pickle_round_trip(clusters, fitted):
    X, *_ = clusters
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    np.testing.assert_array_equal(restored.predict_latent(X), fitted.predict_latent(X))


def test_grid_search_over_gradient_and_step_size(clusters):
    X, y, *_ = clusters
    X, y = X[:300], y[:300]
    grid = {"gradient": ["spigot", "spigot_ce"], "step_size": [0.1, 1.0]}
    search = GridSearchCV(LatentStructureClassifier(3, **FAST), grid, cv=2).fit(X, y)
    assert search.best_params_["gradient"] in grid["gradient"]
    assert search.best_estimator_.step_size == search.best_params_["step_size"]
    assert len(search.cv_results_["params"]) == 4
    refit = clone(LatentStructureClassifier(3, **FAST)).set_params(**search.best_params_)
    np.testing.assert_array_equal(refit.fit(X, y).predict_proba(X), search.predict_proba(X))


def _initialized(X, y, **params):
    return LatentStructureClassifier(3, max_epochs=0, random_state=0, **params).fit(X, y)


def _per_sample_gamma(decoder, X, y, z, label_smoothing=0.0):
    """gamma_i = dl_i/dz_i, one sample at a time."""
    rows = []
    for i in range(len(X)):
        zi = z[i : i + 1].clone().requires_grad_(True)
        logits = decoder(X[i : i + 1], zi)
        loss = nn.functional.cross_entropy(logits, y[i : i + 1], label_smoothing=label_smoothing)
        rows.append(torch.autograd.grad(loss, zi)[0][0])
    return torch.stack(rows)


@pytest.mark.parametrize("gradient", ["ste", "spigot_ce"])
def test_encoder_gradient_is_the_batch_mean_of_the_per_sample_surrogate(clusters, gradient):
    X, y, *_ = clusters
    X_t, y_t = torch.as_tensor(X[:16]), torch.as_tensor(y[:16])
    eta = 0.7
    clf = _initialized(X, y, gradient=gradient, step_size=eta)
    encoder_linear = clf.module_.encoder.net[-1]
    loss, _ = clf.compute_loss(X_t, y_t, training=True)
    loss.backward()

    with torch.no_grad():
        scores = clf.module_.encoder(X_t)
    z_hat = torch.eye(3)[scores.argmax(-1)]
    if gradient == "ste":
        d = eta * _per_sample_gamma(clf.module_.decoder, X_t, y_t, z_hat)
    else:
        mu_0 = scores.softmax(-1)
        d = mu_0 - project_simplex(
            mu_0 - eta * _per_sample_gamma(clf.module_.decoder, X_t, y_t, mu_0)
        )
    torch.testing.assert_close(encoder_linear.weight.grad, d.T @ X_t / len(X_t))
    torch.testing.assert_close(encoder_linear.bias.grad, d.mean(0))

    # The decoder learns by plain backpropagation at the argmax, untouched by the surrogate.
    decoder = clf.module_.decoder
    got = [p.grad.clone() for p in decoder.parameters()]
    decoder.zero_grad()
    nn.functional.cross_entropy(decoder(X_t, z_hat), y_t).backward()
    for g, p in zip(got, decoder.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad)


@pytest.mark.parametrize("inner_steps", [1, 2])
def test_surrogates_pull_back_the_gradient_of_the_training_criterion(clusters, inner_steps):
    """Regression: gamma_fn was the plain cross-entropy's gradient, not that of the criterion
    the fit trains with (here label-smoothed), so SPIGOT-CE stepped along the wrong gamma."""
    X, y, *_ = clusters
    X_t, y_t = torch.as_tensor(X[:16]), torch.as_tensor(y[:16])
    eta, smoothing = 0.7, 0.3
    clf = _initialized(
        X,
        y,
        gradient="spigot_ce",
        step_size=eta,
        inner_steps=inner_steps,
        criterion__label_smoothing=smoothing,
    )
    loss, _ = clf.compute_loss(X_t, y_t, training=True)
    loss.backward()

    with torch.no_grad():
        scores = clf.module_.encoder(X_t)
    mu_0 = mu = scores.softmax(-1)
    for _ in range(inner_steps):  # mu_{t+1} = Pi(mu_t - eta * gamma(mu_t)); d = mu_0 - mu_k
        gamma = _per_sample_gamma(clf.module_.decoder, X_t, y_t, mu, smoothing)
        mu = project_simplex(mu - eta * gamma)
    d = mu_0 - mu
    encoder_linear = clf.module_.encoder.net[-1]
    torch.testing.assert_close(encoder_linear.weight.grad, d.T @ X_t / len(X_t))
    torch.testing.assert_close(encoder_linear.bias.grad, d.mean(0))


def test_relaxed_methods_predict_with_the_relaxation(clusters):
    X, y, *_ = clusters
    clf = _initialized(X, y, gradient="softmax")
    X_t = torch.as_tensor(X[:5])
    with torch.no_grad():
        scores = clf.module_.encoder(X_t)
        expected = clf.module_.decoder(X_t, scores.softmax(-1)).softmax(-1)
    np.testing.assert_allclose(clf.predict_proba(X[:5]), expected.numpy(), rtol=1e-5)


def test_sfe_updates_its_baseline_once_per_step(clusters):
    X, y, *_ = clusters
    clf = LatentStructureClassifier(3, gradient="sfe", max_epochs=2, batch_size=100).fit(X, y)
    assert int(clf.module_.baseline.n_updates) == 2 * 6
    assert clf.module_.baseline.value.item() > 0


class _TinyDecoder(nn.Module):
    def __init__(self, n_latent, n_features, n_classes, scale=1.0):
        super().__init__()
        self.scale = scale
        self.bilinear = BilinearDecoder(n_latent, n_features, n_classes)

    def forward(self, x, z):
        return self.scale * self.bilinear(x, z)


def test_custom_encoder_and_decoder_get_routed_parameters(clusters):
    X, y, *_ = clusters
    clf = LatentStructureClassifier(
        4, decoder=_TinyDecoder, decoder__scale=2.0, encoder__hidden_sizes=(8,), **FAST
    ).fit(X, y)
    assert clf.module_.decoder.scale == 2.0
    assert clf.module_.decoder.bilinear.weight.shape == (4, 2, 10)
    assert clf.module_.encoder.net[1].out_features == 8
    assert clf.transform(X).shape == (len(X), 4)


def test_an_encoder_instance_with_routed_parameters_is_rebuilt_with_the_data_sizes(clusters):
    X, y, *_ = clusters
    encoder = MLP(n_features=10, n_classes=4, hidden_sizes=())
    clf = LatentStructureClassifier(4, encoder=encoder, **FAST).fit(X, y)
    assert clf.module_.encoder is encoder
    # skorch rebuilds type(encoder)(**params): n_features comes from the data, as for a class
    clf = LatentStructureClassifier(
        4, encoder=encoder, encoder__hidden_sizes=(8,), encoder__n_classes=4, **FAST
    ).fit(X, y)
    assert clf.module_.encoder.net[1].in_features == 10
    assert clf.module_.encoder.net[1].out_features == 8


def test_a_classifier_network_as_encoder_class_scores_the_n_latent_values(clusters):
    X, y, *_ = clusters  # 2 classes, 3 latent values: the encoder has 3 outputs, not 2
    clf = LatentStructureClassifier(3, encoder=MLP, encoder__hidden_sizes=(8,), **FAST)
    clf.fit(X, y)
    assert clf.module_.encoder.net[-1].out_features == 3
    assert clf.transform(X).shape == (len(X), 3)
    rebuilt = LatentStructureClassifier(
        3, encoder=MLP(n_features=10, n_classes=3), encoder__hidden_sizes=(8,), **FAST
    ).fit(X, y)
    assert rebuilt.module_.encoder.net[-1].out_features == 3


@pytest.mark.parametrize(
    "params,match",
    [
        ({"structure": "dependency_tree"}, "non-negative integer token ids"),
        ({"structure": "tree"}, "'structure'"),
        ({"gradient": "spigot_xx"}, "'spigot_xx'"),
        ({"step_size": 0.0}, "'step_size'"),
        ({"inner_steps": 0}, "'inner_steps'"),
        ({"temperature": -1.0}, "'temperature'"),
        ({"n_latent": 0}, "'n_latent'"),
        ({"encoder": "linear"}, "'encoder'"),
        ({"module": nn.Linear}, "'module'"),
        ({"criterion": nn.NLLLoss}, "'criterion'"),
    ],
)
def test_bad_parameters_are_explained_at_fit(clusters, params, match):
    X, y, *_ = clusters
    with pytest.raises(ValueError, match=match):
        LatentStructureClassifier(**params).fit(X, y)


def test_all_bad_parameters_are_reported_together(clusters):
    X, y, *_ = clusters
    with pytest.raises(ValueError, match="(?s)'gradient'.*'step_size'"):
        LatentStructureClassifier(gradient="x", step_size=-1).fit(X, y)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_every_method_trains_the_encoder_with_inner_steps_and_validation(clusters, gradient):
    X, y, *_ = clusters
    clf = LatentStructureClassifier(
        3,
        gradient=gradient,
        inner_steps=2,
        max_epochs=0,
        batch_size=200,
        train_split=ValidSplit(0.2),
        random_state=0,
    ).fit(X, y)
    before = clf.module_.encoder.net[-1].weight.detach().clone()
    clf.set_params(max_epochs=1).partial_fit(X, y)
    assert not torch.equal(before, clf.module_.encoder.net[-1].weight)
    assert np.isfinite(clf.history[-1, "valid_loss"])


# ------------------------------------------------------------------ bad input (issue #14)


@pytest.mark.parametrize("method", ["predict_latent", "transform", "get_feature_names_out"])
def test_latent_outputs_before_fit_are_not_fitted_errors(clusters, method):
    X, *_ = clusters
    args = () if method == "get_feature_names_out" else (X,)
    with pytest.raises(NotFittedError):
        getattr(LatentStructureClassifier(3), method)(*args)


@pytest.mark.parametrize("gradient", GRADIENTS)
@pytest.mark.parametrize("scale, lr", [(1.0, 1e6), (1e30, 1e-3)])
def test_extreme_input_or_learning_rate_is_a_divergence_error_or_finite(
    clusters, gradient, scale, lr
):
    """Regression: the projections indexed out of bounds on huge or nan scores."""
    X, y, *_ = clusters
    clf = LatentStructureClassifier(3, gradient=gradient, lr=lr, max_epochs=3, random_state=0)
    try:
        clf.fit(X[:200] * scale, y[:200])
    except DivergenceError as error:
        assert "diverged" in str(error)
    else:  # a huge but finite loss is no divergence, as for the other estimators
        assert np.isfinite(clf.predict_proba(X[:200] * scale)).all()


@pytest.mark.parametrize("gradient", ["ste", "sparsemax"])
def test_a_nan_encoder_stops_the_fit_with_a_divergence_error(clusters, gradient):
    # with STE-I the decoder's loss stays finite when the encoder's scores are nan
    X, y, *_ = clusters
    clf = LatentStructureClassifier(3, gradient=gradient, max_epochs=3, random_state=0)
    with pytest.raises(DivergenceError, match="diverged in epoch 1"):
        clf.fit(X[:200] * 1e30, y[:200])


@pytest.mark.parametrize(
    "params, names",
    [
        ({"encoder__hiden_sizes": (8,)}, "encoder__hiden_sizes"),
        ({"decoder__scale": 2.0}, "decoder__scale"),  # BilinearDecoder takes no scale
        ({"module__hidden_sizes": (8,)}, "module__hidden_sizes"),
        ({"decoder": _TinyDecoder, "decoder__scael": 2.0}, "decoder__scael"),
    ],
)
def test_routed_parameters_the_network_does_not_take_are_refused(clusters, params, names):
    X, y, *_ = clusters
    with pytest.raises(ValueError, match=names):
        LatentStructureClassifier(3, max_epochs=1, **params).fit(X, y)


# ------------------------------------------------------ transformer contract (issue #15)


def test_pipeline_set_output_pandas_names_the_latent_columns(clusters):
    pd = pytest.importorskip("pandas")
    X, y, *_ = clusters
    columns = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=columns, index=np.arange(len(X)) + 1000)
    pipe = make_pipeline(StandardScaler(), LatentStructureClassifier(3, **FAST))
    out = pipe.set_output(transform="pandas").fit(frame, y).transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert out.columns.tolist() == [f"latentstructureclassifier{k}" for k in range(3)]
    np.testing.assert_array_equal(out.index, frame.index)
    clf = pipe[-1]
    default = clf.set_output(transform="default").transform(pipe[0].transform(frame))
    assert isinstance(default, np.ndarray)
    np.testing.assert_array_equal(out.to_numpy(), default)
    assert clf.feature_names_in_.tolist() == columns
    assert clf.get_feature_names_out(columns).tolist() == out.columns.tolist()
    with pytest.raises(ValueError, match="input_features"):
        clf.get_feature_names_out(["a", "b"])


@pytest.mark.parametrize("alias, name", [("marginals", "softmax"), ("sparsemap", "sparsemax")])
def test_paper_names_are_the_same_methods_on_the_simplex(clusters, alias, name):
    X, y, *_ = clusters
    a = LatentStructureClassifier(3, gradient=alias, **FAST).fit(X, y)
    b = LatentStructureClassifier(3, gradient=name, **FAST).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
