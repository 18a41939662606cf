"""Networks of the categorical latent-structure classifier: encoder -> latent -> decoder.

:class:`BilinearDecoder` is the default decoder: linear in the latent ``z``, so a one-hot ``z``
selects one of K linear classifiers and a point of the simplex mixes their logits.
:class:`LatentModel` puts an encoder and a decoder together; its ``forward`` is the prediction
path (``x -> logits`` with the deterministic latent), which is all the shared estimator base
needs for ``predict_proba``, ``energy`` and ``score_ood``. Training goes through
:func:`~ebmclassifier.latent.categorical.categorical_latent` instead (see
:class:`~ebmclassifier.latent.classifier.LatentStructureClassifier`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .categorical import categorical_latent_eval
from .score_function import RunningMeanBaseline

__all__ = ["BilinearDecoder", "LatentModel"]


class BilinearDecoder(nn.Module):
    """``logits(x, z)_c = sum_k z_k (W_k x + b_k)_c``: one linear classifier per latent value.

    Parameters
    ----------
    n_latent : int
        K, the number of latent values.
    n_features : int
        Input size; inputs of any shape ``(n, *input_shape)`` are flattened.
    n_classes : int

    Examples
    --------
    >>> import torch
    >>> decoder = BilinearDecoder(3, 4, 2)
    >>> x = torch.randn(5, 4)
    >>> z = torch.eye(3)[[0, 1, 2, 0, 1]]
    >>> bool(torch.allclose(decoder(x, z)[0], x[0] @ decoder.weight[0].T + decoder.bias[0]))
    True
    """

    def __init__(self, n_latent: int, n_features: int, n_classes: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_latent, n_classes, n_features))
        self.bias = nn.Parameter(torch.empty(n_latent, n_classes))
        # The initialisation of nn.Linear, per latent value.
        bound = 1.0 / math.sqrt(n_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Logits of shape (n, n_classes) from inputs (n, ...) and latents (n, K)."""
        x = x.flatten(1)
        n_latent, n_classes, _ = self.weight.shape
        # (n, K*C): every latent value's logits, then mixed by z.
        per_latent = (x @ self.weight.reshape(n_latent * n_classes, -1).T).view(
            -1, n_latent, n_classes
        )
        return torch.einsum("nk,nkc->nc", z, per_latent) + z @ self.bias


class LatentModel(nn.Module):
    """Encoder ``x -> s`` (K scores) and decoder ``(x, z) -> logits`` with a categorical latent.

    Parameters
    ----------
    encoder : nn.Module
        Maps a batch of inputs to scores of shape (n, K).
    decoder : nn.Module
        Called as ``decoder(x, z)`` with ``z`` of shape (n, K) on the simplex (one-hot or
        relaxed); returns logits of shape (n, n_classes).
    gradient : str
        The training method; decides the deterministic latent of :meth:`forward` (see
        :func:`~ebmclassifier.latent.categorical.categorical_latent_eval`).
    temperature : float
        ``tau`` of the Gumbel methods.

    Attributes
    ----------
    baseline : RunningMeanBaseline
        The score-function baseline; a buffer, so it moves and pickles with the model.

    Examples
    --------
    >>> import torch
    >>> model = LatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), gradient="spigot")
    >>> x = torch.randn(5, 4)
    >>> model.latent(x).sum(dim=1)  # one-hot rows: the MAP latent
    tensor([1., 1., 1., 1., 1.])
    >>> model(x).shape
    torch.Size([5, 2])
    """

    def __init__(
        self, encoder: nn.Module, decoder: nn.Module, gradient: str, temperature: float = 1.0
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.gradient = gradient
        self.temperature = temperature
        self.baseline = RunningMeanBaseline()

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """The deterministic latent (n, K) fed to the decoder at prediction time.

        The MAP one-hot ``onehot(argmax(s))``, or the relaxed point of a relaxation (see
        :func:`~ebmclassifier.latent.categorical.categorical_latent_eval`).

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs, as the encoder takes them.

        Returns
        -------
        Tensor of shape (n, K)
            Rows on the probability simplex.

        Examples
        --------
        >>> import torch
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> z = LatentModel(encoder, BilinearDecoder(3, 4, 2), gradient="spigot").latent(x)
        >>> torch.equal(z, torch.eye(3)[encoder(x).argmax(dim=1)])  # the MAP one-hot
        True
        >>> relaxed = LatentModel(encoder, BilinearDecoder(3, 4, 2), gradient="softmax").latent(x)
        >>> torch.allclose(relaxed, torch.softmax(encoder(x), dim=1))
        True
        """
        return categorical_latent_eval(self.encoder(x), self.gradient, self.temperature)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(x, self.latent(x))
