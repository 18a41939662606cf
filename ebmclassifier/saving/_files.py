"""The ``.ebm`` file of a fitted estimator or constraint: :func:`save_estimator`,
:func:`save_constraint`, their readers and :class:`SavedEstimatorMixin` (``estimator.save(path)``);
what a file holds and what ``load`` refuses is the package's docstring
(:mod:`ebmclassifier.saving`); the one ``save`` and ``load`` choose the format
(``_dispatch.py``). The archive is read within
:class:`~ebmclassifier.saving._archive.FileLimits` (``_archive.py``), the metadata's values
decoded from a closed list (``_values.py``), the classes a file names looked up statically
(``_allowed_classes.py``).
"""

from __future__ import annotations

import io
import json
import os

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.frozen import FrozenEstimator
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_is_fitted
from skorch.history import History

from .._utils.device import resolve_device
from .._utils.generators import global_rng
from .._utils.warn import warn_user
from .._version import __version__
from ._allowed_classes import (
    NEVER_FROM_A_FILE,
    NOT_SAVED,
    check_attribute_kind,
    check_attribute_name,
    check_class_roles,
    class_path,
    not_taken,
    trusted_class,
)
from ._archive import (
    FileLimits,
    Layout,
    Refused,
    parse_json,
    read_file,
    read_weights,
    write_archive,
)
from ._budget import check_built_sizes, check_state_names
from ._values import (
    LABEL,
    NotSaved,
    array_or_none,
    closed,
    decode,
    decode_priors,
    encode,
    encode_priors,
    fitted_value,
    plain,
)

__all__ = [
    "CONSTRAINT_FORMAT",
    "FORMAT",
    "FORMAT_VERSION",
    "LAYOUTS",
    "CONSTRAINT_CLASS",
    "SavedEstimatorMixin",
    "load_members",
    "new_estimator",
    "save_constraint",
    "save_estimator",
    "split_params",
]

FORMAT = "ebmclassifier.saving"
FORMAT_VERSION = 1
CONSTRAINT_FORMAT = "ebmclassifier.distributional"
#: The members of each format's archive: its JSON metadata, then its tensors or inner file.
LAYOUTS = {
    FORMAT: Layout("metadata.json", ("weights.pt",)),
    CONSTRAINT_FORMAT: Layout("distributional.json", ("estimator.ebm",)),
}
#: The one class a ``distributional.json`` file builds (a constant: never read from the file).
CONSTRAINT_CLASS = "ebmclassifier.distributional.constraint:DistributionalConstraint"

#: The JSON type of each entry of each format's metadata, as ``save`` writes it.
_LAYOUT = {
    FORMAT: {
        "estimator": (str,),
        "params": (dict,),
        "unsaved_params": (dict,),
        "classes": (dict,),
        "attributes": (dict,),
        "history": (list, type(None)),
    },
    CONSTRAINT_FORMAT: {
        "params": (dict,),
        "priors": (dict, str, type(None)),
        "train_priors": (dict, str, type(None)),
        "frozen": (bool,),
        "classes": (list,),
        "fitted": (dict,),
    },
}


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

        The same file as ``ebmclassifier.save(estimator, path)``.

        JSON metadata and the tensors' state dicts (no pickled code), so the file loads without
        the training data and is safe to load whoever wrote it (:mod:`ebmclassifier.saving`).
        Only a regular file (or no file) at ``path`` is replaced.

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
        save_estimator(self, path, training_state=training_state)

    def _load_module_states(self, states: dict[str, dict]) -> None:
        """Load saved state dicts into the modules (and optimizer) ``initialize`` built."""
        for name, state in states.items():
            getattr(self, name).load_state_dict(state)


# ---------------------------------------------------------------- save


def split_params(estimator) -> tuple[dict, dict]:
    """The constructor parameters as JSON, and the reprs of those that cannot be saved."""
    saved, unsaved = {}, {}
    for name, value in estimator.get_params(deep=False).items():
        if name in NOT_SAVED:
            continue
        try:
            if name in NEVER_FROM_A_FILE:
                raise NotSaved(value)
            saved[name] = encode(value)
        except NotSaved:
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
            attributes[name] = encode(value)
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


def save_estimator(estimator, path: str | os.PathLike, *, training_state: bool = True) -> None:
    """Write a fitted estimator of the library to ``path`` (format :data:`FORMAT`).

    What ``ebmclassifier.save(estimator, path)`` and ``estimator.save(path)`` call: the
    parameters as in :func:`ebmclassifier.saving.save`.
    """
    check_is_fitted(estimator)
    params, unsaved = split_params(estimator)
    attributes, tensors, states = _fitted_state(estimator, training_state)
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": class_path(type(estimator)),
        "params": params,
        "unsaved_params": unsaved,
        "classes": encode(np.asarray(estimator.classes_)),
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
    write_archive(path, {"metadata.json": text, "weights.pt": weights.getbuffer()})


# ---------------------------------------------------------------- load


