"""The network of the categorical latent-structure classifier and its default decoder.

:class:`BilinearDecoder` is linear in the latent ``z``, so a one-hot ``z`` selects one of K
linear classifiers and a point of the simplex mixes their logits. The default encoder is a
linear :class:`~ebmclassifier.nn.MLP`; :class:`CategoricalLatentModel` puts the two together
around the simplex.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..networks import LatentModel
from ..polytope import Polytope
from .simplex import Simplex

__all__ = ["BilinearDecoder", "CategoricalLatentModel"]


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


class CategoricalLatentModel(LatentModel):
    """Encoder ``x -> s`` (K scores) and decoder ``(x, z) -> logits`` with a categorical latent.

    A :class:`~ebmclassifier.latent.networks.LatentModel` on the simplex
    (:class:`~ebmclassifier.latent.categorical.simplex.Simplex`): ``z`` is one of K values.

    Parameters
    ----------
    encoder : nn.Module
        Maps a batch of inputs to scores of shape (n, K).
    decoder : nn.Module
        Called as ``decoder(x, z)`` with ``z`` of shape (n, K) on the simplex (one-hot or
        relaxed); returns logits of shape (n, n_classes), e.g. :class:`BilinearDecoder`.
    gradient : str
        The training method; decides the deterministic latent of :meth:`forward` (see
        :func:`~ebmclassifier.latent.methods.polytope_latent_eval`).
    temperature : float
        ``tau`` of the Gumbel methods.

    Examples
    --------
    >>> import torch
    >>> model = CategoricalLatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), "spigot")
    >>> x = torch.randn(5, 4)
    >>> model.latent(x).sum(dim=1)  # one-hot rows: the MAP latent
    tensor([1., 1., 1., 1., 1.])
    >>> model(x).shape
    torch.Size([5, 2])
    """

    @property
    def polytope(self) -> Polytope:
        return Simplex()

    def predict_latent(self, x: torch.Tensor) -> torch.Tensor:
        """The MAP latent of each sample, as an index: ``argmax_k s_k(x)``.

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs.

        Returns
        -------
        Tensor of shape (n,), int64

        Examples
        --------
        >>> import torch
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> model = CategoricalLatentModel(encoder, BilinearDecoder(3, 4, 2), gradient="spigot")
        >>> torch.equal(model.predict_latent(x), encoder(x).argmax(dim=1))
        True
        """
        with torch.no_grad():
            return self.scores(x).argmax(dim=-1)

    def latent_features(self, x: torch.Tensor) -> torch.Tensor:
        """The marginals as one row of features per sample (the estimator's ``transform``).

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs.

        Returns
        -------
        Tensor of shape (n, K)
            :meth:`marginals`.

        Examples
        --------
        >>> import torch
        >>> model = CategoricalLatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), "ste")
        >>> model.latent_features(torch.randn(5, 4)).shape
        torch.Size([5, 3])
        """
        return self.marginals(x)
