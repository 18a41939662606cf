"""The user's own data files: ``.npz`` arrays and ``.csv`` tables, read without unpickling.

Every problem with a file is a ``ValueError`` naming the file (and the line or sample) and how
to write it.
"""

from __future__ import annotations

import csv
import math
import os
import zipfile
from pathlib import Path

import numpy as np


def _parse_labels(values: list[str], path: Path, first_row: int) -> np.ndarray:
    """CSV label strings as int64 when all are integers, float when numeric, else str."""
    empty = [i for i, v in enumerate(values) if not v]
    if empty:
        raise ValueError(
            f"{str(path)!r}: the label cell of line {first_row + empty[0]} is empty; every "
            "sample needs a label. Fill it in or drop the row."
        )
    try:
        numbers = np.array([float(v) for v in values])
    except ValueError:
        return np.array(values)
    if np.all(np.isfinite(numbers)) and np.all(np.mod(numbers, 1) == 0):
        return numbers.astype(np.int64)
    return numbers


def _numeric(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _split_header(rows: list[list[str]], target, path: Path):
    """(header or None, data rows, label column index) of a CSV file's rows."""
    # a first row with any non-numeric cell other than its label is a header
    header = None
    if not all(_numeric(c) for c in rows[0][:-1]) or target is not None or rows[0][-1] == "target":
        header, rows = [c.strip() for c in rows[0]], rows[1:]
    if target is None:
        column = header.index("target") if header and "target" in header else -1
    elif header is None or target not in header:
        raise ValueError(f"Column {target!r} not found in the header of {str(path)!r}: {header!r}.")
    else:
        column = header.index(target)
    if not rows:
        raise ValueError(f"{str(path)!r} has a header but no data rows.")
    return header, rows, column


def _check_csv_shape(rows: list[list[str]], path: Path, first_row: int) -> int:
    """The common number of cells per row; at least a feature and a label."""
    n_cols = len(rows[0])
    bad = [i for i, row in enumerate(rows) if len(row) != n_cols]
    if bad:
        raise ValueError(
            f"{str(path)!r}: every row must have {n_cols} cells; line {first_row + bad[0]} has "
            f"{len(rows[bad[0]])}."
        )
    if n_cols < 2:
        other = next((sep for sep in ";\t|" if sep in rows[0][0]), None)
        hint = (
            f" The cells look separated by {other!r}: write the file comma-separated."
            if other
            else " Add the feature columns."
        )
        raise ValueError(
            f"{str(path)!r}: each row has a single column, so there are no features beside "
            f"the label; a .csv file needs comma-separated features and a label.{hint}"
        )
    return n_cols


def _float32_features(features: list[list[str]], header, column: int, path: Path, first_row):
    try:
        X = np.array(features, dtype=np.float64)
    except ValueError:
        label = repr(header[column]) if header else f"{column} (the last)"
        raise ValueError(
            f"{str(path)!r}: every column but the label column {label} must be numeric. "
            "Encode categorical features as numbers first, or name the label with target=."
        ) from None
    return _as_float32(X, f"{str(path)!r}", lambda i: f"line {first_row + i}")


def _as_float32(X: np.ndarray, where: str, row_name) -> np.ndarray:
    """``X`` (samples along the first axis) as float32, every value finite.

    NaN, infinite values and values beyond float32's range (float32 would make them inf) are
    refused with a ValueError naming ``where`` and ``row_name(i)`` of the first such sample.
    """
    if X.dtype.kind == "f":
        bad = ~np.isfinite(X)
        if X.dtype.itemsize > 4:
            bad |= np.abs(X) > np.finfo(np.float32).max  # False for NaN, flagged above
        bad_rows = bad.reshape(len(X), -1).any(axis=1)
        if bad_rows.any():
            i = int(bad_rows.argmax())
            if np.isnan(X[i]).any():
                raise ValueError(
                    f"{where}: {row_name(i)} holds NaN; every feature must be a finite number. "
                    "Fill the missing values in or drop the sample."
                )
            raise ValueError(
                f"{where}: {row_name(i)} holds a value beyond float32's range (about 3.4e38) "
                "or an infinite one; float32 cannot hold it. Rescale the features."
            )
    return X.astype(np.float32, copy=False)


def _check_sample_shape(X: np.ndarray, where: str) -> None:
    """At least one sample, samples along the first axis, each with at least one value."""
    if X.ndim < 2:
        raise ValueError(
            f"{where}: X must hold one sample per row, of shape (n_samples, n_features) or "
            f"(n_samples, ...); got shape {X.shape}. Reshape it with X.reshape(-1, 1) if each "
            "value is a sample of one feature, or X.reshape(1, -1) if X is a single sample."
        )
    if X.shape[0] == 0:
        raise ValueError(f"{where}: X holds no samples (shape {X.shape}); it needs at least one.")
    if X[0].size == 0:
        raise ValueError(
            f"{where}: the samples of X hold no values (shape {X.shape}); each needs at least one "
            "feature."
        )


def _read_csv(path: Path, target) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [row for row in csv.reader(f) if row]
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{str(path)!r} is not UTF-8 text (byte {exc.start} cannot be decoded), so not a "
            ".csv table: a binary file named .csv? Save the table as comma-separated UTF-8 text, "
            "or arrays with np.savez(path, X=X, y=y) as a .npz file."
        ) from None
    except csv.Error as exc:  # a NUL byte, a cell over the csv module's field size limit
        raise ValueError(
            f"{str(path)!r} cannot be read as a .csv table ({exc}); save it as comma-separated "
            "UTF-8 text."
        ) from None
    if not rows:
        raise ValueError(f"{str(path)!r} is empty.")
    header, rows, column = _split_header(rows, target, path)
    first_row = 2 if header else 1  # the file's line number of rows[0] (blank lines aside)
    column = column % _check_csv_shape(rows, path, first_row)
    y = _parse_labels([row[column].strip() for row in rows], path, first_row)
    features = [[c for j, c in enumerate(row) if j != column] for row in rows]
    return _float32_features(features, header, column, path, first_row), y


