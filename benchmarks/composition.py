"""Composing energies on digits (issue #16): deep ensembles, compositional scoring and sampling.

Three measurements, each over seeds 0 .. --seeds - 1, reported as medians:

1. ``ensemble``: the deep ensemble (``ProductOfExperts(combine="mixture")`` of 5 nets that
   differ in their seed, Lakshminarayanan et al. 2017) of cross-entropy nets
   (``NGEBMClassifier(beta=0)``) and of NG-EBM nets, against one net of each, on the data and
   split of ``python -m ebmclassifier compare --data digits``: the digits of
   ``load_named_dataset("digits")`` standardized per feature over the training split, 20% of
   it held out (stratified, ``random_state=seed``) as compare holds it out for calibration, 30
   epochs. Accuracy, ECE (15 bins), NLL, OOD AUROC of each score against compare's three OOD
   sets, and the cost (seconds of fitting, 5 fits for an ensemble). Member ``i`` of an ensemble
   has ``random_state = seed + 1000 * i``, so the single net is member 0. The same five members
   are also measured as a product (``combine="product"``, weights 1/5, ``*_poe``).
2. ``scoring``: a digit expert and a stroke expert, trained separately on digits 0-7. The
   stroke attribute is "thick" when an image's ink (the sum of its pixel values in [0, 1]) is
   above the median ink of its digit in the training split, else "thin". The pool is the test
   images of digits 0-7 and junk: the test images of digits 8 and 9 (never seen) and 100 each
   of compare's uniform-noise, inverted and pixel-permuted images. For each of the 16 queries
   "digit d and stroke a", the pool is ranked by the composed energy
   ``E_digit(x, d) + E_stroke(x, a)`` (``ConceptComposition.energy``, lowest first) and by the
   product of the two experts' probabilities ``p(d|x) p(a|x)`` (highest first); relevant are
   the test images of digit d with stroke a. Reported: precision at 10 and at R (R = number
   of relevant images), and the share of junk in the top R, averaged over the queries, for
   experts trained as CE, NG-EBM and JEM.
3. ``sampling``: the two JEM experts of 2. Per query, 32 chains from the same starts (JEM++'s
   informative start over all (digit, stroke) combinations, ``start="marginal"``), 100 SGLD
   steps (JEM's sampler, step 1, noise 0.01) on the composed energy, on the digit expert's
   ``E(x, d)`` alone and on the stroke expert's ``E(x, a)`` alone. Judges are CE nets trained
   independently (other seeds) on digit and on stroke; reported: the fraction of samples judged
   to be digit d, to have stroke a, and both. Because a CE judge can be fooled by the small
   gradient steps that fool the experts, two judges that gradients cannot fool are reported
   too: a 5-nearest-neighbour digit classifier on the pixels, and the stroke rule itself (the
   sample's ink, pixels clipped to [0, 1], against digit d's median). A figure of samples
   (seed 0) goes to ``--out``.

    python benchmarks/composition.py              # all three, 5 seeds: ~3.5 CPU minutes, 1 thread
    python benchmarks/composition.py --part scoring --seeds 3
    python benchmarks/composition.py --quick      # 1 seed, few epochs: a smoke test
    python benchmarks/composition.py --report docs/composition/results.json  # the tables again

Prints markdown tables; writes ``results.json`` and ``samples.png`` to ``--out``
(default ``docs/composition``).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler

from ebmclassifier import ConceptComposition, JEMClassifier, NGEBMClassifier, ProductOfExperts
from ebmclassifier.datasets import load_named_dataset
from ebmclassifier.metrics import expected_calibration_error, ood_metrics

SCORES = ("energy", "max_softmax", "approx_mass")
N_MEMBERS = 5
KNOWN_DIGITS = tuple(range(8))
STROKES = ("thin", "thick")


def load_digits_split(seed: int):
    """compare's digits: standardized over the training split, 20% held out by ``seed``."""
    data = load_named_dataset("digits")
    scaler = StandardScaler().fit(data.X_train)
    standardize = lambda X: scaler.transform(X).astype(np.float32)  # noqa: E731
    X_fit, _, y_fit, _, ink_fit, _ = train_test_split(
        standardize(data.X_train), data.y_train, data.X_train.sum(axis=1),
        test_size=0.2, stratify=data.y_train, random_state=seed,
    )  # fmt: skip
    return {
        "X_fit": X_fit, "y_fit": y_fit, "ink_fit": ink_fit,
        "X_test": standardize(data.X_test), "y_test": data.y_test,
        "ink_test": data.X_test.sum(axis=1),
        "ood": {name: standardize(X) for name, X in data.ood.items()},
        "scaler": scaler,
    }  # fmt: skip


