"""The estimators' face over class-incremental learning: ``ClassIncrementalMixin``.

It fills the base's hooks ``_accept_new_classes`` (a continuing fit whose labels are new grows
``classes_`` and the output layer, :mod:`~ebmclassifier.continual.output_layer`) and
``_add_replay`` (the per-class reservoir, :mod:`~ebmclassifier.continual.reservoir`, and
generated replay, :mod:`~ebmclassifier.continual.generated`, mixed into each fit's data),
resolves ``"auto"`` (:data:`AUTO`), warns when an energy term meets restricted negatives
without replay, and validates the parameters (``class_incremental``, ``negatives``,
``replay_per_class``, ``generated_per_class``, ``generated_steps``, which are the estimators'
own, so that scikit-learn's ``get_params`` sees them).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import torch

from .._utils.data import grow_class_counts
from .._utils.generators import make_generator
from .._utils.parameters import ParamChecker, is_int
from .._utils.statistics import column_mean_std
from .._utils.validation import as_numpy
from .._utils.warn import warn_user
from ..losses import criterion_mean, negatives_cross_entropy
from .generated import generate_class_samples
from .output_layer import grow_output_layer, output_layer
from .reservoir import class_reservoirs, replay_weights

__all__ = ["AUTO", "CONTINUAL_ATTRIBUTES", "RESERVOIR_ATTRIBUTES", "ClassIncrementalMixin"]

#: The fitted attributes of the reservoir, saved with the estimator.
RESERVOIR_ATTRIBUTES = ("reservoir_X_", "reservoir_y_", "reservoir_seen_")
#: Generated replay's samples (no training sample among them) and its chains' start.
GENERATED_ATTRIBUTES = ("generated_X_", "generated_y_", "input_mean_", "input_std_")
#: What ``"auto"`` resolves to, with ``class_incremental`` True and False (docs/continual.md:
#: the best of the methods measured on split digits and split MNIST-1D, and today's loss).
AUTO = {
    True: {"negatives": "batch", "replay_per_class": 20, "generated_per_class": 100},
    False: {"negatives": "all", "replay_per_class": 0, "generated_per_class": 0},
}
#: Every fitted attribute of class-incremental learning that the estimators save.
CONTINUAL_ATTRIBUTES = (
    *RESERVOIR_ATTRIBUTES,
    *GENERATED_ATTRIBUTES,
    *(f"{name}_" for name in AUTO[True]),
)


class ClassIncrementalMixin:
    """``class_incremental``, ``negatives``, ``replay_per_class`` and generated replay.

    The parameters ``negatives``, ``replay_per_class`` and ``generated_per_class`` take
    ``"auto"``, resolved at every fit from ``class_incremental`` (:data:`AUTO`) into the
    fitted attributes ``negatives_``, ``replay_per_class_`` and ``generated_per_class_``.
    """

    def _validate_own_params(self, check: ParamChecker) -> None:
        super()._validate_own_params(check)
        check.satisfies("class_incremental", isinstance(self.class_incremental, bool), "a bool")
        negatives = self.negatives
        ok = _is_auto(negatives) or negatives in ("all", "batch")
        ok = ok or (is_int(negatives) and negatives >= 1)
        check.satisfies("negatives", ok, "'auto', 'all', 'batch' or an int >= 1")
        for name in ("replay_per_class", "generated_per_class"):
            value = getattr(self, name)
            ok = _is_auto(value) or (is_int(value) and value >= 0)
            check.satisfies(name, ok, "'auto' or an int >= 0")
        check.integer("generated_steps", 0)

    def _resolved(self, name: str):
        """The value of the parameter ``name``, ``"auto"`` resolved (see :data:`AUTO`)."""
        value = getattr(self, name)
        return AUTO[bool(self.class_incremental)][name] if _is_auto(value) else value

    def _has_energy_term(self) -> bool:
        """Whether the loss has an energy term besides the classification; here none."""
        return False

    def _prepare_fit(self, X) -> None:
        super()._prepare_fit(X)
        # Generated replay's chains start from the data's per-feature Gaussian (the shape of
        # the first fit's data, as the input range): statistics, not samples.
        mean, std = column_mean_std(X)
        self.input_mean_ = torch.as_tensor(mean, device=self.device_)
        self.input_std_ = torch.as_tensor(std, device=self.device_)

    def classification_loss(
        self, logits: torch.Tensor, y: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The classification term, over the classes that ``negatives`` chooses.

        :func:`~ebmclassifier.losses.negatives_cross_entropy` of ``criterion_``: with
        ``negatives="all"`` the criterion over every class (the base's
        ``classification_loss``); ``"batch"`` and an int ``k`` leave classes out of the
        normalising term. It is the term that :func:`~ebmclassifier.losses.ngebm_loss` and
        :func:`~ebmclassifier.losses.jem_loss` build from the same arguments, in training and
        validation.

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
            logits, y, sample_weight=sample_weight, **self._classification()
        )

    def _classification(self) -> dict:
        """How the losses build the classification term: ``criterion`` and ``negatives``.

        ``criterion_`` averaged per sample by :func:`~ebmclassifier.losses.criterion_mean`,
        restricted to the classes that ``negatives`` chooses: the arguments that
        :func:`~ebmclassifier.losses.ngebm_loss`, :func:`~ebmclassifier.losses.jem_loss` and
        :meth:`classification_loss` pass to
        :func:`~ebmclassifier.losses.negatives_cross_entropy`, so that the whole loss is built
        in ``losses.py`` without a call back to the estimator; with ``negatives=k`` the
        epoch's generator draws them.
        """
        # resolved once per fit, with the other "auto" parameters, before training starts
        negatives = self.negatives_
        return {
            "criterion": partial(criterion_mean, self.criterion_),
            "negatives": negatives,
            "generator": None if isinstance(negatives, str) else self._generator("negatives"),
        }

    # ------------------------------------------------------------------ growing the classes

    def _accept_new_classes(self, y, classes) -> tuple[bool, np.ndarray | None]:
        """With ``class_incremental``, add the new labels of ``y`` (and ``classes``).

        Returns ``(incremental, old_rows)`` as the base's hook says: ``old_rows`` is the new
        position of each class known before, when this call added classes, else None.
        """
        if not self.class_incremental:
            return False, None
        known = self.classes_
        try:
            labels = np.unique(np.asarray(as_numpy(y)).ravel())
        except (TypeError, ValueError):
            return True, None  # the validation of y says what is wrong with it
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
        return True, (self._grow_classes(np.union1d(known, new)) if len(new) else None)

    def _grow_classes(self, classes: np.ndarray) -> np.ndarray:
        """Make ``classes`` (sorted, a superset) the classes, growing the output layer.

        Returns the new position of each class known before (``old_rows``).
        """
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
        # a new draw at every growth
        generator = make_generator(self._fit_seed() * 7919 + len(self.history))
        grow_output_layer(layer, old_rows, len(classes), self.optimizer_, generator)
        self.label_encoder_.classes_ = classes
        grow_class_counts(self, old_rows, len(classes))
        if hasattr(self, "reservoir_seen_"):
            seen = torch.zeros(len(classes), dtype=torch.int64)
            seen[old_rows] = self.reservoir_seen_.cpu()
            self.reservoir_seen_ = seen
            self.reservoir_y_ = torch.as_tensor(old_rows)[self.reservoir_y_.cpu()]
        if hasattr(self, "generated_y_"):
            self.generated_y_ = torch.as_tensor(old_rows)[self.generated_y_.cpu()]
        self._grow_class_state(old_rows, len(classes))
        return old_rows

    def _grow_class_state(self, old_rows: np.ndarray, n_classes: int) -> None:
        """Grow what else the estimator keeps per class (JEM: its chain start)."""

    # ------------------------------------------------------------------ replay

    def _add_replay(
        self, X: np.ndarray, y: np.ndarray, weights, *, reset: bool, old_rows=None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The fit's data with replayed samples appended: stored, then generated.

        Resolves the ``"auto"`` parameters first. The reservoir's samples stored before this
        call are appended, then the chunk's samples of positive weight enter the reservoir. A
        call that added classes (``old_rows``, the rows of the classes known before it) draws
        ``generated_per_class`` samples of each of those classes from the model
        (:meth:`_generate`), kept until the next such call and appended to every call's data.
        Each replayed class weighs, in all, as much as an average class of the chunk (times
        its ``class_weight``; :func:`~ebmclassifier.continual.replay_weights`), per kind of
        replay. ``reset`` (a fresh fit) empties both memories first.
        """
        for name in AUTO[True]:
            setattr(self, f"{name}_", self._resolved(name))
        if not isinstance(X, np.ndarray) and (self.replay_per_class_ or self.generated_per_class_):
            raise ValueError(
                f"{type(self).__name__} replays stored or generated samples by mixing them into "
                "the training array, which input read in chunks (a Dataset, a memmap, uint8 "
                "images) is not; set replay_per_class=0 and generated_per_class=0, or pass the "
                "data as a float32 array."
            )
        if reset:
            for name in (*RESERVOIR_ATTRIBUTES, "generated_X_", "generated_y_"):
                self.__dict__.pop(name, None)
        counted = np.ones(len(y), dtype=bool) if weights is None else weights > 0
        per_class = counted.sum() / max(1, len(np.unique(y[counted])))
        if self.replay_per_class_:
            stored_X, stored_y = self._update_reservoir(X, y, counted)
            X, y, weights = self._mixed(X, y, weights, stored_X, stored_y, per_class)
        if not self.generated_per_class_:
            self.__dict__.pop("generated_X_", None)
            self.__dict__.pop("generated_y_", None)
        elif old_rows is not None:
            self._generate(old_rows)
        if hasattr(self, "generated_y_"):
            generated = self.generated_X_.cpu().numpy(), self.generated_y_.cpu().numpy()
            X, y, weights = self._mixed(X, y, weights, *generated, per_class)
        self._warn_one_class(y, weights)
        if old_rows is not None:
            self._warn_energy_term_alone()
        return X, y, weights

    def _update_reservoir(self, X: np.ndarray, y: np.ndarray, counted: np.ndarray):
        """The samples stored before this call; the chunk's counted samples then enter."""
        n_classes = len(self.classes_)
        if not hasattr(self, "reservoir_seen_"):
            self.reservoir_X_ = torch.empty((0, *X.shape[1:]), dtype=torch.float32)
            self.reservoir_y_ = torch.empty(0, dtype=torch.int64)
            self.reservoir_seen_ = torch.zeros(n_classes, dtype=torch.int64)
        stored_X = self.reservoir_X_.cpu().numpy()
        stored_y = self.reservoir_y_.cpu().numpy()
        seen = self.reservoir_seen_.cpu().numpy()
        # Seeded by the stream's position: a resumed stream draws what an uninterrupted one does
        rng = np.random.default_rng([self._fit_seed(), int(seen.sum())])
        entering = np.where(counted, y, -1)  # the samples of zero weight enter no reservoir
        kept_X, kept_y, seen = class_reservoirs(
            stored_X, stored_y, seen, X, entering, self.replay_per_class_, rng
        )
        self.reservoir_X_ = torch.as_tensor(kept_X).float()
        self.reservoir_y_ = torch.as_tensor(kept_y)
        self.reservoir_seen_ = torch.as_tensor(seen)
        return stored_X, stored_y

    def _mixed(self, X, y, weights, replay_X, replay_y, per_class: float):
        """``(X, y, weights)`` with ``(replay_X, replay_y)`` appended, each replayed class
        weighing ``per_class`` in all (times its ``class_weight``)."""
        if not len(replay_y):
            return X, y, weights
        class_weights = None
        if isinstance(self.class_weight, Mapping):
            class_weights = self._check_sample_weight(
                None, replay_y, partial=True, require_classes=False
            )
        replayed = replay_weights(replay_y, len(self.classes_), per_class, class_weights)
        own = np.ones(len(y), dtype=np.float32) if weights is None else weights
        mixed = np.concatenate([own, replayed]).astype(np.float32)
        return np.concatenate([X, replay_X]), np.concatenate([y, replay_y]), mixed

    # ------------------------------------------------------------------ generated replay

    def _generate(self, rows: np.ndarray) -> None:
        """Draw ``generated_per_class`` samples of each class ``rows`` (encoded) from the model.

        :func:`~ebmclassifier.continual.generate_class_samples`: proximal SGLD on the
        class-conditional energy ``E(x, y) = -f(x)[y]``, ``generated_steps`` steps inside the
        input range, from the first fit's per-feature Gaussian; seeded by ``random_state`` and
        the stream's position, so that a resumed stream draws what an uninterrupted one does.
        Sets ``generated_X_`` (float32) and ``generated_y_``.
        """
        labels = torch.as_tensor(np.repeat(rows, self.generated_per_class_), dtype=torch.int64)
        key = [self._fit_seed(), len(self.history), 1]
        seed = int(np.random.SeedSequence(key).generate_state(1)[0])
        self.generated_X_ = generate_class_samples(
            self.module_,
            labels,
            mean=self.input_mean_,
            std=self.input_std_,
            low=self.input_min_,
            high=self.input_max_,
            n_steps=self.generated_steps,
            generator=make_generator(seed, self.device_),
        )
        self.generated_y_ = labels

    # ------------------------------------------------------------------ warnings

    def _warn_energy_term_alone(self) -> None:
        """Warn at a call that adds classes when the energy term meets restricted negatives
        and no replay: the new classes are then barely learned (docs/continual.md)."""
        restricted = self.negatives_ != "all"
        replay = self.replay_per_class_ or self.generated_per_class_
        if self.class_incremental and restricted and not replay and self._has_energy_term():
            warn_user(
                f"{type(self).__name__}(class_incremental=True, negatives="
                f"{self.negatives_!r}) with its energy term and no replay learns new classes "
                "poorly: nothing relates their energies to the old classes' ones, and the "
                "energy term keeps the new logits below the old ones (split MNIST-1D: worse "
                "than plain fine-tuning, docs/continual.md). Use generated_per_class > 0 "
                "(generated replay, which stores no training sample) or replay_per_class > 0 "
                "(stored samples), both on with 'auto'; or train the classification term "
                "alone (NGEBMClassifier(beta=0), JEMClassifier(px_weight=0))."
            )

    def _warn_one_class(self, y: np.ndarray, weights) -> None:
        """Warn when restricted negatives meet data of a single class: nothing to contrast."""
        if self.negatives_ == "all":
            return
        present = np.unique(y if weights is None else y[weights > 0])
        if len(present) == 1:
            label = self.classes_[present[0]]
            label = label.item() if isinstance(label, np.generic) else label
            warn_user(
                f"{type(self).__name__}(negatives={self.negatives_!r}) trains on samples of one "
                f"class only, {label!r}: its normalising term has no other class to contrast, "
                "so the classification loss is 0 and teaches nothing. Keep samples of earlier "
                "classes with replay_per_class > 0 or generated_per_class > 0, or use "
                "negatives='all'."
            )


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"
