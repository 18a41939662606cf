"""The command ``python -m ebmclassifier compare`` and its options, declared once.

Each option names the :class:`~ebmclassifier.experiments.compare.CompareConfig` field it sets,
its type with its bounds and its help; :data:`COMMAND` builds the parser, the checks and the
reproducing command line from them. This module imports neither torch nor the estimators, so
that ``--help`` and a bad option answer at once: the command runs in
:mod:`~ebmclassifier.experiments.compare`, imported when it starts.
"""

from __future__ import annotations

from ._command import (
    PROGRESS,
    THREADS,
    CommaList,
    Command,
    Deferred,
    DeviceName,
    Number,
    Option,
    OutputPath,
)

__all__ = ["COMMAND", "DETECTOR_NAMES", "OPTIONS"]

#: The names ``--detectors`` takes, in the default's order: the keys of
#: :data:`ebmclassifier.detectors.DETECTORS` (a test keeps the two equal), written here so
#: that the parser is built without importing the detectors.
DETECTOR_NAMES = ("mahalanobis", "knn", "vim")

#: The most a run can sensibly take: seeds, epochs (and PGD steps), samples.
MAX_SEEDS, MAX_EPOCHS, MAX_SAMPLES = 100, 10_000, 10_000_000
_SAMPLES_WHY = "more than any data set this command loads into memory"


def _option(flag, help, field=None, echo="always", **kwargs) -> Option:
    return Option(flag, help, kwargs, field=field, echo=echo)


#: The options, in the order ``--help`` lists them.
OPTIONS = (
    _option(
        "--data",
        "digits, mnist1d, cifar10, cifar100, svhn (with --data-dir) or a "
        ".npz/.csv file; several, comma-separated, run one after the other, one "
        "report section each (default digits,mnist1d: the main job; --data digits "
        "for digits alone)",
        "data",
        type=CommaList(str),
        default="digits,mnist1d",
    ),
    _option("--data-dir", "folder of the CIFAR / SVHN files", "data_dir", default=None),
    _option(
        "--models",
        "comma-separated, from ce, ce_ts, ce_ens, ngebm, ngebm_ts, "
        "ngebm_ens, jem, jem_ts (default: ce,ce_ts,ngebm,jem)",
        "models",
        type=CommaList(str),
        default=["ce", "ce_ts", "ngebm", "jem"],
    ),
    _option(
        "--seeds",
        "number of seeds, 0..n-1 (default 3)",
        "seeds",
        type=Number(
            int,
            low=1,
            high=MAX_SEEDS,
            why="each seed trains every model again; the report's medians need 3 to 10",
        ),
        default=3,
    ),
    _option(
        "--out",
        "output folder (default report/)",
        type=OutputPath(folder=True),
        default="report",
    ),
    _option(
        "--epochs",
        "epochs per model (data default)",
        "max_epochs",
        type=Number(int, low=1, high=MAX_EPOCHS, why="the papers train 150 to 200 epochs"),
        default=None,
    ),
    _option(
        "--lr",
        "learning rate (data default, else the estimator's)",
        "lr",
        type=Number(float, low=0, low_open=True),
        default=None,
    ),
    _option(
        "--batch-size",
        "(estimator default)",
        "batch_size",
        type=Number(int, low=1, also={-1: "the whole training split"}),
        default=None,
    ),
    _option(
        "--device",
        "auto, cpu, cuda, ... (default auto)",
        "device",
        type=DeviceName(),
        default="auto",
    ),
    _option(
        "--network",
        "default (from the data's shape), mlp (an MLP for any shape) or "
        "wrn-D-K, e.g. wrn-28-10: a WideResNet without batch-norm, for images (data "
        "default: mlp for mnist1d, the protocol's under --protocol, else default)",
        "network",
        "changed",
        default=None,
    ),
    _option(
        "--epsilons",
        "PGD radii, comma-separated (data default)",
        "epsilons",
        type=CommaList(Number(float, low=0)),
        default=None,
    ),
    _option("--norm", "PGD norm", "norm", choices=["linf", "l2"], default="linf"),
    _option(
        "--attack-steps",
        "PGD steps (default 10)",
        "attack_steps",
        type=Number(int, low=1, high=MAX_EPOCHS, why="PGD converges in tens of steps"),
        default=10,
    ),
    _option(
        "--n-attack",
        "test samples attacked (default 500)",
        "n_attack",
        type=Number(int, low=1, high=MAX_SAMPLES, why=_SAMPLES_WHY),
        default=500,
    ),
    _option(
        "--max-train",
        "subsample the training split to at most this many samples "
        "(a smaller one is kept whole; data default: 2000 for mnist1d, else all)",
        "max_train",
        type=Number(int, low=1, high=MAX_SAMPLES, why=_SAMPLES_WHY),
        default=None,
    ),
    _option(
        "--max-test",
        "subsample the test split",
        "max_test",
        type=Number(int, low=1, high=MAX_SAMPLES, why=_SAMPLES_WHY),
        default=None,
    ),
    _option(
        "--ood-classes",
        "labels to hold out of training, comma-separated; their test "
        "samples become the OOD set 'held-out classes'",
        "ood_classes",
        type=CommaList(str),
        default=None,
    ),
    _option(
        "--ood",
        "OOD files, comma-separated: .npz (array X) or .csv, in the data's "
        "sample shape; one OOD set each, named after the file",
        "ood_files",
        type=CommaList(str),
        default=None,
        metavar="FILE",
    ),
    _option(
        "--detectors",
        "post-hoc OOD detectors on each trained model's penultimate "
        f"features, fitted on its training data: {','.join(DETECTOR_NAMES)} (the default), "
        "or none",
        "detectors",
        type=CommaList(str),
        default=",".join(DETECTOR_NAMES),
    ),
    _option(
        "--protocol",
        "paper: the NG-EBM and JEM papers' CIFAR/SVHN recipe (WRN-28-10, "
        "150 epochs, Adam 1e-4 with warm-up and staircase, batches of 64, crop + flip + "
        "noise); --network, --epochs, --lr and --batch-size override it",
        "protocol",
        choices=("paper",),
        default=None,
    ),
    _option(
        "--no-standardize",
        "train on the inputs as given instead of standardizing "
        "them (per feature, or per channel for images and sequences)",
        "standardize",
        action="store_false",
        dest="standardize",
    ),
    PROGRESS,
    THREADS,
)


def _auto_threads(args) -> int | None:
    """``--threads auto``: one thread for the built-in data sets on the default or MLP networks;
    torch's setting otherwise, each fit choosing by its network's size (``Command``)."""
    small = set(args.data) <= {"digits", "mnist1d"} and args.protocol is None
    return 1 if small and (args.network or "default") in ("default", "mlp") else None


COMMAND = Command(
    name="compare",
    help="train CE, CE + temperature scaling, NG-EBM and JEM and compare them",
    description=(
        "Train each model for each seed and compare accuracy, calibration, selective "
        "classification (AURC), OOD detection and decisions, robustness to PGD and training "
        "cost. Prints a summary table (medians over seeds) and the verdicts that matter; "
        "writes report.md (every table as median [min, max] over seeds, every verdict, the "
        "figures with captions), results.json and the PNG figures into --out."
    ),
    options=OPTIONS,
    run=Deferred(".compare", "_run_command"),
    check=Deferred(".compare", "_check_options"),
    auto_threads=_auto_threads,
)
