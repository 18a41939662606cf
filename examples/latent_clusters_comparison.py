"""
Surrogate gradients on the latent-clusters task
===============================================

Accuracy and latent recovery, per gradient method (not run by the docs build: it takes
minutes; see :doc:`/latent_clusters` for its measured results).

Reruns the unstructured synthetic comparison of Mihaylova, Niculae & Martins (2020),
"Understanding the Mechanics of SPIGOT" (EMNLP): K hidden clusters, each with its own linear
classifier (:func:`ebmclassifier.datasets.make_latent_clusters`, d = 100, 5,000 training and
1,000 test samples per seed), for K = 3 and K = 10. Every gradient method of
:class:`~ebmclassifier.latent.classifier.LatentStructureClassifier` is trained with the same
protocol, next to two references trained the same way:

- ``linear``: no latent (``n_latent=1``: a single linear classifier);
- ``true z``: the bilinear decoder fed the true cluster (an encoder that reads it).

and two references fitted exactly by scikit-learn's LogisticRegression (a ceiling for the
decoders, which SGD does not reach in a few epochs on this ill-conditioned task):
``LR, no latent`` and ``LR per true cluster``.

Printed: test accuracy and V-measure of the predicted latent against the true cluster
(:func:`sklearn.metrics.v_measure_score`), median over seeds, and the [min, max] range. A PNG
plot and a CSV of every run are written to ``--out``.

Protocol: Adam, batches of 64, ``--epochs`` epochs, learning rate 1e-2 for the decoder and 1e-3
for the encoder (a large encoder step commits the clusters before the decoders have learnt
anything), ``step_size=1``, ``inner_steps=1``, ``temperature=1``, linear encoder, bilinear
decoder, seeds 0..S-1 (the seed draws the data and initialises the networks).

Usage::

    python examples/latent_clusters_comparison.py --seeds 3 --epochs 20 --out report/latent
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
import torch
from joblib import Parallel, delayed
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import v_measure_score
from torch import nn

from ebmclassifier.datasets import make_latent_clusters
from ebmclassifier.latent import GRADIENTS
from ebmclassifier.latent.categorical.networks import BilinearDecoder
from ebmclassifier.latent.classifier import LatentStructureClassifier

REFERENCES = ("linear", "true z", "LR, no latent", "LR per true cluster")


class TrueClusterEncoder(nn.Module):
    """Reads the one-hot true cluster appended to the input: large scores, no parameters."""

    def __init__(self, n_features: int, n_latent: int) -> None:
        super().__init__()
        self.n_inputs = n_features - n_latent

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 100.0 * x[:, self.n_inputs :]


class InputsOnlyDecoder(BilinearDecoder):
    """The default bilinear decoder, on the input without the appended true cluster."""

    def __init__(self, n_latent: int, n_features: int, n_classes: int) -> None:
        super().__init__(n_latent, n_features - n_latent, n_classes)
        self.n_inputs = n_features - n_latent

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return super().forward(x[:, : self.n_inputs], z)


def _estimator(n_latent: int, seed: int, epochs: int, **params) -> LatentStructureClassifier:
    return LatentStructureClassifier(
        n_latent,
        max_epochs=epochs,
        lr=1e-2,
        optimizer__param_groups=[("encoder.*", {"lr": 1e-3})],
        batch_size=64,
        random_state=seed,
        device="cpu",
        **params,
    )


def run_one(n_clusters: int, seed: int, args) -> list[dict]:
    """Every method and reference on one draw of the task."""
    torch.set_num_threads(1)  # one process per core: more threads only contend
    X, y, z, params = make_latent_clusters(
        args.n_train, n_clusters, args.n_features, return_params=True, random_state=seed
    )
    X_te, y_te, z_te = make_latent_clusters(
        args.n_test, n_clusters, args.n_features, params=params, random_state=10_000 + seed
    )
    X, X_te = X.astype(np.float32), X_te.astype(np.float32)
    rows = []

    def record(method, accuracy, v_measure, started):
        rows.append(
            {
                "K": n_clusters,
                "seed": seed,
                "method": method,
                "accuracy": float(accuracy),
                "v_measure": float(v_measure),
                "seconds": round(time.perf_counter() - started, 2),
            }
        )

    for gradient in GRADIENTS:
        started = time.perf_counter()
        clf = _estimator(n_clusters, seed, args.epochs, gradient=gradient).fit(X, y)
        v = v_measure_score(z_te, clf.predict_latent(X_te))
        record(gradient, clf.score(X_te, y_te), v, started)

    started = time.perf_counter()
    linear = _estimator(1, seed, args.epochs).fit(X, y)
    record("linear", linear.score(X_te, y_te), np.nan, started)

    started = time.perf_counter()
    eye = np.eye(n_clusters, dtype=np.float32)
    oracle = _estimator(
        n_clusters, seed, args.epochs, encoder=TrueClusterEncoder, decoder=InputsOnlyDecoder
    ).fit(np.hstack([X, eye[z]]), y)
    record("true z", oracle.score(np.hstack([X_te, eye[z_te]]), y_te), 1.0, started)

    started = time.perf_counter()
    single = LogisticRegression(max_iter=5000).fit(X, y)
    record("LR, no latent", single.score(X_te, y_te), np.nan, started)

    started = time.perf_counter()
    correct = 0
    for k in range(n_clusters):
        model = LogisticRegression(max_iter=5000).fit(X[z == k], y[z == k])
        correct += int((model.predict(X_te[z_te == k]) == y_te[z_te == k]).sum())
    record("LR per true cluster", correct / len(y_te), 1.0, started)
    print(f"K={n_clusters} seed={seed} done", flush=True)
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    """Median and range over seeds, per (K, method), in the order of the runs."""
    table = []
    keys = list(dict.fromkeys((r["K"], r["method"]) for r in rows))
    for K, method in keys:
        runs = [r for r in rows if r["K"] == K and r["method"] == method]
        entry = {"K": K, "method": method, "n_seeds": len(runs)}
        for metric in ("accuracy", "v_measure"):
            values = np.array([r[metric] for r in runs])
            entry[metric] = np.median(values)
            entry[metric + "_min"], entry[metric + "_max"] = values.min(), values.max()
        table.append(entry)
    return table


def _cell(entry, metric):
    if np.isnan(entry[metric]):
        return "n/a"
    return f"{entry[metric]:.3f} [{entry[metric + '_min']:.2f}, {entry[metric + '_max']:.2f}]"


def print_table(table: list[dict]) -> str:
    lines = [
        "| K | method | test accuracy, median [min, max] | V-measure, median [min, max] |",
        "|---|---|---|---|",
    ]
    for e in table:
        lines.append(
            f"| {e['K']} | {e['method']} | {_cell(e, 'accuracy')} | {_cell(e, 'v_measure')} |"
        )
    text = "\n".join(lines)
    print(text)
    return text


def plot(table: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = sorted({e["K"] for e in table})
    fig, axes = plt.subplots(len(ks), 2, figsize=(12, 3.2 * len(ks)), squeeze=False)
    for row, K in enumerate(ks):
        entries = [e for e in table if e["K"] == K]
        names = [e["method"] for e in entries]
        for col, metric in enumerate(("accuracy", "v_measure")):
            ax = axes[row, col]
            med = np.array([e[metric] for e in entries])
            low = med - np.array([e[metric + "_min"] for e in entries])
            high = np.array([e[metric + "_max"] for e in entries]) - med
            colors = ["tab:gray" if n in REFERENCES else "tab:blue" for n in names]
            ax.bar(names, np.nan_to_num(med), yerr=np.nan_to_num([low, high]), color=colors)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"K = {K}: test {metric.replace('_', '-')} (median, min-max)")
            ax.tick_params(axis="x", rotation=60)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0..S-1)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("latent_clusters_comparison"))
    parser.add_argument("--clusters", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--n-train", type=int, default=5000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--n-features", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2, help="parallel processes")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tasks = [(K, seed) for K in args.clusters for seed in range(args.seeds)]
    results = Parallel(n_jobs=args.jobs)(delayed(run_one)(K, seed, args) for K, seed in tasks)
    rows = [row for result in results for row in result]
    with open(args.out / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = summarise(rows)
    text = print_table(table)
    (args.out / "table.md").write_text(text + "\n")
    plot(table, args.out / "comparison.png")
    print(f"\n{len(tasks)} draws, {time.perf_counter() - started:.0f} s; wrote {args.out}/")


if __name__ == "__main__":
    main()
