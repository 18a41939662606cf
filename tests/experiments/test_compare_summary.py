"""What compare prints: the README's summary table (medians, one column per data set) and the
verdicts that matter, in a screen's worth of lines."""

import copy

import numpy as np
import pytest

from ebmclassifier.experiments._overview import overview_table, terminal_text
from ebmclassifier.experiments._tables import summarise
from ebmclassifier.experiments.report import write_compare_report


def _median(results, model, get):
    return f"{np.median([get(r) for r in results['runs'] if r['model'] == model]):.3f}"


def _worst(results, model, score, sets):
    """The model's score's AUROC on its worst set, medians over seeds, by hand."""
    return min(
        float(_median(results, model, lambda r, s=s: r["ood"][score][s]["auroc"])) for s in sets
    )


def test_the_summary_table_holds_each_rows_medians(results):
    results, _ = results
    rows = overview_table([results], [summarise(results)]).splitlines()
    assert rows[:2] == ["|  | digits |", "|---|---|"]
    cells = {row.split(" | ")[0][2:]: row.split(" | ")[1][:-2] for row in rows[2:]}
    ece = " / ".join(_median(results, m, lambda r: r["ece"]) for m in ("ce", "ce_ts", "ngebm"))
    accuracy = " / ".join(_median(results, m, lambda r: r["accuracy"]) for m in ("ce", "ngebm"))
    sets = ["uniform", "inverted", "permuted"]
    # each by its headline score, fixed in advance: ce's energy; the stand-in ngebm has no
    # ood_method, so the first of its scores, energy (never the best on these sets)
    far = f"{_worst(results, 'ce', 'energy', sets):.3f} / "
    far += f"{_worst(results, 'ngebm', 'energy', sets):.3f}"
    robust = " / ".join(
        _median(results, m, lambda r: r["robust_accuracy"][2]) for m in ("ce", "ngebm")
    )  # eps 0.05, the middle non-zero radius of 0.02, 0.05, 0.1
    cost = f"{np.median([r['cost_vs_ce'] for r in results['runs'] if r['model'] == 'ngebm']):.2f}"
    assert cells == {
        "ECE: ce / ce_ts / ngebm": ece,
        "accuracy: ce / ngebm": accuracy,
        "far-OOD AUROC, worst of 3 sets: ce energy / ngebm": far,
        "accuracy under L-inf PGD, eps 0.05: ce / ngebm": robust,
        "training cost per epoch, x ce: ngebm": cost,
    }


def test_one_column_per_data_set_and_the_held_out_classes_row(results):
    results, _ = results
    near = copy.deepcopy(results)
    near["data"]["name"] = "near"
    # the permuted set plays the held-out classes: a near-OOD set of its own row
    sets = near["data"]["ood_sets"]
    near["data"]["ood_sets"] = {("held-out classes" if k == "permuted" else k): v
                                for k, v in sets.items()}  # fmt: skip
    for run in near["runs"]:
        for by_set in run["ood"].values():
            by_set["held-out classes"] = by_set.pop("permuted")
    table = overview_table([results, near], [summarise(results), summarise(near)])
    rows = table.splitlines()
    assert rows[0] == "|  | digits | near |"
    far = next(row for row in rows if row.startswith("| far-OOD AUROC"))
    assert far.startswith("| far-OOD AUROC, worst set: ce energy / ngebm |")  # 3 sets and 2
    held = next(row for row in rows if row.startswith("| held-out classes AUROC"))
    assert held.split(" | ")[1] == "n/a / n/a"  # digits has no held-out classes
    permuted = _median(near, "ce", lambda r: r["ood"]["energy"]["held-out classes"]["auroc"])
    assert held.split(" | ")[2].startswith(permuted)


