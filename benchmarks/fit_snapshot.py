"""Snapshot of many fits, to check that a refactor leaves every fit bitwise unchanged.

Fits the three estimators, their options and the meta-estimators on small data (about a
minute on one CPU thread) and writes every output array (probabilities, energies, the OOD
scores, the loss history, latent argmaxes and marginals) to an ``.npz``. Take a snapshot on
the commit before a change and compare after it, on the same machine and thread count (float
kernels differ between CPUs and thread counts, so snapshots are not portable)::

    git stash; OMP_NUM_THREADS=1 python benchmarks/fit_snapshot.py --out /tmp/before.npz
    git stash pop; OMP_NUM_THREADS=1 python benchmarks/fit_snapshot.py --compare /tmp/before.npz

``--compare`` prints every array that differs (with its largest difference) and exits 1 if
any does, or if an array was added or removed.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import (
    DistributionalConstraint,
    JEMClassifier,
    LatentStructureClassifier,
    NGEBMClassifier,
    ProductOfExperts,
)
from ebmclassifier.augment import GaussianNoise
from ebmclassifier.datasets import make_latent_clusters, make_latent_trees

GRADIENTS = ("spigot", "spigot_ce", "spigot_eg", "ste", "softmax", "sparsemax", "gumbel")
GRADIENTS += ("gumbel_st", "sfe")


def _digits():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(
        X, y, train_size=400, test_size=100, stratify=y, random_state=0
    )
    scaler = StandardScaler().fit(X_train)
    return (
        scaler.transform(X_train).astype(np.float32),
        y_train,
        scaler.transform(X_test).astype(np.float32),
    )


def _outputs(name: str, est, X, out: dict, ood=("energy", "max_softmax", "approx_mass")) -> None:
    out[f"{name}/proba"] = est.predict_proba(X)
    out[f"{name}/energy"] = est.energy(X)
    for method in ood:
        out[f"{name}/ood_{method}"] = est.score_ood(X, method=method)
    history = getattr(est, "history", None)
    if history is not None:
        out[f"{name}/train_loss"] = np.asarray(history[:, "train_loss"], dtype=np.float64)


def _ngebm_cases(X, y, X_test, out: dict) -> None:
    fast = dict(max_epochs=3, random_state=0, module__hidden_sizes=(32,))
    cases = {
        "ngebm": {},
        "ngebm_beta0": dict(beta=0.0),
        "ngebm_fd": dict(grad_norm="finite_difference"),
        "ngebm_var": dict(energy_var_weight=1.0),
        "ngebm_balanced": dict(class_weight="balanced"),
        "ngebm_noise": dict(augmentation=GaussianNoise(0.05)),
    }
    for name, params in cases.items():
        est = NGEBMClassifier(**fast, **params).fit(X, y)
        _outputs(name, est, X_test, out)
        if name != "ngebm_balanced":  # 'balanced' needs every label at once
            est.partial_fit(X, y)
            _outputs(f"{name}/partial", est, X_test, out)
    weights = np.linspace(0.5, 2.0, len(y))
    est = NGEBMClassifier(**fast).fit(X, y, sample_weight=weights)
    _outputs("ngebm_weighted", est, X_test, out)
    conv = NGEBMClassifier(grad_norm="finite_difference", max_epochs=2, random_state=0)
    _outputs("ngebm_conv_fd", conv.fit(X.reshape(-1, 1, 8, 8), y), X_test.reshape(-1, 1, 8, 8), out)


def _jem_cases(X, y, X_test, out: dict) -> None:
    fast = dict(max_epochs=2, random_state=0, module__hidden_sizes=(32,), sgld_steps=5)
    fast.update(buffer_size=200)
    cases = {
        "jem": {},
        "jem_proximal": dict(sampler="proximal"),
        "jem_uniform": dict(buffer_init="uniform"),
    }
    for name, params in cases.items():
        est = JEMClassifier(**fast, **params).fit(X, y)
        _outputs(name, est, X_test, out)
        est.partial_fit(X, y)
        _outputs(f"{name}/partial", est, X_test, out)
        torch.manual_seed(0)  # sample draws from torch's global generator
        out[f"{name}/sample"] = est.sample(4, y=np.unique(y)[:4])


def _continual_cases(X, y, X_test, out: dict) -> None:
    tasks = [np.isin(y, pair) for pair in ((0, 1), (2, 3), (4, 5))]
    for name, params in {
        "continual_all": dict(),
        "continual_batch": dict(negatives="batch"),
        "continual_replay": dict(negatives="batch", replay_per_class=5),
        "continual_beta0": dict(beta=0.0, negatives=1),
    }.items():
        est = NGEBMClassifier(
            class_incremental=True, max_epochs=2, random_state=0, module__hidden_sizes=(32,)
        )
        # the settings before "auto" (issue #32), so that the snapshot compares across it
        before = dict(negatives="all", replay_per_class=0, generated_per_class=0)
        est.set_params(**{**before, **params})
        for mask in tasks:
            est.partial_fit(X[mask], y[mask])
        _outputs(name, est, X_test, out)
    jem = JEMClassifier(
        class_incremental=True, negatives="batch", max_epochs=1, random_state=0, sgld_steps=3
    )
    jem.set_params(replay_per_class=0, generated_per_class=0)
    for mask in tasks:
        jem.partial_fit(X[mask], y[mask])
    _outputs("continual_jem", jem, X_test, out)


def _latent_cases(out: dict) -> None:
    X, y, _ = make_latent_clusters(300, n_clusters=3, n_features=10, random_state=0)
    X = X.astype(np.float32)
    for gradient in GRADIENTS:
        est = LatentStructureClassifier(3, gradient=gradient, max_epochs=2, random_state=0)
        est.fit(X, y)
        name = f"latent_{gradient}"
        _outputs(name, est, X[:50], out)
        out[f"{name}/latent"] = est.predict_latent(X[:50])
        out[f"{name}/transform"] = est.transform(X[:50])
    T, yt, _ = make_latent_trees(120, max_length=6, random_state=0)
    for gradient in ("spigot", "ste", "softmax", "sparsemax", "sfe"):
        est = LatentStructureClassifier(
            structure="dependency_tree", gradient=gradient, max_epochs=2, random_state=0
        ).fit(T, yt)
        name = f"tree_{gradient}"
        _outputs(name, est, T[:30], out, ood=("energy", "max_softmax"))
        out[f"{name}/latent"] = est.predict_latent(T[:30])
        out[f"{name}/transform"] = est.transform(T[:30])


def _meta_cases(X, y, X_test, out: dict) -> None:
    fast = dict(max_epochs=2, module__hidden_sizes=(32,))
    experts = [(f"e{s}", NGEBMClassifier(**fast, random_state=s)) for s in range(2)]
    for combine in ("product", "mixture"):
        poe = ProductOfExperts(experts, combine=combine).fit(X, y)
        _outputs(f"poe_{combine}", poe, X_test, out)
    base = NGEBMClassifier(**fast, random_state=0).fit(X, y)
    train_priors = np.bincount(y) / len(y)
    adapted = DistributionalConstraint(base, priors="em", train_priors=train_priors)
    _outputs("constraint_em", adapted.fit(X_test), X_test, out, ood=("energy",))


def snapshot() -> dict[str, np.ndarray]:
    """Every case's outputs, keyed ``case/output``."""
    X, y, X_test = _digits()
    out: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _ngebm_cases(X, y, X_test, out)
        _jem_cases(X, y, X_test, out)
        _continual_cases(X, y, X_test, out)
        _latent_cases(out)
        _meta_cases(X, y, X_test, out)
    return {k: np.asarray(v) for k, v in out.items()}


def compare(now: dict[str, np.ndarray], path: str) -> int:
    """Print what differs from the snapshot at ``path``; the number of differences."""
    with np.load(path) as before:
        old = {k: before[k] for k in before.files}
    problems = [f"missing now: {k}" for k in sorted(set(old) - set(now))]
    problems += [f"new: {k}" for k in sorted(set(now) - set(old))]
    for key in sorted(set(old) & set(now)):
        a, b = old[key], now[key]
        if a.shape != b.shape or a.dtype != b.dtype:
            problems.append(f"{key}: {a.dtype}{a.shape} -> {b.dtype}{b.shape}")
        elif not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            problems.append(f"{key}: largest difference {np.nanmax(diff):.3g}")
    print("\n".join(problems) or f"bitwise equal: {len(now)} arrays")
    return len(problems)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the snapshot to this .npz")
    group.add_argument("--compare", help="compare with the snapshot in this .npz")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)
    now = snapshot()
    if args.out:
        np.savez(args.out, **now)
        print(f"{len(now)} arrays written to {args.out}")
        return 0
    return 1 if compare(now, args.compare) else 0


if __name__ == "__main__":
    sys.exit(main())
