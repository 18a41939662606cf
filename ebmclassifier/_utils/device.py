"""Where an estimator computes.

``device="auto"`` is resolved in ``fit`` only (:func:`resolve_device`), so that importing,
constructing and pickling an estimator never touch CUDA (a parent that did could not fork
workers that use it). The resolved device is the fitted attribute ``device_``; the parameter
keeps the value it was given. (A fit's seed and generators are those of
:mod:`~ebmclassifier._utils.generators`.)
"""

from __future__ import annotations

import os

import torch

__all__ = [
    "available_memory",
    "device_problem",
    "module_device",
    "network_bytes",
    "pickled_tensor_device",
    "resolve_device",
]


def device_problem(device) -> str | None:
    """Why ``device`` cannot hold an estimator's tensors on this machine, or None if it can.

    ``"auto"``, ``None``, the CPU, and CUDA devices that exist here are usable; ``"meta"``
    holds no data; other backends (``"mps"``, ``"xpu"``, ...) must say they are available.

    Examples
    --------
    >>> device_problem("cpu") is None
    True
    >>> device_problem("meta")
    "'meta' tensors hold no data, so nothing can be trained or predicted on them"
    """
    if device is None or device == "auto":
        return None
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        return "it is not a device torch knows"
    if resolved.type == "cpu":
        return None
    if resolved.type == "meta":
        return "'meta' tensors hold no data, so nothing can be trained or predicted on them"
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            return "CUDA is not available on this machine; device='auto' falls back to the CPU"
        count = torch.cuda.device_count()
        if resolved.index is not None and resolved.index >= count:
            return f"this machine has {count} CUDA device(s), numbered from 0"
        return None
    backend = getattr(torch, resolved.type, None)
    if getattr(backend, "is_available", lambda: False)():
        return None
    return f"the {resolved.type!r} backend is not available on this machine"


def resolve_device(device) -> torch.device:
    """Turn the ``device`` parameter into a torch device, or say clearly why not.

    ``"auto"`` (or ``None``) is CUDA when it is available, else the CPU; under ``torchrun``
    each process takes GPU ``LOCAL_RANK``. A device this machine cannot compute on
    (:func:`device_problem`) is a ``ValueError``.
    """
    if device is None or device == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        local_rank = os.environ.get("LOCAL_RANK", "")
        if local_rank.isdigit():
            return torch.device("cuda", int(local_rank) % torch.cuda.device_count())
        return torch.device("cuda")
    problem = device_problem(device)
    if problem is not None:
        raise ValueError(f"device={device!r} cannot be used: {problem}. Use 'auto' or 'cpu'.")
    return torch.device(device)


def module_device(module: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter; the CPU for a module without parameters.

    Parameters
    ----------
    module : torch.nn.Module

    Returns
    -------
    torch.device

    Examples
    --------
    >>> module_device(torch.nn.Linear(2, 1)), module_device(torch.nn.ReLU())
    (device(type='cpu'), device(type='cpu'))
    """
    parameter = next(module.parameters(), None)
    return torch.device("cpu") if parameter is None else parameter.device


def available_memory(device: torch.device) -> int | None:
    """Bytes that can be allocated on ``device`` now, or None where that is unknown.

    The free memory of a CUDA device; for the CPU, the kernel's estimate of the memory
    available without swapping (``MemAvailable`` of ``/proc/meminfo``, Linux only).
    """
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def network_bytes(module: type, kwargs: dict) -> int | None:
    """Bytes of the parameters and buffers that ``module(**kwargs)`` would allocate.

    The network is built on torch's ``"meta"`` device, which allocates nothing and draws no
    random number; None when it cannot be built there (a network that computes on its tensors
    while it is built).

    Examples
    --------
    >>> network_bytes(torch.nn.Linear, {"in_features": 10**6, "out_features": 10**6})
    4000004000000
    """
    try:
        with torch.device("meta"):
            built = module(**kwargs)
        tensors = [*built.parameters(), *built.buffers()]
    except Exception:  # the real build says what is wrong, if anything
        return None
    return sum(t.numel() * t.element_size() for t in tensors)


def pickled_tensor_device(state: dict) -> str:
    """The device the tensors of a pickled estimator were on: ``device_``, or the CPU.

    The ``device`` parameter in ``state`` may be ``"auto"``, which torch cannot map to; a
    GPU-trained estimator is mapped to the CPU on a machine without CUDA.
    """
    return str(state.get("device_", "cpu"))
