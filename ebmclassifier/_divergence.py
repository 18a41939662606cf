"""Noticing and undoing a diverged SGLD training run (used by JEMClassifier).

JEM's contrastive loss ``mean E(x_data) - mean E(x_sampled)`` is unbounded below: when the
sampler falls behind the model, the energies of the samples run off, the loss heads to minus
infinity and the weights follow. The tools: a health check on one training step
(:func:`diagnose_step`) and on a state worth keeping (:func:`state_is_healthy`), a snapshot of
everything that must be rolled back together (the module, the optimizer's moments, the replay
buffer), and :class:`RollbackPolicy`, which decides what to roll back to and how much to slow
down after a divergence.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn

from .energy import energy
from .exceptions import DivergenceError

__all__ = [
    "Divergence",
    "RollbackMixin",
    "RollbackPolicy",
    "Snapshot",
    "diagnose_step",
    "parameters_finite",
    "state_is_healthy",
]


#: The settings that steady JEM's sampler, suggested when it diverges (docs/user_guide/jem.md).
STABLE_SGLD = {"sampler": "proximal", "buffer_init": "informative"}


def untried_settings(estimator, before: str) -> str:
    """``before`` and those of :data:`STABLE_SGLD` that ``estimator`` does not use yet, joined
    by "or"; "" when it uses them all (a message must not suggest what is already on)."""
    untried = [f"{k}={v!r}" for k, v in STABLE_SGLD.items() if getattr(estimator, k) != v]
    return before + " or ".join(untried) if untried else ""


class Divergence(NamedTuple):
    """A diverged step: why, and whether the ``"model"`` or the ``"sampler"`` went wrong."""

    reason: str
    culprit: str


def diagnose_step(
    loss: Tensor,
    e_data: Tensor,
    e_samples: Tensor,
    samples: Tensor,
    low: Tensor,
    high: Tensor,
    max_energy: float,
    max_excursion: float = 10.0,
    *,
    diagonal: float | None = None,
) -> Divergence | None:
    """Say why a JEM training step looks diverged, or return None if it looks healthy.

    The culprit is the ``"model"`` when its energies of the *data* are broken (the weights ran
    away: a smaller learning rate is needed), else the ``"sampler"`` when the samples or their
    energies are (the chains ran away: a smaller SGLD step is needed). Every statistic is
    computed on the device and read back at once: one wait for the device per step.

    Parameters
    ----------
    loss : Tensor, scalar
    e_data, e_samples : Tensor of shape (n,) and (m,)
        Energies of the data and of the SGLD samples of this step.
    samples : Tensor of shape (m, ...)
        The SGLD samples of this step.
    low, high : Tensor of the sample shape
        Per-feature input range learned in ``fit``.
    max_energy : float
        Largest plausible ``|E(x)|``: a classifier's logits of this size mean that the
        contrastive term is running away.
    max_excursion : float, default=10.0
        A sample farther outside the input box than this many box diagonals is a runaway chain.
    diagonal : float or None, default=None
        ``||high - low||``, the box diagonal, for a caller that computes it once per fit;
        ``None`` computes it here.

    Returns
    -------
    Divergence or None

    Examples
    --------
    >>> import torch
    >>> lo, hi, zeros = torch.zeros(2), torch.ones(2), torch.zeros(3)
    >>> diagnose_step(torch.tensor(1.0), zeros, zeros, torch.zeros(3, 2), lo, hi, 1e3)
    >>> diagnose_step(torch.tensor(1.0), zeros, zeros, torch.full((3, 2), 50.0), lo, hi, 1e3)
    Divergence(reason='SGLD sample 69.3 outside the input range', culprit='sampler')
    """
    e_data, e_samples, samples = e_data.detach(), e_samples.detach(), samples.detach()
    outside = (samples - samples.clamp(low, high)).flatten(1).norm(dim=1)
    statistics = [
        torch.isfinite(e_data).all(),
        _abs_max(e_data),
        torch.isfinite(samples).all(),
        _abs_max(outside),
        torch.isfinite(e_samples).all(),
        _abs_max(e_samples),
        torch.isfinite(loss.detach()).all(),
    ]
    if diagonal is None:
        statistics.append((high - low).norm())
    values = torch.stack(statistics).tolist()  # the one read from the device
    if diagonal is None:
        diagonal = values.pop()
    data_finite, data_max, samples_finite, worst, e_samples_finite, e_samples_max, loss_finite = (
        values
    )
    # In this order: a later statistic is meaningless once an earlier one is broken.
    if not data_finite:
        return Divergence("non-finite energy of the data", "model")
    if data_max > max_energy:
        return Divergence(f"|energy| of the data {data_max:.3g}", "model")
    if not samples_finite:
        return Divergence("non-finite SGLD sample", "sampler")
    if worst > max_excursion * max(diagonal, 1e-12):
        return Divergence(f"SGLD sample {worst:.3g} outside the input range", "sampler")
    if not e_samples_finite:
        return Divergence("non-finite energy of the samples", "sampler")
    if e_samples_max > max_energy:
        return Divergence(f"|energy| of the samples {e_samples_max:.3g}", "sampler")
    if not loss_finite:
        return Divergence("non-finite loss", "model")
    return None


def _abs_max(values: Tensor) -> Tensor:
    """``max |values|``, 0 for an empty tensor (its size is known without the device)."""
    return values.abs().max() if values.numel() else values.new_zeros(())


def parameters_finite(module: nn.Module) -> bool:
    """True when every parameter of ``module`` is finite."""
    return all(bool(torch.isfinite(p).all()) for p in module.parameters())


class Snapshot:
    """A copy of the state of several modules and optimizers, to roll back to.

    Tensors are cloned on their own device, so taking and restoring a snapshot costs one copy
    of the weights, the optimizer's state and the replay buffer.

    Parameters
    ----------
    **objects : nn.Module or torch.optim.Optimizer
        What to save, by name.

    Examples
    --------
    >>> import torch
    >>> lin = torch.nn.Linear(2, 1)
    >>> snap = Snapshot(module=lin)
    >>> with torch.no_grad():
    ...     _ = lin.weight.fill_(float("nan"))
    >>> snap.restore(module=lin)
    >>> bool(torch.isfinite(lin.weight).all())
    True
    """

    def __init__(self, **objects):
        self.states = {name: copy.deepcopy(obj.state_dict()) for name, obj in objects.items()}

    def restore(self, **objects) -> None:
        """Load the saved states into ``objects`` (the same names as when taken)."""
        for name, obj in objects.items():
            # a deep copy again, so the snapshot survives a second roll-back
            obj.load_state_dict(copy.deepcopy(self.states[name]))

    @classmethod
    def of_states(cls, states: dict) -> Snapshot:
        """The snapshot whose states are ``states`` (as :attr:`states` holds them)."""
        snapshot = cls.__new__(cls)
        snapshot.states = states
        return snapshot


def state_is_healthy(
    module: nn.Module,
    buffer: nn.Module,
    max_energy: float,
    probe: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> bool:
    """Whether the weights and the chains are worth a snapshot.

    Each training step is checked before its optimizer update, so the update of the last step
    was not: the weights are probed on chains of the buffer, on fresh starts (a roll-back
    restarts every chain) and on ``probe`` (the last training batch) before they are trusted.

    Parameters
    ----------
    module : nn.Module
        Maps a batch to logits.
    buffer : ReplayBuffer
        The persistent chains, with their ``start`` distribution.
    max_energy : float
        Largest plausible ``|E(x)|``.
    probe : Tensor of shape (n, ...) or None, default=None
        More inputs to evaluate, e.g. the last training batch.
    generator : torch.Generator or None, default=None
        On the buffer's device: which chains are probed, and the fresh starts.

    Returns
    -------
    bool
        True when the parameters, the chains and every probed energy are finite and the
        energies within ``max_energy``.
    """
    if not parameters_finite(module):
        return False
    if not bool(torch.isfinite(buffer.samples).all()):
        return False
    n = min(64, buffer.buffer_size)
    probes = [buffer.draw(n, 0.0, generator)[0], buffer.start.sample(n, generator=generator)]
    if probe is not None:
        probes.append(probe)
    with torch.no_grad():
        e = energy(module(torch.cat(probes)))
    return bool(torch.isfinite(e).all()) and float(e.abs().max()) <= max_energy


@dataclass
class _Target:
    """A snapshot to roll back to, and what its roll-backs have cost so far."""

    snapshot: Snapshot
    restores: int = 0
    lr_halvings: int = 0  # applied to the learning rate after each restore


class RollbackPolicy:
    """JEM's answer to a diverged training step: roll back, restart the chains, slow down.

    One policy serves one fit. It keeps the last ``kept`` snapshots of the module, the
    optimizer and the replay buffer (taken at the start of the fit and after each healthy
    epoch). :meth:`recover` restores the newest (an older one when the newest has failed
    ``failures_before_older`` times in a row), restarts every chain, and halves the learning
    rate, once more per roll-back, when the weights rather than the chains ran away after
    training had moved on from the snapshot. The estimator halves the SGLD step and retries
    the batch, up to ``max_retries`` times in a row.

    Parameters
    ----------
    max_retries : int, default=30
        Roll-backs in a row on one batch before giving up: each halves the SGLD step, so 30
        cover a step 1e9 times too large.
    kept : int, default=3
        Snapshots kept.
    failures_before_older : int, default=3
        Failures in a row after which the newest snapshot is dropped for an older one.

    Attributes
    ----------
    recoveries : int
        Roll-backs done in this fit.
    probe : Tensor or None
        The batch of the last healthy step, for :func:`state_is_healthy`.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.sampling import ReplayBuffer, UniformStart
    >>> module = torch.nn.Linear(2, 3)
    >>> optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    >>> buffer = ReplayBuffer(UniformStart(torch.zeros(2), torch.ones(2)), buffer_size=4)
    >>> policy = RollbackPolicy()
    >>> policy.take_snapshot(module=module, optimizer=optimizer, buffer=buffer)
    >>> with torch.no_grad():
    ...     _ = module.weight.fill_(float("nan"))
    >>> policy.note(Divergence("non-finite energy of the data", "model"))
    >>> policy.step_done()  # the step's divergence, handed over once
    Divergence(reason='non-finite energy of the data', culprit='model')
    >>> policy.recover(Divergence("non-finite energy of the data", "model"),
    ...                module=module, optimizer=optimizer, buffer=buffer)
    >>> bool(torch.isfinite(module.weight).all()), policy.recoveries
    (True, 1)
    """

    def __init__(self, max_retries: int = 30, kept: int = 3, failures_before_older: int = 3):
        self.max_retries = max_retries
        self.kept = kept
        self.failures_before_older = failures_before_older
        self.recoveries = 0
        self.probe: Tensor | None = None
        self._targets: list[_Target] = []
        self._pending: Divergence | None = None
        self._steps_since_restore = 0
        self._failures_in_a_row = 0

    def take_snapshot(self, *, module: nn.Module, optimizer, buffer: nn.Module) -> None:
        """Keep the current state as the newest roll-back target."""
        snapshot = Snapshot(module=module, optimizer=optimizer, buffer=buffer)
        self._targets = self._targets[-(self.kept - 1) :] + [_Target(snapshot)]
        self._steps_since_restore = 0
        self._failures_in_a_row = 0

    def note(self, divergence: Divergence | None, probe: Tensor | None = None) -> None:
        """Record how the step went: diverged (the first reason counts), or healthy."""
        if divergence is None:
            if probe is not None:
                self.probe = probe.detach()
        elif self._pending is None:
            self._pending = divergence

    def step_done(self) -> Divergence | None:
        """End of a step: its divergence, if it had one (else the step counts as good)."""
        divergence, self._pending = self._pending, None
        if divergence is None:
            self._steps_since_restore += 1
            self._failures_in_a_row = 0
        return divergence

    def recover(self, divergence: Divergence, *, module, optimizer, buffer, generator=None) -> None:
        """Roll back to a snapshot, restart every chain (drawn from ``generator``), and set
        the learning rate."""
        self._failures_in_a_row += 1
        if self._failures_in_a_row % self.failures_before_older == 0 and len(self._targets) > 1:
            # The newest snapshot fails at once, again and again: it is itself bad.
            self._targets.pop()
        target = self._targets[-1]
        target.snapshot.restore(module=module, optimizer=optimizer, buffer=buffer)
        buffer.reinitialize(generator)
        # With no optimizer step since the last roll-back the weights were good: the sampler
        # alone ran away. Otherwise, when the model's energies broke or training ran away
        # from this snapshot before, the learning rate must come down too. Restoring the
        # optimizer reset its lr to the snapshot's, so every halving since is applied.
        target.restores += 1
        if self._steps_since_restore and (divergence.culprit == "model" or target.restores > 1):
            target.lr_halvings += 1
        self._steps_since_restore = 0
        for group in optimizer.param_groups:
            group["lr"] *= 0.5**target.lr_halvings
        self.recoveries += 1

    def end_fit(self) -> None:
        """Drop the snapshots and the probe: a copy of the weights is not worth pickling."""
        self._targets, self.probe, self._pending = [], None, None

    _COUNTS = ("max_retries", "kept", "failures_before_older", "recoveries")
    _STEPS = ("_steps_since_restore", "_failures_in_a_row")

    def state_dict(self, **live) -> dict:
        """Everything the policy holds, so that a resumed fit rolls back as this one would.

        ``live``: the objects the snapshots were taken of (``module=...``, ...); a snapshot
        tensor equal to theirs is given as theirs, so that a file stores it once.
        """
        current = {name: obj.state_dict() for name, obj in live.items()}
        targets = [
            {
                "states": _shared(target.snapshot.states, current),
                "restores": target.restores,
                "lr_halvings": target.lr_halvings,
            }
            for target in self._targets
        ]
        pending = None if self._pending is None else list(self._pending)
        counts = {name: getattr(self, name) for name in self._COUNTS + self._STEPS}
        return {**counts, "probe": self.probe, "pending": pending, "targets": targets}

    @classmethod
    def from_state_dict(cls, state: dict) -> RollbackPolicy:
        """The policy of :meth:`state_dict`'s ``state``."""
        policy = cls(*(state[name] for name in cls._COUNTS[:3]))
        for name in cls._COUNTS[3:] + cls._STEPS:
            setattr(policy, name, state[name])
        policy.probe = state["probe"]
        policy._pending = None if state["pending"] is None else Divergence(*state["pending"])
        policy._targets = [
            _Target(Snapshot.of_states(t["states"]), t["restores"], t["lr_halvings"])
            for t in state["targets"]
        ]
        return policy


