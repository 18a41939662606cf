"""The virtual-logit matching detector, ViM (Wang et al. 2022 [1]_), on penultimate features.

References
----------
.. [1] Wang, H., Li, Z., Feng, L. and Zhang, W. "ViM: Out-Of-Distribution with Virtual-logit
   Matching". CVPR 2022.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from sklearn.covariance import EmpiricalCovariance
from sklearn.utils.validation import check_array, check_is_fitted

from .._utils.parameters import ParamChecker
from .._utils.validation import as_numpy
from ._base import FeatureDetector
from .features import last_layer_parameters

__all__ = ["ViMDetector"]


class ViMDetector(FeatureDetector):
    r"""Virtual-logit matching: the feature residual as an extra logit (Wang et al.).

    ViM (Wang et al. 2022 [1]_, Sec. 4). With the last layer ``l(x) = W x + b``:

    1. New origin :math:`o = -W^{+} b` (``W^+`` the pseudo-inverse), the point whose logits
       are all zero; features are centred there, not at their mean.
    2. Principal subspace :math:`P` (Eq. 4): the eigenvectors of the ``D`` largest eigenvalues
       of :math:`\frac{1}{N} \sum_i (x_i - o)(x_i - o)^\top` over the training features.
       The residual :math:`x^{P^\perp}` is the projection of :math:`x - o` on the
       complement of :math:`P`.
    3. Matching constant (Eq. 6), over the training features:
       :math:`\alpha = \sum_i \max_j l_j(x_i) \,/\, \sum_i \lVert x_i^{P^\perp} \rVert`.
    4. The virtual logit :math:`l_0 = \alpha \lVert x^{P^\perp} \rVert` joins the logits; the
       paper's score is its softmax probability
       :math:`\mathrm{ViM}(x) = e^{l_0} / (e^{l_0} + \sum_{j=1}^{C} e^{l_j})`.

    ``score_ood`` returns its log-odds, the virtual logit plus the energy of the real logits,

    .. math::
        \mathrm{score\_ood}(x) = \alpha \lVert x^{P^\perp} \rVert - \log \sum_{j=1}^{C}
        e^{l_j(x)} = \log \frac{\mathrm{ViM}(x)}{1 - \mathrm{ViM}(x)},

    a strictly increasing function of :math:`\mathrm{ViM}(x)` (same ranking, same AUROC)
    that does not saturate at 0 or 1 in floating point. Higher means more OOD.

    scikit-learn's ``PCA`` is not used for step 2 because it centres at the data mean; the
    eigenvectors come from ``EmpiricalCovariance(assume_centered=True)`` on :math:`x_i - o`.

    Parameters
    ----------
    n_components : "auto", int or None, default="auto"
        ``D``, the dimension of the principal subspace, ``1 <= D < n_features``. The paper
        sets ``D`` per backbone, about half the feature dimension ``N`` (1000 of ResNet-50's
        2048 features), so ``None`` takes ``N // 2``. ``"auto"`` takes the same half, bounded
        by what the training features support: ``D = min(N // 2, r - 1)`` with ``r`` the
        numerical rank of the centred features :math:`x_i - o` (singular values above
        ``1e-8`` times the largest), so that the residual is never empty; with fewer training
        samples than ``N // 2`` (e.g. ~100 rows of 256 features) ``D`` is their rank minus
        one. ``"auto"`` equals ``None`` whenever the features have rank above ``N // 2``.
        Tune an integer for your backbone.

    Attributes
    ----------
    coef_, intercept_ : ndarray of shape (n_classes, n_features), (n_classes,)
        ``W`` and ``b``, copied in ``fit``.
    origin_ : ndarray of shape (n_features,)
        :math:`o = -W^{+} b`.
    residual_basis_ : ndarray of shape (n_features, n_features - D)
        Orthonormal basis of the complement of :math:`P`.
    alpha_ : float
        :math:`\alpha`.
    n_components_ : int
        ``D`` as used.
    n_features_in_ : int

    References
    ----------
    .. [1] Wang, H., Li, Z., Feng, L. and Zhang, W. "ViM: Out-Of-Distribution with
       Virtual-logit Matching". CVPR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> train = np.c_[rng.normal(size=(200, 2)) * 3, rng.normal(size=(200, 2)) * 0.1]
    >>> W, b = np.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]]), np.zeros(2)
    >>> vim = ViMDetector(n_components=2).fit(train, weight=W, bias=b)
    >>> scores = vim.score_ood([[3.0, 0, 0, 0], [3.0, 0, 5.0, 0]])  # off the principal plane
    >>> bool(scores[1] > scores[0])
    True
    """

    def __init__(self, n_components: int | str | None = "auto") -> None:
        self.n_components = n_components

    def fit(self, features, y=None, *, weight, bias) -> ViMDetector:
        """Find the origin, the principal subspace and the matching constant.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)
            Penultimate features of the training data.
        y : None
            Ignored; accepted so that every detector fits as ``fit(features, y)``.
        weight : array-like of shape (n_classes, n_features)
            ``W`` of the last layer (:func:`last_layer_parameters`).
        bias : array-like of shape (n_classes,)
            ``b`` of the last layer.

        Returns
        -------
        self : ViMDetector

        Examples
        --------
        >>> import numpy as np
        >>> vim = ViMDetector(n_components=1).fit(
        ...     [[1.0, 0.1], [2.0, -0.1], [3.0, 0.2]], weight=[[1.0, 0.0], [0.0, 1.0]],
        ...     bias=[1.0, 0.0])
        >>> np.allclose(vim.origin_, [-1.0, 0.0])  # o = -pinv(W) b: all logits are 0 there
        True
        """
        X = self._features(features, reset=True)
        self.coef_, self.intercept_ = self._check_last_layer(weight, bias, X.shape[1])
        self.n_components_ = self._check_n_components(X.shape[1])
        self.origin_ = -np.linalg.pinv(self.coef_) @ self.intercept_
        centred = X - self.origin_
        if self.n_components == "auto":
            self.n_components_ = _auto_n_components(centred)
        covariance = EmpiricalCovariance(assume_centered=True).fit(centred).covariance_
        _, eigenvectors = np.linalg.eigh(covariance)  # eigenvalues in ascending order
        self.residual_basis_ = eigenvectors[:, : X.shape[1] - self.n_components_]
        residual = np.linalg.norm(centred @ self.residual_basis_, axis=1)
        # relative to the features' size: what rounding leaves of a zero residual is no residual
        if not residual.sum() > 1e-10 * np.linalg.norm(centred, axis=1).sum():
            raise ValueError(
                f"The training features have no residual outside a principal subspace of "
                f"{self.n_components_} dimensions (they span at most that many), so ViM's "
                "alpha is undefined. Lower n_components."
            )
        max_logit = (X @ self.coef_.T + self.intercept_).max(axis=1)
        self.alpha_ = float(max_logit.sum() / residual.sum())
        return self

    def _check_last_layer(self, weight, bias, n_features: int):
        weight = check_array(as_numpy(weight), dtype=np.float64, input_name="weight")
        bias = check_array(as_numpy(bias), dtype=np.float64, ensure_2d=False, input_name="bias")
        if weight.shape[1] != n_features or bias.shape != (weight.shape[0],):
            raise ValueError(
                f"weight must have shape (n_classes, {n_features}) (one column per feature) and "
                f"bias shape (n_classes,). Got {weight.shape!r} and {bias.shape!r}; pass "
                "last_layer_parameters(estimator)."
            )
        return weight, bias

    def fit_on_features(self, estimator, features, y=None) -> ViMDetector:
        weight, bias = last_layer_parameters(estimator)
        return self.fit(features, y, weight=weight, bias=bias)

    def _check_n_components(self, n_features: int) -> int:
        if self.n_components is None or self.n_components == "auto":
            if n_features < 2:
                raise ValueError("ViMDetector needs at least 2 features; got 1.")
            return n_features // 2
        if isinstance(self.n_components, str):
            raise ValueError(
                "The 'n_components' parameter of ViMDetector must be 'auto', None or an int "
                f"in [1, n_features). Got {self.n_components!r} instead."
            )
        check = ParamChecker(self)
        check.integer("n_components", 1)
        check.raise_if_any()
        if self.n_components >= n_features:
            raise ValueError(
                f"The 'n_components' parameter of ViMDetector must be below the number of "
                f"features ({n_features}), leaving a residual. Got {self.n_components!r} instead."
            )
        return self.n_components

    def score_ood(self, features) -> np.ndarray:
        """Virtual logit minus the log-sum-exp of the real logits: ViM's log-odds.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            The higher, the more likely out-of-distribution.

        Examples
        --------
        >>> import numpy as np
        >>> vim = ViMDetector(n_components=1).fit(
        ...     [[1.0, 0.1], [2.0, -0.1], [3.0, 0.2]], weight=[[1.0, 0.0], [0.0, 1.0]],
        ...     bias=[1.0, 0.0])
        >>> vim.score_ood([[2.0, 0.0], [2.0, 3.0]]).shape
        (2,)
        """
        check_is_fitted(self)
        X = self._features(features, reset=False)
        logits = X @ self.coef_.T + self.intercept_
        virtual_logit = self.alpha_ * np.linalg.norm(
            (X - self.origin_) @ self.residual_basis_, axis=1
        )
        return virtual_logit - logsumexp(logits, axis=1)


def _auto_n_components(centred: np.ndarray) -> int:
    """ViM's ``D`` for ``n_components="auto"``: ``min(N // 2, r - 1)``, ``r`` the numerical
    rank of the centred training features (singular values above 1e-8 of the largest)."""
    singular_values = np.linalg.svd(centred, compute_uv=False)
    rank = int(np.sum(singular_values > 1e-8 * singular_values[0])) if centred.size else 0
    if rank < 2:
        raise ValueError(
            f"The {len(centred)} training features span {rank} dimension(s) around ViM's "
            "origin, so no principal subspace leaves a residual (ViM needs rank >= 2). Fit on "
            "more (or more varied) training samples, or use another detector."
        )
    return min(centred.shape[1] // 2, rank - 1)
