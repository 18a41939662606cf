"""The base's training loop: what it does per batch, now that it does less than skorch's."""

import numpy as np
import pytest
import torch
from skorch.dataset import ValidSplit

from ebmclassifier import DivergenceError, NGEBMClassifier

FAST = dict(max_epochs=2, lr=1e-2, module__hidden_sizes=(16,), random_state=0, batch_size=32)


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
