"""Checkpoint files that cannot mix epochs, and that no kill loses.

skorch's ``Checkpoint`` writes a checkpoint as several files, one ``save_params`` call each
(the criterion, the optimizer, the parameters, the training state, the history). Two things
keep such a set whole:

- **Written together.** When the files belong to a ``Checkpoint`` that saves the training
  state (``f_training_state``), or are passed to one ``save_params`` call with it, they are
  written as one :class:`~ebmclassifier._utils.file_sets.FileSet` (:func:`file_set`): each
  staged beside its target, and the set replaced at once when its last file is staged, the
  history first. A process killed at any moment leaves the previous epoch's set or the new
  one, and ``load_params`` (``LoadInitState``) reads whichever is whole
  (:func:`current_sources`); ``history.json`` is always that set's, so counting its epochs
  tells how many a resumed run has done.
- **Checked.** The training state records what the other files hold: the number of epochs of
  the history and a digest of the network's, the criterion's and the optimizer's states
  (:func:`digests`); loading refuses files that do not match it (:func:`check_same_epoch`),
  whatever wrote them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping

import torch
from skorch.callbacks import Checkpoint
from torch import nn

from .._utils.file_sets import FileSet

__all__ = ["check_same_epoch", "current_sources", "digests", "file_set", "state_digest"]

#: The fitted objects whose states the training state checks, and the files that hold them.
CHECKED = {
    "module_": ("f_params", "f_module"),
    "criterion_": ("f_criterion",),
    "optimizer_": ("f_optimizer",),
}


def state_digest(state) -> str:
    """SHA-256 of a nested state (a ``state_dict`` of a module or an optimizer).

    Tensors count by dtype, shape and bytes; dicts by their keys in sorted order; lists and
    tuples by their items; other values by ``repr``. A state saved with ``torch.save`` and
    loaded back has the digest it had.

    Examples
    --------
    >>> layer = torch.nn.Linear(2, 1)
    >>> a = state_digest(layer.state_dict())
    >>> with torch.no_grad():
    ...     _ = layer.bias.add_(1.0)
    >>> a == state_digest(layer.state_dict()), len(a)
    (False, 64)
    """
    digest = hashlib.sha256()
    _feed(digest, state)
    return digest.hexdigest()


def _feed(digest, value) -> None:
    if isinstance(value, torch.Tensor):
        flat = value.detach().reshape(-1).contiguous().cpu()
        digest.update(f"T{flat.dtype}{tuple(value.shape)}:".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    elif isinstance(value, Mapping):
        digest.update(f"D{len(value)}:".encode())
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, list | tuple):
        digest.update(f"L{len(value)}:".encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(f"V{value!r};".encode())


def digests(estimator) -> dict[str, str]:
    """The digest of the state of each object of :data:`CHECKED` the estimator has."""
    return {
        name: state_digest(getattr(estimator, name).state_dict())
        for name in CHECKED
        if isinstance(getattr(estimator, name, None), nn.Module | torch.optim.Optimizer)
    }


def check_same_epoch(estimator, state: dict, loaded: Collection[str] | None) -> None:
    """Refuse a training state that does not match the files loaded with it.

    Parameters
    ----------
    estimator : EBMClassifierBase
        With the other files loaded.
    state : dict
        The training state of a checkpoint (``TrainingState.state_dict()``).
    loaded : collection of str or None
        The ``f_*`` names loaded with the state; None when unknown, then the network alone
        (as a state written before the optimizer and criterion were recorded) is checked.

    Raises
    ------
    ValueError
        Naming what does not match.
    """
    problem = None
    if state["epochs"] != len(estimator.history):
        written, found = state["epochs"], len(estimator.history)
        problem = f"it was written after epoch {written}, the history after epoch {found}"
    else:
        recorded = state.get("digests")
        if recorded is None:  # a state written before the other files' digests
            recorded = {"module_": state["module_digest"]}
            current = {"module_": _module_digest(estimator.module_)}
        else:
            current = digests(estimator)
        for name, digest in recorded.items():
            checked = name == "module_" or (loaded is not None and set(CHECKED[name]) & set(loaded))
            if checked and current.get(name) != digest:
                problem = f"the {name[:-1]}'s state is not the one it was written with"
                break
    if problem is not None:
        raise ValueError(
            f"The training state does not match the other checkpoint files: {problem}. Files "
            "of two epochs (copied by hand, or written by something that does not write them "
            "together) cannot resume a fit exactly; resume from a complete set of files, as a "
            "Checkpoint that saves the training state writes it, or start the run again."
        )


def _module_digest(module: nn.Module) -> str:
    """The network's digest as training states of format 1 without ``digests`` recorded it."""
    digest = hashlib.sha256()
    for key, tensor in module.state_dict().items():
        digest.update(key.encode())
        flat = tensor.detach().reshape(-1).contiguous().cpu()
        digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return digest.hexdigest()


def _paths(files: Mapping) -> dict[str, str]:
    """The ``f_*`` files given by path, as absolute paths (skorch's ``f_pickle`` left out)."""
    return {
        key: os.path.abspath(os.fspath(value))
        for key, value in files.items()
        if isinstance(value, str | os.PathLike) and key != "f_pickle"
    }


def _set_of(paths: dict[str, str]) -> FileSet:
    return FileSet(paths.values(), anchor=paths["f_training_state"], first=paths.get("f_history"))


def file_set(estimator, files: Mapping) -> FileSet | None:
    """The set that ``save_params(**files)`` writes into, or None (each file on its own).

    The files of a ``Checkpoint`` of ``callbacks_`` that saves the training state, when a fit
    is running and ``files`` are among them; or ``files`` themselves when they hold a training
    state given by path and another file. (Outside a fit, a ``save_params`` of one of the
    Checkpoint's files writes that file alone, at once.)
    """
    paths = _paths(files)
    if not paths:
        return None
    fitting = getattr(estimator, "_fitting", False)
    for _, callback in getattr(estimator, "callbacks_", []) if fitting else []:
        if isinstance(callback, Checkpoint) and getattr(callback, "f_training_state", None):
            theirs = _paths(callback.get_formatted_files(estimator))
            if "f_training_state" in theirs and set(paths.values()) <= set(theirs.values()):
                return _set_of(theirs)
    if "f_training_state" in paths and len(paths) > 1:
        return _set_of(paths)
    return None


def current_sources(files: dict) -> dict:
    """``files`` (``f_*`` name to path) with each path replaced by where its content is now.

    Where a writer was killed after committing a set and before renaming all of its files
    (:meth:`~ebmclassifier._utils.file_sets.FileSet.sources`); the files as given otherwise.
    """
    paths = _paths(files)
    if "f_training_state" not in paths:
        return dict(files)
    sources = _set_of(paths).sources()
    return {key: sources.get(paths.get(key), value) for key, value in files.items()}
