"""The text of the parameters every estimator shares, written once.

Each estimator's docstring names the fragments it takes (``{module}``, ``{criterion}``,
``{training}``, ``{class_weight}``, ``{engine}``); :func:`~ebmclassifier._utils.docstrings.
fill_docstring` fills them in, so that a parameter reads the same in every estimator.
"""

__all__ = ["PARAMETER_DOCS"]

#: Parameter name or group -> its numpydoc text, indented as the estimators' docstrings are.
PARAMETER_DOCS = {
    "module": """\
module : torch.nn.Module class or instance, or None, default=None
    A network mapping a batch of inputs to logits of shape (n, n_classes). ``None`` builds
    :class:`~ebmclassifier.nn.MLP` for flat features and :class:`~ebmclassifier.nn.ConvNet`
    for ``(n, C, L)`` or ``(n, C, H, W)`` input. A class gets ``module__*`` parameters, and
    ``n_features``, ``n_classes`` and ``input_shape`` when its ``__init__`` takes them and
    they are not given. An instance is used as it is, unless ``module__*`` parameters are
    given: then it is rebuilt from its class, as skorch does, with these parameters and the
    data's sizes only (not its own other arguments). Do not use batch-norm
    (:class:`torch.nn.BatchNorm1d`, ``BatchNorm2d``, :class:`torch.nn.SyncBatchNorm`, ...)
    with an energy term: it couples the samples of a batch and breaks the per-sample energy
    gradients, and ``fit`` warns; a per-sample normalisation (``GroupNorm``, ``LayerNorm``)
    is fine. Any :class:`torch.nn.Module` returning logits works.""",
    "criterion": """\
criterion : torch loss class, default=torch.nn.CrossEntropyLoss
    The classification term (:class:`torch.nn.CrossEntropyLoss`), applied to logits and
    integer labels; ``criterion__*`` parameters are routed to it.""",
    "training": """\
optimizer : torch optimizer class, default=torch.optim.Adam
    :class:`torch.optim.Adam` by default; ``optimizer__*`` parameters are routed to it
    (``optimizer__weight_decay=1e-4``).
lr : float in (0, 1e30], default=1e-3
    The optimizer's learning rate.
max_epochs : int, default=50
    The passes over the training data of ``fit``, and of each ``partial_fit``.
batch_size : int, default=64
    The samples of a training batch (-1: all of them). Also the batch size of inference
    unless ``iterator_valid__batch_size`` is set.
train_split : callable or None, default=None
    As in skorch (e.g. ``ValidSplit(0.1)``, :class:`skorch.dataset.ValidSplit`); ``None``
    trains on all data, as scikit-learn's estimators do. The validation loss is the training
    objective on the held-out samples (:class:`~ebmclassifier.jem.JEMClassifier`'s: its
    cross-entropy alone).
early_stopping : bool or "train_loss", default=False
    ``True``, as in scikit-learn's :class:`~sklearn.neural_network.MLPClassifier`: ``fit``
    holds out ``validation_fraction`` of the training data (stratified by class, drawn from
    ``random_state``) and stops when the validation loss has not improved by at least ``tol``
    for ``n_iter_no_change`` epochs in a row; the network then gets back the weights of its
    best epoch (``best_epoch_``). The loss, not the accuracy, is monitored (skorch's
    :class:`~skorch.callbacks.EarlyStopping` on ``valid_loss``, with its
    :class:`~skorch.dataset.ValidSplit`). Not with a ``train_split``. ``"train_loss"``:
    ``MLPClassifier``'s rule without early stopping, holding out nothing: ``fit`` stops once
    the training loss has not improved by ``tol`` for more than ``n_iter_no_change`` epochs
    in a row, keeping the last epoch's weights. ``False``: ``fit`` trains ``max_epochs``
    epochs, as skorch's nets do. ``partial_fit`` never stops early.
validation_fraction : float in (0, 1), default=0.1
    The share of the training data held out for early stopping.
n_iter_no_change : int >= 1, default=10
    The epochs without improvement after which ``fit`` stops (with ``early_stopping``;
    without it, setting it warns that it stops nothing).
tol : float >= 0, default=1e-4
    The least decrease of the monitored loss that counts as an improvement (with
    ``early_stopping``; without it ``fit`` trains ``max_epochs`` epochs, as skorch does, and
    setting it warns).
callbacks : list or None, default=None
    skorch callbacks, as ``[(name, callback), ...]``
    (:class:`~skorch.callbacks.EarlyStopping` with a ``train_split``,
    :class:`~skorch.callbacks.Checkpoint`, :class:`~skorch.callbacks.LRScheduler`, ...), added
    to the default ones. A callback that monitors a validation score (``EarlyStopping()``) in
    a fit that holds out no data is refused before training, naming ``early_stopping=True``
    and ``train_split``.
warm_start : bool, default=False
    With ``True``, ``fit`` on a fitted estimator continues training its network instead of
    starting afresh, as scikit-learn's ``MLPClassifier`` does (see :meth:`fit`).""",
    "class_weight": """\
class_weight : None, "balanced" or dict, default=None
    Weights of the classes, as scikit-learn's classifiers take them: ``{label: weight}``
    (classes not named weigh 1), or ``"balanced"``, ``n_samples / (n_classes *
    np.bincount(y))``. They multiply the ``sample_weight`` of ``fit``.""",
    "class_prior": """\
class_count_ : ndarray of shape (n_classes,)
    Training samples per class, each counted with its ``sample_weight`` (``class_weight``
    is not counted), summed over the fits since the network was built.
class_prior_ : ndarray of shape (n_classes,)
    ``class_count_`` normalised: the training priors of ``DistributionalConstraint``.
n_iter_ : int
    The epochs the network has trained since it was built (``len(history)``); fewer than
    ``max_epochs`` when early stopping (on the validation or the training loss) ended a
    ``fit``.
best_epoch_, best_validation_loss_ : int, float
    After a ``fit`` with ``early_stopping=True`` only: the epoch whose weights the network
    has (numbered as ``history`` numbers them) and its validation loss.""",
    "engine": """\
device : str, default="auto"
    ``"auto"`` picks CUDA when it is available, else the CPU; or any device torch names
    (``"cpu"``, ``"cuda:1"``).
random_state : int, RandomState or None, default=None
    Seeds weight initialisation, shuffling and any sampling, per epoch, so that two fits
    give identical results and a resumed fit ends where an uninterrupted one would. Every
    draw comes from the fit's own generators: torch's global generator is neither read nor
    moved, and seeded fits in threads give what each gives alone. None: each call draws its
    seed from numpy's global generator, as scikit-learn does.
augmentation : callable or None, default=None
    Applied to each *training* batch on the device before the loss, so the energy terms
    (the gradient norm, JEM's data term) see the augmented batch; never at predict,
    ``score_ood`` or validation time. A callable ``batch -> batch`` of the same shape,
    dtype and device, e.g. :func:`ebmclassifier.augment.paper_augmentation`; one that takes a
    ``generator`` keyword (every augmentation of :mod:`ebmclassifier.augment`) draws from the
    fit's own generator, seeded per epoch, so fits stay reproducible (a plain callable draws
    from torch's global generator, seeded per epoch under a lock fits share). Checked once
    on a training batch at the start of ``fit``
    (:func:`ebmclassifier.augment.check_augmentation`).
n_threads : None, "auto" or int, default="auto"
    torch's intra-op threads during ``fit``, ``partial_fit`` and inference, set for the call
    and restored after it (torch's setting outside the call is left alone). ``"auto"`` runs
    on one thread when the forward pass of a batch is small (under 100 million
    multiply-accumulates: the default networks on tabular data, MNIST-1D and 8x8 images),
    where more threads gain little and, beside another busy process, slow the fit down tens
    of times; larger networks keep torch's setting. An int sets that many threads; ``None``
    leaves torch's setting as it is. Measured in :doc:`/performance`.
precision : {"float32", "bfloat16", "float16"}, default="float32"
    The forward passes of training, sampling and inference: ``"bfloat16"`` and ``"float16"``
    run them under ``torch.autocast``, the weights and the optimizer's state staying
    float32; ``"float16"`` scales the backward pass with a ``torch.amp.GradScaler``
    (``loss_scale_``: its last scale). Outputs are float32. ``fit`` refuses ``"float16"``
    on the CPU and ``"bfloat16"`` on a GPU without it (see :doc:`/performance`).
verbose : int, default=0
    0 prints nothing for a quick fit, and shows the progress bar of a ``fit`` /
    ``partial_fit`` still running after a few seconds (cleared when it ends;
    ``callbacks__progress_bar=None`` turns it off); 1 shows a progress bar of each call (on
    stderr) with the epoch, the batch, the losses and the time left; 2 prints skorch's table
    of each epoch's losses and duration instead.
iterator_train, iterator_valid : class, default=the library's tensor batch iterators
    What draws the training batches (shuffled) and the inference and validation batches:
    slices of the data's tensors on the device. ``iterator_train__*`` and
    ``iterator_valid__*`` parameters are routed to them (``iterator_valid__batch_size``).
compile : bool, default=False
    :func:`torch.compile` the network in place when training starts (``compile__*`` parameters
    routed to it; ``module_`` keeps its class). It trains every first-order mode: the
    cross-entropy, NG-EBM's finite difference, JEM with its SGLD, the latent model; ``fit``
    refuses it for NG-EBM's exact double backward, and where ``torch.compile`` fails on the
    machine. See :doc:`/performance`.
dataset, predict_nonlinearity, use_caching, torch_load_kwargs
    skorch's parameters, left at skorch's defaults. The estimators' own methods do not use
    ``dataset`` or ``predict_nonlinearity`` (``predict_proba`` applies the softmax);
    ``use_caching`` lets skorch's scoring callbacks reuse an epoch's predictions, and
    ``torch_load_kwargs`` is passed to ``torch.load`` by skorch's ``load_params``
    (:func:`ebmclassifier.load` reads files without it, and never takes it from a file).
**kwargs
    ``module__*``, ``optimizer__*``, ``criterion__*``, ``iterator_train__*``,
    ``iterator_valid__*``, ``callbacks__*`` and ``compile__*`` parameters, routed as in
    skorch.""",
}
