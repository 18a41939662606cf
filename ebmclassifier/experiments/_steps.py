"""The step benchmark of ``bench``: one training step of each objective, as ratios to CE.

Every step is an optimizer step on the objective the estimators train, from
:mod:`ebmclassifier.losses` (``ngebm_loss`` with ``beta=0`` is the ``ce`` model's, with
``beta=0.5`` NG-EBM's, exact or finite-difference; ``jem_loss`` after
:func:`~ebmclassifier.sampling.sgld` from a :class:`~ebmclassifier.sampling.ReplayBuffer`, as
``JEMClassifier`` draws its samples), on the network ``NGEBMClassifier`` builds for the shape.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import nullcontext
from math import prod

import numpy as np
import torch
import torch.nn.functional as F

from .._utils.compile import compile_in_place, no_donated_buffers
from .._utils.precision import FD_STEPS
from ..energy import energy, energy_grad_norm, energy_grad_norm_finite_difference
from ..losses import fd_step_size, jem_loss, ngebm_loss
from ..ngebm import NGEBMClassifier
from ..sampling import ReplayBuffer, UniformStart, sgld
from ._timing import compare_times, interleaved_times, summarize, sync_for

#: The NG-EBM weights of the paper, beta = gamma = 0.5 (``NGEBMClassifier``'s defaults).
BETA = 0.5
#: JEM's sampler as in Grathwohl et al. (2020) and ``JEMClassifier``'s defaults: 20 SGLD
#: steps of step 1 and noise 0.01, from a buffer of 10,000 chains, 5% of each draw restarted.
SGLD_STEPS, SGLD_STEP_SIZE, SGLD_NOISE, BUFFER_SIZE, REINIT_FREQ = 20, 1.0, 0.01, 10_000, 0.05
#: The batch size of every benchmark.
BATCH = 64
#: The settings of the step benchmark: name -> sample shape.
STEP_SETTINGS = {"mlp_64": (64,), "conv_1x8x8": (1, 8, 8), "conv_3x32x32": (3, 32, 32)}


def digits(copies: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Standardized digits (1,797 x 64), stacked ``copies`` times."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = ((X - X.mean(0)) / (X.std(0) + 1e-8)).astype(np.float32)
    return np.tile(X, (copies, 1)), np.tile(y, copies)


def _batch_for(shape: tuple[int, ...], device: torch.device):
    """A batch of ``BATCH`` samples of ``shape``: digits when they fit, else Gaussian noise."""
    if prod(shape) == 64:
        X, y = digits()
        x = torch.tensor(X[:BATCH], device=device).reshape(-1, *shape)
        return x, torch.tensor(y[:BATCH], dtype=torch.long, device=device)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, *shape, generator=gen).to(device)
    y = torch.randint(10, (BATCH,), generator=gen).to(device)
    return x, y


def default_network(x: torch.Tensor, y: torch.Tensor) -> torch.nn.Module:
    """The network ``NGEBMClassifier`` builds for the batch's shape and classes, untrained."""
    estimator = NGEBMClassifier(max_epochs=0, random_state=0, device=str(x.device))
    return estimator.fit(x.cpu().numpy(), y.cpu().numpy()).module_


def _objectives(net, fwd, x, y, h) -> dict[str, Callable[[], torch.Tensor]]:
    """The loss of each method on the batch: ``fwd`` computes, ``net`` is switched to eval
    while SGLD samples (as ``JEMClassifier`` does)."""
    buffer = None

    def jem():
        nonlocal buffer
        if buffer is None:  # JEM's start: uniform noise over the batch's per-feature range
            start = UniformStart(x.min(dim=0).values, x.max(dim=0).values)
            buffer = ReplayBuffer(start, BUFFER_SIZE)
        x0, indices = buffer.draw(len(x), REINIT_FREQ)
        net.eval()
        samples = sgld(lambda z: energy(fwd(z)), x0, SGLD_STEPS, SGLD_STEP_SIZE, SGLD_NOISE)
        net.train()
        buffer.update(indices, samples)
        return jem_loss(fwd, x, y, samples)[0]

    fd = {"grad_norm": "finite_difference", "step": h}
    return {
        "ce": lambda: ngebm_loss(fwd, x, y, beta=0.0)[0],
        "ngebm_exact": lambda: ngebm_loss(fwd, x, y, beta=BETA)[0],
        "ngebm_fd": lambda: ngebm_loss(fwd, x, y, beta=BETA, **fd)[0],
        "jem": jem,
    }


