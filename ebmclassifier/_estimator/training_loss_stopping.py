"""Stopping on the training loss, scikit-learn's ``MLPClassifier`` rule without early stopping.

``MLPClassifier(early_stopping=False)`` stops once the training loss has not improved by
``tol`` for more than ``n_iter_no_change`` consecutive epochs: an epoch improves when its loss
is at least ``tol`` below the best loss so far, and the best loss follows every new minimum,
however small (``MLPClassifier._update_no_improvement_count``). :func:`no_improvement_counts`
is that rule on a sequence of losses, and :class:`TrainingLossStopping` the skorch callback
that applies it to each epoch's ``train_loss``; the weights are those of the last epoch, as
``MLPClassifier`` keeps them.

The estimators apply it with ``early_stopping="train_loss"`` (:func:`stopping_on_training_loss`).
With ``early_stopping=False``, the default, a fit trains ``max_epochs`` epochs, as skorch's
nets do: applying the rule there would end every fit whose training loss flattens before
``max_epochs``, a change to fits made before, so a fit that sets ``n_iter_no_change`` or
``tol`` without early stopping warns that they do nothing and names both ways to use them.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager

from skorch.callbacks import Callback

from .._utils.warn import warn_user

__all__ = ["TrainingLossStopping", "no_improvement_counts", "stopping_on_training_loss"]

#: The training calls that stop early (as in scikit-learn, ``partial_fit`` never does).
_FIT_MODES = ("fit", "warm_start")


def no_improvement_counts(losses: Iterable[float], tol: float) -> list[int]:
    """After each epoch, how many epochs in a row have not improved the training loss by ``tol``.

    Parameters
    ----------
    losses : iterable of float
        The training loss of each epoch, in order.
    tol : float
        An epoch improves when its loss is at least ``tol`` below the best loss so far.

    Returns
    -------
    list of int
        One count per epoch; the fit stops after the first epoch whose count exceeds
        ``n_iter_no_change``.

    Examples
    --------
    >>> no_improvement_counts([1.0, 0.5, 0.49995, 0.4999, 0.3], tol=1e-4)
    [0, 0, 1, 2, 0]
    """
    best, count, counts = math.inf, 0, []
    for loss in losses:
        best, count = _after(best, count, loss, tol)
        counts.append(count)
    return counts


def _after(best: float, count: int, loss: float, tol: float) -> tuple[float, int]:
    """The best loss and the count of epochs without improvement after an epoch of ``loss``."""
    return min(best, loss), count + 1 if loss > best - tol else 0


class TrainingLossStopping(Callback):
    """Stop a fit once its training loss has not improved by ``tol`` for more than
    ``n_iter_no_change`` epochs in a row (:func:`no_improvement_counts`).

    Every estimator holds one (added from its parameters in ``get_default_callbacks``); it
    acts in a ``fit`` with ``early_stopping="train_loss"`` (:func:`stopping_on_training_loss`),
    never in ``partial_fit``, from the estimator's ``n_iter_no_change`` and ``tol``. Its count
    starts again with each call, also with a call resumed from a saved training state.

    Attributes
    ----------
    active : bool
        Whether the running call stops on the training loss.
    stopped_ : bool
        Whether it stopped the last call.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(early_stopping="train_loss", n_iter_no_change=3, lr=1e-12,
    ...                       max_epochs=50).fit(X, y)
    >>> clf.n_iter_  # no epoch improves on the first; the 4th in a row without stops the fit
    5
    """

    def __init__(self) -> None:
        self.active = False
        self.stopped_ = False

    def on_train_begin(self, net, **kwargs) -> None:
        self.n_iter_no_change, self.tol = net.n_iter_no_change, net.tol
        self.best_loss_, self.no_improvement_count_, self.stopped_ = math.inf, 0, False

    def on_epoch_end(self, net, **kwargs) -> None:
        if not self.active:
            return
        self.best_loss_, self.no_improvement_count_ = _after(
            self.best_loss_, self.no_improvement_count_, net.history[-1, "train_loss"], self.tol
        )
        if self.no_improvement_count_ > self.n_iter_no_change:
            self.stopped_ = True
            raise KeyboardInterrupt  # skorch's way of ending the loop, as its EarlyStopping


def stopping_on_training_loss(
    net, callback: TrainingLossStopping, mode: str
) -> AbstractContextManager:
    """What the training call runs in: ``callback`` stopping on the training loss in a ``fit``
    with ``early_stopping="train_loss"``; in a ``fit`` without early stopping that sets
    ``n_iter_no_change`` or ``tol``, a warning (now, at the user's line) that they do nothing.

    Parameters
    ----------
    net : the estimator, its parameters checked
    callback : TrainingLossStopping
        The one ``net`` holds.
    mode : {"fit", "warm_start", "partial_first", "partial"}
        The training call (``partial_fit`` never stops early).

    Returns
    -------
    context manager
    """
    fits = mode in _FIT_MODES
    if fits and not net.early_stopping:
        _warn_if_set(net)
    return _acting(callback, fits and isinstance(net.early_stopping, str))  # "train_loss"


@contextmanager
def _acting(callback: TrainingLossStopping, active: bool) -> Iterator[None]:
    callback.active = active
    try:
        yield
    finally:
        callback.active = False


def _warn_if_set(net) -> None:
    """Warn when ``n_iter_no_change`` or ``tol`` differ from their defaults in a fit that no
    rule stops, where a user of ``MLPClassifier`` would expect them to act."""
    defaults = inspect.signature(type(net).__init__).parameters
    changed = {
        name: getattr(net, name)
        for name in ("n_iter_no_change", "tol")
        if name in defaults and getattr(net, name) != defaults[name].default
    }
    if not changed:
        return
    given = ", ".join(f"{name}={value!r}" for name, value in changed.items())
    warn_user(
        f"{type(net).__name__}({given}) stops nothing with early_stopping=False: a fit trains "
        "max_epochs epochs, as skorch's nets do (scikit-learn's MLPClassifier stops on the "
        "training loss there; doing so by default would change fits made before). Pass "
        'early_stopping="train_loss" for MLPClassifier\'s rule on the training loss, or '
        "early_stopping=True to stop on a held-out validation loss."
    )
