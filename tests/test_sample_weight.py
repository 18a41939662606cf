"""sample_weight and class_weight: what a weight means, how it travels, and bad input.

A weight multiplies every per-sample term of the loss, normalised per batch
(``sum_i w_i l_i / sum_i w_i``). With the whole data set as one batch (``batch_size=-1``)
and no shuffling, a weight of 0 is then exactly a dropped sample and an integer weight a
repeated one, up to the order of float32 sums.
"""

import numpy as np
import pytest
import sklearn
import torch
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_sample_weight
from skorch.dataset import Dataset
from torch.utils.data import Subset

from ebmclassifier import (
    ConceptComposition,
    JEMClassifier,
    LatentStructureClassifier,
    NGEBMClassifier,
    ProductOfExperts,
)
from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.distributed import DataParallelNGEBMClassifier
from ebmclassifier.latent.score_function import RunningMeanBaseline

from .estimators import params

# One full batch in a fixed order: dropping or repeating samples then changes no batch.
FULL_BATCH = dict(
    max_epochs=4,
    lr=1e-2,
    batch_size=-1,
    iterator_train__shuffle=False,
    module__hidden_sizes=(16,),
    random_state=0,
)
JEM_SMALL = dict(sgld_steps=3, buffer_size=40)
FAST = params("ngebm", max_epochs=3, lr=1e-2, module__hidden_sizes=(16,))


def _weights(n, seed=7, high=4):
    # seed 0 would repeat small_blobs' own draws of y
    return np.random.default_rng(seed).integers(0, high, n)


def _assert_same_network(a, b):
    for p, q in zip(a.module_.parameters(), b.module_.parameters(), strict=True):
        torch.testing.assert_close(p, q)  # float32 tolerances: the order of sums differs


# ---------------------------------------------------------------- what a weight means


@pytest.mark.parametrize(
    "make",
    [
        lambda: NGEBMClassifier(**FULL_BATCH),
        lambda: NGEBMClassifier(**FULL_BATCH, energy_var_weight=0.5),
        lambda: NGEBMClassifier(**FULL_BATCH, grad_norm="finite_difference"),
        lambda: JEMClassifier(**FULL_BATCH, **JEM_SMALL),
        lambda: JEMClassifier(**FULL_BATCH, **JEM_SMALL, sampler="proximal"),
    ],
    ids=["ngebm", "ngebm_var", "ngebm_fd", "jem", "jem_proximal"],
)
def test_zero_weight_equals_dropping_the_sample(small_blobs, make):
    X, y = small_blobs
    keep = _weights(len(X), high=3) > 0  # about a third dropped
    weighted = make().fit(X, y, sample_weight=keep.astype(float))
    dropped = make().fit(X[keep], y[keep])
    _assert_same_network(weighted, dropped)
    # what the estimators take from the data is that of the kept samples
    torch.testing.assert_close(weighted.input_min_, dropped.input_min_)
    if isinstance(weighted, JEMClassifier):
        torch.testing.assert_close(weighted.replay_buffer_.samples, dropped.replay_buffer_.samples)
    else:
        assert weighted.fd_step_size_ == dropped.fd_step_size_
    # and the weights did something: without them the fit differs
    unweighted = make().fit(X, y)
    assert not np.allclose(unweighted.predict_proba(X), weighted.predict_proba(X), atol=1e-4)


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_integer_weights_equal_repetition(small_blobs, beta):
    X, y = small_blobs
    w = _weights(len(X))
    weighted = NGEBMClassifier(**FULL_BATCH, beta=beta).fit(X, y, sample_weight=w)
    repeated = NGEBMClassifier(**FULL_BATCH, beta=beta).fit(np.repeat(X, w, 0), np.repeat(y, w))
    _assert_same_network(weighted, repeated)
    np.testing.assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=1e-6)


