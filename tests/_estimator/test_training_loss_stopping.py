"""``early_stopping="train_loss"``: ``n_iter_no_change`` and ``tol`` stop a fit on its training
loss as ``MLPClassifier(early_stopping=False)``'s, checked against scikit-learn's own rule on
the same losses and against ``MLPClassifier``'s fit on the same data; with
``early_stopping=False`` they stop nothing, as before, and a fit that sets them says so (#50:
they were silently ignored)."""

import inspect
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from skorch.callbacks import Callback

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier._estimator.training_loss_stopping import no_improvement_counts

from ..user_line import assert_at_users_line

X, Y = make_blobs(60, n_features=4, centers=3, random_state=0)
X = X.astype(np.float32)


def _sklearn_stop(losses, n_iter_no_change, tol):
    """The epoch (1-based) at which MLPClassifier stops on these training losses, or None:
    scikit-learn's own bookkeeping (``_update_no_improvement_count``) fed the losses."""
    mlp = MLPClassifier(n_iter_no_change=n_iter_no_change, tol=tol)
    mlp.loss_curve_, mlp.best_loss_, mlp._no_improvement_count = [], np.inf, 0
    # (early_stopping=False, then the validation data, unused: X, y and, since 1.7, weights)
    unused = [None] * (len(inspect.signature(mlp._update_no_improvement_count).parameters) - 1)
    for epoch, loss in enumerate(losses, start=1):
        mlp.loss_curve_.append(loss)
        mlp._update_no_improvement_count(False, *unused)
        if mlp._no_improvement_count > mlp.n_iter_no_change:  # _fit_stochastic's test
            return epoch
    return None


def _our_stop(losses, n_iter_no_change, tol):
    counts = no_improvement_counts(losses, tol)
    return next((i + 1 for i, c in enumerate(counts) if c > n_iter_no_change), None)


def _curves(rng):
    """Loss curves that reach every branch: steady descent, plateaus, steps of exactly ``tol``,
    increases, many tiny decreases (each under ``tol``, together over it)."""
    yield np.linspace(2.0, 0.1, 40)
    yield np.full(30, 0.7)
    yield 1.0 - 1e-4 * np.arange(30)  # each epoch exactly tol below the last
    yield 1.0 - 0.6e-4 * np.arange(30)  # tiny steps: under tol each, over it in two
    yield np.concatenate([np.linspace(1, 0.5, 10), np.full(15, 0.5), np.linspace(0.5, 0.2, 10)])
    for _ in range(300):
        yield np.cumsum(rng.normal(0, rng.choice([1e-5, 1e-4, 1e-3, 1e-1]), 40)) + 1.0


@pytest.mark.parametrize("n_iter_no_change", [1, 2, 5, 10])
@pytest.mark.parametrize("tol", [0.0, 1e-4, 1e-2])
def test_the_rule_is_mlpclassifiers_on_the_same_losses(n_iter_no_change, tol):
    rng = np.random.default_rng(n_iter_no_change)
    for losses in _curves(rng):
        losses = [float(v) for v in losses]
        assert _our_stop(losses, n_iter_no_change, tol) == _sklearn_stop(
            losses, n_iter_no_change, tol
        ), losses


class _Losses(Callback):
    """Replaces each epoch's training loss by the next of ``losses``: a loss curve we control,
    read by the stopping rule as the fit's own."""

    def __init__(self, losses):
        self.losses = losses

    def on_epoch_end(self, net, **kwargs):
        net.history.record("train_loss", float(self.losses[len(net.history) - 1]))


CURVES = list(_curves(np.random.default_rng(0)))


@pytest.mark.parametrize("curve", range(8))
def test_a_fit_stops_at_the_epoch_mlpclassifier_stops_on_its_loss_curve(curve):
    losses = CURVES[curve]
    for n_iter_no_change in (2, 5):
        expected = _sklearn_stop(list(losses), n_iter_no_change, 1e-4) or len(losses)
        clf = NGEBMClassifier(early_stopping="train_loss", n_iter_no_change=n_iter_no_change,
                              max_epochs=len(losses), module__hidden_sizes=(8,), random_state=0,
                              callbacks=[("losses", _Losses(losses))])  # fmt: skip
        clf.fit(X, Y)
        assert clf.n_iter_ == len(clf.history) == expected, (curve, n_iter_no_change)


