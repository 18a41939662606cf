"""JEMClassifier: its loss, its divergence policy, sampling, and the estimator contract.

The scikit-learn common checks run for every estimator in test_sklearn_compat.py.
"""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import ebmclassifier.jem as jem_module
from ebmclassifier import DivergenceError, JEMClassifier
from ebmclassifier._divergence import Divergence, Rollback, diagnose_step
from ebmclassifier.sampling import GaussianStart, sgld

from .estimators import params

# Small and quick: tiny buffer, few SGLD steps, few epochs.
FAST = params(
    "jem",
    max_epochs=4,
    lr=1e-2,
    batch_size=32,
    module__hidden_sizes=(32,),
    sgld_steps=5,
    buffer_size=100,
)


@pytest.fixture(scope="module")
def fitted(small_blobs):
    X, y = small_blobs
    return JEMClassifier(**{**FAST, "max_epochs": 8}).fit(X, y)


def _divergences(clf):
    return [event for row in clf.history for event in row.get("divergences", [])]


# ---------------------------------------------------------------- the loss


def test_loss_is_cross_entropy_plus_the_contrastive_term(fitted, small_blobs, monkeypatch):
    X, y = small_blobs
    X, y = torch.as_tensor(X[:16]), torch.as_tensor(y[:16])
    clf = clone(fitted).set_params(sgld_noise=0.0, px_weight=0.7, sgld_steps=3)
    clf.__dict__.update({k: v for k, v in fitted.__dict__.items() if k.endswith("_")})
    x0 = torch.rand(16, 4, generator=torch.Generator().manual_seed(0)) * 4 - 2
    indices = torch.arange(16)
    monkeypatch.setattr(clf.replay_buffer_, "draw", lambda n, freq, g: (x0.clone(), indices))
    loss, logits = clf.compute_loss(X, y, training=True)
    # by hand: noiseless SGLD from x0, then CE + px_weight * (mean E(data) - mean E(samples))
    module = clf.module_

    def e(x):
        return -torch.logsumexp(module(x), dim=1)

    samples = sgld(e, x0, n_steps=3, step_size=clf.sgld_step_size_, noise=0.0)
    expected = torch.nn.functional.cross_entropy(module(X), y) + 0.7 * (
        e(X).mean() - e(samples).mean()
    )
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logits, module(X))
    # the evolved chains went back into the buffer
    torch.testing.assert_close(clf.replay_buffer_.samples[indices], samples)


def test_px_weight_zero_is_plain_cross_entropy_without_sampling(small_blobs, monkeypatch):
    X, y = small_blobs

    def fail(*args, **kwargs):
        raise AssertionError("no sampling when px_weight=0")

    monkeypatch.setattr(jem_module, "run_sampler", fail)  # every sampler goes through it
    clf = JEMClassifier(**{**FAST, "px_weight": 0.0}).fit(X, y)
    assert clf.score(X, y) > 0.9


def test_validation_loss_is_the_cross_entropy(fitted, small_blobs):
    X, y = small_blobs
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    loss, logits = fitted.compute_loss(X, y, training=False)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, y))


# ---------------------------------------------------------------- sampling


def test_fitted_model_predicts_and_its_samples_have_low_energy(fitted, small_blobs):
    X, y = small_blobs
    assert fitted.score(X, y) > 0.9
    rng = np.random.default_rng(0)
    noise = rng.uniform(X.min(0), X.max(0), size=(200, X.shape[1])).astype(np.float32)
    samples = fitted.sample(200)
    assert samples.shape == (200, 4) and np.isfinite(samples).all()
    assert fitted.energy(samples).mean() < fitted.energy(noise).mean()


def test_sampler_lowers_the_energy_of_its_samples_on_the_trained_model(fitted, small_blobs):
    X, _ = small_blobs
    g = torch.Generator().manual_seed(1)
    x0 = torch.rand(256, 4, generator=g) * 8 - 4

    def e(x):
        return -torch.logsumexp(fitted.module_(x), dim=1)

    x = sgld(e, x0, n_steps=20, step_size=fitted.sgld_step_size_, noise=0.01, generator=g)
    with torch.no_grad():
        assert e(x).mean() < e(x0).mean()
        assert (e(x) < e(x0)).float().mean() > 0.9


