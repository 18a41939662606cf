"""Surrogate gradients of a categorical latent, each against its own formula computed here."""

import itertools

import numpy as np
import pytest
import torch
from entmax import sparsemax

from ebmclassifier.latent import categorical_latent, categorical_latent_eval, project_simplex
from ebmclassifier.latent.categorical.latent import (
    gumbel_softmax,
    gumbel_straight_through,
    score_function_sample,
    softmax_relaxation,
    sparsemax_relaxation,
)
from ebmclassifier.latent.categorical.simplex import SimplexProjection
from ebmclassifier.latent.relaxations import sample_gumbel
from ebmclassifier.latent.score_function import RunningMeanBaseline

# ---------------------------------------------------------------- independent references (numpy)


def _reference_projection(v):
    """Brute force: the closest of the KKT candidates over every non-empty support."""
    best, best_dist = None, np.inf
    K = len(v)
    for size in range(1, K + 1):
        for support in itertools.combinations(range(K), size):
            p = np.zeros(K)
            idx = list(support)
            p[idx] = v[idx] - (v[idx].sum() - 1.0) / size
            if np.all(p >= -1e-12):
                dist = np.sum((p - v) ** 2)
                if dist < best_dist:
                    best, best_dist = p, dist
    return best


def _reference_softmax(s):
    e = np.exp(s - s.max())
    return e / e.sum()


def _one_hot(k, K):
    e = np.zeros(K)
    e[k] = 1.0
    return e


# A per-sample downstream loss with a known gradient: l_i(z) = 0.5 a ||z - t_i||^2 + <c_i, z>,
# gamma_i(z) = a (z - t_i) + c_i. Non-linear in z, so gamma differs between points.
A = 1.7


def _quadratic_problem(n=4, K=4, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((n, K))
    t = rng.standard_normal((n, K))
    c = rng.standard_normal((n, K))
    return s, t, c


def _gamma(z, t, c):
    return A * (z - t) + c


def _torch_loss_fn(t, c):
    t, c = torch.as_tensor(t), torch.as_tensor(c)
    return lambda z: 0.5 * A * ((z - t) ** 2).sum(-1) + (c * z).sum(-1)


def _reference_surrogate(method, s, t, c, eta, k):
    """dL/ds of each method, row by row, from the formulas of the issue."""
    out = []
    for s_i, t_i, c_i in zip(s, t, c, strict=True):
        K = len(s_i)
        z_hat = _one_hot(int(np.argmax(s_i)), K)
        mu_0 = _reference_softmax(s_i)
        if method == "ste":
            z = z_hat
            for _ in range(k):
                z = z - eta * _gamma(z, t_i, c_i)
            out.append(z_hat - z)
        elif method == "spigot":
            z = z_hat
            for _ in range(k):
                z = _reference_projection(z - eta * _gamma(z, t_i, c_i))
            out.append(z_hat - z)
        elif method == "spigot_ce":
            z = mu_0
            for _ in range(k):
                z = _reference_projection(z - eta * _gamma(z, t_i, c_i))
            out.append(mu_0 - z)
        elif method == "spigot_eg":
            z = mu_0
            for _ in range(k):
                z = z * np.exp(-eta * _gamma(z, t_i, c_i))
                z = z / z.sum()
            out.append(mu_0 - z)
    return np.array(out)


# ------------------------------------------------------------------------ simplex projection


@pytest.mark.parametrize("K", [1, 2, 3, 5])
@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0])
def test_projection_matches_brute_force(K, scale):
    rng = np.random.default_rng(K)
    v = scale * rng.standard_normal((20, K))
    got = project_simplex(torch.as_tensor(v)).numpy()
    expected = np.array([_reference_projection(row) for row in v])
    np.testing.assert_allclose(got, expected, atol=1e-10)


