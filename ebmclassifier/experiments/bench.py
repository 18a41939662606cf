"""The benchmark behind ``python -m ebmclassifier bench``: what energy-based training costs.

Three questions, each answered inside one run so that the machine's load affects every
contender alike:

1. **Training step.** On the same network and batch: one step (forward, loss, backward,
   optimizer step) of cross-entropy (CE), NG-EBM with the exact double backward, NG-EBM with
   the finite-difference gradient, and JEM (20 SGLD steps, then the contrastive loss), as
   ratios to the CE step. For the default MLP on flat input and the default ConvNet on
   1x8x8 and 3x32x32 images, batches of 64.
2. **Wrapper overhead.** One epoch of ``NGEBMClassifier.fit`` on the digits against a
   hand-written PyTorch loop doing the same work: the same initial weights, the same batches
   in the same order, the same optimizer. The loop must end on the same weights; the
   report says how far apart they are.
3. **Inference.** Throughput of ``predict_proba`` and ``score_ood`` against plain batched
   PyTorch on the same network.

Timings are interleaved: every round runs each contender once, in a rotating order, after
warm-up rounds, and a ratio is the median over rounds of the per-round ratio, so slow drift
of a shared machine cancels. Medians and 10th/90th percentiles are reported in milliseconds.

When CUDA is present (or ``device="cuda"``), the step benchmark also runs on the GPU, with
variants of the CE and finite-difference steps under bf16 autocast and with ``torch.compile``
(never the exact mode: its double backward goes through neither).
"""

from __future__ import annotations

import copy
import json
import platform
import time
from collections.abc import Callable
from contextlib import nullcontext
from math import prod

import numpy as np
import torch
import torch.nn.functional as F

from .._base import _resolve_device
from ..energy import energy, energy_grad_norm, energy_grad_norm_finite_difference
from ..nn import MLP, ConvNet
from ._command import Command, Option

__all__ = ["interleaved_times", "summarize", "run_bench", "format_bench"]

#: The NG-EBM weights of the paper, beta = gamma = 0.5.
_BETA = 0.5
#: JEM's sampler as in Grathwohl et al. (2020): 20 SGLD steps, step 1, noise 0.01.
_SGLD_STEPS, _SGLD_STEP_SIZE, _SGLD_NOISE = 20, 1.0, 0.01
_BATCH = 64

try:  # the JEM branch's sampler, once it is on main
    from ..sampling import sgld as _library_sgld
except ImportError:  # pragma: no cover - depends on what has landed
    _library_sgld = None


# ---------------------------------------------------------------------- timing


def interleaved_times(
    tasks: dict[str, Callable[[], object]],
    rounds: int,
    warmup: int = 2,
    sync: Callable[[], None] = lambda: None,
) -> dict[str, dict[str, list[float]]]:
    """Run every task once per round, in a rotating order, and return the seconds per run.

    Two clocks are read around each run: the wall clock and the CPU time of this process.
    On a shared machine the CPU time is the steadier measure of the work done, since it does
    not count the time the process waits for a core; on a GPU only the wall clock (after
    ``sync``) means anything.

    Parameters
    ----------
    tasks : dict of name -> callable
    rounds : int
        Timed rounds.
    warmup : int, default=2
        Untimed rounds first (allocator, caches, lazy initialisation, compilation).
    sync : callable
        Called before each clock reading, e.g. ``torch.cuda.synchronize``.

    Returns
    -------
    dict of name -> {"wall": list of float, "cpu": list of float}
        ``rounds`` durations per task and clock, in seconds, round ``r`` at index ``r``.

    Examples
    --------
    >>> times = interleaved_times({"a": lambda: None, "b": lambda: None}, rounds=3, warmup=1)
    >>> len(times["a"]["wall"]), len(times["b"]["cpu"])
    (3, 3)
    """
    names = list(tasks)
    times = {name: {"wall": [], "cpu": []} for name in names}
    for r in range(warmup + rounds):
        # Rotate the order so that no contender always runs first or after the same one.
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            sync()
            wall, cpu = time.perf_counter(), time.process_time()
            tasks[name]()
            sync()
            if r >= warmup:
                times[name]["wall"].append(time.perf_counter() - wall)
                times[name]["cpu"].append(time.process_time() - cpu)
    return times


