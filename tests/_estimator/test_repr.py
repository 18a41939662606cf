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
    # scikit-learn reads the defaults from __init__'s signature (the repr inside a Pipeline,
    # the notebook diagram)
    signature = inspect.signature(cls.__init__)
    assert list(signature.parameters)[0] == "self"
    signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    named = [name for name, p in signature.parameters.items() if p.kind is not p.VAR_KEYWORD]
    params = cls().get_params(deep=False)
    assert sorted(named) == sorted(params)
    for name in named:
        default = signature.parameters[name].default
        assert params[name] is default or params[name] == default, name
    assert list(signature.parameters)[-1] == "kwargs"  # module__* and the other routed ones


@pytest.mark.parametrize("cls", [NGEBMClassifier, JEMClassifier, LatentStructureClassifier])
def test_help_opens_on_a_short_signature_of_the_classs_own_parameters(cls):
    # the issue: help(NGEBMClassifier) opened on ~1,100 characters of every engine parameter
    # (iterator_train=<class 'ebmclassifier._utils.data.ShuffledTensorBatchIterator'>, ...)
    # and then raw LaTeX
    import pydoc

    short = inspect.signature(cls)
    own = inspect.signature(cls.__init__).parameters
    shown = [name for name, p in short.parameters.items() if p.kind is not p.VAR_KEYWORD]
    assert set(shown) < set(own) and list(short.parameters)[-1] == "kwargs"
    assert {"lr", "max_epochs", "random_state"} <= set(shown)
    assert not {"iterator_train", "criterion", "dataset", "use_caching"} & set(shown)
    for name in shown:  # the defaults are the real ones
        assert repr(short.parameters[name].default) == repr(own[name].default), name
    text = str(short)
    assert len(text) < 550 and "<class" not in text and "_utils" not in text
    page = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    first_screen = "\n".join(page.splitlines()[:24])
    assert ".. math::" not in first_screen and "\\" not in first_screen
    assert "Parameters" in page  # every parameter still listed, below


def test_a_class_default_is_shown_by_its_name():
    from ebmclassifier._estimator.repr import short_signature

    class Net(NGEBMClassifier):
        def __init__(self, module=None, *, head=torch.nn.Linear, **kwargs):
            super().__init__(module, **kwargs)
            self.head = head

    assert "head=Linear" in str(inspect.signature(Net))
    assert inspect.signature(Net.__init__).parameters["head"].default is torch.nn.Linear
    assert str(short_signature(Net)) == str(inspect.signature(Net))
