"""One run record of ``compare``: a fitted model measured on the test split, through its public
methods (``predict_proba``, ``score_ood``, ``calibrate_ood``) and
:func:`~ebmclassifier.metrics.adversarial_accuracy`.

Per score (the model's own ``score_ood`` methods and, for every model with a network of its
own, the post-hoc detectors on its penultimate features):

- ``ood``: :func:`~ebmclassifier.metrics.ood_metrics` against each OOD set;
- ``aurc``: the area under the risk-coverage curve of the model's predictions on the test split
  when the score decides which to answer first, confidence ``-score_ood`` (for ``max_softmax``
  that is ``max_y p(y|x)``, the usual selective classifier);
- ``ood_decisions``: the threshold :func:`~ebmclassifier.metrics.threshold_at_tpr` (the rule
  of ``calibrate_ood``) sets on the scores of the held-out calibration split at
  ``tpr=0.95``, the ``false_positive_rate`` (share of the in-distribution test samples it
  flags) and, per OOD set, the ``miss_rate`` (share of the OOD samples it does not
  flag). A sample is flagged when its score is above the threshold (``predict_ood``'s rule).

The record also names its ``headline`` score, the one the report judges the model by
(:func:`headline_of`): fixed in advance, never chosen on the measurements.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.metrics import log_loss
from skorch.callbacks import Callback

from ..detectors import penultimate_features
from ..metrics import (
    adversarial_accuracy,
    aurc,
    classwise_calibration_error,
    encode_labels,
    expected_calibration_error,
    maximum_calibration_error,
    ood_metrics,
    threshold_at_tpr,
)
from .models import build_detector

#: The share of held-out in-distribution data the OOD decision threshold keeps.
OOD_TPR = 0.95


class EpochBar(Callback):
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


@dataclass
class Split:
    """One seed's division of the training split: the fit part and the calibration part."""

    X_fit: np.ndarray
    X_cal: np.ndarray
    y_fit: np.ndarray
    y_cal: np.ndarray


@dataclass
class _Measured:
    """A model ready to be measured: what it predicts with, how it scores, what it cost."""

    model: object  # predict_proba and classes_
    score_fn: Callable  # score_fn(X, method), oriented as score_ood
    robust: list | None  # accuracy under PGD per epsilon; None: the base model's
    fit_seconds: float
    seconds_per_epoch: float
    extra: dict = field(default_factory=dict)


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


def _scores(score_fn: Callable, methods: Sequence[str], X_test, ood: dict) -> dict:
    """{method: (test scores, {ood set: scores})}, oriented as score_ood."""
    return {
        method: (
            np.asarray(score_fn(X_test, method)),
            {name: np.asarray(score_fn(X, method)) for name, X in ood.items()},
        )
        for method in methods
    }


def _ood_results(scores: dict) -> dict:
    """{score: {ood set: ood_metrics}}."""
    return {
        method: {name: ood_metrics(s_in, s_out) for name, s_out in by_set.items()}
        for method, (s_in, by_set) in scores.items()
    }


def _threshold(measured, method: str, X_cal) -> float:
    """The OOD threshold on the held-out calibration split: :func:`threshold_at_tpr` at
    ``OOD_TPR``, the rule of ``calibrate_ood`` and of the report's FPR95 (``fpr95_in``)."""
    return threshold_at_tpr(measured.score_fn(X_cal, method), OOD_TPR)


def _decisions(thresholds: dict, scores: dict) -> dict:
    """Per score: the threshold, the share of test samples flagged, the share of OOD missed."""
    return {
        method: {
            "threshold": t,
            "false_positive_rate": float(np.mean(scores[method][0] > t)),
            "miss_rate": {name: float(np.mean(s <= t)) for name, s in scores[method][1].items()},
        }
        for method, t in thresholds.items()
    }