def summarize(seconds: list[float], reference: list[float] | None = None) -> dict:
    """Median and 10th/90th percentiles in ms; with ``reference``, the same of the per-round ratio.

    Parameters
    ----------
    seconds : list of float
    reference : list of float or None
        Durations of the reference task in the same rounds.

    Returns
    -------
    dict
        ``median_ms``, ``p10_ms``, ``p90_ms``, ``n``; and ``ratio``, ``ratio_p10``,
        ``ratio_p90`` when ``reference`` is given. A ratio is the median over rounds of
        ``seconds[r] / reference[r]``, so drift that slows a whole round cancels.

    Examples
    --------
    >>> summarize([2.0, 2.0, 4.0], reference=[1.0, 1.0, 2.0])["ratio"]
    2.0
    """
    ms = np.asarray(seconds, dtype=np.float64) * 1e3
    out = {
        "median_ms": float(np.median(ms)),
        "p10_ms": float(np.percentile(ms, 10)),
        "p90_ms": float(np.percentile(ms, 90)),
        "n": len(ms),
    }
    if reference is not None:
        # A CPU-time reading can be 0 on a coarse clock; keep the ratio finite.
        ref = np.maximum(np.asarray(reference, dtype=np.float64), 1e-9)
        ratios = np.asarray(seconds, dtype=np.float64) / ref
        out["ratio"] = float(np.median(ratios))
        out["ratio_p10"] = float(np.percentile(ratios, 10))
        out["ratio_p90"] = float(np.percentile(ratios, 90))
    return out


def _compare(times: dict, reference: str | None, clock: str) -> dict:
    """Summaries of every task on both clocks; ``ratio`` at the top is from ``clock``."""
    out = {}
    for name, clocks in times.items():
        ref = times[reference] if reference is not None else None
        entry = {c: summarize(clocks[c], None if ref is None else ref[c]) for c in clocks}
        entry["clock"] = clock
        entry["median_ms"] = entry[clock]["median_ms"]
        if ref is not None:
            entry["ratio"] = entry[clock]["ratio"]
        out[name] = entry
    return out