def test_projection_matches_entmax_sparsemax_and_batches():
    v = torch.randn(2, 3, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = project_simplex(v)
    torch.testing.assert_close(got, sparsemax(v, dim=-1))
    torch.testing.assert_close(got[1, 2], project_simplex(v[1, 2]))


def test_projection_backward_matches_entmax_sparsemax():
    v = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    upstream = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    (ours,) = torch.autograd.grad(project_simplex(v.requires_grad_(True)), v, upstream)
    (theirs,) = torch.autograd.grad(sparsemax(v, dim=-1), v, upstream)
    torch.testing.assert_close(ours, theirs)


def test_projection_of_nan_or_huge_rows_does_not_index_out_of_bounds():
    # regression: a row whose support rounded to zero gathered index -1 (a RuntimeError that
    # LatentStructureClassifier surfaced instead of a DivergenceError)
    v = torch.tensor([[float("nan"), 0.0, 1.0], [3e38, -3e38, 0.0], [0.5, 0.2, -1.0]])
    p = project_simplex(v)
    assert torch.isnan(p[0]).all()
    torch.testing.assert_close(p[2], torch.tensor([0.65, 0.35, 0.0]))
    torch.testing.assert_close(project_simplex(v[2:]), p[2:])


def test_projection_keeps_simplex_points_and_maps_vertices_to_themselves():
    p = torch.tensor([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(project_simplex(p), p)


def test_projection_gradcheck():
    v = torch.randn(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    v.requires_grad_(True)
    assert torch.autograd.gradcheck(SimplexProjection.apply, (v,))


def test_projection_rejects_scalars():
    with pytest.raises(ValueError, match="at least 1 dimension"):
        project_simplex(torch.tensor(1.0))


# ---------------------------------------------------------------- argmax-forward surrogates


@pytest.mark.parametrize("method", ["ste", "spigot", "spigot_ce", "spigot_eg"])
@pytest.mark.parametrize("eta", [0.1, 1.0])
@pytest.mark.parametrize("k", [1, 3])
def test_surrogate_matches_formula(method, eta, k):
    s, t, c = _quadratic_problem()
    scores = torch.tensor(s, requires_grad=True)
    loss_fn = _torch_loss_fn(t, c)
    z = categorical_latent(scores, method, loss_fn, step_size=eta, inner_steps=k)
    np.testing.assert_array_equal(z.detach().numpy(), np.eye(s.shape[1])[np.argmax(s, axis=1)])
    # gamma at z_hat arrives through the chain rule: the loss of the sum of per-sample losses.
    loss_fn(z).sum().backward()
    expected = _reference_surrogate(method, s, t, c, eta, k)
    np.testing.assert_allclose(scores.grad.numpy(), expected, atol=1e-10)


def test_ste_with_one_step_is_the_identity_straight_through():
    s, t, c = _quadratic_problem(seed=3)
    scores = torch.tensor(s, requires_grad=True)
    z = categorical_latent(scores, "ste", step_size=1.0)  # needs no loss_fn for k = 1
    weights = torch.as_tensor(c)
    (z * weights).sum().backward()
    torch.testing.assert_close(scores.grad, weights)


def test_spigot_ce_differs_from_spigot():
    """CE evaluates gamma at softmax(s), not at the argmax: the two must not coincide."""
    s, t, c = _quadratic_problem(seed=4)
    grads = []
    for method in ("spigot", "spigot_ce"):
        scores = torch.tensor(s, requires_grad=True)
        loss_fn = _torch_loss_fn(t, c)
        loss_fn(categorical_latent(scores, method, loss_fn)).sum().backward()
        grads.append(scores.grad)
    assert not torch.allclose(grads[0], grads[1])


@pytest.mark.parametrize("method,k", [("spigot_ce", 1), ("spigot_eg", 1), ("spigot", 2)])
def test_surrogates_needing_gamma_fn_say_so(method, k):
    scores = torch.randn(2, 3, requires_grad=True)
    z = categorical_latent(scores, method, None, inner_steps=k)
    with pytest.raises(ValueError, match="needs gamma_fn"):
        z.sum().backward()


def test_gamma_fn_leaves_decoder_parameters_alone():
    """The extra decoder calls of CE/EG add nothing to the decoder's gradient."""
    torch.manual_seed(0)
    x = torch.randn(5, 3)
    y = torch.randint(0, 2, (5,))
    decoder = torch.nn.Bilinear(4, 3, 2)
    scores = torch.randn(5, 4, requires_grad=True)

    def loss_fn(z):
        return torch.nn.functional.cross_entropy(decoder(z, x), y, reduction="none")

    loss_fn(categorical_latent(scores, "spigot_eg", loss_fn, inner_steps=3)).sum().backward()
    with_surrogate = [p.grad.clone() for p in decoder.parameters()]
    decoder.zero_grad()
    loss_fn(categorical_latent_eval(scores.detach(), "spigot_eg")).sum().backward()
    for got, expected in zip(with_surrogate, decoder.parameters(), strict=True):
        torch.testing.assert_close(got, expected.grad)
    assert scores.grad.abs().sum() > 0


def test_unknown_gradient_is_rejected():
    with pytest.raises(ValueError, match="'spigot_xx'"):
        categorical_latent(torch.zeros(1, 2), "spigot_xx")


# ----------------------------------------------------------------------------- relaxations


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_relaxations_gradcheck():
    scores = torch.randn(4, 5, dtype=torch.float64, generator=_gen(0), requires_grad=True)
    noise = sample_gumbel(scores.detach(), _gen(1))
    assert torch.autograd.gradcheck(softmax_relaxation, (scores,))
    assert torch.autograd.gradcheck(sparsemax_relaxation, (scores,))
    assert torch.autograd.gradcheck(lambda s: gumbel_softmax(s, noise, 0.5), (scores,))


def test_relaxation_values():
    scores = torch.randn(4, 5, dtype=torch.float64, generator=_gen(2))
    noise = sample_gumbel(scores, _gen(3))
    expected = np.array([_reference_softmax(r) for r in ((scores + noise) / 0.7).numpy()])
    np.testing.assert_allclose(gumbel_softmax(scores, noise, 0.7).numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(
        sparsemax_relaxation(scores).numpy(),
        np.array([_reference_projection(r) for r in scores.numpy()]),
        atol=1e-12,
    )


def test_gumbel_noise_is_standard_gumbel():
    g = sample_gumbel(torch.empty(200_000, dtype=torch.float64), _gen(4))
    # Mean is the Euler-Mascheroni constant, variance pi^2 / 6.
    assert abs(g.mean().item() - 0.5772156649) < 0.01
    assert abs(g.var().item() - np.pi**2 / 6) < 0.03


@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0])
def test_gumbel_straight_through_uses_full_softmax_jacobian(tau):
    scores = torch.randn(3, 4, dtype=torch.float64, generator=_gen(5), requires_grad=True)
    noise = sample_gumbel(scores.detach(), _gen(6))
    upstream = torch.randn(3, 4, dtype=torch.float64, generator=_gen(7))
    z = gumbel_straight_through(scores, noise, tau)
    np.testing.assert_array_equal(
        z.detach().numpy(), np.eye(4)[np.argmax((scores + noise).detach().numpy(), axis=1)]
    )
    (z * upstream).sum().backward()
    for i in range(3):
        jac = torch.autograd.functional.jacobian(
            lambda s, i=i: torch.softmax((s + noise[i]) / tau, dim=-1), scores[i].detach()
        )
        torch.testing.assert_close(scores.grad[i], jac.T @ upstream[i])
        # A diagonal-only Jacobian would give a different answer.
        assert not torch.allclose(scores.grad[i], torch.diagonal(jac) * upstream[i])


def test_eval_latent_is_deterministic_relaxation_or_argmax():
    scores = torch.randn(3, 4, generator=_gen(8))
    torch.testing.assert_close(categorical_latent_eval(scores, "softmax"), scores.softmax(-1))
    torch.testing.assert_close(
        categorical_latent_eval(scores, "gumbel", temperature=0.5), (scores / 0.5).softmax(-1)
    )
    for method in ("ste", "spigot_ce", "gumbel_st", "sfe"):
        expected = torch.eye(4)[scores.argmax(-1)]
        torch.testing.assert_close(categorical_latent_eval(scores, method), expected)


# --------------------------------------------------------------------- score function (SFE)


def _sfe_problem():
    s = np.array([0.3, -0.5, 1.0])
    costs = np.array([2.0, -1.0, 0.5])  # l(e_k) = costs[k], the per-sample loss of category k
    p = _reference_softmax(s)
    exact = p * (costs - p @ costs)  # d/ds sum_k softmax(s)_k costs_k
    return s, costs, exact


@pytest.mark.parametrize("baseline_value", [0.0, 3.0])
def test_sfe_is_unbiased_for_the_gradient_of_the_expected_loss(baseline_value):
    s, costs, exact = _sfe_problem()
    n = 100_000
    scores = torch.tensor(np.tile(s, (n, 1)), requires_grad=True)
    baseline = RunningMeanBaseline()
    baseline.value.fill_(baseline_value)
    baseline.n_updates.fill_(1)
    cost_t = torch.as_tensor(costs)

    def loss_fn(z):
        return z @ cost_t

    z = score_function_sample(scores, loss_fn, baseline, _gen(9))
    loss_fn(z).sum().backward()
    per_sample = scores.grad.numpy()
    mc_mean = per_sample.mean(axis=0)
    std_err = per_sample.std(axis=0) / np.sqrt(n)
    assert np.all(std_err < 0.05 * np.abs(exact).max())  # the test can tell signs apart
    np.testing.assert_array_less(np.abs(mc_mean - exact), 4 * std_err + 1e-12)
    # Descending the estimate lowers the expected loss: the sign is that of the loss.
    p_new = _reference_softmax(s - 0.5 * mc_mean)
    assert p_new @ costs < _reference_softmax(s) @ costs


def test_sfe_samples_follow_softmax_and_baseline_is_updated_after_use():
    s, costs, _ = _sfe_problem()
    scores = torch.tensor(np.tile(s, (50_000, 1)), requires_grad=True)
    baseline = RunningMeanBaseline(momentum=0.5)
    cost_t = torch.as_tensor(costs)
    z = score_function_sample(scores, lambda z: z @ cost_t, baseline, _gen(10))
    np.testing.assert_allclose(z.detach().mean(0).numpy(), _reference_softmax(s), atol=0.01)
    (z @ cost_t).sum().backward()
    # The first batch had baseline 0: the gradient is plain REINFORCE ...
    expected = (z @ cost_t).unsqueeze(-1) * (z - torch.softmax(scores.detach(), -1))
    torch.testing.assert_close(scores.grad, expected)
    # ... and then the baseline is set to that batch's mean loss; later updates average.
    first_mean = (z @ cost_t).mean().item()
    assert baseline.value.item() == pytest.approx(first_mean)
    baseline.update(torch.tensor([1.0]))
    assert baseline.value.item() == pytest.approx(0.5 * first_mean + 0.5)


def test_sfe_samples_are_reproducible_with_a_generator():
    scores = torch.randn(20, 4, generator=_gen(11))
    draw = [score_function_sample(scores, lambda z: z.sum(-1), None, _gen(12)) for _ in range(2)]
    torch.testing.assert_close(draw[0], draw[1])


def test_baseline_momentum_is_validated():
    with pytest.raises(ValueError, match="momentum"):
        RunningMeanBaseline(momentum=0.0)


def test_baseline_leaves_out_a_batch_whose_weights_are_all_zero():
    # regression: such a batch's weighted mean is 0, which dragged the baseline towards 0
    baseline = RunningMeanBaseline(momentum=0.5)
    nothing = torch.zeros(2)
    baseline.update(torch.tensor([7.0, 9.0]), nothing)  # not the first batch either
    assert baseline.value.item() == 0.0 and int(baseline.n_updates) == 0
    baseline.update(torch.tensor([2.0, 4.0]), torch.tensor([1.0, 3.0]))  # sets b = 3.5
    baseline.update(torch.tensor([7.0, 9.0]), nothing)
    assert baseline.value.item() == 3.5 and int(baseline.n_updates) == 1
    baseline.update(torch.tensor([1.5]), torch.tensor([2.0]))
    assert baseline.value.item() == 0.5 * 3.5 + 0.5 * 1.5 and int(baseline.n_updates) == 2


@pytest.mark.parametrize("weighted", [False, True])
def test_baseline_update_does_not_read_the_device(weighted):
    # a host read (int(n_updates)) synchronised every score-function backward pass; meta
    # tensors have no values to read, so any such read raises
    baseline = RunningMeanBaseline().to("meta")
    weights = torch.ones(3, device="meta") if weighted else None
    for _ in range(2):
        baseline.update(torch.ones(3, device="meta"), weights)
