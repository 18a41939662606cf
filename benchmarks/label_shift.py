"""Label-shift adaptation on digits and MNIST-1D (issues #25, #39, #49): does NG-EBM's
calibration, obtained without a held-out split, make EM adaptation as good as the best recipe
that needs one, does EM's default keep the probabilities it returns from getting worse than
none, and does the test of the shift keep them from getting worse where there is no shift?

The standard protocol (Lipton, Wang & Smola 2018; Alexandari, Kundaje & Shrikumar 2020). Per
data set and seed:

- data: ``load_named_dataset(name)`` (digits standardized per feature over the training split;
  MNIST-1D, already standardized, its first 2,000 training signals: the over-fit MLP setting of
  ``compare --max-train 2000``); the training split is divided (stratified, ``random_state=seed``)
  into a fit part (80%) and a labelled held-out part (20%).
- models, trained on the fit part with the library's default MLP: ``ce``
  (``NGEBMClassifier(beta=0)``), ``ngebm`` (``beta=0.5``), ``jem`` (``JEMClassifier``, fewer
  epochs, its cost being ~20 forward-backward passes per step); ``ngebm_all``: NG-EBM trained on
  fit + held-out (all the labels, since it needs no held-out split); on MNIST-1D also
  ``ce_conv`` and ``ngebm_conv``, the library's default ConvNet on the ``(1, 40)`` signals of the
  same split (issue #39); ``--models`` trains a subset.
- calibrated on the held-out part, ``ce`` and ``ngebm`` (issue #32): ``_ts`` temperature
  scaling, ``_bcts`` bias-corrected temperature scaling (Alexandari et al.), both by
  :func:`ebmclassifier.distributional.fit_temperature` with the library's default penalty (1),
  and ``_ts_mle`` / ``_bcts_mle`` their maximum-likelihood fits (penalty 0); ``jem`` (issue
  #49) by ``_ts``, ``_bcts`` and ``_vs``, vector scaling (a temperature and a bias per class,
  fitted here with the same penalty: the library has none). A row that an adaptation leaves
  without mass (0/0, a degenerate maximum-likelihood BCTS) counts as uniform.
- deployment sets of each size of ``--n-deploy`` (100, 300, 1000) drawn with replacement from
  the test split, without shift (``noshift``: the class shares of the fit part, the training
  priors) and with class priors ``π' ~ Dirichlet(α 1)``, α in {0.1, 0.5, 1, 10}, ``--draws``
  (10) draws per condition, from a generator per (seed, condition, size).
- prior estimators (training priors = the model's ``class_prior_``, the class shares of the
  labels it was trained on, and for a calibrated model those of the held-out part, as
  ``DistributionalConstraint(calibration=...)`` takes them): ``none`` (no adaptation), ``em``
  (:func:`~ebmclassifier.distributional.em_priors` with the library's defaults, as
  ``DistributionalConstraint(priors="em")`` runs it: the EM of Saerens et al. 2002 under a
  Dirichlet prior of one pseudo-sample, ``tol=1e-8``, ``max_iter=1000``), ``em_ml`` (the same
  with ``pseudo_count=0``: maximum likelihood, the library before issue #39), ``emq`` (quapy's
  ``EMQ.EM`` on the same posteriors, when quapy is installed), ``bbse`` (Lipton et al.: hard
  predictions of ``ce`` and its confusion matrix on the held-out part), ``oracle`` (the true
  ``π'``); ``--pseudo-counts 0.5,2`` adds ``em_s0.5``, ``em_s2`` and ``em_floor`` (the
  maximum-likelihood priors floored at ``1/n``), the candidates for EM's default; the test of
  the shift (issue #49, :func:`~ebmclassifier.distributional.prior_shift_test`): ``gate``
  (the library's default: EM's priors moved from the training priors by the test's weight, the
  threshold bootstrapped from the held-out posteriors as ``DistributionalConstraint`` does,
  with the calibration refitted per resample for ``_ts`` and ``_bcts``), ``gate_hard`` (the
  same test, EM's priors adopted whole when it fires), ``gate_chi2`` (adopted whole above the
  chi-square threshold), ``gate_x`` (the library without held-out samples: the chi-square
  threshold and the weight). Every estimate
  adapts the posteriors by the Bayes correction ``p(y|x) π'(y)/π(y)``
  (:func:`ebmclassifier.distributional.bayes_correction`, = ``DistributionalConstraint(
  method="bayes")``; with EM's priors the moment projection gives the same).
- metrics on each deployment set: prior-estimation error ``|π̂ - π'|_1``, accuracy, NLL, ECE
  (15 bins), each averaged over the draws, then the median over seeds; and per draw, whether
  the NLL is above no adaptation's (and by more than 0.05 nats: the headline of issue #49) and
  above EMQ's, the prior error above EMQ's, the largest NLL excess over no adaptation
  (``--em-table``), and the test's decision and weight (``--gate-table``, ``--jem-table``).

The posteriors of each trained model are cached in ``--cache`` (``.npz``, read without pickle),
so a second run (``--report`` only, more draws, other estimators) trains nothing.

    python benchmarks/label_shift.py --seeds 5 --out docs/distributional   # issue #49's run
    python benchmarks/label_shift.py --report docs/distributional/results.json --gate-table
    python benchmarks/label_shift.py --report docs/distributional/results.json --jem-table
    python benchmarks/label_shift.py --report docs/distributional/results.json --em-table \
        --at-n 1000                          # any table of one size, at one size or each
    python benchmarks/label_shift.py --quick            # smoke test

The run of issue #39 (one size, 500, with the pseudo-count candidates) is
``docs/distributional/results_n500.json``, read by the same ``--report`` (``--markdown``,
``--em-table``, ``--pseudo-count-table``, ``--calibration-table``); it was
``--seeds 5 --n-deploy 500 --pseudo-counts 0.3,0.5,2,3,5,10``.

Measured, one thread on two CPU cores shared with other jobs: training the models of five
seeds took 10.5 min wall in issue #39's run (100-130 s per MNIST-1D seed with both ConvNets,
20-50 s per digits seed) and 184 s CPU in issue #49's (with one draw of that issue's
estimators); issue #49's run on those cached posteriors 899 s CPU, 21.7 min wall at load
average 2-3 (the test's bootstraps, once per seed, model and size, included).

Writes ``results.json``, ``prior_error.png`` (prior-estimation error against α, at the largest
size), ``gate.png`` (the share of draws damaged by more than 0.05 nats against n, EM always and
the test) and ``reliability_{ce,ce_em,ngebm,ngebm_em}.png`` (reliability diagrams before/after
EM on MNIST-1D, α = 0.1, seed 0, ten draws pooled) into ``--out`` and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.special import logsumexp
from scipy.stats import chi2
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from tqdm import tqdm

from ebmclassifier import JEMClassifier, NGEBMClassifier
from ebmclassifier.datasets import load_named_dataset
from ebmclassifier.distributional import (
    bayes_correction,
    bbse_priors,
    calibrated_log_proba,
    em_priors,
    fit_temperature,
    prior_shift_statistic,
    prior_shift_test,
)
from ebmclassifier.metrics import expected_calibration_error

ALPHAS = (0.1, 0.5, 1.0, 10.0)
#: The deployment conditions: no shift (drawn with the training priors), then Dirichlet(α).
CONDITIONS = ("noshift", *ALPHAS)
DATA = {
    "digits": {"max_train": None, "epochs": 30, "jem_epochs": 10, "lr": None},
    "mnist1d": {"max_train": 2000, "epochs": 30, "jem_epochs": 10, "lr": 3e-3},
}
#: The trained models, then those calibrated on the held-out part: ``_ts`` temperature
#: scaling, ``_bcts`` bias-corrected temperature scaling, each with the library's default
#: penalty (1) or as the maximum-likelihood fit (``_mle``, penalty 0): (bias, penalty).
TRAINED = ("ce", "ngebm", "ngebm_all", "jem", "ce_conv", "ngebm_conv")
#: The models trained with the library's default ConvNet on MNIST-1D's (1, 40) signals.
CONV = ("ce_conv", "ngebm_conv")
CALIBRATIONS = {"ts": (False, 1.0), "ts_mle": (False, 0.0), "bcts": (True, 1.0),
                "bcts_mle": (True, 0.0)}  # fmt: skip
#: The calibrations of each base model (issue #49 adds JEM's, and vector scaling ``vs``: a
#: temperature and a bias per class, fitted here with the library's penalty 1).
CALIBRATED = {"ce": tuple(CALIBRATIONS), "ngebm": tuple(CALIBRATIONS), "jem": ("ts", "bcts", "vs")}
MODELS = (
    *(f"ce{suffix}" for suffix in ("", *(f"_{c}" for c in CALIBRATED["ce"]))),
    *(f"ngebm{suffix}" for suffix in ("", *(f"_{c}" for c in CALIBRATED["ngebm"]))),
    "ngebm_all",
    "jem",
    *(f"jem_{c}" for c in CALIBRATED["jem"]),
    *CONV,
)
ESTIMATORS = (
    *("none", "em", "em_ml", "emq", "bbse", "oracle"),
    *("gate", "gate_hard", "gate_chi2", "gate_x"),
)
#: The calibrations the test of the shift refits per resample (``prior_shift_test``'s names).
GATE_CALIBRATIONS = {"ts": "temperature", "bcts": "bcts"}
#: The headline: a draw counts as damaged when its NLL is above no adaptation's by this much.
DAMAGE = 0.05
#: Probabilities below this count as it in the NLL (an adaptation that gives the true class 0
#: would otherwise make the mean infinite): a miss costs at most -log(1e-12) = 27.6 nats.
NLL_FLOOR = 1e-12


# ---------------------------------------------------------------- models and posteriors


def _load(name: str, seed: int, flat: bool = True):
    """The fit, held-out and test splits; ``flat=False`` keeps MNIST-1D's ``(n, 1, 40)`` signals
    for the ConvNet (the same split: it depends on the labels and the seed only)."""
    data = load_named_dataset(name, max_train=DATA[name]["max_train"])
    X_train, X_test = data.X_train, data.X_test
    if flat:
        X_train = X_train.reshape(len(X_train), -1)
        X_test = X_test.reshape(len(X_test), -1)
    if name == "digits":
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    X_fit, X_held, y_fit, y_held = train_test_split(
        X_train, data.y_train, test_size=0.2, stratify=data.y_train, random_state=seed
    )
    as32 = np.float32
    return (X_fit.astype(as32), y_fit, X_held.astype(as32), y_held, X_test.astype(as32),
            data.y_test)  # fmt: skip


def _build(model: str, name: str, seed: int):
    config = DATA[name]
    params = {"random_state": seed, "max_epochs": config["epochs"]}
    if config["lr"] is not None:
        params["lr"] = config["lr"]
    if model in ("ce", "ce_conv"):
        return NGEBMClassifier(beta=0.0, **params)
    if model in ("ngebm", "ngebm_all", "ngebm_conv"):
        return NGEBMClassifier(beta=0.5, **params)
    return JEMClassifier(**{**params, "max_epochs": config["jem_epochs"]})


def _trains_on(model: str, name: str) -> bool:
    """The ConvNet models train on MNIST-1D's signals only (the digits are flat here)."""
    return model not in CONV or name == "mnist1d"


