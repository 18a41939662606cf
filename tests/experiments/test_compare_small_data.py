"""compare on small data and its bounds (issue #26): every run finishes or stops before training.

- the main job's options on scikit-learn's wine (150 and 60 samples) finish with a report;
- a detector or model that cannot be fitted is a "not available" row, the run goes on;
- temperature scaling works on a calibration split of any size, and gives the temperature of
  scikit-learn's default five folds where those work;
- the counts a run takes are bounded (a property family over out-of-range values);
- ``compare`` with no options is the README's main job; ``--protocol paper`` holds out the
  papers' ``n_valid`` and drops the last incomplete batch.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split

from ebmclassifier import NGEBMClassifier, cli
from ebmclassifier.detectors import ViMDetector
from ebmclassifier.experiments import _compare_options, _measure, _setup, compare
from ebmclassifier.experiments.models import ModelSpec, default_models

README = Path(__file__).resolve().parents[2] / "README.md"

# The README's main job, less its length: one epoch, few attacked samples.
MAIN_JOB = ["--network", "mlp", "--max-train", "2000", "--models", "ce,ce_ts,ngebm,jem",
            "--detectors", "mahalanobis,knn,vim", "--seeds", "3"]  # fmt: skip
FAST = ["--epochs", "1", "--n-attack", "8", "--no-progress"]


def _wine(folder: Path, n: int) -> Path:
    """``n`` samples of scikit-learn's wine (stratified), as a ``.npz`` of ``X`` and ``y``."""
    X, y = load_wine(return_X_y=True)
    if n < len(y):
        X, _, y, _ = train_test_split(X, y, train_size=n, stratify=y, random_state=0)
    path = folder / f"wine{n}.npz"
    np.savez(path, X=X, y=y)
    return path


def _run(capsys, *argv):
    status = cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _refuse(*args, **kwargs):
    raise AssertionError("a model was trained (or data loaded) before the error was reported")


@pytest.fixture
def no_fit(monkeypatch):
    monkeypatch.setattr(compare, "_fit", _refuse)


@pytest.fixture
def no_training(monkeypatch, no_fit):
    """Nothing may load or train: the error comes at parse time."""
    monkeypatch.setattr(compare, "load_setup", _refuse)


@pytest.fixture(scope="module")
def wine150(tmp_path_factory):
    """The main job's options on 150 wine samples: (exit status, stdout, stderr, results)."""
    folder = tmp_path_factory.mktemp("wine150")
    out = folder / "report"
    status = cli.main(["compare", "--data", str(_wine(folder, 150)), *MAIN_JOB, *FAST,
                       "--out", str(out)])  # fmt: skip
    return status, json.loads((out / "results.json").read_text()), out


@pytest.mark.slow
def test_the_main_job_on_150_wine_samples_finishes_with_a_report(wine150):
    # It used to stop at ViM ("no residual outside a principal subspace of 128 dimensions")
    # and write nothing: ~80 training rows cannot span half of 256 features.
    status, results, out = wine150
    assert status == 0
    assert results["unavailable"] == {}
    runs = {(r["model"], r["seed"]) for r in results["runs"]}
    assert runs == {(m, s) for m in ("ce", "ce_ts", "ngebm", "jem") for s in range(3)}
    assert (out / "report.md").exists()


@pytest.mark.slow
def test_detectors_read_every_trained_models_features(wine150):
    _, results, _ = wine150
    for run in results["runs"]:
        own = {"max_softmax"} if run["model"] == "ce_ts" else {"energy", "max_softmax",
                                                                "approx_mass"}  # fmt: skip
        detectors = set() if run["model"] == "ce_ts" else {"mahalanobis", "knn", "vim"}
        assert set(run["ood"]) == own | detectors, run["model"]
        assert set(run["ood_decisions"]) == own | detectors
    table = (wine150[2] / "report.md").read_text()
    assert "| ngebm / knn |" in table and "| jem / vim |" in table


@pytest.mark.slow
def test_the_main_job_on_60_wine_samples_finishes(tmp_path, capsys):
    status, out, err = _run(capsys, "compare", "--data", str(_wine(tmp_path, 60)), *MAIN_JOB,
                            *FAST, "--out", str(tmp_path / "report"))  # fmt: skip
    assert status == 0, err
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["data"]["n_train"] + results["data"]["n_calibration"] == 42  # 70% of 60
    assert len(results["runs"]) == 12


