"""``compare``'s report: report.md, results.json and the figures of one or several data sets.

:func:`write_compare_report` is what the command calls; :func:`write_report` writes one data
set's report. Every number is summarised over seeds as ``median [min, max]``, with the tables
of :mod:`~ebmclassifier.experiments._tables`, the verdicts of
:mod:`~ebmclassifier.experiments._verdicts` and the figures of
:mod:`~ebmclassifier.experiments._report_figures`; the two files are written by
:func:`~ebmclassifier.experiments._report_files.save_report`, the one writer of every
command's report.
"""

from __future__ import annotations

import platform
from pathlib import Path

from ._overview import overview_table
from ._report_figures import figures_section, write_figures
from ._report_files import jsonable, save_report
from ._tables import _NORMS, _fmt, summarise, tables
from ._verdicts import NOISE_MARGIN, key_verdicts, verdicts

__all__ = ["write_compare_report", "write_report"]


def _network_text(network) -> str:
    if network in (None, "default"):
        return "the estimators' default for the data's shape"
    if network == "mlp":
        return "`mlp` (the estimators' MLP, on the flattened samples)"
    return f"`{network}` (WideResNet without batch-norm)"


def _lr_text(lr) -> str:
    return "the estimators' default" if lr is None else f"{lr:g}"


def write_report(results: dict, out, command: str = "") -> dict:
    """Write report.md, results.json and the figures into ``out``.

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison`.
    out : str or path-like
        The folder; created if needed. Each file is replaced at once, whole or not at all.
    command : str, default=""
        The command line that reproduces the run, quoted in the report.

    Returns
    -------
    printed : dict
        The tables (see :func:`tables`) and ``overview`` (the README's summary table, this
        data set's column), ``summary`` (:func:`summarise`), ``verdicts`` (every one of
        report.md), ``key_verdicts`` (those the command prints) and ``figures`` (``{file
        name: caption}``).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from ebmclassifier.experiments.compare import CompareConfig, run_comparison, write_report
    >>> config = CompareConfig(
    ...     models=("ce",), seeds=1, max_epochs=1, max_train=300, max_test=100, n_attack=20,
    ...     progress=False,
    ... )
    >>> with tempfile.TemporaryDirectory() as out:
    ...     printed = write_report(run_comparison(config), out)
    ...     files = sorted(path.name for path in Path(out).iterdir())
    >>> files
    ['ood_ce.png', 'reliability_ce.png', 'report.md', 'results.json', 'risk_coverage.png',
     'robustness.png']
    >>> print(printed["main"].splitlines()[0])
    | model | accuracy | ECE | NLL | AURC | acc. L-inf PGD eps=0.05 | s / epoch | cost x CE |
    """
    return _render_report(results, Path(out), command)[0]


def _render_report(results: dict, out: Path, command: str) -> tuple[dict, str, dict]:
    """:func:`write_report`'s work; also returns the text of report.md and the JSON payload
    of results.json, as written, for :func:`write_compare_report` to combine."""
    out.mkdir(parents=True, exist_ok=True)  # for the figures, drawn before the report
    summary = summarise(results)
    printed = {
        **tables(results, summary),
        "overview": overview_table([results], [summary]),
        "summary": summary,
        "verdicts": verdicts(results, summary),
        "key_verdicts": key_verdicts(results, summary),
        "figures": write_figures(results, summary, out),
    }
    env = _environment()
    text = "\n".join(_report_lines(results, printed, env, command))
    payload = jsonable({**results, "summary": summary, "environment": env, "command": command})
    save_report(out, text, payload)
    return printed, text, payload


def _report_lines(results, printed, env, command, overview: bool = True) -> list[str]:
    """report.md of one data set; ``overview``: with its summary table (left out of a section
    of the combined report, whose summary table holds every data set)."""
    return [
        *_header(results, env, command),
        *_summary_section(results, printed["summary"], printed, overview),
        *_detail_sections(results, printed),
    ]