@pytest.mark.parametrize(
    "criterion, params",
    [
        (torch.nn.CrossEntropyLoss, {}),
        (torch.nn.CrossEntropyLoss, {"criterion__label_smoothing": 0.1}),
        (torch.nn.NLLLoss, {}),
    ],
    ids=["cross_entropy", "label_smoothing", "nll"],
)
def test_class_weights_of_the_criterion_keep_the_scale_of_its_mean(small_blobs, criterion, params):
    X, y = small_blobs
    class_weight = torch.tensor([1.0, 10.0, 1.0])
    clf = NGEBMClassifier(**FAST, criterion=criterion, criterion__weight=class_weight, **params)
    clf.fit(X[:30], y[:30])
    logits = torch.randn(12, 3, generator=torch.Generator().manual_seed(0))
    if criterion is torch.nn.NLLLoss:
        logits = logits.log_softmax(1)
    labels = torch.tensor([0, 1, 2, 1] * 3)
    torch_mean = clf.criterion_(logits, labels)  # sum_i c[y_i] l_i / sum_i c[y_i]
    torch.testing.assert_close(clf.classification_loss(logits, labels, torch.ones(12)), torch_mean)
    w = torch.tensor([0, 1, 2, 3] * 3)
    repeated = clf.criterion_(logits.repeat_interleave(w, 0), labels.repeat_interleave(w))
    torch.testing.assert_close(clf.classification_loss(logits, labels, w.float()), repeated)


def test_integer_weights_equal_repetition_with_class_weights_of_the_criterion(small_blobs):
    X, y = small_blobs
    w = _weights(len(X))
    params = dict(**FULL_BATCH, criterion__weight=torch.tensor([1.0, 10.0, 1.0]))
    weighted = NGEBMClassifier(**params).fit(X, y, sample_weight=w)
    repeated = NGEBMClassifier(**params).fit(np.repeat(X, w, 0), np.repeat(y, w))
    _assert_same_network(weighted, repeated)


def test_class_weight_balanced_equals_its_sample_weight(small_blobs):
    X, y = small_blobs
    y = np.where(np.arange(len(y)) < 100, y, 0)  # class 0 over-represented
    labels = np.array(["a", "b", "c"])[y]
    balanced = NGEBMClassifier(**FAST, class_weight="balanced").fit(X, labels)
    explicit = NGEBMClassifier(**FAST).fit(
        X, labels, sample_weight=compute_sample_weight("balanced", labels)
    )
    np.testing.assert_array_equal(balanced.predict_proba(X), explicit.predict_proba(X))
    plain = NGEBMClassifier(**FAST).fit(X, labels)
    assert not np.allclose(balanced.predict_proba(X), plain.predict_proba(X), atol=1e-4)


def test_class_weight_dict_multiplies_sample_weight(small_blobs):
    X, y = small_blobs
    labels = np.array(["a", "b", "c"])[y]
    w = _weights(len(X), seed=1) + 1.0
    per_class = {"a": 2.0, "c": 0.5}  # "b" weighs 1
    both = NGEBMClassifier(**FAST, class_weight=per_class).fit(X, labels, sample_weight=w)
    product = w * np.array([per_class.get(label, 1.0) for label in labels])
    explicit = NGEBMClassifier(**FAST).fit(X, labels, sample_weight=product)
    np.testing.assert_array_equal(both.predict_proba(X), explicit.predict_proba(X))


@pytest.mark.parametrize("weight", [3.0, "ones"])
def test_uniform_weights_are_no_weights(small_blobs, weight):
    X, y = small_blobs  # minibatches, shuffled
    w = 3.0 if weight == 3.0 else np.ones(len(X))
    weighted = NGEBMClassifier(**FAST, batch_size=32).fit(X, y, sample_weight=w)
    plain = NGEBMClassifier(**FAST, batch_size=32).fit(X, y)
    np.testing.assert_array_equal(weighted.predict_proba(X), plain.predict_proba(X))


