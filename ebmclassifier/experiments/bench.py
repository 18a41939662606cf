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
4. **Inference memory.** How far memory peaks above the input while ``predict_proba``,
   ``energy`` and ``score_ood(method="approx_mass")`` run on a million rows, as a multiple of
   the input's size (:mod:`ebmclassifier.experiments._memory`).

Timings are interleaved: every round runs each contender once, in a rotating order, after
warm-up rounds, and a ratio is the median over rounds of the per-round ratio, so slow drift
of a shared machine cancels. Medians and 10th/90th percentiles are reported in milliseconds.

Every step and the hand-written loop train the objectives the estimators train, the functions
of :mod:`ebmclassifier.losses`, with the library's SGLD and replay buffer
(:mod:`ebmclassifier.sampling`), on the network ``NGEBMClassifier`` builds for the data.

When CUDA is present (or ``device="cuda"``), the step benchmark also runs on the GPU, with
variants under bf16 autocast (every method) and ``torch.compile`` (the first-order ones: no
double backward through compiled code), and the estimators themselves train the default
ConvNet on 3x32x32 images in each precision and compiled, against the library's own step on
the same network (:func:`bench_estimators`; ``benchmarks/gpu_check.py`` runs it on WRN-28-10).
``--gpu-only`` leaves out the CPU sections.
"""

from __future__ import annotations

import json
import platform
import time

import numpy as np
import torch

from .._utils.atomic import write_file
from .._utils.device import resolve_device
from ..energy import energy_grad_norm
from ..losses import ngebm_loss
from ..ngebm import NGEBMClassifier
from ..nn import MLP
from ._estimator_steps import bench_estimators
from ._memory import bench_memory
from ._steps import BATCH, BETA, STEP_SETTINGS, bench_steps, digits
from ._timing import (
    UNRELIABLE,
    UNRELIABLE_NOTE,
    busy_note,
    compare_times,
    interleaved_times,
    machine_load,
    mark_spread,
    summarize,
)

__all__ = ["bench_estimators", "format_bench", "interleaved_times", "run_bench", "summarize"]


# ---------------------------------------------------------------------- fit vs hand loop


def _hand_fit(X: np.ndarray, y: np.ndarray, seed: int, epochs: int, grad_norm: str, h: float):
    """What ``NGEBMClassifier(random_state=...).fit`` does, written as a plain PyTorch loop.

    Same initial weights (torch seeded with the estimator's ``seed_`` before the network is
    built), the same batches (each epoch's permutation drawn after seeding with
    ``seed_ + epoch + 1``), the same Adam and the same loss.
    """
    X_t = torch.tensor(X)
    y_t = torch.tensor(y, dtype=torch.long)
    objective = {"beta": BETA, "grad_norm": grad_norm, "step": h}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = MLP(X.shape[1], int(y.max()) + 1)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        net.train()
        for epoch in range(epochs):
            torch.manual_seed(seed + epoch + 1)
            order = torch.randperm(len(X_t))
            for start in range(0, len(X_t), BATCH):
                idx = order[start : start + BATCH]
                opt.zero_grad()
                loss, _ = ngebm_loss(net, X_t[idx], y_t[idx], **objective)
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
    X, y = digits()
    X, y = X[:n_samples], y[:n_samples]
    out = {}
    for mode in ("exact", "finite_difference"):
        est = NGEBMClassifier(
            grad_norm=mode, max_epochs=epochs, random_state=0, device="cpu", batch_size=BATCH
        )
        est.fit(X, y)
        seed, h = est.seed_, est.fd_step_size_
        hand = _hand_fit(X, y, seed, epochs, mode, h)
        difference = max(
            float((a - b).detach().abs().max())
            for a, b in zip(est.module_.parameters(), hand.parameters(), strict=True)
        )
        tasks = {
            "fit": lambda est=est: est.fit(X, y),
            "hand_loop": lambda a=(X, y, seed, epochs, mode, h): _hand_fit(*a),
        }
        times = interleaved_times(tasks, rounds, warmup)
        per_epoch = {
            name: {c: [t / epochs for t in v] for c, v in clocks.items()}
            for name, clocks in times.items()
        }
        out[mode] = {
            **compare_times(per_epoch, "hand_loop", "cpu"),
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
    X_train, y_train = digits()
    est = NGEBMClassifier(max_epochs=1, random_state=0, device="cpu").fit(X_train, y_train)
    X, _ = digits(copies)
    net = est.module_.eval()
    tasks = {
        "predict_proba": lambda: est.predict_proba(X),
        "predict_proba_plain": lambda: _plain_predict_proba(net, X, BATCH),
        "score_ood": lambda: est.score_ood(X),
        "score_ood_plain": lambda: _plain_approx_mass(net, X, BATCH),
    }
    np.testing.assert_allclose(tasks["predict_proba"](), tasks["predict_proba_plain"](), rtol=1e-5)
    times = interleaved_times(tasks, rounds, warmup)
    out = {}
    for method in ("predict_proba", "score_ood"):
        pair = {"estimator": times[method], "plain_torch": times[f"{method}_plain"]}
        summary = compare_times(pair, "plain_torch", "cpu")
        out[method] = {
            **summary,
            "estimator_samples_per_s": len(X) / (summary["estimator"]["median_ms"] / 1e3),
            "plain_samples_per_s": len(X) / (summary["plain_torch"]["median_ms"] / 1e3),
            "n_samples": len(X),
            "batch_size": BATCH,
        }
    return out


# ---------------------------------------------------------------------- the whole run


def run_bench(
    quick: bool = False, device: str = "auto", memory: bool = True, gpu_only: bool = False
) -> dict:
    """Run the whole benchmark and return its figures as a JSON-ready dict.

    Parameters
    ----------
    quick : bool, default=False
        A few rounds of the small settings only (seconds; for tests, not for figures).
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where the GPU section runs; the step benchmark always runs on the CPU too, and the
        fit and inference benchmarks run on the CPU.
    memory : bool, default=True
        Measure the peak memory of inference (a fresh Python process per measurement: about
        ten seconds with ``quick``, a minute or two without).
    gpu_only : bool, default=False
        Leave out the CPU sections (``steps``, ``fit``, ``inference`` and ``memory`` are then
        ``None``).

    Returns
    -------
    dict
        ``meta``, ``steps`` (CPU), ``fit``, ``inference``, ``memory`` (peak memory of
        inference over the input's size; ``None`` without ``memory``) and ``gpu`` (``None``
        without CUDA: the step benchmark with its variants, and ``estimators``, see
        :func:`bench_estimators`).

    Examples
    --------
    The quick settings take some seconds (``python -m ebmclassifier bench`` runs the full one):

    >>> result = run_bench(quick=True, device="cpu", memory=False)
    >>> sorted(result["steps"]), result["gpu"]
    (['conv_1x8x8', 'mlp_64'], None)
    >>> result["steps"]["mlp_64"]["ce"]["median_ms"] > 0
    True
    """
    resolved = resolve_device(device)
    started, load_start = time.perf_counter(), machine_load()
    cpu = dict.fromkeys(("steps", "fit", "inference", "memory"))
    if not gpu_only:
        cpu = _cpu_sections(quick, memory)
    gpu = None
    if resolved.type == "cuda":
        gpu = {
            "device_name": torch.cuda.get_device_name(resolved),
            "steps": bench_steps(resolved, rounds=3 if quick else 30, warmup=3, variants=True),
            "estimators": bench_estimators(resolved, steps=5 if quick else 30),
        }
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.platform(),
        "device": str(resolved),
        "quick": quick,
        "batch_size": BATCH,
        "sgld": "ebmclassifier.sampling.sgld",
        "clock": "cpu (process time) on the CPU, wall (after synchronize) on CUDA",
        "seconds": time.perf_counter() - started,
        "load": {"start": load_start, "end": machine_load()},
    }
    return {"meta": meta, **cpu, "gpu": gpu}


def _cpu_sections(quick: bool, memory: bool) -> dict:
    """The steps, the fit, inference and its memory, on the CPU."""
    if quick:
        settings = {k: STEP_SETTINGS[k] for k in ("mlp_64", "conv_1x8x8")}
        steps = bench_steps(torch.device("cpu"), rounds=2, warmup=1, settings=settings)
        fit = bench_fit(rounds=2, warmup=0, epochs=1, n_samples=320)
        inference = bench_inference(rounds=2, warmup=0, copies=1)
        sizes = (100_000, ("float32",), ("predict_proba", "approx_mass"))
    else:
        small = {k: v for k, v in STEP_SETTINGS.items() if k != "conv_3x32x32"}
        steps = bench_steps(torch.device("cpu"), rounds=15, warmup=3, settings=small)
        # Its JEM step alone takes about 1.5 s of CPU time.
        large = {"conv_3x32x32": STEP_SETTINGS["conv_3x32x32"]}
        steps.update(bench_steps(torch.device("cpu"), rounds=10, warmup=2, settings=large))
        fit = bench_fit(rounds=10, warmup=1, epochs=2)
        inference = bench_inference(rounds=5, warmup=1)
        sizes = (1_000_000, ("float32", "float64"), ("predict_proba", "energy", "approx_mass"))
    return {
        "steps": steps,
        "fit": fit,
        "inference": inference,
        "memory": bench_memory(*sizes) if memory else None,
    }


def _ratio(m: dict) -> str:
    """A ratio of :func:`summarize` (or of a step's headline clock), marked unreliable when its
    rounds spread widely (10th to 90th percentile)."""
    m = m[m["clock"]] if "clock" in m else m
    return mark_spread(f"{m['ratio']:.2f}x", m["ratio_p10"], m["ratio_p90"])


def _step_table(steps: dict) -> list[str]:
    lines = []
    for setting, row in steps.items():
        cells = ", ".join(
            f"{name} {_ratio(m)}"
            for name, m in row.items()
            if isinstance(m, dict) and "clock" in m and name != "ce"
        )
        lines.append(f"  {setting:<13} CE {row['ce']['median_ms']:8.2f} ms | {cells}")
        lines.append(
            f"  {'':<13} JEM / NG-EBM fd {_ratio(row['jem_vs_ngebm_fd'])}; fd floor "
            f"{row['fd_floor']:.2f}x" + "".join(f"; {k} failed" for k in row["errors"])
        )
        for dtype, cosines in row["fd_cosine_to_exact"].items():
            cells = ", ".join(f"fd_step={k}: {v:.4f}" for k, v in cosines.items())
            lines.append(f"  {'':<13} fd gradient cosine to exact, {dtype}: {cells}")
    return lines


def _memory_table(memory: dict) -> list[str]:
    first = next(iter(memory.values()))
    lines = [
        f"Inference memory, {first['n_rows']:,} rows x 64 (peak above the input, as a multiple "
        "of the input; 0 = nothing beyond it):"
    ]
    for name, row in memory.items():
        ratio = "n/a" if row["ratio_to_input"] is None else f"{row['ratio_to_input']:.2f}x"
        bound = "" if row["exact"] else " (lower bound)"
        output = row["output_mb"] / row["input_mb"]
        lines.append(
            f"  {name:<22} {ratio}{bound} of {row['input_mb']:.0f} MB; output {output:.2f}x; "
            f"numpy/python {row['traced_ratio_to_input']:.2f}x"
        )
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
        Step-cost ratios per setting, fit against a hand-written loop, inference throughput,
        inference memory and the GPU section, one line each.

    Examples
    --------
    A quick run says what ran, without its meaningless times:

    >>> text = format_bench(run_bench(quick=True, device="cpu", memory=False))
    >>> print(text.splitlines()[1][:50])
    Quick run: every part ran; its one or two rounds t
    >>> text.splitlines()[-1]
    'GPU: no CUDA device, section skipped.'
    """
    meta = result["meta"]
    lines = [
        f"torch {meta['torch']}, {meta['threads']} thread(s), {meta['machine']}; "
        f"{meta['seconds']:.0f} s; JEM sampler: {meta['sgld']}",
    ]
    if meta["quick"] and result["steps"] is not None:
        return "\n".join(lines + _quick_summary(result))
    if result["steps"] is not None:
        lines += _cpu_lines(result)
    if result["memory"] is not None:
        lines += _memory_table(result["memory"])
    if result["gpu"] is not None:
        lines.append(
            f"GPU ({result['gpu']['device_name']}), ratio to the float32 CE step (wall clock):"
        )
        lines += _step_table(result["gpu"]["steps"])
        lines += _estimator_table(result["gpu"]["estimators"])
    else:
        lines.append("GPU: no CUDA device, section skipped.")
    note = busy_note(meta["load"]["start"], meta["load"]["end"], meta["threads"])
    lines += [note] if note else []
    lines += [UNRELIABLE_NOTE] if any(UNRELIABLE in line for line in lines) else []
    return "\n".join(lines)


def _cpu_lines(result: dict) -> list[str]:
    lines = [
        "Training step, ratio to the CE step (median over interleaved rounds, CPU time):",
        *_step_table(result["steps"]),
        "fit vs a hand-written loop, NG-EBM on digits (seconds per epoch, CPU time):",
    ]
    for mode, row in result["fit"].items():
        lines.append(
            f"  {mode:<18} fit {row['fit']['median_ms'] / 1e3:.3f} s, hand loop "
            f"{row['hand_loop']['median_ms'] / 1e3:.3f} s -> {_ratio(row['fit'])} "
            f"(weights differ by {row['max_abs_weight_difference']:.1e})"
        )
    lines.append("Inference throughput against plain batched torch (samples/s):")
    for method, row in result["inference"].items():
        lines.append(
            f"  {method:<14} estimator {row['estimator_samples_per_s']:10.0f}, plain "
            f"{row['plain_samples_per_s']:10.0f} -> {_ratio(row['estimator'])} the time"
        )
    return lines


def _estimator_table(section: dict) -> list[str]:
    lines = [
        f"Estimators on {section['network']} {tuple(section['image'])}, batches of "
        f"{section['batch_size']} (ms per step; fit over the library's own step):"
    ]
    for name, row in section["rows"].items():
        wrapper = f", fit / own step {row['wrapper_ratio']:.3f}" if "wrapper_ratio" in row else ""
        lines.append(
            f"  {name:<24} {row['step_ms']:8.2f} ms, {row.get('ratio_to_ce_float32', 0):.2f}x "
            f"float32 CE, {row.get('ratio_to_ce', 0):.2f}x its CE{wrapper}"
        )
    lines += [f"  {name}: {why[:120]}" for name, why in section["errors"].items()]
    return lines


def _quick_summary(result: dict) -> list[str]:
    """What a quick run checked, without its times: two rounds measure nothing."""
    ran = {
        setting: ", ".join(k for k, m in row.items() if isinstance(m, dict) and "clock" in m)
        for setting, row in result["steps"].items()
    }
    lines = [
        "Quick run: every part ran; its one or two rounds time nothing, so no time or ratio "
        "is printed (the JSON keeps them). Run without --quick to measure (a few minutes).",
        "Training steps ran: " + "; ".join(f"{k} ({v})" for k, v in ran.items()),
    ]
    for mode, row in result["fit"].items():
        lines.append(
            f"fit vs a hand-written loop, {mode}: the weights differ by "
            f"{row['max_abs_weight_difference']:.1e}"
        )
    lines.append("Inference ran: " + ", ".join(result["inference"]))
    if result["memory"] is not None:
        lines += _memory_table(result["memory"])
    lines.append("GPU: no CUDA device, section skipped." if result["gpu"] is None else "GPU: ran.")
    return lines


def _run_command(args) -> int:
    result = run_bench(quick=args.quick, device=args.device, gpu_only=args.gpu_only)
    print(format_bench(result))
    if args.json:
        write_file(args.json, json.dumps(result, indent=2))
    return 0
