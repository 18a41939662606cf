"""NGEBMClassifier and the shared base: the estimator contract."""

import pickle
import tracemalloc
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from skorch.callbacks import Callback, Checkpoint, LoadInitState
from skorch.dataset import Dataset
from skorch.helper import predefined_split

from ebmclassifier import DivergenceError, NGEBMClassifier
from ebmclassifier import losses as losses_module
from ebmclassifier.energy import energy_grad_norm
from ebmclassifier.exceptions import FiniteDifferenceWarning
from ebmclassifier.nn import MLP, WideResNet

from .estimators import params

FAST = params("ngebm", max_epochs=3, lr=1e-2, module__hidden_sizes=(32,))


@pytest.fixture
def fitted(fitted_model):
    """Fitted once per session on small_blobs, read-only (tests/estimators.py)."""
    return fitted_model("ngebm", **FAST)


def test_predict_shapes_and_invariants(fitted, small_blobs):
    X, y = small_blobs
    proba = fitted.predict_proba(X)
    assert proba.shape == (len(X), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.log(proba), fitted.predict_log_proba(X), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(fitted.predict(X), fitted.classes_[proba.argmax(axis=1)])
    assert fitted.score(X, y) > 0.8
    for method in ("energy", "max_softmax", "approx_mass"):
        assert fitted.score_ood(X, method=method).shape == (len(X),)
    np.testing.assert_array_equal(fitted.score_samples(X), -fitted.score_ood(X))
    np.testing.assert_array_equal(fitted.score_ood(X), fitted.score_ood(X, method="approx_mass"))
    np.testing.assert_array_equal(fitted.energy(X), fitted.score_ood(X, method="energy"))


def test_energy_matches_logits(fitted, small_blobs):
    X, _ = small_blobs
    with torch.no_grad():
        logits = fitted.module_(torch.as_tensor(X))
    np.testing.assert_allclose(
        fitted.energy(X), (-torch.logsumexp(logits, 1)).numpy(), rtol=1e-5, atol=1e-6
    )


def test_inference_batches_do_not_change_results(fitted, small_blobs):
    X, _ = small_blobs
    one_batch = clone(fitted).set_params(iterator_valid__batch_size=-1)
    one_batch.__dict__.update({k: v for k, v in fitted.__dict__.items() if k.endswith("_")})
    np.testing.assert_allclose(one_batch.predict_proba(X), fitted.predict_proba(X), rtol=1e-5)
    np.testing.assert_allclose(one_batch.score_ood(X), fitted.score_ood(X), rtol=1e-4)


def test_string_labels_binary_and_pandas(small_blobs):
    pd = pytest.importorskip("pandas")
    X, y = small_blobs
    names = np.array(["cat", "dog", "cat"])[y]  # binary, string labels
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = NGEBMClassifier(**FAST).fit(frame, pd.Series(names))
    assert list(clf.classes_) == ["cat", "dog"]
    assert set(clf.predict(frame)) <= {"cat", "dog"}
    assert clf.predict_proba(frame).shape == (len(X), 2)
    assert list(clf.feature_names_in_) == ["a", "b", "c", "d"]


def test_torch_input(small_blobs, fitted):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(torch.as_tensor(X), torch.as_tensor(y))
    np.testing.assert_array_equal(clf.predict_proba(torch.as_tensor(X)), fitted.predict_proba(X))


def test_random_state_makes_fits_identical_and_leaves_global_rng(small_blobs):
    X, y = small_blobs
    before = torch.random.get_rng_state()
    a = NGEBMClassifier(**FAST).fit(X, y).predict_proba(X)
    b = NGEBMClassifier(**FAST).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert torch.equal(before, torch.random.get_rng_state())
    c = NGEBMClassifier(**{**FAST, "random_state": 1}).fit(X, y).predict_proba(X)
    assert not np.array_equal(a, c)


def test_clone_and_pickle_round_trip(fitted, small_blobs):
    X, _ = small_blobs
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    np.testing.assert_array_equal(restored.score_ood(X), fitted.score_ood(X))
    assert restored.device == "auto" and restored.device_ == torch.device("cpu")
    cloned = clone(fitted)
    assert cloned.get_params()["beta"] == 0.5
    assert not hasattr(cloned, "module_")
    np.testing.assert_array_equal(
        cloned.fit(*small_blobs).predict_proba(X), fitted.predict_proba(X)
    )


def test_params_are_stored_unchanged():
    clf = NGEBMClassifier(beta=0.3, device="auto", module__hidden_sizes=(8,))
    params = clf.get_params()
    assert params["beta"] == 0.3 and params["gamma"] is None and params["device"] == "auto"
    assert params["module__hidden_sizes"] == (8,)
    assert not any(name.startswith("_") for name in params)


def test_gamma_defaults_to_one_minus_beta(small_blobs):
    X, y = small_blobs
    a = NGEBMClassifier(beta=0.25, **FAST).fit(X, y)
    b = NGEBMClassifier(beta=0.25, gamma=0.75, **FAST).fit(X, y)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-6)
    c = NGEBMClassifier(beta=0.25, gamma=2.0, **FAST).fit(X, y)
    assert not np.allclose(a.predict_proba(X), c.predict_proba(X))


