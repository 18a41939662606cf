"""Property-based hostile-input suite (issue #14), with hypothesis.

Each family generates bad inputs and asserts the same contract at the public boundary: one of
the library's documented exceptions (``ValueError``, ``TypeError``, ``NotFittedError``, or
``FileNotFoundError`` for a missing file) whose message names the argument, never another
exception type, never silent acceptance, and never a change to the caller's arrays.

Families: arrays (values and shapes given to fit and predict), label vectors, constructor
parameters, corrupted files (CSV, .npz, CIFAR batches), metric inputs, token ids of the tree
model. Every estimator here is tiny so that a failure to refuse costs milliseconds.
"""

from __future__ import annotations

import pickle
import re
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier
from ebmclassifier.datasets import load_array_file, load_cifar10
from ebmclassifier.metrics import (
    expected_calibration_error,
    maximum_calibration_error,
    ood_metrics,
)

from .estimators import tiny

DOCUMENTED = (ValueError, TypeError, NotFittedError)
FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI stays reproducible
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
RNG = np.random.default_rng(0)
X_GOOD = RNG.normal(size=(24, 3)).astype(np.float32)
Y_GOOD = np.arange(24) % 3
TINY = dict(max_epochs=1, batch_size=8, random_state=0)
#: Each class's small settings (tests/estimators.py), smaller still: a refusal costs milliseconds.
SMALLER = {
    NGEBMClassifier: ("ngebm", dict(batch_size=8, module__hidden_sizes=(4,))),
    JEMClassifier: ("jem", dict(batch_size=8, buffer_size=16, module__hidden_sizes=(4,))),
    LatentStructureClassifier: ("latent", dict(batch_size=8, n_latent=2)),
}


def _tiny(cls, **params):
    kind, settings = SMALLER[cls]
    return tiny(kind, **{**settings, **params})


ESTIMATORS = [NGEBMClassifier, JEMClassifier, LatentStructureClassifier]


def _refuses(call, *names: str) -> Exception:
    """``call()`` raises a documented exception whose message names one of ``names``."""
    with pytest.raises(Exception) as info:
        call()
    err = info.value
    assert isinstance(err, DOCUMENTED), f"{type(err).__name__}: {err}"
    message = str(err)
    assert any(re.search(name, message) for name in names), message
    return err


# ----------------------------------------------------------------------------- arrays

bad_values = st.sampled_from([np.nan, np.inf, -np.inf])


@st.composite
def arrays_with_a_bad_value(draw):
    X = X_GOOD.copy()
    i, j = draw(st.integers(0, len(X) - 1)), draw(st.integers(0, X.shape[1] - 1))
    X[i, j] = draw(bad_values)
    return X


@st.composite
def arrays_of_a_bad_shape(draw):
    kind = draw(st.sampled_from(["1d", "empty", "no_features", "complex", "strings", "scalar"]))
    return kind, {
        "1d": X_GOOD[:, 0],
        "empty": X_GOOD[:0],
        "no_features": X_GOOD[:, :0],
        "complex": X_GOOD.astype(np.complex64) * 1j,
        "strings": np.where(X_GOOD > 0, "yes", "no"),  # numeric strings convert, as in sklearn
        "scalar": np.float32(1.0),
    }[kind]


@pytest.mark.parametrize("cls", ESTIMATORS)
@FAST
@given(X=arrays_with_a_bad_value())
def test_fit_refuses_non_finite_X_and_leaves_it_alone(cls, X):
    before = X.copy()
    _refuses(lambda: _tiny(cls).fit(X, Y_GOOD), "NaN", "infinity")
    np.testing.assert_array_equal(X, before)


@pytest.mark.parametrize("cls", ESTIMATORS)
@FAST
@given(case=arrays_of_a_bad_shape())
def test_fit_refuses_X_of_a_bad_shape_or_type(cls, case):
    kind, X = case
    y = Y_GOOD[: len(X)] if np.ndim(X) else Y_GOOD
    _refuses(
        lambda: _tiny(cls).fit(X, y),
        "array", "feature", "sample", "Complex", "string", "convert", "inconsistent",
    )  # fmt: skip


