"""Langevin samplers of an energy: SGLD (JEM [1]_) and proximal SGLD (JEM++ [2]_).

An energy is any callable ``energy_fn(x) -> (n,)`` mapping a batch to one energy per sample,
lower meaning more likely under ``p(x) ∝ exp(-E(x))``.

References
----------
.. [1] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and Swersky, K.
   "Your Classifier is Secretly an Energy Based Model and You Should Treat it Like One", ICLR 2020
   (SGLD, eq. 11; persistent contrastive divergence with a replay buffer, Algorithm 1).
.. [2] Yang, X. and Ji, S. "JEM++: Improved Techniques for Training JEM", ICCV 2021 (proximal SGLD,
   section 3.1; informative initialisation, section 3.3).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .._utils.parameters import ParamChecker

__all__ = ["proximal_sgld", "sgld"]

EnergyFn = Callable[[Tensor], Tensor]

#: The samplers an estimator's ``sampler`` argument names (:func:`run_sampler`).
SAMPLERS = ("sgld", "proximal")


def _check_chain_params(n_steps, step_size, noise, **more) -> ParamChecker:
    """A checker with the step count, step and noise of a sampler checked; ``more`` for more."""
    check = ParamChecker.of({"n_steps": n_steps, "step_size": step_size, "noise": noise, **more})
    check.integer("n_steps", 0)
    check.real("step_size", 0.0, finite=True)
    check.real("noise", 0.0, finite=True)
    return check


def _update(
    x: Tensor,
    grad: Tensor,
    step_size: float,
    noise: float,
    eps: Tensor | None,
    grad_clip: float | Tensor | None,
    low: Tensor | float | None,
    high: Tensor | float | None,
) -> Tensor:
    """One Langevin move of ``x`` along ``-grad``, with noise ``eps`` and the box, if any."""
    if grad_clip is not None:
        grad = torch.clamp(grad, -grad_clip, grad_clip)
    x = x - step_size * grad
    if eps is not None:
        x = x + noise * eps
    if low is not None or high is not None:
        x = torch.clamp(x, low, high)
    return x


#: ``torch.compile`` of :func:`_update` per set of compile arguments (see :func:`run_sampler`).
_COMPILED_UPDATES: dict = {}


def _compiled_update(compile_kwargs: dict):
    key = tuple(sorted(compile_kwargs.items(), key=lambda item: item[0]))
    if key not in _COMPILED_UPDATES:
        _COMPILED_UPDATES[key] = torch.compile(_update, **compile_kwargs)
    return _COMPILED_UPDATES[key]


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
    update=_update,
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
            eps = None
            if noise > 0:  # drawn here, so a compiled update draws the same noise
                eps = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
            with torch.no_grad():
                x = update(x, grad, step_size, noise, eps, grad_clip, low, high)
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
    grad_clip, low, high = _proximal_box(x0, low, high, n_steps, step_size, grad_clip, noise)
    return _langevin(energy_fn, x0, n_steps, step_size, noise, generator, grad_clip, low, high)


def _proximal_box(x0, low, high, n_steps, step_size, grad_clip, noise):
    """Check the proximal sampler's arguments; its clip and box on ``x0``'s device."""
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
    return grad_clip, low, high


def run_sampler(
    sampler: str,
    energy_fn: EnergyFn,
    x0: Tensor,
    *,
    n_steps: int,
    step_size: float,
    noise: float,
    low: Tensor,
    high: Tensor,
    clip_fraction: float,
    generator: torch.Generator | None = None,
    compile_kwargs: dict | None = None,
) -> Tensor:
    """The sampler named by an estimator's ``sampler`` argument, with the estimators' box.

    ``"sgld"`` runs :func:`sgld`; ``"proximal"`` runs :func:`proximal_sgld` inside the input
    range ``[low, high]``, each gradient coordinate clipped to ``clip_fraction`` times its
    feature's range (JEM++'s clip, relative to the data's scale). One place for
    :class:`~ebmclassifier.JEMClassifier` and :class:`~ebmclassifier.ConceptComposition`.

    Parameters
    ----------
    sampler : {"sgld", "proximal"}
        Checked by the caller.
    energy_fn : callable
        Maps a batch of shape (n, ...) to per-sample energies of shape (n,).
    x0 : Tensor of shape (n, ...)
        Starting points.
    n_steps : int
    step_size : float
    noise : float
    low, high : Tensor broadcastable to x0's shape
        The per-feature input range (used by ``"proximal"`` only).
    clip_fraction : float
        The proximal sampler's gradient clip, as a fraction of each feature's range.
    generator : torch.Generator, optional
        Source of the noise.
    compile_kwargs : dict or None, default=None
        ``torch.compile`` arguments for the update of each step (the gradient step, the noise,
        the clip and the box fused into one kernel, the estimators' ``compile=True``); the
        noise is drawn as without it, so the samples are the same up to rounding. None runs
        the update eagerly.

    Returns
    -------
    Tensor of shape (n, ...)
        Final samples, detached.

    Examples
    --------
    >>> import torch
    >>> low, high = torch.zeros(2), torch.tensor([1.0, 10.0])
    >>> x = run_sampler("proximal", lambda x: -x.sum(1), torch.zeros(3, 2), n_steps=1,
    ...                  step_size=1.0, noise=0.0, low=low, high=high, clip_fraction=0.1)
    >>> x[0]  # one step of 0.1 times each feature's range
    tensor([0.1000, 1.0000])
    """
    update = _update if compile_kwargs is None else _compiled_update(compile_kwargs)
    chain = (energy_fn, x0, n_steps, step_size, noise, generator)
    if sampler == "proximal":
        clip = clip_fraction * (high - low)
        box = _proximal_box(x0, low, high, n_steps, step_size, clip, noise)
        return _langevin(*chain, *box, update=update)
    _check_chain_params(n_steps, step_size, noise).raise_if_any()
    return _langevin(*chain, update=update)
