"""Class-incremental learning: output-layer growth, restricted negatives, the reservoir (#24)."""

from __future__ import annotations

import itertools
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.base import clone
from sklearn.datasets import make_blobs

from ebmclassifier import JEMClassifier, NGEBMClassifier, load
from ebmclassifier._utils.generators import FitGenerators
from ebmclassifier.continual import (
    class_reservoirs,
    grow_output_layer,
    output_layer,
    replay_weights,
    reservoir_update,
)
from ebmclassifier.losses import cross_entropy, negatives_cross_entropy

X, Y = make_blobs(300, n_features=4, centers=6, random_state=0)
X = X.astype(np.float32)


def _task(*labels):
    rows = np.isin(Y, labels)
    return X[rows], Y[rows]


def _clf(**params):
    # no replay unless a test asks for it: the "auto" defaults are tested in test_continual_replay
    defaults = dict(class_incremental=True, max_epochs=2, random_state=0, beta=0.0)
    defaults.update(replay_per_class=0, generated_per_class=0)
    if "module" not in params:
        defaults["module__hidden_sizes"] = (8,)
    return NGEBMClassifier(**{**defaults, **params})


# ---------------------------------------------------------------- growth


@pytest.mark.parametrize("optimizer", [torch.optim.Adam, torch.optim.SGD])
def test_growth_keeps_old_rows_and_other_weights_bitwise(optimizer):
    extra = {"optimizer__momentum": 0.9} if optimizer is torch.optim.SGD else {}
    clf = _clf(optimizer=optimizer, **extra).partial_fit(*_task(2, 4))
    before = {k: v.clone() for k, v in clf.module_.state_dict().items()}
    layer = clf.module_.last_layer
    state_before = {k: v.clone() for k, v in clf.optimizer_.state[layer.weight].items()}
    clf.set_params(max_epochs=0).partial_fit(*_task(0, 3))  # grows, trains nothing
    assert clf.classes_.tolist() == [0, 2, 3, 4]
    old_rows, new_rows = [1, 3], [0, 2]  # classes 2, 4 keep their rows at their new places
    after = clf.module_.state_dict()
    for name, value in before.items():
        if name.startswith("net.3."):  # the output layer
            assert torch.equal(after[name][old_rows], value)
            assert after[name].shape[0] == 4
        else:
            assert torch.equal(after[name], value)
    layer = clf.module_.last_layer
    assert clf.optimizer_.param_groups[0]["params"][-2] is layer.weight
    state = clf.optimizer_.state[layer.weight]
    for key, value in state_before.items():
        if value.shape == before["net.3.weight"].shape:
            assert torch.equal(state[key][old_rows], value)
            assert not state[key][new_rows].any()
        else:
            assert torch.equal(state[key], value)  # Adam's step count
    assert len(clf.optimizer_.state) == len(list(clf.module_.parameters()))
    clf.set_params(max_epochs=1).partial_fit(*_task(0, 3))  # the optimizer steps the grown ones
    assert clf.predict_proba(X).shape == (300, 4)


def test_the_draws_of_a_stream_come_from_the_calls_generators():
    # class growth ("grow") and the reservoir ("reservoir", at the stream's position) draw
    # from the fit's generators by purpose, seeded from the call's seed and epoch
    clf = _clf(replay_per_class=2).partial_fit(*_task(2, 4))
    layer = clf.module_.last_layer
    expected = torch.nn.Linear(layer.in_features, 2)
    expected.load_state_dict(layer.state_dict())
    generators = FitGenerators(clf.seed_, len(clf.history))
    grow_output_layer(expected, np.array([1, 3]), 4, generator=generators("grow", "cpu"))
    seen, stored = clf.reservoir_seen_.numpy(), clf.reservoir_X_.numpy()
    Xn, yn = _task(0, 3)
    rows = np.array([1, 3])[clf.reservoir_y_.numpy()]  # encoded 0, 1 -> rows 1, 3
    grown_seen = np.zeros(4, dtype=np.int64)
    grown_seen[[1, 3]] = seen
    rng = generators.at_position("reservoir", int(seen.sum()))
    entering = np.searchsorted([0, 2, 3, 4], yn)
    kept_X, _, _ = class_reservoirs(stored, rows, grown_seen, Xn, entering, 2, rng)
    clf.set_params(max_epochs=0).partial_fit(Xn, yn)  # grows and stores, trains nothing
    assert torch.equal(clf.module_.last_layer.weight, expected.weight)
    assert torch.equal(clf.module_.last_layer.bias, expected.bias)
    np.testing.assert_array_equal(clf.reservoir_X_.numpy(), kept_X)


