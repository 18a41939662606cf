"""Standardization fitted on a training split, as an array transform and as a torch layer."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

__all__ = ["Standardizer"]


class Standardizer:
    """Standardization fitted on a training split: per feature, or per channel for images.

    Flat samples, shaped ``(n, d)``, are standardized per feature. Images and sequences, shaped
    ``(n, C, ...)``, are standardized per channel, over every position: a convolution shares
    its weights across positions, so every position keeps one scale (per-position statistics
    would also blow up the pixels that are nearly constant in training, such as image
    borders). The statistics are scikit-learn's
    :class:`~sklearn.preprocessing.StandardScaler` (a feature or channel that is constant in
    training keeps its scale). The same transform is available as a torch layer
    (:meth:`as_module`) so that gradients can be taken in the data's own units.

    Parameters
    ----------
    X_train : ndarray of shape (n_samples, n_features) or (n_samples, n_channels, ...)
        The data the mean and standard deviation are computed on.

    Attributes
    ----------
    mean, scale : ndarray
        Shaped to broadcast against one sample: ``(n_features,)`` or ``(n_channels, 1, ...)``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 1.0], [2.0, 1.0]], dtype=np.float32)
    >>> Standardizer(X).transform(X)
    array([[-1.,  0.],
           [ 1.,  0.]], dtype=float32)
    >>> images = np.arange(16, dtype=np.float32).reshape(2, 2, 4)  # 2 samples, 2 channels
    >>> Standardizer(images).mean.ravel()
    array([5.5, 9.5])
    """

    def __init__(self, X_train: np.ndarray):
        X_train = np.asarray(X_train)
        if X_train.ndim > 2:  # (n, C, ...): one row per (sample, position), one column per channel
            rows = np.moveaxis(X_train, 1, -1).reshape(-1, X_train.shape[1])
            shape = (X_train.shape[1],) + (1,) * (X_train.ndim - 2)
        else:
            rows, shape = X_train, X_train.shape[1:]
        scaler = StandardScaler().fit(rows)
        self.mean = scaler.mean_.reshape(shape)
        self.scale = scaler.scale_.reshape(shape)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Standardize ``X`` (same sample shape as the training data); float32, same shape.

        Parameters
        ----------
        X : ndarray of shape (n_samples, ...)

        Returns
        -------
        X_standardized : ndarray of float32, same shape as ``X``

        Examples
        --------
        >>> import numpy as np
        >>> X_train = np.random.default_rng(0).normal(3.0, 2.0, size=(100, 2))
        >>> scaler = Standardizer(X_train)
        >>> Z = scaler.transform(X_train)
        >>> Z.dtype, np.allclose(Z.mean(axis=0), 0, atol=1e-6), np.allclose(Z.std(axis=0), 1)
        (dtype('float32'), True, True)
        >>> np.allclose(scaler.transform(X_train + scaler.scale), Z + 1, atol=1e-5)  # one scale up
        True
        """
        return ((X - self.mean) / self.scale).astype(np.float32)

    def as_module(self, device) -> torch.nn.Module:
        """The transform as a torch layer, ``(x - mean) / scale``, on ``device``.

        Parameters
        ----------
        device : str or torch.device

        Returns
        -------
        layer : torch.nn.Module

        Examples
        --------
        The same numbers as :meth:`transform`, and gradients in the data's own units:

        >>> import numpy as np
        >>> import torch
        >>> X_train = np.random.default_rng(0).normal(3.0, 2.0, size=(100, 2))
        >>> scaler = Standardizer(X_train)
        >>> layer = scaler.as_module("cpu")
        >>> x = torch.tensor(X_train, dtype=torch.float32, requires_grad=True)
        >>> np.allclose(layer(x).detach().numpy(), scaler.transform(X_train), atol=1e-6)
        True
        >>> layer(x).sum().backward()
        >>> np.allclose(x.grad[0].numpy(), 1 / scaler.scale)  # d((x - mean) / scale)/dx
        True
        """
        as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
        return _Affine(as_tensor(self.mean), as_tensor(self.scale)).to(device)


class _Affine(torch.nn.Module):
    def __init__(self, mean: torch.Tensor, scale: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale


def _standardized_digits(seed: int) -> tuple:
    """``(X_train, X_test, y_train, y_test)`` of the digits of ``demo`` and ``continual``: a
    stratified 70/30 split drawn with ``seed``, standardized per feature on its training part."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=seed
    )
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test
