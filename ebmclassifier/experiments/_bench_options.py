"""The command ``python -m ebmclassifier bench`` and its options, declared once.

It imports neither torch nor the estimators (the command runs in
:mod:`~ebmclassifier.experiments.bench`, imported when it starts), so that ``--help`` and a
bad option answer at once.
"""

from __future__ import annotations

from ._command import THREADS, Command, Deferred, DeviceName, Option, OutputPath

__all__ = ["COMMAND"]

COMMAND = Command(
    name="bench",
    help="time CE, NG-EBM and JEM training steps, fit overhead and inference",
    description=(
        "Time one training step of CE, NG-EBM (exact and finite-difference) and JEM on the "
        "default networks, the epoch time of NGEBMClassifier.fit against a hand-written "
        "PyTorch loop, and inference throughput against plain PyTorch; with a GPU section "
        "when CUDA is present. It runs on one intra-op thread unless --threads says otherwise."
    ),
    options=(
        Option("--quick", "a few seconds; for tests only", {"action": "store_true"}),
        Option(
            "--json",
            "also write the figures to PATH as JSON",
            {"metavar": "PATH", "type": OutputPath(folder=False)},
        ),
        Option(
            "--device",
            "'auto' adds the GPU section when CUDA is present (default: auto)",
            {"choices": ("auto", "cpu", "cuda"), "default": "auto", "type": DeviceName()},
        ),
        Option(
            "--gpu-only",
            "the GPU section alone, without the CPU sections",
            {"action": "store_true"},
        ),
        THREADS,
    ),
    run=Deferred(".bench", "_run_command"),
)
