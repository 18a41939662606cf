"""What every seed of ``compare`` shares: the data set loaded and standardized, its defaults
(training length, learning rate, attack radii, network) resolved, the papers' protocol in the
units the models train in, and the per-seed division of the training split into fit and
calibration parts (its size, and the checks that need no training: every class where it must be).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from sklearn.model_selection import train_test_split

from ..augment import paper_augmentation
from ..datasets import load_named_dataset
from ..datasets.named import data_kind
from ..recipes import PAPER_DATASETS, paper_protocol
from ._ood_sets import add_requested_ood
from .models import network_params
from .standardize import Standardizer

__all__ = [
    "DATA_DEFAULTS",
    "Setup",
    "augmentation_in_input_units",
    "calibration_test_size",
    "check_calibration_split",
    "data_summary",
    "load_setup",
    "paper_protocol_of",
    "protocol_params",
    "resolve_defaults",
]

# Per data set: training length, learning rate (None: the estimator's) and attack radii that
# fit its input scale. MNIST-1D: the default ConvNet reaches 87-89% test accuracy with CE at
# the estimators' lr=1e-3 (30-50 epochs) and 91-93% at lr=3e-3 (30 epochs, 3 seeds); the
# main job's regime there is an MLP on 2,000 signals (CE over-confident), its defaults
# (``network`` and ``max_train``; ``--network default --max-train 4000`` for the ConvNet on all).
DATA_DEFAULTS = {
    "digits": {"max_epochs": 30, "epsilons": (0.0, 0.02, 0.05, 0.1)},
    "mnist1d": {
        "max_epochs": 30,
        "lr": 3e-3,
        "epsilons": (0.0, 0.05, 0.1, 0.2),
        "network": "mlp",
        "max_train": 2000,
    },
    "cifar10": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "cifar100": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "svhn": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "file": {"max_epochs": 30, "epsilons": None},  # None: fractions of the input range
}


@dataclass
class Setup:
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
    calibration_size: float | int = 0.2  # test_size of the per-seed calibration split


def paper_protocol_of(config, kind: str) -> dict | None:
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


def resolve_defaults(config, kind: str):
    """``config`` with the data set's defaults for what it leaves to them (None): the network
    (the protocol's, else the data set's, else ``"default"``) and ``max_train``."""
    defaults = DATA_DEFAULTS[kind]
    network = config.network
    if network is None:
        protocol = paper_protocol_of(config, kind)
        network = protocol["network"] if protocol else defaults.get("network", "default")
    max_train = defaults.get("max_train") if config.max_train is None else config.max_train
    return replace(config, network=network, max_train=max_train)


def load_setup(config, recalibrates: bool = True) -> Setup:
    """Load the data, standardize it and resolve the data set's defaults; ``recalibrates``:
    a model is recalibrated on the calibration split (which then needs every class)."""
    config = resolve_defaults(config, data_kind(config.data, config.data_dir))
    data = load_named_dataset(
        config.data,
        data_dir=config.data_dir,
        max_train=config.max_train,
        max_test=config.max_test,
    )
    protocol = paper_protocol_of(config, data.kind)
    network = network_params(config.network)
    if config.network.startswith("wrn") and data.X_train.ndim != 4:
        raise ValueError(
            f"--network {config.network} takes images of shape (n, C, H, W); {data.name} has "
            f"samples of shape {data.X_train.shape[1:]}. Use --network default or mlp."
        )
    requested = add_requested_ood(data, config.ood_classes, config.ood_files or ())
    test_size = calibration_test_size(config, protocol, len(data.y_train))
    check_calibration_split(data.y_train, test_size, data.name, config.seeds, recalibrates)
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
        augmentation = augmentation_in_input_units(protocol["augmentation"], config.standardize)
    return Setup(
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
        calibration_size=test_size,
    )


def augmentation_in_input_units(augmentation: dict, standardized: bool) -> dict:
    """The papers' augmentation settings in the units the models train in.

    The scripts add noise of standard deviation ``noise_std`` to images scaled to [-1, 1]. On
    standardized inputs (a CIFAR channel's standard deviation is about 0.25 in [0, 1] units,
    0.5 in [-1, 1] units) the same noise is about twice as large; on the raw [0, 1] pixels of
    ``standardize=False``, half as large.
    """
    scale = 2.0 if standardized else 0.5
    return {**augmentation, "noise_std": scale * augmentation["noise_std"]}


def protocol_params(
    name: str, protocol: dict | None, augmentation: dict | None, batch_size: int | None
) -> dict:
    """The estimator parameters ``--protocol paper`` adds for model ``name``; ``augmentation``
    is the protocol's in the units of the inputs (:func:`augmentation_in_input_units`)."""
    if protocol is None:
        return {}
    params = {
        "augmentation": paper_augmentation(**augmentation),
        "batch_size": protocol["batch_size"] if batch_size is None else batch_size,
        "optimizer__betas": tuple(protocol["betas"]),
        "optimizer__weight_decay": protocol["weight_decay"],
        "iterator_train__drop_last": protocol["drop_last"],
    }
    if name.startswith("ngebm"):
        params["energy_var_weight"] = protocol["ngebm"]["energy_var_weight"]
    if name.startswith("jem"):
        params.update(protocol["jem"])
    return params


