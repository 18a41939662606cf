"""Errors and warnings of ebmclassifier."""

__all__ = ["DivergenceError", "FiniteDifferenceWarning"]


class DivergenceError(FloatingPointError):
    """Training diverged: the loss, the energies or the samples stopped being finite.

    Raised during ``fit`` instead of leaving a model that predicts NaN. The message names the
    epoch and batch, and what to change (usually a lower ``lr``). A subclass of
    :class:`FloatingPointError`, so code that already catches that keeps working.

    Parameters
    ----------
    message : str
        What diverged, where, and what to change.

    Examples
    --------
    A learning rate far too large for unscaled inputs:

    >>> import torch
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import DivergenceError, NGEBMClassifier
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(optimizer=torch.optim.SGD, lr=1e12, max_epochs=1, batch_size=20,
    ...                       random_state=0)
    >>> try:
    ...     clf.fit(X * 1e3, y)
    ... except DivergenceError as err:
    ...     print(err)
    NGEBMClassifier diverged in epoch 1: the training loss is nan. Lower the learning rate
    (lr=1000000000000.0) or the loss weights, or standardize the input.
    """


class FiniteDifferenceWarning(UserWarning):
    """The finite-difference gradient norm is inaccurate on this network.

    ``NGEBMClassifier(grad_norm="finite_difference")`` warns at ``fit`` when its network has
    activations whose derivative jumps (ReLU, leaky ReLU, ...; see
    :func:`~ebmclassifier.energy.nonsmooth_activations`): the difference
    ``[E(x + h v) - E(x)] / h`` often crosses such a kink, and its parameter gradient then
    points elsewhere than the exact one (measured in :doc:`/user_guide/ngebm`, "Not on
    ReLU-family networks"). Use ``grad_norm="exact"`` or a smooth activation.

    Parameters
    ----------
    message : str
        Which activations, where the error is measured, and what to change.

    Examples
    --------
    Turn the warning into an error, e.g. in a test or a grid search:

    >>> import warnings
    >>> from ebmclassifier.exceptions import FiniteDifferenceWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", FiniteDifferenceWarning)
    ...     try:
    ...         warnings.warn("inaccurate", FiniteDifferenceWarning)
    ...     except FiniteDifferenceWarning as err:
    ...         print(type(err).__name__, err)
    FiniteDifferenceWarning inaccurate
    """
