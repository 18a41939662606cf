"""The command line: its own options, and every bad option or file as one ``error:`` line.

Issue #14, "The command line": each case it names has its test here. The commands themselves
are tested in test_compare / test_bench. A bad option or file must give exit status 2 and one
line on stderr before any training; a failed fit a non-zero exit naming the model, the seed
and the reason.
"""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ebmclassifier
from ebmclassifier import NGEBMClassifier, cli
from ebmclassifier.experiments import compare
from ebmclassifier.experiments._compare_options import COMMAND as COMPARE
from ebmclassifier.experiments.models import ModelSpec, default_models

# A fast run, when it gets that far: small splits, one epoch, few attacked samples.
QUICK = ["--max-train", "200", "--max-test", "60", "--n-attack", "10", "--epochs", "1"]


def _run(capsys, *argv):
    """``(exit status, stdout, stderr)`` of ``python -m ebmclassifier *argv``, in-process."""
    status = cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _one_error_line(err: str, command: str = "compare") -> str:
    """The message of the single ``error:`` line on stderr."""
    prefix = f"python -m ebmclassifier {command}: error: "
    assert err.count("\n") == 1 and err.startswith(prefix), err
    return err[len(prefix) : -1]


@pytest.fixture
def no_training(monkeypatch):
    """compare's models, except that building one fails the test: nothing may train."""

    def refuse(params):
        raise AssertionError("a model was built: the error came after training began")

    registry = {name: ModelSpec(name, spec.description, build=refuse, scores=spec.scores,
                                calibrates=spec.calibrates)
                for name, spec in default_models().items()}  # fmt: skip
    monkeypatch.setattr(compare, "default_models", lambda: registry)


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"ebmclassifier {ebmclassifier.__version__}\n"


# ------------------------------------------------------------------ option values


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("--lr", "-1", "argument --lr: expected a finite float > 0, got '-1'"),
        ("--lr", "0", "argument --lr: expected a finite float > 0, got '0'"),
        ("--lr", "inf", "argument --lr: expected a finite float > 0, got 'inf'"),
        ("--lr", "nan", "argument --lr: expected a finite float > 0, got 'nan'"),
        ("--batch-size", "0", "argument --batch-size: expected an int >= 1 or -1 (the whole "
         "training split), got '0'"),
        ("--batch-size", "2.5", "argument --batch-size: expected an int >= 1 or -1"),
        ("--epochs", "0", "argument --epochs: expected an int >= 1 and <= "),
        ("--seeds", "-1", "argument --seeds: expected an int >= 1 and <= "),
        ("--seeds", "0", "argument --seeds: expected an int >= 1 and <= "),
        ("--seeds", "two", "argument --seeds: expected an int >= 1 and <= "),
        ("--n-attack", "-5", "argument --n-attack: expected an int >= 1 and <= "),
        ("--max-train", "-3", "argument --max-train: expected an int >= 1 and <= "),
        ("--max-test", "0", "argument --max-test: expected an int >= 1 and <= "),
        ("--attack-steps", "0", "argument --attack-steps: expected an int >= 1 and <= "),
        ("--epsilons", "0,-0.1", "argument --epsilons: expected a comma-separated list, each a "
         "finite float >= 0; '-0.1' in '0,-0.1' is not"),
        ("--epsilons", "nan", "argument --epsilons: expected a comma-separated list, each a "
         "finite float >= 0; 'nan' in 'nan' is not"),
        ("--epsilons", ",", "argument --epsilons: expected at least one value, got ','"),
        ("--models", ",", "argument --models: expected at least one value, got ','"),
        ("--models", "ce,ngebm,ce", "argument --models: 'ce,ngebm,ce' lists ce more than once"),
        ("--norm", "l1", "argument --norm: invalid choice: 'l1'"),
    ],
)  # fmt: skip
def test_a_bad_option_value_is_one_error_line_before_training(
    capsys, no_training, option, value, expected
):
    status, out, err = _run(capsys, "compare", option, value, "--no-progress")
    assert status == 2 and out == ""
    assert _one_error_line(err).startswith(expected)


@pytest.mark.parametrize(
    "device, reason", [("bogus", "is not a device torch knows"), ("meta", "no data")]
)
def test_a_device_that_cannot_compute_is_one_error_line_before_training(
    capsys, no_training, device, reason
):
    status, out, err = _run(capsys, "compare", "--device", device, "--no-progress")
    assert status == 2 and out == ""
    message = _one_error_line(err)
    assert message.startswith("argument --device: ") and repr(device) in message
    assert reason in message


