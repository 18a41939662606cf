"""Saving a fitted estimator to one file, and loading it without the training data.

:func:`save` (also ``estimator.save(path)``) writes a zip archive of two members:

- ``metadata.json``: the estimator's class, its constructor parameters, what ``fit`` learned
  besides tensors (``classes_``, ``input_shape_``, ``n_features_in_``, the OOD threshold, ...)
  and, with ``training_state=True``, the training history;
- ``weights.pt``: ``torch.save`` of a dict of tensors only: the state dicts of the fitted
  modules (``module_``, JEM's ``replay_buffer_``), of the optimizer (with
  ``training_state=True``), and fitted tensors such as ``input_min_``. Every tensor is saved on
  the CPU.

:func:`load` rebuilds the estimator from these alone: no ``fit``, no data. It never unpickles
code: the metadata is JSON, the weights are read with ``torch.load(weights_only=True)``, and a
class named in the metadata is imported only from ``ebmclassifier``, ``torch`` or ``skorch``, and
only if it is an estimator of this library, a torch module, an optimizer or a data
set / loader class, and of the kind its parameter takes (a loss for ``criterion``, an optimizer
for ``optimizer``, a batch iterator for ``iterator_*``, a data set for ``dataset``, a network or
layer for any other; never a datapipe that opens files). Parameters that are neither plain
values nor such classes (callbacks, ``train_split``, an ``augmentation``, a network class of
one's own) are not saved; pass them to :func:`load`. A file from anyone is therefore safe to
*load*; what it computes is still the network of whoever trained it.

Pickle (and joblib) save everything, including such parameters, but unpickling runs code from
the file: only unpickle files you trust. See the user guide's "Saving and deploying".
"""

from __future__ import annotations

import importlib
import io
import json
import os
import pickle
import warnings
import zipfile
from typing import Any

import numpy as np
import torch
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_is_fitted
from skorch.history import History
from torch.utils.data import DataLoader, Dataset, IterableDataset

from ._data import TensorBatchIterator
from ._device import resolve_device, seeded_rng

__all__ = ["load", "save"]

FORMAT = "ebmclassifier.saving"
FORMAT_VERSION = 1

#: Where a class named in a saved file may come from, and what it must be.
_TRUSTED_PACKAGES = ("ebmclassifier", "torch", "skorch")
_SAFE_BASES = (torch.nn.Module, torch.optim.Optimizer, Dataset, DataLoader, TensorBatchIterator)
#: How the machine that loads reads files, not a property of the model: never taken from a file.
_NOT_SAVED = ("torch_load_kwargs",)


class _NotSaved(Exception):
    """A value that JSON and the trusted classes cannot express."""


class SavedEstimatorMixin:
    """What :func:`save` writes and :func:`load` builds: the estimators' ``save`` method.

    A base of :class:`~ebmclassifier._base.EBMClassifierBase`, so that this module needs
    nothing from the estimators' module; :func:`load` builds only classes derived from it.
    """

    #: Fitted attributes besides the modules that :func:`save` stores and :func:`load`
    #: restores (numbers, strings, arrays, tensors). The state of every module attribute
    #: ending in ``_`` is saved in any case.
    _saved_attributes: tuple[str, ...] = ()

    def save(self, path, *, training_state: bool = True) -> None:
        """Write the fitted estimator to one file; :func:`ebmclassifier.load` reads it back.

        JSON metadata and the tensors' state dicts (no pickled code), so the file loads without
        the training data and is safe to load whoever wrote it (:mod:`ebmclassifier.saving`).

        Parameters
        ----------
        path : str or path-like
        training_state : bool, default=True
            Also the optimizer's state and the history, so that ``partial_fit`` continues
            after ``load`` as it would have without the round trip.

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> from ebmclassifier import NGEBMClassifier, load
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     clf.save(Path(folder, "model.ebm"))
        ...     restored = load(Path(folder, "model.ebm"))
        >>> np.array_equal(restored.score_ood(X), clf.score_ood(X))
        True
        """
        save(self, path, training_state=training_state)

    def _load_module_states(self, states: dict[str, dict]) -> None:
        """Load saved state dicts into the modules (and optimizer) ``initialize`` built."""
        for name, state in states.items():
            getattr(self, name).load_state_dict(state)