def test_class_conditional_samples_are_classified_as_asked(fitted):
    wanted = np.repeat(fitted.classes_, 30)
    samples = fitted.sample(len(wanted), y=wanted)
    assert (fitted.predict(samples) == wanted).mean() > 0.8
    with pytest.raises(ValueError, match=r"labels \[7\] that are not in classes_"):
        fitted.sample(2, y=[0, 7])
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        fitted.sample(0)


def test_one_label_samples_every_chain_of_that_class(fitted):
    # the issue: sample(4, y=3) failed ("y must have shape (4,)")
    label = fitted.classes_[1]
    with torch.random.fork_rng():
        one = fitted.sample(4, y=label, n_steps=3)
    with torch.random.fork_rng():
        each = fitted.sample(4, y=[label] * 4, n_steps=3)
    assert one.shape == (4, 4)
    np.testing.assert_array_equal(one, each)  # the same chains as the label written out
    with pytest.raises(ValueError, match=r"one label or an array of shape \(4,\)"):
        fitted.sample(4, y=[label, label])
    with pytest.raises(ValueError, match=r"labels \[7\] that are not in classes_"):
        fitted.sample(4, y=7)


def test_class_conditional_chains_start_at_the_class_gaussians_not_in_the_buffer(
    fitted, monkeypatch
):
    def draw(*args, **kwargs):
        raise AssertionError("chains drawn from the buffer, then thrown away")

    monkeypatch.setattr(fitted.replay_buffer_, "draw", draw)
    assert fitted.sample(4, y=fitted.classes_[[0, 1, 2, 0]], n_steps=1).shape == (4, 4)


@pytest.mark.parametrize("covariance", ["diag", "lowrank"])
def test_informative_start_and_proximal_sampler_stay_in_range(small_blobs, covariance):
    X, y = small_blobs
    clf = JEMClassifier(
        sampler="proximal",
        buffer_init="informative",
        informative_covariance=covariance,
        informative_rank=2,
        sgld_noise=0.0,
        **FAST,
    ).fit(X, y)
    assert isinstance(clf.replay_buffer_.start, GaussianStart)
    buffer = clf.replay_buffer_.samples
    assert (buffer >= clf.input_min_).all() and (buffer <= clf.input_max_).all()
    assert clf.score(X, y) > 0.9


# ---------------------------------------------------------------- divergence policy


@pytest.mark.parametrize(
    "provocation",
    [
        {"sgld_step_size": 1e4},  # runaway chains
        {"optimizer": torch.optim.SGD, "lr": 100.0},  # runaway weights
    ],
    ids=["huge_sgld_step", "huge_lr"],
)
def test_recover_ends_finite_with_usable_predictions(small_blobs, provocation):
    X, y = small_blobs
    clf = JEMClassifier(**{**FAST, "max_epochs": 6, **provocation})
    with pytest.warns(RuntimeWarning, match="recovered from"):
        clf.fit(X, y)
    assert clf.n_divergences_ > 0
    events = _divergences(clf)
    assert len(events) == clf.n_divergences_
    assert {"epoch", "batch", "reason", "sgld_step_size", "lr"} <= set(events[0])
    assert clf.sgld_step_size_ < clf.sgld_step_size
    assert all(torch.isfinite(p).all() for p in clf.module_.parameters())
    assert torch.isfinite(clf.replay_buffer_.samples).all()
    proba = clf.predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    assert clf.score(X, y) > 0.5  # three classes: chance is a third


@pytest.mark.parametrize(
    "provocation",
    [{"sgld_step_size": 1e4}, {"optimizer": torch.optim.SGD, "lr": 100.0}],
    ids=["huge_sgld_step", "huge_lr"],
)
def test_raise_policy_raises_a_clear_error(small_blobs, provocation):
    X, y = small_blobs
    clf = JEMClassifier(**{**FAST, **provocation, "on_divergence": "raise"})
    with pytest.raises(DivergenceError, match=r"diverged in epoch 1, batch \d+: .* on_divergence="):
        clf.fit(X, y)


@pytest.mark.parametrize(
    "settings, suggested",
    [
        ({"buffer_init": "uniform"}, "try sampler='proximal' or buffer_init='informative', or"),
        ({}, r"\(now 100.0\), try sampler='proximal', or pass"),  # informative: the default
        ({"sampler": "proximal"}, r"\(now 100.0\), or pass"),
    ],
)
def test_divergence_messages_suggest_only_settings_not_in_use(small_blobs, settings, suggested):
    # the continual command's jem_batch (proximal already) was told to use sampler='proximal'
    X, y = small_blobs
    provocation = {"optimizer": torch.optim.SGD, "lr": 100.0, "on_divergence": "raise"}
    clf = JEMClassifier(**{**FAST, **provocation, **settings})
    with pytest.raises(DivergenceError, match=suggested):
        clf.fit(X, y)


