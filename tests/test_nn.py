"""The networks: WideResNet against the published size, its blocks, its use in an estimator."""

import numpy as np
import pytest
import torch
from torch import nn

from ebmclassifier import NGEBMClassifier
from ebmclassifier.nn import MLP, ConvNet, WideResNet


def _n_parameters(module, weights_only=False):
    return sum(p.numel() for p in module.parameters() if not weights_only or p.dim() > 1)


def test_wrn_28_10_has_the_published_size():
    # Zagoruyko & Komodakis (2016), WRN-28-10 on CIFAR-10: 36.5M parameters; with batch-norm
    # exactly 36,479,194 (convolution and linear weights 36,461,232, batch-norm scales and
    # shifts 17,952, logits bias 10)
    assert _n_parameters(WideResNet((3, 32, 32), 10, batch_norm=True)) == 36_479_194
    without = WideResNet((3, 32, 32), 10)
    assert _n_parameters(without, weights_only=True) == 36_461_232
    assert not any(isinstance(m, nn.BatchNorm2d) for m in without.modules())


def test_blocks_shapes_and_per_sample_independence():
    net = WideResNet((3, 16, 16), 7, depth=10, widen_factor=2).eval()
    x = torch.randn(4, 3, 16, 16)
    logits = net(x)
    assert logits.shape == (4, 7)
    # without batch-norm a sample's logits do not depend on the rest of the batch
    torch.testing.assert_close(net(x[:1]), logits[:1])
    widths = [m.out_channels for m in net.features if isinstance(m, nn.Conv2d)]
    assert widths == [16]
    strides = [block.conv1.stride for block in list(net.features)[1:]]
    assert strides == [(1, 1), (2, 2), (2, 2)]  # depth 10: one block per group


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"depth": 27}, "6 n \\+ 4"),
        ({"activation": "tanh"}, "activation must be one of"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WideResNet((3, 8, 8), 10, **kwargs)
    with pytest.raises(ValueError, match="images"):
        WideResNet((3, 8), 10)


def test_an_estimator_trains_a_small_wide_resnet():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3, 8, 8)).astype(np.float32)
    y = (X[:, 0].mean(axis=(1, 2)) > 0).astype(int)
    clf = NGEBMClassifier(
        module=WideResNet, module__depth=10, module__widen_factor=1, max_epochs=3,
        random_state=0,
    ).fit(X, y)  # fmt: skip
    assert isinstance(clf.module_, WideResNet)
    assert clf.module_.head[-1].out_features == 2
    assert np.isfinite(clf.predict_proba(X)).all()


# ----------------------------------------------------------------------------- penultimate features

_NETWORKS = {
    "mlp": (lambda: MLP(6, 3, hidden_sizes=(8, 5)), (6,)),
    "mlp_dropout": (lambda: MLP(6, 3, hidden_sizes=(8,), dropout=0.5).eval(), (6,)),
    "mlp_linear": (lambda: MLP(6, 3, hidden_sizes=()), (6,)),
    "conv1d": (lambda: ConvNet((2, 12), 4, channels=(4,), hidden_size=7), (2, 12)),
    "conv2d": (lambda: ConvNet((1, 8, 8), 4, channels=(4, 6), hidden_size=5), (1, 8, 8)),
    "wrn": (lambda: WideResNet((3, 8, 8), 4, depth=10, widen_factor=1), (3, 8, 8)),
    "wrn_bn": (
        lambda: WideResNet((3, 8, 8), 4, depth=10, widen_factor=1, batch_norm=True).eval(),
        (3, 8, 8),
    ),
}


def _sequential_forward(net, x):
    """The forward pass as release 0.1 wrote it, straight through the containers."""
    return net.net(x) if isinstance(net, MLP) else net.head(net.features(x))


@pytest.mark.parametrize("name", sorted(_NETWORKS))
def test_forward_is_the_last_layer_of_the_penultimate_features(name):
    make, shape = _NETWORKS[name]
    torch.manual_seed(0)
    net = make()
    x = torch.randn(5, *shape)
    features = net.penultimate(x)
    assert features.shape == (5, net.last_layer.in_features)
    assert isinstance(net.last_layer, nn.Linear)
    logits = net(x)
    assert torch.equal(net.last_layer(features), logits)
    assert torch.equal(_sequential_forward(net, x), logits)  # the same numbers as before


