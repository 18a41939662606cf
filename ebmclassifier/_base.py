"""The one skorch classifier that every estimator of the library shares.

It owns everything that is not the loss: input validation at the public boundary, label
encoding, the device, seeding, the default network, batched inference and the energy-based
scores. A subclass implements :meth:`EBMClassifierBase.compute_loss` and checks its own
parameters in :meth:`EBMClassifierBase._validate_own_params`; nothing else.

Which hooks to override
-----------------------
- Fairly safe: ``compute_loss`` (the training objective), ``_validate_own_params``,
  ``initialize_module`` (call ``super()`` first, then add modules ending in ``_``),
  ``handle_divergence`` (what to do when a loss stops being finite).
- Should not be overridden: ``fit``, ``partial_fit``, ``train_step_single``,
  ``validation_step`` and the inference methods: they hold the validation and the
  seeding that make the estimators behave as scikit-learn estimators.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from math import prod
from numbers import Integral

import numpy as np
import torch
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from skorch import NeuralNetClassifier
from skorch.dataset import get_len, unpack_data
from torch import nn

from ._data import TensorBatchIterator
from ._validation import ParamChecker
from .energy import OOD_METHODS, energy, ood_score
from .exceptions import DivergenceError
from .nn import MLP, ConvNet

__all__ = ["EBMClassifierBase", "ShuffledTensorBatchIterator"]


class ShuffledTensorBatchIterator(TensorBatchIterator):
    """:class:`TensorBatchIterator` that shuffles by default (the training iterator)."""

    def __init__(self, dataset, batch_size: int = 128, shuffle: bool = True, **kwargs) -> None:
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, **kwargs)


def _resolve_device(device) -> torch.device:
    """Turn the ``device`` parameter into a torch device, or say clearly why not."""
    if device is None or device == "auto":
        # Called in fit only, so that importing, constructing and pickling an estimator never
        # touch CUDA (a parent that did could not fork workers that use it).
        if not torch.cuda.is_available():
            return torch.device("cpu")
        # Under torchrun each process takes its own GPU.
        local_rank = os.environ.get("LOCAL_RANK", "")
        if local_rank.isdigit():
            return torch.device("cuda", int(local_rank) % torch.cuda.device_count())
        return torch.device("cuda")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a device torch knows; use 'auto', 'cpu' or 'cuda[:N]'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this machine; "
            "use device='auto' to fall back to the CPU."
        )
    return resolved


def _as_numpy(X):
    """Torch tensors go through numpy so that scikit-learn's validation sees every input."""
    if isinstance(X, torch.Tensor):
        return X.detach().cpu().numpy()
    return X


