"""The benchmark command: it runs, and its JSON has the promised shape (no timing thresholds)."""

import json
import math
import sys

import numpy as np
import pytest
import torch

from ebmclassifier.cli import main
from ebmclassifier.experiments import _steps, bench

METHODS = {"ce", "ngebm_exact", "ngebm_fd", "jem"}


@pytest.fixture
def one_thread():
    # The bench measures; two threads on a loaded 2-core machine only measure the contention.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _positive_finite(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


def _check_compared(entry: dict, with_ratio: bool) -> None:
    for clock in ("wall", "cpu"):
        summary = entry[clock]
        assert summary["p10_ms"] <= summary["median_ms"] <= summary["p90_ms"]
        if with_ratio:
            assert _positive_finite(summary["ratio"])
            assert summary["ratio_p10"] <= summary["ratio"] <= summary["ratio_p90"]
    assert entry["clock"] in ("wall", "cpu")
    assert _positive_finite(entry["median_ms"]) or entry["median_ms"] == 0.0
    if with_ratio:
        assert _positive_finite(entry["ratio"])


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    """``bench --quick``'s JSON: the command run end to end, so its tests are slow."""
    path = tmp_path_factory.mktemp("bench") / "out.json"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["bench", "--quick", "--json", str(path), "--device", "cpu"]) == 0
    finally:
        torch.set_num_threads(before)
    return json.loads(path.read_text())


@pytest.mark.slow
def test_quick_bench_json_structure(quick_result):
    assert set(quick_result) == {"meta", "steps", "fit", "inference", "memory", "gpu"}
    assert quick_result["meta"]["quick"] is True
    assert quick_result["gpu"] is None  # --device cpu
    assert set(quick_result["steps"]) == {"mlp_64", "conv_1x8x8"}
    for row in quick_result["steps"].values():
        assert set(row) == METHODS | {
            "jem_vs_ngebm_fd",
            "fd_floor",
            "phases",
            "errors",
            "fd_cosine_to_exact",
        }
        for method in METHODS:
            _check_compared(row[method], with_ratio=True)
        # Each round's ratio of CE to itself is exactly 1.
        assert row["ce"]["ratio"] == 1.0
        assert _positive_finite(row["jem_vs_ngebm_fd"]["ratio"])
        assert _positive_finite(row["fd_floor"])
        assert set(row["phases"]) == {
            "phase_forward",
            "phase_forward_input_backward",
            "phase_forward_param_backward",
        }
        assert row["errors"] == {}


@pytest.mark.slow
def test_quick_bench_fit_matches_hand_loop(quick_result):
    assert set(quick_result["fit"]) == {"exact", "finite_difference"}
    for row in quick_result["fit"].values():
        _check_compared(row["fit"], with_ratio=True)
        _check_compared(row["hand_loop"], with_ratio=True)
        # The hand-written loop does the same work: it ends on the same weights.
        assert row["max_abs_weight_difference"] < 1e-5


def test_bench_fit_ends_on_the_hand_loops_weights(one_thread):
    # the fit section alone, on 64 digits: the inner loop's check of what the command reports
    result = bench.bench_fit(rounds=1, warmup=0, epochs=1, n_samples=64)
    assert set(result) == {"exact", "finite_difference"}
    for row in result.values():
        _check_compared(row["fit"], with_ratio=True)
        _check_compared(row["hand_loop"], with_ratio=True)
        assert row["max_abs_weight_difference"] < 1e-5
        assert row["n_samples"] == 64 and row["epochs"] == 1


@pytest.mark.slow
def test_quick_bench_inference(quick_result):
    for row in quick_result["inference"].values():
        _check_compared(row["estimator"], with_ratio=True)
        assert _positive_finite(row["estimator_samples_per_s"])
        assert _positive_finite(row["plain_samples_per_s"])


@pytest.mark.slow
def test_quick_bench_inference_memory(quick_result):
    memory = quick_result["memory"]
    assert set(memory) == {"predict_proba/float32", "approx_mass/float32"}
    for name, row in memory.items():
        assert row["n_rows"] == 100_000 and row["input_mb"] == 100_000 * 64 * 4 / 1e6
        # probabilities of the 10 digits, or one score per row, in float32
        width = 10 if name.startswith("predict_proba") else 1
        assert row["output_mb"] == 100_000 * width * 4 / 1e6
        assert row["traced_ratio_to_input"] >= 0 and _positive_finite(row["seconds"])
        if sys.platform.startswith("linux"):
            assert row["exact"] and row["ratio_to_input"] >= 0


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact peaks need /proc")
def test_inference_memory_stays_near_the_input(quick_result):
    # Issue #15: predicting or scoring many rows holds peak memory near the input's size.
    # 0.5x of the input leaves room for the output (0.16x for 10 classes) and one batch.
    for name, row in quick_result["memory"].items():
        assert row["ratio_to_input"] < 0.5, (name, row["ratio_to_input"])


