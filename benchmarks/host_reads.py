"""How many times one training step reads a tensor back to the host, and from where.

On a GPU every such read (``.item()``, ``bool(t)``, ``int(t)``, ``float(t)``, ``.tolist()``,
``.cpu()``, ``.numpy()``) waits for the device to finish the queued work: the Python side stops
queueing kernels until the GPU has caught up. This script counts them on the CPU (the code
path is the same) by wrapping those methods of ``torch.Tensor`` during a fit, and prints the
reads per training step of each estimator's mode, by the line of the library (or of skorch)
that made them. The reads of one-off work (validation of the input, the first batch's checks,
the per-epoch health probe) are spread over the steps, so a fit of many steps shows what each
step costs.

    PYTHONPATH=. python benchmarks/host_reads.py
    PYTHONPATH=. python benchmarks/host_reads.py --epochs 5 --weights   # with sample_weight

A read listed under ``skorch/net.py`` is skorch's history (``step["loss"].item()`` per
batch); the training step hands it a CPU copy of the loss on a GPU, so it does not wait again.
Those under ``torch/optim`` read Adam's step counters, which torch keeps on the CPU (unless
``capturable=True``): no wait either.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "cpu", "numpy")


def _site() -> str:
    """The innermost frame of the library, of skorch or of torch's optimizers above the read."""
    frame = sys._getframe(2)
    while frame is not None:
        parts = Path(frame.f_code.co_filename).parts
        for root in ("ebmclassifier", "skorch", "optim"):
            if root in parts:
                start = parts.index(root) - (root == "optim")
                return f"{'/'.join(parts[start:])}:{frame.f_lineno}"
        frame = frame.f_back
    return "elsewhere"


@contextmanager
def counting(counter: Counter):
    """Count every host read of a tensor, by call site, while the context is open."""
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def wrap(name, original):
        def read(self, *args, **kwargs):
            counter[(name, _site())] += 1
            return original(self, *args, **kwargs)

        return read

    try:
        for name, original in originals.items():
            setattr(torch.Tensor, name, wrap(name, original))
        yield counter
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def estimators(epochs: int) -> dict:
    common = dict(max_epochs=epochs, random_state=0, device="cpu", module__hidden_sizes=(32,))
    return {
        "ce": NGEBMClassifier(beta=0.0, **common),
        "ngebm_exact": NGEBMClassifier(**common),
        "ngebm_fd": NGEBMClassifier(grad_norm="finite_difference", **common),
        "jem": JEMClassifier(sgld_steps=5, buffer_size=500, **common),
        "latent": LatentStructureClassifier(n_latent=10, max_epochs=epochs, random_state=0),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--weights", action="store_true", help="fit with sample_weight")
    args = parser.parse_args(argv)
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    weights = np.linspace(0.5, 1.5, len(y)) if args.weights else None
    for name, estimator in estimators(args.epochs).items():
        counter: Counter = Counter()
        with counting(counter):
            estimator.fit(X, y, sample_weight=weights)
        steps = sum(len(epoch["batches"]) for epoch in estimator.history)
        total = sum(counter.values())
        print(f"{name}: {total / steps:.2f} host reads per training step ({steps} steps)")
        for (method, site), count in counter.most_common():
            if count / steps >= 0.05:
                print(f"    {count / steps:5.2f}  .{method}  {site}")


if __name__ == "__main__":
    main()
