"""The command line: ``python -m ebmclassifier <command> ...``.

Each command lives in its own module and contributes ``add_parser(subparsers)``, which
registers its options and sets ``func`` to the function that runs it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]


def _add_demo(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="NG-EBM vs cross-entropy on the digits: accuracy, calibration, OOD detection",
        description=(
            "Train NGEBMClassifier and its beta=0 (cross-entropy) baseline on standardized "
            "load_digits for a few seeds; print accuracy, ECE and OOD AUROC against uniform noise."
        ),
    )
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (default: 3)")
    parser.add_argument("--epochs", type=int, default=50, help="epochs per fit (default: 50)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args) -> int:
        from .demo import format_demo, run_demo

        rows = run_demo(range(args.seeds), max_epochs=args.epochs, progress=not args.quiet)
        print(format_demo(rows))
        return 0

    parser.set_defaults(func=run)


def _add_bench(subparsers) -> None:
    from .bench import add_parser

    add_parser(subparsers)


COMMANDS = [_add_demo, _add_bench]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command registered."""
    parser = argparse.ArgumentParser(
        prog="python -m ebmclassifier",
        description="Energy-based classifiers as scikit-learn estimators.",
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
