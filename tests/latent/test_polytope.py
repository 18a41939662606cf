"""The polytope interface: one implementation of each method, any structure that gives oracles."""

import pickle

import pytest
import torch

from ebmclassifier.latent.categorical.simplex import Simplex
from ebmclassifier.latent.methods import (
    GRADIENT_ALIASES,
    GRADIENTS,
    batch_polytope_latent,
    polytope_latent,
    polytope_latent_eval,
)
from ebmclassifier.latent.polytope import Polytope, draw_rows
from ebmclassifier.latent.score_function import RunningMeanBaseline
from ebmclassifier.latent.trees import tree_map, tree_marginals, tree_sparsemap
from ebmclassifier.latent.trees.latent import TREE_GRADIENTS, tree_latent, tree_latent_eval
from ebmclassifier.latent.trees.polytope import TreePolytope


class Hypercube(Polytope):
    """Independent binary parts, ``M = [0, 1]^d``: a third structure, written for this test."""

    def map(self, scores, sizes):
        return (scores > 0).to(scores.dtype)

    def marginals(self, scores, sizes):
        return torch.sigmoid(scores)

    def project(self, point, sizes):
        return point.clamp(0.0, 1.0)

    def sample(self, scores, sizes, generator=None):
        u = torch.rand(scores.shape, generator=generator, dtype=scores.dtype)
        return (u < torch.sigmoid(scores)).to(scores.dtype)


class PaddedHypercube(Hypercube):
    """The hypercube of the first ``sizes[i]`` parts of sample i; the other parts are padding."""

    def _mask(self, tensor, sizes):
        return (torch.arange(tensor.shape[-1]) < sizes[:, None]).to(tensor.dtype)

    def map(self, scores, sizes):
        return super().map(scores, sizes) * self._mask(scores, sizes)

    def marginals(self, scores, sizes):
        return super().marginals(scores, sizes) * self._mask(scores, sizes)

    def project(self, point, sizes):
        return super().project(point, sizes) * self._mask(point, sizes)

    def sample(self, scores, sizes, generator=None):
        return super().sample(scores, sizes, generator) * self._mask(scores, sizes)

    def restrict(self, tensor, sizes):
        return tensor * self._mask(tensor, sizes)


def _problem(seed=0, shape=(5, 4)):
    g = torch.Generator().manual_seed(seed)
    s, t = torch.randn(shape, generator=g, dtype=torch.float64), torch.randn(shape, generator=g)
    t = t.to(torch.float64)
    return s, t, lambda z: 0.5 * ((z - t) ** 2).sum(-1) + (z * t).sum(-1) ** 2


def _gamma(z, t):
    return (z - t) + 2 * (z * t).sum(-1, keepdim=True) * t


@pytest.mark.parametrize("method", ["ste", "spigot", "spigot_ce", "spigot_eg", "sfe"])
def test_each_method_on_a_new_polytope_follows_its_formula(method):
    s, t, loss_fn = _problem()
    eta, cube = 0.6, Hypercube()
    scores = s.clone().requires_grad_(True)
    z = polytope_latent(
        cube,
        scores,
        None,
        method,
        loss_fn,
        step_size=eta,
        inner_steps=2,
        generator=torch.Generator().manual_seed(1),
    )
    loss_fn(z).sum().backward()
    z = z.detach()
    z_hat, mu = (s > 0).double(), torch.sigmoid(s)
    if method == "ste":
        z1 = z_hat - eta * _gamma(z_hat, t)
        expected = z_hat - (z1 - eta * _gamma(z1, t))
    elif method in ("spigot", "spigot_ce"):
        start = z_hat if method == "spigot" else mu
        z1 = (start - eta * _gamma(start, t)).clamp(0, 1)
        expected = start - (z1 - eta * _gamma(z1, t)).clamp(0, 1)
    elif method == "spigot_eg":
        s1 = s - eta * _gamma(mu, t)
        expected = mu - torch.sigmoid(s1 - eta * _gamma(torch.sigmoid(s1), t))
    else:  # the score function: d log p(z) / ds = z - sigmoid(s)
        expected = loss_fn(z)[:, None] * (z - mu)
    torch.testing.assert_close(scores.grad, expected)


def test_the_score_function_hands_the_batch_sizes_to_the_oracles():
    s, t, loss_fn = _problem(seed=5)
    sizes = torch.tensor([4, 2, 3, 1, 4])
    scores = s.clone().requires_grad_(True)
    z = polytope_latent(
        PaddedHypercube(), scores, sizes, "sfe", loss_fn, generator=torch.Generator().manual_seed(6)
    )
    loss_fn(z).sum().backward()
    z, mask = z.detach(), PaddedHypercube()._mask(s, sizes)
    assert torch.equal(z * mask, z)  # drawn on each sample's own parts
    expected = loss_fn(z)[:, None] * (z - torch.sigmoid(s) * mask)  # d log p(z) / ds
    torch.testing.assert_close(scores.grad, expected)


