"""Demographic parity by a distributional constraint against fairlearn's ThresholdOptimizer.

A binary task whose positive rate differs between two groups (scikit-learn's
``make_classification``, the group a noisy function of the first feature, appended as the last
column); a logistic regression trained on 2,000 samples. On 2,000 deployment samples:

- ``model``: the classifier as it is;
- ``constraint``: ``DistributionalConstraint(constraints=demographic_parity(...))`` fitted on
  the *unlabelled* deployment samples, predictions by ``argmax``;
- ``threshold_optimizer``: fairlearn's ``ThresholdOptimizer(constraints="demographic_parity",
  prefit=True)`` fitted on 1,000 *labelled* held-out samples (randomised group thresholds).

Reported, median [min-max] over seeds: accuracy, the parity difference of the hard predictions
(fairlearn's ``demographic_parity_difference``) and of the expected predictions (the same metric
with each sample counted with weight ``p(1|x)``; ThresholdOptimizer has no probabilities).

    python benchmarks/parity.py --seeds 5     # a few seconds
"""

from __future__ import annotations

import argparse

import numpy as np
from fairlearn.metrics import demographic_parity_difference
from fairlearn.postprocessing import ThresholdOptimizer
from sklearn.datasets import make_classification
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression

from ebmclassifier import DistributionalConstraint
from ebmclassifier.distributional import demographic_parity


def _expected_difference(proba1: np.ndarray, groups: np.ndarray) -> float:
    n = len(proba1)
    y_pred = np.r_[np.ones(n), np.zeros(n)]
    return demographic_parity_difference(
        y_pred,
        y_pred,
        sensitive_features=np.r_[groups, groups],
        sample_weight=np.r_[proba1, 1 - proba1],
    )


def run(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    X, y = make_classification(5000, n_features=6, n_informative=4, random_state=seed)
    groups = (X[:, 0] + rng.normal(scale=1.0, size=len(X)) > 0).astype(float)
    X = np.c_[X, groups]
    train, held, deploy = slice(0, 2000), slice(2000, 3000), slice(3000, 5000)
    clf = LogisticRegression().fit(X[train], y[train])
    Xd, yd, gd = X[deploy], y[deploy], groups[deploy]
    parity = demographic_parity(Xd, X.shape[1] - 1, 1, clf.classes_)
    adapted = DistributionalConstraint(FrozenEstimator(clf), constraints=parity).fit(Xd)
    optimizer = ThresholdOptimizer(
        estimator=clf, constraints="demographic_parity", prefit=True, predict_method="predict_proba"
    ).fit(X[held], y[held], sensitive_features=groups[held])
    hard = {
        "model": clf.predict(Xd),
        "constraint": adapted.predict(Xd),
        "threshold_optimizer": optimizer.predict(Xd, sensitive_features=gd, random_state=seed),
    }
    out = {}
    for name, pred in hard.items():
        out[name] = {
            "accuracy": float(np.mean(pred == yd)),
            "parity_hard": float(demographic_parity_difference(yd, pred, sensitive_features=gd)),
        }
    out["model"]["parity_expected"] = _expected_difference(clf.predict_proba(Xd)[:, 1], gd)
    out["constraint"]["parity_expected"] = _expected_difference(adapted.predict_proba(Xd)[:, 1], gd)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    runs = [run(seed) for seed in range(args.seeds)]
    print(f"{'method':<22}{'accuracy':>22}{'parity (hard)':>22}{'parity (expected)':>22}")
    for name in runs[0]:
        cells = []
        for metric in ("accuracy", "parity_hard", "parity_expected"):
            v = [r[name].get(metric, np.nan) for r in runs]
            cells.append(
                f"{np.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]" if not np.isnan(v[0]) else "-"
            )
        print(f"{name:<22}" + "".join(f"{c:>22}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
