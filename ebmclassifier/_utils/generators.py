"""The random draws of a fit: its seed, and generators of its own, never torch's global one.

The fit's seed comes from ``random_state`` (:func:`draw_seed`), and every random draw of a fit
from a generator that the fit owns, seeded from ``(seed, epoch, purpose)``
(:class:`FitGenerators`): the batch order, the augmentations, sampled negatives, SGLD's noise
and the replay buffer's draws, the latent model's Gumbel and score-function samples, the held-
out split of early stopping, and what a call draws before its first epoch (class growth,
generated replay; the class reservoir by its position in the stream). Two fits in two threads of
one process then draw what each draws alone, and the caller's generators are never read or
moved. A run resumed after epoch ``k`` derives the generators of epoch ``k + 1`` from the same
three numbers, so it draws what the uninterrupted run draws.

Two things in torch draw from the process's global generator and take no other:
``nn.Module.reset_parameters`` (the initial weights of any network, the user's too) and
``torch.pca_lowrank``; and a network with random layers (dropout) draws from it inside its
forward pass. Those run under :func:`global_rng`: a lock that the library's fits share, torch's
global generator forked (``torch.random.fork_rng``: saved, and restored on leaving) and seeded
for the moment. Two fits in threads then build the same networks as alone, and the caller
finds its generator as it left it; code of *another* thread that draws from torch's global
generator while a network is being built sees it seeded (the window is the build).
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

__all__ = [
    "GLOBAL_RNG_LOCK",
    "FitGenerators",
    "derived_seed",
    "draw_seed",
    "draws_from_global_rng",
    "global_rng",
    "make_generator",
    "numpy_generator",
    "numpy_streams",
    "seed_global_rng",
]

#: Held while torch's global generator is forked and seeded for the library (re-entrant: a
#: fit that holds it for its epochs builds an informative start under it too).
GLOBAL_RNG_LOCK = threading.RLock()

#: The uses of randomness in a fit; each has a stream of its own (its index is part of the
#: seed). New purposes go at the end, so that the streams of the others stay as they are.
PURPOSES = (
    "shuffle",  # the batch order
    "augment",  # the training batches' augmentation
    "negatives",  # the sampled negatives of negatives=k
    "sampler",  # SGLD's noise, the replay buffer's draws and re-initialisations
    "latent",  # Gumbel noise and score-function samples
    "buffer",  # the chains that start a replay buffer
    "global",  # torch's global generator, for the layers that draw from it (dropout)
    "grow",  # the rows of the output layer that class-incremental learning adds
    "reservoir",  # the class reservoir's Algorithm R (a numpy stream, by the stream's position)
    "generated",  # generated replay's chains
    "split",  # early stopping's held-out split (a numpy RandomState, as skorch's ValidSplit)
)
#: When a generator draws: in an epoch, when a call begins (before its first epoch), or at a
#: position of a stream of calls (the class reservoir's count of samples seen).
PHASES = ("epoch", "call", "position")

#: Layers whose forward pass draws from torch's global generator in training mode.
RANDOM_LAYERS = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
    nn.RReLU,
)


def draw_seed(random_state) -> int:
    """The fit's seed, drawn from ``random_state`` as scikit-learn's ``check_random_state``
    reads it: an int seeds a ``RandomState``, a ``RandomState`` is drawn from, None draws from
    numpy's global generator.

    Parameters
    ----------
    random_state : int, numpy.random.RandomState or None

    Returns
    -------
    int
        In ``[0, 2**31 - 1)``.

    Raises
    ------
    ValueError
        For any other ``random_state``.

    Examples
    --------
    >>> draw_seed(0) == draw_seed(np.random.RandomState(0)) == 209652396
    True
    """
    if random_state is None or random_state is np.random:
        state = np.random  # the global RandomState's randint
    elif isinstance(random_state, numbers.Integral):
        state = np.random.RandomState(random_state)
    elif isinstance(random_state, np.random.RandomState):
        state = random_state
    else:
        raise ValueError(
            f"{random_state!r} cannot be used to seed a numpy.random.RandomState instance"
        )
    return int(state.randint(0, 2**31 - 1))


def derived_seed(seed: int, *key: int) -> int:
    """A 63-bit seed that depends on ``seed`` and ``key`` alone (numpy's ``SeedSequence``).

    Parameters
    ----------
    seed : int
    *key : int
        Non-negative integers, e.g. the epoch and the index of a purpose.

    Returns
    -------
    int

    Examples
    --------
    >>> derived_seed(0, 3, 1) == derived_seed(0, 3, 1) != derived_seed(0, 3, 2)
    True
    """
    state = np.random.SeedSequence([int(seed), *map(int, key)]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A new ``torch.Generator`` on ``device``, seeded with ``seed``.

    Examples
    --------
    >>> a, b = make_generator(7), make_generator(7)
    >>> bool(torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b)))
    True
    """
    return torch.Generator(device=torch.device(device)).manual_seed(int(seed))


def numpy_generator(random_state: int | np.random.Generator | None) -> np.random.Generator:
    """A numpy generator for a function of the core that draws outside a fit (a bootstrap):
    an int or ``None`` seeds a new one, a generator is used as given (and moved).

    Examples
    --------
    >>> a, b = numpy_generator(3), numpy_generator(3)
    >>> bool(a.random() == b.random())
    True
    """
    return np.random.default_rng(random_state)


def numpy_streams(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` independent numpy generators seeded from ``rng`` (one draw of ``n`` 63-bit seeds;
    ``Generator.spawn`` needs numpy 1.25, the package supports 1.24)."""
    return [np.random.default_rng(seed) for seed in rng.integers(2**63, size=n)]


class FitGenerators:
    """The generators of a fit's call: one per ``(purpose, device)``, reseeded at each epoch.

    Each ``torch.Generator`` is made when first asked for and kept for the call, so that what
    holds one (the training iterator, which skorch builds once per call) draws from the
    current epoch's stream; :meth:`begin` reseeds them all from ``(seed, epoch, phase,
    purpose)``, so that an epoch's draws depend on those numbers alone. The batch order keeps
    the seed ``seed + epoch`` that seeded torch's global generator for it before, so that a fit
    without other draws shuffles as it did.

    Parameters
    ----------
    seed : int
        The fit's seed (``seed_``, or the one drawn for an unseeded call).
    epoch : int
        The epoch the call starts at (``len(history)``).

    Examples
    --------
    >>> generators = FitGenerators(seed=0, epoch=0)  # a call's draws before its first epoch
    >>> g = generators("shuffle", "cpu")
    >>> generators.begin(epoch=1)
    >>> g is generators("shuffle", "cpu"), g.initial_seed()
    (True, 1)
    >>> again = FitGenerators(seed=0, epoch=0)  # a resumed run derives the same streams
    >>> again.begin(epoch=1)
    >>> generators("sampler", "cpu").initial_seed() == again("sampler", "cpu").initial_seed()
    True
    """

    def __init__(self, seed: int, epoch: int) -> None:
        self.seed = int(seed)
        self.epoch = int(epoch)
        self.phase = "call"
        self._made: dict[tuple[str, torch.device], torch.Generator] = {}

    def begin(self, epoch: int) -> None:
        """Start epoch ``epoch``: every generator reseeded for it."""
        self.epoch, self.phase = int(epoch), "epoch"
        for (purpose, _), generator in self._made.items():
            generator.manual_seed(self.seed_for(purpose))

    def seed_for(self, purpose: str) -> int:
        """The seed of ``purpose``'s generator now.

        Two purposes keep the seeds they had before the fit's generators: the batch order
        ``seed + epoch``, the held-out split of early stopping the fit's seed itself.
        """
        if purpose == "shuffle" and self.phase == "epoch":
            return self.seed + self.epoch
        if purpose == "split":
            return self.seed
        key = (self.epoch, PHASES.index(self.phase), PURPOSES.index(purpose))
        return derived_seed(self.seed, *key)

    def random_state(self, purpose: str) -> np.random.RandomState:
        """A numpy ``RandomState`` of ``purpose`` now, for what scikit-learn draws (skorch's
        ``ValidSplit``): early stopping's held-out split draws from ``RandomState(seed)``,
        as an int seed made it draw before."""
        return np.random.RandomState(self.seed_for(purpose) % 2**32)

    def at_position(self, purpose: str, position: int) -> np.random.Generator:
        """A numpy generator of ``purpose`` seeded from ``(seed, position)``: for a stream of
        calls whose draw depends on how far the stream has come, not on the epoch (the class
        reservoir, by the samples it has seen), so that a resumed stream draws what an
        uninterrupted one does."""
        key = (int(position), PHASES.index("position"), PURPOSES.index(purpose))
        return np.random.default_rng(derived_seed(self.seed, *key))

    def __call__(self, purpose: str, device: torch.device | str) -> torch.Generator:
        """The generator of ``purpose`` on ``device`` (the same object all call long)."""
        key = (purpose, torch.device(device))
        if key not in self._made:
            self._made[key] = make_generator(self.seed_for(purpose), key[1])
        return self._made[key]


@contextmanager
def global_rng(seed: int | None, device: torch.device | str = "cpu") -> Iterator[None]:
    """Torch's global generator, forked and (with a ``seed``) seeded, under the library's lock.

    The CPU generator and, for a CUDA ``device``, that device's are saved on entering and
    restored on leaving (also when the block raises), so that the caller's draws go on as if
    nothing had run; :data:`GLOBAL_RNG_LOCK` keeps two of the library's fits from seeding it at
    once. For what takes no generator: ``nn.Module.reset_parameters``, ``torch.pca_lowrank``,
    dropout.

    Parameters
    ----------
    seed : int or None
        Seeds the forked generators; None leaves them as they were (forked only).
    device : torch.device or str, default="cpu"

    Examples
    --------
    >>> before = torch.get_rng_state()
    >>> with global_rng(0):
    ...     weights = torch.nn.Linear(2, 1).weight.detach().clone()
    >>> bool(torch.equal(torch.get_rng_state(), before))
    True
    >>> with global_rng(0):
    ...     bool(torch.equal(torch.nn.Linear(2, 1).weight, weights))
    True
    """
    device = torch.device(device)
    cuda = [device.index or 0] if device.type == "cuda" else []
    with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=cuda):
        if seed is not None:
            seed_global_rng(seed, device)
        yield


def seed_global_rng(seed: int, device: torch.device) -> None:
    """Seed torch's global generators of the CPU and of ``device`` (inside :func:`global_rng`)."""
    torch.random.default_generator.manual_seed(int(seed))
    if device.type == "cuda":
        torch.cuda.default_generators[device.index or 0].manual_seed(int(seed))


def draws_from_global_rng(module: nn.Module) -> bool:
    """Whether ``module`` has a layer that draws from torch's global generator in training.

    Dropout (every kind, with ``p > 0``) and ``RReLU``. A network that draws by calling
    torch's random functions in its own ``forward`` cannot be told from the outside.

    Examples
    --------
    >>> draws_from_global_rng(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)))
    True
    >>> draws_from_global_rng(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0)))
    False
    """
    for layer in module.modules():
        if isinstance(layer, nn.RReLU):
            return True
        if isinstance(layer, RANDOM_LAYERS) and getattr(layer, "p", 0) > 0:
            return True
    return False