def test_grow_output_layer_function_against_hand_copy():
    layer = torch.nn.Linear(3, 2)
    old = layer.weight.detach().clone()
    grow_output_layer(layer, np.array([0, 2]), 4, generator=torch.Generator().manual_seed(0))
    assert layer.out_features == 4 and torch.equal(layer.weight[[0, 2]], old)
    bound = 1 / np.sqrt(3)
    assert (layer.weight[[1, 3]].abs() <= bound).all()


def test_module_without_output_layer_is_a_clear_error():
    class Hidden(torch.nn.Module):
        def __init__(self, n_features, n_classes):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(n_features, n_classes))

        def forward(self, x):
            return self.body(x)

    clf = _clf(module=Hidden, module__n_features=4).partial_fit(*_task(0, 1))
    with pytest.raises(TypeError, match="last_layer"):
        clf.partial_fit(*_task(2, 3))
    assert isinstance(output_layer(torch.nn.Sequential(torch.nn.Linear(2, 3))), torch.nn.Linear)


def test_new_label_without_class_incremental_is_todays_error():
    clf = _clf(class_incremental=False).partial_fit(*_task(0, 1))
    with pytest.raises(ValueError, match="were not seen when the estimator was first fitted"):
        clf.partial_fit(*_task(2, 3))


def test_partial_fit_classes_may_name_a_superset_later_never_fewer():
    clf = _clf().partial_fit(*_task(0, 1), classes=[0, 1, 5])
    clf.partial_fit(*_task(2, 3), classes=[0, 1, 2, 3, 4, 5])
    assert clf.classes_.tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="never fewer"):
        clf.partial_fit(*_task(2, 3), classes=[2, 3])


def test_warm_fit_grows_and_cold_fit_starts_over():
    clf = _clf(warm_start=True, replay_per_class=3).fit(*_task(0, 1))
    clf.fit(*_task(2, 3))
    assert clf.classes_.tolist() == [0, 1, 2, 3]
    cold = _clf(replay_per_class=3).fit(*_task(0, 1))
    cold.fit(*_task(2, 3))
    assert cold.classes_.tolist() == [2, 3] and set(cold.reservoir_y_.tolist()) == {0, 1}


def test_jem_grows_its_chain_start():
    jem = JEMClassifier(
        class_incremental=True,
        max_epochs=1,
        sgld_steps=2,
        buffer_size=20,
        module__hidden_sizes=(8,),
        random_state=0,
    ).partial_fit(*_task(1, 2))
    means = jem.replay_buffer_.start.means.clone()
    jem.partial_fit(*_task(0, 3))
    assert torch.equal(jem.replay_buffer_.start.means[[1, 2]], means)
    assert jem.sample(2, y=[0, 3], n_steps=2).shape == (2, 4)


# ---------------------------------------------------------------- negatives


def _per_sample(logits, y, *weights):
    return F.cross_entropy(logits, y, reduction="none")