def test_epochs_zero_is_refused_not_replaced_by_the_default(capsys, no_training):
    # It used to train the data set's default of 30 epochs.
    status, _, err = _run(capsys, "compare", "--epochs", "0", "--no-progress")
    assert status == 2 and "--epochs: expected an int >= 1" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_refused_by_the_library_device_resolution(capsys, no_training):
    for command in ("compare", "bench"):
        status, _, err = _run(capsys, command, "--device", "cuda")
        assert status == 2
        assert "CUDA is not available on this machine" in _one_error_line(err, command)


def test_a_cuda_index_beyond_the_gpus_is_refused(capsys, no_training, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    status, _, err = _run(capsys, "compare", "--device", "cuda:1")
    assert status == 2
    assert "argument --device: " in err and "'cuda:1'" in err and "1 CUDA device(s)" in err


#: What must answer without importing torch: every --help, --version, and an error argparse
#: finds in each kind of option (a range, a list, a choice, an unknown option, a missing value).
WITHOUT_TORCH = [
    ["--help"],
    ["--version"],
    *([command, "--help"] for command in ("demo", "compare", "bench", "continual")),
    ["compare", "--seeds", "0"],
    ["compare", "--epsilons", "0,-1"],
    ["compare", "--norm", "l3"],
    ["compare", "--bogus"],
    ["compare", "--out"],
    ["demo", "--epochs", "x"],
    ["bench", "--threads", "0"],
    ["continual", "--seeds", "0"],
    ["continual", "--network", "cnn"],
]


def test_help_and_option_errors_answer_without_importing_torch():
    # the issue (#50): `python -m ebmclassifier --help` imported torch and the estimators
    # before reading its arguments (23-27 s of wall time on the busy machine)
    code = f"""
import contextlib, io, runpy, sys
for argv in {WITHOUT_TORCH!r}:
    sys.argv = ["ebmclassifier", *argv]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            runpy.run_module("ebmclassifier", run_name="__main__")
        except SystemExit as exit:
            status = exit.code
    heavy = sorted(m for m in ("torch", "sklearn", "skorch") if m in sys.modules)
    print(" ".join(argv), status, *heavy)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for argv, line in zip(WITHOUT_TORCH, lines, strict=True):
        expected = 0 if argv[-1] in ("--help", "--version") else 2
        assert line == f"{' '.join(argv)} {expected}", line  # nothing heavy after the status


def test_the_auto_device_is_probed_when_the_command_starts(capsys, no_training, monkeypatch):
    # parsing "auto" (every command's default) imports no torch; the probe moved to the start
    from ebmclassifier.experiments import _command

    monkeypatch.setattr(_command, "_allocation_problem", lambda torch, device: "it is broken")
    status, out, err = _run(capsys, "compare", "--no-progress")
    assert status == 2 and out == ""
    message = _one_error_line(err)
    assert message == (
        "argument --device: cannot compute on device 'auto': it is broken; use 'auto', 'cpu' "
        "or 'cuda[:N]'"
    )


def test_the_detector_names_of_the_options_are_the_detectors():
    from ebmclassifier.detectors import DETECTORS
    from ebmclassifier.experiments._compare_options import DETECTOR_NAMES

    assert DETECTOR_NAMES == tuple(DETECTORS)


def test_an_unknown_option_is_one_error_line_not_a_usage_dump(capsys):
    status, out, err = _run(capsys, "compare", "--epochz", "3")
    assert status == 2 and out == ""
    assert err == "python -m ebmclassifier: error: unrecognized arguments: --epochz 3\n"


def test_the_reproducing_command_line_is_unchanged_by_the_checks():
    args = cli.build_parser().parse_args(
        ["compare", "--lr", "0.003", "--batch-size", "-1", "--epsilons", "0,0.05", "--seeds", "2"]
    )
    assert (args.lr, args.batch_size, args.epsilons, args.seeds) == (0.003, -1, [0.0, 0.05], 2)
    line = COMPARE.command_line(args)
    assert "--seeds 2 " in line and "--lr 0.003 --batch-size -1" in line
    assert "--epsilons 0,0.05" in line


# ------------------------------------------------------------------ --out


def test_out_that_is_an_existing_file_is_refused_before_training(capsys, no_training, tmp_path):
    existing = tmp_path / "report"
    existing.write_text("not a folder")
    status, _, err = _run(capsys, "compare", "--out", str(existing))
    assert status == 2
    assert _one_error_line(err) == (
        f"argument --out: {str(existing)!r} is a file; give a folder (it is made if missing)"
    )
    assert existing.read_text() == "not a folder"


def test_out_under_a_file_is_refused_before_training(capsys, no_training, tmp_path):
    (tmp_path / "file").write_text("")
    status, _, err = _run(capsys, "compare", "--out", str(tmp_path / "file" / "report"))
    assert status == 2 and "is not a folder" in _one_error_line(err)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux's /proc")
def test_out_that_cannot_be_made_is_refused_before_training(capsys, no_training):
    # /proc refuses new folders even to root, for whom permission bits are no obstacle
    status, _, err = _run(capsys, "compare", "--out", "/proc/ebm-report", "--no-progress")
    assert status == 2
    assert _one_error_line(err).startswith("argument --out: '/proc/ebm-report' cannot be written")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes read-only folders"
)
def test_out_in_a_read_only_folder_is_refused_before_training(capsys, no_training, tmp_path):
    tmp_path.chmod(0o500)
    try:
        status, _, err = _run(capsys, "compare", "--out", str(tmp_path / "report"))
    finally:
        tmp_path.chmod(0o700)
    assert status == 2 and "is not writable" in _one_error_line(err)


# ------------------------------------------------------------------ checks before --out is made


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--data", ",,"], "argument --data: expected at least one value, got ',,'"),
        (["--data", "digits, digits"], "argument --data: 'digits, digits' lists digits more "
         "than once"),
        (["--data", "{dir}/a/x.npz,{dir}/b/x.npz"], "--data '{dir}/a/x.npz' and '{dir}/b/x.npz' "
         "would both be reported as 'x.npz'"),
        (["--data", "digits,imagenet"], "Unknown data 'imagenet'"),
        (["--data", "digits,cifar10"], "--data cifar10 reads the files from a folder"),
        (["--network", "resnet"], "Unknown network 'resnet'"),
        (["--protocol", "paper"], "--protocol paper is the papers' recipe for cifar10, "
         "cifar100, svhn; 'digits' is not one"),
        (["--models", "ce,nope"], "Unknown models ['nope']"),
        (["--detectors", "odin"], "Unknown detectors ['odin']"),
    ],
)  # fmt: skip
def test_data_free_checks_come_before_out_is_made(capsys, no_training, tmp_path, args, expected):
    for folder in ("a", "b"):  # two files of one name, in two folders
        (tmp_path / folder).mkdir()
        _npz(tmp_path / folder / "x.npz", X=np.zeros((6, 2)), y=np.arange(6) % 2)
    out = tmp_path / "never" / "report"
    argv = [a.replace("{dir}", str(tmp_path)) for a in args]
    status, out_text, err = _run(capsys, "compare", *argv, "--out", str(out), "--no-progress")
    assert status == 2 and out_text == ""
    assert _one_error_line(err).startswith(expected.replace("{dir}", str(tmp_path)))
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_data_names_are_stripped_of_blanks(capsys, no_training, tmp_path):
    args = cli.build_parser().parse_args(["compare", "--data", " digits , mnist1d "])
    assert args.data == ["digits", "mnist1d"]
    assert "--data digits,mnist1d " in COMPARE.command_line(args)
    # both are loaded under their names ("Unknown data ' mnist1d'" before): the OOD file's
    # shape is checked against the second one's
    np.savez(tmp_path / "flat64.npz", X=np.zeros((5, 64), dtype=np.float32))
    status, _, err = _run(
        capsys, "compare", "--data", "digits, mnist1d", "--ood", str(tmp_path / "flat64.npz"),
        "--out", str(tmp_path / "r"), "--no-progress",
    )  # fmt: skip
    assert status == 2 and "but mnist1d has samples of shape (1, 40)" in _one_error_line(err)


# ------------------------------------------------------------------ data files


def _npz(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


def _file_cases(folder: Path) -> dict:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)).astype(np.float32)
    good = Path(_npz(folder / "good.npz", X=X, y=np.arange(60) % 3))
    (folder / "truncated.npz").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    (folder / "text.npz").write_text("X,y\n1,2\n")
    return {
        "truncated.npz": ("is not a readable .npz file", str(folder / "truncated.npz")),
        "text.npz": ("is not a readable .npz file", str(folder / "text.npz")),
        "keys.npz": ("must hold arrays named 'X' and 'y'", _npz(folder / "keys.npz", A=X)),
        "continuous labels": (
            "the labels y must be classes (integers or strings); they are continuous",
            _npz(folder / "float_y.npz", X=X, y=rng.normal(size=60)),
        ),
        "one class": ("y holds one class, 0.0;", _npz(folder / "one.npz", X=X, y=np.zeros(60))),
        "single-sample class": (
            "class 3 has a single sample",
            _npz(folder / "lonely.npz", X=X, y=np.r_[np.arange(59) % 3, 3]),
        ),
        "missing": ("No such data file", str(folder / "missing.npz")),
        # the loader refuses what no model can train on, before the models are built
        "NaN": (
            "sample 7 of X holds NaN",
            _npz(
                folder / "nan.npz",
                X=np.where(np.arange(60)[:, None] == 7, np.nan, X.astype(np.float64)),
                y=np.arange(60) % 3,
            ),
        ),
        "empty": ("X holds no samples", _npz(folder / "empty.npz", X=X[:0], y=np.arange(0))),
    }


@pytest.mark.parametrize(
    "case",
    ["truncated.npz", "text.npz", "keys.npz", "continuous labels", "one class",
     "single-sample class", "missing", "NaN", "empty"],
)  # fmt: skip
def test_a_bad_data_file_is_one_error_line_before_training(capsys, no_training, tmp_path, case):
    expected, path = _file_cases(tmp_path)[case]
    status, out, err = _run(capsys, "compare", "--data", path, "--out", str(tmp_path / "r"))
    assert status == 2 and out == ""
    message = _one_error_line(err)
    assert expected in message and repr(path) in message


def test_a_class_too_rare_for_the_calibration_split_stops_before_any_training(
    capsys, no_training, tmp_path
):
    # two samples of class 3: one lands in the test split, one in the training split, which
    # the per-seed stratified calibration split cannot divide; digits, first, trained before
    X = np.random.default_rng(0).normal(size=(62, 4)).astype(np.float32)
    rare = _npz(tmp_path / "rare.npz", X=X, y=np.r_[np.arange(60) % 3, 3, 3])
    status, out, err = _run(capsys, "compare", "--data", f"digits,{rare}", "--out",
                            str(tmp_path / "r"), "--no-progress")  # fmt: skip
    assert status == 2 and out == ""
    assert _one_error_line(err).startswith(
        "rare.npz: class 3 has 1 sample in the training split; the per-seed calibration split"
    )


def test_a_calibration_part_smaller_than_the_classes_is_refused_before_training():
    from ebmclassifier.experiments.compare import CompareConfig, run_comparison

    def refuse(params):
        raise AssertionError("a model was built before the split was checked")

    registry = {"ce": ModelSpec("ce", "ce", build=refuse)}
    config = CompareConfig(models=("ce",), max_train=200, calibration_size=0.02, progress=False)
    with pytest.raises(ValueError, match=r"digits: .* calibration part of 4, but .* each of the "
                       r"10 classes"):  # fmt: skip
        run_comparison(config, registry=registry)


def _pickle(path: Path, obj) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f)


def test_cifar_batches_without_their_keys_are_one_error_line(capsys, no_training, tmp_path):
    batch = {"data": np.zeros((2, 3072), dtype=np.uint8)}  # no "labels"
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        _pickle(tmp_path / name, batch)
    _pickle(tmp_path / "batches.meta", {"label_names": [str(i) for i in range(10)]})
    status, _, err = _run(capsys, "compare", "--data", "cifar10", "--data-dir", str(tmp_path))
    assert status == 2
    assert "lacks the key(s) ['labels'] of a CIFAR batch" in _one_error_line(err)


def test_svhn_files_without_their_variables_are_one_error_line(capsys, no_training, tmp_path):
    from scipy.io import savemat

    for name in ("train_32x32.mat", "test_32x32.mat"):
        savemat(tmp_path / name, {"X": np.zeros((32, 32, 3, 2), dtype=np.uint8)})  # no "y"
    status, _, err = _run(capsys, "compare", "--data", "svhn", "--data-dir", str(tmp_path))
    assert status == 2
    assert "lacks the variable(s) ['y'] of an SVHN split" in _one_error_line(err)


# ------------------------------------------------------------------ failed fits


class _FailsAtSeed(NGEBMClassifier):
    """NG-EBM that fails its fit for the seeds in ``failing`` (a class attribute)."""

    failing = (1,)

    def fit(self, X, y):
        if self.random_state in self.failing:
            raise FloatingPointError("diverged")
        return super().fit(X, y)


def _registry_with_failing_ngebm(failing):
    registry = default_models()
    fails = type("Fails", (_FailsAtSeed,), {"failing": failing})
    registry["ngebm"] = ModelSpec("ngebm", "fails", build=lambda params: fails(**params))
    return registry


@pytest.mark.slow
def test_a_failed_fit_leaves_the_report_of_the_others_and_exits_1(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(compare, "default_models", lambda: _registry_with_failing_ngebm((1,)))
    out_dir = tmp_path / "report"
    status, out, err = _run(capsys, "compare", "--data", "digits", "--models", "ce,ngebm",
                            "--seeds", "2", *QUICK, "--out", str(out_dir),
                            "--no-progress")  # fmt: skip
    assert status == 1
    assert "| ECE: ce / ngebm |" in out  # the summary of what succeeded
    assert "'ngebm' failed at seed 1: FloatingPointError('diverged')" in err  # as it happened
    assert err.splitlines()[-1] == (
        "python -m ebmclassifier compare: error: 1 fit(s) failed, the report leaves them out: "
        "'ngebm' at seed 1: FloatingPointError('diverged')"
    )
    assert "`ngebm` failed at seed 1" in (out_dir / "report.md").read_text()


def test_when_every_fit_fails_nothing_is_reported_and_the_exit_is_1(capsys, monkeypatch, tmp_path):
    # It used to exit 0 with empty tables.
    monkeypatch.setattr(compare, "default_models", lambda: _registry_with_failing_ngebm((0, 1)))
    out_dir = tmp_path / "report"
    status, out, err = _run(capsys, "compare", "--data", "digits", "--models", "ngebm",
                            "--seeds", "2", *QUICK, "--out", str(out_dir),
                            "--no-progress")  # fmt: skip
    assert status == 1 and out == ""
    assert err.splitlines()[-1] == (
        "python -m ebmclassifier compare: error: every fit failed, nothing to report: "
        "'ngebm' at seed 0: FloatingPointError('diverged'); "
        "'ngebm' at seed 1: FloatingPointError('diverged')"
    )
    assert not (out_dir / "report.md").exists()


class _FailsOnFiveFeatures(NGEBMClassifier):
    def fit(self, X, y):
        if X.shape[1] == 5:
            raise FloatingPointError("diverged")
        return super().fit(X, y)


@pytest.mark.slow
def test_a_data_set_whose_fits_all_fail_leaves_the_others_report(capsys, monkeypatch, tmp_path):
    # It used to exit before writing anything, discarding the finished digits report.
    registry = default_models()
    registry["ce"] = ModelSpec("ce", "fails on blobs", build=lambda p: _FailsOnFiveFeatures(**p))
    monkeypatch.setattr(compare, "default_models", lambda: registry)
    X = np.random.default_rng(0).normal(size=(60, 5)).astype(np.float32)
    blobs = _npz(tmp_path / "blobs.npz", X=X, y=np.arange(60) % 2)
    out_dir = tmp_path / "report"
    status, out, err = _run(capsys, "compare", "--data", f"digits,{blobs}", "--models", "ce",
                            "--seeds", "1", *QUICK, "--out", str(out_dir),
                            "--no-progress")  # fmt: skip
    assert status == 1
    assert "|  | digits |" in out  # digits' summary
    assert err.splitlines()[-1] == (
        "python -m ebmclassifier compare: error: no fit on blobs.npz succeeded, the report leaves "
        "out that data; 1 fit(s) failed, the report leaves them out: 'ce' at seed 0: "
        "FloatingPointError('diverged')"
    )
    report = (out_dir / "report.md").read_text()
    assert report.startswith("# ebmclassifier compare: digits") and "compare: blobs" not in report
    assert json.loads((out_dir / "results.json").read_text())["data"]["name"] == "digits"


# ------------------------------------------------------------------ bench and demo


def test_bench_json_path_is_checked_before_the_benchmark(capsys, tmp_path, monkeypatch):
    from ebmclassifier.experiments import bench

    monkeypatch.setattr(bench, "run_bench", lambda **kw: pytest.fail("the bench ran"))
    status, _, err = _run(capsys, "bench", "--json", str(tmp_path))
    assert status == 2
    assert _one_error_line(err, "bench") == (
        f"argument --json: {str(tmp_path)!r} is a folder; give the path of a file to write"
    )
    status, _, err = _run(capsys, "bench", "--json", str(tmp_path / "no" / "out.json"))
    assert status == 2 and "is not a folder" in _one_error_line(err, "bench")
    status, _, err = _run(capsys, "bench", "--device", "tpu")
    assert status == 2 and "argument --device:" in _one_error_line(err, "bench")


@pytest.mark.parametrize("option, value", [("--epochs", "0"), ("--seeds", "-2")])
def test_demo_options_are_checked(capsys, monkeypatch, option, value):
    from ebmclassifier.experiments import demo

    monkeypatch.setattr(demo, "run_demo", lambda *a, **kw: pytest.fail("the demo ran"))
    status, _, err = _run(capsys, "demo", option, value)
    assert status == 2
    assert _one_error_line(err, "demo") == f"argument {option}: expected an int >= 1, got {value!r}"


def test_demo_prepares_each_seeds_data_once_for_both_models(monkeypatch):
    from ebmclassifier.energy import OOD_METHODS
    from ebmclassifier.experiments import demo
    from ebmclassifier.metrics import ood_metrics

    prepared = []
    original = demo.digits_with_noise
    monkeypatch.setattr(demo, "digits_with_noise", lambda seed: prepared.append(seed) or
                        original(seed))  # fmt: skip
    rows = demo.run_demo(seeds=(0, 1), max_epochs=1, progress=False)
    assert prepared == [0, 1]  # it was [0, 0, 1, 1]: once per model
    # the same numbers as a model trained on its own copy of the seed's data
    X_train, X_test, y_train, y_test, noise = original(1)
    clf = NGEBMClassifier(beta=0.5, max_epochs=1, random_state=1).fit(X_train, y_train)
    (row,) = [r for r in rows if (r["model"], r["seed"]) == ("ngebm (beta=0.5)", 1)]
    assert row["accuracy"] == clf.score(X_test, y_test)
    for method in OOD_METHODS:
        expected = ood_metrics(clf.score_ood(X_test, method), clf.score_ood(noise, method))
        assert row[f"auroc_{method}"] == expected["auroc"]


def test_max_epochs_zero_through_the_python_api_is_kept():
    # The command line refuses --epochs 0; CompareConfig(max_epochs=0) used to become 30.
    built = []

    def record(params):
        built.append(params["max_epochs"])
        return _FailsAtSeed(**{**params, "random_state": 1})  # its fit fails: nothing trains

    registry = {"ce": ModelSpec("ce", "records its parameters", build=record)}
    config = compare.CompareConfig(models=("ce",), seeds=1, max_epochs=0, max_test=60,
                                   progress=False)  # fmt: skip
    results = compare.run_comparison(config, registry=registry, log=lambda message: None)
    assert built == [0] and results["max_epochs"] == 0


@pytest.mark.parametrize("command", ["compare", "continual", "demo"])
def test_every_command_spells_the_progress_switch_alike(command, capsys):
    # the issue: compare took --no-progress, continual and demo --quiet
    parser = cli.build_parser()
    assert parser.parse_args([command]).progress is True
    assert parser.parse_args([command, "--no-progress"]).progress is False
    assert parser.parse_args([command, "--quiet"]).progress is False  # the other spelling
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--help"])
    help_text = capsys.readouterr().out
    assert "--no-progress, --quiet" in help_text


@pytest.mark.parametrize("command", ["compare", "continual"])
def test_help_text_is_flush_left_and_a_legend_entry_hangs(command, capsys):
    # the issue: every continuation line of a command's description was indented 4 spaces
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([command, "--help"])
    text = capsys.readouterr().out
    description = text.split("\n\n")[1].splitlines()
    assert len(description) > 1 and not any(line.startswith(" ") for line in description)
    if command == "continual":  # its legend: "  name: what it is", continued under it
        legend = text.split("methods:\n")[1].splitlines()
        assert legend[0].startswith("  joint: ")
        continued = [line for line in legend if not line.startswith("  ") or line[2] == " "]
        assert continued and all(line.startswith("      ") for line in continued)


def test_the_commands_default_output_folders_are_ignored_by_git():
    # the issue: a default `continual` run left continual/ untracked in the checkout
    from ebmclassifier.experiments._continual_options import COMMAND as CONTINUAL

    lines = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().splitlines()
    for command in (COMPARE, CONTINUAL):
        out = next(o for o in command.options if o.flag == "--out").default.strip("/")
        assert f"{out}/" in lines or f"/{out}/" in lines, command.name
    # a folder of the same name inside the package must stay tracked: the entry is anchored
    assert "continual/" not in lines and "/continual/" in lines
