"""What a saved file may name and set: the classes :func:`ebmclassifier.load` builds, and the
fitted attributes it restores.

A class named in a file is looked up only in ``ebmclassifier``, ``torch`` or ``skorch`` (the
package's name matched exactly: ``torchfoo`` is not ``torch``), only in a module already imported
(a module of torch or skorch is never imported because a file names it, nor is
``ebmclassifier.__main__``, which runs the command line), without running any attribute lookup
hook (:func:`inspect.getattr_static`), only if it derives from a safe base (an estimator of this
library, a torch module, an optimizer, a data set or loader), and only if it is of the kind its
parameter takes (:func:`check_class_roles`). A fitted attribute is set only if the estimator
saves it (its ``_saved_attributes``) and only with a value of its kind (:data:`ATTRIBUTE_KINDS`):
a file cannot set ``criterion``, ``iterator_train`` or ``predict_proba`` through its attributes.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from .._utils.data import TensorBatchIterator

__all__ = [
    "ATTRIBUTE_KINDS",
    "NEVER_FROM_A_FILE",
    "NOT_SAVED",
    "RUNTIME",
    "check_attribute_kind",
    "check_attribute_name",
    "check_class_roles",
    "class_path",
    "loadable",
    "not_taken",
    "trusted_class",
]

#: Where a class named in a saved file may come from, and what it must be.
TRUSTED_PACKAGES = ("ebmclassifier", "torch", "skorch")
SAFE_BASES = (torch.nn.Module, torch.optim.Optimizer, Dataset, DataLoader, TensorBatchIterator)
#: Classes of this package that moved since a file could name them: a file written before the
#: move names the old path (every estimator's default batch iterators), read as the new one.
MOVED = {
    "ebmclassifier._data:TensorBatchIterator": "ebmclassifier._utils.data:TensorBatchIterator",
    "ebmclassifier._data:ShuffledTensorBatchIterator": (
        "ebmclassifier._utils.data:ShuffledTensorBatchIterator"
    ),
}


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def loadable(cls: type, bases: tuple[type, ...] = SAFE_BASES) -> bool:
    """Whether :func:`load` builds ``cls``: a class of a trusted package with a safe base."""
    return cls.__module__.split(".")[0] in TRUSTED_PACKAGES and issubclass(cls, bases)


def trusted_class(path: str, bases: tuple[type, ...] = SAFE_BASES) -> type:
    """The class ``module:qualname`` if it is a class of a trusted package with a safe base."""
    if not isinstance(path, str):
        raise ValueError(f"The file names a class by {path!r}; load takes 'module:name' strings.")
    module_name, _, qualname = MOVED.get(path, path).partition(":")
    if module_name.split(".")[0] not in TRUSTED_PACKAGES or not qualname:
        raise ValueError(
            f"The file names the class {path!r}; load imports classes from "
            f"{', '.join(TRUSTED_PACKAGES)} only."
        )
    obj: Any = _imported_module(module_name, path)
    for part in qualname.split("."):
        # getattr_static: no module __getattr__ (torch imports submodules lazily), no property
        obj = inspect.getattr_static(obj, part, None)
        if obj is None:
            raise ValueError(
                f"The file names the class {path!r}, which cannot be imported here "
                f"({module_name!r} has no {qualname!r}); the file may come from another "
                "version of that package."
            )
    if not (isinstance(obj, type) and loadable(obj, bases)):
        raise ValueError(f"The file names {path!r}, which is not a class load() may build.")
    return obj


def _imported_module(name: str, path: str) -> ModuleType:
    """The module ``name``: imported already, or a module of this library other than
    ``__main__``. Importing a module runs its code, which a file does not get to choose."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    parts = name.split(".")
    if parts[0] != "ebmclassifier" or "__main__" in parts:
        raise ValueError(
            f"The file names the class {path!r}, but load imports no module a file names "
            f"outside ebmclassifier, and {name!r} is not imported. Pass the class to load, or "
            "import its module first if you trust it."
        )
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ValueError(
            f"The file names the class {path!r}, which cannot be imported here ({err}); the "
            "file may come from another version of that package."
        ) from None


