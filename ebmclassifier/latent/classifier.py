"""LatentStructureClassifier: a classifier with a discrete latent, learnt by surrogate gradients."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNet
from torch import nn

from .._estimator.base import EBMClassifierBase
from .._estimator.parameter_docs import PARAMETER_DOCS
from .._utils.docstrings import fill_docstring
from .._utils.parameters import ParamChecker
from .._utils.streamed import tensors_of_dataset
from ..losses import per_sample_criterion
from ..nn import module_kwargs_problem, network_kwargs
from ._structures import STRUCTURES
from .methods import GRADIENT_ALIASES, GRADIENTS, batch_polytope_latent

__all__ = ["LatentStructureClassifier"]


def _nan_unless_finite(loss: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """``loss``, or nan when a score is not finite, so the divergence check sees a diverged
    encoder even where the decoder's loss stays finite (no host sync: the check reads the loss).
    """
    return torch.where(torch.isfinite(scores).all(), loss, torch.full_like(loss, torch.nan))


@fill_docstring(PARAMETER_DOCS)
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
        :func:`~ebmclassifier.latent.trees.latent.tree_latent`), and ``n_latent`` is unused.
        Ids stay 64-bit integers. ``fit`` learns the ids it sees (``vocabulary_``), so the
        embeddings are as large as that vocabulary, not as the largest id; an id that ``fit``
        did not see is read as one reserved out-of-vocabulary token, whose embedding ``fit``
        never trains (it keeps its initial value).
    gradient : str, default="spigot_ce"
        One of :data:`~ebmclassifier.latent.methods.GRADIENTS` (the surrogates and relaxations
        named above), or one of their aliases
        (:data:`~ebmclassifier.latent.methods.GRADIENT_ALIASES`: the SPIGOT paper's names for
        trees); see :mod:`ebmclassifier.latent.methods`.
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
        parameters, and ``n_features``, ``n_latent``, ``input_shape`` when it takes them, and
        ``n_classes=n_latent`` (its number of outputs, so that :class:`~ebmclassifier.nn.MLP`
        and :class:`~ebmclassifier.nn.ConvNet` serve as encoders); so does an instance given
        ``encoder__*`` parameters, which skorch rebuilds from its class (as for ``decoder``
        and ``module``).
        For trees, ``None`` is :class:`~ebmclassifier.latent.trees.networks.BiLSTMArcScorer`
        (token ids -> arc scores); a class also receives ``vocab_size``.
    decoder : nn.Module class or instance, or None, default=None
        Called as ``decoder(x, z)`` with ``z`` of shape (n, K) on the simplex; returns logits.
        ``None`` is :class:`~ebmclassifier.latent.categorical.networks.BilinearDecoder` (one linear
        classifier per latent value). A class receives ``decoder__*`` parameters, and
        ``n_latent``, ``n_features``, ``n_classes``, ``input_shape`` when it takes them.
        For trees, ``decoder(x, z)`` takes arcs ``z`` of shape (n, N + 1, N + 1) and ``None``
        is :class:`~ebmclassifier.latent.trees.networks.TreeGCNDecoder` (a graph convolution
        over the tree); a class also receives ``vocab_size`` (the number of embedding rows:
        padding, the vocabulary, the out-of-vocabulary id). ``encoder__*`` and ``decoder__*``
        parameters that the class does not take are a ``ValueError`` at ``fit``.
    ood_method : {"energy", "max_softmax", "approx_mass"}, default="energy"
        The default method of :meth:`score_ood` and :meth:`score_samples`. ``"approx_mass"``
        (the norm of the energy's input gradient) needs continuous input: it is refused for
        ``structure="dependency_tree"``, whose token ids have no gradient.
    module : None, default=None
        Must stay None: the network is built from ``encoder`` and ``decoder``, and
        ``module__*`` parameters are refused.
    criterion : torch.nn.CrossEntropyLoss, default=torch.nn.CrossEntropyLoss
        Must stay the cross-entropy: the surrogates need per-sample losses.
    {training}
    {class_weight}
    {engine}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    {class_prior}
    n_features_in_ : int
    module_ : CategoricalLatentModel
        ``module_.encoder``, ``module_.decoder``; ``module_(x)`` gives the prediction logits.
        A :class:`~ebmclassifier.latent.trees.networks.TreeLatentModel` for trees.
    device_ : torch.device
    vocabulary_ : ndarray of shape (n_ids,), int64
        For ``structure="dependency_tree"``: the token ids seen in ``fit``, sorted. The
        networks read ``vocabulary_[i]`` as index ``i + 1`` and any other id > 0 as the
        out-of-vocabulary index ``len(vocabulary_) + 1``.

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
    # A tree model's embeddings index its vocabulary: save it with them.
    _saved_attributes = (*EBMClassifierBase._saved_attributes, "vocabulary_")

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

    def _structure(self):
        """What ``structure`` changes (input, network, names): its entry of STRUCTURES.

        The categorical one while ``structure`` is not a valid name, so that checking the
        other parameters can still say what is wrong with them.
        """
        valid = isinstance(self.structure, str) and self.structure in STRUCTURES
        return STRUCTURES[self.structure if valid else "categorical"]

    def _validate_own_params(self, check: ParamChecker) -> None:
        super()._validate_own_params(check)
        check.integer("n_latent", 1)
        check.choice("structure", tuple(STRUCTURES))
        if not isinstance(self.projective, (bool, np.bool_)):
            check.add(
                "The 'projective' parameter of LatentStructureClassifier must be a bool. "
                f"Got {self.projective!r} instead."
            )
        check.choice("gradient", (*GRADIENTS, *GRADIENT_ALIASES))
        check.real("step_size", 0.0, low_open=True)
        check.integer("inner_steps", 1)
        check.real("temperature", 0.0, low_open=True)
        self._check_network_params(check)
        if self.criterion is not nn.CrossEntropyLoss:
            check.add(
                "LatentStructureClassifier trains with the per-sample cross-entropy (the "
                "surrogate gradients need it); the 'criterion' parameter must be "
                f"torch.nn.CrossEntropyLoss. Got {self.criterion!r} instead."
            )
        if not self._structure().continuous_input and self.ood_method == "approx_mass":
            check.add(
                "The 'ood_method' parameter of LatentStructureClassifier cannot be "
                f"'approx_mass' with structure={self.structure!r}: token ids have no gradient. "
                "Use 'energy' or 'max_softmax'."
            )

    def _check_network_params(self, check: ParamChecker) -> None:
        """``encoder``, ``decoder`` and their routed parameters; no ``module`` at all."""
        structure = self._structure()
        for name in ("encoder", "decoder"):
            value = getattr(self, name)
            if value is None:
                value = getattr(structure, f"default_{name}")
            elif not isinstance(value, nn.Module) and not (
                isinstance(value, type) and issubclass(value, nn.Module)
            ):
                check.add(
                    f"The {name!r} parameter of LatentStructureClassifier must be None, a "
                    f"torch.nn.Module subclass or instance. Got {value!r} instead."
                )
                continue
            cls = value if isinstance(value, type) else type(value)
            problem = module_kwargs_problem(
                type(self).__name__, name, cls, self.get_params_for(name)
            )
            if problem is not None:
                check.add(problem)
        if self.module is not None or self.get_params_for("module"):
            routed = [f"module__{k}" for k in self.get_params_for("module")]
            check.add(
                "LatentStructureClassifier builds its network from 'encoder' and 'decoder'; "
                "the 'module' parameter must be None and module__* parameters are not used "
                f"(use encoder__* or decoder__*). Got module={self.module!r}"
                + (f" and {routed!r}" if routed else "")
                + " instead."
            )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # transform() gives float32 marginals whatever the input's dtype.
        tags.transformer_tags.preserves_dtype = []
        return tags

    # ------------------------------------------------------------------ the network

    def _component(self, name: str, available: dict, default_kwargs: dict):
        component = getattr(self, name)
        kwargs = self.get_params_for(name)
        if component is None:
            default = getattr(self._structure(), f"default_{name}")
            component, kwargs = default, {**default_kwargs, **kwargs}
        kwargs = network_kwargs(component, kwargs, available)
        return self._built_network(component, kwargs, f"n_latent, or the {name}__* parameters")

    def initialize_module(self):
        """Build ``module_`` from ``encoder`` and ``decoder``, fresh for the data's shape.

        A :class:`~ebmclassifier.latent.categorical.networks.CategoricalLatentModel` for
        ``structure="categorical"``, a :class:`~ebmclassifier.latent.trees.networks.TreeLatentModel`
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
        ('CategoricalLatentModel', 'BilinearDecoder')
        >>> tuple(clf.module_.decoder.weight.shape)  # (n_latent, n_classes, n_features)
        (3, 2, 10)
        """
        # The base builds ``module_`` from ``module``; here it is assembled from the encoder
        # and the decoder instead, so the base's builder is not called.
        if not hasattr(self, "input_shape_"):
            raise RuntimeError(self._no_network_yet("initialize()"))
        structure = self._structure()
        encoder = self._component(
            "encoder", structure.encoder_sizes(self), structure.encoder_defaults(self)
        )
        decoder = self._component("decoder", structure.sizes(self), {})
        self.module_ = structure.network(self, encoder, decoder)
        return self

    # Input is checked where the base validates X, for fitting and for inference; token ids
    # are read from the user's array, not from the base's float32 copy.
    def _compiled_modules(self) -> list[nn.Module]:
        """``compile=True`` compiles the encoder and the decoder, which the loss calls apart;
        the surrogate between them (MAP, projections, sampling) runs as it is."""
        return [self.module_.encoder, self.module_.decoder]

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        checked = super()._validate_X(X, reset=reset)
        return self._structure().prepare_input(self, X, checked, reset)

    def _validate_training_data(self, X, y, *, reset: bool, classes=None):
        checked, y = super()._validate_training_data(X, y, reset=reset, classes=classes)
        X = tensors_of_dataset(X, None)[0]  # a TensorDataset's ids are its first tensor
        return self._structure().prepare_input(self, X, checked, reset, training=True), y

    def _accepts_streamed_input(self) -> bool:
        """Float samples (``"categorical"``) are read in batches when they come as a
        ``Dataset``, a memmap or ``uint8`` images; token ids (trees) come as an array."""
        return self._structure().continuous_input

    def _as_network_input(self, x: torch.Tensor) -> torch.Tensor:
        """A batch on ``device_``: float32, or the int64 token ids of a tree model as they are."""
        if not self._structure().continuous_input:
            return x.to(self.device_)
        return super()._as_network_input(x)

    def _input_of_weighted_rows(self, X: np.ndarray, positive: np.ndarray) -> np.ndarray:
        # a tree model's vocabulary is that of the rows of positive weight
        return self._structure().input_of_weighted_rows(self, X, positive)

    # ------------------------------------------------------------------ training

    def compute_loss(self, X, y, training, sample_weight=None):
        """The cross-entropy of one batch at the latent chosen by the encoder.

        In training the latent comes from the surrogate chosen by ``gradient``, so that the
        encoder receives a gradient through the argmax; in validation
        (``training=False``) it is the deterministic latent of prediction.

        Parameters
        ----------
        X : Tensor of shape ``(n, *input_shape)``, on ``self.device_``
            float32, or int64 indices of the token ids for ``structure="dependency_tree"``.
        y : Tensor of shape (n,), int64 labels in ``0..n_classes-1``
        training : bool
            ``False`` during validation: the deterministic latent, no surrogate.
        sample_weight : Tensor of shape (n,) or None, default=None
            float32 weights of the batch (``sample_weight`` times ``class_weight``). The
            surrogates still work on per-sample gradients ``gamma_i = dl_i/dz_i``; the encoder
            receives their weighted mean, ``sum_i w_i (dl_i/ds_i) / sum_i w_i``, and the
            score-function baseline follows the weighted mean of the batch losses.

        Returns
        -------
        loss : scalar Tensor
            The batch mean of the per-sample cross-entropy (:meth:`classification_loss`), weighted
            with ``sample_weight`` (``sum_i w_i l_i / sum_i w_i``); nan when
            an encoder score is not finite, so that the fit stops with
            :class:`~ebmclassifier.DivergenceError`.
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
            with torch.no_grad():
                logits = model(X)
            return self.classification_loss(logits, y, sample_weight), logits
        scores = model.scores(X)  # float32 for the surrogates, whatever the precision
        z = self._training_latent(model, X, y, scores, sample_weight)
        logits = model.decoder(X, z)
        loss = self.classification_loss(logits, y, sample_weight)
        return _nan_unless_finite(loss, scores), logits

    def _training_latent(
        self, model, X, y, scores: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The latent of the training step, through the surrogate chosen by ``gradient``."""

        def per_sample_loss(z: torch.Tensor) -> torch.Tensor:
            # the training criterion's own per-sample losses (label smoothing, class weights):
            # gamma_fn is then the gradient that the training loss sends to z
            return per_sample_criterion(self.criterion_, model.decoder(X, z), y)

        return batch_polytope_latent(
            model.polytope,
            scores,
            model.sizes(X),
            self.gradient,
            per_sample_loss,
            sample_weight,
            step_size=self.step_size,
            inner_steps=self.inner_steps,
            temperature=self.temperature,
            baseline=model.baseline,
            generator=self._generator("latent", scores.device),  # Gumbel, score function
        )

    # ------------------------------------------------------------------ the latent

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
        check_is_fitted(self)
        return self._map_batches(X, self._as_inference(self.module_.predict_latent))

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
        check_is_fitted(self)
        return self._map_batches(X, self._as_inference(self.module_.latent_features))

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of the columns of :meth:`transform`, for ``set_output`` and pipelines.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Ignored but checked: the columns are the latent's, not the input's. When given, it
            must name the ``n_features_in_`` input features (as ``feature_names_in_`` if the
            estimator was fitted on a DataFrame).

        Returns
        -------
        ndarray of str objects
            ``latentstructureclassifier0`` .. ``latentstructureclassifier{K-1}`` (scikit-learn's
            naming of K components); for ``structure="dependency_tree"``,
            ``latentstructureclassifier_token{m}_head{h}``: the probability that token ``m``
            (from 1) has head ``h`` (0 = the root).

        Examples
        --------
        >>> from ebmclassifier import LatentStructureClassifier
        >>> from ebmclassifier.datasets import make_latent_clusters
        >>> X, y, z = make_latent_clusters(60, n_clusters=3, n_features=10, random_state=0)
        >>> clf = LatentStructureClassifier(n_latent=3, max_epochs=1, random_state=0).fit(X, y)
        >>> clf.get_feature_names_out().tolist()
        ['latentstructureclassifier0', 'latentstructureclassifier1', 'latentstructureclassifier2']
        >>> clf.set_output(transform="pandas").transform(X[:2]).shape
        (2, 3)
        """
        check_is_fitted(self)
        if input_features is not None:
            expected = getattr(self, "feature_names_in_", None)
            given = np.asarray(input_features, dtype=object)
            if len(given) != self.n_features_in_ or (
                expected is not None and not np.array_equal(given, expected)
            ):
                raise ValueError(
                    f"input_features must name the {self.n_features_in_} features seen in fit"
                    + ("" if expected is None else f" ({expected.tolist()!r})")
                    + f"; got {given.tolist()!r}."
                )
        return np.asarray(self._structure().feature_names(self), dtype=object)

    def score_ood(self, X, method: str | None = None) -> np.ndarray:
        """Out-of-distribution score of each sample; see the base class.

        ``"approx_mass"``, the norm of the energy's gradient with respect to the input, needs
        continuous input: for ``structure="dependency_tree"`` (token ids) it is a
        ``ValueError``.

        Parameters
        ----------
        X : array-like
        method : {"energy", "max_softmax", "approx_mass"} or None, default=None
            ``None`` uses the ``ood_method`` parameter.

        Returns
        -------
        ndarray of shape (n_samples,)
            The higher, the more likely out-of-distribution.

        Raises
        ------
        ValueError
            For ``method="approx_mass"`` on token ids.

        Examples
        --------
        >>> from ebmclassifier import LatentStructureClassifier
        >>> from ebmclassifier.datasets import make_latent_trees
        >>> X, y, heads = make_latent_trees(16, max_length=4, random_state=0)
        >>> clf = LatentStructureClassifier(structure="dependency_tree", max_epochs=1,
        ...                                 random_state=0).fit(X, y)
        >>> clf.score_ood(X).shape  # the energy
        (16,)
        >>> clf.score_ood(X, method="approx_mass")
        Traceback (most recent call last):
        ...
        ValueError: score_ood(method='approx_mass') differentiates the energy with respect to \
the input, and the token ids of structure='dependency_tree' have no gradient; use \
method='energy' or 'max_softmax'.
        """
        check_is_fitted(self)
        chosen = self.ood_method if method is None else method
        if chosen == "approx_mass" and not self._structure().continuous_input:
            raise ValueError(
                "score_ood(method='approx_mass') differentiates the energy with respect to the "
                f"input, and the token ids of structure={self.structure!r} have no gradient; "
                "use method='energy' or 'max_softmax'."
            )
        return super().score_ood(X, method)
