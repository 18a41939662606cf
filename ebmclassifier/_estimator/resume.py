"""What a resumed fit needs besides the network, the optimizer and the history.

A fit killed after epoch ``k`` and resumed from what was saved then ends bitwise where the
uninterrupted fit ends (on the CPU; :doc:`/user_guide/saving`). Beside the network, the
optimizer and the history, training depends on the *training state*: one dict of tensors and
plain values that :class:`TrainingState` collects from the parts that own them, without a chain
of overrides:

- the engine's part: the fit's seed (with ``random_state=None`` the one drawn for the
  interrupted call), from which each epoch's generators are derived;
- this module's :class:`Resume`, a callback every estimator holds: the position of each skorch
  ``LRScheduler`` and the learning rates in use, and what the running call found before its
  first epoch (the class counts, a class-incremental reservoir) with the epochs it has left;
- the other capabilities' parts (JEM's :class:`~ebmclassifier._divergence.Rollback`: its SGLD
  step, its count of divergences, its policy with its snapshots) and the estimator's own
  (NG-EBM's ``train_steps_``);
- for skorch's files only, the other modules (JEM's replay buffer), and the epoch count and
  digests of the other files, to refuse a set written at different epochs
  (:mod:`~ebmclassifier._estimator.checkpoint`).

``save(training_state=True)`` stores it beside the weights and :func:`~ebmclassifier.load`
restores it; skorch's ``Checkpoint(f_training_state=...)`` stores ``training_state_`` (as
skorch asks of a module ``f_<name>``: ``state_dict`` and ``load_state_dict``) and
``LoadInitState`` restores it. What must outlive the resumed fit's ``on_train_begin`` (the
schedulers' positions, the learning rates) is applied when its first epoch begins.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import torch
from skorch.callbacks import Callback, Checkpoint, LRScheduler
from torch import nn

from .checkpoint import check_same_epoch, digests

__all__ = ["Resume", "TrainingState"]

FORMAT = 1


def _schedulers(net) -> list[tuple[str, LRScheduler]]:
    return [
        (name, callback)
        for name, callback in getattr(net, "callbacks_", [])
        if isinstance(callback, LRScheduler) and getattr(callback, "lr_scheduler_", None)
    ]


class Resume(Callback):
    """The resume capability: what a call in progress leaves for a state saved during it.

    Every estimator holds one (added in ``get_default_callbacks``). It knows whether a fit is
    running (a state saved then resumes that fit), keeps the schedulers' positions and the
    learning rates for the next call, applies those of a loaded state when the next epoch
    begins, and keeps the file sets a ``Checkpoint`` is writing
    (:mod:`~ebmclassifier._estimator.checkpoint`).

    Attributes
    ----------
    fitting_ : bool
        Whether a fit is running (from ``on_train_begin`` to ``on_train_end``).
    pending_ : dict or None
        The schedulers' positions and learning rates the next epoch begins with.
    schedules_ : dict
        The schedulers' positions after the last fit.
    staged_sets_ : dict
        The checkpoint file sets being written: journal -> (epoch, paths staged).
    """

    def __init__(self) -> None:
        self.fitting_ = False
        self.pending_: dict | None = None
        self.schedules_: dict = {}
        self.staged_sets_: dict = {}
        self._finished_call: dict | None = None

    def on_train_begin(self, net, **kwargs) -> None:
        """Mark the fit as running; refuse a Checkpoint placed before an epoch scheduler."""
        self.fitting_ = True
        _check_checkpoint_order(net)

    def on_epoch_begin(self, net, **kwargs) -> None:
        """In the first epoch after a resume (every ``on_train_begin`` ran, the schedulers
        were rebuilt): the saved schedulers' positions and learning rates."""
        pending, self.pending_ = self.pending_, None
        if pending is not None:
            _apply_pending(net, pending)

    def on_train_end(self, net, **kwargs) -> None:
        """Keep the schedulers' positions, for the next ``partial_fit`` and for ``save``."""
        self.fitting_ = False
        self.schedules_ = {name: cb.lr_scheduler_.state_dict() for name, cb in _schedulers(net)}
        self.pending_ = {
            "schedulers": self.schedules_,
            "lr": [group["lr"] for group in net.optimizer_.param_groups],
        }

    def begin_call(self, net, *, new_network: bool) -> None:
        """Before a call draws anything: a ``partial_fit`` for 0 epochs after loading a state
        saved in the last epoch of a call is that call's end (the saving guide's "the epochs
        it had left": none), so what the call set from its data goes back to how the call
        found it, which this call sets again."""
        finished, self._finished_call = self._finished_call, None
        if finished is not None and not new_network and net.max_epochs == 0:
            _restore(net, finished, net._call_start_attributes)

    def interrupted_call(self, net) -> dict:
        """What a state saved during a call keeps of it: the epochs it has left, and the
        attributes it set from its data as it found them."""
        done = len(net.history) - net._call_start_epoch
        return {
            "epochs_left": max(0, net.max_epochs - done),
            "before": _encoded(getattr(net, "_call_start", {})),
        }

    def resume_call(self, net, call: dict) -> None:
        """Loaded for ``partial_fit`` from a state saved during a call: with epochs left, the
        call's start attributes as it found them (``partial_fit`` on its data sets them
        again); with none left, as it left them (go on with the next data)."""
        if call["epochs_left"] > 0:
            _restore(net, call["before"], net._call_start_attributes)
        else:
            self._finished_call = call["before"]


