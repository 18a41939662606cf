"""NG-EBM's cheaper penalty (``penalty_every``, ``penalty_fraction``): what it costs, what it keeps.

Issue #40. Two parts, each printing markdown tables, and two diagnostics:

- ``cost``: whole fits of every model on the same data, network and batches (64), interleaved:
  one fit of each per round in a rotating order (after an untimed warm-up round), the ratio of
  each fit's CPU time to the cross-entropy fit of the same round, then the median and the
  10th-90th percentiles over rounds. Every fit of a setting has the same epochs, so the ratio is
  the cost per epoch. Settings: the digits as standardized 1x8x8 images with the default
  ConvNet (the issue's 2.36x setting, ``benchmarks/fit_overhead.py``), the digits flat with
  the MLP, MNIST-1D with the MLP (2,000 signals) and the ConvNet (4,000).
- ``quality``: ``python -m ebmclassifier compare``'s protocol (:func:`run_comparison`: data
  standardized on the training split, 20% held out for temperature scaling, 30 epochs, PGD in
  the data's units) for cross-entropy (``ce``), cross-entropy with temperature scaling
  (``ce_ts``), full NG-EBM (``ngebm``) and NG-EBM with each interval and fraction, per seed:
  accuracy, ECE, NLL, far-OOD AUROC (uniform noise, and the worst of compare's three OOD sets,
  each model's own score: ``approx_mass`` for NG-EBM, ``energy`` for ``ce``, ``max_softmax`` for
  ``ce_ts``) and accuracy under L-inf PGD (eps 0.05 on digits, 0.1 on MNIST-1D). Medians
  [min, max] over seeds; a variant "keeps" a metric when its [min, max] overlaps full NG-EBM's
  (compare's "within the seed spread").
- ``--part optimizer``: full and lazy NG-EBM on the digits under Adam and under plain SGD
  (:func:`run_optimizer`), which shows why the lazy penalty loses quality with Adam.
- ``--reuse K ...``: adds to the quality part the experiment :class:`ReusedPenalty` (not an
  option of the library): the penalty every ``K`` steps at its own weight, its gradient reused
  at the steps between.

Run from the repository root, on one thread. The default run (both parts, every setting, 5
seeds) took about 45 minutes of CPU time, 1 h 40 min on the shared two-core machine at load
3-7: the cost part about 15 minutes of it, the quality part 5 on the MLPs and 25 on MNIST-1D's
ConvNet. ``--part``, ``--settings``, ``--seeds``, ``--intervals`` and ``--fractions`` shrink it;
``--quick`` tries both parts in a few minutes. ``--out`` writes every measurement to a JSON
file, from which ``--tables`` prints the NG-EBM guide's tables::

    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 python benchmarks/ngebm_lazy.py --out lazy.json
    PYTHONPATH=. python benchmarks/ngebm_lazy.py --tables lazy.json
    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 python benchmarks/ngebm_lazy.py --part cost \\
        --settings digits_conv mnist1d_conv --rounds 7
    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 python benchmarks/ngebm_lazy.py --part quality \\
        --settings mnist1d_conv --intervals 4 8 --fractions
    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 python benchmarks/ngebm_lazy.py --part optimizer \\
        --seeds 3 --intervals 4 16
    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 python benchmarks/ngebm_lazy.py --part quality \\
        --intervals --fractions --reuse 4 8 16
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

from ebmclassifier import NGEBMClassifier
from ebmclassifier.datasets import load_digits_ood, load_mnist1d
from ebmclassifier.energy import energy_grad_norm
from ebmclassifier.experiments.compare import (
    CompareConfig,
    ModelSpec,
    Standardizer,
    run_comparison,
)
from ebmclassifier.losses import weighted_mean
from ebmclassifier.metrics import expected_calibration_error

#: Per setting: compare's data set and network, the training signals it keeps, the PGD radius.
QUALITY = {
    "digits_mlp": dict(data="digits", network="default", max_train=None, eps=0.05),
    "mnist1d_mlp": dict(data="mnist1d", network="mlp", max_train=2000, eps=0.1),
    "mnist1d_conv": dict(data="mnist1d", network="default", max_train=4000, eps=0.1),
}
#: Per setting of the cost part: the epochs of each timed fit (a few seconds of CE each).
COST_EPOCHS = {"digits_conv": 3, "digits_mlp": 6, "mnist1d_mlp": 6, "mnist1d_conv": 1}
HEADLINE = {"ce": "energy", "ce_ts": "max_softmax"}  # NG-EBM models: approx_mass


def variants(grad_norms, intervals, fractions, reuse=()) -> dict[str, dict]:
    """The NG-EBM models by name: full, then each interval and each fraction, per mode, and
    the experiment :class:`ReusedPenalty` for each interval of ``reuse``."""
    models = {}
    for mode in grad_norms:
        tag = "" if mode == "exact" else "_fd"
        models[f"ngebm{tag}"] = dict(grad_norm=mode)
        for k in intervals:
            models[f"ngebm{tag}_every{k}"] = dict(grad_norm=mode, penalty_every=k)
        for f in fractions:
            models[f"ngebm{tag}_frac{f:g}"] = dict(grad_norm=mode, penalty_fraction=f)
    for k in reuse:
        models[f"ngebm_reuse{k}"] = dict(penalty_every=k)
    return models


# ---------------------------------------------------------------- cost


def cost_data(setting: str) -> tuple[np.ndarray, np.ndarray]:
    if setting.startswith("digits"):
        X, y = load_digits(return_X_y=True)
        X = ((X - X.mean(0)) / (X.std(0) + 1e-8)).astype(np.float32)
        return (X.reshape(-1, 1, 8, 8) if setting == "digits_conv" else X), y
    flat = setting == "mnist1d_mlp"
    data = load_mnist1d(shape="flat" if flat else "sequence")
    n = 2000 if flat else 4000
    return data.X_train[:n], data.y_train[:n]


def run_cost(setting: str, models: dict[str, dict], rounds: int) -> dict:
    """CPU seconds of each model's fit per round, and its ratio to the same round's CE fit."""
    X, y = cost_data(setting)
    common = dict(max_epochs=COST_EPOCHS[setting], random_state=0, device="cpu", n_threads=1)
    estimators = {"ce": NGEBMClassifier(beta=0.0, **common)}
    estimators.update({name: NGEBMClassifier(**common, **p) for name, p in models.items()})
    names = list(estimators)
    seconds = {name: [] for name in names}
    for r in range(1 + rounds):  # round 0: warm-up, not timed
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.process_time()
            estimators[name].fit(X, y)
            if r:
                seconds[name].append(time.process_time() - start)
    ce = np.asarray(seconds["ce"])
    rows = {}
    for name in names:
        ratios = np.asarray(seconds[name]) / ce
        rows[name] = {
            "seconds_per_epoch": float(np.median(seconds[name])) / COST_EPOCHS[setting],
            "ratio": float(np.median(ratios)),
            "p10": float(np.percentile(ratios, 10)),
            "p90": float(np.percentile(ratios, 90)),
        }
    return rows


def print_cost(setting: str, rows: dict, rounds: int) -> None:
    steps = COST_EPOCHS[setting]
    print(f"\n### cost: {setting} ({steps} epochs per fit, {rounds} rounds, CPU time)\n")
    print("| model | s / epoch | x CE [p10, p90] |\n|---|---|---|")
    for name, row in rows.items():
        spread = f"[{row['p10']:.2f}, {row['p90']:.2f}]"
        print(f"| {name} | {row['seconds_per_epoch']:.3f} | {row['ratio']:.2f} {spread} |")


# ---------------------------------------------------------------- quality


class ReusedPenalty(NGEBMClassifier):
    """An experiment, not an option of the library: the penalty every ``k`` steps at weight
    ``beta``, its parameter gradient reused at each of the ``k - 1`` steps between.

    Over ``k`` steps it adds up to what ``penalty_every=k`` adds (``k beta`` times one
    penalty's gradient), spread evenly instead of in one step of ``k`` times the weight, so
    Adam's second moment does not grow with ``k``. The reused gradient enters as the linear
    term ``sum_p <p, g_p>`` (its gradient is ``g_p``), so the loss it returns is not the
    objective's value. Training only, ``grad_norm="exact"``, no resume.
    """

    def compute_loss(self, X, y, training, sample_weight=None):
        k = self.penalty_every
        if not training or k == 1:
            return super().compute_loss(X, y, training, sample_weight)
        params = [p for p in self.module_.parameters() if p.requires_grad]
        if self.train_steps_ % k == 0:
            norms, _, logits = energy_grad_norm(self.module_, X, create_graph=True)
            penalty = self.beta * weighted_mean(norms, sample_weight)
            grads = torch.autograd.grad(penalty, params, retain_graph=True)
            self.reused_ = [g.detach() for g in grads]
        else:
            logits = self.module_(X)
        linear = sum((p * g).sum() for p, g in zip(params, self.reused_, strict=True))
        return (1 - self.beta) * self.classification_loss(logits, y, sample_weight) + linear, logits


def registry(models: dict[str, dict]) -> dict[str, ModelSpec]:
    def build(params):
        return lambda fit_params: NGEBMClassifier(**{"beta": 0.5, **params, **fit_params})

    specs = {
        "ce": ModelSpec("ce", "cross-entropy", build=build({"beta": 0.0})),
        "ce_ts": ModelSpec(
            "ce_ts", "ce, temperature-scaled", scores=("max_softmax",), calibrates="ce"
        ),
    }
    for name, params in models.items():
        specs[name] = ModelSpec(name, f"NG-EBM {params}", build=build(params))
        if name.startswith("ngebm_reuse"):  # the experiment
            specs[name] = ModelSpec(
                name,
                f"NG-EBM, reused penalty gradient {params}",
                build=lambda fit_params, params=params: ReusedPenalty(**params, **fit_params),
            )
    return specs


def run_quality(setting: str, models: dict[str, dict], seeds: int, epochs: int | None) -> list:
    spec = QUALITY[setting]
    names = ("ce", "ce_ts", *models)
    config = CompareConfig(
        data=spec["data"],
        models=names,
        seeds=seeds,
        network=spec["network"],
        max_train=spec["max_train"],
        epsilons=(0.0, spec["eps"]),
        max_epochs=epochs,
        device="cpu",
        progress=False,
    )
    results = run_comparison(config, registry(models))
    runs = []
    for run in results["runs"]:
        score = HEADLINE.get(run["model"], "approx_mass")
        aurocs = {name: v["auroc"] for name, v in run["ood"][score].items()}
        runs.append(
            {
                "model": run["model"],
                "seed": run["seed"],
                "accuracy": run["accuracy"],
                "ece": run["ece"],
                "nll": run["nll"],
                "auroc_uniform": aurocs["uniform"],
                "auroc_worst": min(aurocs.values()),
                "pgd": None if run["robust_accuracy"] is None else run["robust_accuracy"][1],
                "cost_vs_ce": run.get("cost_vs_ce"),
            }
        )
    return runs


METRICS = ("accuracy", "ece", "nll", "auroc_uniform", "auroc_worst", "pgd")


def _spread(runs: list, model: str, metric: str) -> np.ndarray:
    return np.asarray([r[metric] for r in runs if r["model"] == model and r[metric] is not None])


def print_quality(setting: str, runs: list, seeds: int) -> None:
    eps = QUALITY[setting]["eps"]
    print(f"\n### quality: {setting} (median [min, max] over {seeds} seeds)\n")
    header = ["model", *METRICS[:-1], f"PGD eps {eps}", "compare's cost x CE", "keeps"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    models = list(dict.fromkeys(r["model"] for r in runs))
    for model in models:
        cells, kept = [model], []
        for metric in (*METRICS, "cost_vs_ce"):
            values = _spread(runs, model, metric)
            if not len(values):
                cells.append("-")
                continue
            cells.append(f"{np.median(values):.3f} [{values.min():.3f}, {values.max():.3f}]")
            full = _spread(runs, "ngebm", metric)
            if metric in METRICS and model.startswith("ngebm_") and len(full):
                if values.max() >= full.min() and values.min() <= full.max():
                    kept.append(metric)
        cells.append(", ".join(kept) if model.startswith("ngebm_") else "")
        print("| " + " | ".join(cells) + " |")


GUIDE_NAMES = {"ce": "CE", "ce_ts": "CE + temperature", "ngebm": "NG-EBM"}


def _guide_name(model: str) -> str:
    if model in GUIDE_NAMES:
        return GUIDE_NAMES[model]
    if model.startswith("ngebm_reuse"):
        return f"reused, k={model.removeprefix('ngebm_reuse')}"
    option, _, value = model.removeprefix("ngebm_").partition("_")  # no fd in the guide
    for prefix, name in (("every", "penalty_every"), ("frac", "penalty_fraction")):
        if option.startswith(prefix):
            return f"`{name}={option.removeprefix(prefix)}`"
    return model


def print_guide_tables(out: dict) -> None:
    """The NG-EBM guide's quality tables from a ``--out`` file: the cost part's ratio to CE
    beside the quality part's medians [min, max], *in italics* where a variant's range does
    not overlap full NG-EBM's (the ``keeps`` column of :func:`print_quality`)."""
    for setting, runs in out["quality"].items():
        cost = out["cost"].get(setting, {})
        print(f"\n**{setting}**\n")
        header = "| model | cost x CE | accuracy | ECE | NLL | AUROC noise | AUROC worst | PGD |"
        print(header + "\n|" + "---|" * 8)
        for model in dict.fromkeys(r["model"] for r in runs):
            ratio = cost.get(model, {}).get("ratio")
            ratio = "1.00" if model in ("ce", "ce_ts") else "-" if ratio is None else f"{ratio:.2f}"
            cells = [_guide_name(model), ratio]
            for metric in METRICS:
                values, full = _spread(runs, model, metric), _spread(runs, "ngebm", metric)
                if not len(values):
                    cells.append("-")
                    continue
                text = f"{np.median(values):.3f} [{values.min():.3f}, {values.max():.3f}]"
                outside = values.max() < full.min() or values.min() > full.max()
                cells.append(f"*{text}*" if model.startswith("ngebm_") and outside else text)
            print("| " + " | ".join(cells) + " |")


# ---------------------------------------------------------------- Adam's second moment


def run_optimizer(seeds: int, intervals) -> list[dict]:
    """Full and lazy NG-EBM under Adam and plain SGD on the digits (MLP, 30 epochs).

    A lazy step's gradient is ``k`` times the penalty's: Adam's second moment grows with those
    spikes and every later step shrinks, so a lazy fit trains both terms less in the same
    epochs; plain SGD, linear in the gradient, follows the average. Measured on the test split:
    accuracy, mean confidence (the largest probability), ECE, the mean penalty
    ``||dE/dx||`` and the last epoch's training loss.
    """
    data = load_digits_ood()
    scaler = Standardizer(data.X_train)
    X, X_test = scaler.transform(data.X_train), scaler.transform(data.X_test)
    optimizers = {
        "adam": dict(optimizer=torch.optim.Adam),
        "sgd": dict(optimizer=torch.optim.SGD, lr=0.05),
    }
    rows = []
    for seed in range(seeds):
        for opt, params in optimizers.items():
            for k in (1, *intervals):
                clf = NGEBMClassifier(max_epochs=30, random_state=seed, penalty_every=k, **params)
                clf.fit(X, data.y_train)
                proba = clf.predict_proba(X_test)
                rows.append(
                    {
                        "optimizer": opt,
                        "every": k,
                        "seed": seed,
                        "accuracy": float((proba.argmax(1) == data.y_test).mean()),
                        "confidence": float(proba.max(1).mean()),
                        "ece": expected_calibration_error(data.y_test, proba),
                        "penalty": float(clf.score_ood(X_test, "approx_mass").mean()),
                        "train_loss": float(clf.history[-1]["train_loss"]),
                    }
                )
    return rows


def print_optimizer(rows: list[dict], seeds: int) -> None:
    print(f"\n### lazy NG-EBM under Adam and SGD: digits, MLP (median over {seeds} seeds)\n")
    metrics = ("accuracy", "confidence", "ece", "penalty", "train_loss")
    print("| optimizer | penalty_every | " + " | ".join(metrics) + " |\n|" + "---|" * 7)
    for opt, k in dict.fromkeys((r["optimizer"], r["every"]) for r in rows):
        chosen = [r for r in rows if (r["optimizer"], r["every"]) == (opt, k)]
        cells = [f"{np.median([r[m] for r in chosen]):.3f}" for m in metrics]
        print(f"| {opt} | {k} | " + " | ".join(cells) + " |")


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part",
        choices=("both", "cost", "quality", "optimizer"),
        default="both",
        help="both: cost and quality; optimizer: lazy NG-EBM under Adam and SGD (digits)",
    )
    parser.add_argument("--settings", nargs="*", help="default: every setting of the part")
    parser.add_argument("--seeds", type=int, help="quality: seeds 0..N-1 (default 5)")
    parser.add_argument("--rounds", type=int, help="cost: timed rounds (default 5)")
    parser.add_argument("--epochs", type=int, help="quality: epochs (default compare's 30)")
    parser.add_argument("--intervals", type=int, nargs="*", help="default 2 4 8 16")
    parser.add_argument("--fractions", type=float, nargs="*", help="default 0.5 0.25")
    parser.add_argument(
        "--grad-norms",
        nargs="*",
        help="default: exact and finite_difference for the cost, exact (the estimator's "
        "default) for the quality",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="defaults for a try: 2 seeds, 2 rounds, 10 epochs, interval 8, fraction 0.25",
    )
    parser.add_argument(
        "--reuse",
        type=int,
        nargs="*",
        default=[],
        help="quality: also the experiment ReusedPenalty at these intervals (not an option)",
    )
    parser.add_argument("--out", help="write every measurement to this JSON file")
    parser.add_argument(
        "--tables",
        metavar="JSON",
        help="only print the NG-EBM guide's tables from a file that --out wrote",
    )
    args = parser.parse_args()
    if args.tables:
        with open(args.tables) as file:
            print_guide_tables(json.load(file))
        return
    defaults = dict(seeds=5, rounds=5, epochs=None, intervals=[2, 4, 8, 16], fractions=[0.5, 0.25])
    if args.quick:
        defaults = dict(seeds=2, rounds=2, epochs=10, intervals=[8], fractions=[0.25])
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    torch.set_num_threads(1)
    out = {"args": vars(args), "cost": {}, "quality": {}}
    if args.part in ("both", "cost"):
        modes = args.grad_norms or ["exact", "finite_difference"]
        models = variants(modes, args.intervals, args.fractions)
        for setting in args.settings or COST_EPOCHS:
            if setting in COST_EPOCHS:
                out["cost"][setting] = run_cost(setting, models, args.rounds)
                print_cost(setting, out["cost"][setting], args.rounds)
    if args.part in ("both", "quality"):
        models = variants(args.grad_norms or ["exact"], args.intervals, args.fractions, args.reuse)
        for setting in args.settings or QUALITY:
            if setting in QUALITY:
                out["quality"][setting] = run_quality(setting, models, args.seeds, args.epochs)
                print_quality(setting, out["quality"][setting], args.seeds)
    if args.part == "optimizer":
        out["optimizer"] = run_optimizer(args.seeds, args.intervals)
        print_optimizer(out["optimizer"], args.seeds)
    if args.out:
        with open(args.out, "w") as file:
            json.dump(out, file, indent=1)


if __name__ == "__main__":
    main()
