"""NG-EBM with grad_norm="finite_difference" against "exact": accuracy, ECE, OOD AUROC on digits.

The protocol of ``python -m ebmclassifier demo`` (standardized digits, 70/30 split, uniform
noise over the input range as the OOD set), for both ways of differentiating the penalty.

    python benchmarks/ngebm_fd_quality.py --seeds 3 --epochs 50
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from netcal.metrics import ECE
from sklearn.metrics import roc_auc_score

from ebmclassifier import NGEBMClassifier
from ebmclassifier.energy import OOD_METHODS
from ebmclassifier.experiments.demo import digits_with_noise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=50)
    args = parser.parse_args()
    rows = []
    for seed in range(args.seeds):
        X_train, X_test, y_train, y_test, noise = digits_with_noise(seed)
        for mode in ("exact", "finite_difference"):
            start = time.process_time()
            clf = NGEBMClassifier(grad_norm=mode, max_epochs=args.epochs, random_state=seed)
            clf.fit(X_train, y_train)
            row = {
                "mode": mode,
                "seed": seed,
                "fit_cpu_s": time.process_time() - start,
                "accuracy": clf.score(X_test, y_test),
                "ece": float(ECE(bins=15).measure(clf.predict_proba(X_test), y_test)),
            }
            is_ood = np.r_[np.zeros(len(X_test)), np.ones(len(noise))]
            for method in OOD_METHODS:
                scores = np.r_[clf.score_ood(X_test, method), clf.score_ood(noise, method)]
                row[f"auroc_{method}"] = roc_auc_score(is_ood, scores)
            rows.append(row)
            cells = (f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items())
            print(", ".join(cells), flush=True)
    columns = ["fit_cpu_s", "accuracy", "ece"] + [f"auroc_{m}" for m in OOD_METHODS]
    print(f"{'mode':<18}" + "".join(f"{c:>22}" for c in columns))
    for mode in ("exact", "finite_difference"):
        cells = []
        for c in columns:
            v = np.array([r[c] for r in rows if r["mode"] == mode])
            cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}")
        print(f"{mode:<18}" + "".join(f"{c:>22}" for c in cells))
    print(f"mean ± sd over {args.seeds} seeds, {args.epochs} epochs")


if __name__ == "__main__":
    main()
