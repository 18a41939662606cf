"""Which fits the documented commands make would stop on their training loss.

``n_iter_no_change`` and ``tol`` with ``early_stopping=False`` could stop a fit as
``MLPClassifier`` does, once its training loss has not improved by ``tol`` for more than
``n_iter_no_change`` epochs. At the defaults (10 and 1e-4) that would end a fit whose training
loss stalls before ``max_epochs``, changing the fits behind the figures the README and the
docs quote. This fits each model of ``demo`` and of ``compare``'s main job the way those
commands do (their networks, epochs and learning rates; demo's split of the digits, and for
compare the whole training split, a close stand-in for the 80% it trains on; the estimators'
other defaults, ``early_stopping=False``), records each epoch's training loss, and reports,
per fit, the epoch at which that rule would have stopped it, or "never" (it trains every
epoch).

    OMP_NUM_THREADS=1 python benchmarks/training_loss_stopping.py --seeds 3
"""

from __future__ import annotations

import argparse
import math
import os

import numpy as np
from sklearn.preprocessing import StandardScaler

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier.datasets import load_mnist1d
from ebmclassifier.experiments.demo import digits_with_noise


def stop_epoch(losses, n_iter_no_change: int = 10, tol: float = 1e-4) -> int | None:
    """The epoch (1-based) at which MLPClassifier's rule stops, or None: an epoch improves when
    its loss is at least ``tol`` below the best so far; the best follows every new minimum."""
    best, count = math.inf, 0
    for epoch, loss in enumerate(losses, start=1):
        count = count + 1 if loss > best - tol else 0
        best = min(best, loss)
        if count > n_iter_no_change:
            return epoch
    return None


def _mnist1d(seed: int, n: int = 2000):
    data = load_mnist1d(shape="flat")
    rng = np.random.default_rng(seed)
    rows = rng.permutation(len(data.X_train))[:n]
    X = StandardScaler().fit_transform(data.X_train[rows])
    return X.astype(np.float32), data.y_train[rows]


def _fits(seeds):
    """(where, model, seed, estimator, X, y) for every fit of the commands' protocols."""
    models = {
        "ce": lambda **p: NGEBMClassifier(beta=0.0, **p),
        "ngebm": lambda **p: NGEBMClassifier(beta=0.5, **p),
        "jem": lambda **p: JEMClassifier(**p),
    }
    for seed in seeds:
        X, _, y, _, _ = digits_with_noise(seed)
        for name in ("ce", "ngebm"):  # demo: 50 epochs
            yield "demo digits", name, seed, models[name](max_epochs=50, random_state=seed), X, y
        for name in models:  # compare digits: 30 epochs
            yield "compare digits", name, seed, models[name](max_epochs=30, random_state=seed), X, y
        X, y = _mnist1d(seed)
        for name in models:  # compare mnist1d: the MLP, 30 epochs at lr 3e-3
            est = models[name](max_epochs=30, lr=3e-3, random_state=seed)
            yield "compare mnist1d", name, seed, est, X, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--n-iter-no-change", type=int, default=10)
    parser.add_argument("--tol", type=float, default=1e-4)
    args = parser.parse_args()
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    stopped = 0
    for where, name, seed, est, X, y in _fits(range(args.seeds)):
        # n_iter_no_change beyond max_epochs: the rule cannot act, every epoch trains
        est.set_params(n_iter_no_change=est.max_epochs + 1, callbacks__progress_bar=None)
        losses = list(est.fit(X, y).history[:, "train_loss"])
        epoch = stop_epoch(losses, args.n_iter_no_change, args.tol)
        stopped += epoch is not None
        print(
            f"{where:<16} {name:<6} seed {seed}: {len(losses)} epochs, would stop at "
            f"{epoch or 'never'}; loss {losses[0]:.4f} -> {losses[-1]:.4f}"
        )
    print(f"{stopped} fit(s) would stop early; load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
