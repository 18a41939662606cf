"""The objectives of losses.py against hand computations and per-sample autograd loops."""

import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ebmclassifier import losses
from ebmclassifier._utils import statistics
from ebmclassifier.losses import fd_step_size, jem_loss, ngebm_loss


def _net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4)
    ).double()


def _batch(n=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g, dtype=torch.float64), torch.randint(4, (n,), generator=g)


def _energy(net, x):
    return -torch.logsumexp(net(x), dim=1)


def _norms_by_loop(net, x):
    """||dE/dx_i|| one sample at a time, differentiable in the parameters."""
    norms = []
    for xi in x:
        xi = xi[None].clone().requires_grad_(True)
        (g,) = torch.autograd.grad(_energy(net, xi).sum(), xi, create_graph=True)
        norms.append(g.flatten().norm())
    return torch.stack(norms)


def _param_grad(net, loss):
    grads = torch.autograd.grad(loss, list(net.parameters()), retain_graph=True)
    return torch.cat([g.flatten() for g in grads])


@pytest.mark.parametrize("beta, gamma, var_weight", [(0.5, None, 0.0), (0.3, 2.0, 0.7)])
def test_ngebm_loss_exact_is_the_equation_with_a_per_sample_loop(beta, gamma, var_weight):
    net, (x, y) = _net(), _batch()
    loss, logits = ngebm_loss(net, x, y, beta=beta, gamma=gamma, energy_var_weight=var_weight)
    g = 1 - beta if gamma is None else gamma
    e = _energy(net, x)
    by_hand = (
        g * F.cross_entropy(net(x), y)
        + beta * _norms_by_loop(net, x).mean()
        + var_weight * ((e.mean() - e) ** 2).mean()
    )
    torch.testing.assert_close(loss, by_hand)
    torch.testing.assert_close(logits, net(x))
    # the parameter gradient through the double backward, too
    torch.testing.assert_close(_param_grad(net, loss), _param_grad(net, by_hand))


def test_ngebm_loss_finite_difference_has_the_exact_value_and_the_difference_gradient():
    net, (x, y) = _net(), _batch()
    h = 1e-3
    loss, _ = ngebm_loss(net, x, y, grad_norm="finite_difference", step=h)
    exact, _ = ngebm_loss(net, x, y)
    torch.testing.assert_close(loss, exact)
    # by hand: v = dE/dx / ||dE/dx|| held constant, d||g||/dtheta ~ d/dtheta (E(x + h v) - E(x)) / h
    x_leaf = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(_energy(net, x_leaf).sum(), x_leaf)
    v = (g / g.norm(dim=1, keepdim=True)).detach()
    difference = (_energy(net, x + h * v) - _energy(net, x)) / h
    surrogate = 0.5 * F.cross_entropy(net(x), y) + 0.5 * difference.mean()
    torch.testing.assert_close(_param_grad(net, loss), _param_grad(net, surrogate))
    # and it approximates the exact gradient for a small step
    torch.testing.assert_close(_param_grad(net, loss), _param_grad(net, exact), atol=1e-4, rtol=0)


def test_ngebm_loss_beta_zero_takes_no_input_gradient(monkeypatch):
    net, (x, y) = _net(), _batch()

    def fail(*args, **kwargs):
        raise AssertionError("no input gradient when beta=0")

    monkeypatch.setattr(losses, "energy_grad_norm", fail)
    monkeypatch.setattr(losses, "energy_grad_norm_finite_difference", fail)
    loss, _ = ngebm_loss(net, x, y, beta=0.0, energy_var_weight=0.5)
    e = _energy(net, x)
    torch.testing.assert_close(loss, F.cross_entropy(net(x), y) + 0.5 * e.var(unbiased=False))
    with pytest.raises(AssertionError, match="no input gradient"):
        ngebm_loss(net, x, y, beta=0.1)


def test_ngebm_loss_uses_the_given_criterion_and_create_graph():
    net, (x, y) = _net(), _batch()
    weights = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    loss, logits = ngebm_loss(
        net, x, y, criterion=torch.nn.CrossEntropyLoss(weight=weights), create_graph=False
    )
    norms = _norms_by_loop(net, x)
    expected = 0.5 * F.cross_entropy(logits, y, weight=weights) + 0.5 * norms.mean()
    torch.testing.assert_close(loss, expected.detach())


def test_ngebm_loss_rejects_unknown_modes():
    net, (x, y) = _net(), _batch()
    with pytest.raises(ValueError, match="grad_norm must be one of"):
        ngebm_loss(net, x, y, grad_norm="magic")
    with pytest.raises(ValueError, match="needs the step h"):
        ngebm_loss(net, x, y, grad_norm="finite_difference")