def _parts(net) -> list:
    """The capabilities of ``net`` with a part of the training state (``state_dict(net)``)."""
    kinds = {type(callback) for _, callback in net._capabilities()}
    return [
        callback
        for _, callback in getattr(net, "callbacks_", [])
        if type(callback) in kinds and hasattr(callback, "state_dict")
    ]


class TrainingState:
    """The training state of an estimator, as skorch's ``save_params`` / ``load_params`` want it.

    ``estimator.training_state_`` is one; skorch's ``Checkpoint(f_training_state=...)`` calls
    its ``state_dict`` at every checkpoint and ``LoadInitState`` its ``load_state_dict``.
    """

    def __init__(self, estimator):
        self.estimator = estimator

    def state_dict(self, *, checkpoint: bool = True) -> dict:
        """The training state now; ``checkpoint`` adds the modules and what checks the files."""
        est = self.estimator
        resume = est._capability(Resume)
        fitting = resume.fitting_
        own = est._own_training_state()
        for part in _parts(est):
            own.update(part.state_dict(est))
        state = {
            "format": FORMAT,
            "in_fit": fitting,
            **est._engine_state(fitting),
            "schedulers": (
                {name: cb.lr_scheduler_.state_dict() for name, cb in _schedulers(est)}
                if fitting
                else resume.schedules_
            ),
            "lr": [group["lr"] for group in est.optimizer_.param_groups],
            "estimator": own,
            "call": resume.interrupted_call(est) if fitting else None,
        }
        if checkpoint:  # skorch's Checkpoint writes module_ and optimizer_ files of their own
            state["modules"] = {
                name: value.state_dict()
                for name, value in vars(est).items()
                if name.endswith("_") and isinstance(value, nn.Module)
                if name not in ("module_", "criterion_")
            }
            state["epochs"] = len(est.history)
            state["digests"] = digests(est)  # what the other files of the checkpoint hold
        return state

    def load_state_dict(self, state: dict, loaded: Collection[str] | None = None) -> None:
        """Restore a state of :meth:`state_dict`; checkpoint files must come from one epoch.

        ``loaded``: the ``f_*`` names of the files loaded with it, whose states are checked
        (:func:`~ebmclassifier._estimator.checkpoint.check_same_epoch`); the history and the
        network are checked in any case.
        """
        est = self.estimator
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(
                f"Not a training state of format {FORMAT} of {type(est).__name__}: pass the "
                "file written as f_training_state by a Checkpoint of this library's estimator."
            )
        if "epochs" in state:  # written by a Checkpoint, beside the other files
            check_same_epoch(est, state, loaded)
            for name, module_state in state["modules"].items():
                _module_of(est, name).load_state_dict(module_state)
        resume = est._capability(Resume)
        # a call saved in its last epoch had done its work: the next call is a new one
        call = _checked_call(est, state.get("call"))
        in_fit = state["in_fit"] and (call is None or call["epochs_left"] > 0)
        est._load_engine_state(state, in_fit=in_fit)
        own = state["estimator"]
        est._load_own_training_state(own)
        for part in _parts(est):
            part.load_state_dict(est, own, in_fit=in_fit)
        resume.pending_ = {k: state[k] for k in ("schedulers", "lr")}
        if not resume.fitting_:  # loaded for partial_fit, not by LoadInitState
            _restore_reservoir_before(est, own)
            if call is not None:
                resume.resume_call(est, call)