def write_compare_report(all_results: list, out, command: str = "") -> list[dict]:
    """:func:`write_report` for the results of one or several data sets.

    One data set: exactly :func:`write_report` into ``out``. Several: each data set's full
    report in ``out/<data set>/``, and in ``out`` a ``report.md`` with the summary table of
    every data set (one column each) and one section per data set (its figures linked from
    its folder), and a ``results.json`` holding every data set's results under
    ``"datasets"``, keyed by name.

    Parameters
    ----------
    all_results : list of dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison`, one per data set.
    out : str or path-like
    command : str, default=""

    Returns
    -------
    printed : list of dict
        :func:`write_report`'s return value per data set.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from ebmclassifier.experiments.compare import CompareConfig, run_comparison
    >>> config = CompareConfig(
    ...     models=("ce",), seeds=1, max_epochs=1, max_train=300, max_test=100, n_attack=20,
    ...     progress=False,
    ... )
    >>> results = run_comparison(config)
    >>> with tempfile.TemporaryDirectory() as out:
    ...     printed = write_compare_report([results], out)  # one data set: its report alone
    ...     (Path(out) / "report.md").is_file(), len(printed)
    (True, 1)
    """
    out = Path(out)
    if len(all_results) == 1:
        return [write_report(all_results[0], out, command)]
    names = [results["data"]["name"] for results in all_results]
    results_of = dict(zip(names, all_results, strict=True))
    written = [
        _render_report(r, out / name, command) for r, name in zip(all_results, names, strict=True)
    ]
    md = [
        f"# ebmclassifier compare: {', '.join(names)}",
        "",
        f"Command: `{command}`" if command else "",
        "",
        "One section per data set, each also in its own folder with its figures and "
        "results.json: " + ", ".join(f"[{name}]({name}/report.md)" for name in names) + ".",
        "",
        "## Summary of every data set",
        "",
        overview_table(all_results, [printed["summary"] for printed, _, _ in written]),
        "",
        _OVERVIEW_NOTE,
        "",
    ]
    for name, (printed, _, payload) in zip(names, written, strict=True):
        # each data set's report one heading level down, its figures linked from its folder
        text = _report_lines(results_of[name], printed, payload["environment"], "", False)
        section = [f"#{line}" if line.startswith("#") else line for line in text]
        md += [
            line.replace("](", f"]({name}/") if line.startswith("![") else line for line in section
        ]
    datasets = {name: payload for name, (_, _, payload) in zip(names, written, strict=True)}
    payload = {"command": command, "environment": _environment(), "datasets": datasets}
    save_report(out, "\n".join(md), payload)
    return [printed for printed, _, _ in written]


def _environment() -> dict:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }


def _protocol_text(protocol: dict | None, applied: dict | None, standardized: bool) -> list[str]:
    """The papers' settings under ``--protocol paper`` (nothing otherwise); ``applied`` is the
    augmentation in the units the models trained in."""
    if not protocol:
        return []
    augmentation = ", ".join(f"{k}={v}" for k, v in protocol["augmentation"].items())
    if applied is not None:
        inputs = "standardized inputs" if standardized else "raw [0, 1] inputs"
        augmentation += (
            f" (the scripts' noise, on images in [-1, 1]; applied as "
            f"noise_std={applied['noise_std']:g} on the {inputs})"
        )
    return [
        f"Protocol `paper` ({protocol['dataset']}): network {protocol['network']}, "
        f"{protocol['max_epochs']} epochs, Adam lr {protocol['lr']} (betas "
        f"{tuple(protocol['betas'])}), linear warm-up over {protocol['warmup_iters']} steps, "
        f"x{protocol['lr_decay']} at epochs {protocol['lr_milestones']}, batches of "
        f"{protocol['batch_size']} (the last incomplete batch of an epoch dropped), at most "
        f"{protocol['n_valid']} training samples held out for calibration, augmentation "
        f"{augmentation}, NG-EBM {protocol['ngebm']}, "
        f"JEM {protocol['jem']}; options given "
        "on the command line override the network, epochs, lr and batch size. Sources: "
        f"{protocol['sources']['ngebm_code']}, {protocol['sources']['jem_code']}.",
        "",
    ]


def _header(results: dict, env: dict, command: str) -> list[str]:
    """The title, the command, the data, the seeds and environment, the models."""
    data, cfg = results["data"], results["config"]
    return [
        f"# ebmclassifier compare: {data['name']}",
        "",
        *([f"Command: `{command}`", ""] if command else []),
        f"Data: {data['n_train']} training, {data['n_calibration']} held-out calibration and "
        f"{data['n_test']} test samples of shape {tuple(data['input_shape'])}, input range "
        f"[{data['input_range'][0]:.3g}, {data['input_range'][1]:.3g}]. "
        + _ood_sets_text(data)
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
        *_protocol_text(
            results.get("protocol"), results.get("augmentation"), data.get("standardized", False)
        ),
        "Models:",
        "",
        *[f"- `{m}`: {d}" for m, d in results["models"].items()],
        *[
            f"- `<model> / {name}`: post-hoc detector `{detector}` on that model's penultimate "
            "features (every trained model with a network of its own), fitted on its "
            "training data only"
            for name, detector in results.get("detectors", {}).items()
        ],
        *[f"- `{m}`: not available, {why}" for m, why in results.get("unavailable", {}).items()],
        *[f"- `{m}`: skipped, {why}" for m, why in results["skipped"].items()],
        *[
            f"- `{f['model']}` failed at seed {f['seed']}: `{f['error']}`"
            for f in results.get("failures", [])
        ],
        "",
    ]


def _ood_sets_text(data: dict) -> str:
    """The OOD sets in a sentence, and where each comes from."""
    text = "OOD sets: " + ", ".join(f"{k} ({v})" for k, v in data["ood_sets"].items()) + "; "
    sources = ["from the test split unless named after another data set or a file"]
    if data.get("held_out_classes"):
        labels = ", ".join(str(c) for c in data["held_out_classes"])
        sources.append(
            f"`held-out classes` are the test samples of the labels {labels}, which no model "
            "saw in training (every model trains on the other labels only)"
        )
    sources += [f"`{k}` is read from `{v}`" for k, v in data.get("ood_files", {}).items()]
    return text + "; ".join(sources) + ". "