def test_weights_follow_the_shuffled_minibatches(small_blobs):
    # Weighting and dropping agree per batch only if each weight stays with its sample:
    # weights that silence class 2 leave its logit trained by the other classes' samples only.
    X, y = small_blobs
    w = (y != 2).astype(float)
    clf = NGEBMClassifier(**{**FAST, "max_epochs": 15}, batch_size=16).fit(X, y, sample_weight=w)
    assert (clf.predict(X[y != 2]) == y[y != 2]).mean() > 0.9
    assert (clf.predict(X[y == 2]) == 2).mean() < 0.2
    assert clf.classes_.tolist() == [0, 1, 2]


def test_partial_fit_takes_the_weights_of_each_chunk(small_blobs):
    X, y = small_blobs
    keep = _weights(len(X), high=3) > 0
    options = {**FULL_BATCH, "max_epochs": 1}
    weighted, dropped = NGEBMClassifier(**options), NGEBMClassifier(**options)
    for chunk in (slice(0, 75), slice(75, None)):
        weighted.partial_fit(X[chunk], y[chunk], classes=[0, 1, 2], sample_weight=keep[chunk])
        dropped.partial_fit(X[chunk][keep[chunk]], y[chunk][keep[chunk]], classes=[0, 1, 2])
    _assert_same_network(weighted, dropped)


