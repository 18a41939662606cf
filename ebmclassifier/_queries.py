"""Queries of :class:`~ebmclassifier.ConceptComposition`: concept values compiled to clauses.

A query is ``None`` (every label of every concept), a dict ``{concept name: value}`` (a
conjunction) or a non-empty list of such dicts (their disjunction); a value is a label, a list /
tuple / set / array of labels (any of them) or a :class:`~ebmclassifier.compose.Not` of a value.
:func:`compile_query` turns it into clauses, a disjunction of conjunctions: each clause a list of
``(concept index, bool mask of the labels allowed)``, checked here (a ``ValueError`` names what
is wrong). The energies of the clauses are :mod:`ebmclassifier.compose`'s business;
:func:`satisfying_rows` evaluates the same clauses on encoded concept values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .compose import Not

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
