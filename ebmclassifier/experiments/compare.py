"""The comparison behind ``python -m ebmclassifier compare``: train each model per seed, measure.

Inputs are standardized first (to zero mean and unit variance over the training split: each
feature of flat data, each channel of images and sequences; on by default, see
:class:`Standardizer`): the estimators' defaults (NG-EBM's ``beta``, JEM's SGLD step and
noise) are in the units of the input, and they are tuned on standardized data. The test split
and every OOD set go through the same transform, so the OOD sets stay what they were in the
data's own units (uniform noise over the raw input range), and the attacks run in the data's
own units too: the standardization is the first layer of the network PGD differentiates, so an
epsilon of 8/255 means 8/255 of a pixel.

For every seed the training split is divided once more: a held-out calibration part (default
20%, stratified) is kept for temperature scaling (``ce_ts``) and every model trains on the rest,
so all models see the same data. Each model is then measured on the test split: accuracy,
calibration (ECE, MCE, classwise ECE, negative log-likelihood), OOD detection (AUROC, AUPR-in,
AUPR-out, FPR95 of each OOD score against each OOD set), accuracy under PGD at each epsilon,
and the training time per epoch (skorch's per-epoch ``dur``). :func:`write_report` turns the
runs into tables, ``report.md``, ``results.json`` and figures.

Beyond the test split's own OOD sets, ``ood_classes`` trains every model without some labels
and makes their test samples the OOD set ``held-out classes``, and ``ood_files`` adds the
user's own OOD samples (see :mod:`ebmclassifier.experiments._ood_sets`); ``detectors`` adds
post-hoc detectors on the CE model's penultimate features, fitted on its training data. Each
model also gets the area under its risk-coverage curve (AURC) per score and, per score, an OOD
decision threshold calibrated on the held-out calibration split (``calibrate_ood`` with
``tpr=0.95``), with the share of test samples it flags and of each OOD set it misses.

Every measurement goes through the estimators' public methods (``predict_proba``,
``score_ood``, ``calibrate_ood``) and :func:`~ebmclassifier.metrics.adversarial_accuracy`.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from ..augment import paper_augmentation
from ..datasets import load_named_dataset
from ..datasets.named import data_kind
from ..detectors import DETECTORS
from ..protocol import PAPER_DATASETS, paper_callbacks, paper_protocol
from ._command import CommaList, Command, CommandError, DeviceName, Number, Option, OutputPath
from ._measure import OOD_TPR, EpochBar, Split, measure
from ._ood_sets import add_requested_ood
from .models import DETECTOR_BASE, ModelSpec, build_detector, default_models, network_params
from .report import write_report, write_reports
from .standardize import Standardizer

__all__ = [
    "CompareConfig",
    "ModelSpec",
    "Standardizer",
    "default_models",
    "network_params",
    "run_comparison",
    "write_report",
]

# Per data set: training length, learning rate (None: the estimator's) and attack radii that
# fit its input scale. MNIST-1D: the default ConvNet reaches 87-89% test accuracy with CE at
# the estimators' lr=1e-3 (30-50 epochs) and 91-93% at lr=3e-3 (30 epochs, 3 seeds).
DATA_DEFAULTS = {
    "digits": {"max_epochs": 30, "epsilons": (0.0, 0.02, 0.05, 0.1)},
    "mnist1d": {"max_epochs": 30, "lr": 3e-3, "epsilons": (0.0, 0.05, 0.1, 0.2)},
    "cifar10": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "cifar100": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "svhn": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "file": {"max_epochs": 30, "epsilons": None},  # None: fractions of the input range
}


@dataclass
class CompareConfig:
    """Everything ``compare`` needs; the CLI fills it from its options.

    Parameters
    ----------
    data, data_dir, max_train, max_test
        The data set, as :func:`~ebmclassifier.datasets.load_named_dataset` takes them.
    models : sequence of str
        Names from the registry (:func:`default_models`).
    seeds : int
        Seeds ``0 .. seeds - 1``; each fixes the calibration split, the estimators'
        ``random_state`` and the attacks' random starts.
    max_epochs, lr, batch_size : int, float, int or None
        Training; None takes the data set's default (``DATA_DEFAULTS``), else the estimator's.
    device : str
        The estimators' ``device``.
    epsilons : sequence of float or None
        PGD radii; None takes the data set's default.
    network : str
        ``"default"`` or ``"wrn-D-K"``, see :func:`network_params`.
    norm : {"linf", "l2"}
    attack_steps : int
    n_attack : int or None
        How many test samples are attacked (None: all).
    calibration_size : float
        Fraction of the training split held out for ``ce_ts``.
    n_bins : int
        Bins of the calibration errors.
    progress : bool
        Show tqdm progress bars.
    standardize : bool
        Standardize every feature over the training split before training (see the module
        docstring); attacks and OOD sets stay in the data's own units either way.
    extra_params : dict of str to dict
        Additional estimator parameters per model name, e.g. ``{"jem": {"sgld_steps": 10}}``.
    ood_classes : sequence or None
        Labels held out of training (matched as text, so ``"5"`` names the label ``5``);
        their test samples become the OOD set ``"held-out classes"``. At least two labels must
        stay.
    ood_files : sequence of str
        ``.npz`` (array ``X``) or ``.csv`` files of OOD samples in the data's sample shape,
        each an OOD set named after the file's stem, standardized like the test split.
    detectors : sequence of str
        Post-hoc detectors (names of :data:`~ebmclassifier.detectors.DETECTORS`) fitted on the
        ``ce`` model's penultimate features of its training data; ``ce`` must be in ``models``.

    protocol : {"paper"} or None
        ``"paper"``: the NG-EBM and JEM papers' CIFAR/SVHN recipe
        (:func:`~ebmclassifier.protocol.paper_protocol`): WRN-28-10, 150 epochs, Adam at 1e-4
        with warm-up and staircase (:func:`~ebmclassifier.protocol.paper_callbacks`), batches of
        64, crop + flip + noise augmentation, the papers' NG-EBM and JEM settings. Explicit
        ``network``, ``max_epochs``, ``lr`` and ``batch_size`` still override it.

    Examples
    --------
    >>> config = CompareConfig(models=("ce", "ngebm"), seeds=2, max_epochs=5)
    >>> config.data, config.standardize, config.n_bins
    ('digits', True, 15)
    """

    data: str = "digits"
    models: Sequence[str] = ("ce", "ce_ts", "ngebm", "jem")
    seeds: int = 3
    data_dir: str | None = None
    max_epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    device: str = "auto"
    network: str = "default"
    epsilons: Sequence[float] | None = None
    norm: str = "linf"
    attack_steps: int = 10
    n_attack: int | None = 500
    calibration_size: float = 0.2
    n_bins: int = 15
    max_train: int | None = None
    max_test: int | None = None
    progress: bool = True
    standardize: bool = True
    extra_params: dict = field(default_factory=dict)
    ood_classes: Sequence | None = None
    ood_files: Sequence[str] = ()
    detectors: Sequence[str] = ()
    protocol: str | None = None


@dataclass
class _Setup:
    """What every seed shares: the (standardized) data and the resolved training settings."""

    data: object  # a datasets.NamedDataset, its arrays standardized when ``standardizer`` is set
    requested: dict  # held_out_classes and ood_files, see _ood_sets.add_requested_ood
    standardizer: Standardizer | None
    X_attack: np.ndarray  # the first test samples, in the data's own units
    max_epochs: int
    lr: float | None
    epsilons: tuple
    network: dict
    protocol: dict | None = None  # paper_protocol(...) under --protocol paper
    augmentation: dict | None = None  # the protocol's, in the units the models train in


def _select_models(config: CompareConfig, registry: dict[str, ModelSpec], log):
    """(the specs that can run, {skipped name: reason})."""
    unknown = [m for m in config.models if m not in registry]
    if unknown:
        raise ValueError(f"Unknown models {unknown!r}; choose from {sorted(registry)!r}.")
    selected, skipped = [], {}
    for name in config.models:
        spec = registry[name]
        base = registry.get(spec.calibrates) if spec.calibrates else spec
        if base is None or base.unavailable:
            reason = base.unavailable if base is not None else f"{spec.calibrates!r} is unknown"
            log(f"skipping {name!r}: {reason}")
            skipped[name] = reason
            continue
        selected.append(spec)
    if not selected:
        reasons = "; ".join(f"{name!r}: {reason}" for name, reason in skipped.items())
        raise ValueError(f"None of the requested models can run here ({reasons}).")
    _check_detectors(config.detectors or (), [s.name for s in selected])
    return selected, skipped


def _check_detectors(detectors: Sequence[str], models: list[str]) -> None:
    unknown = [d for d in detectors if d not in DETECTORS]
    if unknown:
        raise ValueError(
            f"Unknown detectors {unknown!r} in --detectors; choose from {sorted(DETECTORS)!r}."
        )
    if detectors and DETECTOR_BASE not in models:
        raise ValueError(
            f"--detectors {','.join(detectors)} reads the penultimate features of the "
            f"{DETECTOR_BASE!r} model (cross-entropy), which is not among the models "
            f"{models!r}; add {DETECTOR_BASE} to --models."
        )


def _paper_protocol(config: CompareConfig, kind: str) -> dict | None:
    """The papers' settings under ``protocol="paper"``; a ValueError for other data."""
    if config.protocol is None:
        return None
    if config.protocol != "paper":
        raise ValueError(f"Unknown protocol {config.protocol!r}; the only one is 'paper'.")
    if kind not in PAPER_DATASETS:
        raise ValueError(
            f"--protocol paper is the papers' recipe for {', '.join(PAPER_DATASETS)}; "
            f"{config.data!r} is not one of them. Drop --protocol, or use --data cifar10."
        )
    return paper_protocol(kind)


