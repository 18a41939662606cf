"""The shared part of the composed estimators: experts as ``(name, estimator)`` pairs.

:class:`~ebmclassifier.compose.ProductOfExperts` and
:class:`~ebmclassifier.compose.ConceptComposition` hold a list of experts as
:class:`~sklearn.ensemble.VotingClassifier` does: nested parameters (``name__param``), a
clone of each fitted in ``fit`` (a ``FrozenEstimator`` clones to itself and ignores ``fit``).
They validate the input once, at their public methods, and then run every expert's network
(its documented fitted attribute ``module_``, which maps a batch to logits) on the same
tensors, so a composed energy can be differentiated with respect to the input. So an expert
must take the float32 samples as they are: one whose own validation changes them (the token
ids of ``LatentStructureClassifier(structure="dependency_tree")``) is refused at ``fit``.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.frozen import FrozenEstimator
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted

from .._estimator.inference import map_batches
from .._utils.data import class_counts
from .._utils.device import module_device
from .._utils.parameters import ParamChecker
from .._utils.validation import check_some_weight, check_X, sample_weight_array

__all__ = ["ExpertsBase"]

# Rows of X on which each fitted expert's own validation is checked to leave X as it is.
_PROBE_ROWS = 8


class ExpertsBase(BaseEstimator):
    """What both faces share: the ``(name, estimator)`` list, nested parameters, fitting the
    experts, and batched inference through their networks."""

    # ------------------------------------------------------------------ parameters

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this estimator and, with ``deep``, of every expert as ``name__param``.

        Parameters
        ----------
        deep : bool, default=True
            Also return each expert (under its name) and its parameters.

        Returns
        -------
        params : dict

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier, ProductOfExperts
        >>> poe = ProductOfExperts([("ce", NGEBMClassifier(beta=0.0)), ("ng", NGEBMClassifier())])
        >>> params = poe.get_params()
        >>> params["ce__beta"], params["ng__beta"], params["combine"]
        (0.0, 0.5, 'product')
        """
        params = super().get_params(deep=False)
        if deep:
            for name, expert in self._pairs():
                params[name] = expert
                for key, value in expert.get_params(deep=True).items():
                    params[f"{name}__{key}"] = value
        return params

    def set_params(self, **params):
        """Set parameters; ``name`` replaces an expert and ``name__param`` sets one of its own.

        Parameters
        ----------
        **params
            Parameters of this estimator, experts by name, or ``name__param`` of an expert.

        Returns
        -------
        self

        Examples
        --------
        >>> from ebmclassifier import NGEBMClassifier, ProductOfExperts
        >>> poe = ProductOfExperts([("expert", NGEBMClassifier())])
        >>> poe.set_params(expert__beta=0.1, weights=[2.0]).get_params()["expert__beta"]
        0.1
        >>> poe.set_params(expert=NGEBMClassifier(beta=0.0)).estimators[0][1].beta
        0.0
        """
        if "estimators" in params:
            self.estimators = params.pop("estimators")
        names = [name for name, _ in self._pairs()]
        for name in [key for key in params if key in names]:
            expert = params.pop(name)
            self.estimators = [(n, expert if n == name else e) for n, e in self._pairs()]
        return super().set_params(**params)

    def _pairs(self) -> list:
        """The ``(name, estimator)`` pairs, or ``[]`` when the parameter is not such a list
        (``fit`` says what is wrong with it)."""
        try:
            pairs = [(name, expert) for name, expert in self.estimators]
        except (TypeError, ValueError):
            return []
        return pairs if all(hasattr(e, "get_params") for _, e in pairs) else []

    def _check_common_params(self, check: ParamChecker) -> None:
        owner = type(self).__name__
        pairs = self._pairs()
        if not pairs or not all(isinstance(name, str) for name, _ in pairs):
            check.add(
                f"The 'estimators' parameter of {owner} must be a non-empty list of "
                f"(name, estimator) pairs with str names. Got {self.estimators!r} instead."
            )
        names = [name for name, _ in pairs]
        own = set(super().get_params(deep=False))
        bad = sorted(
            {n for n in names if names.count(n) > 1 or "__" in str(n) or n in own}, key=str
        )
        if bad:
            check.add(
                f"The names of the experts of {owner} must be unique, contain no '__' and not "
                f"be one of its parameters {sorted(own)!r}. Got {bad!r}; rename them."
            )
        check.integer("batch_size", 1)
        if pairs and not check.messages:
            self._check_weights(check, len(pairs))

    def _check_weights(self, check: ParamChecker, n_experts: int) -> None:
        if self.weights is None:
            return
        weights = np.asarray(self.weights, dtype=object)
        ok = weights.shape == (n_experts,) and all(
            isinstance(w, Real) and not isinstance(w, bool) and math.isfinite(w) for w in weights
        )
        if not ok:
            check.add(
                f"The 'weights' parameter of {type(self).__name__} must be None or a list of "
                f"{n_experts} finite numbers, one per expert. Got {self.weights!r} instead."
            )

    def _resolved_weights(self) -> np.ndarray:
        n = len(self.estimators)
        return np.ones(n) if self.weights is None else np.asarray(self.weights, dtype=float)

    # ------------------------------------------------------------------ fitting

    def _check_sample_weight(self, sample_weight, n_samples: int) -> np.ndarray | None:
        """``sample_weight`` as float64 of shape (n_samples,), or None, checked here once,
        since a ``FrozenEstimator`` expert never sees it: finite, non-negative, some positive."""
        weights = sample_weight_array(sample_weight, n_samples)
        if weights is not None:
            check_some_weight(weights, type(self).__name__, class_weight=False)
        return weights

    def _fit_experts(self, X: np.ndarray, targets: list, sample_weight=None) -> None:
        """Clone and fit each expert on its target (a ``FrozenEstimator`` clones to itself
        and ignores ``fit``), with ``sample_weight`` when given (as ``VotingClassifier``
        passes it), and check each, before the next is fitted, for what the composition
        needs of it."""
        weights = {} if sample_weight is None else {"sample_weight": sample_weight}
        names = [name for name, _ in self.estimators]
        experts = []
        for (name, expert), target in zip(self.estimators, targets, strict=True):
            expert = clone(expert).fit(X, target, **weights)
            self._check_expert(name, expert, X)
            experts.append(expert)
        self.estimators_ = experts
        self.named_estimators_ = Bunch(**dict(zip(names, experts, strict=True)))
        self.weights_ = self._resolved_weights()

    def _check_expert(self, name: str, expert, X: np.ndarray) -> None:
        """A fitted expert must have a torch ``module_`` that takes the composition's float32
        input ``X`` as it is: its own validation (``_validate_X``, where it has one) must
        return the same array, which a probe of a few rows checks."""
        owner, kind = type(self).__name__, type(expert).__name__
        if isinstance(expert, FrozenEstimator):
            kind = f"{kind}({type(expert.estimator).__name__})"
        if not isinstance(getattr(expert, "module_", None), torch.nn.Module):
            raise TypeError(
                f"The expert {name!r} of {owner} ({kind}) has no torch module_ after fit; the "
                "experts must be the library's estimators (or others whose fitted module_ maps "
                "a batch to logits)."
            )
        if getattr(expert, "n_features_in_", self.n_features_in_) != self.n_features_in_:
            raise ValueError(
                f"The expert {name!r} was fitted on {expert.n_features_in_} features, but X "
                f"has {self.n_features_in_}; all experts must take the same input."
            )
        validate = getattr(expert, "_validate_X", None)
        if not callable(validate):
            return
        probe = X[:_PROBE_ROWS]
        try:
            prepared = validate(probe, reset=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"The expert {name!r} of {owner} ({kind}) does not take X: {exc}"
            ) from exc
        if not (
            isinstance(prepared, np.ndarray)
            and prepared.dtype == probe.dtype
            and prepared.shape == probe.shape
            and np.array_equal(prepared, probe)
        ):
            raise TypeError(
                f"The expert {name!r} of {owner} ({kind}) prepares its own input from X (e.g. "
                "the token ids of LatentStructureClassifier(structure='dependency_tree')), but "
                f"{owner} runs every expert's network on the same float32 input tensor, so that "
                "the composed energy is a function of one input that can be differentiated. "
                "Compose experts that take float32 samples as they are: NGEBMClassifier, "
                "JEMClassifier, LatentStructureClassifier(structure='categorical')."
            )

    def _count_classes(
        self, labels: np.ndarray, classes: np.ndarray, weights, where: str, who: str
    ):
        """``(class_count_, class_prior_)`` of ``labels`` among ``classes`` (sorted, as the
        experts' ``classes_``), each sample counted with its weight; a ``ValueError`` names
        labels outside ``classes`` (``where`` holds them, ``who`` does not know them)."""
        unseen = np.setdiff1d(labels, classes)
        if len(unseen):
            raise ValueError(
                f"{where} holds labels {unseen.tolist()!r} unknown to {who} (classes_ "
                f"{classes.tolist()!r})."
            )
        counts = class_counts(np.searchsorted(classes, labels), len(classes), weights)
        return counts, counts / counts.sum()

    # ------------------------------------------------------------------ inference

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        return check_X(self, X, reset=reset)

    def _device(self) -> torch.device:
        return module_device(self.estimators_[0].module_)

    def _eval(self) -> None:
        for expert in self.estimators_:
            expert.module_.eval()

    def _expert_logits(self, k: int, x: torch.Tensor) -> torch.Tensor:
        """Logits of expert ``k`` for a batch, on the batch's device (experts may differ)."""
        module = self.estimators_[k].module_
        return module(x.to(module_device(module))).to(x.device)

    def _map(self, X, fn) -> np.ndarray:
        """Validate ``X`` once, then ``fn(batch)`` batch by batch, so memory stays flat.

        Under ``torch.no_grad``; ``fn`` may enable gradients for itself (``approx_mass``)."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        self._eval()
        with torch.no_grad():
            return map_batches(X, fn, self.batch_size, self._device())
