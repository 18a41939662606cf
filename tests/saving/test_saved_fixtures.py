"""Files written by ``save`` keep loading and predicting the same (the promise of CHANGES.md).

``distributional.ebm`` is a ``DistributionalConstraint.save`` file (format
``ebmclassifier.distributional``, ``format_version`` 1), ``pipeline.ebm`` an
``ebmclassifier.save`` of a ``Pipeline`` (format ``ebmclassifier.composite``, version 1), read by
the same ``load``.

tests/fixtures/saved holds fitted estimators saved by ``save`` (format ``ebmclassifier.saving``,
``format_version`` 1) with what they predicted when saved; ``make_fixtures.py`` there wrote
them and says when to rerun it. A change that ``load`` can no longer read back (a class named in
the file moved or renamed, a constructor parameter removed, a state-dict key renamed) fails here.
"""

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ebmclassifier import DistributionalConstraint, LatentStructureClassifier, load
from ebmclassifier.saving._composite import COMPOSITE_FORMAT
from ebmclassifier.saving._files import CONSTRAINT_FORMAT, FORMAT, FORMAT_VERSION

FIXTURES = Path(__file__).parents[1] / "fixtures" / "saved"
NAMES = ["ngebm", "ngebm_fd_conv", "jem", "latent_categorical", "latent_tree"]


def test_every_fixture_is_listed_and_of_the_promised_format():
    expected = sorted([*NAMES, "distributional", "pipeline"])
    assert sorted(p.stem for p in FIXTURES.glob("*.ebm")) == expected
    for name in NAMES:
        with zipfile.ZipFile(FIXTURES / f"{name}.ebm") as archive:
            metadata = json.loads(archive.read("metadata.json"))
        assert (metadata["format"], metadata["format_version"]) == (FORMAT, 1)
    with zipfile.ZipFile(FIXTURES / "distributional.ebm") as archive:
        metadata = json.loads(archive.read("distributional.json"))
    assert (metadata["format"], metadata["format_version"]) == (CONSTRAINT_FORMAT, 1)
    with zipfile.ZipFile(FIXTURES / "pipeline.ebm") as archive:
        metadata = json.loads(archive.read("composite.json"))
    assert (metadata["format"], metadata["format_version"]) == (COMPOSITE_FORMAT, 1)
    assert FORMAT_VERSION == 1  # a new version must keep reading version 1: add its fixtures


@pytest.mark.parametrize("name", NAMES)
def test_a_saved_estimator_loads_and_predicts_as_when_saved(name):
    clf = load(FIXTURES / f"{name}.ebm", device="cpu")
    with np.load(FIXTURES / f"{name}_expected.npz", allow_pickle=False) as expected:
        X = expected["X"]
        np.testing.assert_array_equal(clf.predict(X), expected["predict"])
        np.testing.assert_allclose(
            clf.predict_proba(X), expected["predict_proba"], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(clf.energy(X), expected["energy"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(clf.score_ood(X), expected["score_ood"], rtol=1e-4, atol=1e-5)
        if isinstance(clf, LatentStructureClassifier):
            np.testing.assert_array_equal(clf.predict_latent(X), expected["predict_latent"])
            np.testing.assert_allclose(
                clf.transform(X), expected["transform"], rtol=1e-5, atol=1e-6
            )


def test_a_saved_distributional_constraint_loads_and_predicts_as_when_saved():
    adapted = load(FIXTURES / "distributional.ebm", device="cpu")
    assert isinstance(adapted, DistributionalConstraint)
    assert adapted.priors == {"a": 0.5, "b": 0.3, "c": 0.2}
    with np.load(FIXTURES / "distributional_expected.npz", allow_pickle=False) as expected:
        X = expected["X"]
        np.testing.assert_array_equal(adapted.predict(X), expected["predict"])
        np.testing.assert_allclose(
            adapted.predict_proba(X), expected["predict_proba"], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(adapted.energy(X), expected["energy"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            adapted.score_ood(X), expected["score_ood"], rtol=1e-4, atol=1e-5
        )


def test_a_saved_pipeline_loads_and_predicts_as_when_saved():
    # ebmclassifier.save of a Pipeline (format ebmclassifier.composite, version 1): the
    # stand-in's class path and skops's format are part of what load keeps reading
    pipe = load(FIXTURES / "pipeline.ebm", device="cpu")
    assert [name for name, _ in pipe.steps] == ["standardscaler", "jemclassifier"]
    with np.load(FIXTURES / "pipeline_expected.npz", allow_pickle=False) as expected:
        X = expected["X"]
        np.testing.assert_array_equal(pipe.predict(X), expected["predict"])
        np.testing.assert_allclose(
            pipe.predict_proba(X), expected["predict_proba"], rtol=1e-5, atol=1e-6
        )