def test_peak_memory_above_measures_a_known_allocation():
    from ebmclassifier.experiments._memory import peak_memory_above

    size = 40_000_000  # bytes, written so that every page is resident
    result, memory = peak_memory_above(lambda: np.full(size // 8, 1.0))
    assert result.nbytes == size
    # tracemalloc sees numpy's allocation exactly (plus a little bookkeeping)
    assert size <= memory["traced_bytes"] < size + 1_000_000
    if memory["exact"]:  # Linux: the resident peak rose by the array, give or take a few pages
        assert abs(memory["resident_bytes"] - size) < 4_000_000, memory


@pytest.mark.slow
def test_format_bench_mentions_every_setting(quick_result):
    text = bench.format_bench(quick_result)
    for setting in quick_result["steps"]:
        assert setting in text
    assert "GPU: no CUDA device" in text
    assert "Inference memory, 100,000 rows x 64" in text and "approx_mass/float32" in text


def test_variants_of_the_gpu_section_run_on_cpu(one_thread):
    # bf16 autocast also exists on the CPU, so the GPU section's step code is exercised here.
    out = _steps.bench_steps(
        torch.device("cpu"), rounds=1, warmup=0, settings={"mlp_64": (64,)}, variants=True
    )
    row = out["mlp_64"]
    assert row["errors"] == {}
    assert {"ce_bf16", "ngebm_exact_bf16", "ngebm_fd_bf16", "jem_bf16"} <= set(row)
    assert _positive_finite(row["ngebm_fd_bf16"]["ratio"])
    # float32 finite differences agree with the exact gradient (as in test_energy.py).
    assert row["fd_cosine_to_exact"]["float32"]["0.01"] > 0.99
    assert set(row["fd_cosine_to_exact"]["bf16"]) == {"0.01", "0.05", "0.1"}


def test_a_failing_variant_is_reported_not_fatal():
    def broken():
        raise RuntimeError("no compiler")

    working, errors = _steps._guarded({"ok": lambda: None, "compile": broken})
    assert set(working) == {"ok"}
    assert errors == {"compile": "RuntimeError: no compiler"}


def test_variants_refuse_double_backward_through_compiled_code():
    model = torch.nn.Linear(3, 2)
    x, y = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
    with pytest.raises(ValueError, match="double backward"):
        _steps.make_step_tasks(model, x, y, compile_model=True)
    # bf16 autocast goes through it (the exact mode in bfloat16)
    _steps.make_step_tasks(model, x, y, autocast_dtype=torch.bfloat16)["ngebm_exact"]()


def test_every_step_task_trains_its_own_copy(one_thread):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.SiLU(), torch.nn.Linear(8, 2))
    before = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(16, 3), torch.randint(2, (16,))
    for step in _steps.make_step_tasks(model, x, y).values():
        step()
    # The caller's model is never trained: each method gets a copy with the same start.
    for p, q in zip(model.parameters(), before, strict=True):
        torch.testing.assert_close(p, q)


def test_summarize_ratio_is_the_median_of_per_round_ratios():
    out = bench.summarize([3.0, 1.0, 10.0], reference=[1.0, 1.0, 1.0])
    assert out["ratio"] == 3.0
    assert out["median_ms"] == 3000.0


@pytest.mark.parametrize(
    "method, params",
    [("ce", {"beta": 0.0}), ("ngebm_exact", {}), ("ngebm_fd", {"grad_norm": "finite_difference"})],
)
def test_step_tasks_time_the_objective_the_estimator_trains(method, params):
    from ebmclassifier import NGEBMClassifier
    from ebmclassifier.losses import fd_step_size

    x, y = _steps._batch_for((64,), torch.device("cpu"))
    est = NGEBMClassifier(max_epochs=0, random_state=0, device="cpu", **params)
    net = est.fit(x.numpy(), y.numpy()).module_
    timed = _steps._objectives(net, net, x, y, fd_step_size(x))[method]()
    trained, _ = est.compute_loss(x, y, training=True)
    torch.testing.assert_close(timed, trained)


def test_estimator_section_and_gpu_only(one_thread):
    section = bench.bench_estimators(
        torch.device("cpu"), image=(1, 8, 8), batch_size=8, steps=2, epochs=2,
        variants=("float32", "bf16"), methods=("ce", "ngebm_fd"),
    )  # fmt: skip
    assert set(section["rows"]) == {"ce_float32", "ngebm_fd_float32", "ce_bf16", "ngebm_fd_bf16"}
    row = section["rows"]["ngebm_fd_bf16"]
    assert row["wrapper_ratio"] == pytest.approx(row["step_ms"] / row["own_step_ms"])
    assert row["ratio_to_ce"] == pytest.approx(
        row["step_ms"] / section["rows"]["ce_bf16"]["step_ms"]
    )
    text = "\n".join(bench._estimator_table(section))
    assert "ngebm_fd_bf16" in text and "fit / own step" in text
    result = bench.run_bench(device="cpu", gpu_only=True)
    assert result["steps"] is None and result["gpu"] is None
    # the GPU line closes the tables; a busy machine's note may follow it
    lines = bench.format_bench(result).splitlines()
    assert "GPU: no CUDA device, section skipped." in lines
    assert all(
        line.startswith("The machine was busy")
        for line in lines[lines.index("GPU: no CUDA device, section skipped.") + 1 :]
    )
