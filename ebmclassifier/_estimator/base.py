"""The estimator face that every estimator of the library shares.

:class:`EBMClassifierBase` is what a user calls: ``fit``, ``partial_fit``, the ``predict``
family, ``energy``, ``score_ood``, ``score_samples`` and ``save``. It validates the input once,
with scikit-learn's own validation (:mod:`~ebmclassifier._utils.validation`), encodes the
labels, resolves the device and the seed (:mod:`~ebmclassifier._utils.generators`), builds the
default network, and runs inference in batches. The training step and the hooks it calls
(``compute_loss``, ``augment_batch``, ``handle_divergence``), with their defaults and which of
them to override, are in :mod:`~ebmclassifier._estimator.engine`, on
:class:`~.engine.TrainingEngine`; the objective of an estimator is its ``compute_loss``,
composed from :mod:`.losses`.

The examples of the methods use a small three-class problem,
``X, y = sklearn.datasets.make_blobs(40, n_features=4, centers=3, random_state=0)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from contextlib import nullcontext
from math import prod
from typing import Literal

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from torch import nn

from .._utils.compile import compile_problem
from .._utils.data import ShuffledTensorBatchIterator, TensorBatchIterator, record_class_counts
from .._utils.device import available_memory, device_problem, network_bytes, resolve_device
from .._utils.docstrings import fill_docstring
from .._utils.generators import draw_seed, global_rng
from .._utils.locks import estimator_lock
from .._utils.parameters import InvalidParameterError, ParamChecker, is_int
from .._utils.precision import PRECISIONS, precision_problem
from .._utils.statistics import column_min_max
from .._utils.streamed import (
    first_rows,
    is_streamed,
    reads_user_code,
    rows_where,
    tensors_of_dataset,
    training_input,
)
from .._utils.threads import check_n_threads, threads_for
from .._utils.validation import (
    check_partial_fit_classes,
    check_sample_weight,
    check_training_data,
    check_training_params,
    check_warm_start_classes,
    check_X,
    dataset_labels,
)
from ..augment import check_augmentation
from ..energy import OOD_METHODS
from ..nn import (
    MLP,
    ConvNet,
    check_batch_norm,
    check_module_kwargs,
    check_module_output,
    network_kwargs,
)
from ..saving._files import SavedEstimatorMixin
from .early_stopping import (
    SklearnEarlyStopping,
    check_early_stopping_params,
    holds_out,
    stopping_call,
)
from .engine import TrainingEngine
from .inference import InferenceMixin, OODDecisionMixin
from .parameter_docs import PARAMETER_DOCS
from .repr import ParamsReprMixin
from .training_loss_stopping import TrainingLossStopping, stopping_on_training_loss

__all__ = ["EBMClassifierBase"]

_MAX_LR = 1e30  # the largest learning rate accepted; see _check_params


#: How :meth:`EBMClassifierBase._fit` trains: mode -> (builds a new network, derives the
#: data's statistics, follows partial_fit's rules). See ``_fit``'s table.
_FIT_MODES = {
    "fit": (True, True, False),
    "warm_start": (False, True, False),
    "partial_first": (True, True, True),
    "partial": (False, False, True),
}


@fill_docstring(PARAMETER_DOCS)
class EBMClassifierBase(
    ParamsReprMixin,
    InferenceMixin,
    OODDecisionMixin,
    SavedEstimatorMixin,
    TrainingEngine,
):
    """Shared base of the energy-based classifiers (not to be used directly).

    The estimators document these parameters with the same text (:data:`PARAMETER_DOCS`).
    ``_fit`` calls the hooks a subclass fills, declared here with their defaults:
    ``_validate_own_params`` (its parameters' problems), ``_resolve_auto_params`` (its
    ``"auto"`` parameters, before the data are read), ``_accept_new_classes`` and
    ``_add_replay`` (class-incremental learning), ``_input_of_weighted_rows`` (input whose
    validation learns from the rows that count: the latent classifier's vocabulary),
    ``_prepare_fit`` (what training derives from the data), and the declarations
    ``_saved_attributes`` and ``_call_start_attributes``.

    Parameters
    ----------
    {module}
    {criterion}
    {training}
    ood_method : {"energy", "max_softmax", "approx_mass"}
        The default method of :meth:`score_ood` and :meth:`score_samples`.
    {class_weight}
    {engine}
    """

    #: Fitted attributes besides the modules that :meth:`save` stores and ``load`` restores
    #: (numbers, strings, arrays, tensors); a subclass adds what its ``fit`` learns. The state
    #: of every module attribute ending in ``_`` is saved in any case.
    _saved_attributes: tuple[str, ...] = (
        "input_shape_",
        "n_features_in_",
        "feature_names_in_",
        "seed_",
        "input_min_",
        "input_max_",
        "ood_threshold_",
        "ood_method_",
        "class_count_",
        "class_prior_",
        "n_iter_",
        "best_epoch_",
        "best_validation_loss_",
    )
    #: What a call sets from its data before its first epoch, kept as the call found it for a
    #: training state saved during the call (:meth:`_keep_call_start`); a subclass adds its own.
    _call_start_attributes: tuple[str, ...] = ("class_count_", "class_prior_")

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
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        callbacks=None,
        iterator_train=ShuffledTensorBatchIterator,
        iterator_valid=TensorBatchIterator,
        device: str = "auto",
        random_state=None,
        ood_method: str = "energy",
        augmentation=None,
        class_weight=None,
        n_threads: int | str | None = "auto",
        precision: str = "float32",
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
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.random_state = random_state
        self.ood_method = ood_method
        self.augmentation = augmentation
        self.class_weight = class_weight
        self.precision = precision
        self.n_threads = n_threads

    # ------------------------------------------------------------------ validation

    def _validate_own_params(self, check: ParamChecker) -> None:
        """Add the subclass's parameter problems to ``check``."""
        check.choice("ood_method", OOD_METHODS)

    def _check_params(self) -> None:
        check = ParamChecker(self)
        # torch's optimizers apply lr, scaled (Adam by 1 / (1 - beta1) = 10 at its first step),
        # to float32 weights: beyond float32's 3.4e38 the step raises a RuntimeError, and far
        # below it every step already overflows the weights
        check.real("lr", 0.0, _MAX_LR, low_open=True)
        if "optimizer__lr" in vars(self):  # skorch lets it override lr
            check.real("optimizer__lr", 0.0, _MAX_LR, low_open=True)
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
        check_early_stopping_params(check, self)
        problem = device_problem(self.device)
        expected = f"'auto', 'cpu' or a device this machine has ({problem})"
        check.satisfies("device", problem is None, expected)
        class_weight = self.class_weight
        ok = class_weight is None or isinstance(class_weight, Mapping)
        ok = ok or (isinstance(class_weight, str) and class_weight == "balanced")
        check.satisfies("class_weight", ok, "None, 'balanced' or a dict {label: weight}")
        check_n_threads(check, self.n_threads)
        check.choice("precision", PRECISIONS)
        check.satisfies("compile", isinstance(self.compile, bool), "a bool")
        self._validate_own_params(check)
        check.raise_if_any()

    def _check_platform(self) -> None:
        """Refuse, before ``fit`` builds anything, what this machine cannot train: the
        precision on the device (:func:`~ebmclassifier._utils.precision.precision_problem`) and
        ``compile=True`` where ``torch.compile`` fails
        (:func:`~ebmclassifier._utils.compile.compile_problem`), each naming what to use."""
        check = ParamChecker(self)
        device = resolve_device(self.device)
        problem = precision_problem(self.precision, device)
        if problem is not None:
            check.add(f"{check.owner} cannot train on {device} in this precision: {problem}")
        if self.compile:
            backend = self.get_params_for("compile").get("backend", "inductor")
            problem = compile_problem(device, backend)
            if problem is not None:
                check.add(
                    f"{check.owner}(compile=True) cannot train on {device}: torch.compile fails "
                    f"on this machine ({problem}). Use compile=False."
                )
        check.raise_if_any()

    def _network(self):
        """``module_`` in the estimator's precision (inference's map from a batch to logits)."""
        return self._as_inference(self.module_)

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        return check_X(self, X, reset=reset)

    def _accepts_streamed_input(self) -> bool:
        """Whether ``fit`` and inference read a ``Dataset``, a memmap or ``uint8`` images in
        batches (see :mod:`~ebmclassifier._utils.streamed`), keeping their dtype until the
        batch; an estimator whose input is not float samples (token ids) says False."""
        return True

    def _validate_input(self, X):
        """Inference input: an array as :meth:`_validate_X` makes it, or
        :class:`~ebmclassifier._utils.streamed.StreamedRows` read batch by batch."""
        X = tensors_of_dataset(X, None)[0]
        if self._accepts_streamed_input() and is_streamed(X):
            return check_X(self, X, reset=False, stream=True)
        return self._validate_X(X, reset=False)

    def _validate_training_data(self, X, y, *, reset: bool, classes=None):
        stream = self._accepts_streamed_input()
        return check_training_data(self, X, y, reset=reset, classes=classes, stream=stream)

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

    def score(self, X, y=None, sample_weight=None) -> float:
        """The mean accuracy on ``(X, y)``, as scikit-learn's classifiers define it.

        Parameters
        ----------
        X : array-like, or a torch Dataset
        y : array-like of shape (n_samples,) or None, default=None
            The true labels; None when ``X`` is a dataset that yields ``(sample, label)``.
        sample_weight : array-like of shape (n_samples,) or None, default=None

        Returns
        -------
        float

        Examples
        --------
        >>> import torch
        >>> from torch.utils.data import TensorDataset
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> data = TensorDataset(torch.tensor(X, dtype=torch.float32), torch.tensor(y))
        >>> clf.fit(data).score(data) == clf.score(X, y)
        True
        """
        if y is None:
            y = dataset_labels(self, X)
            if y is None:
                raise ValueError(
                    f"{type(self).__name__}.score needs y: pass the true labels, or a dataset "
                    "that yields (sample, label) pairs."
                )
        return super().score(X, y, sample_weight)

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
            raise RuntimeError(self._no_network_yet("initialize()"))
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
            given = ", ".join(f"module__{k}" for k in self.get_params_for("module")) or "module"
            self.module_ = self._built_network(module, kwargs, given)
        except InvalidParameterError as exc:  # our networks check their own arguments
            raise InvalidParameterError(
                f"{type(self).__name__} could not build its network from the module__* "
                f"parameters: {exc}"
            ) from exc
        return self

    def _built_network(self, module, kwargs: dict, parameters: str):
        """skorch's ``initialized_instance(module, kwargs)``, refused with a ``ValueError``
        naming ``parameters`` when its weights and their gradients would not fit in the memory
        available on ``device_`` (counted on the ``"meta"`` device, before anything is
        allocated), rather than torch's allocator error."""
        n_bytes = network_bytes(module, kwargs) if isinstance(module, type) else None
        available = available_memory(self.device_)
        if n_bytes is not None and available is not None and 2 * n_bytes > available:
            shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            raise ValueError(
                f"{type(self).__name__} cannot build its network {module.__name__}({shown}): "
                f"its weights take {n_bytes / 2**30:.3g} GiB of float32, twice that with "
                f"their gradients (and Adam's state doubles it again), more than the "
                f"{available / 2**30:.3g} GiB available on {self.device_}. Make the network "
                f"smaller ({parameters})."
            )
        return self.initialized_instance(module, kwargs)

    # ------------------------------------------------------------------ training

    def fit(self, X, y=None, sample_weight=None):
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
            numpy, pandas or torch, cast to float32; or, as skorch takes it, a map-style
            ``torch.utils.data.Dataset`` of samples or of ``(sample, label)`` pairs (a
            ``TensorDataset`` is its tensors). A dataset, a ``numpy.memmap`` and an array of
            a dtype narrower than float32 (``uint8`` images) keep their dtype until the
            batch: they are checked and their statistics taken chunk by chunk, and a memmap
            or a dataset is read batch by batch (``iterator_train__num_workers``), so data
            larger than memory train. See :doc:`/user_guide/data`.
        y : array-like of shape (n_samples,) or None, default=None
            Class labels of any hashable type. None for a dataset that yields labels; when
            both are given they must agree.
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
        with estimator_lock(self), _reading(X):  # no predict of another thread in between
            warm = bool(self.warm_start) and self.__sklearn_is_fitted__()
            return self._fit(X, y, sample_weight, mode="warm_start" if warm else "fit")

    def partial_fit(self, X, y=None, classes=None, sample_weight=None):
        """Train for ``max_epochs`` more epochs, keeping the current weights and optimizer.

        Parameters
        ----------
        X : array-like or torch Dataset
            As in :meth:`fit`.
        y : array-like of shape (n_samples,) or None, default=None
            As in :meth:`fit`.
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
        with estimator_lock(self), _reading(X):  # no predict of another thread in between
            mode = "partial" if self.__sklearn_is_fitted__() else "partial_first"
            return self._fit(X, y, sample_weight, mode=mode, classes=classes)

    def _fit(
        self,
        X,
        y,
        sample_weight,
        *,
        mode: Literal["fit", "warm_start", "partial_first", "partial"],
        classes=None,
    ):
        """Validate, derive what training needs, then train; ``mode`` says what a call keeps.

        =============  =============================  =======  ==========  ==============
        mode           called by                      network  statistics  data must keep
        =============  =============================  =======  ==========  ==============
        fit            fit                            new      derived     -
        warm_start     fit (warm_start=True, fitted)  kept     derived     shape, classes
        partial_first  first partial_fit              new      derived     -
        partial        later partial_fit              kept     kept        shape, classes
        =============  =============================  =======  ==========  ==============

        The statistics are what :meth:`_prepare_fit` derives from the data (device, seed,
        input range, ...). The ``partial*`` modes refuse ``class_weight="balanced"`` (a chunk
        does not know the class frequencies). A call that builds a new network and raises
        before training starts leaves the estimator unfitted: by then its validation may
        have recorded the new data's classes and shape, next to the previous fit's network.
        """
        new_network, derive, partial = _FIT_MODES[mode]
        training = False
        try:
            self._check_params()
            self._check_platform()
            self._resolve_auto_params()
            self._begin_call(new_network=new_network)
            incremental, old_rows = False, None
            if not new_network:  # labels of a dataset given with y=None read first
                labels = dataset_labels(self, X) if y is None else y
                incremental, old_rows = self._accept_new_classes(labels, classes)
            if mode == "partial" and not incremental:
                check_partial_fit_classes(self, classes)
            X, y = self._validate_training_data(X, y, reset=new_network, classes=classes)
            if mode == "warm_start" and not incremental:
                check_warm_start_classes(self, y)
            weights = self._check_sample_weight(
                sample_weight, y, partial=partial, require_classes=derive and classes is None
            )
            positive = None if weights is None else weights > 0
            if new_network and positive is not None:
                X = self._input_of_weighted_rows(X, positive)
            if derive:
                # Data statistics (input range, fd step, ...) of the samples that count; a
                # copy of their rows only when some samples do not (none of chunked input).
                self._prepare_fit(
                    X if positive is None or positive.all() else rows_where(X, positive)
                )
            self._keep_call_start(reset=new_network)  # for a state saved during the call
            record_class_counts(self, y, sample_weight, reset=new_network)
            X, y, weights = self._add_replay(X, y, weights, reset=new_network, old_rows=old_rows)
            held_out = holds_out(self, mode, y)
            # what takes no generator (reset_parameters; a user's Dataset read in this
            # process) draws from torch's global generator, forked and seeded for it
            with global_rng(self._fit_seed(), self.device_):
                first = first_rows(X, 8, self.device_)
                if new_network:
                    self.initialize()
                    check_module_output(self, first[:1])
                    check_batch_norm(self)
            X_t, weights = training_input(X, y, weights, self.device_)
            if self.augmentation is not None:
                check_augmentation(self.augmentation, first)
            training = True  # from here on, a failure is the training's
            self._forget_ood_threshold()  # calibrated on the scores training changes
            with (
                threads_for(self.n_threads, self.module_, first[:1], self.batch_size, len(y)),
                stopping_call(self, self._capability(SklearnEarlyStopping), held_out),
                stopping_on_training_loss(self, self._capability(TrainingLossStopping), mode),
            ):
                self._train(
                    X_t,
                    torch.tensor(y, dtype=torch.long, device=self.device_),
                    None if weights is None else torch.tensor(weights, device=self.device_),
                )
        finally:
            if new_network and not training:
                self.initialized_ = False
        return self

    def _resolve_auto_params(self) -> None:
        """Resolve the parameters a call reads as ``"auto"`` into fitted attributes, before
        the call validates its data (here none; class-incremental estimators resolve
        ``negatives``, ``replay_per_class`` and ``generated_per_class``)."""

    def _keep_call_start(self, *, reset: bool) -> None:
        """Keep :attr:`_call_start_attributes` as the call found them (before it sets them),
        so that a state saved during the call resumes it: with epochs left, ``partial_fit`` on
        the call's data sets them again from there; ``reset``: a new network, whose class
        counts start from zero."""
        start = {name: getattr(self, name, None) for name in self._call_start_attributes}
        if reset:
            start["class_count_"] = np.zeros(len(self.classes_))
        self._call_start = start

    def _accept_new_classes(self, y, classes) -> tuple[bool, np.ndarray | None]:
        """Before a continuing fit: grow ``classes_`` by new labels, if the estimator can.

        Returns ``(incremental, old_rows)``: ``incremental`` is True when the estimator learns
        classes incrementally (it checked ``classes`` itself, and the fixed-classes checks do
        not apply); ``old_rows``, when the call added classes, the new position of each class
        known before it (else None). Here ``(False, None)``.
        """
        return False, None

    def _add_replay(
        self, X: np.ndarray, y: np.ndarray, weights, *, reset: bool, old_rows=None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The training data with stored past samples mixed in; here ``(X, y, weights)``.

        ``reset`` is True for a fresh network; ``old_rows`` is what
        :meth:`_accept_new_classes` returned (None when no class was added).
        """
        return X, y, weights

    def _check_sample_weight(self, sample_weight, y, **kwargs) -> np.ndarray | None:
        """``sample_weight`` times ``class_weight`` per sample, or None (see
        ``_utils.validation``)."""
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

    def _input_of_weighted_rows(self, X: np.ndarray, positive: np.ndarray) -> np.ndarray:
        """The validated training input once the rows of positive weight are known.

        ``X`` itself here; a subclass whose input validation learns from the data (the latent
        classifier's token vocabulary) relearns it from the ``positive`` rows.
        """
        return X

    def _prepare_fit(self, X) -> None:
        """Derive what the training needs from the validated data (an array, or
        :class:`~ebmclassifier._utils.streamed.StreamedRows` read in chunks)."""
        self.device_ = resolve_device(self.device)
        if self.random_state is not None:
            self.seed_ = draw_seed(self.random_state)
        else:  # no seed of an earlier, seeded fit outlives a refit with random_state=None
            self.__dict__.pop("seed_", None)
        low, high = column_min_max(X)
        self.input_min_ = torch.as_tensor(low, device=self.device_)
        self.input_max_ = torch.as_tensor(high, device=self.device_)


def _reading(X):
    """Where a call reads a user's ``Dataset``, whose items may be drawn from torch's global
    generator (a random transform) in its checks and statistics too: the call under
    :func:`~ebmclassifier._utils.generators.global_rng` (forked, so the caller's generator is
    as it was after it; the library's lock, so another fit cannot seed it meanwhile)."""
    return global_rng(None) if reads_user_code(X) else nullcontext()
