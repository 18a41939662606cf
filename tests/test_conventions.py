"""Conventions a newcomer relies on: the partial_fit hint for new classes, typed package."""

from pathlib import Path

import numpy as np
import pytest

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_classes():
    rng = np.random.default_rng(0)
    return rng.normal(size=(20, 3)).astype(np.float32), np.arange(20) % 2


@pytest.mark.parametrize("cls", [NGEBMClassifier, JEMClassifier])
def test_new_labels_in_partial_fit_name_class_incremental(cls, two_classes):
    X, y = two_classes
    clf = cls(max_epochs=1, module__hidden_sizes=(8,), random_state=0).partial_fit(X, y)
    hint = rf"set {cls.__name__}\(class_incremental=True\) to add new classes"
    with pytest.raises(ValueError, match=r"labels \[2\] that were not seen.*" + hint):
        clf.partial_fit(X, y + 1)
    with pytest.raises(ValueError, match=r"classes are fixed by the first call.*" + hint):
        clf.partial_fit(X, y, classes=[0, 1, 2])
    clf.set_params(class_incremental=True).partial_fit(X, y + 1)  # what the hint says works
    assert clf.classes_.tolist() == [0, 1, 2]


def test_an_estimator_without_class_incremental_gets_no_such_hint(two_classes):
    X, y = two_classes
    clf = LatentStructureClassifier(max_epochs=1, random_state=0).partial_fit(X, y)
    with pytest.raises(ValueError, match="were not seen") as error:
        clf.partial_fit(X, y + 1)
    assert "class_incremental" not in str(error.value)


def test_the_package_ships_py_typed():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the dev extra installs tomli
        import tomli as tomllib

    assert (ROOT / "ebmclassifier" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["ebmclassifier"]