def test_all_negatives_is_todays_loss_bitwise():
    logits, y = torch.randn(7, 4), torch.tensor([0, 1, 1, 3, 0, 2, 1])
    assert torch.equal(negatives_cross_entropy(logits, y, "all"), cross_entropy(logits, y))
    today = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0).fit(X, Y)
    explicit = clone(today).set_params(negatives="all", class_incremental=False).fit(X, Y)
    for a, b in zip(today.module_.parameters(), explicit.module_.parameters(), strict=True):
        assert torch.equal(a, b)


def test_batch_negatives_against_hand_computation_and_zero_gradient():
    logits = torch.tensor([[1.0, -2.0, 3.0, 0.5], [0.2, 0.1, -1.0, 2.0], [2.0, 0.0, 1.0, 1.0]])
    logits.requires_grad_(True)
    y = torch.tensor([0, 2, 2])  # classes 1 and 3 are absent
    loss = negatives_cross_entropy(logits, y, "batch")
    kept = logits.detach()[:, [0, 2]]
    hand = np.mean(
        [-(kept[i, [0, 1, 1][i]] - torch.logsumexp(kept[i], 0)).item() for i in range(3)]
    )
    assert loss.item() == pytest.approx(hand, rel=1e-6)
    loss.backward()
    assert torch.equal(logits.grad[:, [1, 3]], torch.zeros(3, 2))
    # a class whose only sample weighs 0 is not in the batch
    w = torch.tensor([0.0, 1.0, 1.0])
    alone = negatives_cross_entropy(logits.detach(), y, "batch", w)
    assert alone.item() == pytest.approx(0.0, abs=1e-7)


def test_estimator_batch_negatives_leave_absent_rows_without_gradient():
    clf = _clf(negatives="batch", max_epochs=1).partial_fit(*_task(0, 1, 2))
    xb, yb = _task(0, 1)
    clf.module_.zero_grad()
    loss, _ = clf.compute_loss(
        torch.tensor(xb), torch.tensor(clf.label_encoder_.transform(yb)), True
    )
    loss.backward()
    assert not clf.module_.last_layer.weight.grad[2].any()
    assert clf.module_.last_layer.weight.grad[:2].any()


def test_k_negatives_are_uniform_subsets_of_the_batch_classes_capped():
    # Seeded logits: unseeded ones once made two subsets' losses too close to tell apart.
    full = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    logits = full[:1]
    y_batch = torch.tensor([0, 1, 2, 3])  # sample 0 (class 0) has others 1, 2, 3; class 4 absent
    hand = {
        s: -(logits[0, 0] - torch.logsumexp(logits[0, [0, *s]], 0)).item()
        for s in itertools.combinations([1, 2, 3], 2)
    }
    tol = dict(rel=1e-5, abs=1e-6)
    assert all(a != pytest.approx(b, **tol) for a, b in itertools.combinations(hand.values(), 2))
    counts = dict.fromkeys(hand, 0)
    torch.manual_seed(0)
    for _ in range(600):
        value = negatives_cross_entropy(full, y_batch, 2, criterion=_per_sample)[0].item()
        match = [s for s, v in hand.items() if v == pytest.approx(value, **tol)]
        assert len(match) == 1
        counts[match[0]] += 1
    assert all(150 <= c <= 250 for c in counts.values()), counts  # 200 each, ~4.5 sd
    capped = negatives_cross_entropy(full, y_batch, 10, criterion=_per_sample)
    assert torch.allclose(
        capped, negatives_cross_entropy(full, y_batch, "batch", criterion=_per_sample)
    )


