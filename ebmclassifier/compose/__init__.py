"""Composition of energies: the functions on tensors and the two estimators built on them.

A wing: its functional core and its faces side by side.

- :mod:`~ebmclassifier.compose.energies`: products, mixtures, class-conditional energies and
  the logic of concepts (conjunction, disjunction, :class:`Not`), on tensors;
- :mod:`~ebmclassifier.compose.product`: :class:`ProductOfExperts`, a product or a mixture of
  classifiers over one label set;
- :mod:`~ebmclassifier.compose.concepts`: :class:`ConceptComposition`, one classifier per
  concept, composed into energies of concept values and sampled;
- ``_experts.py``: what both estimators share, the ``(name, estimator)`` pairs.
"""

from .concepts import ConceptComposition
from .energies import (
    Not,
    class_energy,
    conjunction,
    disjunction,
    mixture_energy,
    mixture_logits,
    product_logits,
)
from .product import ProductOfExperts

__all__ = [
    "ConceptComposition",
    "Not",
    "ProductOfExperts",
    "class_energy",
    "conjunction",
    "disjunction",
    "mixture_energy",
    "mixture_logits",
    "product_logits",
]
