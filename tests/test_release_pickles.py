"""Models pickled by release 0.1 (before the redesign of issue #13) load and predict identically.

The pickles in tests/fixtures/release_0_1 were written by that release's code
(``make_pickles.py`` there says how); they are the library's own files, so unpickling them here
is safe. A class moved or renamed without an alias at its old import path fails this test.
"""

import pickle
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "release_0_1"
NAMES = ["ngebm", "ngebm_fd_conv", "jem", "latent_categorical", "latent_tree"]


@pytest.mark.parametrize("name", NAMES)
def test_release_pickle_loads_and_predicts_identically(name):
    clf = pickle.loads((FIXTURES / f"{name}.pkl").read_bytes())
    with np.load(FIXTURES / f"{name}_expected.npz", allow_pickle=False) as expected:
        X = expected["X"]
        np.testing.assert_array_equal(clf.predict(X), expected["predict"])
        np.testing.assert_allclose(
            clf.predict_proba(X), expected["predict_proba"], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(clf.energy(X), expected["energy"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(clf.score_ood(X), expected["score_ood"], rtol=1e-4, atol=1e-5)
        if "predict_latent" in expected.files:
            np.testing.assert_array_equal(clf.predict_latent(X), expected["predict_latent"])
            np.testing.assert_allclose(
                clf.transform(X), expected["transform"], rtol=1e-5, atol=1e-6
            )
