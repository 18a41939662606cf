"""Speed-up of a GridSearchCV on a dask cluster of 2 worker processes over 1.

Run from the repository root (needs ``pip install ebmclassifier[distributed]``)::

    python benchmarks/dask_grid_search.py --repeats 3

Both clusters are started and warmed (the workers import the library and run one small search)
before timing, so the figures are the search itself: 12 NG-EBM fits (4 values of beta x 3
folds, a 128-128 MLP, 10 epochs) on standardized digits plus the refit, each worker running one
thread. The two clusters take turns, so that a change in the machine's load hits both. The
printed ratio is median(1 worker) / median(2 workers); the ideal on 2 free cores is 2 minus the
refit, which runs alone (12 fits in parallel, 1 not: at most 26/14 = 1.86).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from contextlib import ExitStack

import joblib
import numpy as np
from dask.distributed import Client, LocalCluster
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from ebmclassifier import NGEBMClassifier


def search(max_epochs: int, betas) -> GridSearchCV:
    estimator = NGEBMClassifier(
        max_epochs=max_epochs, random_state=0, device="cpu", module__hidden_sizes=(128, 128)
    )
    return GridSearchCV(estimator, {"beta": list(betas)}, cv=3, n_jobs=-1)


def timed_search(client: Client, X, y, args) -> float:
    with joblib.parallel_backend("dask", client=client):
        start = time.perf_counter()
        search(args.max_epochs, args.betas).fit(X, y)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--betas", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7])
    args = parser.parse_args()
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    with ExitStack() as stack:
        clients = {}
        for n_workers in (1, 2):
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                )
            )
            clients[n_workers] = client = stack.enter_context(Client(cluster))
            with joblib.parallel_backend("dask", client=client):
                search(1, [0.5]).fit(X[:200], y[:200])  # warm-up: imports and first fits
        # Alternate the two clusters, so that a change in the machine's load hits both.
        times = {1: [], 2: []}
        for _ in range(args.repeats):
            for n_workers, client in clients.items():
                times[n_workers].append(timed_search(client, X, y, args))
    for n_workers, ts in times.items():
        print(f"{n_workers} worker(s): " + ", ".join(f"{t:.1f}" for t in ts) + " s")
    medians = {n_workers: statistics.median(ts) for n_workers, ts in times.items()}
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    print(f"speed-up of 2 workers over 1: {medians[1] / medians[2]:.2f}x")


if __name__ == "__main__":
    main()
