"""Mixed precision for the estimators: which precisions exist, where they run, and how.

``precision="float32"`` (the default) changes nothing: no autocast, no scaler, the same
kernels as before the option existed. ``"bfloat16"`` and ``"float16"`` run the forward passes
of training, of SGLD and of inference under :func:`torch.autocast` with that dtype, so that
matrix products and convolutions run in half precision while the weights, their gradients
and the optimizer's state stay float32 (autocast casts the float32 weights per operation;
nothing is stored in half precision). ``"float16"`` has 5 exponent bits, so small gradients
underflow to zero: its backward pass is scaled by a :class:`torch.amp.GradScaler`, which
skips an optimizer step whose scaled gradients overflow and lowers the scale. ``"bfloat16"``
has float32's exponent range and needs no scaler.

Why torch's own ``autocast`` / ``GradScaler`` and not skorch's ``AccelerateMixin``: the loss of
these estimators is not skorch's ``infer`` + ``get_loss`` (``compute_loss`` takes the input
gradient, SGLD samples inside it), and autocast must also cover SGLD and inference, which the
mixin does not wrap; the mixin needs the ``accelerate`` package, which the library does not
depend on; and skorch documents that nets wrapped by it cannot be pickled, while these
estimators must pickle and ``save``.

:class:`Precision` is the one object an estimator builds from its ``precision`` parameter: the
forward passes' context, the loss scaling of the backward pass, the optimizer step and the
scale's state; the functions below are its parts, each a plain function of a precision name and
a device.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

__all__ = [
    "FD_STEPS",
    "PRECISIONS",
    "Precision",
    "autocast",
    "full_precision",
    "grad_scaler",
    "precision_problem",
]

#: The ``precision`` parameter's values.
PRECISIONS = ("float32", "bfloat16", "float16")

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}

#: The relative finite-difference step that ``NGEBMClassifier(fd_step="auto")`` takes in each
#: precision: the step at which the finite-difference parameter gradient of the penalty keeps
#: its cosine to the exact one highest on smooth networks, at initialization and trained
#: (``benchmarks/fd_kinks.py --precisions``; the table is in docs/performance.md). float32
#: keeps the step it always had.
FD_STEPS = {"float32": 0.01, "bfloat16": 0.05, "float16": 0.03}


def precision_problem(precision: str, device: torch.device) -> str | None:
    """Why ``precision`` cannot train on ``device``, with the alternative; None if it can.

    float16 is refused on the CPU (CPU autocast in float16 is emulated on most processors:
    slower than float32, with float16's range; bfloat16 is the CPU's half precision), and
    bfloat16 on a CUDA device without it (``torch.cuda.is_bf16_supported``, compute capability
    8.0 and later).

    Parameters
    ----------
    precision : {"float32", "bfloat16", "float16"}
    device : torch.device
        The resolved training device.

    Returns
    -------
    str or None
        One sentence naming what to use instead.

    Examples
    --------
    >>> import torch
    >>> precision_problem("bfloat16", torch.device("cpu")) is None
    True
    >>> print(precision_problem("float16", torch.device("cpu")))
    precision='float16' needs a CUDA device (CPU autocast has no fast float16); use \
precision='bfloat16' on the CPU, or float32.
    """
    if precision == "float32":
        return None
    if device.type == "cpu" and precision == "float16":
        return (
            "precision='float16' needs a CUDA device (CPU autocast has no fast float16); use "
            "precision='bfloat16' on the CPU, or float32."
        )
    if device.type == "cuda" and precision == "bfloat16":
        if not _native_bf16(device):
            name = torch.cuda.get_device_name(device)
            return (
                f"precision='bfloat16' needs a GPU with bfloat16 arithmetic, and {name} has "
                "none; use precision='float16' (with its gradient scaler), or float32."
            )
    available = getattr(torch.amp, "is_autocast_available", lambda kind: kind in ("cpu", "cuda"))
    if not available(device.type):
        return f"precision={precision!r} needs torch.autocast, which {device.type} lacks."
    return None


def _native_bf16(device: torch.device) -> bool:
    """Whether the CUDA ``device`` computes in bfloat16 natively (not emulated: slow)."""
    with torch.cuda.device(device):
        try:
            return torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # a torch without emulation, hence without the argument
            return torch.cuda.is_bf16_supported()


def autocast(precision: str, device: torch.device) -> AbstractContextManager:
    """The context of the forward passes: ``torch.autocast`` in half precision, else nothing.

    Parameters
    ----------
    precision : {"float32", "bfloat16", "float16"}
    device : torch.device

    Returns
    -------
    context manager
        ``contextlib.nullcontext()`` for float32, so that float32 runs exactly the kernels it
        runs without the option.

    Examples
    --------
    >>> import torch
    >>> layer = torch.nn.Linear(3, 2)
    >>> with autocast("bfloat16", torch.device("cpu")):
    ...     out = layer(torch.ones(1, 3))
    >>> out.dtype, layer.weight.dtype  # the weights stay float32
    (torch.bfloat16, torch.float32)
    """
    if precision == "float32":
        return nullcontext()
    return torch.autocast(device.type, dtype=_DTYPES[precision])


def full_precision(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in float32 if it is in half precision, else itself (the same object).

    What the estimators return and compare (probabilities, energies, scores, logits handed to
    skorch) is float32 whatever the precision of the forward pass.

    Parameters
    ----------
    tensor : Tensor

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import torch
    >>> full_precision(torch.ones(2, dtype=torch.bfloat16)).dtype
    torch.float32
    >>> x = torch.ones(2, dtype=torch.float64)
    >>> full_precision(x) is x
    True
    """
    if tensor.dtype in (torch.float16, torch.bfloat16):
        return tensor.float()
    return tensor


