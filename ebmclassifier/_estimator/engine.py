"""The training engine of the estimators: skorch's loop, the training step and its hooks.

:class:`TrainingEngine` is the ``skorch.NeuralNetClassifier`` every estimator builds on, and
the one module that touches skorch's internals (``tests/_estimator/test_engine.py`` pins the
skorch range its overrides follow). The training of one batch reads here from top to bottom:
:meth:`~TrainingEngine.train_step_single` takes the batch apart, calls the hooks
:meth:`~TrainingEngine.augment_batch` and :meth:`~TrainingEngine.compute_loss` in the
estimator's precision, back-propagates, and hands a non-finite loss to
:meth:`~TrainingEngine.handle_divergence`; the hooks are declared here with their defaults,
beside the step, as skorch's ``NeuralNet`` declares every hook its loop calls. The scikit-learn
face (parameters, validation, ``fit`` / ``partial_fit``) is
:class:`~ebmclassifier._estimator.base.EBMClassifierBase`, which knows nothing of batches.

Two decisions shape it. The training capabilities are collaborators, not bases: skorch
callbacks that the engine adds from the parameters in ``get_default_callbacks`` (the resume
of interrupted calls, scikit-learn's early stopping; JEM adds its divergence roll-back), each
with its own state, and precision is one object built from the parameter
(:class:`~ebmclassifier._utils.precision.Precision`). And every random draw of a fit comes
from the fit's own generators (:mod:`~ebmclassifier._utils.generators`), seeded from the fit's
seed by purpose and epoch.

The examples of the hooks use a small three-class problem,
``X, y = sklearn.datasets.make_blobs(40, n_features=4, centers=3, random_state=0)``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import partial

import numpy as np
import torch
from skorch import NeuralNetClassifier
from skorch.callbacks import Callback, EarlyStopping, EpochScoring
from skorch.dataset import unpack_data
from skorch.utils import to_numpy, to_tensor
from torch import nn

from .._utils.compile import compile_in_place, no_donated_buffers
from .._utils.data import split_weights, with_weights
from .._utils.device import pickled_tensor_device
from .._utils.generators import (
    FitGenerators,
    draw_seed,
    draws_from_global_rng,
    global_rng,
    seed_global_rng,
)
from .._utils.precision import Precision, full_precision
from .._utils.streamed import reads_user_code
from ..augment import takes_generator
from ..exceptions import DivergenceError
from ..losses import criterion_mean, negatives_cross_entropy
from .checkpoint import files_to_load, write_files
from .early_stopping import SklearnEarlyStopping
from .progress import with_progress
from .resume import Resume, TrainingState
from .training_loss_stopping import TrainingLossStopping

__all__ = ["TrainingEngine"]

#: The capabilities that stop a fit: last among the callbacks, so that every other callback
#: sees the epoch they end.
_STOPPING = (SklearnEarlyStopping, TrainingLossStopping)

#: Parameter prefixes that only configure how data are read: nothing to re-initialize.
_LOADER_PREFIXES = ("iterator_train", "iterator_valid", "dataset")


def _valid_accuracy(net, X, y) -> float:
    """The accuracy of ``net`` on a held-out split, for skorch's ``valid_acc`` score.

    skorch's ``EpochScoring("accuracy")`` compares ``net.predict(X)`` (the labels, ``"cat"``)
    with the batches' encoded labels (``0``): it failed on string labels and scored other
    labels than ``0 .. n_classes - 1`` wrong. The encoded labels are decoded first.

    Parameters
    ----------
    net : TrainingEngine
    X : the validation dataset
    y : encoded labels of ``X`` (an array or tensor)

    Returns
    -------
    float
    """
    return float(np.mean(net.classes_[to_numpy(y)] == net.predict(X)))


class TrainingEngine(NeuralNetClassifier):
    """skorch's classifier with the training step, its hooks and the overrides all share.

    Not an estimator: :class:`~ebmclassifier._estimator.base.EBMClassifierBase` adds the public
    face. As skorch's customization guide says of its own hooks:

    - Fairly safe to override: ``compute_loss`` (the training objective; take
      ``sample_weight=None`` too, or fitting with weights raises a ``TypeError``),
      ``augment_batch`` (the batch the loss sees), ``handle_divergence`` (what to do when a
      loss stops being finite), ``classification_loss`` (the criterion's term of the default
      ``compute_loss``), and on the face ``_validate_own_params`` and ``initialize_module``
      (call ``super()`` first, then add modules ending in ``_``).
    - Hooks a subclass fills, declared here with their defaults: ``_capabilities`` (the
      training capabilities it holds as callbacks), ``_compiled_modules`` (what
      ``compile=True`` compiles), ``_negatives`` (the classes the classification term
      contrasts), ``_own_training_state`` / ``_load_own_training_state`` (its part of a
      training state).
    - Should not be overridden: ``train_step_single``, ``validation_step``, ``fit``,
      ``partial_fit`` and the inference methods: they hold the weights, the modes, the
      validation and the seeding that make the estimators behave as scikit-learn estimators.

    skorch's methods overridden here follow its code for the range of ``pyproject.toml``:
    ``_get_param_names`` (skorch's private bookkeeping is no parameter), ``initialize``,
    ``set_params``, ``load_params`` and ``__setstate__`` (``"auto"`` is no torch device: skorch
    is shown ``device_`` for the call), ``_initialize_callbacks`` / ``initialize_callbacks``
    (the capabilities stay with ``callbacks="disable"``; the early stop comes last),
    ``_step_optimizer`` (the precision's step: float16's scaler takes no closure, as in skorch's
    ``AccelerateMixin``), ``torch_compile`` (compiling in place when training starts),
    ``_train`` (skorch's ``partial_fit`` on validated tensors, so that its notifications,
    ``fit_loop`` and Ctrl-C handling run unchanged).
    """

    #: The estimators' ``augmentation`` parameter, which their ``__init__`` sets: a callable
    #: ``batch -> batch`` that :meth:`augment_batch` applies to each training batch, or None.
    augmentation = None

    #: The training call's :class:`~ebmclassifier._utils.precision.Precision` (autocast, loss
    #: scaling, the optimizer step), while a fit trains; None otherwise (see :meth:`_precision`).
    _training_precision: Precision | None = None

    #: The generators of the call, reseeded at each epoch, while a fit trains; None
    #: otherwise (see :meth:`_generator`).
    _generators: FitGenerators | None = None
    #: The seed of an unseeded call (drawn when first needed; see :meth:`_fit_seed`).
    _call_seed: int | None = None
    #: Whether the running fit reads a user's ``Dataset`` (see :meth:`_train`).
    _reads_user_code = False
    #: The epochs the running call has ended (``on_epoch_end``), and ``len(history)`` when
    #: it began.
    _epochs_ended = 0
    _call_start_epoch = 0

    # Fitted tensors that skorch maps to the CPU when a GPU-trained estimator is unpickled
    # (documented skorch attribute; modules and optimizers are added by skorch itself).
    cuda_dependent_attributes_ = ["input_min_", "input_max_"]

    #: skorch's parameters that ``__init__`` removes (see there): no signature shows them.
    _not_parameters = ("classes",)

    def __init__(self, module, **kwargs) -> None:
        super().__init__(module, **kwargs)
        # skorch's ``classes`` parameter does nothing here: ``classes_`` are the labels seen in
        # fit (or given to the first partial_fit), so it is not offered as a parameter.
        del self.classes

    def get_default_callbacks(self) -> list:
        """skorch's default callbacks, then the estimator's training capabilities.

        skorch's epoch table prints at ``verbose >= 2``, and a progress bar shows at
        ``verbose=1`` (:mod:`~ebmclassifier._estimator.progress`). The validation accuracy,
        ``valid_acc``, compares the predicted labels with the held-out labels
        (:func:`_valid_accuracy`), whatever the labels are. The capabilities
        (:meth:`_capabilities`) are callbacks that act from the estimator's parameters; one
        network keeps the same ones, also when ``set_params`` rebuilds the callbacks.

        Returns
        -------
        list of (name, callback)

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> [name for name, _ in NGEBMClassifier().get_default_callbacks()][-4:]
        ['progress_bar', 'resume', 'sklearn_early_stopping', 'training_loss_stopping']
        """
        callbacks = [
            (name, EpochScoring(_valid_accuracy, name=name, lower_is_better=False))
            if name == "valid_acc"
            else (name, callback)
            for name, callback in super().get_default_callbacks()
        ]
        return with_progress(callbacks) + self._held_capabilities()

    def _capabilities(self) -> list[tuple[str, Callback]]:
        """The training capabilities, new: ``(name, callback)`` pairs that act from the
        estimator's parameters and keep their own state (a subclass adds its own): here
        the resume of interrupted calls (:mod:`~ebmclassifier._estimator.resume`) and
        the two ways of stopping early, on a held-out validation loss
        (:mod:`~ebmclassifier._estimator.early_stopping`) and on the training loss
        (:mod:`~ebmclassifier._estimator.training_loss_stopping`)."""
        return [
            ("resume", Resume()),
            ("sklearn_early_stopping", SklearnEarlyStopping()),
            ("training_loss_stopping", TrainingLossStopping()),
        ]

    def _held_capabilities(self) -> list[tuple[str, Callback]]:
        """:meth:`_capabilities`, those the network already holds kept (their state with them)."""
        held = {type(cb): cb for _, cb in vars(self).get("callbacks_", [])}
        return [(name, held.get(type(cb), cb)) for name, cb in self._capabilities()]

    def _capability(self, kind: type):
        """The capability of class ``kind`` among ``callbacks_`` (None before ``initialize``)."""
        for _, callback in vars(self).get("callbacks_", []):
            if type(callback) is kind:
                return callback
        return None

    def initialize_callbacks(self):
        """skorch's, with the stopping capabilities last: a stopping callback ends the
        epoch once every other callback has seen it (skorch puts its epoch table last, then
        this moves the stop after it)."""
        super().initialize_callbacks()
        self.callbacks_.sort(key=lambda item: isinstance(item[1], _STOPPING))
        return self

    def _initialize_callbacks(self):
        """skorch's; ``callbacks="disable"`` turns off skorch's and the user's callbacks, and the
        capabilities stay: they are the estimator's parameters at work."""
        if self.callbacks != "disable":
            return super()._initialize_callbacks()
        self.callbacks_ = [(name, cb.initialize()) for name, cb in self._held_capabilities()]
        self.callbacks_.sort(key=lambda item: isinstance(item[1], _STOPPING))
        return self

    def _get_param_names(self):
        # skorch lists every attribute not ending in "_"; its private bookkeeping
        # (``_params_to_validate``) is no parameter, and clone rebuilds it from the kwargs.
        return [name for name in super()._get_param_names() if not name.startswith("_")]

    # ------------------------------------------------------------------ the device

    @contextmanager
    def _device_shown_to_skorch(self) -> Iterator[None]:
        """``self.device = device_`` while skorch works, then the parameter as it was."""
        shown = getattr(self, "device_", None)
        if shown is None:  # not fitted: skorch moves nothing yet
            yield
            return
        requested = self.device
        self.device = shown
        try:
            yield
        finally:
            if self.device is shown:  # else the call set the parameter itself
                self.device = requested

    def initialize(self):
        """skorch's ``initialize``, with the modules moved to ``device_``.

        Under :func:`~ebmclassifier._utils.generators.global_rng`: ``nn.Module``'s
        ``reset_parameters`` draws the initial weights from torch's global generator alone,
        which ``fit`` seeds there with the fit's seed, and the caller's is left as it was.
        """
        device = getattr(self, "device_", torch.device("cpu"))
        vars(self).pop("callbacks_", None)  # a new network: new capabilities
        vars(self).pop("_resumed_call_seed", None)  # ... and a new schedule
        with self._device_shown_to_skorch(), global_rng(None, device):
            return super().initialize()

    def set_params(self, **params):
        """skorch's ``set_params``; a re-initialized module goes to ``device_``.

        A new ``device`` takes effect at the next fit, as ``device="auto"`` is resolved there;
        ``iterator_train__*``, ``iterator_valid__*`` and ``dataset__*`` at the next call that
        reads data (skorch 1.4 refuses them on a fitted net).
        """
        if "device" in params:
            super().set_params(device=params.pop("device"))
        # skorch 1.4 sets iterator_*__ and dataset__ parameters, then raises "Something went
        # wrong" on an initialized net (none of them needs re-initializing): set them here
        loader = [key for key in params if key.split("__", 1)[0] in _LOADER_PREFIXES]
        vars(self).update({key: params.pop(key) for key in loader if "__" in key})
        with self._device_shown_to_skorch():
            return super().set_params(**params)

    def save_params(self, use_safetensors: bool = False, **files) -> None:
        """skorch's ``save_params``, every file given by its path written whole or not at all.

        A full disk or a process killed while it writes leaves each file the old one or the
        new one (see :mod:`ebmclassifier._utils.atomic`). The files of a ``Checkpoint`` that
        saves the training state, which calls this once per file, and the files of one call
        that holds the training state, are replaced together once all are written
        (:mod:`ebmclassifier._estimator.checkpoint`): a kill leaves the previous set or the
        new one, never a mix.

        Parameters
        ----------
        use_safetensors : bool, default=False
            As in skorch.
        **files
            ``f_params``, ``f_optimizer``, ``f_criterion``, ``f_history``, and ``f_<name>``
            for a module ``<name>_`` or the ``training_state_``: paths or file objects.

        Returns
        -------
        None

        Examples
        --------
        >>> import io
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0)
        >>> state = io.BytesIO()  # or a path
        >>> clf.fit(X, y).save_params(f_training_state=state)
        >>> saved = torch.load(io.BytesIO(state.getvalue()), weights_only=True)
        >>> saved["epochs"], saved["seed"] == clf.seed_
        (1, True)
        """
        resume = self._capability(Resume)
        fitting, sets = (False, {}) if resume is None else (resume.fitting_, resume.staged_sets_)
        save = partial(super().save_params, use_safetensors=use_safetensors)
        write_files(self, files, save, fitting=fitting, sets=sets)

    def load_params(
        self,
        f_params=None,
        f_optimizer=None,
        f_criterion=None,
        f_history=None,
        checkpoint=None,
        use_safetensors: bool = False,
        **kwargs,
    ) -> None:
        """skorch's ``load_params``: the files of one complete set, the training state last.

        The loaded tensors go to ``device_``; before the network exists, an error names the
        two routes that build it (:meth:`_no_network_yet`). With a ``checkpoint``
        (``LoadInitState``), its files. Files of a set written together (a ``Checkpoint`` that
        saves the training state) are read as that set stands whole, also after a process was
        killed while replacing it. The training state (``f_training_state``) is loaded last,
        and checked against the history, the network, the criterion and the optimizer loaded
        with it (a ``ValueError`` if they were written at other epochs).

        Parameters
        ----------
        f_params, f_optimizer, f_criterion, f_history, checkpoint, use_safetensors
            As skorch's ``load_params`` takes them.
        **kwargs
            ``f_training_state`` for a file that ``save_params`` or a ``Checkpoint`` wrote,
            ``f_<name>`` for a module ``<name>_``.

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> from ebmclassifier import JEMClassifier
        >>> clf = JEMClassifier(max_epochs=2, sgld_steps=2, buffer_size=20, random_state=0)
        >>> clf = clf.fit(X, y)
        >>> fresh = JEMClassifier(max_epochs=0, sgld_steps=2, buffer_size=20, random_state=0)
        >>> fresh = fresh.fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     files = {"f_params": Path(folder, "params.pt"),
        ...              "f_history": Path(folder, "history.json"),
        ...              "f_training_state": Path(folder, "training_state.pt")}
        ...     clf.save_params(**files)
        ...     fresh.load_params(**files)
        >>> bool(torch.equal(fresh.replay_buffer_.samples, clf.replay_buffer_.samples))
        True
        """
        given = {"f_params": f_params, "f_optimizer": f_optimizer}
        given.update(f_criterion=f_criterion, f_history=f_history, **kwargs)
        files = files_to_load(self, given, checkpoint)
        state = files.pop("f_training_state", None)
        if not getattr(self, "initialized_", False):
            from skorch.exceptions import NotInitializedError

            raise NotInitializedError(self._no_network_yet("load_params"))
        with self._device_shown_to_skorch():
            super().load_params(use_safetensors=use_safetensors, **files)
        if state is not None:
            device = getattr(self, "device_", torch.device("cpu"))
            state = torch.load(state, map_location=device, weights_only=True)
            self.training_state_.load_state_dict(state, loaded=set(files))

    @property
    def training_state_(self) -> TrainingState:
        """What a resumed fit needs besides the network, optimizer and history.

        For skorch's ``Checkpoint(f_training_state=...)`` and ``LoadInitState`` (see
        :mod:`ebmclassifier._estimator.resume`).
        """
        return TrainingState(self)

    def _own_training_state(self) -> dict:
        """The estimator's own part of the training state (plain values and tensors), beside
        its capabilities' parts; here nothing."""
        return {}

    def _load_own_training_state(self, state: dict) -> None:
        """Restore :meth:`_own_training_state`'s part from ``state`` (every part's keys)."""

    def _engine_state(self, fitting: bool) -> dict:
        """The engine's part of a training state: the fit's seed (``seed_``, and during a fit
        the call's own)."""
        return {
            "seed": getattr(self, "seed_", None),
            "call_seed": self._call_seed if fitting else None,
        }

    def _load_engine_state(self, state: dict, *, in_fit: bool) -> None:
        """Restore :meth:`_engine_state`'s part of ``state``; a call saved during it
        (``in_fit``) gives its seed to the call that resumes it (:meth:`_begin_call`, or the
        next epoch's generators). A state written before the fit's own generators held
        torch's (``"generators"``): the streams have changed since, and a resumed call draws a
        seed of its own."""
        if state["seed"] is not None:
            self.seed_ = state["seed"]
        self._resumed_call_seed = state.get("call_seed") if in_fit else None

    def _begin_call(self, *, new_network: bool) -> None:
        """Before a call draws anything: an unseeded call that resumes an interrupted one
        (loaded from a state saved during it) takes that call's seed, any other a new one."""
        resumed = vars(self).pop("_resumed_call_seed", None)
        self._call_seed = None if new_network else resumed
        resume = self._capability(Resume)
        if resume is not None:
            resume.begin_call(self, new_network=new_network)

    def _no_network_yet(self, call: str) -> str:
        """Why ``call`` (``"initialize()"``, ``"load_params"``) cannot run before ``fit``, and
        the documented routes: ``ebmclassifier.load`` of a file written by ``save``, or
        ``fit`` with ``max_epochs=0`` then skorch's ``load_params``.

        Parameters
        ----------
        call : str

        Returns
        -------
        str
        """
        return (
            f"{type(self).__name__} builds its network from the data (the sample shape and "
            f"the classes of y), so {call} has no network to work on before fit. To restore "
            "a saved estimator, read the file its save(path) wrote with "
            "ebmclassifier.load(path); to load skorch's save_params files, first "
            "fit(X, y) with max_epochs=0 on data of the same shape and classes (it builds the "
            "network untrained), then call load_params (the saving guide shows both)."
        )

    def __setstate__(self, state) -> None:
        # skorch maps the tensors to ``state["device"]``; give it the one the estimator was
        # trained on ("auto" is ours, not torch's) and restore the parameter afterwards.
        requested = state.get("device")
        state["device"] = pickled_tensor_device(state)
        super().__setstate__(state)
        if "device_" in state:
            self.device_ = torch.device(self.device)  # the CPU, where CUDA is missing
        self.device = requested

    def infer(self, x, **fit_params):
        """The module's float32 output for one batch ``x`` (without its weights), on ``device_``."""
        x, _ = split_weights(x)
        x = self._as_network_input(to_tensor(x, device=self.device_))
        return self._as_inference(self.module_)(x, **fit_params)

    def _as_network_input(self, x: torch.Tensor) -> torch.Tensor:
        """A batch as the network takes it: on ``device_``, float32.

        Input kept in its own dtype until the batch (``uint8`` images, a memmap's rows, a
        ``Dataset``'s samples) is converted here, one batch at a time; a float32 batch already
        on the device is returned as it is.
        """
        return x.to(device=self.device_, dtype=torch.float32, non_blocking=True)

    def _on_device(self, X: torch.Tensor, y, weights: dict) -> tuple:
        """A training or validation batch ``(X, y, weights)`` on ``device_``, ``X`` as the
        network takes it (:meth:`_as_network_input`); batches sliced from tensors on the device
        are left as they are."""
        if y is not None:
            y = y.to(self.device_, non_blocking=True)
        weights = {k: w.to(self.device_, non_blocking=True) for k, w in weights.items()}
        return self._as_network_input(X), y, weights

    # ------------------------------------------------------------------ precision, compilation

    def _precision(self) -> Precision:
        """The :class:`~ebmclassifier._utils.precision.Precision` of the ``precision`` parameter
        on ``device_``: the training call's (with float16's loss scaling), else one for the
        forward passes alone."""
        training = self._training_precision
        if training is not None:
            return training
        return Precision(self.precision, self.device_, training=False)

    def _as_inference(self, fn):
        """``fn`` (a network, or a function that runs one) as inference runs it: in the
        estimator's precision, its result in float32 (not what follows it: a softmax of bfloat16
        logits does not sum to 1). The one way a network runs outside the training step:
        skorch's ``infer``, every inference call, JEM's ``sample``."""
        return self._precision().run(fn)

    def torch_compile(self, module, name):
        """skorch's hook, which would wrap every module: here a no-op.

        With ``compile=True`` the networks that the loss calls (:meth:`_compiled_modules`) are
        compiled in place when training starts (:meth:`_train`), so ``module_`` keeps its class,
        its state-dict keys and its attributes, and the criterion, the replay buffer and the
        other modules stay as they are.

        Parameters
        ----------
        module : torch.nn.Module
        name : str
            skorch's name of the module (``"module"``, ``"criterion"``, ...).

        Returns
        -------
        torch.nn.Module
            ``module`` itself.

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier
        >>> clf = NGEBMClassifier(grad_norm="finite_difference", compile=True,
        ...                       compile__backend="aot_eager", max_epochs=1,
        ...                       module__hidden_sizes=(8,)).fit(X, y)
        >>> type(clf.module_).__name__  # not skorch's OptimizedModule
        'MLP'
        """
        return module

    def _compiled_modules(self) -> list[nn.Module]:
        """The modules whose forward passes ``compile=True`` compiles: ``module_``."""
        return [self.module_]

    # ------------------------------------------------------------------ the training loop

    def _train(
        self, X: torch.Tensor, y: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> None:
        """Train on validated tensors: skorch's ``partial_fit``, past the estimator's own.

        In ``precision="float16"`` a gradient scaler lives for the call, starting from the last
        call's scale (``loss_scale_``). With ``compile=True`` the networks are compiled first
        (again after unpickling, which drops the compiled code), and the training runs without
        torch's donated buffers (:func:`~ebmclassifier._utils.compile.no_donated_buffers`).
        A fit whose network or augmentation draws from torch's global generator
        (:meth:`_draws_from_global_rng`), or that reads a user's ``Dataset`` (whose items may
        be drawn at random), trains under :func:`~ebmclassifier._utils.generators.global_rng`,
        seeded at each epoch.
        """
        self._reads_user_code = reads_user_code(X)
        shared = self._draws_from_global_rng() or self._reads_user_code
        try:
            with global_rng(None, self.device_) if shared else nullcontext():
                if not self.compile:
                    self._train_in_precision(X, y, sample_weight)
                    return
                for module in self._compiled_modules():
                    compile_in_place(module, **self.get_params_for("compile"))
                with no_donated_buffers():
                    self._train_in_precision(X, y, sample_weight)
        finally:
            self._generators = None  # the fit's generators end with it
            self._reads_user_code = False

    def _train_in_precision(self, X, y, sample_weight) -> None:
        precision = Precision(self.precision, self.device_, getattr(self, "loss_scale_", None))
        self._training_precision = precision
        try:
            super().partial_fit(with_weights(X, sample_weight), y)
        finally:
            self._training_precision = None
            if precision.state_dict():  # float16: the next call starts from this scale
                self.loss_scale_ = precision.state_dict()["scale"]
        self._raise_if_interrupted()

    def _raise_if_interrupted(self) -> None:
        """Raise ``KeyboardInterrupt`` when skorch swallowed one that was not an early stop.

        skorch's ``partial_fit`` ends the loop on a ``KeyboardInterrupt`` (Ctrl-C, or a
        callback raising it), runs ``on_train_end`` and returns, as if the fit had run its
        course. Once that clean-up is done, a call that ended before its ``max_epochs`` without
        skorch's ``EarlyStopping`` (or :class:`~.training_loss_stopping.TrainingLossStopping`)
        having stopped it raises the interrupt again, saying how far
        it got: a partly trained estimator is never the silent result of ``fit``. The estimator
        holds the weights of the last step it took (``len(history)`` epochs begun).
        """
        done = self._epochs_ended
        if done >= self.max_epochs or any(
            (isinstance(callback, EarlyStopping) and callback.misses_ >= callback.patience)
            or (isinstance(callback, TrainingLossStopping) and callback.stopped_)
            for _, callback in getattr(self, "callbacks_", [])
        ):
            return
        raise KeyboardInterrupt(
            f"{type(self).__name__}'s training was interrupted: {done} of this call's "
            f"{self.max_epochs} epochs ran to their end, and the estimator holds the weights of "
            f"the last step it took (len(history) = {len(self.history)}). To stop early on a "
            "criterion, use skorch's EarlyStopping callback."
        )

    def check_data(self, X, y=None) -> None:
        """Nothing: the public methods validate the data with scikit-learn first."""

    def _set_mode(self, training: bool) -> None:
        """Training or evaluation mode for every torch module of the estimator."""
        for name, value in list(vars(self).items()):
            if name.endswith("_") and isinstance(value, nn.Module):
                value.train(training)

    def _fit_seed(self) -> int:
        """The seed every random draw of this call derives from.

        ``seed_`` (drawn from ``random_state`` when the data's statistics were derived) while
        ``random_state`` is set; otherwise a seed drawn for the call, when first needed, from
        numpy's global generator (as scikit-learn's ``random_state=None`` does), or the
        interrupted call's when this call resumes it. The one rule the engine, class growth,
        the reservoir and generated replay all follow, so that a ``partial_fit`` after
        ``set_params(random_state=None)`` is unseeded in every part.
        """
        if self.random_state is not None and hasattr(self, "seed_"):
            return self.seed_
        if self._call_seed is None:
            self._call_seed = draw_seed(None)
        return self._call_seed

    def _generator(self, purpose: str, device=None) -> torch.Generator | None:
        """The fit's generator for ``purpose`` now, on ``device`` (default ``device_``).

        One per purpose, reseeded at each epoch from ``(seed, epoch, purpose)``
        (:class:`~ebmclassifier._utils.generators.FitGenerators`); None outside a fit, where
        a draw (a user's call of ``compute_loss``) takes torch's global generator.
        """
        generators = self._generators
        if generators is None:
            return None
        return generators(purpose, self.device_ if device is None else device)

    def _call_generators(self) -> FitGenerators:
        """The generators of what a call draws before training starts (class growth,
        generated replay, the reservoir's stream): from the call's seed and epoch, in the
        phase ``"call"``, one stream per purpose (before a first fit, at epoch 0)."""
        return FitGenerators(self._fit_seed(), len(self.history or ()))

    def _draws_from_global_rng(self) -> bool:
        """Whether training draws from torch's global generator, which no seed of ours
        reaches otherwise: a network with dropout, or an augmentation without a ``generator``
        keyword."""
        modules = [v for k, v in vars(self).items() if k.endswith("_") and isinstance(v, nn.Module)]
        if any(draws_from_global_rng(module) for module in modules):
            return True
        return self.augmentation is not None and not takes_generator(self.augmentation)

    def on_train_begin(self, net, X=None, y=None, **kwargs) -> None:
        """The call's generators (for its draws before the first epoch, then each epoch's),
        and its count of the epochs it ends."""
        super().on_train_begin(net, X=X, y=y, **kwargs)
        self._generators = FitGenerators(self._fit_seed(), len(self.history))
        self._call_start_epoch = len(self.history)
        self._epochs_ended = 0

    def on_epoch_end(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """Count the call's epochs that ran to their end (before any callback's)."""
        super().on_epoch_end(net, dataset_train, dataset_valid, **kwargs)
        self._epochs_ended += 1

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """Start an epoch: its generators from ``(seed, epoch)``, every module in training mode.

        Where training draws from torch's global generator (:meth:`_draws_from_global_rng`),
        that generator, forked for the call, is seeded from ``(seed, epoch)`` too.
        """
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        resumed = vars(self).pop("_resumed_call_seed", None)  # loaded in on_train_begin
        if resumed is not None:
            self._call_seed = resumed
        generators = self._generators or FitGenerators(self._fit_seed(), len(self.history))
        generators.seed = self._fit_seed()  # a resumed call's, set since on_train_begin
        generators.begin(len(self.history))
        self._generators = generators
        if self._draws_from_global_rng() or self._reads_user_code:  # forked by _train
            seed_global_rng(generators.seed_for("global"), self.device_)
        # skorch sets the modes on every batch, which walks all submodules; they change only
        # between phases (training, validation, inference), so set them then.
        self._set_mode(True)

    def get_split_datasets(self, X, y=None, **fit_params):
        """skorch's split of the training data; in a call that stops early, the held-out split
        of :class:`~ebmclassifier._estimator.early_stopping.SklearnEarlyStopping`, stratified by
        the encoded labels ``y`` and drawn from the fit's seed.

        Parameters
        ----------
        X : the training data as skorch holds them (tensors, or a dataset)
        y : Tensor of shape (n_samples,) or None
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
        >>> len(clf.history[:, "valid_loss"]) == clf.n_iter_  # the loss on 10 held-out samples
        True
        >>> _, valid = clf.get_split_datasets(X, y)  # outside a fit: train_split=None's
        >>> valid is None
        True
        """
        stopping = self._capability(SklearnEarlyStopping)
        if stopping is None or not stopping.holds_out:
            return super().get_split_datasets(X, y, **fit_params)
        return stopping.split(self, X, y, self._generators.random_state("split"))

    def get_iterator(self, dataset, training: bool = False):
        """skorch's iterator; in training it shuffles with the epoch's generator.

        The generator is given to an ``iterator_train`` that takes a ``generator`` argument
        (the default :class:`~ebmclassifier._utils.data.ShuffledTensorBatchIterator`, torch's
        ``DataLoader``), unless ``iterator_train__generator`` is set.
        """
        if not training or "iterator_train__generator" in vars(self):
            return super().get_iterator(dataset, training=training)
        try:
            takes = "generator" in inspect.signature(self.iterator_train).parameters
        except (TypeError, ValueError):
            takes = False
        generator = self._generator("shuffle", "cpu") if takes else None
        if generator is None:
            return super().get_iterator(dataset, training=training)
        self.iterator_train__generator = generator
        try:
            return super().get_iterator(dataset, training=training)
        finally:
            del self.iterator_train__generator

    # ------------------------------------------------------------------ the step's hooks

    def compute_loss(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        training: bool,
        sample_weight: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The training objective on one batch; here the classification term alone.

        The hook an estimator overrides to define its loss (see the module's notes on which
        hooks to override).

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
            Back-propagated in training, unless it has no graph: a step the estimator rejects
            (as ``JEMClassifier`` does a diverged one) returns it detached, and the optimizer
            then leaves the weights as they were.
        logits : Tensor of shape (n, n_classes)

        Examples
        --------
        A classifier trained with label smoothing, by overriding this hook alone:

        >>> from ebmclassifier._estimator.base import EBMClassifierBase
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
        >>> bool(loss > clf.classification_loss(logits, yt))  # smoothing costs the confident
        True
        """
        logits = self.module_(X)
        return self.classification_loss(logits, y, sample_weight), logits

    def classification_loss(
        self, logits: torch.Tensor, y: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The classification term, ``criterion_(logits, y)``, optionally weighted.

        :func:`~ebmclassifier.losses.negatives_cross_entropy` of the arguments of
        :meth:`_classification_term`: :func:`ebmclassifier.losses.criterion_mean` of the
        estimator's ``criterion_``, over the classes that the estimator's ``negatives``
        chooses (every class here). The term that the default :meth:`compute_loss` trains;
        NG-EBM and JEM weigh the same term against their energy terms, built inside their
        losses from the same arguments (:func:`~ebmclassifier.losses.ngebm_loss`); to change
        it there, pass another ``criterion``.

        Parameters
        ----------
        logits : Tensor of shape (n, n_classes)
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        sample_weight : Tensor of shape (n,) or None, default=None
            Weights of the samples; with class weights in ``criterion__weight`` the mean is
            normalised as :func:`~ebmclassifier.losses.criterion_mean` says.

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
        >>> loss = clf.classification_loss(logits, torch.tensor([0, 2]))
        >>> round(float(loss), 4), round(math.log(3), 4)
        (1.0986, 1.0986)
        >>> logits = torch.tensor([[9.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # the first one is sure
        >>> w = torch.tensor([1.0, 0.0])
        >>> clf.classification_loss(logits, torch.tensor([0, 2]), w) < 0.01
        tensor(True)

        With ``negatives="batch"`` the classes absent from the batch are left out:

        >>> clf = NGEBMClassifier(negatives="batch", max_epochs=1, module__hidden_sizes=(8,))
        >>> clf = clf.fit(X, y)
        >>> logits = torch.tensor([[0.0, 0.0, 9.0]])  # class 2 is not in this batch
        >>> round(float(clf.classification_loss(logits, torch.tensor([0]))), 4)
        0.0
        """
        return negatives_cross_entropy(
            logits, y, sample_weight=sample_weight, **self._classification_term()
        )

    def _classification_term(self) -> dict:
        """How the losses build the classification term: the arguments ``criterion``,
        ``negatives`` and ``generator`` of :func:`~ebmclassifier.losses.negatives_cross_entropy`,
        which :meth:`classification_loss`, :func:`~ebmclassifier.losses.ngebm_loss` and
        :func:`~ebmclassifier.losses.jem_loss` take alike: ``criterion_`` averaged per sample
        (:func:`~ebmclassifier.losses.criterion_mean`), over the classes of :meth:`_negatives`;
        with ``negatives=k`` the epoch's generator draws them."""
        negatives = self._negatives()
        return {
            "criterion": partial(criterion_mean, self.criterion_),
            "negatives": negatives,
            "generator": None if isinstance(negatives, str) else self._generator("negatives"),
        }

    def _negatives(self) -> str | int:
        """The classes the classification term's normalisation covers
        (:func:`~ebmclassifier.losses.negatives_cross_entropy`): ``"all"`` here; a
        class-incremental estimator's resolved ``negatives_``."""
        return "all"

    def augment_batch(self, X: torch.Tensor) -> torch.Tensor:
        """The training batch the loss sees: ``augmentation(X)``, or ``X`` without one.

        Called by :meth:`train_step_single` only, never at inference or validation. An
        augmentation that takes a ``generator`` keyword draws from the epoch's generator.

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
        >>> bool((NGEBMClassifier().augment_batch(xb) == xb).all())  # no augmentation
        True
        """
        augmentation = self.augmentation
        if augmentation is None:
            return X
        if takes_generator(augmentation):
            return augmentation(X, generator=self._generator("augment", X.device))
        return augmentation(X)

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
        hint = ""
        if self.precision == "float16":
            hint = " In float16 values beyond 65504 overflow: try precision='bfloat16'."
        raise DivergenceError(
            f"{type(self).__name__} diverged in epoch {len(self.history)}: the training loss is "
            f"{loss.item()}. Lower the learning rate (lr={self.lr!r}) or the loss weights, or "
            f"standardize the input.{hint}"
        )

    # ------------------------------------------------------------------ the step

    def train_step_single(self, batch, **fit_params):
        """Forward and backward pass of :meth:`compute_loss` on one training batch.

        The batch goes through :meth:`augment_batch` first, then :meth:`compute_loss` under
        :meth:`_autocast`. A non-finite loss goes to :meth:`handle_divergence` before the
        optimizer steps; a loss returned without a graph is not back-propagated, nor is that of
        a batch whose sample weights are all zero (so the optimizer, momentum included, leaves
        the weights alone).
        """
        if not self.module_.training:  # inference in a callback switched the modes
            self._set_mode(True)
        Xi, yi = unpack_data(batch)
        Xi, weights = split_weights(Xi)
        Xi, yi, weights = self._on_device(Xi, yi, weights)
        Xi = self.augment_batch(Xi)
        precision = self._precision()
        with precision.autocast():
            loss, logits = self.compute_loss(Xi, yi, training=True, **weights)
        # A loss without a graph is a step the estimator rejected (a diverged JEM step): no
        # gradient, so the optimizer's step after this leaves the weights as they were.
        if loss.requires_grad:
            precision.backward(loss, self._optimizers_of_net())
        # Read after the backward pass and before the optimizer step, so the weights are still
        # good: on a GPU a read waits for the device, and here that wait no longer holds back
        # the queueing of the backward kernels. One read per step: the loss, and with weights
        # whether any sample of the batch counts. ``math.isfinite`` of the float costs a
        # microsecond, ``torch.isfinite`` a tensor and a kernel.
        if weights:
            counts = weights["sample_weight"].any().to(loss.dtype)
            value, counted = torch.stack([loss.detach(), counts]).tolist()
            if not counted:  # no sample of the batch counts: no step, as if it were dropped
                for _, parameter in self.get_all_learnable_params():
                    parameter.grad = None
                loss = loss.detach()
        else:
            value = loss.item()
        if not math.isfinite(value):
            self.handle_divergence(loss)
        # skorch's history reads the loss again (``.item()`` per batch): a CPU copy of the value
        # read above spares a second wait for the device.
        loss = loss.detach() if loss.device.type == "cpu" else torch.tensor(value)
        return {"loss": loss, "y_pred": full_precision(logits.detach())}

    def _optimizers_of_net(self) -> list:
        """skorch's optimizers of the net (``optimizer_``, and any other it registered)."""
        return [getattr(self, name + "_") for name in self._optimizers]

    def _step_optimizer(self, step_fn):
        """skorch's optimizer step, through the precision's
        (:meth:`~ebmclassifier._utils.precision.Precision.step`: float16's scaler steps the
        optimizers instead, a step without a scaled backward pass leaves them alone)."""
        self._precision().step(step_fn, self._optimizers_of_net(), super()._step_optimizer)

    def validation_step(self, batch, **fit_params):
        """The loss of one validation batch, in evaluation mode, without a backward pass."""
        if self.module_.training:
            self._set_mode(False)
        Xi, yi = unpack_data(batch)
        Xi, weights = split_weights(Xi)
        Xi, yi, weights = self._on_device(Xi, yi, weights)
        # The energy terms need input gradients, also when validating.
        with torch.enable_grad(), self._precision().autocast():
            loss, logits = self.compute_loss(Xi, yi, training=False, **weights)
        return {"loss": loss.detach(), "y_pred": full_precision(logits.detach())}
