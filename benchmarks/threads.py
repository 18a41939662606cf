"""Intra-op threads against network size, on a quiet machine and beside busy cores.

One NG-EBM training step (the estimators' default loss, ``0.5 CE + 0.5 mean ||dE/dx||`` by
double backprop, then Adam's step) on four networks, from the digits' default MLP to networks
a hundred times larger per batch, with torch's intra-op threads set to each count of
``--threads`` (``torch.set_num_threads``), while 0, 1, 2, ... other processes keep a core busy
each (``python -c "while True: pass"``, started here and ended after their block). Each round
runs every thread count once, in an order that rotates, after a warm-up; a run is ``--steps``
steps or 3 seconds, whichever comes first. The table gives the median time of a step per thread
count and its ratio to the first count. The networks have the layers of the library's defaults
(:class:`ebmclassifier.nn.MLP` and :class:`~ebmclassifier.nn.ConvNet`;
``tests/_utils/test_threads.py`` checks that they do the same work and the same loss), built
here from torch alone so that the script runs on any machine with torch. The
multiply-accumulates of one batch's forward pass (:func:`ebmclassifier._utils.threads.
forward_macs`) are what ``n_threads="auto"`` reads (``docs/performance.md``, "Threads on a
shared machine").

Two cores of a larger machine, quiet and beside one and two busy processes (``taskset``
keeps the script and the processes it starts on cores 0 and 1)::

    taskset -c 0,1 python benchmarks/threads.py --threads 1,2 --busy 0,1,2 --rounds 5

All the cores of a 16-core machine, quiet and beside two busy processes::

    python benchmarks/threads.py --threads 1,2,4,16 --busy 0,2 --rounds 3

``--fit`` times the estimator instead: a default ``NGEBMClassifier(max_epochs=10)`` fit of the
standardized digits with ``n_threads="auto"`` (the default) against ``n_threads=None`` (torch's
setting, all the cores), in the same rounds (needs the library; ``PYTHONPATH=.`` times the
checkout)::

    PYTHONPATH=. python benchmarks/threads.py --fit --busy 0,1 --rounds 5

``os.getloadavg()`` is printed at the start and end of each block: on a shared machine a block
whose load exceeds its busy processes by more than half a core ran beside someone else's work.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch
from torch import nn

#: name -> (network builder, batch shape, steps per run)
NETWORKS = {
    "MLP 256x256, digits (64 features), batch 64": (lambda: mlp(64, 256), (64, 64), 120),
    "ConvNet 32-64, digits (1x8x8), batch 64": (lambda: convnet(1, 8), (64, 1, 8, 8), 30),
    "MLP 1024x1024, 784 features, batch 128": (lambda: mlp(784, 1024), (128, 784), 12),
    "ConvNet 32-64, 3x32x32, batch 64": (lambda: convnet(3, 32), (64, 3, 32, 32), 4),
}


def mlp(n_features: int, width: int, n_classes: int = 10) -> nn.Sequential:
    """The layers of ``ebmclassifier.nn.MLP(n_features, n_classes, (width, width))``."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(n_features, width), nn.SiLU(),
        nn.Linear(width, width), nn.SiLU(),
        nn.Linear(width, n_classes),
    )  # fmt: skip


def convnet(channels: int, size: int, n_classes: int = 10) -> nn.Sequential:
    """The layers of ``ebmclassifier.nn.ConvNet((channels, size, size), n_classes)``."""
    layers: list[nn.Module] = []
    width = channels
    for out in (32, 64):  # a stride-1 and a stride-2 convolution per stage
        layers += [nn.Conv2d(width, out, 3, padding=1), nn.SiLU()]
        layers += [nn.Conv2d(out, out, 3, stride=2, padding=1), nn.SiLU()]
        width, size = out, (size + 1) // 2
    head = [nn.Flatten(), nn.Linear(width * size * size, 128), nn.SiLU(), nn.Linear(128, n_classes)]
    return nn.Sequential(*layers, *head)


