"""Bad parameters are refused at fit, before training, with an error that names them (#14).

One regression test per case of the issue's "Parameters" family; tests/test_hostile_inputs.py
generates many more values of the same kinds.
"""

import numpy as np
import pytest
import torch
from skorch.callbacks import EpochScoring

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier._utils.parameters import InvalidParameterError, ParamChecker
from ebmclassifier.nn import MLP, ConvNet, WideResNet

from ..estimators import params

TINY = params("ngebm", batch_size=16)
JEM_TINY = params("jem", batch_size=16)


def _untrained(clf) -> bool:
    """Nothing was trained: no epoch in the history, no network."""
    return not getattr(clf, "history_", None) and getattr(clf, "module_", None) is None


def _refused(clf, X, y, *names: str) -> str:
    with pytest.raises(ValueError) as info:
        clf.fit(X, y)
    message = str(info.value)
    for name in names:
        assert name in message, message
    assert _untrained(clf)
    return message


# ----------------------------------------------------------------------------- the checker


def test_real_refuses_infinity_unless_asked():
    check = ParamChecker.of({"lr": float("inf"), "low": -np.inf, "cap": np.inf}, owner="Est")
    check.real("lr", 0.0, low_open=True)
    check.real("low", None, 0.0)
    check.real("cap", 0.0, finite=False)  # a parameter that documents inf
    with pytest.raises(InvalidParameterError) as info:
        check.raise_if_any()
    message = str(info.value)
    assert "The 'lr' parameter of Est must be a finite float in the range (0.0, inf). Got inf" in (
        message
    )
    assert "The 'low' parameter of Est must be a finite float in the range (-inf, 0.0]" in message
    assert "'cap'" not in message


def test_bounded_range_says_float_and_integers_refuse_bools():
    check = ParamChecker.of({"p": 2.0, "n": True, "sizes": (4, -3), "word": "ab"}, owner="Est")
    check.real("p", 0.0, 1.0)
    check.integer("n", 1)
    check.int_sequence("sizes")
    check.int_sequence("word")
    message = str(pytest.raises(InvalidParameterError, check.raise_if_any).value)
    assert "'p' parameter of Est must be a float in the range [0.0, 1.0]. Got 2.0" in message
    assert "'n' parameter of Est must be an int >= 1. Got True" in message
    assert "'sizes' parameter of Est must be a sequence of ints >= 1. Got (4, -3)" in message
    assert "'word' parameter of Est must be a sequence of ints >= 1. Got 'ab'" in message


# ----------------------------------------------------------------------------- inf


@pytest.mark.parametrize(
    "cls, name",
    [
        (NGEBMClassifier, "lr"),
        (NGEBMClassifier, "beta"),
        (NGEBMClassifier, "gamma"),
        (NGEBMClassifier, "fd_step"),
        (NGEBMClassifier, "energy_var_weight"),
        (JEMClassifier, "px_weight"),
        (JEMClassifier, "sgld_step_size"),
        (JEMClassifier, "sgld_noise"),
        (JEMClassifier, "max_energy"),
        (JEMClassifier, "sgld_clip"),
    ],
)
@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_infinite_real_parameter_is_named(small_blobs, cls, name, value):
    params = JEM_TINY if cls is JEMClassifier else TINY
    X, y = small_blobs
    message = _refused(cls(**{**params, name: value}), X, y, f"'{name}'")
    assert f"Got {value!r} instead." in message


def test_batch_size_true_is_not_one(small_blobs):
    X, y = small_blobs
    message = _refused(NGEBMClassifier(**{**TINY, "batch_size": True}), X, y, "'batch_size'")
    assert "Got True instead." in message


def test_sample_refuses_a_fractional_number_of_steps(small_blobs):
    X, y = small_blobs
    clf = JEMClassifier(**JEM_TINY).fit(X, y)
    with pytest.raises(ValueError, match=r"n_steps must be an int >= 0 or None\. Got 2\.7"):
        clf.sample(2, n_steps=2.7)
    assert clf.sample(2, n_steps=0).shape == (2, X.shape[1])


# ----------------------------------------------------------------------------- device


@pytest.mark.parametrize(
    "device, reason",
    [
        ("meta", "hold no data"),
        ("mps", "'mps' backend is not available"),
        ("tpu:0", "not a device torch knows"),
        ("cuda:99", "CUDA"),
    ],
)
def test_unusable_device_is_named_at_fit(small_blobs, device, reason):
    if device == "cuda:99" and torch.cuda.is_available():
        reason = "CUDA device(s)"
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    X, y = small_blobs
    message = _refused(NGEBMClassifier(**{**TINY, "device": device}), X, y, "'device'", reason)
    assert f"Got {device!r} instead." in message


def test_device_problem_is_reported_with_the_others(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**{**TINY, "device": "meta", "lr": np.inf, "optimizer": "adam"})
    message = _refused(clf, X, y, "'device'", "'lr'", "'optimizer'")
    assert len(message.splitlines()) == 3


# ----------------------------------------------------------------------------- what skorch builds