def _posteriors(name: str, seed: int, cache: Path, quick: bool, models=TRAINED) -> dict:
    """Log posteriors on the held-out and test splits, and the training priors, per model.

    Cached per data set and seed; a model missing from the cache is trained and added.
    """
    path = cache / f"{name}_seed{seed}{'_quick' if quick else ''}.npz"
    out = {}
    if path.exists():
        with np.load(path, allow_pickle=False) as stored:
            out = dict(stored)
    missing = [m for m in models if f"{m}_test" not in out and _trains_on(m, name)]
    if not missing:
        return out
    for model in missing:
        X_fit, y_fit, X_held, y_held, X_test, y_test = _load(name, seed, model not in CONV)
        out.update(y_held=y_held, y_test=y_test)
        est = _build(model, name, seed)
        if quick:
            est.set_params(max_epochs=2)
        X, y = (
            (np.r_[X_fit, X_held], np.r_[y_fit, y_held]) if model == "ngebm_all" else (X_fit, y_fit)
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        out[f"{model}_seconds"] = np.array(time.perf_counter() - start)
        out[f"{model}_train_priors"] = est.class_prior_  # the shares of its training labels
        out[f"{model}_held"] = est.predict_log_proba(X_held).astype(np.float64)
        out[f"{model}_test"] = est.predict_log_proba(X_test).astype(np.float64)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, **out)
    return out


def _vector_scaling(log_proba: np.ndarray, y: np.ndarray, penalty: float = 1.0):
    """Vector scaling (Guo et al. 2017): ``log softmax(w * log p + b)``, a temperature and a
    bias per class, fitted by the NLL of the held-out labels with the library's Gaussian
    prior (``penalty / (2 n)`` times ``|w - 1|^2 + |b|^2``, as ``fit_temperature``'s); the
    library has no vector scaling, so the benchmark fits it (L-BFGS, analytic gradient).
    Returns the function that calibrates log posteriors."""
    n, k = log_proba.shape
    onehot = np.eye(k)[y]

    def fun(theta):
        w, b = theta[:k], theta[k:]
        scores = log_proba * w + b
        log_q = scores - logsumexp(scores, axis=1, keepdims=True)
        residual = (np.exp(log_q) - onehot) / n
        value = -np.mean(log_q[np.arange(n), y])
        value += penalty / (2 * n) * (np.sum((w - 1) ** 2) + np.sum(b**2))
        grad_w = np.sum(residual * log_proba, axis=0) + penalty / n * (w - 1)
        grad_b = np.sum(residual, axis=0) + penalty / n * b
        return value, np.concatenate([grad_w, grad_b])

    theta = optimize.minimize(fun, np.r_[np.ones(k), np.zeros(k)], jac=True, method="L-BFGS-B").x

    def calibrate(z):
        scores = z * theta[:k] + theta[k:]
        return scores - logsumexp(scores, axis=1, keepdims=True)

    return calibrate


