"""compare standardizes the inputs for training and attacks in the data's own units."""

import numpy as np
import pytest
import torch

from ebmclassifier.attacks import pgd_attack
from ebmclassifier.datasets import load_named_dataset
from ebmclassifier.experiments.compare import (
    CompareConfig,
    Standardizer,
    run_comparison,
)
from ebmclassifier.metrics import adversarial_accuracy

from .compare_stand_ins import (
    SoftmaxRegression,
    recording_registry,
)


def test_standardizer_is_per_feature_for_flat_data_and_per_channel_for_images():
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(50, 6)).astype(np.float32)
    X[:, 0] = 1.0  # constant in training: kept at scale 1, not divided by zero
    Z = Standardizer(X).transform(X)
    assert Z.shape == X.shape and Z.dtype == np.float32
    np.testing.assert_allclose(Z, StandardScaler().fit_transform(X), atol=1e-5)
    assert np.all(Z[:, 0] == 0.0)

    images = rng.normal(size=(50, 3, 4, 5)).astype(np.float32) * [[[1.0]], [[5.0]], [[0.1]]]
    images += np.arange(3, dtype=np.float32)[:, None, None]
    Z = Standardizer(images).transform(images)
    for c in range(3):  # one mean and scale per channel, over samples and positions
        channel = images[:, c]
        np.testing.assert_allclose(
            Z[:, c], (channel - channel.mean()) / channel.std(), rtol=1e-4, atol=1e-4
        )
    layer = Standardizer(images).as_module("cpu")
    np.testing.assert_allclose(layer(torch.from_numpy(images)).numpy(), Z, atol=1e-5)


def test_models_train_on_standardized_inputs_and_are_attacked_in_raw_units():
    seen = {}
    registry = recording_registry(seen)
    config = CompareConfig(models=("ce",), seeds=1, max_epochs=3, n_attack=20, progress=False)
    results = run_comparison(config, registry=registry)
    # the fit part (80% of the training split) comes from the standardized training split
    X_train = load_named_dataset("digits").X_train
    standardized = {row.tobytes() for row in Standardizer(X_train).transform(X_train)}
    assert len(seen["X_fit"]) == len(X_train) - int(np.ceil(0.2 * len(X_train)))
    assert all(row.tobytes() in standardized for row in seen["X_fit"])
    assert results["data"]["standardized"] is True
    assert results["data"]["input_range"] == [0.0, 1.0]

    raw = CompareConfig(models=("ce",), seeds=1, max_epochs=3, n_attack=20, progress=False,
                        standardize=False)  # fmt: skip
    run_comparison(raw, registry=registry)
    assert seen["X_fit"].min() >= 0.0 and seen["X_fit"].max() <= 1.0


def test_attacks_through_the_standardization_stay_inside_the_raw_ball():
    rng = np.random.default_rng(0)
    X_raw = (rng.uniform(0, 1, size=(40, 6)) * np.linspace(0.1, 1, 6)).astype(np.float32)
    y = (X_raw[:, 0] > X_raw[:, 1]).astype(int)
    standardizer = Standardizer(X_raw)
    model = SoftmaxRegression(max_epochs=20).fit(standardizer.transform(X_raw), y)
    # what compare's attack differentiates: the standardization, then the model's network
    network = torch.nn.Sequential(standardizer.as_module("cpu"), model.module_)
    x = torch.from_numpy(X_raw)
    with torch.no_grad():  # the network on raw inputs is the model on standardized ones
        np.testing.assert_allclose(
            network(x).numpy(), model._logits(standardizer.transform(X_raw)).numpy(),
            atol=1e-5,
        )  # fmt: skip
    x_adv = pgd_attack(network, x, torch.from_numpy(y), eps=0.05, norm="linf",
                       input_min=0.0, input_max=1.0)  # fmt: skip
    # the ball is in raw units: every raw feature moves at most 0.05 (in standardized units
    # the low-variance features would have moved up to 0.05 / their std)
    assert float((x_adv - x).abs().max()) <= 0.05 + 1e-6
    assert float((x_adv - x).abs().max()) > 0.04
    assert float(x_adv.min()) >= 0.0 and float(x_adv.max()) <= 1.0
    # adversarial_accuracy with the standardization as preprocess runs that same attack
    acc = adversarial_accuracy(
        model,
        X_raw,
        y,
        [0.0, 0.05],
        random_state=0,
        preprocess=standardizer.as_module("cpu"),
        input_range=(0.0, 1.0),
    )
    seed = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))
    x_adv = pgd_attack(network, x, torch.from_numpy(y), eps=0.05, input_min=0.0, input_max=1.0,
                       generator=torch.Generator().manual_seed(seed))  # fmt: skip
    with torch.no_grad():
        expected = float((network(x_adv).argmax(1).numpy() == y).mean())
    clean = model.predict(standardizer.transform(X_raw))
    assert acc[1] == expected and acc[0] == float(np.mean(clean == y))


def test_images_from_a_file_are_standardized_per_channel_and_attacked_in_raw_units(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 60)
    X = rng.uniform(0, 0.5, size=(120, 2, 4, 4)).astype(np.float32)
    X[y == 1, 0, :2] += 0.5  # class 1: the top half of channel 0 is brighter
    X[:, 1] *= 10.0  # channel 1 on another scale
    path = tmp_path / "images.npz"
    np.savez(path, X=X, y=y)
    seen = {}
    registry = recording_registry(seen)
    config = CompareConfig(
        data=str(path), models=("ce",), seeds=1, max_epochs=30, epsilons=(0.0, 0.3),
        n_attack=None, progress=False,
    )  # fmt: skip
    results = run_comparison(config, registry=registry)
    channel_std = seen["X_fit"].std(axis=(0, 2, 3))
    np.testing.assert_allclose(channel_std, [1.0, 1.0], atol=0.15)  # both channels at scale 1
    (run,) = results["runs"]
    assert run["robust_accuracy"][0] == pytest.approx(run["accuracy"])  # eps=0: clean accuracy
    assert results["epsilons"] == [0.0, 0.3]
    assert results["data"]["input_range"][1] > 4.5  # raw units: channel 1 reaches 5
