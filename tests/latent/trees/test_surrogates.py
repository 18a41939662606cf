"""Tree surrogate gradients against their own formulas, computed independently by enumeration."""

import pytest
import torch

from ebmclassifier.latent.trees import arc_mask, tree_map
from ebmclassifier.latent.trees.latent import tree_latent, tree_latent_eval

from .test_enumeration import enumerated, pad_arcs
from .test_sparsemap import _slow_projection

N_PAD = 3
LENGTHS = torch.tensor([3, 2])
ETA = 0.7


def _scores(seed=0, batch=2):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, N_PAD + 1, N_PAD + 1, generator=g, dtype=torch.float64)


def _loss_terms(seed=1, batch=2):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, N_PAD + 1, N_PAD + 1)
    return torch.randn(shape, generator=g, dtype=torch.float64), torch.randn(
        shape, generator=g, dtype=torch.float64
    )


C, D = _loss_terms()


def loss_fn(z):
    """A nonlinear per-sample loss: l(z) = <C, z>^2 / 2 + <D, z>."""
    return 0.5 * (z * C).sum(dim=(1, 2)) ** 2 + (z * D).sum(dim=(1, 2))


def gamma(z):
    """Its gradient, by hand: (<C, z>) C + D, on the real arcs."""
    g = (z * C).sum(dim=(1, 2))[:, None, None] * C + D
    return g * arc_mask(LENGTHS, N_PAD)


def marg_enum(s, projective):
    """Marginals by enumeration, sentence by sentence (differentiable), padded."""
    out = []
    for b, n in enumerate(LENGTHS.tolist()):
        trees, tree_scores = enumerated(s[b], n, projective)
        probs = torch.softmax(tree_scores, 0)
        out.append(pad_arcs((probs[:, None, None] * trees).sum(0), N_PAD))
    return torch.stack(out)


def project_enum(point, projective):
    """SparseMAP by a slow projected-gradient solve over the enumerated trees."""
    out = []
    for b, n in enumerate(LENGTHS.tolist()):
        trees, _ = enumerated(point[b], n, projective)
        target = (point[b, : n + 1, : n + 1] * (trees.sum(0) > 0)).reshape(-1).numpy()
        mu = _slow_projection(trees.reshape(len(trees), -1).numpy(), target)
        out.append(pad_arcs(torch.as_tensor(mu).reshape(n + 1, n + 1), N_PAD))
    return torch.stack(out)


def surrogate_grad(gradient, projective, **kwargs):
    scores = _scores().requires_grad_(True)
    z = tree_latent(scores, LENGTHS, gradient, loss_fn, projective=projective, **kwargs)
    loss_fn(z).sum().backward()
    return scores.detach(), z.detach(), scores.grad


@pytest.mark.parametrize("projective", [True, False])
def test_ste_identity_is_eta_gamma_and_k_plain_steps(projective):
    s, z_hat, grad = surrogate_grad("ste", projective, step_size=ETA)
    assert torch.equal(z_hat, tree_map(s, LENGTHS, projective))
    torch.testing.assert_close(grad, ETA * gamma(z_hat))
    _, _, grad2 = surrogate_grad("ste", projective, step_size=ETA, inner_steps=2)
    z1 = z_hat - ETA * gamma(z_hat)
    torch.testing.assert_close(grad2, z_hat - (z1 - ETA * gamma(z1)))