def _check_configs(configs: Sequence[CompareConfig]) -> None:
    """The checks that need no data: each data set's name (and ``data_dir``), the network, the
    protocol's data sets, and that no two data sets report under one name."""
    folders = {}
    for config in configs:
        kind = data_kind(config.data, config.data_dir)
        network_params(config.network)
        _paper_protocol(config, kind)
        name = Path(str(config.data)).name  # the report's folder and key, as the loader names it
        if name in folders:
            raise ValueError(
                f"--data {folders[name]!r} and {config.data!r} would both be reported as "
                f"{name!r} (the folder {name}/ of --out and the key of results.json); copy or "
                "rename one of the files."
            )
        folders[name] = config.data


def _load(config: CompareConfig) -> _Setup:
    """Load the data, standardize it and resolve the data set's defaults."""
    data = load_named_dataset(
        config.data, data_dir=config.data_dir, max_train=config.max_train,
        max_test=config.max_test,
    )  # fmt: skip
    protocol = _paper_protocol(config, data.kind)
    if protocol is not None and config.network == "default":
        config = replace(config, network=protocol["network"])
    network = network_params(config.network)
    if config.network.startswith("wrn") and data.X_train.ndim != 4:
        raise ValueError(
            f"--network {config.network} takes images of shape (n, C, H, W); {data.name} has "
            f"samples of shape {data.X_train.shape[1:]}. Use --network default or mlp."
        )
    requested = add_requested_ood(data, config.ood_classes, config.ood_files or ())
    _check_calibration_split(data.y_train, config.calibration_size, data.name)
    n_attack = len(data.y_test) if config.n_attack is None else config.n_attack
    X_attack = data.X_test[:n_attack]  # attacked in the data's own units
    standardizer = Standardizer(data.X_train) if config.standardize else None
    if standardizer is not None:
        data.X_train = standardizer.transform(data.X_train)
        data.X_test = standardizer.transform(data.X_test)
        data.ood = {name: standardizer.transform(X) for name, X in data.ood.items()}
    defaults = DATA_DEFAULTS[data.kind]
    low, high = data.input_range
    epsilons = config.epsilons or defaults["epsilons"]
    if epsilons is None:
        epsilons = tuple(float(f * (high - low)) for f in (0.0, 0.01, 0.02, 0.05))
    defaults = {**defaults, **(protocol or {})}  # the papers' epochs and lr, if asked for
    augmentation = None
    if protocol is not None:
        augmentation = _augmentation_in_input_units(protocol["augmentation"], config.standardize)
    return _Setup(
        data=data,
        requested=requested,
        standardizer=standardizer,
        X_attack=X_attack,
        max_epochs=defaults["max_epochs"] if config.max_epochs is None else config.max_epochs,
        lr=config.lr if config.lr is not None else defaults.get("lr"),
        epsilons=epsilons,
        network=network,
        protocol=protocol,
        augmentation=augmentation,
    )