def test_negatives_restrict_the_classification_term_of_both_losses_only():
    # y holds classes 0 and 1 only: under "batch" the logits of 2 and 3 leave the softmax,
    # computed here by hand on the two kept columns; the energy terms stay over every class.
    net, (x, _) = _net(), _batch()
    y = torch.tensor([0, 1, 1, 0, 1, 0])
    restricted_ce = F.cross_entropy(net(x)[:, :2], y)
    loss, _ = ngebm_loss(net, x, y, beta=0.3, negatives="batch")
    by_hand = 0.7 * restricted_ce + 0.3 * _norms_by_loop(net, x).mean()
    torch.testing.assert_close(loss, by_hand)
    torch.testing.assert_close(_param_grad(net, loss), _param_grad(net, by_hand))
    samples = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    loss, *_ = jem_loss(net, x, y, samples, negatives="batch")
    by_hand = restricted_ce + _energy(net, x).mean() - _energy(net, samples).mean()
    torch.testing.assert_close(loss, by_hand)


def test_jem_loss_is_cross_entropy_plus_the_contrastive_term():
    net, (x, y) = _net(), _batch()
    samples = torch.randn(9, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    loss, logits, e_data, e_samples = jem_loss(net, x, y, samples, px_weight=0.7)
    by_hand = F.cross_entropy(net(x), y) + 0.7 * (
        _energy(net, x).mean() - _energy(net, samples).mean()
    )
    torch.testing.assert_close(loss, by_hand)
    torch.testing.assert_close(logits, net(x))
    torch.testing.assert_close(e_data, _energy(net, x))
    torch.testing.assert_close(e_samples, _energy(net, samples))
    torch.testing.assert_close(_param_grad(net, loss), _param_grad(net, by_hand))


def test_fd_step_size_is_the_rms_distance_from_the_mean():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2, 3)).astype(np.float32) * 3
    flat = X.reshape(50, -1).astype(np.float64)
    rms = np.sqrt(np.mean(np.sum((flat - flat.mean(0)) ** 2, axis=1)))
    assert fd_step_size(X, fd_step=0.02) == pytest.approx(0.02 * rms, rel=1e-12)
    assert fd_step_size(torch.as_tensor(X), fd_step=0.02) == fd_step_size(X, fd_step=0.02)
    assert fd_step_size(np.full((4, 3), 7.0), fd_step=0.05) == 0.05


