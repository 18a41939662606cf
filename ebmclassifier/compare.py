"""The comparison behind ``python -m ebmclassifier compare``: train each model per seed, measure.

Inputs are standardized first (to zero mean and unit variance over the training split: each
feature of flat data, each channel of images and sequences; on by default, see
:class:`Standardizer`): the estimators' defaults (NG-EBM's ``beta``, JEM's SGLD step and
noise) are in the units of the input, and they are tuned on standardized data. The test split
and every OOD set go through the same transform, so the OOD sets stay what they were in the
data's own units (uniform noise over the raw input range), and the attacks run in the data's
own units too: the standardization is the first layer of the network PGD differentiates, so an
epsilon of 8/255 means 8/255 of a pixel.

For every seed the training split is divided once more: a held-out calibration part (default
20%, stratified) is kept for temperature scaling (``ce_ts``) and every model trains on the rest,
so all models see the same data. Each model is then measured on the test split: accuracy,
calibration (ECE, MCE, classwise ECE, negative log-likelihood), OOD detection (AUROC, AUPR-in,
AUPR-out, FPR95 of each OOD score against each OOD set), accuracy under PGD at each epsilon,
and the training time per epoch (skorch's per-epoch ``dur``). :mod:`ebmclassifier._report`
turns the runs into tables, ``report.md``, ``results.json`` and figures.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import Callback

from ._report import write_report
from .datasets import load_named_dataset
from .metrics import (
    adversarial_accuracy,
    classwise_calibration_error,
    encode_labels,
    expected_calibration_error,
    maximum_calibration_error,
    ood_metrics,
)

__all__ = [
    "CompareConfig",
    "ModelSpec",
    "Standardizer",
    "default_models",
    "network_params",
    "run_comparison",
    "write_report",
]

OOD_SCORES = ("energy", "max_softmax", "approx_mass")

# Per data set: training length, learning rate (None: the estimator's) and attack radii that
# fit its input scale. MNIST-1D: the default ConvNet reaches 87-89% test accuracy with CE at
# the estimators' lr=1e-3 (30-50 epochs) and 91-93% at lr=3e-3 (30 epochs, 3 seeds).
DATA_DEFAULTS = {
    "digits": {"max_epochs": 30, "epsilons": (0.0, 0.02, 0.05, 0.1)},
    "mnist1d": {"max_epochs": 30, "lr": 3e-3, "epsilons": (0.0, 0.05, 0.1, 0.2)},
    "cifar10": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "cifar100": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "svhn": {"max_epochs": 20, "epsilons": (0.0, 1 / 255, 2 / 255, 8 / 255)},
    "file": {"max_epochs": 30, "epsilons": None},  # None: fractions of the input range
}


# ----------------------------------------------------------------------------- models

_WRN = re.compile(r"wrn-(\d+)-(\d+)")


def network_params(network: str) -> dict:
    """The estimator parameters that select ``network`` for every model.

    Parameters
    ----------
    network : str
        ``"default"`` (the estimators' own choice from the data's shape: an MLP or a small
        ConvNet) or ``"wrn-D-K"``, a :class:`~ebmclassifier.nn.WideResNet` of depth ``D`` and
        widen factor ``K`` without batch-norm (``"wrn-28-10"`` is the papers' network).

    Returns
    -------
    params : dict
        ``{}`` for the default, else ``module``, ``module__depth`` and ``module__widen_factor``.

    Examples
    --------
    >>> params = network_params("wrn-28-10")
    >>> params["module"].__name__, params["module__depth"], params["module__widen_factor"]
    ('WideResNet', 28, 10)
    >>> network_params("default")
    {}
    """
    if network == "default":
        return {}
    match = _WRN.fullmatch(network)
    if match is None:
        raise ValueError(
            f"Unknown network {network!r}: use 'default' or 'wrn-D-K' (e.g. 'wrn-28-10', a "
            "WideResNet of depth 28 and widen factor 10)."
        )
    from .nn import WideResNet, wide_resnet_blocks_per_group

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
        Why the model cannot run here (e.g. its class is not installed); it is then skipped.

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


def _estimator_class(module: str, name: str):
    """(class, None) or (None, reason) for ``ebmclassifier.<module>.<name>``."""
    try:
        return getattr(importlib.import_module(f"ebmclassifier.{module}"), name), None
    except (ImportError, AttributeError) as exc:
        return None, f"ebmclassifier.{module}.{name} is not available ({exc})"


def _spec(name, description, module, cls_name, **fixed) -> ModelSpec:
    cls, reason = _estimator_class(module, cls_name)
    if cls is None:
        return ModelSpec(name, description, unavailable=reason)
    return ModelSpec(name, description, build=lambda params: cls(**fixed, **params))


def default_models() -> dict[str, ModelSpec]:
    """The models ``compare`` knows: ``ce``, ``ngebm``, ``jem`` and each one temperature-scaled.

    ``<name>_ts`` trains nothing: it recalibrates the fitted ``<name>`` by temperature scaling
    on the held-out calibration split (``ce_ts`` is the usual fix for calibration the energy
    methods are judged against; ``ngebm_ts`` and ``jem_ts`` show what the same fix does to
    them).

    Returns
    -------
    registry : dict of str to ModelSpec
        A model whose estimator class cannot be imported is present with ``unavailable`` set.

    Examples
    --------
    >>> registry = default_models()
    >>> list(registry)
    ['ce', 'ce_ts', 'ngebm', 'ngebm_ts', 'jem', 'jem_ts']
    >>> registry["ce"].build({"max_epochs": 1}).beta, registry["ce_ts"].calibrates
    (0.0, 'ce')
    """
    return {
        "ce": _spec(
            "ce", "cross-entropy only (NGEBMClassifier with beta=0)", "ngebm",
            "NGEBMClassifier", beta=0.0,
        ),
        "ce_ts": _temperature_scaled("ce"),
        "ngebm": _spec("ngebm", "NG-EBM, beta=gamma=0.5", "ngebm", "NGEBMClassifier", beta=0.5),
        "ngebm_ts": _temperature_scaled("ngebm"),
        "jem": _spec("jem", "JEM (SGLD from a replay buffer)", "jem", "JEMClassifier"),
        "jem_ts": _temperature_scaled("jem"),
    }  # fmt: skip


def _temperature_scaled(base: str) -> ModelSpec:
    return ModelSpec(
        f"{base}_ts",
        f"{base} recalibrated by temperature scaling on the held-out split "
        f"(CalibratedClassifierCV(FrozenEstimator({base}), method='temperature'))",
        scores=("max_softmax",),
        calibrates=base,
    )


class _EpochBar(Callback):
    """skorch callback: one tqdm bar per fit, advanced every epoch, train loss shown."""

    def __init__(self, desc: str, total: int, disable: bool = False):
        self.desc, self.total, self.disable = desc, total, disable

    def on_train_begin(self, net, **kwargs):
        from tqdm.auto import tqdm

        self.bar_ = tqdm(total=self.total, desc=self.desc, leave=False, disable=self.disable)

    def on_epoch_end(self, net, **kwargs):
        self.bar_.update(1)
        loss = net.history[-1].get("train_loss") if len(net.history) else None
        if loss is not None:
            self.bar_.set_postfix(loss=f"{loss:.3f}")

    def on_train_end(self, net, **kwargs):
        self.bar_.close()
        self.bar_ = None  # a fitted estimator stays picklable


# ----------------------------------------------------------------------------- input scale


class Standardizer:
    """Standardization fitted on a training split: per feature, or per channel for images.

    Flat samples, shaped ``(n, d)``, are standardized per feature. Images and sequences, shaped
    ``(n, C, ...)``, are standardized per channel, over every position: a convolution shares
    its weights across positions, so every position keeps one scale (per-position statistics
    would also blow up the pixels that are nearly constant in training, such as image
    borders). The statistics are scikit-learn's
    :class:`~sklearn.preprocessing.StandardScaler` (a feature or channel that is constant in
    training keeps its scale). The same transform is available as a torch layer
    (:meth:`as_module`) so that gradients can be taken in the data's own units.

    Parameters
    ----------
    X_train : ndarray of shape (n_samples, n_features) or (n_samples, n_channels, ...)
        The data the mean and standard deviation are computed on.

    Attributes
    ----------
    mean, scale : ndarray
        Shaped to broadcast against one sample: ``(n_features,)`` or ``(n_channels, 1, ...)``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 1.0], [2.0, 1.0]], dtype=np.float32)
    >>> Standardizer(X).transform(X)
    array([[-1.,  0.],
           [ 1.,  0.]], dtype=float32)
    >>> images = np.arange(16, dtype=np.float32).reshape(2, 2, 4)  # 2 samples, 2 channels
    >>> Standardizer(images).mean.ravel()
    array([5.5, 9.5])
    """

    def __init__(self, X_train: np.ndarray):
        X_train = np.asarray(X_train)
        if X_train.ndim > 2:  # (n, C, ...): one row per (sample, position), one column per channel
            rows = np.moveaxis(X_train, 1, -1).reshape(-1, X_train.shape[1])
            shape = (X_train.shape[1],) + (1,) * (X_train.ndim - 2)
        else:
            rows, shape = X_train, X_train.shape[1:]
        scaler = StandardScaler().fit(rows)
        self.mean = scaler.mean_.reshape(shape)
        self.scale = scaler.scale_.reshape(shape)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Standardize ``X`` (same sample shape as the training data); float32, same shape.

        Parameters
        ----------
        X : ndarray of shape (n_samples, ...)

        Returns
        -------
        X_standardized : ndarray of float32, same shape as ``X``

        Examples
        --------
        >>> import numpy as np
        >>> X_train = np.random.default_rng(0).normal(3.0, 2.0, size=(100, 2))
        >>> scaler = Standardizer(X_train)
        >>> Z = scaler.transform(X_train)
        >>> Z.dtype, np.allclose(Z.mean(axis=0), 0, atol=1e-6), np.allclose(Z.std(axis=0), 1)
        (dtype('float32'), True, True)
        >>> np.allclose(scaler.transform(X_train + scaler.scale), Z + 1, atol=1e-5)  # one scale up
        True
        """
        return ((X - self.mean) / self.scale).astype(np.float32)

    def as_module(self, device) -> torch.nn.Module:
        """The transform as a torch layer, ``(x - mean) / scale``, on ``device``.

        Parameters
        ----------
        device : str or torch.device

        Returns
        -------
        layer : torch.nn.Module

        Examples
        --------
        The same numbers as :meth:`transform`, and gradients in the data's own units:

        >>> import numpy as np
        >>> import torch
        >>> X_train = np.random.default_rng(0).normal(3.0, 2.0, size=(100, 2))
        >>> scaler = Standardizer(X_train)
        >>> layer = scaler.as_module("cpu")
        >>> x = torch.tensor(X_train, dtype=torch.float32, requires_grad=True)
        >>> np.allclose(layer(x).detach().numpy(), scaler.transform(X_train), atol=1e-6)
        True
        >>> layer(x).sum().backward()
        >>> np.allclose(x.grad[0].numpy(), 1 / scaler.scale)  # d((x - mean) / scale)/dx
        True
        """
        as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
        return _Affine(as_tensor(self.mean), as_tensor(self.scale)).to(device)


