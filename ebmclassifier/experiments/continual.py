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
from ..plotting import plot_accuracy_matrices, plot_task_curves
from ._command import THREADS, CommaList, Command, DeviceName, Number, Option, OutputPath
from ._continual_methods import (
    METHODS,
    bytes_stored,
    legend,
    make_estimator,
    merge_coinciding,
    method_notes,
)
from .report import save_report
from .standardize import _standardized_digits

__all__ = [
    "format_table",
    "parse_tasks",
    "run_continual",
    "summarize_runs",
    "write_continual_report",
]

DATASETS = ("digits", "mnist1d")


class _LayerSizes(CommaList):
    """``"256,256"`` -> ``[256, 256]``: layer sizes, which may repeat (unlike other lists)."""

    def __init__(self):
        super().__init__(Number(int, 1))
        self.__name__ = "comma-separated layer sizes"

    def __call__(self, text: str) -> list:
        sizes = []
        for part in text.split(","):  # one at a time: the parent refuses repeated values
            sizes += super().__call__(part)
        return sizes


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
            clf.partial_fit(X_train[rows], y_train[rows])
        step = _evaluate(clf, X_test, y_test, tasks, t)
        matrix.append(step.pop("accuracy_row"))
        step["forgetting"] = _forgetting(matrix, t)
        steps.append(step)
    stored = bytes_stored(clf, X_train[rows].astype(np.float32) if joint else None)
    return {"method": method, "data": data, "seed": seed, "accuracy_matrix": matrix,
            "steps": steps, "bytes_stored": stored}  # fmt: skip


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
        runs.append(_run_stream(method, name, seed, parsed, config))
    return runs


def summarize_runs(runs: list[dict]) -> list[dict]:
    """Per (data, method): median, min and max over seeds of the final metrics.

    Methods whose accuracy matrices are identical on every seed of a data set are one row,
    under the first one's name, with the others in ``same_as``.

    Parameters
    ----------
    runs : list of dict
        From :func:`run_continual`.

    Returns
    -------
    list of dict
        ``data``, ``method``, ``seeds``, ``same_as`` and for each of ``average_accuracy``,
        ``forgetting``, ``ece`` (after the last task), ``ood_auroc`` (mean over the tasks
        before the last) and ``bytes_stored`` a ``(median, min, max)`` triple; ``curve``, the
        median average accuracy after each task.

    Examples
    --------
    >>> runs = run_continual(methods=["ce"], tasks="0,1/2,3", epochs=1, progress=False)
    >>> row = summarize_runs(runs)[0]
    >>> row["method"], len(row["curve"]), len(row["average_accuracy"]), row["same_as"]
    ('ce', 2, 3, [])
    """
    rows = []
    for data, method in dict.fromkeys((r["data"], r["method"]) for r in runs):
        group = [r for r in runs if r["data"] == data and r["method"] == method]
        row = {"data": data, "method": method, "seeds": [r["seed"] for r in group]}
        final = {
            "average_accuracy": [r["steps"][-1]["average_accuracy"] for r in group],
            "forgetting": [r["steps"][-1]["forgetting"] or 0.0 for r in group],
            "ece": [r["steps"][-1]["ece"] for r in group],
            "ood_auroc": [
                float(np.mean([s["ood_auroc"] for s in r["steps"][:-1]]))
                if len(r["steps"]) > 1
                else float("nan")
                for r in group
            ],
            "bytes_stored": [r.get("bytes_stored", 0) for r in group],
        }
        for key, values in final.items():
            row[key] = (float(np.median(values)), float(np.min(values)), float(np.max(values)))
        curves = np.array([[s["average_accuracy"] for s in r["steps"]] for r in group])
        row["curve"] = np.median(curves, axis=0).tolist()
        row["same_as"] = []
        rows.append(row)
    return merge_coinciding(rows, runs)