@pytest.mark.parametrize("projective", [True, False])
def test_spigot_is_map_minus_projected_step(projective):
    s, z_hat, grad = surrogate_grad("spigot", projective, step_size=ETA)
    expected = z_hat - project_enum(z_hat - ETA * gamma(z_hat), projective)
    torch.testing.assert_close(grad, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("projective", [True, False])
def test_spigot_ce_starts_from_marginals(projective):
    s, _, grad = surrogate_grad("spigot_ce", projective, step_size=ETA)
    mu_0 = marg_enum(s, projective)
    expected = mu_0 - project_enum(mu_0 - ETA * gamma(mu_0), projective)
    torch.testing.assert_close(grad, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("projective", [True, False])
def test_spigot_eg_is_difference_of_marginals(projective):
    s, _, grad = surrogate_grad("spigot_eg", projective, step_size=ETA)
    mu_0 = marg_enum(s, projective)
    torch.testing.assert_close(grad, mu_0 - marg_enum(s - ETA * gamma(mu_0), projective))


@pytest.mark.parametrize("gradient", ["spigot_ce", "spigot_eg"])
def test_surrogates_needing_gamma_fn_say_so(gradient):
    scores = _scores().requires_grad_(True)
    z = tree_latent(scores, LENGTHS, gradient)
    with pytest.raises(ValueError, match="needs gamma_fn"):
        loss_fn(z).sum().backward()


@pytest.mark.parametrize("projective", [True, False])
def test_relaxations_forward_and_exact_gradient(projective):
    scores = _scores().requires_grad_(True)
    weights = torch.randn(scores.shape, generator=torch.Generator().manual_seed(3), dtype=C.dtype)
    for name in ("marginals", "softmax"):
        z = tree_latent(scores, LENGTHS, name, projective=projective)
        (grad,) = torch.autograd.grad((z * weights).sum(), scores)
        ref = marg_enum(scores, projective)
        (ref_grad,) = torch.autograd.grad((ref * weights).sum(), scores)
        torch.testing.assert_close(z, ref)
        torch.testing.assert_close(grad, ref_grad)
    z = tree_latent(scores, LENGTHS, "sparsemap", projective=projective)
    torch.testing.assert_close(
        z.detach(), project_enum(scores.detach(), projective), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("projective", [True, False])
def test_gumbel_straight_through_is_perturbed_map_with_perturbed_marginals_gradient(projective):
    tau = 0.5
    _, z, grad = surrogate_grad(
        "gumbel_st", projective, temperature=tau, generator=torch.Generator().manual_seed(4)
    )
    u = torch.rand(z.shape, generator=torch.Generator().manual_seed(4), dtype=z.dtype)
    perturbed = _scores() - torch.log(-torch.log(u))
    assert torch.equal(z, tree_map(perturbed, LENGTHS, projective))
    x = perturbed.clone().requires_grad_(True)
    (expected,) = torch.autograd.grad((marg_enum(x / tau, projective) * gamma(z)).sum(), x)
    torch.testing.assert_close(grad, expected)


class _FixedBaseline:
    def __init__(self, value):
        self.value = torch.tensor(value)
        self.seen = None

    def update(self, losses):
        self.seen = losses.clone()


@pytest.mark.parametrize("projective", [True, False])
def test_score_function_backward_formula_and_baseline_update(projective):
    baseline = _FixedBaseline(0.3)
    s, z, grad = surrogate_grad(
        "sfe", projective, baseline=baseline, generator=torch.Generator().manual_seed(5)
    )
    losses = loss_fn(z)
    expected = (losses - 0.3)[:, None, None] * (z - marg_enum(s, projective))
    torch.testing.assert_close(grad, expected)
    torch.testing.assert_close(baseline.seen, losses)


def test_score_function_is_unbiased_by_enumeration():
    n, n_samples = 3, 6000
    s = _scores(seed=6, batch=1)[:, : n + 1, : n + 1]
    weights = torch.randn(s.shape, generator=torch.Generator().manual_seed(7), dtype=s.dtype)

    def sample_loss(z):
        return torch.sin((z * weights).sum(dim=(1, 2)))

    # exact gradient of E_p[l(z)] by enumeration
    x = s.clone().requires_grad_(True)
    trees, tree_scores = enumerated(x[0], n, True)
    exact_value = (torch.softmax(tree_scores, 0) * sample_loss(trees)).sum()
    (exact,) = torch.autograd.grad(exact_value, x)
    scores = s.expand(n_samples, -1, -1).clone().requires_grad_(True)
    z = tree_latent(scores, None, "sfe", sample_loss, generator=torch.Generator().manual_seed(8))
    (per_sample,) = torch.autograd.grad(z.sum(), scores)  # grad_z unused by the estimator
    estimate = per_sample.mean(0)
    stderr = per_sample.std(0) / n_samples**0.5
    assert torch.all((estimate - exact[0]).abs() <= 5 * stderr + 1e-6)


def test_eval_latents_are_deterministic_points():
    s = _scores()
    torch.testing.assert_close(tree_latent_eval(s, LENGTHS, "softmax"), marg_enum(s, True))
    assert torch.equal(tree_latent_eval(s, LENGTHS, "spigot", False), tree_map(s, LENGTHS, False))
    with pytest.raises(ValueError, match="gradient must be one of"):
        tree_latent_eval(s, LENGTHS, "gumble")


def _count_checks(monkeypatch):
    """Count the calls of check_arc_scores, wherever a tree module imported it."""
    import importlib

    from ebmclassifier.latent.trees import _arcs

    calls = []

    def counting(scores, lengths):
        calls.append(1)
        return _arcs.check_arc_scores(scores, lengths)

    for name in ("latent", "inference", "sparsemap", "projective", "nonprojective"):
        module = importlib.import_module(f"ebmclassifier.latent.trees.{name}")
        monkeypatch.setattr(module, "check_arc_scores", counting)
    return calls


@pytest.mark.parametrize("gradient", ["spigot_ce", "sfe", "sparsemap", "gumbel_st"])
def test_tree_inputs_are_checked_once_per_call(monkeypatch, gradient):
    calls = _count_checks(monkeypatch)
    scores = _scores().requires_grad_(True)
    z = tree_latent(scores, LENGTHS, gradient, loss_fn, projective=False, inner_steps=2)
    loss_fn(z).sum().backward()
    assert len(calls) == 1


def test_the_estimator_checks_token_ids_not_arc_scores(monkeypatch):
    from ebmclassifier import LatentStructureClassifier
    from ebmclassifier.datasets import make_latent_trees

    X, y, _ = make_latent_trees(16, max_length=4, random_state=0)
    calls = _count_checks(monkeypatch)
    clf = LatentStructureClassifier(structure="dependency_tree", gradient="spigot", max_epochs=1)
    clf.fit(X, y).predict_latent(X)
    assert not calls
