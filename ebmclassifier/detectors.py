"""Post-hoc OOD detectors on a trained classifier's penultimate features.

The detectors a practitioner would try on a plain cross-entropy model instead of training an
energy-based one: Mahalanobis (Lee et al. 2018 [1]_), KNN (Sun et al. 2022 [2]_) and ViM
(Wang et al. 2022 [3]_). Each is a small scikit-learn estimator built on scikit-learn's own pieces
(``EmpiricalCovariance`` / ``LedoitWolf``, ``NearestNeighbors``), fitted on features of the
**training** data only, and scores new features with ``score_ood``: the higher, the more likely
out-of-distribution, as every estimator's ``score_ood`` (``score_samples`` is its negative,
scikit-learn's outlier convention). ``x`` below is a sample's penultimate feature vector
(``module.penultimate(input)``, see :mod:`ebmclassifier.nn`) and ``l(x) = W x + b`` its logits.

The features come from a fitted estimator through :func:`penultimate_features`, in batches;
:func:`fit_detector` fits a detector on an estimator's training data in one call::

    detector = fit_detector(MahalanobisDetector(), clf, X_train, y_train)
    scores = detector.score_ood(penultimate_features(clf, X_test))

References
----------
.. [1] Lee, K., Lee, K., Lee, H. and Shin, J. "A Simple Unified Framework for Detecting
   Out-of-Distribution Samples and Adversarial Attacks". NeurIPS 2018.
.. [2] Sun, Y., Ming, Y., Zhu, X. and Li, Y. "Out-of-Distribution Detection with Deep Nearest
   Neighbors". ICML 2022.
.. [3] Wang, H., Li, Z., Feng, L. and Zhang, W. "ViM: Out-Of-Distribution with Virtual-logit
   Matching". CVPR 2022.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator
from sklearn.covariance import EmpiricalCovariance, LedoitWolf
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import normalize
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ._features import last_layer_parameters, penultimate_features
from ._utils.parameters import ParamChecker
from ._utils.validation import as_numpy

__all__ = [
    "DETECTORS",
    "KNNDetector",
    "MahalanobisDetector",
    "ViMDetector",
    "fit_detector",
    "last_layer_parameters",
    "penultimate_features",
]

_COVARIANCES = {"empirical": EmpiricalCovariance, "ledoit_wolf": LedoitWolf}


# ----------------------------------------------------------------------------- detectors


class _FeatureDetector(BaseEstimator):
    """What every detector shares: feature validation and the two score conventions."""

    def _features(self, features, *, reset: bool) -> np.ndarray:
        return validate_data(self, as_numpy(features), reset=reset, dtype=np.float64)

    def score_samples(self, features) -> np.ndarray:
        """scikit-learn's outlier convention: ``-score_ood(features)``.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            The lower, the more abnormal.

        Examples
        --------
        >>> import numpy as np
        >>> knn = KNNDetector(n_neighbors=1).fit(np.eye(3))
        >>> np.allclose(knn.score_samples(np.eye(3)), -knn.score_ood(np.eye(3)))
        True
        """
        return -self.score_ood(features)

    def fit_on_features(self, estimator, features, y=None):
        """Fit on the penultimate features of ``estimator``'s training input, already computed.

        The detector takes from ``estimator`` what it needs beyond the features (ViM: the last
        layer's ``W`` and ``b``), so that several detectors fit on one computation of the
        features; :func:`fit_detector` computes them and calls this.

        Parameters
        ----------
        estimator : fitted estimator or torch.nn.Module
            As for :func:`penultimate_features`.
        features : array-like of shape (n_samples, n_features)
            ``penultimate_features(estimator, X_train)``.
        y : array-like of shape (n_samples,) or None, default=None
            The training labels (needed by :class:`MahalanobisDetector`).

        Returns
        -------
        self
            The fitted detector.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.nn import MLP
        >>> net = MLP(n_features=4, n_classes=3, hidden_sizes=(8,))
        >>> X = torch.randn(30, 4)
        >>> vim = ViMDetector(n_components=2).fit_on_features(net, penultimate_features(net, X))
        >>> vim.coef_.shape  # ViM took the last layer from the network
        (3, 8)
        """
        return self.fit(features, y)


class MahalanobisDetector(_FeatureDetector):
    r"""Mahalanobis distance to the closest class mean under a shared covariance (Lee et al.).

    Fits one Gaussian per class with a covariance shared by all classes (Lee et al. 2018 [1]_,
    Eq. 1), on the training features ``x_i`` with labels ``y_i``:

    .. math::
        \hat\mu_c = \frac{1}{N_c} \sum_{i: y_i = c} x_i, \qquad
        \hat\Sigma = \frac{1}{N} \sum_c \sum_{i: y_i = c} (x_i - \hat\mu_c)(x_i - \hat\mu_c)^\top

    and scores the closest class's squared Mahalanobis distance, the paper's confidence score
    ``M(x)`` (Eq. 2) negated so that higher means more OOD:

    .. math::
        \mathrm{score\_ood}(x) = -M(x) = \min_c\,(x - \hat\mu_c)^\top \hat\Sigma^{-1}
        (x - \hat\mu_c)

    The covariance is scikit-learn's ``EmpiricalCovariance(assume_centered=True)`` (exactly
    :math:`\hat\Sigma`; its precision is a pseudo-inverse) or ``LedoitWolf`` shrinkage of it
    fitted on the class-centred features. The paper's input preprocessing (a gradient step on
    the input) and its ensemble over layers are not applied: this scores the features it is
    given, the variant the OOD literature usually compares against.

    Parameters
    ----------
    covariance : {"empirical", "ledoit_wolf"}, default="empirical"
        ``"ledoit_wolf"`` shrinks the shared covariance (well-conditioned when features are
        many or samples few).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    means_ : ndarray of shape (n_classes, n_features)
        :math:`\hat\mu_c`, in the order of ``classes_``.
    covariance_ : ndarray of shape (n_features, n_features)
        :math:`\hat\Sigma` (shrunk for ``"ledoit_wolf"``).
    precision_ : ndarray of shape (n_features, n_features)
    n_features_in_ : int

    References
    ----------
    .. [1] Lee, K., Lee, K., Lee, H. and Shin, J. "A Simple Unified Framework for Detecting
       Out-of-Distribution Samples and Adversarial Attacks". NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> features = np.concatenate([rng.normal(0, 1, (50, 2)), rng.normal(5, 1, (50, 2))])
    >>> detector = MahalanobisDetector().fit(features, np.repeat([0, 1], 50))
    >>> scores = detector.score_ood([[0.0, 0.0], [5.0, 5.0], [2.5, -4.0]])
    >>> bool(scores[2] > max(scores[0], scores[1]))
    True
    """

    def __init__(self, covariance: str = "empirical") -> None:
        self.covariance = covariance

    def fit(self, features, y) -> MahalanobisDetector:
        """Fit class means and the shared covariance on training features.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)
            Penultimate features of the training data.
        y : array-like of shape (n_samples,)
            Their class labels.

        Returns
        -------
        self : MahalanobisDetector

        Examples
        --------
        >>> import numpy as np
        >>> detector = MahalanobisDetector().fit([[0.0], [2.0], [10.0], [12.0]], [0, 0, 1, 1])
        >>> detector.means_.ravel().tolist(), detector.covariance_.tolist()
        ([1.0, 11.0], [[1.0]])
        """
        check = ParamChecker(self)
        check.choice("covariance", tuple(_COVARIANCES))
        check.raise_if_any()
        if y is None:
            raise ValueError("MahalanobisDetector.fit needs the training labels y; got None.")
        X, y = validate_data(self, as_numpy(features), y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        self.classes_, index = np.unique(y, return_inverse=True)
        counts = np.bincount(index)
        self.means_ = np.zeros((len(self.classes_), X.shape[1]))
        np.add.at(self.means_, index, X)
        self.means_ /= counts[:, None]
        estimator = _COVARIANCES[self.covariance](assume_centered=True)
        self.covariance_estimator_ = estimator.fit(X - self.means_[index])
        self.covariance_ = estimator.covariance_
        self.precision_ = estimator.get_precision()
        return self

    def score_ood(self, features) -> np.ndarray:
        """Squared Mahalanobis distance to the closest class mean.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            The higher, the more likely out-of-distribution.

        Examples
        --------
        >>> detector = MahalanobisDetector().fit([[0.0], [2.0], [10.0], [12.0]], [0, 0, 1, 1])
        >>> detector.score_ood([[1.0], [3.0], [6.0]]).tolist()  # (x - closest mean)^2 / 1
        [0.0, 4.0, 25.0]
        """
        check_is_fitted(self)
        X = self._features(features, reset=False)
        distances = [self.covariance_estimator_.mahalanobis(X - mean) for mean in self.means_]
        return np.min(distances, axis=0)


class KNNDetector(_FeatureDetector):
    r"""Distance to the k-th nearest training feature after L2 normalisation (Sun et al.).

    Deep nearest neighbours (Sun et al. 2022 [1]_, Sec. 3): features are normalised to unit
    length, :math:`z = x / \lVert x \rVert_2`, and a test sample's score is the distance to
    its k-th nearest neighbour among the normalised training features
    :math:`z_1, \dots, z_N`. The paper thresholds :math:`S(z^*) = -\lVert z^* - z_{(k)}
    \rVert_2`; negated here so that higher means more OOD:

    .. math::
        \mathrm{score\_ood}(x) = \lVert z - z_{(k)} \rVert_2

    where :math:`z_{(k)}` is the k-th closest of the :math:`z_i` to :math:`z`. Neighbours
    come from scikit-learn's ``NearestNeighbors`` (exact). A training sample scored against
    its own training set counts itself as its first neighbour; score held-out data. A zero
    feature vector stays zero under the normalisation.

    Parameters
    ----------
    n_neighbors : int, default=50
        ``k``; the paper uses 50 on CIFAR-10 (50,000 training samples) and notes it should grow
        with the training set. At most the number of training samples.

    Attributes
    ----------
    nearest_neighbors_ : sklearn.neighbors.NearestNeighbors
        Fitted on the normalised training features.
    n_features_in_ : int

    References
    ----------
    .. [1] Sun, Y., Ming, Y., Zhu, X. and Li, Y. "Out-of-Distribution Detection with Deep
       Nearest Neighbors". ICML 2022.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> train = rng.normal(size=(100, 3)) + [4.0, 0.0, 0.0]  # features pointing along +x
    >>> knn = KNNDetector(n_neighbors=5).fit(train)
    >>> scores = knn.score_ood([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    >>> bool(scores[1] > scores[0])
    True
    """

    def __init__(self, n_neighbors: int = 50) -> None:
        self.n_neighbors = n_neighbors

    def fit(self, features, y=None) -> KNNDetector:
        """Store the normalised training features in a nearest-neighbour index.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)
            Penultimate features of the training data.
        y : None
            Ignored; accepted so that every detector fits as ``fit(features, y)``.

        Returns
        -------
        self : KNNDetector

        Examples
        --------
        >>> knn = KNNDetector(n_neighbors=2).fit([[3.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> knn.nearest_neighbors_.n_samples_fit_
        3
        """
        check = ParamChecker(self)
        check.integer("n_neighbors", 1)
        check.raise_if_any()
        X = self._features(features, reset=True)
        if self.n_neighbors > len(X):
            raise ValueError(
                f"The 'n_neighbors' parameter of KNNDetector must be at most the number of "
                f"training samples ({len(X)}). Got {self.n_neighbors!r} instead; lower it."
            )
        self.nearest_neighbors_ = NearestNeighbors(n_neighbors=self.n_neighbors).fit(normalize(X))
        return self

    def score_ood(self, features) -> np.ndarray:
        """Distance of each normalised feature to its k-th nearest normalised training feature.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            In [0, 2]; the higher, the more likely out-of-distribution.

        Examples
        --------
        >>> knn = KNNDetector(n_neighbors=1).fit([[1.0, 0.0], [0.0, 1.0]])
        >>> knn.score_ood([[5.0, 0.0], [-1.0, 0.0]]).round(4).tolist()  # length is ignored
        [0.0, 1.4142]
        """
        check_is_fitted(self)
        distances, _ = self.nearest_neighbors_.kneighbors(
            normalize(self._features(features, reset=False))
        )
        return distances[:, -1]


class ViMDetector(_FeatureDetector):
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


#: The detectors by the names ``compare --detectors`` takes.
DETECTORS = {"mahalanobis": MahalanobisDetector, "knn": KNNDetector, "vim": ViMDetector}


def fit_detector(detector: _FeatureDetector, estimator, X, y=None) -> _FeatureDetector:
    """Fit a detector on the penultimate features of an estimator's training data.

    Only ``X`` (and ``y``) reach the detector: pass the training split, never the data to be
    scored. ViM also receives the last layer's ``W`` and ``b``.

    Parameters
    ----------
    detector : MahalanobisDetector, KNNDetector or ViMDetector
        An unfitted detector (it is fitted in place).
    estimator : fitted estimator or torch.nn.Module
        As for :func:`penultimate_features`.
    X : array-like of shape (n_samples, ...)
        The training input.
    y : array-like of shape (n_samples,) or None, default=None
        The training labels (needed by :class:`MahalanobisDetector`).

    Returns
    -------
    detector
        The fitted detector; score with
        ``detector.score_ood(penultimate_features(estimator, X_new))``.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(beta=0, max_epochs=3, module__hidden_sizes=(8,), random_state=0)
    >>> clf = clf.fit(X[:40], y[:40])
    >>> detector = fit_detector(KNNDetector(n_neighbors=5), clf, X[:40], y[:40])
    >>> detector.score_ood(penultimate_features(clf, X[40:])).shape
    (20,)
    """
    return detector.fit_on_features(estimator, penultimate_features(estimator, X), y)
