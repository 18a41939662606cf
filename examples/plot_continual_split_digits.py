"""
Learning new classes later: split digits, task after task
=========================================================

scikit-learn's 8x8 digits are split into five tasks of two classes (0-1, 2-3, ..., 8-9) that
arrive one after the other. Each estimator sees only the current task's samples in its
``partial_fit``; with ``class_incremental=True`` a new label joins ``classes_`` and the output
layer grows a row for it. After every task the accuracy is measured on the test samples of
every class seen so far, predicting among all of them (class-incremental: no task identity).

- ``negatives="all"`` is plain fine-tuning with the cross-entropy: it pushes down the logits
  of every class absent from the task, and forgets the old tasks;
- ``negatives="batch"`` normalises over the batch's classes only (Li et al. 2020), so the old
  classes' logits are left alone;
- ``replay_per_class=20`` also keeps 20 samples of each class and mixes them into later tasks.

One seed and few epochs, so that it runs in seconds: ``python -m ebmclassifier continual``
measures the spread over seeds (see the documentation's page on continual learning).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import NGEBMClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
tasks = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]

methods = {
    "fine-tuning (negatives='all')": dict(negatives="all"),
    "batch negatives": dict(negatives="batch"),
    "batch negatives + replay 20/class": dict(negatives="batch", replay_per_class=20),
}
curves = {}
for name, params in methods.items():
    clf = NGEBMClassifier(
        beta=0.0,
        class_incremental=True,
        max_epochs=10,
        module__hidden_sizes=(100,),
        random_state=0,
        **params,
    )
    curve = []
    for t, task in enumerate(tasks):
        rows = np.isin(y_train, task)
        clf.partial_fit(X_train[rows], y_train[rows])
        seen = [c for done in tasks[: t + 1] for c in done]
        test = np.isin(y_test, seen)
        predicted, truth = clf.predict(X_test[test]), y_test[test]
        per_task = [
            np.mean(predicted[np.isin(truth, d)] == truth[np.isin(truth, d)])
            for d in tasks[: t + 1]
        ]
        curve.append(np.mean(per_task))
    curves[name] = curve
    print(f"{name:36s} classes {clf.classes_.tolist()}, final average accuracy {curve[-1]:.3f}")

# %%
# Average accuracy over the classes seen, after each task
# -------------------------------------------------------
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
for name, curve in curves.items():
    ax.plot(range(1, len(tasks) + 1), curve, marker="o", label=name)
ax.set_xlabel("number of tasks learned")
ax.set_ylabel("average accuracy (classes seen)")
ax.set_ylim(0, 1.05)
ax.legend()