#: Parameters that say how the machine reads files or runs programs, not what the model is:
#: ``save`` never writes them and ``load`` refuses a file that sets them.
NEVER_FROM_A_FILE = {
    "torch_load_kwargs": (
        "it is how load_params calls torch.load: {'weights_only': False} there unpickles "
        "whatever code a later file holds"
    ),
    "compile__options": (
        "torch.compile's options name the compilers it runs and the folders it writes to"
    ),
}
#: Of those, the ones of the loading machine alone, not even reported as unsaved.
NOT_SAVED = ("torch_load_kwargs",)
#: Parameters of how the process runs, not of what the model computes: ``save`` writes them
#: (the file says how it was trained), ``load`` takes none of them from a file, so that the
#: class's default stands unless ``load`` is given them (the saving guide says why each).
#: ``n_threads`` is taken, and bounded at every call by the cores the process may use
#: (:func:`~ebmclassifier._utils.threads.usable_cores`); ``device`` is taken and resolved
#: against the machine's devices.
RUNTIME = {
    "verbose": "what the process prints",
    "compile": "whether a later fit compiles the network with the machine's compilers",
}
#: The settings of torch's ``DataLoader`` that start processes or pin memory: runtime too, for
#: ``iterator_train__*`` and ``iterator_valid__*``.
LOADER_RUNTIME = (
    "num_workers",
    "persistent_workers",
    "prefetch_factor",
    "pin_memory",
    "pin_memory_device",
    "multiprocessing_context",
    "timeout",
    "in_order",
)


def not_taken(name: str) -> bool:
    """Whether ``load`` leaves the parameter ``name`` of a file to the loading process
    (:data:`RUNTIME`, :data:`LOADER_RUNTIME`)."""
    prefix, _, setting = name.partition("__")
    return name in RUNTIME or (
        prefix in ("iterator_train", "iterator_valid") and setting in LOADER_RUNTIME
    )


#: What a class saved for a parameter must be, by the parameter's role; any other parameter
#: (``module``, ``encoder``, ``module__activation``, ...) names a network or a layer.
ROLES = {
    "criterion": (
        (torch.nn.modules.loss._Loss,),
        "a torch loss class, such as torch.nn.CrossEntropyLoss",
    ),
    "optimizer": ((torch.optim.Optimizer,), "a torch optimizer class, such as torch.optim.Adam"),
    "iterator_train": (
        (DataLoader, TensorBatchIterator),
        "a batch iterator class, such as torch.utils.data.DataLoader",
    ),
    "iterator_valid": (
        (DataLoader, TensorBatchIterator),
        "a batch iterator class, such as torch.utils.data.DataLoader",
    ),
    "dataset": ((Dataset,), "a data set class, such as skorch.dataset.Dataset"),
}
NETWORK_ROLE = ((torch.nn.Module,), "a torch.nn.Module class (a network or a layer)")
#: torch's datapipes (file openers, readers, ...): no role's class. Deprecated by torch, so
#: ``MapDataPipe`` may be gone; every ``IterDataPipe`` is an ``IterableDataset``.
NEVER_BUILT = (IterableDataset, *filter(None, [getattr(torch.utils.data, "MapDataPipe", None)]))


def check_class_roles(name: str, value) -> None:
    """Every class in the saved parameter ``name`` is of the kind that parameter takes.

    :func:`trusted_class` admits any torch module, optimizer, data set or loader for any
    parameter: ``criterion=torch.nn.Module`` loaded, ``iterator_train`` could name a
    file-opening datapipe, and a wrong class surfaced as its constructor's error at best.
    """
    if isinstance(value, type):
        bases, what = ROLES.get(name, NETWORK_ROLE)
        if not issubclass(value, bases) or issubclass(value, NEVER_BUILT):
            raise ValueError(
                f"The file gives the parameter {name!r} the class {class_path(value)!r}, but "
                f"{name} must be {what}."
            )
    elif isinstance(value, tuple | list):
        for item in value:
            check_class_roles(name, item)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_class_roles(name, key)
            check_class_roles(name, item)


