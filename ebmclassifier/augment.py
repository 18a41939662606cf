"""Training-batch augmentations that run on the device, one random draw per sample.

Each augmentation is a small callable on a whole batch tensor, ``augment(x, generator=None)``,
returning a new tensor of the same shape, dtype and device (the input is never modified):

- :class:`RandomCrop` pads the last one (sequences ``(n, C, L)``) or two (images
  ``(n, C, H, W)``) axes and crops back to the original size at a random offset per sample;
- :class:`HorizontalFlip` reverses the last axis of a random subset of the samples;
- :class:`GaussianNoise` adds ``std * N(0, I)`` (any shape, flat features too);
- :class:`Compose` applies several in order; :func:`paper_augmentation` is the NG-EBM and
  JEM papers' recipe (4-pixel reflect-padded crop, flip, noise of standard deviation 0.03).

torchvision's transforms draw one set of parameters per call, so on a batch tensor every
sample would get the same crop and the same flip; these draw per sample, with one tensor
operation for the whole batch, so the batch never leaves the device.

**Randomness and reproducibility.** A call with ``generator=g`` (a
:class:`torch.Generator`) draws from ``g`` alone, so the same seed gives the same output; the
draws happen on ``g``'s device and move to the batch's device, so a CPU generator gives the
same augmentation on any device. Without a generator the draws
come from torch's global generator of the batch's device (the CUDA default generator for a
CUDA batch). The estimators pass an augmentation that takes a ``generator`` keyword
(:func:`takes_generator`: every augmentation of this module, and a :class:`Compose` of them)
the fit's own generator of the epoch, seeded from ``(random_state, epoch)``, so the
augmentations of an epoch depend on the seed and the epoch's number alone: two fits with the
same ``random_state`` augment identically, also in two threads at once, and a fit of 2
epochs resumed with ``partial_fit`` for 2 more draws exactly what a fit of 4 epochs draws in its
epochs 3 and 4. A plain callable ``f(x)`` draws from torch's global generator, which the
estimator then forks and seeds per epoch under a lock that the library's fits share (two such
fits in threads train one after the other).

The draws of one call are fixed and documented per class (their order is part of the
reproducibility contract): the tests replay them to check the output by hand.

:func:`check_augmentation` is the check an estimator runs once at the start of ``fit``: the
augmentation must keep the batch's shape, dtype and device, leave its input unchanged and
return finite values.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ._utils.generators import global_rng
from ._utils.parameters import ParamChecker

__all__ = [
    "RandomCrop",
    "HorizontalFlip",
    "GaussianNoise",
    "Compose",
    "paper_augmentation",
    "check_augmentation",
    "takes_generator",
]

Augmentation = Callable[..., torch.Tensor]


class _BatchAugmentation:
    """Shared face: parameters in ``repr``, draws on the generator's device."""

    _params: tuple[str, ...] = ()

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._params)
        return f"{type(self).__name__}({args})"

    def _check_ndim(self, x: torch.Tensor, ndims: tuple[int, ...], what: str) -> None:
        if not isinstance(x, torch.Tensor) or x.ndim not in ndims:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"{type(self).__name__} takes {what}; got a batch of shape {shape}. "
                "For flat features (n, d) use GaussianNoise, or reshape the data to images."
            )


def _draw_device(x: torch.Tensor, generator: torch.Generator | None) -> torch.device:
    # A generator only draws on its own device; without one, draw where the batch is.
    return generator.device if generator is not None else x.device


