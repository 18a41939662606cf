"""The per-seed division of ``compare``'s training split into fit and calibration parts: its
size, and the checks that need no training (every class where it must be)."""

from __future__ import annotations

import math

import numpy as np
from sklearn.model_selection import train_test_split

__all__ = ["calibration_test_size", "check_calibration_split"]


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