@pytest.mark.slow
def test_the_main_jobs_printout_reads_in_a_screen(results, tmp_path):
    results, _ = results
    other = copy.deepcopy(results)
    other["data"]["name"] = "other"
    printed = write_compare_report([results, other], tmp_path)
    text = terminal_text([results, other], printed, tmp_path)
    lines = text.splitlines()
    # the table (header, rule, 5 rows), each data set's name and key verdicts, the report
    assert len(lines) <= 30
    assert lines[0].startswith("Summary: medians over 2 seeds")
    assert overview_table([results, other], [p["summary"] for p in printed]) in text
    for tabs in printed:
        assert all(f"- {line}" in lines for line in tabs["key_verdicts"])
        assert len(tabs["key_verdicts"]) < len(tabs["verdicts"])
    assert lines[-1] == (
        f"Report: {tmp_path / 'report.md'} (every table, the verdicts per OOD set and "
        f"detector, {sum(len(p['figures']) for p in printed)} figures with captions) and "
        "results.json."
    )


@pytest.mark.parametrize("models", [("ce",), ("ngebm",)])
def test_the_table_keeps_only_the_rows_the_run_has(results, models):
    results, _ = results
    only = copy.deepcopy(results)
    only["models"] = {m: d for m, d in only["models"].items() if m in models}
    only["calibrated"] = {}
    only["runs"] = [r for r in only["runs"] if r["model"] in models]
    table = overview_table([only], [summarise(only)])
    assert ("training cost per epoch" in table) == (models == ("ngebm",))
    assert f"| ECE: {models[0]} |" in table


@pytest.mark.slow
def test_a_busy_machine_and_a_wide_cost_spread_are_said_in_the_terminal(results, tmp_path):
    results, _ = results
    busy = copy.deepcopy(results)
    cpus = 2
    busy["machine_load"] = {"start": {"cpus": cpus, "load": 3.0},
                            "end": {"cpus": cpus, "load": 4.0}, "threads": 1}  # fmt: skip
    for run in busy["runs"]:
        if run["model"] == "ngebm":
            run["cost_vs_ce"] = {0: 1.0, 1: 3.0}[run["seed"]]
    printed = write_compare_report([busy], tmp_path)
    text = terminal_text([busy], printed, tmp_path)
    assert "| training cost per epoch, x ce: ngebm | 2.00 (unreliable) |" in text
    # the mark is explained under the table that shows it, in the terminal and in report.md
    assert "\n\n(unreliable): a timing so marked spread widely" in text
    report = (tmp_path / "report.md").read_text()
    assert report.count("(unreliable): a timing so marked spread widely") == 2  # both tables
    assert "\n- The machine was busy: load average 3.0 at the start and 4.0 at the end" in text
    quiet = copy.deepcopy(results)
    quiet["machine_load"] = {"start": {"cpus": cpus, "load": 0.0},
                             "end": {"cpus": cpus, "load": 1.0}, "threads": 1}  # fmt: skip
    for run in quiet["runs"]:  # timings that agree over the seeds
        run["cost_vs_ce"], run["seconds_per_epoch"] = 1.0, 0.01
    text = terminal_text([quiet], write_compare_report([quiet], tmp_path / "quiet"), tmp_path)
    assert "The machine was busy" not in text
    assert "(unreliable)" not in text  # no mark, no note


def test_every_summary_is_the_median_of_three_seeds_not_their_mean(results):
    """Two seeds agree on median and mean; a third, far-off seed tells them apart."""
    results = copy.deepcopy(results[0])
    third = [copy.deepcopy(r) for r in results["runs"] if r["seed"] == 0]
    for run in third:
        run["seed"] = 2
        run["ece"] = 0.9  # far above the two others: the median stays between them
        for by_set in run["ood"].values():
            for metrics in by_set.values():
                metrics["auroc"] = 0.0
    results["runs"] += third
    summary = summarise(results)
    for model, stats in summary.items():
        eces = sorted(r["ece"] for r in results["runs"] if r["model"] == model)
        assert stats["scalars"]["ece"]["n"] == 3
        assert stats["scalars"]["ece"]["median"] == pytest.approx(eces[1])
        assert stats["scalars"]["ece"]["max"] == 0.9
        for score, by_set in stats["ood"].items():
            for name, metrics in by_set.items():
                aurocs = sorted(
                    r["ood"][score][name]["auroc"]
                    for r in results["runs"]
                    if r["model"] == model and score in r["ood"]
                )
                assert metrics["auroc"]["median"] == pytest.approx(np.median(aurocs))
