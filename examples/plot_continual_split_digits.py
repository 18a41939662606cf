"""
Learning new classes later: split digits, task after task
=========================================================

scikit-learn's 8x8 digits are split into five tasks of two classes (0 and 9, 1 and 8, ...,
4 and 5) that arrive one after the other. Each estimator sees only the current task's samples in its
``partial_fit``; with ``class_incremental=True`` a new label joins ``classes_`` and the output
layer grows a row for it. After every task the accuracy is measured on the test samples of
every class seen so far, predicting among all of them (class-incremental: no task identity).

- fine-tuning (``negatives="all"``, no replay) pushes down the logits of every class absent
  from the task, and forgets the old tasks;
- ``negatives="batch"`` alone normalises over the batch's classes (Li et al. 2020): the old
  classes' logits are left alone, but nothing relates the new classes to the old ones;
- generated replay (``replay_per_class=0``: nothing stored) draws samples of the old classes
  from the model itself at each new task and mixes them into its data;
- ``NGEBMClassifier(class_incremental=True)`` with its defaults adds a reservoir of 20
  training samples per class to the generated ones: the best of the methods measured.

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
tasks = [[0, 9], [1, 8], [2, 7], [3, 6], [4, 5]]

nothing = dict(replay_per_class=0, generated_per_class=0)
methods = {
    "fine-tuning (negatives='all')": dict(beta=0.0, negatives="all", **nothing),
    "batch negatives, no replay": dict(beta=0.0, negatives="batch", **nothing),
    "generated replay (stores nothing)": dict(replay_per_class=0),
    "the defaults (20 stored + generated)": dict(),
}
curves = {}
for name, params in methods.items():
    clf = NGEBMClassifier(class_incremental=True, max_epochs=10, random_state=0, **params)
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
    print(f"{name:37s} final average accuracy {curve[-1]:.3f}")

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
