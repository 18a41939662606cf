"""What a fit prints at each ``verbose``: a long fit's progress (nothing for a quick one), a
progress bar, or skorch's epoch table."""

import re

import numpy as np
import pytest
import tqdm.std
from skorch.callbacks import Callback
from skorch.dataset import ValidSplit

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier._estimator.progress import SHOW_AFTER, EpochTable, ProgressBar


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


class _Clock:
    """The clock tqdm's bars read, moved by the test alone: what a bar shows no longer depends
    on how fast the machine runs the fit."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Tick(Callback):
    """Moves the clock ``seconds`` after each training batch, after the bar has seen it (the
    default callbacks run before the user's)."""

    def __init__(self, clock: _Clock, seconds: float):
        self.clock, self.seconds = clock, seconds

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.clock.now += self.seconds


@pytest.fixture
def clock(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(tqdm.std, "time", clock)
    monkeypatch.setattr(tqdm.std.tqdm, "monitor_interval", 0)  # its thread reads the real clock
    return clock


def test_a_quick_default_fit_prints_nothing(capsys, clock):
    # #50: a fit of about a second at the defaults stays silent. It timed the fit and failed
    # "the machine is too busy" when the fit took over SHOW_AFTER seconds; the clock the bar
    # reads stands still here, as for any fit shorter than SHOW_AFTER
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    NGEBMClassifier(max_epochs=5, random_state=0).fit(X / 16, y)
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def _images(tmp_path, n=48):
    """A small memmap of uint8 3x32x32 images, as a user's image set on disk."""
    rng = np.random.default_rng(0)
    path = tmp_path / "images.npy"
    np.save(path, rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8))
    return np.load(path, mmap_mode="r"), np.arange(n) % 4


def test_a_long_fit_shows_its_batches_epochs_and_time_left_without_being_asked(
    tmp_path, capsys, clock
):
    # #50: 20,000 uint8 images from a memmap, the default ConvNet: no epoch in 600 s and not a
    # word printed. Here each batch takes SHOW_AFTER seconds of the bar's clock: the bar shows
    # from the second batch on (the first update past the delay), each batch and each epoch's
    # end with tqdm's estimate of the time left, and is cleared when the fit ends. With the
    # real clock, which batches were drawn depended on the machine's speed (tqdm draws at most
    # every tenth of a second)
    X, y = _images(tmp_path)
    clf = NGEBMClassifier(max_epochs=2, batch_size=16, random_state=0,
                          callbacks=[_Tick(clock, SHOW_AFTER)])  # fmt: skip
    clf.fit(X, y)
    out, err = capsys.readouterr()
    assert out == ""
    drawn = [part for part in err.split("\r") if part.startswith("NGEBMClassifier:")]
    shown = [re.search(r"epoch \d/2(, batch \d/3)?", part).group() for part in drawn]
    assert shown == [
        "epoch 1/2, batch 2/3", "epoch 1/2, batch 3/3", "epoch 1/2",
        "epoch 2/2, batch 1/3", "epoch 2/2, batch 2/3", "epoch 2/2, batch 3/3", "epoch 2/2",
    ], drawn  # fmt: skip
    assert all("train_loss " in part for part in drawn[2:]), drawn  # from epoch 1's end
    for part in drawn:  # elapsed<remaining: the estimate, never tqdm's "?"
        assert "<" in part and "<?" not in part
    assert err.split("\r")[-1].strip() == ""  # cleared: nothing left on the line
    assert dict(clf.callbacks_)["progress_bar"].bar_ is None


def test_the_unasked_bar_waits_for_its_delay_and_can_be_turned_off(tmp_path, capsys):
    X, y = _images(tmp_path)
    for params in ({"callbacks__progress_bar__delay": float("inf")},
                   {"callbacks__progress_bar": None, "verbose": 0}):  # fmt: skip
        NGEBMClassifier(max_epochs=1, batch_size=16, random_state=0, **params).fit(X, y)
        assert capsys.readouterr() == ("", ""), params
    # verbose=1 keeps its meaning: the bar from the first batch, whatever the delay
    clf = NGEBMClassifier(max_epochs=1, batch_size=16, random_state=0, verbose=1,
                          callbacks__progress_bar__delay=float("inf"))  # fmt: skip
    clf.fit(X, y)
    assert "NGEBMClassifier: 100%" in capsys.readouterr().err.split("\r")[-1]
