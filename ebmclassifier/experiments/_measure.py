"""One run record of ``compare``: a fitted model measured on the test split, through its public
methods (``predict_proba``, ``score_ood``) and :func:`~ebmclassifier.metrics.adversarial_accuracy`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import log_loss
from skorch.callbacks import Callback

from ..metrics import (
    adversarial_accuracy,
    classwise_calibration_error,
    encode_labels,
    expected_calibration_error,
    maximum_calibration_error,
    ood_metrics,
)


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


def _calibrated(spec, fitted, calibration, max_epochs) -> _Measured:
    """The fitted base model recalibrated by temperature scaling on the held-out split."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    base, fit_seconds = fitted[spec.calibrates]
    start = time.perf_counter()
    model = CalibratedClassifierCV(FrozenEstimator(base), method="temperature").fit(*calibration)
    calibration_seconds = time.perf_counter() - start
    beta = model.calibrated_classifiers_[0].calibrators[0].beta_

    def score_fn(X, method):
        return -model.predict_proba(X).max(axis=1)  # max_softmax of the recalibrated model

    return _Measured(
        model, score_fn,
        robust=None,  # temperature scaling keeps every argmax: the same as the base model's
        fit_seconds=fit_seconds,
        seconds_per_epoch=_seconds_per_epoch(base, fit_seconds, max_epochs),
        extra={"temperature": float(1.0 / beta), "calibration_seconds": calibration_seconds},
    )  # fmt: skip


def _trained(spec, fitted, seed, config, setup) -> _Measured:
    """A fitted model, attacked in the data's own units (through the standardization)."""
    model, fit_seconds = fitted[spec.name]
    view = {}
    if setup.standardizer is not None:  # the ball and the box in raw units
        view = {
            "preprocess": setup.standardizer.as_module(model.device_),
            "input_range": setup.data.input_range,
        }
    X_attack = setup.X_attack
    robust = adversarial_accuracy(
        model, X_attack, setup.data.y_test[: len(X_attack)], setup.epsilons, norm=config.norm,
        steps=config.attack_steps, random_state=seed, **view,
    ).tolist()  # fmt: skip
    return _Measured(
        model,
        lambda X, method: model.score_ood(X, method=method),
        robust=robust,
        fit_seconds=fit_seconds,
        seconds_per_epoch=_seconds_per_epoch(model, fit_seconds, setup.max_epochs),
    )


def measure(spec, fitted, seed, calibration, config, setup) -> dict:
    """One run record: the model ``spec`` at ``seed``, measured on the test split.

    ``fitted`` maps a trained model's name to ``(estimator, fit seconds)``; ``calibration`` is
    the held-out ``(X_cal, y_cal)``; ``config`` and ``setup`` are ``compare``'s.
    """
    if spec.calibrates:
        measured = _calibrated(spec, fitted, calibration, setup.max_epochs)
    else:
        measured = _trained(spec, fitted, seed, config, setup)
    model, score_fn, data = measured.model, measured.score_fn, setup.data
    proba = model.predict_proba(data.X_test)
    record = {
        "model": spec.name,
        "seed": seed,
        **_proba_metrics(data.y_test, proba, model.classes_, config.n_bins),
        "ood": _ood_results(score_fn, spec.scores, data.X_test, data.ood),
        "robust_accuracy": measured.robust,
        "fit_seconds": measured.fit_seconds,
        "seconds_per_epoch": measured.seconds_per_epoch,
        "divergences": getattr(model, "n_divergences_", None),
        **measured.extra,
    }
    if seed == 0:
        first = spec.scores[0]
        record["_figure_data"] = {
            "y_test": data.y_test,
            "proba": proba,
            "classes": model.classes_,
            "score": first,
            "scores_in": np.asarray(score_fn(data.X_test, first)),
            "scores_out": {k: np.asarray(score_fn(v, first)) for k, v in data.ood.items()},
        }
    return record