def test_a_batch_without_weight_takes_no_step(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(X, y)
    before = [p.detach().clone() for p in clf.module_.parameters()]
    Xt = torch.tensor(X[:8], device=clf.device_)
    batch = ({"X": Xt, "sample_weight": torch.zeros(8)}, torch.tensor(y[:8]))
    step = clf.train_step(batch)
    assert float(step["loss"]) == 0.0  # Adam's momentum would still have moved the weights
    for p, b in zip(clf.module_.parameters(), before, strict=True):
        assert torch.equal(p, b) and p.grad is None


def test_validation_loss_is_weighted_too(small_blobs):
    X, y = small_blobs
    w = _weights(len(X), seed=2).astype(np.float32)
    train, valid = np.arange(100), np.arange(100, 150)

    def split(dataset, y=None, **kwargs):
        return Subset(dataset, train.tolist()), Subset(dataset, valid.tolist())

    clf = NGEBMClassifier(**FAST, train_split=split).fit(X, y, sample_weight=w)
    Xv = torch.tensor(X[valid], device=clf.device_)
    yv = torch.tensor(y[valid], device=clf.device_)
    wv = torch.tensor(w[valid], device=clf.device_)
    clf.module_.eval()
    expected = clf.compute_loss(Xv, yv, training=False, sample_weight=wv)[0].item()
    assert clf.history[-1, "valid_loss"] == pytest.approx(expected, rel=1e-5)
    unweighted = clf.compute_loss(Xv, yv, training=False)[0].item()
    assert unweighted != pytest.approx(expected, rel=1e-3)


def test_the_training_set_carries_its_weights_as_a_dict():
    # skorch's way for inputs that travel together; the batches are dicts of the same rows
    X, w = torch.arange(12.0).reshape(6, 2), torch.arange(6.0)
    clf = NGEBMClassifier(batch_size=4)
    batches = list(clf.get_iterator(Dataset({"X": X, "sample_weight": w}, torch.zeros(6))))
    assert [b[0]["X"].tolist() for b in batches] == [X[:4].tolist(), X[4:].tolist()]
    assert [b[0]["sample_weight"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5]]


# ---------------------------------------------------------------- metadata routing


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


def _requesting(score=False, **params):
    clf = NGEBMClassifier(**{**FAST, **params})
    return clf.set_fit_request(sample_weight=True).set_score_request(sample_weight=score)


def test_fit_and_partial_fit_request_sample_weight(routing):
    # generated by scikit-learn from the signatures of fit and partial_fit
    clf = _requesting().set_partial_fit_request(sample_weight=True)
    for method in ("fit", "partial_fit"):
        assert clf.get_metadata_routing().consumes(method, {"sample_weight"}) == {"sample_weight"}
    assert not NGEBMClassifier().get_metadata_routing().consumes("fit", {"sample_weight"})


def test_grid_search_routes_sample_weight(small_blobs, routing):
    X, y = small_blobs
    w = _weights(len(X)).astype(float)
    search = GridSearchCV(_requesting(), {"beta": [0.0, 0.5]}, cv=2).fit(X, y, sample_weight=w)
    refit = clone(_requesting(**search.best_params_)).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(search.predict_proba(X), refit.predict_proba(X))
    unweighted = clone(_requesting(**search.best_params_)).fit(X, y)
    assert not np.allclose(search.predict_proba(X), unweighted.predict_proba(X), atol=1e-4)


def _assert_folds_fitted_with_their_weights(final, X, y, w, cv):
    """``cross_validate`` of ``StandardScaler + final`` routes each fold's weights to
    ``final.fit``: each fold's fit equals a direct weighted fit of a clone on the fold."""
    scaler = StandardScaler().set_fit_request(sample_weight=False)
    result = cross_validate(
        make_pipeline(scaler, final),
        X,
        y,
        cv=cv,
        params={"sample_weight": w},
        return_estimator=True,
        return_indices=True,
    )
    for fitted, train in zip(result["estimator"], result["indices"]["train"], strict=True):
        scaler = StandardScaler().fit(X[train])
        direct = clone(final).fit(scaler.transform(X[train]), y[train], sample_weight=w[train])
        np.testing.assert_array_equal(
            fitted.predict_proba(X), direct.predict_proba(scaler.transform(X))
        )


def test_cross_validate_routes_sample_weight_through_a_pipeline(small_blobs, routing):
    X, y = small_blobs
    w = _weights(len(X)).astype(float)
    _assert_folds_fitted_with_their_weights(_requesting(score=True), X, y, w, KFold(3))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "sample_weight, match",
    [
        (np.ones(149), r"sample_weight must have shape \(150,\).*Got shape \(149,\)"),
        (np.ones((150, 2)), r"must have shape \(150,\)"),
        (np.r_[-1.0, np.ones(149)], r"non-negative; it is negative at index \[0\]"),
        (np.r_[np.ones(3), np.nan, np.ones(146)], r"finite; it is NaN or infinite at index \[3\]"),
        (np.r_[np.inf, np.ones(149)], r"NaN or infinite at index \[0\]"),
        (np.zeros(150), r"sample weights are all zero"),
    ],
    ids=["length", "2d", "negative", "nan", "inf", "all_zero"],
)
@pytest.mark.parametrize("make", [lambda: NGEBMClassifier(**FAST), lambda: _latent("ste")])
def test_bad_sample_weight_is_a_value_error(small_blobs, sample_weight, match, make):
    X, y = small_blobs
    with pytest.raises(ValueError, match=match):
        make().fit(X, y, sample_weight=sample_weight)


def test_weights_must_leave_two_classes(small_blobs):
    X, y = small_blobs
    with pytest.raises(ValueError, match=r"Only samples of the classes \[1\] have a positive"):
        NGEBMClassifier(**FAST).fit(X, y, sample_weight=(y == 1).astype(float))
    with pytest.raises(ValueError, match=r"Only samples of the classes \[0\]"):
        NGEBMClassifier(**FAST, class_weight={1: 0, 2: 0}).fit(X, y)


@pytest.mark.parametrize("make", [lambda: NGEBMClassifier(**FAST), lambda: _latent("ste")])
def test_sample_weight_of_strings_is_a_type_error(small_blobs, make):
    X, y = small_blobs
    with pytest.raises(TypeError, match="sample_weight must be None, a number or an array-like"):
        make().fit(X, y, sample_weight=["heavy"] * len(y))


