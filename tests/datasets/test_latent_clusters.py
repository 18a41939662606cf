"""make_latent_clusters: the generative process of the SPIGOT-mechanics synthetic task."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from ebmclassifier.datasets import make_latent_clusters


@pytest.fixture(scope="module")
def train_draw():
    return make_latent_clusters(3000, 4, 20, return_params=True, random_state=0)


def test_shapes_and_types(train_draw):
    X, y, z, params = train_draw
    assert X.shape == (3000, 20) and X.dtype == np.float64
    assert y.shape == z.shape == (3000,)
    assert set(np.unique(y)) == {0, 1} and set(np.unique(z)) == {0, 1, 2, 3}
    assert params["centers"].shape == params["weights"].shape == (4, 20)
    assert params["thresholds"].shape == (4,)


def test_labels_follow_the_generative_rule(train_draw):
    X, y, z, params = train_draw
    centers, weights, thresholds = params["centers"], params["weights"], params["thresholds"]
    # x sits near its own centre at distance ~ noise * sqrt(d).
    np.testing.assert_allclose(np.std(X - centers[z]), 0.1, rtol=0.05)
    scores = np.sum(weights[z] * X, axis=1)
    np.testing.assert_array_equal(y, (scores > thresholds[z]).astype(int))
    for k in range(4):
        # b_k is the within-cluster mean score of the training draw: labels are balanced.
        assert thresholds[k] == pytest.approx(scores[z == k].mean())
        assert 0.4 < y[z == k].mean() < 0.6


def test_test_draw_reuses_parameters(train_draw):
    *_, params = train_draw
    X, y, z, params_test = make_latent_clusters(
        500, 4, 20, params=params, return_params=True, random_state=1
    )
    for key in params:
        np.testing.assert_array_equal(params_test[key], params[key])
    scores = np.sum(params["weights"][z] * X, axis=1)
    np.testing.assert_array_equal(y, (scores > params["thresholds"][z]).astype(int))


def test_reproducible_and_seed_dependent():
    a = make_latent_clusters(50, 3, 5, random_state=3)
    b = make_latent_clusters(50, 3, 5, random_state=3)
    c = make_latent_clusters(50, 3, 5, random_state=4)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])


def test_the_latent_is_needed(train_draw):
    """Per-cluster linear models with the true z beat one linear model: the task's point."""
    X, y, z, params = train_draw
    X_te, y_te, z_te = make_latent_clusters(1000, 4, 20, params=params, random_state=2)
    single = LogisticRegression(max_iter=2000).fit(X, y).score(X_te, y_te)
    correct = 0
    for k in range(4):
        model = LogisticRegression(C=100.0, max_iter=2000).fit(X[z == k], y[z == k])
        correct += (model.predict(X_te[z_te == k]) == y_te[z_te == k]).sum()
    per_cluster = correct / len(y_te)
    assert per_cluster > 0.9
    assert per_cluster > single + 0.1


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_samples": 0}, "n_samples"),
        ({"n_clusters": 2.5}, "n_clusters"),
        ({"noise": -1.0}, "noise"),
        ({"params": {"centers": 1}}, "keys"),
        (
            {"params": {"centers": np.zeros((2, 5)), "weights": 0, "thresholds": 0}},
            "shape",
        ),
    ],
)
def test_bad_input_is_explained(kwargs, match):
    args = {"n_samples": 10, "n_clusters": 3, "n_features": 5, **kwargs}
    with pytest.raises(ValueError, match=match):
        make_latent_clusters(**args)