class RandomCrop(_BatchAugmentation):
    """Pad, then crop back to the original size at a random offset per sample.

    For images ``(n, C, H, W)`` each sample is padded by ``padding`` pixels on every side and
    the ``H x W`` window at offset ``(top, left)`` is kept; for sequences ``(n, C, L)`` the
    last axis alone is padded and a window of length ``L`` is kept (a random shift). The
    offsets are drawn as ``torch.randint(0, 2 * padding + 1, (n, k))`` with ``k`` the number
    of padded axes (``k = 2``: ``[:, 0]`` is ``top``, ``[:, 1]`` is ``left``), so offset
    ``padding`` is the uncropped image.

    Parameters
    ----------
    padding : int, default=4
        Pixels added on each side; ``0`` returns the batch unchanged.
    padding_mode : {"constant", "reflect", "replicate"}, default="constant"
        How the border is filled (as :func:`torch.nn.functional.pad`): ``"constant"`` with
        ``fill``, ``"reflect"`` mirrors the image without repeating the edge (needs
        ``padding`` smaller than the padded sides), ``"replicate"`` repeats the edge.
    fill : float, default=0.0
        The value of a constant border, in the units of the batch (0 is the mean of
        standardized data, black for [0, 1] pixels).

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.augment import RandomCrop
    >>> crop = RandomCrop(padding=1)
    >>> x = torch.arange(2 * 9.0).reshape(2, 1, 3, 3)
    >>> out = crop(x, generator=torch.Generator().manual_seed(1))
    >>> out.shape
    torch.Size([2, 1, 3, 3])
    >>> torch.randint(0, 3, (2, 2), generator=torch.Generator().manual_seed(1))  # the offsets
    tensor([[1, 2],
            [0, 2]])
    >>> out[0, 0]  # top=1 keeps the rows, left=2 moves the image one column to the left
    tensor([[1., 2., 0.],
            [4., 5., 0.],
            [7., 8., 0.]])
    """

    _params = ("padding", "padding_mode", "fill")

    def __init__(self, padding: int = 4, padding_mode: str = "constant", fill: float = 0.0):
        self.padding = padding
        self.padding_mode = padding_mode
        self.fill = fill
        check = ParamChecker(self)
        check.integer("padding", 0)
        check.choice("padding_mode", ("constant", "reflect", "replicate"))
        check.real("fill")
        check.raise_if_any()

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Crop a batch ``(n, C, L)`` or ``(n, C, H, W)``; same shape, dtype and device."""
        self._check_ndim(x, (3, 4), "sequences (n, C, L) or images (n, C, H, W)")
        sizes = tuple(x.shape[2:])
        p = self.padding
        if self.padding_mode == "reflect" and p >= min(sizes):
            raise ValueError(
                f"RandomCrop(padding={p}, padding_mode='reflect') needs padding smaller than "
                f"the padded sides {sizes}; use a smaller padding or padding_mode='replicate'."
            )
        shape = (len(x), len(sizes))
        device = _draw_device(x, generator)
        offsets = torch.randint(0, 2 * p + 1, shape, generator=generator, device=device)
        offsets = offsets.to(x.device)
        if p == 0:
            return x.clone()
        kwargs = {"value": self.fill} if self.padding_mode == "constant" else {}
        out = F.pad(x, (p, p) * len(sizes), mode=self.padding_mode, **kwargs)
        # Crop one axis at a time: gather the window [offset, offset + size) of each sample.
        for axis, size in enumerate(sizes):
            dim = 2 + axis
            index = offsets[:, axis, None] + torch.arange(size, device=x.device)
            view = [len(x)] + [1] * (x.ndim - 1)
            view[dim] = size
            shape = list(out.shape)
            shape[dim] = size
            out = out.gather(dim, index.view(view).expand(shape))
        return out


class HorizontalFlip(_BatchAugmentation):
    """Reverse the last axis of each sample with probability ``p``.

    Sample ``i`` is flipped when ``u_i < p``, with ``u = torch.rand(n)`` drawn once per call.
    For images ``(n, C, H, W)`` that is a left-right mirror; for sequences ``(n, C, L)`` it
    reverses time, which only makes sense where the order carries no label information.

    Parameters
    ----------
    p : float, default=0.5
        Probability that a sample is flipped, in [0, 1].

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.augment import HorizontalFlip
    >>> x = torch.arange(8.0).reshape(2, 1, 2, 2)
    >>> HorizontalFlip(p=1.0)(x)[0, 0]
    tensor([[1., 0.],
            [3., 2.]])
    """

    _params = ("p",)

    def __init__(self, p: float = 0.5):
        self.p = p
        check = ParamChecker(self)
        check.real("p", 0.0, 1.0)
        check.raise_if_any()

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Flip a batch ``(n, C, L)`` or ``(n, C, H, W)``; same shape, dtype and device."""
        self._check_ndim(x, (3, 4), "sequences (n, C, L) or images (n, C, H, W)")
        u = torch.rand(len(x), generator=generator, device=_draw_device(x, generator))
        flip = (u < self.p).to(x.device).view(-1, *([1] * (x.ndim - 1)))
        return torch.where(flip, x.flip(-1), x)


