"""The networks: WideResNet against the published size, its blocks, its use in an estimator."""

import numpy as np
import pytest
import torch
from torch import nn

from ebmclassifier import NGEBMClassifier
from ebmclassifier.nn import WideResNet


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
