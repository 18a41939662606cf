"""Composition of energies: products, mixtures, class-conditional energies and their logic.

Energies are scores, so they add. With each expert's logits ``f_k(x)`` and energy
``E_k(x) = -logsumexp_y f_k(x)[y]`` (Grathwohl et al., 2020, Eq. 5), this module writes the
compositions of [1]_, [2]_ and [3]_ as plain functions on tensors:

- a product of experts (conjunction), logits ``sum_k w_k f_k(x)`` (Hinton, 2002);
- a mixture (disjunction, the deep ensemble of [4]_), ``p(y|x) = sum_k w_k p_k(y|x) / sum_k w_k``
  and ``E(x) = -logsumexp_k (log w_k - E_k(x))`` with normalised weights;
- the class-conditional energy of a set ``S`` of labels, ``E(x, S) = -logsumexp_{y in S} f(x)[y]``
  (``E(x, y) = -f(x)[y]`` for one label, the energy of the joint ``p(x, y)``);
- the conjunction ``sum_k w_k E_k`` and disjunction ``-logsumexp_k(-E_k)`` of energies, Du et
  al.'s concept conjunction and disjunction [3]_; a negative weight in a conjunction is their
  concept negation.

:class:`Not` marks a negated concept value for
:class:`~ebmclassifier.compose.ConceptComposition`, whose queries (``None``, a dict
``{concept name: value}`` for a conjunction, or a list of dicts for their disjunction; a value is
a label, a collection of labels, or a :class:`Not` of one) :func:`compile_query` turns into
clauses, a disjunction of conjunctions of ``(concept index, bool mask of the labels allowed)``,
and :func:`satisfying_rows` evaluates on encoded concept values. The estimators' faces over
these functions sit beside them in :mod:`ebmclassifier.compose`:
:class:`~ebmclassifier.compose.ProductOfExperts` and
:class:`~ebmclassifier.compose.ConceptComposition`; nothing here knows scikit-learn, and the
inputs are trusted (validated by those faces).

References
----------
.. [1] Hinton, G. E. "Training Products of Experts by Minimizing Contrastive Divergence".
   Neural Computation 14(8), 2002.
.. [2] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and Swersky, K.
   "Your Classifier is Secretly an Energy Based Model and You Should Treat it Like One".
   ICLR 2020.
.. [3] Du, Y., Li, S. and Mordatch, I. "Compositional Visual Generation with Energy Based
   Models". NeurIPS 2020.
.. [4] Lakshminarayanan, B., Pritzel, A. and Blundell, C. "Simple and Scalable Predictive
   Uncertainty Estimation using Deep Ensembles". NeurIPS 2017.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "Not",
    "class_energy",
    "conjunction",
    "disjunction",
    "mixture_energy",
    "mixture_logits",
    "product_logits",
]


@dataclass(frozen=True)
class Not:
    """The negation of a concept value: every label of the concept except those of ``value``.

    Used in the ``concepts`` of :meth:`ConceptComposition.energy
    <ebmclassifier.compose.ConceptComposition.energy>` and :meth:`ConceptComposition.sample
    <ebmclassifier.compose.ConceptComposition.sample>`. Within one expert's closed label
    set, "not ``S``" is the complement of ``S``, whose class-conditional energy is bounded
    below wherever the logits are, unlike the negated energy ``+f(x)[y]`` (see
    :func:`class_energy`).

    Parameters
    ----------
    value : label, list of labels, or Not
        What is negated; the same grammar as any concept value.

    Examples
    --------
    >>> Not(3)
    Not(3)
    >>> Not(["thick", "thin"]).value
    ['thick', 'thin']
    """

    value: object

    def __repr__(self) -> str:
        return f"Not({self.value!r})"


def product_logits(logits: Sequence[Tensor], weights: Tensor) -> Tensor:
    """Logits of a product of experts, ``sum_k w_k f_k(x)`` (conjunction; Hinton, 2002).

    So ``softmax`` of the result is ``prod_k p_k(y|x)^{w_k}`` renormalised over ``y``, and its
    energy is ``-logsumexp_y sum_k w_k f_k(x)[y]``. Negative weights are Du et al.'s
    negation.

    Parameters
    ----------
    logits : sequence of K Tensors of shape (n, n_classes)
        The experts' logits over the same labels, in the same order.
    weights : Tensor of shape (K,)

    Returns
    -------
    Tensor of shape (n, n_classes)

    Examples
    --------
    >>> import torch
    >>> f1, f2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    >>> product_logits([f1, f2], torch.tensor([1.0, 0.5]))
    tensor([[1., 1.]])
    """
    stacked = torch.stack(list(logits))
    return (weights.to(stacked)[:, None, None] * stacked).sum(0)


def disjunction(energies: Tensor) -> Tensor:
    """Energy of "any of them", ``-logsumexp_k(-E_k(x))`` (concept disjunction, Du et al., 2020).

    ``exp(-E) = sum_k exp(-E_k)``: the unnormalised densities add.

    Parameters
    ----------
    energies : Tensor of shape (K, n)

    Returns
    -------
    Tensor of shape (n,)

    Examples
    --------
    >>> import math, torch
    >>> e = torch.tensor([[1.0, 2.0], [1.0, 50.0]])
    >>> disjunction(e)  # two equal terms: log 2 lower; one dominant term: that term
    tensor([0.3069, 2.0000])
    >>> round(1 - math.log(2), 4)
    0.3069
    """
    return -torch.logsumexp(-energies, dim=0)


def conjunction(energies: Tensor, weights: Tensor) -> Tensor:
    """Energy of "all of them", ``sum_k w_k E_k(x)`` (concept conjunction, Du et al., 2020).

    A negative ``w_k`` is Du et al.'s concept negation, ``p(x) ∝ p_1(x) / p_2(x)^a``.

    Parameters
    ----------
    energies : Tensor of shape (K, n)
    weights : Tensor of shape (K,)

    Returns
    -------
    Tensor of shape (n,)

    Examples
    --------
    >>> import torch
    >>> conjunction(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([1.0, -0.5]))
    tensor([-0.5000,  0.0000])
    """
    return (weights.to(energies)[:, None] * energies).sum(0)


def mixture_energy(energies: Tensor, weights: Tensor) -> Tensor:
    """Energy of a mixture, ``-logsumexp_k(log w_k - E_k(x))`` with ``w`` normalised to sum 1.

    The normalisation makes a mixture of copies of one expert that expert. A zero weight
    leaves its expert out.

    Parameters
    ----------
    energies : Tensor of shape (K, n)
    weights : Tensor of shape (K,)
        Non-negative, with a positive sum.

    Returns
    -------
    Tensor of shape (n,)

    Examples
    --------
    >>> import torch
    >>> e = torch.tensor([[2.0, 1.0], [2.0, 3.0]])
    >>> mixture_energy(e, torch.tensor([1.0, 1.0]))[0]  # the same energy twice: itself
    tensor(2.)
    >>> mixture_energy(e, torch.tensor([1.0, 0.0]))  # the second expert has no weight
    tensor([2., 1.])
    """
    weights = weights.to(energies)
    return disjunction(energies - torch.log(weights / weights.sum())[:, None])


def mixture_logits(logits: Sequence[Tensor], weights: Tensor) -> Tensor:
    """Logits of a mixture (a deep ensemble) that carry its class posterior and its energy.

    With normalised weights ``w``, the mixture's class posterior is the deep ensemble's
    average ``p(y|x) = sum_k w_k p_k(y|x)`` (Lakshminarayanan et al., 2017) and its energy is
    :func:`mixture_energy`, ``E(x) = -logsumexp_k(log w_k - E_k(x))``. The logits
    ``g(x)[y] = log p(y|x) - E(x)`` are the one set whose ``softmax`` is that posterior and
    whose ``-logsumexp`` is that energy, so every score of a classifier (``energy``,
    ``max_softmax``, ``approx_mass``) applies to the mixture unchanged.

    Parameters
    ----------
    logits : sequence of K Tensors of shape (n, n_classes)
    weights : Tensor of shape (K,)
        Non-negative, with a positive sum.

    Returns
    -------
    Tensor of shape (n, n_classes)

    Examples
    --------
    >>> import torch
    >>> f1, f2 = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    >>> g = mixture_logits([f1, f2], torch.tensor([1.0, 1.0]))
    >>> p = (torch.softmax(f1, 1) + torch.softmax(f2, 1)) / 2
    >>> torch.allclose(torch.softmax(g, 1), p)
    True
    >>> e = torch.stack([-torch.logsumexp(f1, 1), -torch.logsumexp(f2, 1)])
    >>> torch.allclose(-torch.logsumexp(g, 1), mixture_energy(e, torch.ones(2)))
    True
    """
    stacked = torch.stack(list(logits))  # (K, n, n_classes)
    weights = weights.to(stacked)
    log_w = torch.log(weights / weights.sum())[:, None]  # (K, 1)
    neg_energies = torch.logsumexp(stacked, dim=2)  # -E_k(x), (K, n)
    # log p(y|x) = logsumexp_k(log w_k + f_k(x)[y] + E_k(x)); -E(x) = logsumexp_k(log w_k - E_k(x))
    log_proba = torch.logsumexp((log_w - neg_energies)[..., None] + stacked, dim=0)
    return log_proba + torch.logsumexp(log_w + neg_energies, dim=0)[:, None]


def class_energy(logits: Tensor, allowed: Tensor) -> Tensor:
    """Energy of the event "the label is in ``S``", ``-logsumexp_{y in S} f(x)[y]``.

    For one label it is ``E(x, y) = -f(x)[y]``, the energy of the joint
    ``p(x, y) ∝ exp(f(x)[y])`` (Grathwohl et al., 2020, Eq. 3; per sample, with a label of its
    own, :func:`ebmclassifier.energy.joint_energy`); for a set it is the
    disjunction of those, since ``p(x, y in S) = sum_{y in S} p(x, y)``; for every label it is
    the energy ``E(x)``. The complement of ``S`` gives the negation (:class:`Not`).

    Parameters
    ----------
    logits : Tensor of shape (n, n_classes)
    allowed : bool Tensor of shape (n_classes,)
        The labels of ``S``; at least one.

    Returns
    -------
    Tensor of shape (n,)

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.energy import energy
    >>> f = torch.tensor([[1.0, 2.0, 3.0]])
    >>> class_energy(f, torch.tensor([False, True, False]))  # -f[1]
    tensor([-2.])
    >>> torch.allclose(class_energy(f, torch.ones(3, dtype=torch.bool)), energy(f))
    True
    """
    return -torch.logsumexp(logits.masked_fill(~allowed.to(logits.device), -torch.inf), dim=1)


# ------------------------------------------------------------- queries of concepts


#: The containers whose items a query value allows, any of them.
DISJUNCTION_TYPES = (list, tuple, set, frozenset, np.ndarray)

Clause = list[tuple[int, np.ndarray]]


def compile_query(concepts, names: Sequence[str], classes: Sequence[np.ndarray]) -> list[Clause]:
    """The clauses of the query ``concepts`` over concepts ``names`` with labels ``classes``."""
    if concepts is None:
        return [[(k, np.ones(len(c), dtype=bool)) for k, c in enumerate(classes)]]
    queries = [concepts] if isinstance(concepts, dict) else concepts
    if (
        not isinstance(queries, list)
        or not queries
        or not all(isinstance(q, dict) for q in queries)
    ):
        raise ValueError(
            "concepts must be None, a dict {concept name: value} (a conjunction) or a "
            f"non-empty list of such dicts (their disjunction). Got {concepts!r}."
        )
    names = list(names)
    clauses = []
    for query in queries:
        unknown = [name for name in query if name not in names]
        if unknown:
            raise ValueError(
                f"Unknown concepts {unknown!r}; the concepts of this ConceptComposition "
                f"are {names!r}."
            )
        clause = []
        for name, value in query.items():
            k = names.index(name)
            allowed = allowed_labels(value, name, classes[k])
            if not allowed.any():
                raise ValueError(
                    f"The value {value!r} of concept {name!r} allows no label (its labels "
                    f"are {classes[k].tolist()!r})."
                )
            clause.append((k, allowed))
        clauses.append(clause)
    return clauses


def allowed_labels(value, name: str, labels: np.ndarray) -> np.ndarray:
    """The ``labels`` of concept ``name`` that ``value`` allows, as a bool mask over them."""
    classes = labels.tolist()
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a numpy scalar label
        value = value.item()
    if isinstance(value, Not):
        return ~allowed_labels(value.value, name, labels)
    if isinstance(value, DISJUNCTION_TYPES):
        values = list(value)
        if not values:
            raise ValueError(
                f"An empty list is no value of concept {name!r}; give at least one label."
            )
        return np.logical_or.reduce([allowed_labels(v, name, labels) for v in values])
    allowed = np.array([label == value for label in classes], dtype=bool)
    if not allowed.any():
        raise ValueError(
            f"Unknown value {value!r} of concept {name!r}; its labels are {classes!r}."
        )
    return allowed


def satisfying_rows(codes: np.ndarray, clauses: list[Clause]) -> np.ndarray:
    """Which rows of ``codes`` (encoded labels, one column per concept) satisfy a clause."""
    match = np.zeros(len(codes), dtype=bool)
    for clause in clauses:
        in_clause = np.ones_like(match)
        for k, allowed in clause:
            in_clause &= allowed[codes[:, k]]
        match |= in_clause
    return match