@pytest.mark.parametrize(
    "params, name",
    [
        (dict(optimizer="adam"), "'optimizer'"),
        (dict(module="mlp"), "'module'"),
        (dict(criterion="cross_entropy"), "'criterion'"),
        (dict(callbacks=5), "'callbacks'"),
        (dict(callbacks="print"), "'callbacks'"),
        (dict(callbacks=[5]), "'callbacks'"),
        (dict(train_split=0.2), "'train_split'"),
    ],
)
def test_objects_skorch_builds_are_checked_first(small_blobs, params, name):
    X, y = small_blobs
    _refused(NGEBMClassifier(**{**TINY, **params}), X, y, name)


def test_good_callbacks_pass(small_blobs):
    X, y = small_blobs
    for callbacks in ("disable", [EpochScoring("accuracy")], [("acc", EpochScoring("accuracy"))]):
        NGEBMClassifier(**{**TINY, "callbacks": callbacks}).fit(X, y)


@pytest.mark.parametrize(
    "module, params, name",
    [
        (None, dict(module__hidden_sizes=(-3,)), "'hidden_sizes' parameter of MLP"),
        (None, dict(module__hidden_sizes=(8, 0)), "'hidden_sizes' parameter of MLP"),
        (None, dict(module__dropout=1.5), "'dropout' parameter of MLP"),
        (ConvNet, dict(module__channels=(4, -1)), "'channels' parameter of ConvNet"),
        (ConvNet, dict(module__hidden_size=0), "'hidden_size' parameter of ConvNet"),
        (WideResNet, dict(module__widen_factor=0), "'widen_factor' parameter of WideResNet"),
    ],
)
def test_negative_layer_sizes_are_named(module, params, name):
    X = np.random.default_rng(0).normal(size=(20, 1, 8, 8)).astype(np.float32)
    y = np.arange(20) % 2
    if module is None:
        X = X.reshape(20, -1)
    clf = NGEBMClassifier(module, max_epochs=1, random_state=0, **params)
    _refused(clf, X, y, name)


def test_the_networks_check_their_own_arguments():
    with pytest.raises(ValueError, match="'hidden_sizes' parameter of MLP"):
        MLP(4, 3, hidden_sizes=(-3,))
    with pytest.raises(ValueError, match="'n_classes' parameter of ConvNet"):
        ConvNet((1, 8, 8), 0)
    with pytest.raises(ValueError, match="'dropout' parameter of WideResNet"):
        WideResNet((3, 8, 8), 2, depth=10, dropout=-0.1)
    assert MLP(4, 3, hidden_sizes=[])(torch.zeros(1, 4)).shape == (1, 3)  # no hidden layer


def test_a_generator_of_layer_sizes_is_refused_not_consumed_by_the_check():
    # the check used to empty it, and MLP then built no hidden layer
    with pytest.raises(ValueError, match="'hidden_sizes' .* a sequence of ints >= 1. Got <gen"):
        MLP(4, 3, hidden_sizes=(size for size in (8, 8)))


class _Linear(torch.nn.Module):
    def __init__(self, n_in=4, n_out=3, scale=1.0):
        super().__init__()
        self.lin = torch.nn.Linear(n_in, n_out)
        self.scale = scale

    def forward(self, x):
        return self.scale * self.lin(x)


def test_routed_parameter_the_network_does_not_take_is_named(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(_Linear, max_epochs=1, module__not_an_argument=1, module__scale=2.0)
    message = _refused(clf, X, y, "module__not_an_argument", "'not_an_argument'")
    assert "_Linear takes: n_in, n_out, scale" in message
    message = _refused(NGEBMClassifier(**{**TINY, "module__widht": 3}), X, y, "module__widht")
    assert "MLP takes: n_features, n_classes, hidden_sizes, dropout" in message


def test_module_with_the_wrong_input_size_is_named(small_blobs):
    X, y = small_blobs  # 4 features
    clf = NGEBMClassifier(_Linear, max_epochs=1, module__n_in=5)
    message = _refused_after_building(clf, X, y)
    assert "failed on one training sample of shape (4,)" in message
    assert "mat1 and mat2" in message  # torch's own words, kept as the cause


def test_module_with_the_wrong_number_of_outputs_is_named(small_blobs):
    X, y = small_blobs  # 3 classes
    clf = NGEBMClassifier(_Linear, max_epochs=1, module__n_out=5)
    message = _refused_after_building(clf, X, y)
    assert "returned an output of shape (1, 5)" in message
    assert "(1, n_classes) = (1, 3)" in message


def test_module_returning_no_tensor_is_named(small_blobs):
    class Pair(_Linear):
        def forward(self, x):
            return self.lin(x), x

    X, y = small_blobs
    message = _refused_after_building(NGEBMClassifier(Pair, max_epochs=1), X, y)
    assert "returned a tuple" in message


def _refused_after_building(clf, X, y) -> str:
    """The network is built (it is what is checked), but not one epoch is trained."""
    with pytest.raises(ValueError, match="'module' parameter") as info:
        clf.fit(X, y)
    assert not clf.history_  # built, but no epoch trained
    return str(info.value)


# ----------------------------------------------------------------------------- replay buffer


def test_replay_buffer_too_large_for_memory_is_named(small_blobs):
    X, y = small_blobs
    clf = JEMClassifier(**{**JEM_TINY, "buffer_size": 10**12})
    message = _refused(clf, X, y, "'buffer_size'", "GiB")
    assert "Got 1000000000000 instead." in message
