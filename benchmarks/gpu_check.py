"""The prepared GPU check (issues #18, #30): one command, under 8 minutes on one GPU, one JSON.

    python benchmarks/gpu_check.py --out gpu_check.json             # on a CUDA machine
    python benchmarks/gpu_check.py --dry-run --out /tmp/dry.json    # CPU, tiny sizes, < 1 min

Stages, in order (each is timed and recorded; a failing stage is reported, not fatal, and the
JSON is rewritten after every stage, so a run cut short keeps what it measured):

1. ``cuda_tests``: the tests marked ``@pytest.mark.cuda`` (``python -m pytest -m cuda`` on the
   test files that use the marker); without CUDA they skip.
2. ``wrn_epoch``: timed training epochs of WRN-28-10 (no batch-norm) on CIFAR-shaped random
   data through the public estimators (:func:`ebmclassifier.experiments.bench.
   bench_estimators`): cross-entropy (``NGEBMClassifier(beta=0)``), NG-EBM with the exact and
   the finite-difference gradient norm, and JEM (20 SGLD steps, uniform buffer start as in the
   paper), each in float32, in ``precision="bfloat16"`` and in bfloat16 with
   ``compile=True`` (not the exact mode: no double backward through compiled code). Each
   runs ``epochs`` epochs of ``steps`` batches of 64; the first epoch is the warm-up (it
   compiles), the median of the others gives the time per step, extrapolated to one CIFAR-10
   epoch (50,000 images, 782 steps) and to the papers' 150 epochs in GPU hours; the
   library's own step on the same network and batch gives the wrapper's overhead
   (``wrapper_ratio``). Peak GPU memory per row too.
3. ``pickle_roundtrip``: the GPU-trained NG-EBM and JEM estimators (float32 and bfloat16) are
   pickled, then loaded in a subprocess that sees no GPU (``CUDA_VISIBLE_DEVICES=""``), which
   predicts the same probe images; the JSON gets the largest difference to the GPU's
   probabilities.
4. ``main_job``: the wall time of the main job, ``python -m ebmclassifier compare --device
   cuda`` (the digits and MNIST-1D comparison), against the 147 s it takes on two CPU cores;
   it gets the budget that is left and is recorded as unfinished when it runs out.
5. ``bench``: ``python -m ebmclassifier bench --device cuda --gpu-only`` (the step benchmark's
   GPU section: float32, bf16 autocast and ``torch.compile`` variants on the default
   networks, and the estimators on the default ConvNet; its JSON is embedded whole).

The other commands run as ``sys.executable -m ...`` subprocesses and the training goes through
public estimators only, so this script depends on no private name of the library.
``--dry-run`` takes the same path on the CPU with a WRN-10-1 on 3x8x8 images, 2 steps of 8
images per epoch, ``aot_eager`` compilation (no C++ build), a one-epoch digits comparison and
``bench --quick``; ``tests/test_gpu_check.py`` runs it (without the bench stage, whose
command ``tests/experiments/test_bench.py`` runs). ``--skip`` leaves stages out, e.g. to rerun
one stage when the device time is short.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import ebmclassifier
from ebmclassifier.experiments.bench import bench_estimators

ROOT = Path(__file__).resolve().parents[1]
#: The main job on two CPU cores (README: 2 min 27 s on the quiet two-core machine).
MAIN_JOB_CPU_SECONDS = 147.0
#: The estimators whose pickles a CPU-only process must read (float32 and bfloat16).
PICKLED = ("ngebm_fd_float32", "jem_float32", "ngebm_fd_bf16", "jem_bf16")

#: Sizes of the real run (``device="cuda"``) and of the dry run on the CPU.
SIZES = {
    "gpu": {
        "device": "cuda",
        "depth": 28,
        "widen_factor": 10,
        "image": (3, 32, 32),
        "batch_size": 64,
        "steps": 30,
        "epochs": 3,
        "sgld_steps": 20,
        "buffer_size": 10_000,
        "compile": {},
        "bench": ["--device", "cuda", "--gpu-only"],
        "main_job": ["--device", "cuda"],
    },
    "dry": {
        "device": "cpu",
        "depth": 10,
        "widen_factor": 1,
        "image": (3, 8, 8),
        "batch_size": 8,
        "steps": 2,
        "epochs": 2,
        "sgld_steps": 2,
        "buffer_size": 64,
        "compile": {"backend": "aot_eager"},
        "bench": ["--quick", "--device", "cpu"],
        "main_job": [
            "--device",
            "cpu",
            "--data",
            "digits",
            "--models",
            "ce",
            "--seeds",
            "1",
            "--epochs",
            "1",
            "--max-train",
            "200",
            "--max-test",
            "100",
            "--n-attack",
            "20",
            "--detectors",
            "none",
        ],
    },
}


# ------------------------------------------------------------------------- helpers


def _run(command: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run a command from the repository root; its return code and the tail of its output."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, stdout = None, f"timed out after {timeout:.0f} s\n" + _text(exc.stdout)
        stderr = _text(exc.stderr)
    return {
        "command": " ".join(command),
        "returncode": returncode,
        "seconds": time.perf_counter() - started,
        "stdout_tail": stdout[-3000:],
        "stderr_tail": stderr[-3000:],
    }


# pytest's last line: "6 skipped, 199 deselected in 0.59s", framed by "=" where a section precedes
_PYTEST_SUMMARY = re.compile(
    r"\b\d+ (passed|failed|skipped|deselected|errors?|xfailed|xpassed|warnings?)\b.* in [\d.]+s"
)


def pytest_summary(stdout: str) -> str:
    """The counts line of a pytest run's standard output, or its last line where it has none.

    Read from stdout alone: a plugin's warning (pytest-benchmark's, on a machine that has it)
    goes to stderr after the counts, and was once taken for them.
    """
    lines = [line.strip(" =") for line in stdout.splitlines() if line.strip()]
    counts = [line for line in lines if _PYTEST_SUMMARY.search(line)]
    return counts[-1] if counts else (lines[-1] if lines else "")


def _text(stream) -> str:
    return stream.decode(errors="replace") if isinstance(stream, bytes) else (stream or "")


def _meta(dry_run: bool, device: torch.device) -> dict:
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "dry_run": dry_run,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
        "ebmclassifier": ebmclassifier.__version__,
        "python": platform.python_version(),
        "machine": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    return meta


# -------------------------------------------------------------------------- stages


def stage_cuda_tests(sizes: dict, timeout: float) -> dict:
    """``pytest -m cuda`` on the test files that use the marker."""
    files = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "pytest.mark.cuda" in path.read_text()
    )
    command = [sys.executable, "-m", "pytest", "-q", "-n0", "-rs", "-p", "no:cacheprovider"]
    result = _run(command + ["-m", "cuda", *files], timeout)
    result["files"] = files
    result["summary"] = pytest_summary(result["stdout_tail"])
    result["ok"] = result["returncode"] == 0
    return result


def stage_wrn_epoch(sizes: dict, device: torch.device, keep: dict) -> dict:
    """Time each method in each precision; keep the fitted estimators for the pickle stage."""
    result = bench_estimators(
        device,
        network=f"wrn-{sizes['depth']}-{sizes['widen_factor']}",
        image=sizes["image"],
        batch_size=sizes["batch_size"],
        steps=sizes["steps"],
        epochs=sizes["epochs"],
        sgld_steps=sizes["sgld_steps"],
        buffer_size=sizes["buffer_size"],
        compile_kwargs=sizes["compile"],
        keep=keep,
    )
    # the exact mode is refused with compile=True: that refusal is the expected answer
    failed = [name for name in result["errors"] if name != "ngebm_exact_bf16_compile"]
    result["ok"] = not failed
    return result


def stage_pickle_roundtrip(sizes: dict, keep: dict, timeout: float) -> dict:
    """Pickle the trained estimators here; predict with them in a process that sees no GPU."""
    keep = {name: keep[name] for name in PICKLED if name in keep}
    if not keep:
        return {"ok": False, "error": "no trained estimator to pickle (see wrn_epoch)"}
    with tempfile.TemporaryDirectory() as folder:
        probe = np.random.default_rng(1).standard_normal((16, *sizes["image"]), dtype=np.float32)
        np.save(Path(folder) / "probe.npy", probe)
        for name, estimator in keep.items():
            with open(Path(folder) / f"{name}.pkl", "wb") as f:
                pickle.dump(estimator, f)
            np.save(Path(folder) / f"{name}_proba.npy", estimator.predict_proba(probe))
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        command = [sys.executable, str(Path(__file__).resolve()), "--unpickle-check", folder]
        result = _run(command, timeout, env=env)
        answer = Path(folder) / "result.json"  # a file: warnings may end its output
        if answer.exists():
            result.update(json.loads(answer.read_text()))
        else:
            result["error"] = "the CPU-only process wrote no result"
    diffs = result.get("max_abs_diff", {})
    result["ok"] = (
        result["returncode"] == 0
        and result.get("cuda_available") is False
        and set(diffs) == set(keep)
        and all(d < 1e-3 for d in diffs.values())
    )
    return result


def stage_main_job(sizes: dict, timeout: float) -> dict:
    """``python -m ebmclassifier compare`` on the device: its wall time, or how long it ran."""
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "ebmclassifier", "compare", *sizes["main_job"]]
        result = _run(command + ["--out", folder, "--no-progress"], timeout)
    result["finished"] = result["returncode"] == 0
    result["wall_s"] = result["seconds"]  # the command's; "seconds" becomes the stage's
    result["cpu_two_cores_seconds"] = MAIN_JOB_CPU_SECONDS
    if result["finished"]:
        result["ratio_to_two_cpu_cores"] = result["wall_s"] / MAIN_JOB_CPU_SECONDS
    result["ok"] = result["finished"]
    return result


def unpickle_check(folder: str) -> int:
    """The CPU-only side: load each pickle, predict the probe, write ``result.json``."""
    probe = np.load(Path(folder) / "probe.npy")
    out = {"cuda_available": torch.cuda.is_available(), "device_": {}, "max_abs_diff": {}}
    for path in sorted(Path(folder).glob("*.pkl")):
        with open(path, "rb") as f:
            estimator = pickle.load(f)
        proba = estimator.predict_proba(probe)
        expected = np.load(Path(folder) / f"{path.stem}_proba.npy")
        out["device_"][path.stem] = str(estimator.device_)
        out["max_abs_diff"][path.stem] = float(np.abs(proba - expected).max())
    (Path(folder) / "result.json").write_text(json.dumps(out))
    return 0


def stage_bench(sizes: dict, timeout: float) -> dict:
    """``python -m ebmclassifier bench`` with its JSON embedded."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.json"
        command = [sys.executable, "-m", "ebmclassifier", "bench", *sizes["bench"]]
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")  # the bench's documented setting
        result = _run(command + ["--json", str(path)], timeout, env=env)
        result["result"] = json.loads(path.read_text()) if path.exists() else None
    result["ok"] = result["returncode"] == 0 and result["result"] is not None
    return result


