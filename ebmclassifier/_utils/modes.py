"""Training and evaluation modes: put modules in evaluation mode, give every one its own back.

A metric or an attack runs a network in evaluation mode; it must not leave a module in a mode
its caller did not choose. ``module.train(was_training)`` restores one flag on every submodule,
which is wrong for a network whose parts were in different modes (a frozen encoder in eval mode
inside a training model); :func:`kept_modes` records and restores each submodule's own flag.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

__all__ = ["eval_mode", "kept_modes", "modules_of"]


def modules_of(obj, _seen: set[int] | None = None) -> list[nn.Module]:
    """Every torch module that ``obj`` holds: itself, or its fitted attributes (``name_``).

    The fitted attributes of an estimator (``module_``, ``replay_buffer_``, ...), and those of
    the estimators it holds in lists or tuples (a ``ProductOfExperts``' ``estimators_``), so
    that inference through an estimator changes the mode of no module outside this list.
    """
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, nn.Module):
        return [obj]
    if isinstance(obj, list | tuple):
        return [m for item in obj for m in modules_of(item, seen)]
    found = []
    for name, value in getattr(obj, "__dict__", {}).items():
        if name.endswith("_") and not name.startswith("_"):
            if isinstance(value, nn.Module | list | tuple) or hasattr(value, "get_params"):
                found += modules_of(value, seen)
    return found


@contextmanager
def kept_modes(*objects) -> Iterator[None]:
    """Inside, the code may switch modes at will; after, every submodule has its mode back.

    Parameters
    ----------
    *objects : torch.nn.Module or estimator
        Modules, or estimators whose modules :func:`modules_of` finds.
    """
    flags = [
        (sub, sub.training)
        for obj in objects
        for module in modules_of(obj)
        for sub in module.modules()
    ]
    try:
        yield
    finally:
        for sub, training in flags:
            sub.training = training


@contextmanager
def eval_mode(*objects) -> Iterator[None]:
    """Every module of ``objects`` in evaluation mode inside; each submodule's own mode after.

    :func:`kept_modes` with ``module.eval()`` on entry: the form of every sampler, probe and
    feature map that runs a network which may be training.

    Parameters
    ----------
    *objects : torch.nn.Module or estimator
        Modules, or estimators whose modules :func:`modules_of` finds.

    Examples
    --------
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    >>> net[1].eval()  # a part in its own mode
    Dropout(p=0.5, inplace=False)
    >>> with eval_mode(net):
    ...     net.training
    False
    >>> net.training, net[1].training
    (True, False)
    """
    with kept_modes(*objects):
        for obj in objects:
            for module in modules_of(obj):
                module.eval()
        yield
