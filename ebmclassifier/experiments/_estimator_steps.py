"""Training steps through the public estimators, per precision and compiled, against the
library's own step on the same network and batch (the wrapper's overhead).

:func:`bench_estimators` fits ``NGEBMClassifier`` (cross-entropy with ``beta=0``, the exact and
the finite-difference gradient norm) and ``JEMClassifier`` on random images of the given
shape, ``steps`` batches per epoch for ``epochs`` epochs, in each variant (``float32``,
``bf16`` = ``precision="bfloat16"``, ``bf16_compile`` = that and ``compile=True``). The first
epoch is the warm-up (it compiles); the median of the others per step is the estimator's step.
The library's own step (:func:`~ebmclassifier.experiments._steps.make_step_tasks`: the same
objective, autocast and compilation on a copy of the fitted network, a fixed batch) is timed
as many times, and their ratio is what ``fit`` adds. ``benchmarks/gpu_check.py`` runs it on
WRN-28-10 and CIFAR-shaped images; ``bench --device cuda`` on the default ConvNet.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._utils.precision import FD_STEPS
from ..jem import JEMClassifier
from ..ngebm import NGEBMClassifier
from ._steps import SGLD_STEPS, make_step_tasks
from ._timing import interleaved_times, sync_for
from .models import network_params

__all__ = ["ESTIMATOR_VARIANTS", "bench_estimators"]

CIFAR_TRAIN_IMAGES = 50_000
PAPER_EPOCHS = 150
METHODS = ("ce", "ngebm_exact", "ngebm_fd", "jem")
#: name -> the estimator parameters of the variant.
ESTIMATOR_VARIANTS = {
    "float32": {},
    "bf16": {"precision": "bfloat16"},
    "bf16_compile": {"precision": "bfloat16", "compile": True},
}


def _estimator(method: str, params: dict, sgld_steps: int, buffer_size: int):
    if method == "jem":  # the papers' sampler: a uniform start, as JEM trained CIFAR
        return JEMClassifier(
            sgld_steps=sgld_steps, buffer_size=buffer_size, buffer_init="uniform", **params
        )
    objective = {"ce": {"beta": 0.0}, "ngebm_exact": {}, "ngebm_fd": {}}[method]
    grad_norm = "finite_difference" if method == "ngebm_fd" else "exact"
    return NGEBMClassifier(grad_norm=grad_norm, **objective, **params)


def _own_step_ms(estimator, method: str, X, y, rounds: int, compile_kwargs: dict) -> float:
    """The median wall time of the library's own step on the fitted network, in ms."""
    device = estimator.device_
    batch = estimator.batch_size
    x = torch.tensor(X[:batch], device=device)
    yb = torch.tensor(y[:batch], dtype=torch.long, device=device)
    bf16 = estimator.precision == "bfloat16"
    (step,) = make_step_tasks(
        estimator.module_,
        x,
        yb,
        methods=(method,),
        autocast_dtype=torch.bfloat16 if bf16 else None,
        compile_model=bool(estimator.compile),
        fd_step=FD_STEPS[estimator.precision],
        compile_kwargs=compile_kwargs,
    ).values()
    times = interleaved_times({"own": step}, rounds, warmup=2, sync=sync_for(device))
    return 1e3 * float(np.median(times["own"]["wall"]))


