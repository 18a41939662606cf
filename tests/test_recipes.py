"""The papers' protocol preset and its schedule: learning rates of a real fit vs a hand formula."""

import json

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from skorch.callbacks import Callback, LRScheduler

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier._utils.parameters import InvalidParameterError
from ebmclassifier.augment import paper_augmentation
from ebmclassifier.recipes import PAPER_DATASETS, paper_callbacks, paper_protocol


class LearningRateProbe(Callback):
    """Records the learning rate each training batch runs at (read before its step)."""

    def initialize(self):
        self.rates = []
        return self

    def on_batch_begin(self, net, training=False, **kwargs):
        if training:
            self.rates.append(net.optimizer_.param_groups[0]["lr"])


def _hand_schedule(lr, n_epochs, n_batches, warmup_iters, milestones, decay):
    """The staircase with warm-up, written out per step k of epoch e (both from 0)."""
    rates = []
    for e in range(n_epochs):
        for b in range(n_batches):
            k = e * n_batches + b
            warm = min(1.0, (k + 1) / warmup_iters) if warmup_iters > 1 else 1.0
            rates.append(lr * warm * decay ** sum(m <= e for m in milestones))
    return rates


@pytest.mark.parametrize(
    ("warmup_iters", "milestones"),
    [(7, [2, 4]), (12, [1]), (0, [3]), (5, [])],
    ids=["warmup-then-staircase", "decay-inside-warmup", "no-warmup", "no-decay"],
)
def test_fit_runs_the_hand_computed_schedule(warmup_iters, milestones):
    X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
    probe = LearningRateProbe()
    callbacks = paper_callbacks(warmup_iters, milestones, 0.3) + [("probe", probe)]
    clf = NGEBMClassifier(
        lr=0.01,
        max_epochs=6,
        batch_size=8,
        callbacks=callbacks,
        module__hidden_sizes=(8,),
        random_state=0,
    )
    clf.fit(X.astype(np.float32), y)  # 40 samples in batches of 8: 5 steps per epoch
    rates = dict(clf.callbacks_)["probe"].rates
    expected = _hand_schedule(0.01, 6, 5, warmup_iters, milestones, 0.3)
    np.testing.assert_allclose(rates, expected, rtol=1e-12)


def test_paper_callbacks_are_torch_schedulers_through_skorch():
    callbacks = dict(paper_callbacks())
    warmup, decay = callbacks["lr_warmup"], callbacks["lr_decay"]
    assert isinstance(warmup, LRScheduler) and isinstance(decay, LRScheduler)
    assert (warmup.policy.__name__, warmup.step_every) == ("LinearLR", "batch")
    assert warmup.kwargs == {"start_factor": 1e-3, "end_factor": 1.0, "total_iters": 999}
    assert (decay.policy.__name__, decay.step_every) == ("MultiStepLR", "epoch")
    assert decay.kwargs == {"milestones": [160, 180], "gamma": 0.3}
    assert [name for name, _ in paper_callbacks(warmup_iters=1, lr_milestones=[])] == []


def test_paper_callbacks_reject_bad_arguments_together():
    with pytest.raises(ValueError) as info:
        paper_callbacks(warmup_iters=-1, lr_milestones=[180, 160], lr_decay=0.0)
    message = str(info.value)
    assert "The 'warmup_iters' parameter of paper_callbacks must be an int >= 0. Got -1" in message
    milestones = "'lr_milestones' parameter of paper_callbacks must be a strictly increasing"
    assert milestones + " sequence of ints >= 1. Got [180, 160] instead." in message
    assert "'lr_decay' parameter of paper_callbacks must be a float in the range (0, 1]" in message
    assert isinstance(info.value, InvalidParameterError)  # as every bad parameter of the package
    with pytest.raises(ValueError, match="'lr_milestones' .* sequence of ints >= 1. Got 160"):
        paper_callbacks(lr_milestones=160)
    with pytest.raises(ValueError, match="'lr_milestones' .* sequence of ints >= 1. Got <gen"):
        paper_callbacks(lr_milestones=(m for m in (160, 180)))  # checking would consume it


def test_paper_callbacks_take_numpy_milestones():
    decay = dict(paper_callbacks(lr_milestones=np.array([160, 180])))["lr_decay"]
    assert decay.kwargs["milestones"] == [160, 180]
    assert all(type(m) is int for m in decay.kwargs["milestones"])


def test_paper_protocol_values_and_sources():
    protocol = paper_protocol()
    assert protocol["dataset"] == "cifar10" and protocol["n_classes"] == 10
    expected = {
        "network": "wrn-28-10",
        "max_epochs": 150,
        "batch_size": 64,
        "optimizer": "adam",
        "lr": 1e-4,
        "warmup_iters": 1000,
        "lr_milestones": [160, 180],
        "lr_decay": 0.3,
        "n_valid": 5000,
    }
    assert {key: protocol[key] for key in expected} == expected
    assert protocol["augmentation"] == {
        "padding": 4,
        "padding_mode": "reflect",
        "flip": True,
        "noise_std": 0.03,
    }
    assert "wgrathwohl/JEM" in protocol["sources"]["jem_code"]
    assert "chrissweet/NG-EBM" in protocol["sources"]["ngebm_code"]
    assert any("200" in note for note in protocol["notes"])  # the 150 / 200 epochs question


def test_paper_protocol_per_dataset_fresh_and_json_ready():
    assert [paper_protocol(d)["n_classes"] for d in PAPER_DATASETS] == [10, 100, 10]
    assert paper_protocol("svhn")["augmentation"]["flip"] is False
    protocol = paper_protocol()
    assert json.loads(json.dumps(protocol)) == protocol
    protocol["augmentation"]["flip"] = False
    protocol["lr_milestones"].append(1)
    assert paper_protocol()["augmentation"]["flip"] is True
    assert paper_protocol()["lr_milestones"] == [160, 180]
    with pytest.raises(ValueError, match="Unknown dataset 'mnist' .* 'cifar10', 'cifar100'"):
        paper_protocol("mnist")


def test_paper_protocol_feeds_the_library():
    protocol = paper_protocol()
    augment = paper_augmentation(**protocol["augmentation"])
    assert repr(augment) == repr(paper_augmentation())
    ngebm = NGEBMClassifier(**protocol["ngebm"])
    jem = JEMClassifier(**protocol["jem"])
    assert ngebm.get_params()["energy_var_weight"] == 0.5
    assert jem.get_params()["buffer_init"] == "uniform"
    schedule = {k: protocol[k] for k in ("warmup_iters", "lr_milestones", "lr_decay")}
    assert len(paper_callbacks(**schedule)) == 2
