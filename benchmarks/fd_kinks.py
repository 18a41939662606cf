"""How well the finite-difference gradient norm follows the exact one, per activation, precision.

NG-EBM's penalty ``mean_i ||dE/dx (x_i)||`` needs its gradient with respect to the network's
parameters. ``grad_norm="exact"`` takes it by double backprop; ``"finite_difference"`` from
``[E(x + h v) - E(x)] / h`` with ``v = g / ||g||`` held constant
(:func:`ebmclassifier.energy.energy_grad_norm_finite_difference`). For a smooth activation the
difference is off by ``O(h)``; for a ReLU-family activation the segment ``[x, x + h v]`` often
crosses a kink, where the derivative of the activation jumps, and the difference then measures
something else than the derivative at ``x``.

For each network (the default MLP and ConvNet, and a small WideResNet) and activation, this
script builds the network with that activation, takes one batch of standardized digits, and
prints the cosine between the two parameter gradients (all parameters flattened into one
vector) and the ratio of their norms, over several seeds of the weights, at the default step
(``fd_step=0.01``) and at a tenth and ten times it. A cosine of 1 is a perfect match. The
weights are those of initialization, or of a short cross-entropy training
(``--train-epochs``), which moves the pre-activations and so how often a kink is crossed.

    python benchmarks/fd_kinks.py                 # all networks, 5 seeds, initial weights
    python benchmarks/fd_kinks.py --nets mlp convnet --train-epochs 10
    python benchmarks/fd_kinks.py --nets mlp --seeds 10 --fd-steps 0.001 0.01 0.1

With ``--precisions`` the finite difference runs under ``torch.autocast`` in each precision
(as ``NGEBMClassifier(precision=...)`` trains it), and is compared with the exact float32
gradient; the column ``exact`` is the exact gradient under the same autocast, the best that
precision can do. A difference of two nearly equal energies loses digits to rounding: bfloat16
keeps 8 bits of mantissa, float16 11, so the step that keeps the gradient grows as the
precision shrinks. This table chose the steps of ``fd_step="auto"``
(``ebmclassifier._utils.precision.FD_STEPS``). float16 runs on the CPU's autocast here (the same
float16 rounding of each result as on a GPU; the accumulation inside a product may differ)::

    python benchmarks/fd_kinks.py --activations silu leaky_relu \\
        --precisions float32 bfloat16 float16 --fd-steps 0.003 0.01 0.03 0.1 0.3
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler
from torch import nn

from ebmclassifier import NGEBMClassifier
from ebmclassifier.energy import energy_grad_norm, energy_grad_norm_finite_difference
from ebmclassifier.losses import fd_step_size
from ebmclassifier.nn import MLP, ConvNet, WideResNet

ACTIVATIONS = {
    "relu": nn.ReLU,
    "leaky_relu": lambda: nn.LeakyReLU(0.2),  # WideResNet's default
    "silu": nn.SiLU,
    "gelu": nn.GELU,
    "softplus": nn.Softplus,
    "tanh": nn.Tanh,
    "elu": nn.ELU,  # alpha=1: the derivative is continuous at 0
    "selu": nn.SELU,  # its derivative jumps at 0 (from 1.76 to 1.05)
}


def build(net: str, activation: str, n_classes: int) -> nn.Module:
    """The network ``net`` with every activation replaced by ``activation``."""
    if net == "mlp":
        module = MLP(64, n_classes)  # the default (256, 256) SiLU MLP
    elif net == "convnet":
        module = ConvNet((1, 8, 8), n_classes)
    else:
        module = WideResNet((1, 8, 8), n_classes, depth=10, widen_factor=2, activation="silu")
    swap(module, ACTIVATIONS[activation])
    return module


def swap(module: nn.Module, factory) -> None:
    """Replace every SiLU inside ``module`` by ``factory()`` (in place)."""
    for name, child in module.named_children():
        if isinstance(child, nn.SiLU):
            setattr(module, name, factory())
        else:
            swap(child, factory)


def parameter_gradient(module: nn.Module, norms: torch.Tensor) -> torch.Tensor:
    """d mean(norms) / d theta, every parameter flattened into one vector (0 where unused)."""
    params = list(module.parameters())
    grads = torch.autograd.grad(norms.mean(), params, allow_unused=True)
    return torch.cat(
        [
            (torch.zeros_like(p) if g is None else g).flatten()
            for g, p in zip(grads, params, strict=True)
        ]
    )


PRECISIONS = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _autocast(precision: str):
    dtype = PRECISIONS[precision]
    return nullcontext() if dtype is None else torch.autocast("cpu", dtype=dtype)


def compare(
    module: nn.Module, x: torch.Tensor, step: float | None, precision: str = "float32"
) -> tuple[float, float]:
    """Cosine and norm ratio (fd / exact) of the two parameter gradients of the penalty.

    The exact gradient in float32; the finite difference under autocast in ``precision``
    (``step=None``: the exact gradient under that autocast instead).
    """
    exact, _, _ = energy_grad_norm(module, x, create_graph=True)
    g_exact = parameter_gradient(module, exact)
    with _autocast(precision):
        if step is None:
            fd, _, _ = energy_grad_norm(module, x, create_graph=True)
        else:
            fd, _, _ = energy_grad_norm_finite_difference(module, x, step)
        g_fd = parameter_gradient(module, fd).float()
    cosine = torch.nn.functional.cosine_similarity(g_fd, g_exact, dim=0)
    return float(cosine), float(g_fd.norm() / g_exact.norm())


def train(module: nn.Module, X: np.ndarray, y: np.ndarray, args, seed: int) -> nn.Module:
    """``module`` after ``args.train_epochs`` epochs of plain cross-entropy on all of X."""
    clf = NGEBMClassifier(
        module, beta=0.0, max_epochs=args.train_epochs, device="cpu", random_state=seed
    )
    return clf.fit(X, y).module_


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", nargs="+", default=["mlp", "convnet", "wrn"])
    parser.add_argument("--activations", nargs="+", default=list(ACTIVATIONS))
    parser.add_argument("--precisions", nargs="+", default=["float32"], choices=list(PRECISIONS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--fd-steps", type=float, nargs="+", default=[0.001, 0.01, 0.1])
    parser.add_argument("--train-epochs", type=int, default=0, help="cross-entropy epochs first")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    rng = np.random.default_rng(0)
    batch = X[rng.choice(len(X), args.batch_size, replace=False)]
    images = X.reshape(-1, 1, 8, 8)
    steps = {fd: fd_step_size(X, fd) for fd in args.fd_steps}
    if len(args.precisions) > 1 or args.precisions != ["float32"]:
        steps["exact"] = None  # the exact gradient under the same autocast

    header = "".join(f"{'cos @ ' + str(fd):>16}" for fd in steps)
    print(f"{'net':<9}{'activation':<12}{'precision':<10}{header}{'|g_fd|/|g| @ 0.01':>20}")
    for net in args.nets:
        x = torch.tensor(batch if net == "mlp" else batch.reshape(-1, 1, 8, 8))
        for activation in args.activations:
            for precision in args.precisions:
                _report(net, activation, precision, x, X, y, images, steps, args)
    weights = f"after {args.train_epochs} CE epochs" if args.train_epochs else "at initialization"
    print(
        f"mean ± sd over {args.seeds} weight seeds ({weights}), one batch of "
        f"{args.batch_size} standardized digits; the finite difference under autocast in each "
        "precision against the exact float32 gradient"
    )


def _report(net, activation, precision, x, X, y, images, steps, args) -> None:
    """One row of the table: the cosines at every step, over the weight seeds."""
    cosines = {fd: [] for fd in steps}
    ratios = []
    for seed in range(args.seeds):
        torch.manual_seed(seed)
        module = build(net, activation, n_classes=10)
        if args.train_epochs:
            module = train(module, X if net == "mlp" else images, y, args, seed)
        for fd, h in steps.items():
            cosine, ratio = compare(module, x, h, precision)
            cosines[fd].append(cosine)
            if fd == 0.01:
                ratios.append(ratio)
    cells = "".join(f"{np.mean(c):>9.3f} ± {np.std(c):.2f}" for c in cosines.values())
    ratio = f"{np.mean(ratios):>14.3f} ± {np.std(ratios):.2f}" if ratios else ""
    print(f"{net:<9}{activation:<12}{precision:<10}{cells}{ratio}", flush=True)


if __name__ == "__main__":
    main()
