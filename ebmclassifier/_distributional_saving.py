"""Saving a fitted DistributionalConstraint without pickle.

The file is a zip archive of two members: ``distributional.json`` (the parameters and what
``fit`` learned, as JSON) and ``estimator.ebm``, the base estimator's own file written by
:func:`ebmclassifier.saving.save`. Loading reads JSON and that file (tensors only), so it runs
no code from the file. What JSON cannot hold is refused at save time: ``constraints`` (user
callables) and base estimators that :func:`~ebmclassifier.saving.save` does not write (a
scikit-learn classifier, a Pipeline): pickle those, from a source you trust.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import check_is_fitted

from .saving import load, save

FORMAT = "ebmclassifier.distributional"
FORMAT_VERSION = 1
_PARAMS = ("method", "solver", "tol", "max_iter")
_FITTED = ("prior_", "lambda_", "n_iter_", "em_n_iter_", "residual_", "converged_")
_ARRAYS = ("prior_", "lambda_", "_class_offset_", "_user_lambda_")


def _plain(value):
    """A label, share or count as a JSON value."""
    return value.item() if isinstance(value, np.generic) else value


def _pairs(value):
    """``priors`` / ``train_priors`` as JSON: a dict becomes a list of [label, share] pairs."""
    if isinstance(value, dict):
        return {"pairs": [[_plain(k), float(v)] for k, v in value.items()]}
    if value is None or isinstance(value, str):
        return value
    return {"array": np.asarray(value, dtype=float).tolist()}


def _unpairs(value):
    if isinstance(value, dict) and "pairs" in value:
        return {k: v for k, v in value["pairs"]}
    if isinstance(value, dict) and "array" in value:
        return np.asarray(value["array"], dtype=float)
    return value


def save_constraint(adapted, path) -> None:
    """Write ``adapted`` (fitted, priors only, over one of the library's estimators)."""
    check_is_fitted(adapted, "lambda_")
    if adapted.constraints:
        raise ValueError(
            "DistributionalConstraint.save cannot write 'constraints': their phi are "
            "callables, which a file is not allowed to hold as code. Pickle the estimator "
            "(from a source you trust), or refit it with the constraints after loading."
        )
    base = adapted.estimator
    frozen = isinstance(base, FrozenEstimator)
    if frozen:
        base = base.estimator
    if not hasattr(base, "save"):
        raise ValueError(
            f"DistributionalConstraint.save writes the base estimator with "
            f"ebmclassifier.saving.save, which takes the library's estimators; got a "
            f"{type(base).__name__}. Pickle the estimator instead (from a source you trust)."
        )
    buffer = io.BytesIO()
    save(base, buffer, training_state=False)
    fitted = {name: _plain(getattr(adapted, name)) for name in _FITTED}
    fitted.update({name: np.asarray(getattr(adapted, name)).tolist() for name in _ARRAYS})
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "params": {name: getattr(adapted, name) for name in _PARAMS},
        "priors": _pairs(adapted.priors),
        "train_priors": _pairs(adapted.train_priors),
        "frozen": frozen,
        "classes": np.asarray(adapted.classes_).tolist(),
        "fitted": fitted,
    }
    try:
        text = json.dumps(metadata, allow_nan=True)
    except TypeError as err:
        raise TypeError(
            f"DistributionalConstraint holds a value JSON cannot store ({err}); labels must be "
            "numbers, strings or booleans. Pickle the estimator instead."
        ) from None
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("distributional.json", text)
        archive.writestr("estimator.ebm", buffer.getvalue())


def load_constraint(cls, path, params: dict):
    """Rebuild what :func:`save_constraint` wrote; ``params`` go to the base's ``load``."""
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = json.loads(archive.read("distributional.json"))
            base_bytes = archive.read("estimator.ebm")
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as err:
        raise ValueError(
            f"{os.fspath(path)!r} is not a file written by DistributionalConstraint.save ({err})."
        ) from None
    if metadata.get("format") != FORMAT or metadata.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{os.fspath(path)!r} is not a file of format {FORMAT!r} version {FORMAT_VERSION}."
        )
    base = load(io.BytesIO(base_bytes), **params)
    if metadata["frozen"]:
        base = FrozenEstimator(base)
    adapted = cls(
        base,
        priors=_unpairs(metadata["priors"]),
        train_priors=_unpairs(metadata["train_priors"]),
        **metadata["params"],
    )
    adapted._check_params()
    adapted.classes_ = np.asarray(metadata["classes"])
    for name, value in metadata["fitted"].items():
        setattr(adapted, name, np.asarray(value, dtype=float) if name in _ARRAYS else value)
    return adapted
