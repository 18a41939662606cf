"""Default networks of the latent-tree classifier: a BiLSTM arc scorer and a tree GCN decoder.

:class:`BiLSTMArcScorer` (encoder) maps token ids ``x`` (B, N) to arc scores (B, N + 1, N + 1):
embeddings and a learned root vector, a bidirectional LSTM, then a biaffine ([2]_ Eq. 4-6) or
MLP ([3]_) scorer. :class:`TreeGCNDecoder` maps ``(x, z)`` to logits with a graph convolution
over the tree ``z`` or its relaxation ([4]_ Eq. 2, one weight per direction): every layer, each
word receives its head's state through ``z^T h`` and its modifiers' states through ``z h``, so
information does travel along the arcs. The decoder has no recurrent layer: words see each other
only through the tree, so the label can be learnt only as well as the tree is.
:class:`TreeLatentModel` assembles the two; its ``forward`` is the prediction path.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT", EMNLP.
.. [2] Dozat & Manning (2017), "Deep Biaffine Attention for Neural Dependency Parsing", ICLR.
.. [3] Kiperwasser & Goldberg (2016), "Simple and Accurate Dependency Parsing Using
   Bidirectional LSTM Feature Representations", TACL.
.. [4] Marcheggiani & Titov (2017), "Encoding Sentences with Graph Convolutional Networks for
   Semantic Role Labeling", EMNLP.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..networks import LatentModel
from ..polytope import Polytope
from ._arcs import arcs_to_heads
from .polytope import TreePolytope
from .tokens import as_token_ids

__all__ = ["BiLSTMArcScorer", "TreeGCNDecoder", "TreeLatentModel", "sequence_lengths"]


def sequence_lengths(x: torch.Tensor) -> torch.Tensor:
    """Number of tokens per row of token ids ``x`` (B, N), 0 being padding at the end.

    Parameters
    ----------
    x : torch.Tensor of shape (B, N), int
        Token ids, padded with 0 at the end of each row.

    Returns
    -------
    lengths : torch.Tensor of shape (B,), int64

    Raises
    ------
    ValueError
        For an empty row, a padding id before a token, or a negative id.

    Examples
    --------
    >>> import torch
    >>> sequence_lengths(torch.tensor([[3, 1, 0], [2, 0, 0]]))
    tensor([2, 1])
    """
    as_token_ids(x.detach().cpu().numpy())
    return _token_lengths(x)


def _token_lengths(x: torch.Tensor) -> torch.Tensor:
    """:func:`sequence_lengths` of token ids that are known to be well formed (no check)."""
    return (x > 0).sum(dim=1)


class BiLSTMArcScorer(nn.Module):
    """Arc scores ``s[b, head, modifier]`` (B, N + 1, N + 1) from token ids (B, N).

    Parameters
    ----------
    vocab_size : int
        Number of token ids (0 is padding).
    embedding_dim : int, default=64
    hidden_size : int, default=64
        Per direction of the BiLSTM.
    arc_size : int, default=64
        Size of the head and modifier representations of the scorer.
    scorer : {"biaffine", "mlp"}, default="biaffine"
        ``s[h, m] = a_h^T U d_m + u^T a_h`` (Dozat & Manning 2017) or
        ``v^T tanh(a_h + d_m)`` (Kiperwasser & Goldberg 2016).
    dropout : float, default=0.0
        On the embeddings and the BiLSTM output.

    Examples
    --------
    >>> import torch
    >>> scorer = BiLSTMArcScorer(10, 8, 8, 8)
    >>> scorer(torch.tensor([[3, 4, 0], [5, 0, 0]])).shape
    torch.Size([2, 4, 4])
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 64,
        hidden_size: int = 64,
        arc_size: int = 64,
        scorer: str = "biaffine",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if scorer not in ("biaffine", "mlp"):
            raise ValueError(f"scorer must be 'biaffine' or 'mlp'; got {scorer!r}.")
        self.scorer = scorer
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.root = nn.Parameter(torch.randn(embedding_dim) * 0.1)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * hidden_size, arc_size)
        self.modifier = nn.Linear(2 * hidden_size, arc_size)
        if scorer == "biaffine":
            # small random rather than zero (Dozat & Manning): no ties among the initial trees
            self.bilinear = nn.Parameter(torch.randn(arc_size, arc_size) / arc_size)
            self.head_bias = nn.Parameter(torch.zeros(arc_size))
        else:
            self.out = nn.Linear(arc_size, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.long()
        lengths = _token_lengths(tokens)
        emb = self.embedding(tokens)
        root = self.root.expand(len(tokens), 1, -1)
        emb = self.dropout(torch.cat([root, emb], dim=1))
        packed = pack_padded_sequence(
            emb, (lengths + 1).cpu(), batch_first=True, enforce_sorted=False
        )
        states, _ = pad_packed_sequence(self.lstm(packed)[0], True, total_length=emb.shape[1])
        states = self.dropout(states)
        heads = torch.relu(self.head(states))
        mods = torch.relu(self.modifier(states))
        if self.scorer == "biaffine":
            return (
                heads @ self.bilinear @ mods.transpose(1, 2) + (heads @ self.head_bias)[..., None]
            )
        return self.out(torch.tanh(heads[:, :, None, :] + mods[:, None, :, :])).squeeze(-1)


class TreeGCNDecoder(nn.Module):
    """Logits (B, n_classes) from token ids (B, N) and a tree or arc weights ``z`` (B, N+1, N+1).

    ``h_{l+1} = relu(W_self h_l + W_head z^T h_l + W_mod z h_l + b)`` for ``n_layers`` layers
    (Marcheggiani & Titov 2017, Eq. 2, with one weight per arc direction), from the token
    embeddings (and a learned root vector at position 0); then masked mean and max pooling over
    the words and a linear classifier.

    Parameters
    ----------
    vocab_size : int
    n_classes : int
    embedding_dim : int, default=64
    hidden_size : int, default=64
    n_layers : int, default=2

    Examples
    --------
    >>> import torch
    >>> decoder = TreeGCNDecoder(10, 3, 8, 8)
    >>> z = torch.zeros(1, 3, 3); z[0, 0, 2] = z[0, 2, 1] = 1.0
    >>> decoder(torch.tensor([[4, 5]]), z).shape
    torch.Size([1, 3])
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        embedding_dim: int = 64,
        hidden_size: int = 64,
        n_layers: int = 2,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.root = nn.Parameter(torch.randn(embedding_dim) * 0.1)
        sizes = [embedding_dim] + [hidden_size] * n_layers
        pairs = list(zip(sizes[:-1], sizes[1:], strict=True))
        self.self_loops = nn.ModuleList(nn.Linear(a, b) for a, b in pairs)
        self.from_head = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in pairs)
        self.from_mods = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in pairs)
        self.classifier = nn.Linear(2 * sizes[-1], n_classes)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        tokens = x.long()
        lengths = _token_lengths(tokens)
        h = torch.cat([self.root.expand(len(tokens), 1, -1), self.embedding(tokens)], dim=1)
        z = z.to(h.dtype)
        for self_loop, from_head, from_mods in zip(
            self.self_loops, self.from_head, self.from_mods, strict=True
        ):
            # z[b, h, m]: word m hears its head through z^T, head h its modifiers through z
            h = torch.relu(self_loop(h) + from_head(z.transpose(1, 2) @ h) + from_mods(z @ h))
        words = h[:, 1:]
        mask = (torch.arange(words.shape[1], device=h.device) < lengths[:, None])[..., None]
        mean = (words * mask).sum(1) / lengths[:, None].to(h.dtype)
        top = words.masked_fill(~mask, float("-inf")).max(dim=1).values
        return self.classifier(torch.cat([mean, top], dim=1))


class TreeLatentModel(LatentModel):
    """Encoder ``x -> s`` (arc scores) and decoder ``(x, z) -> logits`` with a latent tree.

    Parameters
    ----------
    encoder : nn.Module
        Token ids (B, N) -> arc scores (B, N + 1, N + 1), e.g. :class:`BiLSTMArcScorer`.
    decoder : nn.Module
        ``decoder(x, z)`` -> logits (B, n_classes), e.g. :class:`TreeGCNDecoder`.
    gradient : str, default="spigot"
        The training method; decides the deterministic latent of :meth:`forward` (see
        :func:`~ebmclassifier.latent.trees.latent.tree_latent_eval`).
    projective : bool, default=True
    temperature : float, default=1.0
    baseline : nn.Module, optional
        The score-function baseline, registered so it moves and pickles with the model;
        by default a :class:`~ebmclassifier.latent.score_function.RunningMeanBaseline`, as for
        :class:`~ebmclassifier.latent.networks.LatentModel`.
    validate_args : bool, default=True
        Check the token ids of every call (:func:`sequence_lengths`): an empty row, a padding
        id before a token or a negative id is a ``ValueError``. The estimator, which checks its
        input once, builds its model with ``False`` (no host synchronisation per batch).

    Examples
    --------
    >>> import torch
    >>> model = TreeLatentModel(BiLSTMArcScorer(10, 8, 8, 8), TreeGCNDecoder(10, 2, 8, 8))
    >>> x = torch.tensor([[3, 4, 0], [5, 0, 0]])
    >>> model(x).shape, model.latent(x).shape
    (torch.Size([2, 2]), torch.Size([2, 4, 4]))
    >>> model.predict_heads(x)[1]
    tensor([ 0, -1, -1])
    >>> model(torch.tensor([[3, 0, 4]]))
    Traceback (most recent call last):
    ...
    ValueError: Each sequence must hold at least one token id > 0, with the padding id 0 only at \
the end; row 0 is [3, 0, 4].
    """

    def __init__(
        self,
        encoder: nn.Module,
        decoder: nn.Module,
        gradient: str = "spigot",
        projective: bool = True,
        temperature: float = 1.0,
        baseline: nn.Module | None = None,
        *,
        validate_args: bool = True,
    ) -> None:
        super().__init__(encoder, decoder, gradient, temperature)
        self.projective = projective
        if baseline is not None:  # else the RunningMeanBaseline of LatentModel
            self.baseline = baseline
        self.validate_args = validate_args

    @property
    def polytope(self) -> Polytope:
        return TreePolytope(bool(self.projective))

    def sizes(self, x: torch.Tensor) -> torch.Tensor:
        """The number of tokens of each row of token ids, checked unless ``validate_args=False``.

        Every public method of the model reads the lengths here first, so that token ids are
        checked once per call (by :func:`sequence_lengths`) and before the encoder.

        Parameters
        ----------
        x : Tensor of shape (B, N)
            Token ids, 0 as padding at the end of each row.

        Returns
        -------
        Tensor of shape (B,), int64

        Raises
        ------
        ValueError
            With ``validate_args=True``, for an empty row, a padding id before a token or a
            negative id.

        Examples
        --------
        >>> import torch
        >>> model = TreeLatentModel(BiLSTMArcScorer(10, 8, 8, 8), TreeGCNDecoder(10, 2, 8, 8))
        >>> model.sizes(torch.tensor([[3, 4, 0], [5, 0, 0]]))
        tensor([2, 1])
        """
        return sequence_lengths(x) if self.validate_args else _token_lengths(x)

    def predict_heads(self, x: torch.Tensor) -> torch.Tensor:
        """The MAP tree of each sentence, as the head of each word.

        Parameters
        ----------
        x : Tensor of shape (B, N)
            Token ids, 0 as padding at the end of each row.

        Returns
        -------
        Tensor of shape (B, N), int64
            The head of each word: 0 = the root, ``m`` = the m-th word (from 1), -1 on
            padding.

        Examples
        --------
        >>> import torch
        >>> encoder, decoder = BiLSTMArcScorer(10, 8, 8, 8), TreeGCNDecoder(10, 2, 8, 8)
        >>> model = TreeLatentModel(encoder, decoder, gradient="spigot")
        >>> x = torch.tensor([[3, 4, 0], [5, 6, 7]])  # two sentences, the first padded
        >>> heads = model.predict_heads(x)
        >>> heads.dtype, heads[0, 2].item()
        (torch.int64, -1)
        >>> torch.equal(heads[1], model.latent(x)[1, :, 1:].argmax(dim=0))  # the MAP tree's arcs
        True
        """
        lengths = self.sizes(x)
        with torch.no_grad():
            arcs = self.polytope.map(self.scores(x), lengths)
        return arcs_to_heads(arcs, lengths)

    def predict_latent(self, x: torch.Tensor) -> torch.Tensor:
        """The MAP tree of each sentence as heads: :meth:`predict_heads`.

        Parameters
        ----------
        x : Tensor of shape (B, N)
            Token ids, 0 as padding at the end of each row.

        Returns
        -------
        Tensor of shape (B, N), int64
            The head of each word (0 = the root), -1 on padding.

        Examples
        --------
        >>> import torch
        >>> model = TreeLatentModel(BiLSTMArcScorer(10, 8, 8, 8), TreeGCNDecoder(10, 2, 8, 8))
        >>> x = torch.tensor([[3, 4, 0], [5, 6, 7]])
        >>> torch.equal(model.predict_latent(x), model.predict_heads(x))
        True
        """
        return self.predict_heads(x)

    def latent_features(self, x: torch.Tensor) -> torch.Tensor:
        """Each word's head marginals, word by word, as one row of features per sentence.

        Parameters
        ----------
        x : Tensor of shape (B, N)
            Token ids, 0 as padding at the end of each row.

        Returns
        -------
        Tensor of shape (B, N * (N + 1))
            Word ``m``'s block of ``N + 1`` columns gives the probability of each head (root
            first); zero on padding.

        Examples
        --------
        >>> import torch
        >>> model = TreeLatentModel(BiLSTMArcScorer(10, 8, 8, 8), TreeGCNDecoder(10, 2, 8, 8))
        >>> features = model.latent_features(torch.tensor([[3, 4, 0]]))
        >>> features.shape, features.reshape(3, 4).sum(dim=1).round(decimals=4)
        (torch.Size([1, 12]), tensor([1., 1., 0.]))
        """
        return self.marginals(x)[:, :, 1:].transpose(1, 2).flatten(1)