def _check_calibration_split(y_train, calibration_size: float, name: str) -> None:
    """Every seed divides the training split into fit and calibration parts, stratified: each
    class needs two samples there, and each part a sample of every class (scikit-learn's
    rule), known before any training."""
    classes, counts = np.unique(y_train, return_counts=True)
    if counts.min() < 2:
        label = classes[counts.argmin()]
        raise ValueError(
            f"{name}: class {label.item()!r} has {counts.min()} sample in the training split; "
            "the per-seed calibration split (stratified, for the *_ts models and the OOD "
            "thresholds) needs at least two of each class. Add samples of that class or drop "
            "it (or raise --max-train)."
        )
    n_calibration = math.ceil(calibration_size * len(y_train))  # as train_test_split counts
    n_fit = len(y_train) - n_calibration
    if min(n_calibration, n_fit) < len(classes):
        raise ValueError(
            f"{name}: the {len(y_train)} samples of the training split give a fit part of "
            f"{n_fit} and a calibration part of {n_calibration}, but the stratified split needs "
            f"a sample of each of the {len(classes)} classes in each part. Add samples (or "
            "raise --max-train)."
        )


def _augmentation_in_input_units(augmentation: dict, standardized: bool) -> dict:
    """The papers' augmentation settings in the units the models train in.

    The scripts add noise of standard deviation ``noise_std`` to images scaled to [-1, 1]. On
    standardized inputs (a CIFAR channel's standard deviation is about 0.25 in [0, 1] units,
    0.5 in [-1, 1] units) the same noise is about twice as large; on the raw [0, 1] pixels of
    ``standardize=False``, half as large.
    """
    scale = 2.0 if standardized else 0.5
    return {**augmentation, "noise_std": scale * augmentation["noise_std"]}