# ---------------------------------------------------------------- values <-> JSON


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _loadable(cls: type, bases: tuple[type, ...] = _SAFE_BASES) -> bool:
    """Whether :func:`load` builds ``cls``: a class of a trusted package with a safe base."""
    return cls.__module__.split(".")[0] in _TRUSTED_PACKAGES and issubclass(cls, bases)


def _encode(value) -> Any:
    """A parameter or fitted attribute as JSON, tagging what JSON has no type for."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"__array__": [_encode(v) for v in value.tolist()], "dtype": value.dtype.str}
    if isinstance(value, tuple | list):
        tag = "__tuple__" if isinstance(value, tuple) else "__list__"
        return {tag: [_encode(v) for v in value]}
    if isinstance(value, dict):
        return {"__dict__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, type) and _loadable(value):  # what load() would refuse is not saved
        return {"__class__": _class_path(value)}
    raise _NotSaved(value)


def _trusted_class(path: str, bases: tuple[type, ...] = _SAFE_BASES) -> type:
    """Import ``module:qualname`` if it is a class of a trusted package with a safe base."""
    module_name, _, qualname = path.partition(":")
    if module_name.split(".")[0] not in _TRUSTED_PACKAGES or not qualname:
        raise ValueError(
            f"The file names the class {path!r}; load imports classes from "
            f"{', '.join(_TRUSTED_PACKAGES)} only."
        )
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(
            f"The file names the class {path!r}, which cannot be imported here ({err}); the "
            "file may come from another version of that package."
        ) from None
    if not (isinstance(obj, type) and _loadable(obj, bases)):
        raise ValueError(f"The file names {path!r}, which is not a class load() may build.")
    return obj


def _decode(value) -> Any:
    """The inverse of :func:`_encode`, importing classes through :func:`_trusted_class`."""
    if not isinstance(value, dict):
        if isinstance(value, list):
            raise ValueError(f"Malformed value {value!r} in the file's metadata.")
        return value
    if set(value) == {"__array__", "dtype"}:
        items = [_decode(v) for v in value["__array__"]]
        return np.asarray(items, dtype=np.dtype(value["dtype"]))
    if len(value) != 1:
        raise ValueError(f"Malformed value {value!r} in the file's metadata.")
    ((tag, content),) = value.items()
    if tag == "__tuple__":
        return tuple(_decode(v) for v in content)
    if tag == "__list__":
        return [_decode(v) for v in content]
    if tag == "__dict__":
        return {_decode(k): _decode(v) for k, v in content}
    if tag == "__class__":
        return _trusted_class(content)
    raise ValueError(f"Unknown tag {tag!r} in the file's metadata.")


# ---------------------------------------------------------------- save


def _split_params(estimator) -> tuple[dict, dict]:
    """The constructor parameters as JSON, and the reprs of those that cannot be saved."""
    saved, unsaved = {}, {}
    for name, value in estimator.get_params(deep=False).items():
        if name in _NOT_SAVED:
            continue
        try:
            saved[name] = _encode(value)
        except _NotSaved:
            unsaved[name] = repr(value)
    return saved, unsaved


def _fitted_state(estimator, training_state: bool) -> tuple[dict, dict, dict]:
    """``(attributes as JSON, tensors, state dicts)`` of what ``fit`` learned."""
    attributes, tensors, states = {}, {}, {}
    for name in estimator._saved_attributes:
        if not hasattr(estimator, name):
            continue
        value = getattr(estimator, name)
        if isinstance(value, torch.Tensor):
            tensors[name] = value.detach().cpu()
        else:
            attributes[name] = _encode(value)
    for name, value in vars(estimator).items():
        if name.endswith("_") and isinstance(value, torch.nn.Module):
            states[name] = _cpu(value.state_dict())
    if training_state:
        states["optimizer_"] = _cpu(estimator.optimizer_.state_dict())
    return attributes, tensors, states


def _cpu(obj):
    """A copy of a nested state with every tensor on the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_cpu(v) for v in obj)
    return obj


