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

Everything here is a plain function of a precision name and a device.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

__all__ = [
    "FD_STEPS",
    "PRECISIONS",
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
