"""Saving a fitted estimator to one file, and loading it without the training data.

:func:`save` (also ``estimator.save(path)``) writes a zip archive of two members:

- ``metadata.json``: the estimator's class, its constructor parameters, what ``fit`` learned
  besides tensors (``classes_``, ``input_shape_``, ``n_features_in_``, the OOD threshold, ...)
  and, with ``training_state=True``, the training history;
- ``weights.pt``: ``torch.save`` of a dict of tensors only: the state dicts of the fitted
  modules (``module_``, JEM's ``replay_buffer_``), of the optimizer (with
  ``training_state=True``), and fitted tensors such as ``input_min_``. Every tensor is saved on
  the CPU.

Both writers replace a path at once (a temporary file beside it, synced, then renamed over
it), so that the target is always the old file or the new one, never a torn one.

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

A fitted :class:`~ebmclassifier.DistributionalConstraint` (``adapted.save(path)``, through
:func:`save_constraint`) is a zip of ``distributional.json`` (its parameters and what ``fit``
learned) and ``estimator.ebm``, its base estimator's own file as above; :func:`load` reads both
kinds. What JSON cannot hold is refused at save time: ``constraints`` (user callables) and base
estimators that :func:`save` does not write (a scikit-learn classifier, a Pipeline).

Pickle (and joblib) save everything, including such parameters, but unpickling runs code from
the file: only unpickle files you trust. See the user guide's "Saving and deploying".
"""

from __future__ import annotations

import io
import json
import os
import pickle
import warnings
import zipfile
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.frozen import FrozenEstimator
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_is_fitted
from skorch.history import History

from ._allowed_classes import check_class_roles, class_path, loadable, trusted_class
from ._utils.atomic import atomic_write
from ._utils.device import resolve_device, seeded_rng
from ._version import __version__

__all__ = ["load", "save"]

FORMAT = "ebmclassifier.saving"
FORMAT_VERSION = 1
CONSTRAINT_FORMAT = "ebmclassifier.distributional"
#: The members of each format's archive: its JSON metadata, then its tensors or inner file.
_MEMBERS = {
    FORMAT: ("metadata.json", "weights.pt"),
    CONSTRAINT_FORMAT: ("distributional.json", "estimator.ebm"),
}
#: The one class a ``distributional.json`` file builds (a constant: never read from the file).
_CONSTRAINT_CLASS = "ebmclassifier.distributional.constraint:DistributionalConstraint"

#: How the machine that loads reads files, not a property of the model: never taken from a file.
_NOT_SAVED = ("torch_load_kwargs",)


class _NotSaved(Exception):
    """A value that JSON and the trusted classes cannot express."""


class SavedEstimatorMixin:
    """What :func:`save` writes and :func:`load` builds: the estimators' ``save`` method.

    A base of :class:`~ebmclassifier._estimator.base.EBMClassifierBase`, so that this module needs
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
        path : str, path-like or file object
            Replaced at once when the new file is complete (see :func:`save`).
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
    if isinstance(value, type) and loadable(value):  # what load() would refuse is not saved
        return {"__class__": class_path(value)}
    raise _NotSaved(value)


def _decode(value) -> Any:
    """The inverse of :func:`_encode`, importing classes through :func:`trusted_class`."""
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
        return trusted_class(content)
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
            states[name] = value.state_dict()
    if training_state:
        states["optimizer_"] = estimator.optimizer_.state_dict()
        # what a resumed fit needs besides these (ebmclassifier._estimator.resume); restored last
        states["training_state_"] = estimator.training_state_.state_dict(checkpoint=False)
    return attributes, tensors, _cpu(states, {})


def _cpu(obj, memo: dict):
    """A copy of a nested state with every tensor on the CPU, a tensor seen twice copied once
    (so that a snapshot equal to the weights is stored once)."""
    if isinstance(obj, torch.Tensor):
        key = (obj.data_ptr(), obj.dtype, tuple(obj.shape), tuple(obj.stride()), obj.device)
        if key not in memo:
            memo[key] = obj.detach().cpu()
        return memo[key]
    if isinstance(obj, dict):
        return {k: _cpu(v, memo) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_cpu(v, memo) for v in obj)
    return obj


def save(estimator, path: str | os.PathLike, *, training_state: bool = True) -> None:
    """Write a fitted estimator to one file that :func:`load` reads without the training data.

    Parameters
    ----------
    estimator : NGEBMClassifier, JEMClassifier or another estimator of the library
        Fitted.
    path : str, path-like or file object
        The file to write (a zip archive; ``.ebm`` is a fine suffix). It is written whole or
        not at all: to a temporary file in the same folder, synced to the disk, then renamed
        over ``path``, so that a full disk, an error or a killed process leaves the old file
        as it was (the folder needs room for both for a moment). A file object receives the
        complete archive in one ``write`` call, or nothing when building it fails; whether a
        ``write`` that fails half-way leaves part of it is the object's own affair.
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
    check_is_fitted(estimator)
    params, unsaved = _split_params(estimator)
    attributes, tensors, states = _fitted_state(estimator, training_state)
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": class_path(type(estimator)),
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
    _write_archive(path, {"metadata.json": text, "weights.pt": weights.getbuffer()})


