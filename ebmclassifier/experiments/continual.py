"""Class-incremental learning, task after task: ``python -m ebmclassifier continual``.

Split digits or split MNIST-1D into tasks of classes (``--tasks 0,9/1,8/2,7/3,6/4,5``), train
each method on the tasks in turn with ``partial_fit`` (``class_incremental=True``), and measure
after every task, on the test samples of every class seen so far and with no task identity at
test time (the class-incremental scenario of van de Ven et al. 2019):

- the accuracy matrix ``A[t, j]``: accuracy on task ``j``'s test samples after training task
  ``t``, predictions over every class seen;
- the average accuracy ``mean_{j<=t} A[t, j]``;
- forgetting (Chaudhry et al. 2018): ``mean_{j<t} (max_{l<t} A[l, j] - A[t, j])``;
- the expected calibration error on the test samples of the classes seen;
- the AUROC of the energy ``E(x)`` as an OOD score, the classes not yet seen against those
  seen (none after the last task);
- the bytes a method keeps besides its network: stored samples, generated samples, LwF's
  copy of the network, all the data for ``joint``.

The methods, their names and what they build are in ``_continual_methods.METHODS`` (``--help``
lists them). MNIST-1D's signals reach the estimators as ``(n, 1, 40)``, so they build their
ConvNet (``--network mlp``: flat features and the MLP); the digits are flat. Methods whose
results are identical on every seed (``ce_batch`` and ``ce_k1`` on two-class tasks: one
negative to draw) are reported once. The experiment reaches the estimators through their
public methods only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from sklearn.preprocessing import StandardScaler
from tqdm.auto import tqdm

from ..metrics import expected_calibration_error, ood_metrics
from ._command import CommandError
from ._continual_methods import bytes_stored, expected_quiet, make_estimator, method_notes
from ._continual_options import COMMAND, DATASETS, DEFAULT_TASKS, METHODS
from ._continual_report import format_table, summarize_runs, write_continual_report
from ._report_files import interrupts_deferred
from .standardize import _standardized_digits

__all__ = [
    "format_table",
    "parse_tasks",
    "run_continual",
    "summarize_runs",
    "write_continual_report",
]


def parse_tasks(text: str) -> list[list[int]]:
    """``"0,1/2,3"`` -> ``[[0, 1], [2, 3]]``: tasks separated by ``/``, classes by commas.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of list of int

    Raises
    ------
    ValueError
        For an empty task, a label that is not an int, or a label in two tasks.

    Examples
    --------
    >>> parse_tasks("8,9/0,1")
    [[8, 9], [0, 1]]
    """
    tasks = []
    for part in text.split("/"):
        try:
            labels = [int(v) for v in part.split(",") if v.strip()]
        except ValueError:
            raise ValueError(
                f"--tasks: expected tasks of int labels like '0,1/2,3', got {text!r}"
            ) from None
        if not labels:
            raise ValueError(f"--tasks: {text!r} has an empty task")
        tasks.append(labels)
    flat = [c for task in tasks for c in task]
    if len(set(flat)) != len(flat):
        raise ValueError(f"--tasks: {text!r} names a class in more than one task")
    if len(tasks[0]) < 2:
        raise ValueError(
            f"--tasks: the first task must have at least 2 classes (a classifier needs two), "
            f"got {tasks[0]!r}"
        )
    return tasks


def _load(data: str, seed: int, network: str):
    """``(X_train, X_test, y_train, y_test)``, standardized; MNIST-1D as ``(n, 1, 40)``
    signals for the ConvNet, flat for the MLP."""
    if data == "digits":
        X_train, X_test, y_train, y_test = _standardized_digits(seed)
        if network == "conv":  # the 8x8 images
            X_train, X_test = X_train.reshape(-1, 1, 8, 8), X_test.reshape(-1, 1, 8, 8)
        return X_train, X_test, y_train, y_test
    from ..datasets import load_mnist1d

    bunch = load_mnist1d(shape="flat")
    scaler = StandardScaler().fit(bunch.X_train)
    X_train, X_test = scaler.transform(bunch.X_train), scaler.transform(bunch.X_test)
    if network == "conv":
        X_train, X_test = X_train.reshape(-1, 1, 40), X_test.reshape(-1, 1, 40)
    return X_train, X_test, bunch.y_train, bunch.y_test


def _network(data: str, network: str) -> str:
    """``"auto"``: the ConvNet for MNIST-1D's signals, the MLP for the digits."""
    if network != "auto":
        return network
    return "conv" if data == "mnist1d" else "mlp"


