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

import contextlib
import hashlib
import os
from collections.abc import Callable, Collection, Mapping

import torch
from skorch.callbacks import Checkpoint
from skorch.history import History
from torch import nn

from .._utils.atomic import atomic_write
from .._utils.file_sets import FileSet

__all__ = [
    "check_same_epoch",
    "current_sources",
    "digests",
    "file_set",
    "files_to_load",
    "state_digest",
    "write_files",
]

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


def file_set(estimator, files: Mapping, fitting: bool) -> FileSet | None:
    """The set that ``save_params(**files)`` writes into, or None (each file on its own).

    The files of a ``Checkpoint`` of ``callbacks_`` that saves the training state, when a fit
    is running (``fitting``) and ``files`` are among them; or ``files`` themselves when they
    hold a training state given by path and another file. (Outside a fit, a ``save_params``
    of one of the Checkpoint's files writes that file alone, at once.)
    """
    paths = _paths(files)
    if not paths:
        return None
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


def write_files(estimator, files: dict, save: Callable, *, fitting: bool, sets: dict) -> None:
    """``save(**files)`` (skorch's ``save_params``), each file given by its path written whole
    or not at all (:func:`~ebmclassifier._utils.atomic.atomic_write`); the files of a set
    (:func:`file_set`) staged, and replaced together once the set's last file is staged.

    ``sets``: the sets being written, journal -> (epoch, paths staged), kept between the calls
    of one epoch (a new epoch, or a set left by a killed writer, starts again).
    """
    files_set = file_set(estimator, files, fitting)
    write = atomic_write
    if files_set is not None:
        write = files_set.stage
        epoch, staged = sets.get(files_set.journal, (None, set()))
        if epoch != len(estimator.history):
            files_set.finish_pending()
            staged = set()
            sets[files_set.journal] = (len(estimator.history), staged)
    with contextlib.ExitStack() as stack:
        opened = {
            key: _Unclosed(stack.enter_context(write(f, "w" if key == "f_history" else "wb")))
            if isinstance(f, str | os.PathLike)
            else f
            for key, f in files.items()
        }
        save(**opened)
    if files_set is None:
        return
    paths = [f for f in files.values() if isinstance(f, str | os.PathLike)]
    staged.update(os.path.abspath(os.fspath(f)) for f in paths)
    if staged.issuperset(files_set.targets):  # the set's last file: replace them all
        del sets[files_set.journal]
        files_set.commit()


def files_to_load(estimator, given: dict, checkpoint) -> dict:
    """The ``f_*`` files that ``load_params(**given, checkpoint=checkpoint)`` reads, each where
    its content is now (:func:`current_sources`).

    With a ``checkpoint`` (``LoadInitState``), its files, those given explicitly winning (as
    skorch's ``load_params`` does); its history is read first (the files' names may need it),
    after ``initialize`` on an estimator that was not.
    """
    files = {}
    if checkpoint is not None:
        if not estimator.initialized_:
            estimator.initialize()
        if given.get("f_history") is None and checkpoint.f_history is not None:
            estimator.history = History.from_file(_checkpoint_history(checkpoint))
        files.update(checkpoint.get_formatted_files(estimator))
        files.pop("f_pickle", None)
    files.update({key: f for key, f in given.items() if f is not None})
    return current_sources({key: f for key, f in files.items() if f is not None})


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
