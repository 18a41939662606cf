"""NGEBMClassifier: the Non-Generative Energy-Based Model."""

from __future__ import annotations

import warnings
from numbers import Real

import numpy as np

from ._estimator.base import EBMClassifierBase
from ._estimator.parameter_docs import PARAMETER_DOCS
from ._utils.docstrings import fill_docstring
from ._utils.parameters import ParamChecker, is_int
from ._utils.precision import FD_STEPS
from .continual._mixin import CONTINUAL_ATTRIBUTES, RESERVOIR_ATTRIBUTES, ClassIncrementalMixin
from .energy import nonsmooth_activations
from .exceptions import FiniteDifferenceWarning
from .losses import GRAD_NORMS, fd_step_size, ngebm_loss

__all__ = ["NGEBMClassifier"]


@fill_docstring(PARAMETER_DOCS)
class NGEBMClassifier(ClassIncrementalMixin, EBMClassifierBase):
    """Classifier trained with cross-entropy plus a penalty on the energy's input gradient.

    The loss of one batch (Piland et al., 2023; the equation in the Notes below)::

        L = gamma * CE(f(x), y) + beta * mean_i ||dE/dx (x_i)||_2
            + energy_var_weight * mean_i (mean_j E(x_j) - E(x_i))^2

    with ``E(x) = -logsumexp_y f(x)[y]`` the energy of the logits ``f(x)`` and
    ``gamma = 1 - beta`` unless given. The gradient-norm term is the negative Approximate Mass
    of Grathwohl et al. (2020): penalising it makes the training data sit at flat minima of the
    energy, which makes ``score_ood(X, "approx_mass")`` a useful detector and the confidences
    better calibrated, without the sampling that JEM needs.

    A scikit-learn classifier (``fit``, ``partial_fit``, ``predict``, ``predict_proba``,
    ``score``, ``get_params``, ``set_params``) and a skorch net; ``energy``, ``score_ood`` and
    ``score_samples`` score inputs. ``help`` shows the estimator's own parameters and the
    common training ones; every parameter is listed below.

    Parameters
    ----------
    {module}
    beta : float, default=0.5
        Weight of the gradient-norm term. ``beta=0`` is plain cross-entropy training and skips
        the input gradient altogether.
    gamma : float or None, default=None
        Weight of the cross-entropy term; ``None`` means ``1 - beta``, so a grid over ``beta``
        alone walks the paper's line ``beta + gamma = 1``.
    energy_var_weight : float, default=0.0
        Weight of the batch variance of the energy, which the authors' public code adds at
        weight 1 (not in the paper's equation).
    grad_norm : {"exact", "finite_difference"}, default="exact"
        How the gradient-norm term is differentiated with respect to the parameters:
        ``"exact"`` by double backprop; ``"finite_difference"`` from one extra forward pass
        at ``x + h v`` with ``v = (dE/dx) / ||dE/dx||``, which is cheaper (see
        :func:`~ebmclassifier.energy.energy_grad_norm_finite_difference`) and as good for
        smooth activations (the default networks' SiLU), but not for ReLU-family ones (the
        default of :class:`~ebmclassifier.nn.WideResNet` is leaky ReLU): ``fit`` then warns
        with a :class:`~ebmclassifier.exceptions.FiniteDifferenceWarning`.
    fd_step : float or "auto", default="auto"
        For ``grad_norm="finite_difference"``: the step ``h`` relative to the data's scale,
        ``h = fd_step * sqrt(sum_j Var(x_j))`` (the root-mean-square distance of the training
        samples from their mean), so it means the same for raw pixels and standardized data.
        ``"auto"`` takes the step measured for the ``precision``: 0.01 in float32, 0.05 in
        bfloat16, 0.03 in float16, where the finite-difference gradient follows the exact one
        best on smooth networks (a difference of two nearly equal energies loses digits in
        half precision; see :doc:`/performance`).
    penalty_every : int >= 1, default=1
        Lazy regularization [3]_: the gradient-norm term is computed at every
        ``penalty_every``-th training step only, its weight multiplied by ``penalty_every``;
        the steps between are plain cross-entropy steps at weight ``gamma`` (no input
        gradient, no double backward or extra forward pass, the energy variance kept). Over
        ``k`` steps the penalty's gradient sums to what it sums to at every step, up to how
        much the penalty changes in ``k`` steps. The steps are counted since the network was
        built (``train_steps_``: across ``partial_fit`` calls and warm starts, not per call, so
        that a stream of calls of fewer than ``k`` batches each does not run the penalty at
        every call), and the count is part of the training state (``save``, skorch's
        ``Checkpoint``), so a resumed fit keeps the rhythm. ``1``: every step, the paper's
        loss. What a larger ``k`` saves, and the calibration it can cost with Adam, are
        measured in :doc:`/user_guide/ngebm` ("What it costs, and what it keeps"): check the
        calibration on held-out data.
    penalty_fraction : float in (0, 1], default=1.0
        The gradient-norm term's mean over the batch estimated from its first
        ``m = ceil(penalty_fraction * n)`` rows (:func:`~ebmclassifier.energy.penalty_rows`):
        the input gradient and the penalty's backward pass (or extra forward pass) cover
        ``m`` rows, the cross-entropy all ``n``. With weights, the weighted mean over the
        ``m`` rows. The training batches are shuffled (from the fit's seeded generator), so
        the rows are a uniform random subset of the batch and nothing more is drawn; ``fit``
        refuses ``iterator_train__shuffle=False``, which would penalise the same samples at
        every epoch. ``1``: the whole batch. Validation losses are always of the whole
        objective (``penalty_every`` and ``penalty_fraction`` shape training steps only).
    class_incremental : bool, default=False
        With ``True``, ``partial_fit`` (and a warm-started ``fit``) accepts labels that are not
        in ``classes_``: they join ``classes_`` (kept sorted, as scikit-learn keeps them, so
        with labels arriving in increasing order they are appended) and the output layer
        (:func:`~ebmclassifier.continual.output_layer`) grows a row per new class, the old
        rows and every other weight unchanged, the optimizer's state carried over with zeros
        for the new rows (:func:`~ebmclassifier.continual.grow_output_layer`). A later
        ``partial_fit(classes=...)`` may then name more classes. ``False``: new labels are a
        ``ValueError``, as in scikit-learn. See :doc:`/continual`.
    negatives : {"auto", "all", "batch"} or int, default="auto"
        Which classes the normalising term of the cross-entropy covers (Li et al. 2020):
        ``"all"`` every class (the usual cross-entropy); ``"batch"`` the classes of the
        training batch, so the logits of absent classes are not pushed down; an int ``k``,
        ``k`` classes drawn per sample from the batch's other classes (all of them where
        fewer are there). See :func:`~ebmclassifier.losses.negatives_cross_entropy`. The
        energy terms are unchanged. ``"auto"``: ``"batch"`` with ``class_incremental=True``,
        else ``"all"`` (resolved at every fit into ``negatives_``).
    replay_per_class : "auto" or int, default="auto"
        When positive, a reservoir of up to that many training samples per class (Vitter's
        reservoir sampling, seeded by ``random_state``; attributes ``reservoir_X_``,
        ``reservoir_y_``, ``reservoir_seen_``, saved and pickled with the estimator). Every
        ``fit``/``partial_fit`` trains on its data plus the samples stored before the call,
        weighted so that each stored class weighs, in all, as much as an average class of the
        data (times its ``class_weight``), then stores from its own data (samples of positive
        weight); a fresh ``fit`` empties the reservoir first. ``"auto"``: 20 with
        ``class_incremental=True`` (the estimator then keeps up to 20 training samples per
        class, in memory and in its saved file), else 0; resolved into ``replay_per_class_``.
    generated_per_class : "auto" or int, default="auto"
        Generated replay, which stores no training sample: a ``partial_fit`` that adds classes
        first draws that many samples of each class known before it from the model itself,
        by ``generated_steps`` steps of proximal SGLD on ``E(x, y) = -f(x)[y]`` inside the
        input range, from the first fit's per-feature Gaussian (``input_mean_``,
        ``input_std_``), seeded by ``random_state``. They are kept (``generated_X_``,
        ``generated_y_``, saved with the estimator) until the next call that adds classes,
        and mixed into every call's data, each generated class weighing as an average class
        of the data. ``"auto"``: 100 with ``class_incremental=True``, else 0; resolved into
        ``generated_per_class_``. See :doc:`/continual`.
    generated_steps : int, default=40
        The sampler's steps for generated replay (0: the chain start itself).
    ood_method : {"approx_mass", "energy", "max_softmax"}, default="approx_mass"
        The default method of :meth:`score_ood` and :meth:`score_samples`.
    {criterion}
    {training}
    {class_weight}
    {engine}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    {class_prior}
    module_ : torch.nn.Module
        The trained network.
    history_ : skorch.History
        Per-epoch losses and timings.
    device_ : torch.device
    fd_step_size_ : float
        The finite-difference step ``h`` in input units (``fd_step``, or the precision's step
        for ``"auto"``, times the data's scale).
    train_steps_ : int
        The training steps (batches) taken since the network was built, the ``t`` of
        ``penalty_every``; part of the training state.
    negatives_, replay_per_class_, generated_per_class_
        The parameters of the same names with ``"auto"`` resolved, at the last fit.
    reservoir_X_, reservoir_y_, reservoir_seen_, generated_X_, generated_y_
        The stored and the generated replay samples, when there are any (see above).

    Notes
    -----
    The loss of one batch of ``n`` samples is ([1]_)

    .. math::

        L = \\gamma \\, \\mathrm{CE}(f(x), y)
            + \\beta \\, \\frac{1}{n} \\sum_i \\lVert \\partial E / \\partial x \\, (x_i) \\rVert_2
            + w_{\\mathrm{var}} \\, \\frac{1}{n} \\sum_i \\big(\\bar E - E(x_i)\\big)^2,

    with :math:`\\gamma`, :math:`\\beta`, :math:`w_{\\mathrm{var}}` the parameters ``gamma``,
    ``beta`` and ``energy_var_weight``, :math:`\\bar E` the batch mean of the energy and
    :math:`E(x) = -\\log \\sum_y \\exp f(x)_y` ([2]_, eq. 5).

    With the cheaper penalty (``penalty_every``, ``penalty_fraction``), the loss of the
    training step :math:`t` (counted in ``train_steps_``) is

    .. math::

        L_t = \\gamma \\, \\mathrm{CE}(f(x), y)
            + [t \\bmod k = 0] \\; k \\beta \\, \\frac{1}{m}
              \\sum_{i \\le m} \\lVert \\partial E / \\partial x \\, (x_i) \\rVert_2
            + w_{\\mathrm{var}} \\, \\frac{1}{n} \\sum_i \\big(\\bar E - E(x_i)\\big)^2,

    with :math:`k` = ``penalty_every`` (lazy regularization, Karras et al. 2020 [3]_) and
    :math:`m = \\lceil f n \\rceil` the first rows of the shuffled batch, :math:`f` =
    ``penalty_fraction``; :math:`k = 1, f = 1` is the loss above.

    Sample and class weights weigh the cross-entropy, the gradient norm and the energy
    variance of each sample; the validation loss (with a ``train_split``) is the whole
    objective (every row, every step, at weight :math:`\\beta`, whatever ``penalty_every``
    and ``penalty_fraction``).

    References
    ----------
    .. [1] Piland, D., et al. "Non-Generative Energy Based Models", 2023.
    .. [2] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
       Should Treat it Like One", ICLR 2020.
    .. [3] Karras, T., Laine, S., Aittala, M., Hellsten, J., Lehtinen, J. and Aila, T.
       "Analyzing and Improving the Image Quality of StyleGAN", CVPR 2020, section 3.1
       (lazy regularization: the R1 penalty every 16 minibatches, weighted by 16).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = NGEBMClassifier(max_epochs=5, random_state=0).fit(X / 16, y)
    >>> clf.predict(X[:3] / 16).shape
    (3,)
    >>> clf.score_ood(X[:3] / 16).shape  # ||dE/dx||, higher = more likely OOD
    (3,)
    """

    _saved_attributes = (
        *EBMClassifierBase._saved_attributes,
        "fd_step_size_",
        *CONTINUAL_ATTRIBUTES,
    )
    _call_start_attributes = (*EBMClassifierBase._call_start_attributes, *RESERVOIR_ATTRIBUTES)

    def __init__(
        self,
        module=None,
        *,
        beta: float = 0.5,
        gamma: float | None = None,
        energy_var_weight: float = 0.0,
        grad_norm: str = "exact",
        fd_step: float | str = "auto",
        penalty_every: int = 1,
        penalty_fraction: float = 1.0,
        class_incremental: bool = False,
        negatives: str | int = "auto",
        replay_per_class: str | int = "auto",
        generated_per_class: str | int = "auto",
        generated_steps: int = 40,
        ood_method: str = "approx_mass",
        **kwargs,
    ) -> None:
        super().__init__(module, ood_method=ood_method, **kwargs)
        self.beta = beta
        self.gamma = gamma
        self.energy_var_weight = energy_var_weight
        self.grad_norm = grad_norm
        self.fd_step = fd_step
        self.penalty_every = penalty_every
        self.penalty_fraction = penalty_fraction
        self.class_incremental = class_incremental
        self.negatives = negatives
        self.replay_per_class = replay_per_class
        self.generated_per_class = generated_per_class
        self.generated_steps = generated_steps

    def _has_energy_term(self) -> bool:
        """Whether the loss has an energy term besides the classification: ``beta > 0``."""
        return self.beta > 0

    def _validate_own_params(self, check: ParamChecker) -> None:
        super()._validate_own_params(check)
        check.real("beta", 0.0, 1.0 if self.gamma is None else None)
        check.real("gamma", 0.0, allow_none=True)
        check.real("energy_var_weight", 0.0)
        check.choice("grad_norm", GRAD_NORMS)
        fd_step = self.fd_step
        auto = isinstance(fd_step, str) and fd_step == "auto"
        ok = auto or (isinstance(fd_step, Real) and not isinstance(fd_step, bool))
        ok = ok and (auto or 0 < fd_step < float("inf"))
        check.satisfies("fd_step", ok, "'auto' or a float in the range (0.0, inf)")
        check.integer("penalty_every", 1)
        check.real("penalty_fraction", 0.0, 1.0, low_open=True)
        shuffled = self.get_params_for("iterator_train").get("shuffle", True)
        if self.penalty_fraction != 1 and shuffled is False:
            check.add(
                f"{type(self).__name__}(penalty_fraction={self.penalty_fraction!r}) takes the "
                "penalty from the first rows of each training batch, a random subset only when "
                "the batches are shuffled: with iterator_train__shuffle=False the same samples "
                "would carry it at every epoch. Shuffle the batches, or use penalty_fraction=1."
            )
        if getattr(self, "compile", False) and self.grad_norm == "exact" and self.beta != 0:
            # torch.compile's backward cannot itself be differentiated.
            check.add(
                f"{type(self).__name__}(compile=True) cannot train the gradient-norm term with "
                "grad_norm='exact': torch.compile does not support double backward. Use "
                "grad_norm='finite_difference' (first-order only), or compile=False."
            )

    def _prepare_fit(self, X: np.ndarray) -> None:
        super()._prepare_fit(X)
        relative = FD_STEPS[self.precision] if self.fd_step == "auto" else self.fd_step
        self.fd_step_size_ = fd_step_size(X, relative)

    def on_train_begin(self, net, X=None, y=None, **kwargs) -> None:
        """Warn when ``grad_norm="finite_difference"`` meets kinked activations.

        A :class:`~ebmclassifier.exceptions.FiniteDifferenceWarning` at every ``fit`` and
        ``partial_fit`` whose network has activations with a kink
        (:func:`~ebmclassifier.energy.nonsmooth_activations`), unless ``beta=0``.
        """
        super().on_train_begin(net, X=X, y=y, **kwargs)
        if self.grad_norm != "finite_difference" or self.beta == 0:
            return
        kinked = nonsmooth_activations(self.module_)
        if kinked:
            warnings.warn(
                f"grad_norm='finite_difference' is inaccurate on this network: its "
                f"{', '.join(kinked)} activation(s) have kinks, and a finite difference across "
                "a kink is not the derivative (how far its gradient strays: the NG-EBM user "
                "guide, 'Not on ReLU-family networks'). Use grad_norm='exact', or a smooth "
                "activation (e.g. WideResNet's module__activation='silu').",
                FiniteDifferenceWarning,
                stacklevel=2,
            )

    def compute_loss(self, X, y, training, sample_weight=None):
        """The NG-EBM loss of one batch (see the class docstring for the equation).

        ``gamma * CE + beta * mean_i ||dE/dx (x_i)||_2`` (plus the energy variance when
        ``energy_var_weight > 0``). With ``beta=0`` no input gradient is taken. In training,
        the loss of step ``train_steps_``: with ``penalty_every=k`` the penalty at weight
        ``k * beta`` when ``train_steps_ % k == 0`` and none otherwise, over the rows of
        ``penalty_fraction`` (:func:`~ebmclassifier.energy.penalty_rows`).

        Parameters
        ----------
        X : Tensor of shape ``(n, *input_shape)``, float32, on ``self.device_``
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        training : bool
            ``True`` builds the graph of the gradient-norm term for its parameter gradient
            (double backprop, or the finite difference); ``False`` (validation) only needs
            its value, and takes the whole objective (every row, at weight ``beta``).
        sample_weight : Tensor of shape (n,) or None, default=None
            Weights of the batch's samples: the cross-entropy, the gradient norms and the
            energy variance become weighted means (:func:`~ebmclassifier.losses.ngebm_loss`).

        Returns
        -------
        loss : scalar Tensor
        logits : Tensor of shape (n, n_classes)

        Examples
        --------
        The loss is the weighted sum of the cross-entropy and the mean gradient norm
        (on ``X, y = make_blobs(40, n_features=4, centers=3, random_state=0)``):

        >>> from ebmclassifier import NGEBMClassifier
        >>> from ebmclassifier.energy import energy_grad_norm
        >>> clf = NGEBMClassifier(beta=0.3, max_epochs=1, module__hidden_sizes=(8,),
        ...                       random_state=0).fit(X, y)
        >>> Xt = torch.tensor(X[:8], dtype=torch.float32, device=clf.device_)
        >>> yt = torch.tensor(y[:8], device=clf.device_)
        >>> loss, logits = clf.compute_loss(Xt, yt, training=True)
        >>> norms, _, _ = energy_grad_norm(clf.module_, Xt)
        >>> expected = 0.7 * clf.classification_loss(logits, yt) + 0.3 * norms.mean()
        >>> bool(torch.isclose(loss, expected)), loss.requires_grad
        (True, True)
        """
        every = self.penalty_every if training else 1
        due = self.train_steps_ % every == 0
        return ngebm_loss(
            self.module_,
            X,
            y,
            beta=self.beta * every if due else 0.0,  # between penalty steps: the CE alone
            gamma=1.0 - self.beta if self.gamma is None else self.gamma,
            energy_var_weight=self.energy_var_weight,
            grad_norm=self.grad_norm,
            step=self.fd_step_size_,
            create_graph=training,
            sample_weight=sample_weight,
            penalty_fraction=self.penalty_fraction if training else 1.0,
            **self._classification_term(),
        )

    # ------------------------------------------------------------------ the step count

    def initialize(self):
        """skorch's ``initialize``; a new network starts counting its steps at 0."""
        super().initialize()
        self.train_steps_ = 0
        return self

    def on_batch_end(self, net, batch=None, training=None, **kwargs) -> None:
        """Count a training step (``train_steps_``), after its loss was computed."""
        super().on_batch_end(net, batch=batch, training=training, **kwargs)
        if training:
            self.train_steps_ += 1

    def _own_training_state(self) -> dict:
        return {"train_steps": self.train_steps_}

    def _load_own_training_state(self, state: dict) -> None:
        steps = state.get("train_steps", 0)  # a file from before the count: 0
        if not is_int(steps) or steps < 0:
            raise ValueError(
                f"The training state's step count must be an int >= 0. Got {steps!r}: the "
                "file was not written by this library's save or Checkpoint."
            )
        self.train_steps_ = int(steps)
