"""ProductOfExperts: a product or a mixture of classifiers over one label set.

A thin face over the energies of :mod:`ebmclassifier.compose.energies`
(:func:`~ebmclassifier.compose.product_logits`, :func:`~ebmclassifier.compose.mixture_logits`),
beside them in the composition wing; the experts are held as in ``_experts.py``.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_consistent_length, column_or_1d

from .._estimator.inference import InferenceMixin, OODDecisionMixin
from .._utils.parameters import ParamChecker
from ..energy import OOD_METHODS
from ._experts import ExpertsBase
from .energies import mixture_logits, product_logits

__all__ = ["ProductOfExperts"]


class ProductOfExperts(OODDecisionMixin, InferenceMixin, ClassifierMixin, ExpertsBase):
    """Product or mixture of classifiers over the same labels, with their energies composed.

    Each expert ``k`` has logits ``f_k(x)`` (so ``log p_k(y|x) = f_k(x)[y] + E_k(x)`` with
    ``E_k(x) = -logsumexp_y f_k(x)[y]``). With weights ``w_k``:

    - ``combine="product"`` (conjunction, a product of experts; Hinton, 2002): logits
      ``sum_k w_k f_k(x)``, so ``predict_proba = softmax(sum_k w_k f_k)`` and
      ``energy(X) = -logsumexp_y sum_k w_k f_k(x)[y]``. No renormalisation of the experts is
      needed; a negative weight subtracts an expert (Du, Li & Mordatch, 2020).
    - ``combine="mixture"`` (disjunction; with experts that differ only in their seed, the
      deep ensemble of Lakshminarayanan et al., 2017): ``p(y|x) = sum_k w_k p_k(y|x) / sum_k w_k``
      and ``energy(X) = -logsumexp_k (log w_k - E_k(x))`` with the weights normalised to sum
      to one; see :func:`~ebmclassifier.compose.mixture_logits`. Weights must be
      non-negative.

    ``fit`` fits a clone of each expert on ``(X, y)``, as
    :class:`~sklearn.ensemble.VotingClassifier` does; pass an already fitted expert as
    :class:`sklearn.frozen.FrozenEstimator` ``(expert)`` and it is used as it is. Every score
    (``energy``, ``score_ood`` with its three methods, ``score_samples``) is that of the
    composed logits; ``"approx_mass"`` differentiates the composed energy with respect to the
    input. The input is validated once, by this estimator; the experts' networks then run on
    the same tensors.

    Parameters
    ----------
    estimators : list of (str, estimator) pairs
        The experts: the library's estimators (anything whose fitted ``module_`` maps a batch
        to logits), all over the same label set and input. Each must take the float32 samples
        as they are: ``NGEBMClassifier``, ``JEMClassifier``,
        ``LatentStructureClassifier(structure="categorical")``; the token ids of
        ``structure="dependency_tree"`` are refused at ``fit`` with a ``TypeError``. Their
        parameters are reachable as ``name__param``
        (``GridSearchCV(poe, {"expert__beta": [0.1, 0.5]})``).
    weights : array-like of shape (n_experts,) or None, default=None
        ``w_k``; ``None`` weighs every expert 1. Any finite numbers for the product;
        non-negative with a positive sum for the mixture. Read by ``fit``.
    combine : {"product", "mixture"}, default="product"
    ood_method : {"energy", "max_softmax", "approx_mass"}, default="energy"
        The default method of :meth:`score_ood` and :meth:`score_samples`.
    batch_size : int, default=256
        Rows per batch at inference.

    Attributes
    ----------
    estimators_ : list of estimators
        The fitted experts, in the order of ``estimators``.
    named_estimators_ : sklearn.utils.Bunch
        The fitted experts by name.
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Samples of each class in the ``y`` of ``fit``, each counted with its ``sample_weight``.
    class_prior_ : ndarray of shape (n_classes,)
        ``class_count_`` normalised, which ``DistributionalConstraint`` reads: the prior that a
        ``"mixture"`` of experts trained on ``y`` carries; a ``"product"`` carries no one prior.
    weights_ : ndarray of shape (n_experts,)
    n_features_in_ : int
    input_shape_ : tuple of int
        The shape of one sample.

    References
    ----------
    .. [1] Hinton, G. E. "Training Products of Experts by Minimizing Contrastive Divergence".
       Neural Computation, 2002.
    .. [2] Du, Y., Li, S. and Mordatch, I. "Compositional Visual Generation with Energy Based
       Models". NeurIPS 2020.
    .. [3] Lakshminarayanan, B., Pritzel, A. and Blundell, C. "Simple and Scalable Predictive
       Uncertainty Estimation using Deep Ensembles". NeurIPS 2017.

    Examples
    --------
    A deep ensemble of three cross-entropy nets (``beta=0``) that differ in their seed:

    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier, ProductOfExperts
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> members = [(f"seed{s}", NGEBMClassifier(beta=0.0, max_epochs=5, random_state=s,
    ...                                         module__hidden_sizes=(8,))) for s in range(3)]
    >>> ensemble = ProductOfExperts(members, combine="mixture").fit(X, y)
    >>> ensemble.predict_proba(X[:2]).shape, ensemble.score_ood(X[:2], "approx_mass").shape
    ((2, 3), (2,))
    """

    def __init__(
        self,
        estimators,
        weights=None,
        combine: str = "product",
        ood_method: str = "energy",
        batch_size: int = 256,
    ) -> None:
        self.estimators = estimators
        self.weights = weights
        self.combine = combine
        self.ood_method = ood_method
        self.batch_size = batch_size

    def _check_params(self) -> None:
        check = ParamChecker(self)
        self._check_common_params(check)
        check.choice("combine", ("product", "mixture"))
        check.choice("ood_method", OOD_METHODS)
        if self.combine == "mixture" and not check.messages and self.weights is not None:
            weights = self._resolved_weights()
            if (weights < 0).any() or weights.sum() <= 0:
                check.add(
                    "The 'weights' of a ProductOfExperts with combine='mixture' must be "
                    f"non-negative with a positive sum (mixture proportions). Got "
                    f"{self.weights!r}; negative weights are for combine='product'."
                )
        check.raise_if_any()

    def fit(self, X, y, sample_weight=None):
        """Fit a clone of every expert on ``(X, y)`` (a ``FrozenEstimator`` is kept as it is).

        Parameters
        ----------
        X : array-like of shape ``(n_samples, n_features)`` or ``(n_samples, *input_shape)``
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), number or None, default=None
            Passed to every expert's ``fit`` (a ``FrozenEstimator`` is not refit); each
            expert's own ``class_weight`` multiplies it. With metadata routing enabled,
            ``set_fit_request(sample_weight=True)`` routes it here.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On a bad parameter, a bad or all-zero ``sample_weight`` (checked here, since a
            frozen expert never sees it), experts over different label sets, or experts
            fitted on a different number of features.

        Examples
        --------
        An expert fitted before, frozen, beside one that ``fit`` trains:

        >>> from sklearn.datasets import make_blobs
        >>> from sklearn.frozen import FrozenEstimator
        >>> from ebmclassifier import NGEBMClassifier, ProductOfExperts
        >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
        >>> net = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> fitted = net.fit(X, y)
        >>> poe = ProductOfExperts([("old", FrozenEstimator(fitted)), ("new", net)]).fit(X, y)
        >>> poe.named_estimators_["old"].estimator is fitted, poe.classes_
        (True, array([0, 1, 2]))
        """
        self._check_params()
        if y is None:
            raise ValueError("ProductOfExperts requires y to be passed, but the target y is None.")
        X = self._validate_X(X, reset=True)
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y)
        weights = self._check_sample_weight(sample_weight, len(X))
        self._forget_ood_threshold()  # calibrated on the scores of the experts refit here
        self._fit_experts(X, [y] * len(self.estimators), sample_weight)
        first_name, first = self.estimators[0][0], self.estimators_[0]
        for (name, _), expert in zip(self.estimators[1:], self.estimators_[1:], strict=True):
            if not np.array_equal(expert.classes_, first.classes_):
                raise ValueError(
                    f"The experts of a ProductOfExperts must have the same label set: "
                    f"{name!r} has classes {expert.classes_.tolist()!r} but {first_name!r} has "
                    f"{first.classes_.tolist()!r}."
                )
        self.classes_ = first.classes_
        self.class_count_, self.class_prior_ = self._count_classes(
            y, self.classes_, weights, "y", "the experts"
        )
        return self

    # The estimators' inference face (InferenceMixin) over the composed logits: its batched
    # map is the experts' (validated once, in eval mode, without gradients), its network the
    # composition of their logits. predict*, energy, score_ood and score_samples are
    # InferenceMixin's, docstrings included (the class docstring says they score the
    # composition).

    def _map_batches(self, X, fn) -> np.ndarray:
        return self._map(X, fn)

    def _network(self):
        """The composed logits as a function of a batch (see the class docstring), with the
        weights put on the device once per call."""
        weights = torch.as_tensor(self.weights_, dtype=torch.float32, device=self._device())
        compose = product_logits if self.combine == "product" else mixture_logits
        n_experts = len(self.estimators_)
        return lambda x: compose([self._expert_logits(k, x) for k in range(n_experts)], weights)