def make_step_tasks(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    methods: tuple[str, ...] = ("ce", "ngebm_exact", "ngebm_fd", "jem"),
    autocast_dtype: torch.dtype | None = None,
    compile_model: bool = False,
    fd_step: float = 0.01,
    compile_kwargs: dict | None = None,
) -> dict[str, Callable[[], object]]:
    """One training-step closure per method, each on its own copy of ``model`` and its own Adam.

    Parameters
    ----------
    model : torch.nn.Module
        Copied once per method, so every method starts from the same weights.
    x : Tensor of shape (n, ...), on the model's device
    y : Tensor of shape (n,), int64
    methods : tuple of str
        Any of ``"ce"``, ``"ngebm_exact"``, ``"ngebm_fd"``, ``"jem"``.
    autocast_dtype : torch.dtype or None
        Run forward passes under ``torch.autocast`` with this dtype.
    compile_model : bool
        Compile each copy in place as ``compile=True`` does (not for ``ngebm_exact``: no
        double backward through compiled code), its steps without donated buffers.
    fd_step : float, default=0.01
        The finite difference's relative step (``NGEBMClassifier(fd_step=...)``).
    compile_kwargs : dict or None
        ``torch.compile`` arguments with ``compile_model`` (e.g. ``{"backend": "aot_eager"}``).

    Returns
    -------
    dict of name -> callable
    """
    if compile_model and "ngebm_exact" in methods:
        raise ValueError("torch.compile does not go through double backward (ngebm_exact).")
    h = fd_step_size(x, fd_step)
    context = no_donated_buffers if compile_model else nullcontext

    def task(method: str) -> Callable[[], object]:
        net = copy.deepcopy(model)
        if compile_model:
            compile_in_place(net, **(compile_kwargs or {}))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        loss_fn = _objectives(net, net, x, y, h)[method]

        def step():
            opt.zero_grad(set_to_none=True)
            with context():
                with _autocast(x.device, autocast_dtype):
                    loss = loss_fn()
                loss.backward()
            opt.step()

        return step

    return {method: task(method) for method in methods}


def _autocast(device: torch.device, dtype: torch.dtype | None):
    return nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def _phase_tasks(model: torch.nn.Module, x: torch.Tensor) -> dict[str, Callable[[], object]]:
    """The pieces of a step: a forward pass, and a forward pass with each kind of backward."""

    def forward():
        return energy(model(x.detach().requires_grad_(True))).sum()

    def forward_input_backward():
        x_leaf = x.detach().requires_grad_(True)
        return torch.autograd.grad(energy(model(x_leaf)).sum(), x_leaf)

    def forward_param_backward():
        model.zero_grad(set_to_none=True)
        energy(model(x)).sum().backward()

    return {
        "phase_forward": forward,
        "phase_forward_input_backward": forward_input_backward,
        "phase_forward_param_backward": forward_param_backward,
    }


def _fd_floor(times: dict, clock: str) -> float:
    """The finite-difference step's ratio to CE if it cost exactly its parts, nothing more.

    The finite-difference step is a forward pass and the input gradient (``F + Bx``), a
    second forward pass (``F``), the parameter backward through both graphs (``2 Btheta``)
    and the optimizer step ``A``; the CE step is ``F + Btheta + A``. With the phases timed
    alone, ``F + Bx``, ``F``, ``F + Btheta``: floor = (CE + (F + Bx) + (F + Btheta) - F) / CE.
    """

    def med(name):
        return float(np.median(times[name][clock]))

    ce = med("ce")
    extra = (
        med("phase_forward_input_backward")
        + med("phase_forward_param_backward")
        - med("phase_forward")
    )
    return (ce + extra) / ce


def _guarded(tasks: dict[str, Callable[[], object]]) -> tuple[dict, dict[str, str]]:
    """Run each task once; keep those that work, and say why the others failed."""
    working, errors = {}, {}
    for name, fn in tasks.items():
        try:
            fn()
        except Exception as exc:  # a variant the platform lacks must not sink the whole run
            errors[name] = f"{type(exc).__name__}: {exc}"[:500]
        else:
            working[name] = fn
    return working, errors


