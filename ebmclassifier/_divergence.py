"""Noticing and undoing a diverged SGLD training run (used by JEMClassifier).

JEM's contrastive loss ``mean E(x_data) - mean E(x_sampled)`` is unbounded below: when the
sampler falls behind the model, the energies of the samples run off, the loss heads to minus
infinity and the weights follow. Two small tools: a health check on one training step, and a
snapshot of everything that must be rolled back together (the module, the optimizer's moments,
the replay buffer).
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch import Tensor, nn

__all__ = ["Divergence", "diagnose_step", "parameters_finite", "Snapshot"]


class Divergence(NamedTuple):
    """A diverged step: why, and whether the ``"model"`` or the ``"sampler"`` went wrong."""

    reason: str
    culprit: str


def diagnose_step(
    loss: Tensor,
    e_data: Tensor,
    e_samples: Tensor,
    samples: Tensor,
    low: Tensor,
    high: Tensor,
    max_energy: float,
    max_excursion: float = 10.0,
) -> Divergence | None:
    """Say why a JEM training step looks diverged, or return None if it looks healthy.

    The culprit is the ``"model"`` when its energies of the *data* are broken (the weights ran
    away: a smaller learning rate is needed), else the ``"sampler"`` when the samples or their
    energies are (the chains ran away: a smaller SGLD step is needed).

    Parameters
    ----------
    loss : Tensor, scalar
    e_data, e_samples : Tensor of shape (n,) and (m,)
        Energies of the data and of the SGLD samples of this step.
    samples : Tensor of shape (m, ...)
        The SGLD samples of this step.
    low, high : Tensor of the sample shape
        Per-feature input range learned in ``fit``.
    max_energy : float
        Largest plausible ``|E(x)|``: a classifier's logits of this size mean that the
        contrastive term is running away.
    max_excursion : float, default=10.0
        A sample farther outside the input box than this many box diagonals is a runaway chain.

    Returns
    -------
    Divergence or None

    Examples
    --------
    >>> import torch
    >>> lo, hi, zeros = torch.zeros(2), torch.ones(2), torch.zeros(3)
    >>> diagnose_step(torch.tensor(1.0), zeros, zeros, torch.zeros(3, 2), lo, hi, 1e3)
    >>> diagnose_step(torch.tensor(1.0), zeros, zeros, torch.full((3, 2), 50.0), lo, hi, 1e3)
    Divergence(reason='SGLD sample 69.3 outside the input range', culprit='sampler')
    """
    e_data, e_samples = e_data.detach(), e_samples.detach()
    if not bool(torch.isfinite(e_data).all()):
        return Divergence("non-finite energy of the data", "model")
    if e_data.numel() and float(e_data.abs().max()) > max_energy:
        return Divergence(f"|energy| of the data {float(e_data.abs().max()):.3g}", "model")
    if not bool(torch.isfinite(samples).all()):
        return Divergence("non-finite SGLD sample", "sampler")
    outside = (samples - samples.clamp(low, high)).flatten(1).norm(dim=1)
    worst = float(outside.max()) if outside.numel() else 0.0
    if worst > max_excursion * max(float((high - low).norm()), 1e-12):
        return Divergence(f"SGLD sample {worst:.3g} outside the input range", "sampler")
    if not bool(torch.isfinite(e_samples).all()):
        return Divergence("non-finite energy of the samples", "sampler")
    if e_samples.numel() and float(e_samples.abs().max()) > max_energy:
        return Divergence(f"|energy| of the samples {float(e_samples.abs().max()):.3g}", "sampler")
    if not bool(torch.isfinite(loss).all()):
        return Divergence("non-finite loss", "model")
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
