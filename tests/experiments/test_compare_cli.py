"""``python -m ebmclassifier compare``: what it prints, its options, its errors."""

import json
import zipfile

import numpy as np
import pytest

from ebmclassifier import cli
from ebmclassifier.experiments.compare import (
    CompareConfig,
)

from .compare_stand_ins import (
    stand_in_registry,
)


@pytest.mark.slow
def test_cli_compare(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("ebmclassifier.experiments.compare.default_models", stand_in_registry)
    out = tmp_path / "report"
    code = cli.main(
        ["compare", "--data", "digits", "--models", "ce,ce_ts,ngebm", "--seeds", "1",
         "--epochs", "3", "--n-attack", "20", "--out", str(out), "--no-progress"]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    report = (out / "report.md").read_text()
    assert "--models ce,ce_ts,ngebm" in report
    # the summary table, as report.md opens with it, then the verdicts that matter
    table = report[report.index("|  | digits |") :].split("\n\n")[0]
    assert table in printed and "| ECE: ce / ce_ts / ngebm |" in table
    assert "- Calibration regime (ECE, lower is better): CE's ECE" in printed
    assert "- Far OOD (AUROC" in printed
    assert printed.rstrip().endswith("and results.json.") and str(out / "report.md") in printed
    # the detail stays in report.md: no per-score table, no per-set verdict in the terminal
    assert "| model / score |" not in printed and "OOD AUROC on uniform" not in printed
    assert "| model / score |" in report and "OOD AUROC on uniform" in report


def test_no_runnable_model_is_one_error_line_on_the_command_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("ebmclassifier.experiments.compare.default_models", stand_in_registry)
    code = cli.main(["compare", "--models", "jem", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1 and "Traceback" not in err
    assert "None of the requested models can run here ('jem': ebmclassifier.jem." in err


def test_cli_reports_bad_data_and_options_without_a_traceback(tmp_path, capsys):
    code = cli.main(["compare", "--data", "cifar10", "--data-dir", str(tmp_path), "--no-progress"])
    assert code == 2
    assert "error: CIFAR-10 not found" in capsys.readouterr().err
    assert cli.main(["compare", "--network", "resnet", "--no-progress"]) == 2
    assert "Unknown network 'resnet'" in capsys.readouterr().err


@pytest.mark.parametrize("name, page", [("compare", "compare.md"), ("bench", "performance.md")])
def test_every_option_of_a_command_is_in_its_docs_page(name, page):
    # the options are declared once, in the command; the docs page must not fall behind
    import re
    from pathlib import Path

    from ebmclassifier.experiments import commands

    (command,) = [c for c in commands() if c.name == name]
    text = (Path(__file__).resolve().parents[2] / "docs" / page).read_text()
    missing = [o.flag for o in command.options if not re.search(rf"{o.flag}(?![\w-])", text)]
    assert not missing, f"docs/{page} does not mention {missing}"


def test_the_reproducing_command_line_spells_every_given_option():
    from ebmclassifier.experiments._compare_options import COMMAND

    args = cli.build_parser().parse_args(
        ["compare", "--epsilons", "0,0.05", "--lr", "0.003", "--no-standardize", "--no-progress",
         "--network", "wrn-16-2", "--models", "ce,ngebm"]
    )  # fmt: skip
    assert COMMAND.command_line(args) == (
        "python -m ebmclassifier compare --data digits,mnist1d --models ce,ngebm --seeds 3 "
        "--out report --lr 0.003 --device auto --network wrn-16-2 --epsilons 0,0.05 --norm "
        "linf --attack-steps 10 --n-attack 500 --detectors mahalanobis,knn,vim "
        "--no-standardize"
    )
    config = CompareConfig(**COMMAND.fields(args))
    assert (config.epsilons, config.standardize, config.progress) == ([0.0, 0.05], False, False)
    default = cli.build_parser().parse_args(["compare"])
    assert "--network" not in COMMAND.command_line(default)


@pytest.mark.slow
def test_several_data_sets_run_in_one_command_one_section_each(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("ebmclassifier.experiments.compare.default_models", stand_in_registry)
    rng = np.random.default_rng(0)
    for name, n_features in (("blobs", 5), ("wide", 7)):
        X = rng.normal(size=(200, n_features)).astype(np.float32)
        np.savez(tmp_path / f"{name}.npz", X=X, y=(X[:, 0] > 0).astype(int))
    out = tmp_path / "report"
    code = cli.main(
        ["compare", "--data", f"{tmp_path / 'blobs.npz'},{tmp_path / 'wide.npz'}",
         "--models", "ce", "--seeds", "1", "--epochs", "2", "--n-attack", "10",
         "--out", str(out), "--no-progress"]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    # one summary table, a column per data set (one model, one seed: no verdict to print)
    assert "|  | blobs.npz | wide.npz |" in printed
    report = (out / "report.md").read_text()
    assert "## ebmclassifier compare: blobs.npz" in report
    assert "## ebmclassifier compare: wide.npz" in report
    assert "![risk_coverage.png](wide.npz/risk_coverage.png)" in report
    assert (out / "wide.npz" / "risk_coverage.png").exists()
    saved = json.loads((out / "results.json").read_text())
    assert list(saved["datasets"]) == ["blobs.npz", "wide.npz"]
    assert saved["datasets"]["wide.npz"]["data"]["input_shape"] == [7]


def _bad_ood_files(folder):
    np.savez(folder / "short.npz", X=np.zeros((5, 10), dtype=np.float32))
    np.savez(folder / "no_x.npz", Z=np.zeros((5, 64)))
    (folder / "unlabelled.csv").write_text("\n".join([",".join(["0.5"] * 64)] * 3))
    (folder / "notes.txt").write_text("not data")
    np.savez(folder / "flat64.npz", X=np.zeros((5, 64), dtype=np.float32))
    X = np.random.default_rng(0).normal(size=(40, 5)).astype(np.float32)
    np.savez(folder / "five.npz", X=X, y=np.arange(40) % 2)
    np.savez(folder / "huge.npz", X=np.full((5, 64), 1e300))
    np.savez(folder / "inf32.npz", X=np.full((5, 64), np.inf, dtype=np.float32))
    np.savez(folder / "none.npz", X=np.zeros((0, 64), dtype=np.float32))
    with zipfile.ZipFile(folder / "raw.npz", "w") as archive:  # a member that is no .npy array
        archive.writestr("X", b"not an array")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ood-classes", "11"], "does not have: ['11']. Its labels are ['0', '1'"),
        (["--ood-classes", "0,1,2,3,4,5,6,7,8,9"], "leaving 0 to train on; at least 2"),
        (["--ood-classes", "0,1,2,3,4,5,6,7,8"], "leaving 1 to train on"),
        # the command line's comma lists refuse empty lists and repeats as they are parsed
        (["--ood-classes", ","], "argument --ood-classes: expected at least one value"),
        (["--ood", "{dir}/short.npz"], "short.npz' holds samples of shape (10,), but digits"),
        (["--ood", "{dir}/no_x.npz"], "must hold an array named 'X'"),
        # read by the data files' own .npz reader, so its checks hold for OOD files too
        (["--ood", "{dir}/huge.npz"], "huge.npz': sample 0 of X holds a value beyond float32"),
        (["--ood", "{dir}/raw.npz"], "raw.npz': 'X' must be stored in the archive as .npy"),
        (["--ood", "{dir}/inf32.npz"], "inf32.npz': sample 0 of X holds a value beyond float32"),
        (["--ood", "{dir}/none.npz"], "none.npz': X holds no samples"),
        (["--ood", "{dir}/unlabelled.csv"], "its label column (named 'target', else the last)"),
        (["--ood", "{dir}/notes.txt"], "use a .npz (array X) or a .csv file"),
        (["--ood", "{dir}/missing.npz"], "missing.npz' not found"),
        (["--ood", "{dir}/flat64.npz,{dir}/flat64.npz"], "flat64.npz more than once"),
        (["--detectors", "odin"], "Unknown detectors ['odin'] in --detectors"),
        (["--data", "digits,digits"], "argument --data: 'digits,digits' lists digits more than"),
        # every data set is checked before the first one trains
        (["--data", "digits,{dir}/five.npz", "--ood", "{dir}/flat64.npz"], "but five.npz has"),
    ],
)
def test_bad_ood_options_stop_the_cli_before_training(args, message, tmp_path, monkeypatch, capsys):
    import ebmclassifier.experiments.compare as compare_module

    _bad_ood_files(tmp_path)

    def no_training(*args, **kwargs):
        raise AssertionError("a model was trained before the bad option was reported")

    monkeypatch.setattr(compare_module, "_fit", no_training)
    args = [a.replace("{dir}", str(tmp_path)) for a in args]
    code = cli.main(["compare", "--out", str(tmp_path / "out"), "--no-progress", *args])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("error:") == 1 and "Traceback" not in err
