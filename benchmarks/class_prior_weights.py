"""Should the weights enter ``class_prior_``? EM's prior estimate with either (issue #32).

A network trained with weights that change the class shares: which training priors ``π`` make
EM (Saerens et al. 2002) estimate the deployment priors best, the raw shares of the labels or
the weighted shares? In theory the weighted loss is the loss of data whose class shares are the
weighted ones, so its minimiser's posteriors carry the weighted shares; a model that nearly
separates its training data may not show it.

Two modes, on digits standardized on the training split (``load_named_dataset("digits")``),
``random_state=seed`` everywhere:

- ``--mode class``: classes 5-9 keep a random fifth of their training samples (5:1 imbalance),
  and ``class_weight="balanced"`` re-balances the loss (weighted shares: uniform). Models:
  cross-entropy (``NGEBMClassifier(beta=0)``), NG-EBM (``beta=0.5``), both 30 epochs with the
  default MLP, scikit-learn's ``LogisticRegression`` (convex: it reaches its weighted
  minimiser); and NG-EBM without weights (the raw shares are then exact).
- ``--mode frequency``: the balanced training split, with ``sample_weight=5`` on classes 0-4,
  frequency weights that stand for 5 copies of each row (weighted shares 5:1). The same three
  models with ``sample_weight``; and NG-EBM trained on the rows repeated (the weighted shares
  are then exact).

Deployment: 500 test samples drawn with class priors ``π' ~ Dirichlet(α 1)``, α in
{0.1, 1, 10}, 10 draws per α. EM from the model's posteriors with ``π`` = raw label shares,
and with ``π`` = weighted shares; reported: ``|π̂ - π'|_1`` and the accuracy after the Bayes
correction, each the mean over the draws, then median [min-max] over seeds.

    OMP_NUM_THREADS=1 python benchmarks/class_prior_weights.py --mode class --seeds 5
    OMP_NUM_THREADS=1 python benchmarks/class_prior_weights.py --mode frequency --seeds 5

Each prints a markdown table (those in docs/distributional.md) and its wall time (63 s and
150 s on two shared CPU cores).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_sample_weight

from ebmclassifier import NGEBMClassifier
from ebmclassifier.datasets import load_named_dataset
from ebmclassifier.distributional import bayes_correction, em_priors

ALPHAS = (0.1, 1.0, 10.0)
FEW = np.arange(5, 10)  # the classes that hold, or count, a fifth as many samples
FIFTH = 0.2


def _ce(**kwargs):
    return NGEBMClassifier(beta=0.0, max_epochs=30, **kwargs)


def _ngebm(**kwargs):
    return NGEBMClassifier(beta=0.5, max_epochs=30, **kwargs)


#: Per mode, the models: name -> (build(seed), how it weighs: "class_weight", "sample_weight"
#: or None, and whether it trains on the data with the weighted rows repeated instead).
MODELS = {
    "class": {
        "ce, balanced": (lambda s: _ce(class_weight="balanced", random_state=s), None, False),
        "ngebm, balanced": (lambda s: _ngebm(class_weight="balanced", random_state=s), None, False),
        "logistic, balanced": (
            lambda s: LogisticRegression(class_weight="balanced", max_iter=2000),
            None,
            False,
        ),
        "ngebm, no weights": (lambda s: _ngebm(random_state=s), None, False),
    },
    "frequency": {
        "ce, sample_weight": (lambda s: _ce(random_state=s), "sample_weight", False),
        "ngebm, sample_weight": (lambda s: _ngebm(random_state=s), "sample_weight", False),
        "logistic, sample_weight": (
            lambda s: LogisticRegression(max_iter=2000),
            "sample_weight",
            False,
        ),
        "ngebm, rows repeated": (lambda s: _ngebm(random_state=s), None, True),
    },
}


def digits(seed: int, mode: str):
    """``(X, y, sample_weight, X_test, y_test)``: imbalanced, or balanced with weights."""
    data = load_named_dataset("digits")
    scaler = StandardScaler().fit(data.X_train)
    X_train, X_test = scaler.transform(data.X_train), scaler.transform(data.X_test)
    y = data.y_train
    as32 = np.float32
    if mode == "class":  # 5:1 imbalanced; class_weight="balanced" re-balances
        rng = np.random.default_rng(seed)
        keep = ~np.isin(y, FEW) | (rng.random(len(y)) < FIFTH)
        return X_train[keep].astype(as32), y[keep], None, X_test.astype(as32), data.y_test
    # balanced rows; classes 0-4 weigh 5: frequency weights, each such row stands for 5
    weights = np.where(np.isin(y, FEW), 1.0, 1.0 / FIFTH)
    return X_train.astype(as32), y, weights, X_test.astype(as32), data.y_test


def _fit(model, X, y, weights, how: str | None, repeat: bool):
    if repeat:  # the rows of weight k, k times: what the frequency weights stand for
        counts = np.rint(weights).astype(int)
        X, y, weights = np.repeat(X, counts, axis=0), np.repeat(y, counts), None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y, **({"sample_weight": weights} if how == "sample_weight" else {}))
    if how == "sample_weight":
        return weights
    class_weight = getattr(model, "class_weight", None)
    return compute_sample_weight(class_weight, y) if class_weight else None


def _draw(y_test: np.ndarray, priors: np.ndarray, n: int, rng) -> np.ndarray:
    counts = rng.multinomial(n, priors)
    return np.concatenate(
        [
            rng.choice(np.flatnonzero(y_test == c), size=k, replace=True)
            for c, k in enumerate(counts)
        ]
    )


def run_seed(seed: int, mode: str, draws: int, n_deploy: int) -> dict:
    X, y, weights, X_test, y_test = digits(seed, mode)
    out = {}
    for name, (build, how, repeat) in MODELS[mode].items():
        model = build(seed)
        used = _fit(model, X, y, weights, how, repeat)
        raw = np.bincount(y, minlength=10) / len(y)
        if repeat:
            used = weights  # the weighted shares of the rows are the raw shares of the repeats
        weighted = raw if used is None else np.bincount(y, used, 10) / used.sum()
        proba = model.predict_proba(X_test).astype(np.float64)
        rng = np.random.default_rng(seed)
        for alpha in ALPHAS:
            cells = {"raw": [], "weighted": []}
            for _ in range(draws):
                idx = _draw(y_test, rng.dirichlet(np.full(10, alpha)), n_deploy, rng)
                true = np.bincount(y_test[idx], minlength=10) / len(idx)
                for key, train in (("raw", raw), ("weighted", weighted)):
                    est = em_priors(proba[idx], train, max_iter=10_000)[0]
                    adapted = bayes_correction(proba[idx], train, est)
                    accuracy = np.mean(adapted.argmax(axis=1) == y_test[idx])
                    cells[key].append((np.abs(est - true).sum(), accuracy))
            for key, values in cells.items():
                out[(name, alpha, key)] = np.mean(values, axis=0)
    return out


def markdown(runs: list[dict], mode: str) -> str:
    lines = [
        "| model | α | EM L1, raw shares | EM L1, weighted shares | accuracy, raw | "
        "accuracy, weighted |",
        "|---|---|---|---|---|---|",
    ]

    def cell(values):
        return f"{np.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"

    for name in MODELS[mode]:
        for alpha in ALPHAS:
            l1 = [[r[(name, alpha, k)][0] for r in runs] for k in ("raw", "weighted")]
            acc = [[r[(name, alpha, k)][1] for r in runs] for k in ("raw", "weighted")]
            lines.append(
                f"| {name} | {alpha:g} | {cell(l1[0])} | {cell(l1[1])} | "
                f"{np.median(acc[0]):.3f} | {np.median(acc[1]):.3f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--mode", choices=tuple(MODELS), default="class")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--n-deploy", type=int, default=500)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    runs = [run_seed(s, args.mode, args.draws, args.n_deploy) for s in range(args.seeds)]
    print(markdown(runs, args.mode))
    print(f"\n{args.seeds} seeds in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