def _evaluate(clf, X_test, y_test, tasks, t) -> dict:
    """The metrics after task ``t`` (see the module's docstring)."""
    seen = np.isin(y_test, [c for task in tasks[: t + 1] for c in task])
    unseen = np.isin(y_test, [c for task in tasks[t + 1 :] for c in task])
    predicted = clf.predict(X_test[seen])
    row = [
        float(
            np.mean(
                predicted[np.isin(y_test[seen], task)] == y_test[seen][np.isin(y_test[seen], task)]
            )
        )
        for task in tasks[: t + 1]
    ]
    proba = clf.predict_proba(X_test[seen])
    result = {
        "accuracy_row": row,
        "average_accuracy": float(np.mean(row)),
        "ece": float(expected_calibration_error(y_test[seen], proba, classes=clf.classes_)),
        "ood_auroc": None,
    }
    if unseen.any():
        scores = ood_metrics(
            clf.score_ood(X_test[seen], "energy"), clf.score_ood(X_test[unseen], "energy")
        )
        result["ood_auroc"] = float(scores["auroc"])
    return result


def _forgetting(matrix: list[list[float]], t: int) -> float | None:
    """``mean_{j<t} (max_{l<t} A[l, j] - A[t, j])``; None after the first task."""
    if t == 0:
        return None
    return float(np.mean([max(matrix[l][j] for l in range(j, t)) - matrix[t][j] for j in range(t)]))


def _run_stream(method, data, seed, tasks, config) -> dict:
    X_train, X_test, y_train, y_test = config["_data"][(data, seed)]
    config = {**config, "network": _network(data, config["network"])}
    joint = METHODS[method].joint
    clf = None if joint else make_estimator(method, seed, config)
    matrix, steps = [], []
    for t, task in enumerate(tasks):
        if joint:  # a fresh fit on every task so far: the upper bound after task t
            clf = make_estimator(method, seed, config)
            rows = np.isin(y_train, [c for done in tasks[: t + 1] for c in done])
            clf.fit(X_train[rows], y_train[rows])
        else:
            if t > 0 and hasattr(clf, "remember_model"):  # LwF: the previous task's model
                clf.remember_model()
            rows = np.isin(y_train, task)
            with expected_quiet(method):  # a no-replay baseline warns on purpose
                clf.partial_fit(X_train[rows], y_train[rows])
        step = _evaluate(clf, X_test, y_test, tasks, t)
        matrix.append(step.pop("accuracy_row"))
        step["forgetting"] = _forgetting(matrix, t)
        steps.append(step)
    stored = bytes_stored(clf, X_train[rows].astype(np.float32) if joint else None)
    return {
        "method": method,
        "data": data,
        "seed": seed,
        "accuracy_matrix": matrix,
        "steps": steps,
        "bytes_stored": stored,
    }


