"""Where an estimator computes, and the random state of its training.

``device="auto"`` is resolved in ``fit`` only (:func:`resolve_device`), so that importing,
constructing and pickling an estimator never touch CUDA (a parent that did could not fork
workers that use it). The resolved device is the fitted attribute ``device_``; the parameter
keeps the value it was given. A fit with a ``random_state`` runs under :func:`seeded_rng` and
seeds each epoch with :func:`seed_epoch`, and leaves torch's global random state as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from sklearn.utils import check_random_state

__all__ = ["draw_seed", "pickled_tensor_device", "resolve_device", "seed_epoch", "seeded_rng"]


def resolve_device(device) -> torch.device:
    """Turn the ``device`` parameter into a torch device, or say clearly why not.

    ``"auto"`` (or ``None``) is CUDA when it is available, else the CPU; under ``torchrun``
    each process takes GPU ``LOCAL_RANK``.
    """
    if device is None or device == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        local_rank = os.environ.get("LOCAL_RANK", "")
        if local_rank.isdigit():
            return torch.device("cuda", int(local_rank) % torch.cuda.device_count())
        return torch.device("cuda")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a device torch knows; use 'auto', 'cpu' or 'cuda[:N]'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this machine; "
            "use device='auto' to fall back to the CPU."
        )
    return resolved


def draw_seed(random_state) -> int:
    """The fit's torch seed, drawn from ``random_state`` (an int, a RandomState or None)."""
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


@contextmanager
def seeded_rng(seed: int | None, device: torch.device) -> Iterator[None]:
    """Seed torch with ``seed`` and restore its random state afterwards (nothing if None).

    The CPU generator and, on CUDA, that of ``device`` are forked, so that a fit with a
    ``random_state`` leaves the caller's random state as it was, also when it raises.
    """
    if seed is None:
        yield
        return
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def seed_epoch(seed: int, epoch: int) -> None:
    """Seed torch for epoch ``epoch``, so that its randomness depends on (seed, epoch) alone.

    A run resumed from a checkpoint (or continued by ``partial_fit``) then continues exactly
    as the uninterrupted run would have.
    """
    torch.manual_seed(seed + epoch)


def pickled_tensor_device(state: dict) -> str:
    """The device the tensors of a pickled estimator were on: ``device_``, or the CPU.

    The ``device`` parameter in ``state`` may be ``"auto"``, which torch cannot map to; a
    GPU-trained estimator is mapped to the CPU on a machine without CUDA.
    """
    return str(state.get("device_", "cpu"))
