"""Noticing and undoing a diverged SGLD training run (used by JEMClassifier).

JEM's contrastive loss ``mean E(x_data) - mean E(x_sampled)`` is unbounded below: when the
sampler falls behind the model, the energies of the samples run off, the loss heads to minus
infinity and the weights follow. The tools: a health check on one training step
(:func:`diagnose_step`) and on a state worth keeping (:func:`state_is_healthy`), a snapshot of
everything that must be rolled back together (the module, the optimizer's moments, the replay
buffer), :class:`RollbackPolicy`, which decides what to roll back to and how much to slow
down after a divergence, and :class:`Rollback`, the skorch callback through which a
``JEMClassifier`` holds the policy for each fit (its part of a training state included).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch
from skorch.callbacks import Callback
from torch import Tensor, nn

from .energy import energy
from .exceptions import DivergenceError

__all__ = [
    "Divergence",
    "Rollback",
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


class Rollback(Callback):
    """JEM's roll-back, a skorch callback: a diverged step is undone and retried, or raises.

    ``JEMClassifier`` holds one (added in ``get_default_callbacks``). Each fit gets a fresh
    :class:`RollbackPolicy` with a snapshot of the state it starts from (``on_train_begin``, once
    the estimator has built its replay buffer), and a snapshot of each epoch's end state that
    passes a health probe (``on_epoch_end``); the estimator's ``train_step`` runs each step
    through :meth:`retried`, which restores the last snapshot and retries a diverged step, or
    raises, as ``on_divergence`` says; ``on_train_end`` undoes a last step that broke the
    weights. A roll-back restores the network, the optimizer and the replay buffer together
    (``module_``, ``optimizer_``, ``replay_buffer_``) and halves the estimator's
    ``sgld_step_size_``.

    Its part of a training state (:meth:`state_dict`) holds the SGLD step, the count of
    divergences and, saved during a fit, the policy with its snapshots: a fit resumed from it
    rolls back as the interrupted fit would have.

    Attributes
    ----------
    policy_ : RollbackPolicy or None
        The running (or last) fit's policy.
    """

    def __init__(self) -> None:
        self.policy_: RollbackPolicy | None = None
        self.fitting_ = False
        self._resumed: RollbackPolicy | None = None

    @staticmethod
    def _objects(net) -> dict:
        """What a roll-back restores together, by :meth:`RollbackPolicy.recover`'s names."""
        return {"module": net.module_, "optimizer": net.optimizer_, "buffer": net.replay_buffer_}

    def on_train_begin(self, net, **kwargs) -> None:
        """A fresh policy for this fit, with a snapshot of the state it starts from: a
        divergence rolls back to this fit's snapshots, never to a previous fit's."""
        self.fitting_ = True
        self.policy_ = RollbackPolicy()
        self.policy_.take_snapshot(**self._objects(net))

    def on_epoch_begin(self, net, **kwargs) -> None:
        """In the first epoch of a resumed fit, the interrupted fit's policy takes over."""
        if self._resumed is not None:
            self.policy_, self._resumed = self._resumed, None

    def on_epoch_end(self, net, **kwargs) -> None:
        """Snapshot the network, optimizer and buffer if they pass a health probe."""
        buffer = net.replay_buffer_
        generator = net._generator("sampler", buffer.samples.device)
        if state_is_healthy(net.module_, buffer, net.max_energy, self.policy_.probe, generator):
            self.policy_.take_snapshot(**self._objects(net))

    def on_train_end(self, net, **kwargs) -> None:
        """Undo a last step that broke the weights, and warn about the fit's recoveries.

        Every step is checked before its optimizer update, so only the last update of a fit
        can leave non-finite weights unnoticed: they are rolled back to the last snapshot.
        """
        self.fitting_ = False
        if not parameters_finite(net.module_):
            self._roll_back_or_raise(
                net, Divergence("non-finite weights after the last step", "model")
            )
        recoveries = self.policy_.recoveries
        self.policy_.end_fit()
        if recoveries:
            warnings.warn(
                f"{type(net).__name__} recovered from {recoveries} divergence(s) "
                "during fit (see history[:, 'divergences']); the SGLD step is now "
                f"{net.sgld_step_size_:g}.",
                RuntimeWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------------ the estimator's step

    def note(self, divergence: Divergence | None, probe: Tensor | None = None) -> None:
        """How the step went (:meth:`RollbackPolicy.note`): diverged, or healthy on ``probe``."""
        self.policy_.note(divergence, probe)

    def diverged(self, divergence: Divergence, loss: Tensor, logits: Tensor):
        """Note ``divergence``; the loss and logits without a graph: no gradient, no update."""
        self.policy_.note(divergence)
        return loss.detach(), logits.detach()

    def retried(self, net, step):
        """``step()`` (skorch's optimizer step on a batch), rolled back and retried while it
        diverges, up to the policy's ``max_retries`` times in a row; or the error, with
        ``on_divergence="raise"``."""
        for _ in range(self.policy_.max_retries):
            result = step()
            divergence = self.policy_.step_done()
            if divergence is None:
                return result
            self._roll_back_or_raise(net, divergence)
        raise DivergenceError(
            f"{type(net).__name__} kept diverging after {self.policy_.max_retries} "
            f"roll-backs in a row in epoch {len(net.history)}, each with a halved SGLD step "
            f"(now {net.sgld_step_size_:g}). Check the input for extreme values, lower lr"
            f"{untried_settings(net, ', or use ')}."
        )

    def _roll_back_or_raise(self, net, divergence: Divergence) -> None:
        """Raise, or roll back, halve the SGLD step and record the event in ``history``."""
        epoch, batch = len(net.history), len(net.history[-1]["batches"])
        if net.on_divergence == "raise":
            raise DivergenceError(
                f"{type(net).__name__} diverged in epoch {epoch}, batch {batch}: "
                f"{divergence.reason}. Lower sgld_step_size (now {net.sgld_step_size_!r}) or lr "
                f"(now {net.lr!r}){untried_settings(net, ', try ')}, or pass "
                "on_divergence='recover' to roll back and continue automatically."
            )
        generator = net._generator("sampler", net.replay_buffer_.samples.device)
        self.policy_.recover(divergence, generator=generator, **self._objects(net))
        net.sgld_step_size_ *= 0.5
        net.n_divergences_ += 1
        event = {
            "epoch": epoch,
            "batch": batch,
            "reason": divergence.reason,
            "sgld_step_size": net.sgld_step_size_,
            "lr": net.optimizer_.param_groups[0]["lr"],
        }
        net.history.record("divergences", net.history[-1].get("divergences", []) + [event])
        if net.verbose:
            print(f"Divergence in epoch {epoch}, batch {batch} ({divergence.reason}): rolled back.")

    # ------------------------------------------------------------------ the training state

    def state_dict(self, net) -> dict:
        """Its part of a training state: the SGLD step, the count of divergences, and during a
        fit the policy with its snapshots (a snapshot tensor equal to the live one given as
        it, so that a file stores it once)."""
        policy = self.policy_ if self.fitting_ else None
        return {
            "sgld_step_size": net.sgld_step_size_,
            "n_divergences": net.n_divergences_,
            "rollback": None if policy is None else policy.state_dict(**self._objects(net)),
        }

    def load_state_dict(self, net, state: dict, *, in_fit: bool) -> None:
        """Restore :meth:`state_dict`'s part; ``in_fit``: it was saved during a fit, whose
        policy takes over when the next epoch begins."""
        net.sgld_step_size_ = state["sgld_step_size"]
        net.n_divergences_ = state["n_divergences"]
        if in_fit and state["rollback"] is not None:  # the interrupted call's policy
            self._resumed = RollbackPolicy.from_state_dict(state["rollback"])