def save(estimator, path: str | os.PathLike, *, training_state: bool = True) -> None:
    """Write a fitted estimator to one file that :func:`load` reads without the training data.

    Parameters
    ----------
    estimator : NGEBMClassifier, JEMClassifier or another estimator of the library
        Fitted.
    path : str or path-like
        The file to write (a zip archive; ``.ebm`` is a fine suffix).
    training_state : bool, default=True
        Also save the optimizer's state and the training history, so that ``partial_fit``
        after :func:`load` continues as it would have without the round trip. ``False``
        keeps what inference needs only (an Adam state doubles the size of the weights).

    Returns
    -------
    None

    Examples
    --------
    >>> import tempfile, zipfile
    >>> from pathlib import Path
    >>> from ebmclassifier import NGEBMClassifier, load
    >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder, "model.ebm")
    ...     save(clf, path)
    ...     members = zipfile.ZipFile(path).namelist()
    ...     restored = load(path)
    >>> members
    ['metadata.json', 'weights.pt']
    >>> np.array_equal(restored.predict_proba(X), clf.predict_proba(X))
    True
    """
    from . import __version__

    check_is_fitted(estimator)
    params, unsaved = _split_params(estimator)
    attributes, tensors, states = _fitted_state(estimator, training_state)
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": _class_path(type(estimator)),
        "params": params,
        "unsaved_params": unsaved,
        "classes": _encode(np.asarray(estimator.classes_)),
        "attributes": attributes,
        "trained_on": str(estimator.device_),
        "versions": {"ebmclassifier": __version__, "torch": torch.__version__},
        "history": estimator.history.to_list() if training_state else None,
    }
    try:
        text = json.dumps(metadata, indent=1, allow_nan=True)
    except TypeError as err:
        raise TypeError(
            f"{type(estimator).__name__} holds a value JSON cannot store ({err}); the labels "
            "must be numbers, strings or booleans. Pickle the estimator instead."
        ) from None
    weights = io.BytesIO()
    torch.save({"tensors": tensors, "states": states}, weights)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", text)
        archive.writestr("weights.pt", weights.getvalue())


# ---------------------------------------------------------------- load


def _read(path) -> tuple[dict, bytes]:
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = json.loads(archive.read("metadata.json"))
            weights = archive.read("weights.pt")
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as err:
        raise ValueError(
            f"{os.fspath(path)!r} is not a file written by ebmclassifier.saving.save ({err})."
        ) from None
    if metadata.get("format") != FORMAT or metadata.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{os.fspath(path)!r} is not a file of format {FORMAT!r} version {FORMAT_VERSION}."
        )
    return metadata, weights


def _read_weights(path, weights: bytes, device: torch.device) -> dict:
    """The tensors of ``weights.pt`` on ``device``, read without unpickling any code."""
    try:
        return torch.load(io.BytesIO(weights), map_location=device, weights_only=True)
    except pickle.UnpicklingError as err:
        raise ValueError(
            f"The weights in {os.fspath(path)!r} hold more than tensors, and load() unpickles "
            f"nothing else ({str(err).splitlines()[0]})."
        ) from None


#: What a class saved for a parameter must be, by the parameter's role; any other parameter
#: (``module``, ``encoder``, ``module__activation``, ...) names a network or a layer.
_ROLES = {
    "criterion": ((torch.nn.modules.loss._Loss,), "a torch loss class, such as "
                  "torch.nn.CrossEntropyLoss"),
    "optimizer": ((torch.optim.Optimizer,), "a torch optimizer class, such as torch.optim.Adam"),
    "iterator_train": ((DataLoader, TensorBatchIterator), "a batch iterator class, such as "
                       "torch.utils.data.DataLoader"),
    "iterator_valid": ((DataLoader, TensorBatchIterator), "a batch iterator class, such as "
                       "torch.utils.data.DataLoader"),
    "dataset": ((Dataset,), "a data set class, such as skorch.dataset.Dataset"),
}  # fmt: skip
_NETWORK_ROLE = ((torch.nn.Module,), "a torch.nn.Module class (a network or a layer)")
#: torch's datapipes (file openers, readers, ...): no role's class. Deprecated by torch, so
#: ``MapDataPipe`` may be gone; every ``IterDataPipe`` is an ``IterableDataset``.
_NEVER_BUILT = (IterableDataset, *filter(None, [getattr(torch.utils.data, "MapDataPipe", None)]))


