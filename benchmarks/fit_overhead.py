"""What a whole ``fit`` of NG-EBM costs over the same ``fit`` with ``beta=0``.

``python -m ebmclassifier bench`` times one training step on a fixed batch; this times the
whole ``fit`` (skorch's loop, the batching, the per-epoch seeding, the history, the host read
of each loss), so that the difference between the two ratios is what the fit adds beyond the
step. The setting of issue #23: the default ConvNet on the digits as 1x8x8 images,
standardized, batches of 64, 5 epochs, one thread, on the CPU.

Four tasks run in every round, in an order that rotates (after an untimed warm-up round): the
two fits, and for comparison the same number of bare steps (``zero_grad``, loss, ``backward``,
``step``, as ``bench`` times them) on one fixed batch of 64, CE and NG-EBM (finite
difference). A ratio is the median over rounds of the per-round ratio, on the CPU time of the
process (the steadier clock on a shared machine) and on the wall clock. The minor page faults
of each task are printed too: the allocator returning memory to the system and faulting it
back in costs kernel time that shows in both clocks, whatever the loop.

Run from the repository root (``PYTHONPATH=.`` times the checkout, not an installed copy)::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=. python benchmarks/fit_overhead.py
"""

from __future__ import annotations

import argparse
import copy
import resource
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

from ebmclassifier import NGEBMClassifier
from ebmclassifier.losses import fd_step_size, ngebm_loss


def digits_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 digits, standardized per pixel, as (n, 1, 8, 8) float32 images."""
    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    return X.reshape(-1, 1, 8, 8).astype(np.float32), y


def bare_steps(model, x, y, n_steps: int, **objective):
    """``n_steps`` training steps on one batch, on a copy of ``model`` with its own Adam."""
    net = copy.deepcopy(model)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def run():
        for _ in range(n_steps):
            opt.zero_grad(set_to_none=True)
            loss, _ = ngebm_loss(net, x, y, **objective)
            loss.backward()
            opt.step()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per fit (default 5)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, y = digits_images()
    common = dict(max_epochs=args.epochs, random_state=0, device="cpu")
    ce = NGEBMClassifier(beta=0.0, **common)
    fd = NGEBMClassifier(grad_norm="finite_difference", **common)
    # the bare steps: as many as a fit takes, on the network the fit builds
    n_steps = args.epochs * -(-len(X) // 64)
    model = NGEBMClassifier(max_epochs=0, random_state=0, device="cpu").fit(X, y).module_
    xb, yb = torch.tensor(X[:64]), torch.tensor(y[:64])
    fd_objective = dict(beta=0.5, grad_norm="finite_difference", step=fd_step_size(X))
    tasks = {
        "fit_ce": lambda: ce.fit(X, y),
        "fit_ngebm_fd": lambda: fd.fit(X, y),
        "steps_ce": bare_steps(model, xb, yb, n_steps, beta=0.0),
        "steps_ngebm_fd": bare_steps(model, xb, yb, n_steps, **fd_objective),
    }
    names = list(tasks)
    times = {name: {"cpu": [], "wall": [], "faults": []} for name in names}
    for r in range(1 + args.rounds):  # round 0: warm-up, not timed
        for name in names[r % len(names) :] + names[: r % len(names)]:
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            wall, cpu = time.perf_counter(), time.process_time()
            tasks[name]()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if r:
                times[name]["cpu"].append(cpu)
                times[name]["wall"].append(wall)
                times[name]["faults"].append(
                    resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
                )
    print(f"{args.rounds} rounds, {n_steps} steps per task (medians; ratio [p10, p90])")
    for kind in ("fit", "steps"):
        for clock in ("cpu", "wall"):
            base, new = (np.asarray(times[f"{kind}_{m}"][clock]) for m in ("ce", "ngebm_fd"))
            ratios = new / base
            p10, p90 = np.percentile(ratios, [10, 90])
            print(
                f"{kind:5s} {clock:4s}: ce {np.median(base):.2f} s, "
                f"ngebm_fd {np.median(new):.2f} s, ratio {np.median(ratios):.2f}x "
                f"[{p10:.2f}, {p90:.2f}]"
            )
    faults = ", ".join(f"{name} {int(np.median(times[name]['faults']))}" for name in names)
    print(f"minor page faults per task: {faults}")


if __name__ == "__main__":
    main()
