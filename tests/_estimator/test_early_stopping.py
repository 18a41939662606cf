"""Early stopping in scikit-learn's spelling and in skorch's, and the misuse skorch lets through.

``early_stopping=True`` is skorch's ``EarlyStopping`` callback on skorch's ``ValidSplit``, so
the two spellings, given the same split, are the same fit bit for bit.
"""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, StratifiedShuffleSplit
from skorch import NeuralNetClassifier
from skorch.callbacks import Callback, Checkpoint, EarlyStopping
from skorch.dataset import ValidSplit

import ebmclassifier
from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier._estimator.early_stopping import SklearnEarlyStopping
from ebmclassifier._estimator.training_loss_stopping import TrainingLossStopping

from ..estimators import params

PARAMS = params("ngebm", max_epochs=60, lr=0.03, module__hidden_sizes=(16,))
STOP = dict(early_stopping=True, n_iter_no_change=3)


@pytest.fixture(scope="module")
def data():
    X, y = load_digits(return_X_y=True)
    return (X[:500] / 16).astype(np.float32), np.array(list("abcdefghij"))[y[:500]]


@pytest.fixture(scope="module")
def stopped(data):
    return NGEBMClassifier(**PARAMS, **STOP).fit(*data)


def test_fit_stops_when_the_validation_loss_stops_improving(stopped):
    losses = np.asarray(stopped.history[:, "valid_loss"])
    assert stopped.n_iter_ == len(losses) < PARAMS["max_epochs"]
    best = stopped.best_epoch_
    assert stopped.n_iter_ == best + STOP["n_iter_no_change"]  # skorch's patience
    # the last n_iter_no_change epochs are no better than the best by tol
    assert (losses[best:] > losses[best - 1] - stopped.tol).all()
    assert stopped.best_validation_loss_ == losses[best - 1] == losses.min()
    # the estimator holds scikit-learn's early stopping as a callback of its own, among the
    # stopping capabilities that come after every other callback
    kinds = [type(callback) for _, callback in stopped.callbacks_]
    assert kinds[-2:] == [SklearnEarlyStopping, TrainingLossStopping]


def test_the_best_epochs_weights_are_restored(data, stopped):
    """Training the same fit for ``best_epoch_`` epochs ends on the same weights."""
    X, y = data
    split = ValidSplit(0.1, stratified=True, random_state=stopped.seed_)
    params = {**PARAMS, "max_epochs": stopped.best_epoch_}
    shorter = NGEBMClassifier(**params, train_split=split).fit(X, y)
    for a, b in zip(shorter.module_.parameters(), stopped.module_.parameters(), strict=True):
        assert torch.equal(a, b)


def test_both_spellings_are_the_same_fit(data, stopped):
    X, y = data
    callback = EarlyStopping(patience=3, threshold=1e-4, threshold_mode="abs", load_best=True)
    split = ValidSplit(0.1, stratified=True, random_state=stopped.seed_)
    skorch_way = NGEBMClassifier(**PARAMS, callbacks=[callback], train_split=split).fit(X, y)
    assert skorch_way.n_iter_ == stopped.n_iter_
    np.testing.assert_array_equal(skorch_way.predict_proba(X), stopped.predict_proba(X))


def test_the_held_out_split_is_stratified_and_seeded(data, stopped, monkeypatch):
    X, y = data
    seen = []
    original = ValidSplit.__call__

    def spy(self, dataset, y=None, groups=None):
        train, valid = original(self, dataset, y, groups)
        seen.append(np.asarray(valid.indices))
        return train, valid

    monkeypatch.setattr(ValidSplit, "__call__", spy)
    for _ in range(2):
        NGEBMClassifier(**{**PARAMS, "max_epochs": 1}, **STOP).fit(X, y)
    assert np.array_equal(seen[0], seen[1]) and len(seen[0]) == 50
    held_out = np.unique(y[seen[0]], return_counts=True)[1]
    assert held_out.min() >= 4  # each class ~5 of 50 (stratified)
    expected = next(
        StratifiedShuffleSplit(1, test_size=0.1, random_state=stopped.seed_).split(
            X, np.unique(y, return_inverse=True)[1]
        )
    )[1]
    np.testing.assert_array_equal(np.sort(seen[0]), np.sort(expected))


def test_skorch_early_stopping_without_a_split_is_refused_before_training(data):
    X, y = data
    fixes = r"early_stopping=True .* train_split=skorch.dataset.ValidSplit"
    # what skorch itself does: one epoch, then KeyError
    net = NeuralNetClassifier(torch.nn.Linear, module__in_features=64, module__out_features=10)
    net.set_params(callbacks=[EarlyStopping()], train_split=None, max_epochs=2)
    with pytest.raises(KeyError, match="valid_loss"):
        net.fit(X, np.unique(y, return_inverse=True)[1])
    for callbacks in (
        [EarlyStopping()],
        [EarlyStopping],
        [("cp", Checkpoint(dirname="/nonexistent"))],
    ):
        clf = NGEBMClassifier(**PARAMS, callbacks=callbacks)
        with pytest.raises(ValueError, match=fixes):
            clf.fit(X, y)
        assert not clf.__sklearn_is_fitted__()
    ok = NGEBMClassifier(
        **{**PARAMS, "max_epochs": 2}, callbacks=[EarlyStopping(monitor="train_loss")]
    )
    assert ok.fit(X, y).n_iter_ == 2


