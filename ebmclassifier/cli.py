"""The command line: ``python -m ebmclassifier <command> ...``.

Each command lives in its own module and contributes ``add_parser(subparsers)``, which
registers its options and sets ``func`` to the function that runs it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

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


def _comma_list(kind):
    def parse(text: str):
        try:
            return [kind(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {kind.__name__}, got {text!r}"
            ) from None

    return parse


def _add_compare(subparsers) -> argparse.ArgumentParser:
    """Register the ``compare`` subcommand: CE vs CE + temperature scaling vs NG-EBM vs JEM.

    Parameters
    ----------
    subparsers : argparse subparsers action
        From ``ArgumentParser.add_subparsers``.

    Returns
    -------
    parser : argparse.ArgumentParser
        The subcommand's parser; its ``func`` default runs the comparison.
    """
    p = subparsers.add_parser(
        "compare",
        help="train CE, CE + temperature scaling, NG-EBM and JEM and compare them",
        description=(
            "Train each model for each seed and compare accuracy, calibration, OOD detection, "
            "robustness to PGD and training cost. Writes report.md, results.json and PNG "
            "figures into --out and prints the tables (median [min, max] over seeds)."
        ),
    )
    p.add_argument(
        "--data", default="digits",
        help="digits, mnist1d, cifar10, cifar100, svhn (with --data-dir) or a .npz/.csv file",
    )  # fmt: skip
    p.add_argument("--data-dir", default=None, help="folder of the CIFAR / SVHN files")
    p.add_argument(
        "--models", type=_comma_list(str), default=["ce", "ce_ts", "ngebm", "jem"],
        help="comma-separated, from ce, ce_ts, ngebm, ngebm_ts, jem, jem_ts "
        "(default: ce,ce_ts,ngebm,jem)",
    )  # fmt: skip
    p.add_argument("--seeds", type=int, default=3, help="number of seeds, 0..n-1 (default 3)")
    p.add_argument("--out", default="report", help="output folder (default report/)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per model (data default)")
    p.add_argument(
        "--lr", type=float, default=None, help="learning rate (data default, else the estimator's)"
    )
    p.add_argument("--batch-size", type=int, default=None, help="(estimator default)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, ... (default auto)")
    p.add_argument(
        "--network", default="default",
        help="default (from the data's shape) or wrn-D-K, e.g. wrn-28-10: a WideResNet "
        "without batch-norm, for images",
    )  # fmt: skip
    p.add_argument(
        "--epsilons", type=_comma_list(float), default=None,
        help="PGD radii, comma-separated (data default)",
    )  # fmt: skip
    p.add_argument("--norm", choices=["linf", "l2"], default="linf", help="PGD norm")
    p.add_argument("--attack-steps", type=int, default=10, help="PGD steps (default 10)")
    p.add_argument("--n-attack", type=int, default=500, help="test samples attacked (default 500)")
    p.add_argument("--max-train", type=int, default=None, help="subsample the training split")
    p.add_argument("--max-test", type=int, default=None, help="subsample the test split")
    p.add_argument(
        "--no-standardize", action="store_true",
        help="train on the inputs as given instead of standardizing them (per feature, or "
        "per channel for images and sequences)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p.set_defaults(func=run_compare_command)
    return p


def run_compare_command(args) -> int:
    """Run the comparison the parsed options describe, write the report, print the tables.

    Parameters
    ----------
    args : argparse.Namespace
        From the parser of :func:`_add_compare`.

    Returns
    -------
    status : int
        0 on success.
    """
    from ._report import write_report
    from .compare import CompareConfig, run_comparison

    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    config = CompareConfig(
        data=args.data,
        models=tuple(args.models),
        seeds=args.seeds,
        data_dir=args.data_dir,
        max_epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        device=args.device,
        network=args.network,
        epsilons=args.epsilons,
        norm=args.norm,
        attack_steps=args.attack_steps,
        n_attack=args.n_attack,
        max_train=args.max_train,
        max_test=args.max_test,
        progress=not args.no_progress,
        standardize=not args.no_standardize,
    )
    results = run_comparison(config, log=lambda msg: print(msg, file=sys.stderr))
    command = _command_line(args)
    tabs = write_report(results, args.out, command=command)
    for key in ("main", "ood_auroc", "robust"):
        print(tabs[key], end="\n\n")
    for line in tabs["verdicts"]:
        print("-", line)
    report = Path(args.out) / "report.md"
    print(f"\nReport: {report}, results.json and {len(tabs['figures'])} figures.")
    return 0


def _command_line(args) -> str:
    """The full command that reproduces this run, every option spelled out."""
    parts = ["python", "-m", "ebmclassifier", "compare", "--data", args.data]
    options = {
        "--data-dir": args.data_dir,
        "--models": ",".join(args.models),
        "--seeds": args.seeds,
        "--out": args.out,
        "--epochs": args.epochs,
        "--lr": args.lr,
        "--batch-size": args.batch_size,
        "--device": args.device,
        "--network": None if args.network == "default" else args.network,
        "--epsilons": None if args.epsilons is None else ",".join(f"{e:g}" for e in args.epsilons),
        "--norm": args.norm,
        "--attack-steps": args.attack_steps,
        "--n-attack": args.n_attack,
        "--max-train": args.max_train,
        "--max-test": args.max_test,
    }
    for flag, value in options.items():
        if value is not None:
            parts += [flag, str(value)]
    if args.no_standardize:
        parts.append("--no-standardize")
    return shlex.join(parts)


def _add_bench(subparsers) -> None:
    from .bench import add_parser

    add_parser(subparsers)


COMMANDS = [_add_demo, _add_compare, _add_bench]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command registered.

    Returns
    -------
    parser : argparse.ArgumentParser
        ``python -m ebmclassifier``'s parser: the commands ``demo``, ``compare`` and ``bench``.

    Examples
    --------
    >>> args = build_parser().parse_args(["compare", "--models", "ce,ngebm", "--seeds", "1"])
    >>> args.models, args.seeds, args.data
    (['ce', 'ngebm'], 1, 'digits')
    """
    parser = argparse.ArgumentParser(
        prog="python -m ebmclassifier",
        description="Energy-based classifiers as scikit-learn estimators.",
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``python -m ebmclassifier``).

    Parameters
    ----------
    argv : sequence of str or None, default=None
        The arguments after the program name; None reads ``sys.argv``.

    Returns
    -------
    status : int
        The exit status: 0 on success, 2 when the data or an option is wrong (missing files,
        an unknown model or network; the message goes to stderr). Without a command the help
        is printed.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
    ...     status = main([])
    >>> status, "compare" in printed.getvalue()
    (0, True)
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as exc:  # bad data or options: a message, no traceback
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
