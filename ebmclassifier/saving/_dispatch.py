"""The one :func:`save` and the one :func:`load` of the library: which format an object is
written in, and which format a file is read as."""

from __future__ import annotations

import os

from ._archive import FileLimits, Refused, read_file, shown, write_archive
from ._composite import (
    COMPOSITE_FORMAT,
    COMPOSITE_LAYOUT,
    is_library_file,
    load_composite,
    save_composite,
)
from ._files import LAYOUTS, SavedEstimatorMixin, load_members, save_constraint, save_estimator
from ._skeleton import type_names

__all__ = ["load", "save"]


def save(obj, path: str | os.PathLike, *, training_state: bool = True) -> None:
    """Write a fitted estimator, constraint or pipeline to one file that :func:`load` reads.

    Never pickles. An estimator of the library (``NGEBMClassifier``, ``JEMClassifier``,
    ``LatentStructureClassifier``, ...) is written as ``estimator.save(path)`` writes it: JSON
    metadata and the tensors of its modules; a ``DistributionalConstraint`` as
    ``adapted.save(path)`` does. A scikit-learn object around them (a ``Pipeline``, a
    ``ColumnTransformer``, a ``FeatureUnion``, a ``CalibratedClassifierCV``, a search's
    ``best_estimator_``) whose other parts are scikit-learn's or numpy's: its scikit-learn part
    by skops (``skops.io``), each estimator of the library in its own file, all in one archive
    (see the user guide's "Saving and deploying").

    Parameters
    ----------
    obj : estimator of the library, DistributionalConstraint or scikit-learn estimator
        Fitted (an unfitted estimator of the library inside a composite, such as the
        ``estimator`` parameter of a ``CalibratedClassifierCV``, is saved as its parameters).
    path : str, path-like or file object
        The file to write (a zip archive; ``.ebm`` is a fine suffix). It is written whole or
        not at all: to a temporary file in the same folder, synced to the disk, then renamed
        over ``path``, so that a full disk, an error or a killed process leaves the old file
        as it was (the folder needs room for both for a moment). Only a regular file is
        replaced, keeping its owner (where the system allows it) and mode; a symbolic link is
        followed. A file object receives the complete archive in one ``write`` call, or
        nothing when building it fails; whether a ``write`` that fails half-way leaves part of
        it is the object's own affair.
    training_state : bool, default=True
        Also save the estimators' optimizer states and training histories, so that
        ``partial_fit`` after :func:`load` continues as it would have without the round trip.
        ``False`` keeps what inference needs only (an Adam state doubles the size of the
        weights). Not for a ``DistributionalConstraint``, whose base is saved for inference.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Before writing, for a path to a folder, a named pipe, a device or a socket, or through
        a symbolic link that another user owns in a folder anyone may write to (``/tmp``).
    TypeError
        For what neither the library's format nor skops writes: a torch object outside the
        library's estimators, a type skops does not support.
    OSError
        From the file system (a missing folder, a full disk, a file-size limit), naming
        ``path``.

    Warns
    -----
    UserWarning
        When the scikit-learn part names types that :func:`load` does not trust by default:
        loading the file will need ``trusted=[...]``.

    Examples
    --------
    >>> import tempfile, zipfile
    >>> from pathlib import Path
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from ebmclassifier import NGEBMClassifier, load
    >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
    >>> pipe = make_pipeline(StandardScaler(), clf).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save(pipe, Path(folder, "pipe.ebm"))
    ...     members = zipfile.ZipFile(Path(folder, "pipe.ebm")).namelist()
    ...     restored = load(Path(folder, "pipe.ebm"))
    >>> members
    ['composite.json', 'skeleton.skops', 'estimators/0.ebm']
    >>> np.array_equal(restored.predict_proba(X), pipe.predict_proba(X))
    True
    """
    if isinstance(obj, SavedEstimatorMixin):
        save_estimator(obj, path, training_state=training_state)
    elif is_library_file(obj):
        save_constraint(obj, path)
    else:
        write_archive(path, save_composite(obj, training_state=training_state))


