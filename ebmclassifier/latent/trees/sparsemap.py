"""SparseMAP for dependency trees: the Euclidean projection of the scores onto the tree polytope.

``SparseMAP(s) = argmin_{mu in M} ||mu - s||^2``, where ``M = conv{z : z a tree}`` is the
marginal polytope ([1]_ Eq. 2, written as ``argmax <s, mu> - ||mu||^2 / 2``). The solution is a
sparse mixture ``mu = sum_a p_a z_a`` of a few trees, found by the primal active-set method for
the QP over the mixture weights ``p`` on the simplex ([1]_ Sec. 3.1; Nocedal & Wright (2006),
Alg. 16.3), which touches the polytope only through the MAP oracle (Eisner or Chu-Liu-Edmonds).

On an active set ``A`` (trees ``Z_A``, stacked as rows) the weights solve the KKT system

    [[Z_A Z_A^T, 1], [1^T, 0]] [p; tau] = [Z_A s; 1],

and the problem is solved when no tree scores higher than ``tau`` on ``s - mu``. Holding ``A``
fixed and differentiating gives the Jacobian ([1]_ Prop. 1, in the KKT form)

    d mu / d s = Z_A^T Q Z_A,  Q = the (p, p) block of the inverse KKT matrix,

which is symmetric, so the backward pass is ``Z_A^T Q Z_A g``.

The solver works on the CPU in float64, one sentence at a time for the small linear algebra
and with one batched MAP call per iteration.

References
----------
.. [1] Niculae, Martins, Blondel & Cardie (2018), "SparseMAP: Differentiable Sparse Structured
   Inference", ICML.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from ..._utils.docstrings import fill_docstring
from ._arcs import TREE_PARAMETER_DOCS, arc_mask, check_arc_scores
from .nonprojective import _chu_liu_edmonds
from .projective import _eisner

__all__ = ["SparseMAPTree", "sparsemap_active_set", "tree_sparsemap"]


def _kkt_matrix(vertices: np.ndarray) -> np.ndarray:
    k = len(vertices)
    kkt = np.ones((k + 1, k + 1))
    kkt[:k, :k] = vertices @ vertices.T
    kkt[k, k] = 0.0
    return kkt


def _kkt_solve(vertices: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float]:
    """Weights ``p`` and multiplier ``tau`` of the QP restricted to the rows ``vertices``."""
    kkt = _kkt_matrix(vertices)
    rhs = np.append(vertices @ target, 1.0)
    try:
        solution = np.linalg.solve(kkt, rhs)
    except np.linalg.LinAlgError:  # affinely dependent trees: least squares
        solution = np.linalg.lstsq(kkt, rhs, rcond=None)[0]
    return solution[:-1], float(solution[-1])


def _jacobian_block(vertices: np.ndarray) -> np.ndarray:
    """``Q``, the (p, p) block of the inverse KKT matrix: ``d mu / d s = Z_A^T Q Z_A``."""
    k = len(vertices)
    return np.linalg.pinv(_kkt_matrix(vertices))[:k, :k]


class _ActiveSet:
    """Active-set state of one sentence: trees (rows) and their weights."""

    def __init__(self, target: np.ndarray, first: np.ndarray):
        self.target = target
        self.vertices = first[None, :]
        self.weights = np.ones(1)
        self.tau = 0.0
        self.done = False

    def restricted_step(self) -> np.ndarray:
        """Solve the QP on the active set, dropping trees until the weights are >= 0; return mu."""
        while True:
            p_hat, tau = _kkt_solve(self.vertices, self.target)
            if np.all(p_hat >= 0):
                self.weights, self.tau = p_hat, tau
                return p_hat @ self.vertices
            # move from the feasible weights towards p_hat until one weight hits zero
            direction = p_hat - self.weights
            falling = direction < 0
            steps = -self.weights[falling] / direction[falling]
            self.weights = self.weights + steps.min() * direction
            blocking = np.flatnonzero(falling)[steps.argmin()]
            keep = np.ones(len(self.weights), dtype=bool)
            keep[blocking] = False
            keep &= self.weights > 1e-14
            self.vertices, self.weights = self.vertices[keep], self.weights[keep]

    def add(self, tree: np.ndarray, mu: np.ndarray, tol: float) -> None:
        """Add the oracle's tree, or stop if it does not beat the active ones (gap <= tol)."""
        gap = float(tree @ (self.target - mu)) - self.tau
        already = np.any(np.all(self.vertices == tree[None, :], axis=1))
        if gap <= tol or already:
            self.done = True
            return
        self.vertices = np.vstack([self.vertices, tree])
        self.weights = np.append(self.weights, 0.0)


