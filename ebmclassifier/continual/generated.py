"""Generated replay: the classifier draws samples of its old classes from its own energy.

At a call that adds classes, the estimator draws samples of each class it knew before from the
model itself, by proximal SGLD (:func:`~ebmclassifier.sampling.langevin.run_sampler`, JEM++'s
sampler [2]_) on the class-conditional energy ``E(x, y) = -f(x)[y]`` of [1]_
(:func:`~ebmclassifier.energy.joint_energy`), from the data's per-feature Gaussian: the
energy-based model's own rehearsal, which stores no training sample (deep generative replay
[3]_, with the classifier as its own generator).

References
----------
.. [1] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
   Should Treat it Like One". ICLR 2020.
.. [2] Yang, X. and Ji, S. "JEM++: Improved Techniques for Training JEM". ICCV 2021.
.. [3] Shin, H., Lee, J. K., Kim, J. and Kim, J. "Continual Learning with Deep Generative
   Replay". NeurIPS 2017.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._utils.modes import eval_mode
from ..energy import joint_energy
from ..sampling.langevin import run_sampler

__all__ = ["generate_class_samples"]

#: Generated replay's sampler: proximal SGLD's step, noise and gradient clip (a fraction of
#: each feature's input range), JEMClassifier's defaults.
GENERATION_SAMPLER = {"step_size": 1.0, "noise": 0.01, "clip_fraction": 0.01}
#: Chains run at once (memory stays flat however many samples are drawn).
CHUNK = 1024


def generate_class_samples(
    module: nn.Module,
    labels: Tensor,
    *,
    mean: Tensor,
    std: Tensor,
    low: Tensor,
    high: Tensor,
    n_steps: int,
) -> Tensor:
    """Samples of the classes ``labels`` from the network's joint energy, by proximal SGLD.

    Each chain starts from ``clamp(mean + std * N(0, I), low, high)`` and runs ``n_steps``
    steps of proximal SGLD on ``E(x, y) = -f(x)[y]`` inside ``[low, high]``
    (:data:`GENERATION_SAMPLER`), the network in evaluation mode (each submodule's mode back
    after). The draws come from torch's random state, ``CHUNK`` chains at a time.

    Parameters
    ----------
    module : torch.nn.Module
        Maps a batch to logits; on the device of ``mean``.
    labels : int64 Tensor of shape (m,)
        The class (a column of the logits) of each sample to draw; on the CPU.
    mean, std : Tensor of the input's shape
        The data's per-feature mean and standard deviation, on the device.
    low, high : Tensor of the input's shape
        The input range, on the device.
    n_steps : int

    Returns
    -------
    float32 Tensor of shape (m, ...) (the input's shape), on the CPU

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Linear(2, 3)
    >>> zeros, ones = torch.zeros(2), torch.ones(2)
    >>> samples = generate_class_samples(
    ...     net, torch.tensor([0, 2]), mean=zeros, std=ones, low=-ones, high=ones, n_steps=5
    ... )
    >>> samples.shape, bool(samples.abs().max() <= 1)
    (torch.Size([2, 2]), True)
    """
    device = mean.device
    with eval_mode(module):
        chunks = [
            _chain(module, part.to(device), mean, std, low, high, n_steps)
            for part in labels.split(CHUNK)
        ]
    return torch.cat(chunks).float()


def _chain(module, labels, mean, std, low, high, n_steps: int) -> Tensor:
    """One chunk of chains: the start, then proximal SGLD; the samples on the CPU."""
    noise = torch.randn((len(labels), *mean.shape), device=mean.device)
    start = torch.clamp((mean + std * noise).float(), low, high)
    samples = run_sampler(
        "proximal",
        lambda x: joint_energy(module(x), labels),
        start,
        n_steps=n_steps,
        low=low,
        high=high,
        **GENERATION_SAMPLER,
    )
    return samples.cpu()
