"""The estimators' face over class-incremental learning: ``ClassIncrementalMixin``.

A mixin, because what it changes is what the user calls: ``partial_fit`` (and a warm-started
``fit``) accepting new labels. It fills the face's hooks: ``_resolve_auto_params`` (``"auto"``,
:data:`AUTO`), ``_accept_new_classes`` (a continuing fit whose labels are new grows ``classes_``
and the output layer, :mod:`~ebmclassifier.continual.output_layer`), ``_add_replay`` (the
per-class reservoir, :mod:`~ebmclassifier.continual.reservoir`, and generated replay,
:mod:`~ebmclassifier.continual.generated`, mixed into each fit's data) and the engine's
``_negatives`` (the classes the classification term contrasts). Its draws come from the call's
generators (the engine's ``_call_generators``). It warns when an energy term meets restricted
negatives without replay, and validates the parameters (``class_incremental``, ``negatives``,
``replay_per_class``, ``generated_per_class``, ``generated_steps``, which are the estimators'
own, so that scikit-learn's ``get_params`` sees them).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from .._utils.data import grow_class_counts
from .._utils.parameters import ParamChecker, is_int
from .._utils.statistics import column_mean_std
from .._utils.validation import as_numpy
from .._utils.warn import warn_user
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
    An estimator says through ``_has_energy_term()`` whether its loss has an energy term
    besides the classification (default False): a call that adds classes warns when that
    term meets restricted negatives without replay.
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

    def _resolve_auto_params(self) -> None:
        """``negatives_``, ``replay_per_class_``, ``generated_per_class_``: the parameters of
        the same names with ``"auto"`` resolved from ``class_incremental`` (:data:`AUTO`)."""
        super()._resolve_auto_params()
        for name, auto in AUTO[bool(self.class_incremental)].items():
            value = getattr(self, name)
            setattr(self, f"{name}_", auto if _is_auto(value) else value)

    def _negatives(self) -> str | int:
        """The classes the classification term contrasts: ``negatives_`` (resolved once per
        call, with the other ``"auto"`` parameters)."""
        return self.negatives_

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
        generator = self._call_generators()("grow", "cpu")  # a new draw at every growth
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
        return old_rows

    # ------------------------------------------------------------------ replay

    def _add_replay(
        self, X: np.ndarray, y: np.ndarray, weights, *, reset: bool, old_rows=None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The fit's data with replayed samples appended: stored, then generated.

        The reservoir's samples stored before this call are appended, then the chunk's
        samples of positive weight enter the reservoir. A call that added classes
        (``old_rows``, the rows of the classes known before it) draws
        ``generated_per_class`` samples of each of those classes from the model
        (:meth:`_generate`), kept until the next such call and appended to every call's
        data. Each replayed class weighs, in all, as much as an average class of the chunk
        (times its ``class_weight``; :func:`~ebmclassifier.continual.replay_weights`), per
        kind of replay. ``reset`` (a fresh fit) empties both memories first.
        """
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
        # by the stream's position: a resumed stream draws what an uninterrupted one does
        rng = self._call_generators().at_position("reservoir", int(seen.sum()))
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
        input range, from the first fit's per-feature Gaussian; drawn from the call's generator
        (its seed and epoch), so that a resumed stream draws what an uninterrupted one does.
        Sets ``generated_X_`` (float32) and ``generated_y_``.
        """
        labels = torch.as_tensor(np.repeat(rows, self.generated_per_class_), dtype=torch.int64)
        self.generated_X_ = generate_class_samples(
            self.module_,
            labels,
            mean=self.input_mean_,
            std=self.input_std_,
            low=self.input_min_,
            high=self.input_max_,
            n_steps=self.generated_steps,
            generator=self._call_generators()("generated", self.device_),
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
