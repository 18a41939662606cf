"""The skorch side of the estimators: the one module that touches skorch's internals.

:class:`SkorchNet` is the ``skorch.NeuralNetClassifier`` that every estimator builds on. The
hooks all estimators share and every override of skorch's own code are here; elsewhere the
estimators only override documented hooks (``initialize_module``, ``train_step``, ``on_*``,
``get_iterator``) and the estimator face (``fit``, ``predict``, ...), and no other module
names a private skorch attribute.

Hooks, as skorch's customization guide documents them
------------------------------------------------------
- ``train_step_single`` / ``validation_step``: the loss needs the inputs themselves (gradient
  norms, sampling), so the estimator's ``compute_loss(X, y, training)`` takes the place of
  skorch's ``infer`` + ``get_loss``. Sample weights come with the batch (its ``X`` is the
  dict of :func:`._data.with_weights`, as skorch lets inputs travel together) and are passed
  on as ``compute_loss(..., sample_weight=w)``.
- ``check_data``: nothing; the public methods validate with scikit-learn first.
- ``on_epoch_begin``: per-epoch seeding, and the training mode of every module.
- ``infer``: the forward pass on ``device_`` (skorch's scoring callbacks reach it).

Overrides that follow skorch's own code, for the skorch range of ``pyproject.toml``
(``tests/test_skorch.py`` fails on any other installed version)
------------------------------------------------------------------------------------------
- ``_get_param_names``: skorch lists its private ``_params_to_validate`` as a parameter.
- ``initialize``, ``set_params``, ``load_params``: skorch moves modules and maps loaded tensors
  to ``self.device``, and ``"auto"`` is no torch device, so these show skorch the resolved
  ``device_`` for the duration of the call (and only then).
- ``__setstate__``: skorch maps the pickled tensors to ``state["device"]``; it is given the
  device they were trained on.
- ``_train``: skorch's ``partial_fit`` on validated tensors, called past the estimator's own
  ``partial_fit`` (the validating public face), so that skorch's notifications, ``fit_loop``
  and Ctrl-C handling run unchanged. The estimator's ``fit`` calls ``initialize`` first unless
  ``warm_start``, which is all that skorch's ``fit`` adds to its ``partial_fit``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from skorch import NeuralNetClassifier
from skorch.dataset import unpack_data
from skorch.utils import to_tensor
from torch import nn

from ._data import split_weights, with_weights
from ._device import pickled_tensor_device, seed_epoch

__all__ = ["SkorchNet"]


class SkorchNet(NeuralNetClassifier):
    """skorch's classifier with the hooks and overrides the estimators share.

    Not an estimator: :class:`~ebmclassifier._base.EBMClassifierBase` adds the public face and
    the ``compute_loss`` / ``handle_divergence`` hooks it calls.
    """

    # Fitted tensors that skorch maps to the CPU when a GPU-trained estimator is unpickled
    # (documented skorch attribute; modules and optimizers are added by skorch itself).
    cuda_dependent_attributes_ = ["input_min_", "input_max_"]

    def __init__(self, module, **kwargs) -> None:
        super().__init__(module, **kwargs)
        # skorch's ``classes`` parameter does nothing here: ``classes_`` are the labels seen in
        # fit (or given to the first partial_fit), so it is not offered as a parameter.
        del self.classes

    def _get_param_names(self):
        # skorch lists every attribute not ending in "_"; its private bookkeeping
        # (``_params_to_validate``) is no parameter, and clone rebuilds it from the kwargs.
        return [name for name in super()._get_param_names() if not name.startswith("_")]

    # ------------------------------------------------------------------ the device

    @contextmanager
    def _device_shown_to_skorch(self) -> Iterator[None]:
        """``self.device = device_`` while skorch works, then the parameter as it was."""
        shown = getattr(self, "device_", None)
        if shown is None:  # not fitted: skorch moves nothing yet
            yield
            return
        requested = self.device
        self.device = shown
        try:
            yield
        finally:
            if self.device is shown:  # else the call set the parameter itself
                self.device = requested

    def initialize(self):
        """skorch's ``initialize``, with the modules moved to ``device_``."""
        with self._device_shown_to_skorch():
            return super().initialize()

    def set_params(self, **params):
        """skorch's ``set_params``; a re-initialized module goes to ``device_``.

        A new ``device`` takes effect at the next fit, as ``device="auto"`` is resolved there.
        """
        if "device" in params:
            super().set_params(device=params.pop("device"))
        with self._device_shown_to_skorch():
            return super().set_params(**params)

    def load_params(self, *args, **kwargs):
        """skorch's ``load_params``, mapping the loaded tensors to ``device_``."""
        with self._device_shown_to_skorch():
            return super().load_params(*args, **kwargs)

    def __setstate__(self, state) -> None:
        # skorch maps the tensors to ``state["device"]``; give it the one the estimator was
        # trained on ("auto" is ours, not torch's) and restore the parameter afterwards.
        requested = state.get("device")
        state["device"] = pickled_tensor_device(state)
        super().__setstate__(state)
        if "device_" in state:
            self.device_ = torch.device(self.device)  # the CPU, where CUDA is missing
        self.device = requested

    def infer(self, x, **fit_params):
        """The module's output for one batch ``x`` (without its weights), on ``device_``."""
        x, _ = split_weights(x)
        return self.module_(to_tensor(x, device=self.device_), **fit_params)

    # ------------------------------------------------------------------ the training loop

    def _train(
        self, X: torch.Tensor, y: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> None:
        """Train on validated tensors: skorch's ``partial_fit``, past the estimator's own."""
        super().partial_fit(with_weights(X, sample_weight), y)

    def check_data(self, X, y=None) -> None:
        """Nothing: the public methods validate the data with scikit-learn first."""

    def _set_mode(self, training: bool) -> None:
        """Training or evaluation mode for every torch module of the estimator."""
        for name, value in list(vars(self).items()):
            if name.endswith("_") and isinstance(value, nn.Module):
                value.train(training)

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """Start an epoch: seed torch with ``seed_ + epoch``, every module in training mode."""
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        if self.random_state is not None:
            seed_epoch(self.seed_, len(self.history))
        # skorch sets the modes on every batch, which walks all submodules; they change only
        # between phases (training, validation, inference), so set them then.
        self._set_mode(True)

    def train_step_single(self, batch, **fit_params):
        """Forward and backward pass of ``compute_loss`` on one training batch.

        A non-finite loss goes to ``handle_divergence`` before the optimizer steps; a loss
        returned without a graph is not back-propagated, nor is that of a batch whose sample
        weights are all zero (so the optimizer, momentum included, leaves the weights alone).
        """
        if not self.module_.training:  # inference in a callback switched the modes
            self._set_mode(True)
        Xi, yi = unpack_data(batch)
        Xi, weights = _weights_of(Xi)
        loss, logits = self.compute_loss(self.augment_batch(Xi), yi, training=True, **weights)
        if weights and not bool(weights["sample_weight"].any()):
            loss = loss.detach()  # no sample of the batch counts: no step, as if it were dropped
        # A loss without a graph is a step the estimator rejected (a diverged JEM step): no
        # gradient, so the optimizer's step after this leaves the weights as they were.
        if loss.requires_grad:
            loss.backward()
        # Checked after the backward pass and before the optimizer step, so the weights are
        # still good: on a GPU reading the loss waits for the device, and here that wait no
        # longer holds back the queueing of the backward kernels. ``math.isfinite`` of the
        # float costs a microsecond, ``torch.isfinite`` a tensor and a kernel.
        if not math.isfinite(loss.item()):
            self.handle_divergence(loss)
        return {"loss": loss.detach(), "y_pred": logits.detach()}

    def validation_step(self, batch, **fit_params):
        """The loss of one validation batch, in evaluation mode, without a backward pass."""
        if self.module_.training:
            self._set_mode(False)
        Xi, yi = unpack_data(batch)
        Xi, weights = _weights_of(Xi)
        # The energy terms need input gradients, also when validating.
        with torch.enable_grad():
            loss, logits = self.compute_loss(Xi, yi, training=False, **weights)
        return {"loss": loss.detach(), "y_pred": logits.detach()}


def _weights_of(X) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A batch's inputs, and ``{"sample_weight": w}`` for ``compute_loss`` (empty without)."""
    X, sample_weight = split_weights(X)
    return X, ({} if sample_weight is None else {"sample_weight": sample_weight})
