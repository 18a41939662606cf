"""Early stopping as scikit-learn spells it: skorch's own callback, on skorch's own split.

``early_stopping=True, validation_fraction=0.1, n_iter_no_change=10, tol=1e-4`` are the names
and defaults of scikit-learn's ``MLPClassifier``. Every estimator holds a
:class:`SklearnEarlyStopping` callback (added from its parameters in ``get_default_callbacks``);
in a ``fit`` with ``early_stopping=True`` it holds out ``validation_fraction`` of the training
data with skorch's ``ValidSplit`` (stratified by class, drawn from the fit's seed), the split
the engine's ``get_split_datasets`` hands skorch's loop, and stops as skorch's
``EarlyStopping(monitor="valid_loss", patience=n_iter_no_change, threshold=tol,
threshold_mode="abs", load_best=True)`` does: after ``n_iter_no_change`` epochs in a row whose
validation loss is not ``tol`` below the best so far, the network getting the weights of the
best epoch back, as ``MLPClassifier`` restores its best coefficients. It comes last among the
callbacks, as a stopping callback does, so that every other callback sees the last epoch.

Where it differs from scikit-learn, and why:

- It monitors the validation *loss* (the training objective on the held-out samples, the
  cross-entropy for JEM), as skorch's ``EarlyStopping`` does, not the accuracy: on a held-out
  tenth the accuracy moves in steps of ``1 / n_valid``, coarser than ``tol``, and says nothing
  of calibration, which the loss (a proper scoring rule) does.
- Without early stopping ``MLPClassifier`` also stops on the training loss; here that is
  ``early_stopping="train_loss"`` (:mod:`.training_loss_stopping`), and ``early_stopping=False``
  trains ``max_epochs`` epochs, as skorch's nets do, which keeps every fit made before.
- As in scikit-learn, ``partial_fit`` never stops early and holds out nothing.

skorch's spelling, ``callbacks=[EarlyStopping()]`` with ``train_split=ValidSplit(...)``, works
as in skorch. A callback that monitors a validation score (``EarlyStopping``, ``Checkpoint``,
``LRScheduler(monitor="valid_loss")``) in a fit that holds out nothing is refused before
training, naming both fixes, where skorch fails after the first epoch with
``KeyError: 'valid_loss'``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from sklearn.model_selection import StratifiedShuffleSplit
from skorch.callbacks import EarlyStopping
from skorch.dataset import ValidSplit

from .._utils.parameters import ParamChecker, is_int, is_real

__all__ = [
    "SklearnEarlyStopping",
    "check_early_stopping_params",
    "holds_out",
    "stopping_call",
]

#: ``early_stopping``'s one value besides a bool: stop on the training loss as
#: ``MLPClassifier`` does without early stopping (:mod:`.training_loss_stopping`), holding out
#: nothing.
TRAIN_LOSS = "train_loss"


def _monitor(item, estimator) -> tuple[str, str | None]:
    """``(name, monitor)`` of a ``callbacks`` entry (an instance, a class or a pair)."""
    name, callback = item if isinstance(item, tuple) else (None, item)
    kind = callback if isinstance(callback, type) else type(callback)
    name = name or kind.__name__
    monitor = getattr(callback, "monitor", None)
    if isinstance(callback, type):
        parameter = inspect.signature(callback).parameters.get("monitor")
        monitor = None if parameter is None else parameter.default
    monitor = vars(estimator).get(f"callbacks__{name}__monitor", monitor)
    return name, monitor if isinstance(monitor, str) else None


class SklearnEarlyStopping(EarlyStopping):
    """skorch's ``EarlyStopping`` with the estimator's ``n_iter_no_change`` and ``tol``, acting
    only in the calls that hold out data (:func:`stopping_call`; see the module's notes).

    Attributes
    ----------
    holds_out : bool
        Whether the running call holds out ``validation_fraction`` and may stop early.

    Examples
    --------
    >>> from ebmclassifier import NGEBMClassifier
    >>> clf = NGEBMClassifier(early_stopping=True, validation_fraction=0.25, max_epochs=5,
    ...                       module__hidden_sizes=(8,), random_state=0).fit(X, y)
    >>> [name for name, cb in clf.callbacks_ if isinstance(cb, SklearnEarlyStopping)]
    ['sklearn_early_stopping']
    >>> 1 <= clf.best_epoch_ <= clf.n_iter_ <= 5
    True
    """

    def __init__(self) -> None:
        super().__init__(monitor="valid_loss", threshold_mode="abs", load_best=True)
        self.holds_out = False

    def split(self, net, X, y, generator: np.random.RandomState):
        """The held-out split of the training data: skorch's ``ValidSplit(validation_fraction,
        stratified=True)`` of ``net.get_dataset(X, y)``, stratified by the encoded labels
        ``y``, drawn from ``generator`` (the fit's ``"split"`` stream)."""
        split = ValidSplit(net.validation_fraction, stratified=True, random_state=generator)
        return split(net.get_dataset(X, y), y)

    def on_train_begin(self, net, **kwargs) -> None:
        super().on_train_begin(net, **kwargs)
        self.patience, self.threshold = net.n_iter_no_change, net.tol

    def on_epoch_end(self, net, **kwargs) -> None:
        if self.holds_out:
            super().on_epoch_end(net, **kwargs)

    def on_train_end(self, net, **kwargs) -> None:
        if self.holds_out:
            super().on_train_end(net, **kwargs)


def check_early_stopping_params(check: ParamChecker, estimator) -> None:
    """Add the problems of the early-stopping parameters of ``estimator`` to ``check``."""
    early_stopping = estimator.early_stopping
    check.satisfies(
        "early_stopping",
        isinstance(early_stopping, bool | np.bool_)
        or (isinstance(early_stopping, str) and early_stopping == TRAIN_LOSS),
        f'a bool or "{TRAIN_LOSS}"',
    )
    fraction = estimator.validation_fraction
    ok = is_real(fraction) and 0 < fraction < 1
    check.satisfies("validation_fraction", ok, "a float in the range (0, 1)")
    ok = is_int(estimator.n_iter_no_change) and estimator.n_iter_no_change >= 1
    check.satisfies("n_iter_no_change", ok, "an int >= 1")
    check.real("tol", 0.0)
    if (
        isinstance(early_stopping, bool | np.bool_)
        and early_stopping
        and (estimator.train_split is not None)
    ):
        check.add(
            f"{check.owner}(early_stopping=True) holds out validation_fraction of the data "
            f"itself, but train_split={estimator.train_split!r} holds out data too. Use one: "
            "train_split=None with early_stopping=True, or early_stopping=False with "
            "skorch's EarlyStopping callback and this train_split."
        )


def holds_out(estimator, mode: str, y: np.ndarray) -> bool:
    """Whether this training call stops early; refuse before training what would fail.

    ``mode`` is the estimator's ``_fit``'s: ``"fit"`` and ``"warm_start"`` stop early with
    ``early_stopping=True``, ``partial_fit`` never (as scikit-learn's). Refused: a split of
    ``y`` that ``ValidSplit`` cannot stratify, and callbacks that monitor a validation score
    when the call holds out no data.
    """
    held_out = not isinstance(estimator.early_stopping, str) and bool(estimator.early_stopping)
    early = held_out and mode in ("fit", "warm_start")
    if not early and estimator.train_split is None:
        _refuse_validation_monitors(estimator, mode)
    if early:
        _check_validation_split(estimator, y)
    return early


def _refuse_validation_monitors(estimator, mode: str) -> None:
    """A ``ValueError`` for callbacks that read ``valid_*`` scores in a call without any."""
    callbacks = estimator.callbacks if isinstance(estimator.callbacks, list | tuple) else []
    for item in callbacks:
        name, monitor = _monitor(item, estimator)
        if monitor is None or not monitor.startswith("valid_"):
            continue
        where = "train_split=None"
        if (
            mode.startswith("partial")
            and estimator.early_stopping is not False
            and not isinstance(estimator.early_stopping, str)
        ):
            where += " (early_stopping=True holds out data in fit only, as in scikit-learn)"
        raise ValueError(
            f"The callback {name!r} monitors {monitor!r}, a score of held-out data, but "
            f"{type(estimator).__name__} holds out none here ({where}); skorch would fail after "
            f"the first epoch with KeyError: {monitor!r}. Use early_stopping=True (with "
            "validation_fraction, n_iter_no_change, tol) instead of skorch's EarlyStopping, "
            "or pass train_split=skorch.dataset.ValidSplit(0.1, stratified=True)."
        )


def _check_validation_split(estimator, y: np.ndarray) -> None:
    """Refuse a ``validation_fraction`` that cannot hold out every class of ``y``."""
    fraction = estimator.validation_fraction
    split = StratifiedShuffleSplit(1, test_size=fraction, random_state=0)
    try:
        next(split.split(np.zeros(len(y)), y))
    except ValueError as err:
        raise ValueError(
            f"{type(estimator).__name__}(early_stopping=True) holds out "
            f"validation_fraction={fraction!r} of the {len(y)} training "
            f"samples, stratified by class, and cannot: {str(err).rstrip('.')}. Increase "
            "validation_fraction, give more samples of each class, or set "
            "early_stopping=False."
        ) from None


@contextmanager
def stopping_call(estimator, callback: SklearnEarlyStopping, enabled: bool) -> Iterator[None]:
    """Train the block with ``callback`` holding out data (if ``enabled``); record ``n_iter_``
    and, after an early-stopped fit, ``best_epoch_`` and ``best_validation_loss_`` (other
    training calls drop them: the weights are no longer that epoch's)."""
    for name in ("best_epoch_", "best_validation_loss_"):
        vars(estimator).pop(name, None)
    callback.holds_out = enabled
    try:
        yield
    finally:
        callback.holds_out = False
        estimator.n_iter_ = len(estimator.history)
    if enabled and callback.best_epoch_:
        estimator.best_epoch_ = int(callback.best_epoch_)
        loss = estimator.history[estimator.best_epoch_ - 1, "valid_loss"]
        estimator.best_validation_loss_ = float(loss)
