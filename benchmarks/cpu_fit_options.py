"""What ``compile=True`` and ``precision="bfloat16"`` cost a digits fit on the CPU.

The README's quickstart fit, ``NGEBMClassifier`` on the standardized digits (1,347 training
samples, the default MLP, 50 epochs), with each CPU-relevant option: float32 against bfloat16
autocast, and ``compile=True`` against eager. ``compile=True`` needs
``grad_norm="finite_difference"`` on NG-EBM (the default ``grad_norm="exact"`` differentiates
the gradient norm by double backward, which compiled code cannot, and ``fit`` refuses it), so
the compiled rows run the finite difference and are compared with its eager fit. CE
(``beta=0``) shows the same options without the gradient-norm term. Each round fits every
setting once, in a rotating order; the table gives the median over rounds of the CPU time and
the wall time of a whole ``fit`` (a compiled fit compiles when training starts, every fit: its
time includes that), the ratio to the eager float32 fit of the same loss, and the test
accuracy. The first fit of the process is an untimed warm-up of each setting (inductor's C++
build on its first compile; cold, it takes 10-20 s more).

::

    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 python benchmarks/cpu_fit_options.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import NGEBMClassifier

#: setting -> (its reference setting, the estimator's parameters)
SETTINGS = {
    "NG-EBM exact, float32 (the default)": (None, {}),
    "NG-EBM exact, bfloat16": ("NG-EBM exact, float32 (the default)", {"precision": "bfloat16"}),
    "NG-EBM fd, float32": (None, {"grad_norm": "finite_difference"}),
    "NG-EBM fd, float32, compile=True": (
        "NG-EBM fd, float32",
        {"grad_norm": "finite_difference", "compile": True},
    ),
    "NG-EBM fd, bfloat16": (
        "NG-EBM fd, float32",
        {"grad_norm": "finite_difference", "precision": "bfloat16"},
    ),
    "CE (beta=0), float32": (None, {"beta": 0.0}),
    "CE (beta=0), float32, compile=True": ("CE (beta=0), float32", {"beta": 0.0, "compile": True}),
    "CE (beta=0), bfloat16": ("CE (beta=0), float32", {"beta": 0.0, "precision": "bfloat16"}),
}


def digits():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def fit_once(params: dict, data) -> tuple[float, float, float]:
    """``(CPU seconds, wall seconds, test accuracy)`` of one fit."""
    X_train, X_test, y_train, y_test = data
    clf = NGEBMClassifier(random_state=0, **params)
    cpu, wall = time.process_time(), time.perf_counter()
    clf.fit(X_train, y_train)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, float(clf.score(X_test, y_test))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = digits()
    try:  # the refusal the README describes
        NGEBMClassifier(compile=True, max_epochs=1).fit(data[0][:64], data[2][:64])
    except ValueError as exc:
        print(f"compile=True on the default NG-EBM: {str(exc).splitlines()[0][:160]}...")
    names = list(SETTINGS)
    for name in names:  # warm-up: imports, allocator, inductor's build
        fit_once({**SETTINGS[name][1], "max_epochs": 1}, data)
    times = {name: [] for name in names}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            times[name].append(fit_once(SETTINGS[name][1], data))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; {args.rounds} rounds")
    print("| setting | fit, CPU s | fit, wall s | CPU time x its eager float32 | accuracy |")
    print("|---|---|---|---|---|")
    eager = {name: np.median([t[0] for t in times[name]]) for name in names}
    for name in names:
        cpu, wall, accuracy = (np.median(col) for col in zip(*times[name], strict=True))
        reference = SETTINGS[name][0]
        ratio = "1" if reference is None else f"{cpu / eager[reference]:.2f}"
        print(f"| {name} | {cpu:.2f} | {wall:.2f} | {ratio} | {accuracy:.3f} |")


if __name__ == "__main__":
    main()