class GaussianNoise(_BatchAugmentation):
    """Add independent Gaussian noise, ``x + std * eps`` with ``eps ~ N(0, I)``.

    ``eps`` is drawn as ``torch.randn(x.shape)`` in the batch's dtype. The NG-EBM and JEM
    code add ``std = 0.03`` to images scaled to [-1, 1]; on data standardized per channel
    (``compare``'s default) the same noise is about ``0.03 / (2 * 0.25) = 0.06``, since a
    CIFAR channel has a standard deviation of about 0.25 in [0, 1] units.

    Parameters
    ----------
    std : float, default=0.03
        Standard deviation, in the units of the batch; ``>= 0``.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.augment import GaussianNoise
    >>> x = torch.zeros(4000, 64)
    >>> noisy = GaussianNoise(std=0.5)(x, generator=torch.Generator().manual_seed(0))
    >>> round(noisy.std().item(), 2)
    0.5
    """

    _params = ("std",)

    def __init__(self, std: float = 0.03):
        self.std = std
        check = ParamChecker(self)
        check.real("std", 0.0)
        check.raise_if_any()

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Add noise to a floating-point batch of any shape."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            what = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"GaussianNoise needs a floating-point batch; got {what}. Integer inputs "
                "(token ids) cannot take noise: leave the augmentation out for them."
            )
        eps = torch.randn(
            x.shape, generator=generator, dtype=x.dtype, device=_draw_device(x, generator)
        )
        return x + self.std * eps.to(x.device)


class Compose(_BatchAugmentation):
    """Apply augmentations in order, passing the same generator to each.

    Parameters
    ----------
    transforms : sequence of callables
        Each maps a batch to a batch. When called with a generator, each must accept a
        ``generator`` keyword (all augmentations of this module do); a plain callable
        ``f(x)`` can join a Compose that is called without one, as the estimators do.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.augment import Compose, GaussianNoise, HorizontalFlip
    >>> augment = Compose([HorizontalFlip(p=1.0), GaussianNoise(std=0.0)])
    >>> augment
    Compose([HorizontalFlip(p=1.0), GaussianNoise(std=0.0)])
    >>> augment(torch.tensor([[[1.0, 2.0, 3.0]]]))
    tensor([[[3., 2., 1.]]])
    """

    def __init__(self, transforms: Sequence[Augmentation]):
        self.transforms = transforms
        if isinstance(transforms, (str, bytes)) or not isinstance(transforms, Sequence):
            raise TypeError(
                "The 'transforms' parameter of Compose must be a list of callables. "
                f"Got {transforms!r} instead."
            )
        bad = [t for t in transforms if not callable(t)]
        if bad:
            raise TypeError(
                "The 'transforms' parameter of Compose must be a list of callables. "
                f"Got {bad[0]!r} (not callable) in {transforms!r} instead."
            )

    def __repr__(self) -> str:
        return f"Compose([{', '.join(repr(t) for t in self.transforms)}])"

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Apply each transform in turn."""
        for transform in self.transforms:
            x = transform(x) if generator is None else transform(x, generator=generator)
        return x


def paper_augmentation(
    *,
    padding: int = 4,
    padding_mode: str = "reflect",
    flip: bool = True,
    noise_std: float = 0.03,
) -> Compose:
    """The NG-EBM and JEM papers' training augmentation for 32x32 images.

    A crop after reflect-padding by 4 pixels, a horizontal flip with probability 0.5 and
    Gaussian noise of standard deviation 0.03, as in both papers' public training scripts
    (``get_data`` of ``train_wrn_ebm.py`` in wgrathwohl/JEM and chrissweet/NG-EBM; SVHN is
    trained without the flip). The scripts add the noise to images scaled to [-1, 1]; see
    :class:`GaussianNoise` for its size on standardized data.

    Parameters
    ----------
    padding : int, default=4
    padding_mode : {"reflect", "constant", "replicate"}, default="reflect"
    flip : bool, default=True
        ``False`` for SVHN, whose digits change meaning when mirrored.
    noise_std : float, default=0.03
        ``0`` leaves the noise out.

    Returns
    -------
    Compose
        ``RandomCrop``, then ``HorizontalFlip`` (if ``flip``), then ``GaussianNoise`` (if
        ``noise_std > 0``).

    References
    ----------
    .. [1] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
       Should Treat it Like One". ICLR 2020. Code: github.com/wgrathwohl/JEM.
    .. [2] Piland, J., et al. "Non-Generative Energy Based Models", 2023.
       Code: github.com/chrissweet/NG-EBM.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.augment import paper_augmentation
    >>> augment = paper_augmentation()
    >>> augment
    Compose([RandomCrop(padding=4, padding_mode='reflect', fill=0.0), HorizontalFlip(p=0.5), \
GaussianNoise(std=0.03)])
    >>> augment(torch.zeros(8, 3, 32, 32)).shape
    torch.Size([8, 3, 32, 32])
    """
    steps: list[Augmentation] = [RandomCrop(padding, padding_mode)]
    if flip:
        steps.append(HorizontalFlip(0.5))
    if noise_std != 0:
        steps.append(GaussianNoise(noise_std))
    return Compose(steps)


def check_augmentation(augmentation: Augmentation, batch: torch.Tensor) -> None:
    """Check that an augmentation keeps a batch's shape, dtype and device, and stays finite.

    The check an estimator runs once at the start of ``fit`` on a training batch, so that a
    wrong augmentation fails with one clear message instead of deep inside the training
    loop. It calls ``augmentation(batch)`` once, without gradients and inside a fork of
    torch's global generator (under the library's lock), so no generator of the fit or of the
    caller moves.

    Parameters
    ----------
    augmentation : callable
        Maps a batch tensor to a batch tensor.
    batch : torch.Tensor
        A training batch, on the device it will be trained on.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``augmentation`` is not callable or does not return a tensor.
    ValueError
        If the call fails, or the result differs in shape, dtype or device from the batch, or
        the batch was modified in place, or the result holds NaN or infinite values.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.augment import RandomCrop, check_augmentation
    >>> check_augmentation(RandomCrop(padding=2), torch.zeros(4, 3, 8, 8))  # passes
    >>> check_augmentation(lambda x: x[:, :, :6, :6], torch.zeros(4, 3, 8, 8))
    Traceback (most recent call last):
    ...
    ValueError: The augmentation <function <lambda> at ...> must return a batch of the same \
