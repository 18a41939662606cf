"""What an image fit costs on a CPU: one epoch of the default ConvNet on 3x32x32 images.

A user's first image fit (20,000 ``uint8`` images from a memmap, the default network and
parameters) can take hours per epoch on a CPU. This measures one epoch on a smaller number of
such images, per setting, and scales it to 20,000 and 50,000 images (a CIFAR-10 training set):
the epoch's cost is proportional to its batches, as every batch is the same work. Each
setting is fitted once for a few batches first (untimed: the allocator and the first calls),
then for one epoch, timed by the process's CPU time (which other processes on the machine
affect little) and by the wall clock. Settings: cross-entropy (``beta=0``), NG-EBM as it
comes (``grad_norm="exact"``), NG-EBM's finite difference, its cheaper penalty
(``penalty_every=4``), NG-EBM on a smaller ConvNet, and JEM.

``--watch SECONDS`` instead runs the issue's fit, ``NGEBMClassifier()`` at its defaults on a
memmap of 20,000 random ``uint8`` images, in a child process for that long, and reports when
its progress first showed on stderr and the last line it drew (the batch, the epoch and the
estimate of the time left).

    OMP_NUM_THREADS=1 python benchmarks/image_fit_cost.py --images 640
    python benchmarks/image_fit_cost.py --watch 60 [--watch-threads 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from quoted_figures import cpu_name  # this folder's: one reading of the CPU's name

from ebmclassifier import JEMClassifier, NGEBMClassifier

SMALL = {"module__channels": (16, 32), "module__hidden_size": 64}
#: name: (what it is, estimator, parameters)
SETTINGS = {
    "ce": ("CE (beta=0)", NGEBMClassifier, {"beta": 0.0}),
    "ngebm": ("NG-EBM as it comes (exact)", NGEBMClassifier, {}),
    "ngebm_fd": ("NG-EBM, finite_difference", NGEBMClassifier, {"grad_norm": "finite_difference"}),
    "ngebm_every4": ("NG-EBM, penalty_every=4", NGEBMClassifier, {"penalty_every": 4}),
    "ngebm_small": ("NG-EBM, ConvNet 16-32, hidden 64", NGEBMClassifier, SMALL),
    "ce_small": ("CE, ConvNet 16-32, hidden 64", NGEBMClassifier, {"beta": 0.0, **SMALL}),
    "jem": ("JEM (20 SGLD steps)", JEMClassifier, {}),
}


def _memmap(folder: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    path = folder / f"images_{n}.npy"
    if not path.exists():
        np.save(path, rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8))
    return np.load(path, mmap_mode="r"), np.arange(n) % 10


def _epoch(cls, params, X, y, threads: int) -> tuple[float, float]:
    """(CPU s, wall s) of one epoch on ``X``."""
    common = {"random_state": 0, "n_threads": threads, "callbacks__progress_bar": None}
    cls(max_epochs=1, **common, **params).fit(X[:128], y[:128])  # warm-up, untimed
    cpu, wall = time.process_time(), time.perf_counter()
    cls(max_epochs=1, **common, **params).fit(X, y)
    return time.process_time() - cpu, time.perf_counter() - wall


def measure(n_images: int, threads: int, settings) -> None:
    print(
        f"torch {torch.__version__}, {threads} thread(s), {cpu_name()} ({os.cpu_count()} CPUs); "
        f"load average at the start {os.getloadavg()[0]:.2f}"
    )
    print(f"one epoch on {n_images} uint8 3x32x32 images (a memmap), batches of 64:")
    with tempfile.TemporaryDirectory() as folder:
        X, y = _memmap(Path(folder), n_images)
        for name in settings:
            what, cls, params = SETTINGS[name]
            cpu, wall = _epoch(cls, params, X, y, threads)
            epoch = cpu / n_images * 20_000 / 60  # minutes of CPU per epoch of 20,000
            print(
                f"  {what:<34} {cpu:6.2f} s CPU ({wall:6.2f} s wall); scaled to 20,000 images: "
                f"{epoch:5.2f} min per epoch, {epoch * 50:6.1f} min for 50 epochs; 50,000: "
                f"{epoch * 2.5:5.2f} min per epoch"
            )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


_WATCHED = """
import sys, numpy as np
from ebmclassifier import NGEBMClassifier
X = np.load(sys.argv[1], mmap_mode="r")
threads = "auto" if sys.argv[2] == "auto" else int(sys.argv[2])
print("fit begins", file=sys.stderr, flush=True)
NGEBMClassifier(n_threads=threads).fit(X, np.arange(len(X)) % 10)
"""


def watch(seconds: float, threads: str = "auto") -> None:
    """Run the default fit on 20,000 images for ``seconds`` and report what it drew, timed
    from the start of the process and from the call of ``fit`` (after the imports)."""
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        _memmap(Path(folder), 20_000)
        path = Path(folder) / "images_20000.npy"
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", _WATCHED, str(path), threads],
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[tuple[float, str]] = []

        def read() -> None:
            part = ""
            while (char := child.stderr.read(1)) != "":
                if char in "\r\n":
                    if part.strip():
                        seen.append((time.perf_counter() - start, part.strip()))
                    part = ""
                else:
                    part += char

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(seconds)
        child.kill()
        child.wait()
    drawn = [(t, line) for t, line in seen if line.startswith("NGEBMClassifier")]
    began = next((t for t, line in seen if line == "fit begins"), 0.0)
    print(f"n_threads={threads}; fit called {began:.1f} s after the process started")
    if not drawn:
        print(f"nothing drawn in {seconds:.0f} s; stderr: {seen[-3:]}")
    else:
        first, last = drawn[0], drawn[-1]
        print(f"first progress {first[0] - began:.1f} s after fit was called: {first[1]}")
        print(f"last {last[0] - began:.1f} s after fit was called: {last[1]}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=640)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--settings", default=",".join(SETTINGS), help=f"comma-separated, of {', '.join(SETTINGS)}"
    )
    parser.add_argument("--watch", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--watch-threads", default="auto", help="n_threads of the watched fit")
    args = parser.parse_args()
    if args.watch is not None:
        watch(args.watch, args.watch_threads)
    else:
        measure(args.images, args.threads, args.settings.split(","))


if __name__ == "__main__":
    main()
