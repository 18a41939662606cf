"""JEMClassifier: the Joint Energy Model, with the JEM++ options and a divergence policy."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from ._divergence import Divergence, Rollback, diagnose_step
from ._estimator.base import EBMClassifierBase
from ._estimator.parameter_docs import PARAMETER_DOCS
from ._utils.data import split_weights
from ._utils.device import available_memory
from ._utils.docstrings import fill_docstring
from ._utils.modes import eval_mode
from ._utils.parameters import ParamChecker
from ._utils.streamed import CHUNK_ELEMENTS, StreamedDataset
from ._utils.threads import threads_for
from ._utils.validation import check_known_labels
from .continual._mixin import CONTINUAL_ATTRIBUTES, RESERVOIR_ATTRIBUTES, ClassIncrementalMixin
from .energy import energy, joint_energy
from .losses import jem_loss
from .sampling import (
    GaussianStart,
    ReplayBuffer,
    UniformStart,
    informative_start,
    informative_start_in_chunks,
)
from .sampling.langevin import SAMPLERS, run_sampler

__all__ = ["JEMClassifier"]

# The registered buffers of GaussianStart, which are its constructor's arguments too.
GAUSSIAN_START_STATE = ("means", "factors", "stds", "log_priors", "low", "high")


@fill_docstring(PARAMETER_DOCS)
class JEMClassifier(ClassIncrementalMixin, EBMClassifierBase):
    """Classifier trained as a Joint Energy Model of p(x, y) (Grathwohl et al., 2020).

    The logits ``f(x)`` define ``p(y|x) = softmax(f(x))`` and an energy-based model of the
    inputs, ``p(x) ∝ exp(-E(x))`` with ``E(x) = -logsumexp_y f(x)[y]`` ([1]_, eq. 5). One batch
    costs ([1]_, eq. 2 and 4)

        L = CE(f(x), y) + px_weight * (mean_i E(x_i) - mean_j E(x~_j)),

    where the ``x~_j`` are drawn from the model by Langevin dynamics started from a persistent
    replay buffer: ``x <- x - sgld_step_size * dE/dx + sgld_noise * N(0, I)``, ``sgld_steps``
    times. The second term pushes the energy of the data down and that of the model's own
    samples up (the gradient of the maximum-likelihood term ``-log p(x)``).

    JEM training is known to diverge: the contrastive term is unbounded below, and when the
    sampler falls behind, the energies of the samples run away. Every step is checked (a
    non-finite loss, ``|E| > max_energy``, or samples far outside the input range). With
    ``on_divergence="recover"`` the network, the optimizer and the buffer are rolled back to the
    last good snapshot (taken at the start and after each epoch whose end state passes a health
    probe; the last three are kept, and an older one is used when the newest fails three times
    in a row), the buffer is re-initialised, the SGLD step is halved (and the learning rate
    too when the weights, not the chains, ran away after training had moved on from the
    snapshot), the event is recorded in ``history`` under ``"divergences"``, and the step is
    retried. ``"raise"`` stops with a :class:`~ebmclassifier.DivergenceError`.

    Parameters
    ----------
    {module}
    sgld_steps : int, default=20
        Langevin steps per training step.
    sgld_step_size : float, default=1.0
        Step on the energy gradient.
    sgld_noise : float, default=0.01
        Standard deviation of the noise of each Langevin step.
    buffer_size : int, default=10000
        Number of persistent chains in the replay buffer.
    reinit_freq : float, default=0.05
        Fraction of each draw from the buffer restarted from the buffer's start distribution.
    px_weight : float, default=1.0
        Weight of the generative term. ``0`` is plain cross-entropy training (no sampling).
    sampler : {"sgld", "proximal"}, default="sgld"
        ``"proximal"`` is JEM++'s proximal SGLD ([2]_): each gradient coordinate is clipped to
        ``[-sgld_clip, sgld_clip]`` and the samples are clamped to the input range learned in
        ``fit``. Its noise is ``sgld_noise`` too; set it to 0 for JEM++'s noiseless variant.
    sgld_clip : float, default=0.01
        Gradient clip of the proximal sampler, as a fraction of each feature's input range
        (so one step moves a coordinate by at most ``sgld_step_size * sgld_clip * range``).
    buffer_init : {"informative", "uniform"}, default="informative"
        Start of the chains: JEM++'s class-conditional Gaussians fitted to the training data
        ([2]_), or uniform noise over the per-feature input range as in JEM ([1]_). The uniform
        start trains poorly on standardized data, where rare features span tens of units:
        the chains start far from the data, 20 steps of SGLD do not bring them near it, and
        the network spends its updates raising the energy of those easy, far-away points
        instead of classifying (the accuracies are in :doc:`/user_guide/jem`, "JEM++
        options").
    informative_covariance : {"diag", "lowrank"}, default="diag"
        Covariance of the informative start; ``"lowrank"`` adds the top
        ``informative_rank`` principal directions of each class (affordable for images).
    informative_rank : int, default=10
    on_divergence : {"recover", "raise"}, default="recover"
        What to do when a training step diverges (see above).
    max_energy : float, default=1e4
        A step whose data or sample energies exceed this in absolute value counts as diverged.
    class_incremental, negatives, replay_per_class, generated_per_class, generated_steps
        Class-incremental learning, as in :class:`~ebmclassifier.NGEBMClassifier`; the
        contrastive energy term is unchanged. A new class's Gaussian of the informative chain
        start is the mean of the old classes' ones (no data is kept for it).
    ood_method : {"energy", "max_softmax", "approx_mass"}, default="energy"
        The default method of :meth:`score_ood` and :meth:`score_samples`.
    {criterion}
    {training}
    {class_weight}
    {engine}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    {class_prior}
    module_ : torch.nn.Module
    replay_buffer_ : ReplayBuffer
        The persistent chains (an ``nn.Module``: moves, pickles, resets with the net).
    sgld_step_size_ : float
        The SGLD step in use; lower than ``sgld_step_size`` after recoveries.
    n_divergences_ : int
        How many divergences were recovered from, over all fits of this estimator's weights.
    history_ : skorch.History
        Per-epoch losses; an epoch with recoveries lists them under ``"divergences"``.

    Notes
    -----
    The validation loss (with a ``train_split``) is the cross-entropy alone: the value of the
    contrastive term estimates nothing (the log partition function is unknown). Sample and
    class weights weigh the cross-entropy and the data's energy, not the SGLD samples' (see
    :meth:`compute_loss`).

    References
    ----------
    .. [1] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and
       Swersky, K. "Your Classifier is Secretly an Energy Based Model and You Should Treat it
       Like One". ICLR 2020.
    .. [2] Yang, X. and Ji, S. "JEM++: Improved Techniques for Training JEM". ICCV 2021.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from ebmclassifier import JEMClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = JEMClassifier(max_epochs=2, sgld_steps=5, buffer_size=200, random_state=0)
    >>> clf = clf.fit(X[:300] / 16, y[:300])
    >>> clf.sample(4, y=[0, 1, 2, 3]).shape  # JEM is generative: draw x ~ p(x|y)
    (4, 64)
    """

    _saved_attributes = (
        *EBMClassifierBase._saved_attributes,
        "sgld_step_size_",
        "n_divergences_",
        *CONTINUAL_ATTRIBUTES,
    )
    _call_start_attributes = (*EBMClassifierBase._call_start_attributes, *RESERVOIR_ATTRIBUTES)

    def __init__(
        self,
        module=None,
        *,
        sgld_steps: int = 20,
        sgld_step_size: float = 1.0,
        sgld_noise: float = 0.01,
        buffer_size: int = 10000,
        reinit_freq: float = 0.05,
        px_weight: float = 1.0,
        sampler: str = "sgld",
        sgld_clip: float = 0.01,
        buffer_init: str = "informative",
        informative_covariance: str = "diag",
        informative_rank: int = 10,
        on_divergence: str = "recover",
        max_energy: float = 1e4,
        class_incremental: bool = False,
        negatives: str | int = "auto",
        replay_per_class: str | int = "auto",
        generated_per_class: str | int = "auto",
        generated_steps: int = 40,
        ood_method: str = "energy",
        **kwargs,
    ) -> None:
        super().__init__(module, ood_method=ood_method, **kwargs)
        self.sgld_steps = sgld_steps
        self.sgld_step_size = sgld_step_size
        self.sgld_noise = sgld_noise
        self.buffer_size = buffer_size
        self.reinit_freq = reinit_freq
        self.px_weight = px_weight
        self.sampler = sampler
        self.sgld_clip = sgld_clip
        self.buffer_init = buffer_init
        self.informative_covariance = informative_covariance
        self.informative_rank = informative_rank
        self.on_divergence = on_divergence
        self.max_energy = max_energy
        self.class_incremental = class_incremental
        self.negatives = negatives
        self.replay_per_class = replay_per_class
        self.generated_per_class = generated_per_class
        self.generated_steps = generated_steps

    # ------------------------------------------------------------------ parameters

    def _has_energy_term(self) -> bool:
        """Whether the loss has an energy term besides the classification: ``px_weight > 0``."""
        return self.px_weight > 0

    def _validate_own_params(self, check: ParamChecker) -> None:
        super()._validate_own_params(check)
        check.integer("sgld_steps", 0)
        check.real("sgld_step_size", 0.0)
        check.real("sgld_noise", 0.0)
        check.integer("buffer_size", 1)
        check.real("reinit_freq", 0.0, 1.0)
        check.real("px_weight", 0.0)
        check.choice("sampler", SAMPLERS)
        check.real("sgld_clip", 0.0, low_open=True)
        check.choice("buffer_init", ("uniform", "informative"))
        check.choice("informative_covariance", ("diag", "lowrank"))
        check.integer("informative_rank", 1)
        check.choice("on_divergence", ("recover", "raise"))
        check.real("max_energy", 0.0, low_open=True)

    def _prepare_fit(self, X) -> None:
        super()._prepare_fit(X)
        self._check_buffer_memory()
        informative = self.buffer_init == "informative"
        if (
            informative
            and self.informative_covariance == "lowrank"
            and not isinstance(X, np.ndarray)
        ):
            raise ValueError(
                "JEMClassifier(informative_covariance='lowrank') fits principal directions to "
                "the whole training set at once, which input read in chunks (a Dataset, a "
                "memmap, uint8 images) does not allow: use informative_covariance='diag' (the "
                "default) or buffer_init='uniform', or pass a float32 array."
            )

    def _check_buffer_memory(self) -> None:
        """Refuse a replay buffer larger than half the memory available on ``device_``.

        The buffer holds ``buffer_size`` float32 samples of the input's shape on the device;
        the other half is left for the network, its gradients and the sampler's batches.
        """
        n_bytes = 4 * self.buffer_size * int(np.prod(self.input_shape_))
        available = available_memory(self.device_)
        if available is not None and n_bytes > available / 2:
            check = ParamChecker(self)
            check.satisfies(
                "buffer_size",
                False,
                f"small enough for its replay buffer to fit in memory: {self.buffer_size} "
                f"samples of shape {self.input_shape_} take {n_bytes / 2**30:.3g} GiB of "
                f"float32, more than half of the {available / 2**30:.3g} GiB available on "
                f"{self.device_} (JEM uses 10000)",
            )
            check.raise_if_any()

    # ------------------------------------------------------------------ modules

    def initialize_module(self):
        """Build the network, a replay buffer and the SGLD step, fresh for a new fit.

        With ``buffer_init="uniform"`` the buffer holds ``buffer_size`` chains of uniform noise
        over the input range. The informative start needs the labels, which
        :meth:`on_train_begin` receives: until then the buffer is a one-chain placeholder.
        """
        super().initialize_module()
        # informative: a one-chain placeholder until on_train_begin fits the start on y
        size = 1 if self.buffer_init == "informative" else self.buffer_size
        if size > 1:  # before allocating: also for load, whose file says buffer_size
            self._check_buffer_memory()
        start = UniformStart(self.input_min_, self.input_max_)
        self.replay_buffer_ = ReplayBuffer(start, size).to(self.device_)
        self.sgld_step_size_ = float(self.sgld_step_size)
        self.n_divergences_ = 0
        return self

    def on_train_begin(self, net, X=None, y=None, **kwargs) -> None:
        """Fit the informative start to the training data; start the fit's roll-back policy.

        With ``buffer_init="informative"`` the placeholder buffer of :meth:`initialize_module`
        is replaced by chains drawn from class-conditional Gaussians fitted to ``(X, y)``, the
        samples with a positive weight when the fit has weights (a buffer that already has that
        start, in :meth:`partial_fit`, is kept). Divergences roll back to this fit's snapshots,
        never to a previous fit's.
        """
        super().on_train_begin(net, X=X, y=y, **kwargs)
        if self.buffer_init == "informative" and not isinstance(
            self.replay_buffer_.start, GaussianStart
        ):
            start = self._informative_start(X, y)
            self.replay_buffer_ = ReplayBuffer(
                start, self.buffer_size, generator=self._generator("buffer", start.means.device)
            ).to(self.device_)
        # the diagonal of the input box of the divergence check, fixed for the fit: read once
        self._box_diagonal_ = float((self.input_max_ - self.input_min_).norm())

    def _informative_start(self, X, y: torch.Tensor) -> GaussianStart:
        """JEM++'s start fitted to the training set ``X`` (skorch's: a tensor, with weights
        a dict) and its labels, from the samples of positive weight.

        A float32 tensor gives :func:`~ebmclassifier.sampling.informative_start`; data kept
        in their own dtype (``uint8`` images on the device, a memmap or a ``Dataset`` read on
        the host) give :func:`~ebmclassifier.sampling.informative_start_in_chunks`, without a
        float32 copy.
        """
        X, weights = split_weights(X)
        n_classes = len(self.classes_)
        if isinstance(X, StreamedDataset):
            return informative_start_in_chunks(X.labelled_chunks(), n_classes)
        if weights:
            positive = weights["sample_weight"] > 0
            X, y = X[positive], y[positive]
        if X.dtype != torch.float32:
            rows = max(1, CHUNK_ELEMENTS // max(1, X[0].numel()))
            chunks = ((X[i : i + rows], y[i : i + rows]) for i in range(0, len(X), rows))
            return informative_start_in_chunks(chunks, n_classes)
        return informative_start(
            X, y, n_classes, covariance=self.informative_covariance, rank=self.informative_rank
        )

    def _load_module_states(self, states: dict[str, dict]) -> None:
        """Rebuild a buffer with an informative start for the saved state, then load it all."""
        buffer = states.get("replay_buffer_", {})
        if "start.means" in buffer:  # a GaussianStart, which initialize_module cannot build
            start = GaussianStart(
                **{name: buffer[f"start.{name}"] for name in GAUSSIAN_START_STATE},
                sample_shape=self.input_shape_,
            )
            self.replay_buffer_ = ReplayBuffer(start, len(buffer["samples"])).to(self.device_)
        super()._load_module_states(states)

    def _accept_new_classes(self, y, classes) -> tuple[bool, np.ndarray | None]:
        """Class-incremental learning's growth of ``classes_``; the informative start grows
        a Gaussian per new class, the old ones' mean."""
        incremental, old_rows = super()._accept_new_classes(y, classes)
        if old_rows is not None:
            self._grow_chain_start(old_rows, len(self.classes_))
        return incremental, old_rows

    def _grow_chain_start(self, old_rows: np.ndarray, n_classes: int) -> None:
        """Give the informative start a Gaussian per new class: the old ones' mean."""
        start = self.replay_buffer_.start
        if not isinstance(start, GaussianStart):
            return
        rows = torch.as_tensor(old_rows, device=start.means.device)
        for name in ("means", "factors", "stds", "log_priors"):
            old = getattr(start, name)
            grown = old.mean(0, keepdim=True).expand(n_classes, *old.shape[1:]).clone()
            grown[rows] = old
            setattr(start, name, grown)
        start.log_priors = start.log_priors - start.log_priors.logsumexp(0)

    # ------------------------------------------------------------------ divergences

    def _capabilities(self) -> list:
        """The engine's capabilities and the divergence roll-back (:class:`Rollback`)."""
        return [*super()._capabilities(), ("divergence_rollback", Rollback())]

    def _rollback(self) -> Rollback:
        return self._capability(Rollback)

    def train_step(self, batch, **fit_params):
        """skorch's optimizer step on ``batch``, rolled back and retried when it diverges.

        With ``on_divergence="recover"`` a diverged step restores the last snapshot, halves
        the SGLD step (and the learning rate when the weights ran away) and is retried, up to
        30 times in a row; with ``"raise"`` it raises :class:`~ebmclassifier.DivergenceError`
        (:meth:`Rollback.retried`).
        """
        return self._rollback().retried(self, partial(super().train_step, batch, **fit_params))

    def handle_divergence(self, loss: torch.Tensor) -> None:
        """Hand a non-finite loss to the ``on_divergence`` policy of :meth:`train_step`.

        :meth:`compute_loss` checks every step first; this only catches a non-finite loss
        that slipped past it. Instead of raising :class:`~ebmclassifier.DivergenceError` at
        once, as the other estimators do, it notes the divergence, which :meth:`train_step`
        turns into a roll-back (``"recover"``) or the error (``"raise"``) once the step is over.

        Parameters
        ----------
        loss : scalar Tensor
            The non-finite training loss.

        Returns
        -------
        None

        Examples
        --------
        >>> from ebmclassifier import JEMClassifier
        >>> clf = JEMClassifier(max_epochs=1, sgld_steps=5, buffer_size=50,
        ...                     module__hidden_sizes=(8,), random_state=0).fit(X, y)
        >>> clf.handle_divergence(torch.tensor(float("nan"))) is None  # noted, not raised
        True
        """
        self._rollback().note(Divergence("non-finite loss", "model"))

    # ------------------------------------------------------------------ the loss

    def _sample(
        self, x0: torch.Tensor, energy_fn, n_steps: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Run the chosen sampler from ``x0`` for ``n_steps`` steps, module in eval mode; its
        noise from ``generator`` (torch's global generator without one)."""
        with eval_mode(self.module_):
            return run_sampler(
                self.sampler,
                energy_fn,
                x0,
                n_steps=n_steps,
                step_size=self.sgld_step_size_,
                noise=self.sgld_noise,
                low=self.input_min_,
                high=self.input_max_,
                clip_fraction=self.sgld_clip,
                compile_kwargs=self.get_params_for("compile") if self.compile else None,
                generator=generator,
            )

    def _energy_fn(self, y: torch.Tensor | None = None):
        if y is None:
            return lambda x: energy(self.module_(x))
        return lambda x: joint_energy(self.module_(x), y)

    def compute_loss(self, X, y, training, sample_weight=None):
        """The JEM loss of one batch: ``CE + px_weight * (mean E(x) - mean E(x~))``.

        In training, ``len(X)`` chains are drawn from the replay buffer, moved by
        ``sgld_steps`` steps of the sampler, and written back; the step is checked for
        divergence before the buffer is updated, and a diverged step returns its loss
        without a graph (no gradient, so the optimizer leaves the weights alone) for
        :meth:`train_step` to roll back. Validation (``training=False``) and ``px_weight=0``
        compute the cross-entropy alone (:func:`~ebmclassifier.losses.jem_loss`).

        With ``sample_weight`` the cross-entropy and the data's mean energy are weighted means;
        the samples' mean energy stays the plain mean over the chains (samples are not data
        points), and one chain is drawn per sample of positive weight (none, and no sampling,
        for a batch without weight), so that a weight of 0 drops a sample.

        Parameters
        ----------
        X : Tensor of shape ``(n, *input_shape)``, float32, on ``self.device_``
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        training : bool
            ``False`` during validation: no sampling.
        sample_weight : Tensor of shape (n,) or None, default=None
            Weights of the batch's samples.

        Returns
        -------
        loss : scalar Tensor
        logits : Tensor of shape (n, n_classes)
            The logits of ``X`` (not of the samples).

        Examples
        --------
        >>> from ebmclassifier import JEMClassifier
        >>> clf = JEMClassifier(max_epochs=1, sgld_steps=5, buffer_size=50,
        ...                     module__hidden_sizes=(8,), random_state=0).fit(X, y)
        >>> Xt = torch.tensor(X, dtype=torch.float32, device=clf.device_)
        >>> yt = torch.tensor(y, device=clf.device_)  # encoded labels: y is 0, 1, 2
        >>> loss, logits = clf.compute_loss(Xt, yt, training=False)  # no sampling
        >>> bool(torch.isclose(loss, clf.classification_loss(logits, yt)))
        True
        >>> chains = clf.replay_buffer_.samples.clone()
        >>> loss, logits = clf.compute_loss(Xt, yt, training=True)
        >>> tuple(logits.shape), bool((clf.replay_buffer_.samples != chains).any())
        ((40, 3), True)
        """
        n_chains = len(X) if sample_weight is None else int((sample_weight > 0).sum())
        if not training or self.px_weight == 0 or n_chains == 0:
            logits = self.module_(X)
            loss = self.classification_loss(logits, y, sample_weight)
            if training and not torch.isfinite(loss):
                return self._rollback().diverged(
                    Divergence("non-finite loss", "model"), loss, logits
                )
            return loss, logits
        generator = self._generator("sampler")  # the buffer's draws and SGLD's noise
        x0, indices = self.replay_buffer_.draw(n_chains, self.reinit_freq, generator)
        samples = self._sample(x0, self._energy_fn(), self.sgld_steps, generator)
        loss, logits, e_data, e_samples = jem_loss(
            self.module_,
            X,
            y,
            samples,
            px_weight=self.px_weight,
            sample_weight=sample_weight,
            **self._classification_term(),
        )
        divergence = diagnose_step(
            loss,
            e_data,
            e_samples,
            samples,
            self.input_min_,
            self.input_max_,
            self.max_energy,
            diagonal=self._box_diagonal_,
        )
        if divergence is not None:
            return self._rollback().diverged(divergence, loss, logits)
        self.replay_buffer_.update(indices, samples)
        self._rollback().note(None, probe=X)  # for the health check before the next snapshot
        return loss, logits

    # ------------------------------------------------------------------ sampling for users

    def sample(self, n: int, y=None, n_steps: int | None = None) -> np.ndarray:
        """Draw inputs from the model by Langevin dynamics.

        Chains start from the replay buffer (the model's own persistent samples) and run
        ``n_steps`` more steps of the training sampler on ``E(x)``, or, when ``y`` is given, on
        ``E(x, y) = -f(x)[y]``, which samples ``p(x|y)``.

        Parameters
        ----------
        n : int
            Number of samples.
        y : label or array-like of shape (n,), optional
            Class labels (as in ``classes_``) to sample for: one per sample, or one label for
            every sample (``sample(4, y=3)``).
        n_steps : int, optional
            Langevin steps; defaults to ``5 * sgld_steps`` (at least 20).

        Returns
        -------
        ndarray of shape ``(n, *input_shape)``
            float32.

        Examples
        --------
        With the proximal sampler the samples stay in the input range learned in ``fit``:

        >>> from ebmclassifier import JEMClassifier
        >>> clf = JEMClassifier(sampler="proximal", max_epochs=1, sgld_steps=5, buffer_size=50,
        ...                     module__hidden_sizes=(8,), random_state=0).fit(X, y)
        >>> x = clf.sample(6, y=[0, 0, 1, 1, 2, 2], n_steps=10)
        >>> x.shape, x.dtype
        ((6, 4), dtype('float32'))
        >>> bool(((x >= X.min(axis=0) - 1e-4) & (x <= X.max(axis=0) + 1e-4)).all())
        True
        >>> clf.sample(4, y=2, n_steps=10).shape  # one label for every sample
        (4, 4)
        >>> clf.sample(2, y=[0, 7])
        Traceback (most recent call last):
        ...
        ValueError: y contains labels [7] that are not in classes_ [0, 1, 2].
        """
        check_is_fitted(self)
        check = ParamChecker.of({"n": n, "n_steps": n_steps})
        check.integer("n", 1)
        check.integer("n_steps", 0, allow_none=True)
        check.raise_if_any()
        if n_steps is None:
            n_steps = max(20, 5 * self.sgld_steps)
        labels = None
        if y is not None:
            y = check_known_labels(self, y, n)
            labels = torch.as_tensor(self.label_encoder_.transform(y), device=self.device_)
        if labels is not None and isinstance(self.replay_buffer_.start, GaussianStart):
            x0 = self.replay_buffer_.start.sample(int(n), y=labels)  # the classes' Gaussians
        else:
            x0, _ = self.replay_buffer_.draw(int(n), 0.0)
        # the SGLD forward passes as inference runs them (the estimator's precision)
        with threads_for(self.n_threads, self.module_, x0, len(x0)):
            samples = self._as_inference(self._sample)(x0, self._energy_fn(labels), int(n_steps))
        return samples.cpu().numpy()