def _with_calibration(post: dict) -> dict:
    """``post`` with each model of ``CALIBRATED`` calibrated on the held-out part.

    :func:`~ebmclassifier.distributional.fit_temperature` (the function that
    ``DistributionalConstraint(calibration=...)`` calls) on the held-out log posteriors, or
    :func:`_vector_scaling`; the training priors of a calibrated model are the held-out
    part's class shares, as there.
    """
    post = dict(post)
    held_priors = np.bincount(post["y_held"], minlength=10) / len(post["y_held"])
    for base, calibrations in CALIBRATED.items():
        if f"{base}_held" not in post:
            continue
        for calibration in calibrations:
            name = f"{base}_{calibration}"
            if calibration == "vs":
                calibrate = _vector_scaling(post[f"{base}_held"], post["y_held"])
            else:
                bias, penalty = CALIBRATIONS[calibration]
                t, b, _ = fit_temperature(
                    post[f"{base}_held"], post["y_held"], bias=bias, penalty=penalty
                )
                post[f"{name}_temperature"] = np.array(t)

                def calibrate(z, t=t, b=b):
                    return calibrated_log_proba(z, t, b)

            for split in ("held", "test"):
                post[f"{name}_{split}"] = calibrate(post[f"{base}_{split}"])
            post[f"{name}_train_priors"] = held_priors
    return post


# ---------------------------------------------------------------- the protocol


def _metrics(proba: np.ndarray, y: np.ndarray) -> dict:
    # A row the adaptation left without mass (0/0: the maximum-likelihood BCTS of a separable
    # held-out split puts all of a sample's probability on a class EM then gives prior 0)
    # counts as uniform.
    proba = np.where(np.isnan(proba).any(axis=1, keepdims=True), 1.0 / proba.shape[1], proba)
    return {
        "accuracy": float(np.mean(proba.argmax(axis=1) == y)),
        "nll": float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), y], NLL_FLOOR, None)))),
        "ece": float(expected_calibration_error(y, proba, classes=np.arange(proba.shape[1]))),
    }


def _draw(y_test: np.ndarray, priors: np.ndarray, n: int, rng) -> np.ndarray:
    counts = rng.multinomial(n, priors)
    return np.concatenate(
        [
            rng.choice(np.flatnonzero(y_test == c), size=k, replace=True)
            for c, k in enumerate(counts)
        ]
    )


def _emq(proba: np.ndarray, train: np.ndarray) -> np.ndarray:
    """quapy's EMQ (the maximum-likelihood EM stopped when the mean change of a prior is below
    its default 1e-4, after at least 10 steps) on the same posteriors."""
    from quapy.method.aggregative import EMQ

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its max-iteration warning; the L1 and NLL tell
        return EMQ.EM(train, proba)[0]


def _reference(model: str, post: dict) -> dict | None:
    """``prior_shift_test``'s held-out arguments for ``model``, as
    ``DistributionalConstraint(priors="em")`` builds them: its posteriors on the held-out part,
    and for a model calibrated there the raw ones with the labels, to refit the calibration per
    resample. None where the library has no such model (the maximum-likelihood calibrations,
    vector scaling) or no held-out split (``ngebm_all`` trained on it: its fallback is
    ``gate_x``)."""
    base, _, calibration = model.partition("_")
    if model == "ngebm_all" or (
        calibration and calibration not in GATE_CALIBRATIONS and model not in CONV
    ):
        return None
    if calibration in GATE_CALIBRATIONS:
        return {
            "reference": np.exp(post[f"{base}_held"]),
            "reference_labels": post["y_held"],
            "calibration": GATE_CALIBRATIONS[calibration],
        }
    return {"reference": np.exp(post[f"{model}_held"])}


def _shift_test(model, post, proba, train, priors, context):
    """``prior_shift_test`` as ``DistributionalConstraint`` runs it (200 resamples, level
    0.05): bootstrapped once per (seed, model, n) from a generator of its own, then reused
    through ``null_statistics`` for every draw of that size (the same threshold the
    constraint gets for the same ``random_state``). None where ``_reference`` is None."""
    nulls, seed, n = context["nulls"], context["seed"], len(proba)
    if model not in nulls:
        reference = _reference(model, post)
        if reference is None:
            nulls[model] = None
        else:
            first = prior_shift_test(
                proba,
                train,
                **reference,
                priors=priors,
                random_state=[seed, n, MODELS.index(model)],
            )
            nulls[model] = first.null_statistics
    if nulls[model] is None:
        return None
    return prior_shift_test(proba, train, priors=priors, null_statistics=nulls[model])


def _estimate(estimator, model, post, idx, true_priors, context) -> tuple:
    """The priors ``estimator`` gives on the deployment rows ``idx`` (None: no adaptation;
    the string "skip": not measured for this model), and the per-draw records of a test.

    ``em``: :func:`~ebmclassifier.distributional.em_priors` with the library's defaults, as
    ``DistributionalConstraint(priors="em", shift_test=False)`` runs it (one pseudo-sample,
    ``tol=1e-8``, ``max_iter=1000``); ``em_ml``: the same with ``pseudo_count=0`` (maximum
    likelihood, the library before issue #39); ``em_s<s>``: pseudo-count ``s``; ``em_floor``:
    the maximum-likelihood priors floored at one sample of X (``1 / n``) and renormalised.
    ``gate``: the library's default since issue #49, EM's priors moved from the training
    priors by the test's weight (``_shift_test``); ``gate_hard``: the same test, EM's priors
    adopted whole when it detects a shift (no shrinkage); ``gate_chi2``: adopted whole when
    the statistic exceeds the chi-square threshold of Wilks's theorem (K - 1 degrees of
    freedom, level 0.05); ``gate_x``: the library's fallback without held-out samples (that
    chi-square threshold, and the test's weight with the chi-square's mean as noise level).
    """
    train = post[f"{model}_train_priors"]
    proba = np.exp(post[f"{model}_test"][idx])
    if estimator == "none":
        return None, {}
    if estimator.startswith("gate"):
        return _gated(estimator, model, post, proba, train, context)
    if estimator == "em":
        return context["em"](), {}
    if estimator == "em_ml":
        return em_priors(proba, train, pseudo_count=0.0)[0], {}
    if estimator.startswith("em_s"):
        return em_priors(proba, train, pseudo_count=float(estimator[4:]))[0], {}
    if estimator == "em_floor":
        floored = np.maximum(em_priors(proba, train, pseudo_count=0.0)[0], 1.0 / len(idx))
        return floored / floored.sum(), {}
    if estimator == "emq":
        return _emq(proba, train), {}
    if estimator == "oracle":
        return true_priors, {}
    pred_held = post["ce_held"].argmax(axis=1)
    return bbse_priors(post["y_held"], pred_held, post["ce_test"][idx].argmax(axis=1), 10), {}


def _gated(estimator, model, post, proba, train, context) -> tuple:
    """``_estimate`` of the gates: (priors, {"detected", "weight"}), or ("skip", {})."""
    priors = context["em"]()
    if estimator == "gate_chi2":
        statistic = float(prior_shift_statistic(proba, train, priors))
        detected = statistic > chi2.isf(0.05, df=len(train) - 1)
        return (priors if detected else None), {"detected": float(detected)}
    if estimator == "gate_x":
        result = prior_shift_test(proba, train, priors=priors)  # no reference: chi-square
    else:
        if "test" not in context:  # gate and gate_hard: one test per draw
            context["test"] = _shift_test(model, post, proba, train, priors, context)
        result = context["test"]
    if result is None:
        return "skip", {}
    record = {"detected": float(result.shift_detected), "weight": result.weight}
    if estimator == "gate_hard":
        return (priors if result.shift_detected else None), record
    return train + result.weight * (priors - train), record


