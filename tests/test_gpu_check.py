"""benchmarks/gpu_check.py's dry run: the GPU check's whole code path, on the CPU.

Deliberately not marked ``cuda``: it stays in the normal suite, so the script is known to run
before a GPU is lent to it.
"""

import json

import pytest

from .scripts import load_script


@pytest.fixture(scope="module")
def gpu_check():
    return load_script("benchmarks/gpu_check.py")


@pytest.mark.slow
def test_dry_run_writes_every_figure(gpu_check, tmp_path):
    out = tmp_path / "gpu_check.json"
    # The bench stage runs `python -m ebmclassifier bench --quick`, which
    # tests/experiments/test_bench.py runs, and the main job `compare`, which tests/experiments
    # runs (its stage: the test below).
    assert gpu_check.main(["--dry-run", "--skip", "bench,main_job", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    meta = report["meta"]
    assert meta["dry_run"] is True and meta["device"] == "cpu" and meta["torch"]
    assert list(report["stages"]) == ["cuda_tests", "wrn_epoch", "pickle_roundtrip"]
    assert all(stage["ok"] for stage in report["stages"].values())

    tests = report["stages"]["cuda_tests"]
    assert "tests/test_augment.py" in tests["files"] and "skipped" in tests["summary"]
    assert "tests/compose/test_concepts.py" in tests["files"]  # the folders' tests too
    assert "tests/_utils/test_precision.py" in tests["files"]

    wrn = report["stages"]["wrn_epoch"]
    assert wrn["network"] == "wrn-10-1" and wrn["image"] == [3, 8, 8]
    methods = ("ce", "ngebm_exact", "ngebm_fd", "jem")
    expected = {f"{m}_{v}" for m in methods for v in ("float32", "bf16", "bf16_compile")}
    assert set(wrn["rows"]) == expected - {"ngebm_exact_bf16_compile"}
    assert "double backward" in wrn["errors"]["ngebm_exact_bf16_compile"]  # refused, named
    for name, row in wrn["rows"].items():
        assert len(row["epoch_seconds"]) == 2 and row["step_ms"] > 0
        # one CIFAR-10 epoch is 782 steps of 64; the dry run's steps are of 8 images
        assert row["cifar10_epoch_s"] == pytest.approx(row["step_ms"] * 6250 / 1e3)
        assert row["gpu_hours_150_epochs"] == pytest.approx(row["cifar10_epoch_s"] * 150 / 3600)
        assert row["ratio_to_ce_float32"] > 0 and row["ratio_to_ce"] > 0
        # the own step is timed where it trains the same objective (JEM's needs 20 SGLD steps)
        assert ("wrapper_ratio" in row) == (not name.startswith("jem"))
    assert wrn["rows"]["ce_bf16"]["ratio_to_ce"] == 1.0

    roundtrip = report["stages"]["pickle_roundtrip"]
    assert roundtrip["cuda_available"] is False
    assert set(roundtrip["max_abs_diff"]) == {
        "ngebm_fd_float32", "jem_float32", "ngebm_fd_bf16", "jem_bf16"
    }  # fmt: skip
    assert all(d < 1e-6 for d in roundtrip["max_abs_diff"].values())  # CPU to CPU here


@pytest.mark.slow
def test_main_job_stage_times_the_compare_command(gpu_check):
    sizes = {**gpu_check.SIZES["dry"], "main_job": ["--help"]}  # the command, not the job
    job = gpu_check.stage_main_job(sizes, timeout=120)
    assert job["finished"] and job["wall_s"] > 0 and "ebmclassifier compare" in job["command"]
    assert job["ratio_to_two_cpu_cores"] == pytest.approx(job["wall_s"] / 147.0)
    assert gpu_check.SIZES["gpu"]["main_job"] == ["--device", "cuda"]  # the main job itself
    timed_out = gpu_check.stage_main_job(sizes, timeout=0.001)
    assert not timed_out["finished"] and "ratio_to_two_cpu_cores" not in timed_out


def test_refuses_to_run_without_cuda_and_unknown_stages(gpu_check, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        gpu_check.main(["--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit):
        gpu_check.main(["--dry-run", "--skip", "benchmark", "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()


def test_the_pytest_summary_is_read_from_stdout_whatever_follows_it(gpu_check):
    stdout = (
        "ssssss                                      [100%]\n"
        "=========================== short test summary info ============================\n"
        "SKIPPED [6] tests/conftest.py:61: needs a CUDA device\n"
        "====== 6 skipped, 199 deselected, 2 warnings in 0.59s ======\n"
        "\n"
    )
    assert gpu_check.pytest_summary(stdout) == "6 skipped, 199 deselected, 2 warnings in 0.59s"
    # -q prints the counts without the frame, and a line after them is not taken for them
    quiet = "1 failed, 3 passed in 12.30s\n  warner(PytestBenchmarkWarning(text))\n"
    assert gpu_check.pytest_summary(quiet) == "1 failed, 3 passed in 12.30s"
    assert gpu_check.pytest_summary("ERROR: file or directory not found: x\n") == (
        "ERROR: file or directory not found: x"
    )
    assert gpu_check.pytest_summary("") == ""
