"""The base's training loop: what it does per batch, now that it does less than skorch's."""

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted
from skorch.dataset import ValidSplit

from ebmclassifier import DivergenceError, NGEBMClassifier

from ..estimators import params

FAST = params("ngebm", max_epochs=2, lr=1e-2, module__hidden_sizes=(16,), batch_size=32)


class _Recording(NGEBMClassifier):
    """Records the mode of every submodule whenever the loss is computed."""

    def compute_loss(self, X, y, training):
        modes = {m.training for m in self.module_.modules()}
        self.seen_.append((training, modes))
        return super().compute_loss(X, y, training)


def test_each_phase_runs_in_its_own_mode(small_blobs):
    X, y = small_blobs
    clf = _Recording(**FAST, train_split=ValidSplit(5, stratified=False))
    clf.seen_ = []
    clf.fit(X, y)
    assert {t for t, _ in clf.seen_} == {True, False}
    for training, modes in clf.seen_:
        assert modes == {training}
    # Inference leaves the network in eval mode; the next fit puts all of it back in training.
    clf.predict(X)
    assert not clf.module_.training
    clf.module_.train()
    clf.module_.net[1].eval()  # even a submodule switched by hand under a training root
    clf.seen_ = []
    clf.partial_fit(X, y)
    assert clf.seen_ and all(modes == {t} for t, modes in clf.seen_)


