"""Naive fine-tuning, replay and LwF as hand-written PyTorch loops, against the estimators.

Avalanche (``avalanche-lib``) does not import here: it needs torchvision, and pip would bring it
with a CUDA build of torch that replaces the CPU one (``pip install --dry-run avalanche-lib``).
So the ``ce``, ``ce_replay`` and ``ce_lwf`` methods of ``python -m ebmclassifier continual``
are checked against these loops, written without the library: the same split of digits
(70/30, stratified, standardized), the command's tasks (0,9 / 1,8 / 2,7 / 3,6 / 4,5), the
same MLP (the estimators' default: 64-256-256-classes, SiLU), Adam at 1e-3, batches of 64, 15
epochs per task. The class-incremental head is a 10-logit layer whose logits of the classes
not yet seen are masked out (what growing the layer computes); replay keeps 20 random training
samples per class and weighs each stored class as an average class of the task; LwF adds
``T^2 KL(softmax(old / T) || softmax(new / T))`` over the classes seen before the task, with
the network as it was when the task began (weight 1, T = 2; Li & Hoiem 2016).

    PYTHONPATH=. python benchmarks/continual_reference.py --seeds 5

prints the median [min-max] final average accuracy of each loop, and of the estimators'
methods run on the same seeds (issues #24, #32).
"""

from __future__ import annotations

import argparse
import copy

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn

TASKS = [[0, 9], [1, 8], [2, 7], [3, 6], [4, 5]]


def _data(seed):
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=seed
    )
    scaler = StandardScaler().fit(X_train)
    as_tensor = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    return (
        as_tensor(scaler.transform(X_train)),
        as_tensor(scaler.transform(X_test)),
        y_train,
        y_test,
    )


def _distillation(logits, teacher_logits, temperature=2.0):
    """LwF's term, written out: T^2 * KL(p_teacher || p_student) at temperature T, mean."""
    p = F.softmax(teacher_logits / temperature, dim=1)
    log_q = F.log_softmax(logits / temperature, dim=1)
    return temperature**2 * (p * (torch.log(p) - log_q)).sum(1).mean()


def run_loop(seed: int, replay: int, epochs: int = 15, lwf: bool = False) -> float:
    """Final average accuracy (mean over tasks) of one hand-written stream."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    X_train, X_test, y_train, y_test = _data(seed)
    net = nn.Sequential(
        nn.Linear(64, 256), nn.SiLU(), nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, 10)
    )
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    seen, memory, teacher = [], [], None
    for task in TASKS:
        old = list(seen)
        if lwf and old:
            teacher = copy.deepcopy(net).requires_grad_(False)
        seen += task
        mask = torch.full((10,), float("-inf"))
        mask[seen] = 0.0
        rows = np.flatnonzero(np.isin(y_train, task))
        weights = np.ones(len(rows))
        if memory:
            stored = np.concatenate(memory)
            per_class = len(rows) / len(task)
            rows = np.concatenate([rows, stored])
            weights = np.concatenate([weights, np.full(len(stored), per_class / replay)])
        X, y = X_train[rows], torch.tensor(y_train[rows])
        w = torch.tensor(weights, dtype=torch.float32)
        for _ in range(epochs):
            order = torch.randperm(len(rows))
            for start in range(0, len(rows), 64):
                b = order[start : start + 64]
                logits = net(X[b]) + mask
                losses = F.cross_entropy(logits, y[b], reduction="none")
                loss = (w[b] * losses).sum() / w[b].sum()
                if teacher is not None:
                    loss = loss + _distillation(logits[:, old], teacher(X[b])[:, old])
                opt.zero_grad()
                loss.backward()
                opt.step()
        if replay:
            for c in task:
                memory.append(rng.choice(np.flatnonzero(y_train == c), replay, replace=False))
    with torch.no_grad():
        predicted = (net(X_test) + mask).argmax(1).numpy()
    return float(
        np.mean(
            [np.mean(predicted[np.isin(y_test, t)] == y_test[np.isin(y_test, t)]) for t in TASKS]
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()
    from ebmclassifier.experiments.continual import run_continual, summarize_runs

    seeds = range(args.seeds)
    loops = {
        "naive (hand-written)": (0, False),
        "replay 20/class (hand-written)": (20, False),
        "LwF (hand-written)": (0, True),
    }
    for name, (replay, lwf) in loops.items():
        values = [run_loop(seed, replay, args.epochs, lwf) for seed in seeds]
        print(f"{name:34s} {np.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]")
    tasks = "/".join(",".join(map(str, task)) for task in TASKS)
    runs = run_continual(
        ["digits"], ["ce", "ce_replay", "ce_lwf"], tasks, seeds, args.epochs, progress=False
    )
    for row in summarize_runs(runs):
        median, low, high = row["average_accuracy"]
        print(f"{row['method'] + ' (ebmclassifier)':34s} {median:.3f} [{low:.3f}-{high:.3f}]")


if __name__ == "__main__":
    main()
