"""ConceptComposition: concept energies from the experts' public outputs, queries, sampling."""

import pickle

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator

from ebmclassifier import (
    ConceptComposition,
    JEMClassifier,
    LatentStructureClassifier,
    NGEBMClassifier,
)
from ebmclassifier._utils.parameters import InvalidParameterError
from ebmclassifier.compose import Not, conjunction
from ebmclassifier.compose import concepts as concepts_module
from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.sampling import GaussianStart

TINY = dict(max_epochs=3, lr=1e-2, module__hidden_sizes=(16,))
JEM_TINY = dict(TINY, sgld_steps=5, buffer_size=64)


def squared_norm(x):
    """A constraint energy: ||x||^2 / 2 (module level, so that it pickles)."""
    return 0.5 * (x**2).flatten(1).sum(1)


@pytest.fixture(scope="module")
def data(small_blobs):
    """X, and Y = (blob 0/1/2, side 'left'/'right' of x_0 = 0)."""
    X, y = small_blobs
    side = np.where(X[:, 0] > 0, "right", "left")
    return X, [[int(b), s] for b, s in zip(y, side, strict=True)]


@pytest.fixture(scope="module")
def model(data):
    X, Y = data
    experts = [
        ("blob", NGEBMClassifier(random_state=0, **TINY)),
        ("side", NGEBMClassifier(beta=0.0, random_state=1, **TINY)),
    ]
    return ConceptComposition(experts, weights=[0.5, 2.0]).fit(X, Y)


def public_logits(expert, X):
    """f_k from the public outputs: log p = f + E, so f = log p - E."""
    return expert.predict_log_proba(X).astype(np.float64) - expert.energy(X)[:, None]


def test_fit_follows_multioutput_conventions(model, data):
    X, Y = data
    assert [c.tolist() for c in model.classes_] == [[0, 1, 2], ["left", "right"]]
    assert set(model.named_estimators_) == {"blob", "side"}
    predicted = model.predict(X)
    assert predicted.shape == (len(X), 2) and predicted.dtype == object
    for k, (_, expert) in enumerate(model.named_estimators_.items()):
        np.testing.assert_array_equal(predicted[:, k], expert.predict(X))
        np.testing.assert_allclose(model.predict_proba(X)[k], expert.predict_proba(X), atol=1e-6)
    assert model.score(X, Y) == np.mean((predicted == np.asarray(Y, dtype=object)).all(axis=1))
    # one Gaussian per (blob, side) combination seen in Y
    assert len(model.combinations_) == len({tuple(row) for row in Y})


def test_concept_energies_are_the_class_conditional_energies_and_add(model, data):
    X, _ = data
    f_blob = public_logits(model.named_estimators_["blob"], X)
    f_side = public_logits(model.named_estimators_["side"], X)
    # E_k(x, y) = -f_k(x)[y], weighted by w_k
    np.testing.assert_allclose(model.energy(X, {"blob": 2}), -0.5 * f_blob[:, 2], atol=1e-4)
    np.testing.assert_allclose(model.energy(X, {"side": "left"}), -2.0 * f_side[:, 0], atol=1e-4)
    both = model.energy(X, {"blob": 2, "side": "left"})
    np.testing.assert_allclose(both, -0.5 * f_blob[:, 2] - 2.0 * f_side[:, 0], atol=1e-4)
    np.testing.assert_allclose(
        both, model.energy(X, {"blob": 2}) + model.energy(X, {"side": "left"}), atol=1e-5
    )