def _read(path, limits: FileLimits, expected: str) -> tuple[dict, bytes]:
    """``(metadata, second member)`` of a file of format ``expected`` (an inner file)."""
    kind, members = read_file(path, LAYOUTS, limits)
    if kind != expected:
        raise Refused(f"it is not a file of format {expected!r} version {FORMAT_VERSION}")
    return _parsed(kind, members, limits)


def _parsed(kind: str, members: dict[str, bytes], limits: FileLimits) -> tuple[dict, bytes]:
    """``(metadata, second member)`` of the members of a file of format ``kind``."""
    layout = LAYOUTS[kind]
    metadata = parse_json(members[layout.json], layout.json, limits)
    if metadata.get("format") != kind or metadata.get("format_version") != FORMAT_VERSION:
        raise Refused(f"it is not a file of format {kind!r} version {FORMAT_VERSION}")
    _check_layout(metadata, _LAYOUT[kind], layout.json)
    return metadata, members[layout.required[0]]


def load_members(kind: str, members: dict[str, bytes], params: dict, limits):
    """The estimator or constraint of the members of a file of format ``kind``, read by
    :func:`~ebmclassifier.saving._archive.read_members` (its refusals name no file: the
    caller names it)."""
    metadata, data = _parsed(kind, members, limits)
    if kind == CONSTRAINT_FORMAT:
        return _load_constraint(metadata, data, params, limits)
    return _load_estimator(metadata, data, params, limits)


def _check_layout(metadata: dict, layout: dict, member: str) -> None:
    """Each entry of ``layout`` in ``metadata``, of the JSON type ``save`` writes for it."""
    for key, types in layout.items():
        if key not in metadata:
            raise Refused(f"its {member} has no {key!r}")
        if not isinstance(metadata[key], types):
            raise Refused(
                f"its {member} gives {key!r} a JSON {type(metadata[key]).__name__}, where save "
                f"writes {' or '.join(t.__name__ for t in types)}"
            )


def _constructor_params(metadata: dict, given: dict, limits: FileLimits) -> dict:
    """The saved parameters, overridden by ``given``; warns about unsaved ones left out."""
    params = {}
    for name, value in metadata["params"].items():
        if name in given or not_taken(name):  # the caller's or the machine's, never the file's
            continue
        if name in NEVER_FROM_A_FILE:
            raise Refused(
                f"it sets {name!r}, which load never takes from a file ({NEVER_FROM_A_FILE[name]}; "
                f"save never writes it). Pass it to load(path, {name}=...) if you mean it"
            )
        try:
            params[name] = decode(value, limits)
            check_class_roles(name, params[name])
        except ValueError as err:
            raise Refused(
                f"{err} It is the saved parameter {name!r}: pass it to load(path, {name}=...)"
            ) from None
    missing = {k: v for k, v in metadata["unsaved_params"].items() if k not in given}
    if "module" in missing:
        raise Refused(
            f"the network was saved with module={str(missing['module'])[:200]}, which load() "
            "does not import from a file; pass it: load(path, module=...)"
        )
    if missing:
        shown = ", ".join(f"{k}={str(v)[:200]}" for k, v in missing.items())
        warn_user(
            f"Not restored from the file: {shown}; the defaults stand in. Pass them to load() "
            "to restore them."
        )
    return {**params, **given}


def _fitted_attributes(estimator, attributes: dict, tensors: dict, limits: FileLimits) -> dict:
    """What ``fit`` learned, from the metadata and ``weights.pt``: only the attributes the
    estimator saves (``_saved_attributes``), each of its kind (:data:`ATTRIBUTE_KINDS`)."""
    try:
        for name in (*attributes, *tensors):
            check_attribute_name(type(estimator).__name__, name, estimator._saved_attributes)
        fitted = {name: decode(value, limits, classes=False) for name, value in attributes.items()}
        for name in fitted.keys() & tensors.keys():
            raise Refused(f"it sets the attribute {name!r} both in its metadata and its weights")
        fitted.update(tensors)
        for name, value in fitted.items():
            check_attribute_kind(name, value)
    except Refused:
        raise
    except ValueError as err:
        raise Refused(str(err)) from None
    return fitted


def _set_attributes(estimator, fitted: dict) -> None:
    for name, value in fitted.items():
        setattr(estimator, name, value)


def _load_states(estimator, states: dict) -> None:
    """The saved state dicts into the modules that ``initialize`` built from the parameters,
    which must be the network the weights were trained as."""
    check_state_names(estimator, states)
    modules = {k: v for k, v in states.items() if k != "training_state_"}
    _loaded(estimator, modules, "does not fit the network that its parameters build")
    if "training_state_" in states:  # last, as saved: it is checked against the others
        training = {"training_state_": states["training_state_"]}
        _loaded(estimator, training, "holds a training state that is not one the class writes")


def _loaded(estimator, states: dict, problem: str) -> None:
    """``estimator._load_module_states(states)``; any error is a refusal: its weights.pt
    ``problem``."""
    try:
        estimator._load_module_states(states)
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError, AttributeError) as err:
        shown = " ".join(str(err).split())[:2000].rstrip(".")
        raise Refused(f"its weights.pt {problem}: {shown}") from None


