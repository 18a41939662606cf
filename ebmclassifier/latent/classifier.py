"""LatentStructureClassifier: a classifier with a discrete latent, learnt by surrogate gradients."""

from __future__ import annotations

import inspect
from math import prod

import numpy as np
import torch
from sklearn.base import TransformerMixin
from skorch import NeuralNet
from torch import nn
from torch.autograd.function import once_differentiable

from .._base import EBMClassifierBase
from .._validation import ParamChecker
from ..nn import MLP
from .categorical import GRADIENTS, categorical_latent
from .networks import BilinearDecoder, LatentModel
from .score_function import RunningMeanBaseline
from .tree_latent import tree_latent
from .tree_modules import BiLSTMArcScorer, TreeGCNDecoder, TreeLatentModel, sequence_lengths

__all__ = ["LatentStructureClassifier"]

STRUCTURES = ("categorical", "dependency_tree")


class _ScaleGrad(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by ``factor``."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return grad * ctx.factor, None


def _accepted_kwargs(cls, available: dict) -> dict:
    """The entries of ``available`` that ``cls.__init__`` takes by name."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in available.items() if k in params}


class LatentStructureClassifier(TransformerMixin, EBMClassifierBase):
    """Classifier ``y = g(x, z)`` with a discrete latent ``z`` chosen by an encoder ``s = f(x)``.

    The forward pass takes the MAP latent ``z_hat = onehot(argmax(s))`` (or a relaxation of it)
    and the decoder predicts from ``(x, z)``. The argmax has no useful gradient, so the encoder
    learns through a surrogate chosen by ``gradient`` [1]_: STE-I, SPIGOT, SPIGOT-CE,
    SPIGOT-EG, the relaxations softmax / sparsemax / Gumbel-softmax / straight-through Gumbel,
    or the score-function estimator. The decoder learns by ordinary backpropagation at the
    latent the forward pass chose.

    Training loss: the batch mean of the per-sample cross-entropy. The surrogates work on
    per-sample gradients ``gamma_i = dl_i/dz_i`` (so ``step_size`` means the same for any batch
    size), and the encoder's gradient is averaged over the batch like the decoder's.
    Validation loss and prediction use the deterministic latent (no noise, no sampling): the
    relaxations keep their relaxed point, every other method the argmax.

    Parameters
    ----------
    n_latent : int, default=3
        K, the number of latent values (clusters).
    structure : {"categorical", "dependency_tree"}, default="categorical"
        The latent's structure: one of K values (the simplex), or a dependency tree over the
        tokens of a sequence (the tree polytope; see :mod:`ebmclassifier.latent.trees`). For
        ``"dependency_tree"``, X is a 2-D array of integer token ids with 0 as padding at the
        end of each row; ``gradient`` names map to their tree counterparts (``"softmax"`` ->
        arc marginals, ``"sparsemax"`` -> SparseMAP, see
        :func:`~ebmclassifier.latent.tree_latent.tree_latent`), and ``n_latent`` is unused.
    gradient : str, default="spigot_ce"
        ``"ste"``, ``"spigot"``, ``"spigot_ce"``, ``"spigot_eg"``, ``"softmax"``,
        ``"sparsemax"``, ``"gumbel"``, ``"gumbel_st"`` or ``"sfe"``; see
        :func:`~ebmclassifier.latent.categorical.categorical_latent`.
    step_size : float, default=1.0
        ``eta``, the step of the surrogates' inner updates of ``z``.
    inner_steps : int, default=1
        ``k``, the number of inner updates of the surrogates.
    temperature : float, default=1.0
        ``tau`` of ``"gumbel"`` and ``"gumbel_st"``.
    projective : bool, default=True
        For ``structure="dependency_tree"``: projective trees (Eisner, inside-outside) or
        non-projective ones (Chu-Liu-Edmonds, matrix-tree theorem).
    encoder : nn.Module class or instance, or None, default=None
        Maps inputs to K scores. ``None`` is a linear map of the flattened input
        (:class:`~ebmclassifier.nn.MLP` with ``hidden_sizes=()``; pass
        ``encoder__hidden_sizes=(64,)`` for a hidden layer). A class receives ``encoder__*``
        parameters, and ``n_features``, ``n_latent``, ``input_shape`` when it takes them.
        For trees, ``None`` is :class:`~ebmclassifier.latent.tree_modules.BiLSTMArcScorer`
        (token ids -> arc scores); a class also receives ``vocab_size``.
    decoder : nn.Module class or instance, or None, default=None
        Called as ``decoder(x, z)`` with ``z`` of shape (n, K) on the simplex; returns logits.
        ``None`` is :class:`~ebmclassifier.latent.networks.BilinearDecoder` (one linear
        classifier per latent value). A class receives ``decoder__*`` parameters, and
        ``n_latent``, ``n_features``, ``n_classes``, ``input_shape`` when it takes them.
        For trees, ``decoder(x, z)`` takes arcs ``z`` of shape (n, N + 1, N + 1) and ``None``
        is :class:`~ebmclassifier.latent.tree_modules.TreeGCNDecoder` (a graph convolution
        over the tree); a class also receives ``vocab_size``.
    ood_method : {"energy", "max_softmax", "approx_mass"}, default="energy"
        The default method of :meth:`score_ood` and :meth:`score_samples`.
    lr, max_epochs, batch_size, optimizer, train_split, callbacks, device, random_state, \
verbose, **kwargs
        Shared by all estimators; see :class:`~ebmclassifier._base.EBMClassifierBase`.
        ``module`` must stay None (the network is built from ``encoder`` and ``decoder``),
        and ``criterion`` must stay the cross-entropy (the surrogates need per-sample losses).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    module_ : LatentModel
        ``module_.encoder``, ``module_.decoder``; ``module_(x)`` gives the prediction logits.
    device_ : torch.device

    References
    ----------
    .. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT:
       Surrogate Gradients for Latent Structure Learning", EMNLP.

    Examples
    --------
    >>> from ebmclassifier.datasets import make_latent_clusters
    >>> from ebmclassifier.latent.classifier import LatentStructureClassifier
    >>> X, y, z = make_latent_clusters(300, n_clusters=3, n_features=10, random_state=0)
    >>> clf = LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0).fit(X, y)
    >>> clf.predict_latent(X[:4]).shape, clf.transform(X[:4]).shape
    ((4,), (4, 3))
    """

    # The encoder and decoder take routed parameters (encoder__*, decoder__*), as module__*.
    prefixes_ = [*NeuralNet.prefixes_, "encoder", "decoder"]

    def __init__(
        self,
        n_latent: int = 3,
        *,
        structure: str = "categorical",
        gradient: str = "spigot_ce",
        step_size: float = 1.0,
        inner_steps: int = 1,
        temperature: float = 1.0,
        projective: bool = True,
        encoder=None,
        decoder=None,
        ood_method: str = "energy",
        **kwargs,
    ) -> None:
        module = kwargs.pop("module", None)
        super().__init__(module, ood_method=ood_method, **kwargs)
        self.n_latent = n_latent
        self.structure = structure
        self.gradient = gradient
        self.step_size = step_size
        self.inner_steps = inner_steps
        self.temperature = temperature
        self.projective = projective
        self.encoder = encoder
        self.decoder = decoder

    # ------------------------------------------------------------------ parameters

    def _validate_own_params(self, check: ParamChecker) -> None:
        super()._validate_own_params(check)
        check.integer("n_latent", 1)
        check.choice("structure", STRUCTURES)
        if not isinstance(self.projective, (bool, np.bool_)):
            check.add(
                "The 'projective' parameter of LatentStructureClassifier must be a bool. "
                f"Got {self.projective!r} instead."
            )
        check.choice("gradient", GRADIENTS)
        check.real("step_size", 0.0, low_open=True)
        check.integer("inner_steps", 1)
        check.real("temperature", 0.0, low_open=True)
        for name in ("encoder", "decoder"):
            value = getattr(self, name)
            if not (
                value is None
                or isinstance(value, nn.Module)
                or (isinstance(value, type) and issubclass(value, nn.Module))
            ):
                check.add(
                    f"The {name!r} parameter of LatentStructureClassifier must be None, a "
                    f"torch.nn.Module subclass or instance. Got {value!r} instead."
                )
        if self.module is not None:
            check.add(
                "LatentStructureClassifier builds its network from 'encoder' and 'decoder'; "
                f"the 'module' parameter must be None. Got {self.module!r} instead."
            )
        if self.criterion is not nn.CrossEntropyLoss:
            check.add(
                "LatentStructureClassifier trains with the per-sample cross-entropy (the "
                "surrogate gradients need it); the 'criterion' parameter must be "
                f"torch.nn.CrossEntropyLoss. Got {self.criterion!r} instead."
            )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # transform() gives float32 marginals whatever the input's dtype.
        tags.transformer_tags.preserves_dtype = []
        return tags

    # ------------------------------------------------------------------ the network

    def _component(self, name: str, default, available: dict, default_kwargs: dict):
        component = getattr(self, name)
        kwargs = self.get_params_for(name)
        if component is None:
            component, kwargs = default, {**default_kwargs, **kwargs}
        if not isinstance(component, nn.Module):
            kwargs = {**_accepted_kwargs(component, available), **kwargs}
        return self.initialized_instance(component, kwargs)

    def initialize_module(self):
        """Build ``module_`` from ``encoder`` and ``decoder``, fresh for the data's shape.

        A :class:`~ebmclassifier.latent.networks.LatentModel` for
        ``structure="categorical"``, a :class:`~ebmclassifier.latent.tree_modules.TreeLatentModel`
        for ``"dependency_tree"``; classes given as ``encoder`` or ``decoder`` receive the
        sizes they take (see the class parameters).

        Returns
        -------
        self
            The estimator, with a newly initialized ``module_``.

        Raises
        ------
        RuntimeError
            Before the data were seen (``initialize()`` without ``fit``).

        Examples
        --------
        >>> from ebmclassifier import LatentStructureClassifier
        >>> from ebmclassifier.datasets import make_latent_clusters
        >>> X, y, z = make_latent_clusters(60, n_clusters=3, n_features=10, random_state=0)
        >>> clf = LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0).fit(X, y)
        >>> clf.initialize_module() is clf
        True
        >>> type(clf.module_).__name__, type(clf.module_.decoder).__name__
        ('LatentModel', 'BilinearDecoder')
        >>> tuple(clf.module_.decoder.weight.shape)  # (n_latent, n_classes, n_features)
        (3, 2, 10)
        """
        # The base builds ``module_`` from ``module``; here it is assembled from the encoder
        # and the decoder instead, so the base's builder is not called.
        if not hasattr(self, "input_shape_"):
            raise RuntimeError(
                "LatentStructureClassifier builds its network from the data; call fit(X, y) "
                "instead of initialize()."
            )
        if self.structure == "dependency_tree":
            return self._initialize_tree_module()
        n_features = prod(self.input_shape_)
        available = {
            "n_features": n_features,
            "n_latent": self.n_latent,
            "n_classes": len(self.classes_),
            "input_shape": self.input_shape_,
        }
        encoder = self._component(
            "encoder",
            MLP,
            available,
            {"n_features": n_features, "n_classes": self.n_latent, "hidden_sizes": ()},
        )
        decoder = self._component("decoder", BilinearDecoder, available, {})
        self.module_ = LatentModel(encoder, decoder, self.gradient, self.temperature)
        return self

    def _initialize_tree_module(self):
        vocab_size = int(self.input_max_.max()) + 1
        available = {
            "vocab_size": vocab_size,
            "n_classes": len(self.classes_),
            "input_shape": self.input_shape_,
        }
        encoder = self._component("encoder", BiLSTMArcScorer, available, {})
        decoder = self._component("decoder", TreeGCNDecoder, available, {})
        self.module_ = TreeLatentModel(
            encoder,
            decoder,
            self.gradient,
            bool(self.projective),
            self.temperature,
            RunningMeanBaseline(),
        )
        return self

    # Token ids are checked where the base validates X, for fitting and for inference.
    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        X = super()._validate_X(X, reset=reset)
        if self.structure == "dependency_tree":
            _check_token_ids(X)
        return X

    def _validate_training_data(self, X, y, *, reset: bool, classes=None):
        X, y = super()._validate_training_data(X, y, reset=reset, classes=classes)
        if self.structure == "dependency_tree":
            _check_token_ids(X)
        return X, y

    # ------------------------------------------------------------------ training

    def compute_loss(self, X, y, training):
        """The cross-entropy of one batch at the latent chosen by the encoder.

        In training the latent comes from the surrogate chosen by ``gradient``, so that the
        encoder receives a gradient through the argmax; in validation
        (``training=False``) it is the deterministic latent of prediction.

        Parameters
        ----------
        X : Tensor of shape ``(n, *input_shape)``, float32, on ``self.device_``
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        training : bool
            ``False`` during validation: the deterministic latent, no surrogate.

        Returns
        -------
        loss : scalar Tensor
            The batch mean of the per-sample cross-entropy.
        logits : Tensor of shape (n, n_classes)

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier import LatentStructureClassifier
        >>> from ebmclassifier.datasets import make_latent_clusters
        >>> X, y, z = make_latent_clusters(60, n_clusters=3, n_features=10, random_state=0)
        >>> clf = LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0).fit(X, y)
        >>> Xt = torch.tensor(X, dtype=torch.float32, device=clf.device_)
        >>> yt = torch.tensor(y, device=clf.device_)
        >>> loss, logits = clf.compute_loss(Xt, yt, training=False)  # the MAP latent
        >>> bool(torch.allclose(logits, clf.module_(Xt)))
        True
        >>> clf.module_.zero_grad()
        >>> loss, logits = clf.compute_loss(Xt, yt, training=True)
        >>> loss.backward()  # SPIGOT-CE carries a gradient past the argmax to the encoder
        >>> bool(clf.module_.encoder.net[1].weight.grad.abs().sum() > 0)
        True
        """
        model = self.module_
        if not training:
            logits = model(X)
            return nn.functional.cross_entropy(logits, y), logits

        def per_sample_loss(z: torch.Tensor) -> torch.Tensor:
            return nn.functional.cross_entropy(model.decoder(X, z), y, reduction="none")

        n = len(X)
        # The surrogates pull back per-sample gradients gamma_i = dl_i/dz_i (so step_size is
        # per sample); the scaling around them turns the batch mean into that and back.
        scores = _ScaleGrad.apply(model.encoder(X), 1.0 / n)
        options = {
            "step_size": self.step_size,
            "inner_steps": self.inner_steps,
            "temperature": self.temperature,
            "baseline": model.baseline,
        }
        if self.structure == "dependency_tree":
            lengths = sequence_lengths(X)
            z = tree_latent(
                scores,
                lengths,
                self.gradient,
                per_sample_loss,
                projective=model.projective,
                **options,
            )
        else:
            z = categorical_latent(scores, self.gradient, per_sample_loss, **options)
        z = _ScaleGrad.apply(z, float(n))
        logits = model.decoder(X, z)
        return nn.functional.cross_entropy(logits, y), logits

    # ------------------------------------------------------------------ the latent

    def _scores(self, xb: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.module_.encoder(xb)

    def predict_latent(self, X) -> np.ndarray:
        """The MAP latent of each sample: ``argmax_k s_k(x)``, or the MAP tree's heads.

        Parameters
        ----------
        X : array-like of the training input's sample shape

        Returns
        -------
        ndarray of shape (n_samples,), int64 in ``0..n_latent-1``
            For ``structure="categorical"``.
        ndarray of shape (n_samples, n_tokens), int64
            For ``structure="dependency_tree"``: the head of each token (0 = the root, ``m``
            = the m-th token, counting from 1), -1 on padding.

        Examples
        --------
        >>> import numpy as np
        >>> from ebmclassifier import LatentStructureClassifier
        >>> from ebmclassifier.datasets import make_latent_clusters
        >>> X, y, z = make_latent_clusters(60, n_clusters=3, n_features=10, random_state=0)
        >>> clf = LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0).fit(X, y)
        >>> latent = clf.predict_latent(X)
        >>> latent.shape, latent.dtype, set(latent) <= {0, 1, 2}
        ((60,), dtype('int64'), True)
        >>> np.array_equal(latent, clf.transform(X).argmax(axis=1))  # the mode of the marginals
        True
        """
        if self.structure == "dependency_tree":
            return self._map_batches(X, self.module_.predict_heads)
        return self._map_batches(X, lambda xb: self._scores(xb).argmax(dim=-1))

    def transform(self, X) -> np.ndarray:
        """Latent marginals ``softmax(s(x))``: usable as a feature step of a Pipeline.

        Parameters
        ----------
        X : array-like of the training input's sample shape

        Returns
        -------
        ndarray of shape (n_samples, n_latent)
            Rows on the probability simplex (``structure="categorical"``).
        ndarray of shape (n_samples, n_tokens * (n_tokens + 1))
            For ``structure="dependency_tree"``: the arc marginals, token by token, each
            token's block of ``n_tokens + 1`` giving the probability of each head (root
            first); zero on padding.

        Examples
        --------
        >>> import numpy as np
        >>> from ebmclassifier import LatentStructureClassifier
        >>> from ebmclassifier.datasets import make_latent_clusters
        >>> X, y, z = make_latent_clusters(60, n_clusters=3, n_features=10, random_state=0)
        >>> clf = LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0).fit(X, y)
        >>> marginals = clf.transform(X)
        >>> marginals.shape, marginals.dtype, np.allclose(marginals.sum(axis=1), 1)
        ((60, 3), dtype('float32'), True)
        """
        if self.structure == "dependency_tree":

            def head_marginals(xb):
                return self.module_.marginals(xb)[:, :, 1:].transpose(1, 2).flatten(1)

            return self._map_batches(X, head_marginals)
        return self._map_batches(X, lambda xb: torch.softmax(self._scores(xb), dim=-1))


def _check_token_ids(X: np.ndarray) -> None:
    """Token-id sequences: 2-D, non-negative integers, padding (0) only at the end, none empty."""
    if X.ndim != 2:
        raise ValueError(
            "structure='dependency_tree' needs X of shape (n_samples, n_tokens) of integer "
            f"token ids; got an array of shape {X.shape!r}."
        )
    if np.any(X < 0) or np.any(X != np.round(X)):
        raise ValueError(
            "structure='dependency_tree' needs non-negative integer token ids (0 = padding) in "
            "X; got negative or fractional values."
        )
    try:
        sequence_lengths(torch.as_tensor(X))
    except ValueError as error:
        raise ValueError(f"structure='dependency_tree': {error}") from None
