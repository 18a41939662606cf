"""The one way the tests build small estimators, and fitted ones that tests share.

``tiny(kind, **overrides)`` builds a small estimator of a kind (:data:`KINDS`): the settings
below, then the test's own. A test whose outcome depends on its settings (an accuracy bound, a
bitwise comparison, a number of epochs counted) states them as overrides, so a change here
cannot move it. ``params(kind, **overrides)`` gives the same settings as a dict, for the places
that need one (a grid, a subprocess).

``fitted(kind, data, **overrides)`` (a session fixture of ``tests/conftest.py``) fits such an
estimator once per session on one of the shared data sets and lends it to every test that
asks for the same one. It is read-only: a test that only predicts, scores, saves, loads or
inspects takes it as it is; a test that fits it again, sets a parameter or changes its network
takes ``copy.deepcopy`` of it. After each test, every model it borrowed is checked against the
digest taken when it was fitted (its network's tensors, its history's length, its attributes):
a test that changed one fails, naming it.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier

#: kind -> (class, its small settings). ``ce`` is NG-EBM without the penalty (beta=0).
KINDS = {
    "ngebm": (NGEBMClassifier, dict(max_epochs=1, module__hidden_sizes=(8,), random_state=0)),
    "ce": (
        NGEBMClassifier,
        dict(beta=0.0, max_epochs=1, module__hidden_sizes=(8,), random_state=0),
    ),
    "jem": (
        JEMClassifier,
        dict(max_epochs=1, module__hidden_sizes=(8,), sgld_steps=2, buffer_size=20, random_state=0),
    ),
    "latent": (LatentStructureClassifier, dict(max_epochs=1, n_latent=3, random_state=0)),
    "tree": (
        LatentStructureClassifier,
        dict(
            structure="dependency_tree",
            max_epochs=1,
            random_state=0,
            encoder__embedding_dim=4,
            encoder__hidden_size=4,
            encoder__arc_size=4,
            decoder__embedding_dim=4,
            decoder__hidden_size=4,
        ),
    ),
}


def params(kind: str, **overrides) -> dict:
    """The small settings of ``kind``, updated by ``overrides``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    return {**KINDS[kind][1], **overrides}


def tiny(kind: str, **overrides):
    """A small, unfitted estimator of ``kind`` (``"ngebm"``, ``"jem"``, ``"latent"``...)."""
    settings = params(kind, **overrides)
    return KINDS[kind][0](**settings)


def digest(estimator) -> str:
    """A hash of what a fit leaves: the network's tensors, the history's length, the names and
    kinds of the attributes, the arrays, tensors and plain values among them, the parameters."""
    h = hashlib.sha256()
    module = getattr(estimator, "module_", None)
    if module is not None:
        for name, tensor in sorted(module.state_dict().items()):
            h.update(name.encode())
            h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    history = getattr(estimator, "history_", None)
    h.update(str(len(history) if history is not None else None).encode())
    for name, value in sorted(vars(estimator).items()):
        h.update(f"{name}:{type(value).__name__}".encode())
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        if isinstance(value, np.ndarray) and value.dtype != object:
            h.update(np.ascontiguousarray(value).view(np.uint8))
        elif isinstance(value, int | float | str | bool | tuple | type(None)):
            h.update(repr(value).encode())
    h.update(repr(sorted(estimator.get_params(deep=False).items(), key=str)).encode())
    return h.hexdigest()


class FittedModels:
    """The session's shared fitted estimators, and the ones the running test borrowed."""

    def __init__(self, data):
        self._data = data  # name -> (X, y, ...), the session's data sets
        self._models: dict[tuple, tuple[object, str]] = {}
        self.borrowed: list[tuple[tuple, object]] = []

    def __call__(self, kind: str, data: str = "small_blobs", **overrides):
        key = (kind, data, repr(sorted(overrides.items(), key=str)))
        if key not in self._models:
            X, y = self._data(data)[:2]
            model = tiny(kind, **overrides).fit(X, y)
            self._models[key] = (model, digest(model))
        model, _ = self._models[key]
        self.borrowed.append((key, model))
        return model

    def changed(self) -> list[str]:
        """The borrowed models that no longer match their digest (the test changed them)."""
        found = []
        for key, model in self.borrowed:
            if digest(model) != self._models[key][1]:
                found.append(f"{key[0]} on {key[1]} with {key[2]}")
        self.borrowed = []
        return found
