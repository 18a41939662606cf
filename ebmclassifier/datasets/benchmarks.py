"""Benchmarks that work offline: scikit-learn's digits and the generated MNIST-1D.

Each loader returns a :class:`sklearn.utils.Bunch` with ``X_train``, ``y_train``, ``X_test``,
``y_test`` (float32 inputs, int64 labels) and ``ood``, a dict of out-of-distribution sets built
from the test split by :func:`~ebmclassifier.datasets.make_ood_suite`.
"""

from __future__ import annotations

import random

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch

from .ood import OOD_KINDS, make_ood_suite

_DIGITS_SHAPES = {"flat": (64,), "image": (1, 8, 8)}
_MNIST1D_SHAPES = {"flat": (40,), "sequence": (1, 40)}


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)!r}. Got {value!r} instead.")


def load_digits_ood(
    shape: str = "flat",
    test_size: float = 0.3,
    ood_kinds=OOD_KINDS,
    random_state=0,
) -> Bunch:
    """scikit-learn's 8x8 digits, scaled to [0, 1], with an out-of-distribution suite.

    The 1,797 images (pixel values 0..16) are divided by 16 and split, stratified, into train
    and test. The OOD suite is made from the test images (never seen in training): uniform
    noise over [0, 1], inverted digits ``1 - x`` and pixel-permuted digits (see
    :func:`~ebmclassifier.datasets.make_ood_suite`), each as large as the test split.

    Parameters
    ----------
    shape : {"flat", "image"}, default="flat"
        ``"flat"``: X of shape (n, 64) (an MLP); ``"image"``: (n, 1, 8, 8) (a conv net).
    test_size : float, default=0.3
        Fraction of the samples held out for testing.
    ood_kinds : sequence of str, default=("uniform", "inverted", "permuted")
        Which OOD sets to build.
    random_state : int, RandomState or None, default=0
        Seeds the split and the OOD sets.

    Returns
    -------
    data : Bunch
        ``X_train``, ``X_test`` float32 of the chosen shape; ``y_train``, ``y_test`` int64 in
        0..9; ``ood``: dict of name to float32 array shaped like ``X_test``;
        ``input_range``: (0.0, 1.0); ``target_names``; ``DESCR``.

    Examples
    --------
    >>> data = load_digits_ood(shape="image")
    >>> data.X_train.shape, sorted(data.ood)
    ((1257, 1, 8, 8), ['inverted', 'permuted', 'uniform'])
    """
    _check_choice("shape", shape, _DIGITS_SHAPES)
    digits = load_digits()
    X = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, stratify=y, random_state=random_state
    )
    new_shape = _DIGITS_SHAPES[shape]
    X_train = X_train.reshape(-1, *new_shape)
    X_test = X_test.reshape(-1, *new_shape)
    ood = make_ood_suite(X_test, 0.0, 1.0, kinds=ood_kinds, random_state=random_state)
    return Bunch(
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        ood=ood,
        input_range=(0.0, 1.0),
        target_names=np.arange(10),
        DESCR="scikit-learn digits (8x8, 10 classes) in [0, 1]; OOD sets from the test split.",
    )


def load_mnist1d(
    shape: str = "sequence",
    num_samples: int = 5000,
    seed: int = 42,
    ood_kinds=OOD_KINDS,
    random_state=0,
) -> Bunch:
    """MNIST-1D, generated locally by the ``mnist1d`` package (no download).

    Calls ``mnist1d.data.make_dataset`` with the package's default arguments
    (``get_dataset_args``), which by default give the published benchmark: 4,000 training and
    1,000 test signals of length 40, 10 classes, standardised to mean 0 and standard deviation 1.
    ``get_dataset`` is avoided because it downloads by default. The generator seeds numpy's and
    Python's global random state; both are restored afterwards.

    Published test accuracies: logistic regression 32%, MLP 68%, CNN 94% (Greydanus 2020).

    Parameters
    ----------
    shape : {"sequence", "flat"}, default="sequence"
        ``"sequence"``: X of shape (n, 1, 40) (a 1-D conv net); ``"flat"``: (n, 40).
    num_samples : int, default=5000
        Total number of signals, 80% of them for training (the package's split).
    seed : int, default=42
        The generator's seed; 42 reproduces the published data set.
    ood_kinds : sequence of str, default=("uniform", "inverted", "permuted")
        OOD sets built from the test split over the training data's value range.
    random_state : int, RandomState or None, default=0
        Seeds the OOD sets.

    Returns
    -------
    data : Bunch
        ``X_train``, ``X_test`` float32; ``y_train``, ``y_test`` int64 in 0..9; ``ood``;
        ``input_range``: (min, max) of ``X_train``; ``DESCR``.

    References
    ----------
    .. [1] Greydanus, "Scaling Down Deep Learning" (MNIST-1D), arXiv:2011.14439, 2020.

    Examples
    --------
    A small draw (the benchmark itself is the default ``num_samples=5000``):

    >>> data = load_mnist1d(num_samples=100)
    >>> data.X_train.shape, data.X_test.shape, data.X_train.dtype
    ((80, 1, 40), (20, 1, 40), dtype('float32'))
    >>> sorted(set(data.y_train.tolist())) == list(range(10))
    True
    """
    _check_choice("shape", shape, _MNIST1D_SHAPES)
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.num_samples = int(num_samples)
    args.seed = int(seed)
    # mnist1d seeds the legacy global generators: leave the caller's streams as they were
    np_state, py_state = np.random.get_state(), random.getstate()  # noqa: NPY002
    try:
        raw = make_dataset(args)
    finally:
        np.random.set_state(np_state)  # noqa: NPY002
        random.setstate(py_state)

    new_shape = _MNIST1D_SHAPES[shape]
    X_train = raw["x"].astype(np.float32).reshape(-1, *new_shape)
    X_test = raw["x_test"].astype(np.float32).reshape(-1, *new_shape)
    low, high = float(X_train.min()), float(X_train.max())
    ood = make_ood_suite(X_test, low, high, kinds=ood_kinds, random_state=random_state)
    return Bunch(
        X_train=X_train,
        y_train=raw["y"].astype(np.int64),
        X_test=X_test,
        y_test=raw["y_test"].astype(np.int64),
        ood=ood,
        input_range=(low, high),
        target_names=np.arange(10),
        DESCR="MNIST-1D (Greydanus 2020), generated locally; OOD sets from the test split.",
    )
