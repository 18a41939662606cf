"""Start distributions of the chains: uniform noise (JEM [1]_), the informative start (JEM++ [2]_).

They start the persistent chains of the replay buffer and restart them (re-initialisation).

References
----------
.. [1] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and Swersky, K.
   "Your Classifier is Secretly an Energy Based Model and You Should Treat it Like One", ICLR 2020
   (SGLD, eq. 11; persistent contrastive divergence with a replay buffer, Algorithm 1).
.. [2] Yang, X. and Ji, S. "JEM++: Improved Techniques for Training JEM", ICCV 2021 (proximal SGLD,
   section 3.1; informative initialisation, section 3.3).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from .._utils.generators import make_generator
from .._utils.parameters import ParamChecker

__all__ = [
    "GaussianStart",
    "UniformStart",
    "informative_start",
    "informative_start_in_chunks",
    "uniform_start",
]


class UniformStart(nn.Module):
    """Uniform noise over a per-feature box ``[low, high]``, the start of JEM [1]_.

    Parameters
    ----------
    low, high : Tensor of shape sample_shape
        Per-feature bounds, e.g. the input range learned in ``fit``.

    References
    ----------
    .. [1] Grathwohl et al., ICLR 2020, section 4 ("re-initialised from uniform noise").

    Examples
    --------
    >>> import torch
    >>> start = UniformStart(torch.zeros(2), torch.tensor([1.0, 10.0]))
    >>> x = start.sample(1000, generator=torch.Generator().manual_seed(0))
    >>> x.shape, bool(((x >= start.low) & (x <= start.high)).all())
    (torch.Size([1000, 2]), True)
    >>> (x.mean(0) / start.high).round(decimals=1)  # each feature centred in its range
    tensor([0.5000, 0.5000])
    """

    def __init__(self, low: Tensor, high: Tensor):
        super().__init__()
        low = torch.as_tensor(low, dtype=torch.float32)
        high = torch.as_tensor(high, dtype=torch.float32)
        # a tensor on the "meta" device (built to count its bytes) holds no values to compare
        unordered = low.device.type != "meta" and bool(torch.any(low > high))
        if low.shape != high.shape or unordered:
            raise ValueError(
                "low and high must have the same shape with low <= high. "
                f"Got shapes {tuple(low.shape)!r} and {tuple(high.shape)!r}."
            )
        self.register_buffer("low", low.clone())
        self.register_buffer("high", high.clone())

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample, that of ``low`` and ``high``."""
        return tuple(self.low.shape)

    def sample(
        self, n: int, y: Tensor | None = None, generator: torch.Generator | None = None
    ) -> Tensor:
        """Draw ``n`` samples uniformly from the box ``[low, high]``.

        Parameters
        ----------
        n : int
            Number of samples.
        y : Tensor of shape (n,), optional
            Ignored: the start is unconditional (the argument makes it interchangeable with
            :class:`GaussianStart`).
        generator : torch.Generator, optional
            Source of the noise, on the device of ``low``.

        Returns
        -------
        Tensor of shape ``(n, *sample_shape)``, float32

        Examples
        --------
        >>> import torch
        >>> start = UniformStart(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 5.0]))
        >>> a = start.sample(3, generator=torch.Generator().manual_seed(0))
        >>> b = start.sample(3, torch.tensor([0, 1, 2]), torch.Generator().manual_seed(0))
        >>> a.shape, torch.equal(a, b)  # the same seed, the same draw: y plays no part
        (torch.Size([3, 2]), True)
        """
        u = torch.rand((n, *self.sample_shape), generator=generator, device=self.low.device)
        return self.low + (self.high - self.low) * u


