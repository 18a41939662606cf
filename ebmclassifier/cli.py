"""The command line: ``python -m ebmclassifier <command> ...``."""

from __future__ import annotations

import argparse
import shlex
import sys


def _comma_list(kind):
    def parse(text: str):
        try:
            return [kind(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {kind.__name__}, got {text!r}"
            ) from None

    return parse


def add_compare_parser(subparsers) -> argparse.ArgumentParser:
    """The ``compare`` subcommand: CE vs CE + temperature scaling vs NG-EBM vs JEM."""
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
        help="comma-separated, from ce, ce_ts, ngebm, jem (default: all)",
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
        "--epsilons", type=_comma_list(float), default=None,
        help="PGD radii, comma-separated (data default)",
    )  # fmt: skip
    p.add_argument("--norm", choices=["linf", "l2"], default="linf", help="PGD norm")
    p.add_argument("--attack-steps", type=int, default=10, help="PGD steps (default 10)")
    p.add_argument("--n-attack", type=int, default=500, help="test samples attacked (default 500)")
    p.add_argument("--max-train", type=int, default=None, help="subsample the training split")
    p.add_argument("--max-test", type=int, default=None, help="subsample the test split")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p.set_defaults(func=run_compare_command)
    return p


def run_compare_command(args) -> int:
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
        epsilons=args.epsilons,
        norm=args.norm,
        attack_steps=args.attack_steps,
        n_attack=args.n_attack,
        max_train=args.max_train,
        max_test=args.max_test,
        progress=not args.no_progress,
    )
    results = run_comparison(config, log=lambda msg: print(msg, file=sys.stderr))
    command = "python -m ebmclassifier " + shlex.join(args.argv)
    tabs = write_report(results, args.out, command=command)
    for key in ("main", "ood_auroc", "robust"):
        print(tabs[key], end="\n\n")
    for line in tabs["verdicts"]:
        print("-", line)
    print(f"\nReport: {args.out}/report.md, results.json and {len(tabs['figures'])} figures.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ebmclassifier",
        description="Energy-based classifiers as scikit-learn estimators.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_compare_parser(subparsers)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    return args.func(args)
