"""The default decoder of the categorical latent-structure classifier.

:class:`BilinearDecoder` is linear in the latent ``z``, so a one-hot ``z`` selects one of K
linear classifiers and a point of the simplex mixes their logits. The default encoder is a
linear :class:`~ebmclassifier.nn.MLP`; :class:`~ebmclassifier.latent.networks.LatentModel`
puts the two together.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["BilinearDecoder"]


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
