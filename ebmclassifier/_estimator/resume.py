"""What a resumed fit needs besides the network, the optimizer and the history.

A fit killed after epoch ``k`` and resumed from what was saved then ends bitwise where the
uninterrupted fit ends (on the CPU; see the saving guide for GPUs). The network, the optimizer
and the history are saved by ``save`` and by skorch's ``Checkpoint`` already; the rest of what
training depends on is the *training state*, one dict of tensors and plain values:

- the seed (``seed_``); with ``random_state=None``, torch's generators as they stood (with a
  ``random_state`` each epoch draws from ``(seed_, epoch)`` alone);
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
What must outlive the ``on_train_begin`` of the resumed fit (the generators, the schedulers'
positions, the learning rates) is applied when its first epoch begins.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

import torch
from skorch.callbacks import Checkpoint, LRScheduler
from torch import nn

from .._utils.atomic import atomic_write

__all__ = ["ResumableMixin", "TrainingState"]

FORMAT = 1


def module_digest(module: nn.Module) -> str:
    """SHA-256 of the tensors of ``module``'s state, in the order of its keys."""
    digest = hashlib.sha256()
    for key, tensor in module.state_dict().items():
        digest.update(key.encode())
        flat = tensor.detach().reshape(-1).contiguous().cpu()
        digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return digest.hexdigest()


def _schedulers(estimator) -> list[tuple[str, LRScheduler]]:
    return [
        (name, callback)
        for name, callback in getattr(estimator, "callbacks_", [])
        if isinstance(callback, LRScheduler) and getattr(callback, "lr_scheduler_", None)
    ]


def _generators(device: torch.device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


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
            "generators": _generators(est.device_)
            if fitting and est.random_state is None
            else None,
            "schedulers": (
                {name: cb.lr_scheduler_.state_dict() for name, cb in _schedulers(est)}
                if fitting
                else getattr(est, "_schedules", {})
            ),
            "lr": [group["lr"] for group in est.optimizer_.param_groups],
            "estimator": est._resume_state(),
        }
        if checkpoint:  # skorch's Checkpoint writes module_ and optimizer_ files of their own
            state["modules"] = {
                name: value.state_dict()
                for name, value in vars(est).items()
                if name.endswith("_") and isinstance(value, nn.Module)
                if name not in ("module_", "criterion_")
            }
            state["epochs"] = len(est.history)
            state["module_digest"] = module_digest(est.module_)
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore a state of :meth:`state_dict`; checkpoint files must come from one epoch."""
        est = self.estimator
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(
                f"Not a training state of format {FORMAT} of {type(est).__name__}: pass the "
                "file written as f_training_state by a Checkpoint of this library's estimator."
            )
        if "module_digest" in state:
            _check_same_epoch(est, state)
            for name, module_state in state["modules"].items():
                getattr(est, name).load_state_dict(module_state)
        if state["seed"] is not None:
            est.seed_ = state["seed"]
        est._load_resume_state(state["estimator"], in_fit=state["in_fit"])
        est._pending_resume = {k: state[k] for k in ("generators", "schedulers", "lr")}


def _check_same_epoch(est, state: dict) -> None:
    """Refuse checkpoint files that a process killed while writing them left from two epochs."""
    if state["epochs"] != len(est.history):
        written, loaded = state["epochs"], len(est.history)
        problem = f"it was written after epoch {written}, the history after epoch {loaded}"
    elif state["module_digest"] != module_digest(est.module_):
        problem = "the network's parameters are not those it was written with"
    else:
        return
    raise ValueError(
        f"The training state does not match the other checkpoint files: {problem}. A run "
        "killed while its Checkpoint wrote the files leaves files of two epochs; resume from a "
        "complete set of files, or start the run again."
    )


class ResumableMixin:
    """The estimators' side of the training state: when to capture it, when to apply it.

    The hooks :meth:`_resume_state` and :meth:`_load_resume_state` give an estimator's own
    part of it (JEM's sampler and roll-back policy, NG-EBM's step count, the class-incremental
    reservoir).
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

        ``Checkpoint`` calls it each epoch; a full disk or a process killed while it writes
        leaves each file the old one or the new one (see :mod:`ebmclassifier._utils.atomic`).

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
        with contextlib.ExitStack() as stack:
            opened = {
                key: _Unclosed(
                    stack.enter_context(atomic_write(f, "w" if key == "f_history" else "wb"))
                )
                if isinstance(f, str | os.PathLike)
                else f
                for key, f in files.items()
            }
            super().save_params(use_safetensors=use_safetensors, **opened)

    def load_params(self, *args, **kwargs) -> None:
        """skorch's ``load_params``, the training state (``f_training_state``) loaded last.

        It is checked against the network and the history loaded with it, and skorch would
        load a custom file such as this one before ``f_params``.

        Parameters
        ----------
        *args, **kwargs
            As skorch's ``load_params`` takes them: ``f_params``, ..., ``checkpoint``, and
            ``f_training_state`` for a file that ``save_params`` or a ``Checkpoint`` wrote.

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
        state = kwargs.pop("f_training_state", None)
        super().load_params(*args, **kwargs)
        if state is not None:
            super().load_params(f_training_state=state)

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

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """In the first epoch after a resume: the generators, schedules and learning rates."""
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        pending = self.__dict__.pop("_pending_resume", None)
        if pending is not None:  # the first epoch after a resume: every on_train_begin ran
            _apply_pending(self, pending)

    def on_train_end(self, net, X=None, y=None, **kwargs) -> None:
        """Keep the schedules' positions, for the next ``partial_fit`` and for ``save``."""
        super().on_train_end(net, X=X, y=y, **kwargs)
        self._fitting = False
        self._schedules = {name: cb.lr_scheduler_.state_dict() for name, cb in _schedulers(self)}
        self._pending_resume = {
            "generators": None,
            "schedulers": self._schedules,
            "lr": [group["lr"] for group in self.optimizer_.param_groups],
        }


class _Unclosed:
    """A file that its writer cannot close (skorch closes the history's file when done)."""

    def __init__(self, file):
        self._file = file

    def close(self) -> None:
        """Nothing: :func:`~ebmclassifier._utils.atomic.atomic_write` syncs and closes it."""

    def __getattr__(self, name):
        return getattr(self._file, name)


def _apply_pending(est, pending: dict) -> None:
    generators = pending["generators"]
    if generators is not None:
        torch.set_rng_state(generators["cpu"].cpu())
        if "cuda" in generators and est.device_.type == "cuda":
            torch.cuda.set_rng_state(generators["cuda"].cpu(), est.device_)
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