def load(
    path: str | os.PathLike,
    *,
    limits: FileLimits | None = None,
    trusted: list | None = None,
    **params,
):
    """Rebuild what :func:`save` wrote, ready to predict, without the data.

    The one loader of the library's files: an estimator's, a ``DistributionalConstraint``'s, a
    pipeline's. A file from anyone is safe to load (see the module's notes): ``load`` runs no
    code from it, builds only the classes it trusts, sets only what ``save`` writes, and
    reads, decompresses and allocates no more than ``limits`` allow.

    Parameters
    ----------
    path : str, path-like or file object
        A file written by :func:`save` (or ``estimator.save``, ``DistributionalConstraint.save``).
        A file object must be binary and seekable.
    limits : FileLimits or None, default=None
        The most a file may make ``load`` read, decompress and allocate; None means
        ``FileLimits()``. Raise them for a model larger than 2 GiB that you trust.
    trusted : list of types or of str, or None, default=None
        For a pipeline's file: the types its scikit-learn part may name besides those skops
        trusts by default (scikit-learn's estimators, numpy's and scipy's types) and the
        library adds (the helpers of ``CalibratedClassifierCV``), as types or as the names
        ``"module.name"`` that ``skops.io.get_untrusted_types`` lists. Review a type
        before you trust it: skops builds it without its ``__init__``, but its methods run
        when the object is used.
    **params
        Constructor parameters to set instead of the saved ones: those that could not be saved
        (a network class of one's own, callbacks, ...), another ``device``, or the parameters
        of how the process runs, which ``load`` never takes from a file (``verbose``,
        ``compile``, the data loaders' workers; see the user guide). A model trained on a GPU
        loads on a CPU-only machine with the default ``device="auto"``. For a
        ``DistributionalConstraint``, those of its base estimator; for a pipeline, those of
        each estimator of the library in it.

    Returns
    -------
    object
        Of the saved class, fitted: the same ``predict_proba``, ``energy`` and ``score_ood``
        as the saved one, its estimators on ``device_`` (``device`` resolved here).

    Raises
    ------
    ValueError
        Naming the file, for one not written by :func:`save` or beyond ``limits``, one that
        names a class ``load`` does not build (see the module's notes) or a type it does not
        trust (naming it, and how to trust it), a class of the wrong kind for its parameter
        (naming the parameter), or one it cannot import (renamed or removed in the versions
        installed here); one that sets an attribute the estimator does not save, or
        ``torch_load_kwargs`` / ``compile__options``; parameters that build a network larger
        than its weights; weights that do not fit the network. A parameter given in ``params``
        is not read from the file.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from ebmclassifier import JEMClassifier
    >>> clf = JEMClassifier(max_epochs=1, sgld_steps=2, buffer_size=20, random_state=0)
    >>> clf = clf.fit(X, np.array(["a", "b", "c"])[y])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     clf.save(Path(folder, "jem.ebm"), training_state=False)
    ...     restored = load(Path(folder, "jem.ebm"), device="cpu")
    >>> type(restored).__name__, restored.classes_.tolist(), restored.device_
    ('JEMClassifier', ['a', 'b', 'c'], device(type='cpu'))
    >>> np.array_equal(restored.energy(X), clf.energy(X))
    True
    """
    limits = FileLimits() if limits is None else limits
    if not isinstance(limits, FileLimits):
        raise TypeError(f"limits must be a FileLimits or None. Got {limits!r} instead.")
    names = type_names(trusted)
    try:
        kind, members = read_file(path, {**LAYOUTS, COMPOSITE_FORMAT: COMPOSITE_LAYOUT}, limits)
        if kind == COMPOSITE_FORMAT:
            return load_composite(members, params, limits, names)
        return load_members(kind, members, params, limits)
    except Refused as err:
        raise ValueError(f"Cannot load {shown(path)}: {str(err).rstrip('.')}.") from None