@pytest.fixture(scope="module")
def fitted():
    return {cls: _tiny(cls).fit(X_GOOD, Y_GOOD) for cls in ESTIMATORS}


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize(
    "method", ["predict", "predict_proba", "energy", "score_ood", "score_samples"]
)
@FAST
@given(X=arrays_with_a_bad_value(), n_features=st.integers(1, 6))
def test_inference_refuses_bad_X(fitted, cls, method, X, n_features):
    clf = fitted[cls]
    before = X.copy()
    _refuses(lambda: getattr(clf, method)(X), "NaN", "infinity")
    np.testing.assert_array_equal(X, before)
    if n_features != X.shape[1]:
        wrong = np.zeros((4, n_features), np.float32)
        _refuses(lambda: getattr(clf, method)(wrong), "features", "shape")


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("method", ["predict", "predict_proba", "energy", "score_ood"])
def test_inference_before_fit_is_not_fitted_error(cls, method):
    with pytest.raises(NotFittedError):
        getattr(_tiny(cls), method)(X_GOOD)


# ----------------------------------------------------------------------------- labels


@st.composite
def bad_labels(draw):
    kind = draw(st.sampled_from(["one_class", "nan", "continuous", "short", "2d", "none"]))
    y = Y_GOOD.astype(np.float64)
    if kind == "one_class":
        return kind, np.full(len(y), draw(st.integers(-5, 5)))
    if kind == "nan":
        y[draw(st.integers(0, len(y) - 1))] = np.nan
        return kind, y
    if kind == "continuous":
        return kind, y + draw(st.floats(0.01, 0.99))
    if kind == "short":
        return kind, y[: draw(st.integers(0, len(y) - 1))]
    if kind == "2d":
        return kind, np.column_stack([y, y])
    return kind, None


@pytest.mark.parametrize("cls", ESTIMATORS)
@FAST
@given(case=bad_labels())
def test_fit_refuses_bad_labels(cls, case):
    kind, y = case
    before = None if y is None else y.copy()
    _refuses(
        lambda: _tiny(cls).fit(X_GOOD, y),
        "class", "y", "target", "label", "samples",
    )  # fmt: skip
    if before is not None:
        np.testing.assert_array_equal(y, before)


# ----------------------------------------------------------------------------- parameters

# (estimator, parameter, predicate of the valid values); each gets every bad value below
NUMERIC_PARAMS = [
    (NGEBMClassifier, "lr", lambda v: v > 0),
    (NGEBMClassifier, "beta", lambda v: 0 <= v <= 1),
    (NGEBMClassifier, "gamma", lambda v: v >= 0),
    (NGEBMClassifier, "fd_step", lambda v: v > 0),
    (NGEBMClassifier, "energy_var_weight", lambda v: v >= 0),
    (NGEBMClassifier, "max_epochs", lambda v: v >= 0 and float(v).is_integer()),
    (NGEBMClassifier, "batch_size", lambda v: (v >= 1 or v == -1) and float(v).is_integer()),
    (JEMClassifier, "px_weight", lambda v: v >= 0),
    (JEMClassifier, "sgld_step_size", lambda v: v >= 0),
    (JEMClassifier, "sgld_noise", lambda v: v >= 0),
    (JEMClassifier, "sgld_steps", lambda v: v >= 0 and float(v).is_integer()),
    (JEMClassifier, "buffer_size", lambda v: v >= 1 and float(v).is_integer()),
    (JEMClassifier, "reinit_freq", lambda v: 0 <= v <= 1),
    (JEMClassifier, "max_energy", lambda v: v > 0),
    (LatentStructureClassifier, "step_size", lambda v: v > 0),
    (LatentStructureClassifier, "temperature", lambda v: v > 0),
    (LatentStructureClassifier, "n_latent", lambda v: v >= 1 and float(v).is_integer()),
    (LatentStructureClassifier, "inner_steps", lambda v: v >= 1 and float(v).is_integer()),
]

numbers = st.one_of(
    st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -1.0, 1.5, 2.0, 1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**40), 2**40),
)
non_numbers = st.sampled_from([True, False, "1", None, [1], (0.5,), {"a": 1}])


@pytest.mark.parametrize(
    "cls, name, valid", NUMERIC_PARAMS, ids=lambda p: getattr(p, "__name__", p)
)
@FAST
@given(value=st.one_of(numbers, non_numbers))
def test_bad_numeric_parameter_is_named(cls, name, valid, value):
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    is_int_param = name in {"max_epochs", "batch_size", "sgld_steps", "buffer_size", "n_latent"}
    if name == "gamma" and value is None:
        return  # None is gamma's documented default
    if numeric and np.isfinite(value) and valid(value):
        if not is_int_param or isinstance(value, int):
            return  # a good value
    _refuses(lambda: _tiny(cls, **{name: value}).fit(X_GOOD, Y_GOOD), f"'{name}'")