def test_history_records_every_batch(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(X, y)
    sizes = clf.history[-1, "batches", :, "train_batch_size"]
    losses = clf.history[-1, "batches", :, "train_loss"]
    assert sum(sizes) == len(X) and len(sizes) == -(-len(X) // 32)
    assert all(isinstance(v, float) and np.isfinite(v) for v in losses)
    assert clf.history[-1, "train_batch_count"] == len(sizes)
    np.testing.assert_allclose(clf.history[-1, "train_loss"], np.average(losses, weights=sizes))


class _NanOnSecondBatch(NGEBMClassifier):
    def compute_loss(self, X, y, training):
        loss, logits = super().compute_loss(X, y, training)
        self.calls_ = getattr(self, "calls_", 0) + 1
        if self.calls_ == 2:
            self.before_ = [p.detach().clone() for p in self.module_.parameters()]
            loss = loss * float("nan")
        return loss, logits


def test_divergence_stops_before_the_optimizer_step(small_blobs):
    X, y = small_blobs
    clf = _NanOnSecondBatch(**FAST)
    with pytest.raises(DivergenceError, match="the training loss is nan"):
        clf.fit(X, y)
    for p, before in zip(clf.module_.parameters(), clf.before_, strict=True):
        torch.testing.assert_close(p.detach(), before)


def test_compile_refuses_double_backward(small_blobs):
    X, y = small_blobs
    with pytest.raises(ValueError, match="compile=True.*grad_norm='exact'"):
        NGEBMClassifier(**FAST, compile=True).fit(X, y)


# ----------------------------------------------------------------------------- lifecycle (#14)
# As scikit-learn's MLPClassifier: a warm start continues the fitted network, so the data
# must have its features and exactly its classes; partial_fit's classes are fixed by its
# first call.


@pytest.fixture
def warm(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(warm_start=True, **FAST).fit(X, y)
    weights = clf.module_.net[1].weight.detach().clone()
    return clf, weights


def test_warm_start_continues_on_the_same_classes(warm, small_blobs):
    clf, weights = warm
    X, y = small_blobs
    order = np.random.default_rng(0).permutation(len(X))
    clf.fit(X[order], y[order])  # the same classes, in another order
    assert len(clf.history) == 2 * FAST["max_epochs"]  # continued, not restarted
    assert not torch.equal(clf.module_.net[1].weight, weights)
    assert clf.predict_proba(X).shape == (len(X), 3)


def test_warm_start_refuses_another_number_of_features(warm, small_blobs):
    clf, weights = warm
    X, y = small_blobs
    with pytest.raises(ValueError, match="X has 5 features, but NGEBMClassifier is expecting 4"):
        clf.fit(np.c_[X, X[:, :1]], y)
    assert torch.equal(clf.module_.net[1].weight, weights)  # the fitted network is intact


def test_warm_start_refuses_images_of_another_shape():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 1, 6, 6)).astype(np.float32), np.arange(30) % 2
    clf = NGEBMClassifier(warm_start=True, max_epochs=1, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"samples of shape \(1, 5, 6\)"):
        clf.fit(X[:, :, :5], y)


def test_warm_start_refuses_fewer_classes(warm, small_blobs):
    clf, _ = warm
    X, y = small_blobs
    keep = y != 2
    with pytest.raises(ValueError, match=r"same classes .* previously \[0, 1, 2\], y has \[0, 1\]"):
        clf.fit(X[keep], y[keep])
    assert clf.classes_.tolist() == [0, 1, 2]
    assert clf.predict_proba(X).shape == (len(X), 3)  # no stale or missing columns


def test_warm_start_refuses_a_new_class(warm, small_blobs):
    clf, _ = warm
    X, y = small_blobs
    with pytest.raises(ValueError, match=r"labels \[7\] that were not seen.*warm_start=False"):
        clf.fit(X, np.where(y == 2, 7, y))


def test_without_warm_start_fit_starts_afresh(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(X, y)
    keep = y != 2
    clf.fit(X[keep][:, :3], y[keep])
    assert clf.classes_.tolist() == [0, 1] and clf.n_features_in_ == 3
    assert clf.predict_proba(X[:, :3]).shape == (len(X), 2)


def test_partial_fit_refuses_other_classes_on_a_later_call(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).partial_fit(X, y, classes=[0, 1, 2])
    clf.partial_fit(X, y, classes=[2, 0, 1])  # the same set
    with pytest.raises(ValueError, match=r"`classes=\[0, 1\]` is not the same as on the first"):
        clf.partial_fit(X[y != 2], y[y != 2], classes=[0, 1])
    with pytest.raises(ValueError, match=r"`classes=\[0, 1, 2, 3\]` is not the same"):
        clf.partial_fit(X, y, classes=[0, 1, 2, 3])
    assert clf.classes_.tolist() == [0, 1, 2] and len(clf.history) == 2 * FAST["max_epochs"]


def _two_classes_without_weight(X, y):
    keep = y != 2
    return (X[keep], y[keep]), {"sample_weight": np.zeros(keep.sum())}


def _five_features_one_class(X, y):
    return (np.c_[X, X[:, :1]], np.zeros(len(y))), {}


@pytest.mark.parametrize(
    "refused, match",
    [
        # refused after the labels of 2 classes were recorded, next to a network of 3 logits
        (_two_classes_without_weight, "sample weights are all zero"),
        # refused after n_features_in_ = 5 was recorded, next to a network of 4 inputs
        (_five_features_one_class, "only one class"),
    ],
)
def test_a_refused_fit_leaves_a_fitted_estimator_unfitted(small_blobs, refused, match):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(X, y)
    args, kwargs = refused(X, y)
    with pytest.raises(ValueError, match=match):
        clf.fit(*args, **kwargs)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    assert clf.fit(X, y).predict_proba(X).shape == (len(X), 3)  # and it fits again


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_a_fit_refused_after_building_the_network_leaves_it_unfitted(small_blobs, method):
    X, y = small_blobs
    clf = NGEBMClassifier(augmentation=lambda batch: batch[:, :2], **FAST)
    with pytest.raises(ValueError, match=r"returned shape \(8, 2\) instead of \(8, 4\)"):
        getattr(clf, method)(X, y)
    with pytest.raises(NotFittedError):
        clf.predict(X)  # not the labels of an untrained network
    clf.set_params(augmentation=None)
    assert len(getattr(clf, method)(X, y).history) == FAST["max_epochs"]
