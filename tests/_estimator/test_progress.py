"""What a fit prints at each ``verbose``: nothing, a progress bar, or skorch's epoch table."""

import numpy as np
import pytest
from skorch.dataset import ValidSplit

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier._estimator.progress import EpochTable, ProgressBar


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(60, 4)).astype(np.float32), np.arange(60) % 3


def fit(capsys, data, **params):
    clf = NGEBMClassifier(max_epochs=3, module__hidden_sizes=(8,), random_state=0, **params)
    clf.fit(*data)
    out, err = capsys.readouterr()
    return clf, out, err.split("\r")[-1].strip()


def test_verbose_0_prints_nothing(capsys, data):
    _, out, err = fit(capsys, data, verbose=0)
    assert out == "" and err == ""


def test_verbose_1_shows_a_bar_with_the_epoch_the_loss_and_the_time_left(capsys, data):
    clf, out, bar = fit(capsys, data, verbose=1, train_split=ValidSplit(0.2))
    assert out == ""  # no epoch table
    loss = clf.history[-1, "train_loss"]
    assert bar.startswith("NGEBMClassifier: 100%|")
    assert f"epoch 3/3, train_loss {loss:.4f}, valid_loss" in bar
    assert "<00:00" in bar  # elapsed<remaining
    assert dict(clf.callbacks_)["progress_bar"].bar_ is None  # closed at the end of the fit


def test_verbose_2_prints_skorchs_epoch_table_and_no_bar(capsys, data):
    clf, out, err = fit(capsys, data, verbose=2)
    lines = out.splitlines()
    assert lines[0].split() == ["epoch", "train_loss", "dur"]
    assert [line.split()[0] for line in lines[2:]] == ["1", "2", "3"]
    assert err == ""


def test_each_partial_fit_has_its_own_bar_over_its_epochs(capsys, data):
    clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0, verbose=1)
    clf.partial_fit(*data)
    clf.partial_fit(*data)
    bars = [part.strip() for part in capsys.readouterr().err.split("\n") if part.strip()]
    finals = [bar.split("\r")[-1] for bar in bars]
    assert len(finals) == 2
    assert all("100%" in bar and "epoch 2/2" in bar for bar in finals)


def test_the_bar_and_the_table_are_skorch_default_callbacks_by_name():
    names = dict(NGEBMClassifier().get_default_callbacks())
    assert type(names["print_log"]) is EpochTable
    assert type(names["progress_bar"]) is ProgressBar
    assert type(dict(JEMClassifier().get_default_callbacks())["progress_bar"]) is ProgressBar
