"""What compare says about its own timings: wide spreads marked, a busy machine named."""

import copy

import pytest

from ebmclassifier.experiments._tables import summarise, tables
from ebmclassifier.experiments._timing import busy_note, mark_spread
from ebmclassifier.experiments.compare import CompareConfig, run_comparison


@pytest.fixture(scope="module")
def results():
    config = CompareConfig(
        data="digits", models=("ce", "ngebm"), seeds=2, max_epochs=1, max_train=200,
        max_test=100, n_attack=10, detectors=(), progress=False,
    )  # fmt: skip
    return run_comparison(config, log=lambda message: None)


def main_table(results) -> str:
    return tables(results, summarise(results))["main"]


def test_the_run_records_the_load_at_its_start_and_end(results):
    load = results["machine_load"]
    assert set(load) == {"start", "end", "threads"}
    assert load["start"]["cpus"] >= 1 and load["threads"] >= 1


def test_a_busy_machine_is_named_under_the_summary_table(results):
    quiet, busy = copy.deepcopy(results), copy.deepcopy(results)
    cpus = results["machine_load"]["start"]["cpus"]
    for r, load in ((quiet, 0.0), (busy, cpus + 1.0)):
        r["machine_load"]["start"]["load"] = load
        r["machine_load"]["end"]["load"] = load + r["machine_load"]["threads"]
    assert "The machine was busy" not in main_table(quiet)
    note = main_table(busy).split("\n\n")[-1]
    assert note.startswith(f"The machine was busy: load average {cpus + 1.0:.1f} at the start")


def test_timings_whose_seeds_spread_widely_are_marked_unreliable(results):
    steady, noisy = copy.deepcopy(results), copy.deepcopy(results)
    for r, times in ((steady, (1.0, 1.2)), (noisy, (1.0, 2.0))):
        for run in r["runs"]:
            run["seconds_per_epoch"] = times[run["seed"]]
    steady_row = [line for line in main_table(steady).splitlines() if line.startswith("| ce ")]
    noisy_row = [line for line in main_table(noisy).splitlines() if line.startswith("| ce ")]
    assert "unreliable" not in steady_row[0]
    assert "1.5000 [1.0000, 2.0000] (unreliable)" in noisy_row[0]


def test_the_notes_rules():
    assert mark_spread("x", 1.0, 1.5) == "x" and mark_spread("x", 1.0, 1.51) == "x (unreliable)"
    assert mark_spread("x", None, 2.0) == "x" and mark_spread("x", 0.0, 2.0) == "x"
    quiet = {"cpus": 4, "load": 1.0}
    assert busy_note(quiet, {"cpus": 4, "load": 3.0}, threads=2) is None  # 1 + 2 <= 4
    assert busy_note(quiet, {"cpus": 4, "load": 5.0}, threads=2) is not None  # 3 others + 2
    assert busy_note({"cpus": 4, "load": None}, quiet, threads=1) is None  # no load average