def data_summary(setup: Setup, n_fit: int, n_calibration: int) -> dict:
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


def calibration_test_size(config, protocol: dict | None, n_train: int):
    """``test_size`` of the per-seed calibration split: ``calibration_size`` of the training
    split, at most the papers' ``n_valid`` samples under the protocol (5000 of CIFAR's 50,000)."""
    if protocol is not None and math.ceil(config.calibration_size * n_train) > protocol["n_valid"]:
        return protocol["n_valid"]
    return config.calibration_size


def check_calibration_split(
    y_train, calibration_size, name: str, seeds: int = 1, recalibrates: bool = True
) -> None:
    """Every seed divides the training split into fit and calibration parts, stratified: each
    class needs two samples there, the fit part a sample of every class (every model must
    learn every class) and, when a model is recalibrated there (``recalibrates``: temperature
    scaling), so does the calibration part; known before any training: each seed's split is
    drawn here on the labels alone."""
    classes, counts = np.unique(y_train, return_counts=True)
    if counts.min() < 2:
        label = classes[counts.argmin()]
        raise ValueError(
            f"{name}: class {label.item()!r} has {counts.min()} sample in the training split; "
            "the per-seed calibration split (stratified, for the *_ts models and the OOD "
            "thresholds) needs at least two of each class. Add samples of that class or drop "
            "it (or raise --max-train)."
        )
    n_calibration = (
        calibration_size
        if isinstance(calibration_size, int)
        else math.ceil(calibration_size * len(y_train))  # as train_test_split counts
    )
    n_fit = len(y_train) - n_calibration
    if min(n_calibration, n_fit) < len(classes):
        raise ValueError(
            f"{name}: the {len(y_train)} samples of the training split give a fit part of "
            f"{n_fit} and a calibration part of {n_calibration}, but the stratified split needs "
            f"a sample of each of the {len(classes)} classes in each part. Add samples (or "
            "raise --max-train)."
        )
    for seed in range(seeds):  # the labels decide the split: the same indices as _run_seeds'
        fit, cal = train_test_split(
            y_train, test_size=calibration_size, stratify=y_train, random_state=seed
        )
        parts = (
            ("fit", fit, "every model must learn each class"),
            ("calibration", cal, "temperature scaling (the *_ts models) calibrates there"),
        )
        for part, labels, why in parts[: 1 + recalibrates]:
            missing = np.setdiff1d(classes, labels)
            if missing.size:
                raise ValueError(
                    f"{name}: at seed {seed} the stratified {part} part of the training split "
                    f"({len(labels)} of {len(y_train)} samples) holds no sample of class "
                    f"{missing[0].item()!r}, and {why}. Add samples of the rarest classes "
                    "(raise --max-train) or drop them."
                )