def grad_scaler(
    precision: str, device: torch.device, init_scale: float | None = None
) -> torch.amp.GradScaler | None:
    """The gradient scaler of a float16 fit; None for the other precisions.

    Parameters
    ----------
    precision : {"float32", "bfloat16", "float16"}
    device : torch.device
    init_scale : float or None, default=None
        The scale to start from: the last fit's (``loss_scale_``), so that ``partial_fit``
        continues with it; None starts at torch's 2**16.

    Returns
    -------
    torch.amp.GradScaler or None

    Examples
    --------
    >>> import torch
    >>> grad_scaler("bfloat16", torch.device("cpu")) is None
    True
    >>> grad_scaler("float16", torch.device("cpu"), init_scale=1024.0).get_scale()
    1024.0
    """
    if precision != "float16":
        return None
    kwargs = {} if init_scale is None else {"init_scale": init_scale}
    return torch.amp.GradScaler(device.type, **kwargs)


class Precision:
    """The precision of an estimator's networks: autocast, loss scaling, the optimizer step.

    Built from the estimator's ``precision`` parameter and device. The forward passes of
    training and of inference run under :meth:`autocast` (:meth:`run` also hands back float32);
    in float16 the backward pass is scaled and the optimizers step through the scaler
    (:meth:`backward`, :meth:`step`), whose scale is the object's state (:meth:`state_dict`).

    Parameters
    ----------
    name : {"float32", "bfloat16", "float16"}, default="float32"
    device : torch.device or str, default="cpu"
    scale : float or None, default=None
        The float16 scaler's scale to start from (the last fit's), None for torch's 2**16.
    training : bool, default=True
        False for the forward passes alone (inference): no loss scaling, skorch's plain step.

    Examples
    --------
    >>> import torch
    >>> precision = Precision("bfloat16", "cpu")
    >>> layer = torch.nn.Linear(3, 2)
    >>> precision.run(layer)(torch.ones(1, 3)).dtype  # autocast inside, float32 out
    torch.float32
    >>> precision.state_dict(), Precision("float16", "cpu", scale=8.0).state_dict()
    ({}, {'scale': 8.0})
    """

    def __init__(
        self, name: str = "float32", device="cpu", scale: float | None = None, training=True
    ):
        self.name = name
        self.device = torch.device(device)
        self.scaler = grad_scaler(name, self.device, scale) if training else None
        self._scaled = False  # whether the last backward pass was scaled: the scaler steps

    @property
    def fd_step(self) -> float:
        """The relative finite-difference step of this precision (:data:`FD_STEPS`)."""
        return FD_STEPS[self.name]

    def autocast(self) -> AbstractContextManager:
        """The context of the forward passes (:func:`autocast`; nothing for float32)."""
        return autocast(self.name, self.device)

    def run(self, fn):
        """``fn`` (a network, or a function of one) under :meth:`autocast`, its tensor result in
        float32 (:func:`full_precision`); ``fn`` itself in float32."""
        if self.name == "float32":
            return fn

        def run(*args, **kwargs) -> torch.Tensor:
            with self.autocast():
                return full_precision(fn(*args, **kwargs))

        return run

    def backward(self, loss: torch.Tensor, optimizers: list) -> None:
        """``loss.backward()``; in float16 scaled, then unscaled in ``optimizers``.

        Unscaled here, so that what runs between the backward pass and the step (skorch's
        ``on_grad_computed``: gradient clipping) sees the gradients at their true scale, as
        torch's AMP guide does it.
        """
        if self.scaler is None:
            loss.backward()
            return
        self.scaler.scale(loss).backward()
        for optimizer in optimizers:
            self.scaler.unscale_(optimizer)
        self._scaled = True

    def step(self, step_fn, optimizers: list, plain_step) -> None:
        """The optimizer step: ``plain_step(step_fn)`` (skorch's, with its closure), or in
        float16 ``step_fn()`` then the scaler's step of each optimizer and its update.

        A ``GradScaler`` takes no closure, so the step's work runs first, as skorch's
        ``AccelerateMixin`` does; the scaler skips a step whose gradients overflowed. A step
        without a scaled backward pass (a step the estimator rejected) leaves the optimizers
        and the scale alone.
        """
        if self.scaler is None:
            plain_step(step_fn)
            return
        step_fn()
        if not self._scaled:
            return
        self._scaled = False
        for optimizer in optimizers:
            self.scaler.step(optimizer)
        self.scaler.update()

    def state_dict(self) -> dict:
        """The scale of float16's scaler (``{"scale": ...}``); empty for the others."""
        return {} if self.scaler is None else {"scale": float(self.scaler.get_scale())}

    def load_state_dict(self, state: dict) -> None:
        """Start again from a :meth:`state_dict`."""
        self.scaler = grad_scaler(self.name, self.device, state.get("scale"))
        self._scaled = False