def fd_gradient_agreement(
    model: torch.nn.Module,
    x: torch.Tensor,
    autocast_dtype: torch.dtype | None,
    fd_steps: tuple[float, ...] = (0.01, 0.05, 0.1),
) -> dict[str, float]:
    """Cosine between the exact float32 penalty gradient and the finite-difference one.

    A finite difference of two nearly equal energies loses digits to rounding: under bf16
    autocast (8 mantissa bits) the default step can be too small for it.

    Parameters
    ----------
    model : torch.nn.Module
    x : Tensor of shape (n, ...)
    autocast_dtype : torch.dtype or None
        The finite difference runs under ``torch.autocast`` with this dtype.
    fd_steps : tuple of float
        Relative steps, as ``NGEBMClassifier(fd_step=...)``.

    Returns
    -------
    dict of str(fd_step) -> cosine similarity of the parameter gradients of mean ||dE/dx||
    """
    params = list(model.parameters())

    def flat_grad(norms):
        return torch.cat([g.flatten() for g in torch.autograd.grad(norms.float().mean(), params)])

    exact = flat_grad(energy_grad_norm(model, x, create_graph=True)[0])
    out = {}
    for fd_step in fd_steps:
        with _autocast(x.device, autocast_dtype):
            norms = energy_grad_norm_finite_difference(model, x, fd_step_size(x, fd_step))[0]
            approx = flat_grad(norms)
        out[str(fd_step)] = float(F.cosine_similarity(exact, approx.float(), dim=0))
    return out


def bench_steps(
    device: torch.device,
    rounds: int,
    warmup: int = 2,
    settings: dict[str, tuple[int, ...]] | None = None,
    variants: bool = False,
) -> dict:
    """Time one training step per method, as ratios to the CE step, for each setting.

    Parameters
    ----------
    device : torch.device
    rounds, warmup : int
        See :func:`interleaved_times`.
    settings : dict of name -> sample shape, default=:data:`STEP_SETTINGS`
    variants : bool, default=False
        Also time every method under bf16 autocast, and the first-order ones compiled, alone
        and with bf16 (compilation on CUDA only; see :func:`_variant_kwargs`), as ratios to
        the plain float32 CE step.

    Returns
    -------
    dict of setting -> {method: summary (see :func:`summarize`), "jem_vs_ngebm_fd": the
    per-round ratio of those two steps, "fd_floor": see :func:`_fd_floor`, "phases": the
    timed parts of a step, "errors": variants that could not run, "fd_cosine_to_exact":
    with ``variants``, see :func:`fd_gradient_agreement` (float32 and bf16)}
    """
    settings = STEP_SETTINGS if settings is None else settings
    sync = sync_for(device)
    clock = _headline_clock(device)
    out = {}
    for name, shape in settings.items():
        errors: dict[str, str] = {}
        with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
            torch.manual_seed(0)
            x, y = _batch_for(shape, device)
            model = default_network(x, y)
            tasks = make_step_tasks(model, x, y)
            tasks.update(_phase_tasks(copy.deepcopy(model), x))
            if variants:
                for tag, kwargs in _variant_kwargs(device).items():
                    extra = make_step_tasks(model, x, y, **kwargs)
                    working, failed = _guarded({f"{m}_{tag}": fn for m, fn in extra.items()})
                    tasks.update(working)
                    errors.update(failed)
            times = interleaved_times(tasks, rounds, warmup, sync)
            agreement = {}
            if variants:
                agreement = {
                    "float32": fd_gradient_agreement(model, x, None),
                    "bf16": fd_gradient_agreement(model, x, torch.bfloat16),
                }
        phases = {k: times.pop(k) for k in list(times) if k.startswith("phase_")}
        out[name] = {
            "fd_cosine_to_exact": agreement,
            **compare_times(times, "ce", clock),
            "jem_vs_ngebm_fd": summarize(times["jem"][clock], times["ngebm_fd"][clock]),
            "fd_floor": _fd_floor({**times, **phases}, clock),
            "phases": {k: summarize(v[clock]) for k, v in phases.items()},
            "errors": errors,
        }
    return out


def _headline_clock(device: torch.device) -> str:
    return "wall" if device.type == "cuda" else "cpu"


def _variant_kwargs(device: torch.device) -> dict[str, dict]:
    """The variants of the GPU section: bf16 autocast for every method (with its own fd step),
    ``compile=True``'s in-place compilation for the first-order ones, and both together."""
    bf16 = {"autocast_dtype": torch.bfloat16, "fd_step": FD_STEPS["bfloat16"]}
    variants = {"bf16": {**bf16, "methods": ("ce", "ngebm_exact", "ngebm_fd", "jem")}}
    if device.type == "cuda":
        # Compilation on the CPU needs a C++ toolchain and minutes; the GPU section only.
        first_order = {"compile_model": True, "methods": ("ce", "ngebm_fd", "jem")}
        variants["compile"] = first_order
        variants["bf16_compile"] = {**bf16, **first_order}
    return variants
