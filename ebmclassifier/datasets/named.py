"""Data sets by name, as ``python -m ebmclassifier compare --data NAME`` takes them.

Every name gives the same kind of result: train and test splits and an OOD suite, so the
comparison treats the embedded, the generated and the on-disk data alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch
from sklearn.utils.multiclass import type_of_target

from .._utils.parameters import ParamChecker
from .benchmarks import load_digits_ood, load_mnist1d
from .files import load_cifar10, load_cifar100, load_svhn
from .ood import make_ood_suite
from .user_files import load_array_file

_FOLDER_DATA = {"cifar10": load_cifar10, "cifar100": load_cifar100, "svhn": load_svhn}
# the classic cross-data-set OOD pairs, used when the other set's test file is in the folder
_CROSS_OOD = {"cifar10": "svhn", "cifar100": "svhn", "svhn": "cifar10"}


def _subsample(X, y, n, rng):
    if n is None or n >= len(y):
        return X, y
    idx = np.sort(rng.choice(len(y), size=n, replace=False))
    return X[idx], y[idx]


def _check_class_labels(y: np.ndarray, source: str) -> None:
    """The labels of a file must be classes, each with a sample for both sides of the split."""
    if len(y) == 0:
        raise ValueError(f"{source!r}: y holds no labels; a classifier needs samples of two.")
    kind = type_of_target(y)
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            f"{source!r}: the labels y must be classes (integers or strings); they are {kind}, "
            f"e.g. {y[:3].tolist()!r}. Bin or encode them as classes first."
        )
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise ValueError(
            f"{source!r}: y holds one class, {classes[0].item()!r}; a classifier needs two."
        )
    if counts.min() < 2:
        raise ValueError(
            f"{source!r}: class {classes[counts.argmin()].item()!r} has a single sample; the "
            "stratified "
            "70/30 split needs at least two per class. Drop it or add samples."
        )


def data_kind(data: str, data_dir=None) -> str:
    """The kind of data set ``data`` names, found from the name alone (nothing is read).

    A ValueError for a name that is neither a data set nor a ``.npz`` / ``.csv`` path, or for
    a data set read from a folder without ``data_dir``: the checks that need no data, so that a
    command makes them before it loads or trains anything.
    """
    if data in ("digits", "mnist1d"):
        return data
    if data in _FOLDER_DATA:
        if data_dir is None:
            raise ValueError(f"--data {data} reads the files from a folder: pass --data-dir.")
        return data
    if str(data).lower().endswith((".npz", ".csv")):
        return "file"
    raise ValueError(
        f"Unknown data {data!r}: use digits, mnist1d, cifar10, cifar100, svhn "
        "(with --data-dir) or the path of a .npz or .csv file."
    )


def load_named_dataset(
    data: str,
    *,
    data_dir=None,
    max_train: int | None = None,
    max_test: int | None = None,
    random_state: int = 0,
) -> Bunch:
    """A data set by name, with train/test splits and an OOD suite, as ``compare`` uses it.

    Parameters
    ----------
    data : str
        ``"digits"``, ``"mnist1d"``, ``"cifar10"``, ``"cifar100"``, ``"svhn"`` (these three read
        from ``data_dir``), or the path of a ``.npz`` / ``.csv`` file (split 70/30, stratified).
        CIFAR gets SVHN's test images as an OOD set, SVHN CIFAR-10's, when that test file is
        in ``data_dir`` too (only it is read).
    data_dir : str, path-like or None
        Folder of the CIFAR / SVHN files.
    max_train, max_test : int >= 1 or None
        Subsample the splits (for a quick run on a large data set).
    random_state : int, default=0
        Seeds the subsampling, the file split and the OOD sets.

    Returns
    -------
    data : Bunch
        ``name``, ``kind`` (``"digits"``, ``"mnist1d"``, ``"cifar10"``, ``"cifar100"``,
        ``"svhn"`` or ``"file"``), ``X_train``, ``y_train``, ``X_test``,
        ``y_test``, ``ood`` (dict of name to array) and ``input_range`` (low, high).

    Raises
    ------
    ValueError
        For an unknown name, ``max_train`` or ``max_test`` that is not an int >= 1 or None,
        and a file the loaders refuse (naming it).

    Examples
    --------
    >>> data = load_named_dataset("digits", max_train=100, max_test=50)
    >>> data.kind, data.X_train.shape, data.X_test.shape
    ('digits', (100, 64), (50, 64))
    >>> {name: X.shape for name, X in sorted(data.ood.items())}
    {'inverted': (50, 64), 'permuted': (50, 64), 'uniform': (50, 64)}
    """
    check = ParamChecker.of({"max_train": max_train, "max_test": max_test})
    check.integer("max_train", 1, allow_none=True)  # 0 gave an empty training set
    check.integer("max_test", 1, allow_none=True)
    check.raise_if_any()
    rng = np.random.default_rng(random_state)
    kind = data_kind(data, data_dir)
    if kind == "digits":
        bunch = load_digits_ood(random_state=random_state)
    elif kind == "mnist1d":
        bunch = load_mnist1d(random_state=random_state)
    elif kind in _FOLDER_DATA:
        bunch = _FOLDER_DATA[kind](data_dir)
    else:
        X, y = load_array_file(data)
        _check_class_labels(y, str(data))
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.3, stratify=y, random_state=random_state
        )
        bunch = Bunch(X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test)
        bunch.input_range = (float(X_train.min()), float(X_train.max()))
    X_train, y_train = _subsample(bunch.X_train, bunch.y_train, max_train, rng)
    X_test, y_test = _subsample(bunch.X_test, bunch.y_test, max_test, rng)
    low, high = bunch.input_range
    if "ood" in bunch and max_test is None:
        ood = dict(bunch.ood)
    else:
        ood = make_ood_suite(X_test, low, high, random_state=random_state)
    cross = _CROSS_OOD.get(kind)
    if cross is not None:
        try:  # its test split only: SVHN's training file alone holds 73,257 images
            other = _FOLDER_DATA[cross](data_dir, subset="test")
            ood[cross] = _subsample(other.X_test, other.y_test, len(y_test), rng)[0]
        except FileNotFoundError:
            pass  # optional: only when the other set's test file is in the same folder
    return Bunch(
        name=Path(str(data)).name,
        kind=kind,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        ood=ood,
        input_range=(low, high),
    )
