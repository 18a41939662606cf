"""What a resumed fit needs besides the network, the optimizer and the history.

A fit killed after epoch ``k`` and resumed from what was saved then ends bitwise where the
uninterrupted fit ends (on the CPU; see the saving guide for GPUs). The network, the optimizer
and the history are saved by ``save`` and by skorch's ``Checkpoint`` already; the rest of what
training depends on is the *training state*, one dict of tensors and plain values:

- the seed (``seed_``); with ``random_state=None``, the seed drawn for the interrupted call
  (each epoch draws from its own generators, seeded from ``(seed, epoch)`` alone:
  :mod:`~ebmclassifier._utils.generators`);
- the position of every skorch ``LRScheduler`` (its torch scheduler's state) and the learning
  rates in use, which skorch's ``LRScheduler`` would otherwise rebuild from the epoch count;
- what the estimator adds through :meth:`ResumableMixin._resume_state`: JEM's SGLD step, its
  count of divergences and its roll-back policy with its snapshots, NG-EBM's count of training
  steps (``train_steps_``, the rhythm of ``penalty_every``), the class-incremental reservoir
  as it stood before the interrupted call;
- for skorch's files only, the other modules (JEM's replay buffer), and the epoch count and a
  digest of the network, to refuse a set of checkpoint files written at different epochs.

``save(training_state=True)`` stores it beside the weights, and :func:`~ebmclassifier.load`
restores it; skorch's ``Checkpoint`` stores it as the file ``f_training_state`` (the
``training_state_`` of the estimator, an object with ``state_dict`` and ``load_state_dict``, as
skorch's documentation asks of a custom module ``f_<name>``), and ``LoadInitState`` restores it.
What must outlive the ``on_train_begin`` of the resumed fit (the schedulers' positions, the
learning rates) is applied when its first epoch begins; the call's seed when it begins.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection

import numpy as np
import torch
from skorch.callbacks import Checkpoint, LRScheduler
from skorch.history import History
from torch import nn

from .._utils.atomic import atomic_write
from .checkpoint import check_same_epoch, current_sources, digests, file_set

__all__ = ["ResumableMixin", "TrainingState"]

FORMAT = 1


def _schedulers(estimator) -> list[tuple[str, LRScheduler]]:
    return [
        (name, callback)
        for name, callback in getattr(estimator, "callbacks_", [])
        if isinstance(callback, LRScheduler) and getattr(callback, "lr_scheduler_", None)
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
        fitting = est._fitting
        state = {
            "format": FORMAT,
            "in_fit": fitting,
            "seed": getattr(est, "seed_", None),
            "call_seed": est._call_seed if fitting else None,
            "schedulers": (
                {name: cb.lr_scheduler_.state_dict() for name, cb in _schedulers(est)}
                if fitting
                else getattr(est, "_schedules", {})
            ),
            "lr": [group["lr"] for group in est.optimizer_.param_groups],
            "estimator": est._resume_state(),
            "call": est._interrupted_call() if fitting else None,
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
        if state["seed"] is not None:
            est.seed_ = state["seed"]
        # a call saved in its last epoch had done its work: the next call is a new one
        call = _checked_call(est, state.get("call"))
        in_fit = state["in_fit"] and (call is None or call["epochs_left"] > 0)
        est._load_resume_state(state["estimator"], in_fit=in_fit)
        # a state written before the fit's own generators held torch's ("generators"): the
        # streams have changed since, and a resumed call draws a seed of its own
        est._pending_resume = {
            "call_seed": state.get("call_seed") if in_fit else None,
            **{k: state[k] for k in ("schedulers", "lr")},
        }
        if call is not None and not est._fitting:  # loaded for partial_fit, not LoadInitState
            est._resume_call(call)


def _module_of(est, name: str) -> nn.Module:
    """The module ``name`` of a training state's ``modules``: one the estimator has."""
    module = getattr(est, name, None) if name.endswith("_") else None
    if not isinstance(module, nn.Module) or name in ("module_", "criterion_"):
        raise ValueError(
            f"The training state holds the state of a module {name!r} that "
            f"{type(est).__name__} has not: pass a file written by this estimator's class."
        )
    return module


