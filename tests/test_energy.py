"""The functional core against independent computations."""

import pytest
import torch
from torch.func import functional_call

from ebmclassifier.energy import (
    energy,
    energy_grad_norm,
    energy_grad_norm_finite_difference,
    nonsmooth_activations,
    ood_score,
)
from ebmclassifier.nn import MLP, ConvNet


def _tiny_net(dtype=torch.float64):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4)).to(
        dtype
    )


def test_energy_is_negative_logsumexp():
    logits = torch.tensor([[0.0, 1.0, 2.0], [-1.0, -1.0, 5.0]], dtype=torch.float64)
    expected = -torch.log(torch.exp(logits).sum(dim=1))
    torch.testing.assert_close(energy(logits), expected)


def test_grad_norm_matches_per_sample_loop():
    net = _tiny_net()
    x = torch.randn(6, 3, dtype=torch.float64)
    norms, energies, logits = energy_grad_norm(net, x)
    for i in range(len(x)):
        xi = x[i : i + 1].clone().requires_grad_(True)
        (g,) = torch.autograd.grad(energy(net(xi)).sum(), xi)
        torch.testing.assert_close(norms[i], g.norm())
    torch.testing.assert_close(logits, net(x))
    torch.testing.assert_close(energies, energy(net(x)))


def test_grad_norm_matches_central_finite_differences_in_x():
    net = _tiny_net()
    x = torch.randn(4, 3, dtype=torch.float64)
    norms, _, _ = energy_grad_norm(net, x)
    h = 1e-6
    grads = torch.zeros_like(x)
    with torch.no_grad():
        for j in range(3):
            e = torch.zeros_like(x)
            e[:, j] = h
            grads[:, j] = (energy(net(x + e)) - energy(net(x - e))) / (2 * h)
    torch.testing.assert_close(norms, grads.norm(dim=1), rtol=1e-6, atol=1e-8)


def test_grad_norm_parameter_gradient_passes_gradcheck():
    net = _tiny_net()
    x = torch.randn(5, 3, dtype=torch.float64)
    names = [n for n, _ in net.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in net.parameters())

    def penalty(*flat):
        module = lambda inp: functional_call(net, dict(zip(names, flat, strict=True)), (inp,))  # noqa: E731
        norms, _, _ = energy_grad_norm(module, x, create_graph=True)
        return norms.mean()

    assert torch.autograd.gradcheck(penalty, params)


def test_grad_norm_leaves_input_untouched():
    net = _tiny_net()
    x = torch.randn(2, 3, dtype=torch.float64)
    energy_grad_norm(net, x)
    assert not x.requires_grad and x.grad is None


def _param_grad(net, loss):
    grads = torch.autograd.grad(loss, list(net.parameters()))
    return torch.cat([g.flatten() for g in grads])


@pytest.mark.parametrize(
    "net, shape",
    [(lambda: MLP(64, 10), (32, 64)), (lambda: ConvNet((1, 8, 8), 10), (32, 1, 8, 8))],
    ids=["mlp", "convnet"],
)
def test_finite_difference_gradient_agrees_with_exact(net, shape):
    torch.manual_seed(0)
    net = net()
    x = torch.randn(*shape)
    exact, e1, l1 = energy_grad_norm(net, x, create_graph=True)
    step = 0.01 * float(x.flatten(1).norm(dim=1).mean())
    approx, e2, l2 = energy_grad_norm_finite_difference(net, x, step)
    # Same values ...
    torch.testing.assert_close(approx, exact)
    torch.testing.assert_close(l1, l2)
    # ... and parameter gradients pointing the same way.
    g_exact = _param_grad(net, exact.mean())
    g_fd = _param_grad(net, approx.mean())
    cosine = torch.nn.functional.cosine_similarity(g_exact, g_fd, dim=0)
    assert cosine > 0.99
    ratio = g_fd.norm() / g_exact.norm()
    assert 0.9 < ratio < 1.1


def test_finite_difference_converges_to_exact_for_small_steps():
    # A smooth (tanh) net in float64: the O(h) error vanishes at a tiny step.
    net = _tiny_net()
    x = torch.randn(5, 3, dtype=torch.float64)
    exact, _, _ = energy_grad_norm(net, x, create_graph=True)
    approx, _, _ = energy_grad_norm_finite_difference(net, x, 1e-6)
    torch.testing.assert_close(
        _param_grad(net, approx.mean()), _param_grad(net, exact.mean()), rtol=1e-4, atol=1e-6
    )


def _swap_silu(module: torch.nn.Module, factory) -> torch.nn.Module:
    for name, child in module.named_children():
        if isinstance(child, torch.nn.SiLU):
            setattr(module, name, factory())
        else:
            _swap_silu(child, factory)
    return module


@pytest.mark.parametrize(
    "activation, kinked",
    [
        (torch.nn.ReLU, True),
        (lambda: torch.nn.LeakyReLU(0.2), True),
        (torch.nn.SiLU, False),
        (torch.nn.GELU, False),
        (torch.nn.Softplus, False),
        (torch.nn.Tanh, False),
    ],
    ids=["relu", "leaky_relu", "silu", "gelu", "softplus", "tanh"],
)
def test_finite_difference_is_inaccurate_exactly_where_activations_have_kinks(activation, kinked):
    # issue #14: across a kink the difference is not the derivative; measured against the
    # exact parameter gradient (double backprop), on the default MLP at the default step.
    torch.manual_seed(0)
    net = _swap_silu(MLP(64, 10), activation)
    x = torch.randn(64, 64)
    step = 0.01 * float(x.var(dim=0).sum().sqrt())  # losses.fd_step_size's rule
    exact, _, _ = energy_grad_norm(net, x, create_graph=True)
    approx, _, _ = energy_grad_norm_finite_difference(net, x, step)
    g_exact, g_fd = _param_grad(net, exact.mean()), _param_grad(net, approx.mean())
    cosine = float(torch.nn.functional.cosine_similarity(g_exact, g_fd, dim=0))
    assert (cosine < 0.9) if kinked else (cosine > 0.99), cosine
    assert bool(nonsmooth_activations(net)) is kinked


def test_nonsmooth_activations_by_module_type():
    nn = torch.nn
    net = nn.Sequential(
        nn.Linear(2, 4), nn.ReLU6(), nn.PReLU(), nn.ELU(alpha=0.5), nn.Hardswish(), nn.ReLU6()
    )
    assert nonsmooth_activations(net) == ["ReLU6", "PReLU", "ELU", "Hardswish"]
    smooth = nn.Sequential(nn.ELU(), nn.CELU(0.5), nn.Mish(), nn.LeakyReLU(1.0), nn.MaxPool1d(2))
    assert nonsmooth_activations(smooth) == []  # ELU with alpha=1 is C1; see the docstring


def test_ood_scores():
    net = _tiny_net()
    x = torch.randn(7, 3, dtype=torch.float64)
    logits = net(x)
    torch.testing.assert_close(ood_score(net, x, "energy"), energy(logits).detach())
    torch.testing.assert_close(
        ood_score(net, x, "max_softmax"), -torch.softmax(logits, 1).max(1).values.detach()
    )
    torch.testing.assert_close(ood_score(net, x, "approx_mass"), energy_grad_norm(net, x)[0])
    with pytest.raises(ValueError, match="Unknown OOD method 'nope'"):
        ood_score(net, x, "nope")


def test_approx_mass_works_under_no_grad():
    net = _tiny_net()
    with torch.no_grad():
        scores = ood_score(net, torch.randn(3, 3, dtype=torch.float64), "approx_mass")
    assert scores.shape == (3,) and torch.isfinite(scores).all()