def timed_fit(estimator, X, y):
    start = time.perf_counter()
    estimator.fit(X, y)
    return estimator, time.perf_counter() - start


# ----------------------------------------------------------------------------- 1. ensembles


def measure(model, split) -> dict:
    proba = model.predict_proba(split["X_test"]).astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    y = split["y_test"]
    record = {
        "accuracy": float(np.mean(proba.argmax(axis=1) == y)),
        "ece": expected_calibration_error(y, proba, 15),
        "nll": float(log_loss(y, proba, labels=np.arange(10))),
    }
    for method in SCORES:
        s_in = model.score_ood(split["X_test"], method)
        for name, X_ood in split["ood"].items():
            record[f"auroc_{method}_{name}"] = ood_metrics(s_in, model.score_ood(X_ood, method))[
                "auroc"
            ]
    return record


def run_ensemble(seed: int, epochs: int) -> list[dict]:
    split = load_digits_split(seed)
    rows = []
    for family, beta in (("ce", 0.0), ("ngebm", 0.5)):
        members, seconds = [], []
        for i in range(N_MEMBERS):
            net = NGEBMClassifier(beta=beta, max_epochs=epochs, random_state=seed + 1000 * i)
            fitted, dt = timed_fit(net, split["X_fit"], split["y_fit"])
            members.append((f"m{i}", FrozenEstimator(fitted)))
            seconds.append(dt)
        single = members[0][1]
        ensemble = ProductOfExperts(members, combine="mixture").fit(split["X_fit"], split["y_fit"])
        # the same members as a product, weights 1/5: the geometric mean of their densities
        product = ProductOfExperts(members, weights=[1 / N_MEMBERS] * N_MEMBERS)
        product.fit(split["X_fit"], split["y_fit"])
        for name, model, fits, cost in (
            (family, single, 1.0, seconds[0]),
            (f"{family}_ens", ensemble, float(N_MEMBERS), float(np.sum(seconds))),
            (f"{family}_poe", product, float(N_MEMBERS), float(np.sum(seconds))),
        ):
            rows.append({"model": name, "seed": seed, "fits": fits, "fit_seconds": cost,
                         **measure(model, split)})  # fmt: skip
    return rows


# ----------------------------------------------------------------------------- 2. scoring


def stroke_labels(ink, digits, medians) -> np.ndarray:
    return np.where(ink > np.array([medians[d] for d in digits]), "thick", "thin")


def concept_data(split):
    """Training data of the two experts (digits 0-7), the pool and its relevance labels."""
    known = np.isin(split["y_fit"], KNOWN_DIGITS)
    X, digits, ink = split["X_fit"][known], split["y_fit"][known], split["ink_fit"][known]
    medians = {d: float(np.median(ink[digits == d])) for d in KNOWN_DIGITS}
    Y = np.column_stack([digits, stroke_labels(ink, digits, medians)]).astype(object)
    Y[:, 0] = digits
    test_known = np.isin(split["y_test"], KNOWN_DIGITS)
    rng = np.random.default_rng(0)
    junk = [split["X_test"][~test_known]] + [
        X_ood[rng.choice(len(X_ood), 100, replace=False)] for X_ood in split["ood"].values()
    ]
    pool = np.concatenate([split["X_test"][test_known], *junk])
    n_real = int(test_known.sum())
    pool_digit = np.full(len(pool), -1)  # -1: noise, inverted or permuted
    pool_digit[: len(split["y_test"])] = np.concatenate(
        [split["y_test"][test_known], split["y_test"][~test_known]]
    )
    pool_stroke = np.full(len(pool), "junk", dtype=object)
    pool_stroke[:n_real] = stroke_labels(
        split["ink_test"][test_known], split["y_test"][test_known], medians
    )
    return X, Y, pool, pool_digit, pool_stroke, n_real, medians


def expert(kind: str, seed: int, epochs: int):
    if kind == "jem":
        return JEMClassifier(max_epochs=epochs, random_state=seed)
    return NGEBMClassifier(beta=0.0 if kind == "ce" else 0.5, max_epochs=epochs, random_state=seed)


def ranking_metrics(order, relevant, pool_digit) -> dict:
    """Precision at 10 and at R, and what of the junk got into the top R."""
    top = order[: int(relevant.sum())]
    return {
        "p_at_10": float(relevant[order[:10]].mean()),
        "p_at_r": float(relevant[top].mean()),
        "digits_8_9_at_r": float(np.isin(pool_digit[top], (8, 9)).mean()),
        "noise_at_r": float((pool_digit[top] == -1).mean()),
    }


