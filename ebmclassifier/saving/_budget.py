"""What a file's parameters build, counted before anything is built.

``load`` builds an estimator's modules from the file's parameters (``initialize``), then loads
the file's weights into them. The parameters are the file's own: a few bytes asking for a
network of a billion weights, or a replay buffer of a million chains, would be allocated before
the weights are compared with them. So the modules are first built on torch's ``"meta"``
device, which allocates nothing and draws no random number, and each must take no more bytes
than the file's weights hold for it: a file can then build no more than it holds, and holds no
more than ``FileLimits.weights_bytes``.
"""

from __future__ import annotations

import torch
from sklearn.base import clone
from torch import nn

from ._archive import Refused, state_bytes

__all__ = ["check_built_sizes", "check_state_names", "meta_modules"]

#: At most this many characters of the file's parameters in a refusal.
_SHOWN = 600


def _built_modules(estimator) -> dict[str, nn.Module]:
    return {
        k: v for k, v in vars(estimator).items() if k.endswith("_") and isinstance(v, nn.Module)
    }


def check_state_names(estimator, states: dict[str, dict]) -> None:
    """The state dicts of ``weights.pt`` are those of the modules the (initialized)
    ``estimator`` built, the network's among them, besides its optimizer and training state."""
    _check_names(type(estimator).__name__, set(_built_modules(estimator)), states)


def _check_names(owner: str, built: set[str], states: dict[str, dict]) -> None:
    unknown = sorted(states.keys() - built - {"optimizer_", "training_state_"})
    if unknown or "module_" not in states:
        raise Refused(
            f"its weights.pt holds the states of {sorted(states)}, where "
            f"{owner} has {sorted(built)} (and optimizer_, training_state_)"
        )


def _module_bytes(module: nn.Module) -> int:
    tensors = {id(t): t for t in (*module.parameters(), *module.buffers())}.values()
    return sum(t.numel() * t.element_size() for t in tensors)


def _set_params(estimator) -> str:
    """The parameters of ``estimator`` that differ from its class's defaults, as a text."""
    defaults = type(estimator)().get_params(deep=False)
    changed = {
        name: value
        for name, value in estimator.get_params(deep=False).items()
        if name not in defaults or _differs(value, defaults[name])
    }
    text = ", ".join(f"{name}={value!r}" for name, value in changed.items())
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _differs(value, default) -> bool:
    try:
        return bool(value != default)
    except (TypeError, ValueError):  # an array
        return True


def meta_modules(estimator, fitted: dict) -> dict[str, nn.Module] | None:
    """The modules a copy of the unfitted ``estimator``, given ``fitted``, builds on the
    ``"meta"`` device; None if it cannot be built there (a network of the user's own that
    computes on its weights while it is built)."""
    shadow = clone(estimator)
    vars(shadow).update(fitted)
    shadow.device_ = torch.device("meta")  # where skorch moves the modules it built
    try:
        with torch.device("meta"):  # where they are built: skorch builds, then moves
            shadow.initialize()
    except (ValueError, TypeError) as err:  # as the real build would raise
        raise Refused(str(err)) from None
    except (RuntimeError, NotImplementedError):
        return None
    return _built_modules(shadow)


def check_built_sizes(estimator, fitted: dict, states: dict[str, dict]) -> None:
    """Refuse the estimator whose parameters build a module larger than the file holds for it.

    ``estimator`` is the file's, unfitted (its parameters checked), ``fitted`` its fitted
    attributes and ``label_encoder_``, ``states`` the state dicts of ``weights.pt``. Every
    module that :func:`meta_modules` builds (the network, a replay buffer) must take at most
    the bytes of the tensors of the file's state of the same name. A network that cannot be
    built on the meta device is left to the estimator's own check of the memory available.

    Raises
    ------
    Refused
        Naming the module, its bytes, the bytes the file holds for it and the file's
        parameters that differ from the class's defaults.
    """
    modules = meta_modules(estimator, fitted)
    if modules is None:
        return
    _check_names(type(estimator).__name__, set(modules), states)
    for name, module in modules.items():
        built, held = _module_bytes(module), state_bytes(states.get(name, {}))
        if built > held:
            raise Refused(
                f"its parameters build a {name} of {built} bytes ({built / 2**30:.3g} GiB), more "
                f"than the {held} bytes its weights.pt holds for it; nothing was built. The file "
                f"sets {_set_params(estimator)}"
            )