# ---------------------------------------------------------------------------- main


def _summary(report: dict) -> str:
    lines = [f"GPU check {report['meta']['date']} on {report['meta']['gpu'] or 'CPU (dry run)'}"]
    for name, stage in report["stages"].items():
        status = "ok" if stage.get("ok") else "FAILED"
        lines.append(f"  {name:18s} {status:6s} {stage.get('seconds', 0.0):7.1f} s")
    wrn = report["stages"].get("wrn_epoch", {})
    for name, row in wrn.get("rows", {}).items():
        wrapper = f"  fit/own step {row['wrapper_ratio']:.2f}" if "wrapper_ratio" in row else ""
        lines.append(
            f"  {wrn['network']} {name:22s} {row['step_ms']:8.1f} ms/step "
            f"{row.get('ratio_to_ce_float32', float('nan')):5.2f}x CE  "
            f"{row['cifar10_epoch_s']:7.1f} s/CIFAR epoch  "
            f"{row['gpu_hours_150_epochs']:6.2f} GPU h/150 epochs{wrapper}"
        )
    job = report["stages"].get("main_job", {})
    if job:
        state = "finished" if job.get("finished") else "not finished"
        lines.append(
            f"  main job {state} in {job.get('seconds', 0.0):.0f} s (two CPU cores: 147 s)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check.json", help="the JSON to write")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, < 1 min")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds for all stages")
    parser.add_argument(
        "--skip", default="", help="comma-separated stages to leave out, e.g. 'bench'"
    )
    parser.add_argument("--unpickle-check", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.unpickle_check:
        return unpickle_check(args.unpickle_check)
    sizes = SIZES["dry" if args.dry_run else "gpu"]
    if not args.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device: run it on a GPU machine, or pass --dry-run")
    device = torch.device(sizes["device"])
    started = time.perf_counter()
    report = {"meta": _meta(args.dry_run, device), "stages": {}}
    keep: dict = {}
    stages = [
        ("cuda_tests", lambda left: stage_cuda_tests(sizes, min(left, 240))),
        ("wrn_epoch", lambda left: stage_wrn_epoch(sizes, device, keep)),
        ("pickle_roundtrip", lambda left: stage_pickle_roundtrip(sizes, keep, min(left, 120))),
        ("main_job", lambda left: stage_main_job(sizes, max(left - 30, 30))),
        ("bench", lambda left: stage_bench(sizes, max(left, 60))),
    ]
    skip = {name for name in args.skip.split(",") if name}
    if skip - {name for name, _ in stages}:
        parser.error(f"--skip takes stages among {[name for name, _ in stages]}; got {args.skip!r}")
    for name, stage in stages:
        if name in skip:
            continue
        stage_start = time.perf_counter()
        try:
            result = stage(args.budget - (stage_start - started))
        except Exception as exc:  # record it and go on: the other stages still measure
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        result["seconds"] = time.perf_counter() - stage_start
        report["stages"][name] = result
        report["total_seconds"] = time.perf_counter() - started
        Path(args.out).write_text(json.dumps(report, indent=2))
    print(_summary(report))
    print(f"wrote {args.out}")
    return 0 if all(stage.get("ok") for stage in report["stages"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