@pytest.mark.parametrize(
    "class_weight, match",
    [
        ({0: 1.0, 7: 2.0}, r"class_weight has labels \[7\] that are not classes.*\[0, 1, 2\]"),
        ({"0": 2.0}, r"labels \['0'\] that are not classes"),
        ({0: -1.0}, r"class_weight must map labels to finite weights >= 0. Got \{0: -1.0\}"),
        ({1: float("nan")}, r"Got \{1: nan\}"),
        ("balance", r"The 'class_weight' parameter of NGEBMClassifier must be None, 'balanced'"),
        ([1.0, 2.0, 3.0], r"'class_weight' parameter .* Got \[1.0, 2.0, 3.0\] instead"),
    ],
)
def test_bad_class_weight_is_a_value_error(small_blobs, class_weight, match):
    X, y = small_blobs
    with pytest.raises(ValueError, match=match):
        NGEBMClassifier(**FAST, class_weight=class_weight).fit(X, y)


def test_partial_fit_refuses_balanced_class_weight(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST, class_weight="balanced")
    with pytest.raises(ValueError, match="not supported by NGEBMClassifier.partial_fit"):
        clf.partial_fit(X, y)


class _Unweighted(NGEBMClassifier):
    def compute_loss(self, X, y, training):
        return super().compute_loss(X, y, training)


def test_a_loss_without_sample_weight_refuses_weights_before_training(small_blobs):
    X, y = small_blobs
    clf = _Unweighted(**FAST)
    with pytest.raises(TypeError, match="its compute_loss takes no sample_weight argument"):
        clf.fit(X, y, sample_weight=_weights(len(X)))
    assert not hasattr(clf, "module_")
    clf.fit(X, y, sample_weight=np.full(len(X), 2.0))  # uniform weights need no support


class _SumOfLosses:
    def __call__(self, logits, y):
        return torch.nn.functional.cross_entropy(logits, y)


def test_a_criterion_without_reduction_refuses_weights(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST, criterion=_SumOfLosses)
    with pytest.raises(TypeError, match="has no 'reduction' to set to 'none'"):
        clf.fit(X, y, sample_weight=_weights(len(X)))


def test_data_parallel_training_refuses_weights(small_blobs):
    X, y = small_blobs
    clf = DataParallelNGEBMClassifier(**FAST)
    with pytest.raises(ValueError, match="does not train with sample weights yet"):
        clf.fit(X, y, sample_weight=_weights(len(X)))


# ---------------------------------------------------------------- the latent classifier


def _latent(gradient, **params):
    options = {**FULL_BATCH, "lr": 5e-2}
    del options["module__hidden_sizes"]
    return LatentStructureClassifier(3, gradient=gradient, **{**options, **params})


def _tree(gradient="marginals"):
    # SGD: Adam divides each element by its own scale, and the encoder's gradients of ~1e-6
    # then turn float32 rounding of the order of the sums into visibly different steps.
    options = {**FULL_BATCH, "lr": 0.5, "optimizer": torch.optim.SGD}
    del options["module__hidden_sizes"]
    return LatentStructureClassifier(structure="dependency_tree", gradient=gradient, **options)


@pytest.fixture(scope="module")
def trees():
    X, y, _ = make_latent_trees(40, max_length=5, random_state=0)
    return X, y


@pytest.mark.parametrize("gradient", ["ste", "spigot", "softmax"])
def test_latent_zero_weight_equals_dropping_the_sample(small_blobs, gradient):
    X, y = small_blobs
    keep = _weights(len(X), high=3) > 0
    weighted = _latent(gradient).fit(X, y, sample_weight=keep.astype(float))
    dropped = _latent(gradient).fit(X[keep], y[keep])
    _assert_same_network(weighted, dropped)
    unweighted = _latent(gradient).fit(X, y)
    assert not np.allclose(unweighted.predict_proba(X), weighted.predict_proba(X), atol=1e-4)