class _Affine(torch.nn.Module):
    def __init__(self, mean: torch.Tensor, scale: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale


class _RawInputView:
    """A fitted estimator seen from the raw input space, for :func:`adversarial_accuracy`.

    Its network is ``standardize -> estimator.module_`` and its input box the raw input range,
    so PGD's ball and box are in the data's own units whatever scale the model trained on.
    """

    def __init__(self, estimator, standardizer: Standardizer, input_range: tuple):
        self.module_ = torch.nn.Sequential(
            standardizer.as_module(estimator.device_), estimator.module_
        )
        self.classes_ = estimator.classes_
        self.device_ = estimator.device_
        self.input_min_, self.input_max_ = (float(v) for v in input_range)


# ----------------------------------------------------------------------------- measuring


def _proba_metrics(y_true, proba, classes, n_bins) -> dict:
    y_enc = encode_labels(y_true, classes)
    # float32 rows may miss 1 by more than log_loss tolerates
    proba = np.asarray(proba, dtype=np.float64)
    proba = proba / proba.sum(axis=1, keepdims=True)
    return {
        "accuracy": float(np.mean(proba.argmax(axis=1) == y_enc)),
        "ece": expected_calibration_error(y_enc, proba, n_bins),
        "mce": maximum_calibration_error(y_enc, proba, n_bins),
        "classwise_ece": classwise_calibration_error(y_enc, proba, n_bins),
        "nll": float(log_loss(y_enc, proba, labels=np.arange(len(classes)))),
    }


def _ood_results(score_fn: Callable, scores: Sequence[str], X_test, ood: dict) -> dict:
    """{score: {ood set: ood_metrics}} with score_fn(X, method) oriented as score_ood."""
    results = {}
    for method in scores:
        s_in = np.asarray(score_fn(X_test, method))
        results[method] = {
            name: ood_metrics(s_in, np.asarray(score_fn(X_ood, method)))
            for name, X_ood in ood.items()
        }
    return results


def _seconds_per_epoch(estimator, fit_seconds: float, max_epochs: int) -> float:
    """Median of skorch's per-epoch durations; the fit time over epochs without a history."""
    try:
        durations = [row["dur"] for row in estimator.history]
    except (AttributeError, KeyError, TypeError):
        durations = []
    return float(np.median(durations)) if durations else fit_seconds / max(max_epochs, 1)


@dataclass
class CompareConfig:
    """Everything ``compare`` needs; the CLI fills it from its options.

    Parameters
    ----------
    data, data_dir, max_train, max_test
        The data set, as :func:`~ebmclassifier.datasets.load_named_dataset` takes them.
    models : sequence of str
        Names from the registry (:func:`default_models`).
    seeds : int
        Seeds ``0 .. seeds - 1``; each fixes the calibration split, the estimators'
        ``random_state`` and the attacks' random starts.
    max_epochs, lr, batch_size : int, float, int or None
        Training; None takes the data set's default (``DATA_DEFAULTS``), else the estimator's.
    device : str
        The estimators' ``device``.
    epsilons : sequence of float or None
        PGD radii; None takes the data set's default.
    network : str
        ``"default"`` or ``"wrn-D-K"``, see :func:`network_params`.
    norm : {"linf", "l2"}
    attack_steps : int
    n_attack : int or None
        How many test samples are attacked (None: all).
    calibration_size : float
        Fraction of the training split held out for ``ce_ts``.
    n_bins : int
        Bins of the calibration errors.
    progress : bool
        Show tqdm progress bars.
    standardize : bool
        Standardize every feature over the training split before training (see the module
        docstring); attacks and OOD sets stay in the data's own units either way.
    extra_params : dict of str to dict
        Additional estimator parameters per model name, e.g. ``{"jem": {"sgld_steps": 10}}``.

    Examples
    --------
    >>> config = CompareConfig(models=("ce", "ngebm"), seeds=2, max_epochs=5)
    >>> config.data, config.standardize, config.n_bins
    ('digits', True, 15)
    """

    data: str = "digits"
    models: Sequence[str] = ("ce", "ce_ts", "ngebm", "jem")
    seeds: int = 3
    data_dir: str | None = None
    max_epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    device: str = "auto"
    network: str = "default"
    epsilons: Sequence[float] | None = None
    norm: str = "linf"
    attack_steps: int = 10
    n_attack: int | None = 500
    calibration_size: float = 0.2
    n_bins: int = 15
    max_train: int | None = None
    max_test: int | None = None
    progress: bool = True
    standardize: bool = True
    extra_params: dict = field(default_factory=dict)


def _select_models(config: CompareConfig, registry: dict[str, ModelSpec], log):
    """(the specs that can run, {skipped name: reason})."""
    unknown = [m for m in config.models if m not in registry]
    if unknown:
        raise ValueError(f"Unknown models {unknown!r}; choose from {sorted(registry)!r}.")
    selected, skipped = [], {}
    for name in config.models:
        spec = registry[name]
        base = registry.get(spec.calibrates) if spec.calibrates else spec
        if base is None or base.unavailable:
            reason = base.unavailable if base is not None else f"{spec.calibrates!r} is unknown"
            log(f"skipping {name!r}: {reason}")
            skipped[name] = reason
            continue
        selected.append(spec)
    if not selected:
        raise RuntimeError("None of the requested models can run here; see the messages above.")
    return selected, skipped


def run_comparison(config: CompareConfig, registry=None, log: Callable = print) -> dict:
    """Train and measure every model for every seed.

    Parameters
    ----------
    config : CompareConfig
    registry : dict of str to ModelSpec or None, default=None
        None: :func:`default_models`.
    log : callable, default=print
        Receives one line per skipped model.

    Returns
    -------
    results : dict
        ``config``, ``data`` (sizes, shapes, OOD sets), ``models`` (descriptions and skips),
        ``epsilons`` and ``runs``: one record per (model, seed) with the measurements and, for
        the first seed, the arrays the figures need (``_figure_data``, not written to JSON).

    See Also
    --------
    write_report : report.md, results.json and the figures from the results.

    Examples
    --------
    A quick run (one seed, one epoch, part of digits); the command line's default run trains
    30 epochs for three seeds:

    >>> config = CompareConfig(
    ...     models=("ce", "ce_ts", "ngebm"), seeds=1, max_epochs=1, max_train=300,
    ...     max_test=100, n_attack=20, progress=False,
    ... )
    >>> results = run_comparison(config)
    >>> [(run["model"], run["seed"]) for run in results["runs"]]
    [('ce', 0), ('ce_ts', 0), ('ngebm', 0)]
    >>> sorted(results["runs"][0]["ood"]["energy"])
    ['inverted', 'permuted', 'uniform']
    >>> 0.0 <= results["runs"][2]["ood"]["approx_mass"]["uniform"]["auroc"] <= 1.0
    True
    """
    from tqdm.auto import tqdm

    registry = default_models() if registry is None else registry
    specs, skipped = _select_models(config, registry, log)
    network = network_params(config.network)
    data = load_named_dataset(
        config.data, data_dir=config.data_dir, max_train=config.max_train,
        max_test=config.max_test,
    )  # fmt: skip
    if network and data.X_train.ndim != 4:
        raise ValueError(
            f"--network {config.network} takes images of shape (n, C, H, W); {data.name} has "
            f"samples of shape {data.X_train.shape[1:]}. Use --network default."
        )
    X_attack = data.X_test  # attacked in the data's own units
    standardizer = Standardizer(data.X_train) if config.standardize else None
    if standardizer is not None:
        data.X_train = standardizer.transform(data.X_train)
        data.X_test = standardizer.transform(data.X_test)
        data.ood = {name: standardizer.transform(X) for name, X in data.ood.items()}
    defaults = DATA_DEFAULTS[data.kind]
    max_epochs = config.max_epochs or defaults["max_epochs"]
    lr = config.lr if config.lr is not None else defaults.get("lr")
    low, high = data.input_range
    epsilons = config.epsilons or defaults["epsilons"]
    if epsilons is None:
        epsilons = tuple(float(f * (high - low)) for f in (0.0, 0.01, 0.02, 0.05))
    n_attack = (
        len(data.y_test) if config.n_attack is None else min(config.n_attack, len(data.y_test))
    )

    trained = {s.calibrates or s.name for s in specs}
    runs, failures = [], []
    total = len(trained) * config.seeds
    outer = tqdm(total=total, desc=f"compare on {data.name}", disable=not config.progress)
    for seed in range(config.seeds):
        X_fit, X_cal, y_fit, y_cal = train_test_split(
            data.X_train, data.y_train, test_size=config.calibration_size,
            stratify=data.y_train, random_state=seed,
        )  # fmt: skip
        fitted = {}
        for name in [n for n in registry if n in trained]:
            bar = _EpochBar(f"{name} seed {seed}", max_epochs, disable=not config.progress)
            params = {"random_state": seed, "max_epochs": max_epochs, "device": config.device,
                      "verbose": 0, "callbacks": [("epoch_bar", bar)]}  # fmt: skip
            params.update({k: v for k, v in (("lr", lr), ("batch_size", config.batch_size))
                           if v is not None})  # fmt: skip
            params.update(network)
            params.update(config.extra_params.get(name, {}))
            estimator = registry[name].build(params)
            start = time.perf_counter()
            try:
                estimator.fit(X_fit, y_fit)
            except Exception as exc:  # one failed fit (e.g. a divergence) must not end the run
                failures.append({"model": name, "seed": seed, "error": repr(exc)})
                log(f"{name!r} failed at seed {seed}: {exc!r}")
            else:
                fitted[name] = (estimator, time.perf_counter() - start)
            outer.update(1)
        for spec in specs:
            if (spec.calibrates or spec.name) in fitted:
                runs.append(
                    _measure(spec, fitted, seed, data, X_cal, y_cal, config, max_epochs,
                             epsilons, X_attack[:n_attack], standardizer)
                )  # fmt: skip
    outer.close()
    _add_relative_cost(runs)
    return {
        "config": {k: v for k, v in vars(config).items() if k != "extra_params"},
        "data": {
            "name": data.name,
            "n_train": len(y_fit),
            "n_calibration": len(y_cal),
            "n_test": int(len(data.y_test)),
            "n_attacked": n_attack,
            "input_shape": list(data.X_train.shape[1:]),
            "input_range": [float(low), float(high)],
            "standardized": standardizer is not None,
            "ood_sets": {k: int(len(v)) for k, v in data.ood.items()},
        },
        "models": {s.name: s.description for s in specs},
        "calibrated": {s.name: s.calibrates for s in specs if s.calibrates},
        "skipped": skipped,
        "failures": failures,
        "max_epochs": max_epochs,
        "lr": lr,
        "epsilons": [float(e) for e in epsilons],
        "runs": runs,
    }


def _measure(
    spec, fitted, seed, data, X_cal, y_cal, config, max_epochs, epsilons, X_attack, standardizer
):
    """One run record: the model ``spec`` at ``seed``, measured on the test split.

    ``X_attack`` are the first test samples in the data's own units; with a ``standardizer``
    they are attacked through it (:class:`_RawInputView`).
    """
    X_test, y_test = data.X_test, data.y_test
    if spec.calibrates:
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.frozen import FrozenEstimator

        base, fit_seconds = fitted[spec.calibrates]
        start = time.perf_counter()
        model = CalibratedClassifierCV(FrozenEstimator(base), method="temperature").fit(
            X_cal, y_cal
        )
        calibration_seconds = time.perf_counter() - start
        seconds_per_epoch = _seconds_per_epoch(base, fit_seconds, max_epochs)
        beta = model.calibrated_classifiers_[0].calibrators[0].beta_
        extra = {"temperature": float(1.0 / beta), "calibration_seconds": calibration_seconds}

        def score_fn(X, method):
            return -model.predict_proba(X).max(axis=1)  # max_softmax of the recalibrated model

        robust = None  # temperature scaling keeps every argmax: the same as the base model's
    else:
        model, fit_seconds = fitted[spec.name]
        seconds_per_epoch = _seconds_per_epoch(model, fit_seconds, max_epochs)
        extra = {}

        def score_fn(X, method):
            return model.score_ood(X, method=method)

        attacked = model
        if standardizer is not None:
            attacked = _RawInputView(model, standardizer, data.input_range)
        robust = adversarial_accuracy(
            attacked, X_attack, y_test[: len(X_attack)], epsilons, norm=config.norm,
            steps=config.attack_steps, random_state=seed,
        ).tolist()  # fmt: skip
    proba = model.predict_proba(X_test)
    record = {
        "model": spec.name,
        "seed": seed,
        **_proba_metrics(y_test, proba, model.classes_, config.n_bins),
        "ood": _ood_results(score_fn, spec.scores, X_test, data.ood),
        "robust_accuracy": robust,
        "fit_seconds": fit_seconds,
        "seconds_per_epoch": seconds_per_epoch,
        "divergences": getattr(model, "n_divergences_", None),
        **extra,
    }
    if seed == 0:
        first = spec.scores[0]
        record["_figure_data"] = {
            "y_test": y_test,
            "proba": proba,
            "classes": model.classes_,
            "score": first,
            "scores_in": np.asarray(score_fn(X_test, first)),
            "scores_out": {k: np.asarray(score_fn(v, first)) for k, v in data.ood.items()},
        }
    return record


def _add_relative_cost(runs: list) -> None:
    """``cost_vs_ce``: seconds per epoch over the CE model's in the same seed (None without ce)."""
    ce = {r["seed"]: r["seconds_per_epoch"] for r in runs if r["model"] == "ce"}
    for r in runs:
        base = ce.get(r["seed"])
        r["cost_vs_ce"] = r["seconds_per_epoch"] / base if base else None