def run_continual(
    data: Sequence[str] = ("digits",),
    methods: Sequence[str] = ("ce", "ce_batch"),
    tasks: str = DEFAULT_TASKS,
    seeds: Sequence[int] = (0,),
    epochs: int = 15,
    replay: int = 20,
    generated: int = 100,
    generated_steps: int = 40,
    network: str = "auto",
    hidden: Sequence[int] | None = None,
    lr: float = 1e-3,
    device: str = "auto",
    progress: bool = True,
    failures: list | None = None,
) -> list[dict]:
    """Train every method on every data set's task stream, for every seed, and measure it.

    Parameters
    ----------
    data : sequence of {"digits", "mnist1d"}, default=("digits",)
    methods : sequence of str, default=("ce", "ce_batch")
        Names of the command's methods (``python -m ebmclassifier continual --help``).
    tasks : str, default="0,9/1,8/2,7/3,6/4,5"
        See :func:`parse_tasks`.
    seeds : sequence of int, default=(0,)
        The estimator's ``random_state`` and, for digits, the train/test split.
    epochs : int, default=15
        Epochs per task (``max_epochs`` of each ``partial_fit``, and of each joint fit).
    replay : int, default=20
        ``replay_per_class`` of the stored-replay methods.
    generated : int, default=100
        ``generated_per_class`` of the generated-replay methods.
    generated_steps : int, default=40
        ``generated_steps`` of every method that generates.
    network : {"auto", "mlp", "conv"}, default="auto"
        The estimators' default network for the data's shape: ``"auto"`` gives MNIST-1D as
        ``(n, 1, 40)`` signals (the ConvNet) and the digits flat (the MLP); ``"mlp"`` flat
        features, ``"conv"`` signals or 8x8 images.
    hidden : sequence of int or None, default=None
        The MLP's hidden sizes; None: the estimator's default (two layers of 256).
    lr : float, default=1e-3
    device : str, default="auto"
    progress : bool, default=True
    failures : list or None, default=None
        Where a stream that raises (a ``DivergenceError``, say) goes, as ``{"method", "data",
        "seed", "error"}``, while the others run on; None: the error ends the call.

    Returns
    -------
    list of dict
        One run per (data, seed, method): ``accuracy_matrix`` (row ``t``: the accuracies on
        tasks ``0..t`` after task ``t``), ``steps``, the metrics after each task, and
        ``bytes_stored`` after the last task.

    Examples
    --------
    >>> runs = run_continual(methods=["ce_batch"], tasks="0,1/2,3", epochs=1, progress=False)
    >>> len(runs[0]["accuracy_matrix"]), sorted(runs[0]["steps"][1])
    (2, ['average_accuracy', 'ece', 'forgetting', 'ood_auroc'])
    """
    parsed = parse_tasks(tasks)
    config = {"epochs": epochs, "replay": replay, "generated": generated, "lr": lr}
    config["generated_steps"] = generated_steps
    config.update(device=device, network=network, _data={})
    config["hidden"] = None if hidden is None else list(hidden)
    for name in data:
        for seed in seeds:
            config["_data"][(name, seed)] = _load(name, seed, _network(name, network))
            labels = np.unique(config["_data"][(name, seed)][2])
            missing = sorted(set(c for t in parsed for c in t) - set(labels.tolist()))
            if missing:
                raise ValueError(f"--tasks names classes {missing} that {name} does not have")
    jobs = [(d, s, m) for d in data for s in seeds for m in methods]
    runs = []
    for name, seed, method in tqdm(jobs, desc="continual", disable=not progress):
        try:
            runs.append(_run_stream(method, name, seed, parsed, config))
        except Exception as exc:  # one failed stream must not lose the others' hours
            if failures is None:
                raise
            failures.append({"method": method, "data": name, "seed": seed, "error": repr(exc)})
    return runs


def _check(args) -> None:
    parse_tasks(args.tasks)
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        raise ValueError(f"argument --methods: unknown {unknown}; choose from {list(METHODS)}")
    bad = sorted(set(args.data) - set(DATASETS))
    if bad:
        raise ValueError(f"argument --data: unknown {bad}; choose from {list(DATASETS)}")
    flat = [m for m in args.methods if METHODS[m].flat_only]
    conv = [d for d in args.data if _network(d, args.network) == "conv"]
    if flat and conv:
        raise ValueError(
            f"argument --methods: {flat} need flat features, but {conv} reach the networks as "
            "signals or images with this --network; add --network mlp"
        )


def _run_command(args, log: Callable = print) -> int:
    failures = []
    runs = run_continual(
        args.data,
        args.methods,
        args.tasks,
        range(args.seeds),
        epochs=args.epochs,
        replay=args.replay,
        generated=args.generated,
        generated_steps=args.generated_steps,
        network=args.network,
        hidden=args.hidden,
        lr=args.lr,
        device=args.device,
        progress=args.progress,
        failures=failures,
    )
    failed = "; ".join(
        f"{f['method']!r} on {f['data']} at seed {f['seed']}: {f['error']}" for f in failures
    )
    if not runs:
        raise CommandError(f"every stream failed, nothing to report: {failed}")
    with interrupts_deferred():  # Ctrl-C now: the report is written whole first
        figures = write_continual_report(runs, args.out, command=COMMAND.command_line(args))
    summary = summarize_runs(runs)
    log(format_table(summary) + "\n")
    log("\n".join(method_notes(summary)))
    log(f"Report: {Path(args.out) / 'report.md'}, results.json and {len(figures)} figures.")
    if failures:
        raise CommandError(
            f"{len(failures)} stream(s) failed, the report leaves them out: {failed}"
        )
    return 0
