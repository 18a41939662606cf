"""The tests' own factory of small estimators (``tests/estimators.py``) and its guard."""

import copy
import io

import pytest

from .estimators import KINDS, FittedModels, digest, params, tiny


def test_every_kind_builds_with_its_settings_and_the_overrides():
    for kind, (cls, settings) in KINDS.items():
        clf = tiny(kind, max_epochs=7)
        assert type(clf) is cls
        assert clf.get_params()["max_epochs"] == 7
        assert params(kind, max_epochs=7) == {**settings, "max_epochs": 7}
    with pytest.raises(ValueError, match="kind must be one of"):
        tiny("ngebn")


def test_a_shared_model_that_a_test_changes_is_named(small_blobs):
    X, y = small_blobs
    models = FittedModels({"small_blobs": small_blobs}.__getitem__)
    clf = models("ngebm", max_epochs=2)
    assert models("ngebm", max_epochs=2) is clf  # fitted once
    clf.predict_proba(X), clf.energy(X), clf.score(X, y), clf.save(io.BytesIO())
    copy.deepcopy(clf).partial_fit(X, y)  # a copy may change
    assert models.changed() == []
    for change in (
        lambda: clf.partial_fit(X, y),
        lambda: clf.set_params(lr=0.5),
        lambda: setattr(clf, "fd_step_size_", 1.5),
        lambda: clf.input_min_.add_(1.0),
    ):
        before = digest(models("ngebm", max_epochs=2))
        change()
        assert models.changed() == ["ngebm on small_blobs with [('max_epochs', 2)]"]
        assert digest(clf) != before
        models._models[next(iter(models._models))] = (clf, digest(clf))
