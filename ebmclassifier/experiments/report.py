"""Tables, verdicts, report.md, results.json and figures from the runs of ``compare``.

Every number is summarised over seeds as ``median [min, max]``.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np

from ..plotting import plot_accuracy_vs_epsilon, plot_ood_histograms, plot_reliability_diagram

__all__ = ["write_report"]

SCALARS = ("accuracy", "ece", "mce", "classwise_ece", "nll", "seconds_per_epoch", "cost_vs_ce")
_NORMS = {"linf": "L-inf", "l2": "L2"}
LOWER_IS_BETTER = {"ece", "mce", "classwise_ece", "nll", "seconds_per_epoch", "cost_vs_ce"}


def _stat(values) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "median": float(np.median(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "n": len(values),
    }


def summarise(results: dict) -> dict:
    """Summaries over seeds of every measurement.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.compare.run_comparison`.

    Returns
    -------
    summary : dict
        ``{model: {"scalars": {metric: stat}, "ood": {score: {set: {metric: stat}}},
        "robust_accuracy": [stat per epsilon] or None}}`` with ``stat`` a dict of ``median``,
        ``min``, ``max`` and ``n`` (seeds).
    """
    summary = {}
    for model in results["models"]:
        runs = [r for r in results["runs"] if r["model"] == model]
        if not runs:
            continue  # every fit failed; listed under "failures"
        scalars = {
            k: _stat([r.get(k) for r in runs]) for k in SCALARS + ("temperature", "divergences")
        }
        ood = {
            score: {
                name: {m: _stat([r["ood"][score][name][m] for r in runs]) for m in metrics}
                for name, metrics in sets.items()
            }
            for score, sets in runs[0]["ood"].items()
        }
        robust = None
        if runs[0]["robust_accuracy"] is not None:
            per_eps = np.array([r["robust_accuracy"] for r in runs])
            robust = [_stat(per_eps[:, j]) for j in range(per_eps.shape[1])]
        summary[model] = {
            "scalars": {k: v for k, v in scalars.items() if v is not None},
            "ood": ood,
            "robust_accuracy": robust,
        }
    return summary


def _fmt(stat, digits: int = 3) -> str:
    if stat is None:
        return "n/a"
    if stat["n"] == 1 or stat["min"] == stat["max"]:
        return f"{stat['median']:.{digits}f}"
    return f"{stat['median']:.{digits}f} [{stat['min']:.{digits}f}, {stat['max']:.{digits}f}]"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _attack_index(epsilons) -> int:
    """The epsilon the main table reports: the middle one of the non-zero radii."""
    nonzero = [i for i, e in enumerate(epsilons) if e > 0]
    return nonzero[len(nonzero) // 2] if nonzero else 0


def tables(results: dict, summary: dict) -> dict[str, str]:
    """The report's markdown tables.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.compare.run_comparison`.
    summary : dict
        From :func:`summarise`.

    Returns
    -------
    tables : dict of str to str
        ``main``, ``ood_auroc``, ``ood_fpr95`` and ``robust``.
    """
    epsilons = results["epsilons"]
    j = _attack_index(epsilons)
    main_rows = []
    for model, s in summary.items():
        sc = s["scalars"]
        robust = s["robust_accuracy"][j] if s["robust_accuracy"] else None
        main_rows.append(
            [model, _fmt(sc.get("accuracy")), _fmt(sc.get("ece")), _fmt(sc.get("nll")),
             _fmt(robust) if robust else "= base model", _fmt(sc.get("seconds_per_epoch"), 4),
             _fmt(sc.get("cost_vs_ce"), 2)]
        )  # fmt: skip
    norm = _NORMS[results["config"]["norm"]]
    main = _table(
        ["model", "accuracy", "ECE", "NLL", f"acc. {norm} PGD eps={epsilons[j]:.3g}",
         "s / epoch", "cost x CE"],
        main_rows,
    )  # fmt: skip
    sets = list(results["data"]["ood_sets"])
    ood_tables = {}
    for metric in ("auroc", "fpr95"):
        rows = [
            [f"{model} / {score}"] + [_fmt(by_set[name][metric]) for name in sets]
            for model, s in summary.items()
            for score, by_set in s["ood"].items()
        ]
        ood_tables[metric] = _table(["model / score"] + sets, rows)
    robust_rows = [
        [model] + [_fmt(st) for st in s["robust_accuracy"]]
        for model, s in summary.items()
        if s["robust_accuracy"]
    ]
    robust = _table(["model"] + [f"eps={e:.3g}" for e in epsilons], robust_rows)
    return {
        "main": main,
        "ood_auroc": ood_tables["auroc"],
        "ood_fpr95": ood_tables["fpr95"],
        "robust": robust,
    }


def _compare_best(candidates: dict, lower: bool) -> str | None:
    """'A (x) beats B (y), clearly / within the seed spread' for {label: stat}."""
    ranked = sorted(
        ((label, st) for label, st in candidates.items() if st is not None),
        key=lambda item: item[1]["median"],
        reverse=not lower,
    )
    if len(ranked) < 2:
        return None
    (best, b), (second, s) = ranked[0], ranked[1]
    if f"{b['median']:.3f}" == f"{s['median']:.3f}":
        return f"{best} and {second} tied ({b['median']:.3f})"
    if b["n"] == 1 or s["n"] == 1:
        how = "one seed, so no spread to judge the gap by"
    elif (b["max"] < s["min"]) if lower else (b["min"] > s["max"]):
        how = "clearly: no seed overlap"
    else:
        how = "within the seed spread"
    return f"{best} ({b['median']:.3f}) ahead of {second} ({s['median']:.3f}), {how}"


def verdicts(results: dict, summary: dict) -> list[str]:
    """Plain sentences: who is best on each criterion, and how the energy methods compare
    with the CE model's energy score, the standard energy-based OOD detector.

    A gap is called clear only when the seed ranges do not overlap.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.compare.run_comparison`.
    summary : dict
        From :func:`summarise`.

    Returns
    -------
    lines : list of str
    """
    lines = []
    # a recalibrated model keeps its base model's predictions: no rival for accuracy
    same_predictions = {m for m, spec in results.get("calibrated", {}).items() if spec}
    for metric, label in (("accuracy", "Accuracy"), ("ece", "ECE"), ("nll", "NLL")):
        c = {
            m: s["scalars"].get(metric)
            for m, s in summary.items()
            if metric != "accuracy" or m not in same_predictions
        }
        text = _compare_best(c, metric in LOWER_IS_BETTER)
        if text:
            lines.append(f"{label}: {text}.")
    j = _attack_index(results["epsilons"])
    c = {m: s["robust_accuracy"][j] for m, s in summary.items() if s["robust_accuracy"]}
    text = _compare_best(c, lower=False)
    if text:
        lines.append(f"Robust accuracy at eps={results['epsilons'][j]:.3g}: {text}.")
    for name in results["data"]["ood_sets"]:
        # each model by its best score on this set, so the sentence compares models
        best = {
            m: max(s["ood"].items(), key=lambda kv: kv[1][name]["auroc"]["median"])
            for m, s in summary.items()
        }
        c = {f"{m} / {score}": by_set[name]["auroc"] for m, (score, by_set) in best.items()}
        text = _compare_best(c, lower=False)
        if not text:
            continue
        line = f"OOD AUROC on {name} (each model's best score): {text}."
        baseline = summary.get("ce", {}).get("ood", {}).get("energy", {}).get(name)
        if baseline is not None:
            base = baseline["auroc"]["median"]
            line += f" The CE model's energy score, the usual detector, reaches {base:.3f}"
            for m in ("ngebm", "jem"):
                if m in best:
                    score, by_set = best[m]
                    own = by_set[name]["auroc"]["median"]
                    line += f"; {m} / {score} {own:.3f} ({own - base:+.3f})"
            line += "."
        lines.append(line)
    return lines


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def write_figures(results: dict, out: Path) -> list[str]:
    """Write the figures: reliability, OOD histograms and robustness, one PNG each per model.

    ``reliability_<model>.png`` and ``ood_<model>.png`` show the first seed;
    ``robustness_<model>.png`` every seed (median and [min, max] band), and
    ``robustness.png`` all models' curves together.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.compare.run_comparison` (the first seed's runs carry the
        arrays the figures need).
    out : pathlib.Path
        An existing folder.

    Returns
    -------
    names : list of str
        The files written.
    """
    written = []
    for run in results["runs"]:
        fig_data = run.get("_figure_data")
        if fig_data is None:
            continue
        model = run["model"]
        path = out / f"reliability_{model}.png"
        plot_reliability_diagram(
            fig_data["y_test"], fig_data["proba"], results["config"]["n_bins"],
            classes=fig_data["classes"], title=f"{model}, seed 0", path=path,
        )  # fmt: skip
        written.append(path.name)
        path = out / f"ood_{model}.png"
        plot_ood_histograms(
            fig_data["scores_in"], fig_data["scores_out"], score_name=fig_data["score"],
            title=f"{model}, seed 0", path=path,
        )  # fmt: skip
        written.append(path.name)
    curves = {}
    for model in results["models"]:
        runs = [r["robust_accuracy"] for r in results["runs"] if r["model"] == model]
        if runs and runs[0] is not None:
            curves[model] = runs
    attack = f"PGD ({results['config']['attack_steps']} steps) on {results['data']['name']}"
    # one figure per model (its seeds: median and [min, max] band), then all of them together
    panels = {f"robustness_{model}.png": {model: runs} for model, runs in curves.items()}
    if len(curves) > 1:
        panels["robustness.png"] = curves
    for name, panel in panels.items():
        title = f"{next(iter(panel))}, {attack}" if len(panel) == 1 else attack
        plot_accuracy_vs_epsilon(
            results["epsilons"], panel, norm=results["config"]["norm"], title=title,
            path=out / name,
        )  # fmt: skip
        written.append(name)
    return written


def _network_text(network) -> str:
    if network in (None, "default"):
        return "the estimators' default for the data's shape"
    return f"`{network}` (WideResNet without batch-norm)"


def _lr_text(lr) -> str:
    return "the estimators' default" if lr is None else f"{lr:g}"


def write_report(results: dict, out, command: str = "") -> dict:
    """Write report.md, results.json and the figures into ``out``.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.compare.run_comparison`.
    out : str or path-like
        The folder; created if needed.
    command : str, default=""
        The command line that reproduces the run, quoted in the report.

    Returns
    -------
    printed : dict
        The tables (see :func:`tables`), ``verdicts`` and ``figures`` (file names).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from ebmclassifier.compare import CompareConfig, run_comparison, write_report
    >>> config = CompareConfig(
    ...     models=("ce",), seeds=1, max_epochs=1, max_train=300, max_test=100, n_attack=20,
    ...     progress=False,
    ... )
    >>> with tempfile.TemporaryDirectory() as out:
    ...     printed = write_report(run_comparison(config), out)
    ...     files = sorted(path.name for path in Path(out).iterdir())
    >>> files
    ['ood_ce.png', 'reliability_ce.png', 'report.md', 'results.json', 'robustness_ce.png']
    >>> print(printed["main"].splitlines()[0])
    | model | accuracy | ECE | NLL | acc. L-inf PGD eps=0.05 | s / epoch | cost x CE |
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(results)
    printed = {
        **tables(results, summary),
        "verdicts": verdicts(results, summary),
        "figures": write_figures(results, out),
    }
    env = _environment()
    md = [
        *_header(results, env, command),
        *_summary_section(results, summary, printed),
        *_detail_sections(results, printed),
    ]
    (out / "report.md").write_text("\n".join(md))
    payload = {**results, "summary": summary, "environment": env, "command": command}
    (out / "results.json").write_text(json.dumps(_jsonable(payload), indent=2))
    return printed


def _environment() -> dict:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }


def _header(results: dict, env: dict, command: str) -> list[str]:
    """The title, the command, the data, the seeds and environment, the models."""
    data, cfg = results["data"], results["config"]
    return [
        f"# ebmclassifier compare: {data['name']}",
        "",
        f"Command: `{command}`" if command else "",
        "",
        f"Data: {data['n_train']} training, {data['n_calibration']} held-out calibration and "
        f"{data['n_test']} test samples of shape {tuple(data['input_shape'])}, input range "
        f"[{data['input_range'][0]:.3g}, {data['input_range'][1]:.3g}]. OOD sets (from the test "
        f"split unless named after another data set): "
        + ", ".join(f"{k} ({v})" for k, v in data["ood_sets"].items())
        + ". "
        + (
            "Every model trains on standardized inputs (zero mean and unit variance over the "
            "training split, per feature for flat samples and per channel for images and "
            "sequences); the OOD sets go through the same transform and the attack radii are "
            "in the data's own units."
            if data.get("standardized")
            else "Every model trains on the inputs as given (`--no-standardize`)."
        ),
        "",
        f"Seeds: {cfg['seeds']}; {results['max_epochs']} epochs per model, learning rate "
        f"{_lr_text(results.get('lr'))}, network {_network_text(cfg.get('network'))}. Every "
        "number is the "
        "median [min, max] over seeds. Environment: "
        + ", ".join(f"{k} {v}" for k, v in env.items())
        + ".",
        "",
        "Models:",
        "",
        *[f"- `{m}`: {d}" for m, d in results["models"].items()],
        *[f"- `{m}`: skipped, {why}" for m, why in results["skipped"].items()],
        *[
            f"- `{f['model']}` failed at seed {f['seed']}: `{f['error']}`"
            for f in results.get("failures", [])
        ],
        "",
    ]


def _summary_section(results: dict, summary: dict, printed: dict) -> list[str]:
    """The main table, the temperatures, the divergences and the verdicts."""
    return [
        "## Summary",
        "",
        printed["main"],
        "",
        *[
            f"`{m}`: fitted temperature T = {_fmt(s['scalars']['temperature'], 2)} "
            "(T > 1 softens the confidences, T < 1 sharpens them)."
            for m, s in summary.items()
            if "temperature" in s["scalars"]
        ],
        *[
            f"`{m}`: no training divergence in any fit."
            if s["scalars"]["divergences"]["max"] == 0
            else f"`{m}` recovered from {_fmt(s['scalars']['divergences'], 0)} training "
            "divergences per fit."
            for m, s in summary.items()
            if "divergences" in s["scalars"]
        ],
        "",
        "Accuracy and calibration on the test split (ECE: top-label, "
        f"{results['config']['n_bins']} equal-width bins). `cost x CE`: seconds per epoch over "
        "the CE model's in the same seed. `ce_ts` trains nothing more than `ce` and keeps its "
        "predictions, so its accuracy and robustness are those of `ce`.",
        "",
        "## What the numbers say",
        "",
        *[f"- {line}" for line in printed["verdicts"]],
        "",
    ]


def _detail_sections(results: dict, printed: dict) -> list[str]:
    """The OOD tables, the robustness table and the figures."""
    data, cfg = results["data"], results["config"]
    return [
        "## OOD detection: AUROC (higher is better; OOD is the positive class)",
        "",
        printed["ood_auroc"],
        "",
        "## OOD detection: FPR at 95% TPR (lower is better)",
        "",
        printed["ood_fpr95"],
        "",
        "AUPR-in and AUPR-out are in results.json. Scores: `energy` E(x) = -logsumexp f(x), "
        "`max_softmax` -max p(y|x), `approx_mass` ||dE/dx||.",
        "",
        f"## Robustness: accuracy under {_NORMS[cfg['norm']]} PGD ({cfg['attack_steps']} steps, "
        f"random start) on {data['n_attacked']} test samples",
        "",
        printed["robust"],
        "",
        "## Figures",
        "",
        *[f"![{name}]({name})" for name in printed["figures"]],
        "",
    ]