def _row(estimator, steps: int, batch: int, device: torch.device) -> dict:
    epochs = [float(d) for d in estimator.history[:, "dur"]]
    timed = float(np.median(epochs[1:])) if len(epochs) > 1 else epochs[0]
    step_s = timed / steps
    cifar_epoch_s = step_s * math.ceil(CIFAR_TRAIN_IMAGES / batch)
    row = {
        "epoch_seconds": epochs,
        "step_ms": 1e3 * step_s,
        "cifar10_epoch_s": cifar_epoch_s,
        "gpu_hours_150_epochs": cifar_epoch_s * PAPER_EPOCHS / 3600,
        "final_train_loss": float(estimator.history[-1, "train_loss"]),
    }
    if device.type == "cuda":
        row["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    if hasattr(estimator, "n_divergences_"):
        row["n_divergences"] = int(estimator.n_divergences_)
    return row


def bench_estimators(
    device: torch.device,
    *,
    network: str = "default",
    image: tuple[int, ...] = (3, 32, 32),
    batch_size: int = 64,
    steps: int = 30,
    epochs: int = 3,
    sgld_steps: int = SGLD_STEPS,
    buffer_size: int = 10_000,
    variants: tuple[str, ...] = tuple(ESTIMATOR_VARIANTS),
    methods: tuple[str, ...] = METHODS,
    compile_kwargs: dict | None = None,
    keep: dict | None = None,
) -> dict:
    """Time each method's step through the estimators in each variant, and their own step.

    Parameters
    ----------
    device : torch.device
    network : str, default="default"
        As ``compare --network``: ``"default"``, ``"mlp"`` or ``"wrn-D-K"``.
    image : tuple of int, default=(3, 32, 32)
        The sample shape of the random training images (``steps * batch_size`` of them).
    batch_size, steps, epochs : int
        Batches of ``batch_size``, ``steps`` per epoch; the first epoch is the warm-up.
    sgld_steps, buffer_size : int
        JEM's; the own step of JEM is timed only with the bench's 20 SGLD steps.
    variants : tuple of str
        Keys of :data:`ESTIMATOR_VARIANTS`.
    methods : tuple of str
        Among ``"ce"``, ``"ngebm_exact"``, ``"ngebm_fd"``, ``"jem"``.
    compile_kwargs : dict or None
        The estimators' ``compile__*`` parameters (e.g. ``{"backend": "aot_eager"}``).
    keep : dict or None
        Receives every fitted estimator, by its row's name (to pickle them afterwards).

    Returns
    -------
    dict
        ``rows``: ``"<method>_<variant>"`` -> ``step_ms``, ``cifar10_epoch_s``,
        ``gpu_hours_150_epochs``, ``own_step_ms`` and ``wrapper_ratio`` (estimator over own
        step), ``ratio_to_ce_float32``, ``ratio_to_ce`` (the same variant's CE), peak memory
        on CUDA; ``errors``: the rows that could not run, with why (``compile=True`` refuses
        the exact double backward); and the settings.
    """
    compile_kwargs = compile_kwargs or {}
    n = steps * batch_size
    X = np.random.default_rng(0).standard_normal((n, *image), dtype=np.float32)
    y = np.arange(n) % 10
    common = dict(
        network_params(network),
        batch_size=batch_size,
        max_epochs=epochs,
        lr=1e-4,
        device=str(device),
        random_state=0,
        **{f"compile__{k}": v for k, v in compile_kwargs.items()},
    )
    rows, errors = {}, {}
    for variant in variants:
        for method in methods:
            name = f"{method}_{variant}"
            params = {**common, **ESTIMATOR_VARIANTS[variant]}
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            try:
                estimator = _estimator(method, params, sgld_steps, buffer_size).fit(X, y)
                rows[name] = _row(estimator, steps, batch_size, device)
                if method != "jem" or sgld_steps == SGLD_STEPS:
                    own = _own_step_ms(estimator, method, X, y, steps, compile_kwargs)
                    rows[name].update(own_step_ms=own, wrapper_ratio=rows[name]["step_ms"] / own)
            except Exception as exc:  # one row failing must not hide the others' figures
                errors[name] = f"{type(exc).__name__}: {exc}"[:500]
                continue
            if keep is not None:
                keep[name] = estimator
    _ratios(rows)
    return {
        "network": network,
        "image": list(image),
        "batch_size": batch_size,
        "steps_per_epoch": steps,
        "epochs": epochs,
        "extrapolated_to": f"{CIFAR_TRAIN_IMAGES} images per epoch, {PAPER_EPOCHS} epochs",
        "rows": rows,
        "errors": errors,
    }


def _ratios(rows: dict) -> None:
    """Each row's step over the float32 CE step, and over its own variant's CE step."""
    reference = rows.get("ce_float32", {}).get("step_ms")
    for name, row in rows.items():
        method = next(m for m in METHODS if name.startswith(m + "_"))
        ce = rows.get(f"ce_{name[len(method) + 1 :]}", {}).get("step_ms")
        if reference:
            row["ratio_to_ce_float32"] = row["step_ms"] / reference
        if ce:
            row["ratio_to_ce"] = row["step_ms"] / ce
