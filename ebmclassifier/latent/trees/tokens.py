"""Token-id input of the tree-latent classifier: checks, and the vocabulary learnt in ``fit``.

A batch of sentences is a 2-D array of non-negative integer token ids, 0 being the padding at
the end of each row. The estimator learns the ids that ``fit`` saw (its vocabulary) and gives
the networks compact indices instead of the raw ids, so the embedding tables are as large as the
vocabulary and not as the largest id; every id that ``fit`` did not see maps to one reserved
out-of-vocabulary index (:func:`encode_tokens`). Ids stay 64-bit integers throughout.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["as_token_ids", "encode_tokens", "warn_unseen_tokens"]

_INT64_MAX = np.iinfo(np.int64).max


def as_token_ids(X) -> np.ndarray:
    """Check token-id sequences and return them as an int64 array (no float round trip).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens)
        Non-negative integer token ids (integer or integral float dtype), 0 as padding at the
        end of each row, at least one token per row.

    Returns
    -------
    ndarray of shape (n_samples, n_tokens), int64

    Raises
    ------
    ValueError
        Naming the first row or value that breaks a rule.

    Examples
    --------
    >>> as_token_ids([[3, 1, 0], [2.0, 0, 0]])
    array([[3, 1, 0],
           [2, 0, 0]])
    >>> as_token_ids([[1, 0, 2]])
    Traceback (most recent call last):
    ...
    ValueError: Each sequence must hold at least one token id > 0, with the padding id 0 only at \
the end; row 0 is [1, 0, 2].
    """
    ids = np.asarray(X)
    if ids.ndim != 2:
        raise ValueError(
            "structure='dependency_tree' needs X of shape (n_samples, n_tokens) of integer "
            f"token ids; got an array of shape {ids.shape!r}."
        )
    if ids.dtype.kind not in "biuf" or not _integral_in_range(ids):
        raise ValueError(
            "structure='dependency_tree' needs non-negative integer token ids (0 = padding) in "
            f"X, below 2**63; got negative, fractional or too large values (dtype {ids.dtype})."
        )
    ids = ids.astype(np.int64)
    present = ids > 0
    lengths = present.sum(axis=1)
    holes = present != (np.arange(ids.shape[1]) < lengths[:, None])
    bad = np.flatnonzero((lengths == 0) | holes.any(axis=1))
    if len(bad):
        raise ValueError(
            "Each sequence must hold at least one token id > 0, with the padding id 0 only at "
            f"the end; row {bad[0]} is {ids[bad[0]].tolist()!r}."
        )
    return ids


def _integral_in_range(ids: np.ndarray) -> bool:
    if ids.dtype.kind == "f":
        return bool(np.all((ids >= 0) & (ids < 2.0**63) & (ids == np.round(ids))))
    return bool(ids.size == 0 or (ids.min() >= 0 and ids.max() <= _INT64_MAX))


def encode_tokens(ids: np.ndarray, vocabulary: np.ndarray, oov_index: int) -> np.ndarray:
    """Compact indices of token ids: 0 stays 0, the i-th id of ``vocabulary`` becomes ``i + 1``.

    Parameters
    ----------
    ids : ndarray of shape (n_samples, n_tokens), int64
        Checked token ids (:func:`as_token_ids`).
    vocabulary : ndarray of shape (n_ids,), int64
        The ids seen in ``fit``, sorted, without 0.
    oov_index : int
        The index of every id not in ``vocabulary`` (the estimator's is
        ``len(vocabulary) + 1``).

    Returns
    -------
    ndarray of shape (n_samples, n_tokens), int64

    Examples
    --------
    >>> import numpy as np
    >>> vocabulary = np.array([5, 9, 10**12])
    >>> encode_tokens(np.array([[10**12, 5, 7, 0]]), vocabulary, oov_index=4)
    array([[3, 1, 4, 0]])
    """
    position = np.searchsorted(vocabulary, ids)
    found = vocabulary[np.minimum(position, len(vocabulary) - 1)] == ids
    unknown = ~found & (ids > 0)
    if unknown.any():
        position = np.where(unknown, oov_index - 1, position)
    return np.where(ids > 0, position + 1, 0)


def warn_unseen_tokens(ids: np.ndarray, vocabulary: np.ndarray, *, n_named: int = 5) -> None:
    """Warn that training ids outside ``vocabulary`` all train the out-of-vocabulary row.

    A later ``partial_fit`` (or warm-started ``fit``) keeps the network, and so the vocabulary
    of the fit that built it: :func:`encode_tokens` maps every id that fit did not see to the
    one out-of-vocabulary index. At predict time that is expected; in training it is worth a
    word, naming a few of the ids and how many there are.

    Parameters
    ----------
    ids : ndarray of shape (n_samples, n_tokens), int64
        Checked token ids (:func:`as_token_ids`).
    vocabulary : ndarray of shape (n_ids,), int64
        The ids seen when the network was built, sorted, without 0.
    n_named : int, default=5
        How many of the unseen ids the message names.

    Returns
    -------
    None
        A ``UserWarning`` if some id is unseen; nothing otherwise.

    Examples
    --------
    >>> import warnings
    >>> ids = np.array([[3, 7, 0], [9, 3, 3]])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_unseen_tokens(ids, vocabulary=np.array([3, 9]))
    >>> str(caught[0].message)[:64]
    'X holds 1 token id(s) that the fit which built the network did n'
    """
    unseen = np.setdiff1d(ids[ids > 0], vocabulary)  # sorted, unique
    if not len(unseen):
        return
    named = ", ".join(str(i) for i in unseen[:n_named].tolist())
    if len(unseen) > n_named:
        named += ", ..."
    n_tokens = int(np.isin(ids, unseen).sum())
    warnings.warn(
        f"X holds {len(unseen)} token id(s) that the fit which built the network did not see "
        f"({named}; {n_tokens} token(s) in all). They all map to the one out-of-vocabulary "
        "embedding, as at predict time, and train it alone. To give them embeddings of their "
        "own, fit afresh (warm_start=False) on data that holds them.",
        UserWarning,
        stacklevel=2,
    )