def _estimators(args) -> tuple[str, ...]:
    """``ESTIMATORS`` (or ``--estimators``), with the ``--pseudo-counts`` sweep and the floor
    when asked for, and without ``emq`` when quapy is not installed (said once)."""
    estimators = list(args.estimators or ESTIMATORS)
    if args.pseudo_counts:
        estimators += [f"em_s{v:g}" for v in args.pseudo_counts] + ["em_floor"]
    try:
        import quapy  # noqa: F401
    except ImportError:
        print("quapy is not installed: no 'emq' rows (pip install quapy)")
        estimators = [e for e in estimators if e != "emq"]
    return tuple(estimators)


def _with_comparisons(cells: dict) -> dict:
    """Per cell ``model/estimator``, the per-draw counts that say where it loses: draws with
    a higher NLL than no adaptation (``nll_gt_none``), higher by more than ``DAMAGE``
    (``nll_worse``, the headline), and than quapy's EMQ (``nll_gt_emq``), with a larger prior
    error than EMQ (``l1_gt_emq``), and the largest NLL excess over no adaptation
    (``nll_excess_max``); ``draws`` counts them. The means of the per-draw records of a test
    (``detected``, ``weight``) are its detection rate and mean weight."""
    out = {}
    for key, draws in cells.items():
        model = key.split("/")[0]
        row = {m: float(np.mean([d[m] for d in draws])) for m in draws[0]}
        none = np.array([d["nll"] for d in cells[f"{model}/none"]])
        nll = np.array([d["nll"] for d in draws])
        row["draws"] = len(draws)
        row["nll_gt_none"] = int(np.sum(nll > none + 1e-12))
        row["nll_worse"] = int(np.sum(nll > none + DAMAGE))
        row["nll_excess_max"] = float(np.max(nll - none))
        if f"{model}/emq" in cells:
            pairs = list(zip(draws, cells[f"{model}/emq"], strict=True))
            row["nll_gt_emq"] = int(sum(d["nll"] > e["nll"] + 1e-12 for d, e in pairs))
            row["l1_gt_emq"] = int(sum(d["prior_l1"] > e["prior_l1"] + 1e-12 for d, e in pairs))
        out[key] = row
    return out


def _deployments(post: dict, seed: int, n: int, draws: int):
    """``(condition, rows of the test split, true class shares)`` of every
    deployment set of size ``n``: without shift (the class shares of the fit part, the
    training priors) and under Dirichlet(α) shares, a generator per (seed, condition, n)."""
    y = post["y_test"]
    for condition in CONDITIONS:
        code = 0 if condition == "noshift" else round(condition * 1000)
        rng = np.random.default_rng([seed, code, n])
        for _ in range(draws):
            if condition == "noshift":
                priors = post["ce_train_priors"]
            else:
                priors = rng.dirichlet(np.full(10, condition))
            idx = _draw(y, priors, n, rng)
            yield str(condition), idx, np.bincount(y[idx], minlength=10) / n


def _once(function, *args):
    """``function(*args)[0]``, computed at the first call only (EM's priors, which every EM
    estimate and gate of a draw shares)."""
    cache = []

    def value():
        if not cache:
            cache.append(function(*args)[0])
        return cache[0]

    return value


def _cells_at(post: dict, models: list, estimators: tuple, n: int, seed: int, args) -> dict:
    """Per condition, the per-draw metrics of every ``model/estimator`` on sets of size ``n``."""
    by_condition: dict = {}
    nulls: dict = {}  # the bootstrapped null of each model at this n
    for condition, idx, true in _deployments(post, seed, n, args.draws):
        cells = by_condition.setdefault(condition, {})
        for model in models:
            proba = np.exp(post[f"{model}_test"][idx])
            train = post[f"{model}_train_priors"]
            context = {
                "nulls": nulls,
                "seed": seed,
                "em": _once(em_priors, proba, train),
            }
            for estimator in estimators:
                est, record = _estimate(estimator, model, post, idx, true, context)
                if isinstance(est, str):
                    continue
                if est is None:
                    adapted, error = proba, float(np.abs(train - true).sum())
                else:
                    adapted = bayes_correction(proba, train, est)
                    error = float(np.abs(est - true).sum())
                metrics = {"prior_l1": error, **_metrics(adapted, post["y_test"][idx]), **record}
                cells.setdefault(f"{model}/{estimator}", []).append(metrics)
    return {condition: _with_comparisons(cells) for condition, cells in by_condition.items()}


def run_seed(name: str, seed: int, args) -> dict:
    post = _with_calibration(_posteriors(name, seed, Path(args.cache), args.quick, args.models))
    models = [m for m in MODELS if f"{m}_test" in post]
    estimators = _estimators(args)
    by_n = {
        str(n): {"by_alpha": _cells_at(post, models, estimators, n, seed, args)}
        for n in args.n_deploy
    }
    accuracy = {m: float(np.mean(post[f"{m}_test"].argmax(1) == post["y_test"])) for m in models}
    seconds = {m: float(post[f"{m}_seconds"]) for m in TRAINED if f"{m}_seconds" in post}
    temperatures = {
        m: float(post[f"{m}_temperature"]) for m in models if f"{m}_temperature" in post
    }
    return {"by_n": by_n, "test_accuracy": accuracy, "fit_seconds": seconds,
            "temperature": temperatures}  # fmt: skip


def at_n(results: dict, n: str | None = None) -> dict:
    """``results`` seen at one deployment size: each seed's ``by_alpha`` is that of ``n``
    (the largest when None), so that every table of one size reads it. A results.json
    written before issue #49 (one size, no ``by_n``) is returned as it is."""
    first = next(iter(next(iter(results["runs"].values())).values()))
    if "by_n" not in first:
        return results
    n = n or max(first["by_n"], key=int)
    runs = {
        name: {seed: {**run, "by_alpha": run["by_n"][n]["by_alpha"]} for seed, run in seeds.items()}
        for name, seeds in results["runs"].items()
    }
    return {**results, "runs": runs}


def sizes(results: dict) -> list[str]:
    """The deployment sizes of ``results`` (``[None]`` for a results.json of one size)."""
    first = next(iter(next(iter(results["runs"].values())).values()))
    return sorted(first["by_n"], key=int) if "by_n" in first else [None]


# ---------------------------------------------------------------- report


def summarize(results: dict) -> dict:
    """Median over seeds of each (data, α, model/estimator, metric)."""
    summary = {}
    for name, seeds in results["runs"].items():
        first = next(iter(seeds.values()))["by_alpha"]
        summary[name] = {
            alpha: {
                key: {
                    metric: float(
                        np.median([s["by_alpha"][alpha][key][metric] for s in seeds.values()])
                    )
                    for metric in cells[key]
                }
                for key in cells
            }
            for alpha, cells in first.items()
        }
    return summary