def test_beta_zero_skips_the_input_gradient(small_blobs, monkeypatch):
    X, y = small_blobs

    def fail(*args, **kwargs):
        raise AssertionError("the gradient norm must not be computed when beta=0")

    # NGEBMClassifier's loss is losses.ngebm_loss, which computes the norms through these
    monkeypatch.setattr(losses_module, "energy_grad_norm", fail)
    monkeypatch.setattr(losses_module, "energy_grad_norm_finite_difference", fail)
    NGEBMClassifier(beta=0.0, **FAST).fit(X, y)
    with pytest.raises(AssertionError, match="must not be computed"):
        NGEBMClassifier(beta=0.1, **FAST).fit(X, y)


@pytest.mark.parametrize("grad_norm", ["exact", "finite_difference"])
def test_validation_loss_is_the_training_objective(small_blobs, grad_norm):
    X, y = small_blobs
    X_valid, y_valid = torch.as_tensor(X[:40]), torch.as_tensor(y[:40])
    clf = NGEBMClassifier(
        grad_norm=grad_norm,
        energy_var_weight=0.5,
        train_split=predefined_split(Dataset(X_valid, y_valid)),
        iterator_valid__batch_size=-1,
        **FAST,
    ).fit(X, y)
    clf.module_.eval()
    loss, _ = clf.compute_loss(X_valid, y_valid, training=False)
    gamma = 1 - clf.beta
    norms, energies, logits = energy_grad_norm(clf.module_, X_valid)
    by_hand = (
        gamma * torch.nn.functional.cross_entropy(logits, y_valid)
        + clf.beta * norms.mean()
        + 0.5 * energies.var(unbiased=False)
    )
    torch.testing.assert_close(loss, by_hand.detach())
    assert clf.history[-1, "valid_loss"] == pytest.approx(by_hand.item(), rel=1e-5)


def test_partial_fit_continues_exactly_like_a_longer_fit(small_blobs):
    X, y = small_blobs
    long = NGEBMClassifier(**{**FAST, "max_epochs": 4}).fit(X, y)
    short = NGEBMClassifier(**{**FAST, "max_epochs": 2}).fit(X, y)
    short.partial_fit(X, y)
    assert len(short.history) == 4
    np.testing.assert_allclose(short.predict_proba(X), long.predict_proba(X), rtol=1e-6)


def test_partial_fit_from_scratch_with_classes(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).partial_fit(X[y != 2], y[y != 2], classes=[0, 1, 2])
    assert list(clf.classes_) == [0, 1, 2]
    clf.partial_fit(X, y)
    with pytest.raises(ValueError, match=r"labels \[7\] that were not seen"):
        clf.partial_fit(X[:3], np.array([0, 1, 7]))


def test_resume_from_checkpoint_ends_where_uninterrupted_run_would(small_blobs, tmp_path):
    X, y = small_blobs
    uninterrupted = NGEBMClassifier(**{**FAST, "max_epochs": 4}).fit(X, y)
    checkpoint = Checkpoint(monitor=None, dirname=str(tmp_path))
    NGEBMClassifier(**{**FAST, "max_epochs": 2}, callbacks=[checkpoint]).fit(X, y)
    resumed = NGEBMClassifier(
        **{**FAST, "max_epochs": 2}, callbacks=[LoadInitState(checkpoint)]
    ).fit(X, y)
    assert len(resumed.history) == 4
    np.testing.assert_allclose(resumed.predict_proba(X), uninterrupted.predict_proba(X), rtol=1e-6)


class _Interrupt(Callback):
    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == 2:
            raise KeyboardInterrupt


def test_ctrl_c_raises_and_leaves_a_usable_estimator(small_blobs):
    # skorch swallows the interrupt; fit raises it again once skorch's clean-up ran (issue #41)
    X, y = small_blobs
    clf = NGEBMClassifier(**{**FAST, "max_epochs": 10}, callbacks=[_Interrupt()])
    with pytest.raises(KeyboardInterrupt, match="2 of this call's 10 epochs ran to their end"):
        clf.fit(X, y)
    assert len(clf.history) == 2
    assert np.isfinite(clf.predict_proba(X)).all()


