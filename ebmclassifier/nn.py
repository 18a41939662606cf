"""Default networks, chosen from the shape of the data.

None of them uses batch-norm: it couples the samples of a batch, which breaks the per-sample
energy gradients that NG-EBM penalises and JEM samples with. SiLU activations keep the energy
surface smooth, which Langevin sampling and the gradient-norm penalty both prefer.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import torch
from torch import nn

__all__ = ["MLP", "ConvNet"]


class MLP(nn.Module):
    """A multi-layer perceptron from flat features to logits.

    Parameters
    ----------
    n_features : int
        Input size; inputs of any shape ``(n, *input_shape)`` are flattened.
    n_classes : int
    hidden_sizes : sequence of int, default=(256, 256)
    dropout : float, default=0.0

    Examples
    --------
    >>> import torch
    >>> MLP(4, 3)(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden_sizes: Sequence[int] = (256, 256),
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = n_features
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), nn.SiLU()]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = size
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ConvNet(nn.Module):
    """A small convolutional network for ``(C, L)`` sequences or ``(C, H, W)`` images.

    Each stage is a stride-1 convolution followed by a stride-2 one (the downsampling is
    learned, not pooled), then a hidden linear layer and the logits. The flattened feature map
    keeps the position information that e.g. MNIST-1D needs.

    Parameters
    ----------
    input_shape : tuple of int
        ``(C, L)`` or ``(C, H, W)``.
    n_classes : int
    channels : sequence of int, default=(32, 64)
        Channels of each stage.
    hidden_size : int, default=128
    kernel_size : int, default=3

    Examples
    --------
    >>> import torch
    >>> ConvNet((1, 8, 8), 10)(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        n_classes: int,
        channels: Sequence[int] = (32, 64),
        hidden_size: int = 128,
        kernel_size: int = 3,
    ) -> None:
        super().__init__()
        input_shape = tuple(int(s) for s in input_shape)
        if len(input_shape) not in (2, 3):
            raise ValueError(
                f"ConvNet takes (C, L) or (C, H, W) inputs; got sample shape {input_shape!r}."
            )
        conv = nn.Conv1d if len(input_shape) == 2 else nn.Conv2d
        pad = kernel_size // 2
        layers: list[nn.Module] = []
        width = input_shape[0]
        for out in channels:
            layers += [
                conv(width, out, kernel_size, padding=pad),
                nn.SiLU(),
                conv(out, out, kernel_size, stride=2, padding=pad),
                nn.SiLU(),
            ]
            width = out
        self.features = nn.Sequential(*layers)
        with torch.no_grad():
            n_flat = prod(self.features(torch.zeros(1, *input_shape)).shape[1:])
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(n_flat, hidden_size),
            nn.SiLU(),
            nn.Linear(hidden_size, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
