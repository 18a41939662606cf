"""What a whole ``fit`` of NG-EBM costs over the same ``fit`` with ``beta=0``.

``python -m ebmclassifier bench`` times one training step on a fixed batch; this times the
whole ``fit`` (skorch's loop, the batching, the per-epoch seeding, the history, the host read
of each loss), so that the difference between the two ratios is what the fit adds beyond the
step. The setting of issue #23: the default ConvNet on the digits as 1x8x8 images,
standardized, batches of 64, 5 epochs, one thread, on the CPU.

The two fits run alternately in one process (the order rotates every round, after an untimed
warm-up round); the ratio is the median over rounds of the per-round ratio, on the CPU time of
the process (the steadier clock on a shared machine) and on the wall clock.

Run::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/fit_overhead.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

from ebmclassifier import NGEBMClassifier


def digits_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 digits, standardized per pixel, as (n, 1, 8, 8) float32 images."""
    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    return X.reshape(-1, 1, 8, 8).astype(np.float32), y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per fit (default 5)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, y = digits_images()
    common = dict(max_epochs=args.epochs, random_state=0, device="cpu")
    fits = {
        "ce": NGEBMClassifier(beta=0.0, **common),
        "ngebm_fd": NGEBMClassifier(grad_norm="finite_difference", **common),
    }
    names = list(fits)
    times = {name: {"cpu": [], "wall": []} for name in names}
    for r in range(1 + args.rounds):  # round 0: warm-up, not timed
        for name in names[r % 2 :] + names[: r % 2]:
            wall, cpu = time.perf_counter(), time.process_time()
            fits[name].fit(X, y)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if r:
                times[name]["cpu"].append(cpu)
                times[name]["wall"].append(wall)
    for clock in ("cpu", "wall"):
        ce, fd = (np.asarray(times[name][clock]) for name in names)
        ratios = fd / ce
        print(
            f"{clock:4s}: ce fit {np.median(ce):.2f} s, ngebm_fd fit {np.median(fd):.2f} s, "
            f"ratio {np.median(ratios):.2f}x [p10 {np.percentile(ratios, 10):.2f}, "
            f"p90 {np.percentile(ratios, 90):.2f}] over {len(ratios)} rounds"
        )


if __name__ == "__main__":
    main()
