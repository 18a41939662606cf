"""The growing output layer: rows for new classes, every old row and weight kept.

:func:`output_layer` finds a network's last linear layer (``module.last_layer``, as the networks
of :mod:`ebmclassifier.nn` name it, or the last layer of an ``nn.Sequential``);
:func:`grow_output_layer` gives it rows for new classes, leaving every old row and every other
weight as it was, and carries the optimizer's state over to the grown tensors.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

__all__ = ["grow_output_layer", "output_layer"]


def output_layer(module: nn.Module) -> nn.Linear:
    """The last linear layer of a network: the one that gives one logit per class.

    Parameters
    ----------
    module : torch.nn.Module
        A network of :mod:`ebmclassifier.nn` (its ``last_layer``), another module with a
        ``last_layer`` attribute that is an ``nn.Linear``, or an ``nn.Sequential`` whose last
        layer is one.

    Returns
    -------
    torch.nn.Linear

    Raises
    ------
    TypeError
        When no such layer is found.

    Examples
    --------
    >>> from ebmclassifier.nn import MLP
    >>> net = MLP(n_features=4, n_classes=3, hidden_sizes=(8,))
    >>> output_layer(net) is net.last_layer, output_layer(net).out_features
    (True, 3)
    """
    layer = getattr(module, "last_layer", None)
    if layer is None and isinstance(module, nn.Sequential) and len(module):
        layer = module[-1]
    if not isinstance(layer, nn.Linear):
        raise TypeError(
            f"class_incremental=True grows the network's output layer, but "
            f"{type(module).__name__} has no recognisable one: give the module a 'last_layer' "
            "attribute (or property) returning the torch.nn.Linear that computes the logits, "
            "as the networks of ebmclassifier.nn do, or use an nn.Sequential ending in "
            "nn.Linear."
        )
    return layer


def grow_output_layer(
    layer: nn.Linear,
    old_rows: np.ndarray,
    n_outputs: int,
    optimizer: torch.optim.Optimizer | None = None,
    generator: torch.Generator | None = None,
) -> None:
    """Give a linear output layer ``n_outputs`` rows; old row ``r`` moves to ``old_rows[r]``.

    The new rows (the positions not in ``old_rows``) are drawn as ``torch.nn.Linear`` draws
    its weights, uniform in ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]`` for the weight and the bias.
    The old rows are copied bitwise. The layer's ``weight`` and ``bias`` become new
    parameters, so an ``optimizer`` that held the old ones is given the new ones, and its
    per-parameter state (Adam's moments, SGD's momentum: any tensor of the parameter's shape)
    is carried over, with zeros for the new rows; scalars such as Adam's step count are kept.

    Parameters
    ----------
    layer : torch.nn.Linear
        Changed in place (``out_features`` too).
    old_rows : ndarray of int of shape (layer.out_features,)
        The new position of each old row, strictly increasing or not, all distinct.
    n_outputs : int
        The number of rows after the growth.
    optimizer : torch.optim.Optimizer or None, default=None
    generator : torch.Generator or None, default=None
        Draws the new rows (on the CPU); ``None`` uses torch's global random state.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> layer = torch.nn.Linear(4, 2)
    >>> before = layer.weight.detach().clone()
    >>> opt = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    >>> grow_output_layer(layer, np.array([0, 2]), 3, opt)  # a new class between the two
    >>> layer.weight.shape, torch.equal(layer.weight[[0, 2]], before)
    (torch.Size([3, 4]), True)
    >>> opt.param_groups[0]["params"][0] is layer.weight
    True
    """
    old_rows = torch.as_tensor(np.asarray(old_rows, dtype=np.int64))
    new_rows = torch.as_tensor(np.setdiff1d(np.arange(n_outputs), old_rows.numpy()))
    bound = 1.0 / math.sqrt(layer.in_features) if layer.in_features else 0.0
    replaced = {}
    for name in ("weight", "bias"):
        old = getattr(layer, name)
        if old is None:
            continue
        shape = (n_outputs, *old.shape[1:])
        fresh = torch.empty((len(new_rows), *old.shape[1:]), dtype=old.dtype)
        fresh.uniform_(-bound, bound, generator=generator)
        data = torch.empty(shape, dtype=old.dtype, device=old.device)
        data[old_rows.to(old.device)] = old.detach()
        data[new_rows.to(old.device)] = fresh.to(old.device)
        grown = nn.Parameter(data, requires_grad=old.requires_grad)
        setattr(layer, name, grown)
        replaced[old] = grown
    layer.out_features = n_outputs
    if optimizer is not None:
        _carry_optimizer_state(optimizer, replaced, old_rows)


def _carry_optimizer_state(optimizer, replaced: dict, old_rows: torch.Tensor) -> None:
    """Point ``optimizer`` at the grown parameters; zeros in their state for the new rows."""
    for group in optimizer.param_groups:
        group["params"] = [replaced.get(p, p) for p in group["params"]]
    for old, new in replaced.items():
        state = optimizer.state.pop(old, None)
        if state is None:
            continue
        carried = {}
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.shape == old.shape:
                grown = torch.zeros(new.shape, dtype=value.dtype, device=value.device)
                grown[old_rows.to(value.device)] = value
                value = grown
            carried[key] = value
        optimizer.state[new] = carried
