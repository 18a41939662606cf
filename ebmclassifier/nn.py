"""Networks: the defaults, chosen from the shape of the data, and the papers' WideResNet.

None of the defaults uses batch-norm: it couples the samples of a batch, which breaks the per-sample
energy gradients that NG-EBM penalises and JEM samples with. SiLU activations keep the energy
surface smooth, which Langevin sampling and the gradient-norm penalty both prefer.

Penultimate features. Each network ends in one linear layer, ``last_layer``, and computes its
logits as ``forward(x) = last_layer(penultimate(x))``: ``penultimate(x)`` returns the
``(n, d)`` features that layer reads (after the last activation, pooling or flattening). The
post-hoc OOD detectors of :mod:`ebmclassifier.detectors` (Mahalanobis, KNN, ViM) work on these
features. A user's own module can offer the same two names to be used with them.

Any network, the defaults or the user's: :func:`network_kwargs` gives a network class the data's
sizes (``n_features``, ``n_classes``, ``input_shape``) its ``__init__`` takes,
:func:`check_module_kwargs` refuses routed ``module__*`` parameters it does not take,
:func:`check_module_output` runs it once on one training sample before training, and
:func:`check_batch_norm` warns when a user's network has batch-norm that an energy term trains
through (:func:`batch_norm_layers` finds it).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from itertools import islice
from math import prod

import torch
from torch import nn

from ._utils.modes import eval_mode
from ._utils.parameters import InvalidParameterError, ParamChecker
from ._utils.warn import warn_user

__all__ = ["MLP", "ConvNet", "LabelConditionedMLP", "WideResNet", "wide_resnet_blocks_per_group"]


class _LinearReadout(nn.Module):
    """What the networks share: ``forward(x) = last_layer(penultimate(x))``.

    A subclass builds a trunk ``self.features`` and ``self.head``, an ``nn.Sequential`` whose
    last layer is the final ``nn.Linear``; :class:`MLP` has no trunk and names its one
    Sequential ``net`` (its state_dict keys), so it overrides :meth:`_trunk` and :meth:`_head`.
    """

    def _trunk(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)

    def _head(self) -> nn.Sequential:
        return self.head

    def penultimate(self, x: torch.Tensor) -> torch.Tensor:
        """The features the last linear layer reads (the class docstring says which).

        Parameters
        ----------
        x : torch.Tensor of shape (n, ...)

        Returns
        -------
        features : torch.Tensor of shape (n, d)
            ``d`` is the last layer's ``in_features``.

        Examples
        --------
        >>> import torch
        >>> net = ConvNet((1, 8), 3, channels=(4,), hidden_size=6)
        >>> x = torch.randn(5, 1, 8)
        >>> net.penultimate(x).shape
        torch.Size([5, 6])
        >>> torch.equal(net.last_layer(net.penultimate(x)), net(x))
        True
        """
        x = self._trunk(x)
        head = self._head()
        for layer in islice(head, len(head) - 1):
            x = layer(x)
        return x

    @property
    def last_layer(self) -> nn.Linear:
        """The final linear layer, from penultimate features to logits."""
        return self._head()[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last_layer(self.penultimate(x))


def _silu_trunk(
    n_features: int, hidden_sizes: Sequence[int], dropout: float = 0.0
) -> tuple[list[nn.Module], int]:
    """The fully connected SiLU layers of :class:`MLP` and :class:`LabelConditionedMLP`:
    ``Flatten``, then ``Linear -> SiLU (-> Dropout)`` per hidden size; with the last width."""
    layers: list[nn.Module] = [nn.Flatten()]
    width = n_features
    for size in hidden_sizes:
        layers += [nn.Linear(width, size), nn.SiLU()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        width = size
    return layers, width


class MLP(_LinearReadout):
    """A multi-layer perceptron from flat features to logits.

    ``penultimate(x)``: the last hidden layer's activations, ``(n, hidden_sizes[-1])`` (the
    flattened input when ``hidden_sizes`` is empty).

    Parameters
    ----------
    n_features : int
        Input size; inputs of any shape ``(n, *input_shape)`` are flattened.
    n_classes : int
    hidden_sizes : sequence of int, default=(256, 256)
    dropout : float, default=0.0

    Examples
    --------
    >>> import torch
    >>> MLP(4, 3)(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    >>> MLP(4, 3, hidden_sizes=(16, 8)).penultimate(torch.zeros(2, 4)).shape
    torch.Size([2, 8])
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden_sizes: Sequence[int] = (256, 256),
        dropout: float = 0.0,
    ) -> None:
        check = ParamChecker.of(locals(), owner="MLP")
        check.integer("n_features", 1)
        check.integer("n_classes", 1)
        check.int_sequence("hidden_sizes")
        check.real("dropout", 0.0, 1.0)
        check.raise_if_any()
        super().__init__()
        layers, width = _silu_trunk(n_features, hidden_sizes, dropout)
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def _trunk(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def _head(self) -> nn.Sequential:
        return self.net


class ConvNet(_LinearReadout):
    """A small convolutional network for ``(C, L)`` sequences or ``(C, H, W)`` images.

    Each stage is a stride-1 convolution followed by a stride-2 one (the downsampling is
    learned, not pooled), then a hidden linear layer and the logits. The flattened feature map
    keeps the position information that e.g. MNIST-1D needs. ``penultimate(x)``: the hidden
    linear layer's activations, ``(n, hidden_size)``.

    Parameters
    ----------
    input_shape : tuple of int
        ``(C, L)`` or ``(C, H, W)``.
    n_classes : int
    channels : sequence of int, default=(32, 64)
        Channels of each stage.
    hidden_size : int, default=128
    kernel_size : int, default=3

    Examples
    --------
    >>> import torch
    >>> ConvNet((1, 8, 8), 10)(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    >>> ConvNet((1, 8, 8), 10, hidden_size=32).penultimate(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 32])
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        n_classes: int,
        channels: Sequence[int] = (32, 64),
        hidden_size: int = 128,
        kernel_size: int = 3,
    ) -> None:
        check = ParamChecker.of(locals(), owner="ConvNet")
        check.int_sequence("input_shape")
        check.integer("n_classes", 1)
        check.int_sequence("channels")
        check.integer("hidden_size", 1)
        check.integer("kernel_size", 1)
        check.raise_if_any()
        super().__init__()
        input_shape = tuple(int(s) for s in input_shape)
        if len(input_shape) not in (2, 3):
            raise ValueError(
                f"ConvNet takes (C, L) or (C, H, W) inputs; got sample shape {input_shape!r}."
            )
        conv = nn.Conv1d if len(input_shape) == 2 else nn.Conv2d
        pad = kernel_size // 2
        layers: list[nn.Module] = []
        width = input_shape[0]
        for out in channels:
            layers += [
                conv(width, out, kernel_size, padding=pad),
                nn.SiLU(),
                conv(out, out, kernel_size, stride=2, padding=pad),
                nn.SiLU(),
            ]
            width = out
        self.features = nn.Sequential(*layers)
        with torch.no_grad():
            n_flat = prod(self.features(torch.zeros(1, *input_shape)).shape[1:])
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(n_flat, hidden_size),
            nn.SiLU(),
            nn.Linear(hidden_size, n_classes),
        )


_ACTIVATIONS = {"leaky_relu": lambda: nn.LeakyReLU(0.2), "silu": nn.SiLU, "relu": nn.ReLU}


def wide_resnet_blocks_per_group(depth: int) -> int:
    """Residual blocks in each of a WRN's three groups: ``(depth - 4) / 6``.

    Parameters
    ----------
    depth : int
        ``6 n + 4`` with ``n >= 1``: 10, 16, 22, 28...

    Returns
    -------
    n : int

    Examples
    --------
    >>> wide_resnet_blocks_per_group(28)
    4
    """
    if depth < 10 or (depth - 4) % 6:
        raise ValueError(f"depth must be 6 n + 4 with n >= 1 (10, 16, 22, 28...); got {depth}.")
    return (depth - 4) // 6


class _WideBlock(nn.Module):
    """Pre-activation residual block: (norm, act, conv3x3) twice, plus a shortcut.

    When the shape changes the shortcut is a 1x1 convolution of the activated input, as in the
    pre-activation ResNet (He et al., 2016).
    """

    def __init__(self, c_in, c_out, stride, dropout, activation, batch_norm):
        super().__init__()
        norm = nn.BatchNorm2d if batch_norm else lambda c: nn.Identity()
        bias = not batch_norm  # a batch-norm after the conv would cancel a bias
        self.norm1, self.act1 = norm(c_in), _ACTIVATIONS[activation]()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=bias)
        self.norm2, self.act2 = norm(c_out), _ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=bias)
        self.project = None
        if stride != 1 or c_in != c_out:
            self.project = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activated = self.act1(self.norm1(x))
        shortcut = x if self.project is None else self.project(activated)
        out = self.conv1(activated)
        out = self.conv2(self.dropout(self.act2(self.norm2(out))))
        return out + shortcut


class WideResNet(_LinearReadout):
    """Wide residual network WRN-depth-k for ``(C, H, W)`` images, without batch-norm by default.

    The network of the NG-EBM and JEM papers' CIFAR experiments, WRN-28-10 without batch-norm
    (Zagoruyko & Komodakis, "Wide Residual Networks", BMVC 2016): a 3x3 convolution to 16
    channels, three groups of ``(depth - 4) / 6`` pre-activation residual blocks of
    ``16k``, ``32k`` and ``64k`` channels (the last two groups halve the resolution), then
    activation, global average pooling and a linear layer to the logits. Batch-norm is left
    out by default because it couples the samples of a batch, which breaks the per-sample
    energy gradients NG-EBM penalises and JEM samples with; without it the convolutions carry
    biases. ``penultimate(x)``: the activated, globally average-pooled maps,
    ``(n, 64 * widen_factor)``.

    Parameters
    ----------
    input_shape : tuple of int
        ``(C, H, W)``.
    n_classes : int
    depth : int, default=28
        ``6 n + 4`` for ``n`` blocks per group: 10, 16, 22, 28, 34, 40...
    widen_factor : int, default=10
        ``k``, the width multiplier.
    dropout : float, default=0.0
        Dropout between the two convolutions of each block.
    activation : {"leaky_relu", "silu", "relu"}, default="leaky_relu"
        Leaky ReLU has slope 0.2; SiLU gives a smooth energy surface.
    batch_norm : bool, default=False
        Add batch-norm before every activation (the original WRN).

    Examples
    --------
    >>> import torch
    >>> net = WideResNet((3, 32, 32), n_classes=10, depth=10, widen_factor=1)
    >>> net(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    >>> net.penultimate(torch.zeros(2, 3, 32, 32)).shape  # 64 k channels, pooled
    torch.Size([2, 64])

    Use it in an estimator (it receives ``input_shape`` and ``n_classes`` from the data):

    >>> from ebmclassifier import NGEBMClassifier
    >>> clf = NGEBMClassifier(module=WideResNet, module__depth=28, module__widen_factor=10)
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        n_classes: int,
        depth: int = 28,
        widen_factor: int = 10,
        dropout: float = 0.0,
        activation: str = "leaky_relu",
        batch_norm: bool = False,
    ) -> None:
        check = ParamChecker.of(locals(), owner="WideResNet")
        check.int_sequence("input_shape")
        check.integer("n_classes", 1)
        check.integer("widen_factor", 1)
        check.real("dropout", 0.0, 1.0)
        check.raise_if_any()
        super().__init__()
        input_shape = tuple(int(s) for s in input_shape)
        if len(input_shape) != 3:
            raise ValueError(f"WideResNet takes (C, H, W) images; got sample shape {input_shape}.")
        blocks_per_group = wide_resnet_blocks_per_group(depth)
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}; got {activation!r}."
            )
        layers: list[nn.Module] = [nn.Conv2d(input_shape[0], 16, 3, padding=1, bias=not batch_norm)]
        width = 16
        for group, stride in enumerate((1, 2, 2)):
            out = 16 * widen_factor * 2**group
            for block in range(blocks_per_group):
                layers.append(
                    _WideBlock(
                        width, out, stride if block == 0 else 1, dropout, activation, batch_norm
                    )
                )
                width = out
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.BatchNorm2d(width) if batch_norm else nn.Identity(),
            _ACTIVATIONS[activation](),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(width, n_classes),
        )