def test_partial_fit_never_stops_early(data, stopped):
    """As scikit-learn's partial_fit: all max_epochs, no held-out data, no best epoch."""
    X, y = data
    clf = NGEBMClassifier(**{**PARAMS, "max_epochs": 4}, **STOP).partial_fit(X, y)
    assert clf.n_iter_ == 4 and "valid_loss" not in clf.history[-1]
    assert not hasattr(clf, "best_epoch_")
    callbacks = [EarlyStopping()]
    clf = NGEBMClassifier(**{**PARAMS, "max_epochs": 2}, **STOP, callbacks=callbacks).fit(X, y)
    with pytest.raises(ValueError, match="holds out data in fit only"):
        clf.partial_fit(X, y)


def test_bad_settings_are_refused_together(data):
    X, y = data
    clf = NGEBMClassifier(early_stopping=1, validation_fraction=1.0, n_iter_no_change=0, tol=-1)
    with pytest.raises(ValueError) as err:
        clf.fit(X, y)
    for name in ("early_stopping", "validation_fraction", "n_iter_no_change", "tol"):
        assert f"'{name}' parameter" in str(err.value)
    both = NGEBMClassifier(early_stopping=True, train_split=ValidSplit(0.2))
    with pytest.raises(ValueError, match="Use one: train_split=None"):
        both.fit(X, y)
    tiny = NGEBMClassifier(early_stopping=True, validation_fraction=0.01)
    with pytest.raises(ValueError, match="validation_fraction=0.01 of the 500 .* Increase"):
        tiny.fit(X, y)


def test_it_clones_searches_pickles_and_saves(data, stopped, tmp_path):
    X, y = data
    assert clone(stopped).get_params()["n_iter_no_change"] == 3
    grid = GridSearchCV(
        NGEBMClassifier(**{**PARAMS, "max_epochs": 5}, early_stopping=True),
        {"n_iter_no_change": [1, 2]},
        cv=2,
    ).fit(X, y)
    assert grid.best_estimator_.n_iter_ <= 5
    restored = pickle.loads(pickle.dumps(stopped))
    assert restored.best_epoch_ == stopped.best_epoch_
    stopped.save(tmp_path / "stopped.ebm", training_state=False)
    loaded = ebmclassifier.load(tmp_path / "stopped.ebm")
    assert (loaded.early_stopping, loaded.n_iter_, loaded.best_epoch_) == (
        True,
        stopped.n_iter_,
        stopped.best_epoch_,
    )
    np.testing.assert_array_equal(loaded.predict_proba(X), stopped.predict_proba(X))


def test_warm_start_stops_early_and_jem_too(data, stopped):
    X, y = data
    warm = clone(stopped).set_params(warm_start=True, max_epochs=30)
    warm.fit(X, y)
    first = warm.n_iter_
    warm.fit(X, y)  # continues: history numbers the epochs on
    assert warm.n_iter_ > first and warm.best_epoch_ > first - STOP["n_iter_no_change"]
    jem = JEMClassifier(max_epochs=4, sgld_steps=2, buffer_size=64, random_state=0, **STOP)
    assert jem.fit(X, y).n_iter_ <= 4 and jem.best_epoch_ >= 1


def test_the_validation_accuracy_reads_any_labels(data):
    """skorch's valid_acc compared predicted labels ('a') with encoded ones (0) and failed."""
    X, y = data
    split = ValidSplit(0.2, stratified=True, random_state=0)
    clf = NGEBMClassifier(**{**PARAMS, "max_epochs": 2}, train_split=split).fit(X, y)
    encoded = np.unique(y, return_inverse=True)[1]
    valid = np.asarray(split(np.arange(len(y)), encoded)[1].indices)
    assert clf.history[-1, "valid_acc"] == np.mean(clf.predict(X[valid]) == y[valid]) > 0.2


class _Epochs(Callback):
    """Records the epochs that reached the callback's on_epoch_end, and on_train_end's."""

    def initialize(self):
        self.seen_, self.ended_ = [], None
        return self

    def on_epoch_end(self, net, **kwargs):
        self.seen_.append(len(net.history))

    def on_train_end(self, net, **kwargs):
        self.ended_ = len(net.history)


def test_every_callback_sees_the_epoch_that_stops(data, stopped):
    # the stop comes last, as it came when the callback was appended for the call
    X, y = data
    epochs = _Epochs()
    clf = NGEBMClassifier(**PARAMS, **STOP, callbacks=[epochs]).fit(X, y)
    assert epochs.seen_ == list(range(1, stopped.n_iter_ + 1)) and epochs.ended_ == clf.n_iter_
    np.testing.assert_array_equal(clf.predict_proba(X), stopped.predict_proba(X))


def test_the_callback_is_held_once_per_network(data):
    X, y = data
    clf = NGEBMClassifier(**{**PARAMS, "max_epochs": 2}, **STOP).fit(X, y)
    held = dict(clf.callbacks_)["sklearn_early_stopping"]
    clf.set_params(callbacks=[_Epochs()])  # rebuilds callbacks_
    now = dict(clf.callbacks_)["sklearn_early_stopping"]
    assert now is held and not held.holds_out  # acts in a fit only
    clf.fit(X, y)  # a new network: a new callback
    now = dict(clf.callbacks_)["sklearn_early_stopping"]
    assert now is not held and isinstance(now, SklearnEarlyStopping)
