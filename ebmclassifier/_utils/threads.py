"""How many intra-op threads a fit or an inference call runs: the ``n_threads`` parameter.

torch splits each operation (a matrix product, a convolution) over its intra-op threads, by
default one per core. On the small networks this library trains by default the pieces are too
small to pay for the splitting, and when another process keeps a core busy the threads wait for
each other at every operation, so that a second thread costs far more beside a busy core than
it gains on a quiet machine; larger networks gain more from threads on a quiet machine, and
lose as much when oversubscribed (measured in :doc:`/performance`, "Threads on a shared
machine": ``benchmarks/threads.py``).

So ``n_threads="auto"`` (the estimators' default) runs a call on one thread when the forward
pass of one batch costs fewer than :data:`AUTO_ONE_THREAD_MACS` multiply-accumulates, and on
torch's setting as it is otherwise; an int runs it on that many threads, at most the cores the
process may run on (:func:`usable_cores`: more only makes the threads wait for each other, and
a loaded file's ``n_threads=1000`` made thread creation fail); ``None`` leaves torch's setting
alone. The setting is changed for the call only (:func:`intra_op_threads`) and
restored after it, also when the call raises: the caller's ``torch.set_num_threads`` holds
outside. torch's setting is one per process, so fits running at the same time in threads of one
process (joblib's threading backend) should use ``n_threads=None``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from math import prod

import torch
from torch import nn

from .generators import global_rng
from .modes import eval_mode
from .parameters import ParamChecker, is_int

__all__ = [
    "AUTO_ONE_THREAD_MACS",
    "check_n_threads",
    "choose_threads",
    "forward_macs",
    "intra_op_threads",
    "threads_for",
    "usable_cores",
]

#: Below this many multiply-accumulates in the forward pass of one batch, ``n_threads="auto"``
#: runs on one thread: between the digits' default networks (tens of millions per batch), which
#: a second thread barely helps, and the larger ones (hundreds of millions), which it does (the
#: measurements are in docs/performance.md, "Threads on a shared machine").
AUTO_ONE_THREAD_MACS = 100_000_000

_CONVOLUTIONS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)

#: True inside ``intra_op_threads(n, pin=True)``: the caller chose the threads, "auto" keeps them.
_PINNED: ContextVar[bool] = ContextVar("ebmclassifier_pinned_threads", default=False)


def forward_macs(module: nn.Module, x: torch.Tensor) -> int:
    """Multiply-accumulates of the linear and convolutional layers in ``module(x)``.

    Counted by forward hooks on ``nn.Linear`` (``out.numel() * in_features``) and
    ``nn.Conv1d/2d/3d`` (``out.numel() * in_channels / groups * kernel size``); other layers
    (activations, pooling, attention's own products) are not counted, which on the networks
    of this library is a few percent. The forward pass runs in evaluation mode without
    gradients, under :func:`~ebmclassifier._utils.generators.global_rng` (torch's generator
    forked, under the library's lock), and every submodule's mode is restored after it.

    Parameters
    ----------
    module : torch.nn.Module
    x : Tensor
        A batch the module takes (one sample is enough: the count scales with the batch).

    Returns
    -------
    int

    Examples
    --------
    >>> from ebmclassifier.nn import MLP
    >>> forward_macs(MLP(4, 3, hidden_sizes=(8,)), torch.zeros(2, 4))  # 2 * (4 * 8 + 8 * 3)
    112
    """
    total = 0

    def count(layer: nn.Module, inputs, output: torch.Tensor) -> None:
        nonlocal total
        if isinstance(layer, nn.Linear):
            total += output.numel() * layer.in_features
        else:
            per_output = layer.in_channels // layer.groups * prod(layer.kernel_size)
            total += output.numel() * per_output

    layers = [m for m in module.modules() if isinstance(m, (nn.Linear, *_CONVOLUTIONS))]
    hooks = [layer.register_forward_hook(count) for layer in layers]
    try:
        with eval_mode(module), torch.no_grad(), global_rng(None, x.device):
            module(x)
    finally:
        for hook in hooks:
            hook.remove()
    return int(total)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one (a
    container or ``taskset`` narrows it), else ``os.cpu_count()``.

    Examples
    --------
    >>> 1 <= usable_cores() <= (os.cpu_count() or 1)
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def check_n_threads(check: ParamChecker, value) -> None:
    """Add a problem with the ``n_threads`` parameter ``value`` to ``check``, if it has one."""
    ok = value is None or (isinstance(value, str) and value == "auto")
    ok = ok or (is_int(value) and value >= 1)
    check.satisfies("n_threads", ok, "None, 'auto' or an int >= 1")


def choose_threads(
    n_threads, module: nn.Module, x: torch.Tensor, batch_size: int, n_samples: int | None = None
) -> int | None:
    """The intra-op threads for a call on batches of ``batch_size`` samples like ``x``, or None.

    ``None`` (leave torch's setting) for ``n_threads=None``; ``n_threads`` for an int, at most
    :func:`usable_cores`; for ``"auto"``, 1 when ``forward_macs(module, x[:1]) * batch_size``
    is below :data:`AUTO_ONE_THREAD_MACS`, else None. ``"auto"`` is None inside
    ``intra_op_threads(n, pin=True)`` (a command's ``--threads n``), and nothing is counted
    when torch already runs one thread.

    Parameters
    ----------
    n_threads : None, "auto" or int
    module : torch.nn.Module
    x : Tensor
        Validated input on the module's device; its first sample is run once.
    batch_size : int
        The samples of one batch of the call; -1, or more than ``n_samples``, means
        ``n_samples``.
    n_samples : int or None, default=None
        The samples of the whole call, when ``x`` holds only some of them (an inference call
        converts its first sample alone); None for ``len(x)``.

    Returns
    -------
    int or None

    Examples
    --------
    >>> from ebmclassifier.nn import MLP
    >>> x = torch.zeros(100, 64)
    >>> with intra_op_threads(2):  # torch on two threads: "auto" picks one for a small MLP
    ...     choose_threads("auto", MLP(64, 10), x, 64), choose_threads(None, MLP(64, 10), x, 64)
    (1, None)
    >>> choose_threads(1, MLP(64, 10), x, 64)
    1
    >>> choose_threads(10**6, MLP(64, 10), x, 64) == usable_cores()  # no more than the cores
    True
    """
    if n_threads is None:
        return None
    if n_threads != "auto":
        return min(n_threads, usable_cores())
    n_samples = len(x) if n_samples is None else n_samples
    if _PINNED.get() or torch.get_num_threads() == 1 or len(x) == 0 or x.device.type != "cpu":
        return None
    batch = n_samples if batch_size < 1 else min(batch_size, n_samples)
    macs = forward_macs(module, x[:1]) * batch
    return 1 if macs < AUTO_ONE_THREAD_MACS else None


@contextmanager
def intra_op_threads(n: int | None, *, pin: bool = False) -> Iterator[None]:
    """Run the block on ``n`` intra-op threads, then restore torch's setting (None: as it is).

    Restored also when the block raises. With ``pin=True`` (and an ``n``) the estimators'
    ``n_threads="auto"`` keeps ``n`` inside the block instead of choosing.

    Examples
    --------
    >>> before = torch.get_num_threads()
    >>> with intra_op_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    before = torch.get_num_threads()
    change = n is not None and n != before
    token = _PINNED.set(True) if pin and n is not None else None
    try:
        if change:
            torch.set_num_threads(n)
        yield
    finally:
        if change:
            torch.set_num_threads(before)
        if token is not None:
            _PINNED.reset(token)


@contextmanager
def threads_for(
    n_threads, module: nn.Module, x: torch.Tensor, batch_size: int, n_samples: int | None = None
) -> Iterator[None]:
    """Run the block on the threads :func:`choose_threads` picks for a call on ``x``.

    The one way the estimators enter their ``n_threads`` (training, inference, sampling):
    ``intra_op_threads(choose_threads(...))``, torch's setting restored after.

    Parameters
    ----------
    n_threads, module, x, batch_size, n_samples
        As for :func:`choose_threads`.

    Examples
    --------
    >>> from ebmclassifier.nn import MLP
    >>> with threads_for(1, MLP(4, 2), torch.zeros(8, 4), 8):
    ...     torch.get_num_threads()
    1
    """
    with intra_op_threads(choose_threads(n_threads, module, x, batch_size, n_samples)):
        yield
