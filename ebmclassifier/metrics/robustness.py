"""Robust accuracy of a fitted estimator under PGD attacks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._utils.modes import kept_modes
from ..attacks import NORMS, check_float_input, robust_accuracy
from ._checks import _check_positive_int, encode_labels

__all__ = ["adversarial_accuracy"]


def _as_float32(X) -> np.ndarray:
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    X = np.asarray(X, dtype=np.float32)
    if X.ndim < 2 or X.shape[0] == 0 or not np.all(np.isfinite(X)):
        raise ValueError(
            "X must be a non-empty numeric array of shape (n_samples, ...) without NaN or inf. "
            f"Got shape {X.shape!r}."
        )
    return X


def adversarial_accuracy(
    estimator,
    X,
    y,
    epsilons: Sequence[float],
    norm: str = "linf",
    steps: int = 10,
    step_size: float | None = None,
    random_start: bool = True,
    random_state=None,
    batch_size: int = 256,
    *,
    preprocess: torch.nn.Module | None = None,
    input_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """Accuracy of a fitted estimator under a PGD attack, for each epsilon.

    Each sample is attacked with :func:`ebmclassifier.attacks.pgd_attack` on the estimator's
    own network (its fitted ``module_``, on its ``device_``), maximising the cross-entropy of
    the true label inside the ``norm`` ball of radius epsilon, clipped to a box: one range for
    all features, by default the estimator's training range (``estimator.input_range()``,
    ``(0.0, 1.0)`` for images in [0, 1]). The attack's last iterate counts as robust when the
    network still predicts the true label (:func:`ebmclassifier.attacks.robust_accuracy`).

    Parameters
    ----------
    estimator : fitted ebmclassifier estimator
        Needs ``module_`` (inputs -> logits), ``classes_``, ``device_`` and ``predict_proba``
        (which validates ``X``); its ``input_range()``, if it has one, gives the default box.
    X : array-like of shape (n_samples, ...)
        Inputs, in the shape the estimator takes (before ``preprocess``, if given).
    y : array-like of shape (n_samples,)
        True labels, as in ``estimator.classes_``.
    epsilons : sequence of float
        Attack radii (>= 0); ``0`` gives the clean accuracy.
    norm : {"linf", "l2"}, default="linf"
        Threat model.
    steps : int, default=10
        PGD steps.
    step_size : float or None, default=None
        Step length; None means ``2.5 * eps / steps``.
    random_start : bool, default=True
        Start each attack from a uniform draw in the ball.
    random_state : int, RandomState or None, default=None
        Seeds the random starts (same starts for every epsilon, up to scale).
    batch_size : int, default=256
        Samples attacked at once.
    preprocess : torch.nn.Module or None, default=None
        A layer applied to ``X`` before the estimator's network, inside the attacked graph, on
        the estimator's device: the ball and the box are then in the units of ``X``. For an
        estimator trained on transformed inputs, e.g. standardized ones
        (:meth:`ebmclassifier.experiments.compare.Standardizer.as_module`), attacked in the
        data's units.
    input_range : (float, float) or None, default=None
        The box ``(low, high)``, in the units of ``X``; None: the estimator's
        ``input_range()``, or no box for an estimator without one.

    Returns
    -------
    accuracies : ndarray of shape (len(epsilons),)
        Robust accuracy at each epsilon, in [0, 1]; draw it against ``epsilons``.

    References
    ----------
    .. [1] Madry et al., "Towards Deep Learning Models Resistant to Adversarial Attacks",
       ICLR 2018.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(max_epochs=2, random_state=0).fit(X, y)
    >>> acc = adversarial_accuracy(clf, X, y, epsilons=[0.0, 0.5, 5.0], random_state=0)
    >>> acc.shape
    (3,)
    >>> bool(acc[0] == clf.score(X, y)), bool(acc[0] >= acc[1] >= acc[2])
    (True, True)
    """
    with kept_modes(estimator, preprocess):  # predict_proba and the attack switch modes
        X, y_enc = _attack_data(estimator, X, y)
        epsilons = list(np.atleast_1d(np.asarray(epsilons, dtype=np.float64)))
        if not epsilons or any(not (e >= 0 and np.isfinite(e)) for e in epsilons):
            raise ValueError(
                f"epsilons must be a non-empty list of finite numbers >= 0. Got {epsilons!r}."
            )
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS!r}. Got {norm!r} instead.")
        batch_size = _check_positive_int("batch_size", batch_size)
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        if input_range is None and hasattr(estimator, "input_range"):
            input_range = estimator.input_range()
        low, high = (None, None) if input_range is None else (float(v) for v in input_range)
        module = estimator.module_
        if preprocess is not None:
            module = torch.nn.Sequential(preprocess, module)
        return robust_accuracy(
            module,
            X,
            y_enc,
            epsilons,
            device=torch.device(estimator.device_),
            seed=seed,
            batch_size=batch_size,
            norm=norm,
            steps=steps,
            step_size=step_size,
            random_start=random_start,
            input_min=low,
            input_max=high,
        )


def _attack_data(estimator, X, y) -> tuple[np.ndarray, np.ndarray]:
    """``X`` as float32 and ``y`` encoded by ``estimator.classes_``, both checked."""
    for attr in ("module_", "classes_", "device_"):
        if not hasattr(estimator, attr):
            raise TypeError(
                f"adversarial_accuracy needs a fitted ebmclassifier estimator with 'module_', "
                f"'classes_' and 'device_'; {type(estimator).__name__} has no {attr!r}. "
                "Call fit first."
            )
    X = _as_float32(X)
    taken = []  # the dtype of what the network takes, seen on the way in
    hook = estimator.module_.register_forward_pre_hook(
        lambda module, args: taken.append(getattr(args[0], "dtype", None)) if args else None
    )
    try:  # the estimator's own check of the input, on one sample
        estimator.predict_proba(X[:1])
    except ValueError as exc:
        raise ValueError(
            f"X has samples of shape {X.shape[1:]}, which {type(estimator).__name__} does not "
            f"take: {exc} Pass X as it was given to fit."
        ) from exc
    finally:
        hook.remove()
    if taken and isinstance(taken[0], torch.dtype):
        check_float_input(taken[0], f"the input of {type(estimator).__name__}'s network")
    y_enc = encode_labels(y, estimator.classes_)
    if y_enc.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} samples but y has {y_enc.shape[0]}.")
    return X, y_enc