def _check_npy_sizes(path: Path, keys: tuple[str, ...], how: str) -> None:
    """Each ``.npy`` member ``keys`` holds as many bytes as its header's shape and dtype claim.

    Read before ``np.load`` allocates the array the header describes, so a header claiming
    10^12 values in a small file is refused instead of raising ``MemoryError``. Members that
    are missing or are no ``.npy`` array are left to the checks after loading.
    """
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        for key in keys:
            name = f"{key}.npy" if f"{key}.npy" in names else key
            if name not in names:
                continue
            with archive.open(name) as member:
                try:
                    version = np.lib.format.read_magic(member)
                except ValueError:
                    continue  # not .npy: np.load hands back bytes, refused after loading
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                else:
                    raise ValueError(
                        f"{str(path)!r}: {key!r} is a .npy array of format version {version}; "
                        f"only versions 1.0 and 2.0 are read. Write it with {how}."
                    )
                data_bytes = archive.getinfo(name).file_size - member.tell()
            claimed = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
            if not dtype.hasobject and claimed != data_bytes:
                raise ValueError(
                    f"{str(path)!r}: the header of {key!r} claims shape {shape} of {dtype} "
                    f"({claimed} bytes), but the archive holds {data_bytes} bytes of data: the "
                    f"file is corrupted or truncated. Write it again with {how}."
                )