class LabelConditionedMLP(nn.Module):
    """An energy network ``E(x, y)`` that takes the label as an input (Li et al. 2020).

    ``f(x)[c] = -E(x, c) = head(phi(x) * g_c + b_c)``: features ``phi(x)`` of an MLP, gated
    feature-wise by a learned vector ``g_c`` per class (the rows of ``last_layer``), then a
    head shared by every class gives one number. The classes share the head, so the energy of
    a new class is on the scale of the old ones; only ``g_c`` and ``b_c`` are the class's own.
    Unlike the other networks its logits are not ``last_layer(penultimate(x))``: it has no
    ``penultimate``, so the post-hoc detectors of :mod:`ebmclassifier.detectors` do not apply;
    ``last_layer`` is what ``class_incremental=True`` grows.

    Parameters
    ----------
    n_features : int
    n_classes : int
    hidden_sizes : sequence of int, default=(256, 256)
        The MLP ``phi``; its last size is the width of the gates.
    head_size : int, default=64
        The hidden width of the shared head.

    References
    ----------
    .. [1] Li, S., Du, Y., van de Ven, G. M. and Mordatch, I. "Energy-Based Models for
       Continual Learning". CoLLAs 2022 (arXiv:2011.12216), section 3.

    Examples
    --------
    >>> import torch
    >>> net = LabelConditionedMLP(4, 3, hidden_sizes=(8,), head_size=5)
    >>> net(torch.zeros(2, 4)).shape, net.last_layer.weight.shape
    (torch.Size([2, 3]), torch.Size([3, 8]))
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden_sizes: Sequence[int] = (256, 256),
        head_size: int = 64,
    ) -> None:
        check = ParamChecker.of(locals(), owner="LabelConditionedMLP")
        check.integer("n_features", 1)
        check.integer("n_classes", 1)
        check.int_sequence("hidden_sizes")
        check.integer("head_size", 1)
        check.raise_if_any()
        super().__init__()
        layers, width = _silu_trunk(n_features, hidden_sizes)
        self.features = nn.Sequential(*layers)
        self.gates = nn.Linear(width, n_classes)  # row c: g_c, bias: b_c
        with torch.no_grad():  # start near the identity gate
            self.gates.weight.uniform_(0.5, 1.5)
        self.head = nn.Sequential(nn.Linear(width, head_size), nn.SiLU(), nn.Linear(head_size, 1))

    @property
    def last_layer(self) -> nn.Linear:
        """The per-class gates ``g_c`` (weight rows) and offsets ``b_c`` (bias)."""
        return self.gates

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x)
        gated = h[:, None, :] * self.gates.weight[None] + self.gates.bias[None, :, None]
        return self.head(gated).squeeze(-1)


# ------------------------------------------- any network: built with the data's sizes, checked


def network_kwargs(network, kwargs: dict, sizes: dict) -> dict:
    """The arguments skorch's ``initialized_instance(network, kwargs)`` builds a network with.

    skorch builds a class as ``network(**kwargs)``, rebuilds an instance given routed
    parameters as ``type(network)(**kwargs)``, and uses an instance without them as it is.
    A network that is built also gets the entries of ``sizes`` (the data's ``n_features``,
    ``n_classes``, ...) that its ``__init__`` takes by name and ``kwargs`` does not give.

    Parameters
    ----------
    network : torch.nn.Module class or instance, or another callable
    kwargs : dict
        The routed parameters (``module__*``, ``encoder__*``, ...), without their prefix.
    sizes : dict
        The data-dependent arguments on offer.

    Returns
    -------
    dict
    """
    if isinstance(network, nn.Module):
        if not kwargs:
            return kwargs
        network = type(network)
    try:
        takes = inspect.signature(network).parameters
    except (TypeError, ValueError):
        return kwargs
    return {**{k: v for k, v in sizes.items() if k in takes}, **kwargs}


def module_kwargs_problem(owner: str, prefix: str, module_cls, kwargs: dict) -> str | None:
    """The routed ``{prefix}__*`` parameters that ``module_cls`` does not take, as a message.

    Parameters
    ----------
    owner : str
        The estimator's class name, for the message.
    prefix : str
        The routing prefix, e.g. ``"module"``.
    module_cls : callable
        What is built; a signature with ``**kwargs`` takes any name.
    kwargs : dict
        The routed parameters, without their prefix.

    Returns
    -------
    str or None
        Naming the parameters ``module_cls`` does not take, and listing those it takes;
        ``None`` when it takes them all.
    """
    try:
        params = inspect.signature(module_cls).parameters
    except (TypeError, ValueError):
        return None  # no signature to check against
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [name for name in kwargs if name not in named]
    if not unknown:
        return None
    what = getattr(module_cls, "__name__", repr(module_cls))
    routed = ", ".join(f"{prefix}__{name}" for name in unknown)
    return (
        f"{owner} got {routed}, but {what} takes no argument named "
        + ", ".join(repr(name) for name in unknown)
        + f". {what} takes: "
        + ", ".join(named)
        + f"; pass them as {prefix}__<name>."
    )


def check_module_kwargs(owner: str, prefix: str, module_cls, kwargs: dict) -> None:
    """Refuse routed ``{prefix}__*`` parameters that ``module_cls`` does not take.

    Raises
    ------
    InvalidParameterError
        With the message of :func:`module_kwargs_problem`.
    """
    problem = module_kwargs_problem(owner, prefix, module_cls, kwargs)
    if problem is not None:
        raise InvalidParameterError(problem)


def check_module_output(estimator, x: torch.Tensor) -> None:
    """One forward pass of ``estimator.module_`` on one training sample, before training.

    The network must take the data's samples and return logits of shape ``(1, n_classes)``;
    otherwise the error names the ``module`` parameter and says what came, instead of failing
    in torch in the middle of the first training step.

    Parameters
    ----------
    estimator : EBMClassifierBase
        With ``module_``, ``classes_`` and ``input_shape_``.
    x : Tensor of shape ``(1, *input_shape)``
        One training sample, on the estimator's device.
    """
    name, module = type(estimator).__name__, estimator.module_
    what = f"The network of {name} ({type(module).__name__}, from the 'module' parameter)"
    n_classes = len(estimator.classes_)
    try:
        with eval_mode(module), torch.no_grad():  # no dropout noise, no batch-norm statistics
            out = module(x)
    except Exception as exc:  # any failure here is the network's, on valid data
        raise ValueError(
            f"{what} failed on one training sample of shape {tuple(x.shape[1:])}: "
            f"{str(exc).rstrip('.')}. "
            f"It must take samples of shape {estimator.input_shape_} "
            f"(n_features_in_={estimator.n_features_in_})."
        ) from exc
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else None
    if shape != (1, n_classes):
        got = f"a {type(out).__name__}" if shape is None else f"an output of shape {shape}"
        raise ValueError(
            f"{what} returned {got} for one training sample; it must return logits of shape "
            f"(1, n_classes) = (1, {n_classes}), one per class of y "
            f"({estimator.classes_.tolist()!r})."
        )


#: The layers that normalise over the samples of a batch: every class of torch's batch-norm.
BATCH_NORM_LAYERS = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.LazyBatchNorm1d,
    nn.LazyBatchNorm2d,
    nn.LazyBatchNorm3d,
    nn.SyncBatchNorm,
)


def batch_norm_layers(module: nn.Module) -> list[str]:
    """The batch-norm layers of ``module`` (:data:`BATCH_NORM_LAYERS`), each class named once.

    Parameters
    ----------
    module : torch.nn.Module

    Returns
    -------
    list of str
        Their class names, in the order met.

    Examples
    --------
    >>> batch_norm_layers(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.SiLU()))
    ['BatchNorm1d']
    >>> batch_norm_layers(MLP(4, 3)), batch_norm_layers(nn.GroupNorm(2, 8))
    ([], [])
    """
    found = []
    for layer in module.modules():
        if isinstance(layer, BATCH_NORM_LAYERS) and type(layer).__name__ not in found:
            found.append(type(layer).__name__)
    return found


def check_batch_norm(estimator) -> None:
    """Warn at ``fit`` when a user's network has batch-norm and the loss has an energy term.

    Batch-norm in training mode normalises each sample by its batch's statistics, so
    ``E(x_i)`` depends on the other samples: the input gradient ``dE/dx_i`` that NG-EBM
    penalises and JEM's Langevin sampler follows is no longer the sample's own, and scoring
    (eval mode, running statistics) sees another energy than training did. The library's own
    networks are left alone (``WideResNet(batch_norm=True)`` is asked for by name), and so is
    training without an energy term (``NGEBMClassifier(beta=0)``, ``JEMClassifier(px_weight=0)``,
    the latent classifier), where batch-norm is ordinary.

    Parameters
    ----------
    estimator : EBMClassifierBase
        With ``module_``.
    """
    module = estimator.module_
    has_energy_term = getattr(estimator, "_has_energy_term", None)
    if type(module).__module__.split(".")[0] == "ebmclassifier" or not (
        has_energy_term and has_energy_term()
    ):
        return
    found = batch_norm_layers(module)
    if found:
        warn_user(
            f"The network of {type(estimator).__name__} ({type(module).__name__}, from the "
            f"'module' parameter) has batch-norm ({', '.join(found)}), which couples the "
            "samples of a training batch: each sample's energy then depends on the others, so "
            "the per-sample input gradient dE/dx that the energy term trains on is not the "
            "sample's own, and scoring (eval mode, running statistics) sees another energy "
            "than training. Use a per-sample normalisation instead (torch.nn.GroupNorm, "
            "torch.nn.LayerNorm) or none, as the library's networks do."
        )