def _sync_for(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


# ---------------------------------------------------------------------- training steps


def _fd_step_size(x: torch.Tensor, fd_step: float = 0.01) -> float:
    """The estimator's rule: ``fd_step`` times the root-mean-square distance from the mean."""
    scale = float(x.flatten(1).var(dim=0, unbiased=False).sum().sqrt())
    return fd_step * (scale if scale > 0 else 1.0)


def _local_sgld(energy_fn, x0, n_steps, step_size, noise):
    """A plain SGLD loop (Grathwohl et al. 2020, eq. 11), used until ``sampling`` is on main."""
    x = x0.detach()
    for _ in range(n_steps):
        x.requires_grad_(True)
        (grad,) = torch.autograd.grad(energy_fn(x).sum(), x)
        x = (x.detach() - step_size * grad + noise * torch.randn_like(x)).detach()
    return x


def _sgld(energy_fn, x0):
    if _library_sgld is not None:
        return _library_sgld(energy_fn, x0, _SGLD_STEPS, _SGLD_STEP_SIZE, _SGLD_NOISE)
    return _local_sgld(energy_fn, x0, _SGLD_STEPS, _SGLD_STEP_SIZE, _SGLD_NOISE)


def _ngebm_loss(model, x, y, mode: str, h: float) -> torch.Tensor:
    """``NGEBMClassifier.compute_loss`` with beta = gamma = 0.5, on the same energy functions."""
    if mode == "exact":
        norms, _, logits = energy_grad_norm(model, x, create_graph=True)
    else:
        norms, _, logits = energy_grad_norm_finite_difference(model, x, h)
    return (1 - _BETA) * F.cross_entropy(logits, y) + _BETA * norms.mean()


def make_step_tasks(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    methods: tuple[str, ...] = ("ce", "ngebm_exact", "ngebm_fd", "jem"),
    autocast_dtype: torch.dtype | None = None,
    compile_model: bool = False,
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
        Run forward passes under ``torch.autocast`` with this dtype (not for ``ngebm_exact``).
    compile_model : bool
        Wrap each copy in ``torch.compile`` (not for ``ngebm_exact``).

    Returns
    -------
    dict of name -> callable
    """
    if (autocast_dtype is not None or compile_model) and "ngebm_exact" in methods:
        raise ValueError("bf16 autocast and torch.compile do not go through double backward.")
    h = _fd_step_size(x)
    low, high = x.min(), x.max()
    # JEM's persistent buffer: uniform noise over the data range, 5% of each draw restarted.
    buffer = torch.rand(10_000, *x.shape[1:], device=x.device) * (high - low) + low

    def autocast():
        if autocast_dtype is None:
            return nullcontext()
        return torch.autocast(x.device.type, dtype=autocast_dtype)

    def task(method: str) -> Callable[[], object]:
        net = copy.deepcopy(model)
        fwd = torch.compile(net) if compile_model else net
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)

        def loss_ce():
            return F.cross_entropy(fwd(x), y)

        def loss_ngebm_exact():
            return _ngebm_loss(fwd, x, y, "exact", h)

        def loss_ngebm_fd():
            return _ngebm_loss(fwd, x, y, "fd", h)

        def loss_jem():
            idx = torch.randint(len(buffer), (len(x),), device=x.device)
            x0 = buffer[idx]
            restart = torch.rand(len(x), device=x.device) < 0.05
            x0 = torch.where(
                restart.view(-1, *[1] * (x.dim() - 1)),
                torch.rand_like(x0) * (high - low) + low,
                x0,
            )
            net.eval()
            samples = _sgld(lambda z: energy(fwd(z)), x0)
            net.train()
            buffer[idx] = samples
            logits_all = fwd(torch.cat([x, samples]))
            energies = energy(logits_all)
            n = len(x)
            return F.cross_entropy(logits_all[:n], y) + energies[:n].mean() - energies[n:].mean()

        loss_fn = {
            "ce": loss_ce,
            "ngebm_exact": loss_ngebm_exact,
            "ngebm_fd": loss_ngebm_fd,
            "jem": loss_jem,
        }[method]

        def step():
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = loss_fn()
            loss.backward()
            opt.step()

        return step

    return {method: task(method) for method in methods}


def _default_model(input_shape: tuple[int, ...], n_classes: int = 10) -> torch.nn.Module:
    if len(input_shape) == 1:
        return MLP(input_shape[0], n_classes)
    return ConvNet(input_shape, n_classes)


def _digits_batch(shape: tuple[int, ...], device: torch.device):
    X, y = _digits()
    xb = torch.tensor(X[:_BATCH], device=device).reshape(-1, *shape)
    return xb, torch.tensor(y[:_BATCH], dtype=torch.long, device=device)


def _batch_for(shape: tuple[int, ...], device: torch.device):
    if prod(shape) == 64:
        return _digits_batch(shape, device)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(_BATCH, *shape, generator=gen).to(device)
    y = torch.randint(10, (_BATCH,), generator=gen).to(device)
    return x, y


#: The settings of the step benchmark: name -> sample shape.
STEP_SETTINGS = {"mlp_64": (64,), "conv_1x8x8": (1, 8, 8), "conv_3x32x32": (3, 32, 32)}


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
    fd_steps: tuple[float, ...] = (0.01, 0.1),
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
        context = (
            nullcontext()
            if autocast_dtype is None
            else torch.autocast(x.device.type, dtype=autocast_dtype)
        )
        with context:
            norms = energy_grad_norm_finite_difference(model, x, _fd_step_size(x, fd_step))[0]
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
        Also time CE and finite-difference steps under bf16 autocast and ``torch.compile``
        (the GPU section; they are reported as ratios to the plain float32 CE step).

    Returns
    -------
    dict of setting -> {method: summary (see :func:`summarize`), "jem_vs_ngebm_fd": the
    per-round ratio of those two steps, "fd_floor": see :func:`_fd_floor`, "phases": the
    timed parts of a step, "errors": variants that could not run, "fd_cosine_to_exact":
    with ``variants``, see :func:`fd_gradient_agreement` (float32 and bf16)}
    """
    settings = STEP_SETTINGS if settings is None else settings
    sync = _sync_for(device)
    clock = _headline_clock(device)
    out = {}
    for name, shape in settings.items():
        errors: dict[str, str] = {}
        with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
            torch.manual_seed(0)
            model = _default_model(shape).to(device)
            x, y = _batch_for(shape, device)
            tasks = make_step_tasks(model, x, y)
            tasks.update(_phase_tasks(copy.deepcopy(model), x))
            if variants:
                for tag, kwargs in _variant_kwargs(device).items():
                    extra = make_step_tasks(model, x, y, methods=("ce", "ngebm_fd"), **kwargs)
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
            **_compare(times, "ce", clock),
            "jem_vs_ngebm_fd": summarize(times["jem"][clock], times["ngebm_fd"][clock]),
            "fd_floor": _fd_floor({**times, **phases}, clock),
            "phases": {k: summarize(v[clock]) for k, v in phases.items()},
            "errors": errors,
        }
    return out


def _headline_clock(device: torch.device) -> str:
    return "wall" if device.type == "cuda" else "cpu"


def _variant_kwargs(device: torch.device) -> dict[str, dict]:
    variants = {"bf16": {"autocast_dtype": torch.bfloat16}}
    if device.type == "cuda":
        # Compilation on the CPU needs a C++ toolchain and minutes; the GPU section only.
        variants["compile"] = {"compile_model": True}
    return variants


# ---------------------------------------------------------------------- fit vs hand loop


def _digits(copies: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Standardized digits (1,797 x 64), stacked ``copies`` times."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = ((X - X.mean(0)) / (X.std(0) + 1e-8)).astype(np.float32)
    return np.tile(X, (copies, 1)), np.tile(y, copies)


def _hand_fit(X: np.ndarray, y: np.ndarray, seed: int, epochs: int, grad_norm: str, h: float):
    """What ``NGEBMClassifier(random_state=...).fit`` does, written as a plain PyTorch loop.

    Same initial weights (torch seeded with the estimator's ``seed_`` before the network is
    built), the same batches (each epoch's permutation drawn after seeding with
    ``seed_ + epoch + 1``), the same Adam and the same loss.
    """
    X_t = torch.tensor(X)
    y_t = torch.tensor(y, dtype=torch.long)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = MLP(X.shape[1], int(y.max()) + 1)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        net.train()
        for epoch in range(epochs):
            torch.manual_seed(seed + epoch + 1)
            order = torch.randperm(len(X_t))
            for start in range(0, len(X_t), _BATCH):
                idx = order[start : start + _BATCH]
                opt.zero_grad()
                loss = _ngebm_loss(net, X_t[idx], y_t[idx], grad_norm, h)
                loss.backward()
                opt.step()
    return net


def bench_fit(rounds: int, warmup: int = 1, epochs: int = 2, n_samples: int | None = None) -> dict:
    """Per-epoch time of ``NGEBMClassifier.fit`` against :func:`_hand_fit`, on the CPU.

    Parameters
    ----------
    rounds, warmup : int
        See :func:`interleaved_times`.
    epochs : int, default=2
        Epochs per timed fit.
    n_samples : int or None, default=None
        Use the first ``n_samples`` digits only (all 1,797 by default).

    Returns
    -------
    dict of grad_norm mode -> {"fit", "hand_loop": summaries of the seconds per epoch,
    "max_abs_weight_difference": between the two trained networks}
    """
    from ..ngebm import NGEBMClassifier

    X, y = _digits()
    X, y = X[:n_samples], y[:n_samples]
    out = {}
    for mode in ("exact", "finite_difference"):
        est = NGEBMClassifier(
            grad_norm=mode, max_epochs=epochs, random_state=0, device="cpu", batch_size=_BATCH
        )
        est.fit(X, y)
        seed, h = est.seed_, est.fd_step_size_
        loss_mode = "exact" if mode == "exact" else "fd"
        hand = _hand_fit(X, y, seed, epochs, loss_mode, h)
        difference = max(
            float((a - b).detach().abs().max())
            for a, b in zip(est.module_.parameters(), hand.parameters(), strict=True)
        )
        tasks = {
            "fit": lambda est=est: est.fit(X, y),
            "hand_loop": lambda a=(X, y, seed, epochs, loss_mode, h): _hand_fit(*a),
        }
        times = interleaved_times(tasks, rounds, warmup)
        per_epoch = {
            name: {c: [t / epochs for t in v] for c, v in clocks.items()}
            for name, clocks in times.items()
        }
        out[mode] = {
            **_compare(per_epoch, "hand_loop", "cpu"),
            "max_abs_weight_difference": difference,
            "epochs": epochs,
            "n_samples": len(X),
        }
    return out


# ---------------------------------------------------------------------- inference


def _plain_predict_proba(net, X: np.ndarray, batch_size: int) -> np.ndarray:
    X_t = torch.from_numpy(X)
    out = []
    with torch.no_grad():
        for start in range(0, len(X_t), batch_size):
            out.append(torch.softmax(net(X_t[start : start + batch_size]), dim=1))
    return torch.cat(out).numpy()


def _plain_approx_mass(net, X: np.ndarray, batch_size: int) -> np.ndarray:
    X_t = torch.from_numpy(X)
    out = []
    for start in range(0, len(X_t), batch_size):
        norms, _, _ = energy_grad_norm(net, X_t[start : start + batch_size])
        out.append(norms.detach())
    return torch.cat(out).numpy()


def bench_inference(rounds: int, warmup: int = 1, copies: int = 5) -> dict:
    """Throughput of ``predict_proba`` and ``score_ood`` against plain batched PyTorch (CPU).

    Parameters
    ----------
    rounds, warmup : int
    copies : int, default=5
        The digits stacked this many times form the input.

    Returns
    -------
    dict of method -> {"estimator", "plain_torch": summaries, with samples per second}
    """
    from ..ngebm import NGEBMClassifier

    X_train, y_train = _digits()
    est = NGEBMClassifier(max_epochs=1, random_state=0, device="cpu").fit(X_train, y_train)
    X, _ = _digits(copies)
    net = est.module_.eval()
    tasks = {
        "predict_proba": lambda: est.predict_proba(X),
        "predict_proba_plain": lambda: _plain_predict_proba(net, X, _BATCH),
        "score_ood": lambda: est.score_ood(X),
        "score_ood_plain": lambda: _plain_approx_mass(net, X, _BATCH),
    }
    np.testing.assert_allclose(tasks["predict_proba"](), tasks["predict_proba_plain"](), rtol=1e-5)
    times = interleaved_times(tasks, rounds, warmup)
    out = {}
    for method in ("predict_proba", "score_ood"):
        pair = {"estimator": times[method], "plain_torch": times[f"{method}_plain"]}
        summary = _compare(pair, "plain_torch", "cpu")
        out[method] = {
            **summary,
            "estimator_samples_per_s": len(X) / (summary["estimator"]["median_ms"] / 1e3),
            "plain_samples_per_s": len(X) / (summary["plain_torch"]["median_ms"] / 1e3),
            "n_samples": len(X),
            "batch_size": _BATCH,
        }
    return out


# ---------------------------------------------------------------------- the whole run


def run_bench(quick: bool = False, device: str = "auto") -> dict:
    """Run the whole benchmark and return its figures as a JSON-ready dict.

    Parameters
    ----------
    quick : bool, default=False
        A few rounds of the small settings only (seconds; for tests, not for figures).
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where the GPU section runs; the step benchmark always runs on the CPU too, and the
        fit and inference benchmarks run on the CPU.

    Returns
    -------
    dict
        ``meta``, ``steps`` (CPU), ``fit``, ``inference`` and ``gpu`` (``None`` without CUDA).

    Examples
    --------
    The quick settings take some seconds (``python -m ebmclassifier bench`` runs the full one):

    >>> result = run_bench(quick=True, device="cpu")
    >>> sorted(result["steps"]), result["gpu"]
    (['conv_1x8x8', 'mlp_64'], None)
    >>> result["steps"]["mlp_64"]["ce"]["median_ms"] > 0
    True
    """
    resolved = _resolve_device(device)
    started = time.perf_counter()
    if quick:
        settings = {k: STEP_SETTINGS[k] for k in ("mlp_64", "conv_1x8x8")}
        steps = bench_steps(torch.device("cpu"), rounds=2, warmup=1, settings=settings)
        fit = bench_fit(rounds=2, warmup=0, epochs=1, n_samples=320)
        inference = bench_inference(rounds=2, warmup=0, copies=1)
    else:
        small = {k: v for k, v in STEP_SETTINGS.items() if k != "conv_3x32x32"}
        steps = bench_steps(torch.device("cpu"), rounds=15, warmup=3, settings=small)
        # Its JEM step alone takes about 1.5 s of CPU time.
        large = {"conv_3x32x32": STEP_SETTINGS["conv_3x32x32"]}
        steps.update(bench_steps(torch.device("cpu"), rounds=10, warmup=2, settings=large))
        fit = bench_fit(rounds=10, warmup=1, epochs=2)
        inference = bench_inference(rounds=5, warmup=1)
    gpu = None
    if resolved.type == "cuda":
        gpu = {
            "device_name": torch.cuda.get_device_name(resolved),
            "steps": bench_steps(resolved, rounds=3 if quick else 30, warmup=3, variants=True),
        }
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.platform(),
        "device": str(resolved),
        "quick": quick,
        "batch_size": _BATCH,
        "sgld": (
            "ebmclassifier.sampling.sgld"
            if _library_sgld is not None
            else "local SGLD loop in ebmclassifier/bench.py"
        ),
        "clock": "cpu (process time) on the CPU, wall (after synchronize) on CUDA",
        "seconds": time.perf_counter() - started,
    }
    return {"meta": meta, "steps": steps, "fit": fit, "inference": inference, "gpu": gpu}


def _step_table(steps: dict) -> list[str]:
    lines = []
    for setting, row in steps.items():
        cells = ", ".join(
            f"{name} {m['ratio']:.2f}x"
            for name, m in row.items()
            if isinstance(m, dict) and "clock" in m and name != "ce"
        )
        lines.append(f"  {setting:<13} CE {row['ce']['median_ms']:8.2f} ms | {cells}")
        lines.append(
            f"  {'':<13} JEM / NG-EBM fd {row['jem_vs_ngebm_fd']['ratio']:.2f}x; fd floor "
            f"{row['fd_floor']:.2f}x" + "".join(f"; {k} failed" for k in row["errors"])
        )
        for dtype, cosines in row["fd_cosine_to_exact"].items():
            cells = ", ".join(f"fd_step={k}: {v:.4f}" for k, v in cosines.items())
            lines.append(f"  {'':<13} fd gradient cosine to exact, {dtype}: {cells}")
    return lines


def format_bench(result: dict) -> str:
    """A short human-readable summary of :func:`run_bench`'s result.

    Parameters
    ----------
    result : dict
        From :func:`run_bench`.

    Returns
    -------
    str
        Step-cost ratios per setting, fit against a hand-written loop, inference throughput
        and the GPU section, one line each.

    Examples
    --------
    >>> text = format_bench(run_bench(quick=True, device="cpu"))
    >>> print(text.splitlines()[1])
    Training step, ratio to the CE step (median over interleaved rounds, CPU time):
    >>> text.splitlines()[-1]
    'GPU: no CUDA device, section skipped.'
    """
    meta = result["meta"]
    lines = [
        f"torch {meta['torch']}, {meta['threads']} thread(s), {meta['machine']}; "
        f"{meta['seconds']:.0f} s; JEM sampler: {meta['sgld']}",
        "Training step, ratio to the CE step (median over interleaved rounds, CPU time):",
        *_step_table(result["steps"]),
        "fit vs a hand-written loop, NG-EBM on digits (seconds per epoch, CPU time):",
    ]
    for mode, row in result["fit"].items():
        lines.append(
            f"  {mode:<18} fit {row['fit']['median_ms'] / 1e3:.3f} s, hand loop "
            f"{row['hand_loop']['median_ms'] / 1e3:.3f} s -> {row['fit']['ratio']:.3f}x "
            f"(weights differ by {row['max_abs_weight_difference']:.1e})"
        )
    lines.append("Inference throughput against plain batched torch (samples/s):")
    for method, row in result["inference"].items():
        lines.append(
            f"  {method:<14} estimator {row['estimator_samples_per_s']:10.0f}, plain "
            f"{row['plain_samples_per_s']:10.0f} -> {row['estimator']['ratio']:.3f}x the time"
        )
    if result["gpu"] is not None:
        lines.append(
            f"GPU ({result['gpu']['device_name']}), ratio to the float32 CE step (wall clock):"
        )
        lines += _step_table(result["gpu"]["steps"])
    else:
        lines.append("GPU: no CUDA device, section skipped.")
    return "\n".join(lines)


def _run_command(args) -> int:
    result = run_bench(quick=args.quick, device=args.device)
    print(format_bench(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


COMMAND = Command(
    name="bench",
    help="time CE, NG-EBM and JEM training steps, fit overhead and inference",
    description=(
        "Time one training step of CE, NG-EBM (exact and finite-difference) and JEM on the "
        "default networks, the epoch time of NGEBMClassifier.fit against a hand-written "
        "PyTorch loop, and inference throughput against plain PyTorch; with a GPU section "
        "when CUDA is present. On a shared machine run it with OMP_NUM_THREADS=1."
    ),
    options=(
        Option("--quick", "a few seconds; for tests only", {"action": "store_true"}),
        Option("--json", "also write the figures to PATH as JSON", {"metavar": "PATH"}),
        Option(
            "--device",
            "'auto' adds the GPU section when CUDA is present (default: auto)",
            {"choices": ("auto", "cpu", "cuda"), "default": "auto"},
        ),
    ),
    run=_run_command,
)