def run_scoring(seed: int, epochs: int, kinds=("ce", "ngebm", "jem")) -> tuple[list, dict]:
    split = load_digits_split(seed)
    X, Y, pool, pool_digit, pool_stroke, n_real, medians = concept_data(split)
    rows, models = [], {}
    for kind in kinds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # JEM's recovery notices
            model = ConceptComposition(
                [("digit", expert(kind, seed, epochs)), ("stroke", expert(kind, seed + 1, epochs))]
            ).fit(X, Y)
        models[kind] = model
        p_digit, p_stroke = model.predict_proba(pool)
        per_query = {"energy": [], "proba": []}
        for d in KNOWN_DIGITS:
            for a in STROKES:
                relevant = (pool_digit == d) & (pool_stroke == a)
                energy = model.energy(pool, {"digit": d, "stroke": a})
                product = p_digit[:, d] * p_stroke[:, list(model.classes_[1]).index(a)]
                for ranker, order in (
                    ("energy", np.argsort(energy)),
                    ("proba", np.argsort(-product)),
                ):
                    per_query[ranker].append(ranking_metrics(order, relevant, pool_digit))
        for ranker, results in per_query.items():
            mean = {k: float(np.mean([r[k] for r in results])) for k in results[0]}
            rows.append({"experts": kind, "ranking": ranker, "seed": seed, **mean})
    test = (pool[:n_real], pool_digit[:n_real], pool_stroke[:n_real].astype(str))
    state = {"models": models, "X": X, "Y": Y, "split": split, "test": test, "medians": medians}
    return rows, state


# ----------------------------------------------------------------------------- 3. sampling


def run_sampling(seed: int, epochs: int, state: dict, n_per_query: int = 32):
    """Rates judged by CE nets and, as a check that cannot be fooled by gradients, by a 5-NN
    digit classifier on pixels and by the stroke rule itself (ink against the digit's median)."""
    model, X, Y = state["models"]["jem"], state["X"], state["Y"]
    scaler, medians = state["split"]["scaler"], state["medians"]
    judges = {
        "digit": NGEBMClassifier(beta=0.0, max_epochs=epochs, random_state=seed + 500),
        "stroke": NGEBMClassifier(beta=0.0, max_epochs=epochs, random_state=seed + 501),
    }
    judges["digit"].fit(X, Y[:, 0].astype(int))
    judges["stroke"].fit(X, Y[:, 1].astype(str))
    knn = KNeighborsClassifier(5).fit(X, Y[:, 0].astype(int))

    def judged(x, d, a):
        ink = np.clip(scaler.inverse_transform(x), 0, 1).sum(axis=1)
        ce_digit, ce_stroke = judges["digit"].predict(x) == d, judges["stroke"].predict(x) == a
        nn_digit, rule_stroke = knn.predict(x) == d, (ink > medians[d]) == (a == "thick")
        return [ce_digit, ce_stroke, ce_digit & ce_stroke,
                nn_digit, rule_stroke, nn_digit & rule_stroke]  # fmt: skip

    conditions = {
        "start (0 steps)": lambda d, a: ({"digit": d, "stroke": a}, 0),
        "digit expert alone": lambda d, a: ({"digit": d}, 100),
        "stroke expert alone": lambda d, a: ({"stroke": a}, 100),
        "composed": lambda d, a: ({"digit": d, "stroke": a}, 100),
    }
    rates = {name: [] for name in conditions}
    figure = {}
    for q, (d, a) in enumerate((d, a) for d in KNOWN_DIGITS for a in STROKES):
        x0 = model.sample(n_per_query, start="marginal", n_steps=0, random_state=1000 * seed + q)
        for name, make in conditions.items():
            query, n_steps = make(d, a)
            x = model.sample(n_per_query, query, n_steps=n_steps, start=x0, random_state=q)
            rates[name].append([float(r.mean()) for r in judged(x, d, a)])
            figure[(d, a, name)] = x[:3]
    keys = ("digit", "stroke", "both", "knn_digit", "rule_stroke", "knn_and_rule")
    rows = [
        {"condition": name, "seed": seed, **dict(zip(keys, np.mean(r, axis=0), strict=True))}
        for name, r in rates.items()
    ]
    X_test, digits_test, strokes_test = state["test"]
    accuracy = {
        "digit": float(judges["digit"].score(X_test, digits_test)),
        "stroke": float(judges["stroke"].score(X_test, strokes_test)),
        "knn_digit": float(knn.score(X_test, digits_test)),
    }
    return rows, figure, accuracy


