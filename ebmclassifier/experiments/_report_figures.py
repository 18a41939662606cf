"""The figures of ``compare``'s report, and how the report reads them.

:func:`write_figures` draws one data set's figures through :mod:`ebmclassifier.plotting`, each
model in its colour and marker; :func:`figures_section` lays them out in report.md, grouped by
kind, each kind with its reading guide (:data:`FIGURE_GUIDES`).
"""

from __future__ import annotations

from pathlib import Path

from ..plotting import (
    plot_accuracy_vs_epsilon,
    plot_ood_histograms,
    plot_reliability_diagram,
    plot_risk_coverage,
)
from ._seeds import far_text, median_seed, seed_values
from ._tables import _NORMS, _fmt, far_sets, headline_detector, headline_score

__all__ = ["FIGURE_GUIDES", "figures_section", "write_figures"]


#: Per kind of figure (the file name's start): the heading and how to read it, in report.md.
FIGURE_GUIDES = {
    "reliability": (
        "Reliability diagrams (the median seed)",
        "Top: the test samples binned by the model's confidence in its top label (equal-width "
        "bins); each bar is the accuracy in its bin, in the model's colour, and the dashed "
        "diagonal is perfect calibration. The hatched part between a bar's top and the bin's "
        "mean confidence is the bin's calibration gap: above the bar the model is "
        "over-confident there (it claims more than it gets right), inside the bar "
        "under-confident. The ECE in the title is the gaps' average weighted by the samples "
        "per bin, counted in the lower panel; a hatched grey bin holds no sample. Each model's "
        "diagram shows the seed whose ECE is the median over seeds, which its caption names.",
    ),
    "ood": (
        "OOD score histograms (the median seed)",
        "Each model's headline OOD score, the one the summary table and the verdicts judge it "
        "by, fixed before any data was seen (CE's energy, the standard baseline; for every "
        "other model its estimator's default `ood_method`), and the post-hoc detector the "
        "table pairs with CE (`ood_ce_<detector>.png`, the first of `--detectors`), on the "
        "test split (filled, in the model's colour) and on each OOD set (outlines, the same "
        "set drawn alike in every histogram). Higher means more OOD, so a good score puts "
        "every outline right of the filled histogram; an outline to its left is a set the "
        "score takes for more in-distribution than the test data (AUROC below 0.5). Each bar "
        "is a share of its set's samples; a positive score spanning decades is drawn on a log "
        "axis. Each histogram shows the seed whose AUROC on the model's worst far set is the "
        "median over seeds, the summary table's figure, and its caption names the seed, every "
        "seed's value and a seed far from the others; the legend's AUROCs are that seed's.",
    ),
    "risk": (
        "Selective classification (seed 0)",
        "Each model's selective risk (the error rate among the test samples it answers) "
        "against its coverage (the share it answers), answering its most confident samples "
        "first (confidence: max softmax). Lower is better; the right end is the plain error "
        "rate, and the area under each curve (AURC; lower is better) is in the legend, with "
        "as many decimals as it takes to tell the curves apart. The shaded left end, under "
        "10% coverage, rests on a handful of samples and is noisy: the y-axis spans the "
        "risks from 10% coverage up, so a spike there leaves the top edge instead of "
        "flattening the other curves.",
    ),
    "robustness": (
        "Robustness (every seed)",
        "Accuracy under PGD against the attack radius, every model with a network of its own "
        "(a temperature-scaled model has its base model's predictions): the line is the "
        "median over seeds, the band spans their [min, max]. Higher and flatter is more "
        "robust; radius 0 is the clean accuracy on the attacked samples.",
    ),
}


def write_figures(results: dict, summary: dict, out: Path) -> dict[str, str]:
    """Write the figures of one data set, in every one each model in its colour and marker
    (:func:`~ebmclassifier.plotting.model_style`).

    ``reliability_<model>.png`` (every model) shows the seed whose ECE is the median over seeds
    (:func:`~._seeds.median_seed`); ``ood_<model>.png`` (every model with OOD scores of its
    own, its headline score, :func:`~._tables.headline_score`) and ``ood_ce_<detector>.png``
    (the detector on ``ce``'s features that the summary table judges,
    :func:`~._tables.headline_detector`) the seed whose AUROC on the worst far set is the
    median, the summary table's figure; each caption names its seed and every seed's value.
    ``risk_coverage.png`` (every model's risk-coverage curve, confidence max softmax, its
    y-axis spanning the risks from 10% coverage up) shows the first seed;
    ``robustness.png`` every model's accuracy under attack over every seed (median and
    [min, max] band).

    Parameters
    ----------
    results : dict
        From :func:`~ebmclassifier.experiments.compare.run_comparison` (every run carries the
        arrays the figures need, ``_figure_data``).
    summary : dict
        Its :func:`~._tables.summarise`.
    out : pathlib.Path
        An existing folder.

    Returns
    -------
    captions : dict of str to str
        ``{file name: caption}`` in the order of the report; each kind's reading guide is
        :data:`FIGURE_GUIDES`.
    """
    drawn = {(r["model"], r["seed"]): r["_figure_data"] for r in results["runs"]}
    models = list(dict.fromkeys(model for model, _ in drawn))
    captions = {}
    for model in models:
        captions.update(_reliability(results, model, summary[model], drawn, out))
    captions.update(_ood_histograms(results, summary, drawn, out))
    if models:
        first = min(seed for _, seed in drawn)
        curves = {m: drawn[(m, first)] for m in models if (m, first) in drawn}
        fig_data = next(iter(curves.values()))
        plot_risk_coverage(
            fig_data["y_test"],
            {model: d["proba"] for model, d in curves.items()},
            classes=fig_data["classes"],
            title=f"{results['data']['name']}, seed {first}",
            path=out / "risk_coverage.png",
        )
        captions["risk_coverage.png"] = (
            f"every model, seed {first}; the AURC table gives each over seeds (lower is better)."
        )
    captions.update(_robustness(results, out))
    return captions