@pytest.mark.parametrize(
    "params, name",
    [
        (dict(device="meta"), "device"),
        (dict(device="mps"), "device"),
        (dict(device="tpu:0"), "device"),
        (dict(optimizer="adam"), "optimizer"),
        (dict(module="mlp"), "module"),
        (dict(callbacks=5), "callbacks"),
        (dict(module__hidden_sizes=(-3,)), "hidden_sizes"),
        (dict(module__not_an_argument=1), "not_an_argument"),
        (dict(max_epochs=2.7), "max_epochs"),
    ],
)
def test_bad_training_parameter_is_named_before_training(params, name):
    base = dict(TINY)
    base.pop("max_epochs") if "max_epochs" in params else None
    clf = NGEBMClassifier(**{**base, **params})
    _refuses(lambda: clf.fit(X_GOOD, Y_GOOD), name)
    assert not getattr(clf, "history_", None) or len(clf.history_) == 0


def test_replay_buffer_too_large_for_memory_is_named():
    _refuses(lambda: _tiny(JEMClassifier, buffer_size=10**12).fit(X_GOOD, Y_GOOD), "buffer_size")


@pytest.mark.parametrize(
    "cls, params, named",
    [
        (NGEBMClassifier, {"module__hidden_sizes": (10**6, 10**6)}, "module__hidden_sizes"),
        (JEMClassifier, {"module__hidden_sizes": (10**6, 10**6)}, "module__hidden_sizes"),
        (LatentStructureClassifier, {"n_latent": 10**10}, "n_latent"),
    ],
)
def test_a_network_too_large_for_memory_is_named_before_it_is_allocated(cls, params, named):
    # torch's allocator refused 4e12 bytes ("DefaultCPUAllocator: can't allocate memory")
    err = _refuses(lambda: _tiny(cls, **params).fit(X_GOOD, Y_GOOD), named)
    assert "GiB" in str(err) and "Make the network smaller" in str(err)


# ----------------------------------------------------------------------------- files


@FAST
@given(data=st.binary(max_size=400))
def test_random_bytes_as_csv_or_npz_are_one_value_error(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("files")
    for suffix in (".csv", ".npz"):
        path = folder / f"data{suffix}"
        path.write_bytes(data)
        try:
            X, y = load_array_file(path)
        except ValueError as err:
            # a CSV that is not text raised a UnicodeDecodeError naming no file (issue #26)
            assert type(err) is not UnicodeDecodeError and "data" in str(err), err
            continue
        # accepted: then it really is data, float32, finite, one label per row
        assert X.dtype == np.float32 and np.isfinite(X).all() and len(X) == len(y) > 0
        assert X.shape[1:] and X.shape[1] >= 1


@FAST
@given(cut=st.floats(0.05, 0.95), flips=st.lists(st.integers(0, 10**6), max_size=5))
def test_corrupted_npz_is_one_value_error(tmp_path_factory, cut, flips):
    path = tmp_path_factory.mktemp("npz") / "data.npz"
    np.savez(path, X=X_GOOD, y=Y_GOOD)
    raw = bytearray(path.read_bytes())
    for position in flips:
        raw[position % len(raw)] ^= 0xFF
    path.write_bytes(bytes(raw[: max(1, int(len(raw) * cut))]))
    try:
        X, y = load_array_file(path)
    except ValueError as err:
        assert "data.npz" in str(err)
    else:
        assert X.shape[0] == len(y)


def _cifar_folder(folder, test_batch: bytes):
    good = pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 2]}, protocol=2)
    for name in [f"data_batch_{i}" for i in range(1, 6)]:
        (folder / name).write_bytes(good)
    (folder / "test_batch").write_bytes(test_batch)


@FAST
@given(position=st.integers(0, 10**6), byte=st.integers(0, 255), cut=st.floats(0.0, 1.0))
@example(position=0, byte=0x95, cut=1.0)  # a FRAME claiming 7e18 bytes: it was MemoryError
def test_corrupted_cifar_batch_is_one_value_error(tmp_path_factory, position, byte, cut):
    folder = tmp_path_factory.mktemp("cifar")
    raw = bytearray(
        pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 2]}, protocol=2)
    )
    raw[position % len(raw)] = byte
    _cifar_folder(folder, bytes(raw[: max(1, int(len(raw) * cut))] if cut < 1 else raw))
    try:
        data = load_cifar10(folder)
    except ValueError as err:
        assert "test_batch" in str(err)
    else:
        assert data.X_test.dtype == np.float32 and len(data.X_test) == len(data.y_test)
        assert set(data.y_test.tolist()) <= set(range(10))