class ResumableMixin:
    """The estimators' side of the training state: when to capture it, when to apply it.

    The hooks :meth:`_resume_state` and :meth:`_load_resume_state` give an estimator's own
    part of it (JEM's sampler and roll-back policy, NG-EBM's step count). What a call changes
    before its first epoch (:meth:`_call_start_names`: the class counts, the class-incremental
    reservoir) is kept as the call found it (:meth:`_keep_call_start`), so that a state saved
    during the call resumes it: with epochs left, ``partial_fit`` on the call's data changes
    them again from there; with none left, the call was done and the state is as it left them.
    """

    _fitting = False  # between on_train_begin and on_train_end: a save resumes this fit

    @property
    def training_state_(self) -> TrainingState:
        """What a resumed fit needs besides the network, optimizer and history.

        For skorch's ``Checkpoint(f_training_state=...)`` and ``LoadInitState`` (see
        :mod:`ebmclassifier._estimator.resume`).
        """
        return TrainingState(self)

    def _resume_state(self) -> dict:
        """The estimator's own part of the training state (plain values and tensors)."""
        return {}

    def _load_resume_state(self, state: dict, *, in_fit: bool) -> None:
        """Restore :meth:`_resume_state`'s dict; ``in_fit``: it was saved during a fit."""

    def save_params(self, use_safetensors: bool = False, **files) -> None:
        """skorch's ``save_params``, every file given by its path written whole or not at all.

        A full disk or a process killed while it writes leaves each file the old one or the
        new one (see :mod:`ebmclassifier._utils.atomic`). The files of a ``Checkpoint`` that
        saves the training state, which calls this once per file, and the files of one call
        that holds the training state, are replaced together once all are written
        (:mod:`ebmclassifier._estimator.checkpoint`): a kill leaves the previous set or the
        new one, never a mix.

        Parameters
        ----------
        use_safetensors : bool, default=False
            As in skorch.
        **files
            ``f_params``, ``f_optimizer``, ``f_criterion``, ``f_history``, and ``f_<name>``
            for a module ``<name>_`` or the ``training_state_``: paths or file objects.

        Returns
        -------
        None

        Examples
        --------
        >>> import io
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> state = io.BytesIO()  # or a path
        >>> clf.fit(X, y).save_params(f_training_state=state)
        >>> saved = torch.load(io.BytesIO(state.getvalue()), weights_only=True)
        >>> saved["epochs"], saved["seed"] == clf.seed_
        (1, True)
        """
        files_set = file_set(self, files)
        if files_set is not None:
            files_set, staged = self._staging(files_set)
            write = files_set.stage
        else:
            write = atomic_write
        with contextlib.ExitStack() as stack:
            opened = {
                key: _Unclosed(stack.enter_context(write(f, "w" if key == "f_history" else "wb")))
                if isinstance(f, str | os.PathLike)
                else f
                for key, f in files.items()
            }
            super().save_params(use_safetensors=use_safetensors, **opened)
        if files_set is None:
            return
        paths = [f for f in files.values() if isinstance(f, str | os.PathLike)]
        staged.update(os.path.abspath(os.fspath(f)) for f in paths)
        if staged.issuperset(files_set.targets):  # the set's last file: replace them all
            del self._staged_sets[files_set.journal]
            files_set.commit()

    def _staging(self, files_set):
        """The set being written this epoch and the targets staged so far (a new epoch, or
        a set left by a killed writer, starts again)."""
        sets = self.__dict__.setdefault("_staged_sets", {})
        epoch, staged = sets.get(files_set.journal, (None, set()))
        if epoch != len(self.history):
            files_set.finish_pending()
            staged = set()
            sets[files_set.journal] = (len(self.history), staged)
        return files_set, staged

    def load_params(
        self,
        f_params=None,
        f_optimizer=None,
        f_criterion=None,
        f_history=None,
        checkpoint=None,
        use_safetensors: bool = False,
        **kwargs,
    ) -> None:
        """skorch's ``load_params``: the files of one complete set, the training state last.

        With a ``checkpoint`` (``LoadInitState``), its files. Files of a set written together
        (a ``Checkpoint`` that saves the training state) are read as that set stands whole,
        also after a process was killed while replacing it. The training state
        (``f_training_state``) is loaded last, and checked against the history, the network,
        the criterion and the optimizer loaded with it (a ``ValueError`` if they were written
        at other epochs).

        Parameters
        ----------
        f_params, f_optimizer, f_criterion, f_history, checkpoint, use_safetensors
            As skorch's ``load_params`` takes them.
        **kwargs
            ``f_training_state`` for a file that ``save_params`` or a ``Checkpoint`` wrote,
            ``f_<name>`` for a module ``<name>_``.

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> from ebmclassifier import JEMClassifier
        >>> clf = JEMClassifier(max_epochs=2, sgld_steps=2, buffer_size=20, random_state=0)
        >>> clf = clf.fit(X, y)
        >>> fresh = JEMClassifier(max_epochs=0, sgld_steps=2, buffer_size=20, random_state=0)
        >>> fresh = fresh.fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     files = {"f_params": Path(folder, "params.pt"),
        ...              "f_history": Path(folder, "history.json"),
        ...              "f_training_state": Path(folder, "training_state.pt")}
        ...     clf.save_params(**files)
        ...     fresh.load_params(**files)
        >>> bool(torch.equal(fresh.replay_buffer_.samples, clf.replay_buffer_.samples))
        True
        """
        given = {"f_params": f_params, "f_optimizer": f_optimizer}
        given.update(f_criterion=f_criterion, f_history=f_history, **kwargs)
        files = {}
        if checkpoint is not None:  # skorch's rule: its files, those given explicitly win
            if not self.initialized_:
                self.initialize()
            if f_history is None and checkpoint.f_history is not None:
                self.history = History.from_file(_checkpoint_history(checkpoint))
            files.update(checkpoint.get_formatted_files(self))  # names may need the history
            files.pop("f_pickle", None)
        files.update({key: f for key, f in given.items() if f is not None})
        files = current_sources({key: f for key, f in files.items() if f is not None})
        state = files.pop("f_training_state", None)
        super().load_params(use_safetensors=use_safetensors, **files)
        if state is not None:
            device = getattr(self, "device_", torch.device("cpu"))
            state = torch.load(state, map_location=device, weights_only=True)
            self.training_state_.load_state_dict(state, loaded=set(files))

    def initialize(self):
        """skorch's ``initialize``; a new network forgets the schedules' positions."""
        self.__dict__.pop("_pending_resume", None)  # a new network starts a new schedule
        self.__dict__.pop("_schedules", None)
        return super().initialize()

    def on_train_begin(self, net, X=None, y=None, **kwargs) -> None:
        """Mark the fit as running; refuse a Checkpoint placed before an epoch scheduler."""
        self._fitting = True
        _check_checkpoint_order(self)
        super().on_train_begin(net, X=X, y=y, **kwargs)

    def _begin_call(self, *, new_network: bool) -> None:
        """Before a call draws anything: an unseeded call that resumes an interrupted one
        (loaded from a state saved during it) takes that call's seed, any other a new one.

        A ``partial_fit`` for 0 epochs after loading a state saved in the last epoch of a call
        is that call's end (the saving guide's "the epochs it had left": none): what the call
        set from its data goes back to how the call found it, which this call sets again.
        """
        pending = self.__dict__.get("_pending_resume") or {}
        self._call_seed = None if new_network else pending.pop("call_seed", None)
        finished = self.__dict__.pop("_finished_call", None)
        if finished is not None and not new_network and self.max_epochs == 0:
            _restore(self, finished, self._call_start_names())

    def _call_start_names(self) -> tuple[str, ...]:
        """The attributes a call sets from its data before its first epoch: the class
        counts (a subclass adds its own)."""
        return ("class_count_", "class_prior_")

    def _keep_call_start(self, *, reset: bool) -> None:
        """Keep :meth:`_call_start_names` as the call found them (before it sets them);
        ``reset``: a new network, whose class counts start from zero."""
        start = {name: getattr(self, name, None) for name in self._call_start_names()}
        if reset:
            start["class_count_"] = np.zeros(len(self.classes_))
        self._call_start = start

    def _interrupted_call(self) -> dict:
        """What a state saved during a call keeps of it: the epochs it has left, and
        :meth:`_call_start_names` as it found them."""
        done = len(self.history) - self._call_start_epoch
        return {
            "epochs_left": max(0, self.max_epochs - done),
            "before": _encoded(getattr(self, "_call_start", {})),
        }

    def _resume_call(self, call: dict) -> None:
        """Loaded for ``partial_fit`` from a state saved during a call: with epochs left, the
        call's start attributes as it found them (``partial_fit`` on its data sets them
        again); with none left, as it left them (go on with the next data)."""
        if call["epochs_left"] > 0:
            _restore(self, call["before"], self._call_start_names())
        else:
            self._finished_call = call["before"]

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """In the first epoch after a resume: the call's seed, schedules and learning rates.

        The seed before the epoch's generators are made (``LoadInitState`` loads the state in
        ``on_train_begin``, after the call had drawn a seed of its own).
        """
        pending = self.__dict__.pop("_pending_resume", None)
        if pending is not None and pending.get("call_seed") is not None:
            self._call_seed = pending["call_seed"]
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        if pending is not None:  # the first epoch after a resume: every on_train_begin ran
            _apply_pending(self, pending)

    def on_train_end(self, net, X=None, y=None, **kwargs) -> None:
        """Keep the schedules' positions, for the next ``partial_fit`` and for ``save``."""
        super().on_train_end(net, X=X, y=y, **kwargs)
        self._fitting = False
        self._schedules = {name: cb.lr_scheduler_.state_dict() for name, cb in _schedulers(self)}
        self._pending_resume = {
            "schedulers": self._schedules,
            "lr": [group["lr"] for group in self.optimizer_.param_groups],
        }


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
    """A training state's ``call`` as :meth:`ResumableMixin._interrupted_call` writes it, or a
    ``ValueError``: the epochs left an int >= 0, ``before`` tensors under the names of
    :meth:`ResumableMixin._call_start_names` and a list of such names."""
    if call is None:
        return None
    before = call.get("before") if isinstance(call, dict) else None
    left = call.get("epochs_left") if isinstance(call, dict) else None
    parts = before if isinstance(before, dict) else {}
    kept = [*_items(parts.get("tensors")), *_items(parts.get("arrays"))]
    absent = parts.get("absent")
    names = [name for name, _ in kept] + (absent if isinstance(absent, list) else [None])
    if not (
        type(left) is int
        and left >= 0
        and all(isinstance(name, str) for name in names)
        and set(names) <= set(est._call_start_names())
        and all(isinstance(value, torch.Tensor) for _, value in kept)
    ):
        raise ValueError(
            f"The training state's record of the interrupted call is not one that "
            f"{type(est).__name__} writes (epochs left {left!r}, attributes {names!r}; it keeps "
            f"{list(est._call_start_names())}): pass a file this class wrote."
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


def _checkpoint_history(checkpoint) -> str:
    """Where a checkpoint's history is now (skorch's ``f_history_``, in its complete set)."""
    files = {"f_history": checkpoint.f_history_}
    state = getattr(checkpoint, "f_training_state", None)
    if isinstance(state, str):
        files["f_training_state"] = os.path.join(checkpoint.dirname, checkpoint.fn_prefix + state)
    return current_sources(files)["f_history"]


class _Unclosed:
    """A file that its writer cannot close (skorch closes the history's file when done)."""

    def __init__(self, file):
        self._file = file

    def close(self) -> None:
        """Nothing: :func:`~ebmclassifier._utils.atomic.atomic_write` syncs and closes it."""

    def __getattr__(self, name):
        return getattr(self._file, name)


def _apply_pending(est, pending: dict) -> None:
    applied = False
    for name, callback in _schedulers(est):
        if name in pending["schedulers"]:
            callback.lr_scheduler_.load_state_dict(pending["schedulers"][name])
            applied = True
    if applied:  # building the schedulers moved the learning rates; put them back
        for group, lr in zip(est.optimizer_.param_groups, pending["lr"], strict=True):
            group["lr"] = lr


def _check_checkpoint_order(est) -> None:
    """A Checkpoint saving the training state must come after epoch-stepped schedulers."""
    names = [name for name, _ in getattr(est, "callbacks_", [])]
    for i, (name, callback) in enumerate(getattr(est, "callbacks_", [])):
        if isinstance(callback, Checkpoint) and getattr(callback, "f_training_state", None):
            later = [
                other
                for other, cb in est.callbacks_[i + 1 :]
                if isinstance(cb, LRScheduler) and cb.step_every == "epoch"
            ]
            if later:
                raise ValueError(
                    f"The Checkpoint {name!r} saves the training state before the LRScheduler "
                    f"{later[0]!r} steps at the end of each epoch, so a resumed fit would miss "
                    f"that step. Put the Checkpoint after the schedulers in callbacks (order now: "
                    f"{names})."
                )