def test_divergence_is_detected(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**{**FAST, "optimizer": torch.optim.SGD, "lr": 1e12})
    with pytest.raises(DivergenceError, match="diverged in epoch .* Lower the learning rate"):
        clf.fit(X * 1e3, y)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "X_bad, message",
    [
        (lambda X: np.where(np.arange(X.size).reshape(X.shape) == 0, np.nan, X), "NaN"),
        (lambda X: np.where(np.arange(X.size).reshape(X.shape) == 0, np.inf, X), "infinity"),
        (lambda X: X[:0], "0 sample"),
        (lambda X: X.astype(str).astype(object) + "x", "could not convert|string"),
        (lambda X: X[:, 0], "Expected 2D array|Reshape"),
    ],
    ids=["nan", "inf", "empty", "non-numeric", "1d"],
)
def test_bad_X_at_fit(small_blobs, X_bad, message):
    X, y = small_blobs
    X_bad = X_bad(X.astype(np.float64))
    with pytest.raises(ValueError, match=message):
        NGEBMClassifier(**FAST).fit(X_bad, y[: len(X_bad)])


def test_bad_y(small_blobs):
    X, y = small_blobs
    with pytest.raises(ValueError, match="at least 2 classes.*only one class: 'a'"):
        NGEBMClassifier(**FAST).fit(X, np.full(len(X), "a"))
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        NGEBMClassifier(**FAST).fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="requires y to be passed"):
        NGEBMClassifier(**FAST).fit(X, None)


def test_bad_X_at_predict(fitted, small_blobs):
    X, _ = small_blobs
    with pytest.raises(ValueError, match="X has 3 features, but NGEBMClassifier is expecting 4"):
        fitted.predict(X[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        fitted.predict_proba(np.full_like(X, np.nan))
    with pytest.raises(ValueError, match="Unknown score_ood method 'mahalanobis'"):
        fitted.score_ood(X, method="mahalanobis")


def test_unfitted_raises():
    with pytest.raises(NotFittedError):
        NGEBMClassifier().predict(np.zeros((2, 3)))
    with pytest.raises(NotFittedError):
        NGEBMClassifier().score_ood(np.zeros((2, 3)))


def test_bad_parameters_are_reported_together(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(beta=-0.1, grad_norm="magic", lr=0.0, ood_method="nope")
    with pytest.raises(ValueError) as info:
        clf.fit(X, y)
    message = str(info.value)
    assert "The 'beta' parameter of NGEBMClassifier must be a float in the range [0.0, 1.0]" in (
        message
    )
    assert "Got -0.1 instead." in message
    assert "'grad_norm'" in message and "'lr'" in message and "'ood_method'" in message


def test_bad_device():
    with pytest.raises(ValueError, match="not a device torch knows"):
        NGEBMClassifier(device="gpu0").fit(np.zeros((4, 2)), [0, 1, 0, 1])


def test_image_input_builds_a_convnet():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 40)
    X = rng.standard_normal((40, 1, 6, 6)).astype(np.float32) + y[:, None, None, None]
    clf = NGEBMClassifier(max_epochs=2, random_state=0).fit(X, y)
    assert type(clf.module_).__name__ == "ConvNet"
    assert clf.predict_proba(X).shape == (40, 2)
    with pytest.raises(ValueError, match=r"samples of shape \(1, 5, 6\)"):
        clf.predict(X[:, :, :5])
    seq = NGEBMClassifier(max_epochs=1, random_state=0).fit(X.reshape(40, 2, 18), y)
    assert type(seq.module_.features[0]).__name__ == "Conv1d"


def test_custom_module_gets_data_shape(small_blobs):
    X, y = small_blobs

    class Linear(torch.nn.Module):
        def __init__(self, n_features, n_classes, scale=1.0):
            super().__init__()
            self.lin = torch.nn.Linear(n_features, n_classes)
            self.scale = scale

        def forward(self, x):
            return self.scale * self.lin(x)

    clf = NGEBMClassifier(Linear, module__scale=2.0, max_epochs=2).fit(X, y)
    assert clf.module_.lin.in_features == 4 and clf.module_.lin.out_features == 3
    assert clf.module_.scale == 2.0


def test_module_instance_is_used_as_is_or_rebuilt_with_module_params(small_blobs):
    X, y = small_blobs
    net = MLP(n_features=4, n_classes=3, hidden_sizes=(5,))
    assert NGEBMClassifier(net, max_epochs=1).fit(X, y).module_ is net
    # module__* parameters: skorch rebuilds type(net)(**params), given the data's sizes here
    clf = NGEBMClassifier(net, module__hidden_sizes=(8,), max_epochs=1).fit(X, y)
    assert clf.module_ is not net
    assert [m.out_features for m in clf.module_.net if isinstance(m, torch.nn.Linear)] == [8, 3]


@pytest.mark.parametrize("weighted", [False, True])
def test_fit_takes_no_copy_of_the_data_for_its_statistics(weighted):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400_000, 16)).astype(np.float32)  # 25.6 MB
    y = np.arange(len(X)) % 3
    weights = rng.uniform(1.0, 2.0, len(X)) if weighted else None  # every row counts
    clf = NGEBMClassifier(max_epochs=0, module__hidden_sizes=(4,), random_state=0)
    clf.fit(X[:30], y[:30], sample_weight=None if weights is None else weights[:30])  # warm-up
    tracemalloc.start()  # numpy's allocations (torch's copy of X on the device is not traced)
    try:
        clf.fit(X, y, sample_weight=weights)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Not one copy of X; there were two: the fd step's float64 copy of X (2x X), and with
    # weights X[weights > 0] and its float64 copy (3x X).
    assert peak < X.nbytes


