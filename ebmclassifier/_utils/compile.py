"""``compile=True``: the estimators' networks under ``torch.compile``, and what it needs here.

skorch's ``compile=True`` wraps each module in ``torch.compile``'s ``OptimizedModule``. The
estimators compile their networks in place instead (``nn.Module.compile``): ``module_`` keeps
its class, attributes and state-dict keys, so saving, loading, the divergence snapshots and
the code that reads ``module_.net`` or ``module_.encoder`` are the same with and without
compilation; pickling drops the compiled code (torch's ``Module.__getstate__``), and the next
training compiles again.

The finite-difference gradient norm back-propagates the first forward graph twice: once for
the input gradient (``retain_graph=True``), once for the parameters. ``torch.compile``'s
AOT-autograd may *donate* the buffers saved for a compiled backward (reuse their memory in
that backward), which is only safe when the graph is back-propagated once; a graph compiled
ahead of time with donated buffers (as after a first call with another batch size) then
raises "This backward function was compiled with non-empty donated buffers which requires
create_graph=False and retain_graph=False". Every call of a compiled network therefore
compiles with donation off (:func:`no_donated_buffers`, the switch torch's message names,
``torch._functorch.config.donated_buffer``), and training runs with it off too, since the
backward pass reads the switch again. This is the one place that touches that private
switch; ``tests/_utils/test_compile.py`` pins it.
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

__all__ = ["compile_in_place", "compile_problem", "no_donated_buffers"]


def no_donated_buffers() -> AbstractContextManager:
    """A context in which torch compiles and runs backward passes without donated buffers.

    Returns
    -------
    context manager
        ``torch._functorch.config.patch(donated_buffer=False)``; a no-op on a torch without
        the switch (before donated buffers existed).

    Examples
    --------
    >>> with no_donated_buffers():
    ...     pass
    """
    config = getattr(getattr(torch, "_functorch", None), "config", None)
    if config is None or not hasattr(config, "donated_buffer"):
        return nullcontext()
    return config.patch(donated_buffer=False)


class _DonationFreeCall:
    """The compiled ``__call__`` of a module, compiling (and running) without donated buffers."""

    def __init__(self, compiled) -> None:
        self.compiled = compiled

    def __call__(self, *args, **kwargs):
        with no_donated_buffers():
            return self.compiled(*args, **kwargs)


def compile_in_place(module: nn.Module, **kwargs) -> nn.Module:
    """Compile ``module``'s forward pass in place (``nn.Module.compile``), once.

    Parameters
    ----------
    module : torch.nn.Module
    **kwargs
        Passed to ``torch.compile`` (the estimators' ``compile__*`` parameters), on the first
        call only: a module compiled by this function is left as it is.

    Returns
    -------
    torch.nn.Module
        ``module`` itself.

    Examples
    --------
    >>> import torch
    >>> layer = torch.nn.Linear(2, 2)
    >>> compile_in_place(layer) is layer, type(layer).__name__
    (True, 'Linear')
    """
    if isinstance(module._compiled_call_impl, _DonationFreeCall):
        return module
    module.compile(**kwargs)
    module._compiled_call_impl = _DonationFreeCall(module._compiled_call_impl)
    return module


@functools.cache
def _probe(device_type: str, backend) -> str | None:
    """Compile and run a tiny function on ``device_type``; the failure, or None."""
    try:
        square = torch.compile(lambda t: t * t + 1.0, dynamic=False, backend=backend)
        square(torch.ones(4, device=device_type))
    except Exception as exc:  # any failure of the toolchain: a compiler, triton, a GPU
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
    return None


def compile_problem(device: torch.device, backend="inductor") -> str | None:
    """Why ``torch.compile`` cannot work on ``device`` here; None if it can.

    A tiny function is compiled and run once per process, device type and backend (inductor,
    torch's default, builds C++ with the system's compiler on the CPU: seconds the first
    time): a missing compiler, a GPU that triton does not support or a Python that torch
    cannot compile for fails here, before the estimator builds or trains anything.

    Parameters
    ----------
    device : torch.device
    backend : str or callable, default="inductor"
        ``torch.compile``'s backend (the estimators' ``compile__backend``).

    Returns
    -------
    str or None
        The first line of torch's error.

    Examples
    --------
    >>> import torch
    >>> compile_problem(torch.device("cpu"), backend="eager") is None
    True
    """
    return _probe(device.type, backend)
