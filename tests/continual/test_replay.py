"""Class-incremental defaults ("auto"), generated replay and the warning (issue #32); the
continual command's tests are in tests/experiments/test_continual_command.py."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from ebmclassifier import JEMClassifier, NGEBMClassifier, load
from ebmclassifier.continual import generate_class_samples
from ebmclassifier.energy import joint_energy

from ..user_line import assert_at_users_line

X, Y = make_blobs(300, n_features=4, centers=6, random_state=0)
X = X.astype(np.float32)
TASKS = [(0, 1), (2, 3), (4, 5)]


def _task(*labels):
    rows = np.isin(Y, labels)
    return X[rows], Y[rows]


def _ngebm(**params):
    defaults = dict(class_incremental=True, max_epochs=2, random_state=0, beta=0.0)
    return NGEBMClassifier(**{**defaults, "module__hidden_sizes": (8,), **params})


def _stream(clf, tasks=TASKS):
    for task in tasks:
        clf.partial_fit(*_task(*task))
    return clf


# ---------------------------------------------------------------- "auto" resolved


@pytest.mark.parametrize("cls", [NGEBMClassifier, JEMClassifier])
def test_auto_resolves_from_class_incremental_as_documented(cls):
    extra = {"sgld_steps": 2, "buffer_size": 20} if cls is JEMClassifier else {}
    for incremental, expected in ((True, ("batch", 20, 100)), (False, ("all", 0, 0))):
        clf = cls(class_incremental=incremental, max_epochs=1, random_state=0, **extra)
        clf.fit(*_task(0, 1))
        resolved = (clf.negatives_, clf.replay_per_class_, clf.generated_per_class_)
        assert resolved == expected
    clf = cls(class_incremental=True, negatives=1, replay_per_class=3, generated_per_class=0,
              max_epochs=1, random_state=0, **extra).fit(*_task(0, 1))  # fmt: skip
    assert (clf.negatives_, clf.replay_per_class_, clf.generated_per_class_) == (1, 3, 0)


def test_auto_without_class_incremental_is_the_old_loss_bitwise():
    auto = NGEBMClassifier(max_epochs=2, random_state=0, module__hidden_sizes=(8,)).fit(X, Y)
    explicit = NGEBMClassifier(
        negatives="all", replay_per_class=0, generated_per_class=0, max_epochs=2,
        random_state=0, module__hidden_sizes=(8,),
    ).fit(X, Y)  # fmt: skip
    assert np.array_equal(auto.predict_proba(X), explicit.predict_proba(X))
    assert not hasattr(auto, "reservoir_X_") and not hasattr(auto, "generated_X_")


def test_default_stream_stores_and_generates_and_set_params_reresolves():
    clf = _stream(_ngebm(beta=0.5))
    assert clf.reservoir_X_.shape == (6 * 20, 4)  # 50 samples per class: 20 kept of each
    assert clf.generated_X_.shape == (4 * 100, 4)  # the classes before the last task
    clf.set_params(generated_per_class=0).partial_fit(*_task(4, 5))
    assert clf.generated_per_class_ == 0 and not hasattr(clf, "generated_X_")


@pytest.mark.parametrize("bad", ["all ", -1, 1.5, None])
def test_auto_parameters_refuse_other_values(bad):
    with pytest.raises(ValueError, match="'generated_per_class' parameter.*'auto' or an int"):
        _ngebm(generated_per_class=bad).fit(X, Y)
    with pytest.raises(ValueError, match="'negatives' parameter.*'auto', 'all', 'batch'"):
        _ngebm(negatives=bad).fit(X, Y)


# ---------------------------------------------------------------- the warning


def test_energy_term_with_batch_negatives_and_no_replay_warns_with_the_alternatives():
    hurts = dict(beta=0.5, negatives="batch", replay_per_class=0, generated_per_class=0)
    pattern = r"learns new classes poorly.*generated_per_class > 0.*replay_per_class > 0.*beta=0"
    clf = _ngebm(**hurts).partial_fit(*_task(0, 1))
    with pytest.warns(UserWarning, match=pattern) as caught:  # at the call that adds classes
        clf.partial_fit(*_task(2, 3))
    assert_at_users_line(caught[:1], __file__)
    jem = JEMClassifier(class_incremental=True, negatives="batch", replay_per_class=0,
                        generated_per_class=0, max_epochs=1, sgld_steps=2, buffer_size=20,
                        random_state=0).partial_fit(*_task(0, 1))  # fmt: skip
    with pytest.warns(UserWarning, match=pattern):
        jem.partial_fit(*_task(2, 3))
    quiet = [
        {**hurts, "beta": 0.0},
        {**hurts, "generated_per_class": 5},
        {**hurts, "replay_per_class": 5},
        {**hurts, "negatives": "all"},
        {"beta": 0.5},  # the defaults
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for params in quiet:
            _ngebm(**params).partial_fit(*_task(0, 1)).partial_fit(*_task(2, 3))
        NGEBMClassifier(
            beta=0.5, negatives="batch", max_epochs=1, module__hidden_sizes=(8,), random_state=0
        ).fit(X, Y)  # fmt: skip  (not class-incremental)


# ---------------------------------------------------------------- generated replay


def _generated(**params):
    defaults = dict(replay_per_class=0, generated_per_class=7, generated_steps=5)
    return _ngebm(**{**defaults, **params})


def test_generated_replay_is_deterministic_under_random_state():
    a, b = _stream(_generated()), _stream(_generated())
    assert torch.equal(a.generated_X_, b.generated_X_)
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    c = _stream(_generated(random_state=1))
    assert not torch.equal(a.generated_X_, c.generated_X_)


@pytest.mark.parametrize("shape", [(7, 3), (300_001, 4), (50, 1, 40)])  # (300_001, 4): 2 blocks
def test_chain_start_statistics_are_numpys_bitwise_without_a_copy(shape):
    from ebmclassifier._utils.statistics import column_mean_std

    X = np.random.default_rng(0).normal(3.0, 2.0, size=shape).astype(np.float32)
    mean, std = column_mean_std(X)
    assert std.dtype == np.float32
    np.testing.assert_array_equal(std, X.std(axis=0))
    clf = _ngebm(max_epochs=0).fit(X[:7].reshape(7, -1), np.arange(7) % 2)
    np.testing.assert_array_equal(clf.input_std_.numpy(), X[:7].reshape(7, -1).std(axis=0))


def test_generated_replay_draws_the_old_classes_inside_the_input_range():
    clf = _stream(_generated(), TASKS[:2])
    labels = clf.classes_[clf.generated_y_.numpy()]
    assert sorted(labels.tolist()) == [0] * 7 + [1] * 7  # the classes before the growth
    low, high = clf.input_min_.cpu(), clf.input_max_.cpu()
    assert ((clf.generated_X_ >= low) & (clf.generated_X_ <= high)).all()
    kept = clf.generated_X_.clone()
    clf.partial_fit(*_task(2, 3))  # no new class: the same samples are mixed in again
    assert torch.equal(clf.generated_X_, kept)
    assert len(clf.history) == 6


def test_generated_samples_lower_their_class_energy_from_the_chain_start():
    moved = _stream(_generated(generated_steps=30, beta=0.5), TASKS[:2])
    start = _stream(_generated(generated_steps=0, beta=0.5), TASKS[:2])
    module, labels = moved.module_, moved.generated_y_
    with torch.no_grad():  # the same network before the second task: the same starts

        def class_energy(samples):
            return -module(samples).gather(1, labels[:, None]).mean()

        assert class_energy(moved.generated_X_) < class_energy(start.generated_X_)


def test_generated_labels_follow_classes_inserted_between_old_ones():
    clf = _stream(_generated(), [(2, 4), (0, 3), (1, 5)])
    labels = clf.classes_[clf.generated_y_.numpy()]
    assert sorted(set(labels.tolist())) == [0, 2, 3, 4]


def test_generated_replay_stores_no_training_sample(tmp_path):
    """Neither in memory nor in the saved file; with stored replay the file does hold some."""
    clf = _stream(_generated(), TASKS[:2])
    distances = torch.cdist(clf.generated_X_, torch.as_tensor(X))
    assert distances.min() > 1e-4
    assert not hasattr(clf, "reservoir_X_")
    clf.save(tmp_path / "generated.ebm")
    data = (tmp_path / "generated.ebm").read_bytes()
    assert not any(row.tobytes() in data for row in X)
    stored = _stream(_ngebm(replay_per_class=2, generated_per_class=0), TASKS[:2])
    stored.save(tmp_path / "stored.ebm")
    data = (tmp_path / "stored.ebm").read_bytes()
    assert sum(row.tobytes() in data for row in X) == 2 * 4  # the test can fail


@pytest.mark.parametrize("how", ["save", "pickle"])
def test_generated_replay_resumes_mid_stream_bitwise(tmp_path, how):
    first, second, third = (_task(*t) for t in TASKS)
    whole = _generated().partial_fit(*first).partial_fit(*second)
    whole.partial_fit(*second).partial_fit(*third)
    half = _generated().partial_fit(*first).partial_fit(*second)
    if how == "save":
        half.save(tmp_path / "half.ebm")
        resumed = load(tmp_path / "half.ebm")
    else:
        resumed = pickle.loads(pickle.dumps(half))
    assert torch.equal(resumed.generated_X_.cpu(), half.generated_X_.cpu())
    resumed.partial_fit(*second).partial_fit(*third)  # the kept samples, then a new draw
    assert torch.equal(resumed.generated_X_.cpu(), whole.generated_X_.cpu())
    assert np.array_equal(resumed.predict_proba(X), whole.predict_proba(X))


def _margins(module, samples, labels):
    """``f(x)[y] - max_{y' != y} f(x)[y']`` per sample: how much x is of its own class."""
    with torch.no_grad():
        logits = module(samples)
    own = logits.gather(1, labels[:, None]).squeeze(1)
    return own - logits.scatter(1, labels[:, None], -torch.inf).max(dim=1).values


def test_jem_generated_replay_draws_its_classes_from_the_joint_energy():
    """JEM's samples move from the chain starts towards their own class (E(x, y), not E(x))."""

    def jem(steps):
        return JEMClassifier(
            class_incremental=True,
            replay_per_class=0,
            generated_per_class=20,
            generated_steps=steps,
            max_epochs=3,
            sgld_steps=2,
            buffer_size=20,
            random_state=0,
            module__hidden_sizes=(16,),
        )

    moved, start = _stream(jem(40), TASKS[:2]), _stream(jem(0), TASKS[:2])
    first = jem(0).partial_fit(*_task(*TASKS[0]))  # the network that drew the samples
    labels = moved.generated_y_
    assert torch.equal(labels, start.generated_y_) and len(labels) == 40
    gained = _margins(first.module_, moved.generated_X_, labels).mean()
    assert gained > _margins(first.module_, start.generated_X_, labels).mean() + 1.0


