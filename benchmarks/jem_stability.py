"""How often does a JEM fit finish without manual intervention? (issue 3's stability figure)

For each seed: fit JEMClassifier on load_digits (standardized, 70/30 stratified split), either
as flat features with the default MLP or as 8x8 images with the default ConvNet, and report
whether the fit finished, how many divergences it recovered from, test accuracy, ECE (15
equal-width bins, top label), and the OOD AUROC of the three score_ood methods against uniform
noise over the training range (OOD = positive class, scores oriented higher = more OOD).

    python benchmarks/jem_stability.py --data flat --seeds 20 --epochs 30
    python benchmarks/jem_stability.py --data images --seeds 20 --epochs 30 --lr 1e-2
    python benchmarks/jem_stability.py --data images --seeds 3 --epochs 10 \
        --params '{"px_weight": 1.0, "buffer_init": "uniform"}'   # any JEMClassifier params

Prints one line per seed and the medians; ``--time-budget`` stops starting new seeds once that
many seconds have passed (and says so).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import DivergenceError, JEMClassifier
from ebmclassifier.metrics import expected_calibration_error


def load(kind: str):
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=0
    )
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = (scaler.transform(a).astype(np.float32) for a in (X_train, X_test))
    if kind == "images":
        X_train, X_test = X_train.reshape(-1, 1, 8, 8), X_test.reshape(-1, 1, 8, 8)
    return X_train, X_test, y_train, y_test


def run_seed(seed, data, params):
    X_train, X_test, y_train, y_test = data
    clf = JEMClassifier(random_state=seed, **params)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the recoveries are counted instead
        try:
            clf.fit(X_train, y_train)
        except DivergenceError as exc:
            return {"seed": seed, "finished": False, "error": str(exc)[:120]}
    seconds = time.perf_counter() - start
    proba = clf.predict_proba(X_test)
    rng = np.random.default_rng(seed)
    low, high = X_train.min(0), X_train.max(0)
    noise = rng.uniform(low, high, size=X_test.shape).astype(np.float32)
    labels = np.r_[np.zeros(len(X_test)), np.ones(len(noise))]
    auroc = {
        method: roc_auc_score(
            labels, np.r_[clf.score_ood(X_test, method), clf.score_ood(noise, method)]
        )
        for method in ("energy", "max_softmax", "approx_mass")
    }
    return {
        "seed": seed,
        "finished": bool(np.isfinite(proba).all()),
        "divergences": clf.n_divergences_,
        "accuracy": float((clf.classes_[proba.argmax(1)] == y_test).mean()),
        "ece": float(expected_calibration_error(y_test, proba)),
        **{f"auroc_{m}": float(v) for m, v in auroc.items()},
        "seconds": seconds,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", choices=["flat", "images"], default="flat")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=None, help="default: the estimator's")
    parser.add_argument("--params", type=json.loads, default={}, help="JEMClassifier params")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    params = {"max_epochs": args.epochs, **args.params}
    if args.lr is not None:
        params["lr"] = args.lr
    data = load(args.data)
    print(f"# data={args.data} params={params}", flush=True)
    rows, began = [], time.perf_counter()
    for seed in range(args.seeds):
        if args.time_budget and time.perf_counter() - began > args.time_budget:
            print(f"# time budget reached: ran {len(rows)} of {args.seeds} seeds", flush=True)
            break
        row = run_seed(seed, data, params)
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    done = [r for r in rows if r["finished"]]
    print(
        f"# finished without intervention: {len(done)} of {len(rows)}; "
        f"recoveries: {sum(r.get('divergences', 0) for r in rows)} in total, "
        f"{sum(1 for r in rows if r.get('divergences', 0))} runs with any"
    )
    if done:
        keys = ["accuracy", "ece", "auroc_energy", "auroc_max_softmax", "auroc_approx_mass"]
        print("# medians: " + ", ".join(f"{k} {np.median([r[k] for r in done]):.4f}" for k in keys))


if __name__ == "__main__":
    main()