def test_latent_tree_zero_weight_equals_dropping_the_sample(trees):
    X, y = trees
    keep = _weights(len(X), high=3) > 0
    weighted = _tree().fit(X, y, sample_weight=keep.astype(float))
    dropped = _tree().fit(X[keep], y[keep])
    # the vocabulary is that of the kept rows: ids only in dropped rows are out of vocabulary
    np.testing.assert_array_equal(weighted.vocabulary_, dropped.vocabulary_)
    assert len(weighted.vocabulary_) < len(np.unique(X[X > 0]))
    _assert_same_network(weighted, dropped)
    np.testing.assert_allclose(weighted.predict_proba(X), dropped.predict_proba(X), atol=1e-6)
    unweighted = _tree().fit(X, y)
    assert not np.allclose(unweighted.predict_proba(X), weighted.predict_proba(X), atol=1e-4)


@pytest.mark.parametrize("gradient", ["spigot", "softmax"])
def test_latent_integer_weights_equal_repetition(small_blobs, gradient):
    X, y = small_blobs
    w = _weights(len(X))
    weighted = _latent(gradient).fit(X, y, sample_weight=w)
    repeated = _latent(gradient).fit(np.repeat(X, w, 0), np.repeat(y, w))
    _assert_same_network(weighted, repeated)


def _gradients(clf, X, y, w=None):
    clf.module_.zero_grad()
    weights = None if w is None else torch.as_tensor(w, dtype=torch.float32)
    clf.compute_loss(X, y, training=True, sample_weight=weights)[0].backward()
    return [p.grad.clone() for p in clf.module_.parameters()]


@pytest.mark.parametrize(
    "make",
    [
        lambda: _latent("ste"),
        lambda: _latent("spigot_ce"),
        lambda: _latent("spigot_eg"),
        lambda: _tree("spigot_ce"),
    ],
    ids=["ste", "spigot_ce", "spigot_eg", "tree_spigot_ce"],
)
def test_latent_weighted_gradient_is_the_weighted_mean_of_per_sample_gradients(
    small_blobs, trees, make
):
    # independent of the per-sample scaling: each sample alone is a batch of one (factor 1)
    clf = make()
    X, y = trees if clf.structure == "dependency_tree" else small_blobs
    clf.set_params(max_epochs=1).fit(X[:12], y[:12])
    Xt = torch.as_tensor(clf._validate_X(X[:12], reset=False), device=clf.device_)
    yt = torch.as_tensor(np.searchsorted(clf.classes_, y[:12]), device=clf.device_)
    w = np.r_[0.0, 2.0, 0.5, np.arange(9) % 3].astype(np.float32)
    batch = _gradients(clf, Xt, yt, w)
    alone = [_gradients(clf, Xt[i : i + 1], yt[i : i + 1]) for i in range(12)]
    for k, grad in enumerate(batch):
        expected = sum(float(w[i]) * alone[i][k] for i in range(12)) / float(w.sum())
        torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-7)
    assert any(g.abs().sum() > 0 for g in batch[:1])  # the encoder learns


def test_score_function_baseline_takes_the_weighted_mean():
    losses, w = torch.tensor([1.0, 5.0, 2.0]), torch.tensor([0.0, 1.0, 3.0])
    weighted, kept = RunningMeanBaseline(momentum=0.5), RunningMeanBaseline(momentum=0.5)
    for _ in range(2):
        weighted.update(losses, w)
        kept.update(torch.tensor([5.0, 2.0, 2.0, 2.0]))  # weight 0 dropped, 3 repeated
    torch.testing.assert_close(weighted.value, kept.value)


def test_latent_sfe_trains_with_weights(small_blobs):
    # sampled: no exact equality with dropping (the draws differ), but it runs and learns
    X, y = small_blobs
    w = (y != 2).astype(float)
    clf = _latent("sfe", max_epochs=20).fit(X, y, sample_weight=w)
    assert int(clf.module_.baseline.n_updates) == 20
    assert (clf.predict(X[y != 2]) == y[y != 2]).mean() > 0.8