def test_disjunction_negation_and_the_marginal(model, data):
    X, _ = data
    f_blob = public_logits(model.named_estimators_["blob"], X)
    some = -0.5 * logsumexp(f_blob[:, [0, 2]], axis=1)
    np.testing.assert_allclose(model.energy(X, {"blob": [0, 2]}), some, atol=1e-4)
    np.testing.assert_allclose(model.energy(X, {"blob": Not(1)}), some, atol=1e-5)
    np.testing.assert_allclose(
        model.energy(X, {"blob": Not(Not(1))}), -0.5 * f_blob[:, 1], atol=1e-4
    )
    np.testing.assert_allclose(model.energy(X, {"blob": [Not([0, 1]), 0]}), some, atol=1e-5)
    np.testing.assert_allclose(model.energy(X, {"blob": np.array([0, 2])}), some, atol=1e-5)
    np.testing.assert_array_equal(
        model.energy(X, {"blob": np.array(1)}), model.energy(X, {"blob": 1})
    )
    # a list of dicts is the disjunction of the conjunctions: -logsumexp(-E_1, -E_2)
    e1, e2 = model.energy(X, {"blob": 0}), model.energy(X, {"side": "right"})
    either = model.energy(X, [{"blob": 0}, {"side": "right"}])
    np.testing.assert_allclose(either, -np.logaddexp(-e1, -e2), atol=1e-5)
    # None: every concept with any label, sum_k w_k E_k(x)
    marginal = sum(w * e.energy(X) for w, e in zip([0.5, 2.0], model.estimators_, strict=True))
    np.testing.assert_allclose(model.energy(X), marginal, atol=1e-4)


def test_constraints_add_their_weighted_energy(model, data):
    X, Y = data
    constrained = clone(model).set_params(constraints=[("norm", squared_norm, 0.1)]).fit(X, Y)
    query = {"blob": 1, "side": "right"}
    expected = model.energy(X, query) + 0.1 * squared_norm(torch.tensor(X)).numpy()
    np.testing.assert_allclose(constrained.energy(X, query), expected, rtol=1e-5, atol=1e-5)
    restored = pickle.loads(pickle.dumps(constrained))
    np.testing.assert_array_equal(restored.energy(X, query), constrained.energy(X, query))


@pytest.fixture(scope="module")
def jem_model(data):
    X, Y = data
    experts = [
        ("blob", JEMClassifier(random_state=0, **JEM_TINY)),
        ("side", JEMClassifier(random_state=1, **JEM_TINY)),
    ]
    return ConceptComposition(experts).fit(X, Y)


@pytest.mark.parametrize("sampler", ["sgld", "proximal"])
def test_sampling_lowers_the_composed_energy(jem_model, sampler):
    query = {"blob": 0, "side": "right"}
    x0 = jem_model.sample(64, query, n_steps=0, start="marginal", random_state=0)
    x = jem_model.sample(
        64, query, n_steps=40, sampler=sampler, step_size=0.1, grad_clip=0.1, start=x0,
        random_state=0,
    )  # fmt: skip
    assert x.shape == (64, 4) and x.dtype == np.float32
    assert jem_model.energy(x, query).mean() < jem_model.energy(x0, query).mean() - 0.1
    if sampler == "proximal":
        low, high = jem_model.start_.low.numpy(), jem_model.start_.high.numpy()
        assert ((x >= low - 1e-6) & (x <= high + 1e-6)).all()