#: The kind of value each fitted attribute that ``save`` writes holds (``_saved_attributes`` of
#: the estimators, ``tests/saving/test_saving_hostile.py`` checks that each has one). A tensor comes
#: from ``weights.pt``, every other kind from the metadata; an attribute a subclass of one's own
#: adds may hold any "plain" value (no class, no dict). Every kind but "tensor" may be None.
ATTRIBUTE_KINDS = {
    "input_shape_": "shape",
    "n_features_in_": "count",
    "feature_names_in_": "array",
    "seed_": "count",
    "input_min_": "tensor",
    "input_max_": "tensor",
    "ood_threshold_": "number",
    "ood_method_": "text",
    "class_count_": "array",
    "class_prior_": "array",
    "fd_step_size_": "number",
    "sgld_step_size_": "number",
    "n_divergences_": "count",
    "vocabulary_": "array",
    **dict.fromkeys(("reservoir_X_", "reservoir_y_", "reservoir_seen_"), "tensor"),
    **dict.fromkeys(("generated_X_", "generated_y_", "input_mean_", "input_std_"), "tensor"),
    "negatives_": "text or count",
    "replay_per_class_": "count",
    "generated_per_class_": "count",
    "n_iter_": "count",
    "best_epoch_": "count",
    "best_validation_loss_": "number",
    # DistributionalConstraint's record of its test of the shift (issue #49)
    "prior_shift_detected_": "flag",
    **dict.fromkeys(("shift_statistic_", "shift_threshold_", "shift_p_value_"), "number"),
    "shift_weight_": "number",
    "shift_threshold_source_": "text",
    "em_prior_": "array",
}
KINDS = {
    "flag": "a bool",
    "shape": "a tuple of positive ints",
    "count": "an int from 0 to 2**63 - 1",
    "number": "a number",
    "text": "a string",
    "text or count": "a string or an int from 0 to 2**63 - 1",
    "array": "an array",
    "tensor": "a tensor (in weights.pt)",
    "plain": "a number, a string, a tuple, a list or an array",
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_plain(value) -> bool:
    if isinstance(value, tuple | list):
        return all(_is_plain(item) for item in value)
    return value is None or isinstance(value, bool | int | float | str | np.ndarray)


def _of_kind(kind: str, value) -> bool:
    if kind == "tensor":
        return isinstance(value, torch.Tensor)
    if value is None:
        return True
    if kind == "flag":
        return isinstance(value, bool)
    if kind == "shape":
        return isinstance(value, tuple) and all(_is_int(v) and v >= 1 for v in value)
    if kind == "count":
        return _is_int(value) and 0 <= value < 2**63
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "text":
        return isinstance(value, str)
    if kind == "text or count":
        return isinstance(value, str) or _of_kind("count", value)
    if kind == "array":
        return isinstance(value, np.ndarray)
    return _is_plain(value) or isinstance(value, torch.Tensor)


def check_attribute_name(estimator: str, name: str, saved: tuple[str, ...]) -> None:
    """``name`` is a fitted attribute that ``estimator`` saves (its ``_saved_attributes``)."""
    if name not in saved:
        raise ValueError(
            f"The file sets the attribute {name!r}, which {estimator} does not save (it saves "
            f"{', '.join(saved)})."
        )


def check_attribute_kind(name: str, value) -> None:
    """``value`` is of the kind of the fitted attribute ``name`` (:data:`ATTRIBUTE_KINDS`).

    A value of kind "tensor" must come from ``weights.pt`` and only such values may: a tensor
    is never decoded from the metadata.
    """
    kind = ATTRIBUTE_KINDS.get(name, "plain")
    if not _of_kind(kind, value):
        raise ValueError(
            f"The file gives the attribute {name!r} a value of type {type(value).__name__}, "
            f"but {name} must be {KINDS[kind]}."
        )