@pytest.mark.slow
def test_a_detector_that_cannot_be_fitted_is_a_not_available_row(tmp_path, capsys, monkeypatch):
    # ViM with half of the features as its subspace (n_components=None, the old rule) cannot
    # be fitted on ~100 training rows: the row says why, the rest of the run goes on.
    build = _measure.build_detector

    def old_vim(name, n_train):
        return ViMDetector(n_components=None) if name == "vim" else build(name, n_train)

    monkeypatch.setattr(_measure, "build_detector", old_vim)
    out = tmp_path / "report"
    status, stdout, err = _run(capsys, "compare", "--data", str(_wine(tmp_path, 178)),
                               "--models", "ce,ngebm", "--detectors", "knn,vim", "--seeds", "1",
                               *FAST, "--out", str(out))  # fmt: skip
    assert status == 0, err
    results = json.loads((out / "results.json").read_text())
    assert set(results["unavailable"]) == {"ce / vim", "ngebm / vim"}
    assert "no residual outside a principal subspace" in results["unavailable"]["ce / vim"]
    assert "knn" in results["runs"][0]["ood"] and "vim" not in results["runs"][0]["ood"]
    report = (out / "report.md").read_text()
    row = re.search(r"^\| ce / vim \| not available: The training features have no residual",
                    report, flags=re.M)  # fmt: skip
    assert row is not None
    assert "- `ce / vim`: not available, The training features" in report
    assert "- Not available: ce / vim (The training features have no residual" in stdout


class _NeverFits(NGEBMClassifier):
    def fit(self, X, y):
        raise FloatingPointError("diverged")


@pytest.mark.slow
def test_a_model_that_cannot_be_fitted_is_a_not_available_row(tmp_path, capsys, monkeypatch):
    registry = default_models()
    registry["jem"] = ModelSpec("jem", "never fits", build=lambda params: _NeverFits(**params))
    registry["jem_ts"] = ModelSpec("jem_ts", "scaled", scores=("max_softmax",), calibrates="jem")
    monkeypatch.setattr(compare, "default_models", lambda: registry)
    out = tmp_path / "report"
    status, stdout, _ = _run(capsys, "compare", "--data", "digits", "--max-train", "200",
                             "--max-test", "60", "--models", "ce,jem,jem_ts", "--detectors",
                             "none", "--seeds", "1", *FAST, "--out", str(out))  # fmt: skip
    assert status == 1  # a failed fit still fails the command, after the report is written
    results = json.loads((out / "results.json").read_text())
    assert results["unavailable"] == {
        "jem": "FloatingPointError('diverged')",
        "jem_ts": "its base model 'jem': FloatingPointError('diverged')",
    }
    report = (out / "report.md").read_text()
    assert "| jem | not available: FloatingPointError('diverged') |" in report
    assert "| jem_ts | not available: its base model 'jem'" in report
    assert (
        "- Not available: jem (FloatingPointError('diverged')); jem_ts (its base model 'jem': "
        "FloatingPointError('diverged'))" in stdout
    )


# ----------------------------------------------------------------- temperature scaling, any size


@pytest.mark.slow
def test_temperature_scaling_works_on_60_training_samples(tmp_path, capsys):
    # It used to be refused by scikit-learn: "n_splits=5 cannot be greater than the number
    # of members in each class" (a calibration split of 12 digits, about one per class).
    status, stdout, err = _run(capsys, "compare", "--data", "digits", "--models", "ce,ce_ts",
                               "--max-train", "60", "--max-test", "60", "--detectors", "none",
                               "--seeds", "2", *FAST, "--out", str(tmp_path / "r"))  # fmt: skip
    assert status == 0, err
    assert "| ECE: ce / ce_ts |" in stdout


