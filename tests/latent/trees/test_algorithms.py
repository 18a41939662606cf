"""MAP, log-partition, marginals and sampling of trees against brute-force enumeration."""

import pytest
import torch

from ebmclassifier.latent.trees import (
    arc_mask,
    arcs_to_heads,
    heads_to_arcs,
    sample_trees,
    tree_log_partition,
    tree_map,
    tree_marginals,
)

from .test_enumeration import enumerated, pad_arcs

N_PAD = 5
LENGTHS = torch.tensor([5, 4, 3, 2, 1, 5])


def random_scores(seed, batch=None, n=N_PAD, scale=1.5, dtype=torch.float64):
    batch = len(LENGTHS) if batch is None else batch
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(batch, n + 1, n + 1, generator=g, dtype=dtype)


@pytest.mark.parametrize("projective", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_map_is_best_enumerated_tree(projective, seed):
    scores = random_scores(seed)
    arcs = tree_map(scores, LENGTHS, projective)
    for b, n in enumerate(LENGTHS.tolist()):
        trees, tree_scores = enumerated(scores[b], n, projective)
        assert torch.equal(arcs[b], pad_arcs(trees[tree_scores.argmax()], N_PAD))


def test_map_in_float32_agrees_with_float64():
    scores = random_scores(3)
    for projective in (True, False):
        a64 = tree_map(scores, LENGTHS, projective)
        a32 = tree_map(scores.float(), LENGTHS, projective)
        assert a32.dtype == torch.float32
        assert torch.equal(a32.double(), a64)


@pytest.mark.parametrize("projective", [True, False])
def test_log_partition_and_marginals_match_enumeration(projective):
    scores = random_scores(4)
    log_z = tree_log_partition(scores, LENGTHS, projective)
    marginals = tree_marginals(scores, LENGTHS, projective)
    for b, n in enumerate(LENGTHS.tolist()):
        trees, tree_scores = enumerated(scores[b], n, projective)
        torch.testing.assert_close(log_z[b], torch.logsumexp(tree_scores, 0))
        probs = torch.softmax(tree_scores, 0)
        expected = pad_arcs((probs[:, None, None] * trees).sum(0), N_PAD)
        torch.testing.assert_close(marginals[b], expected)


@pytest.mark.parametrize("projective", [True, False])
def test_log_partition_gradcheck(projective):
    scores = random_scores(5, batch=3, n=4).requires_grad_(True)
    lengths = torch.tensor([4, 2, 3])
    assert torch.autograd.gradcheck(lambda s: tree_log_partition(s, lengths, projective), scores)


@pytest.mark.parametrize("projective", [True, False])
def test_marginals_are_differentiable_gradcheck(projective):
    # the "marginals" relaxation backpropagates through the second derivative of log Z
    scores = random_scores(6, batch=2, n=3).requires_grad_(True)
    lengths = torch.tensor([3, 2])
    assert torch.autograd.gradcheck(lambda s: tree_marginals(s, lengths, projective), scores)


@pytest.mark.parametrize("projective", [True, False])
def test_padded_batch_equals_unpadded_sentences(projective):
    scores = random_scores(7)
    # garbage in the padding must not leak: fill it with large values and a nan-free spread
    lengths = LENGTHS
    noisy = scores.clone()
    noisy[~arc_mask(lengths, N_PAD)] = 1e3
    batched = {
        "map": tree_map(noisy, lengths, projective),
        "log_z": tree_log_partition(noisy, lengths, projective),
        "marginals": tree_marginals(noisy, lengths, projective),
    }
    for b, n in enumerate(lengths.tolist()):
        single = scores[b : b + 1, : n + 1, : n + 1]
        assert torch.equal(batched["map"][b], pad_arcs(tree_map(single, None, projective)[0], 5))
        torch.testing.assert_close(
            batched["log_z"][b], tree_log_partition(single, None, projective)[0]
        )
        torch.testing.assert_close(
            batched["marginals"][b], pad_arcs(tree_marginals(single, None, projective)[0], 5)
        )


def test_marginal_gradients_vanish_on_padding():
    scores = random_scores(8).requires_grad_(True)
    for projective in (True, False):
        (grad,) = torch.autograd.grad(tree_log_partition(scores, LENGTHS, projective).sum(), scores)
        assert torch.all(grad[~arc_mask(LENGTHS, N_PAD)] == 0)


@pytest.mark.parametrize("projective", [True, False])
def test_nonprojective_map_scores_at_least_projective_on_long_sentences(projective):
    # beyond enumeration: both decoders return valid single-root trees; CLE's is never worse
    scores = random_scores(9, batch=8, n=20)
    lengths = torch.tensor([20, 19, 15, 11, 7, 3, 20, 12])
    arcs = tree_map(scores, lengths, projective)
    heads = arcs_to_heads(arcs, lengths)
    for b, n in enumerate(lengths.tolist()):
        h = [-1, *heads[b, :n].tolist()]
        assert sum(1 for x in h[1:] if x == 0) == 1
        for m in range(1, n + 1):  # acyclic: every word reaches the root within n steps
            node, steps = m, 0
            while node != 0 and steps <= n:
                node, steps = h[node], steps + 1
            assert node == 0
    assert torch.equal(heads_to_arcs(heads, dtype=arcs.dtype), arcs)
    best_proj = (tree_map(scores, lengths, True) * scores).sum(dim=(1, 2))
    best_nonproj = (tree_map(scores, lengths, False) * scores).sum(dim=(1, 2))
    assert torch.all(best_nonproj >= best_proj - 1e-9)


@pytest.mark.parametrize("projective", [True, False])
def test_sampling_frequencies_match_tree_probabilities(projective):
    n, n_samples = 3, 4000
    scores = random_scores(10, batch=1, n=n, scale=1.0)
    trees, tree_scores = enumerated(scores[0], n, projective)
    probs = torch.softmax(tree_scores, 0)
    draws = sample_trees(
        scores.expand(n_samples, -1, -1), None, projective, torch.Generator().manual_seed(0)
    )
    index = ((draws[:, None] - trees[None]).abs().sum(dim=(2, 3)) == 0).double()
    assert torch.all(index.sum(1) == 1)  # every draw is a valid tree of the family
    freq = index.mean(0)
    # 5 standard errors of a binomial proportion, per tree
    bound = 5 * torch.sqrt(probs * (1 - probs) / n_samples) + 1e-3
    assert torch.all((freq - probs).abs() <= bound), (freq, probs)


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="shape"):
        tree_map(torch.zeros(3, 3))
    with pytest.raises(TypeError, match="floating"):
        tree_map(torch.zeros(1, 3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 2\]"):
        tree_map(torch.zeros(1, 3, 3), torch.tensor([3]))
    with pytest.raises(ValueError, match="one length per sentence"):
        tree_marginals(torch.zeros(2, 3, 3), torch.tensor([1]))


@pytest.mark.parametrize("lengths", [torch.tensor([2.0]), [2.0], torch.tensor([True])])
def test_lengths_of_a_wrong_dtype_are_a_type_error_as_scores_are(lengths):
    # regression: float lengths were a ValueError, integer scores a TypeError
    with pytest.raises(TypeError, match="lengths must be an integer tensor, got dtype"):
        tree_map(torch.zeros(1, 3, 3), lengths)


@pytest.mark.parametrize("projective", [True, False])
def test_float32_marginals_of_long_sentences_are_accurate(projective):
    # beyond enumeration: stability of the chart and of the scaled Laplacian at 30 words
    scores = random_scores(11, batch=4, n=30, scale=10.0)
    m64 = tree_marginals(scores, None, projective)
    m32 = tree_marginals(scores.float(), None, projective)
    torch.testing.assert_close(m64.sum(dim=1)[:, 1:], torch.ones(4, 30, dtype=m64.dtype))
    torch.testing.assert_close(m32.double(), m64, atol=1e-3, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_float32_matrix_tree_with_a_large_spread_matches_enumeration(seed):
    # regression: float32 scores that differ by a few hundred within a column gave log Z = -inf
    # or nan (exp(s - max) underflowed); the determinant is now taken in float64
    scores = random_scores(seed, n=4, batch=3, scale=100.0).float()
    lengths = torch.tensor([4, 3, 2])
    log_z = tree_log_partition(scores, lengths, projective=False)
    marginals = tree_marginals(scores, lengths, projective=False)
    assert log_z.dtype == marginals.dtype == torch.float32
    for b, n in enumerate(lengths.tolist()):
        trees, tree_scores = enumerated(scores[b], n, False)  # float64
        expected = torch.logsumexp(tree_scores, 0).float()
        torch.testing.assert_close(log_z[b], expected, rtol=1e-6, atol=0)
        probs = torch.softmax(tree_scores, 0)
        expected_marginals = pad_arcs((probs[:, None, None] * trees).sum(0), 4).float()
        torch.testing.assert_close(marginals[b], expected_marginals, atol=1e-4, rtol=0)


@pytest.mark.parametrize("projective", [True, False])
def test_sampling_a_non_finite_sentence_draws_heads_and_leaves_the_others(projective):
    # regression: torch.multinomial raised "probability tensor contains either inf, nan"
    scores = random_scores(7)
    broken = scores.clone()
    broken[2] = float("nan")
    expected = sample_trees(scores, LENGTHS, projective, torch.Generator().manual_seed(0))
    z = sample_trees(broken, LENGTHS, projective, torch.Generator().manual_seed(0))
    # one head per word; the other sentences draw what they drew without the nan row
    torch.testing.assert_close(z[:, :, 1:].sum(1), arc_mask(LENGTHS, N_PAD)[:, 0, 1:].double())
    keep = torch.tensor([0, 1, 3, 4, 5])
    assert torch.equal(z[keep], expected[keep])
