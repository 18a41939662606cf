"""The estimators' ``repr``: scikit-learn's form, the parameters the user set, fitted or not."""

import inspect

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier
from ebmclassifier.nn import MLP


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        (NGEBMClassifier(), "NGEBMClassifier()"),
        (NGEBMClassifier(beta=0.5), "NGEBMClassifier()"),  # NG-EBM's default beta
        (NGEBMClassifier(beta=0.25), "NGEBMClassifier(beta=0.25)"),
        (NGEBMClassifier(max_epochs=50.0), "NGEBMClassifier(max_epochs=50.0)"),  # not the int
        (
            NGEBMClassifier(module=MLP, module__hidden_sizes=(8,), optimizer=torch.optim.SGD),
            "NGEBMClassifier(module=MLP, module__hidden_sizes=(8,), optimizer=SGD)",
        ),
        (JEMClassifier(sgld_steps=3, lr=0.01), "JEMClassifier(lr=0.01, sgld_steps=3)"),
        (
            LatentStructureClassifier(n_latent=4, gradient="ste"),
            "LatentStructureClassifier(gradient='ste', n_latent=4)",
        ),
    ],
)
def test_repr_shows_the_parameters_that_differ_from_their_defaults(estimator, expected):
    assert repr(estimator) == expected
    assert str(estimator) == expected
    assert repr(clone(estimator)) == expected


def test_the_fitted_repr_is_the_same_and_hides_nothing():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)), np.arange(30) % 3
    clf = NGEBMClassifier(beta=0.25, max_epochs=1, module__hidden_sizes=(8,), random_state=0)
    before = repr(clf)
    clf.fit(X, y)
    assert repr(clf) == before
    assert " ".join(before.split()) == (
        "NGEBMClassifier(beta=0.25, max_epochs=1, module__hidden_sizes=(8,), random_state=0)"
    )


def test_a_long_repr_puts_one_parameter_per_line_under_the_first():
    clf = NGEBMClassifier(
        beta=0.25, lr=0.01, max_epochs=3, module__hidden_sizes=(8, 8), random_state=0, verbose=1
    )
    lines = repr(clf).splitlines()
    assert lines[0] == "NGEBMClassifier(beta=0.25,"
    assert lines[-1] == "                verbose=1)"
    assert len(lines) == 6


def test_a_pipeline_prints_the_estimator_as_scikit_learn_does():
    pipe = make_pipeline(StandardScaler(), NGEBMClassifier(beta=0.0))
    assert "('ngebmclassifier', NGEBMClassifier(beta=0.0))" in repr(pipe)


@pytest.mark.parametrize("cls", [NGEBMClassifier, JEMClassifier, LatentStructureClassifier])
def test_the_signature_names_every_parameter_with_its_default(cls):
    # scikit-learn reads the defaults from the signature (the repr inside a Pipeline, the
    # notebook diagram); help() and the API reference show it
    signature = inspect.signature(cls)
    named = [name for name, p in signature.parameters.items() if p.kind is not p.VAR_KEYWORD]
    params = cls().get_params(deep=False)
    assert sorted(named) == sorted(params)
    for name in named:
        default = signature.parameters[name].default
        assert params[name] is default or params[name] == default, name
    assert list(signature.parameters)[-1] == "kwargs"  # module__* and the other routed ones
