"""What LatentStructureClassifier does differently for each ``structure``.

The estimator looks its structure up here once per call (``STRUCTURES[structure]``) instead of
testing ``structure`` wherever the two differ: how input is read, which network and default
encoder and decoder it builds, and how the columns of ``transform`` are named. Everything else
(training, the surrogates, prediction) is generic over the network's polytope.
"""

from __future__ import annotations

from math import prod

import numpy as np
import torch

from ..nn import MLP
from .categorical.networks import BilinearDecoder, CategoricalLatentModel
from .trees.networks import BiLSTMArcScorer, TreeGCNDecoder, TreeLatentModel
from .trees.tokens import as_token_ids, encode_tokens, warn_unseen_tokens


class Categorical:
    """One of ``n_latent`` values: flat or image-shaped float input, the simplex."""

    #: ``score_ood(method="approx_mass")`` differentiates the energy w.r.t. the input.
    continuous_input = True
    default_encoder = MLP
    default_decoder = BilinearDecoder

    def prepare_input(
        self, estimator, X, checked: np.ndarray, reset: bool, training: bool = False
    ) -> np.ndarray:
        """The input as the network takes it, from the base's float32 validation."""
        return checked

    def input_of_weighted_rows(self, estimator, X: np.ndarray, positive: np.ndarray):
        """The prepared training input once the rows of positive weight are known."""
        return X

    def sizes(self, estimator) -> dict:
        """The data-dependent arguments an encoder or decoder class may take."""
        return {
            "n_features": prod(estimator.input_shape_),
            "n_latent": estimator.n_latent,
            "n_classes": len(estimator.classes_),
            "input_shape": estimator.input_shape_,
        }

    def encoder_sizes(self, estimator) -> dict:
        """What an encoder class may take: the encoder scores the ``n_latent`` values, so a
        classifier network (``MLP``, ``ConvNet``) gets ``n_classes=n_latent`` outputs."""
        return {**self.sizes(estimator), "n_classes": estimator.n_latent}

    def encoder_defaults(self, estimator) -> dict:
        """Arguments of the default encoder: a linear map to the ``n_latent`` scores."""
        n_features = prod(estimator.input_shape_)
        return {"n_features": n_features, "n_classes": estimator.n_latent, "hidden_sizes": ()}

    def network(self, estimator, encoder, decoder) -> CategoricalLatentModel:
        return CategoricalLatentModel(encoder, decoder, estimator.gradient, estimator.temperature)

    def feature_names(self, estimator) -> list[str]:
        """``<class name>0 .. <class name>{K-1}``, scikit-learn's names for K components."""
        prefix = type(estimator).__name__.lower()
        return [f"{prefix}{k}" for k in range(estimator.n_latent)]


class DependencyTree(Categorical):
    """A dependency tree over the tokens of a sequence: integer token ids, the tree polytope.

    ``fit`` learns the ids it sees (``vocabulary_``; a warm-started fit keeps it with the
    network); the networks get compact indices: 0 for padding, ``i + 1`` for ``vocabulary_[i]``
    and ``len(vocabulary_) + 1`` for every id that ``fit`` did not see (the out-of-vocabulary
    index).
    """

    continuous_input = False
    default_encoder = BiLSTMArcScorer
    default_decoder = TreeGCNDecoder

    def prepare_input(
        self, estimator, X, checked: np.ndarray, reset: bool, training: bool = False
    ) -> np.ndarray:
        if isinstance(X, torch.Tensor):
            X = X.detach().cpu().numpy()
        ids = as_token_ids(X)  # the user's ids, not their float32 copy (ids > 2**24 collide)
        # reset is the base's decision to build a new network (not a warm start, not a later
        # partial_fit): only then is there a new vocabulary for its embeddings to index
        if reset:
            estimator.vocabulary_ = np.unique(ids[ids > 0])
        elif training:
            warn_unseen_tokens(ids, estimator.vocabulary_)  # a later partial_fit, a warm start
        vocabulary = estimator.vocabulary_
        return encode_tokens(ids, vocabulary, oov_index=len(vocabulary) + 1)

    def input_of_weighted_rows(self, estimator, X: np.ndarray, positive: np.ndarray):
        """The vocabulary of the ``positive`` rows only, so that a weight of 0 is a dropped row:
        an id seen only in rows of weight 0 becomes out-of-vocabulary. ``X`` holds the indices
        of the vocabulary of all rows (the out-of-vocabulary index cannot occur yet).
        """
        used = np.unique(X[positive])
        used = used[used > 0]
        lookup = np.full(len(estimator.vocabulary_) + 2, len(used) + 1, dtype=X.dtype)
        lookup[0] = 0
        lookup[used] = np.arange(1, len(used) + 1)
        estimator.vocabulary_ = estimator.vocabulary_[used - 1]
        return lookup[X]

    def sizes(self, estimator) -> dict:
        return {
            "vocab_size": len(estimator.vocabulary_) + 2,  # padding and out-of-vocabulary
            "n_classes": len(estimator.classes_),
            "input_shape": estimator.input_shape_,
        }

    def encoder_sizes(self, estimator) -> dict:
        return self.sizes(estimator)  # arc scores, whatever n_latent says

    def encoder_defaults(self, estimator) -> dict:
        return {}

    def network(self, estimator, encoder, decoder) -> TreeLatentModel:
        return TreeLatentModel(
            encoder,
            decoder,
            estimator.gradient,
            bool(estimator.projective),
            estimator.temperature,
            validate_args=False,  # X was checked once, by prepare_input
        )

    def feature_names(self, estimator) -> list[str]:
        """``<class name>_token{m}_head{h}``: word ``m`` (from 1) has head ``h`` (0 = root)."""
        prefix = type(estimator).__name__.lower()
        n_tokens = estimator.input_shape_[0]
        return [
            f"{prefix}_token{m}_head{h}"
            for m in range(1, n_tokens + 1)
            for h in range(n_tokens + 1)
        ]


#: The structure of each value of ``structure``.
STRUCTURES = {"categorical": Categorical(), "dependency_tree": DependencyTree()}
