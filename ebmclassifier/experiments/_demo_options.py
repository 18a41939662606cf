"""The command ``python -m ebmclassifier demo`` and its options, declared once.

It imports neither torch nor the estimators (the command runs in
:mod:`~ebmclassifier.experiments.demo`, imported when it starts), so that ``--help`` and a bad
option answer at once.
"""

from __future__ import annotations

from ._command import PROGRESS, THREADS, Command, Deferred, Number, Option

__all__ = ["COMMAND"]

COMMAND = Command(
    name="demo",
    help="NG-EBM vs cross-entropy on the digits: accuracy, calibration, OOD detection",
    description=(
        "Train NGEBMClassifier and its beta=0 (cross-entropy) baseline on standardized "
        "load_digits for a few seeds; print accuracy, ECE and OOD AUROC against uniform noise."
    ),
    options=(
        Option("--seeds", "number of seeds (default: 3)", {"type": Number(int, 1), "default": 3}),
        Option("--epochs", "epochs per fit (default: 50)", {"type": Number(int, 1), "default": 50}),
        PROGRESS,
        THREADS,
    ),
    run=Deferred(".demo", "_run_command"),
)
