"""The ``augmentation=`` parameter of the estimators (issue #18)."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier.augment import Compose, GaussianNoise, HorizontalFlip, RandomCrop

X, Y = make_blobs(48, n_features=6, centers=3, random_state=0)
X = X.astype(np.float32)
IMAGES = np.random.default_rng(0).normal(size=(24, 1, 6, 6)).astype(np.float32)
IMAGE_Y = np.arange(24) % 2
SMALL = dict(batch_size=16, module__hidden_sizes=(8,), random_state=0)


class Recording:
    """An augmentation that adds 100 and remembers how often it was called."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return x + 100.0


def test_the_loss_sees_the_augmented_batch_and_inference_never_does():
    seen = []

    class Spy(NGEBMClassifier):
        def compute_loss(self, X, y, training):
            seen.append((training, float(X.min())))
            return super().compute_loss(X, y, training)

    augmentation = Recording()
    clf = Spy(augmentation=augmentation, max_epochs=2, **SMALL).fit(X, Y)
    assert all(low > 50 for training, low in seen if training)  # shifted by 100
    calls = augmentation.calls
    assert calls == 1 + 2 * 3  # the check at fit start, then 3 batches in each of 2 epochs
    for method in (clf.predict, clf.predict_proba, clf.energy, clf.score_ood):
        method(X)
    assert augmentation.calls == calls


def test_validation_batches_are_not_augmented():
    from skorch.dataset import ValidSplit

    seen = []

    class Spy(NGEBMClassifier):
        def compute_loss(self, X, y, training):
            seen.append((training, float(X.min())))
            return super().compute_loss(X, y, training)

    Spy(augmentation=Recording(), max_epochs=1, train_split=ValidSplit(4), **SMALL).fit(X, Y)
    assert any(not training for training, _ in seen)
    assert all(low < 50 for training, low in seen if not training)


@pytest.mark.parametrize("cls", [NGEBMClassifier, JEMClassifier])
def test_fits_with_augmentation_are_reproducible_and_resumable(cls):
    extra = dict(buffer_size=32, sgld_steps=2) if cls is JEMClassifier else {}
    params = dict(augmentation=GaussianNoise(std=0.3), **SMALL, **extra)
    a = cls(max_epochs=4, **params).fit(X, Y).predict_proba(X)
    b = cls(max_epochs=4, **params).fit(X, Y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    resumed = cls(max_epochs=2, **params).fit(X, Y)
    resumed.partial_fit(X, Y)
    np.testing.assert_array_equal(resumed.predict_proba(X), a)
    plain = cls(max_epochs=4, **SMALL, **extra).fit(X, Y).predict_proba(X)
    assert not np.array_equal(plain, a)  # the augmentation really trains


def test_image_augmentations_train_a_conv_net():
    augmentation = Compose([RandomCrop(padding=1), HorizontalFlip(), GaussianNoise(std=0.05)])
    clf = NGEBMClassifier(augmentation=augmentation, max_epochs=2, random_state=0)
    clf.fit(IMAGES, IMAGE_Y)
    assert clf.predict_proba(IMAGES).shape == (24, 2)


@pytest.mark.parametrize(
    "augmentation, error, match",
    [
        (lambda x: x[:, :3], ValueError, "same shape"),
        (lambda x: x * float("nan"), ValueError, "NaN or infinite"),
        (lambda x: x.double(), ValueError, "dtype"),
        ("flip", ValueError, "'augmentation' parameter"),
    ],
)
def test_bad_augmentation_fails_before_training(augmentation, error, match):
    clf = NGEBMClassifier(augmentation=augmentation, max_epochs=3, **SMALL)
    with pytest.raises(error, match=match):
        clf.fit(X, Y)
    assert not clf.history  # not trained: no epoch recorded (None before initialize)


def test_augmentation_is_a_parameter_that_clones():
    from sklearn.base import clone

    noise = GaussianNoise(std=0.1)
    clf = NGEBMClassifier(augmentation=noise)
    assert clf.get_params()["augmentation"] is noise
    assert clone(clf).get_params()["augmentation"] is not None
    assert torch.equal(clone(clf).augmentation(torch.zeros(1)) * 0, torch.zeros(1))
