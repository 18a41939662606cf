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

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from sklearn.model_selection import train_test_split

from ..datasets.named import data_kind
from ..detectors import DETECTORS
from ..recipes import paper_callbacks
from ._command import CommandError
from ._compare_options import COMMAND
from ._measure import OOD_TPR, EpochBar, Split, measure
from ._overview import terminal_text
from ._report_files import interrupts_deferred
from ._setup import (
    data_summary,
    load_setup,
    paper_protocol_of,
    protocol_params,
    resolve_defaults,
)
from ._tables import unavailable_rows
from ._timing import machine_load
from .models import ModelSpec, build_detector, default_models, network_params
from .report import write_compare_report, write_report
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
    network : str or None
        ``"default"``, ``"mlp"`` or ``"wrn-D-K"``, see :func:`network_params`; None takes
        the data set's default (``"mlp"`` for MNIST-1D, the protocol's under ``protocol``,
        else ``"default"``).
    norm : {"linf", "l2"}
    attack_steps : int
    n_attack : int or None
        How many test samples are attacked (None: all).
    calibration_size : float
        Fraction of the training split held out for ``ce_ts`` and the OOD thresholds (under
        ``protocol="paper"``: at most the papers' ``n_valid`` = 5000 samples).
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
        penultimate features of each trained model with a network of its own (``ce``,
        ``ngebm``, ``jem``; not the ``*_ts`` and ``*_ens`` models), on its training data. One
        that cannot be fitted there is reported "not available" with the reason. The first
        is the detector on ``ce`` that the summary table and the verdicts judge, fixed by its
        place in this list before any data is seen (``results["headline_detector"]``).

    protocol : {"paper"} or None
        ``"paper"``: the NG-EBM and JEM papers' CIFAR/SVHN recipe
        (:func:`~ebmclassifier.recipes.paper_protocol`): WRN-28-10, 150 epochs, Adam at 1e-4
        with warm-up and staircase (:func:`~ebmclassifier.recipes.paper_callbacks`), batches of
        64 with the last incomplete batch dropped, a held-out split of at most ``n_valid``
        (5000) samples, crop + flip + noise augmentation, the papers' NG-EBM and JEM
        settings. Explicit ``network``, ``max_epochs``, ``lr`` and ``batch_size`` still
        override it.

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
    network: str | None = None
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
    _check_detectors(config.detectors or ())
    return selected, skipped


def _check_detectors(detectors: Sequence[str]) -> None:
    unknown = [d for d in detectors if d not in DETECTORS]
    if unknown:
        raise ValueError(
            f"Unknown detectors {unknown!r} in --detectors; choose from {sorted(DETECTORS)!r}."
        )


def _check_configs(configs: Sequence[CompareConfig]) -> None:
    """The checks that need no data: each data set's name (and ``data_dir``), the network, the
    protocol's data sets, and that no two data sets report under one name."""
    folders = {}
    for config in configs:
        kind = data_kind(config.data, config.data_dir)
        network_params(resolve_defaults(config, kind).network)
        paper_protocol_of(config, kind)
        name = Path(str(config.data)).name  # the report's folder and key, as the loader names it
        if name in folders:
            raise ValueError(
                f"--data {folders[name]!r} and {config.data!r} would both be reported as "
                f"{name!r} (the folder {name}/ of --out and the key of results.json); copy or "
                "rename one of the files."
            )
        folders[name] = config.data


def _fit(name, registry, seed, X_fit, y_fit, config, setup, log):
    """``((estimator, fit seconds), None)``, or ``(None, failure record)`` if the fit raised."""
    bar = EpochBar(f"{name} seed {seed}", setup.max_epochs, disable=not config.progress)
    params = {
        "random_state": seed,
        "max_epochs": setup.max_epochs,
        "device": config.device,
        "verbose": 0,
        "callbacks": [("epoch_bar", bar)],
    }
    params.update(
        {k: v for k, v in (("lr", setup.lr), ("batch_size", config.batch_size)) if v is not None}
    )
    params.update(setup.network)
    params.update(protocol_params(name, setup.protocol, setup.augmentation, config.batch_size))
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
    outer = tqdm(
        total=len(names) * config.seeds, desc=f"compare on {data.name}", disable=not config.progress
    )
    for seed in range(config.seeds):
        split = Split(
            *train_test_split(
                data.X_train,
                data.y_train,
                test_size=setup.calibration_size,
                stratify=data.y_train,
                random_state=seed,
            )
        )
        fitted = {}
        for name in names:
            result, failure = _fit(
                name, registry, seed, split.X_fit, split.y_fit, config, setup, log
            )
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
        skips), ``detectors``, ``headline_detector`` (the first of ``detectors``, or None),
        ``epsilons`` and ``runs``: one record per (model, seed) with the measurements (and
        the model's ``headline`` OOD score, fixed in advance) and, for the first seed, the
        arrays the figures need (``_figure_data``, not written to JSON).

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
    configs = [resolve_defaults(c, data_kind(c.data, c.data_dir)) for c in configs]
    prepared = [
        (c, specs, skipped, load_setup(c, any(s.calibrates for s in specs)))
        for c, (specs, skipped) in zip(configs, selected, strict=True)
    ]
    return [_execute(*plan, registry, log) for plan in prepared]


def _execute(config, specs, skipped, setup, registry, log) -> dict:
    load = {"start": machine_load()}
    runs, failures, (n_fit, n_calibration) = _run_seeds(config, registry, specs, setup, log)
    load.update(end=machine_load(), threads=torch.get_num_threads())
    _add_relative_cost(runs)
    return {
        "config": {k: v for k, v in vars(config).items() if k != "extra_params"},
        "data": data_summary(setup, n_fit, n_calibration),
        "models": {s.name: s.description for s in specs},
        "calibrated": {s.name: s.calibrates for s in specs if s.calibrates},
        "detectors": {name: repr(build_detector(name, n_fit)) for name in (config.detectors or ())},
        "headline_detector": (config.detectors or (None,))[0],
        "ood_tpr": OOD_TPR,
        "skipped": skipped,
        "failures": failures,
        "unavailable": unavailable_rows(specs, runs, failures),
        "max_epochs": setup.max_epochs,
        "lr": setup.lr,
        "epsilons": [float(e) for e in setup.epsilons],
        "protocol": setup.protocol,
        "augmentation": setup.augmentation,
        "machine_load": load,
        "runs": runs,
    }


def _add_relative_cost(runs: list) -> None:
    """``cost_vs_ce``: seconds per epoch over the CE model's in the same seed (None without ce)."""
    ce = {r["seed"]: r["seconds_per_epoch"] for r in runs if r["model"] == "ce"}
    for r in runs:
        base = ce.get(r["seed"])
        r["cost_vs_ce"] = r["seconds_per_epoch"] / base if base else None


# ----------------------------------------------------------------------------- the command


def _run_command(args) -> int:
    """Run the comparison the parsed options describe, write the report, print its summary
    (the README's table and the verdicts that matter; report.md holds every table).

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
    with interrupts_deferred():  # Ctrl-C now: the report is written whole first
        printed = write_compare_report(reported, args.out, command=COMMAND.command_line(args))
    print(terminal_text(reported, printed, args.out))
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
    """One configuration per data set of ``--data``; ``--detectors none`` is no detector."""
    fields = COMMAND.fields(args)
    if list(fields.get("detectors") or ()) == ["none"]:
        fields["detectors"] = ()
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
