"""Samplers for energy-based models: SGLD, proximal SGLD, a replay buffer and its starts.

Functional core on tensors. Nothing here knows about scikit-learn: an energy is any callable
``energy_fn(x) -> (n,)`` mapping a batch to one energy per sample, lower meaning more likely
under p(x) ~ exp(-E(x)). SGLD and the replay buffer are JEM's [1]_; proximal SGLD and the
informative start are JEM++'s [2]_.

References
----------
.. [1] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and Swersky, K.
   "Your Classifier is Secretly an Energy Based Model and You Should Treat it Like One", ICLR 2020
   (SGLD, eq. 11; persistent contrastive divergence with a replay buffer, Algorithm 1).
.. [2] Yang, X. and Ji, S. "JEM++: Improved Techniques for Training JEM", ICCV 2021 (proximal SGLD,
   section 3.1; informative initialisation, section 3.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ._validation import ParamChecker

__all__ = [
    "sgld",
    "proximal_sgld",
    "UniformStart",
    "GaussianStart",
    "uniform_start",
    "informative_start",
    "ReplayBuffer",
]

EnergyFn = Callable[[Tensor], Tensor]


def _check_chain_params(n_steps, step_size, noise, **more) -> ParamChecker:
    """A checker with the step count, step and noise of a sampler checked; ``more`` for more."""
    check = ParamChecker.of({"n_steps": n_steps, "step_size": step_size, "noise": noise, **more})
    check.integer("n_steps", 0)
    check.real("step_size", 0.0, finite=True)
    check.real("noise", 0.0, finite=True)
    return check


def _langevin(
    energy_fn: EnergyFn,
    x0: Tensor,
    n_steps: int,
    step_size: float,
    noise: float,
    generator: torch.Generator | None,
    grad_clip: float | Tensor | None = None,
    low: Tensor | float | None = None,
    high: Tensor | float | None = None,
) -> Tensor:
    """Shared loop of both samplers; ``x0`` of shape (n, ...) -> detached samples, same shape."""
    if not isinstance(x0, Tensor) or not x0.is_floating_point():
        raise TypeError(f"x0 must be a floating point torch.Tensor. Got {type(x0).__name__!r}.")
    x = x0.detach().clone()
    # enable_grad: the sampler is also called from inference code under torch.no_grad().
    with torch.enable_grad():
        for _ in range(n_steps):
            x.requires_grad_(True)
            energies = energy_fn(x)
            if energies.shape != (x.shape[0],):
                raise ValueError(
                    "energy_fn must return one energy per sample, shape "
                    f"{(x.shape[0],)!r}. Got shape {tuple(energies.shape)!r}."
                )
            # Samples are independent, so d(sum E)/dx_i = dE_i/dx_i. autograd.grad with
            # inputs=x leaves every parameter's .grad untouched.
            (grad,) = torch.autograd.grad(energies.sum(), x)
            x = x.detach()
            if grad_clip is not None:
                grad = torch.clamp(grad, -grad_clip, grad_clip)
            x = x - step_size * grad
            if noise > 0:
                eps = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
                x = x + noise * eps
            if low is not None or high is not None:
                x = torch.clamp(x, low, high)
    return x.detach()


def sgld(
    energy_fn: EnergyFn,
    x0: Tensor,
    n_steps: int = 20,
    step_size: float = 1.0,
    noise: float = 0.01,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Stochastic Gradient Langevin Dynamics on the samples, JEM style.

    Runs ``x_{t+1} = x_t - step_size * dE/dx(x_t) + noise * eps_t`` with ``eps_t ~ N(0, I)``
    ([1]_, eq. 11, with the step and the noise decoupled as in the paper's experiments).
    Gradients are taken with respect to the samples only: the parameters inside ``energy_fn``
    neither receive nor accumulate gradients.

    Parameters
    ----------
    energy_fn : callable
        Maps a batch of shape (n, ...) to per-sample energies of shape (n,). Samples must not
        interact (no batch-norm in training mode), since the gradient of the summed energy is used.
    x0 : Tensor of shape (n, ...)
        Starting points; not modified.
    n_steps : int, default=20
        Number of Langevin steps.
    step_size : float, default=1.0
        Step on the energy gradient.
    noise : float, default=0.01
        Standard deviation of the Gaussian noise added at each step.
    generator : torch.Generator, optional
        Source of the noise, for reproducible chains. Must live on ``x0``'s device.

    Returns
    -------
    Tensor of shape (n, ...)
        Final samples, detached from any graph.

    References
    ----------
    .. [1] Grathwohl et al., "Your Classifier is Secretly an Energy Based Model and You Should
       Treat it Like One", ICLR 2020, eq. 11.

    Examples
    --------
    >>> import torch
    >>> x = sgld(lambda x: 0.5 * (x**2).sum(1), torch.ones(4, 2), n_steps=10, step_size=0.5,
    ...          noise=0.0)
    >>> torch.allclose(x, torch.full((4, 2), 0.5**10))
    True
    """
    _check_chain_params(n_steps, step_size, noise).raise_if_any()
    return _langevin(energy_fn, x0, n_steps, step_size, noise, generator)


