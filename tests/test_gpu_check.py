"""benchmarks/gpu_check.py's dry run: the GPU check's whole code path, on the CPU.

Deliberately not marked ``cuda``: it stays in the normal suite, so the script is known to run
before a GPU is lent to it.
"""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dry_run_writes_every_figure(gpu_check, tmp_path):
    out = tmp_path / "gpu_check.json"
    # The bench stage runs `python -m ebmclassifier bench --quick`, which
    # tests/experiments/test_bench.py runs.
    assert gpu_check.main(["--dry-run", "--skip", "bench", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    meta = report["meta"]
    assert meta["dry_run"] is True and meta["device"] == "cpu" and meta["torch"]
    assert list(report["stages"]) == ["cuda_tests", "wrn_epoch", "pickle_roundtrip"]
    assert all(stage["ok"] for stage in report["stages"].values())

    tests = report["stages"]["cuda_tests"]
    assert "tests/test_augment.py" in tests["files"] and "skipped" in tests["summary"]
    assert "tests/compose/test_concepts.py" in tests["files"]  # the folders' tests too

    wrn = report["stages"]["wrn_epoch"]
    assert wrn["network"] == "wrn-10-1" and wrn["image"] == [3, 8, 8]
    for name in ("ce", "ngebm_exact", "ngebm_fd", "jem"):
        row = wrn[name]
        assert len(row["epoch_seconds"]) == 2 and row["step_ms"] > 0
        # one CIFAR-10 epoch is 782 steps of 64; the dry run's steps are of 8 images
        assert row["cifar10_epoch_s"] == pytest.approx(row["step_ms"] * 6250 / 1e3)
        assert row["gpu_hours_150_epochs"] == pytest.approx(row["cifar10_epoch_s"] * 150 / 3600)
    assert wrn["jem"]["ratio_to_ce"] > 0

    roundtrip = report["stages"]["pickle_roundtrip"]
    assert roundtrip["cuda_available"] is False
    assert set(roundtrip["max_abs_diff"]) == {"ngebm_fd", "jem"}
    assert all(d < 1e-6 for d in roundtrip["max_abs_diff"].values())  # CPU to CPU here


def test_refuses_to_run_without_cuda_and_unknown_stages(gpu_check, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        gpu_check.main(["--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit):
        gpu_check.main(["--dry-run", "--skip", "benchmark", "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()
