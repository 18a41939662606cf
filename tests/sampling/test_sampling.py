"""Tests of the samplers, the replay buffer and its starts (ebmclassifier.sampling)."""

import io
import math
import pickle

import pytest
import torch
from torch import nn

from ebmclassifier.sampling import (
    GaussianStart,
    ReplayBuffer,
    UniformStart,
    informative_start,
    proximal_sgld,
    sgld,
)
from ebmclassifier.sampling.langevin import run_sampler


def _quadratic(dim=3, seed=0):
    """E(x) = 0.5 (x - mu)^T A (x - mu) with a random SPD A; returns (energy_fn, A, mu)."""
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(dim, dim, generator=g, dtype=torch.float64)
    a = m @ m.T / dim + 0.5 * torch.eye(dim, dtype=torch.float64)
    mu = torch.randn(dim, generator=g, dtype=torch.float64)

    def energy_fn(x):
        d = x - mu
        return 0.5 * ((d @ a) * d).sum(1)

    return energy_fn, a, mu


def _logsumexp_energy(module):
    return lambda x: -torch.logsumexp(module(x), dim=1)


@pytest.fixture(scope="module")
def trained_net():
    """A small MLP trained by cross-entropy on two Gaussian blobs in 2-D."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(200, 2, generator=g) + 2, torch.randn(200, 2, generator=g) - 2])
    y = torch.cat([torch.zeros(200), torch.ones(200)]).long()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 32), nn.ELU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(200):
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return net


# ------------------------------------------------------------------ SGLD


def test_sgld_step_is_the_analytic_gradient_of_a_quadratic():
    energy_fn, a, mu = _quadratic()
    x0 = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    step = 0.1
    x1 = sgld(energy_fn, x0, n_steps=1, step_size=step, noise=0.0)
    # one noiseless step: (x0 - x1) / step = dE/dx(x0) = A (x0 - mu)
    torch.testing.assert_close((x0 - x1) / step, (x0 - mu) @ a)
    # t steps: x_t - mu = (I - step A)^t (x0 - mu), the closed form of gradient descent
    xt = sgld(energy_fn, x0, n_steps=7, step_size=step, noise=0.0)
    contraction = torch.linalg.matrix_power(torch.eye(3, dtype=torch.float64) - step * a, 7)
    torch.testing.assert_close(xt - mu, (x0 - mu) @ contraction.T)


def test_sgld_lowers_the_energy_of_a_quadratic_towards_its_minimum():
    energy_fn, _, mu = _quadratic()
    g = torch.Generator().manual_seed(2)
    x0 = 5 * torch.randn(256, 3, dtype=torch.float64, generator=g)
    x = sgld(energy_fn, x0, n_steps=200, step_size=0.2, noise=0.01, generator=g)
    assert energy_fn(x).mean() < 1e-2 * energy_fn(x0).mean()
    torch.testing.assert_close(x.mean(0), mu, atol=0.05, rtol=0)


def test_sgld_noise_has_the_requested_scale():
    # a flat energy: the chain is a Gaussian random walk, x_T - x_0 ~ N(0, T noise^2)
    g = torch.Generator().manual_seed(3)
    x0 = torch.zeros(20000, 1)
    x = sgld(lambda x: 0.0 * x.sum(1), x0, n_steps=4, step_size=1.0, noise=0.5, generator=g)
    expected = 0.5 * math.sqrt(4)
    # the sample std of 20000 normals is within 4 % of the truth with overwhelming probability
    assert abs(x.std().item() / expected - 1) < 0.04
    assert abs(x.mean().item()) < 4 * expected / math.sqrt(20000)


def test_sgld_defaults_are_the_documented_ones():
    # n_steps=20, step_size=1.0: a linear energy a.x moves each chain by -20 * 1.0 * a
    a = torch.tensor([0.5, -1.0], dtype=torch.float64)
    x = sgld(lambda x: (x * a).sum(1), torch.zeros(3, 2, dtype=torch.float64), noise=0.0)
    torch.testing.assert_close(x, (-20.0 * a).expand(3, 2))
    # noise=0.01: on a flat energy, x_T - x_0 ~ N(0, 20 * 0.01^2)
    g = torch.Generator().manual_seed(4)
    x = sgld(lambda x: 0.0 * x.sum(1), torch.zeros(20000, 1), generator=g)
    assert abs(x.std().item() / (0.01 * math.sqrt(20)) - 1) < 0.04


def test_sgld_lowers_the_energy_on_a_trained_net_and_leaves_parameters_alone(trained_net):
    energy_fn = _logsumexp_energy(trained_net)
    params = list(trained_net.parameters())
    # a marker in .grad of one parameter, None in the others: both must survive
    params[0].grad = torch.full_like(params[0], 7.0)
    for p in params[1:]:
        p.grad = None
    before = [p.detach().clone() for p in params]
    g = torch.Generator().manual_seed(4)
    x0 = 8 * torch.rand(512, 2, generator=g) - 4
    x = sgld(energy_fn, x0, n_steps=20, step_size=1.0, noise=0.01, generator=g)
    with torch.no_grad():
        e0, e1 = energy_fn(x0), energy_fn(x)
    assert e1.mean() < e0.mean() - 1.0
    assert (e1 < e0).float().mean() > 0.9
    assert not x.requires_grad and x.grad_fn is None
    assert torch.equal(params[0].grad, torch.full_like(params[0], 7.0))
    assert all(p.grad is None for p in params[1:])
    assert all(torch.equal(p, b) for p, b in zip(params, before, strict=True))


def test_sgld_works_under_no_grad_and_leaves_x0_alone():
    energy_fn, _, mu = _quadratic()
    x0 = torch.zeros(4, 3, dtype=torch.float64)
    with torch.no_grad():
        x = sgld(energy_fn, x0, n_steps=3, step_size=0.1, noise=0.0)
    assert torch.equal(x0, torch.zeros(4, 3, dtype=torch.float64))
    assert not torch.equal(x, x0)


def test_sgld_generator_makes_chains_reproducible():
    energy_fn, _, _ = _quadratic()
    x0 = torch.zeros(8, 3, dtype=torch.float64)

    def run(seed):
        return sgld(
            energy_fn, x0, n_steps=5, step_size=0.1, generator=torch.Generator().manual_seed(seed)
        )

    assert torch.equal(run(0), run(0))
    assert not torch.equal(run(0), run(1))


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"n_steps": -1}, ValueError),
        ({"n_steps": 2.5}, TypeError),
        ({"step_size": float("nan")}, ValueError),
        ({"noise": -0.1}, ValueError),
    ],
)
def test_sgld_rejects_bad_parameters(kwargs, error):
    energy_fn, _, _ = _quadratic()
    with pytest.raises(error, match=next(iter(kwargs))):
        sgld(energy_fn, torch.zeros(2, 3, dtype=torch.float64), **kwargs)


def test_sgld_rejects_an_energy_that_is_not_per_sample():
    with pytest.raises(ValueError, match="one energy per sample"):
        sgld(lambda x: x.sum(), torch.zeros(2, 3), n_steps=1)


# ------------------------------------------------------------------ proximal SGLD


def test_proximal_sgld_step_is_the_clipped_gradient_then_the_clamp():
    energy_fn, a, mu = _quadratic()
    g = torch.Generator().manual_seed(5)
    x0 = 3 * torch.randn(64, 3, dtype=torch.float64, generator=g)
    low, high = -torch.ones(3, dtype=torch.float64), 2 * torch.ones(3, dtype=torch.float64)
    x1 = proximal_sgld(energy_fn, x0, low, high, n_steps=1, step_size=0.5, grad_clip=0.3)
    expected = torch.clamp(x0 - 0.5 * ((x0 - mu) @ a).clamp(-0.3, 0.3), low, high)
    torch.testing.assert_close(x1, expected)


def test_proximal_sgld_stays_in_the_box_and_moves_at_most_step_times_clip(trained_net):
    energy_fn = _logsumexp_energy(trained_net)
    g = torch.Generator().manual_seed(6)
    x0 = 2 * torch.rand(256, 2, generator=g) - 1
    x = x0
    for _ in range(10):  # step by step, to check the per-step bound
        prev = x
        x = proximal_sgld(energy_fn, x, -1.0, 1.0, n_steps=1, step_size=2.0, grad_clip=0.05)
        assert (x - prev).abs().max() <= 2.0 * 0.05 + 1e-6
        assert x.min() >= -1 and x.max() <= 1
    with torch.no_grad():
        assert energy_fn(x).mean() < energy_fn(x0).mean()


def test_proximal_sgld_rejects_an_empty_box():
    with pytest.raises(ValueError, match="low must not exceed high"):
        proximal_sgld(lambda x: x.sum(1), torch.zeros(2, 2), low=1.0, high=0.0)


# ------------------------------------------------------------------ starts


def test_uniform_start_covers_the_box():
    low, high = torch.tensor([0.0, -2.0]), torch.tensor([1.0, 6.0])
    x = UniformStart(low, high).sample(20000, generator=torch.Generator().manual_seed(7))
    assert (x >= low).all() and (x <= high).all()
    # mean of U(a, b) is (a + b) / 2 with std (b - a) / sqrt(12 n)
    tol = 5 * (high - low) / math.sqrt(12 * 20000)
    assert ((x.mean(0) - (low + high) / 2).abs() < tol).all()


def _two_class_data(n=4000, d=6, seed=8):
    """Class 0: rank-1 correlated Gaussian around 0; class 1: isotropic around 3."""
    g = torch.Generator().manual_seed(seed)
    direction = torch.randn(d, generator=g)
    direction /= direction.norm()
    x0 = 2.0 * torch.randn(n, 1, generator=g) * direction + 0.1 * torch.randn(n, d, generator=g)
    x1 = 3.0 + 0.5 * torch.randn(n // 4, d, generator=g)
    x = torch.cat([x0, x1])
    y = torch.cat([torch.zeros(n), torch.ones(n // 4)]).long()
    return x, y


@pytest.mark.parametrize("covariance", ["diag", "lowrank"])
def test_informative_start_matches_the_class_moments(covariance):
    x, y = _two_class_data()
    start = informative_start(x, y, n_classes=2, covariance=covariance, rank=2, clamp=False)
    g = torch.Generator().manual_seed(9)
    for c in (0, 1):
        xs = start.sample(20000, y=torch.full((20000,), c), generator=g)
        data = x[y == c]
        torch.testing.assert_close(xs.mean(0), data.mean(0), atol=0.06, rtol=0)
        # every covariance option keeps the per-feature variances
        torch.testing.assert_close(xs.var(0), data.var(0), atol=0.0, rtol=0.08)
    # only the low-rank option keeps the correlation of class 0
    xs = start.sample(20000, y=torch.zeros(20000), generator=g)
    cov_model, cov_data = torch.cov(xs.T), torch.cov(x[y == 0].T)
    off = ~torch.eye(x.shape[1], dtype=torch.bool)
    err = (cov_model - cov_data)[off].abs().max()
    if covariance == "lowrank":
        assert err < 0.1 * cov_data.diag().max()
    else:
        assert err > 0.3 * cov_data.diag().max()


def test_informative_start_draws_classes_by_their_priors_and_clamps():
    x, y = _two_class_data()
    start = informative_start(x, y, n_classes=2)
    xs = start.sample(20000, generator=torch.Generator().manual_seed(10))
    # class 1 (a fifth of the data) sits around 3, class 0 around 0
    frac_class1 = (xs.mean(1) > 1.5).float().mean().item()
    assert abs(frac_class1 - 0.2) < 5 * math.sqrt(0.2 * 0.8 / 20000)
    assert (xs >= x.min(0).values).all() and (xs <= x.max(0).values).all()


def test_informative_start_keeps_image_shape_and_global_rng():
    g = torch.Generator().manual_seed(11)
    x = torch.rand(60, 1, 4, 4, generator=g)
    y = torch.arange(60) % 3
    state = torch.get_rng_state()
    start = informative_start(x, y, n_classes=3, covariance="lowrank", rank=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert start.sample(5).shape == (5, 1, 4, 4)


def test_informative_start_rejects_an_unknown_covariance():
    with pytest.raises(ValueError, match="'diag' or 'lowrank'"):
        informative_start(torch.zeros(4, 2), torch.zeros(4), n_classes=1, covariance="full")


# ------------------------------------------------------------------ replay buffer


def _uniform_buffer(size=500, n_classes=None, seed=12):
    start = UniformStart(torch.zeros(3), torch.ones(3))
    return ReplayBuffer(start, size, n_classes, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("reinit_freq", [0.0, 0.05, 0.3, 1.0])
def test_buffer_reinit_rate_matches_reinit_freq(reinit_freq):
    buf = _uniform_buffer()
    # a sentinel outside the start's box marks the chains that were not re-initialised
    buf.update(torch.arange(500), torch.full((500, 3), 10.0))
    g = torch.Generator().manual_seed(13)
    n_draws, batch = 200, 64
    n_fresh = 0
    for _ in range(n_draws):
        x, idx = buf.draw(batch, reinit_freq, generator=g)
        fresh = (x < 10).all(1)
        assert torch.equal(x[~fresh], buf.samples[idx][~fresh])
        assert ((x[fresh] >= 0) & (x[fresh] <= 1)).all()
        n_fresh += int(fresh.sum())
    n = n_draws * batch
    # Binomial(n, p): within 5 standard deviations (two-sided tail < 1e-6)
    sd = math.sqrt(n * reinit_freq * (1 - reinit_freq))
    assert abs(n_fresh - n * reinit_freq) <= 5 * sd


def test_buffer_draws_indices_uniformly_and_update_writes_back():
    buf = _uniform_buffer(size=10)
    g = torch.Generator().manual_seed(14)
    counts = torch.zeros(10)
    for _ in range(200):
        _, idx = buf.draw(50, 0.0, generator=g)
        counts += torch.bincount(idx, minlength=10)
    # 10,000 draws over 10 slots: each count ~ Binomial(10000, 0.1), sd = 30
    assert ((counts - 1000).abs() < 5 * 30).all()
    idx = torch.tensor([1, 4, 7, 9])  # distinct: with duplicates, one of the writes wins
    new = torch.rand(4, 3, generator=g, dtype=torch.float64)
    buf.update(idx, new)
    assert torch.equal(buf.samples[idx], new.float())
    assert buf.samples.dtype == torch.float32


def test_class_conditional_buffer_draws_the_asked_classes():
    start = informative_start(*_two_class_data(), n_classes=2)
    buf = ReplayBuffer(start, buffer_size=101, n_classes=2)
    y = torch.tensor([0, 1] * 500)
    x, idx = buf.draw(1000, 0.0, generator=torch.Generator().manual_seed(15), y=y)
    assert torch.equal(buf.labels[idx], y)
    # every slot of each class is reachable, and none beyond the buffer
    assert idx.max() < 101 and len(torch.unique(idx)) == 101
    # the class-1 chains were initialised from the class-1 Gaussian (around 3)
    assert x[y == 1].mean() > 2 and x[y == 0].mean().abs() < 1
    xr, idx = buf.draw(1000, 1.0, generator=torch.Generator().manual_seed(16), y=y)
    assert xr[y == 1].mean() > 2 and xr[y == 0].mean().abs() < 1


def test_buffer_generator_makes_draws_reproducible():
    buf = _uniform_buffer()

    def run(seed):
        return buf.draw(32, 0.5, generator=torch.Generator().manual_seed(seed))

    (xa, ia), (xb, ib), (xc, _) = run(0), run(0), run(1)
    assert torch.equal(xa, xb) and torch.equal(ia, ib)
    assert not torch.equal(xa, xc)
    assert torch.equal(_uniform_buffer(seed=3).samples, _uniform_buffer(seed=3).samples)


@pytest.mark.parametrize("n_classes", [None, 3])
def test_buffer_survives_pickle_and_state_dict(n_classes):
    x, y = torch.rand(90, 2, 2), torch.arange(90) % 3
    start = informative_start(x, y, 3, covariance="lowrank", rank=2)
    buf = ReplayBuffer(start, 50, n_classes, generator=torch.Generator().manual_seed(17))
    clone = pickle.loads(pickle.dumps(buf))
    for (name, a), (_, b) in zip(buf.named_buffers(), clone.named_buffers(), strict=True):
        assert torch.equal(a, b), name
    # a freshly built buffer takes the state of the old one, also via torch.save
    fresh = ReplayBuffer(start, 50, n_classes, generator=torch.Generator().manual_seed(99))
    assert not torch.equal(fresh.samples, buf.samples)
    stream = io.BytesIO()
    torch.save(buf.state_dict(), stream)
    stream.seek(0)
    fresh.load_state_dict(torch.load(stream))
    assert torch.equal(fresh.samples, buf.samples)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(fresh.draw(8, 0.5, g1)[0], clone.draw(8, 0.5, g2)[0])


def test_buffer_moves_with_to():
    buf = _uniform_buffer(n_classes=3)
    names = {name for name, _ in buf.named_buffers()}
    assert {"samples", "labels", "start.low", "start.high"} <= names
    moved = buf.to(torch.float64)
    assert moved.samples.dtype == torch.float64 and moved.start.low.dtype == torch.float64
    meta = _uniform_buffer(n_classes=3).to("meta")
    assert all(b.device.type == "meta" for b in meta.buffers())


@pytest.mark.cuda
def test_buffer_trained_on_gpu_unpickles_on_cpu():
    buf = _uniform_buffer().to("cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    x, idx = buf.draw(8, 0.5, generator=g)
    assert x.is_cuda
    stream = io.BytesIO()
    torch.save(buf, stream)
    stream.seek(0)
    cpu = torch.load(stream, map_location="cpu", weights_only=False)
    assert cpu.samples.device.type == "cpu"
    assert torch.equal(cpu.samples, buf.samples.cpu())


def test_buffer_reinitialize_restarts_every_chain():
    buf = _uniform_buffer()
    buf.update(torch.arange(500), torch.full((500, 3), 10.0))
    buf.reinitialize(generator=torch.Generator().manual_seed(18))
    assert ((buf.samples >= 0) & (buf.samples <= 1)).all()


def test_buffer_reinitialize_keeps_each_class_and_draws_from_the_generator():
    # far-apart class means: a restarted chain of class c lies within 0.5 of mu_c
    means = torch.tensor([[0.0, 0.0], [10.0, 10.0], [-10.0, 10.0]])
    start = GaussianStart(
        means, torch.zeros(3, 2, 0), torch.full((3, 2), 0.05), torch.zeros(3), (2,)
    )
    buf = ReplayBuffer(start, 60, n_classes=3, generator=torch.Generator().manual_seed(0))
    buf.update(torch.arange(60), torch.full((60, 2), 100.0))
    buf.reinitialize(generator=torch.Generator().manual_seed(1))
    assert ((buf.samples - means[buf.labels]).abs() < 0.5).all()
    first = buf.samples.clone()
    buf.reinitialize(generator=torch.Generator().manual_seed(1))
    assert torch.equal(buf.samples, first)  # the same generator state, the same restart


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"reinit_freq": 1.5}, "reinit_freq"),
        ({"y": torch.zeros(4)}, "n_classes"),
    ],
)
def test_buffer_draw_rejects_bad_input(kwargs, match):
    buf = _uniform_buffer()
    args = {"batch_size": 4, "reinit_freq": 0.05} | kwargs
    with pytest.raises(ValueError, match=match):
        buf.draw(**args)


def test_buffer_draw_refuses_classes_it_does_not_hold():
    # with 3 classes, y = 4, 5 or -1 silently drew chains of other classes (issue #14)
    buf = ReplayBuffer(UniformStart(torch.zeros(2), torch.ones(2)), buffer_size=9, n_classes=3)
    with pytest.raises(ValueError, match=r"classes in 0\.\.2 .* Got \[-1, 4, 5\]; encode"):
        buf.draw(4, 0.0, y=torch.tensor([4, 4, 5, -1]))
    _, idx = buf.draw(3, 0.0, y=[0, 2, 1])  # the last class is in range
    assert buf.labels[idx].tolist() == [0, 2, 1]


def test_class_conditional_buffer_needs_room_for_every_class():
    with pytest.raises(ValueError, match="buffer_size >= n_classes"):
        _uniform_buffer(size=2, n_classes=3)


def test_gaussian_start_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="n_classes"):
        GaussianStart(
            torch.zeros(2, 3), torch.zeros(2, 3, 0), torch.ones(2, 4), torch.zeros(2), (3,)
        )


@pytest.mark.parametrize("sampler", ["sgld", "proximal"])
def test_run_sampler_is_the_named_sampler_with_the_estimators_box(sampler):
    # the one dispatch of JEMClassifier and ConceptComposition (issue #16)
    low, high = torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 10.0])
    x0 = torch.zeros(5, 2)
    energy_fn = lambda x: (x**2).sum(1)  # noqa: E731
    args = dict(n_steps=4, step_size=0.3, noise=0.1)
    x = run_sampler(
        sampler, energy_fn, x0, **args, low=low, high=high, clip_fraction=0.05,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    g = torch.Generator().manual_seed(0)
    if sampler == "proximal":  # the clip is a fraction of each feature's range
        expected = proximal_sgld(
            energy_fn, x0, low, high, **args, grad_clip=torch.tensor([0.1, 0.5]), generator=g
        )
    else:
        expected = sgld(energy_fn, x0, **args, generator=g)
    assert torch.equal(x, expected)