shape, dtype and device as its input; it returned shape (4, 3, 6, 6) instead of (4, 3, 8, 8). ...
    """
    if not callable(augmentation):
        raise TypeError(
            "The 'augmentation' parameter must be None or a callable that maps a training "
            f"batch to a batch of the same shape. Got {augmentation!r} instead."
        )
    before = batch.clone()
    with global_rng(None, batch.device), torch.no_grad():
        try:
            out = augmentation(batch)
        except Exception as exc:
            raise ValueError(
                f"The augmentation {augmentation!r} failed on a training batch of shape "
                f"{tuple(batch.shape)} and dtype {batch.dtype}: {exc}"
            ) from exc
    if not isinstance(out, torch.Tensor):
        raise TypeError(
            f"The augmentation {augmentation!r} must return a torch.Tensor; it returned "
            f"{type(out).__name__}."
        )
    _check_same_batch(augmentation, batch, before, out)


def _check_same_batch(augmentation, batch, before, out) -> None:
    problems = [
        f"{what} {got} instead of {want}"
        for what, got, want in (
            ("shape", tuple(out.shape), tuple(batch.shape)),
            ("dtype", out.dtype, batch.dtype),
            ("device", out.device, batch.device),
        )
        if got != want
    ]
    if problems:
        raise ValueError(
            f"The augmentation {augmentation!r} must return a batch of the same shape, dtype "
            f"and device as its input; it returned {', '.join(problems)}. Crop back to the "
            "input size (RandomCrop pads and crops back), and create new tensors with "
            "the input's dtype and device (e.g. torch.randn_like(x))."
        )
    if not torch.equal(batch, before):
        raise ValueError(
            f"The augmentation {augmentation!r} modified its input in place; the batch can "
            "share memory with the training data, which would then change from epoch to "
            "epoch. Return a new tensor instead (x + noise, not x.add_(noise))."
        )
    if out.is_floating_point() and not bool(torch.isfinite(out).all()):
        raise ValueError(
            f"The augmentation {augmentation!r} returned NaN or infinite values on a finite "
            "batch. Check its parameters (e.g. a noise scale) and any division in it."
        )


def takes_generator(augmentation: Augmentation) -> bool:
    """Whether ``augmentation(x, generator=g)`` draws from ``g``: a ``generator`` keyword.

    Every augmentation of this module takes one, and a :class:`Compose` does when all of its
    transforms do. The estimators pass such an augmentation the fit's own generator; a plain
    callable draws from torch's global generator (see the module's notes).

    Parameters
    ----------
    augmentation : callable

    Returns
    -------
    bool

    Examples
    --------
    >>> from ebmclassifier.augment import Compose, GaussianNoise, takes_generator
    >>> takes_generator(GaussianNoise(0.1)), takes_generator(lambda x: x.flip(-1))
    (True, False)
    >>> takes_generator(Compose([GaussianNoise(0.1), lambda x: x.flip(-1)]))
    False
    """
    if isinstance(augmentation, Compose):
        return all(takes_generator(t) for t in augmentation.transforms)
    try:
        parameters = inspect.signature(augmentation).parameters
    except (TypeError, ValueError):
        return False
    return "generator" in parameters
