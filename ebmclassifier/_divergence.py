"""Noticing and undoing a diverged SGLD training run (used by JEMClassifier).

JEM's contrastive loss ``mean E(x_data) - mean E(x_sampled)`` is unbounded below: when the
sampler falls behind the model, the energies of the samples run off, the loss heads to minus
infinity and the weights follow. Two small tools: a health check on one training step, and a
snapshot of everything that must be rolled back together (the module, the optimizer's moments,
the replay buffer).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

__all__ = ["divergence_reason", "Snapshot"]


def divergence_reason(
    loss: Tensor,
    energies: Tensor,
    samples: Tensor,
    low: Tensor,
    high: Tensor,
    max_energy: float,
    max_excursion: float = 10.0,
) -> str | None:
    """Say why a training step looks diverged, or return None if it looks healthy.

    Parameters
    ----------
    loss : Tensor, scalar
    energies : Tensor of shape (m,)
        Energies of the data and of the samples of this step.
    samples : Tensor of shape (n, ...)
        The SGLD samples of this step.
    low, high : Tensor of the sample shape
        Per-feature input range learned in ``fit``.
    max_energy : float
        Largest plausible ``|E(x)|``; a classifier's logits of this size mean the contrastive term
        is running away.
    max_excursion : float, default=10.0
        A sample that leaves the input box by more than this many box diagonals is a runaway chain.

    Returns
    -------
    str or None
        A short reason, suitable for the training history.

    Examples
    --------
    >>> import torch
    >>> lo, hi = torch.zeros(2), torch.ones(2)
    >>> divergence_reason(torch.tensor(1.0), torch.zeros(3), torch.zeros(4, 2), lo, hi, 1e3)
    >>> nan = torch.tensor(float("nan"))
    >>> divergence_reason(nan, torch.zeros(3), torch.zeros(4, 2), lo, hi, 1e3)
    'non-finite loss'
    """
    if not bool(torch.isfinite(loss).all()):
        return "non-finite loss"
    if not bool(torch.isfinite(energies).all()):
        return "non-finite energy"
    if not bool(torch.isfinite(samples).all()):
        return "non-finite SGLD sample"
    e_max = float(energies.detach().abs().max()) if energies.numel() else 0.0
    if e_max > max_energy:
        return f"|energy| {e_max:.3g} > {max_energy:.3g}"
    outside = (samples - samples.clamp(low, high)).flatten(1).norm(dim=1)
    diagonal = float((high - low).norm())
    worst = float(outside.max()) if outside.numel() else 0.0
    if worst > max_excursion * max(diagonal, 1e-12):
        return f"SGLD sample {worst:.3g} outside the input range"
    return None


def parameters_finite(module: nn.Module) -> bool:
    """True when every parameter of ``module`` is finite."""
    return all(bool(torch.isfinite(p).all()) for p in module.parameters())


class Snapshot:
    """A copy of the state of several modules and optimizers, to roll back to.

    Tensors are cloned on their own device, so taking and restoring a snapshot costs one copy
    of the weights, the optimizer's state and the replay buffer.

    Parameters
    ----------
    **objects : nn.Module or torch.optim.Optimizer
        What to save, by name.

    Examples
    --------
    >>> import torch
    >>> lin = torch.nn.Linear(2, 1)
    >>> snap = Snapshot(module=lin)
    >>> with torch.no_grad():
    ...     _ = lin.weight.fill_(float("nan"))
    >>> snap.restore(module=lin)
    >>> bool(torch.isfinite(lin.weight).all())
    True
    """

    def __init__(self, **objects):
        self.states = {name: copy.deepcopy(obj.state_dict()) for name, obj in objects.items()}

    def restore(self, **objects) -> None:
        """Load the saved states into ``objects`` (the same names as when taken)."""
        for name, obj in objects.items():
            # a deep copy again, so the snapshot survives a second roll-back
            obj.load_state_dict(copy.deepcopy(self.states[name]))
