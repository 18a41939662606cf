"""
Grid search over beta with an ECE scorer
========================================

``GridSearchCV`` chooses NG-EBM's ``beta`` (with ``gamma = 1 - beta``) by 3-fold
cross-validation on scikit-learn's digits, scoring each candidate by its expected calibration
error (:data:`ebmclassifier.metrics.ece_scorer`, minus the ECE so that greater is better) and
by accuracy, and refits the candidate with the lowest ECE. ``beta=0`` is plain cross-entropy.

The estimator sits in a ``Pipeline`` after a ``StandardScaler``, as any scikit-learn
classifier would. Few epochs keep the search to seconds on a CPU, so the curve is that of
short training, not of converged models.
"""

import numpy as np
from matplotlib.figure import Figure
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ebmclassifier import NGEBMClassifier
from ebmclassifier.metrics import ece_scorer

X, y = load_digits(return_X_y=True)
betas = [0.0, 0.25, 0.5]
search = GridSearchCV(
    make_pipeline(
        StandardScaler(), NGEBMClassifier(max_epochs=4, batch_size=256, lr=3e-3, random_state=0)
    ),
    {"ngebmclassifier__beta": betas},
    scoring={"ece": ece_scorer, "accuracy": "accuracy"},
    refit="ece",
    cv=3,
).fit(X, y)
print("best beta by ECE:", search.best_params_["ngebmclassifier__beta"])

results = search.cv_results_
ece_mean, ece_std = -results["mean_test_ece"], results["std_test_ece"]
acc_mean, acc_std = results["mean_test_accuracy"], results["std_test_accuracy"]
for beta, e, a in zip(betas, ece_mean, acc_mean, strict=True):
    print(f"beta={beta:.2f}  ECE {e:.3f}  accuracy {a:.3f}")

# %%
# ECE and accuracy against beta (mean and standard deviation over the 3 folds)
fig = Figure(figsize=(7, 3.5))
ax_ece, ax_acc = fig.subplots(1, 2)
ax_ece.errorbar(betas, ece_mean, yerr=ece_std, marker="o", capsize=3)
ax_ece.set_xlabel("beta")
ax_ece.set_ylabel("ECE (lower is better)")
ax_acc.errorbar(betas, acc_mean, yerr=acc_std, marker="o", capsize=3, color="tab:green")
ax_acc.set_xlabel("beta")
ax_acc.set_ylabel("accuracy")
ax_acc.set_ylim(top=min(1.0, float(np.max(acc_mean + acc_std)) + 0.02))
fig.tight_layout()
