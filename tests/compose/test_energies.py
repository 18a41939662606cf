"""The tensor functions of ebmclassifier.compose against float64 numpy computations, and the
queries of concepts against a truth table."""

import itertools

import numpy as np
import pytest
import torch
from scipy.special import logsumexp, softmax

from ebmclassifier.compose import (
    Not,
    class_energy,
    conjunction,
    disjunction,
    mixture_energy,
    mixture_logits,
    product_logits,
)
from ebmclassifier.compose.energies import compile_query, satisfying_rows


@pytest.fixture
def logits():
    """Three experts' logits over four classes for five samples, float64."""
    return torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_product_logits_is_the_weighted_sum(logits):
    weights = np.array([0.5, -1.0, 2.0])
    expected = sum(w * f for w, f in zip(weights, logits.numpy(), strict=True))
    got = product_logits(list(logits), torch.tensor(weights))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_mixture_logits_carry_the_average_posterior_and_the_mixture_energy(logits):
    weights = np.array([1.0, 3.0, 0.5])
    f = logits.numpy()
    p = sum(w * softmax(fk, axis=1) for w, fk in zip(weights, f, strict=True)) / weights.sum()
    # E(x) = -log sum_k (w_k / W) exp(-E_k(x)), with E_k = -logsumexp f_k
    densities = sum(
        w / weights.sum() * np.exp(logsumexp(fk, axis=1)) for w, fk in zip(weights, f, strict=True)
    )
    g = mixture_logits(list(logits), torch.tensor(weights)).numpy()
    np.testing.assert_allclose(softmax(g, axis=1), p, rtol=1e-10)
    np.testing.assert_allclose(-logsumexp(g, axis=1), -np.log(densities), rtol=1e-10)


def test_mixture_logits_of_one_expert_are_its_logits(logits):
    # zero weights drop experts; one expert left is itself: log p_k - E_k = f_k
    only_second = mixture_logits(list(logits), torch.tensor([0.0, 4.0, 0.0]))
    np.testing.assert_allclose(only_second, logits[1], rtol=1e-12, atol=1e-12)
    copies = mixture_logits([logits[2]] * 3, torch.tensor([1.0, 2.0, 5.0]))
    np.testing.assert_allclose(copies, logits[2], rtol=1e-12, atol=1e-12)


def test_mixture_energy_normalises_and_drops_zero_weights(logits):
    energies = -torch.logsumexp(logits, dim=2)
    copies = torch.stack([energies[0]] * 3)
    np.testing.assert_allclose(mixture_energy(copies, torch.tensor([1.0, 2.0, 5.0])), energies[0])
    only_second = mixture_energy(energies, torch.tensor([0.0, 4.0, 0.0]))
    np.testing.assert_allclose(only_second, energies[1], rtol=1e-12)


def test_class_energy_of_a_label_a_set_and_every_label(logits):
    f = logits[0]
    one = torch.tensor([False, False, True, False])
    np.testing.assert_array_equal(class_energy(f, one), -f[:, 2])
    some = torch.tensor([True, False, True, False])
    expected = -logsumexp(f.numpy()[:, [0, 2]], axis=1)
    np.testing.assert_allclose(class_energy(f, some), expected, rtol=1e-12)
    every = torch.ones(4, dtype=torch.bool)
    np.testing.assert_allclose(class_energy(f, every), -logsumexp(f.numpy(), axis=1), rtol=1e-12)


def test_conjunction_and_disjunction(logits):
    energies = -torch.logsumexp(logits, dim=2)
    weights = np.array([1.0, -0.5, 2.0])
    np.testing.assert_allclose(
        conjunction(energies, torch.tensor(weights)), weights @ energies.numpy(), rtol=1e-12
    )
    np.testing.assert_allclose(
        disjunction(energies), -logsumexp(-energies.numpy(), axis=0), rtol=1e-12
    )


def test_gradients_through_the_compositions(logits):
    """gradcheck in float64: the -inf of the masked labels and the log of the weights
    leave finite, correct gradients."""
    weights = torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64)
    mask = torch.tensor([True, False, True, False])
    f = logits.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: mixture_logits(list(t), weights), (f,))
    assert torch.autograd.gradcheck(lambda t: class_energy(t[0], mask), (f,))
    assert torch.autograd.gradcheck(
        lambda t: disjunction(torch.stack([class_energy(fk, mask) for fk in t])), (f,)
    )


def test_not_is_a_value_object():
    assert Not(3) == Not(3) and Not(3) != Not(4)
    assert repr(Not([1, "a"])) == "Not([1, 'a'])"


def _holds(value, label):
    """Whether ``label`` satisfies a query value, read off the documented semantics."""
    if isinstance(value, Not):
        return not _holds(value.value, label)
    if isinstance(value, (list, tuple, set, frozenset)) or (
        isinstance(value, np.ndarray) and value.ndim
    ):
        return any(_holds(v, label) for v in value)
    return label == value


@pytest.mark.parametrize(
    "query",
    [
        None,
        {"colour": "red"},
        {"colour": Not("red"), "size": 1},
        [{"colour": ["red", "green"]}, {"size": np.int64(0)}],
        {"colour": Not(("red", "blue"))},
        [{"size": np.array(1)}, {"colour": "blue", "size": 0}],
        {"colour": np.array(["blue", "green"]), "size": {0, 1}},
    ],
)
def test_the_rows_a_query_selects_are_its_truth_table(query):
    names, classes = ["colour", "size"], [np.array(["red", "blue", "green"]), np.array([0, 1])]
    codes = np.array(list(itertools.product(range(3), range(2))))  # every combination
    clauses = [{}] if query is None else [query] if isinstance(query, dict) else query
    expected = [
        any(
            all(_holds(v, classes[names.index(n)][row[names.index(n)]]) for n, v in q.items())
            for q in clauses
        )
        for row in codes
    ]
    selected = satisfying_rows(codes, compile_query(query, names, classes))
    assert selected.tolist() == expected


@pytest.mark.parametrize(
    "query, match",
    [
        ({"shape": "round"}, "Unknown concepts \\['shape'\\]"),
        ({"colour": "pink"}, "Unknown value 'pink' of concept 'colour'"),
        ({"colour": []}, "empty list is no value of concept 'colour'"),
        ({"colour": Not(["red", "blue", "green"])}, "allows no label"),
        ([], "non-empty list of such dicts"),
        ("red", "must be None, a dict"),
    ],
)
def test_a_query_that_selects_nothing_sensible_is_refused(query, match):
    classes = [np.array(["red", "blue", "green"]), np.array([0, 1])]
    with pytest.raises(ValueError, match=match):
        compile_query(query, ["colour", "size"], classes)
