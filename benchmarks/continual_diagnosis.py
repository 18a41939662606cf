"""Why NG-EBM's gradient-norm term hurts class-incremental learning without replay (#32).

Split MNIST-1D (standardized; tasks 0,9 / 1,8 / 2,7 / 3,6 / 4,5; 15 epochs a task; no
replay), three objectives with batch negatives: the cross-entropy alone (``beta=0``), NG-EBM
(``beta=0.5``, its energy over every class, the library's), and NG-EBM with the energy over
the batch's classes only (Li et al.'s principle read literally; a subclass here). After each
task ``t >= 2`` it prints, median over seeds:

- ``A[t,t]``: the accuracy on task ``t``'s test samples, predicting among every class seen
  (class-incremental);
- ``within``: the accuracy on the same samples predicting among task ``t``'s two classes only
  (task-incremental): whether the new classes were learned at all;
- the mean of the largest new-class logit and of the largest old-class logit on those
  samples: where the new classes stand against the old ones;

and the final average accuracy over the five tasks.

    PYTHONPATH=. python benchmarks/continual_diagnosis.py --seeds 3 [--network conv]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from sklearn.preprocessing import StandardScaler
from torch import nn

from ebmclassifier import NGEBMClassifier
from ebmclassifier.datasets import load_mnist1d
from ebmclassifier.losses import ngebm_loss

TASKS = [[0, 9], [1, 8], [2, 7], [3, 6], [4, 5]]


class _Restricted(nn.Module):
    """The network with the logits of the classes absent from the batch at -inf."""

    def __init__(self, module: nn.Module, present: torch.Tensor) -> None:
        super().__init__()
        self.module, self.present = module, present

    def forward(self, x):
        return self.module(x).masked_fill(~self.present, float("-inf"))


class BatchEnergyNGEBM(NGEBMClassifier):
    """NG-EBM whose energy, in the gradient-norm term, runs over the batch's classes only."""

    def compute_loss(self, X, y, training, sample_weight=None):
        present = torch.zeros(len(self.classes_), dtype=torch.bool, device=X.device)
        present[y if sample_weight is None else y[sample_weight > 0]] = True
        return ngebm_loss(
            _Restricted(self.module_, present), X, y, beta=self.beta, gamma=self.gamma,
            create_graph=training, criterion=self.classification_loss,
            sample_weight=sample_weight,
        )  # fmt: skip


def _data(network: str):
    bunch = load_mnist1d(shape="flat")
    scaler = StandardScaler().fit(bunch.X_train)
    X_train = scaler.transform(bunch.X_train).astype(np.float32)
    X_test = scaler.transform(bunch.X_test).astype(np.float32)
    if network == "conv":
        X_train, X_test = X_train.reshape(-1, 1, 40), X_test.reshape(-1, 1, 40)
    return X_train, X_test, bunch.y_train, bunch.y_test


def stream(cls, beta: float, seed: int, data) -> tuple[np.ndarray, float]:
    """Rows t = 1..4: A[t,t], within-task accuracy, mean max new logit, mean max old logit;
    and the final average accuracy."""
    X_train, X_test, y_train, y_test = data
    clf = cls(beta=beta, class_incremental=True, negatives="batch", replay_per_class=0,
              generated_per_class=0, max_epochs=15, random_state=seed)  # fmt: skip
    rows = []
    for t, task in enumerate(TASKS):
        clf.partial_fit(X_train[np.isin(y_train, task)], y_train[np.isin(y_train, task)])
        if t == 0:
            continue
        here = np.isin(y_test, task)
        with torch.no_grad():
            logits = clf.module_(torch.as_tensor(X_test[here], device=clf.device_)).cpu()
        new = np.searchsorted(clf.classes_, task)
        old = np.searchsorted(clf.classes_, [c for done in TASKS[:t] for c in done])
        truth = y_test[here]
        seen = np.concatenate([old, new])
        class_il = clf.classes_[seen[logits[:, seen].argmax(1)]] == truth
        task_il = clf.classes_[new[logits[:, new].argmax(1)]] == truth
        rows.append([class_il.mean(), task_il.mean(), logits[:, new].max(1).values.mean(),
                     logits[:, old].max(1).values.mean()])  # fmt: skip
    predicted = clf.predict(X_test)
    final = np.mean([np.mean((predicted == y_test)[np.isin(y_test, task)]) for task in TASKS])
    return np.array(rows), float(final)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--network", choices=("mlp", "conv"), default="mlp")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = _data(args.network)
    objectives = {
        "cross-entropy (beta=0)": (NGEBMClassifier, 0.0),
        "NG-EBM, energy over all classes": (NGEBMClassifier, 0.5),
        "NG-EBM, energy over the batch's": (BatchEnergyNGEBM, 0.5),
    }
    print(f"split MNIST-1D, {args.network}, batch negatives, no replay; median over seeds")
    header = f"{'A[t,t]':>23s} | {'within':>23s} | {'new logit':>23s} | {'old logit':>23s}"
    print(f"{'':34s} {header} | final")
    for name, (cls, beta) in objectives.items():
        results = [stream(cls, beta, s, data) for s in range(args.seeds)]
        table = np.median([rows for rows, _ in results], axis=0)
        cells = [" ".join(f"{v:5.2f}" for v in table[:, k]) for k in range(4)]
        final = np.median([final for _, final in results])
        print(f"{name:34s} " + " | ".join(cells) + f" | {final:.3f}")


if __name__ == "__main__":
    main()