def _protocol_params(
    name: str, protocol: dict | None, augmentation: dict | None, batch_size: int | None
) -> dict:
    """The estimator parameters ``--protocol paper`` adds for model ``name``; ``augmentation``
    is the protocol's in the units of the inputs (:func:`_augmentation_in_input_units`)."""
    if protocol is None:
        return {}
    params = {
        "augmentation": paper_augmentation(**augmentation),
        "batch_size": protocol["batch_size"] if batch_size is None else batch_size,
        "optimizer__betas": tuple(protocol["betas"]),
        "optimizer__weight_decay": protocol["weight_decay"],
    }
    if name.startswith("ngebm"):
        params["energy_var_weight"] = protocol["ngebm"]["energy_var_weight"]
    if name.startswith("jem"):
        params.update(protocol["jem"])
    return params


def _fit(name, registry, seed, X_fit, y_fit, config, setup, log):
    """``((estimator, fit seconds), None)``, or ``(None, failure record)`` if the fit raised."""
    bar = EpochBar(f"{name} seed {seed}", setup.max_epochs, disable=not config.progress)
    params = {"random_state": seed, "max_epochs": setup.max_epochs, "device": config.device,
              "verbose": 0, "callbacks": [("epoch_bar", bar)]}  # fmt: skip
    params.update({k: v for k, v in (("lr", setup.lr), ("batch_size", config.batch_size))
                   if v is not None})  # fmt: skip
    params.update(setup.network)
    params.update(_protocol_params(name, setup.protocol, setup.augmentation, config.batch_size))
    if setup.protocol is not None:
        keys = ("warmup_iters", "lr_milestones", "lr_decay")
        params["callbacks"] += paper_callbacks(**{k: setup.protocol[k] for k in keys})
    params.update(config.extra_params.get(name, {}))
    estimator = registry[name].build(params)
    start = time.perf_counter()
    try:
        estimator.fit(X_fit, y_fit)
    except Exception as exc:  # one failed fit (e.g. a divergence) must not end the run
        log(f"{name!r} failed at seed {seed}: {exc!r}")
        return None, {"model": name, "seed": seed, "error": repr(exc)}
    return (estimator, time.perf_counter() - start), None


