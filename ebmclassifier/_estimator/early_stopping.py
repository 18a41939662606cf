"""Early stopping as scikit-learn spells it, run by skorch's own callback and split.

``early_stopping=True, validation_fraction=0.1, n_iter_no_change=10, tol=1e-4`` are the names
and defaults of scikit-learn's ``MLPClassifier``. With it, ``fit`` holds out
``validation_fraction`` of the training data with skorch's ``ValidSplit`` (stratified by
class, drawn from the fit's seed, ``random_state``), the ``train_split`` that skorch's loop
calls (:meth:`EarlyStoppingMixin.get_split_datasets`), and stops with skorch's
``EarlyStopping(monitor="valid_loss", patience=n_iter_no_change, threshold=tol,
threshold_mode="abs", load_best=True)``: after ``n_iter_no_change`` epochs in a row whose
validation loss is not ``tol`` below the best so far, and the network gets the weights of the
best epoch back, as ``MLPClassifier`` restores its best coefficients.

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

__all__ = ["EarlyStoppingMixin"]

#: The name of the early-stopping callback in ``callbacks_`` while an early-stopped fit trains.
_CALLBACK = "sklearn_early_stopping"

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


class EarlyStoppingMixin:
    """``early_stopping``, ``validation_fraction``, ``n_iter_no_change``, ``tol`` on the
    estimators (see the module's notes); fitted ``n_iter_``, ``best_epoch_`` and
    ``best_validation_loss_``."""

    #: skorch's ``ValidSplit`` of an early-stopped fit while it trains; None otherwise.
    _early_stopping_split = None

    def _check_early_stopping_params(self, check: ParamChecker) -> None:
        """Add the problems of the early-stopping parameters to ``check``."""
        check.satisfies(
            "early_stopping",
            isinstance(self.early_stopping, bool | np.bool_)
            or (isinstance(self.early_stopping, str) and self.early_stopping == TRAIN_LOSS),
            f'a bool or "{TRAIN_LOSS}"',
        )
        fraction = self.validation_fraction
        ok = is_real(fraction) and 0 < fraction < 1
        check.satisfies("validation_fraction", ok, "a float in the range (0, 1)")
        ok = is_int(self.n_iter_no_change) and self.n_iter_no_change >= 1
        check.satisfies("n_iter_no_change", ok, "an int >= 1")
        check.real("tol", 0.0)
        if (
            isinstance(self.early_stopping, bool | np.bool_)
            and self.early_stopping
            and (self.train_split is not None)
        ):
            check.add(
                f"{check.owner}(early_stopping=True) holds out validation_fraction of the data "
                f"itself, but train_split={self.train_split!r} holds out data too. Use one: "
                "train_split=None with early_stopping=True, or early_stopping=False with "
                "skorch's EarlyStopping callback and this train_split."
            )

    def _held_out(self, mode: str, y: np.ndarray) -> bool:
        """Whether this training call stops early; refuse before training what would fail.

        ``mode`` is ``_fit``'s: ``"fit"`` and ``"warm_start"`` stop early with
        ``early_stopping=True``, ``partial_fit`` never (as scikit-learn's). Refused: a split of
        ``y`` that ``ValidSplit`` cannot stratify, and callbacks that monitor a validation
        score when the call holds out no data.
        """
        held_out = not isinstance(self.early_stopping, str) and bool(self.early_stopping)
        early = held_out and mode in ("fit", "warm_start")
        if not early and self.train_split is None:
            self._refuse_validation_monitors(mode)
        if early:
            self._check_validation_split(y)
        return early

    def _refuse_validation_monitors(self, mode: str) -> None:
        """A ``ValueError`` for callbacks that read ``valid_*`` scores in a call without any."""
        callbacks = self.callbacks if isinstance(self.callbacks, list | tuple) else []
        for item in callbacks:
            name, monitor = _monitor(item, self)
            if monitor is None or not monitor.startswith("valid_"):
                continue
            where = "train_split=None"
            if mode.startswith("partial") and self.early_stopping:
                where += " (early_stopping=True holds out data in fit only, as in scikit-learn)"
            raise ValueError(
                f"The callback {name!r} monitors {monitor!r}, a score of held-out data, but "
                f"{type(self).__name__} holds out none here ({where}); skorch would fail after "
                f"the first epoch with KeyError: {monitor!r}. Use early_stopping=True (with "
                "validation_fraction, n_iter_no_change, tol) instead of skorch's EarlyStopping, "
                "or pass train_split=skorch.dataset.ValidSplit(0.1, stratified=True)."
            )

    def _check_validation_split(self, y: np.ndarray) -> None:
        """Refuse a ``validation_fraction`` that cannot hold out every class of ``y``."""
        split = StratifiedShuffleSplit(1, test_size=self.validation_fraction, random_state=0)
        try:
            next(split.split(np.zeros(len(y)), y))
        except ValueError as err:
            raise ValueError(
                f"{type(self).__name__}(early_stopping=True) holds out "
                f"validation_fraction={self.validation_fraction!r} of the {len(y)} training "
                f"samples, stratified by class, and cannot: {str(err).rstrip('.')}. Increase "
                "validation_fraction, give more samples of each class, or set "
                "early_stopping=False."
            ) from None

    def _split_seed(self) -> int:
        """The seed of the held-out split: the fit's seed (an unseeded call's is drawn for the
        call, or the interrupted call's when it resumes one)."""
        return self._fit_seed()

    @contextmanager
    def _early_stopping(self, enabled: bool) -> Iterator[None]:
        """Train the block with early stopping (if ``enabled``); record ``n_iter_`` and, after an
        early-stopped fit, ``best_epoch_`` and ``best_validation_loss_`` (other training calls
        drop them: the weights are no longer that epoch's)."""
        for name in ("best_epoch_", "best_validation_loss_"):
            vars(self).pop(name, None)
        if not enabled:
            try:
                yield
            finally:
                self.n_iter_ = len(self.history)
            return
        callback = EarlyStopping(
            monitor="valid_loss",
            patience=self.n_iter_no_change,
            threshold=self.tol,
            threshold_mode="abs",
            load_best=True,
        ).initialize()
        split = ValidSplit(
            self.validation_fraction, stratified=True, random_state=self._split_seed()
        )
        self._early_stopping_split = split
        self.callbacks_.append((_CALLBACK, callback))
        try:
            yield
        finally:
            self.callbacks_ = [item for item in self.callbacks_ if item[1] is not callback]
            self._early_stopping_split = None
            self.n_iter_ = len(self.history)
        if callback.best_epoch_:
            self.best_epoch_ = int(callback.best_epoch_)
            self.best_validation_loss_ = float(self.history[self.best_epoch_ - 1, "valid_loss"])

    def get_split_datasets(self, X, y=None, **fit_params):
        """skorch's split of the training data; in an early-stopped fit, the held-out split.

        skorch's loop calls it once per training call: while an early-stopped ``fit`` trains it
        is skorch's ``ValidSplit(validation_fraction, stratified=True, random_state=seed)`` of
        the data by their encoded labels ``y``, the seed the fit's (``random_state``);
        otherwise skorch's own, with ``train_split``.

        Parameters
        ----------
        X : the training data as skorch holds them (tensors, or a dataset)
        y : Tensor of shape (n_samples,) or None
            The encoded labels, by which the held-out split is stratified.
        **fit_params
            Passed to ``train_split`` (skorch's split only).

        Returns
        -------
        dataset_train, dataset_valid : torch Datasets (``dataset_valid`` None without a split)

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(early_stopping=True, validation_fraction=0.25, max_epochs=5,
        ...                       module__hidden_sizes=(8,), random_state=0).fit(X, y)
        >>> 1 <= clf.best_epoch_ <= clf.n_iter_ <= 5
        True
        >>> len(clf.history[:, "valid_loss"]) == clf.n_iter_  # the loss on 10 held-out samples
        True
        >>> _, valid = clf.get_split_datasets(X, y)  # outside a fit: train_split=None's
        >>> valid is None
        True
        """
        split = self._early_stopping_split
        if split is None:
            return super().get_split_datasets(X, y, **fit_params)
        return split(self.get_dataset(X, y), y)