def print_tables(summary: dict) -> str:
    lines = []
    for name, by_alpha in summary.items():
        for alpha, cells in by_alpha.items():
            lines.append(f"\n{name}, alpha={alpha} (median over seeds of the mean over draws)")
            lines.append(
                f"{'model/priors':<20}{'prior L1':>10}{'accuracy':>10}{'NLL':>9}{'ECE':>9}"
            )
            for key, m in cells.items():
                lines.append(f"{key:<20}{m['prior_l1']:>10.3f}{m['accuracy']:>10.3f}"
                             f"{m['nll']:>9.3f}{m['ece']:>9.3f}")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    return text


#: The rows of the docs' benchmark tables (the calibrations have their own table, and the EMs
#: theirs: ``--calibration-table``, ``--em-table``).
DOC_ROWS = (
    ("ce/none", "CE, no adaptation"),
    ("ce/em", "EM on CE"),
    ("ce_ts/em", "EM on CE + temperature (held-out)"),
    ("ce_ts/bbse", "BBSE (held-out), on CE + temperature"),
    ("ngebm/none", "NG-EBM, no adaptation"),
    ("ngebm/em", "EM on NG-EBM"),
    ("ngebm_all/em", "EM on NG-EBM trained on fit + held-out"),
    ("jem/em", "EM on JEM"),
    ("ce_conv/none", "CE ConvNet, no adaptation"),
    ("ce_conv/em", "EM on CE ConvNet"),
    ("ngebm_conv/none", "NG-EBM ConvNet, no adaptation"),
    ("ngebm_conv/em", "EM on NG-EBM ConvNet"),
    ("ce_ts/oracle", "oracle priors, CE + temperature"),
    ("ngebm/oracle", "oracle priors, NG-EBM"),
    ("ngebm_conv/oracle", "oracle priors, NG-EBM ConvNet"),
)


def markdown(results: dict) -> str:
    """The docs' tables: median [min-max] over seeds of the per-seed means over draws."""
    out = []
    for name, seeds in results["runs"].items():
        for alpha in next(iter(seeds.values()))["by_alpha"]:
            out.append(f"\n**{name}, α = {alpha}** ({len(seeds)} seeds)\n")
            out += ["| method | prior L1 | accuracy | NLL | ECE |", "|---|---|---|---|---|"]
            for key, label in DOC_ROWS:
                if key not in next(iter(seeds.values()))["by_alpha"][alpha]:
                    continue  # a model this run did not train
                cells = []
                for metric in ("prior_l1", "accuracy", "nll", "ece"):
                    v = [s["by_alpha"][alpha][key][metric] for s in seeds.values()]
                    spread = (
                        f" [{min(v):.3f}-{max(v):.3f}]"
                        if metric in ("prior_l1", "accuracy")
                        else ""
                    )
                    cells.append(f"{np.median(v):.3f}{spread}")
                out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


CALIBRATION_ROWS = (
    ("ce/em", "EM on CE"),
    ("ce_ts/em", "+ temperature"),
    ("ce_bcts_mle/em", "+ BCTS, ML"),
    ("ce_bcts/em", "+ BCTS, penalty 1"),
    ("ngebm/em", "EM on NG-EBM"),
    ("ngebm_ts/em", "+ temperature"),
    ("ngebm_bcts_mle/em", "+ BCTS, ML"),
    ("ngebm_bcts/em", "+ BCTS, penalty 1"),
)


def calibration_table(results: dict) -> str:
    """The calibration rows, one table per data set: prior L1 median [min-max] and accuracy
    (median) over seeds, one column pair per α."""
    out = []
    for name, seeds in results["runs"].items():
        by_alpha = [s["by_alpha"] for s in seeds.values()]
        alphas = list(by_alpha[0])
        out.append(f"\n**{name}** ({len(seeds)} seeds; prior L1 median [min-max], accuracy)\n")
        out.append("| method | " + " | ".join(f"α = {a}" for a in alphas) + " |")
        out.append("|---" * (len(alphas) + 1) + "|")
        for key, label in CALIBRATION_ROWS:
            cells = []
            for alpha in alphas:
                l1 = [b[alpha][key]["prior_l1"] for b in by_alpha]
                accuracy = np.median([b[alpha][key]["accuracy"] for b in by_alpha])
                cells.append(f"{np.median(l1):.3f} [{min(l1):.3f}-{max(l1):.3f}], {accuracy:.3f}")
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


#: The models and prior estimates of the EM comparison (issue #39), in the docs' words.
EM_MODELS = (
    ("ce", "CE"),
    ("ce_ts", "CE + temperature"),
    ("ngebm", "NG-EBM"),
    ("ngebm_bcts", "NG-EBM + BCTS"),
    ("ce_conv", "CE ConvNet"),
    ("ngebm_conv", "NG-EBM ConvNet"),
)
EM_ESTIMATORS = (
    ("none", "no adaptation"),
    ("em", "EM (default: 1 pseudo-sample)"),
    ("em_ml", "EM, maximum likelihood"),
    ("emq", "quapy EMQ"),
    ("oracle", "true priors"),
)


def _pooled(seeds: dict, alpha: str, key: str, metric: str) -> float:
    """The mean over seeds of the per-seed means over draws (= over every draw)."""
    return float(np.mean([s["by_alpha"][alpha][key][metric] for s in seeds.values()]))


def _summed(seeds: dict, alpha: str, key: str, metric: str) -> int:
    return int(sum(s["by_alpha"][alpha][key][metric] for s in seeds.values()))