# ---------------------------------------------------------------- meta-estimators


def _experts():
    return [("a", NGEBMClassifier(**FULL_BATCH)), ("b", NGEBMClassifier(**FULL_BATCH, beta=0.5))]


def test_product_of_experts_passes_sample_weight_to_each_expert(small_blobs):
    X, y = small_blobs
    keep = _weights(len(X), high=3) > 0
    frozen = FrozenEstimator(NGEBMClassifier(**FULL_BATCH).fit(X, y))
    experts = [*_experts(), ("frozen", frozen)]
    weighted = ProductOfExperts(experts).fit(X, y, sample_weight=keep.astype(float))
    dropped = ProductOfExperts(experts).fit(X[keep], y[keep])
    for a, b in zip(weighted.estimators_[:2], dropped.estimators_[:2], strict=True):
        _assert_same_network(a, b)
    assert weighted.named_estimators_["frozen"] is frozen  # not refit
    np.testing.assert_allclose(weighted.predict_proba(X), dropped.predict_proba(X), atol=1e-6)


def test_concept_composition_passes_sample_weight_to_each_expert(small_blobs):
    X, y = small_blobs
    Y = np.column_stack([y, (X[:, 1] > 1).astype(int)])
    keep = _weights(len(X), high=3) > 0
    weighted = ConceptComposition(_experts()).fit(X, Y, sample_weight=keep.astype(float))
    dropped = ConceptComposition(_experts()).fit(X[keep], Y[keep])
    for a, b in zip(weighted.estimators_, dropped.estimators_, strict=True):
        _assert_same_network(a, b)
    np.testing.assert_array_equal(weighted.combinations_, dropped.combinations_)
    starts = weighted.start_.state_dict(), dropped.start_.state_dict()
    for a, b in zip(*(start.values() for start in starts), strict=True):
        torch.testing.assert_close(a, b)  # the chains' start: of the kept samples


def test_meta_estimators_check_sample_weight_with_frozen_experts(small_blobs):
    # frozen experts never see sample_weight: the composition checks it, with the
    # estimators' message; all-zero weights failed inside informative_start (issue #14)
    X, y = small_blobs
    Y = np.column_stack([y, (X[:, 1] > 1).astype(int)])
    frozen = FrozenEstimator(NGEBMClassifier(**FULL_BATCH).fit(X, y))
    experts = [("a", frozen), ("b", frozen)]
    for name, fit in [
        ("ProductOfExperts", lambda w: ProductOfExperts(experts).fit(X, y, sample_weight=w)),
        ("ConceptComposition", lambda w: ConceptComposition(experts).fit(X, Y, sample_weight=w)),
    ]:
        message = rf"^The sample weights are all zero, so {name} has no sample to learn from; "
        with pytest.raises(ValueError, match=message + r"give some samples a positive \w+\.$"):
            fit(np.zeros(len(X)))
        with pytest.raises(ValueError, match=r"sample_weight must have shape \(150,\)"):
            fit(np.ones(3))
        with pytest.raises(ValueError, match="sample_weight must be non-negative"):
            fit(-np.ones(len(X)))


def test_meta_estimators_route_sample_weight(small_blobs, routing):
    X, y = small_blobs
    w = _weights(len(X)).astype(float)
    poe = ProductOfExperts(_experts()).set_fit_request(sample_weight=True)
    poe.set_score_request(sample_weight=True)  # the scores are the weighted accuracies
    _assert_folds_fitted_with_their_weights(poe, X, y, w, KFold(2))
    with pytest.raises(ValueError, match=r"\[sample_weight\] are passed but are not explicitly"):
        cross_validate(ProductOfExperts(_experts()), X, y, params={"sample_weight": w})
