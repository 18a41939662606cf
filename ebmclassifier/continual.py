"""Class-incremental learning: the growing output layer, the reservoir, and the estimators' face.

Function and face in one module, as scikit-learn keeps ``k_means`` and ``KMeans`` together.
The pieces that :class:`~ebmclassifier.NGEBMClassifier` and
:class:`~ebmclassifier.JEMClassifier` use with ``class_incremental=True`` and
``replay_per_class > 0``, as functions on modules, optimizers and arrays:

- :func:`output_layer` finds the network's last linear layer (``module.last_layer``, as the
  networks of :mod:`ebmclassifier.nn` name it, or the last layer of an ``nn.Sequential``);
- :func:`grow_output_layer` gives it rows for new classes, leaving every old row and every
  other weight as it was, and carries the optimizer's state over to the grown tensors;
- :func:`reservoir_update` keeps a uniform sample of each class's stream of training samples
  (Vitter's reservoir sampling, "Algorithm R" [2]_).

``ClassIncrementalMixin``, the estimators' face over them, fills the base's hooks
``_accept_new_classes`` (a continuing fit whose labels are new grows ``classes_`` and the
output layer) and ``_add_replay`` (the per-class reservoir and generated replay mixed into
each fit's data), resolves ``"auto"`` (:data:`AUTO`: with ``class_incremental=True`` batch
negatives, 20 stored and 100 generated samples per class, the best of the methods measured in
``docs/continual.md``), warns when an energy term meets restricted negatives without replay,
and validates the parameters (``class_incremental``, ``negatives``, ``replay_per_class``,
``generated_per_class``, ``generated_steps``, which are the estimators' own, so that
scikit-learn's ``get_params`` sees them). Generated replay draws the old classes from the
model itself, by proximal SGLD (:func:`~ebmclassifier.sampling.langevin.run_sampler`) on the
class-conditional energy ``E(x, y) = -f(x)[y]`` of [3]_, at each call that adds classes: the
energy-based model's own rehearsal, which stores no training sample (deep generative replay,
[4]_, with the classifier as its own generator).

The objective that leaves absent classes alone, Li et al.'s [1]_, is
:func:`ebmclassifier.losses.negatives_cross_entropy`: the estimators pass ``negatives`` to
their loss (:func:`~ebmclassifier.losses.ngebm_loss`, :func:`~ebmclassifier.losses.jem_loss`),
which restricts the classification term where it builds it.

References
----------
.. [1] Li, S., Du, Y., van de Ven, G. M. and Mordatch, I. "Energy-Based Models for Continual
   Learning". CoLLAs 2022 (arXiv:2011.12216, 2020).
.. [2] Vitter, J. S. "Random sampling with a reservoir". ACM Transactions on Mathematical
   Software 11(1), 1985.
.. [3] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
   Should Treat it Like One". ICLR 2020.
.. [4] Shin, H., Lee, J. K., Kim, J. and Kim, J. "Continual Learning with Deep Generative
   Replay". NeurIPS 2017.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from functools import partial

import numpy as np
import torch
from torch import nn

from ._utils.data import grow_class_counts
from ._utils.device import seeded_rng
from ._utils.parameters import ParamChecker, is_int
from ._utils.validation import as_numpy
from .losses import _sum_of_squares, criterion_mean, negatives_cross_entropy
from .sampling.langevin import run_sampler

__all__ = ["grow_output_layer", "output_layer", "reservoir_update"]

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
#: Generated replay's sampler: proximal SGLD's step, noise and gradient clip (a fraction of
#: each feature's input range), JEMClassifier's defaults.
GENERATION_SAMPLER = {"step_size": 1.0, "noise": 0.01, "clip_fraction": 0.01}
#: Every fitted attribute of class-incremental learning that the estimators save.
CONTINUAL_ATTRIBUTES = (
    *RESERVOIR_ATTRIBUTES,
    *GENERATED_ATTRIBUTES,
    *(f"{name}_" for name in AUTO[True]),
)


def output_layer(module: nn.Module) -> nn.Linear:
    """The last linear layer of a network: the one that gives one logit per class.

    Parameters
    ----------
    module : torch.nn.Module
        A network of :mod:`ebmclassifier.nn` (its ``last_layer``), another module with a
        ``last_layer`` attribute that is an ``nn.Linear``, or an ``nn.Sequential`` whose last
        layer is one.

    Returns
    -------
    torch.nn.Linear

    Raises
    ------
    TypeError
        When no such layer is found.

    Examples
    --------
    >>> from ebmclassifier.nn import MLP
    >>> net = MLP(n_features=4, n_classes=3, hidden_sizes=(8,))
    >>> output_layer(net) is net.last_layer, output_layer(net).out_features
    (True, 3)
    """
    layer = getattr(module, "last_layer", None)
    if layer is None and isinstance(module, nn.Sequential) and len(module):
        layer = module[-1]
    if not isinstance(layer, nn.Linear):
        raise TypeError(
            f"class_incremental=True grows the network's output layer, but "
            f"{type(module).__name__} has no recognisable one: give the module a 'last_layer' "
            "attribute (or property) returning the torch.nn.Linear that computes the logits, "
            "as the networks of ebmclassifier.nn do, or use an nn.Sequential ending in "
            "nn.Linear."
        )
    return layer


def grow_output_layer(
    layer: nn.Linear,
    old_rows: np.ndarray,
    n_outputs: int,
    optimizer: torch.optim.Optimizer | None = None,
    generator: torch.Generator | None = None,
) -> None:
    """Give a linear output layer ``n_outputs`` rows; old row ``r`` moves to ``old_rows[r]``.

    The new rows (the positions not in ``old_rows``) are drawn as ``torch.nn.Linear`` draws
    its weights, uniform in ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]`` for the weight and the bias.
    The old rows are copied bitwise. The layer's ``weight`` and ``bias`` become new
    parameters, so an ``optimizer`` that held the old ones is given the new ones, and its
    per-parameter state (Adam's moments, SGD's momentum: any tensor of the parameter's shape)
    is carried over, with zeros for the new rows; scalars such as Adam's step count are kept.

    Parameters
    ----------
    layer : torch.nn.Linear
        Changed in place (``out_features`` too).
    old_rows : ndarray of int of shape (layer.out_features,)
        The new position of each old row, strictly increasing or not, all distinct.
    n_outputs : int
        The number of rows after the growth.
    optimizer : torch.optim.Optimizer or None, default=None
    generator : torch.Generator or None, default=None
        Draws the new rows (on the CPU); ``None`` uses torch's global random state.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> layer = torch.nn.Linear(4, 2)
    >>> before = layer.weight.detach().clone()
    >>> opt = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    >>> grow_output_layer(layer, np.array([0, 2]), 3, opt)  # a new class between the two
    >>> layer.weight.shape, torch.equal(layer.weight[[0, 2]], before)
    (torch.Size([3, 4]), True)
    >>> opt.param_groups[0]["params"][0] is layer.weight
    True
    """
    old_rows = torch.as_tensor(np.asarray(old_rows, dtype=np.int64))
    new_rows = torch.as_tensor(np.setdiff1d(np.arange(n_outputs), old_rows.numpy()))
    bound = 1.0 / math.sqrt(layer.in_features) if layer.in_features else 0.0
    replaced = {}
    for name in ("weight", "bias"):
        old = getattr(layer, name)
        if old is None:
            continue
        shape = (n_outputs, *old.shape[1:])
        fresh = torch.empty((len(new_rows), *old.shape[1:]), dtype=old.dtype)
        fresh.uniform_(-bound, bound, generator=generator)
        data = torch.empty(shape, dtype=old.dtype, device=old.device)
        data[old_rows.to(old.device)] = old.detach()
        data[new_rows.to(old.device)] = fresh.to(old.device)
        grown = nn.Parameter(data, requires_grad=old.requires_grad)
        setattr(layer, name, grown)
        replaced[old] = grown
    layer.out_features = n_outputs
    if optimizer is not None:
        _carry_optimizer_state(optimizer, replaced, old_rows)


def _carry_optimizer_state(optimizer, replaced: dict, old_rows: torch.Tensor) -> None:
    """Point ``optimizer`` at the grown parameters; zeros in their state for the new rows."""
    for group in optimizer.param_groups:
        group["params"] = [replaced.get(p, p) for p in group["params"]]
    for old, new in replaced.items():
        state = optimizer.state.pop(old, None)
        if state is None:
            continue
        carried = {}
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.shape == old.shape:
                grown = torch.zeros(new.shape, dtype=value.dtype, device=value.device)
                grown[old_rows.to(value.device)] = value
                value = grown
            carried[key] = value
        optimizer.state[new] = carried


def reservoir_update(
    stored: np.ndarray, n_seen: int, incoming: np.ndarray, capacity: int, rng: np.random.Generator
) -> np.ndarray:
    """Vitter's Algorithm R: a uniform sample of ``capacity`` items of one stream.

    The ``t``-th item of the stream (from 0) is kept while ``t < capacity``; after that it
    replaces slot ``j`` when ``j``, drawn uniformly from ``0..t``, is below ``capacity``. So
    after any number of items each of them is in the reservoir with the same probability.

    Parameters
    ----------
    stored : ndarray of shape (min(n_seen, capacity), ...)
        The reservoir so far, in slot order.
    n_seen : int
        The number of items of the stream seen before ``incoming``.
    incoming : ndarray of shape (m, ...)
        The next items of the stream, in order.
    capacity : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (min(n_seen + m, capacity), ...)
        A new array; ``stored`` is not changed.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> kept = reservoir_update(np.empty(0), 0, np.arange(3.0), capacity=5, rng=rng)
    >>> kept.tolist()  # fewer items than places: all of them
    [0.0, 1.0, 2.0]
    >>> len(reservoir_update(kept, 3, np.arange(3.0, 100.0), capacity=5, rng=rng))
    5
    """
    n_free = max(0, min(capacity - n_seen, len(incoming)))
    slots = np.concatenate([stored, incoming[:n_free]]) if n_free else stored.copy()
    rest = incoming[n_free:]
    if len(rest):
        t = n_seen + n_free + np.arange(len(rest))
        j = rng.integers(0, t + 1)
        for i in np.flatnonzero(j < capacity):  # in stream order: a later item overwrites
            slots[j[i]] = rest[i]
    return slots


# ---------------------------------------------------------------- the estimators' face


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

    #: The parameter that weighs the estimator's energy term besides the classification
    #: (None: no such term).
    _energy_weight: str | None = None

    def _has_energy_term(self) -> bool:
        """Whether the loss has an energy term besides the classification."""
        return self._energy_weight is not None and getattr(self, self._energy_weight) > 0

    def _prepare_fit(self, X: np.ndarray) -> None:
        super()._prepare_fit(X)
        # Generated replay's chains start from the data's per-feature Gaussian (the shape of
        # the first fit's data, as the input range): statistics, not samples.
        # X.std(axis=0), bitwise, without its copy of X
        mean = X.mean(axis=0)
        std = np.sqrt(_sum_of_squares(X, mean) / len(X))
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
        in ``losses.py`` without a call back to the estimator.
        """
        negatives = self._resolved("negatives")
        return {"criterion": partial(criterion_mean, self.criterion_), "negatives": negatives}

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
        grow_class_counts(self, old_rows, len(classes))
        if hasattr(self, "reservoir_seen_"):
            seen = torch.zeros(len(classes), dtype=torch.int64)
            seen[old_rows] = self.reservoir_seen_.cpu()
            self.reservoir_seen_ = seen
            self.reservoir_y_ = torch.as_tensor(old_rows)[self.reservoir_y_.cpu()]
        if hasattr(self, "generated_y_"):
            self.generated_y_ = torch.as_tensor(old_rows)[self.generated_y_.cpu()]
        self._rehearsed_rows = old_rows  # the classes that generated replay draws, this call
        self._grow_class_state(old_rows, len(classes))

    def _grow_class_state(self, old_rows: np.ndarray, n_classes: int) -> None:
        """Grow what else the estimator keeps per class (JEM: its chain start)."""

    # ------------------------------------------------------------------ replay

    def _add_replay(self, X: np.ndarray, y: np.ndarray, weights, *, reset: bool):
        """The fit's data with replayed samples appended: stored, then generated.

        Resolves the ``"auto"`` parameters first. The reservoir's samples stored before this
        call are appended, then the chunk's samples of positive weight enter the reservoir. A
        call that added classes draws ``generated_per_class`` samples of each class known
        before it from the model (:meth:`_generate`), kept until the next such call and
        appended to every call's data. Each replayed class weighs, in all, as much as an
        average class of the chunk (times its ``class_weight``), per kind of replay. ``reset``
        (a fresh fit) empties both memories first.
        """
        for name in AUTO[True]:
            setattr(self, f"{name}_", self._resolved(name))
        rehearsed = self.__dict__.pop("_rehearsed_rows", None)
        if reset:
            for name in (*RESERVOIR_ATTRIBUTES, "generated_X_", "generated_y_"):
                self.__dict__.pop(name, None)
        # what a state saved during this call keeps, so that a resumed call mixes it again
        self._reservoir_before = {
            k: getattr(self, k) for k in RESERVOIR_ATTRIBUTES if hasattr(self, k)
        }
        counted = np.ones(len(y), dtype=bool) if weights is None else weights > 0
        per_class = counted.sum() / max(1, len(np.unique(y[counted])))
        if self.replay_per_class_:
            stored_X, stored_y = self._update_reservoir(X, y, counted)
            X, y, weights = self._mixed(X, y, weights, stored_X, stored_y, per_class)
        if not self.generated_per_class_:
            self.__dict__.pop("generated_X_", None)
            self.__dict__.pop("generated_y_", None)
        elif rehearsed is not None and len(rehearsed):
            self._generate(rehearsed)
        if hasattr(self, "generated_y_"):
            generated = self.generated_X_.cpu().numpy(), self.generated_y_.cpu().numpy()
            X, y, weights = self._mixed(X, y, weights, *generated, per_class)
        self._warn_one_class(y, weights)
        if rehearsed is not None:
            self._warn_energy_term_alone()
        return X, y, weights

    def _resume_state(self) -> dict:
        state = super()._resume_state()
        if self._fitting:  # the interrupted call updated the reservoir when it began
            state["reservoir_before"] = dict(getattr(self, "_reservoir_before", {}))
        return state

    def _load_resume_state(self, state: dict, *, in_fit: bool) -> None:
        """Before the call resumed by ``partial_fit``: the reservoir as that call found it."""
        super()._load_resume_state(state, in_fit=in_fit)
        if "reservoir_before" in state and not self._fitting:  # not yet mixed into the data
            for name in RESERVOIR_ATTRIBUTES:
                self.__dict__.pop(name, None)
            self.__dict__.update(state["reservoir_before"])

    def _update_reservoir(self, X: np.ndarray, y: np.ndarray, counted: np.ndarray):
        """The samples stored before this call; the chunk's counted samples then enter."""
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
        kept_X, kept_y = [], []
        for c in range(n_classes):
            incoming = X[counted & (y == c)]
            kept = reservoir_update(
                stored_X[stored_y == c], int(seen[c]), incoming, self.replay_per_class_, rng
            )
            seen[c] += len(incoming)
            kept_X.append(kept)
            kept_y.append(np.full(len(kept), c, dtype=np.int64))
        self.reservoir_X_ = torch.as_tensor(np.concatenate(kept_X)).float()
        self.reservoir_y_ = torch.as_tensor(np.concatenate(kept_y))
        self.reservoir_seen_ = torch.as_tensor(seen)
        return stored_X, stored_y

    def _mixed(self, X, y, weights, replay_X, replay_y, per_class: float):
        """``(X, y, weights)`` with ``(replay_X, replay_y)`` appended, each replayed class
        weighing ``per_class`` in all (times its ``class_weight``)."""
        if not len(replay_y):
            return X, y, weights
        replay_weights = np.ones(len(replay_y), dtype=np.float32)
        if isinstance(self.class_weight, Mapping):
            replay_weights = self._check_sample_weight(
                None, replay_y, partial=True, require_classes=False
            )
            replay_weights = np.ones(len(replay_y)) if replay_weights is None else replay_weights
        # Each replayed class weighs, in all, as much as an average class of the chunk: the
        # equal mix of replay methods, without which 20 samples drown among hundreds.
        counts = np.bincount(replay_y, minlength=len(self.classes_))
        replay_weights = replay_weights * per_class / counts[replay_y]
        own = np.ones(len(y), dtype=np.float32) if weights is None else weights
        mixed = np.concatenate([own, replay_weights]).astype(np.float32)
        return np.concatenate([X, replay_X]), np.concatenate([y, replay_y]), mixed

    # ------------------------------------------------------------------ generated replay

    def _generate(self, rows: np.ndarray) -> None:
        """Draw ``generated_per_class`` samples of each class ``rows`` (encoded) from the model.

        Proximal SGLD (:func:`~ebmclassifier.sampling.run_sampler`) on the class-conditional
        energy ``E(x, y) = -f(x)[y]``, ``generated_steps`` steps inside the input range, from
        :meth:`_chain_start`; seeded by ``random_state`` and the stream's position, so that a
        resumed stream draws what an uninterrupted one does. Sets ``generated_X_`` (float32)
        and ``generated_y_``.
        """
        labels = torch.as_tensor(np.repeat(rows, self.generated_per_class_), dtype=torch.int64)
        seed = getattr(self, "seed_", None)
        if seed is not None:
            seed = int(np.random.SeedSequence([seed, len(self.history), 1]).generate_state(1)[0])
        training = self.module_.training
        self.module_.eval()
        try:
            with seeded_rng(seed, self.device_):
                chunks = [self._generated(part.to(self.device_)) for part in labels.split(1024)]
        finally:
            self.module_.train(training)
        self.generated_X_ = torch.cat(chunks).float()
        self.generated_y_ = labels

    def _generated(self, labels: torch.Tensor) -> torch.Tensor:
        """Samples of the classes ``labels`` (encoded, on the device), on the CPU."""
        module = self.module_
        samples = run_sampler(
            "proximal",
            lambda x: -module(x).gather(1, labels[:, None]).squeeze(1),
            self._chain_start(labels),
            n_steps=self.generated_steps,
            low=self.input_min_,
            high=self.input_max_,
            **GENERATION_SAMPLER,
        )
        return samples.cpu()

    def _chain_start(self, labels: torch.Tensor) -> torch.Tensor:
        """Where generated replay's chains start: the first fit's per-feature Gaussian,
        clamped to the input range."""
        noise = torch.randn((len(labels), *self.input_shape_), device=self.device_)
        x0 = self.input_mean_ + self.input_std_ * noise
        return torch.clamp(x0.float(), self.input_min_, self.input_max_)

    # ------------------------------------------------------------------ warnings

    def _warn_energy_term_alone(self) -> None:
        """Warn at a call that adds classes when the energy term meets restricted negatives
        and no replay: the new classes are then barely learned (docs/continual.md)."""
        restricted = self.negatives_ != "all"
        replay = self.replay_per_class_ or self.generated_per_class_
        if self.class_incremental and restricted and not replay and self._has_energy_term():
            warnings.warn(
                f"{type(self).__name__}(class_incremental=True, negatives="
                f"{self.negatives_!r}) with its energy term and no replay learns new classes "
                "poorly: nothing relates their energies to the old classes' ones, and the "
                "energy term keeps the new logits below the old ones (split MNIST-1D: worse "
                "than plain fine-tuning, docs/continual.md). Use generated_per_class > 0 "
                "(generated replay, which stores no training sample) or replay_per_class > 0 "
                "(stored samples), both on with 'auto'; or train the classification term "
                "alone (NGEBMClassifier(beta=0), JEMClassifier(px_weight=0)).",
                UserWarning,
                stacklevel=5,  # the user's fit / partial_fit
            )

    def _warn_one_class(self, y: np.ndarray, weights) -> None:
        """Warn when restricted negatives meet data of a single class: nothing to contrast."""
        if self.negatives_ == "all":
            return
        present = np.unique(y if weights is None else y[weights > 0])
        if len(present) == 1:
            label = self.classes_[present[0]]
            label = label.item() if isinstance(label, np.generic) else label
            warnings.warn(
                f"{type(self).__name__}(negatives={self.negatives_!r}) trains on samples of one "
                f"class only, {label!r}: its normalising term has no other class to contrast, "
                "so the classification loss is 0 and teaches nothing. Keep samples of earlier "
                "classes with replay_per_class > 0 or generated_per_class > 0, or use "
                "negatives='all'.",
                UserWarning,
                stacklevel=5,  # the user's fit / partial_fit
            )


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"