def test_fd_step_size_sums_as_numpy_without_a_float64_copy_of_the_data(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(600_000, 10)).astype(np.float32)  # 24 MB
    expected = 0.01 * float(np.sqrt(X.var(axis=0, dtype=np.float64).sum()))
    tracemalloc.start()
    try:
        step = fd_step_size(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert step == expected  # the same float64 sums, in the same order
    assert peak < X.nbytes / 2  # one float64 block of 8 MB; numpy's var copied X: 48 MB
    monkeypatch.setattr(statistics, "BLOCK_SIZE", 7)  # blocks of one row
    assert fd_step_size(X[:1000]) == 0.01 * np.sqrt(X[:1000].var(axis=0, dtype=np.float64).sum())


# ---------------------------------------------------------------- sample weights

WEIGHTS = torch.tensor([1.0, 0.0, 2.0, 3.0, 1.0, 0.0], dtype=torch.float64)


def _weighted(values, w):
    return (w * values).sum() / w.sum()


@pytest.mark.parametrize("beta, gamma, var_weight", [(0.0, None, 0.4), (0.3, 2.0, 0.7)])
def test_ngebm_loss_weights_every_per_sample_term(beta, gamma, var_weight):
    net, (x, y) = _net(), _batch()
    loss, _ = ngebm_loss(
        net, x, y, beta=beta, gamma=gamma, energy_var_weight=var_weight, sample_weight=WEIGHTS
    )
    g = 1 - beta if gamma is None else gamma
    e = _energy(net, x)
    ce = F.cross_entropy(net(x), y, reduction="none")
    by_hand = (
        g * _weighted(ce, WEIGHTS)
        + beta * _weighted(_norms_by_loop(net, x), WEIGHTS)
        + var_weight * _weighted((_weighted(e, WEIGHTS) - e) ** 2, WEIGHTS)
    )
    torch.testing.assert_close(loss, by_hand)
    torch.testing.assert_close(_param_grad(net, loss), _param_grad(net, by_hand))


@pytest.mark.parametrize(
    "options",
    [
        dict(beta=0.0),
        dict(beta=0.5, energy_var_weight=0.7),
        dict(beta=0.5, grad_norm="finite_difference", step=1e-3),
    ],
)
def test_ngebm_loss_zero_weight_drops_and_integer_weight_repeats(options):
    net, (x, y) = _net(), _batch()
    weighted, _ = ngebm_loss(net, x, y, sample_weight=WEIGHTS, **options)
    rows = torch.repeat_interleave(torch.arange(len(x)), WEIGHTS.long())  # 0, 2, 2, 3, 3, 3, 4
    repeated, _ = ngebm_loss(net, x[rows], y[rows], **options)
    torch.testing.assert_close(weighted, repeated)
    torch.testing.assert_close(_param_grad(net, weighted), _param_grad(net, repeated))
    # uniform weights of any scale are no weights
    uniform, _ = ngebm_loss(net, x, y, sample_weight=torch.full_like(WEIGHTS, 3.0), **options)
    plain, _ = ngebm_loss(net, x, y, **options)
    torch.testing.assert_close(uniform, plain)


def test_jem_loss_weights_the_data_terms_and_not_the_samples():
    net, (x, y) = _net(), _batch()
    samples = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    loss, *_ = jem_loss(net, x, y, samples, px_weight=0.7, sample_weight=WEIGHTS)
    ce = F.cross_entropy(net(x), y, reduction="none")
    by_hand = _weighted(ce, WEIGHTS) + 0.7 * (
        _weighted(_energy(net, x), WEIGHTS) - _energy(net, samples).mean()
    )
    torch.testing.assert_close(loss, by_hand)
    torch.testing.assert_close(_param_grad(net, loss), _param_grad(net, by_hand))
    rows = torch.repeat_interleave(torch.arange(len(x)), WEIGHTS.long())
    repeated, *_ = jem_loss(net, x[rows], y[rows], samples, px_weight=0.7)
    torch.testing.assert_close(loss, repeated)


def test_weighted_mean_of_a_batch_without_weight_is_zero_with_a_zero_gradient():
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    mean = losses.weighted_mean(values, torch.zeros(2))
    mean.backward()
    assert float(mean.detach()) == 0.0 and torch.equal(values.grad, torch.zeros(2))
    logits, y = torch.randn(3, 4), torch.tensor([0, 3, 1])
    assert torch.equal(losses.cross_entropy(logits, y), F.cross_entropy(logits, y))


def _nll_by_hand(logits, y):
    """-log softmax(logits_i)[y_i], one sample at a time from the exponentials."""
    return torch.stack(
        [-(row[label] - row.exp().sum().log()) for row, label in zip(logits, y, strict=True)]
    )


def test_criterion_mean_normalises_class_and_sample_weights_as_a_hand_computation():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 2, 1, 2, 0])
    c = torch.tensor([1.0, 3.0, 0.5], dtype=torch.float64)
    w = torch.tensor([2.0, 1.0, 0.0, 3.0, 1.0], dtype=torch.float64)
    ce = _nll_by_hand(logits, y)
    # sum_i w_i c[y_i] CE_i / sum_i w_i c[y_i]: weights of 1 are torch's class-weighted mean
    by_hand = (w * c[y] * ce).sum() / (w * c[y]).sum()
    criterion = torch.nn.CrossEntropyLoss(weight=c)
    loss = losses.criterion_mean(criterion, logits, y, w)
    torch.testing.assert_close(loss, by_hand)
    (grad,) = torch.autograd.grad(loss, logits)
    torch.testing.assert_close(grad, torch.autograd.grad(by_hand, logits)[0])
    assert criterion.reduction == "mean"  # restored after the per-sample call
    ones = losses.criterion_mean(criterion, logits, y, torch.ones(5, dtype=torch.float64))
    torch.testing.assert_close(ones, criterion(logits, y))
    # an integer weight repeats the sample, as without class weights
    rows = torch.repeat_interleave(torch.arange(5), w.long())
    torch.testing.assert_close(loss, criterion(logits[rows], y[rows]))
    # without class weights: the weighted mean; without weights: the criterion itself
    plain = torch.nn.CrossEntropyLoss()
    torch.testing.assert_close(losses.criterion_mean(plain, logits, y, w), (w * ce).sum() / w.sum())
    assert torch.equal(losses.criterion_mean(plain, logits, y), plain(logits, y))
    assert losses.criterion_mean(criterion, logits, y, torch.zeros(5)).item() == 0.0


def test_per_sample_criterion_keeps_the_settings_of_the_criterion():
    g = torch.Generator().manual_seed(4)
    logits, y = torch.randn(4, 3, generator=g, dtype=torch.float64), torch.tensor([0, 1, 2, 1])
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.3)
    # label smoothing by hand: (1 - eps) * CE_i + eps * mean_k -log p_i[k]
    log_p = logits - logits.exp().sum(1, keepdim=True).log()
    by_hand = 0.7 * _nll_by_hand(logits, y) - 0.3 * log_p.mean(1)
    torch.testing.assert_close(losses.per_sample_criterion(criterion, logits, y), by_hand)
    assert criterion.reduction == "mean"

    def no_reduction(logits, y):
        return F.cross_entropy(logits, y)

    with pytest.raises(TypeError, match="no 'reduction' to set to 'none'"):
        losses.per_sample_criterion(no_reduction, logits, y)
    with pytest.raises(TypeError, match="no 'reduction'"):
        losses.criterion_mean(no_reduction, logits, y, torch.ones(4))