def ngebm_exact_loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``0.5 CE(f(x), y) + 0.5 mean_i ||dE/dx(x_i)||``, ``E = -logsumexp f``, double backprop."""
    x = x.clone().requires_grad_(True)
    logits = net(x)
    (grad,) = torch.autograd.grad(-logits.logsumexp(1).sum(), x, create_graph=True)
    penalty = grad.flatten(1).norm(dim=1).mean()
    return 0.5 * nn.functional.cross_entropy(logits, y) + 0.5 * penalty


def seconds_per_step(net, optimizer, x, y, steps: int, threads: int) -> float:
    """Mean seconds of a training step over ``steps`` steps (or 3 s, at least 2 steps)."""
    torch.set_num_threads(threads)
    start, done = time.perf_counter(), 0
    while done < steps and (done < 2 or time.perf_counter() - start < 3.0):
        optimizer.zero_grad(set_to_none=True)
        ngebm_exact_loss(net, x, y).backward()
        optimizer.step()
        done += 1
    return (time.perf_counter() - start) / done


def time_network(name: str, threads: list[int], rounds: int) -> dict[int, float]:
    """Median seconds per step for each thread count, interleaved and rotated over rounds."""
    build, shape, steps = NETWORKS[name]
    net = build()
    x, y = torch.randn(shape), torch.randint(0, 10, (shape[0],))
    optimizer = torch.optim.Adam(net.parameters())
    seconds_per_step(net, optimizer, x, y, 2, threads[0])  # warm-up
    times: dict[int, list[float]] = {n: [] for n in threads}
    for r in range(rounds):
        shift = r % len(threads)
        for n in threads[shift:] + threads[:shift]:
            times[n].append(seconds_per_step(net, optimizer, x, y, steps, n))
    return {n: sorted(ts)[len(ts) // 2] for n, ts in times.items()}


def time_fits(rounds: int) -> dict[str, float]:
    """Median seconds of a default digits fit with ``n_threads="auto"`` and ``None``."""
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    from ebmclassifier import NGEBMClassifier

    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    times: dict[str, list[float]] = {"auto": [], "None": []}
    for r in range(rounds + 1):  # round 0 warms up
        for name in ("auto", "None") if r % 2 else ("None", "auto"):
            clf = NGEBMClassifier(
                max_epochs=10, random_state=0, n_threads="auto" if name == "auto" else None
            )
            start = time.perf_counter()
            clf.fit(X, y)
            if r:
                times[name].append(time.perf_counter() - start)
    return {name: sorted(ts)[len(ts) // 2] for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument("--busy", default="0,1,2", help="busy processes per block (default 0,1,2)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--fit", action="store_true", help="time the estimator's fit instead")
    args = parser.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"torch {torch.__version__}, {cpus} CPUs for this process; ms per step (ratio to "
          f"{threads[0]} thread(s)), median of {args.rounds} rounds")  # fmt: skip
    before = torch.get_num_threads()
    for n_busy in (int(b) for b in args.busy.split(",")):
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n_busy)]
        try:
            time.sleep(1.0)
            print(f"{n_busy} busy process(es); load average {os.getloadavg()[0]:.1f} at start")
            if args.fit:
                median = time_fits(args.rounds)
                print(
                    f"  digits fit, 10 epochs: n_threads='auto' {median['auto']:.2f} s, "
                    f"n_threads=None ({before} threads) {median['None']:.2f} s",
                    flush=True,
                )
            for name in () if args.fit else NETWORKS:
                median = time_network(name, threads, args.rounds)
                cells = [
                    f"{n} thr {median[n] * 1e3:8.2f} ms ({median[n] / median[threads[0]]:.2f}x)"
                    for n in threads
                ]
                print(f"  {name:45s} " + " | ".join(cells), flush=True)
            print(f"  load average {os.getloadavg()[0]:.1f} at end", flush=True)
        finally:
            torch.set_num_threads(before)
            for hog in hogs:
                hog.kill()
                hog.wait()


if __name__ == "__main__":
    main()