@pytest.mark.parametrize("n_iter_no_change", [1, 3, 6])
def test_the_same_stopping_epoch_as_mlpclassifier_on_the_same_data(n_iter_no_change):
    # a learning rate too small to move the loss by tol: both stop after the first epoch and
    # n_iter_no_change + 1 more without improvement
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier(learning_rate_init=1e-12, n_iter_no_change=n_iter_no_change,
                            max_iter=50, random_state=0).fit(X, Y)  # fmt: skip
    ours = NGEBMClassifier(early_stopping="train_loss", lr=1e-12,
                           n_iter_no_change=n_iter_no_change, max_epochs=50,
                           random_state=0).fit(X, Y)  # fmt: skip
    assert ours.n_iter_ == mlp.n_iter_ == n_iter_no_change + 2
    assert ours.history[-1, "epoch"] == ours.n_iter_  # a finished fit, n_iter_ its epochs


def test_it_acts_in_fit_and_warm_start_never_in_partial_fit():
    params = dict(early_stopping="train_loss", lr=1e-12, n_iter_no_change=2, max_epochs=20,
                  module__hidden_sizes=(8,), random_state=0)  # fmt: skip
    for cls in (NGEBMClassifier, JEMClassifier):
        extra = {"sgld_steps": 2, "buffer_size": 20} if cls is JEMClassifier else {}
        clf = cls(**params, **extra).fit(X, Y)
        assert clf.n_iter_ == len(clf.history) < 20, cls  # JEM's loss moves with its sampler
    assert NGEBMClassifier(**params).fit(X, Y).n_iter_ == 4
    warm = NGEBMClassifier(**params, warm_start=True).fit(X, Y)
    assert len(warm.fit(X, Y).history) == 8  # the second fit stops too, counting afresh
    partial = NGEBMClassifier(**params)
    partial.partial_fit(X, Y)
    assert len(partial.history) == 20  # partial_fit trains max_epochs, as in scikit-learn
    # it holds out nothing: every sample trains, and no validation loss is recorded
    assert "valid_loss" not in partial.history[-1] or partial.history[-1, "valid_loss"] is None
    assert not dict(partial.callbacks_)["training_loss_stopping"].stopped_


def test_without_early_stopping_every_epoch_trains_and_a_changed_rule_warns(recwarn):
    # the defaults: max_epochs epochs, as every fit before #50, and no warning
    params = dict(lr=1e-12, max_epochs=15, module__hidden_sizes=(8,), random_state=0)
    assert NGEBMClassifier(**params).fit(X, Y).n_iter_ == 15
    assert not [w for w in recwarn if "stops nothing" in str(w.message)]
    for changed in ({"n_iter_no_change": 2}, {"tol": 1e-2}, {"n_iter_no_change": 3, "tol": 0.0}):
        with pytest.warns(UserWarning, match=r"stops nothing with early_stopping=False") as got:
            clf = NGEBMClassifier(**params, **changed).fit(X, Y)
        assert clf.n_iter_ == 15
        message = str(got[0].message)
        given = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        assert message.startswith(f"NGEBMClassifier({given}) stops nothing")
        assert 'early_stopping="train_loss"' in message and "early_stopping=True" in message
        assert_at_users_line(got[:1], __file__)
    # early_stopping=True uses them, on the validation loss: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NGEBMClassifier(**params, n_iter_no_change=2, early_stopping=True).fit(X, Y)


def test_train_loss_is_the_one_other_value_and_it_clones_and_saves(tmp_path):
    from sklearn.base import clone

    from ebmclassifier import load

    with pytest.raises(ValueError, match=r"'early_stopping' parameter .* a bool or \"train_loss\""):
        NGEBMClassifier(early_stopping="valid_loss").fit(X, Y)
    clf = NGEBMClassifier(early_stopping="train_loss", max_epochs=2, module__hidden_sizes=(8,))
    assert clone(clf).get_params()["early_stopping"] == "train_loss"
    clf.fit(X, Y).save(tmp_path / "clf.ebm")
    assert load(tmp_path / "clf.ebm").get_params()["early_stopping"] == "train_loss"
