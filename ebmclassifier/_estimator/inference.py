"""Batched inference, the face every estimator shares: probabilities, energies, OOD scores.

A mixin over the estimator's ``module_``: each public method validates ``X`` once (the
estimator's ``_validate_X``), then maps the network over it in batches of the inference batch
size, so that predicting on a million rows holds memory flat.

OOD decisions (:class:`OODDecisionMixin`): a threshold on ``score_ood`` calibrated on held-out
in-distribution data, :func:`~ebmclassifier.metrics.threshold_at_tpr` of their scores, so that a
fraction ``tpr`` of them are *not* flagged, the rule the report's FPR95 follows (scikit-learn's
outlier detectors use the same idea with ``contamination``: ``offset_`` of
``LocalOutlierFactor``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted
from skorch.dataset import Dataset as SkorchDataset
from torch.utils.data import Subset

from .._utils.locks import estimator_lock
from .._utils.streamed import StreamedDataset, StreamedRows, first_rows
from .._utils.threads import threads_for
from ..energy import OOD_METHODS, energy, ood_score
from ..metrics import threshold_at_tpr

__all__ = [
    "InferenceMixin",
    "OODDecisionMixin",
    "collect_batches",
    "is_training_set",
    "map_batches",
]


def map_batches(
    X: np.ndarray, fn: Callable[[torch.Tensor], torch.Tensor], batch_size: int, device
) -> np.ndarray:
    """``fn`` over the rows of ``X`` (n >= 1) in batches of ``batch_size`` on ``device``.

    Each batch is copied to a tensor (the caller's array may be read-only and is never
    written); the results go into one array for the whole output (:func:`collect_batches`).
    Gradient mode is the caller's: ``fn`` may need gradients (``approx_mass``).
    """
    batches = (
        torch.tensor(X[start : start + batch_size], device=device)
        for start in range(0, len(X), batch_size)
    )
    return collect_batches(batches, fn, len(X))


def collect_batches(
    batches: Iterable[torch.Tensor], fn: Callable[[torch.Tensor], torch.Tensor], n: int
) -> np.ndarray:
    """``fn`` of each batch, in order, into one array of ``n`` rows filled batch by batch.

    Small per-batch tensors kept to the end pin the heap between the batches' temporaries,
    which then cannot be reused (peak about 4x a float32 input; ``bench``'s memory section).
    """
    out, start = None, 0
    for xb in batches:
        result = fn(xb).detach().cpu().numpy()
        if out is None:
            out = np.empty((n, *result.shape[1:]), dtype=result.dtype)
        out[start : start + len(result)] = result
        start += len(result)
    return out


def is_training_set(X) -> bool:
    """Whether ``X`` is a dataset that the training loop built (skorch's, or the library's
    :class:`~ebmclassifier._utils.streamed.StreamedDataset`, or a ``Subset`` of one), which
    skorch's scoring callbacks pass to ``predict``; a user's dataset is not."""
    if isinstance(X, Subset):
        X = X.dataset
    return isinstance(X, SkorchDataset | StreamedDataset)


class InferenceMixin:
    """``predict*``, ``energy``, ``score_ood``, ``score_samples`` over ``_network()``.

    The hooks: ``_validate_X`` and ``_map_batches`` (the batched map over validated input)
    and ``_network`` (the map from a batch to logits). The estimators run their ``module_``;
    :class:`~ebmclassifier.ProductOfExperts` composes its experts' logits.
    """

    def _inference_batch_size(self, n: int) -> int:
        size = self.get_params_for("iterator_valid").get("batch_size", self.batch_size)
        return n if size == -1 else size

    def _validate_input(self, X):
        """``X`` validated for inference: ``_validate_X(X, reset=False)`` here; the estimators
        also return input read in batches (a ``Dataset``, a memmap, ``uint8`` images) as
        :class:`~ebmclassifier._utils.streamed.StreamedRows`."""
        return self._validate_X(X, reset=False)

    def _map_batches(self, X, fn: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
        """Validate ``X`` and apply ``fn`` batch by batch, so memory stays flat.

        Input read in batches keeps its dtype until each batch is converted
        (``_as_network_input``); a ``Dataset`` is read with the ``iterator_valid__*``
        ``DataLoader`` settings (``num_workers``).
        """
        with estimator_lock(self):  # a partial_fit of another thread ends first
            check_is_fitted(self)
            X = self._validate_input(X)
            self._set_mode(False)
            size = max(1, self._inference_batch_size(len(X)))
            # the network's cost per batch from the first sample alone (no copy of X)
            first = first_rows(X, 1, self.device_)
            n_threads = getattr(self, "n_threads", None)  # a composition has none
            with threads_for(n_threads, self.module_, first, size, n_samples=len(X)):
                if not isinstance(X, StreamedRows):
                    return map_batches(X, fn, size, self.device_)
                batches = (self._as_network_input(xb) for xb in X.batches(size))
                return collect_batches(batches, fn, len(X))

    def _network(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The map from a batch to logits, differentiable with respect to the batch (for
        ``approx_mass``): ``module_``. Called once per public call, so that an override
        builds what it needs for the call once, not per batch."""
        return self.module_

    def _map_network(self, X, fn: Callable) -> np.ndarray:
        """``fn(network, batch)`` batch by batch, with ``network = self._network()`` built
        once, after the check that the estimator is fitted."""
        with estimator_lock(self):  # the network of this moment, not one a fit replaces
            check_is_fitted(self)
            network = self._network()
            return self._map_batches(X, lambda xb: fn(network, xb))

    def _map_logits(self, X, fn: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
        """``fn(logits)`` batch by batch; also for the training loop's datasets that skorch's
        scoring callbacks pass (:func:`is_training_set`), through ``forward`` (which they
        cache)."""
        if is_training_set(X):
            return fn(self.forward(X)).numpy()

        def logits_fn(network, xb: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return fn(network(xb))

        return self._map_network(X, logits_fn)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities ``p(y|x) = softmax(f(x))``.

        Parameters
        ----------
        X : array-like of the training input's sample shape

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> proba = clf.fit(X, y).predict_proba(X)
        >>> proba.shape, proba.dtype, np.allclose(proba.sum(axis=1), 1)
        ((40, 3), dtype('float32'), True)
        """
        return self._map_logits(X, lambda logits: torch.softmax(logits, dim=1))

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities, computed stably as ``log_softmax(f(x))``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples, n_classes)

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> log_proba = clf.fit(X, y).predict_log_proba(X)
        >>> bool((log_proba <= 0).all()), np.allclose(np.exp(log_proba), clf.predict_proba(X))
        (True, True)
        """
        return self._map_logits(X, lambda logits: torch.log_softmax(logits, dim=1))

    def predict(self, X) -> np.ndarray:
        """The most probable class label of each sample.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels as given in ``fit`` (strings stay strings).

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> labels = np.array(["cat", "dog", "owl"])[y]
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> predicted = clf.fit(X, labels).predict(X)
        >>> predicted.dtype.kind, set(predicted) <= {"cat", "dog", "owl"}
        ('U', True)
        >>> bool((predicted == clf.classes_[clf.predict_proba(X).argmax(axis=1)]).all())
        True
        """
        best = self._map_logits(X, lambda logits: logits.argmax(dim=1))
        return self.classes_[best]

    def energy(self, X) -> np.ndarray:
        """Energy ``E(x) = -logsumexp_y f(x)[y]`` of each sample.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,)
            The lower, the more typical of the training data.

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> energies = clf.fit(X, y).energy(X)
        >>> with torch.no_grad():
        ...     logits = clf.module_(torch.tensor(X, dtype=torch.float32, device=clf.device_))
        >>> energies.shape, np.allclose(energies, -torch.logsumexp(logits, dim=1).cpu().numpy())
        ((40,), True)
        """
        return self._map_logits(X, energy)

    def score_ood(self, X, method: str | None = None) -> np.ndarray:
        """Out-of-distribution score of each sample.

        Parameters
        ----------
        X : array-like
        method : {"energy", "max_softmax", "approx_mass"} or None, default=None
            ``None`` uses the ``ood_method`` parameter. ``"energy"`` is ``E(x)``,
            ``"max_softmax"`` is ``-max_y p(y|x)``, ``"approx_mass"`` is ``||dE/dx||_2``
            (Grathwohl et al., 2020), which needs one backward pass per batch.

        Returns
        -------
        ndarray of shape (n_samples,)
            The higher, the more likely out-of-distribution.

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> clf.score_ood(X).shape  # NG-EBM's default: ood_method="approx_mass"
        (40,)
        >>> bool((clf.score_ood(X) >= 0).all())  # a gradient norm
        True
        >>> np.allclose(clf.score_ood(X, method="energy"), clf.energy(X))
        True
        >>> s = clf.score_ood(X, method="max_softmax")  # -max_y p(y|x), in [-1, -1/3]
        >>> bool(((s >= -1) & (s <= -1 / 3 + 1e-6)).all())
        True
        """
        method = self.ood_method if method is None else method
        if method not in OOD_METHODS:
            raise ValueError(
                f"Unknown score_ood method {method!r}; use one of "
                + ", ".join(repr(m) for m in OOD_METHODS)
                + "."
            )
        return self._map_network(X, lambda network, xb: ood_score(network, xb, method))

    def score_samples(self, X) -> np.ndarray:
        """scikit-learn's outlier convention: ``-score_ood(X)`` with the default method.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,)
            The lower, the more abnormal.

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> np.array_equal(clf.score_samples(X), -clf.score_ood(X))
        True
        """
        return -self.score_ood(X)


class OODDecisionMixin:
    """``calibrate_ood`` and ``predict_ood`` over an estimator's ``score_ood``."""

    def calibrate_ood(self, X_in, tpr: float = 0.95, method: str | None = None):
        """Choose the OOD threshold from in-distribution data the model did not train on.

        Sets ``ood_threshold_`` to
        :func:`~ebmclassifier.metrics.threshold_at_tpr` of the scores
        ``score_ood(X_in, method)``: the k-th smallest of the ``n`` scores,
        ``k = ceil(tpr * n)``, the smallest threshold that keeps at least a fraction ``tpr``
        of ``X_in`` (the true positive rate, in-distribution positive, of the OOD papers'
        FPR at 95% TPR, ``ood_metrics(...)["fpr95_in"]``). :meth:`predict_ood` then flags
        ``n - k`` of the calibration samples when their scores are distinct (fewer with ties
        at the threshold).

        Parameters
        ----------
        X_in : array-like
            In-distribution samples the model was *not* trained on (a held-out split); on
            training data the threshold would be too low and flag too many new inputs.
        tpr : float in (0, 1), default=0.95
            The fraction of in-distribution inputs to keep.
        method : {"energy", "max_softmax", "approx_mass"} or None, default=None
            The score; ``None`` uses the ``ood_method`` parameter. Stored as ``ood_method_``.
            Training again (``fit``, ``partial_fit``) changes the scores and drops both
            attributes: calibrate again after it.

        Returns
        -------
        self

        Raises
        ------
        NotFittedError
            Before ``fit``.
        ValueError
            For ``tpr`` outside (0, 1), an unknown method or bad ``X_in``.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(200, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=5, random_state=0).fit(X[:100], y[:100])
        >>> clf = clf.calibrate_ood(X[100:], tpr=0.9)  # held-out in-distribution data
        >>> float(clf.predict_ood(X[100:]).mean())  # 10% of the calibration data flagged
        0.1
        >>> clf.ood_method_, clf.ood_threshold_ > 0  # NG-EBM's default score, ||dE/dx||
        ('approx_mass', True)
        """
        check_is_fitted(self)
        threshold_at_tpr([0.0], tpr)  # a bad tpr fails before scoring
        method = self.ood_method if method is None else method
        self.ood_threshold_ = threshold_at_tpr(self.score_ood(X_in, method=method), tpr)
        self.ood_method_ = method
        return self

    def _forget_ood_threshold(self) -> None:
        """Drop ``ood_threshold_`` and ``ood_method_``, for a fit that changes the scores."""
        for name in ("ood_threshold_", "ood_method_"):
            vars(self).pop(name, None)

    def predict_ood(self, X) -> np.ndarray:
        """Flag out-of-distribution inputs: ``score_ood(X, ood_method_) > ood_threshold_``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,), bool
            True = flagged out-of-distribution.

        Raises
        ------
        NotFittedError
            Before ``fit``, or before :meth:`calibrate_ood` (since the last training).

        Examples
        --------
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(200, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=5, random_state=0).fit(X[:100], y[:100])
        >>> flags = clf.calibrate_ood(X[100:]).predict_ood(X[100:])
        >>> flags.dtype, int(flags.sum())  # 5% of 100 held-out samples
        (dtype('bool'), 5)
        """
        check_is_fitted(self)
        if not hasattr(self, "ood_threshold_"):
            raise NotFittedError(
                f"This {type(self).__name__} has no OOD threshold yet; call "
                "calibrate_ood(X_in) with held-out in-distribution data before predict_ood."
            )
        return self.score_ood(X, method=self.ood_method_) > self.ood_threshold_
