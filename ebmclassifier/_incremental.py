"""The class-incremental face of NGEBMClassifier and JEMClassifier (issue #24).

:class:`ClassIncrementalMixin` fills the base's hooks ``_accept_new_classes`` (a continuing
fit whose labels are new grows ``classes_`` and the output layer) and ``_add_replay`` (the
per-class reservoir mixed into each fit's data), and makes the classification term the
restricted-negatives cross-entropy of :func:`~ebmclassifier.losses.negatives_cross_entropy`.
The parameters themselves (``class_incremental``, ``negatives``, ``replay_per_class``) are
the estimators' own, so that scikit-learn's ``get_params`` sees them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import torch

from ._validation import ParamChecker, as_numpy, is_int
from .continual import grow_output_layer, output_layer, reservoir_update
from .losses import negatives_cross_entropy

__all__ = ["ClassIncrementalMixin"]

#: The fitted attributes of the reservoir, saved with the estimator.
RESERVOIR_ATTRIBUTES = ("reservoir_X_", "reservoir_y_", "reservoir_seen_")


class ClassIncrementalMixin:
    """``class_incremental``, ``negatives`` and ``replay_per_class`` for an estimator."""

    def _validate_own_params(self, check: ParamChecker) -> None:
        super()._validate_own_params(check)
        check.satisfies("class_incremental", isinstance(self.class_incremental, bool), "a bool")
        negatives = self.negatives
        ok = negatives in ("all", "batch") or (is_int(negatives) and negatives >= 1)
        check.satisfies("negatives", ok, "'all', 'batch' or an int >= 1")
        check.integer("replay_per_class", 0)

    def classification_loss(
        self, logits: torch.Tensor, y: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The classification term, over the classes that ``negatives`` chooses.

        ``negatives="all"`` is the criterion over every class (the base's ``classification_loss``);
        ``"batch"`` and an int ``k`` leave classes out of the normalising term
        (:func:`~ebmclassifier.losses.negatives_cross_entropy`), in training and validation.

        Parameters
        ----------
        logits : Tensor of shape (n, n_classes)
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        sample_weight : Tensor of shape (n,) or None, default=None

        Returns
        -------
        scalar Tensor

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(negatives="batch", max_epochs=1, module__hidden_sizes=(8,))
        >>> clf = clf.fit(X, y)
        >>> logits = torch.tensor([[0.0, 0.0, 9.0]])  # class 2 is not in this batch
        >>> round(float(clf.classification_loss(logits, torch.tensor([0]))), 4)
        0.0
        """
        return negatives_cross_entropy(
            logits, y, self.negatives, sample_weight, criterion=super().classification_loss
        )

    # ------------------------------------------------------------------ growing the classes

    def _accept_new_classes(self, y, classes) -> bool:
        """With ``class_incremental``, add the new labels of ``y`` (and ``classes``)."""
        if not self.class_incremental:
            return False
        known = self.classes_
        try:
            labels = np.unique(np.asarray(as_numpy(y)).ravel())
        except (TypeError, ValueError):
            return True  # the validation of y says what is wrong with it
        if classes is not None:
            named = np.unique(np.asarray(classes))
            missing, outside = np.setdiff1d(known, named), np.setdiff1d(labels, named)
            if len(missing) or len(outside):
                raise ValueError(
                    f"`classes={np.asarray(classes).tolist()!r}` must name every class seen so "
                    f"far, {known.tolist()!r}, and every label of y (class_incremental=True "
                    "lets a later call name more classes, never fewer); it lacks "
                    f"{np.union1d(missing, outside).tolist()!r}."
                )
            labels = np.union1d(labels, named)
        new = np.setdiff1d(labels, known)
        if len(new):
            self._grow_classes(np.union1d(known, new))
        return True

    def _grow_classes(self, classes: np.ndarray) -> None:
        """Make ``classes`` (sorted, a superset) the classes, growing the output layer."""
        old = self.classes_
        old_rows = np.searchsorted(classes, old)
        layer = output_layer(self.module_)
        if layer.out_features != len(old):
            raise TypeError(
                f"class_incremental=True grows the output layer, but the last linear layer of "
                f"{type(self.module_).__name__} has {layer.out_features} outputs for "
                f"{len(old)} classes: expose the layer that computes the logits as "
                "'last_layer'."
            )
        generator = None
        if getattr(self, "seed_", None) is not None:  # a new draw at every growth
            generator = torch.Generator().manual_seed(self.seed_ * 7919 + len(self.history))
        grow_output_layer(layer, old_rows, len(classes), self.optimizer_, generator)
        self.label_encoder_.classes_ = classes
        if hasattr(self, "reservoir_seen_"):
            seen = torch.zeros(len(classes), dtype=torch.int64)
            seen[old_rows] = self.reservoir_seen_.cpu()
            self.reservoir_seen_ = seen
            self.reservoir_y_ = torch.as_tensor(old_rows)[self.reservoir_y_.cpu()]
        self._grow_class_state(old_rows, len(classes))

    def _grow_class_state(self, old_rows: np.ndarray, n_classes: int) -> None:
        """Grow what else the estimator keeps per class (JEM: its chain start)."""

    # ------------------------------------------------------------------ the reservoir

    def _add_replay(self, X: np.ndarray, y: np.ndarray, weights, *, reset: bool):
        """The fit's data with the reservoir's samples appended; the reservoir updated.

        The samples stored before this call are appended to ``(X, y)``, weighted so that each
        stored class weighs, in all, as much as an average class of the chunk (times its
        ``class_weight``); then the chunk's samples of positive weight enter the reservoir.
        ``reset`` (a fresh fit) empties it first.
        """
        if reset:
            for name in RESERVOIR_ATTRIBUTES:
                self.__dict__.pop(name, None)
        if self.replay_per_class:
            X, y, weights = self._replay(X, y, weights)
        self._warn_one_class(y, weights)
        return X, y, weights

    def _replay(self, X: np.ndarray, y: np.ndarray, weights):
        n_classes = len(self.classes_)
        if not hasattr(self, "reservoir_seen_"):
            self.reservoir_X_ = torch.empty((0, *X.shape[1:]), dtype=torch.float32)
            self.reservoir_y_ = torch.empty(0, dtype=torch.int64)
            self.reservoir_seen_ = torch.zeros(n_classes, dtype=torch.int64)
        stored_X = self.reservoir_X_.cpu().numpy()
        stored_y = self.reservoir_y_.cpu().numpy()
        seen = self.reservoir_seen_.cpu().numpy().copy()
        seed = getattr(self, "seed_", None)
        # Seeded by the stream's position: a resumed stream draws what an uninterrupted one does
        rng = np.random.default_rng(None if seed is None else [seed, int(seen.sum())])
        counted = np.ones(len(y), dtype=bool) if weights is None else weights > 0
        kept_X, kept_y = [], []
        for c in range(n_classes):
            incoming = X[counted & (y == c)]
            kept = reservoir_update(
                stored_X[stored_y == c], int(seen[c]), incoming, self.replay_per_class, rng
            )
            seen[c] += len(incoming)
            kept_X.append(kept)
            kept_y.append(np.full(len(kept), c, dtype=np.int64))
        self.reservoir_X_ = torch.as_tensor(np.concatenate(kept_X)).float()
        self.reservoir_y_ = torch.as_tensor(np.concatenate(kept_y))
        self.reservoir_seen_ = torch.as_tensor(seen)
        if not len(stored_y):
            return X, y, weights
        replay_weights = np.ones(len(stored_y), dtype=np.float32)
        if isinstance(self.class_weight, Mapping):
            replay_weights = self._check_sample_weight(
                None, stored_y, partial=True, require_classes=False
            )
            replay_weights = np.ones(len(stored_y)) if replay_weights is None else replay_weights
        # Each stored class weighs, in all, as much as an average class of the chunk: the
        # equal mix of replay methods, without which 20 samples drown among hundreds.
        per_class = counted.sum() / max(1, len(np.unique(y[counted])))
        stored_counts = np.bincount(stored_y, minlength=n_classes)
        replay_weights = replay_weights * per_class / stored_counts[stored_y]
        own = np.ones(len(y), dtype=np.float32) if weights is None else weights
        mixed = np.concatenate([own, replay_weights]).astype(np.float32)
        return np.concatenate([X, stored_X]), np.concatenate([y, stored_y]), mixed

    def _warn_one_class(self, y: np.ndarray, weights) -> None:
        """Warn when restricted negatives meet data of a single class: nothing to contrast."""
        if self.negatives == "all":
            return
        present = np.unique(y if weights is None else y[weights > 0])
        if len(present) == 1:
            label = self.classes_[present[0]]
            label = label.item() if isinstance(label, np.generic) else label
            warnings.warn(
                f"{type(self).__name__}(negatives={self.negatives!r}) trains on samples of one "
                f"class only, {label!r}: its normalising term has no other class to contrast, "
                "so the classification loss is 0 and teaches nothing. Keep samples of earlier "
                "classes with replay_per_class > 0, or use negatives='all'.",
                UserWarning,
                stacklevel=4,
            )
