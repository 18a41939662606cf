"""A scikit-learn object around the library's estimators, in one file without pickle.

A ``Pipeline`` of a scaler and an ``NGEBMClassifier``, a ``ColumnTransformer`` before one, a
``FeatureUnion``, a ``CalibratedClassifierCV`` over one, a search's ``best_estimator_``: the
scikit-learn part goes to skops (``skops.io``, the field's format for scikit-learn objects),
each estimator of the library to its own file, all in one zip archive (format
:data:`COMPOSITE_FORMAT`):

- ``composite.json``: the format, its version, the versions that wrote it, the class of the
  object, and one entry per estimator of the library it holds: ``{"member":
  "estimators/<i>.ebm"}`` for a fitted one, ``{"estimator": class, "params": ...,
  "unsaved_params": ...}`` for an unfitted one (a ``CalibratedClassifierCV``'s ``estimator``
  parameter);
- ``skeleton.skops``: skops's file of the object in which each of those estimators is a
  :class:`StoredEstimator` naming its entry;
- ``estimators/<i>.ebm``: the fitted estimators' own files, as ``save`` writes them (an
  estimator or a ``DistributionalConstraint``), read by the same reader as any other.

:func:`load_composite` reads the skeleton first (:mod:`~ebmclassifier.saving._skeleton`: every
type it names trusted, or it is refused by name before anything is built), then the
estimators, then puts each in the place of its :class:`StoredEstimator`.
"""

from __future__ import annotations

import copy
import io
import json
import types

import numpy as np
import skops.io
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._utils.warn import warn_user
from .._version import __version__
from ._allowed_classes import class_path
from ._archive import FileLimits, Layout, Refused, parse_json, read_file
from ._files import (
    CONSTRAINT_CLASS,
    LAYOUTS,
    SavedEstimatorMixin,
    load_members,
    new_estimator,
    save_constraint,
    save_estimator,
    split_params,
)
from ._skeleton import TRUSTED, load_skeleton

__all__ = [
    "COMPOSITE_FORMAT",
    "COMPOSITE_LAYOUT",
    "StoredEstimator",
    "load_composite",
    "save_composite",
]

COMPOSITE_FORMAT = "ebmclassifier.composite"
COMPOSITE_VERSION = 1
COMPOSITE_LAYOUT = Layout("composite.json", ("skeleton.skops",), r"estimators/[0-9]{1,6}\.ebm")


class StoredEstimator:
    """Where an estimator of the library stands in the skeleton: the number of its entry in
    ``composite.json``. Nothing else: it is built by skops and replaced by the estimator."""

    def __init__(self, entry: int):
        self.entry = entry

    def __repr__(self) -> str:
        return f"StoredEstimator({self.entry!r})"


_STORED = f"{StoredEstimator.__module__}.{StoredEstimator.__qualname__}"
#: What the walk of :func:`library_objects` does not enter: skops saves these by name.
_BY_NAME = (
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    np.ufunc,
)


def is_library_file(obj) -> bool:
    """Whether ``obj`` is written to a file of its own: an estimator of the library or a
    ``DistributionalConstraint``."""
    return isinstance(obj, SavedEstimatorMixin) or any(
        class_path(cls) == CONSTRAINT_CLASS for cls in type(obj).__mro__
    )


# ---------------------------------------------------------------- save


def _children(obj) -> list:
    """What the walk of :func:`library_objects` descends into from ``obj``."""
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, list | tuple | set | frozenset):
        return list(obj)
    if isinstance(obj, np.ndarray):
        return list(obj.flat) if obj.dtype.hasobject else []
    if isinstance(obj, _BY_NAME):
        return []  # skops saves it by name
    return list(getattr(obj, "__dict__", {}).values())


def library_objects(obj) -> list:
    """The estimators of the library that ``obj`` holds (itself aside), in the order a walk
    of its attributes and containers meets them, each once; a torch object met outside them is
    a ``TypeError`` (skops cannot save it)."""
    found, seen, stack = {}, set(), list(reversed(_children(obj)))
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, str | bytes | int | float | bool | type(None)):
            continue
        seen.add(id(item))
        if is_library_file(item):
            found[id(item)] = item
        elif isinstance(item, torch.Tensor | torch.nn.Module):
            raise TypeError(
                f"{type(obj).__name__} holds a torch {type(item).__name__} outside the "
                "library's estimators, which skops cannot save. Pickle it instead (only load "
                "a pickle you trust)."
            )
        else:
            stack.extend(reversed(_children(item)))
    return list(found.values())


def _entry(estimator, index: int, training_state: bool, members: dict) -> dict:
    """The entry of ``composite.json`` for ``estimator``; a fitted one's file into ``members``."""
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        if not isinstance(estimator, SavedEstimatorMixin):
            raise ValueError(
                f"ebmclassifier.save writes a {type(estimator).__name__} only once it is "
                "fitted: fit it first"
            ) from None
        params, unsaved = split_params(estimator)
        return {
            "estimator": class_path(type(estimator)),
            "params": params,
            "unsaved_params": unsaved,
        }
    buffer, name = io.BytesIO(), f"estimators/{index}.ebm"
    if isinstance(estimator, SavedEstimatorMixin):
        save_estimator(estimator, buffer, training_state=training_state)
    else:
        save_constraint(estimator, buffer)
    members[name] = buffer.getvalue()
    return {"member": name}


def _warn_untrusted(obj, data: bytes) -> None:
    untrusted = sorted(set(skops.io.get_untrusted_types(data=data)) - {_STORED, *TRUSTED})
    if untrusted:
        warn_user(
            f"The file of this {type(obj).__name__} names types that ebmclassifier.load does not "
            f"trust by default: {untrusted}. Loading it will need load(path, trusted=[...]) "
            "with those you trust."
        )