def test_generate_class_samples_stay_in_the_box_and_lower_the_joint_energy():
    """With the sampler's noise on, every sample stays in [low, high] (the clamp comes after
    the noise) and the chains lower E(x, y) = -f(x)[y] from their starts."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        net[2].weight *= 10  # logits steep enough for 30 clipped steps to show
    labels = torch.arange(3).repeat(30)
    box = dict(mean=torch.zeros(4), std=2 * torch.ones(4), low=-torch.ones(4), high=torch.ones(4))
    drawn = {}
    for steps in (0, 30):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            drawn[steps] = generate_class_samples(net, labels, n_steps=steps, **box)
    for samples in drawn.values():
        assert samples.min() >= -1 and samples.max() <= 1
    assert (drawn[30].abs() == 1).any()  # chains press against the box: the clamp is tested
    with torch.no_grad():
        start, end = (joint_energy(net(drawn[s]), labels).mean() for s in (0, 30))
    assert end < start - 0.5


def test_new_labels_without_class_incremental_name_the_option():
    clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,)).partial_fit(*_task(0, 1))
    with pytest.raises(ValueError, match=r"NGEBMClassifier\(class_incremental=True\)"):
        clf.partial_fit(*_task(2, 3))


def test_random_state_none_after_a_seeded_fit_leaves_no_stale_seed():
    """The one seed rule (TrainingEngine._fit_seed): class growth, the reservoir and generated
    replay are unseeded once random_state is None, as the epochs are; two copies continued
    alike then draw differently. With the stale seed they drew the same samples."""
    seeded = _ngebm(replay_per_class=3, generated_per_class=5).partial_fit(*_task(0, 1))
    seeded.set_params(random_state=None)
    a, b = (pickle.loads(pickle.dumps(seeded)).partial_fit(*_task(2, 3)) for _ in range(2))
    assert not torch.equal(a.generated_X_, b.generated_X_)
    assert not torch.equal(a.module_.last_layer.weight[2:], b.module_.last_layer.weight[2:])
    refit = _ngebm(random_state=0).fit(*_task(0, 1))
    assert hasattr(refit, "seed_")
    refit.set_params(random_state=None).fit(*_task(0, 1))
    assert not hasattr(refit, "seed_")  # a refit unseeded keeps no seed of the seeded one


def test_a_state_that_kept_the_reservoir_before_the_call_restores_it(small_blobs):
    # a state of an earlier development version kept the reservoir as the call found it under
    # "reservoir_before"; loaded for partial_fit, the reservoir goes back to it
    X, y = small_blobs
    names = ("reservoir_X_", "reservoir_y_", "reservoir_seen_")
    stream = dict(class_incremental=True, replay_per_class=3, generated_per_class=0)
    clf = NGEBMClassifier(**stream, max_epochs=1, module__hidden_sizes=(8,), random_state=0)
    clf.partial_fit(X[y < 2], y[y < 2])
    before = {name: getattr(clf, name).clone() for name in names}
    state = clf.training_state_.state_dict(checkpoint=False)
    state["estimator"]["reservoir_before"] = before
    clf.partial_fit(X[y == 2], y[y == 2])  # the reservoir moves on
    assert not torch.equal(clf.reservoir_seen_, before["reservoir_seen_"])
    clf.training_state_.load_state_dict(state)
    for name in names:
        assert torch.equal(getattr(clf, name), before[name]), name