class _Penultimate:
    """``penultimate_features(model, X)``, computed once per array and shared by every
    detector: the fit part, the test split, each OOD set and the calibration split are each
    passed through the network once, however many detectors score them."""

    def __init__(self, model):
        self.model = model
        self._features = {}  # id(X) -> (X, features); X is kept, so its id stays its own

    def __call__(self, X) -> np.ndarray:
        if id(X) not in self._features:
            self._features[id(X)] = (X, penultimate_features(self.model, X))
        return self._features[id(X)][1]


def _with_detectors(
    measured: _Measured, names: Sequence[str], split: Split
) -> tuple[_Measured, dict]:
    """``measured`` with the post-hoc detectors as extra scores, fitted on the fit part only,
    and ``{detector: reason}`` for those that cannot be fitted on these features (ViM on
    features of rank below 2, a network without ``penultimate``): the run goes on without
    them."""
    model = measured.model
    features = _Penultimate(model)
    detectors, unavailable = {}, {}
    for name in names:
        try:
            detectors[name] = build_detector(name, len(split.y_fit)).fit_on_features(
                model, features(split.X_fit), split.y_fit
            )
        except (ValueError, TypeError, np.linalg.LinAlgError) as exc:  # e.g. no penultimate
            unavailable[name] = str(exc)
    own = measured.score_fn

    def score_fn(X, method):
        if method in detectors:
            return detectors[method].score_ood(features(X))
        return own(X, method)

    return replace(measured, score_fn=score_fn), unavailable


def has_features(model) -> bool:
    """Whether the post-hoc detectors can read ``model``'s penultimate features: a fitted
    estimator of the library with a network of its own (``module_``)."""
    return hasattr(model, "module_")


def _seconds_per_epoch(estimator, fit_seconds: float, max_epochs: int) -> float:
    """Median of skorch's per-epoch durations; the fit time over epochs without a history.

    An ensemble (``estimators_``) costs the sum of its experts' epochs: one epoch of each.
    """
    experts = getattr(estimator, "estimators_", None)
    if experts:
        share = fit_seconds / len(experts)
        return sum(_seconds_per_epoch(e, share, max_epochs) for e in experts)
    try:
        durations = [row["dur"] for row in estimator.history]
    except (AttributeError, KeyError, TypeError):
        durations = []
    return float(np.median(durations)) if durations else fit_seconds / max(max_epochs, 1)


def _calibrated(spec, fitted, calibration, max_epochs) -> _Measured:
    """The fitted base model recalibrated by temperature scaling on the held-out split."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    base, fit_seconds = fitted[spec.calibrates]
    start = time.perf_counter()
    # The frozen model is not refitted, so scikit-learn's default 5 folds only slice the
    # split into parts it predicts on, each class needing 5 samples: one "fold" whose test
    # part is the whole split gives the same predictions, hence the same temperature, and
    # works on a calibration split of any size.
    whole = np.arange(len(calibration[1]))
    model = CalibratedClassifierCV(
        FrozenEstimator(base), method="temperature", cv=[(whole, whole)]
    ).fit(*calibration)
    calibration_seconds = time.perf_counter() - start
    beta = model.calibrated_classifiers_[0].calibrators[0].beta_

    def score_fn(X, method):
        return -model.predict_proba(X).max(axis=1)  # max_softmax of the recalibrated model

    return _Measured(
        model,
        score_fn,
        robust=None,  # temperature scaling keeps every argmax: the same as the base model's
        fit_seconds=fit_seconds,
        seconds_per_epoch=_seconds_per_epoch(base, fit_seconds, max_epochs),
        extra={"temperature": float(1.0 / beta), "calibration_seconds": calibration_seconds},
    )


def _robust_accuracy(model, seed, config, setup) -> list | None:
    """Accuracy under PGD in the data's own units (through the standardization); None for a
    model without a network of its own to differentiate (an ensemble)."""
    if not hasattr(model, "module_"):
        return None
    view = {}
    if setup.standardizer is not None:  # the ball and the box in raw units
        view = {
            "preprocess": setup.standardizer.as_module(model.device_),
            "input_range": setup.data.input_range,
        }
    X_attack = setup.X_attack
    return adversarial_accuracy(
        model,
        X_attack,
        setup.data.y_test[: len(X_attack)],
        setup.epsilons,
        norm=config.norm,
        steps=config.attack_steps,
        random_state=seed,
        **view,
    ).tolist()


def _trained(spec, fitted, seed, config, setup) -> _Measured:
    """A fitted model, attacked in the data's own units where it has a network to attack."""
    model, fit_seconds = fitted[spec.name]
    robust = _robust_accuracy(model, seed, config, setup)
    return _Measured(
        model,
        lambda X, method: model.score_ood(X, method=method),
        robust=robust,
        fit_seconds=fit_seconds,
        seconds_per_epoch=_seconds_per_epoch(model, fit_seconds, setup.max_epochs),
    )