def em_table(results: dict) -> str:
    """The EM comparison, one table per data set: per model and prior estimate, and per α,
    ``prior L1 / accuracy / NLL / ECE``, each the mean over every seed and draw."""
    out = []
    for name, seeds in results["runs"].items():
        first = next(iter(seeds.values()))["by_alpha"]
        alphas = list(first)
        draws = sum(first[alphas[0]]["ce/none"]["draws"] for _ in seeds)
        out.append(f"\n**{name}** ({len(seeds)} seeds x {draws // len(seeds)} draws; per α: "
                   "prior L1 / accuracy / NLL / ECE, mean over the draws)\n")  # fmt: skip
        out.append("| model | priors | " + " | ".join(f"α = {a}" for a in alphas) + " |")
        out.append("|---|---" + "|---" * len(alphas) + "|")
        for model, model_label in EM_MODELS:
            for estimator, label in EM_ESTIMATORS:
                key = f"{model}/{estimator}"
                if key not in first[alphas[0]]:
                    continue
                cells = [
                    " / ".join(
                        f"{_pooled(seeds, a, key, m):.3f}"
                        for m in ("prior_l1", "accuracy", "nll", "ece")
                    )
                    for a in alphas
                ]
                out.append(f"| {model_label} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def loss_table(results: dict) -> str:
    """Where each EM loses, one table per data set: per model, EM estimate and α, the draws
    whose NLL is above no adaptation's, those whose NLL is above quapy EMQ's, those whose
    prior L1 is above EMQ's, and the largest NLL excess over no adaptation."""
    out = []
    for name, seeds in results["runs"].items():
        first = next(iter(seeds.values()))["by_alpha"]
        alphas = list(first)
        draws = _summed(seeds, alphas[0], "ce/none", "draws")
        out.append(f"\n**{name}** (of {draws} draws per α: NLL > no adaptation's / NLL > "
                   "EMQ's / prior L1 > EMQ's, then the largest NLL excess over no "
                   "adaptation)\n")  # fmt: skip
        out.append("| model | priors | " + " | ".join(f"α = {a}" for a in alphas) + " |")
        out.append("|---|---" + "|---" * len(alphas) + "|")
        for model, model_label in EM_MODELS:
            for estimator, label in EM_ESTIMATORS[1:4]:
                key = f"{model}/{estimator}"
                if key not in first[alphas[0]] or "nll_gt_emq" not in first[alphas[0]][key]:
                    continue
                cells = []
                for a in alphas:
                    worst = max(s["by_alpha"][a][key]["nll_excess_max"] for s in seeds.values())
                    counts = " / ".join(
                        str(_summed(seeds, a, key, m))
                        for m in ("nll_gt_none", "nll_gt_emq", "l1_gt_emq")
                    )
                    cells.append(f"{counts}, {worst:+.2f}")
                out.append(f"| {model_label} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def pseudo_count_table(results: dict) -> str:
    """The choice of EM's default, pooled over data sets, models and α: per estimate, the mean
    prior L1, accuracy, NLL and ECE over every draw, the share of draws whose NLL is above no
    adaptation's, the largest NLL excess, and the worst ratio of its mean prior L1 to the
    maximum-likelihood EM's over the (data set, model, α) cells."""
    runs = results["runs"]
    first = next(iter(next(iter(runs.values())).values()))["by_alpha"]
    alpha0 = next(iter(first))
    estimators = sorted(
        {k.split("/")[1] for k in first[alpha0] if k.split("/")[1].startswith(("em", "none"))},
        key=lambda e: (e != "none", e != "em_ml", e != "emq", e != "em_floor", e != "em",
                       float(e[4:]) if e.startswith("em_s") else 0.0),
    )  # fmt: skip
    cells = [
        (seeds, alpha, key.split("/")[0])
        for seeds in runs.values()
        for alpha in next(iter(seeds.values()))["by_alpha"]
        for key in next(iter(seeds.values()))["by_alpha"][alpha]
        if key.endswith("/none")
    ]
    header = ("| priors | prior L1 | accuracy | NLL | ECE | NLL > no adaptation | largest NLL "
              "excess | worst prior-L1 ratio to ML |")  # fmt: skip
    out = [f"\n({len(cells)} cells of data set x model x α)\n", header, "|---" * 8 + "|"]
    for estimator in estimators:
        values = {m: [] for m in ("prior_l1", "accuracy", "nll", "ece")}
        worse, total, excess, ratio = 0, 0, -np.inf, 0.0
        for seeds, alpha, model in cells:
            key = f"{model}/{estimator}"
            for m in values:
                values[m].append(_pooled(seeds, alpha, key, m))
            worse += _summed(seeds, alpha, key, "nll_gt_none")
            total += _summed(seeds, alpha, key, "draws")
            excess = max(excess, *(s["by_alpha"][alpha][key]["nll_excess_max"]
                                   for s in seeds.values()))  # fmt: skip
            ml = _pooled(seeds, alpha, f"{model}/em_ml", "prior_l1")
            ratio = max(ratio, _pooled(seeds, alpha, key, "prior_l1") / ml)
        means = " | ".join(f"{np.mean(v):.4f}" for v in values.values())
        shown = "-" if estimator == "none" else f"{ratio:.2f}"
        out.append(f"| {estimator} | {means} | {worse / total:.1%} | {excess:+.2f} | {shown} |")
    return "\n".join(out)


#: The models of the issue's promise (#49), then every model the test runs on.
GATE_GROUPS = (
    ("CE and NG-EBM, with and without temperature scaling", ("ce", "ce_ts", "ngebm", "ngebm_ts")),
    ("every model with a held-out split", None),
)
GATE_ROWS = (
    ("noshift", "no shift"),
    ("10.0", "α = 10"),
    ("1.0", "α = 1"),
    ("0.5", "α = 0.5"),
    ("0.1", "α = 0.1"),
)
GATE_MODELS = (
    ("ce", "CE"),
    ("ce_ts", "CE + temperature"),
    ("ce_bcts", "CE + BCTS"),
    ("ngebm", "NG-EBM"),
    ("ngebm_ts", "NG-EBM + temperature"),
    ("ngebm_bcts", "NG-EBM + BCTS"),
    ("jem", "JEM"),
    ("jem_ts", "JEM + temperature"),
    ("jem_bcts", "JEM + BCTS"),
    ("ce_conv", "CE ConvNet"),
    ("ngebm_conv", "NG-EBM ConvNet"),
    ("ngebm_all", "NG-EBM, all labels (no held-out split)"),
)


def _pool(results, n, condition, models, estimator, metric, data=None) -> tuple[float, int]:
    """Over data sets (or ``data``), seeds and ``models`` (None: every model with a
    ``gate`` row) at size ``n``: the sum of a count ``metric`` and the draws, or, for a mean
    ``metric``, its mean over every draw and the draws."""
    total, draws = 0.0, 0
    for name, seeds in at_n(results, n)["runs"].items():
        if data is not None and name != data:
            continue
        for run in seeds.values():
            cells = run["by_alpha"][condition]
            chosen = models or [k.split("/")[0] for k in cells if k.endswith("/gate")]
            for model in chosen:
                row = cells.get(f"{model}/{estimator}")
                if row is None:
                    continue
                count = metric in ("nll_worse", "nll_gt_none")
                total += row[metric] if count else row[metric] * row["draws"]
                draws += row["draws"]
    return total, draws


def _share(results, n, condition, models, estimator, metric, data=None) -> str:
    total, draws = _pool(results, n, condition, models, estimator, metric, data)
    return f"{total / draws:.0%}" if draws else "-"


def _mean(results, n, condition, models, estimator, metric="nll", data=None) -> str:
    total, draws = _pool(results, n, condition, models, estimator, metric, data)
    return f"{total / draws:.3f}" if draws else "-"


def gate_table(results: dict) -> str:
    """The test of the shift (issue #49): the headline per group of models, the false alarms
    and damage per model and data set, JEM's calibrations, and the fallback and the
    chi-square threshold where they were measured."""
    ns = sizes(results)
    head = "| deployment | " + " | ".join(f"n = {n}" for n in ns) + " |"
    rule = "|---" * (len(ns) + 1) + "|"
    out = []
    for title, models in GATE_GROUPS:
        out += [
            f"\n**{title}** (share of draws whose NLL is above no adaptation's by more "
            f"than {DAMAGE} nats: EM always → the test adopting EM's priors whole → the test's "
            "default, with its weight; the share of draws where the test detects a shift; then "
            "the mean NLL: no adaptation / EM always / the test / true priors)\n",
            head,
            rule,
        ]
        for condition, label in GATE_ROWS:
            cells = []
            for n in ns:
                worse = [
                    _share(results, n, condition, models, e, "nll_worse")
                    for e in ("em", "gate_hard", "gate")
                ]
                means = [
                    _mean(results, n, condition, models, e)
                    for e in ("none", "em", "gate", "oracle")
                ]
                detected = _mean(results, n, condition, models, "gate", "detected")
                detected = f"{float(detected):.0%}" if detected != "-" else "-"
                cells.append(f"{' → '.join(worse)}; {detected} ({' / '.join(means)})")
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        pooled = []
        for n in ns:
            nll = []
            for estimator in ("em", "gate", "gate_hard"):
                sums = [
                    _pool(results, n, c, models, estimator, "nll") for c in ("1.0", "0.5", "0.1")
                ]
                draws = sum(d for _, d in sums)
                nll.append(f"{sum(t for t, _ in sums) / draws:.4f}" if draws else "-")
            pooled.append(" / ".join(nll))
        out.append(
            "| α ≤ 1 pooled: NLL EM always / test / test without shrinkage | "
            + " | ".join(pooled)
            + " |"
        )
    out += _per_model_table(results, ns)
    return "\n".join(out) + "\n" + pseudo_count_cost(results)


def _per_model_table(results: dict, ns: list) -> list[str]:
    """Per data set and model: the false alarms without shift of the test and of its fallback
    without held-out samples (the chi-square threshold), and the share of draws damaged by
    more than ``DAMAGE`` nats without shift and at α = 10: EM always → the test [the
    fallback]."""
    head = "| data | model | " + " | ".join(f"n = {n}" for n in ns) + " |"
    rule = "|---|---" + "|---" * len(ns) + "|"
    alarms = ["\n**False alarms without shift, per model** (the test / its fallback without "
              "held-out samples, the chi-square threshold)\n", head, rule]  # fmt: skip
    damage = [f"\n**Draws damaged by more than {DAMAGE} nats, per model** (without shift; at "
              "α = 10: EM always → the test [its fallback])\n", head, rule]  # fmt: skip
    for data in results["runs"]:
        for model, label in GATE_MODELS:
            if _pool(results, ns[0], "noshift", [model], "none", "nll", data)[1] == 0:
                continue
            fired, hurt = [], []
            for n in ns:
                rates = [_mean(results, n, "noshift", [model], e, "detected", data)
                         for e in ("gate", "gate_x")]  # fmt: skip
                fired.append(" / ".join(f"{float(r):.0%}" if r != "-" else "-" for r in rates))
                hurt.append(
                    "; ".join(_damage(results, n, c, model, data) for c in ("noshift", "10.0"))
                )
            alarms.append(f"| {data} | {label} | " + " | ".join(fired) + " |")
            damage.append(f"| {data} | {label} | " + " | ".join(hurt) + " |")
    return alarms + damage


def _damage(results, n, condition, model, data) -> str:
    """``EM → test [fallback]``: the shares of draws damaged by more than ``DAMAGE`` nats."""
    em, gate, fallback = (
        _share(results, n, condition, [model], e, "nll_worse", data)
        for e in ("em", "gate", "gate_x")
    )
    return f"{em} → {gate} [{fallback}]"


def pseudo_count_cost(results: dict) -> str:
    """The prior-L1 cost of EM's pseudo-count per n: over the cells (data set, model,
    condition), the largest excess of the default's mean prior L1 over quapy EMQ's and over
    the maximum-likelihood EM's, against the bound ``2 s / (n + s)`` of the docs (s = 1)."""
    out = [
        "\n**EM's pseudo-count: its prior-L1 cost** (per n, the largest mean excess over a cell "
        "of data set, model and condition, and where)\n",
        "| n | bound 2s/(n+s) | over EMQ | over maximum likelihood |",
        "|---|---|---|---|",
    ]
    for n in sizes(results):
        view = at_n(results, n)
        worst = {"emq": (-np.inf, ""), "em_ml": (-np.inf, "")}
        for name, seeds in view["runs"].items():
            first = next(iter(seeds.values()))["by_alpha"]
            for condition, cells in first.items():
                for key in cells:
                    model, estimator = key.split("/")
                    if estimator != "em":
                        continue
                    for other in worst:
                        if f"{model}/{other}" not in cells:
                            continue
                        excess = _pooled(seeds, condition, key, "prior_l1") - _pooled(
                            seeds, condition, f"{model}/{other}", "prior_l1"
                        )
                        if excess > worst[other][0]:
                            worst[other] = (excess, f"{name}, {model}, {condition}")
        shown = [f"{v:+.4f} ({where})" for v, where in worst.values()]
        out.append(f"| {n} | {2 / (int(n) + 1):.4f} | " + " | ".join(shown) + " |")
    return "\n".join(out)


def jem_table(results: dict) -> str:
    """Does a calibration before EM, or the test's shrinkage, remove JEM's loss? Per data set,
    JEM and its calibrations (temperature, BCTS, vector scaling), per condition and n: the
    mean NLL of no adaptation / EM always / the test, and the share of draws damaged by EM
    always and by the test."""
    ns = sizes(results)
    out = []
    for data in results["runs"]:
        out += [
            f"\n**JEM, {data}** (per n: mean NLL no adaptation / EM always / the test; "
            f"draws damaged by more than {DAMAGE} nats, EM always → the test)\n",
            "| model | deployment | " + " | ".join(f"n = {n}" for n in ns) + " |",
            "|---|---" + "|---" * len(ns) + "|",
        ]
        for model, label in (
            ("jem", "JEM"),
            ("jem_ts", "+ temperature"),
            ("jem_bcts", "+ BCTS"),
            ("jem_vs", "+ vector scaling"),
        ):
            for condition, condition_label in GATE_ROWS:
                cells = []
                for n in ns:
                    means = [
                        _mean(results, n, condition, [model], e, data=data)
                        for e in ("none", "em", "gate")
                    ]
                    worse = [
                        _share(results, n, condition, [model], e, "nll_worse", data)
                        for e in ("em", "gate")
                    ]
                    cells.append(f"{' / '.join(means)}; {worse[0]} → {worse[1]}")
                out.append(f"| {label} | {condition_label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def gate_figure(results: dict, out: Path) -> None:
    """``gate.png``: per condition, the share of draws damaged by more than ``DAMAGE`` nats
    against n, EM always (dashed) and the test (solid), for the models of the issue's promise
    and all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sizes(results)
    fig, axes = plt.subplots(1, len(GATE_GROUPS), figsize=(11, 3.8), squeeze=False)
    for ax, (title, models) in zip(axes[0], GATE_GROUPS, strict=True):
        for (condition, label), color in zip(GATE_ROWS[:3], ("C0", "C1", "C2"), strict=True):
            for estimator, style in (("em", "--"), ("gate", "-")):
                shares = [_pool(results, n, condition, models, estimator, "nll_worse") for n in ns]
                name = "EM always" if estimator == "em" else "test"
                ax.plot([int(n) for n in ns], [100 * t / d for t, d in shares], style,
                        color=color, marker="o", label=f"{label}, {name}")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("deployment samples n", fontsize=9)
        ax.set_ylabel(f"% of draws damaged (> {DAMAGE} nats)", fontsize=9)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "gate.png", dpi=110)
    plt.close(fig)


def figures(results: dict, summary: dict, out: Path, cache: Path, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ebmclassifier.plotting import plot_reliability_diagram

    fig, axes = plt.subplots(1, len(summary), figsize=(5 * len(summary), 3.6), squeeze=False)
    curves = [("ce", "em"), ("ce_ts", "em"), ("ce_bcts", "em"), ("ce", "bbse"), ("ngebm", "em"),
              ("ngebm_bcts", "em"), ("ngebm_all", "em"), ("jem", "em"), ("ngebm", "gate"),
              ("jem", "gate")]  # fmt: skip
    for ax, (name, by_alpha) in zip(axes[0], summary.items(), strict=True):
        by_alpha = {a: cells for a, cells in by_alpha.items() if a != "noshift"}
        alphas = [float(a) for a in by_alpha]
        for model, estimator in curves:
            if f"{model}/{estimator}" not in next(iter(by_alpha.values())):
                continue
            ax.plot(alphas, [by_alpha[a][f"{model}/{estimator}"]["prior_l1"] for a in by_alpha],
                    marker="o", label=f"{model} + {estimator}")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("Dirichlet α (small = strong shift)")
        ax.set_ylabel("|π̂ - π'|₁ (median over seeds)")
        ax.set_title(name)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "prior_error.png", dpi=110)
    plt.close(fig)
    # reliability before/after EM: MNIST-1D (or the first data set), alpha = 0.1, seed 0, pooled
    name = "mnist1d" if "mnist1d" in summary else next(iter(summary))
    post = _posteriors(name, 0, cache, quick, ("ce", "ngebm"))
    rng = np.random.default_rng(12345)
    pooled = {k: [] for k in ("ce", "ce_em", "ngebm", "ngebm_em")}
    labels = []
    for _ in range(10):
        priors = rng.dirichlet(np.full(10, 0.1))
        idx = _draw(post["y_test"], priors, 500, rng)
        labels.append(post["y_test"][idx])
        for model in ("ce", "ngebm"):
            proba = np.exp(post[f"{model}_test"][idx])
            train = post[f"{model}_train_priors"]
            pooled[model].append(proba)
            pooled[f"{model}_em"].append(bayes_correction(proba, train, em_priors(proba, train)[0]))
    y = np.concatenate(labels)
    titles = {"ce": "CE, no adaptation", "ce_em": "CE + EM", "ngebm": "NG-EBM, no adaptation",
              "ngebm_em": "NG-EBM + EM"}  # fmt: skip
    for key, parts in pooled.items():
        figure = plot_reliability_diagram(
            y, np.concatenate(parts), title=f"{name}, α=0.1: {titles[key]}",
            path=out / f"reliability_{key}.png",
        )  # fmt: skip
        plt.close(figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="digits,mnist1d")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument(
        "--n-deploy",
        type=lambda v: tuple(int(x) for x in v.split(",")),
        default=(100, 300, 1000),
        help="the sizes of the deployment sets, comma-separated",
    )
    parser.add_argument("--out", default="label_shift_results")
    parser.add_argument(
        "--cache", default=str(Path(tempfile.gettempdir()) / "ebmclassifier_label_shift")
    )
    parser.add_argument("--quick", action="store_true", help="2 epochs, 1 seed, 3 draws")
    parser.add_argument(
        "--models", type=lambda v: tuple(v.split(",")), default=TRAINED,
        help=f"the models to train, a subset of {','.join(TRAINED)} (ce is needed by BBSE)",
    )  # fmt: skip
    parser.add_argument("--report", help="print the tables of a results.json again")
    parser.add_argument("--markdown", action="store_true", help="with --report: the docs' tables")
    parser.add_argument(
        "--calibration-table", action="store_true",
        help="with --report: the docs' table of the calibrations before EM",
    )  # fmt: skip
    parser.add_argument(
        "--pseudo-counts", type=lambda v: tuple(float(x) for x in v.split(",")), default=(),
        help="also EM with these pseudo-counts, and the ML priors floored at 1/n (issue #39)",
    )  # fmt: skip
    parser.add_argument(
        "--em-table", action="store_true",
        help="with --report: the docs' EM comparison and where each EM loses",
    )  # fmt: skip
    parser.add_argument(
        "--pseudo-count-table", action="store_true",
        help="with --report of a --pseudo-counts run: the table of EM's default",
    )  # fmt: skip
    parser.add_argument(
        "--gate-table",
        action="store_true",
        help="with --report: the docs' tables of the test of the shift (issue #49)",
    )
    parser.add_argument(
        "--jem-table",
        action="store_true",
        help="with --report: JEM's calibrations and the test (issue #49)",
    )
    parser.add_argument("--at-n", help="with --report: the tables of this size only")
    parser.add_argument(
        "--estimators",
        type=lambda v: tuple(v.split(",")),
        default=None,
        help=f"the prior estimates to run (default: {','.join(ESTIMATORS)}; 'none' is needed)",
    )
    args = parser.parse_args(argv)
    if args.report:
        report(json.loads(Path(args.report).read_text()), args)
        return 0
    if args.quick:
        args.seeds, args.draws = 1, 3
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.data.split(",")
    start = time.perf_counter()
    results: dict = {"config": {**vars(args), "alphas": ALPHAS, "data": DATA}, "runs": {}}
    with tqdm(total=len(names) * args.seeds, desc="data x seed") as bar:
        for name in names:
            for seed in range(args.seeds):
                bar.set_postfix_str(f"{name} seed {seed}")
                results["runs"].setdefault(name, {})[str(seed)] = run_seed(name, seed, args)
                bar.update()
    summaries = {n: summarize(at_n(results, n)) for n in sizes(results)}
    results["seconds"] = time.perf_counter() - start
    write_results(results, out / "results.json")
    for n, summary in summaries.items():
        print(f"\n==== n = {n}")
        print_tables(summary)
    print(gate_table(results))
    largest = sizes(results)[-1]
    figures(at_n(results, largest), summaries[largest], out, Path(args.cache), args.quick)
    gate_figure(results, out)
    print(
        f"\nwrote {out / 'results.json'}, prior_error.png (n = {largest}), gate.png, "
        f"reliability_*.png in {results['seconds']:.0f} s"
    )
    return 0


def _rounded(value):
    """``value`` with every float to 6 significant digits (what the tables print, and more)."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def write_results(results: dict, path: Path) -> None:
    """``results.json``: every seed's numbers, compact (the medians over seeds are
    recomputed by ``--report``; issue #39's file also held them, as ``summary``)."""
    path.write_text(json.dumps(_rounded(results), separators=(",", ":")))


def report(results: dict, args) -> None:
    """The tables of a results.json: those of one size for each size (or ``--at-n``)."""
    if args.gate_table:
        print(gate_table(results))
        return
    if args.jem_table:
        print(jem_table(results))
        return
    for n in [args.at_n] if args.at_n else sizes(results):
        view = at_n(results, n)
        print(f"\n==== n = {n or results['config']['n_deploy']}")
        if args.calibration_table:
            print(calibration_table(view))
        elif args.em_table:
            print(em_table(view), loss_table(view), sep="\n")
        elif args.pseudo_count_table:
            print(pseudo_count_table(view))
        elif args.markdown:
            print(markdown(view))
        else:
            print_tables(summarize(view))


if __name__ == "__main__":
    raise SystemExit(main())
