"""The replay buffer of persistent SGLD chains (JEM's PCD training [1]_).

References
----------
.. [1] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You Should
   Treat it Like One", ICLR 2020, Algorithm 1 and section 4.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._utils.parameters import ParamChecker

__all__ = ["ReplayBuffer"]


class ReplayBuffer(nn.Module):
    """Persistent SGLD chains, the replay buffer of JEM's PCD training ([1]_, Algorithm 1).

    The samples (and, for class-conditional sampling, their labels) are registered buffers, so
    the buffer moves with ``.to(device)``, is part of ``state_dict`` and pickles with the model.

    Parameters
    ----------
    start : UniformStart or GaussianStart
        Distribution the chains start from and are re-initialised from; kept as a submodule.
    buffer_size : int, default=10000
        Number of persistent chains.
    n_classes : int, optional
        If given, the buffer is class-conditional: entry i holds label ``i % n_classes`` and
        ``draw(..., y=...)`` returns chains of the asked classes, for sampling p(x|y).
    generator : torch.Generator, optional
        Source of the initial samples.

    References
    ----------
    .. [1] Grathwohl et al., ICLR 2020, Algorithm 1 and section 4.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.sampling import UniformStart
    >>> buf = ReplayBuffer(UniformStart(torch.zeros(2), torch.ones(2)), buffer_size=8)
    >>> x, idx = buf.draw(4, reinit_freq=0.05)
    >>> buf.update(idx, x + 1)
    >>> tuple(buf.samples.shape)
    (8, 2)
    """

    def __init__(
        self,
        start: nn.Module,
        buffer_size: int = 10000,
        n_classes: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        check = ParamChecker.of({"buffer_size": buffer_size, "n_classes": n_classes})
        check.integer("buffer_size", 1)
        check.integer("n_classes", 1, allow_none=True)
        check.raise_if_any()
        if n_classes is not None and buffer_size < n_classes:
            raise ValueError(
                f"A class-conditional buffer needs buffer_size >= n_classes. "
                f"Got buffer_size={buffer_size!r}, n_classes={n_classes!r}."
            )
        self.start = start
        self.buffer_size = buffer_size
        self.n_classes = n_classes
        device = next(start.buffers()).device
        labels = None
        if n_classes is not None:
            labels = torch.arange(buffer_size, device=device) % n_classes
        self.register_buffer("samples", start.sample(buffer_size, y=labels, generator=generator))
        self.register_buffer("labels", labels)

    def reinitialize(self, generator: torch.Generator | None = None) -> None:
        """Restart every chain from the start distribution (after a divergence).

        A class-conditional buffer keeps each entry's class.

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of the new samples, on the buffer's device.

        Returns
        -------
        None
            ``samples`` is overwritten in place.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.sampling import UniformStart
        >>> buf = ReplayBuffer(UniformStart(torch.zeros(2), torch.ones(2)), buffer_size=4)
        >>> buf.update(torch.arange(4), torch.full((4, 2), 100.0))  # chains that ran away
        >>> buf.reinitialize(generator=torch.Generator().manual_seed(0))
        >>> bool(((buf.samples >= 0) & (buf.samples <= 1)).all())  # back in the start's box
        True
        """
        self.samples.copy_(self.start.sample(self.buffer_size, y=self.labels, generator=generator))

    def draw(
        self,
        batch_size: int,
        reinit_freq: float = 0.05,
        generator: torch.Generator | None = None,
        y: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Draw chains uniformly at random, a fraction ``reinit_freq`` of them restarted.

        Parameters
        ----------
        batch_size : int
        reinit_freq : float in [0, 1], default=0.05
            Each drawn chain is independently replaced by a fresh start with this probability.
        generator : torch.Generator, optional
            On the buffer's device.
        y : Tensor of shape (batch_size,), optional
            Classes to draw chains of, in ``0 .. n_classes - 1`` (class-conditional buffers
            only); checked, at the cost of one host sync on a GPU.

        Returns
        -------
        samples : Tensor of shape ``(batch_size, *sample_shape)``
            A copy; write the evolved samples back with :meth:`update`.
        indices : Tensor of shape (batch_size,)
            Positions in the buffer; ``self.labels[indices]`` are their classes if conditional.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.sampling import UniformStart
        >>> start = UniformStart(torch.zeros(2), torch.ones(2))
        >>> buf = ReplayBuffer(start, buffer_size=9, n_classes=3)
        >>> x, idx = buf.draw(4, reinit_freq=0.0)  # no restart: copies of stored chains
        >>> torch.equal(x, buf.samples[idx])
        True
        >>> y = torch.tensor([2, 0, 0, 1])
        >>> x, idx = buf.draw(4, reinit_freq=1.0, y=y)  # chains of the asked classes, restarted
        >>> torch.equal(buf.labels[idx], y), torch.equal(x, buf.samples[idx])
        (True, False)
        """
        check = ParamChecker.of({"batch_size": batch_size, "reinit_freq": reinit_freq})
        check.integer("batch_size", 1)
        check.real("reinit_freq", 0.0, 1.0)
        check.raise_if_any()
        device = self.samples.device
        if y is None:
            indices = torch.randint(
                0, self.buffer_size, (batch_size,), generator=generator, device=device
            )
        else:
            if self.n_classes is None:
                raise ValueError("draw(y=...) needs a buffer built with n_classes.")
            y = torch.as_tensor(y, device=device).long()
            if y.shape != (batch_size,):
                raise ValueError(f"y must have shape ({batch_size},). Got {tuple(y.shape)!r}.")
            # one host sync, on this conditional path only (training draws without y)
            outside = (y < 0) | (y >= self.n_classes)
            if bool(outside.any()):
                raise ValueError(
                    f"y must hold classes in 0..{self.n_classes - 1} (the buffer's n_classes is "
                    f"{self.n_classes}). Got {y[outside].unique().tolist()!r}; encode the labels "
                    "first (a LabelEncoder's transform)."
                )
            # class c occupies positions c, c + K, c + 2K, ...; pick one uniformly
            k = self.n_classes
            count = (self.buffer_size - y + k - 1) // k
            u = torch.rand(batch_size, generator=generator, device=device)
            indices = y + k * torch.minimum((u * count).long(), count - 1)
        samples = self.samples[indices].clone()
        reinit = torch.rand(batch_size, generator=generator, device=device) < reinit_freq
        n_reinit = int(reinit.sum())
        if n_reinit:
            labels = None if self.labels is None else self.labels[indices][reinit]
            fresh = self.start.sample(n_reinit, y=labels, generator=generator)
            samples[reinit] = fresh.to(samples.dtype)
        return samples, indices

    def update(self, indices: Tensor, samples: Tensor) -> None:
        """Write evolved chains back at ``indices`` (as returned by :meth:`draw`).

        ``draw`` samples indices with replacement, as JEM does; where an index repeats, the
        last of its evolved samples is kept. (Writing all of them at once keeps one of them at
        random: torch's ``index_put_`` with repeated indices, run on several threads or on a
        GPU, made two seeded fits differ.)

        Parameters
        ----------
        indices : Tensor of shape (m,)
            Positions in the buffer, as returned by :meth:`draw`.
        samples : Tensor of shape ``(m, *sample_shape)``
            The evolved chains; detached and cast to the buffer's dtype.

        Returns
        -------
        None
            ``samples`` of the buffer is written in place.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.sampling import UniformStart
        >>> buf = ReplayBuffer(UniformStart(torch.zeros(2), torch.ones(2)), buffer_size=8)
        >>> x, idx = buf.draw(3, reinit_freq=0.0)
        >>> evolved = (x + 1).requires_grad_()  # as after Langevin steps
        >>> buf.update(idx, evolved)
        >>> torch.equal(buf.samples[idx], x + 1), buf.samples.requires_grad
        (True, False)
        """
        order = torch.arange(len(indices), device=indices.device)
        last = torch.full((self.buffer_size,), -1, dtype=order.dtype, device=indices.device)
        last.scatter_reduce_(0, indices, order, reduce="amax")  # a maximum: any order gives it
        keep = last[indices] == order
        self.samples[indices[keep]] = samples[keep].detach().to(self.samples.dtype)