def _run_seeds(config, registry, specs, setup, log) -> tuple[list, list, tuple]:
    """Fit every trained model and measure every selected one, seed after seed.

    Returns the run records, the failed fits and the sizes of the (fit, calibration) split.
    """
    from tqdm.auto import tqdm

    trained = {s.calibrates or s.name for s in specs}
    names = [n for n in registry if n in trained]
    data = setup.data
    runs, failures = [], []
    outer = tqdm(total=len(names) * config.seeds, desc=f"compare on {data.name}",
                 disable=not config.progress)  # fmt: skip
    for seed in range(config.seeds):
        split = Split(*train_test_split(
            data.X_train, data.y_train, test_size=config.calibration_size,
            stratify=data.y_train, random_state=seed,
        ))  # fmt: skip
        fitted = {}
        for name in names:
            result, failure = _fit(name, registry, seed, split.X_fit, split.y_fit, config,
                                   setup, log)  # fmt: skip
            if failure is None:
                fitted[name] = result
            else:
                failures.append(failure)
            outer.update(1)
        runs += [
            measure(spec, fitted, seed, split, config, setup)
            for spec in specs
            if (spec.calibrates or spec.name) in fitted
        ]
    outer.close()
    return runs, failures, (len(split.y_fit), len(split.y_cal))


def run_comparison(config: CompareConfig, registry=None, log: Callable = print) -> dict:
    """Train and measure every model for every seed.

    Parameters
    ----------
    config : CompareConfig
    registry : dict of str to ModelSpec or None, default=None
        None: :func:`default_models`.
    log : callable, default=print
        Receives one line per skipped model.

    Returns
    -------
    results : dict
        ``config``, ``data`` (sizes, shapes, classes, OOD sets), ``models`` (descriptions and
        skips), ``detectors``, ``epsilons`` and ``runs``: one record per (model, seed) with the
        measurements and, for the first seed, the arrays the figures need (``_figure_data``,
        not written to JSON).

    Raises
    ------
    ValueError
        Before any training, for an unknown model, network or detector, detectors without the
        ``ce`` model, ``ood_classes`` naming a label the data lacks or leaving fewer than two,
        an OOD file that cannot be read or holds samples of another shape, or a training split
        the stratified calibration split cannot divide (a class with a single sample there).

    See Also
    --------
    write_report : report.md, results.json and the figures from the results.

    Examples
    --------
    A quick run (one seed, one epoch, part of digits); the command line's default run trains
    30 epochs for three seeds:

    >>> config = CompareConfig(
    ...     models=("ce", "ce_ts", "ngebm"), seeds=1, max_epochs=1, max_train=300,
    ...     max_test=100, n_attack=20, progress=False,
    ... )
    >>> results = run_comparison(config)
    >>> [(run["model"], run["seed"]) for run in results["runs"]]
    [('ce', 0), ('ce_ts', 0), ('ngebm', 0)]
    >>> sorted(results["runs"][0]["ood"]["energy"])
    ['inverted', 'permuted', 'uniform']
    >>> 0.0 <= results["runs"][2]["ood"]["approx_mass"]["uniform"]["auroc"] <= 1.0
    True
    """
    return _run_all([config], registry, log)[0]


def _run_all(configs: Sequence[CompareConfig], registry=None, log: Callable = print) -> list:
    """:func:`run_comparison` for each config, every one checked and loaded before training."""
    registry = default_models() if registry is None else registry
    selected = [_select_models(config, registry, log) for config in configs]
    _check_configs(configs)  # before the first data set is loaded
    prepared = [(c, *models, _load(c)) for c, models in zip(configs, selected, strict=True)]
    return [_execute(*plan, registry, log) for plan in prepared]