@FAST
@given(
    payload=st.sampled_from(
        [
            ("os", "system"),
            ("builtins", "eval"),
            ("builtins", "open"),
            ("subprocess", "call"),
            ("numpy", "load"),
            ("pickle", "loads"),
        ]
    )
)
def test_cifar_batch_naming_any_other_global_is_refused(tmp_path_factory, payload):
    module, name = payload
    # a protocol-2 pickle that calls module.name("x") as it loads
    evil = b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"X\x01\x00\x00\x00x\x85R."
    folder = tmp_path_factory.mktemp("evil")
    _cifar_folder(folder, evil)
    with pytest.raises(ValueError, match=f"test_batch.*{module}.{name} is not allowed"):
        load_cifar10(folder)


# ----------------------------------------------------------------------------- metrics


@st.composite
def bad_probabilities(draw):
    n, k = draw(st.integers(1, 6)), draw(st.integers(2, 4))
    proba = np.full((n, k), 1.0 / k)
    kind = draw(st.sampled_from(["sum", "negative", "nan", "above_one", "1d"]))
    i = draw(st.integers(0, n - 1))
    if kind == "sum":
        proba[i] *= draw(st.floats(0.0, 0.99) | st.floats(1.01, 50.0))
    elif kind == "negative":
        proba[i, 0] = -draw(st.floats(0.01, 5.0))
    elif kind == "nan":
        proba[i, 0] = np.nan
    elif kind == "above_one":
        proba[i] = 0.0
        proba[i, 0] = draw(st.floats(1.01, 10.0))
    else:
        proba = proba[:, 0]
    return proba


@FAST
@given(proba=bad_probabilities(), n_bins=st.integers(1, 20))
def test_calibration_metrics_refuse_what_is_no_distribution(proba, n_bins):
    y = np.zeros(len(proba), dtype=int)
    before = proba.copy()
    for metric in (expected_calibration_error, maximum_calibration_error):
        _refuses(lambda metric=metric: metric(y, proba, n_bins=n_bins), "y_proba")
    np.testing.assert_array_equal(proba, before)


@FAST
@given(n_bins=st.one_of(st.integers(max_value=0), st.integers(10_001, 2**62), non_numbers))
def test_calibration_metrics_refuse_bad_n_bins(n_bins):
    _refuses(lambda: expected_calibration_error([0, 1], [[0.5, 0.5], [0.2, 0.8]], n_bins), "n_bins")


@st.composite
def bad_scores(draw):
    scores = draw(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=5))
    if draw(st.booleans()):
        return []  # empty
    scores.insert(draw(st.integers(0, len(scores))), draw(bad_values))
    return scores


@FAST
@given(scores=bad_scores(), which=st.sampled_from(["scores_in", "scores_out"]))
def test_ood_metrics_refuse_non_finite_or_empty_scores(scores, which):
    good = [0.1, 0.5, 0.9]
    args = {"scores_in": good, "scores_out": good, which: scores}
    _refuses(lambda: ood_metrics(**args), which)


# ----------------------------------------------------------------------------- token ids


@pytest.fixture(scope="module")
def tree_model():
    from ebmclassifier.datasets import make_latent_trees

    X, y, _ = make_latent_trees(32, min_length=2, max_length=5, n_values=3, random_state=0)
    clf = LatentStructureClassifier(structure="dependency_tree", **TINY).fit(X, y)
    return clf, X


@FAST
@given(token=st.sampled_from([-1, -(2**40), 2**24 + 1, 2**40]), where=st.integers(0, 3))
def test_tree_model_refuses_or_maps_token_ids_it_never_saw(tree_model, token, where):
    clf, X = tree_model
    X = X[:4].copy()
    X[where, 0] = token
    before = X.copy()
    try:
        out = clf.predict_proba(X)
    except ValueError as err:
        assert "id" in str(err) or "token" in str(err)
    else:
        assert token > 0 and np.isfinite(out).all()  # documented out-of-vocabulary id
    np.testing.assert_array_equal(X, before)


def test_zip_of_a_pickle_named_like_an_array_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", pickle.dumps(np.zeros(3)))
        archive.writestr("y.npy", pickle.dumps(np.zeros(3)))
    with pytest.raises(ValueError, match="evil.npz"):
        load_array_file(path)