def new_estimator(metadata: dict, params: dict, limits: FileLimits):
    """The unfitted estimator of the class and parameters of ``metadata`` (its ``"estimator"``,
    ``"params"`` and ``"unsaved_params"``), ``params`` instead of the saved ones; its
    parameters checked by the class, naming the file."""
    try:
        cls = trusted_class(metadata["estimator"], (SavedEstimatorMixin,))
        estimator = cls(**_constructor_params(metadata, params, limits))
        estimator._check_params()
    except Refused:
        raise
    except (ValueError, TypeError) as err:  # an unknown parameter name: skorch's TypeError
        raise Refused(str(err)) from None
    return estimator


def _load_estimator(metadata: dict, weights: bytes, params: dict, limits: FileLimits):
    """The estimator of an ``ebmclassifier.saving`` file, read by :func:`_parsed`."""
    estimator = new_estimator(metadata, params, limits)
    try:
        estimator.device_ = resolve_device(estimator.device)
    except ValueError as err:
        raise Refused(str(err)) from None
    saved = read_weights(weights, estimator.device_, limits)
    encoder = LabelEncoder()
    encoder.classes_ = _classes(metadata["classes"], limits)
    fitted = _fitted_attributes(estimator, metadata["attributes"], saved["tensors"], limits)
    fitted["label_encoder_"] = encoder
    check_built_sizes(estimator, fitted, saved["states"])  # before anything is built
    _set_attributes(estimator, fitted)
    # initialize() draws initial weights, which the saved ones replace: leave torch's RNG alone
    with global_rng(0, estimator.device_):
        try:
            estimator.initialize()
        except (ValueError, TypeError) as err:  # a network its parameters cannot build
            raise Refused(str(err)) from None
        _set_attributes(estimator, fitted)  # initialize() resets some
        _load_states(estimator, saved["states"])
    history = metadata["history"]
    if history is not None:
        if not all(isinstance(epoch, dict) for epoch in history):
            raise Refused("its history is not a list of epochs (JSON objects)")
        estimator.history_ = History(history)
    return estimator


def _classes(value, limits: FileLimits) -> np.ndarray:
    classes = decode(value, limits, classes=False)
    if not (isinstance(classes, np.ndarray) and classes.ndim == 1 and len(classes) >= 1):
        raise Refused("its classes are not an array of labels")
    return classes


# ---------------------------------------------------------------- DistributionalConstraint


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
    save_estimator(base, buffer, training_state=False)
    fitted = {name: plain(getattr(adapted, name)) for name in adapted._saved_attributes}
    fitted.update({k: array_or_none(getattr(adapted, k)) for k in adapted._saved_arrays})
    metadata = {
        "format": CONSTRAINT_FORMAT,
        "format_version": FORMAT_VERSION,
        "params": {name: plain(getattr(adapted, name)) for name in adapted._saved_params},
        "priors": encode_priors(adapted.priors),
        "train_priors": encode_priors(adapted.train_priors),
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
    write_archive(path, {"distributional.json": text, "estimator.ebm": buffer.getbuffer()})


def _load_constraint(metadata: dict, base_file: bytes, params: dict, limits):
    """The ``DistributionalConstraint`` of a file read by :func:`_read`; ``params`` for its base.

    Its class is imported by name, as :func:`load` imports every estimator class it builds, so
    that this module imports nothing from the estimators (they import it, to save).
    """
    inner = io.BytesIO(base_file)
    try:  # a base, never another constraint
        base_metadata, weights = _read(inner, limits, expected=FORMAT)
        base = _load_estimator(base_metadata, weights, params, limits)
    except Refused as err:
        raise Refused(f"in its estimator.ebm, {err}") from None
    if metadata["frozen"]:
        base = FrozenEstimator(base)
    cls = trusted_class(CONSTRAINT_CLASS, (BaseEstimator,))
    # a file written before a parameter existed gets what it meant (cls._saved_param_defaults)
    adapted = cls(
        base,
        priors=decode_priors(metadata["priors"]),
        train_priors=decode_priors(metadata["train_priors"]),
        **{
            **cls._saved_param_defaults,
            **closed(metadata["params"], cls._saved_params, "parameter"),
        },
    )
    try:  # its own checks of the parameters, naming the file
        adapted._check_params()
    except ValueError as err:
        raise Refused(str(err)) from None
    if not all(isinstance(label, LABEL) for label in metadata["classes"]):
        raise Refused("its classes are not a list of labels")
    adapted.classes_ = np.asarray(metadata["classes"])
    fitted = closed(metadata["fitted"], (*cls._saved_attributes, *cls._saved_arrays), "attribute")
    # a file written before an attribute existed gets its default (cls._saved_defaults)
    for name, value in {**cls._saved_defaults, **fitted}.items():
        setattr(adapted, name, fitted_value(name, value, cls._saved_arrays))
    return adapted