def proximal_sgld(
    energy_fn: EnergyFn,
    x0: Tensor,
    low: Tensor | float,
    high: Tensor | float,
    n_steps: int = 20,
    step_size: float = 1.0,
    grad_clip: float | Tensor = 0.01,
    noise: float = 0.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Proximal SGLD of JEM++: clipped gradient steps that stay inside the input range.

    Runs ``x_{t+1} = clamp(x_t - step_size * clamp(dE/dx, -grad_clip, grad_clip) + noise * eps_t,
    low, high)`` ([1]_, section 3.1). Clipping each coordinate of the gradient bounds how far one
    step can move a sample, which keeps the chain in the proximity of its previous state.

    Parameters
    ----------
    energy_fn : callable
        Maps a batch of shape (n, ...) to per-sample energies of shape (n,).
    x0 : Tensor of shape (n, ...)
        Starting points; not modified.
    low, high : float or Tensor broadcastable to x0's shape
        The box the samples are clamped to (the per-feature input range).
    n_steps : int, default=20
        Number of steps.
    step_size : float, default=1.0
        Step on the clipped energy gradient.
    grad_clip : float or Tensor broadcastable to x0's shape, default=0.01
        Each gradient coordinate is clipped to ``[-grad_clip, grad_clip]``, so one step moves a
        coordinate by at most ``step_size * grad_clip`` (plus noise). A tensor gives each
        feature its own clip (e.g. a fraction of its input range).
    noise : float, default=0.0
        Standard deviation of the Gaussian noise; JEM++ runs without noise.
    generator : torch.Generator, optional
        Source of the noise.

    Returns
    -------
    Tensor of shape (n, ...)
        Final samples, detached, inside ``[low, high]``.

    References
    ----------
    .. [1] Yang and Ji, "JEM++: Improved Techniques for Training JEM", ICCV 2021, section 3.1.

    Examples
    --------
    >>> import torch
    >>> x = proximal_sgld(lambda x: -x.sum(1), torch.zeros(3, 2), low=-1.0, high=0.5,
    ...                   n_steps=100, step_size=1.0, grad_clip=0.1)
    >>> torch.allclose(x, torch.full((3, 2), 0.5))
    True
    """
    check = _check_chain_params(n_steps, step_size, noise, grad_clip=grad_clip)
    if isinstance(grad_clip, Tensor):
        ok = bool(torch.isfinite(grad_clip).all()) and not bool(torch.any(grad_clip < 0))
        check.satisfies("grad_clip", ok, "finite and >= 0 in every feature")
        grad_clip = grad_clip.to(dtype=x0.dtype, device=x0.device)
    else:
        check.real("grad_clip", 0.0, finite=True)
    check.raise_if_any()
    if isinstance(low, Tensor) or isinstance(high, Tensor):
        low = torch.as_tensor(low, dtype=x0.dtype, device=x0.device)
        high = torch.as_tensor(high, dtype=x0.dtype, device=x0.device)
    if bool(torch.any(torch.as_tensor(low) > torch.as_tensor(high))):
        raise ValueError(f"low must not exceed high. Got low={low!r}, high={high!r}.")
    return _langevin(energy_fn, x0, n_steps, step_size, noise, generator, grad_clip, low, high)


# --------------------------------------------------------------------------------------------
# Start distributions of the chains (buffer initialisation and re-initialisation)
# --------------------------------------------------------------------------------------------


class UniformStart(nn.Module):
    """Uniform noise over a per-feature box ``[low, high]``, the start of JEM [1]_.

    Parameters
    ----------
    low, high : Tensor of shape sample_shape
        Per-feature bounds, e.g. the input range learned in ``fit``.

    References
    ----------
    .. [1] Grathwohl et al., ICLR 2020, section 4 ("re-initialised from uniform noise").

    Examples
    --------
    >>> import torch
    >>> start = UniformStart(torch.zeros(2), torch.tensor([1.0, 10.0]))
    >>> x = start.sample(1000, generator=torch.Generator().manual_seed(0))
    >>> x.shape, bool(((x >= start.low) & (x <= start.high)).all())
    (torch.Size([1000, 2]), True)
    >>> (x.mean(0) / start.high).round(decimals=1)  # each feature centred in its range
    tensor([0.5000, 0.5000])
    """

    def __init__(self, low: Tensor, high: Tensor):
        super().__init__()
        low = torch.as_tensor(low, dtype=torch.float32)
        high = torch.as_tensor(high, dtype=torch.float32)
        if low.shape != high.shape or bool(torch.any(low > high)):
            raise ValueError(
                "low and high must have the same shape with low <= high. "
                f"Got shapes {tuple(low.shape)!r} and {tuple(high.shape)!r}."
            )
        self.register_buffer("low", low.clone())
        self.register_buffer("high", high.clone())

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample, that of ``low`` and ``high``."""
        return tuple(self.low.shape)

    def sample(
        self, n: int, y: Tensor | None = None, generator: torch.Generator | None = None
    ) -> Tensor:
        """Draw ``n`` samples uniformly from the box ``[low, high]``.

        Parameters
        ----------
        n : int
            Number of samples.
        y : Tensor of shape (n,), optional
            Ignored: the start is unconditional (the argument makes it interchangeable with
            :class:`GaussianStart`).
        generator : torch.Generator, optional
            Source of the noise, on the device of ``low``.

        Returns
        -------
        Tensor of shape ``(n, *sample_shape)``, float32

        Examples
        --------
        >>> import torch
        >>> start = UniformStart(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 5.0]))
        >>> a = start.sample(3, generator=torch.Generator().manual_seed(0))
        >>> b = start.sample(3, torch.tensor([0, 1, 2]), torch.Generator().manual_seed(0))
        >>> a.shape, torch.equal(a, b)  # the same seed, the same draw: y plays no part
        (torch.Size([3, 2]), True)
        """
        u = torch.rand((n, *self.sample_shape), generator=generator, device=self.low.device)
        return self.low + (self.high - self.low) * u


class GaussianStart(nn.Module):
    """Class-conditional Gaussians ``N(mu_y, W_y W_y^T + diag(s_y^2))``, the start of JEM++ [1]_.

    ``covariance="diag"`` is the special case of rank 0; the low-rank factor keeps the memory at
    ``n_classes * d * (rank + 2)`` numbers instead of ``n_classes * d^2``. Build it from data with
    :func:`informative_start`.

    Parameters
    ----------
    means : Tensor of shape (n_classes, d)
    factors : Tensor of shape (n_classes, d, rank)
        Low-rank factors W_y; rank may be 0.
    stds : Tensor of shape (n_classes, d)
        Per-feature residual standard deviations s_y.
    log_priors : Tensor of shape (n_classes,)
        Class log-frequencies, used when no class is asked for.
    sample_shape : tuple of int
        Shape of one sample (product d), e.g. (C, H, W) for images.
    low, high : Tensor of shape sample_shape, optional
        If given, samples are clamped to this box (the input range).

    References
    ----------
    .. [1] Yang and Ji, "JEM++", ICCV 2021, section 3.3 (informative initialisation).

    Examples
    --------
    Two classes in two dimensions, diagonal covariances (rank 0):

    >>> import torch
    >>> means = torch.tensor([[0.0, 0.0], [5.0, 5.0]])
    >>> start = GaussianStart(means, factors=torch.zeros(2, 2, 0), stds=torch.full((2, 2), 0.1),
    ...                       log_priors=torch.log(torch.tensor([0.5, 0.5])), sample_shape=(2,))
    >>> y = torch.tensor([0, 1, 1, 0])
    >>> x = start.sample(4, y=y, generator=torch.Generator().manual_seed(0))
    >>> x.shape, bool(((x - means[y]).abs() < 0.5).all())
    (torch.Size([4, 2]), True)
    """

    def __init__(self, means, factors, stds, log_priors, sample_shape, low=None, high=None):
        super().__init__()
        self._sample_shape = tuple(int(s) for s in sample_shape)
        d = math.prod(self._sample_shape)
        if means.ndim != 2 or means.shape[1] != d or stds.shape != means.shape:
            raise ValueError(
                f"means and stds must have shape (n_classes, {d}). "
                f"Got {tuple(means.shape)!r} and {tuple(stds.shape)!r}."
            )
        inf = torch.full(self._sample_shape, math.inf)
        self.register_buffer("means", means.float().clone())
        self.register_buffer("factors", factors.float().clone())
        self.register_buffer("stds", stds.float().clone())
        self.register_buffer("log_priors", log_priors.float().clone())
        self.register_buffer("low", (-inf if low is None else torch.as_tensor(low)).float())
        self.register_buffer("high", (inf if high is None else torch.as_tensor(high)).float())

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample, that of the data the Gaussians were fitted on."""
        return self._sample_shape

    def sample(
        self, n: int, y: Tensor | None = None, generator: torch.Generator | None = None
    ) -> Tensor:
        """Draw ``n`` samples; from class ``y[i]`` for sample i, else a class by its prior.

        Parameters
        ----------
        n : int
            Number of samples.
        y : Tensor of shape (n,), optional
            Encoded class of each sample; ``None`` draws the classes from ``exp(log_priors)``.
        generator : torch.Generator, optional
            Source of the classes and the noise, on the device of the means.

        Returns
        -------
        Tensor of shape ``(n, *sample_shape)``, float32
            Clamped to ``[low, high]``.

        Examples
        --------
        Without ``y``, a class by its prior (here 80% and 20%), and samples clamped to the box:

        >>> import torch
        >>> means, priors = torch.tensor([[0.0], [5.0]]), torch.tensor([0.8, 0.2])
        >>> start = GaussianStart(means, torch.zeros(2, 1, 0), torch.ones(2, 1), priors.log(),
        ...                       (1,), low=torch.tensor([-1.0]), high=torch.tensor([6.0]))
        >>> x = start.sample(2000, generator=torch.Generator().manual_seed(0))
        >>> round(float((x > 2.5).float().mean()), 1)  # the share of the second class
        0.2
        >>> float(x.min()), float(x.max())
        (-1.0, 6.0)
        """
        device = self.means.device
        if y is None:
            probs = self.log_priors.exp()
            y = torch.multinomial(probs, n, replacement=True, generator=generator)
        y = torch.as_tensor(y, device=device).long()
        rank = self.factors.shape[2]
        z = torch.randn((n, rank), generator=generator, device=device)
        e = torch.randn((n, self.means.shape[1]), generator=generator, device=device)
        x = self.means[y] + self.stds[y] * e
        if rank:
            x = x + torch.bmm(self.factors[y], z.unsqueeze(2)).squeeze(2)
        x = x.reshape(n, *self._sample_shape)
        return torch.clamp(x, self.low, self.high)


def uniform_start(low: Tensor, high: Tensor) -> UniformStart:
    """Uniform start over the per-feature box ``[low, high]``; see :class:`UniformStart`.

    Parameters
    ----------
    low, high : Tensor of shape sample_shape
        Per-feature bounds, ``low <= high``.

    Returns
    -------
    UniformStart

    Examples
    --------
    >>> import torch
    >>> start = uniform_start(torch.zeros(1, 2, 2), torch.ones(1, 2, 2))
    >>> start.sample_shape, start.sample(3).shape
    ((1, 2, 2), torch.Size([3, 1, 2, 2]))
    """
    return UniformStart(low, high)


def informative_start(
    X: Tensor,
    y: Tensor,
    n_classes: int,
    covariance: str = "diag",
    rank: int = 10,
    clamp: bool = True,
    min_std: float = 1e-3,
) -> GaussianStart:
    """Fit the class-conditional Gaussians of JEM++'s informative start to training data.

    For each class c: the mean mu_c, and either per-feature variances (``"diag"``) or the top
    ``rank`` principal directions of the class (``torch.pca_lowrank``) plus a diagonal that keeps
    each feature's total variance equal to its empirical variance (``"lowrank"``).

    Parameters
    ----------
    X : Tensor of shape (n, ...)
        Training inputs.
    y : Tensor of shape (n,)
        Encoded labels in ``0 .. n_classes - 1``.
    n_classes : int
    covariance : {"diag", "lowrank"}, default="diag"
    rank : int, default=10
        Number of principal directions per class for ``"lowrank"`` (capped by the class size
        and the dimension).
    clamp : bool, default=True
        Clamp samples to the per-feature range of ``X``.
    min_std : float, default=1e-3
        Floor on the residual standard deviations, so constant features still get some noise.

    Returns
    -------
    GaussianStart

    References
    ----------
    .. [1] Yang and Ji, "JEM++", ICCV 2021, section 3.3.

    Examples
    --------
    >>> import torch
    >>> X = torch.cat([torch.zeros(50, 3), torch.ones(50, 3)])
    >>> y = torch.cat([torch.zeros(50), torch.ones(50)]).long()
    >>> start = informative_start(X, y, n_classes=2)
    >>> start.sample(4, y=torch.tensor([1, 1, 0, 0])).round()
    tensor([[1., 1., 1.],
            [1., 1., 1.],
            [0., 0., 0.],
            [0., 0., 0.]])
    """
    check = ParamChecker.of({"covariance": covariance, "rank": rank})
    check.satisfies("covariance", covariance in ("diag", "lowrank"), "'diag' or 'lowrank'")
    check.integer("rank", 0)
    check.raise_if_any()
    y = torch.as_tensor(y).long()
    if X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ValueError(
            f"X and y must have the same, non-zero length. Got {X.shape[0]} and {y.shape[0]}."
        )
    sample_shape = tuple(X.shape[1:])
    flat = X.detach().reshape(X.shape[0], -1).float()
    d = flat.shape[1]
    rank = 0 if covariance == "diag" else min(rank, d)
    means = torch.zeros(n_classes, d, device=flat.device)
    variances = torch.ones(n_classes, d, device=flat.device)
    factors = torch.zeros(n_classes, d, rank, device=flat.device)
    counts = torch.bincount(y, minlength=n_classes).float()
    for c in range(n_classes):
        xc = flat[y == c]
        if xc.shape[0] == 0:  # unseen class: fall back to the pooled data
            xc = flat
        means[c] = xc.mean(0)
        var = xc.var(0, unbiased=False)
        variances[c] = var
        q = min(rank, xc.shape[0] - 1)
        if q > 0:
            # principal directions V and singular values S of the centred class data;
            # pca_lowrank is randomised: a forked, fixed seed keeps the global RNG untouched.
            devices = [flat.device] if flat.is_cuda else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(0)
                _, s, v = torch.pca_lowrank(xc, q=q, center=True, niter=4)
            w = v * (s / math.sqrt(xc.shape[0]))
            factors[c, :, :q] = w
            # keep each feature's marginal variance: residual = total - low-rank part
            variances[c] = var - (w**2).sum(1)
    stds = variances.clamp_min(0).sqrt().clamp_min(min_std)
    log_priors = torch.log(counts.clamp_min(1) / counts.clamp_min(1).sum())
    low = flat.min(0).values.reshape(sample_shape) if clamp else None
    high = flat.max(0).values.reshape(sample_shape) if clamp else None
    return GaussianStart(means, factors, stds, log_priors, sample_shape, low, high)


# --------------------------------------------------------------------------------------------
# Replay buffer
# --------------------------------------------------------------------------------------------


class ReplayBuffer(nn.Module):
    """Persistent SGLD chains, the replay buffer of JEM's PCD training ([1]_, Algorithm 1).

    The samples (and, for class-conditional sampling, their labels) are registered buffers, so
    the buffer moves with ``.to(device)``, is part of ``state_dict`` and pickles with the model.

    Parameters
    ----------
    start : UniformStart or GaussianStart
        Distribution the chains start from and are re-initialised from; kept as a submodule.
    buffer_size : int, default=10000
        Number of persistent chains.
    n_classes : int, optional
        If given, the buffer is class-conditional: entry i holds label ``i % n_classes`` and
        ``draw(..., y=...)`` returns chains of the asked classes, for sampling p(x|y).
    generator : torch.Generator, optional
        Source of the initial samples.

    References
    ----------
    .. [1] Grathwohl et al., ICLR 2020, Algorithm 1 and section 4.

    Examples
    --------
    >>> import torch
    >>> buf = ReplayBuffer(uniform_start(torch.zeros(2), torch.ones(2)), buffer_size=8)
    >>> x, idx = buf.draw(4, reinit_freq=0.05)
    >>> buf.update(idx, x + 1)
    >>> tuple(buf.samples.shape)
    (8, 2)
    """

    def __init__(
        self,
        start: nn.Module,
        buffer_size: int = 10000,
        n_classes: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        check = ParamChecker.of({"buffer_size": buffer_size, "n_classes": n_classes})
        check.integer("buffer_size", 1)
        check.integer("n_classes", 1, allow_none=True)
        check.raise_if_any()
        if n_classes is not None and buffer_size < n_classes:
            raise ValueError(
                f"A class-conditional buffer needs buffer_size >= n_classes. "
                f"Got buffer_size={buffer_size!r}, n_classes={n_classes!r}."
            )
        self.start = start
        self.buffer_size = buffer_size
        self.n_classes = n_classes
        device = next(start.buffers()).device
        labels = None
        if n_classes is not None:
            labels = torch.arange(buffer_size, device=device) % n_classes
        self.register_buffer("samples", start.sample(buffer_size, y=labels, generator=generator))
        self.register_buffer("labels", labels)

    def reinitialize(self, generator: torch.Generator | None = None) -> None:
        """Restart every chain from the start distribution (after a divergence).

        A class-conditional buffer keeps each entry's class.

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of the new samples, on the buffer's device.

        Returns
        -------
        None
            ``samples`` is overwritten in place.

        Examples
        --------
        >>> import torch
        >>> buf = ReplayBuffer(uniform_start(torch.zeros(2), torch.ones(2)), buffer_size=4)
        >>> buf.update(torch.arange(4), torch.full((4, 2), 100.0))  # chains that ran away
        >>> buf.reinitialize(generator=torch.Generator().manual_seed(0))
        >>> bool(((buf.samples >= 0) & (buf.samples <= 1)).all())  # back in the start's box
        True
        """
        self.samples.copy_(self.start.sample(self.buffer_size, y=self.labels, generator=generator))

    def draw(
        self,
        batch_size: int,
        reinit_freq: float = 0.05,
        generator: torch.Generator | None = None,
        y: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Draw chains uniformly at random, a fraction ``reinit_freq`` of them restarted.

        Parameters
        ----------
        batch_size : int
        reinit_freq : float in [0, 1], default=0.05
            Each drawn chain is independently replaced by a fresh start with this probability.
        generator : torch.Generator, optional
            On the buffer's device.
        y : Tensor of shape (batch_size,), optional
            Classes to draw chains of (class-conditional buffers only).

        Returns
        -------
        samples : Tensor of shape ``(batch_size, *sample_shape)``
            A copy; write the evolved samples back with :meth:`update`.
        indices : Tensor of shape (batch_size,)
            Positions in the buffer; ``self.labels[indices]`` are their classes if conditional.

        Examples
        --------
        >>> import torch
        >>> start = uniform_start(torch.zeros(2), torch.ones(2))
        >>> buf = ReplayBuffer(start, buffer_size=9, n_classes=3)
        >>> x, idx = buf.draw(4, reinit_freq=0.0)  # no restart: copies of stored chains
        >>> torch.equal(x, buf.samples[idx])
        True
        >>> y = torch.tensor([2, 0, 0, 1])
        >>> x, idx = buf.draw(4, reinit_freq=1.0, y=y)  # chains of the asked classes, restarted
        >>> torch.equal(buf.labels[idx], y), torch.equal(x, buf.samples[idx])
        (True, False)
        """
        check = ParamChecker.of({"batch_size": batch_size, "reinit_freq": reinit_freq})
        check.integer("batch_size", 1)
        check.real("reinit_freq", 0.0, 1.0)
        check.raise_if_any()
        device = self.samples.device
        if y is None:
            indices = torch.randint(
                0, self.buffer_size, (batch_size,), generator=generator, device=device
            )
        else:
            if self.n_classes is None:
                raise ValueError("draw(y=...) needs a buffer built with n_classes.")
            y = torch.as_tensor(y, device=device).long()
            if y.shape != (batch_size,):
                raise ValueError(f"y must have shape ({batch_size},). Got {tuple(y.shape)!r}.")
            # class c occupies positions c, c + K, c + 2K, ...; pick one uniformly
            k = self.n_classes
            count = (self.buffer_size - y + k - 1) // k
            u = torch.rand(batch_size, generator=generator, device=device)
            indices = y + k * torch.minimum((u * count).long(), count - 1)
        samples = self.samples[indices].clone()
        reinit = torch.rand(batch_size, generator=generator, device=device) < reinit_freq
        n_reinit = int(reinit.sum())
        if n_reinit:
            labels = None if self.labels is None else self.labels[indices][reinit]
            fresh = self.start.sample(n_reinit, y=labels, generator=generator)
            samples[reinit] = fresh.to(samples.dtype)
        return samples, indices

    def update(self, indices: Tensor, samples: Tensor) -> None:
        """Write evolved chains back at ``indices`` (as returned by :meth:`draw`).

        ``draw`` samples indices with replacement, as JEM does; where an index repeats, one of
        its evolved samples is kept.

        Parameters
        ----------
        indices : Tensor of shape (m,)
            Positions in the buffer, as returned by :meth:`draw`.
        samples : Tensor of shape ``(m, *sample_shape)``
            The evolved chains; detached and cast to the buffer's dtype.

        Returns
        -------
        None
            ``samples`` of the buffer is written in place.

        Examples
        --------
        >>> import torch
        >>> buf = ReplayBuffer(uniform_start(torch.zeros(2), torch.ones(2)), buffer_size=8)
        >>> x, idx = buf.draw(3, reinit_freq=0.0)
        >>> evolved = (x + 1).requires_grad_()  # as after Langevin steps
        >>> buf.update(idx, evolved)
        >>> torch.equal(buf.samples[idx], x + 1), buf.samples.requires_grad
        (True, False)
        """
        self.samples[indices] = samples.detach().to(self.samples.dtype)