def _restore_reservoir_before(est, own: dict) -> None:
    """A state of an earlier development version kept a class-incremental reservoir as the
    call found it under ``"reservoir_before"``, before the call's start was kept generically:
    the reservoir's attributes as they were then."""
    before = own.get("reservoir_before")
    if before is None:
        return
    names = [name for name in est._call_start_attributes if name.startswith("reservoir_")]
    for name in names:
        est.__dict__.pop(name, None)
    est.__dict__.update({k: v for k, v in before.items() if k in names})


def _module_of(est, name: str) -> nn.Module:
    """The module ``name`` of a training state's ``modules``: one the estimator has."""
    module = getattr(est, name, None) if name.endswith("_") else None
    if not isinstance(module, nn.Module) or name in ("module_", "criterion_"):
        raise ValueError(
            f"The training state holds the state of a module {name!r} that "
            f"{type(est).__name__} has not: pass a file written by this estimator's class."
        )
    return module


def _encoded(values: dict) -> dict:
    """Attributes as a training state holds them: tensors, numpy arrays as tensors, and the
    names of those that were not set."""
    encoded = {"tensors": {}, "arrays": {}, "absent": []}
    for name, value in values.items():
        if value is None:
            encoded["absent"].append(name)
        elif isinstance(value, torch.Tensor):
            encoded["tensors"][name] = value
        else:
            encoded["arrays"][name] = torch.as_tensor(np.asarray(value))
    return encoded


def _checked_call(est, call) -> dict | None:
    """A training state's ``call`` as :meth:`Resume.interrupted_call` writes it, or a
    ``ValueError``: the epochs left an int >= 0, ``before`` tensors under the names of the
    estimator's ``_call_start_attributes`` and a list of such names."""
    if call is None:
        return None
    before = call.get("before") if isinstance(call, dict) else None
    left = call.get("epochs_left") if isinstance(call, dict) else None
    parts = before if isinstance(before, dict) else {}
    kept = [*_items(parts.get("tensors")), *_items(parts.get("arrays"))]
    absent = parts.get("absent")
    names = [name for name, _ in kept] + (absent if isinstance(absent, list) else [None])
    allowed = est._call_start_attributes
    if not (
        type(left) is int
        and left >= 0
        and all(isinstance(name, str) for name in names)
        and set(names) <= set(allowed)
        and all(isinstance(value, torch.Tensor) for _, value in kept)
    ):
        raise ValueError(
            f"The training state's record of the interrupted call is not one that "
            f"{type(est).__name__} writes (epochs left {left!r}, attributes {names!r}; it keeps "
            f"{list(allowed)}): pass a file this class wrote."
        )
    return call


def _items(value) -> list[tuple]:
    """The items of ``value`` if it is a dict, else one that no check accepts."""
    return list(value.items()) if isinstance(value, dict) else [(None, None)]


def _restore(est, encoded: dict, allowed: tuple[str, ...]) -> None:
    """Set the attributes of :func:`_encoded` (only those named in ``allowed``)."""
    arrays = {k: v.cpu().numpy() for k, v in encoded["arrays"].items()}
    values = {**encoded["tensors"], **arrays}
    names = [*values, *encoded["absent"]]
    if not set(names) <= set(allowed):
        raise ValueError(
            f"The training state sets {sorted(set(names) - set(allowed))!r}, which "
            f"{type(est).__name__} does not keep for a call: pass a file this class wrote."
        )
    for name in encoded["absent"]:
        est.__dict__.pop(name, None)
    est.__dict__.update(values)


def _apply_pending(net, pending: dict) -> None:
    applied = False
    for name, callback in _schedulers(net):
        if name in pending["schedulers"]:
            callback.lr_scheduler_.load_state_dict(pending["schedulers"][name])
            applied = True
    if applied:  # building the schedulers moved the learning rates; put them back
        for group, lr in zip(net.optimizer_.param_groups, pending["lr"], strict=True):
            group["lr"] = lr


def _check_checkpoint_order(net) -> None:
    """A Checkpoint saving the training state must come after epoch-stepped schedulers."""
    callbacks = getattr(net, "callbacks_", [])
    names = [name for name, _ in callbacks]
    for i, (name, callback) in enumerate(callbacks):
        if isinstance(callback, Checkpoint) and getattr(callback, "f_training_state", None):
            later = [
                other
                for other, cb in callbacks[i + 1 :]
                if isinstance(cb, LRScheduler) and cb.step_every == "epoch"
            ]
            if later:
                raise ValueError(
                    f"The Checkpoint {name!r} saves the training state before the LRScheduler "
                    f"{later[0]!r} steps at the end of each epoch, so a resumed fit would miss "
                    f"that step. Put the Checkpoint after the schedulers in callbacks (order now: "
                    f"{names})."
                )