def read_npz(path: Path, keys: tuple[str, ...] = ("X", "y")) -> tuple[np.ndarray, ...]:
    """The arrays ``keys`` of a ``.npz`` file, never unpickling.

    ``X`` comes back as float32 of shape (n_samples, ...), at least one sample of at least one
    value, every value finite.

    Every problem is a ValueError that starts with the file's name and says how to write it.
    """
    arrays = "an array named 'X'" if keys == ("X",) else "arrays named 'X' and 'y'"
    how = "np.savez(path, X=X)" if keys == ("X",) else "np.savez(path, X=X, y=y)"
    if not zipfile.is_zipfile(path):
        # np.load would try a non-zip file as a pickle and suggest loading it unsafely
        raise ValueError(
            f"{str(path)!r} is not a readable .npz file (not a zip archive); write it with {how}."
        )
    try:
        _check_npy_sizes(path, keys, how)
        with np.load(path, allow_pickle=False) as data:
            if any(k not in data.files for k in keys):
                raise ValueError(
                    f"{str(path)!r} must hold {arrays} ({how}); it holds {data.files!r}."
                )
            values = tuple(data[k] for k in keys)
            if not all(isinstance(v, np.ndarray) for v in values):
                # np.load hands back the raw bytes of a member that is no .npy array
                names = " and ".join(repr(k) for k in keys)
                raise ValueError(
                    f"{str(path)!r}: {names} must be stored in the archive as .npy ({how}); "
                    "found something else."
                )
    except ValueError as exc:
        if str(path) in str(exc):
            raise
        raise ValueError(f"{str(path)!r} cannot be read as a .npz of plain arrays: {exc}") from None
    except MemoryError:  # the sizes agree, but the archive's own claim of them is too large
        raise ValueError(
            f"{str(path)!r}: its arrays do not fit in memory; subsample them before saving."
        ) from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(
            f"{str(path)!r} is not a readable .npz file ({type(exc).__name__}: {exc}); write it "
            f"with {how}."
        ) from None
    X = values[0]
    if X.dtype.kind not in "biuf":
        raise ValueError(
            f"{str(path)!r}: X must be real numbers (bool, int or float). Got dtype {X.dtype!r}"
            + ("; complex values would lose their imaginary part." if X.dtype.kind == "c" else ".")
        )
    _check_sample_shape(X, f"{str(path)!r}")
    return (_as_float32(X, f"{str(path)!r}", lambda i: f"sample {i} of X"), *values[1:])


def load_array_file(path, target: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The user's own data from a ``.npz`` or ``.csv`` file.

    - ``.npz``: arrays ``X`` (any shape (n, ...)) and ``y`` (n,), e.g. written by
      ``np.savez(path, X=X, y=y)``.
    - ``.csv``: one sample per row, comma-separated. The label is the column named ``target``
      (or ``target=``'s name) when the first row is a header, else the last column. A first
      row whose feature cells are not all numbers is read as a header. Labels that are all
      integers become int64; other labels stay numbers or strings.

    Parameters
    ----------
    path : str or path-like
        The file; its suffix chooses the format.
    target : str or None, default=None
        CSV only: the name of the label column in the header.

    Returns
    -------
    X : ndarray of shape (n, ...), float32
        At least one sample of at least one value; every value finite.
    y : ndarray of shape (n,)

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        Naming the file (and the line or sample) for another suffix, a file that is not a
        readable zip of plain arrays, an array whose ``.npy`` header claims another size than
        its data (checked before anything is allocated), a ``y`` that is not 1-D, a ``.csv``
        that is not UTF-8 text, missing keys or columns, a single column (e.g. a
        semicolon-separated file), an empty label cell, non-numeric or complex features, an
        ``X`` with no samples, no features or a single dimension, or NaN, infinite values and
        values that float32 cannot hold (naming the first such sample or line).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     csv_path, npz_path = Path(folder, "pets.csv"), Path(folder, "images.npz")
    ...     _ = csv_path.write_text("weight,height,target\\n4.0,25.0,cat\\n30.0,60.0,dog\\n")
    ...     np.savez(npz_path, X=np.zeros((3, 1, 8, 8)), y=np.array([0, 1, 1]))
    ...     X, y = load_array_file(csv_path)
    ...     X_images, y_images = load_array_file(npz_path)
    >>> X
    array([[ 4., 25.],
           [30., 60.]], dtype=float32)
    >>> y.tolist()
    ['cat', 'dog']
    >>> X_images.shape, X_images.dtype, y_images.tolist()
    ((3, 1, 8, 8), dtype('float32'), [0, 1, 1])
    """
    path = Path(os.fspath(path))
    if not path.is_file():
        raise FileNotFoundError(f"No such data file: {str(path)!r}.")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        if target is not None:
            raise ValueError("target= applies to .csv files; a .npz file holds arrays X and y.")
        X, y = read_npz(path)
    elif suffix == ".csv":
        X, y = _read_csv(path, target)
    else:
        raise ValueError(f"Unsupported data file {str(path)!r}: use a .npz (X, y) or a .csv file.")
    if y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(
            f"{str(path)!r}: X has {X.shape[0]} samples but y has shape {y.shape!r}; "
            "y must be 1-D with one label per sample: save it with np.savez(path, X=X, y=y) "
            "where y has shape (n_samples,)."
        )
    return X, y