def headline_of(spec, model) -> str:
    """The OOD score the report judges ``spec``'s model by, fixed before any data is seen.

    ``spec.headline`` when set; else the estimator's ``ood_method`` parameter (the score
    ``score_ood`` and ``predict_ood`` use when the user names none); else the first of
    ``spec.scores``. Nothing measured enters the choice, so it cannot favour the model on the
    OOD sets it is judged on.
    """
    if spec.calibrates:
        return spec.scores[0]  # max_softmax, the only score of a recalibrated model
    chosen = spec.headline or getattr(model, "ood_method", None) or spec.scores[0]
    if chosen not in spec.scores:
        raise ValueError(
            f"The headline OOD score of {spec.name!r} is {chosen!r}, which it does not measure "
            f"(its scores: {list(spec.scores)!r}); set ModelSpec.headline to one of them."
        )
    return chosen


def measure(spec, fitted, seed, split: Split, config, setup) -> dict:
    """One run record: the model ``spec`` at ``seed``, measured on the test split.

    The post-hoc detectors (``config.detectors``) read the penultimate features of every model
    that has a network of its own (not a temperature-scaled model, not an ensemble); one that
    cannot be fitted on them is listed under ``unavailable`` with the reason.

    ``fitted`` maps a trained model's name to ``(estimator, fit seconds)``; ``split`` holds the
    seed's fit and calibration parts; ``config`` and ``setup`` are ``compare``'s.
    """
    if spec.calibrates:
        measured = _calibrated(spec, fitted, (split.X_cal, split.y_cal), setup.max_epochs)
    else:
        measured = _trained(spec, fitted, seed, config, setup)
    methods, unavailable = tuple(spec.scores), {}
    if config.detectors and has_features(measured.model):
        measured, unavailable = _with_detectors(measured, config.detectors, split)
        methods += tuple(d for d in config.detectors if d not in unavailable)
    model, data = measured.model, setup.data
    headline = headline_of(spec, model)
    proba = model.predict_proba(data.X_test)
    scores = _scores(measured.score_fn, methods, data.X_test, data.ood)
    thresholds = {m: _threshold(measured, m, split.X_cal) for m in methods}
    record = {
        "model": spec.name,
        "seed": seed,
        "headline": headline,
        **_proba_metrics(data.y_test, proba, model.classes_, config.n_bins),
        "aurc": {
            m: aurc(data.y_test, proba, -s_in, classes=model.classes_)
            for m, (s_in, _) in scores.items()
        },
        "ood": _ood_results(scores),
        "ood_decisions": _decisions(thresholds, scores),
        "robust_accuracy": measured.robust,
        "fit_seconds": measured.fit_seconds,
        "seconds_per_epoch": measured.seconds_per_epoch,
        "divergences": getattr(model, "n_divergences_", None),
        "unavailable": unavailable,
        **measured.extra,
    }
    # every seed's, every score's: a figure shows the seed whose figure is the median
    record["_figure_data"] = {
        "y_test": data.y_test,
        "proba": proba,
        "classes": model.classes_,
        "scores": scores,
    }
    return record
