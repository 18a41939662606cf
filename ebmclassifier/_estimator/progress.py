"""What a fit prints: a long fit's progress at ``verbose=0``, a progress bar at 1, skorch's
epoch table at 2.

``verbose=1`` shows one bar per ``fit`` / ``partial_fit`` call (tqdm, on stderr) that moves with
every training batch, so a long epoch shows progress and the time left (tqdm's estimate from the
rate so far) from its first batches; it shows the epoch, the batch and the last epoch's losses.
It is shown for every fit, also a short one: a user who asked for output gets it every time, and
the finished bar stays as a one-line summary of the fit (epochs, time, last loss).

``verbose=0``, the default, prints nothing for a quick fit; a fit still running after
``delay`` seconds (:data:`SHOW_AFTER`) shows the same bar from its next batch on, so that long
work (an image set on a CPU) says how far it is and how long it will take, and the bar is
cleared when the fit ends. ``callbacks__progress_bar=None`` (skorch's way of removing a default
callback) turns it off, ``callbacks__progress_bar__delay=...`` moves the threshold.

``verbose=2`` prints skorch's table of each epoch's losses and duration instead
(:class:`EpochTable`), as skorch does at its own ``verbose=1``. :func:`with_progress` puts both
among skorch's default callbacks.
"""

from __future__ import annotations

import math
import time

from skorch.callbacks import Callback, PrintLog
from tqdm.auto import tqdm

__all__ = ["EpochTable", "ProgressBar", "with_progress"]

_BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"

#: Seconds a fit at ``verbose=0`` runs before its progress shows: a quick fit prints nothing.
SHOW_AFTER = 3.0


class EpochTable(PrintLog):
    """skorch's ``PrintLog`` (the table of each epoch), printed only at ``verbose >= 2``."""

    def on_epoch_end(self, net, **kwargs) -> None:
        if net.verbose >= 2:
            super().on_epoch_end(net, **kwargs)


class ProgressBar(Callback):
    """A tqdm bar over the epochs of a fit, moving with each training batch: from the start at
    ``verbose=1``, after ``delay`` seconds at ``verbose=0`` (cleared at the end), never at
    ``verbose >= 2``.

    Parameters
    ----------
    delay : float, default=SHOW_AFTER
        Seconds a fit at ``verbose=0`` runs before the bar shows (at its next training batch);
        ``float("inf")`` never shows it.

    Examples
    --------
    >>> import contextlib, io
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(max_epochs=3, module__hidden_sizes=(8,), verbose=1)
    >>> with contextlib.redirect_stderr(io.StringIO()) as printed:
    ...     clf = clf.fit(X, y)
    >>> final = printed.getvalue().split("\\r")[-1]
    >>> "NGEBMClassifier: 100%" in final, "epoch 3/3, train_loss" in final
    (True, True)
    """

    def __init__(self, delay: float = SHOW_AFTER):
        self.delay = delay

    def initialize(self) -> ProgressBar:
        self.bar_ = None
        return self

    def on_train_begin(self, net, X=None, y=None, **kwargs) -> None:
        self._close()
        if net.verbose > 1:
            return
        asked = net.verbose == 1
        self.first_epoch_ = len(net.history)
        self.losses_ = ""
        self.started_ = time.monotonic()
        self.bar_ = tqdm(
            total=net.max_epochs,
            desc=type(net).__name__,
            bar_format=_BAR_FORMAT,
            delay=0 if asked else self.delay,
            leave=asked,  # a bar the user did not ask for leaves no trace
        )
        self.bar_.set_postfix_str(f"epoch 1/{net.max_epochs}", refresh=False)

    def on_epoch_begin(self, net, dataset_train=None, **kwargs) -> None:
        if self.bar_ is None:
            return
        params = net.get_params_for("iterator_train")
        size = params.get("batch_size", net.batch_size)
        n = len(dataset_train) if dataset_train is not None else 0
        self.batches_ = max(1, n // size if params.get("drop_last") else -(-n // size))
        if size == -1 or n == 0:
            self.batches_ = 1
        self.batch_ = 0

    def on_batch_end(self, net, training=False, **kwargs) -> None:
        if self.bar_ is None or not training:
            return
        self.batch_ += 1
        done = len(net.history) - 1 - self.first_epoch_
        batches = max(self.batches_, self.batch_)  # the count of batches is an estimate
        self.bar_.set_postfix_str(self._where(net, done + 1, batches), refresh=False)
        # never past the epoch's end; tqdm draws when due (after ``delay`` at verbose=0)
        self.bar_.update(min(1.0 / self.batches_, done + 1 - self.bar_.n))

    def on_epoch_end(self, net, **kwargs) -> None:
        if self.bar_ is None:
            return
        done = len(net.history) - self.first_epoch_
        self.bar_.n = done  # whole epochs, whatever the batches' estimate said
        self.losses_ = ", ".join(
            f"{key} {net.history[-1][key]:.4f}"
            for key in ("train_loss", "valid_loss")
            if isinstance(net.history[-1].get(key), float) and math.isfinite(net.history[-1][key])
        )
        self.batch_ = 0
        # a bar on show is redrawn; one still waiting for its delay stays hidden
        shown = (
            self.bar_.delay == 0 or self.bar_.last_print_t >= self.bar_.start_t + self.bar_.delay
        )
        self.bar_.set_postfix_str(
            f"epoch {done}/{net.max_epochs}" + (f", {self.losses_}" if self.losses_ else ""),
            refresh=shown,
        )

    def _where(self, net, epoch: int, batches: int) -> str:
        """``epoch 2/50, batch 37/157, train_loss 0.1234`` (the last finished epoch's loss)."""
        text = f"epoch {epoch}/{net.max_epochs}, batch {self.batch_}/{batches}"
        return text + (f", {self.losses_}" if self.losses_ else "")

    def on_train_end(self, net, **kwargs) -> None:
        self._close()

    def _close(self) -> None:
        if getattr(self, "bar_", None) is not None:
            self.bar_.close()
            self.bar_ = None


def with_progress(callbacks: list) -> list:
    """skorch's default callbacks with its ``PrintLog`` as :class:`EpochTable` and a
    :class:`ProgressBar` (named ``"progress_bar"``) after it.

    Parameters
    ----------
    callbacks : list of (name, callback)
        skorch's ``get_default_callbacks()``.

    Returns
    -------
    list of (name, callback)

    Examples
    --------
    >>> from skorch.callbacks import EpochTimer, PrintLog
    >>> defaults = [("epoch_timer", EpochTimer()), ("print_log", PrintLog())]
    >>> [(name, type(callback).__name__) for name, callback in with_progress(defaults)]
    [('epoch_timer', 'EpochTimer'), ('print_log', 'EpochTable'), ('progress_bar', 'ProgressBar')]
    """
    out = []
    for name, callback in callbacks:
        if type(callback) is PrintLog:
            callback = EpochTable(**callback.get_params())
            out += [(name, callback), ("progress_bar", ProgressBar())]
        else:
            out.append((name, callback))
    return out
