"""Energy-based classifiers as scikit-learn estimators."""

from ._version import __version__ as __version__  # written once, in _version.py
from .compose import ConceptComposition, ProductOfExperts
from .distributional import DistributionalConstraint
from .exceptions import DivergenceError
from .jem import JEMClassifier
from .latent.classifier import LatentStructureClassifier
from .ngebm import NGEBMClassifier
from .saving import load, save

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
