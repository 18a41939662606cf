"""Label-shift adaptation on digits and MNIST-1D (issues #25, #39): does NG-EBM's calibration,
obtained without a held-out split, make EM adaptation as good as the best recipe that needs one,
and does EM's default keep the probabilities it returns from getting worse than none?

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
  and ``_ts_mle`` / ``_bcts_mle`` their maximum-likelihood fits (penalty 0). A row that an
  adaptation leaves without mass (0/0, a degenerate maximum-likelihood BCTS) counts as uniform.
- deployment sets: ``--n-deploy`` (500) samples drawn with replacement from the test split with
  class priors ``π' ~ Dirichlet(α 1)``, α in {0.1, 0.5, 1, 10}, ``--draws`` (10) draws per α,
  from a generator per (seed, α).
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
  maximum-likelihood priors floored at ``1/n``), the candidates for EM's default. Every estimate
  adapts the posteriors by the Bayes correction ``p(y|x) π'(y)/π(y)``
  (:func:`ebmclassifier.distributional.bayes_correction`, = ``DistributionalConstraint(
  method="bayes")``; with EM's priors the moment projection gives the same).
- metrics on each deployment set: prior-estimation error ``|π̂ - π'|_1``, accuracy, NLL, ECE
  (15 bins), each averaged over the draws, then the median over seeds; and per draw, whether
  the NLL is above no adaptation's and above EMQ's, the prior error above EMQ's, and the largest
  NLL excess over no adaptation (``--em-table``).

The posteriors of each trained model are cached in ``--cache`` (``.npz``, read without pickle),
so a second run (``--report`` only, more draws, other estimators) trains nothing.

    python benchmarks/label_shift.py --seeds 5 --pseudo-counts 0.3,0.5,2,3,5,10 \
        --out docs/distributional                       # the docs' figures: 968 s, trained
    python benchmarks/label_shift.py --report docs/distributional/results.json --markdown
    python benchmarks/label_shift.py --report docs/distributional/results.json --em-table
    python benchmarks/label_shift.py --report docs/distributional/results.json \
        --pseudo-count-table
    python benchmarks/label_shift.py --report docs/distributional/results.json \
        --calibration-table
    python benchmarks/label_shift.py --quick            # smoke test

Measured wall times, one thread on two CPU cores shared with other jobs: training the models of
five seeds took 10.5 min (100-130 s per MNIST-1D seed with both ConvNets, 20-50 s per digits
seed); the run above on those cached posteriors 968 s (EM and quapy's EMQ under every
estimator, 14 models, 40 draws per seed: 30-40 s per digits seed, 120-140 s per MNIST-1D seed).

Writes ``results.json``, ``prior_error.png`` (prior-estimation error against α) and
``reliability_{ce,ce_em,ngebm,ngebm_em}.png`` (reliability diagrams before/after EM on
MNIST-1D, α = 0.1, seed 0, ten draws pooled) into ``--out`` and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
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
)
from ebmclassifier.metrics import expected_calibration_error

ALPHAS = (0.1, 0.5, 1.0, 10.0)
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
CALIBRATED = ("ce", "ngebm")
MODELS = (
    *(f"ce{suffix}" for suffix in ("", *(f"_{c}" for c in CALIBRATIONS))),
    *(f"ngebm{suffix}" for suffix in ("", *(f"_{c}" for c in CALIBRATIONS))),
    "ngebm_all",
    "jem",
    *CONV,
)
ESTIMATORS = ("none", "em", "em_ml", "emq", "bbse", "oracle")
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


def _with_calibration(post: dict) -> dict:
    """``post`` with each model of ``CALIBRATED`` calibrated on the held-out part.

    :func:`~ebmclassifier.distributional.fit_temperature` (the function that
    ``DistributionalConstraint(calibration=...)`` calls) on the held-out log posteriors; the
    training priors of a calibrated model are the held-out part's class shares, as there.
    """
    post = dict(post)
    held_priors = np.bincount(post["y_held"], minlength=10) / len(post["y_held"])
    for base in CALIBRATED:
        if f"{base}_held" not in post:
            continue
        for calibration, (bias, penalty) in CALIBRATIONS.items():
            name = f"{base}_{calibration}"
            t, b, _ = fit_temperature(
                post[f"{base}_held"], post["y_held"], bias=bias, penalty=penalty
            )
            for split in ("held", "test"):
                post[f"{name}_{split}"] = calibrated_log_proba(post[f"{base}_{split}"], t, b)
            post[f"{name}_train_priors"] = held_priors
            post[f"{name}_temperature"] = np.array(t)
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


def _estimate(estimator, model, post, idx, true_priors) -> np.ndarray | None:
    """The priors ``estimator`` gives on the deployment rows ``idx`` (None: no adaptation).

    ``em``: :func:`~ebmclassifier.distributional.em_priors` with the library's defaults, as
    ``DistributionalConstraint(priors="em")`` runs it (one pseudo-sample, ``tol=1e-8``,
    ``max_iter=1000``); ``em_ml``: the same with ``pseudo_count=0`` (maximum likelihood, the
    library before issue #39); ``em_s<s>``: pseudo-count ``s``; ``em_floor``: the
    maximum-likelihood priors floored at one sample of X (``1 / n``) and renormalised.
    """
    train = post[f"{model}_train_priors"]
    proba = np.exp(post[f"{model}_test"][idx])
    if estimator == "none":
        return None
    if estimator == "em":
        return em_priors(proba, train)[0]
    if estimator == "em_ml":
        return em_priors(proba, train, pseudo_count=0.0)[0]
    if estimator.startswith("em_s"):
        return em_priors(proba, train, pseudo_count=float(estimator[4:]))[0]
    if estimator == "em_floor":
        floored = np.maximum(em_priors(proba, train, pseudo_count=0.0)[0], 1.0 / len(idx))
        return floored / floored.sum()
    if estimator == "emq":
        return _emq(proba, train)
    if estimator == "oracle":
        return true_priors
    pred_held = post["ce_held"].argmax(axis=1)
    return bbse_priors(post["y_held"], pred_held, post["ce_test"][idx].argmax(axis=1), 10)


def _estimators(args) -> tuple[str, ...]:
    """``ESTIMATORS``, with the ``--pseudo-counts`` sweep and the floor when asked for, and
    without ``emq`` when quapy is not installed (said once)."""
    estimators = list(ESTIMATORS)
    if args.pseudo_counts:
        estimators += [f"em_s{v:g}" for v in args.pseudo_counts] + ["em_floor"]
    try:
        import quapy  # noqa: F401
    except ImportError:
        print("quapy is not installed: no 'emq' rows (pip install quapy)")
        estimators.remove("emq")
    return tuple(estimators)


def _with_comparisons(cells: dict) -> dict:
    """Per cell ``model/estimator``, the per-draw counts that say where it loses: draws with
    a higher NLL than no adaptation (``nll_gt_none``) and than quapy's EMQ (``nll_gt_emq``),
    with a larger prior error than EMQ (``l1_gt_emq``), and the largest NLL excess over no
    adaptation (``nll_excess_max``); ``draws`` counts them."""
    out = {}
    for key, draws in cells.items():
        model = key.split("/")[0]
        row = {m: float(np.mean([d[m] for d in draws])) for m in draws[0]}
        none = [d["nll"] for d in cells[f"{model}/none"]]
        nll = [d["nll"] for d in draws]
        row["draws"] = len(draws)
        row["nll_gt_none"] = int(np.sum(np.array(nll) > np.array(none) + 1e-12))
        row["nll_excess_max"] = float(np.max(np.array(nll) - np.array(none)))
        if f"{model}/emq" in cells:
            pairs = list(zip(draws, cells[f"{model}/emq"], strict=True))
            row["nll_gt_emq"] = int(sum(d["nll"] > e["nll"] + 1e-12 for d, e in pairs))
            row["l1_gt_emq"] = int(sum(d["prior_l1"] > e["prior_l1"] + 1e-12 for d, e in pairs))
        out[key] = row
    return out


def run_seed(name: str, seed: int, args) -> dict:
    post = _with_calibration(_posteriors(name, seed, Path(args.cache), args.quick, args.models))
    models = [m for m in MODELS if f"{m}_test" in post]
    estimators = _estimators(args)
    rows = {}
    for alpha in ALPHAS:
        # a generator per (seed, alpha): adding an alpha leaves the others' draws unchanged
        rng = np.random.default_rng([seed, round(alpha * 1000)])
        cells: dict = {}
        for _ in range(args.draws):
            priors = rng.dirichlet(np.full(10, alpha))
            idx = _draw(post["y_test"], priors, args.n_deploy, rng)
            true = np.bincount(post["y_test"][idx], minlength=10) / len(idx)
            for model in models:
                proba = np.exp(post[f"{model}_test"][idx])
                for estimator in estimators:
                    est = _estimate(estimator, model, post, idx, true)
                    if est is None:
                        adapted, error = (
                            proba,
                            float(np.abs(post[f"{model}_train_priors"] - true).sum()),
                        )
                    else:
                        adapted = bayes_correction(proba, post[f"{model}_train_priors"], est)
                        error = float(np.abs(est - true).sum())
                    cell = cells.setdefault(f"{model}/{estimator}", [])
                    cell.append({"prior_l1": error, **_metrics(adapted, post["y_test"][idx])})
        rows[str(alpha)] = _with_comparisons(cells)
    accuracy = {m: float(np.mean(post[f"{m}_test"].argmax(1) == post["y_test"])) for m in models}
    seconds = {m: float(post[f"{m}_seconds"]) for m in TRAINED if f"{m}_seconds" in post}
    temperatures = {
        m: float(post[f"{m}_temperature"]) for m in models if f"{m}_temperature" in post
    }
    return {"by_alpha": rows, "test_accuracy": accuracy, "fit_seconds": seconds,
            "temperature": temperatures}  # fmt: skip


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


def figures(results: dict, summary: dict, out: Path, cache: Path, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ebmclassifier.plotting import plot_reliability_diagram

    fig, axes = plt.subplots(1, len(summary), figsize=(5 * len(summary), 3.6), squeeze=False)
    curves = [("ce", "em"), ("ce_ts", "em"), ("ce_bcts", "em"), ("ce", "bbse"), ("ngebm", "em"),
              ("ngebm_bcts", "em"), ("ngebm_all", "em"), ("jem", "em")]  # fmt: skip
    for ax, (name, by_alpha) in zip(axes[0], summary.items(), strict=True):
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
    parser.add_argument("--n-deploy", type=int, default=500)
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
    args = parser.parse_args(argv)
    if args.report:
        results = json.loads(Path(args.report).read_text())
        if args.calibration_table:
            print(calibration_table(results))
        elif args.em_table:
            print(em_table(results), loss_table(results), sep="\n")
        elif args.pseudo_count_table:
            print(pseudo_count_table(results))
        else:
            print(markdown(results)) if args.markdown else print_tables(results["summary"])
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
    results["summary"] = summarize(results)
    results["seconds"] = time.perf_counter() - start
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print_tables(results["summary"])
    figures(results, results["summary"], out, Path(args.cache), args.quick)
    print(f"\nwrote {out / 'results.json'}, prior_error.png, reliability_*.png "
          f"in {results['seconds']:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