def _write_archive(path, members: dict) -> None:
    """A zip archive of ``members`` (name -> str or bytes) at ``path``, whole or not at all.

    A path is replaced at once (:func:`~ebmclassifier._utils.atomic.atomic_write`): the old file
    stays until the new one is complete and synced. A file object receives the complete archive
    in one ``write`` call, or nothing when building it fails.
    """

    def fill(file) -> None:
        with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED) as archive:
            for name, data in members.items():
                archive.writestr(name, data)

    if isinstance(path, str | os.PathLike):
        with atomic_write(path) as file:
            fill(file)
        return
    buffer = io.BytesIO()
    fill(buffer)
    path.write(buffer.getvalue())


# ---------------------------------------------------------------- load


def _shown(path) -> str:
    """``path`` for a message: the file's name, or what a file object is."""
    if isinstance(path, str | os.PathLike):
        return repr(os.fspath(path))
    return f"<{type(path).__name__} object>"


def _read(path, expected: str | None = None) -> tuple[str, dict, bytes]:
    """``(format, metadata, second member)`` of a file of either format (or ``expected``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            kind = CONSTRAINT_FORMAT if "distributional.json" in archive.namelist() else FORMAT
            json_member, data_member = _MEMBERS[kind]
            metadata = json.loads(archive.read(json_member))
            data = archive.read(data_member)
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as err:
        raise ValueError(
            f"{_shown(path)} is not a file written by ebmclassifier.saving.save or "
            f"DistributionalConstraint.save ({err})."
        ) from None
    if (
        kind != (expected or kind)
        or metadata.get("format") != kind
        or (metadata.get("format_version") != FORMAT_VERSION)
    ):
        raise ValueError(
            f"{_shown(path)} is not a file of format {expected or kind!r} version {FORMAT_VERSION}."
        )
    return kind, metadata, data


def _read_weights(path, weights: bytes, device: torch.device) -> dict:
    """The tensors of ``weights.pt`` on ``device``, read without unpickling any code."""
    try:
        return torch.load(io.BytesIO(weights), map_location=device, weights_only=True)
    except pickle.UnpicklingError as err:
        raise ValueError(
            f"The weights in {_shown(path)} hold more than tensors, and load() unpickles "
            f"nothing else ({str(err).splitlines()[0]})."
        ) from None


def _constructor_params(metadata: dict, given: dict) -> dict:
    """The saved parameters, overridden by ``given``; warns about unsaved ones left out."""
    params = {}
    for name, value in metadata["params"].items():
        if name in given:  # the caller's value stands; the file's is not even imported
            continue
        try:
            params[name] = _decode(value)
            check_class_roles(name, params[name])
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

    The one loader of the library's files: also of a ``DistributionalConstraint.save`` file.

    Parameters
    ----------
    path : str, path-like or file object
        A file written by :func:`save` (or ``estimator.save``) or by
        ``DistributionalConstraint.save``.
    **params
        Constructor parameters to set instead of the saved ones: those that could not be saved
        (a network class of one's own, callbacks, ...), or another ``device``. A model trained
        on a GPU loads on a CPU-only machine with the default ``device="auto"``. For a
        ``DistributionalConstraint``, those of its base estimator.

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
    kind, metadata, data = _read(path)
    if kind == CONSTRAINT_FORMAT:
        return _load_constraint(metadata, data, params)
    return _load_estimator(path, metadata, data, params)


def _load_estimator(path, metadata: dict, weights: bytes, params: dict):
    """The estimator of an ``ebmclassifier.saving`` file, read by :func:`_read`."""
    cls = trusted_class(metadata["estimator"], (SavedEstimatorMixin,))
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


# ---------------------------------------------------------------- DistributionalConstraint


def _plain(value):
    """A label, share or count as a JSON value."""
    return value.item() if isinstance(value, np.generic) else value


def _pairs(value):
    """``priors`` / ``train_priors`` as JSON: a dict becomes a list of [label, share] pairs."""
    if isinstance(value, dict):
        return {"pairs": [[_plain(k), float(v)] for k, v in value.items()]}
    if value is None or isinstance(value, str):
        return value
    return {"array": np.asarray(value, dtype=float).tolist()}


def _unpairs(value):
    if isinstance(value, dict) and "pairs" in value:
        return {k: v for k, v in value["pairs"]}
    if isinstance(value, dict) and "array" in value:
        return np.asarray(value["array"], dtype=float)
    return value


def _array_or_none(value):
    """A fitted array as a JSON list; ``None`` (an unused attribute) as it is."""
    return None if value is None else np.asarray(value).tolist()


def _constraint_base(adapted):
    """``(base estimator, frozen)`` of a fitted ``adapted`` that :func:`save_constraint` writes."""
    check_is_fitted(adapted, "lambda_")
    if adapted.constraints:
        raise ValueError(
            "DistributionalConstraint.save cannot write 'constraints': their phi are "
            "callables, which a file is not allowed to hold as code. Pickle the estimator "
            "(from a source you trust), or refit it with the constraints after loading."
        )
    base = adapted.estimator
    frozen = isinstance(base, FrozenEstimator)
    if frozen:
        base = base.estimator
    if not isinstance(base, SavedEstimatorMixin):
        raise ValueError(
            f"DistributionalConstraint.save writes the base estimator with "
            f"ebmclassifier.saving.save, which takes the library's estimators; got a "
            f"{type(base).__name__}. Pickle the estimator instead (from a source you trust)."
        )
    return base, frozen


def save_constraint(adapted, path: str | os.PathLike) -> None:
    """Write a fitted ``DistributionalConstraint`` (priors only, over one of our estimators).

    What ``adapted.save(path)`` calls; :func:`load` reads the file back.

    Parameters
    ----------
    adapted : DistributionalConstraint
        Fitted, without ``constraints``, over an estimator of the library (bare or in a
        ``FrozenEstimator``).
    path : str, path-like or file object
        Written whole or not at all, as :func:`save` writes.

    Returns
    -------
    None
    """
    base, frozen = _constraint_base(adapted)
    buffer = io.BytesIO()
    save(base, buffer, training_state=False)
    fitted = {name: _plain(getattr(adapted, name)) for name in adapted._saved_attributes}
    fitted.update({k: _array_or_none(getattr(adapted, k)) for k in adapted._saved_arrays})
    metadata = {
        "format": CONSTRAINT_FORMAT,
        "format_version": FORMAT_VERSION,
        "params": {name: _plain(getattr(adapted, name)) for name in adapted._saved_params},
        "priors": _pairs(adapted.priors),
        "train_priors": _pairs(adapted.train_priors),
        "frozen": frozen,
        "classes": np.asarray(adapted.classes_).tolist(),
        "fitted": fitted,
    }
    try:
        text = json.dumps(metadata, allow_nan=True)
    except TypeError as err:
        raise TypeError(
            f"DistributionalConstraint holds a value JSON cannot store ({err}); labels must be "
            "numbers, strings or booleans. Pickle the estimator instead."
        ) from None
    _write_archive(path, {"distributional.json": text, "estimator.ebm": buffer.getbuffer()})


def _load_constraint(metadata: dict, base_file: bytes, params: dict):
    """The ``DistributionalConstraint`` of a file read by :func:`_read`; ``params`` for its base.

    Its class is imported by name, as :func:`load` imports every estimator class it builds, so
    that this module imports nothing from the estimators (they import it, to save).
    """
    inner = io.BytesIO(base_file)
    _, base_metadata, weights = _read(inner, expected=FORMAT)  # a base, never another constraint
    base = _load_estimator(inner, base_metadata, weights, params)
    if metadata["frozen"]:
        base = FrozenEstimator(base)
    cls = trusted_class(_CONSTRAINT_CLASS, (BaseEstimator,))
    # a file written before a parameter existed gets what it meant (cls._saved_param_defaults)
    adapted = cls(
        base,
        priors=_unpairs(metadata["priors"]),
        train_priors=_unpairs(metadata["train_priors"]),
        **{**cls._saved_param_defaults, **metadata["params"]},
    )
    adapted._check_params()
    adapted.classes_ = np.asarray(metadata["classes"])
    # a file written before an attribute existed gets its default (cls._saved_defaults)
    for name, value in {**cls._saved_defaults, **metadata["fitted"]}.items():
        as_array = name in cls._saved_arrays and value is not None
        setattr(adapted, name, np.asarray(value, dtype=float) if as_array else value)
    return adapted
