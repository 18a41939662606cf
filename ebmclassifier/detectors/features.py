"""Penultimate features and last-layer parameters of a fitted estimator's network.

What the post-hoc detectors (:mod:`ebmclassifier.detectors`) are fitted on; the default
networks expose them as ``penultimate(x)`` and ``last_layer`` (:mod:`ebmclassifier.nn`).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils.validation import check_array, check_is_fitted
from torch import nn

from .._estimator.inference import map_batches
from .._utils.device import module_device
from .._utils.modes import eval_mode
from .._utils.parameters import ParamChecker, is_int
from .._utils.validation import as_numpy, check_sample_shape, without_negative_strides

__all__ = ["last_layer_parameters", "penultimate_features"]


def _feature_module(estimator) -> nn.Module:
    """The network of a fitted estimator (or a module itself), with the feature protocol."""
    if isinstance(estimator, nn.Module):
        module = estimator
    else:
        check_is_fitted(estimator)
        module = getattr(estimator, "module_", None)
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"estimator must be a fitted ebmclassifier estimator (with a module_) or a "
                f"torch.nn.Module. Got {type(estimator).__name__!r}."
            )
    if isinstance(module, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
        module = module.module
    if not (callable(getattr(module, "penultimate", None)) and hasattr(module, "last_layer")):
        raise TypeError(
            f"The network {type(module).__name__!r} has no penultimate(x) method and "
            "last_layer attribute. Use the library's networks (MLP, ConvNet, WideResNet) or "
            "give your module both, with forward(x) == last_layer(penultimate(x))."
        )
    return module


def penultimate_features(estimator, X, *, batch_size: int | None = None) -> np.ndarray:
    """Penultimate features of ``X`` under a fitted estimator's network, in batches.

    Runs ``estimator.module_.penultimate`` in evaluation mode without gradients, on the device
    the network lives on, ``batch_size`` samples at a time, so memory stays flat. Train-mode
    flags of the network are restored afterwards.

    Parameters
    ----------
    estimator : fitted estimator or torch.nn.Module
        An ebmclassifier estimator whose ``module_`` (or a module that itself) has
        ``penultimate(x)`` and ``last_layer``, as the networks of :mod:`ebmclassifier.nn`.
    X : array-like or torch.Tensor of shape (n_samples, ...)
        Input as the estimator takes it (after the same preprocessing as in ``fit``),
        validated as the estimator's ``predict`` validates it; float32 samples of any shape
        for a module.
    batch_size : int or None, default=None
        Rows per batch; ``-1``: all at once. ``None`` uses the estimator's inference batch
        size (its ``iterator_valid__batch_size``, else ``batch_size``), or 256 for a module.

    Returns
    -------
    features : ndarray of shape (n_samples, n_features_penultimate), float32

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(beta=0, max_epochs=2, module__hidden_sizes=(8,), random_state=0)
    >>> features = penultimate_features(clf.fit(X, y), X, batch_size=16)
    >>> features.shape, features.dtype
    ((40, 8), dtype('float32'))
    >>> from scipy.special import logsumexp
    >>> W, b = last_layer_parameters(clf)  # logits = features @ W.T + b
    >>> np.allclose(-logsumexp(features @ W.T + b, axis=1), clf.energy(X), atol=1e-5)
    True
    """
    module = _feature_module(estimator)
    X = _feature_input(estimator, X)
    return _map_penultimate(module, X, _feature_batch_size(estimator, batch_size, len(X)))


def _feature_input(estimator, X) -> np.ndarray:
    """``X`` validated as the estimator validates it (``_validate_X``), or as float32 samples
    of any shape for a module (or an estimator of another library)."""
    validate = getattr(estimator, "_validate_X", None)
    if callable(validate):
        return validate(X, reset=False)
    X = check_array(as_numpy(X), dtype=np.float32, allow_nd=True, ensure_min_features=1)
    if hasattr(estimator, "input_shape_"):
        check_sample_shape(estimator, X, reset=False)
    return without_negative_strides(X)


def _feature_batch_size(estimator, batch_size, n_samples: int) -> int:
    """The rows per batch: ``batch_size``, else the estimator's inference batch size (its
    ``iterator_valid__batch_size`` or ``batch_size``), else 256; ``-1`` is all at once."""
    if batch_size is None:
        inference_batch_size = getattr(estimator, "_inference_batch_size", None)
        if callable(inference_batch_size):
            return inference_batch_size(n_samples)
        batch_size = getattr(estimator, "batch_size", 256)
    check = ParamChecker.of({"batch_size": batch_size})
    ok = is_int(batch_size) and (batch_size >= 1 or batch_size == -1)
    check.satisfies("batch_size", ok, "an int >= 1, -1 (all at once) or None")
    check.raise_if_any()
    return n_samples if batch_size == -1 else int(batch_size)


def _map_penultimate(module: nn.Module, X: np.ndarray, batch_size: int) -> np.ndarray:
    """``module.penultimate`` over ``X`` (n, ...) float32 in eval mode, batch by batch."""
    device = module_device(module)
    with eval_mode(module), torch.no_grad():  # no dropout noise, no batch-norm statistics
        return map_batches(X, module.penultimate, batch_size, device)


def last_layer_parameters(estimator) -> tuple[np.ndarray, np.ndarray]:
    """Weight and bias of the network's last linear layer: ``logits = x @ W.T + b``.

    Parameters
    ----------
    estimator : fitted estimator or torch.nn.Module
        As for :func:`penultimate_features`.

    Returns
    -------
    weight : ndarray of shape (n_classes, n_features_penultimate), float64
    bias : ndarray of shape (n_classes,), float64
        Zeros when the layer has no bias.

    Examples
    --------
    >>> from ebmclassifier.nn import MLP
    >>> W, b = last_layer_parameters(MLP(4, 3, hidden_sizes=(8,)))
    >>> W.shape, b.shape
    ((3, 8), (3,))
    """
    layer = _feature_module(estimator).last_layer
    weight = layer.weight.detach().cpu().double().numpy()
    bias = layer.bias
    bias = np.zeros(len(weight)) if bias is None else bias.detach().cpu().double().numpy()
    return weight, bias
