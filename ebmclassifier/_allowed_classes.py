"""What a saved file may name: the classes :func:`ebmclassifier.load` imports and builds.

A class named in a file is imported only from ``ebmclassifier``, ``torch`` or ``skorch``, only if
it derives from a safe base (an estimator of this library, a torch module, an optimizer, a data
set or loader), and only if it is of the kind its parameter takes (:func:`check_class_roles`).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from ._utils.data import TensorBatchIterator

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
    """Import ``module:qualname`` if it is a class of a trusted package with a safe base."""
    module_name, _, qualname = MOVED.get(path, path).partition(":")
    if module_name.split(".")[0] not in TRUSTED_PACKAGES or not qualname:
        raise ValueError(
            f"The file names the class {path!r}; load imports classes from "
            f"{', '.join(TRUSTED_PACKAGES)} only."
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
    if not (isinstance(obj, type) and loadable(obj, bases)):
        raise ValueError(f"The file names {path!r}, which is not a class load() may build.")
    return obj


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
