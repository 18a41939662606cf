"""Near-OOD on digits: post-hoc detectors on a cross-entropy model against NG-EBM's own scores.

Train on digits 0-4 only (70/30 stratified split of all ten, standardized on the training
split); the test samples of 0-4 are in-distribution, those of 5-9 the near-OOD set (open-set
recognition). Models: cross-entropy (``NGEBMClassifier(beta=0)``) and NG-EBM (``beta=0.5``),
the library's default MLP. Scores: the models' ``score_ood`` methods, and the detectors of
``ebmclassifier.detectors`` fitted on the training split's penultimate features of each model.
Reports the AUROC (held-out classes as positives) per score, median and range over seeds, and
the AURC of each model's softmax confidence on the in-distribution test set.

    python benchmarks/near_ood_detectors.py --seeds 5 --epochs 30
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import NGEBMClassifier
from ebmclassifier.detectors import (
    KNNDetector,
    MahalanobisDetector,
    ViMDetector,
    fit_detector,
    penultimate_features,
)
from ebmclassifier.metrics import aurc, ood_metrics

IN_CLASSES = (0, 1, 2, 3, 4)
MODELS = {"ce": 0.0, "ngebm": 0.5}
DETECTORS = {
    "mahalanobis": lambda: MahalanobisDetector(),
    "mahalanobis_lw": lambda: MahalanobisDetector(covariance="ledoit_wolf"),
    "knn_k1": lambda: KNNDetector(n_neighbors=1),
    "knn_k10": lambda: KNNDetector(n_neighbors=10),
    "knn_k50": lambda: KNNDetector(n_neighbors=50),
    "vim": lambda: ViMDetector(),
}


def near_ood_split(seed: int):
    """Training split of classes 0-4, their test split, and the test split of 5-9."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=seed
    )
    known_train, known_test = np.isin(y_train, IN_CLASSES), np.isin(y_test, IN_CLASSES)
    scaler = StandardScaler().fit(X_train[known_train])
    scale = lambda a: scaler.transform(a).astype(np.float32)  # noqa: E731
    return (
        scale(X_train[known_train]), y_train[known_train],
        scale(X_test[known_test]), y_test[known_test],
        scale(X_test[~known_test]),
    )  # fmt: skip


def run_seed(seed: int, epochs: int) -> dict[str, float]:
    X_train, y_train, X_in, y_in, X_out = near_ood_split(seed)
    row = {}
    for model, beta in MODELS.items():
        clf = NGEBMClassifier(beta=beta, max_epochs=epochs, random_state=seed)
        clf.fit(X_train, y_train)
        row[f"{model}/accuracy"] = clf.score(X_in, y_in)
        row[f"{model}/aurc"] = aurc(y_in, clf.predict_proba(X_in), classes=clf.classes_)
        for method in ("max_softmax", "energy", "approx_mass"):
            scores = clf.score_ood(X_in, method=method), clf.score_ood(X_out, method=method)
            row[f"{model}/{method}"] = ood_metrics(*scores)["auroc"]
        features_in = penultimate_features(clf, X_in)
        features_out = penultimate_features(clf, X_out)
        for name, make in DETECTORS.items():
            detector = fit_detector(make(), clf, X_train, y_train)  # the training split only
            scores = detector.score_ood(features_in), detector.score_ood(features_out)
            row[f"{model}/{name}"] = ood_metrics(*scores)["auroc"]
    return row


def _print_paired(rows: list[dict], reference: str) -> None:
    """Per seed, the reference score's AUROC minus each cross-entropy score's: wins, median."""
    print(f"\n{reference} against each score of the cross-entropy model, paired by seed")
    print(f"{'ce score':<16}{'wins':>8}{'median difference':>20}")
    for name in ["max_softmax", "energy", *DETECTORS]:
        diff = np.array([row[reference] - row[f"ce/{name}"] for row in rows])
        print(f"{name:<16}{f'{(diff > 0).sum()}/{len(diff)}':>8}{np.median(diff):>+20.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--json", help="also write the per-seed rows to this file")
    args = parser.parse_args()
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.epochs))
        print(f"seed {seed}: " + ", ".join(f"{k}={v:.3f}" for k, v in rows[-1].items()), flush=True)
    print(f"\nAUROC, held-out digits 5-9 as OOD; median [min, max] over {args.seeds} seeds")
    print(f"{'score':<16}" + "".join(f"{m:>24}" for m in MODELS))
    names = ["accuracy", "aurc", "max_softmax", "energy", "approx_mass", *DETECTORS]
    for name in names:
        cells = []
        digits = 4 if name == "aurc" else 3
        for model in MODELS:
            values = np.array([row[f"{model}/{name}"] for row in rows])
            low, mid, high = values.min(), np.median(values), values.max()
            cells.append(f"{mid:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]")
        print(f"{name:<16}" + "".join(f"{c:>24}" for c in cells))
    _print_paired(rows, reference="ngebm/approx_mass")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
