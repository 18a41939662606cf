"""The OOD sets a user asks ``compare`` for: held-out classes and OOD files.

Both are checked here, on the raw data and before any training, so that a wrong label or a
file of the wrong shape stops the run with one message instead of after the first fits.

- ``--ood-classes 5,6,7,8,9`` (open-set recognition, the usual "near OOD"): the samples of those
  labels leave the training and test splits, every model trains on the other classes, and the
  held-out classes' test samples become the OOD set ``held-out classes``.
- ``--ood FILE`` (several, comma-separated): the user's own OOD samples, an OOD set named after
  the file's stem. A ``.npz`` file holds them as an array ``X`` (a ``y`` is ignored); a ``.csv``
  file is read like a ``--data`` file (:func:`~ebmclassifier.datasets.load_array_file`: one
  sample per row, its label column, named ``target`` or the last one, dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from pathlib import Path

import numpy as np

from ..datasets import load_array_file
from ..datasets.user_files import read_npz

HELD_OUT = "held-out classes"


def held_out_labels(requested: Sequence, y_train, y_test, data_name: str) -> list:
    """The labels of ``y_train`` / ``y_test`` that ``requested`` names (matched as text).

    Raises a ValueError for an empty list, a label the data does not have, or one that leaves
    fewer than two classes to train on.
    """
    labels = np.unique(np.concatenate([np.asarray(y_train), np.asarray(y_test)]))
    by_text = {str(label): label for label in labels.tolist()}
    if len(requested) == 0:
        raise ValueError("--ood-classes names no label; give e.g. --ood-classes 5,6,7,8,9.")
    unknown = [r for r in requested if str(r) not in by_text]
    if unknown:
        raise ValueError(
            f"--ood-classes names labels that {data_name} does not have: "
            f"{[str(u) for u in unknown]!r}. Its labels are {list(by_text)!r}."
        )
    held = list(dict.fromkeys(by_text[str(r)] for r in requested))
    if len(labels) - len(held) < 2:
        raise ValueError(
            f"--ood-classes holds out {len(held)} of the {len(labels)} labels of {data_name}, "
            f"leaving {len(labels) - len(held)} to train on; at least 2 must stay. Hold out "
            "fewer labels."
        )
    return held


def hold_out_classes(data, held: list) -> None:
    """Remove the ``held`` labels from ``data``'s splits; their test samples become OOD.

    ``data`` is a :func:`~ebmclassifier.datasets.load_named_dataset` Bunch, changed in place.
    """
    train = ~np.isin(data.y_train, held)
    test = ~np.isin(data.y_test, held)
    if test.all():
        raise ValueError(
            f"--ood-classes: the test split of {data.name} has no sample of the labels "
            f"{[str(label) for label in held]!r}, so there is no OOD set to measure; hold out "
            "labels the test split has (or raise --max-test)."
        )
    data.ood[HELD_OUT] = data.X_test[~test]
    data.X_train, data.y_train = data.X_train[train], data.y_train[train]
    data.X_test, data.y_test = data.X_test[test], data.y_test[test]


def _npz_samples(path: Path) -> np.ndarray:
    try:
        (X,) = read_npz(path, keys=("X",))
    except ValueError as exc:
        raise ValueError(f"--ood file {exc}") from None
    return X


def read_ood_file(path, sample_shape: tuple, data_name: str) -> np.ndarray:
    """The samples of an OOD file, float32, shaped ``(n, *sample_shape)``.

    Rows of a flat file (a ``.csv``, or a 2-D ``X``) with as many values as one sample are
    reshaped to the sample shape (C order). Raises FileNotFoundError for a missing file and a
    ValueError naming the file for any other suffix, an unreadable file, a file without
    samples, non-finite values (the data files' readers check these) or samples of another
    shape.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--ood file {str(path)!r} not found.")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        X = _npz_samples(path)
    elif suffix == ".csv":
        X, _ = load_array_file(path)
    else:
        raise ValueError(f"--ood file {str(path)!r}: use a .npz (array X) or a .csv file.")
    # the readers refuse non-finite values and files without samples; the shape is checked here
    sample_shape = tuple(sample_shape)
    if X.shape[1:] != sample_shape and X.ndim == 2 and X.shape[1] == prod(sample_shape):
        X = X.reshape(len(X), *sample_shape)
    if X.shape[1:] != sample_shape:
        hint = (
            " A .csv OOD file is read like a --data file: its label column (named 'target', "
            "else the last) is dropped, so add one."
            if suffix == ".csv"
            else ""
        )
        raise ValueError(
            f"--ood file {str(path)!r} holds samples of shape {X.shape[1:]}, but {data_name} "
            f"has samples of shape {sample_shape} ({prod(sample_shape)} values each); write "
            f"the OOD samples in the training data's shape.{hint}"
        )
    return X


def add_requested_ood(data, ood_classes, ood_files: Sequence) -> dict:
    """Hold out ``ood_classes`` and add each OOD file to ``data.ood`` (raw units, in place).

    Returns a summary for the report: ``{"held_out_classes": [...], "ood_files": {set: path}}``.
    """
    held = []
    if ood_classes is not None:
        held = held_out_labels(ood_classes, data.y_train, data.y_test, data.name)
    files = {}
    for path in ood_files:
        name = Path(path).stem
        if name in data.ood or name == HELD_OUT or name in files:
            raise ValueError(
                f"--ood file {str(path)!r} would be the OOD set {name!r}, a name already taken "
                f"(sets: {sorted({*data.ood, *files})!r}); rename the file."
            )
        files[name] = str(path)
        data.ood[name] = read_ood_file(path, data.X_train.shape[1:], data.name)
    if held:
        hold_out_classes(data, held)
    return {"held_out_classes": held, "ood_files": files}
