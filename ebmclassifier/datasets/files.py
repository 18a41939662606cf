"""Loaders for data on disk: CIFAR-10/100 and SVHN in their standard formats.

Nothing is downloaded: point the loader at the folder holding the extracted archive. Images come
back as float32 arrays of shape (n, 3, 32, 32) with values in [0, 1], labels as int64.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import pickletools
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._matfile import read_mat

_CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
_CIFAR100_FILES = ["train", "test"]
_SVHN_FILES = ["train_32x32.mat", "test_32x32.mat"]
#: The largest matrix of an SVHN file read: extra_32x32.mat holds 531,131 images, 1.63e9 bytes.
_SVHN_MAX_BYTES = 2**31


_SUBSETS = ("all", "train", "test")


def _check_subset(subset) -> None:
    if subset not in _SUBSETS:
        raise ValueError(f"subset must be 'all', 'train' or 'test'. Got {subset!r} instead.")


def _find_folder(data_dir, required: list[str], subfolder: str, name: str, hint: str) -> Path:
    """``data_dir`` or ``data_dir/subfolder``, whichever holds every required file."""
    data_dir = Path(os.fspath(data_dir))
    for folder in (data_dir, data_dir / subfolder):
        if all((folder / f).is_file() for f in required):
            return folder
    raise FileNotFoundError(
        f"{name} not found: expected the files {', '.join(required)} in {str(data_dir)!r} or "
        f"in {str(data_dir / subfolder)!r}. {hint}"
    )


#: Stands for ``numpy.ndarray`` where a batch names it: the type an array pickle passes to
#: ``_reconstruct``. Calling the class itself would allocate any shape the file declares.
_NDARRAY = object()


class _BatchUnpickler(pickle.Unpickler):
    """An unpickler that builds only builtin containers and numpy arrays, none larger than
    the file.

    The CIFAR "python version" batches are pickles, and a plain ``pickle.load`` runs whatever
    code a crafted file names. Containers, strings, bytes and numbers are pickle opcodes and
    need no global; a numpy array needs the few globals below (numpy 1 and 2 spell its module
    differently). Any other global is refused before anything is built. numpy's array pickle
    first builds an empty array of a declared shape, then fills it with bytes of the file: an
    array declared larger than the file is refused before it is allocated.
    """

    _ALLOWED = frozenset(
        (module, name)
        for prefix in ("numpy.core", "numpy._core")
        for module, name in (
            (f"{prefix}.multiarray", "_reconstruct"),
            (f"{prefix}.multiarray", "scalar"),
            (f"{prefix}.numeric", "_frombuffer"),
        )
    ) | {("numpy", "dtype"), ("_codecs", "encode")}

    def __init__(self, file, max_bytes: int, **kwargs):
        super().__init__(file, **kwargs)
        self._max_bytes = max_bytes

    def find_class(self, module: str, name: str):
        if (module, name) == ("numpy", "ndarray"):
            return _NDARRAY
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        found = super().find_class(module, name)
        return self._bounded(found) if name == "_reconstruct" else found

    def _bounded(self, reconstruct):
        def bounded_reconstruct(subtype, shape, dtype):
            if subtype is not _NDARRAY:
                raise pickle.UnpicklingError("only numpy.ndarray arrays are read")
            shape = tuple(shape) if isinstance(shape, tuple | list) else (shape,)
            claimed = math.prod(shape) * np.dtype(dtype).itemsize  # Python ints: no overflow
            if claimed > self._max_bytes:
                raise pickle.UnpicklingError(
                    f"an array of shape {shape} claims {claimed} bytes, more than the file's "
                    f"{self._max_bytes}"
                )
            return reconstruct(np.ndarray, shape, dtype)

        return bounded_reconstruct


def _unpickle(path: Path) -> dict:
    """A CIFAR batch: a pickled dict (bytes keys when written by Python 2), keys as str.

    Read with :class:`_BatchUnpickler`, so a crafted file cannot run code: anything but
    builtin containers and numpy arrays is refused with a ``ValueError`` naming the file. Every
    count the pickle declares is checked against the bytes that follow it first: Python's
    unpickler allocates what a count claims before reading it.
    """
    try:
        raw = path.read_bytes()
        for _ in pickletools.genops(raw):  # reads each counted value: short ones raise
            pass
        batch = _BatchUnpickler(io.BytesIO(raw), len(raw), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"{str(path)!r} is not a CIFAR batch in the python format ({exc}); only pickled "
            "dicts of lists and numpy arrays are read. Extract the batch again from the "
            "official archive."
        ) from None
    except MemoryError:
        raise ValueError(f"{str(path)!r}: the batch does not fit in memory.") from None
    if not isinstance(batch, dict):
        raise ValueError(
            f"{str(path)!r} is not a CIFAR batch: it holds a {type(batch).__name__}, not a dict."
        )
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}


def _batch_arrays(batch: dict, path: Path, label_key: str, n_classes: int):
    """The images and labels of one batch, checked: uint8 rows of 3,072, labels in range."""
    missing = [k for k in ("data", label_key) if k not in batch]
    if missing:
        raise ValueError(
            f"{str(path)!r} lacks the key(s) {missing!r} of a CIFAR batch; it has "
            f"{sorted(map(str, batch))!r}."
        )
    data = np.asarray(batch["data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(
            f"{str(path)!r}: 'data' must be uint8 rows of 3,072 bytes (32x32 pixels, 3 "
            f"channels). Got dtype {data.dtype} and shape {data.shape}."
        )
    try:
        labels = np.asarray(batch[label_key])
        ok = labels.ndim == 1 and labels.dtype.kind in "iu"
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{str(path)!r}: {label_key!r} must be a flat list of integers.")
    if len(labels) != len(data):
        raise ValueError(
            f"{str(path)!r}: {len(data)} images but {len(labels)} entries in {label_key!r}; "
            "the file is truncated or corrupted."
        )
    bad = (labels < 0) | (labels >= n_classes)
    if bad.any():
        raise ValueError(
            f"{str(path)!r}: {label_key!r} holds {labels[bad][0]}, outside 0..{n_classes - 1}."
        )
    return _cifar_images(data), labels.astype(np.int64)


def _cifar_images(data: np.ndarray) -> np.ndarray:
    """Rows of 3,072 uint8 (1,024 red, then green, then blue, row-major) -> (n, 3, 32, 32)."""
    return (data.reshape(-1, 3, 32, 32) / np.float32(255.0)).astype(np.float32)


def _names(meta: dict, key: str):
    names = meta.get(key)
    return (
        None
        if names is None
        else np.array([n.decode() if isinstance(n, bytes) else n for n in names])
    )


def load_cifar10(data_dir, *, subset: str = "all") -> Bunch:
    """CIFAR-10 from the "CIFAR-10 python version" files in ``data_dir``.

    Expects ``data_batch_1`` .. ``data_batch_5`` and ``test_batch`` (pickled dicts with
    ``data``, uint8 of shape (10000, 3072), and ``labels``), either directly in ``data_dir`` or
    in its ``cifar-10-batches-py`` subfolder (``cifar-10-python.tar.gz`` extracted).
    ``batches.meta``, if present, gives the class names.

    Parameters
    ----------
    data_dir : str or path-like
        Folder holding the batches (or the folder above ``cifar-10-batches-py``).
    subset : {"all", "train", "test"}, default="all"
        The splits to read: ``"test"`` reads ``test_batch`` alone (and needs no other batch),
        ``"train"`` the five training batches.

    Returns
    -------
    data : Bunch
        ``X_train`` (50000, 3, 32, 32) and ``X_test`` (10000, 3, 32, 32) float32 in [0, 1];
        ``y_train``, ``y_test`` int64 in 0..9; ``target_names`` (or None); ``input_range``.
        With ``subset="train"`` or ``"test"``, only that split's ``X_*`` and ``y_*``.

    Raises
    ------
    FileNotFoundError
        Naming the expected files and where they were looked for.
    ValueError
        Naming the file, when a batch is not a pickled dict of lists and numpy arrays (a
        pickle that would build anything else, and so could run code, is refused unread),
        declares a value or an array larger than the file (refused before it is allocated),
        lacks a key, holds images that are not uint8 rows of 3,072 bytes, or has labels that
        do not match the images in number or lie outside the classes.

    References
    ----------
    .. [1] Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", 2009.

    Examples
    --------
    Tiny files in the standard format, each image a row of 1,024 red, 1,024 green and 1,024
    blue bytes:

    >>> import pickle, tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> red = np.repeat(np.array([255, 0, 0], dtype=np.uint8), 1024)
    >>> batch = {b"data": np.stack([red, red]), b"labels": [3, 8]}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
    ...         _ = Path(folder, name).write_bytes(pickle.dumps(batch))
    ...     data = load_cifar10(folder)
    ...     test_only = load_cifar10(folder, subset="test")  # reads test_batch alone
    >>> data.X_train.shape, data.y_test.tolist()
    ((10, 3, 32, 32), [3, 8])
    >>> sorted(test_only)
    ['X_test', 'input_range', 'target_names', 'y_test']
    >>> data.X_train[0, :, 0, 0]  # red, green, blue of the first pixel
    array([1., 0., 0.], dtype=float32)
    """
    _check_subset(subset)
    train_files, test_files = _CIFAR10_FILES[:-1], _CIFAR10_FILES[-1:]
    folder = _find_folder(
        data_dir,
        {"all": _CIFAR10_FILES, "train": train_files, "test": test_files}[subset],
        "cifar-10-batches-py",
        "CIFAR-10",
        "Download and extract cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html.",
    )

    def batch(name):
        return _batch_arrays(_unpickle(folder / name), folder / name, "labels", 10)

    data = Bunch()
    if subset != "test":
        train = [batch(name) for name in train_files]
        data.X_train = np.concatenate([X for X, _ in train])
        data.y_train = np.concatenate([y for _, y in train])
    if subset != "train":
        data.X_test, data.y_test = batch("test_batch")
    meta = _unpickle(folder / "batches.meta") if (folder / "batches.meta").is_file() else {}
    data.target_names = _names(meta, "label_names")
    data.input_range = (0.0, 1.0)
    return data


def load_cifar100(data_dir, label_mode: str = "fine", *, subset: str = "all") -> Bunch:
    """CIFAR-100 from the "CIFAR-100 python version" files in ``data_dir``.

    Expects ``train`` and ``test`` (pickled dicts with ``data``, ``fine_labels`` and
    ``coarse_labels``) directly in ``data_dir`` or in its ``cifar-100-python`` subfolder;
    ``meta``, if present, gives the class names.

    Parameters
    ----------
    data_dir : str or path-like
        Folder holding the files (or the folder above ``cifar-100-python``).
    label_mode : {"fine", "coarse"}, default="fine"
        The 100 fine classes or the 20 superclasses.
    subset : {"all", "train", "test"}, default="all"
        The splits to read: ``"test"`` reads the ``test`` file alone (and needs no other),
        ``"train"`` the ``train`` file.

    Returns
    -------
    data : Bunch
        ``X_train`` (50000, 3, 32, 32) and ``X_test`` (10000, 3, 32, 32) float32 in [0, 1];
        ``y_train``, ``y_test`` int64; ``target_names`` (or None); ``input_range``. With
        ``subset="train"`` or ``"test"``, only that split's ``X_*`` and ``y_*``.

    Raises
    ------
    FileNotFoundError
        Naming the expected files and where they were looked for.
    ValueError
        Naming the file, when a batch is not a pickled dict of lists and numpy arrays (a
        pickle that would build anything else, and so could run code, is refused unread),
        declares a value or an array larger than the file (refused before it is allocated),
        lacks a key, holds images that are not uint8 rows of 3,072 bytes, or has labels that
        do not match the images in number or lie outside the classes.

    Examples
    --------
    Tiny files in the standard format, in the archive's subfolder:

    >>> import pickle, tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> split = {"data": np.zeros((2, 3072), dtype=np.uint8),
    ...          "fine_labels": [42, 97], "coarse_labels": [8, 12]}
    >>> with tempfile.TemporaryDirectory() as root:
    ...     folder = Path(root, "cifar-100-python")
    ...     folder.mkdir()
    ...     for name in ["train", "test"]:
    ...         _ = Path(folder, name).write_bytes(pickle.dumps(split))
    ...     fine, coarse = load_cifar100(root), load_cifar100(root, label_mode="coarse")
    >>> fine.X_test.shape, fine.y_test.tolist(), coarse.y_test.tolist()
    ((2, 3, 32, 32), [42, 97], [8, 12])
    """
    if label_mode not in ("fine", "coarse"):
        raise ValueError(f"label_mode must be 'fine' or 'coarse'. Got {label_mode!r} instead.")
    _check_subset(subset)
    splits = [f for f in _CIFAR100_FILES if subset in ("all", f)]
    folder = _find_folder(
        data_dir,
        splits,
        "cifar-100-python",
        "CIFAR-100",
        "Download and extract cifar-100-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html.",
    )
    key = f"{label_mode}_labels"
    n_classes = 100 if label_mode == "fine" else 20
    data = Bunch()
    for split in splits:
        X, y = _batch_arrays(_unpickle(folder / split), folder / split, key, n_classes)
        data[f"X_{split}"], data[f"y_{split}"] = X, y
    meta = _unpickle(folder / "meta") if (folder / "meta").is_file() else {}
    data.target_names = _names(meta, f"{label_mode}_label_names")
    data.input_range = (0.0, 1.0)
    return data


def _svhn_split(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        # our own reader: scipy's loadmat dies with a segmentation fault on crafted files
        mat = read_mat(path, ("X", "y"), max_bytes=_SVHN_MAX_BYTES)
    except ValueError as exc:
        raise ValueError(
            f"{exc} The download is truncated or corrupted: download it again from "
            "http://ufldl.stanford.edu/housenumbers/."
        ) from None
    missing = [k for k in ("X", "y") if k not in mat]
    if missing:
        raise ValueError(f"{str(path)!r} lacks the variable(s) {missing!r} of an SVHN split.")
    X, y = np.asarray(mat["X"]), np.asarray(mat["y"])
    if X.dtype != np.uint8 or X.ndim != 4 or X.shape[:3] != (32, 32, 3):
        raise ValueError(
            f"{str(path)!r}: X must be uint8 of shape (32, 32, 3, n). Got dtype {X.dtype} and "
            f"shape {X.shape}."
        )
    if y.size != X.shape[3] or y.dtype.kind not in "iuf" or not np.isin(y, np.arange(1, 11)).all():
        raise ValueError(
            f"{str(path)!r}: y must hold one label in 1..10 per image ({X.shape[3]} images); "
            f"got {y.size} values of dtype {y.dtype}."
        )
    # X is (32, 32, 3, n) uint8; the digit 0 is stored as label 10
    X = (np.transpose(X, (3, 2, 0, 1)) / np.float32(255.0)).astype(np.float32)
    y = y.astype(np.int64).ravel()
    y[y == 10] = 0
    return X, y


def load_svhn(data_dir, include_extra: bool = False, *, subset: str = "all") -> Bunch:
    """SVHN (cropped digits, "format 2") from ``train_32x32.mat`` and ``test_32x32.mat``.

    The MATLAB files hold ``X`` of shape (32, 32, 3, n) and ``y`` of shape (n, 1) with labels
    1..10, where 10 is the digit 0; it is mapped to 0.

    Parameters
    ----------
    data_dir : str or path-like
        Folder holding the .mat files (or the folder above an ``svhn`` subfolder).
    include_extra : bool, default=False
        Append ``extra_32x32.mat`` (531,131 easier samples) to the training set.
    subset : {"all", "train", "test"}, default="all"
        The splits to read: ``"test"`` reads ``test_32x32.mat`` alone (and needs no other
        file; ``include_extra`` is then unused), ``"train"`` the training file(s).

    Returns
    -------
    data : Bunch
        ``X_train``, ``X_test`` float32 (n, 3, 32, 32) in [0, 1]; ``y_train``, ``y_test``
        int64 in 0..9; ``target_names``; ``input_range``. With ``subset="train"`` or
        ``"test"``, only that split's ``X_*`` and ``y_*``.

    Raises
    ------
    FileNotFoundError
        Naming the expected files and where they were looked for.
    ValueError
        Naming the file, when it is not a MATLAB file, lacks ``X`` or ``y``, or holds images
        or labels of the wrong type, shape or range.

    References
    ----------
    .. [1] Netzer et al., "Reading Digits in Natural Images with Unsupervised Feature
       Learning", NIPS Workshop 2011.

    Examples
    --------
    Tiny files in the standard format:

    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from scipy.io import savemat
    >>> mat = {"X": np.zeros((32, 32, 3, 2), dtype=np.uint8), "y": np.array([[10], [3]])}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     for name in ["train_32x32.mat", "test_32x32.mat"]:
    ...         savemat(Path(folder, name), mat)
    ...     data = load_svhn(folder)
    >>> data.X_train.shape, data.X_train.dtype
    ((2, 3, 32, 32), dtype('float32'))
    >>> data.y_train.tolist()  # the digit 0 is stored as 10
    [0, 3]
    """
    _check_subset(subset)
    train_files = ["train_32x32.mat"] + (["extra_32x32.mat"] if include_extra else [])
    required = {
        "all": train_files + ["test_32x32.mat"],
        "train": train_files,
        "test": ["test_32x32.mat"],
    }[subset]
    folder = _find_folder(
        data_dir,
        required,
        "svhn",
        "SVHN",
        "Download the cropped-digit .mat files from http://ufldl.stanford.edu/housenumbers/.",
    )
    data = Bunch()
    if subset != "test":
        X_train, y_train = _svhn_split(folder / "train_32x32.mat")
        if include_extra:
            X_extra, y_extra = _svhn_split(folder / "extra_32x32.mat")
            X_train = np.concatenate([X_train, X_extra])
            y_train = np.concatenate([y_train, y_extra])
        data.X_train, data.y_train = X_train, y_train
    if subset != "train":
        data.X_test, data.y_test = _svhn_split(folder / "test_32x32.mat")
    data.target_names = np.arange(10)
    data.input_range = (0.0, 1.0)
    return data