def test_gpu_trained_estimator_unpickles_on_cpu(fitted, small_blobs):
    # Pretend the estimator was trained on CUDA: skorch maps its tensors to the CPU on load
    # (with a DeviceWarning), and the estimator then predicts on the CPU.
    from skorch.exceptions import DeviceWarning

    X, _ = small_blobs
    state = pickle.dumps(fitted)
    fake = pickle.loads(state)
    fake.device_ = torch.device("cuda")
    payload = pickle.dumps(fake)
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    with pytest.warns(DeviceWarning):
        restored = pickle.loads(payload)
    assert restored.device_ == torch.device("cpu") and restored.device == "auto"
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))


def test_reversed_views_are_taken_as_they_are(small_blobs):
    # regression test: torch refuses numpy's negative strides (X[::-1]) in fit and predict
    X, y = small_blobs
    X = np.asarray(X, dtype=np.float32)
    flipped = NGEBMClassifier(**FAST).fit(X[::-1], y[::-1])
    copied = NGEBMClassifier(**FAST).fit(X[::-1].copy(), y[::-1].copy())
    expected = copied.predict_proba(X[:, ::-1].copy())
    np.testing.assert_array_equal(flipped.predict_proba(X[:, ::-1]), expected)


class _ReLUNet(torch.nn.Module):
    def __init__(self, n_features, n_classes, activation=torch.nn.ReLU):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(n_features, 16), activation(), torch.nn.Linear(16, n_classes)
        )

    def forward(self, x):
        return self.net(x)


@pytest.mark.parametrize(
    "params, warns",
    [
        (dict(module=_ReLUNet, grad_norm="finite_difference"), True),
        (dict(module=_ReLUNet, module__activation=torch.nn.SiLU, grad_norm="finite_difference"),
         False),
        (dict(grad_norm="finite_difference"), False),  # the default MLP: SiLU
        (dict(module=_ReLUNet, grad_norm="exact"), False),
        (dict(module=_ReLUNet, grad_norm="finite_difference", beta=0.0), False),  # no penalty
    ],
)  # fmt: skip
def test_finite_difference_warns_on_kinked_activations(small_blobs, params, warns):
    X, y = small_blobs
    base = dict(max_epochs=1, random_state=0)
    if "module" not in params:
        base["module__hidden_sizes"] = (8,)
    clf = NGEBMClassifier(**base, **params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X, y)
        clf.partial_fit(X, y)  # every call that trains warns
    found = [w for w in caught if issubclass(w.category, FiniteDifferenceWarning)]
    assert len(found) == (2 if warns else 0)
    if warns:
        assert "ReLU activation(s) have kinks" in str(found[0].message)
        assert "grad_norm='exact'" in str(found[0].message)


def test_finite_difference_warns_on_the_default_wide_resnet():
    X = np.random.default_rng(0).normal(size=(16, 1, 8, 8)).astype(np.float32)
    y = np.arange(16) % 2
    clf = NGEBMClassifier(
        WideResNet, grad_norm="finite_difference", module__depth=10, module__widen_factor=1,
        max_epochs=1, batch_size=16, random_state=0,
    )  # fmt: skip
    with pytest.warns(FiniteDifferenceWarning, match="LeakyReLU"):
        clf.fit(X, y)