def _reliability(results: dict, model: str, model_summary: dict, drawn: dict, out: Path) -> dict:
    """``reliability_<model>.png`` of the seed whose ECE is the median, and its caption."""
    ece = model_summary["scalars"].get("ece")
    seed = median_seed(ece)
    if (model, seed) not in drawn:  # no ECE to choose by: the first seed
        seed = min(s for m, s in drawn if m == model)
    fig_data = drawn[(model, seed)]
    name = f"reliability_{model}.png"
    plot_reliability_diagram(
        fig_data["y_test"],
        fig_data["proba"],
        results["config"]["n_bins"],
        classes=fig_data["classes"],
        title=f"{model}, seed {seed}",
        model=model,
        path=out / name,
    )
    caption = f"`{model}`, seed {seed}"
    if ece is not None and ece["n"] > 1:
        caption += f", the seed of the median ECE over seeds, {_fmt(ece)} ({seed_values(ece)})"
    far = far_text("a seed far from the others", ece)
    return {name: caption + (f"; {far}" if far else "") + "."}


def _robustness(results: dict, out: Path) -> dict:
    """``robustness.png``: every attacked model over every seed, and its caption."""
    curves = {
        model: [r["robust_accuracy"] for r in results["runs"] if r["model"] == model]
        for model in results["models"]
        if any(r["model"] == model and r["robust_accuracy"] for r in results["runs"])
    }
    if not curves:
        return {}
    cfg = results["config"]
    plot_accuracy_vs_epsilon(
        results["epsilons"],
        curves,
        norm=cfg["norm"],
        title=f"PGD ({cfg['attack_steps']} steps) on {results['data']['name']}",
        path=out / "robustness.png",
    )
    return {
        "robustness.png": (
            f"{_NORMS[cfg['norm']]} PGD, {cfg['attack_steps']} steps with a random start, on "
            f"{results['data']['n_attacked']} test samples, radii in the data's own units; "
            "every seed."
        )
    }


def _ood_histograms(results: dict, summary: dict, drawn: dict, out: Path) -> dict:
    """``ood_<model>.png`` per model with OOD scores of its own (its headline score) and
    ``ood_ce_<detector>.png`` (the detector the summary table pairs with ``ce``), each of the
    seed whose worst-set AUROC is the median over seeds; captions."""
    sets = far_sets(results)
    chosen = {}  # file name -> (model, score, worst-set AUROC stat)
    for model in dict.fromkeys(model for model, _ in drawn):
        headline = headline_score(summary[model], sets)
        if model in results.get("calibrated", {}) or headline is None:
            continue  # a temperature-scaled model rescales its base model's max softmax
        chosen[f"ood_{model}.png"] = (model, *headline)
        detector = headline_detector(results, summary[model], sets) if model == "ce" else None
        if detector is not None:
            chosen[f"ood_ce_{detector[0]}.png"] = (model, *detector)
    captions = {}
    for name, (model, score, worst) in chosen.items():
        seed = median_seed(worst)
        if score not in drawn.get((model, seed), {}).get("scores", {}):
            continue  # the detector could not be fitted at that seed
        plot_ood_histograms(
            *drawn[(model, seed)]["scores"][score],
            score_name=score,
            title=f"{model} / {score}, seed {seed}",
            model=model,
            path=out / name,
        )
        captions[name] = _ood_caption(name, model, score, worst, seed, summary[model], sets)
    return captions


def _ood_caption(name, model, score, worst, seed, model_summary, sets) -> str:
    """Which seed the histogram shows and why, every seed's value, and any far seed."""
    what = "" if name == f"ood_{model}.png" else ", the detector the summary table pairs with it"
    by_set = model_summary["ood"][score]
    worst_set = next(s for s in sets if by_set[s]["auroc"] is worst)
    caption = f"`{model} / {score}`{what}, seed {seed}"
    if worst["n"] > 1:
        caption += (
            f", the seed of the median AUROC over seeds on its worst far-OOD set, {worst_set}: "
            f"{_fmt(worst)} ({seed_values(worst)})"
        )
    else:
        caption += f"; its AUROC on its worst far-OOD set, {worst_set}: {_fmt(worst)}"
    far = [far_text(f"on {s}", by_set[s]["auroc"], auroc=True) for s in sets]
    far = [text for text in far if text]
    return caption + (f"; seeds far from the others {'; '.join(far)}" if far else "") + "."


def figures_section(captions: dict) -> list[str]:
    """The figures, grouped by kind, each kind with how to read it, each figure its caption."""
    lines = [
        "## Figures",
        "",
        "Each model has one colour and marker in every figure (the legends of "
        "`risk_coverage.png` and `robustness.png` are the key).",
        "",
    ]
    for kind, (heading, guide) in FIGURE_GUIDES.items():
        names = [name for name in captions if name.startswith(kind)]
        if not names:
            continue
        lines += [f"### {heading}", "", guide, ""]
        for name in names:
            lines += [f"![{name}]({name})", "", f"*`{name}`*: {captions[name]}", ""]
    return lines
