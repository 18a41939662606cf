"""Defaults that work without tuning, and the demo's claims (one seed; the demo runs three)."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

from ebmclassifier import NGEBMClassifier
from ebmclassifier.cli import main
from ebmclassifier.experiments.demo import format_demo, run_demo


@pytest.mark.slow
def test_default_accuracy_is_that_of_mlpclassifier(digits_split):
    X_train, X_test, y_train, y_test = digits_split
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # its default 200 iterations
        reference = MLPClassifier(random_state=0).fit(X_train, y_train).score(X_test, y_test)
    ours = NGEBMClassifier(random_state=0).fit(X_train, y_train).score(X_test, y_test)
    assert ours >= reference - 0.01, (ours, reference)


@pytest.fixture(scope="module")
def demo_rows():
    return run_demo(seeds=[0], progress=False)


@pytest.mark.slow
def test_ngebm_keeps_accuracy_and_detects_noise(demo_rows):
    ce, ngebm = demo_rows
    assert ce["model"].startswith("ce") and ngebm["model"].startswith("ngebm")
    assert ngebm["accuracy"] >= ce["accuracy"] - 0.01
    assert ngebm["auroc_approx_mass"] >= 0.9
    # The paper's point: for a cross-entropy model the same score is useless (here, inverted).
    assert ce["auroc_approx_mass"] < 0.5


@pytest.mark.slow
def test_demo_table_and_cli(demo_rows, capsys):
    table = format_demo(demo_rows)
    assert "ngebm (beta=0.5)" in table and "auroc_approx_mass" in table
    assert main(["demo", "--seeds", "1", "--epochs", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "ce (beta=0)" in out and "median [min-max] over seeds [0]" in out
    assert np.isfinite([r["ece"] for r in demo_rows]).all()
