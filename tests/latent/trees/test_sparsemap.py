"""SparseMAP over trees: solves its QP (KKT, slow enumerated solve), exact backward, masking."""

import numpy as np
import pytest
import torch

from ebmclassifier.latent.trees import arc_mask, tree_map
from ebmclassifier.latent.trees.sparsemap import sparsemap_active_set, tree_sparsemap

from .test_enumeration import enumerated, pad_arcs

N_PAD = 4
LENGTHS = torch.tensor([4, 3, 2, 1, 4])


def random_scores(seed, batch=None, n=N_PAD, scale=1.0):
    batch = len(LENGTHS) if batch is None else batch
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(batch, n + 1, n + 1, generator=g, dtype=torch.float64)


def _project_simplex(v):
    """Euclidean projection onto the simplex by sorting (Held, Wolfe & Crowder 1974)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, len(v) + 1)
    rho = np.flatnonzero(u - css / k > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


def _slow_projection(vertices, target, most=20000, gap=1e-14):
    """min_p ||V^T p - s||^2 / 2 over the simplex by accelerated projected gradient (FISTA),
    until the Frank-Wolfe gap max_z <s - mu, z - mu> over the vertices z certifies
    ||mu - mu*|| <= sqrt(2 gap) (the objective is 1-strongly convex in mu = V^T p)."""
    lipschitz = np.linalg.norm(vertices, 2) ** 2
    p = np.full(len(vertices), 1.0 / len(vertices))
    y, t = p.copy(), 1.0
    for step in range(most):
        p_next = _project_simplex(y - vertices @ (vertices.T @ y - target) / lipschitz)
        t_next = (1 + np.sqrt(1 + 4 * t * t)) / 2
        y = p_next + (t - 1) / t_next * (p_next - p)
        p, t = p_next, t_next
        if step % 25 == 24:
            mu = vertices.T @ p
            if ((vertices - mu) @ (target - mu)).max() <= gap:
                return mu
    raise AssertionError(f"the reference projection did not converge in {most} steps")


@pytest.mark.parametrize("projective", [True, False])
@pytest.mark.parametrize("scale", [0.3, 1.0, 3.0])
def test_sparsemap_satisfies_kkt_over_all_enumerated_trees(projective, scale):
    scores = random_scores(0, scale=scale)
    mu, vertices, weights = sparsemap_active_set(scores, LENGTHS, projective)
    for b, n in enumerate(LENGTHS.tolist()):
        trees, _ = enumerated(scores[b], n, projective)
        padded = torch.stack([pad_arcs(z, N_PAD) for z in trees]).reshape(len(trees), -1)
        active = torch.as_tensor(vertices[b])
        # primal feasibility: a convex combination of valid trees of the family
        assert np.all(weights[b] >= 0) and np.isclose(weights[b].sum(), 1.0)
        assert all(bool(((padded - z).abs().sum(1) == 0).any()) for z in active)
        torch.testing.assert_close(mu[b].reshape(-1), torch.as_tensor(weights[b]) @ active)
        # optimality of a projection: <z - mu, s - mu> <= 0 for every vertex z of the polytope
        s = scores[b].clone()
        s[n + 1 :, :] = 0
        s[:, n + 1 :] = 0
        s[:, 0] = 0
        s.fill_diagonal_(0)
        residual = (s - mu[b]).reshape(-1)
        assert torch.all((padded - mu[b].reshape(-1)) @ residual <= 1e-9)
        # complementary slackness: the active trees are the tight ones
        torch.testing.assert_close(
            (active - mu[b].reshape(-1)) @ residual, torch.zeros(len(active), dtype=s.dtype)
        )


@pytest.mark.parametrize("projective", [True, False])
def test_sparsemap_matches_slow_projected_gradient_over_enumerated_trees(projective):
    scores = random_scores(1, batch=2, n=4)
    lengths = torch.tensor([4, 3])
    mu = tree_sparsemap(scores, lengths, projective)
    for b, n in enumerate(lengths.tolist()):
        trees, _ = enumerated(scores[b], n, projective)
        flat = trees.reshape(len(trees), -1).numpy()
        target = (scores[b, : n + 1, : n + 1] * (trees.sum(0) > 0)).reshape(-1).numpy()
        slow = _slow_projection(flat, target).reshape(n + 1, n + 1)
        np.testing.assert_allclose(mu[b, : n + 1, : n + 1].numpy(), slow, atol=1e-5)


def test_sparsemap_of_a_dominant_tree_is_that_tree():
    scores = random_scores(2)
    arcs = tree_map(scores, LENGTHS)
    torch.testing.assert_close(tree_sparsemap(scores + 50 * arcs, LENGTHS), arcs)


@pytest.mark.parametrize("projective", [True, False])
def test_sparsemap_backward_gradcheck(projective):
    scores = random_scores(3, batch=3, n=4).requires_grad_(True)
    lengths = torch.tensor([4, 2, 3])
    assert torch.autograd.gradcheck(lambda s: tree_sparsemap(s, lengths, projective), scores)


@pytest.mark.parametrize("projective", [True, False])
def test_sparsemap_padded_batch_equals_unpadded_sentences(projective):
    scores = random_scores(4).requires_grad_(True)
    mu = tree_sparsemap(scores, LENGTHS, projective)
    g = torch.randn(mu.shape, generator=torch.Generator().manual_seed(0), dtype=mu.dtype)
    (grad,) = torch.autograd.grad((mu * g).sum(), scores)
    for b, n in enumerate(LENGTHS.tolist()):
        single = scores[b : b + 1, : n + 1, : n + 1].detach().requires_grad_(True)
        mu_b = tree_sparsemap(single, None, projective)
        (grad_b,) = torch.autograd.grad((mu_b * g[b : b + 1, : n + 1, : n + 1]).sum(), single)
        torch.testing.assert_close(mu[b], pad_arcs(mu_b[0].detach(), N_PAD))
        torch.testing.assert_close(grad[b], pad_arcs(grad_b[0], N_PAD))


def test_sparsemap_rejects_bad_max_iter_and_warns_when_not_converged():
    with pytest.raises(ValueError, match="max_iter"):
        tree_sparsemap(torch.zeros(1, 3, 3), max_iter=0)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        sparsemap_active_set(random_scores(5, scale=0.1), LENGTHS, max_iter=1)


@pytest.mark.parametrize("projective", [True, False])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_sparsemap_of_a_non_finite_sentence_is_nan_and_leaves_the_others(projective, bad):
    # regression: the KKT solve of a nan sentence raised numpy's "zero-size array" error
    scores = random_scores(6)
    mu = tree_sparsemap(scores, LENGTHS, projective)
    broken = scores.clone()
    broken[1, 0, 2] = bad  # a real arc of sentence 1
    broken[3, 3, 4] = bad  # padding of sentence 3 (one word): ignored
    got = tree_sparsemap(broken, LENGTHS, projective)
    real = arc_mask(LENGTHS, N_PAD)
    assert torch.isnan(got[1][real[1]]).all() and (got[1][~real[1]] == 0).all()
    keep = torch.tensor([0, 2, 3, 4])
    torch.testing.assert_close(got[keep], mu[keep], rtol=0, atol=0)


def test_sparsemap_builds_the_jacobian_only_when_a_backward_pass_can_come(monkeypatch):
    from ebmclassifier.latent.trees import sparsemap
    from ebmclassifier.latent.trees.polytope import TreePolytope

    calls = []
    factors = sparsemap._padded_jacobian_factors
    monkeypatch.setattr(
        sparsemap, "_padded_jacobian_factors", lambda *a: calls.append(1) or factors(*a)
    )
    scores = random_scores(7)
    expected = tree_sparsemap(scores, LENGTHS)  # scores without grad: the value alone
    assert not calls
    with torch.no_grad():  # no graph either
        got = TreePolytope().project(scores.clone().requires_grad_(True), LENGTHS)
    assert not calls and torch.equal(got, expected)
    mu = TreePolytope().project(scores.clone().requires_grad_(True), LENGTHS)
    assert len(calls) == 1 and torch.equal(mu.detach(), expected) and mu.requires_grad