def test_healthy_fit_records_no_divergence(fitted):
    assert fitted.n_divergences_ == 0 and _divergences(fitted) == []
    assert fitted.sgld_step_size_ == fitted.sgld_step_size


def _rollback(clf) -> Rollback:
    """The estimator's roll-back callback, which skorch notifies after the estimator."""
    (rollback,) = [cb for _, cb in clf.callbacks_ if isinstance(cb, Rollback)]
    return rollback


def _notify(clf, hook: str, **kwargs) -> None:
    """``hook`` of the estimator, then of its roll-back, as skorch's notify calls them."""
    getattr(clf, hook)(clf, **kwargs)
    getattr(_rollback(clf), hook)(clf, **kwargs)


def test_roll_back_restores_the_last_snapshot(small_blobs):
    X, y = small_blobs
    clf = JEMClassifier(**{**FAST, "max_epochs": 1}).fit(X, y)
    rollback = _rollback(clf)
    rollback.policy_.take_snapshot(
        module=clf.module_, optimizer=clf.optimizer_, buffer=clf.replay_buffer_
    )
    weights = [p.detach().clone() for p in clf.module_.parameters()]
    with torch.no_grad():
        for p in clf.module_.parameters():
            p.fill_(float("nan"))
    clf.history.new_epoch()
    clf.history.new_batch()
    rollback._roll_back_or_raise(clf, Divergence("provoked", "model"))
    for p, w in zip(clf.module_.parameters(), weights, strict=True):
        assert torch.equal(p, w)
    assert clf.history[-1, "divergences"][0]["reason"] == "provoked"
    assert clf.sgld_step_size_ == clf.sgld_step_size / 2


# ---------------------------------------------------------------- estimator contract


def test_random_state_makes_fits_identical(small_blobs):
    X, y = small_blobs
    fast = {**FAST, "max_epochs": 2}
    a = JEMClassifier(**fast).fit(X, y)
    b = JEMClassifier(**fast).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert torch.equal(a.replay_buffer_.samples, b.replay_buffer_.samples)
    c = JEMClassifier(**{**fast, "random_state": 1}).fit(X, y)
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))


def test_pickle_round_trip_keeps_the_buffer(fitted, small_blobs):
    X, _ = small_blobs
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    assert torch.equal(restored.replay_buffer_.samples, fitted.replay_buffer_.samples)
    assert restored.sample(3).shape == (3, 4)


def test_partial_fit_keeps_the_buffer_and_fit_resets_it(small_blobs):
    X, y = small_blobs
    clf = JEMClassifier(**{**FAST, "max_epochs": 1}).fit(X, y)
    buffer = clf.replay_buffer_
    clf.partial_fit(X, y)
    assert clf.replay_buffer_ is buffer and len(clf.history) == 2
    clf.fit(X, y)
    assert clf.replay_buffer_ is not buffer and len(clf.history) == 1


def test_bad_parameters_are_reported_together(small_blobs):
    X, y = small_blobs
    clf = JEMClassifier(sgld_steps=-1, reinit_freq=1.5, sampler="hmc", on_divergence="ignore")
    with pytest.raises(ValueError) as info:
        clf.fit(X, y)
    message = str(info.value)
    for name in ("'sgld_steps'", "'reinit_freq'", "'sampler'", "'on_divergence'"):
        assert name in message
    assert "Got 1.5 instead." in message


def test_grid_search(small_blobs):
    X, y = small_blobs
    grid = {"sampler": ["sgld", "proximal"]}
    search = GridSearchCV(JEMClassifier(**{**FAST, "max_epochs": 3}), grid, cv=2).fit(X, y)
    assert search.best_params_["sampler"] in ("sgld", "proximal")
    assert search.best_estimator_.sampler == search.best_params_["sampler"]
    assert search.score(X, y) > 0.9