def test_temperature_of_the_whole_split_equals_five_folds():
    # The frozen model is not refitted, so one "fold" that predicts on the whole split gives
    # the temperature scikit-learn's default five folds give: numbers of earlier runs stand.
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import load_digits
    from sklearn.frozen import FrozenEstimator

    X, y = load_digits(return_X_y=True)
    X = X / 16
    base = NGEBMClassifier(beta=0, max_epochs=2, random_state=0).fit(X[:600], y[:600])
    spec = default_models()["ce_ts"]
    measured = _measure._calibrated(spec, {"ce": (base, 1.0)}, (X[600:900], y[600:900]), 2)
    folds = CalibratedClassifierCV(FrozenEstimator(base), method="temperature")
    folds.fit(X[600:900], y[600:900])
    beta = folds.calibrated_classifiers_[0].calibrators[0].beta_
    assert measured.extra["temperature"] == 1.0 / beta
    assert np.array_equal(measured.model.predict_proba(X[900:]), folds.predict_proba(X[900:]))


def _rare_class_file(folder: Path) -> Path:
    """205 training samples (70% of 293) of which 3 and 2 of classes 1 and 2: seed 0's
    stratified 20% calibration part (41 samples) holds none of class 2."""
    X = np.random.default_rng(0).normal(size=(293, 4))
    y = np.r_[np.zeros(286), np.ones(4), np.full(3, 2)].astype(int)
    np.savez(folder / "rare.npz", X=X, y=y)
    return folder / "rare.npz"


def test_a_class_missing_from_a_seeds_calibration_part_stops_ts_before_training(
    tmp_path, capsys, no_fit
):
    # Temperature scaling would then lose a column (scikit-learn's IndexError after training).
    status, out, err = _run(capsys, "compare", "--data", str(_rare_class_file(tmp_path)),
                            "--models", "ce,ce_ts", "--seeds", "3", *FAST,
                            "--out", str(tmp_path / "r"))  # fmt: skip
    assert status == 2 and out == ""
    assert err.count("\n") == 1
    assert "at seed 0 the stratified calibration part of the training split (41 of 205" in err
    assert "holds no sample of class 2, and temperature scaling" in err and "--max-train" in err


def test_the_calibration_part_need_not_hold_every_class_without_ts():
    # Only the OOD thresholds use it then: a rare class missing there is no error.
    y = np.r_[np.zeros(200), np.ones(3), np.full(2, 2)].astype(int)
    _setup.check_calibration_split(y, 0.2, "rare", seeds=3, recalibrates=False)
    with pytest.raises(ValueError, match="calibration part .* no sample of class 2"):
        _setup.check_calibration_split(y, 0.2, "rare", seeds=3, recalibrates=True)


# ----------------------------------------------------------- bounded counts (a property family)