class GaussianStart(nn.Module):
    """Class-conditional Gaussians ``N(mu_y, W_y W_y^T + diag(s_y^2))``, the start of JEM++ [1]_.

    ``covariance="diag"`` is the special case of rank 0; the low-rank factor keeps the memory at
    ``n_classes * d * (rank + 2)`` numbers instead of ``n_classes * d^2``. Build it from data with
    :func:`informative_start`.

    Parameters
    ----------
    means : Tensor of shape (n_classes, d)
    factors : Tensor of shape (n_classes, d, rank)
        Low-rank factors W_y; rank may be 0.
    stds : Tensor of shape (n_classes, d)
        Per-feature residual standard deviations s_y.
    log_priors : Tensor of shape (n_classes,)
        Class log-frequencies, used when no class is asked for.
    sample_shape : tuple of int
        Shape of one sample (product d), e.g. (C, H, W) for images.
    low, high : Tensor of shape sample_shape, optional
        If given, samples are clamped to this box (the input range).

    References
    ----------
    .. [1] Yang and Ji, "JEM++", ICCV 2021, section 3.3 (informative initialisation).

    Examples
    --------
    Two classes in two dimensions, diagonal covariances (rank 0):

    >>> import torch
    >>> means = torch.tensor([[0.0, 0.0], [5.0, 5.0]])
    >>> start = GaussianStart(means, factors=torch.zeros(2, 2, 0), stds=torch.full((2, 2), 0.1),
    ...                       log_priors=torch.log(torch.tensor([0.5, 0.5])), sample_shape=(2,))
    >>> y = torch.tensor([0, 1, 1, 0])
    >>> x = start.sample(4, y=y, generator=torch.Generator().manual_seed(0))
    >>> x.shape, bool(((x - means[y]).abs() < 0.5).all())
    (torch.Size([4, 2]), True)
    """

    def __init__(self, means, factors, stds, log_priors, sample_shape, low=None, high=None):
        super().__init__()
        self._sample_shape = tuple(int(s) for s in sample_shape)
        d = math.prod(self._sample_shape)
        if means.ndim != 2 or means.shape[1] != d or stds.shape != means.shape:
            raise ValueError(
                f"means and stds must have shape (n_classes, {d}). "
                f"Got {tuple(means.shape)!r} and {tuple(stds.shape)!r}."
            )
        inf = torch.full(self._sample_shape, math.inf)
        self.register_buffer("means", means.float().clone())
        self.register_buffer("factors", factors.float().clone())
        self.register_buffer("stds", stds.float().clone())
        self.register_buffer("log_priors", log_priors.float().clone())
        self.register_buffer("low", (-inf if low is None else torch.as_tensor(low)).float())
        self.register_buffer("high", (inf if high is None else torch.as_tensor(high)).float())

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample, that of the data the Gaussians were fitted on."""
        return self._sample_shape

    def sample(
        self, n: int, y: Tensor | None = None, generator: torch.Generator | None = None
    ) -> Tensor:
        """Draw ``n`` samples; from class ``y[i]`` for sample i, else a class by its prior.

        Parameters
        ----------
        n : int
            Number of samples.
        y : Tensor of shape (n,), optional
            Encoded class of each sample; ``None`` draws the classes from ``exp(log_priors)``.
        generator : torch.Generator, optional
            Source of the classes and the noise, on the device of the means.

        Returns
        -------
        Tensor of shape ``(n, *sample_shape)``, float32
            Clamped to ``[low, high]``.

        Examples
        --------
        Without ``y``, a class by its prior (here 80% and 20%), and samples clamped to the box:

        >>> import torch
        >>> means, priors = torch.tensor([[0.0], [5.0]]), torch.tensor([0.8, 0.2])
        >>> start = GaussianStart(means, torch.zeros(2, 1, 0), torch.ones(2, 1), priors.log(),
        ...                       (1,), low=torch.tensor([-1.0]), high=torch.tensor([6.0]))
        >>> x = start.sample(2000, generator=torch.Generator().manual_seed(0))
        >>> round(float((x > 2.5).float().mean()), 1)  # the share of the second class
        0.2
        >>> float(x.min()), float(x.max())
        (-1.0, 6.0)
        """
        device = self.means.device
        if y is None:
            probs = self.log_priors.exp()
            y = torch.multinomial(probs, n, replacement=True, generator=generator)
        y = torch.as_tensor(y, device=device).long()
        rank = self.factors.shape[2]
        z = torch.randn((n, rank), generator=generator, device=device)
        e = torch.randn((n, self.means.shape[1]), generator=generator, device=device)
        x = self.means[y] + self.stds[y] * e
        if rank:
            x = x + torch.bmm(self.factors[y], z.unsqueeze(2)).squeeze(2)
        x = x.reshape(n, *self._sample_shape)
        return torch.clamp(x, self.low, self.high)


def uniform_start(low: Tensor, high: Tensor) -> UniformStart:
    """Uniform start over the per-feature box ``[low, high]``; see :class:`UniformStart`.

    Parameters
    ----------
    low, high : Tensor of shape sample_shape
        Per-feature bounds, ``low <= high``.

    Returns
    -------
    UniformStart

    Examples
    --------
    >>> import torch
    >>> start = uniform_start(torch.zeros(1, 2, 2), torch.ones(1, 2, 2))
    >>> start.sample_shape, start.sample(3).shape
    ((1, 2, 2), torch.Size([3, 1, 2, 2]))
    """
    return UniformStart(low, high)


def _principal_directions(
    A: Tensor, q: int, generator: torch.Generator | None = None, n_iter: int = 4
) -> tuple[Tensor, Tensor]:
    """The top ``q`` singular values and right singular vectors of ``A`` minus its column mean.

    The randomised range finder with subspace iteration of Halko, Martinsson and Tropp [1]_
    (Algorithm 4.4, then Algorithm 5.1): with ``A_c = A - mean`` and ``Omega`` a ``(d, q)``
    standard normal matrix drawn from ``generator``, ``Q = orth(A_c Omega)``, then ``n_iter``
    times ``Q = orth(A_c orth(A_c^T Q))``; the SVD of the small ``B = Q^T A_c = U S V^T``
    gives ``S`` and ``V``. As ``torch.pca_lowrank``, which draws from torch's global generator.

    Parameters
    ----------
    A : Tensor of shape (n, d)
    q : int
        ``1 <= q <= min(n, d)``.
    generator : torch.Generator or None, default=None
        On ``A``'s device.
    n_iter : int, default=4

    Returns
    -------
    S : Tensor of shape (q,)
    V : Tensor of shape (d, q)

    References
    ----------
    .. [1] Halko, N., Martinsson, P.-G. and Tropp, J. A. "Finding structure with randomness".
       SIAM Review 53(2), 2011.

    Examples
    --------
    >>> import torch
    >>> A = torch.randn(50, 6, generator=torch.Generator().manual_seed(0))
    >>> S, V = _principal_directions(A, 6)
    >>> exact = torch.linalg.svdvals(A - A.mean(0))
    >>> bool(torch.allclose(S, exact, atol=1e-4)), tuple(V.shape)
    (True, (6, 6))
    """
    centred = A - A.mean(0)
    omega = torch.randn(A.shape[1], q, generator=generator, device=A.device, dtype=A.dtype)
    Q = torch.linalg.qr(centred @ omega).Q
    for _ in range(n_iter):
        Q = torch.linalg.qr(centred.T @ Q).Q
        Q = torch.linalg.qr(centred @ Q).Q
    _, S, Vh = torch.linalg.svd(Q.T @ centred, full_matrices=False)
    return S, Vh.T


def informative_start(
    X: Tensor,
    y: Tensor,
    n_classes: int,
    covariance: str = "diag",
    rank: int = 10,
    clamp: bool = True,
    min_std: float = 1e-3,
) -> GaussianStart:
    """Fit the class-conditional Gaussians of JEM++'s informative start to training data.

    For each class c: the mean mu_c, and either per-feature variances (``"diag"``) or the top
    ``rank`` principal directions of the class (:func:`_principal_directions`, with a generator
    of its own seeded with 0) plus a diagonal that keeps each feature's total variance equal to
    its empirical variance (``"lowrank"``).

    Parameters
    ----------
    X : Tensor of shape (n, ...)
        Training inputs.
    y : Tensor of shape (n,)
        Encoded labels in ``0 .. n_classes - 1``.
    n_classes : int
    covariance : {"diag", "lowrank"}, default="diag"
    rank : int, default=10
        Number of principal directions per class for ``"lowrank"`` (capped by the class size
        and the dimension).
    clamp : bool, default=True
        Clamp samples to the per-feature range of ``X``.
    min_std : float, default=1e-3
        Floor on the residual standard deviations, so constant features still get some noise.

    Returns
    -------
    GaussianStart

    References
    ----------
    .. [1] Yang and Ji, "JEM++", ICCV 2021, section 3.3.

    Examples
    --------
    >>> import torch
    >>> X = torch.cat([torch.zeros(50, 3), torch.ones(50, 3)])
    >>> y = torch.cat([torch.zeros(50), torch.ones(50)]).long()
    >>> start = informative_start(X, y, n_classes=2)
    >>> start.sample(4, y=torch.tensor([1, 1, 0, 0])).round()
    tensor([[1., 1., 1.],
            [1., 1., 1.],
            [0., 0., 0.],
            [0., 0., 0.]])
    """
    check = ParamChecker.of({"covariance": covariance, "rank": rank})
    check.satisfies("covariance", covariance in ("diag", "lowrank"), "'diag' or 'lowrank'")
    check.integer("rank", 0)
    check.raise_if_any()
    y = torch.as_tensor(y).long()
    if X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ValueError(
            f"X and y must have the same, non-zero length. Got {X.shape[0]} and {y.shape[0]}."
        )
    sample_shape = tuple(X.shape[1:])
    flat = X.detach().reshape(X.shape[0], -1).float()
    d = flat.shape[1]
    rank = 0 if covariance == "diag" else min(rank, d)
    means = torch.zeros(n_classes, d, device=flat.device)
    variances = torch.ones(n_classes, d, device=flat.device)
    factors = torch.zeros(n_classes, d, rank, device=flat.device)
    counts = torch.bincount(y, minlength=n_classes).float()
    for c in range(n_classes):
        xc = flat[y == c]
        if xc.shape[0] == 0:  # unseen class: fall back to the pooled data
            xc = flat
        means[c] = xc.mean(0)
        var = xc.var(0, unbiased=False)
        variances[c] = var
        q = min(rank, xc.shape[0] - 1)
        if q > 0:
            # principal directions V and singular values S of the centred class data
            s, v = _principal_directions(xc, q, make_generator(0, flat.device))
            w = v * (s / math.sqrt(xc.shape[0]))
            factors[c, :, :q] = w
            # keep each feature's marginal variance: residual = total - low-rank part
            variances[c] = var - (w**2).sum(1)
    low = flat.min(0).values.reshape(sample_shape) if clamp else None
    high = flat.max(0).values.reshape(sample_shape) if clamp else None
    return _gaussian_start(means, factors, variances, counts, sample_shape, low, high, min_std)


def _gaussian_start(means, factors, variances, counts, sample_shape, low, high, min_std):
    """The :class:`GaussianStart` of fitted class moments (residual variances floored)."""
    stds = variances.clamp_min(0).sqrt().clamp_min(min_std)
    log_priors = torch.log(counts.clamp_min(1) / counts.clamp_min(1).sum())
    return GaussianStart(means, factors, stds, log_priors, sample_shape, low, high)


def informative_start_in_chunks(
    chunks: Iterable[tuple[Tensor, Tensor]],
    n_classes: int,
    clamp: bool = True,
    min_std: float = 1e-3,
) -> GaussianStart:
    """:func:`informative_start` with ``covariance="diag"``, from data read chunk by chunk.

    For data that are not one float32 tensor (``uint8`` images, a memmap, a ``Dataset``): the
    class means ``mu_c = S_c / n_c`` and variances ``s_c^2 = Q_c / n_c - mu_c^2`` from the sums
    ``S_c`` and sums of squares ``Q_c`` of each class, added in float64 (exact for integer
    pixels), so no float32 copy of the data is made. A class without samples falls back to the
    pooled data, as in :func:`informative_start`.

    Parameters
    ----------
    chunks : iterable of (Tensor of shape (m, ...), Tensor of shape (m,))
        The training inputs, as float32 or any real dtype, and their encoded labels in
        ``0 .. n_classes - 1``, a chunk at a time (on one device).
    n_classes : int
    clamp : bool, default=True
        Clamp samples to the per-feature range of the data.
    min_std : float, default=1e-3
        Floor on the standard deviations.

    Returns
    -------
    GaussianStart

    References
    ----------
    .. [1] Yang and Ji, "JEM++", ICCV 2021, section 3.3.

    Examples
    --------
    >>> import torch
    >>> X = torch.cat([torch.zeros(50, 3), torch.ones(50, 3)]).to(torch.uint8)
    >>> y = torch.cat([torch.zeros(50), torch.ones(50)]).long()
    >>> start = informative_start_in_chunks([(X[:60], y[:60]), (X[60:], y[60:])], n_classes=2)
    >>> start.sample(2, y=torch.tensor([1, 0])).round()
    tensor([[1., 1., 1.],
            [0., 0., 0.]])
    """
    sums = squares = counts = low = high = None
    sample_shape = None
    for x, y in chunks:
        sample_shape = tuple(x.shape[1:])
        flat = x.reshape(len(x), -1).to(torch.float64)
        if sums is None:
            d = flat.shape[1]
            sums = torch.zeros(n_classes, d, dtype=torch.float64, device=flat.device)
            squares, counts = torch.zeros_like(sums), torch.zeros_like(sums[:, 0])
            low, high = flat.new_full((d,), math.inf), flat.new_full((d,), -math.inf)
        if not len(flat):
            continue
        y = torch.as_tensor(y, device=flat.device).long()
        sums.index_add_(0, y, flat)
        squares.index_add_(0, y, flat * flat)
        counts += torch.bincount(y, minlength=n_classes).to(torch.float64)
        low, high = torch.minimum(low, flat.min(0).values), torch.maximum(high, flat.max(0).values)
    if sums is None or counts.sum() == 0:
        raise ValueError("informative_start_in_chunks needs at least one sample.")
    unseen = counts == 0  # fall back to the pooled data
    sums[unseen], squares[unseen], counts_used = sums.sum(0), squares.sum(0), counts.clone()
    counts_used[unseen] = counts.sum()
    means = sums / counts_used[:, None]
    variances = squares / counts_used[:, None] - means**2
    factors = torch.zeros(n_classes, means.shape[1], 0, device=means.device)
    low = low.float().reshape(sample_shape) if clamp else None
    high = high.float().reshape(sample_shape) if clamp else None
    args = (means.float(), factors, variances.float(), counts.float(), sample_shape)
    return _gaussian_start(*args, low, high, min_std)
