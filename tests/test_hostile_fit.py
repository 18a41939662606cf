"""Hostile parameters, sample shapes and labels at fit and predict (issue #26).

Regression tests for the cases found by hand (a learning rate torch cannot convert, a sample
shape told as a feature count, labels mixing integers and strings), then property families:
numeric parameters (huge, tiny, infinite, NaN, negative) give a fit that works or one of the
documented errors, and a learning rate outside (0, 1e30] is refused before training; predict
and partial_fit on samples of another shape are a ``ValueError`` that names both shapes.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ebmclassifier import (
    DivergenceError,
    JEMClassifier,
    LatentStructureClassifier,
    NGEBMClassifier,
)

from .test_hostile_inputs import ESTIMATORS, FAST, _tiny

RNG = np.random.default_rng(0)
X_GOOD = RNG.normal(size=(24, 4)).astype(np.float32)
Y_GOOD = np.arange(24) % 3


def _not_trained(clf) -> bool:
    return not hasattr(clf, "module_") and not getattr(clf, "history_", None)


# ----------------------------------------------------------------------------- regressions


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("lr", [1e300, 3.4e38, 3.5e37, 1.1e30])
def test_a_learning_rate_torch_cannot_apply_is_refused_before_training(cls, lr):
    # Adam's first step applies lr / (1 - beta1) = 10 lr to float32 weights: from about
    # 3.4e37 on, torch raised "value cannot be converted to type float without overflow"
    clf = _tiny(cls, lr=lr)
    with pytest.raises(ValueError, match=r"'lr' parameter .* range \(0.0, 1e\+30\]"):
        clf.fit(X_GOOD, Y_GOOD)
    assert _not_trained(clf)


def test_optimizer_lr_is_checked_as_lr():
    clf = _tiny(NGEBMClassifier, optimizer=torch.optim.SGD, optimizer__lr=1e300)
    with pytest.raises(ValueError, match="'optimizer__lr' parameter"):
        clf.fit(X_GOOD, Y_GOOD)
    assert _not_trained(clf)
    _tiny(NGEBMClassifier, optimizer__lr=0.01).fit(X_GOOD, Y_GOOD)  # a good one still trains


def test_the_largest_learning_rate_accepted_reaches_the_optimizer():
    # 1e30 passes the check; torch can apply it (the weights overflow: a DivergenceError)
    clf = _tiny(NGEBMClassifier, lr=1e30)
    with pytest.raises(FloatingPointError, match="lr=1e\\+30"):
        clf.fit(X_GOOD, Y_GOOD)


@pytest.mark.parametrize(
    "cls, name",
    [
        (NGEBMClassifier, "gamma"),
        (NGEBMClassifier, "energy_var_weight"),
        (JEMClassifier, "px_weight"),
    ],
)
def test_an_int_beyond_64_bits_is_refused_naming_the_float_to_pass(cls, name):
    # found by the parameter family below: torch raised OverflowError "int too big to convert"
    clf = _tiny(cls, **{name: 2**64})
    with pytest.raises(ValueError, match=f"'{name}' parameter .* int of 64 bits.*1.84467"):
        clf.fit(X_GOOD, Y_GOOD)
    assert _not_trained(clf)


@pytest.fixture(scope="module")
def flat_and_nested():
    flat = _tiny(NGEBMClassifier).fit(X_GOOD, Y_GOOD)
    nested = NGEBMClassifier(
        max_epochs=1, batch_size=8, random_state=0, module__channels=(2,), module__hidden_size=4
    ).fit(X_GOOD[:, None, :], Y_GOOD)  # a ConvNet
    return flat, nested


def test_predict_with_another_sample_shape_names_both_shapes_and_the_reshape(flat_and_nested):
    # it said "X has 1 features, but NGEBMClassifier is expecting 4 features as input"
    flat, nested = flat_and_nested
    with pytest.raises(ValueError, match=r"samples of shape \(1, 4\).*fitted on samples of "
                       r"shape \(4,\).*X.reshape\(len\(X\), 4\)"):  # fmt: skip
        flat.predict(X_GOOD[:, None, :])
    with pytest.raises(ValueError, match=r"samples of shape \(4,\).*fitted on samples of "
                       r"shape \(1, 4\).*X.reshape\(len\(X\), 1, 4\)"):  # fmt: skip
        nested.predict_proba(X_GOOD)
    with pytest.raises(ValueError, match=r"hold 2 values where 4 are expected"):
        flat.predict(X_GOOD[:, None, :2])
    # two 2-D arrays keep scikit-learn's own message
    with pytest.raises(ValueError, match="X has 3 features, but NGEBMClassifier is expecting 4"):
        flat.predict(X_GOOD[:, :3])
    # the reshape the message gives works
    np.testing.assert_array_equal(
        nested.predict(X_GOOD.reshape(len(X_GOOD), 1, 4)), nested.predict(X_GOOD[:, None, :])
    )


def test_partial_fit_with_another_sample_shape_names_both_shapes(flat_and_nested):
    _, nested = flat_and_nested
    with pytest.raises(ValueError, match=r"samples of shape \(4,\).*shape \(1, 4\)"):
        nested.partial_fit(X_GOOD, Y_GOOD)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_labels_mixing_integers_and_strings_name_the_types_and_the_fix(cls):
    # it was scikit-learn's "Unknown label type: unknown ... regression target"
    y = np.array([1, "a", 2] * 8, dtype=object)
    clf = _tiny(cls)
    with pytest.raises(ValueError, match=r"mixes labels of types int, str .*astype\(str\)"):
        clf.fit(X_GOOD, y)
    assert _not_trained(clf)
    # the fix the message gives trains
    assert set(_tiny(cls).fit(X_GOOD, y.astype(str)).classes_) == {"1", "2", "a"}


# ----------------------------------------------------------------------------- properties

NUMERIC = [
    (NGEBMClassifier, "lr"),
    (NGEBMClassifier, "beta"),
    (NGEBMClassifier, "gamma"),
    (NGEBMClassifier, "fd_step"),
    (NGEBMClassifier, "energy_var_weight"),
    (JEMClassifier, "lr"),
    (JEMClassifier, "px_weight"),
    (JEMClassifier, "sgld_step_size"),
    (JEMClassifier, "sgld_noise"),
    (JEMClassifier, "reinit_freq"),
    (JEMClassifier, "max_energy"),
    (LatentStructureClassifier, "lr"),
    (LatentStructureClassifier, "step_size"),
    (LatentStructureClassifier, "temperature"),
]
extreme_numbers = st.one_of(
    st.sampled_from([1e300, 3.5e38, 3.4e38, 1e30, 1e-300, 5e-324, 0.0, -0.0, -1e300]),
    st.sampled_from([np.nan, np.inf, -np.inf]),
    st.floats(min_value=-1e308, max_value=1e308),
    st.integers(-(2**70), 2**70),
)


# Each family runs its hypothesis examples inside a plain test that counts their outcomes and
# asserts how many it generated and that each outcome it claims occurred.


def test_extreme_numeric_parameters_train_or_raise_a_documented_error():
    # never torch's RuntimeError or another type: a ValueError/TypeError naming the parameter
    # before training, or the DivergenceError (a FloatingPointError) of a diverged fit
    outcomes = Counter()

    examples = settings.default.max_examples  # each example fits: the profile's number

    @settings(FAST, max_examples=examples)
    @given(case=st.sampled_from(NUMERIC), value=extreme_numbers)
    def family(case, value):
        cls, name = case
        clf = _tiny(cls, **{name: value})
        try:
            clf.fit(X_GOOD, Y_GOOD)
        except (ValueError, TypeError) as err:
            assert f"'{name}'" in str(err), err
            assert _not_trained(clf)
            outcomes["refused"] += 1
        except DivergenceError as err:
            assert "diverg" in str(err), err
            outcomes["diverged"] += 1
        else:
            assert clf.predict(X_GOOD).shape == Y_GOOD.shape
            outcomes["trained"] += 1

    family()
    assert sum(outcomes.values()) == examples, outcomes
    assert outcomes["refused"] > 0 and outcomes["trained"] > 0, outcomes


def test_a_learning_rate_outside_its_range_is_refused_before_training():
    refused = []

    @settings(FAST, max_examples=50)
    @given(
        cls=st.sampled_from(ESTIMATORS),
        lr=st.one_of(
            st.floats(min_value=1e30, exclude_min=True, allow_infinity=True),
            st.floats(max_value=0.0, allow_infinity=True),
            st.just(np.nan),
        ),
        via_optimizer=st.booleans(),
    )
    def family(cls, lr, via_optimizer):
        name = "optimizer__lr" if via_optimizer else "lr"
        clf = _tiny(cls, **{name: lr})
        with pytest.raises(ValueError, match=f"'{name}' parameter"):
            clf.fit(X_GOOD, Y_GOOD)
        assert _not_trained(clf)
        refused.append((cls, name))

    family()
    assert len(refused) == 50
    assert {cls for cls, _ in refused} == set(ESTIMATORS)
    assert {name for _, name in refused} == {"lr", "optimizer__lr"}


sample_shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


def test_predict_on_any_other_sample_shape_names_both_shapes(flat_and_nested):
    outcomes = Counter()

    @settings(FAST, max_examples=100)
    @given(shape=sample_shapes, n=st.integers(1, 4), method=st.sampled_from(["predict", "energy"]))
    def family(shape, n, method):
        for clf in flat_and_nested:
            X = np.ones((n, *shape), np.float32)
            if shape == clf.input_shape_:
                assert getattr(clf, method)(X).shape == (n,)
                outcomes["predicted"] += 1
                continue
            with pytest.raises(ValueError) as info:
                getattr(clf, method)(X)
            message = str(info.value)
            if len(shape) == 1 and len(clf.input_shape_) == 1:
                assert f"X has {shape[0]} features" in message  # scikit-learn's, for 2-D arrays
                outcomes["scikit-learn's message"] += 1
            else:
                assert f"samples of shape {shape}" in message
                assert f"fitted on samples of shape {clf.input_shape_}" in message
                reshapable = np.prod(shape) == np.prod(clf.input_shape_)
                assert ("reshape" in message) == reshapable
                outcomes["reshape named" if reshapable else "shapes named"] += 1

    family()
    assert sum(outcomes.values()) == 2 * 100, outcomes
    assert len(outcomes) == 4, outcomes  # every branch above ran


def test_labels_of_mixed_types_are_a_value_error_naming_them():
    outcomes = Counter()

    def of(elements):
        return st.lists(elements, min_size=24, max_size=24)

    mixed = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "1"]), st.floats(0, 2))
    one_type = of(st.integers(-3, 3)) | of(st.sampled_from(["a", "b", "1"]))

    @settings(FAST, max_examples=50)
    @given(labels=of(mixed) | one_type)
    def family(labels):
        y = np.empty(24, dtype=object)
        y[:] = labels
        has_str = any(isinstance(v, str) for v in labels)
        clf = _tiny(NGEBMClassifier)
        if has_str and not all(isinstance(v, str) for v in labels):
            with pytest.raises(ValueError, match="mixes labels of types"):
                clf.fit(X_GOOD, y)
            assert _not_trained(clf)
            outcomes["mixed: refused"] += 1
            return
        try:  # numbers alone or strings alone: not refused as mixed
            clf.fit(X_GOOD, y)
        except ValueError as err:  # scikit-learn's for one class or continuous floats
            assert "mixes labels" not in str(err), err
            outcomes["one type: other error"] += 1
        else:
            assert set(clf.classes_.tolist()) == set(labels)
            outcomes["one type: trained"] += 1

    family()
    assert sum(outcomes.values()) == 50, outcomes
    assert outcomes["mixed: refused"] > 0 and outcomes["one type: trained"] > 0, outcomes