def save_composite(obj, *, training_state: bool = True) -> dict[str, bytes]:
    """The members of the file (format :data:`COMPOSITE_FORMAT`) of the scikit-learn object
    ``obj`` and the library's estimators it holds."""
    members, entries, stand_ins = {}, [], {}
    for index, estimator in enumerate(library_objects(obj)):
        entries.append(_entry(estimator, index, training_state, members))
        stand_ins[id(estimator)] = StoredEstimator(index)
    # deepcopy finds each estimator in its memo: the copy holds its stand-in, never a copy of it
    skeleton = copy.deepcopy(obj, stand_ins)
    try:
        data = skops.io.dumps(skeleton)
    except TypeError as err:  # skops's UnsupportedTypeException
        raise TypeError(f"skops cannot save this {type(obj).__name__}: {err}") from None
    _warn_untrusted(obj, data)
    metadata = {
        "format": COMPOSITE_FORMAT,
        "format_version": COMPOSITE_VERSION,
        "object": class_path(type(obj)),
        "estimators": entries,
        "versions": {
            "ebmclassifier": __version__,
            "skops": skops.__version__,
            "torch": torch.__version__,
        },
    }
    return {
        "composite.json": json.dumps(metadata, allow_nan=True),
        "skeleton.skops": data,
        **members,
    }


# ---------------------------------------------------------------- load


def _checked_entries(metadata: dict, members: dict[str, bytes]) -> list[dict]:
    """The entries of ``composite.json``, each of the form :func:`_entry` writes, and the
    archive's members exactly those they name."""
    version = metadata.get("format_version")
    if metadata.get("format") != COMPOSITE_FORMAT or version != COMPOSITE_VERSION:
        raise Refused(
            f"it is not a file of format {COMPOSITE_FORMAT!r} version {COMPOSITE_VERSION}"
        )
    entries = metadata.get("estimators")
    if not isinstance(entries, list):
        raise Refused("its composite.json has no list of 'estimators'")
    named = set()
    for index, entry in enumerate(entries):
        if entry == {"member": f"estimators/{index}.ebm"}:
            named.add(entry["member"])
        elif not (
            isinstance(entry, dict)
            and set(entry) == {"estimator", "params", "unsaved_params"}
            and isinstance(entry["estimator"], str)
            and isinstance(entry["params"], dict)
            and isinstance(entry["unsaved_params"], dict)
        ):
            raise Refused(
                f"its composite.json gives estimator {index} the malformed entry "
                f"{str(entry)[:80]!r}"
            )
    fixed = {COMPOSITE_LAYOUT.json, *COMPOSITE_LAYOUT.required}
    if set(members) - fixed != named:
        raise Refused(
            f"its members {sorted(set(members) - fixed)[:10]} are not the estimators its "
            "composite.json names"
        )
    return entries


def _estimator(entry: dict, members: dict, params: dict, limits: FileLimits):
    """The estimator of one entry: its own file read as any file, or an unfitted one."""
    if "member" not in entry:
        return new_estimator(entry, params, limits)
    name = entry["member"]
    try:
        kind, inner = read_file(io.BytesIO(members[name]), LAYOUTS, limits)
        return load_members(kind, inner, params, limits)
    except Refused as err:
        raise Refused(f"in its {name}, {err}") from None


def _put_back(obj, estimators: list, seen: dict, depth: int, limits: FileLimits):
    """``obj`` with every :class:`StoredEstimator` replaced by its estimator (lists, dicts,
    object arrays and attributes in place; a tuple rebuilt)."""
    if isinstance(obj, StoredEstimator):
        entry = obj.__dict__.get("entry")
        if type(entry) is not int or not 0 <= entry < len(estimators):
            raise Refused(
                f"its skeleton.skops names the estimator {str(entry)[:40]!r}, which its "
                "composite.json does not hold"
            )
        return estimators[entry]
    if id(obj) in seen:
        return seen[id(obj)][1]
    if depth > limits.skops_depth:
        raise Refused(
            f"its skeleton.skops builds an object nested deeper than {limits.skops_depth}"
        )
    seen[id(obj)] = (obj, obj)  # the object kept alive: its id is not reused
    put = lambda item: _put_back(item, estimators, seen, depth + 1, limits)  # noqa: E731
    if isinstance(obj, list):
        obj[:] = [put(item) for item in obj]
    elif isinstance(obj, dict):
        for key, value in obj.items():
            obj[key] = put(value)
    elif isinstance(obj, tuple):
        rebuilt = tuple(put(item) for item in obj)
        seen[id(obj)] = (obj, rebuilt)
        return rebuilt
    elif isinstance(obj, np.ndarray) and obj.dtype.hasobject:
        for index in np.ndindex(obj.shape):
            obj[index] = put(obj[index])
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        state = vars(obj)
        for key, value in state.items():
            state[key] = put(value)
    return obj


def load_composite(members: dict[str, bytes], params: dict, limits, trusted: list[str]):
    """The object of a composite file read by
    :func:`~ebmclassifier.saving._archive.read_members` (its refusals name no file: the caller
    names it); ``params`` for each of its estimators, ``trusted`` the type names trusted besides
    the defaults."""
    metadata = parse_json(members["composite.json"], "composite.json", limits)
    entries = _checked_entries(metadata, members)
    skeleton = load_skeleton(members["skeleton.skops"], [_STORED, *TRUSTED, *trusted], limits)
    estimators = [_estimator(entry, members, params, limits) for entry in entries]
    return _put_back(skeleton, estimators, {}, 0, limits)
