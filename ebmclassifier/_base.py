"""The estimator face that every estimator of the library shares.

:class:`EBMClassifierBase` is what a user calls: ``fit``, ``partial_fit``, the ``predict``
family, ``energy``, ``score_ood`` and ``score_samples``. It validates the input once, with
scikit-learn's own validation (:mod:`._validation`), encodes the labels, resolves the device
and the seed (:mod:`._device`), builds the default network, and runs inference in batches.
The training loop is skorch's, extended through its hooks in :mod:`._skorch`; the objective is
the subclass's :meth:`EBMClassifierBase.compute_loss`, composed from :mod:`.losses`.

Which hooks to override
-----------------------
- Fairly safe: ``compute_loss`` (the training objective; take ``sample_weight=None`` too, or
  fitting with weights raises a ``TypeError``), ``_validate_own_params``,
  ``initialize_module`` (call ``super()`` first, then add modules ending in ``_``),
  ``handle_divergence`` (what to do when a loss stops being finite).
- Should not be overridden: ``fit``, ``partial_fit``, ``train_step_single``,
  ``validation_step`` and the inference methods: they hold the validation and the
  seeding that make the estimators behave as scikit-learn estimators.

The examples of the methods use a small three-class problem,
``X, y = sklearn.datasets.make_blobs(40, n_features=4, centers=3, random_state=0)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from math import prod

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ._data import ShuffledTensorBatchIterator, TensorBatchIterator
from ._device import device_problem, draw_seed, resolve_device, seeded_rng
from ._inference import InferenceMixin
from ._ood import OODDecisionMixin
from ._skorch import SkorchNet
from ._validation import (
    InvalidParameterError,
    ParamChecker,
    check_module_kwargs,
    check_module_output,
    check_partial_fit_classes,
    check_sample_weight,
    check_training_data,
    check_training_params,
    check_warm_start_classes,
    check_X,
    is_int,
    network_kwargs,
)
from .augment import check_augmentation
from .energy import OOD_METHODS
from .exceptions import DivergenceError
from .losses import _ratio, weighted_mean
from .nn import MLP, ConvNet

# ShuffledTensorBatchIterator lives in _data.py; the release-0.1 pickles name it here.
__all__ = ["EBMClassifierBase", "ShuffledTensorBatchIterator"]


class EBMClassifierBase(InferenceMixin, OODDecisionMixin, SkorchNet):
    """Shared base of the energy-based classifiers (not to be used directly).

    Parameters
    ----------
    module : torch.nn.Module class or instance, or None, default=None
        A network mapping a batch of inputs to logits of shape (n, n_classes). ``None`` builds
        :class:`~ebmclassifier.nn.MLP` for flat features and :class:`~ebmclassifier.nn.ConvNet`
        for ``(n, C, L)`` or ``(n, C, H, W)`` input. A class gets ``module__*`` parameters,
        and ``n_features``, ``n_classes`` and ``input_shape`` when its ``__init__`` takes
        them and they are not given. An instance is used as it is, unless ``module__*``
        parameters are given: then it is rebuilt from its class, as skorch does, with these
        parameters and the data's sizes only (not its own other arguments). Do not use
        batch-norm: it couples the samples of a batch and breaks the per-sample energy
        gradients.
    criterion : torch loss class, default=torch.nn.CrossEntropyLoss
        The classification term, applied to logits and integer labels.
    optimizer : torch optimizer class, default=torch.optim.Adam
    lr : float, default=1e-3
    max_epochs : int, default=50
    batch_size : int, default=64
        Also the batch size of inference unless ``iterator_valid__batch_size`` is set.
    train_split : callable or None, default=None
        As in skorch (e.g. ``skorch.dataset.ValidSplit(0.1)``); ``None`` trains on all data,
        as scikit-learn's estimators do. The validation loss is the same objective as the
        training loss.
    callbacks : list or None, default=None
        skorch callbacks.
    device : str, default="auto"
        ``"auto"`` picks CUDA when it is available, else the CPU.
    random_state : int, RandomState or None, default=None
        Seeds weight initialisation, shuffling and any sampling, per epoch, so that two fits
        give identical results and a resumed fit ends where an uninterrupted one would.
        torch's global random state is left as it was.
    ood_method : {"energy", "max_softmax", "approx_mass"}
        The default method of :meth:`score_ood` and :meth:`score_samples`.
    augmentation : callable or None, default=None
        Applied to each *training* batch on the device before the loss, so the energy terms
        (the gradient norm, JEM's data term) see the augmented batch; never at predict,
        ``score_ood`` or validation time. A callable ``batch -> batch`` of the same shape,
        dtype and device, e.g. :func:`ebmclassifier.augment.paper_augmentation`; it draws from
        torch's random state, which a ``random_state`` seeds per epoch, so fits stay
        reproducible. Checked once on a training batch at the start of ``fit``
        (:func:`ebmclassifier.augment.check_augmentation`).
    class_weight : None, "balanced" or dict, default=None
        Weights of the classes, as scikit-learn's classifiers take them: ``{label: weight}``
        (classes not named weigh 1), or ``"balanced"``, ``n_samples / (n_classes *
        np.bincount(y))``. They multiply the ``sample_weight`` of ``fit``.
    verbose : int, default=0
    **kwargs
        Other skorch parameters, and ``module__*``, ``optimizer__*``, ``criterion__*``,
        ``iterator_train__*``, ``iterator_valid__*``, ``callbacks__*`` routed parameters.
    """

    #: Fitted attributes besides the modules that :func:`ebmclassifier.saving.save` stores and
    #: ``load`` restores (numbers, strings, arrays, tensors); a subclass adds what its ``fit``
    #: learns. The state of every module attribute ending in ``_`` is saved in any case.
    _saved_attributes: tuple[str, ...] = (
        "input_shape_",
        "n_features_in_",
        "feature_names_in_",
        "seed_",
        "input_min_",
        "input_max_",
        "ood_threshold_",
        "ood_method_",
    )

    def __init__(
        self,
        module=None,
        *,
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        lr: float = 1e-3,
        max_epochs: int = 50,
        batch_size: int = 64,
        train_split=None,
        callbacks=None,
        iterator_train=ShuffledTensorBatchIterator,
        iterator_valid=TensorBatchIterator,
        device: str = "auto",
        random_state=None,
        ood_method: str = "energy",
        augmentation=None,
        class_weight=None,
        verbose: int = 0,
        **kwargs,
    ) -> None:
        super().__init__(
            module,
            criterion=criterion,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            train_split=train_split,
            callbacks=callbacks,
            iterator_train=iterator_train,
            iterator_valid=iterator_valid,
            device=device,
            verbose=verbose,
            **kwargs,
        )
        self.random_state = random_state
        self.ood_method = ood_method
        self.augmentation = augmentation
        self.class_weight = class_weight

    # ------------------------------------------------------------------ the subclass hooks

    def compute_loss(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        training: bool,
        sample_weight: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The training objective on one batch; here the cross-entropy alone.

        The hook a subclass overrides to define its estimator (see the module's notes on
        which hooks to override).

        Parameters
        ----------
        X : Tensor of shape ``(n, *input_shape)``, float32, on ``self.device_``
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        training : bool
            ``False`` during validation (the graph of the loss is not needed then).
        sample_weight : Tensor of shape (n,) or None, default=None
            float32 weights of the batch (``sample_weight`` times ``class_weight``), given
            only when the fit has weights. Each per-sample term becomes a weighted mean,
            ``sum_i w_i l_i / sum_i w_i`` (:func:`~ebmclassifier.losses.weighted_mean`). An
            override without this argument trains without weights only.

        Returns
        -------
        loss : scalar Tensor
            Back-propagated in training, unless it has no graph: a step the subclass rejects
            (as ``JEMClassifier`` does a diverged one) returns it detached, and the optimizer
            then leaves the weights as they were.
        logits : Tensor of shape (n, n_classes)

        Examples
        --------
        A classifier trained with label smoothing, by overriding this hook alone:

        >>> class SmoothedClassifier(EBMClassifierBase):
        ...     def compute_loss(self, X, y, training):
        ...         logits = self.module_(X)
        ...         loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=0.2)
        ...         return loss, logits
        >>> clf = SmoothedClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> Xt = torch.tensor(X[:8], dtype=torch.float32, device=clf.device_)
        >>> yt = torch.tensor(y[:8], device=clf.device_)
        >>> loss, logits = clf.compute_loss(Xt, yt, training=False)
        >>> tuple(loss.shape), tuple(logits.shape)
        ((), (8, 3))
        >>> bool(loss > clf.cross_entropy(logits, yt))  # smoothing costs the confident
        True
        """
        logits = self.module_(X)
        return self.cross_entropy(logits, y, sample_weight), logits

    def _validate_own_params(self, check: ParamChecker) -> None:
        """Add the subclass's parameter problems to ``check``."""
        check.choice("ood_method", OOD_METHODS)

    def handle_divergence(self, loss: torch.Tensor) -> None:
        """Called when a training loss is not finite; raises :class:`DivergenceError`.

        :meth:`train_step_single` calls it after the backward pass and before the optimizer
        step, so the weights are still those of the last good step.

        Parameters
        ----------
        loss : scalar Tensor
            The non-finite training loss of the batch.

        Returns
        -------
        None
            It does not return; an override that returns lets the optimizer step with the
            non-finite gradients.

        Raises
        ------
        DivergenceError
            With the epoch, the loss and what to change.

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> from ebmclassifier.exceptions import DivergenceError
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,)).fit(X, y)
        >>> try:
        ...     clf.handle_divergence(torch.tensor(float("nan")))
        ... except DivergenceError as err:
        ...     print(err)
        NGEBMClassifier diverged in epoch 1: the training loss is nan. Lower the learning rate
        (lr=0.001) or the loss weights, or standardize the input.
        """
        raise DivergenceError(
            f"{type(self).__name__} diverged in epoch {len(self.history)}: the training loss is "
            f"{loss.item()}. Lower the learning rate (lr={self.lr!r}) or the loss weights, or "
            "standardize the input."
        )

    def cross_entropy(
        self, logits: torch.Tensor, y: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The classification term, ``criterion_(logits, y)``, optionally weighted.

        Parameters
        ----------
        logits : Tensor of shape (n, n_classes)
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        sample_weight : Tensor of shape (n,) or None, default=None
            With weights, the criterion's per-sample losses (its ``reduction`` set to
            ``"none"`` for the call) are averaged with them,
            :func:`~ebmclassifier.losses.weighted_mean`. With the class weights ``c`` of
            ``criterion__weight`` (``CrossEntropyLoss``, ``NLLLoss``) the per-sample losses
            include ``c[y_i]``, and torch's batch mean divides their sum by ``sum_i c[y_i]``;
            the weighted mean divides by ``sum_i w_i c[y_i]``, so that weights of 1 are no
            weights and an integer weight repeats a sample, as without class weights.

        Returns
        -------
        scalar Tensor
            The batch mean, with the default ``criterion=torch.nn.CrossEntropyLoss``; the
            weighted mean with ``sample_weight``.

        Examples
        --------
        >>> import math
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,)).fit(X, y)
        >>> logits = torch.zeros(2, 3)  # p(y|x) = 1/3: the loss is log(3)
        >>> round(float(clf.cross_entropy(logits, torch.tensor([0, 2]))), 4), round(math.log(3), 4)
        (1.0986, 1.0986)
        >>> logits = torch.tensor([[9.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # the first one is sure
        >>> clf.cross_entropy(logits, torch.tensor([0, 2]), torch.tensor([1.0, 0.0])) < 0.01
        tensor(True)
        """
        if sample_weight is None:
            return self.criterion_(logits, y)
        losses = self._per_sample_criterion(logits, y)
        criterion = self.criterion_
        class_weight = getattr(criterion, "weight", None)
        if not isinstance(criterion, nn.CrossEntropyLoss | nn.NLLLoss) or class_weight is None:
            return weighted_mean(losses, sample_weight)
        # The losses carry c[y_i] already; torch's mean divides their sum by sum_i c[y_i].
        return _ratio((sample_weight * losses).sum(), (sample_weight * class_weight[y]).sum())

    def _per_sample_criterion(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The criterion's loss of each sample: torch's losses, with ``reduction="none"``."""
        criterion = self.criterion_
        reduction = getattr(criterion, "reduction", None)
        if reduction is None:
            raise TypeError(
                f"Training with sample_weight or class_weight needs per-sample losses, and the "
                f"criterion {type(criterion).__name__} has no 'reduction' to set to 'none'. Use "
                "a torch loss such as torch.nn.CrossEntropyLoss, or fit without weights."
            )
        criterion.reduction = "none"  # for this call only: the criterion is ours, not shared
        try:
            return criterion(logits, y)
        finally:
            criterion.reduction = reduction

    # ------------------------------------------------------------------ validation

    def _check_params(self) -> None:
        check = ParamChecker(self)
        check.real("lr", 0.0, low_open=True)
        check.integer("max_epochs", 0)
        batch_size = self.batch_size
        ok = is_int(batch_size) and (batch_size >= 1 or batch_size == -1)
        check.satisfies("batch_size", ok, "an int >= 1 or -1 (the whole data set)")
        check.satisfies(
            "augmentation",
            self.augmentation is None or callable(self.augmentation),
            "None or a callable mapping a training batch to a batch of the same shape",
        )
        check_training_params(check, self)
        problem = device_problem(self.device)
        expected = f"'auto', 'cpu' or a device this machine has ({problem})"
        check.satisfies("device", problem is None, expected)
        class_weight = self.class_weight
        ok = class_weight is None or isinstance(class_weight, Mapping)
        ok = ok or (isinstance(class_weight, str) and class_weight == "balanced")
        check.satisfies("class_weight", ok, "None, 'balanced' or a dict {label: weight}")
        self._validate_own_params(check)
        check.raise_if_any()

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        return check_X(self, X, reset=reset)

    def _validate_training_data(self, X, y, *, reset: bool, classes=None):
        return check_training_data(self, X, y, reset=reset, classes=classes)

    @property
    def classes_(self) -> np.ndarray:
        """The class labels, in the order of the columns of :meth:`predict_proba`."""
        try:
            return self.label_encoder_.classes_
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__} has no attribute 'classes_' before it is fitted."
            ) from None

    def input_range(self) -> tuple[float, float]:
        """The smallest and the largest value of the training inputs, over every feature.

        One box for all features (``(0.0, 1.0)`` for images in [0, 1]): the box an attack keeps
        its inputs in (:func:`~ebmclassifier.metrics.adversarial_accuracy`).

        Returns
        -------
        low, high : float

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> low, high = clf.fit(X, y).input_range()
        >>> (low, high) == (float(X.astype(np.float32).min()), float(X.astype(np.float32).max()))
        True
        """
        check_is_fitted(self)
        return float(self.input_min_.min()), float(self.input_max_.max())

    def __sklearn_is_fitted__(self) -> bool:
        return bool(getattr(self, "initialized_", False)) and hasattr(self, "label_encoder_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    # ------------------------------------------------------------------ the network

    def initialize_module(self):
        """Build ``module_``, a fresh network for the data's shape and classes."""
        if not hasattr(self, "input_shape_"):
            raise RuntimeError(
                f"{type(self).__name__} builds its network from the data; call fit(X, y) "
                "instead of initialize()."
            )
        kwargs = self.get_params_for("module")
        module = self.module
        if module is None:  # ConvNet for (C, L) / (C, H, W) samples, else an MLP
            module = ConvNet if len(self.input_shape_) in (2, 3) else MLP
        built = type(module) if isinstance(module, nn.Module) else module
        check_module_kwargs(type(self).__name__, "module", built, kwargs)
        sizes = {
            "n_features": prod(self.input_shape_),
            "n_classes": len(self.classes_),
            "input_shape": self.input_shape_,
        }
        kwargs = network_kwargs(module, kwargs, sizes)
        try:
            self.module_ = self.initialized_instance(module, kwargs)
        except InvalidParameterError as exc:  # our networks check their own arguments
            raise InvalidParameterError(
                f"{type(self).__name__} could not build its network from the module__* "
                f"parameters: {exc}"
            ) from exc
        return self

    # ------------------------------------------------------------------ training

    def fit(self, X, y, sample_weight=None):
        """Initialize the network and train it on ``(X, y)``.

        With ``max_epochs=0`` the network is built for the data and left untrained, ready
        for skorch's ``load_params``. With skorch's ``warm_start=True``, a fitted estimator
        continues training its network instead, as scikit-learn's ``MLPClassifier`` does: the
        data must then have the same features (or sample shape) and exactly the same classes
        as the first fit, else a ``ValueError`` says so (``warm_start=False`` starts afresh).
        To deploy without the training data, use :meth:`save` and
        :func:`ebmclassifier.load` instead. A fit that raises before training starts (bad
        data, weights, network or augmentation) leaves the estimator unfitted, even one that
        was fitted before: fit it again (a warm-started fit that raises keeps its network).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, L) / (n_samples, C, H, W)
            numpy, pandas or torch; cast to float32.
        y : array-like of shape (n_samples,)
            Class labels of any hashable type.
        sample_weight : array-like of shape (n_samples,), number or None, default=None
            Non-negative weights of the samples, multiplied by ``class_weight``. Every
            per-sample term of the loss becomes a weighted mean over its batch,
            ``sum_i w_i l_i / sum_i w_i``: a weight of 0 leaves a sample out, an integer
            weight counts it that many times (exactly so with ``batch_size=-1``), and the
            scale of the weights does not matter. The statistics taken from the training
            data (the input range, NG-EBM's finite-difference step, JEM's chain start) are
            those of the samples with a positive weight. With scikit-learn's metadata routing,
            ``set_fit_request(sample_weight=True)`` lets ``Pipeline``, ``GridSearchCV`` and
            ``cross_validate`` pass it on.

        Returns
        -------
        self

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> labels = np.array(["cat", "dog", "owl"])[y]
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf.fit(X, labels) is clf
        True
        >>> clf.classes_.tolist(), clf.n_features_in_, len(clf.history)
        (['cat', 'dog', 'owl'], 4, 2)

        Weights of 0 leave the owls out of the loss (they are still a class):

        >>> clf = clf.fit(X, labels, sample_weight=(labels != "owl").astype(float))
        >>> clf.classes_.tolist()
        ['cat', 'dog', 'owl']
        """
        warm = bool(self.warm_start) and self.__sklearn_is_fitted__()
        return self._fit(X, y, sample_weight, first=True, initialize=not warm, partial=False)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Train for ``max_epochs`` more epochs, keeping the current weights and optimizer.

        Parameters
        ----------
        X : array-like
        y : array-like of shape (n_samples,)
        classes : array-like or None, default=None
            All classes, needed on the first call when ``y`` does not contain each of them.
            A later call may repeat them, in any order; other classes are a ``ValueError``.
        sample_weight : array-like of shape (n_samples,), number or None, default=None
            Weights of this chunk's samples, as in :meth:`fit`; ``class_weight="balanced"``
            is refused here (one chunk does not know the class frequencies).

        Returns
        -------
        self

        Examples
        --------
        Two chunks of data, the first without class 2:

        >>> from ebmclassifier import NGEBMClassifier
        >>> first = y != 2
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.partial_fit(X[first], y[first], classes=[0, 1, 2])
        >>> weights = clf.module_.net[1].weight.detach().clone()
        >>> clf = clf.partial_fit(X[~first], y[~first])  # continues from these weights
        >>> len(clf.history), clf.classes_.tolist(), clf.predict_proba(X).shape
        (2, [0, 1, 2], (40, 3))
        >>> bool((clf.module_.net[1].weight != weights).any())
        True
        """
        first = not self.__sklearn_is_fitted__()
        return self._fit(
            X, y, sample_weight, first=first, initialize=first, partial=True, classes=classes
        )

    def _fit(
        self, X, y, sample_weight, *, first: bool, initialize: bool, partial: bool, classes=None
    ):
        """Validate, derive what training needs on a ``first`` fit, then train.

        ``first and not initialize`` is a warm start: a ``fit`` that continues from the
        fitted network, so the data must have its input shape and exactly its classes.
        A fresh fit (``initialize``) that raises before training starts leaves the estimator
        unfitted: by then its validation may have recorded the new data's classes and shape,
        next to the previous fit's network.
        """
        training = False
        try:
            self._check_params()
            incremental = not initialize and self._accept_new_classes(y, classes)
            if not first and not incremental:
                check_partial_fit_classes(self, classes)
            X, y = self._validate_training_data(X, y, reset=initialize, classes=classes)
            if first and not initialize and not incremental:
                check_warm_start_classes(self, y)
            weights = self._check_sample_weight(
                sample_weight, y, partial=partial, require_classes=first and classes is None
            )
            positive = None if weights is None else weights > 0
            if initialize and positive is not None:
                X = self._input_of_weighted_rows(X, positive)
            if first:
                # Data statistics (input range, fd step, ...) of the samples that count; a
                # copy of their rows only when some samples do not.
                self._prepare_fit(X if positive is None or positive.all() else X[positive])
            X, y, weights = self._add_replay(X, y, weights, reset=initialize)
            seed = self.seed_ if self.random_state is not None else None
            with seeded_rng(seed, self.device_):
                if initialize:
                    self.initialize()
                    check_module_output(self, torch.tensor(X[:1], device=self.device_))
                # The whole training set moves to the device once; batches are slices of it.
                # A copy: the user's array may be read-only, and it is never written.
                X_t = torch.tensor(X, device=self.device_)
                if self.augmentation is not None:
                    check_augmentation(self.augmentation, X_t[:8])
                training = True  # from here on, a failure is the training's
                self._forget_ood_threshold()  # calibrated on the scores training changes
                self._train(
                    X_t,
                    torch.tensor(y, dtype=torch.long, device=self.device_),
                    None if weights is None else torch.tensor(weights, device=self.device_),
                )
        finally:
            if initialize and not training:
                self.initialized_ = False
        return self

    def _accept_new_classes(self, y, classes) -> bool:
        """Before a continuing fit: grow ``classes_`` by new labels, if the estimator can.

        ``True`` when the estimator learns classes incrementally (it checked ``classes``
        itself, and the fixed-classes checks do not apply); here ``False``.
        """
        return False

    def _add_replay(self, X: np.ndarray, y: np.ndarray, weights, *, reset: bool):
        """The training data with stored past samples mixed in; here ``(X, y, weights)``."""
        return X, y, weights

    def augment_batch(self, X: torch.Tensor) -> torch.Tensor:
        """The training batch the loss sees: ``augmentation(X)``, or ``X`` without one.

        Called by the training step only, never at inference or validation.

        Parameters
        ----------
        X : Tensor of shape ``(n, *input_shape)``, on ``device_``

        Returns
        -------
        Tensor of the same shape, dtype and device

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> from ebmclassifier.augment import GaussianNoise
        >>> clf = NGEBMClassifier(augmentation=GaussianNoise(std=0.1), max_epochs=1)
        >>> clf = clf.fit(X, y)
        >>> xb = torch.zeros(3, 4)
        >>> float(clf.augment_batch(xb).std()) > 0, clf.predict(np.zeros((3, 4))).shape
        (True, (3,))
        """
        return X if self.augmentation is None else self.augmentation(X)

    def _check_sample_weight(self, sample_weight, y, **kwargs) -> np.ndarray | None:
        """``sample_weight`` times ``class_weight`` per sample, or None (see ``_validation``)."""
        weights = check_sample_weight(self, sample_weight, y, **kwargs)
        takes = inspect.signature(self.compute_loss).parameters
        if weights is not None and "sample_weight" not in takes:
            name = type(self).__name__
            raise TypeError(
                f"{name} cannot train with sample_weight or class_weight: its compute_loss "
                "takes no sample_weight argument. Add sample_weight=None to its signature and "
                "weigh the per-sample terms (see ebmclassifier.losses.weighted_mean)."
            )
        return weights

    def save(self, path, *, training_state: bool = True) -> None:
        """Write the fitted estimator to one file; :func:`ebmclassifier.load` reads it back.

        JSON metadata and the tensors' state dicts (no pickled code), so the file loads without
        the training data and is safe to load whoever wrote it (:mod:`ebmclassifier.saving`).

        Parameters
        ----------
        path : str or path-like
        training_state : bool, default=True
            Also the optimizer's state and the history, so that ``partial_fit`` continues
            after ``load`` as it would have without the round trip.

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> from ebmclassifier import NGEBMClassifier, load
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     clf.save(Path(folder, "model.ebm"))
        ...     restored = load(Path(folder, "model.ebm"))
        >>> np.array_equal(restored.score_ood(X), clf.score_ood(X))
        True
        """
        from .saving import save

        save(self, path, training_state=training_state)

    def _load_module_states(self, states: dict[str, dict]) -> None:
        """Load saved state dicts into the modules (and optimizer) ``initialize`` built."""
        for name, state in states.items():
            getattr(self, name).load_state_dict(state)

    def _input_of_weighted_rows(self, X: np.ndarray, positive: np.ndarray) -> np.ndarray:
        """The validated training input once the rows of positive weight are known.

        ``X`` itself here; a subclass whose input validation learns from the data (the latent
        classifier's token vocabulary) relearns it from the ``positive`` rows.
        """
        return X

    def _prepare_fit(self, X: np.ndarray) -> None:
        """Derive what the training needs from the validated data."""
        self.device_ = resolve_device(self.device)
        if self.random_state is not None:
            self.seed_ = draw_seed(self.random_state)
        self.input_min_ = torch.as_tensor(X.min(axis=0), device=self.device_)
        self.input_max_ = torch.as_tensor(X.max(axis=0), device=self.device_)