#: How to read the summary table, under it in report.md.
_OVERVIEW_NOTE = (
    "Medians over seeds, `a / b / c` in the order of the row's label. The OOD rows (AUROC, "
    "higher is better) judge each contender on its worst set, with one score fixed before any "
    "data was seen, never chosen on these sets: `ce`'s energy (the standard energy-based "
    "detector), the first of `--detectors` on `ce`'s features (named in its cell) and every "
    "other model's estimator default `ood_method` (NG-EBM: `approx_mass`; JEM: `energy`; "
    "named in the verdicts, drawn in the OOD histograms). The OOD tables below give every "
    "score; the best of them on each set is a choice made on the data it is judged by, so "
    "it flatters. Temperature-scaled models rescale their base model's max softmax and are "
    f"left out. A verdict calls a gap clear only when the seed ranges are apart by at least "
    f"{NOISE_MARGIN:g}, more than a figure moves between machines; ranges whose ends are "
    "closer than that are within noise. A seed far from the others is named with its value."
)


def _summary_section(results: dict, summary: dict, printed: dict, overview: bool) -> list[str]:
    """The summary table, the main table, the temperatures, the divergences, the verdicts."""
    return [
        "## Summary",
        "",
        *([printed["overview"], "", _OVERVIEW_NOTE, ""] if overview else []),
        "Every model's accuracy, calibration, AURC, robustness and cost, median [min, max] "
        "over seeds:",
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
        f"{results['config']['n_bins']} equal-width bins). AURC: area under the risk-coverage "
        "curve when the model answers its most confident test samples first (confidence max "
        "softmax; lower is better). `cost x CE`: seconds per epoch over "
        "the CE model's in the same seed."
        + (
            " `ce_ts` trains nothing more than `ce` and keeps its predictions, so its accuracy "
            "and robustness are those of `ce`."
            if "ce_ts" in summary
            else ""
        )
        + (
            " An ensemble (`*_ens`) trains five nets: its seconds per epoch are the sum of one "
            "epoch of each, and it has no single network for PGD to attack."
            if any(m.endswith("_ens") for m in summary)
            else ""
        ),
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
        "## OOD detection: FPR at 95% TPR (lower is better; the papers' convention)",
        "",
        printed["ood_fpr95"],
        "",
        "AUPR-in and AUPR-out are in results.json. Scores: `energy` E(x) = -logsumexp f(x), "
        "`max_softmax` -max p(y|x), `approx_mass` ||dE/dx||"
        + "".join(
            f"; `<model> / {name}`: post-hoc `{detector}` on the model's penultimate features"
            for name, detector in results.get("detectors", {}).items()
        )
        + "."
        + " FPR95 is the OOD papers' (Liang et al. 2018, Liu et al. 2020): in-distribution is "
        "the positive class, and it is the share of OOD samples kept when the threshold keeps "
        "95% of the test samples (`fpr95`, = `fpr95_in` in results.json; pytorch-ood's "
        "FPR95TPR, OOD positive, is `fpr95_out`). It picks its threshold on the test samples "
        "themselves, as the papers do.",
        "",
        f"## OOD decisions at a threshold calibrated to keep {results['ood_tpr']:.0%} of "
        "held-out in-distribution data",
        "",
        printed["ood_decisions"],
        "",
        "The threshold `metrics.threshold_at_tpr(scores, tpr="
        f"{results['ood_tpr']:g})` (the rule of `calibrate_ood` and of FPR95's threshold) of "
        "each score on the held-out calibration split (the one `ce_ts` is fitted on), then "
        "`predict_ood`'s rule (flagged when the score is above the threshold). "
        "`FPR: test flagged`: share of the in-distribution test samples flagged "
        f"(false-positive rate; {1 - results['ood_tpr']:.0%} expected). `missed: <set>`: "
        "share of that OOD set not flagged (miss rate; lower is better): what a deployed "
        "threshold, chosen without seeing any OOD data, lets through.",
        "",
        "## Selective classification: AURC per score (lower is better)",
        "",
        printed["aurc"],
        "",
        "The model's predictions on the test split, answered in order of confidence "
        "`-score_ood` (for `max_softmax` that is max p(y|x)): the error rate among the answered "
        "samples averaged over every coverage (Geifman et al. 2019). A score that ranks the "
        "misclassified test samples last gives a low AURC.",
        "",
        f"## Robustness: accuracy under {_NORMS[cfg['norm']]} PGD ({cfg['attack_steps']} steps, "
        f"random start) on {data['n_attacked']} test samples",
        "",
        printed["robust"],
        "",
        *figures_section(printed["figures"]),
    ]