def test_the_weighted_score_functions_baseline_follows_the_weighted_mean_of_the_losses():
    s, _, loss_fn = _problem(seed=8)
    w = torch.tensor([1.0, 0.0, 3.0, 0.0, 2.0], dtype=torch.float64)
    baseline = RunningMeanBaseline(momentum=1.0)  # one update: b = that batch's mean loss
    scores = s.clone().requires_grad_(True)
    g = torch.Generator().manual_seed(9)
    z = batch_polytope_latent(
        Hypercube(), scores, None, "sfe", loss_fn, w, baseline=baseline, generator=g
    )
    loss_fn(z).sum().backward()
    expected = (w * loss_fn(z.detach())).sum() / w.sum()  # sum_i w_i l_i / sum_i w_i
    torch.testing.assert_close(baseline.value, expected.to(baseline.value.dtype))


def test_relaxations_and_eval_use_the_oracles():
    s, *_ = _problem(seed=2)
    cube = Hypercube()
    torch.testing.assert_close(polytope_latent(cube, s, None, "marginals"), torch.sigmoid(s))
    torch.testing.assert_close(polytope_latent(cube, s, None, "sparsemap"), s.clamp(0, 1))
    torch.testing.assert_close(
        polytope_latent_eval(cube, s, None, "gumbel", 0.5), torch.sigmoid(s / 0.5)
    )
    assert torch.equal(polytope_latent_eval(cube, s, None, "spigot"), (s > 0).double())


def test_tree_polytope_oracles_are_the_tree_functions():
    g = torch.Generator().manual_seed(3)
    s = torch.randn(2, 5, 5, generator=g, dtype=torch.float64)
    lengths = torch.tensor([4, 2])
    for projective in (True, False):
        polytope = TreePolytope(projective)
        assert torch.equal(polytope.map(s, lengths), tree_map(s, lengths, projective))
        torch.testing.assert_close(
            polytope.marginals(s, lengths), tree_marginals(s, lengths, projective)
        )
        torch.testing.assert_close(
            polytope.project(s, lengths), tree_sparsemap(s, lengths, projective)
        )
        z = polytope.sample(s, lengths, torch.Generator().manual_seed(4))
        assert torch.equal(polytope.restrict(z, lengths), z)
        torch.testing.assert_close(z[:, :, 1:].sum(1)[1], torch.tensor([1.0, 1, 0, 0]).double())


def test_simplex_sample_of_non_finite_scores_does_not_raise():
    # multinomial refuses nan probabilities; such a row's loss is flagged as diverged anyway
    scores = torch.tensor([[float("nan"), 0.0, 1.0], [0.0, 50.0, 0.0]])
    z = Simplex().sample(scores, None, torch.Generator().manual_seed(0))
    torch.testing.assert_close(z.sum(-1), torch.ones(2))
    assert z[1, 1] == 1


def test_draw_rows_is_uniform_only_in_the_rows_that_are_not_finite():
    # a finite row draws with its own weights whatever the other rows hold; a row with a nan
    # draws each index with probability 1/3 (count ~ Binomial(300, 1/3): mean 100, sd 8.2)
    probs = torch.tensor([[0.0, 1.0, 0.0]] * 50 + [[float("nan"), 1.0, 1.0]] * 300)
    draws = draw_rows(probs, torch.Generator().manual_seed(0))[:, 0]
    assert torch.equal(draws[:50], torch.ones(50, dtype=torch.int64))
    assert (torch.bincount(draws[50:], minlength=3) > 60).all()


def test_polytopes_are_values_that_pickle():
    assert TreePolytope(False) == TreePolytope(False) != TreePolytope(True)
    assert pickle.loads(pickle.dumps(TreePolytope(False))) == TreePolytope(False)
    assert Simplex() == Simplex()


@pytest.mark.parametrize(
    "call",
    [
        lambda g: polytope_latent(Simplex(), torch.zeros(1, 3), None, g, lambda z: z.sum(-1)),
        lambda g: polytope_latent_eval(Simplex(), torch.zeros(1, 3), None, g),
        lambda g: tree_latent(torch.zeros(1, 3, 3), None, g, lambda z: z.sum((1, 2))),
        lambda g: tree_latent_eval(torch.zeros(1, 3, 3), None, g),
    ],
    ids=["polytope_latent", "polytope_latent_eval", "tree_latent", "tree_latent_eval"],
)
def test_one_check_of_the_method_name_lists_every_accepted_name(call):
    # regression: the check's list of names was a dead parameter (the aliases were accepted
    # but not listed), and the tree functions repeated the check with their own list
    accepted = (*GRADIENTS, *GRADIENT_ALIASES)
    for name in accepted:
        call(name)
    with pytest.raises(ValueError, match="gradient must be one of") as error:
        call("gumble")
    assert all(repr(name) in str(error.value) for name in accepted)
    assert set(TREE_GRADIENTS) | set(GRADIENTS) == set(accepted)