@fill_docstring(TREE_PARAMETER_DOCS)
def sparsemap_active_set(
    scores: torch.Tensor,
    lengths: torch.Tensor | None = None,
    projective: bool = True,
    max_iter: int = 100,
    tol: float = 1e-9,
) -> tuple[torch.Tensor, list[np.ndarray], list[np.ndarray]]:
    """Solve SparseMAP; return ``mu`` and, per sentence, its active trees and their weights.

    Parameters
    ----------
    {scores}
    {lengths}
    projective : bool, default=True
        The polytope of projective trees (Eisner oracle) or of all trees (Chu-Liu-Edmonds).
    max_iter : int, default=100
        Maximum number of oracle calls; a ``RuntimeWarning`` says when it was not enough.
    tol : float, default=1e-9
        Stop when no tree improves on the active ones by more than ``tol`` on ``s - mu``.

    Returns
    -------
    mu : torch.Tensor of shape (B, N + 1, N + 1)
        The projection, float64 on the CPU, zero outside the real arcs; nan on the real arcs
        of a sentence with a non-finite score.
    vertices : list of ndarray of shape (k_b, (N + 1) ** 2)
        The active trees of each sentence, flattened arc indicators.
    weights : list of ndarray of shape (k_b,)
        Their mixture weights (non-negative, summing to one).

    References
    ----------
    Niculae et al. (2018), Sec. 3.1.

    Examples
    --------
    >>> import torch
    >>> mu, vertices, weights = sparsemap_active_set(torch.zeros(1, 3, 3))
    >>> mu[0]
    tensor([[0.0000, 0.5000, 0.5000],
            [0.0000, 0.0000, 0.5000],
            [0.0000, 0.5000, 0.0000]], dtype=torch.float64)
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _active_set(scores, lengths, projective, max_iter, tol)


def _active_set(scores, lengths, projective, max_iter=100, tol=1e-9):
    """:func:`sparsemap_active_set` on checked inputs (``lengths`` an int64 tensor)."""
    oracle = _eisner if projective else _chu_liu_edmonds
    batch, n1 = scores.shape[0], scores.shape[1]
    lengths = lengths.cpu()
    real = arc_mask(lengths, n1 - 1).reshape(batch, -1).numpy()
    target = scores.detach().to("cpu", torch.float64).reshape(batch, -1).numpy()
    target = np.where(real, target, 0.0)
    # A sentence with a non-finite score has no projection: it is solved at zero scores and
    # its mu set to nan, so that the loss shows the divergence (the KKT solve would fail).
    finite = np.isfinite(target).all(axis=1)
    target = np.where(finite[:, None], target, 0.0)
    first = oracle(torch.as_tensor(target).reshape(batch, n1, n1), lengths)
    states = [_ActiveSet(target[b], first[b].reshape(-1).numpy()) for b in range(batch)]
    for b in np.flatnonzero(~finite):
        states[b].done = True
    mu = np.zeros_like(target)
    for _ in range(max_iter):
        todo = [b for b in range(batch) if not states[b].done]
        if not todo:
            break
        for b in todo:
            mu[b] = states[b].restricted_step()
        query = torch.as_tensor(target[todo] - mu[todo]).reshape(len(todo), n1, n1)
        trees = oracle(query, lengths[todo]).reshape(len(todo), -1).numpy()
        for b, tree in zip(todo, trees, strict=True):
            states[b].add(tree, mu[b], tol)
    else:
        if any(not state.done for state in states):
            warnings.warn(
                f"SparseMAP's active set did not converge in max_iter={max_iter!r} iterations; "
                "increase max_iter.",
                RuntimeWarning,
                stacklevel=3,
            )
    mu = np.where(real & ~finite[:, None], np.nan, mu)
    mu_t = torch.as_tensor(mu).reshape(batch, n1, n1)
    return mu_t, [s.vertices for s in states], [s.weights for s in states]


def _padded_jacobian_factors(vertices, n_coords):
    """Stack per-sentence ``Z_A`` and ``Q`` into zero-padded arrays (B, K, D), (B, K, K)."""
    k_max = max(len(z) for z in vertices)
    z_pad = np.zeros((len(vertices), k_max, n_coords))
    q_pad = np.zeros((len(vertices), k_max, k_max))
    for b, z in enumerate(vertices):
        k = len(z)
        z_pad[b, :k] = z
        q_pad[b, :k, :k] = _jacobian_block(z)
    return z_pad, q_pad


class SparseMAPTree(torch.autograd.Function):
    """SparseMAP over trees with the active-set Jacobian as its backward.

    The Jacobian is that of Niculae et al. (2018), Prop. 1.

    Call as ``SparseMAPTree.apply(scores, lengths, projective[, max_iter, tol])``, or through
    :func:`tree_sparsemap` (which validates the arguments). The Jacobian's factors are built
    only when ``scores`` requires grad.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
    lengths : torch.Tensor of shape (B,), int
    projective : bool
    max_iter : int, default=100
    tol : float, default=1e-9
        As for :func:`sparsemap_active_set`.

    Returns
    -------
    mu : torch.Tensor of shape (B, N + 1, N + 1)
        In the dtype and device of ``scores``.

    Examples
    --------
    At zero scores, the two trees over two words are mixed half and half; raising the score
    of the arc root -> word 1 moves weight to the tree that has it:

    >>> import torch
    >>> scores = torch.zeros(1, 3, 3, requires_grad=True)
    >>> mu = SparseMAPTree.apply(scores, torch.tensor([2]), True, 100, 1e-9)
    >>> mu[0, 0]
    tensor([0.0000, 0.5000, 0.5000], grad_fn=<SelectBackward0>)
    >>> mu[0, 0, 1].backward()
    >>> scores.grad[0]
    tensor([[ 0.0000,  0.2500, -0.2500],
            [ 0.0000,  0.0000,  0.2500],
            [ 0.0000, -0.2500,  0.0000]])
    """

    @staticmethod
    def forward(ctx, scores, lengths, projective, max_iter=100, tol=1e-9):
        mu, vertices, _ = _active_set(scores, lengths, projective, max_iter, tol)
        if ctx.needs_input_grad[0]:  # else no backward pass comes: the value alone
            z_pad, q_pad = _padded_jacobian_factors(vertices, mu[0].numel())
            ctx.save_for_backward(
                torch.as_tensor(z_pad, dtype=scores.dtype, device=scores.device),
                torch.as_tensor(q_pad, dtype=scores.dtype, device=scores.device),
            )
        return mu.to(scores.device, scores.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_mu):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        z_pad, q_pad = ctx.saved_tensors
        coef = torch.einsum("bkd,bd->bk", z_pad, grad_mu.reshape(grad_mu.shape[0], -1))
        grad = torch.einsum("bkd,bkj,bj->bd", z_pad, q_pad, coef)
        return grad.reshape(grad_mu.shape), None, None, None, None


@fill_docstring(TREE_PARAMETER_DOCS)
def tree_sparsemap(
    scores: torch.Tensor,
    lengths: torch.Tensor | None = None,
    projective: bool = True,
    max_iter: int = 100,
    tol: float = 1e-9,
) -> torch.Tensor:
    """SparseMAP projection ``argmin_{mu in M} ||mu - s||^2`` onto the tree polytope.

    Differentiable: the backward pass is the active-set Jacobian (Niculae et al. 2018, Prop. 1).

    Parameters
    ----------
    {scores}
    {lengths}
    projective : bool, default=True
        Projective trees (Eisner oracle) or all trees (Chu-Liu-Edmonds oracle).
    max_iter : int, default=100
        Maximum number of active-set iterations (oracle calls).
    tol : float, default=1e-9
        Optimality tolerance on the duality gap of the active set.

    Returns
    -------
    mu : torch.Tensor of shape (B, N + 1, N + 1)
        A sparse mixture of trees, in the dtype and device of ``scores``.

    References
    ----------
    Niculae et al. (2018), "SparseMAP: Differentiable Sparse Structured Inference", ICML.

    Examples
    --------
    >>> import torch
    >>> s = torch.tensor([[[0.0, 2.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]])
    >>> tree_sparsemap(s)[0]  # a clear winner: the projection is that tree
    tensor([[0., 1., 0.],
            [0., 0., 1.],
            [0., 0., 0.]])
    """
    if not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}.")
    scores, lengths = check_arc_scores(scores, lengths)
    return SparseMAPTree.apply(scores, lengths, projective, max_iter, float(tol))
