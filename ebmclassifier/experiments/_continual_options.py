"""The command ``python -m ebmclassifier continual``, its options and its methods, declared once.

Each method is an estimator (named, not imported) with its parameters and a one-line
description, which the command's ``--help``, its printed legend and ``report.md`` show
(:func:`legend`); :func:`~ebmclassifier.experiments._continual_methods.make_estimator` builds
it. This module imports neither torch nor the estimators (the command runs in
:mod:`~ebmclassifier.experiments.continual`, imported when it starts), so that ``--help`` and a
bad option answer at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._command import (
    PROGRESS,
    THREADS,
    CommaList,
    Command,
    Deferred,
    DeviceName,
    LayerSizes,
    Number,
    Option,
    OutputPath,
)

__all__ = ["COMMAND", "DATASETS", "DEFAULT_METHODS", "DEFAULT_TASKS", "METHODS", "legend"]

DATASETS = ("digits", "mnist1d")


#: The methods run when ``--methods`` is not given: the table of docs/continual.md.
DEFAULT_METHODS = [
    "joint",
    "ce",
    "ce_batch",
    "ngebm_batch",
    "jem_batch",
    "ngebm_generated",
    "ngebm_batch_replay",
    "ce_lwf",
    "ngebm",
    "jem",
]
DEFAULT_TASKS = "0,9/1,8/2,7/3,6/4,5"
NETWORKS = ("auto", "mlp", "conv")


@dataclass(frozen=True)
class Method:
    """A method of the command: the estimator, its parameters, and what it is.

    ``estimator``: the class's name, ``"NGEBMClassifier"``, ``"JEMClassifier"`` or
    ``"LwFClassifier"``; ``label_conditioned``: the network is ``LabelConditionedMLP``.

    ``no_replay_baseline``: a baseline that runs an energy term with restricted negatives and
    no replay on purpose, to show what replay adds; the warning a user's own fit of that
    combination gets (:data:`NO_REPLAY_WARNING`) is silenced for it (:func:`expected_quiet`).
    """

    estimator: str
    params: dict
    description: str
    joint: bool = False
    flat_only: bool = False
    label_conditioned: bool = False
    no_replay_baseline: bool = False


_NONE = {"replay_per_class": 0, "generated_per_class": 0}
_CE = {"beta": 0.0, **_NONE}
_JEM_FAST = {"sgld_steps": 10, "buffer_size": 2000, "sampler": "proximal"}

#: Every method of the command, by name.
METHODS: dict[str, Method] = {
    "joint": Method(
        "NGEBMClassifier",
        {"beta": 0.0, "negatives": "all", **_NONE},
        "a fresh cross-entropy fit on every task so far, after each task: the "
        "upper bound (it stores all the data)",
        joint=True,
    ),
    "ce": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": "all"},
        "naive fine-tuning: cross-entropy over every class seen, no replay (the lower bound)",
    ),
    "ce_batch": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": "batch"},
        "cross-entropy normalised over the batch's classes only (Li et al. 2020), no replay",
    ),
    "ce_k1": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": 1},
        "cross-entropy against one negative class drawn per sample (Li et al.'s k=1), no replay",
    ),
    "ngebm_batch": Method(
        "NGEBMClassifier",
        {"beta": 0.5, "negatives": "batch", **_NONE},
        "NG-EBM (beta=0.5) with batch negatives, no replay: a no-replay baseline",
        no_replay_baseline=True,
    ),
    "jem_batch": Method(
        "JEMClassifier",
        {"negatives": "batch", **_JEM_FAST, **_NONE},
        "JEM with batch negatives, no replay (proximal sampler, 10 steps, buffer of 2000): "
        "a no-replay baseline",
        no_replay_baseline=True,
    ),
    "ce_cond": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": "all"},
        "naive fine-tuning of the label-conditioned network E(x, y) (flat data)",
        flat_only=True,
        label_conditioned=True,
    ),
    "ce_batch_cond": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": "batch"},
        "batch negatives with the label-conditioned network E(x, y) (flat data)",
        flat_only=True,
        label_conditioned=True,
    ),
    "ce_lwf": Method(
        "LwFClassifier",
        {**_CE, "negatives": "all"},
        "fine-tuning plus LwF's distillation of the previous task's model on the "
        "new data (Li & Hoiem 2016; weight 1, T=2): the regulariser baseline",
    ),
    "ce_replay": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": "all", "replay_per_class": None},
        "fine-tuning with --replay stored training samples per class",
    ),
    "ce_batch_replay": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": "batch", "replay_per_class": None},
        "batch negatives with --replay stored samples per class",
    ),
    "ce_k1_replay": Method(
        "NGEBMClassifier",
        {**_CE, "negatives": 1, "replay_per_class": None},
        "one drawn negative with --replay stored samples per class",
    ),
    "ngebm_batch_replay": Method(
        "NGEBMClassifier",
        {"beta": 0.5, "negatives": "batch", **_NONE, "replay_per_class": None},
        "NG-EBM, batch negatives, --replay stored samples per class, "
        "none generated (stored replay)",
    ),
    "ngebm_generated": Method(
        "NGEBMClassifier",
        {"beta": 0.5, "negatives": "batch", **_NONE, "generated_per_class": None},
        "NG-EBM, batch negatives, --generated samples per old class "
        "drawn from the model itself, nothing stored (generated "
        "replay)",
    ),
    "jem_generated": Method(
        "JEMClassifier",
        {"negatives": "batch", **_JEM_FAST, **_NONE, "generated_per_class": None},
        "JEM (as jem_batch) with generated replay, nothing stored",
    ),
    "ngebm": Method(
        "NGEBMClassifier",
        {},
        "NGEBMClassifier(class_incremental=True), every other parameter at its "
        "default: batch negatives, 20 stored and 100 generated samples per class",
    ),
    "jem": Method(
        "JEMClassifier",
        {},
        "JEMClassifier(class_incremental=True), every other parameter at its "
        "default (SGLD sampler, 20 steps, buffer of 10000)",
    ),
}


def legend(names) -> str:
    """One line per method: its name and what it is.

    Parameters
    ----------
    names : iterable of str
        Keys of :data:`METHODS`.

    Returns
    -------
    str

    Examples
    --------
    >>> print(legend(["ce"]))
    ce: naive fine-tuning: cross-entropy over every class seen, no replay (the lower bound)
    """
    return "\n".join(f"{name}: {METHODS[name].description}" for name in names)


COMMAND = Command(
    name="continual",
    help="class-incremental learning on split digits / MNIST-1D: accuracy matrix, forgetting",
    description=(
        "Split the data into tasks of classes, train each method task after task with "
        "partial_fit (class_incremental=True) and report after every task the accuracy "
        "matrix, the average accuracy over the classes seen, forgetting, ECE and the energy's "
        "OOD AUROC on the classes not yet seen. Writes report.md, results.json and figures."
    ),
    epilog="methods:\n" + "\n".join(f"  {line}" for line in legend(METHODS).splitlines()),
    options=(
        Option(
            "--data",
            "comma-separated: digits, mnist1d (default: digits)",
            {"type": CommaList(str), "default": ["digits"]},
        ),
        Option(
            "--tasks",
            f"tasks of classes, '/' between tasks (default: {DEFAULT_TASKS})",
            {"default": DEFAULT_TASKS},
        ),
        Option(
            "--methods",
            f"comma-separated names, listed below (default: {','.join(DEFAULT_METHODS)})",
            {"type": CommaList(str), "default": DEFAULT_METHODS},
        ),
        Option("--seeds", "number of seeds (default: 5)", {"type": Number(int, 1), "default": 5}),
        Option(
            "--epochs", "epochs per task (default: 15)", {"type": Number(int, 1), "default": 15}
        ),
        Option(
            "--replay",
            "stored samples per class of the *_replay methods (default: 20)",
            {"type": Number(int, 1), "default": 20},
        ),
        Option(
            "--generated",
            "generated samples per old class of the *_generated methods (default: 100)",
            {"type": Number(int, 1), "default": 100},
        ),
        Option(
            "--generated-steps",
            "the sampler's steps of generated replay, in every method that generates (default: 40)",
            {"type": Number(int, 0), "default": 40},
        ),
        Option(
            "--network",
            "auto (MNIST-1D as signals for the ConvNet, digits flat for the MLP), mlp (flat "
            "features) or conv (signals, 8x8 images) (default: auto)",
            {"choices": NETWORKS, "default": "auto"},
        ),
        Option(
            "--hidden",
            "the MLP's hidden sizes (default: the estimators', 256,256)",
            {"type": LayerSizes(), "default": None},
        ),
        Option(
            "--lr",
            "learning rate (default: 0.001)",
            {"type": Number(float, 0, low_open=True), "default": 1e-3},
        ),
        Option(
            "--device",
            "auto, cpu or cuda[:N] (default: auto)",
            {"type": DeviceName(), "default": "auto"},
        ),
        Option(
            "--out",
            "folder for report.md, results.json and figures (default: continual)",
            {"type": OutputPath(folder=True), "default": "continual"},
        ),
        PROGRESS,
        THREADS,
    ),
    run=Deferred(".continual", "_run_command"),
    check=Deferred(".continual", "_check"),
)
