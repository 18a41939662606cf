"""Stand-ins the compare tests share: a small softmax regression with the parts of the
estimator contract compare uses, a registry of it, and recording estimators."""

import time

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from ebmclassifier import NGEBMClassifier
from ebmclassifier.experiments.compare import ModelSpec


class SoftmaxRegression(ClassifierMixin, BaseEstimator):
    """A linear softmax classifier with the parts of the estimator contract compare uses."""

    def __init__(self, max_epochs=5, lr=0.5, random_state=None, device="cpu", verbose=0,
                 callbacks=None):  # fmt: skip
        self.max_epochs = max_epochs
        self.lr = lr
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.callbacks = callbacks

    def fit(self, X, y):
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        X = torch.as_tensor(np.asarray(X, dtype=np.float32))
        torch.manual_seed(self.random_state or 0)
        self.module_ = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(X[0].numel(), len(self.classes_))
        )
        self.device_ = "cpu"
        self.history = []
        callbacks = [cb for _, cb in (self.callbacks or [])]
        for cb in callbacks:
            cb.on_train_begin(self)
        optimizer = torch.optim.SGD(self.module_.parameters(), lr=self.lr)
        target = torch.as_tensor(y_enc)
        for _ in range(self.max_epochs):
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(self.module_(X), target)
            loss.backward()
            optimizer.step()
            self.history.append({"train_loss": loss.item(), "dur": time.perf_counter() - start})
            for cb in callbacks:
                cb.on_epoch_end(self)
        for cb in callbacks:
            cb.on_train_end(self)
        return self

    def _logits(self, X):
        return self.module_(torch.as_tensor(np.asarray(X, dtype=np.float32)))

    def predict_proba(self, X):
        with torch.no_grad():
            return torch.softmax(self._logits(X), dim=1).numpy().astype(np.float64)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def score_ood(self, X, method="energy"):
        x = torch.as_tensor(np.asarray(X, dtype=np.float32)).requires_grad_(True)
        energy = -torch.logsumexp(self.module_(x), dim=1)
        if method == "energy":
            return energy.detach().numpy()
        if method == "max_softmax":
            return -self.predict_proba(X).max(axis=1)
        (grad,) = torch.autograd.grad(energy.sum(), x)
        return grad.flatten(1).norm(dim=1).numpy()


def stand_in_registry():
    return {
        "ce": ModelSpec("ce", "stand-in CE", build=lambda p: SoftmaxRegression(**p)),
        "ce_ts": ModelSpec("ce_ts", "temperature-scaled ce", scores=("max_softmax",),
                           calibrates="ce"),
        "ngebm": ModelSpec("ngebm", "stand-in, other lr",
                           build=lambda p: SoftmaxRegression(**{**p, "lr": 0.1})),
        "jem": ModelSpec("jem", "JEM", unavailable="ebmclassifier.jem.JEMClassifier is missing"),
    }  # fmt: skip


def recording_registry(seen: dict) -> dict:
    """A registry whose one model, ``ce``, stores the X it is fitted on in ``seen["X_fit"]``."""

    class Recording(SoftmaxRegression):
        def fit(self, X, y):
            seen["X_fit"] = np.asarray(X)
            return super().fit(X, y)

    return {"ce": ModelSpec("ce", "records", build=lambda p: Recording(**p))}


class RecordingNGEBM(NGEBMClassifier):
    """NGEBMClassifier that keeps what it was fitted on (and itself) in ``SEEN``."""

    SEEN: dict = {}

    def fit(self, X, y, **kwargs):
        RecordingNGEBM.SEEN.update(X_fit=np.asarray(X), y_fit=np.asarray(y), model=self)
        return super().fit(X, y, **kwargs)


def tiny_ce(params):
    """A small CE network (one hidden layer of 16) that records its fit."""
    return RecordingNGEBM(beta=0.0, module__hidden_sizes=(16,), **params)