def _shared(saved, current):
    """``saved`` with every tensor equal to its counterpart in ``current`` replaced by it."""
    if isinstance(saved, dict) and isinstance(current, dict):
        return {key: _shared(value, current.get(key)) for key, value in saved.items()}
    if isinstance(saved, list | tuple) and isinstance(current, list | tuple):
        if len(saved) == len(current):
            return type(saved)(_shared(a, b) for a, b in zip(saved, current, strict=True))
        return saved
    if isinstance(saved, Tensor) and isinstance(current, Tensor):
        same = saved.dtype == current.dtype and saved.device == current.device
        return current if same and torch.equal(saved, current) else saved
    return saved


class RollbackMixin:
    """JEM's roll-back: a diverged step is undone and retried, or raises, as the policy says.

    For an estimator with ``module_``, ``optimizer_``, ``replay_buffer_``, ``sgld_step_size_``,
    ``n_divergences_``, ``max_energy`` and ``on_divergence``: :meth:`_start_rollback` gives
    each fit a fresh :class:`RollbackPolicy` (called once the fit's state is built, in
    ``on_train_begin``), :meth:`train_step` retries a diverged step from the last snapshot,
    ``on_epoch_end`` snapshots a healthy state, ``on_train_end`` undoes a last step that broke
    the weights. The policy is part of a training state
    (:mod:`ebmclassifier._estimator.resume`): a fit resumed from a state saved during a fit
    keeps the policy that the interrupted fit had, its snapshots included, so that a
    divergence after the resumption rolls back as it would have without the interruption.
    """

    def _rollback_objects(self) -> dict:
        """The objects a roll-back restores together, by :meth:`RollbackPolicy.recover`'s
        argument names (``module``, ``optimizer``, ``buffer``)."""
        raise NotImplementedError

    def _start_rollback(self) -> None:
        """A fresh policy for this fit, with a snapshot of the state it starts from: a
        divergence rolls back to this fit's snapshots, never to a previous fit's."""
        self._rollback_ = RollbackPolicy()
        self._take_snapshot()

    def _diverged(self, divergence: Divergence, loss, logits):
        """Tell the policy, and return the loss without a graph: no gradient, no update."""
        self._rollback_.note(divergence)
        return loss.detach(), logits.detach()

    # ------------------------------------------------------------------ divergence policy

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
        self._rollback_.note(Divergence("non-finite loss", "model"))

    def _take_snapshot(self) -> None:
        self._rollback_.take_snapshot(**self._rollback_objects())

    def train_step(self, batch, **fit_params):
        """skorch's optimizer step on ``batch``, rolled back and retried when it diverges.

        With ``on_divergence="recover"`` a diverged step restores the last snapshot, halves
        the SGLD step (and the learning rate when the weights ran away) and is retried, up to
        30 times in a row; with ``"raise"`` it raises :class:`~ebmclassifier.DivergenceError`.
        """
        for _ in range(self._rollback_.max_retries):
            step = super().train_step(batch, **fit_params)
            divergence = self._rollback_.step_done()
            if divergence is None:
                return step
            self._roll_back_or_raise(divergence)
        raise DivergenceError(
            f"{type(self).__name__} kept diverging after {self._rollback_.max_retries} "
            f"roll-backs in a row in epoch {len(self.history)}, each with a halved SGLD step "
            f"(now {self.sgld_step_size_:g}). Check the input for extreme values, lower lr"
            f"{untried_settings(self, ', or use ')}."
        )

    def _roll_back_or_raise(self, divergence: Divergence) -> None:
        """Raise, or roll back, halve the SGLD step and record the event in ``history``."""
        epoch, batch = len(self.history), len(self.history[-1]["batches"])
        if self.on_divergence == "raise":
            raise DivergenceError(
                f"{type(self).__name__} diverged in epoch {epoch}, batch {batch}: "
                f"{divergence.reason}. Lower sgld_step_size (now {self.sgld_step_size_!r}) or lr "
                f"(now {self.lr!r}){untried_settings(self, ', try ')}, or pass "
                "on_divergence='recover' to roll back and continue automatically."
            )
        generator = self._generator("sampler", self.replay_buffer_.samples.device)
        self._rollback_.recover(divergence, generator=generator, **self._rollback_objects())
        self.sgld_step_size_ *= 0.5
        self.n_divergences_ += 1
        event = {
            "epoch": epoch,
            "batch": batch,
            "reason": divergence.reason,
            "sgld_step_size": self.sgld_step_size_,
            "lr": self.optimizer_.param_groups[0]["lr"],
        }
        self.history.record("divergences", self.history[-1].get("divergences", []) + [event])
        if self.verbose:
            print(f"Divergence in epoch {epoch}, batch {batch} ({divergence.reason}): rolled back.")

    def on_epoch_end(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """Snapshot the network, optimizer and buffer if they pass a health probe."""
        super().on_epoch_end(net, dataset_train, dataset_valid, **kwargs)
        module, buffer = self.module_, self.replay_buffer_
        generator = self._generator("sampler", buffer.samples.device)
        if state_is_healthy(module, buffer, self.max_energy, self._rollback_.probe, generator):
            self._take_snapshot()

    def on_train_end(self, net, X=None, y=None, **kwargs) -> None:
        """Undo a last step that broke the weights, and warn about the fit's recoveries.

        Every step is checked before its optimizer update, so only the last update of a fit
        can leave non-finite weights unnoticed: they are rolled back to the last snapshot.
        """
        super().on_train_end(net, X=X, y=y, **kwargs)
        if not parameters_finite(self.module_):
            # the very last step blew the weights up: fall back to the last good state
            self._roll_back_or_raise(Divergence("non-finite weights after the last step", "model"))
        recoveries = self._rollback_.recoveries
        self._rollback_.end_fit()
        if recoveries:
            warnings.warn(
                f"{type(self).__name__} recovered from {recoveries} divergence(s) "
                "during fit (see history[:, 'divergences']); the SGLD step is now "
                f"{self.sgld_step_size_:g}.",
                RuntimeWarning,
                stacklevel=2,
            )

    def _resume_state(self) -> dict:
        policy = getattr(self, "_rollback_", None) if self._fitting else None
        return {
            **super()._resume_state(),
            "sgld_step_size": self.sgld_step_size_,
            "n_divergences": self.n_divergences_,
            "rollback": None if policy is None else policy.state_dict(**self._rollback_objects()),
        }

    def _load_resume_state(self, state: dict, *, in_fit: bool) -> None:
        super()._load_resume_state(state, in_fit=in_fit)
        self.sgld_step_size_ = state["sgld_step_size"]
        self.n_divergences_ = state["n_divergences"]
        if in_fit and state["rollback"] is not None:  # the interrupted call's policy
            self._resumed_rollback = RollbackPolicy.from_state_dict(state["rollback"])

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs) -> None:
        """In the first epoch of a resumed fit, the interrupted fit's policy takes over.

        After ``on_train_begin``, which gives every fit a fresh policy.
        """
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        resumed = self.__dict__.pop("_resumed_rollback", None)
        if resumed is not None:
            self._rollback_ = resumed
