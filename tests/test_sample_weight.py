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
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_sample_weight
from skorch.dataset import Dataset
from torch.utils.data import Subset

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier.distributed import DataParallelNGEBMClassifier

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
FAST = dict(max_epochs=3, lr=1e-2, module__hidden_sizes=(16,), random_state=0)


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


def test_cross_validate_routes_sample_weight_through_a_pipeline(small_blobs, routing):
    X, y = small_blobs
    w = _weights(len(X)).astype(float)
    scaler = StandardScaler().set_fit_request(sample_weight=False)
    pipe = make_pipeline(scaler, _requesting(score=True))
    result = cross_validate(
        pipe,
        X,
        y,
        cv=KFold(3),
        params={"sample_weight": w},
        return_estimator=True,
        return_indices=True,
    )
    for fitted, train in zip(result["estimator"], result["indices"]["train"], strict=True):
        scaler = StandardScaler().fit(X[train])
        direct = clone(_requesting()).fit(
            scaler.transform(X[train]), y[train], sample_weight=w[train]
        )
        np.testing.assert_array_equal(
            fitted.predict_proba(X), direct.predict_proba(scaler.transform(X))
        )


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
def test_bad_sample_weight_is_a_value_error(small_blobs, sample_weight, match):
    X, y = small_blobs
    with pytest.raises(ValueError, match=match):
        NGEBMClassifier(**FAST).fit(X, y, sample_weight=sample_weight)


def test_weights_must_leave_two_classes(small_blobs):
    X, y = small_blobs
    with pytest.raises(ValueError, match=r"Only samples of the classes \[1\] have a positive"):
        NGEBMClassifier(**FAST).fit(X, y, sample_weight=(y == 1).astype(float))
    with pytest.raises(ValueError, match=r"Only samples of the classes \[0\]"):
        NGEBMClassifier(**FAST, class_weight={1: 0, 2: 0}).fit(X, y)


def test_sample_weight_of_strings_is_a_type_error(small_blobs):
    X, y = small_blobs
    with pytest.raises(TypeError, match="sample_weight must be None, a number or an array-like"):
        NGEBMClassifier(**FAST).fit(X, y, sample_weight=["heavy"] * len(y))


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
