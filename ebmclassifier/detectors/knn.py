"""The deep nearest-neighbour detector (Sun et al. 2022 [1]_) on penultimate features.

References
----------
.. [1] Sun, Y., Ming, Y., Zhu, X. and Li, Y. "Out-of-Distribution Detection with Deep Nearest
   Neighbors". ICML 2022.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import normalize
from sklearn.utils.validation import check_is_fitted

from .._utils.parameters import ParamChecker
from ._base import FeatureDetector

__all__ = ["KNNDetector"]


class KNNDetector(FeatureDetector):
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