def format_table(summary: list[dict]) -> str:
    """A markdown table of :func:`summarize_runs`'s rows: median [min-max] over seeds.

    A row that stands for methods with identical results names them all (``ce_batch =
    ce_k1``).

    Parameters
    ----------
    summary : list of dict

    Returns
    -------
    str

    Examples
    --------
    >>> row = {"data": "digits", "method": "ce", "seeds": [0], "average_accuracy": (0.2,) * 3,
    ...        "forgetting": (0.9,) * 3, "ece": (0.5,) * 3, "ood_auroc": (0.6,) * 3,
    ...        "bytes_stored": (0.0,) * 3, "same_as": []}
    >>> format_table([row]).splitlines()[2].split(" | ")[:4]
    ['| digits', 'ce', '0.200 [0.200-0.200]', '0.900 [0.900-0.900]']
    """
    keys = ("average_accuracy", "forgetting", "ece", "ood_auroc")
    lines = [
        "| data | method | final average accuracy | forgetting | ECE | OOD AUROC (unseen) "
        "| bytes stored |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary:
        cells = [f"{row[k][0]:.3f} [{row[k][1]:.3f}-{row[k][2]:.3f}]" for k in keys]
        cells.append(_size(row["bytes_stored"][0]))
        name = " = ".join([row["method"], *row["same_as"]])
        lines.append(f"| {row['data']} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _size(n_bytes: float) -> str:
    """``0``, ``31.2 KiB``, ``1.5 MiB``."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes:.0f}"


def _median_matrices(runs: list[dict]) -> dict[str, np.ndarray]:
    """Method -> its accuracy matrix, the median over seeds (NaN above the diagonal)."""
    matrices = {}
    for method in dict.fromkeys(r["method"] for r in runs):
        stack = [r["accuracy_matrix"] for r in runs if r["method"] == method]
        n = len(stack[0])
        matrix = np.full((len(stack), n, n), np.nan)
        for s, m in enumerate(stack):
            for t, row in enumerate(m):
                matrix[s, t, : len(row)] = row
        matrices[method] = np.median(matrix, axis=0)
    return matrices


def _figures(runs: list[dict], summary: list[dict], out: Path) -> list[str]:
    """Per data set, the accuracy curves and the accuracy matrices; their file names (a
    method that another's row stands for is not drawn)."""
    names = []
    for data in dict.fromkeys(r["data"] for r in runs):
        rows = [s for s in summary if s["data"] == data]
        shown = {row["method"] for row in rows}
        curves = {row["method"]: row["curve"] for row in rows}
        styles = {m: "--" if m == "joint" else ":" if "replay" in m else "-" for m in curves}
        name = f"continual_{data}_curves.png"
        plot_task_curves(curves, styles=styles, title=f"split {data}: median over seeds",
                         path=out / name)  # fmt: skip
        names.append(name)
        name = f"continual_{data}_matrices.png"
        drawn = [r for r in runs if r["data"] == data and r["method"] in shown]
        plot_accuracy_matrices(_median_matrices(drawn), path=out / name)
        names.append(name)
    return names


def write_continual_report(runs: list[dict], out, command: str = "") -> list[str]:
    """Write ``report.md``, ``results.json`` and the figures into ``out``.

    Through the reports' one writer (:func:`~ebmclassifier.experiments.report.save_report`)
    and the figures of :mod:`ebmclassifier.plotting`.

    Parameters
    ----------
    runs : list of dict
        From :func:`run_continual`.
    out : str or path-like
        The folder; created if needed.
    command : str, default=""
        The command line that reproduces the run, written into the report.

    Returns
    -------
    list of str
        The figures' file names.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> runs = run_continual(methods=["ce"], tasks="0,1/2,3", epochs=1, progress=False)
    >>> with tempfile.TemporaryDirectory() as out:
    ...     figures = write_continual_report(runs, out)
    ...     files = sorted(path.name for path in Path(out).iterdir())
    >>> files
    ['continual_digits_curves.png', 'continual_digits_matrices.png', 'report.md', 'results.json']
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize_runs(runs)
    figures = _figures(runs, summary, out)
    text = [
        "# Class-incremental learning",
        "",
        f"`{command}`" if command else "",
        "",
        "Median [min-max] over seeds, after the last task; forgetting as Chaudhry et al. "
        "(2018); OOD AUROC: the energy, the classes not yet seen against those seen, mean "
        "over the tasks before the last; bytes stored: what a method keeps besides its "
        "network after the last task (median).",
        "",
        format_table(summary),
        "",
        *method_notes(summary),
        "",
    ]
    text += [f"![{name}]({name})" for name in figures]
    payload = {"command": command, "summary": summary, "runs": runs}
    save_report(out, "\n".join(text) + "\n", payload)
    return figures


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
        progress=not args.quiet,
    )
    figures = write_continual_report(runs, args.out, command=COMMAND.command_line(args))
    summary = summarize_runs(runs)
    log(format_table(summary) + "\n")
    log("\n".join(method_notes(summary)))
    log(f"Report: {Path(args.out) / 'report.md'}, results.json and {len(figures)} figures.")
    return 0


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
            {"type": _LayerSizes(), "default": None},
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
        Option("--quiet", "no progress bar", {"action": "store_true"}),
        THREADS,
    ),
    run=_run_command,
    check=_check,
)
