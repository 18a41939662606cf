"""The models of ``compare``: how each is built, which OOD scores it has, which network."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..compose import ProductOfExperts
from ..detectors import DETECTORS, KNNDetector
from ..jem import JEMClassifier
from ..ngebm import NGEBMClassifier
from ..nn import MLP, WideResNet, wide_resnet_blocks_per_group
from ._command import QUIET_FIT

__all__ = ["ModelSpec", "default_models", "network_params"]

#: How many nets a ``*_ens`` model mixes.
ENSEMBLE_SIZE = 5

OOD_SCORES = ("energy", "max_softmax", "approx_mass")

_WRN = re.compile(r"wrn-(\d+)-(\d+)")


def network_params(network: str) -> dict:
    """The estimator parameters that select ``network`` for every model.

    Parameters
    ----------
    network : str
        ``"default"`` (the estimators' own choice from the data's shape: an MLP or a small
        ConvNet), ``"mlp"`` (:class:`~ebmclassifier.nn.MLP`, which flattens any sample shape;
        on MNIST-1D the cheap, over-confident setting) or ``"wrn-D-K"``, a
        :class:`~ebmclassifier.nn.WideResNet` of depth ``D`` and widen factor ``K`` without
        batch-norm (``"wrn-28-10"`` is the papers' network).

    Returns
    -------
    params : dict
        ``{}`` for the default, ``{"module": MLP}`` for ``"mlp"``, else ``module``,
        ``module__depth`` and ``module__widen_factor``.

    Examples
    --------
    >>> params = network_params("wrn-28-10")
    >>> params["module"].__name__, params["module__depth"], params["module__widen_factor"]
    ('WideResNet', 28, 10)
    >>> network_params("default"), network_params("mlp")["module"].__name__
    ({}, 'MLP')
    """
    if network == "default":
        return {}
    if network == "mlp":
        return {"module": MLP}
    match = _WRN.fullmatch(network)
    if match is None:
        raise ValueError(
            f"Unknown network {network!r}: use 'default', 'mlp' or 'wrn-D-K' (e.g. "
            "'wrn-28-10', a WideResNet of depth 28 and widen factor 10)."
        )
    depth, widen_factor = int(match[1]), int(match[2])
    wide_resnet_blocks_per_group(depth)  # a bad depth fails here, before any training
    return {"module": WideResNet, "module__depth": depth, "module__widen_factor": widen_factor}


@dataclass(frozen=True)
class ModelSpec:
    """A model of the comparison: how to build it and which OOD scores it has.

    Parameters
    ----------
    name : str
        The name ``--models`` uses.
    description : str
        One line for the report.
    build : callable or None
        ``build(params)`` returns an unfitted estimator from the shared training parameters
        (``random_state``, ``max_epochs``, ``device``, ``verbose``, ``callbacks``, and ``lr`` /
        ``batch_size`` when set).
    scores : tuple of str
        The ``score_ood`` methods to measure.
    calibrates : str or None
        If set, the model is not trained: it recalibrates the fitted model of that name by
        temperature scaling on the held-out calibration split.
    unavailable : str or None
        Why the model cannot run here (e.g. a package it needs is missing); it is then skipped.
    headline : str or None
        The OOD score the report judges the model by (its summary-table row, its verdicts, its
        histogram), fixed here, before any data is seen. None: the fitted estimator's own
        ``ood_method`` parameter, the score ``score_ood`` and ``predict_ood`` use when the
        user names none (the first of ``scores`` for an estimator without one); a
        temperature-scaled model has only ``max_softmax``.

    Examples
    --------
    A model of one's own joins the comparison through a registry (here NG-EBM with a
    larger ``beta``):

    >>> from ebmclassifier import NGEBMClassifier
    >>> spec = ModelSpec(
    ...     "ngebm_b2", "NG-EBM, beta=2", build=lambda params: NGEBMClassifier(beta=2.0, **params)
    ... )
    >>> registry = {**default_models(), "ngebm_b2": spec}
    >>> registry["ngebm_b2"].build({"max_epochs": 1}).beta
    2.0
    """

    name: str
    description: str
    build: Callable[[dict], object] | None = None
    scores: tuple[str, ...] = OOD_SCORES
    calibrates: str | None = None
    unavailable: str | None = None
    headline: str | None = None


def default_models() -> dict[str, ModelSpec]:
    """The models ``compare`` knows: ``ce``, ``ngebm``, ``jem``, each one temperature-scaled, and
    ensembles of ``ce`` and ``ngebm``.

    ``<name>_ts`` trains nothing: it recalibrates the fitted ``<name>`` by temperature scaling
    on the held-out calibration split (``ce_ts`` is the usual fix for calibration the energy
    methods are judged against; ``ngebm_ts`` and ``jem_ts`` show what the same fix does to
    them). Each model's headline OOD score is fixed in advance (``ModelSpec.headline``):
    ``ce`` is judged by its ``energy`` (Liu et al. 2020, the standard energy-based detector the
    energy-trained models are meant to improve), every other model by its estimator's default
    ``ood_method`` (NG-EBM: ``approx_mass``, the paper's score; JEM and the ensembles:
    ``energy``). ``<name>_ens`` is a deep ensemble (Lakshminarayanan et al. 2017): the mixture
    (:class:`~ebmclassifier.ProductOfExperts` with ``combine="mixture"``) of ``ENSEMBLE_SIZE``
    (5) nets of ``<name>`` trained from seeds ``5 s, ..., 5 s + 4`` at compare's seed ``s``;
    it costs five fits, and it has no network of its own for PGD to attack.

    Returns
    -------
    registry : dict of str to ModelSpec

    Examples
    --------
    >>> registry = default_models()
    >>> list(registry)
    ['ce', 'ce_ts', 'ce_ens', 'ngebm', 'ngebm_ts', 'ngebm_ens', 'jem', 'jem_ts']
    >>> registry["ce"].build({"max_epochs": 1}).beta, registry["ce_ts"].calibrates
    (0.0, 'ce')
    >>> ensemble = registry["ngebm_ens"].build({"random_state": 2})
    >>> ensemble.combine, [net.random_state for _, net in ensemble.estimators]
    ('mixture', [10, 11, 12, 13, 14])
    """
    return {
        "ce": ModelSpec(
            "ce",
            "cross-entropy only (NGEBMClassifier with beta=0)",
            build=lambda params: NGEBMClassifier(beta=0.0, **{**QUIET_FIT, **params}),
            headline="energy",
        ),
        "ce_ts": _temperature_scaled("ce"),
        "ce_ens": _ensemble("ce", 0.0),
        "ngebm": ModelSpec(
            "ngebm",
            "NG-EBM, beta=gamma=0.5",
            build=lambda params: NGEBMClassifier(beta=0.5, **{**QUIET_FIT, **params}),
        ),
        "ngebm_ts": _temperature_scaled("ngebm"),
        "ngebm_ens": _ensemble("ngebm", 0.5),
        "jem": ModelSpec(
            "jem",
            "JEM (SGLD from a replay buffer)",
            build=lambda params: JEMClassifier(**{**QUIET_FIT, **params}),
        ),
        "jem_ts": _temperature_scaled("jem"),
    }


def _ensemble(base: str, beta: float) -> ModelSpec:
    def build(params: dict) -> ProductOfExperts:
        seed = params.get("random_state") or 0
        experts = [
            (
                f"{base}{k}",
                NGEBMClassifier(
                    beta=beta, **{**QUIET_FIT, **params, "random_state": seed * ENSEMBLE_SIZE + k}
                ),
            )
            for k in range(ENSEMBLE_SIZE)
        ]
        return ProductOfExperts(experts, combine="mixture")

    return ModelSpec(
        f"{base}_ens",
        f"deep ensemble: the mixture of {ENSEMBLE_SIZE} {base} nets from seeds 5s..5s+4 "
        "(ProductOfExperts(combine='mixture')); costs five fits",
        build=build,
    )


def _temperature_scaled(base: str) -> ModelSpec:
    return ModelSpec(
        f"{base}_ts",
        f"{base} recalibrated by temperature scaling on the held-out split "
        f"(CalibratedClassifierCV(FrozenEstimator({base}), method='temperature'))",
        scores=("max_softmax",),
        calibrates=base,
    )


def build_detector(name: str, n_train: int):
    """An unfitted post-hoc detector of :mod:`ebmclassifier.detectors` for ``--detectors``.

    The detectors keep their library defaults (Mahalanobis with the empirical covariance, ViM
    with ``n_components="auto"``: half the feature dimensions as its principal subspace,
    bounded by the rank of the training features) except KNN's ``k``, which
    follows Sun et al. (2022): ``k = 50`` for CIFAR-10's 50,000 training samples and ``k``
    proportional to the training set otherwise, so ``k = max(1, round(n_train / 1000))``.

    Parameters
    ----------
    name : {"mahalanobis", "knn", "vim"}
    n_train : int
        The number of training samples the detector is fitted on.

    Returns
    -------
    detector : MahalanobisDetector, KNNDetector or ViMDetector

    Examples
    --------
    >>> build_detector("knn", 3200), build_detector("knn", 50_000).n_neighbors
    (KNNDetector(n_neighbors=3), 50)
    """
    if name == "knn":
        return KNNDetector(n_neighbors=max(1, round(n_train / 1000)))
    return DETECTORS[name]()