_BOUNDS = {
    "--seeds": _compare_options.MAX_SEEDS,
    "--epochs": _compare_options.MAX_EPOCHS,
    "--max-train": _compare_options.MAX_SAMPLES,
    "--max-test": _compare_options.MAX_SAMPLES,
    "--n-attack": _compare_options.MAX_SAMPLES,
    "--attack-steps": _compare_options.MAX_EPOCHS,
}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    option=st.sampled_from(sorted(_BOUNDS)),
    value=st.one_of(
        st.integers(min_value=_compare_options.MAX_SEEDS + 1, max_value=10**30),
        st.integers(max_value=0, min_value=-(10**30)),
    ),
)
def test_out_of_range_counts_are_one_line_and_exit_2_before_training(
    option, value, capsys, no_training
):
    if 0 < value <= _BOUNDS[option]:
        value = _BOUNDS[option] + value  # above this option's bound
    status = cli.main(["compare", option, str(value), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1, err
    assert f"argument {option}: expected an int >= 1 and <= {_BOUNDS[option]} (" in err
    assert f"got '{value}'" in err


def test_a_billion_seeds_is_refused_with_the_reason(capsys, no_training):
    status, out, err = _run(capsys, "compare", "--seeds", "1000000000")
    assert status == 2 and out == ""
    assert "--seeds: expected an int >= 1 and <= 100 (each seed trains every model again" in err


@pytest.mark.parametrize("option", sorted(_BOUNDS))
def test_the_bound_itself_is_accepted(option):
    args = cli.build_parser().parse_args(["compare", option, str(_BOUNDS[option])])
    assert _BOUNDS[option] in vars(args).values()


# ----------------------------------------------------------------- the main job by default


def _resolved(argv):
    args = cli.build_parser().parse_args(argv)
    configs = compare._configs(args)
    kinds = [_setup.data_kind(c.data, c.data_dir) for c in configs]
    return [_setup.resolve_defaults(c, kind) for c, kind in zip(configs, kinds, strict=True)]


def test_compare_without_options_is_the_readmes_main_job():
    # It used to be digits alone, without detectors; the main job needed seven options.
    from dataclasses import replace

    from ebmclassifier.datasets import load_named_dataset

    default = _resolved(["compare"])
    explicit = _resolved(["compare", "--data", "digits,mnist1d", *MAIN_JOB])
    assert default[1] == explicit[1]  # MNIST-1D: mlp on 2,000 signals either way
    # digits: --network mlp and --max-train 2000 are spelled, not defaulted, and change nothing:
    # the default network of flat samples is that MLP, and 2,000 > 1,257 keeps the split whole
    assert default[0] == replace(explicit[0], network="default", max_train=None)
    whole, capped = load_named_dataset("digits"), load_named_dataset("digits", max_train=2000)
    assert np.array_equal(whole.X_train, capped.X_train)
    X, y = whole.X_train[:50], whole.y_train[:50]
    nets = [
        NGEBMClassifier(max_epochs=1, random_state=0, **params).fit(X, y).module_
        for params in (compare.network_params("default"), compare.network_params("mlp"))
    ]
    assert type(nets[0]) is type(nets[1])
    for a, b in zip(nets[0].state_dict().values(), nets[1].state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert [c.data for c in default] == ["digits", "mnist1d"]
    assert [(c.network, c.max_train) for c in default] == [("default", None), ("mlp", 2000)]
    assert default[0].detectors == ["mahalanobis", "knn", "vim"] and default[0].seeds == 3
    # the README's first command is that short
    (first,) = re.findall(r"```bash\n(.*?)\n```", README.read_text(), flags=re.S)[:1]
    assert first.endswith("python -m ebmclassifier compare")


def test_the_digits_run_is_one_option_away_and_mnist1d_keeps_its_convnet_on_request():
    (digits,) = _resolved(["compare", "--data", "digits"])
    assert digits.network == "default" and digits.max_train is None
    (mnist1d,) = _resolved(["compare", "--data", "mnist1d", "--network", "default",
                            "--max-train", "4000"])  # fmt: skip
    assert mnist1d.network == "default" and mnist1d.max_train == 4000
    (none,) = _resolved(["compare", "--data", "digits", "--detectors", "none"])
    assert tuple(none.detectors) == ()


# ----------------------------------------------------------------- --protocol paper


def test_protocol_paper_holds_out_n_valid_and_drops_the_last_batch():
    from ebmclassifier.recipes import paper_protocol

    protocol = paper_protocol("cifar10")
    config = compare.CompareConfig(data="cifar10", protocol="paper")
    # CIFAR-10's 50,000 training images: 5000 held out (not 20% = 10,000), 45,000 trained on
    assert _setup.calibration_test_size(config, protocol, 50_000) == 5000
    assert _setup.calibration_test_size(config, protocol, 120) == 0.2  # small: 20%
    assert _setup.calibration_test_size(compare.CompareConfig(), None, 50_000) == 0.2
    params = _setup.protocol_params("ngebm", protocol, protocol["augmentation"], None)
    assert params["iterator_train__drop_last"] is True
    # 45,000 / 64 = 703.1: 703 steps per epoch, the warm-up of 1000 steps lasts 1.42 epochs
    assert 45_000 // params["batch_size"] == 703
    from ebmclassifier.experiments.report import _protocol_text

    (text, _) = _protocol_text(protocol, None, True)
    assert "batches of 64 (the last incomplete batch of an epoch dropped)" in text
    assert "at most 5000 training samples held out for calibration" in text


def test_drop_last_reaches_the_training_loader():
    from sklearn.datasets import make_blobs

    X, y = make_blobs(100, n_features=4, centers=2, random_state=0)
    clf = NGEBMClassifier(max_epochs=1, batch_size=64, iterator_train__drop_last=True,
                          train_split=None, random_state=0).fit(X, y)  # fmt: skip
    assert len(clf.history[-1]["batches"]) == 1  # 100 // 64; the last 36 dropped
