"""Metrics and attacks on a module: integer inputs refused clearly, every mode given back."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from ebmclassifier import NGEBMClassifier, ProductOfExperts
from ebmclassifier.attacks import pgd_attack, robust_accuracy
from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.latent.classifier import LatentStructureClassifier
from ebmclassifier.metrics import adversarial_accuracy, ece_scorer, mce_scorer

X, y = make_blobs(40, n_features=4, centers=3, random_state=0)


@pytest.fixture(scope="module")
def tree_model():
    tokens, labels, _ = make_latent_trees(
        32, min_length=2, max_length=4, n_values=3, random_state=0
    )
    small = dict(encoder__embedding_dim=4, encoder__hidden_size=4, encoder__arc_size=4,
                 decoder__embedding_dim=4, decoder__hidden_size=4)  # fmt: skip
    clf = LatentStructureClassifier(
        structure="dependency_tree", max_epochs=1, batch_size=16, random_state=0, **small
    )
    return clf.fit(tokens, labels), tokens, labels


@pytest.fixture(scope="module")
def fitted():
    return NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0).fit(X, y)


def test_adversarial_accuracy_refuses_token_ids(tree_model):
    clf, tokens, labels = tree_model
    # it raised "IndexError: index out of range in self", perturbing the ids as features
    with pytest.raises(ValueError, match=r"network.*holds integers \(dtype torch.int64\).*token"):
        adversarial_accuracy(clf, tokens, labels, epsilons=[0.1])


def test_pgd_refuses_integer_inputs(tree_model):
    clf, tokens, labels = tree_model
    ids = torch.as_tensor(tokens)
    with pytest.raises(ValueError, match=r"holds integers \(dtype torch.int64\).*no gradient"):
        pgd_attack(clf.module_, ids, torch.as_tensor(labels), eps=0.1)
    with pytest.raises(ValueError, match=r"holds integers \(dtype int64\)"):
        robust_accuracy(clf.module_, tokens, labels, [0.1])


def _modes(estimator):
    return [m.training for m in estimator.module_.modules()]


def _mixed(estimator):
    """The network in training mode, but for its first layer, in evaluation mode."""
    estimator.module_.train()
    first = next(m for m in estimator.module_.modules() if isinstance(m, torch.nn.Linear))
    first.eval()
    return _modes(estimator)


METRICS = {
    "adversarial_accuracy": lambda est: adversarial_accuracy(est, X, y, [0.0, 0.5], steps=2),
    "ece_scorer": lambda est: ece_scorer(est, X, y),
    "mce_scorer": lambda est: mce_scorer(est, X, y),
}


@pytest.mark.parametrize("metric", sorted(METRICS))
@pytest.mark.parametrize("start", ["train", "eval", "mixed"])
def test_metrics_give_each_module_its_mode_back(fitted, metric, start):
    # adversarial_accuracy left a network in training mode in evaluation mode
    if start == "mixed":
        before = _mixed(fitted)
    else:
        fitted.module_.train(start == "train")
        before = _modes(fitted)
    METRICS[metric](fitted)
    assert _modes(fitted) == before
    assert any(before) == (start != "eval")  # the case is the one it says


def test_a_scorer_gives_the_experts_their_modes_back(fitted):
    ensemble = ProductOfExperts([("a", fitted)]).fit(X, y)
    expert = ensemble.estimators_[0]
    before = _mixed(expert)
    ece_scorer(ensemble, X, y)
    assert _modes(expert) == before


@pytest.mark.parametrize("attack", ["pgd_attack", "robust_accuracy"])
def test_attacks_give_each_submodule_its_mode_back(fitted, attack):
    before = _mixed(fitted)
    xt = torch.as_tensor(X, dtype=torch.float32)
    if attack == "pgd_attack":
        pgd_attack(fitted.module_, xt, torch.as_tensor(y), eps=0.1, steps=2)
    else:
        robust_accuracy(fitted.module_, X.astype(np.float32), y, [0.1], steps=2)
    assert _modes(fitted) == before