def plot_samples(figure: dict, scaler, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["start (0 steps)", "digit expert alone", "stroke expert alone", "composed"]
    queries = [(d, a) for d in (0, 2, 3, 5) for a in STROKES]
    fig, axes = plt.subplots(len(queries), 3 * len(names), figsize=(12, 1.1 * len(queries) + 0.6))
    for row, (d, a) in enumerate(queries):
        for col, name in enumerate(names):
            images = scaler.inverse_transform(figure[(d, a, name)])
            for i, image in enumerate(images):
                ax = axes[row, 3 * col + i]
                ax.imshow(image.reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
                if row == 0 and i == 1:
                    ax.set_title(name, fontsize=9)
        axes[row, 0].set_ylabel(f"{d}, {a}", fontsize=9)
    fig.suptitle("Samples of 'digit d and stroke a' (seed 0): same starts, 100 SGLD steps")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- report


def medians(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    out = []
    for group, members in groups.items():
        numeric = [k for k, v in members[0].items() if isinstance(v, float) and k not in keys]
        summary = {**dict(zip(keys, group, strict=True)), "n_seeds": len(members)}
        for k in numeric:
            values = [m[k] for m in members]
            summary[k] = float(np.median(values))
            summary[f"{k}_range"] = (float(np.min(values)), float(np.max(values)))
        out.append(summary)
    return out


def table(rows: list[dict], columns: list[str], spread: bool = False) -> str:
    """A markdown table; with ``spread``, each number as ``median [min, max]`` over seeds."""

    def cell(row, c):
        if not isinstance(row[c], float):
            return str(row[c])
        low, high = row[f"{c}_range"]
        return (
            f"{row[c]:.3f} [{low:.3f}, {high:.3f}]" if spread and low != high else f"{row[c]:.3f}"
        )

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [cell(row, c) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(results: dict) -> None:
    """Print the markdown tables of ``results`` (as written to results.json)."""
    if "ensemble" in results:
        summary = medians(results["ensemble"], ("model",))
        print("\n## Deep ensembles (median [min, max] over seeds)\n")
        print(table(summary, ["model", "fits", "fit_seconds", "accuracy", "ece", "nll"], True))
        ood_sets = ("uniform", "inverted", "permuted")
        rows = [
            {"model / score": f"{row['model']} / {method}",
             **{name: row[f"auroc_{method}_{name}"] for name in ood_sets},
             **{f"{name}_range": row[f"auroc_{method}_{name}_range"] for name in ood_sets}}
            for method in SCORES for row in summary
        ]  # fmt: skip
        print("\nOOD AUROC\n")
        print(table(rows, ["model / score", *ood_sets], spread=True))
    if "scoring" in results:
        print("\n## Compositional scoring: 'digit d and stroke a' (median [min, max] over seeds)\n")
        print(table(medians(results["scoring"], ("experts", "ranking")),
                    ["experts", "ranking", "p_at_10", "p_at_r", "digits_8_9_at_r", "noise_at_r"],
                    spread=True))  # fmt: skip
    if "sampling" in results:
        print("\n## Compositional sampling with two JEM experts (median [min, max] over seeds)\n")
        columns = ["digit", "stroke", "both", "knn_digit", "rule_stroke", "knn_and_rule"]
        print(table(medians(results["sampling"], ("condition",)), ["condition", *columns], True))
        judges = results["judges"]
        for judge in judges[0]:
            accuracy = [round(j[judge], 3) for j in judges]
            print(f"judge {judge}: test accuracy (digits 0-7) per seed {accuracy}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "ensemble", "scoring", "sampling"),
                        default="all")  # fmt: skip
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="1 seed, 3 epochs")
    parser.add_argument("--out", type=Path, default=Path("docs/composition"))
    parser.add_argument("--report", type=Path, help="only print the tables of a results.json")
    args = parser.parse_args(argv)
    if args.report is not None:
        report(json.loads(args.report.read_text()))
        return
    seeds, epochs = (1, 3) if args.quick else (args.seeds, args.epochs)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {"seeds": seeds, "epochs": epochs}
    start = time.perf_counter()
    if args.part in ("all", "ensemble"):
        results["ensemble"] = [row for seed in range(seeds) for row in run_ensemble(seed, epochs)]
    if args.part in ("all", "scoring", "sampling"):
        scoring, sampling, judges = [], [], []
        for seed in range(seeds):
            rows, state = run_scoring(seed, epochs)
            scoring += rows
            if args.part in ("all", "sampling"):
                rows, figure, judge = run_sampling(seed, epochs, state)
                sampling += rows
                judges.append(judge)
                if seed == 0:
                    plot_samples(figure, state["split"]["scaler"], args.out / "samples.png")
        results["scoring"] = scoring
        if sampling:
            results["sampling"], results["judges"] = sampling, judges
    results["seconds"] = time.perf_counter() - start
    report(results)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"\n{results['seconds']:.0f} s; results in {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