def _check_class_roles(name: str, value) -> None:
    """Every class in the saved parameter ``name`` is of the kind that parameter takes.

    :func:`_trusted_class` admits any torch module, optimizer, data set or loader for any
    parameter: ``criterion=torch.nn.Module`` loaded, ``iterator_train`` could name a
    file-opening datapipe, and a wrong class surfaced as its constructor's error at best.
    """
    if isinstance(value, type):
        bases, what = _ROLES.get(name, _NETWORK_ROLE)
        if not issubclass(value, bases) or issubclass(value, _NEVER_BUILT):
            raise ValueError(
                f"The file gives the parameter {name!r} the class {_class_path(value)!r}, but "
                f"{name} must be {what}."
            )
    elif isinstance(value, tuple | list):
        for item in value:
            _check_class_roles(name, item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_class_roles(name, key)
            _check_class_roles(name, item)


def _constructor_params(metadata: dict, given: dict) -> dict:
    """The saved parameters, overridden by ``given``; warns about unsaved ones left out."""
    params = {}
    for name, value in metadata["params"].items():
        if name in given:  # the caller's value stands; the file's is not even imported
            continue
        try:
            params[name] = _decode(value)
            _check_class_roles(name, params[name])
        except ValueError as err:
            raise ValueError(
                f"{err} It is the saved parameter {name!r}: pass it to load(path, {name}=...)."
            ) from None
    missing = {k: v for k, v in metadata["unsaved_params"].items() if k not in given}
    if "module" in missing:
        raise ValueError(
            f"The network was saved with module={missing['module']}, which load() does not "
            "import from a file; pass it: load(path, module=...)."
        )
    if missing:
        shown = ", ".join(f"{k}={v}" for k, v in missing.items())
        warnings.warn(
            f"Not restored from the file: {shown}; the defaults stand in. Pass them to load() "
            "to restore them.",
            UserWarning,
            stacklevel=3,
        )
    return {**params, **given}


def _set_attributes(estimator, metadata: dict, tensors: dict) -> None:
    for name, value in metadata["attributes"].items():
        setattr(estimator, name, _decode(value))
    for name, value in tensors.items():
        setattr(estimator, name, value)


def load(path: str | os.PathLike, **params):
    """Rebuild an estimator written by :func:`save`, ready to predict, without the data.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save`.
    **params
        Constructor parameters to set instead of the saved ones: those that could not be saved
        (a network class of one's own, callbacks, ...), or another ``device``. A model trained
        on a GPU loads on a CPU-only machine with the default ``device="auto"``.

    Returns
    -------
    estimator
        Of the saved class, fitted: the same ``predict_proba``, ``energy`` and ``score_ood``
        as the saved one, on ``device_`` (``device`` resolved here).

    Raises
    ------
    ValueError
        For a file not written by :func:`save`, or one that names a class ``load`` does not
        build (see the module's notes), a class of the wrong kind for its parameter (naming
        the parameter), or one it cannot import (renamed or removed in the versions
        installed here); a parameter given in ``params`` is not read from the file.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from ebmclassifier import JEMClassifier
    >>> clf = JEMClassifier(max_epochs=1, sgld_steps=2, buffer_size=20, random_state=0)
    >>> clf = clf.fit(X, np.array(["a", "b", "c"])[y])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     clf.save(Path(folder, "jem.ebm"), training_state=False)
    ...     restored = load(Path(folder, "jem.ebm"), device="cpu")
    >>> type(restored).__name__, restored.classes_.tolist(), restored.device_
    ('JEMClassifier', ['a', 'b', 'c'], device(type='cpu'))
    >>> np.array_equal(restored.energy(X), clf.energy(X))
    True
    """
    metadata, weights = _read(path)
    cls = _trusted_class(metadata["estimator"], (SavedEstimatorMixin,))
    estimator = cls(**_constructor_params(metadata, params))
    estimator._check_params()
    estimator.device_ = resolve_device(estimator.device)
    saved = _read_weights(path, weights, estimator.device_)
    estimator.label_encoder_ = LabelEncoder()
    estimator.label_encoder_.classes_ = _decode(metadata["classes"])
    _set_attributes(estimator, metadata, saved["tensors"])
    # initialize() draws initial weights, which the saved ones replace: leave torch's RNG alone
    with seeded_rng(0, estimator.device_):
        estimator.initialize()
        _set_attributes(estimator, metadata, saved["tensors"])  # initialize() resets some
        estimator._load_module_states(saved["states"])
    if metadata["history"] is not None:
        estimator.history_ = History(metadata["history"])
    return estimator