def _execute(config, specs, skipped, setup, registry, log) -> dict:
    runs, failures, (n_fit, n_calibration) = _run_seeds(config, registry, specs, setup, log)
    _add_relative_cost(runs)
    return {
        "config": {k: v for k, v in vars(config).items() if k != "extra_params"},
        "data": _data_summary(setup, n_fit, n_calibration),
        "models": {s.name: s.description for s in specs},
        "calibrated": {s.name: s.calibrates for s in specs if s.calibrates},
        "detectors": {name: repr(build_detector(name, n_fit)) for name in (config.detectors or ())},
        "ood_tpr": OOD_TPR,
        "skipped": skipped,
        "failures": failures,
        "max_epochs": setup.max_epochs,
        "lr": setup.lr,
        "epsilons": [float(e) for e in setup.epsilons],
        "protocol": setup.protocol,
        "augmentation": setup.augmentation,
        "runs": runs,
    }


def _data_summary(setup: _Setup, n_fit: int, n_calibration: int) -> dict:
    data = setup.data
    low, high = data.input_range
    return {
        "name": data.name,
        "n_train": n_fit,
        "n_calibration": n_calibration,
        "n_test": int(len(data.y_test)),
        "n_attacked": len(setup.X_attack),
        "input_shape": list(data.X_train.shape[1:]),
        "input_range": [float(low), float(high)],
        "standardized": setup.standardizer is not None,
        "classes": np.unique(data.y_train).tolist(),
        "ood_sets": {k: int(len(v)) for k, v in data.ood.items()},
        **setup.requested,
    }


def _add_relative_cost(runs: list) -> None:
    """``cost_vs_ce``: seconds per epoch over the CE model's in the same seed (None without ce)."""
    ce = {r["seed"]: r["seconds_per_epoch"] for r in runs if r["model"] == "ce"}
    for r in runs:
        base = ce.get(r["seed"])
        r["cost_vs_ce"] = r["seconds_per_epoch"] / base if base else None


# ----------------------------------------------------------------------------- the command


def _run_command(args) -> int:
    """Run the comparison the parsed options describe, write the report, print the tables.

    A fit that fails does not stop the others; the report covers those that succeeded (a data
    set none of whose fits succeeded is left out of it), and the command then fails
    (:class:`CommandError`, exit status 1) listing the failed fits.
    """
    configs = _configs(args)
    all_results = _run_all(configs, log=lambda msg: print(msg, file=sys.stderr))
    failures = [failure for results in all_results for failure in results["failures"]]
    reported = [results for results in all_results if results["runs"]]
    if not reported:
        raise CommandError(f"every fit failed, nothing to report: {_list_failures(failures)}")
    printed = write_reports(reported, args.out, command=COMMAND.command_line(args))
    for results, tabs in zip(reported, printed, strict=True):
        if len(reported) > 1:
            print(f"## {results['data']['name']}", end="\n\n")
        for key in ("main", "ood_auroc", "ood_decisions", "robust"):
            print(tabs[key], end="\n\n")
        for line in tabs["verdicts"]:
            print("-", line)
        print()
    n_figures = sum(len(tabs["figures"]) for tabs in printed)
    print(f"Report: {Path(args.out) / 'report.md'}, results.json and {n_figures} figures.")
    if failures:
        empty = [results["data"]["name"] for results in all_results if not results["runs"]]
        lost = f"no fit on {', '.join(empty)} succeeded, the report leaves out that data; "
        lost = lost if empty else ""
        raise CommandError(
            f"{lost}{len(failures)} fit(s) failed, the report leaves them out: "
            f"{_list_failures(failures)}"
        )
    return 0


def _configs(args) -> list[CompareConfig]:
    """One configuration per data set of ``--data``."""
    fields = COMMAND.fields(args)
    return [CompareConfig(**{**fields, "data": data}) for data in fields["data"]]


def _check_options(args) -> None:
    """The data-free checks across options, before ``--out`` is made (``Command.check``): the
    models and detectors, the data sets' names, the network, the protocol."""
    configs, registry = _configs(args), default_models()
    for config in configs:
        _select_models(config, registry, log=lambda msg: None)  # the run logs the skips
    _check_configs(configs)


def _list_failures(failures: list) -> str:
    return "; ".join(f"{f['model']!r} at seed {f['seed']}: {f['error']}" for f in failures)


def _option(flag, help, field=None, echo="always", **kwargs) -> Option:
    return Option(flag, help, kwargs, field=field, echo=echo)


