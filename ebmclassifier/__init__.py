"""Energy-based classifiers as scikit-learn estimators."""

from .concepts import ConceptComposition
from .distributional_constraint import DistributionalConstraint
from .ensemble import ProductOfExperts
from .exceptions import DivergenceError
from .jem import JEMClassifier
from .latent.classifier import LatentStructureClassifier
from .ngebm import NGEBMClassifier
from .saving import load

__version__ = "0.1.0.dev0"

__all__ = [
    "ConceptComposition",
    "DistributionalConstraint",
    "DivergenceError",
    "JEMClassifier",
    "LatentStructureClassifier",
    "NGEBMClassifier",
    "ProductOfExperts",
    "load",
]
