"""Callbacks that interrupt a fit at a chosen moment, for the tests that resume it."""

from __future__ import annotations

from skorch.callbacks import Callback


class Kill(Callback):
    """Raise at the end of epoch ``at``, after the callbacks before it (a save, a checkpoint)."""

    def __init__(self, at: int):
        self.at = at

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.at:
            raise KeyError(f"killed after epoch {self.at}")


class SaveEachEpoch(Callback):
    """``net.save(path)`` at the end of every epoch."""

    def __init__(self, path):
        self.path = path

    def on_epoch_end(self, net, **kwargs):
        net.save(self.path)


class Tell(Callback):
    """Set ``event`` when the ``at``-th training batch this callback has seen has run."""

    def __init__(self, event, at: int):
        self.event, self.at, self.seen = event, at, 0

    def on_batch_end(self, net, training=False, **kwargs):
        self.seen += training
        if self.seen == self.at:
            self.event.set()