COMMAND = Command(
    name="compare",
    help="train CE, CE + temperature scaling, NG-EBM and JEM and compare them",
    description=(
        "Train each model for each seed and compare accuracy, calibration, selective "
        "classification (AURC), OOD detection and decisions, robustness to PGD and training "
        "cost. Writes report.md, results.json and PNG figures into --out and prints the tables "
        "(median [min, max] over seeds)."
    ),
    options=(
        _option("--data", "digits, mnist1d, cifar10, cifar100, svhn (with --data-dir) or a "
                ".npz/.csv file; several, comma-separated, run one after the other, one "
                "report section each (default digits)", "data", type=CommaList(str),
                default="digits"),
        _option("--data-dir", "folder of the CIFAR / SVHN files", "data_dir", default=None),
        _option("--models", "comma-separated, from ce, ce_ts, ce_ens, ngebm, ngebm_ts, "
                "ngebm_ens, jem, jem_ts (default: ce,ce_ts,ngebm,jem)", "models",
                type=CommaList(str),
                default=["ce", "ce_ts", "ngebm", "jem"]),
        _option("--seeds", "number of seeds, 0..n-1 (default 3)", "seeds",
                type=Number(int, low=1), default=3),
        _option("--out", "output folder (default report/)", type=OutputPath(folder=True),
                default="report"),
        _option("--epochs", "epochs per model (data default)", "max_epochs",
                type=Number(int, low=1), default=None),
        _option("--lr", "learning rate (data default, else the estimator's)", "lr",
                type=Number(float, low=0, low_open=True), default=None),
        _option("--batch-size", "(estimator default)", "batch_size",
                type=Number(int, low=1, also={-1: "the whole training split"}), default=None),
        _option("--device", "auto, cpu, cuda, ... (default auto)", "device", type=DeviceName(),
                default="auto"),
        _option("--network", "default (from the data's shape), mlp (an MLP for any shape) or "
                "wrn-D-K, e.g. wrn-28-10: a WideResNet without batch-norm, for images",
                "network", "changed", default="default"),
        _option("--epsilons", "PGD radii, comma-separated (data default)", "epsilons",
                type=CommaList(Number(float, low=0)), default=None),
        _option("--norm", "PGD norm", "norm", choices=["linf", "l2"], default="linf"),
        _option("--attack-steps", "PGD steps (default 10)", "attack_steps",
                type=Number(int, low=1), default=10),
        _option("--n-attack", "test samples attacked (default 500)", "n_attack",
                type=Number(int, low=1), default=500),
        _option("--max-train", "subsample the training split to at most this many samples "
                "(a smaller one is kept whole)", "max_train", type=Number(int, low=1),
                default=None),
        _option("--max-test", "subsample the test split", "max_test", type=Number(int, low=1),
                default=None),
        _option("--ood-classes", "labels to hold out of training, comma-separated; their test "
                "samples become the OOD set 'held-out classes'", "ood_classes",
                type=CommaList(str), default=None),
        _option("--ood", "OOD files, comma-separated: .npz (array X) or .csv, in the data's "
                "sample shape; one OOD set each, named after the file", "ood_files",
                type=CommaList(str), default=None, metavar="FILE"),
        _option("--detectors", "post-hoc OOD detectors on the ce model's penultimate "
                f"features, fitted on its training data: {','.join(DETECTORS)}",
                "detectors", type=CommaList(str), default=None),
        _option("--protocol", "paper: the NG-EBM and JEM papers' CIFAR/SVHN recipe (WRN-28-10, "
                "150 epochs, Adam 1e-4 with warm-up and staircase, batches of 64, crop + flip + "
                "noise); --network, --epochs, --lr and --batch-size override it", "protocol",
                choices=("paper",), default=None),
        _option("--no-standardize", "train on the inputs as given instead of standardizing "
                "them (per feature, or per channel for images and sequences)", "standardize",
                action="store_false", dest="standardize"),
        _option("--no-progress", "hide the progress bars", "progress", "never",
                action="store_false", dest="progress"),
    ),
    run=_run_command,
    check=_check_options,
)  # fmt: skip