@pytest.mark.parametrize(
    "case, culprit",
    [
        ({}, None),
        ({"e_data": torch.tensor([0.0, float("nan")])}, "model"),
        ({"e_data": torch.tensor([0.0, -2e4])}, "model"),
        ({"samples": torch.full((2, 2), 50.0)}, "sampler"),
        ({"samples": torch.tensor([[0.5, float("inf")], [0.5, 0.5]])}, "sampler"),
        ({"e_samples": torch.tensor([3e4, 0.0])}, "sampler"),
        ({"loss": torch.tensor(float("nan"))}, "model"),
    ],
    ids=["healthy", "nan_data", "big_data", "far_sample", "inf_sample", "big_sample", "nan_loss"],
)
def test_diagnose_step_blames_model_or_sampler(case, culprit):
    args = {
        "loss": torch.tensor(1.0),
        "e_data": torch.zeros(2),
        "e_samples": torch.zeros(2),
        "samples": torch.full((2, 2), 0.5),
        **case,
    }
    found = diagnose_step(low=torch.zeros(2), high=torch.ones(2), max_energy=1e4, **args)
    assert (found is None) if culprit is None else (found.culprit == culprit)


def test_diagnose_step_reads_the_device_once(monkeypatch):
    reads = []
    for name in ("__bool__", "__float__", "item", "tolist"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            reads.append(1)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    zeros, box = torch.zeros(3), (torch.zeros(2), torch.ones(2))
    assert diagnose_step(torch.tensor(1.0), zeros, zeros, torch.zeros(3, 2), *box, 1e3) is None
    assert len(reads) == 1  # a wait for the device each: a JEM step had 8 of them


# ---------------------------------------------------------------- skorch hooks and the policy

SMALL = params("jem", sgld_steps=5, buffer_size=50)


@pytest.fixture()
def blobs40():
    from sklearn.datasets import make_blobs

    X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
    return X, y, torch.tensor(X, dtype=torch.float32), torch.tensor(y)


def test_initialize_module_starts_a_uniform_buffer_in_the_input_range(blobs40):
    X, y, _, _ = blobs40
    clf = JEMClassifier(buffer_init="uniform", **SMALL).fit(X, y)
    assert clf.initialize_module() is clf
    chains = clf.replay_buffer_.samples
    assert tuple(chains.shape) == (50, 4)
    assert clf.sgld_step_size_ == 1.0 and clf.n_divergences_ == 0
    assert ((chains >= clf.input_min_) & (chains <= clf.input_max_)).all()


def test_on_train_begin_replaces_the_placeholder_by_the_informative_start(blobs40):
    X, y, Xt, yt = blobs40
    clf = JEMClassifier(**SMALL).fit(X, y)
    clf.initialize_module()  # a fresh network and a one-chain placeholder
    assert tuple(clf.replay_buffer_.samples.shape) == (1, 4)
    clf.on_train_begin(clf, X=Xt, y=yt)
    assert isinstance(clf.replay_buffer_.start, GaussianStart)
    assert tuple(clf.replay_buffer_.samples.shape) == (50, 4)


def test_train_step_steps_and_the_raise_policy_keeps_the_weights(blobs40):
    X, y, Xt, yt = blobs40
    clf = JEMClassifier(**SMALL).fit(X, y)
    _notify(clf, "on_train_begin", X=Xt, y=yt)
    before = [p.detach().clone() for p in clf.module_.parameters()]
    step = clf.train_step((Xt, yt))
    assert sorted(step) == ["loss", "y_pred"]
    assert any(not torch.equal(a, b) for a, b in zip(before, clf.module_.parameters(), strict=True))
    clf.set_params(on_divergence="raise")
    good = [p.detach().clone() for p in clf.module_.parameters()]
    with pytest.raises(DivergenceError, match="non-finite energy of the data. Lower"):
        clf.train_step((Xt * float("nan"), yt))  # a batch that breaks the energies
    for p, g in zip(clf.module_.parameters(), good, strict=True):
        assert torch.equal(p, g)  # the diverged step computed no gradient


def test_on_epoch_end_snapshots_a_healthy_state_that_on_train_end_restores(blobs40):
    X, y, Xt, yt = blobs40
    clf = JEMClassifier(**SMALL).fit(X, y)
    _notify(clf, "on_train_begin", X=Xt, y=yt)  # as fit does: the first snapshot
    bias = clf.module_.net[-1].bias
    with torch.no_grad():
        bias.fill_(1.0)  # an epoch of training changed the weights
    _notify(clf, "on_epoch_end")  # healthy: the new roll-back target
    with torch.no_grad():
        bias.fill_(float("nan"))  # the next epoch blew them up
    with pytest.warns(RuntimeWarning, match=r"recovered from 1 divergence\(s\)"):
        _notify(clf, "on_train_end", X=Xt, y=yt)
    assert clf.module_.net[-1].bias.tolist() == [1.0, 1.0, 1.0]
    assert clf.n_divergences_ == 1
    assert clf.history[-1, "divergences"][0]["reason"] == "non-finite weights after the last step"
    assert clf.sgld_step_size_ == 0.5


def test_on_epoch_end_refuses_to_snapshot_an_unhealthy_state(blobs40):
    X, y, Xt, yt = blobs40
    clf = JEMClassifier(**SMALL).fit(X, y)
    _notify(clf, "on_train_begin", X=Xt, y=yt)
    first = [p.detach().clone() for p in clf.module_.parameters()]
    with torch.no_grad():
        clf.module_.net[-1].bias.fill_(1e6)  # finite, but energies far beyond max_energy
    _notify(clf, "on_epoch_end")
    with torch.no_grad():
        clf.module_.net[-1].bias.fill_(float("nan"))
    with pytest.warns(RuntimeWarning):
        _notify(clf, "on_train_end", X=Xt, y=yt)
    for p, f in zip(clf.module_.parameters(), first, strict=True):
        assert torch.equal(p, f)


def test_handle_divergence_notes_instead_of_raising(fitted):
    assert fitted.handle_divergence(torch.tensor(float("nan"))) is None
    assert _rollback(fitted).policy_.step_done() == Divergence("non-finite loss", "model")
    assert _rollback(fitted).policy_.step_done() is None  # handed over once


def _policy_state():
    module = torch.nn.Linear(2, 3)
    optimizer = torch.optim.SGD(module.parameters(), lr=1.0)
    start = GaussianStart(
        torch.zeros(1, 2), torch.zeros(1, 2, 0), torch.ones(1, 2), torch.zeros(1), (2,)
    )
    from ebmclassifier.sampling import ReplayBuffer

    return {"module": module, "optimizer": optimizer, "buffer": ReplayBuffer(start, 4)}


def test_rollback_policy_falls_back_to_an_older_snapshot_and_halves_the_lr():
    from ebmclassifier._divergence import RollbackPolicy

    objects = _policy_state()
    module, optimizer = objects["module"], objects["optimizer"]
    policy = RollbackPolicy(kept=2, failures_before_older=2)
    values = []
    for value in (1.0, 2.0, 3.0):  # three snapshots, the oldest dropped
        with torch.no_grad():
            module.bias.fill_(value)
        policy.take_snapshot(**objects)
        values.append(value)
    policy.step_done()  # a good step since the snapshot
    model = Divergence("weights", "model")
    policy.recover(model, **objects)
    assert module.bias.tolist() == [3.0] * 3 and optimizer.param_groups[0]["lr"] == 0.5
    policy.recover(model, **objects)  # second failure in a row: the older snapshot
    assert module.bias.tolist() == [2.0] * 3 and optimizer.param_groups[0]["lr"] == 1.0
    sampler = Divergence("chains", "sampler")
    policy.recover(sampler, **objects)  # no step since: the sampler alone, lr as it was
    assert module.bias.tolist() == [2.0] * 3 and optimizer.param_groups[0]["lr"] == 1.0
    assert policy.recoveries == 3
    policy.end_fit()
    assert policy.probe is None and policy.step_done() is None


class _NanOnce(JEMClassifier):
    """JEM whose third training loss is not finite."""

    def compute_loss(self, X, y, training, sample_weight=None):
        loss, logits = super().compute_loss(X, y, training, sample_weight)
        self.calls_ = getattr(self, "calls_", 0) + training
        return (loss * float("nan") if training and self.calls_ == 3 else loss), logits


def test_the_roll_back_is_the_estimators_own_with_callbacks_disabled(small_blobs):
    # callbacks="disable" turns off skorch's and the user's callbacks, not on_divergence
    X, y = small_blobs
    clf = _NanOnce(**{**FAST, "max_epochs": 1}, callbacks="disable")
    with pytest.warns(RuntimeWarning, match=r"recovered from 1 divergence"):
        clf.fit(X, y)
    assert clf.n_divergences_ == 1 and isinstance(_rollback(clf), Rollback)
    names = [name for name, _ in clf.callbacks_]
    assert names == [
        "resume",
        "divergence_rollback",
        "sklearn_early_stopping",
        "training_loss_stopping",
    ]