def test_starts(jem_model, data):
    X, Y = data
    blob = np.array([row[0] for row in Y])
    # the conditional start draws from the Gaussians of the matching combinations only
    x0 = jem_model.sample(200, {"blob": 2}, n_steps=0, random_state=1)
    means = np.stack([X[blob == b].mean(0) for b in range(3)])
    nearest = np.argmin(((x0[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (nearest == 2).mean() > 0.9
    again = jem_model.sample(200, {"blob": 2}, n_steps=0, random_state=1)
    np.testing.assert_array_equal(x0, again)
    uniform = jem_model.sample(50, n_steps=0, start="uniform", random_state=0)
    assert ((uniform >= X.min(0)) & (uniform <= X.max(0))).all()
    with pytest.warns(UserWarning, match="No training sample has a combination"):
        jem_model.sample(4, {"blob": 0, "side": "left"}, n_steps=0)  # blob 0 is right of 0


def test_sampling_does_not_move_the_fitted_start(jem_model, monkeypatch):
    # Module.to moves in place: sampling on the experts' device moved start_ there for good
    moved, to = [], GaussianStart.to

    def recording_to(module, *args, **kwargs):
        moved.append(module)
        return to(module, *args, **kwargs)

    monkeypatch.setattr(GaussianStart, "to", recording_to)
    for start in ("conditional", "uniform"):
        jem_model.sample(4, {"blob": 1}, n_steps=1, start=start, random_state=0)
    assert not any(module is jem_model.start_ for module in moved)
    # on another device (as the experts' GPU), the chains start from a copy there
    elsewhere = jem_model._start_on(torch.device("meta"))
    assert elsewhere is not jem_model.start_ and elsewhere.means.device.type == "meta"
    assert jem_model.start_.means.device.type == "cpu"


@pytest.mark.cuda
def test_sampling_on_a_gpu_leaves_the_fitted_start_on_the_cpu(data):
    X, Y = data
    experts = [(n, JEMClassifier(device="cuda", random_state=0, **JEM_TINY)) for n in ("b", "s")]
    model = ConceptComposition(experts).fit(X, Y)
    x = model.sample(8, {"b": 1}, n_steps=2, sampler="proximal", random_state=0)
    assert x.shape == (8, 4)
    assert {buffer.device.type for buffer in model.start_.buffers()} == {"cpu"}


def test_query_weights_go_to_the_device_once_per_call(jem_model, monkeypatch):
    # not at every SGLD step and batch (issue #16): every step gets the same weight tensors
    seen = []

    def recording_conjunction(energies, weights):
        seen.append(weights)
        return conjunction(energies, weights)

    monkeypatch.setattr(concepts_module, "conjunction", recording_conjunction)
    query = [{"blob": 0}, {"blob": 2, "side": "right"}]
    jem_model.sample(4, query, n_steps=5, random_state=0)
    assert len(seen) == 2 * 5  # two clauses, five steps
    assert all(w is seen[0] for w in seen[0::2]) and all(w is seen[1] for w in seen[1::2])
    seen.clear()
    monkeypatch.setattr(jem_model, "batch_size", 50)
    jem_model.energy(np.zeros((150, 4), np.float32), query)  # three batches
    assert len(seen) == 2 * 3 and all(w is seen[0] for w in seen[0::2])


def test_frozen_experts_are_not_refit(model, data):
    X, Y = data
    frozen = [(name, FrozenEstimator(e)) for name, e in model.named_estimators_.items()]
    state = {k: v.clone() for k, v in frozen[0][1].module_.state_dict().items()}
    again = ConceptComposition(frozen).fit(X[:40], [row for row in Y[:40]])
    assert again.estimators_[0] is frozen[0][1]
    for key, value in frozen[0][1].module_.state_dict().items():
        assert torch.equal(value, state[key])


def test_reversed_views_are_accepted(jem_model, data):
    # negative strides, which torch refuses: validation copies them (issue #16)
    X, Y = data
    frozen = [(name, FrozenEstimator(e)) for name, e in jem_model.named_estimators_.items()]
    reversed_fit = ConceptComposition(frozen).fit(X[::-1], np.array(Y, dtype=object)[::-1])
    np.testing.assert_array_equal(reversed_fit.combinations_, jem_model.combinations_)
    torch.testing.assert_close(reversed_fit.start_.means, jem_model.start_.means)
    x0 = jem_model.sample(6, n_steps=0, random_state=0)
    np.testing.assert_array_equal(
        jem_model.sample(6, n_steps=3, start=x0[::-1], random_state=0),
        jem_model.sample(6, n_steps=3, start=x0[::-1].copy(), random_state=0),
    )


# ----------------------------------------------------------------------------- bad input


def test_Y_with_the_wrong_number_of_columns(model, data):
    X, Y = data
    with pytest.raises(
        ValueError, match=r"Y must have shape \(n_samples, n_concepts\) = \(150, 2\)"
    ):
        clone(model).fit(X, np.array(Y)[:, :1])
    with pytest.raises(ValueError, match=r"reshape a single column"):
        clone(model).fit(X, np.array(Y)[:, 0])


@pytest.mark.parametrize(
    "concepts, message",
    [
        ({"colour": 1}, r"Unknown concepts \['colour'\]; the concepts .* are \['blob', 'side'\]"),
        ({"blob": 7}, r"Unknown value 7 of concept 'blob'; its labels are \[0, 1, 2\]"),
        ({"side": "up"}, r"Unknown value 'up' of concept 'side'"),
        ({"blob": []}, "An empty list is no value of concept 'blob'"),
        ({"blob": Not([0, 1, 2])}, r"allows no label"),
        ("blob", "concepts must be None, a dict"),
        ([], "concepts must be None, a dict"),
    ],
)
def test_bad_queries(model, data, concepts, message):
    X, _ = data
    with pytest.raises(ValueError, match=message):
        model.energy(X, concepts)


def test_bad_constraints(model, data):
    X, Y = data
    for constraints in ([("norm", "not callable", 1.0)], [("norm", squared_norm)], "norm"):
        with pytest.raises(ValueError, match="'constraints' parameter of ConceptComposition"):
            clone(model).set_params(constraints=constraints).fit(X, Y)
    wrong_shape = clone(model).set_params(constraints=[("sum", lambda x: x.sum(), 1.0)])
    with pytest.raises(
        ValueError, match=r"constraint 'sum' must return a Tensor of shape \(150,\)"
    ):
        wrong_shape.fit(X, Y).energy(X)


def test_experts_fitted_on_different_feature_counts(model, data):
    X, Y = data
    narrow = FrozenEstimator(
        NGEBMClassifier(random_state=0, **TINY).fit(X[:, :3], [r[1] for r in Y])
    )
    with pytest.raises(ValueError, match="'side' was fitted on 3 features, but X has 4"):
        ConceptComposition([("blob", model.estimators_[0]), ("side", narrow)]).fit(X, Y)


def test_experts_must_take_the_float32_input_as_it_is():
    # token ids are re-encoded by the tree model's own validation (issue #16)
    X, y, _ = make_latent_trees(30, max_length=4, random_state=0)
    tree = LatentStructureClassifier(structure="dependency_tree", max_epochs=1, random_state=0)
    with pytest.raises(TypeError, match="expert 'words' of ConceptComposition"):
        ConceptComposition([("words", tree)]).fit(X, np.column_stack([y]))


def test_bad_sampling_arguments(jem_model):
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        jem_model.sample(0)
    # as JEMClassifier.sample: the parameter error, every bad argument at once (issue #16)
    for n in ("3", 2.0, True):
        with pytest.raises(InvalidParameterError, match=f"n must be an int >= 1. Got {n!r}"):
            jem_model.sample(n)
    with pytest.raises(InvalidParameterError) as info:
        jem_model.sample(2, n_steps=-1, step_size=float("nan"), random_state=0.5)
    assert str(info.value).splitlines() == [
        "n_steps must be an int >= 0. Got -1 instead.",
        "step_size must be a finite float in the range [0.0, inf). Got nan instead.",
        "random_state must be an int or None. Got 0.5 instead.",
    ]
    with pytest.raises(ValueError, match="sampler must be 'sgld' or 'proximal'"):
        jem_model.sample(2, sampler="hmc")
    with pytest.raises(ValueError, match="start must be 'conditional'"):
        jem_model.sample(2, start="data")
    with pytest.raises(ValueError, match="start must hold n=2 starting points"):
        jem_model.sample(2, start=np.zeros((3, 4), dtype=np.float32))
