"""Energy-based classifiers as scikit-learn estimators.

The public names are imported when first used (PEP 562's module ``__getattr__``), so that
``import ebmclassifier`` and ``python -m ebmclassifier --help`` do not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__ as __version__  # written once, in _version.py

if TYPE_CHECKING:  # what static tools read; at run time __getattr__ imports on first use
    from .compose import ConceptComposition, ProductOfExperts
    from .distributional import DistributionalConstraint
    from .exceptions import DivergenceError
    from .jem import JEMClassifier
    from .latent.classifier import LatentStructureClassifier
    from .ngebm import NGEBMClassifier
    from .saving import load, save

#: Each public name and the module that defines it.
_HOMES = {
    "ConceptComposition": ".compose",
    "DistributionalConstraint": ".distributional",
    "DivergenceError": ".exceptions",
    "JEMClassifier": ".jem",
    "LatentStructureClassifier": ".latent.classifier",
    "NGEBMClassifier": ".ngebm",
    "ProductOfExperts": ".compose",
    "load": ".saving",
    "save": ".saving",
}

__all__ = [
    "ConceptComposition",
    "DistributionalConstraint",
    "DivergenceError",
    "JEMClassifier",
    "LatentStructureClassifier",
    "NGEBMClassifier",
    "ProductOfExperts",
    "load",
    "save",
]


def __getattr__(name: str):
    """A public name, imported from its home on first use; else a subpackage or module."""
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name], __name__), name)
        globals()[name] = value  # once imported, an ordinary attribute
        return value
    try:
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":  # a module that exists but fails: its own error
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