def test_one_class_chunk_warns_with_the_remedies():
    clf = _clf(negatives="batch").partial_fit(*_task(0, 1))
    with pytest.warns(UserWarning, match=r"one class only, 2.*replay_per_class.*negatives='all'"):
        clf.partial_fit(*_task(2))
    assert np.isfinite(clf.history[-1, "train_loss"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _clf(negatives="batch", replay_per_class=2).partial_fit(*_task(0, 1)).partial_fit(*_task(2))


@pytest.mark.parametrize(
    "params, name",
    [
        ({"negatives": 0}, "negatives"),
        ({"negatives": "some"}, "negatives"),
        ({"replay_per_class": -1}, "replay_per_class"),
        ({"class_incremental": "yes"}, "class_incremental"),
    ],
)
def test_bad_parameters_name_themselves(params, name):
    with pytest.raises(ValueError, match=f"'{name}' parameter of NGEBMClassifier"):
        _clf(**params).fit(X, Y)


# ---------------------------------------------------------------- the reservoir


def test_reservoir_update_keeps_each_item_with_equal_probability():
    hits = np.zeros(50)
    for seed in range(400):
        rng = np.random.default_rng(seed)
        kept = reservoir_update(np.empty(0), 0, np.arange(20.0), 5, rng)
        kept = reservoir_update(kept, 20, np.arange(20.0, 50.0), 5, rng)
        assert len(kept) == 5 and len(set(kept.tolist())) == 5
        hits[kept.astype(int)] += 1
    # each item in 5/50 of the reservoirs: 40 of 400 (sd 6)
    assert hits.min() >= 15 and hits.max() <= 65, hits


class _EnumeratingRng:
    """Stands for numpy's Generator in reservoir_update: ``integers(0, high)`` returns the
    next draws of a fixed list, and records each ``high`` it was asked for."""

    def __init__(self, draws=()):
        self.draws, self.highs = list(draws), []

    def integers(self, low, high):
        high = np.atleast_1d(high)
        self.highs += [(int(low), int(h)) for h in high]
        taken, self.draws = self.draws[: len(high)], self.draws[len(high) :]
        return np.array(taken if taken else [low] * len(high))


@pytest.mark.parametrize("split", [0, 2, 5])  # one call, or two: the stream's position counts
def test_reservoir_update_keeps_each_item_with_probability_capacity_over_n_exactly(split):
    """Every sequence of draws, equally likely, enumerated: each of the 7 items is kept in
    exactly 3/7 of them (Algorithm R). An off-by-one in the draw's range breaks the equality."""
    n, capacity = 7, 3
    items = np.arange(float(n))

    def run(rng):
        kept = reservoir_update(np.empty(0), 0, items[:split], capacity, rng)
        return reservoir_update(kept, split, items[split:], capacity, rng)

    probe = _EnumeratingRng()
    run(probe)
    ranges = [range(low, high) for low, high in probe.highs]  # as the function asks
    hits, total = np.zeros(n, dtype=int), 0
    for draws in itertools.product(*ranges):
        kept = run(_EnumeratingRng(draws))
        assert len(kept) == capacity and len(set(kept.tolist())) == capacity
        hits[kept.astype(int)] += 1
        total += 1
    assert total == 4 * 5 * 6 * 7  # item t (from 0) draws from 0..t once the reservoir is full
    np.testing.assert_array_equal(hits * n, np.full(n, total * capacity))


def test_reservoir_content_per_class():
    clf = _clf(replay_per_class=4).partial_fit(*_task(0, 1)).partial_fit(*_task(2, 3))
    assert clf.reservoir_seen_.tolist() == np.bincount(Y, minlength=6)[:4].tolist()
    for row, label in zip(clf.reservoir_X_.numpy(), clf.reservoir_y_.tolist(), strict=True):
        assert any(np.array_equal(row, x) for x in X[Y == clf.classes_[label]])
    assert np.bincount(clf.reservoir_y_.numpy()).tolist() == [4, 4, 4, 4]


def _stream(clf, tasks, roundtrip=None):
    for i, task in enumerate(tasks):
        clf.partial_fit(*_task(*task))
        if roundtrip is not None and i == 0:
            clf = roundtrip(clf)
    return clf


@pytest.mark.parametrize("how", ["save", "pickle"])
def test_interrupted_stream_equals_uninterrupted(how, tmp_path):
    def roundtrip(clf):
        if how == "pickle":
            return pickle.loads(pickle.dumps(clf))
        clf.save(tmp_path / "mid.ebm")
        return load(tmp_path / "mid.ebm")

    tasks = [(0, 1), (2, 3), (4, 5)]
    params = dict(replay_per_class=5, negatives=1, beta=0.5)
    straight = _stream(_clf(**params), tasks)
    resumed = _stream(_clf(**params), tasks, roundtrip)
    for a, b in zip(straight.module_.parameters(), resumed.module_.parameters(), strict=True):
        assert torch.equal(a, b)
    for name in ("reservoir_X_", "reservoir_y_", "reservoir_seen_"):
        assert torch.equal(getattr(straight, name).cpu(), getattr(resumed, name).cpu())
    assert np.array_equal(straight.predict_proba(X), resumed.predict_proba(X))


def test_clone_is_unfitted_and_keeps_the_parameters():
    clf = _clf(replay_per_class=3, negatives="batch").partial_fit(*_task(0, 1))
    copy = clone(clf)
    assert not hasattr(copy, "reservoir_X_") and not hasattr(copy, "module_")
    assert copy.get_params()["replay_per_class"] == 3 and copy.negatives == "batch"


def test_label_conditioned_network_grows_and_isolates_absent_classes():
    from ebmclassifier.nn import LabelConditionedMLP

    clf = _clf(module=LabelConditionedMLP, module__hidden_sizes=(8,), module__head_size=4)
    clf = clf.set_params(negatives="batch").partial_fit(*_task(0, 1))
    gates = clf.module_.last_layer.weight.detach().clone()
    clf.set_params(max_epochs=0).partial_fit(*_task(2, 3))
    assert torch.equal(clf.module_.last_layer.weight[:2], gates)
    assert clf.predict_proba(X).shape == (300, 4)
    xb, yb = _task(0, 1)
    clf.module_.zero_grad()
    loss, _ = clf.compute_loss(torch.tensor(xb), torch.tensor(yb), True)
    loss.backward()
    assert not clf.module_.last_layer.weight.grad[2:].any()


def test_replay_weights_give_each_replayed_class_the_weight_of_an_average_class():
    replay_y = np.array([0, 0, 0, 0, 1, 2, 2])  # 4, 1 and 2 rows replayed per class
    weights = replay_weights(replay_y, 4, per_class=12.0, class_weights=None)
    np.testing.assert_allclose(np.bincount(replay_y, weights), [12.0, 12.0, 12.0])
    np.testing.assert_allclose(weights[:4], 3.0)  # equal within a class
    doubled = replay_weights(replay_y, 4, 12.0, class_weights=np.where(replay_y == 2, 2.0, 1.0))
    np.testing.assert_allclose(np.bincount(replay_y, doubled), [12.0, 12.0, 24.0])


@pytest.mark.parametrize("class_weight", [None, {0: 3.0, 1: 0.5}])
def test_the_fit_mixes_each_stored_class_in_with_the_weight_of_an_average_new_class(class_weight):
    # a dict class_weight multiplies each replayed class's total too, as it does new samples
    clf = _clf(replay_per_class=3, class_weight=class_weight).partial_fit(*_task(0, 1))
    X2, y2 = _task(2, 3)
    y2 = np.searchsorted([0, 1, 2, 3], y2)
    _, old_rows = clf._accept_new_classes(y2, None)
    mixed_X, mixed_y, weights = clf._add_replay(X2, y2, None, reset=False, old_rows=old_rows)
    replayed = slice(len(y2), None)
    assert len(mixed_y) == len(y2) + 2 * 3  # 3 stored samples of each old class
    per_class = len(y2) / 2  # the chunk's samples per class present
    factor = np.ones(2) if class_weight is None else np.array([3.0, 0.5])  # classes 0 and 1
    np.testing.assert_allclose(
        np.bincount(mixed_y[replayed], weights[replayed]), per_class * factor
    )
    np.testing.assert_array_equal(weights[: len(y2)], 1.0)