def test_state_dict_keys_are_unchanged():
    # the keys that files written by save hold (tests/fixtures/saved): they must load
    assert list(MLP(6, 3, hidden_sizes=(8, 5)).state_dict()) == [
        "net.1.weight", "net.1.bias", "net.3.weight", "net.3.bias", "net.5.weight", "net.5.bias",
    ]  # fmt: skip
    assert list(ConvNet((1, 8), 3, channels=(4,), hidden_size=5).state_dict()) == [
        "features.0.weight", "features.0.bias", "features.2.weight", "features.2.bias",
        "head.1.weight", "head.1.bias", "head.3.weight", "head.3.bias",
    ]  # fmt: skip
    keys = list(WideResNet((3, 8, 8), 4, depth=10, widen_factor=1).state_dict())
    assert keys[:2] == ["features.0.weight", "features.0.bias"]
    assert keys[-2:] == ["head.4.weight", "head.4.bias"]


# ---------------------------------------------------------------- batch-norm in a user's network


class _BatchNormNet(nn.Module):
    """A user's MLP with batch-norm, as the issue's user wrote it."""

    def __init__(self, n_features, n_classes):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, 16), nn.BatchNorm1d(16), nn.SiLU(), nn.Linear(16, n_classes)
        )

    def forward(self, x):
        return self.net(x)


def _batch_norm_warnings(clf, X, y):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X, y)
    return [str(w.message) for w in caught if "batch-norm" in str(w.message)]


def test_a_users_batch_norm_warns_at_fit_with_the_reason_and_the_fix():
    # the issue: the docstring says not to use batch-norm, and a network with it trained
    # silently
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(64, 4)).astype(np.float32), np.arange(64) % 3
    (message,) = _batch_norm_warnings(
        NGEBMClassifier(module=_BatchNormNet, max_epochs=1, random_state=0), X, y
    )
    assert message.startswith(
        "The network of NGEBMClassifier (_BatchNormNet, from the 'module' parameter) has "
        "batch-norm (BatchNorm1d), which couples the samples of a training batch"
    )
    assert "dE/dx" in message and "torch.nn.GroupNorm, torch.nn.LayerNorm" in message
    # without an energy term batch-norm is ordinary cross-entropy training: no warning
    quiet = NGEBMClassifier(module=_BatchNormNet, beta=0.0, max_epochs=1, random_state=0)
    assert _batch_norm_warnings(quiet, X, y) == []
    assert _batch_norm_warnings(NGEBMClassifier(max_epochs=1, random_state=0), X, y) == []


def test_every_kind_of_batch_norm_is_found_and_the_librarys_own_nets_pass():
    from types import SimpleNamespace

    from ebmclassifier.nn import batch_norm_layers, check_batch_norm

    layers = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.SyncBatchNorm(4), nn.LazyBatchNorm2d(),
        nn.BatchNorm3d(4), nn.GroupNorm(2, 4), nn.LayerNorm(4), nn.InstanceNorm2d(4),
    )  # fmt: skip
    assert batch_norm_layers(layers) == [
        "BatchNorm2d", "SyncBatchNorm", "LazyBatchNorm2d", "BatchNorm3d"
    ]  # fmt: skip
    energy = SimpleNamespace(_has_energy_term=lambda: True)
    with pytest.warns(UserWarning, match=r"has batch-norm \(BatchNorm2d, SyncBatchNorm"):
        check_batch_norm(SimpleNamespace(module_=layers, **vars(energy)))
    # WideResNet(batch_norm=True), the original WRN, is asked for by name: no warning
    wrn = WideResNet((1, 8, 8), 3, depth=10, widen_factor=1, batch_norm=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_batch_norm(SimpleNamespace(module_=wrn, **vars(energy)))
        check_batch_norm(SimpleNamespace(module_=layers))  # no energy term (latent classifier)