class EBMClassifierBase(NeuralNetClassifier):
    """Shared base of the energy-based classifiers (not to be used directly).

    Parameters
    ----------
    module : torch.nn.Module class or instance, or None, default=None
        A network mapping a batch of inputs to logits of shape (n, n_classes). ``None`` builds
        :class:`~ebmclassifier.nn.MLP` for flat features and :class:`~ebmclassifier.nn.ConvNet`
        for ``(n, C, L)`` or ``(n, C, H, W)`` input. A class gets ``module__*`` parameters,
        and ``n_features``, ``n_classes`` and ``input_shape`` when its ``__init__`` takes
        them and they are not given. Do not use batch-norm: it couples the samples of a
        batch and breaks the per-sample energy gradients.
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
    verbose : int, default=0
    **kwargs
        Other skorch parameters, and ``module__*``, ``optimizer__*``, ``criterion__*``,
        ``iterator_train__*``, ``iterator_valid__*``, ``callbacks__*`` routed parameters.
    """

    # Fitted tensors that skorch maps to the CPU when a GPU-trained estimator is unpickled.
    cuda_dependent_attributes_ = ["input_min_", "input_max_"]

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
        # skorch's ``classes`` parameter does nothing here: ``classes_`` are the labels seen in
        # fit (or given to the first partial_fit), so it is not offered as a parameter.
        del self.classes

    # ------------------------------------------------------------------ the subclass hooks

    def compute_loss(
        self, X: torch.Tensor, y: torch.Tensor, training: bool
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

        Returns
        -------
        loss : scalar Tensor
        logits : Tensor of shape (n, n_classes)

        Examples
        --------
        A classifier trained with label smoothing, by overriding this hook alone:

        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> class SmoothedClassifier(EBMClassifierBase):
        ...     def compute_loss(self, X, y, training):
        ...         logits = self.module_(X)
        ...         loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=0.2)
        ...         return loss, logits
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
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
        return self.cross_entropy(logits, y), logits

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
        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> from ebmclassifier.exceptions import DivergenceError
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
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

    def cross_entropy(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The classification term, ``criterion_(logits, y)``.

        Parameters
        ----------
        logits : Tensor of shape (n, n_classes)
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``

        Returns
        -------
        scalar Tensor
            The batch mean, with the default ``criterion=torch.nn.CrossEntropyLoss``.

        Examples
        --------
        >>> import math
        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> logits = torch.zeros(2, 3)  # p(y|x) = 1/3: the loss is log(3)
        >>> round(float(clf.cross_entropy(logits, torch.tensor([0, 2]))), 4), round(math.log(3), 4)
        (1.0986, 1.0986)
        """
        return self.criterion_(logits, y)

    # ------------------------------------------------------------------ validation

    def _check_params(self) -> None:
        check = ParamChecker(self)
        check.real("lr", 0.0, low_open=True)
        check.integer("max_epochs", 0)
        if not (
            isinstance(self.batch_size, Integral)
            and (self.batch_size >= 1 or self.batch_size == -1)
        ):
            check.add(
                f"The 'batch_size' parameter of {type(self).__name__} must be an int >= 1 or -1 "
                f"(the whole data set). Got {self.batch_size!r} instead."
            )
        self._validate_own_params(check)
        check.raise_if_any()

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        X = validate_data(
            self, _as_numpy(X), reset=reset, dtype=np.float32, allow_nd=True, ensure_min_features=1
        )
        self._check_sample_shape(X, reset=reset)
        return X

    def _check_sample_shape(self, X: np.ndarray, *, reset: bool) -> None:
        """Remember the sample shape in fit; afterwards, insist on it."""
        if reset:
            self.input_shape_ = tuple(X.shape[1:])
        elif tuple(X.shape[1:]) != self.input_shape_:
            raise ValueError(
                f"X has samples of shape {tuple(X.shape[1:])}, but {type(self).__name__} was "
                f"fitted on samples of shape {self.input_shape_}."
            )

    def _validate_training_data(self, X, y, *, reset: bool, classes=None):
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        X, y = validate_data(
            self, _as_numpy(X), _as_numpy(y), reset=reset, dtype=np.float32, allow_nd=True
        )
        check_classification_targets(y)
        self._check_sample_shape(X, reset=reset)
        if reset:
            encoder = LabelEncoder().fit(y if classes is None else np.asarray(classes))
            if len(encoder.classes_) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes in the data, but "
                    f"the data contain only one class: {encoder.classes_.tolist()[0]!r}."
                )
            self.label_encoder_ = encoder
        unseen = np.setdiff1d(np.unique(y), self.label_encoder_.classes_)
        if len(unseen):
            raise ValueError(
                f"y contains labels {unseen.tolist()!r} that were not seen when the estimator "
                "was first fitted; pass every class to the first partial_fit with classes=..."
            )
        return X, self.label_encoder_.transform(y)

    @property
    def classes_(self) -> np.ndarray:
        """The class labels, in the order of the columns of :meth:`predict_proba`."""
        try:
            return self.label_encoder_.classes_
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__} has no attribute 'classes_' before it is fitted."
            ) from None

    def __sklearn_is_fitted__(self) -> bool:
        return bool(getattr(self, "initialized_", False)) and hasattr(self, "label_encoder_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    # ------------------------------------------------------------------ device and seeding

    @contextmanager
    def _skorch_device(self) -> Iterator[None]:
        """skorch reads ``self.device``; show it the resolved device while it works."""
        requested = self.device
        self.device = str(self.device_)
        try:
            yield
        finally:
            self.device = requested

    @contextmanager
    def _training_context(self) -> Iterator[None]:
        """The resolved device, and torch's random state seeded and restored afterwards."""
        with self._skorch_device():
            if self.random_state is None:
                yield
                return
            devices = [self.device_.index or 0] if self.device_.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(self.seed_)
                yield

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """Start an epoch in ``history`` and seed torch with ``seed_ + epoch``.

        skorch calls it before each epoch. With a ``random_state``, the randomness of an epoch
        (shuffling, sampling) depends on the seed and the epoch's number alone, so a fit
        resumed with :meth:`partial_fit` continues as the uninterrupted fit would have.

        Parameters
        ----------
        net : EBMClassifierBase
            The estimator itself (skorch passes the net to its callbacks).
        dataset_train, dataset_valid : skorch Dataset or None, default=None
            Unused.

        Returns
        -------
        None

        Examples
        --------
        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> with torch.random.fork_rng():  # leave this session's random state alone
        ...     clf.on_epoch_begin(clf)  # as skorch does before epoch 3
        ...     drawn = torch.rand(2)
        ...     _ = torch.manual_seed(clf.seed_ + 3)
        ...     len(clf.history), torch.equal(torch.rand(2), drawn)
        (3, True)
        """
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        if self.random_state is not None:
            # Each epoch's randomness depends only on (seed, epoch), so a run resumed from a
            # checkpoint continues exactly as the uninterrupted run would have.
            torch.manual_seed(self.seed_ + len(self.history))

    def __setstate__(self, state) -> None:
        # skorch maps the tensors to the device named in ``state['device']``; give it the one
        # the estimator was trained on ("auto" is ours, not torch's) and restore the parameter.
        requested = state.get("device")
        state["device"] = str(state.get("device_", "cpu"))
        super().__setstate__(state)
        if "device_" in state:
            self.device_ = torch.device(self.device)
        self.device = requested

    # ------------------------------------------------------------------ the module

    def _module_defaults(self, module_cls) -> dict:
        """Data-dependent arguments a module class takes and the user did not give."""
        available = {
            "n_features": prod(self.input_shape_),
            "n_classes": len(self.classes_),
            "input_shape": self.input_shape_,
        }
        try:
            accepted = inspect.signature(module_cls).parameters
        except (TypeError, ValueError):
            return {}
        return {k: v for k, v in available.items() if k in accepted}

    def initialize_module(self):
        """Build ``module_``, a fresh network for the data's shape and classes.

        skorch calls it from ``initialize``, which :meth:`fit` calls after validating the data.
        A subclass that needs more modules calls ``super().initialize_module()`` first and adds
        its own, with names ending in ``_``.

        Returns
        -------
        self
            The estimator, with a newly initialized ``module_``.

        Raises
        ------
        RuntimeError
            Before the data were seen (``initialize()`` without ``fit``).

        Examples
        --------
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> clf.initialize_module() is clf
        True
        >>> [tuple(p.shape) for p in clf.module_.parameters()]  # 4 features -> 8 -> 3 classes
        [(8, 4), (8,), (3, 8), (3,)]
        """
        if not hasattr(self, "input_shape_"):
            raise RuntimeError(
                f"{type(self).__name__} builds its network from the data; call fit(X, y) "
                "instead of initialize()."
            )
        kwargs = self.get_params_for("module")
        module = self.module
        if module is None:
            module = ConvNet if len(self.input_shape_) in (2, 3) else MLP
        if not isinstance(module, nn.Module):
            kwargs = {**self._module_defaults(module), **kwargs}
        self.module_ = self.initialized_instance(module, kwargs)
        return self

    # ------------------------------------------------------------------ training

    def _get_param_names(self):
        # skorch lists every attribute not ending in "_"; its private bookkeeping
        # (``_params_to_validate``) is no parameter, and clone rebuilds it from the kwargs.
        return [name for name in super()._get_param_names() if not name.startswith("_")]

    def fit(self, X, y):
        """Initialize the network and train it on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, L) / (n_samples, C, H, W)
            numpy, pandas or torch; cast to float32.
        y : array-like of shape (n_samples,)
            Class labels of any hashable type.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> labels = np.array(["cat", "dog", "owl"])[y]
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf.fit(X, labels) is clf
        True
        >>> clf.classes_.tolist(), clf.n_features_in_, len(clf.history)
        (['cat', 'dog', 'owl'], 4, 2)
        """
        self._check_params()
        X, y = self._validate_training_data(X, y, reset=True)
        self._prepare_fit(X)
        with self._training_context():
            if not self.warm_start or not self.initialized_:
                self.initialize()
            self._fit_validated(X, y)
        return self

    def partial_fit(self, X, y, classes=None):
        """Train for ``max_epochs`` more epochs, keeping the current weights and optimizer.

        Parameters
        ----------
        X : array-like
        y : array-like of shape (n_samples,)
        classes : array-like or None, default=None
            All classes, needed on the first call when ``y`` does not contain each of them.

        Returns
        -------
        self

        Examples
        --------
        Two chunks of data, the first without class 2:

        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
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
        self._check_params()
        first = not (self.initialized_ and hasattr(self, "label_encoder_"))
        X, y = self._validate_training_data(X, y, reset=first, classes=classes)
        if first:
            self._prepare_fit(X)
        with self._training_context():
            if first:
                self.initialize()
            self._fit_validated(X, y)
        return self

    def _prepare_fit(self, X: np.ndarray) -> None:
        """Derive what the training needs from the validated data."""
        self.device_ = _resolve_device(self.device)
        if self.random_state is not None:
            self.seed_ = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        self.input_min_ = torch.as_tensor(X.min(axis=0), device=self.device_)
        self.input_max_ = torch.as_tensor(X.max(axis=0), device=self.device_)

    def _fit_validated(self, X: np.ndarray, y: np.ndarray) -> None:
        # The whole training set moves to the device once; batches are slices of it.
        # A copy: the user's array may be read-only, and it is never written.
        X_t = torch.tensor(X, device=self.device_)
        y_t = torch.tensor(y, dtype=torch.long, device=self.device_)
        self.notify("on_train_begin", X=X_t, y=y_t)
        try:
            self.fit_loop(X_t, y_t)
        except KeyboardInterrupt:
            # Ctrl-C ends training early and leaves a usable estimator, as in skorch.
            pass
        self.notify("on_train_end", X=X_t, y=y_t)

    def check_data(self, X, y=None) -> None:
        """Nothing: skorch's check of the training data, which :meth:`fit` does itself.

        The data are validated once, at the public boundary (:meth:`fit`, :meth:`partial_fit`
        and the inference methods), as scikit-learn's estimators do; skorch's own check would
        read ``y`` again.

        Parameters
        ----------
        X, y : array-like
            Ignored.

        Returns
        -------
        None

        Examples
        --------
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1)
        >>> clf.check_data(X, y[:5]) is None  # accepts anything ...
        True
        >>> clf.fit(X, y[:5])  # ... because fit checks first
        Traceback (most recent call last):
        ...
        ValueError: Found input variables with inconsistent numbers of samples: [40, 5]
        """

    def _ensure_training(self, training: bool) -> None:
        # skorch sets the mode of every module on every batch, which walks all submodules; a
        # mode changes only between phases (training, validation, inference), so set it then.
        if self.module_.training != training:
            self._set_training(training)

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        """One pass of ``step_fn`` over ``iterator``, recording the losses in ``history``.

        skorch's loop, with the batch length read directly from the tensor batches that
        :class:`~ebmclassifier._data.TensorBatchIterator` yields rather than through skorch's
        generic ``get_len``.

        Parameters
        ----------
        iterator : iterable of (X, y) batches, or None
            ``None`` skips the pass (no validation split).
        training : bool
            The mode the network is put in.
        prefix : {"train", "valid"}
            Prefix of the history keys: ``<prefix>_loss``, ``<prefix>_batch_size`` per batch
            and ``<prefix>_batch_count`` for the epoch.
        step_fn : callable
            :meth:`train_step` or :meth:`validation_step`.
        **fit_params
            Passed to ``step_fn``.

        Returns
        -------
        None

        Examples
        --------
        A validation pass over the training data, in batches of 16:

        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from skorch.dataset import Dataset
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> data = Dataset(torch.tensor(X, dtype=torch.float32, device=clf.device_),
        ...                torch.tensor(y, device=clf.device_))
        >>> batches = clf.set_params(batch_size=16).get_iterator(data, training=False)
        >>> clf.run_single_epoch(batches, False, prefix="valid", step_fn=clf.validation_step)
        >>> clf.history[-1, "valid_batch_count"], clf.history[-1, "batches", :, "valid_batch_size"]
        (3, [16, 16, 8])
        """
        if iterator is None:
            return
        self._set_training(training)
        batch_count = 0
        for batch in iterator:
            self.notify("on_batch_begin", batch=batch, training=training)
            step = step_fn(batch, **fit_params)
            self.history.record_batch(prefix + "_loss", step["loss"].item())
            Xi = batch[0] if isinstance(batch, (tuple, list)) else batch
            batch_size = len(Xi) if isinstance(Xi, torch.Tensor) else get_len(Xi)
            self.history.record_batch(prefix + "_batch_size", batch_size)
            self.notify("on_batch_end", batch=batch, training=training, **step)
            batch_count += 1
        self.history.record(prefix + "_batch_count", batch_count)

    def train_step_single(self, batch, **fit_params):
        """Forward and backward pass on one training batch; the optimizer step comes after.

        Calls :meth:`compute_loss` with ``training=True`` and back-propagates the loss; a
        non-finite loss goes to :meth:`handle_divergence` before any weight changes.

        Parameters
        ----------
        batch : tuple of (X, y) Tensors
            On ``device_``; ``y`` holds encoded labels.
        **fit_params
            Unused.

        Returns
        -------
        dict
            ``"loss"``: the detached loss; ``"y_pred"``: the detached logits of shape
            (n, n_classes).

        Examples
        --------
        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> batch = (torch.tensor(X[:8], dtype=torch.float32, device=clf.device_),
        ...          torch.tensor(y[:8], device=clf.device_))
        >>> clf.optimizer_.zero_grad()
        >>> step = clf.train_step_single(batch)
        >>> sorted(step), tuple(step["y_pred"].shape)
        (['loss', 'y_pred'], (8, 3))
        >>> all(p.grad is not None for p in clf.module_.parameters())  # ready for the step
        True
        """
        self._ensure_training(True)
        Xi, yi = unpack_data(batch)
        loss, logits = self.compute_loss(Xi, yi, training=True)
        loss.backward()
        # Checked after the backward pass and before the optimizer step, so the weights are
        # still good: on a GPU reading the loss waits for the device, and here that wait no
        # longer holds back the queueing of the backward kernels. ``math.isfinite`` of the
        # float costs a microsecond, ``torch.isfinite`` a tensor and a kernel.
        if not math.isfinite(loss.item()):
            self.handle_divergence(loss)
        return {"loss": loss.detach(), "y_pred": logits.detach()}

    def validation_step(self, batch, **fit_params):
        """The loss of one validation batch, in evaluation mode, without a backward pass.

        Calls :meth:`compute_loss` with ``training=False``, under ``torch.enable_grad``: the
        energy terms need input gradients also when validating.

        Parameters
        ----------
        batch : tuple of (X, y) Tensors
            On ``device_``; ``y`` holds encoded labels.
        **fit_params
            Unused.

        Returns
        -------
        dict
            ``"loss"``: the detached loss; ``"y_pred"``: the detached logits of shape
            (n, n_classes).

        Examples
        --------
        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> batch = (torch.tensor(X[:8], dtype=torch.float32, device=clf.device_),
        ...          torch.tensor(y[:8], device=clf.device_))
        >>> with torch.no_grad():  # the gradient-norm term is computed all the same
        ...     step = clf.validation_step(batch)
        >>> bool(torch.isfinite(step["loss"])), step["loss"].requires_grad, clf.module_.training
        (True, False, False)
        """
        self._ensure_training(False)
        Xi, yi = unpack_data(batch)
        # The energy terms need input gradients, also when validating.
        with torch.enable_grad():
            loss, logits = self.compute_loss(Xi, yi, training=False)
        return {"loss": loss.detach(), "y_pred": logits.detach()}

    # ------------------------------------------------------------------ inference

    def _inference_batch_size(self, n: int) -> int:
        size = self.get_params_for("iterator_valid").get("batch_size", self.batch_size)
        return n if size == -1 else size

    def _map_batches(self, X, fn: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
        """Validate ``X`` and apply ``fn`` batch by batch, so memory stays flat."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        self._set_training(False)
        size = max(1, self._inference_batch_size(len(X)))
        out = []
        for start in range(0, len(X), size):
            # A copy per batch: the user's array may be read-only, and is never written.
            xb = torch.tensor(X[start : start + size], device=self.device_)
            out.append(fn(xb).detach().cpu())
        return torch.cat(out).numpy()

    def _logits(self, xb: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.module_(xb)

    def _map_logits(self, X, fn: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
        """``fn(logits)`` batch by batch; also for the skorch ``Dataset`` that skorch's
        scoring callbacks pass, through ``forward`` (which they cache)."""
        if isinstance(X, torch.utils.data.Dataset):
            with self._skorch_device():
                return fn(self.forward(X)).numpy()
        return self._map_batches(X, lambda xb: fn(self._logits(xb)))

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
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
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
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
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
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
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
        >>> import numpy as np
        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
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
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
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
        return self._map_batches(X, lambda xb: ood_score(self.module_, xb, method))

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
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> clf = clf.fit(X, y)
        >>> np.array_equal(clf.score_samples(X), -clf.score_ood(X))
        True
        """
        return -self.score_ood(X)

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
