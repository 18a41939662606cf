"""The compare pipeline on a small stand-in estimator: runs, skips, summaries, report files."""

import json
import time
import zipfile

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from ebmclassifier import NGEBMClassifier, cli
from ebmclassifier.attacks import pgd_attack
from ebmclassifier.datasets import load_named_dataset
from ebmclassifier.experiments.compare import (
    CompareConfig,
    ModelSpec,
    Standardizer,
    default_models,
    run_comparison,
    write_report,
)
from ebmclassifier.experiments.report import summarise
from ebmclassifier.metrics import adversarial_accuracy


class SoftmaxRegression(ClassifierMixin, BaseEstimator):
    """A linear softmax classifier with the parts of the estimator contract compare uses."""

    def __init__(self, max_epochs=5, lr=0.5, random_state=None, device="cpu", verbose=0,
                 callbacks=None):  # fmt: skip
        self.max_epochs = max_epochs
        self.lr = lr
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.callbacks = callbacks

    def fit(self, X, y):
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        X = torch.as_tensor(np.asarray(X, dtype=np.float32))
        torch.manual_seed(self.random_state or 0)
        self.module_ = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(X[0].numel(), len(self.classes_))
        )
        self.device_ = "cpu"
        self.history = []
        callbacks = [cb for _, cb in (self.callbacks or [])]
        for cb in callbacks:
            cb.on_train_begin(self)
        optimizer = torch.optim.SGD(self.module_.parameters(), lr=self.lr)
        target = torch.as_tensor(y_enc)
        for _ in range(self.max_epochs):
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(self.module_(X), target)
            loss.backward()
            optimizer.step()
            self.history.append({"train_loss": loss.item(), "dur": time.perf_counter() - start})
            for cb in callbacks:
                cb.on_epoch_end(self)
        for cb in callbacks:
            cb.on_train_end(self)
        return self

    def _logits(self, X):
        return self.module_(torch.as_tensor(np.asarray(X, dtype=np.float32)))

    def predict_proba(self, X):
        with torch.no_grad():
            return torch.softmax(self._logits(X), dim=1).numpy().astype(np.float64)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def score_ood(self, X, method="energy"):
        x = torch.as_tensor(np.asarray(X, dtype=np.float32)).requires_grad_(True)
        energy = -torch.logsumexp(self.module_(x), dim=1)
        if method == "energy":
            return energy.detach().numpy()
        if method == "max_softmax":
            return -self.predict_proba(X).max(axis=1)
        (grad,) = torch.autograd.grad(energy.sum(), x)
        return grad.flatten(1).norm(dim=1).numpy()


def _registry():
    return {
        "ce": ModelSpec("ce", "stand-in CE", build=lambda p: SoftmaxRegression(**p)),
        "ce_ts": ModelSpec("ce_ts", "temperature-scaled ce", scores=("max_softmax",),
                           calibrates="ce"),
        "ngebm": ModelSpec("ngebm", "stand-in, other lr",
                           build=lambda p: SoftmaxRegression(**{**p, "lr": 0.1})),
        "jem": ModelSpec("jem", "JEM", unavailable="ebmclassifier.jem.JEMClassifier is missing"),
    }  # fmt: skip


@pytest.fixture(scope="module")
def results():
    config = CompareConfig(
        data="digits", seeds=2, max_epochs=20, n_attack=60, progress=False,
        models=("ce", "ce_ts", "ngebm", "jem"),
    )  # fmt: skip
    messages = []
    return run_comparison(config, registry=_registry(), log=messages.append), messages


def test_runs_and_skips(results):
    results, messages = results
    assert [(r["model"], r["seed"]) for r in results["runs"]] == [
        (m, s) for s in range(2) for m in ("ce", "ce_ts", "ngebm")
    ]
    assert results["skipped"] == {"jem": "ebmclassifier.jem.JEMClassifier is missing"}
    assert messages == ["skipping 'jem': ebmclassifier.jem.JEMClassifier is missing"]
    assert results["data"]["n_test"] == 540 and results["data"]["n_attacked"] == 60
    assert results["epsilons"] == [0.0, 0.02, 0.05, 0.1]


def test_measurements(results):
    results, _ = results
    by = {(r["model"], r["seed"]): r for r in results["runs"]}
    for seed in range(2):
        ce, ts = by[("ce", seed)], by[("ce_ts", seed)]
        assert ce["accuracy"] > 0.85
        # temperature scaling keeps the argmax, so the accuracy, and changes the confidence
        assert ts["accuracy"] == ce["accuracy"] and ts["temperature"] > 0
        assert ts["nll"] <= ce["nll"] + 1e-3  # fitted to minimise the NLL on held-out data
        assert ce["cost_vs_ce"] == 1.0 and ts["robust_accuracy"] is None
        assert set(ce["ood"]) == {"energy", "max_softmax", "approx_mass"}
        assert set(ts["ood"]) == {"max_softmax"}
        assert set(ce["ood"]["energy"]) == {"uniform", "inverted", "permuted"}
        robust = ce["robust_accuracy"]
        assert len(robust) == 4 and robust[-1] < robust[0]
    # robustness at eps=0 is the clean accuracy on the attacked samples
    assert 0.8 < by[("ce", 0)]["robust_accuracy"][0] <= 1.0


def test_summary_is_median_over_seeds(results):
    results, _ = results
    summary = summarise(results)
    values = [r["ece"] for r in results["runs"] if r["model"] == "ngebm"]
    stat = summary["ngebm"]["scalars"]["ece"]
    assert stat["median"] == pytest.approx(np.median(values))
    assert (stat["min"], stat["max"]) == (min(values), max(values))


def test_report_files(results, tmp_path):
    results, _ = results
    tabs = write_report(results, tmp_path, command="python -m ebmclassifier compare")
    report = (tmp_path / "report.md").read_text()
    assert "| ce_ts |" in report and "ce / energy" in report and "jem`: skipped" in report
    for name in tabs["figures"]:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert set(tabs["figures"]) == {
        f"{kind}_{model}.png"
        for kind in ("reliability", "ood", "robustness")
        for model in ("ce", "ngebm")
    } | {"reliability_ce_ts.png", "ood_ce_ts.png", "robustness.png", "risk_coverage.png"}
    saved = json.loads((tmp_path / "results.json").read_text())
    assert len(saved["runs"]) == 6 and "_figure_data" not in saved["runs"][0]
    assert saved["summary"]["ce"]["scalars"]["accuracy"]["n"] == 2
    assert any(line.startswith("OOD AUROC on uniform") for line in tabs["verdicts"])


def test_cli_compare(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("ebmclassifier.experiments.compare.default_models", _registry)
    out = tmp_path / "report"
    code = cli.main(
        ["compare", "--data", "digits", "--models", "ce,ce_ts", "--seeds", "1",
         "--epochs", "3", "--n-attack", "20", "--out", str(out), "--no-progress"]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "| ce_ts |" in printed and "report.md" in printed
    assert "--models ce,ce_ts" in (out / "report.md").read_text()


def test_real_estimators_end_to_end(tmp_path):
    # the default registry: NGEBMClassifier as ce and ngebm, ce_ts over the frozen ce
    config = CompareConfig(
        data="digits", models=("ce", "ce_ts", "ngebm", "ngebm_ts"), seeds=1, max_epochs=2,
        n_attack=30, max_train=300, max_test=100, progress=False,
    )  # fmt: skip
    results = run_comparison(config, log=lambda m: None)
    by = {r["model"]: r for r in results["runs"]}
    assert set(by) == {"ce", "ce_ts", "ngebm", "ngebm_ts"}
    assert by["ce_ts"]["accuracy"] == by["ce"]["accuracy"] > 0.5
    # each *_ts recalibrates its own base: same predictions, its own temperature
    assert by["ngebm_ts"]["accuracy"] == by["ngebm"]["accuracy"]
    assert by["ngebm_ts"]["temperature"] != by["ce_ts"]["temperature"]
    assert by["ngebm_ts"]["nll"] <= by["ngebm"]["nll"] + 1e-3
    # A ratio of wall times: measured, not asserted (timings on shared machines are noise).
    assert np.isfinite(by["ngebm"]["cost_vs_ce"]) and by["ngebm"]["cost_vs_ce"] > 0
    assert set(by["ngebm"]["ood"]) == {"energy", "max_softmax", "approx_mass"}
    tabs = write_report(results, tmp_path)
    assert "ngebm / approx_mass" in tabs["ood_auroc"]


class FailsAtSeedOne(SoftmaxRegression):
    def fit(self, X, y):
        if self.random_state == 1:
            raise FloatingPointError("diverged")
        return super().fit(X, y)


def test_a_failed_fit_is_recorded_and_the_run_goes_on(tmp_path):
    registry = {
        **_registry(),
        "ngebm": ModelSpec("ngebm", "fails", build=lambda p: FailsAtSeedOne(**p)),
    }
    config = CompareConfig(
        models=("ce", "ngebm"), seeds=2, max_epochs=2, n_attack=10, max_test=50, progress=False
    )
    messages = []
    results = run_comparison(config, registry=registry, log=messages.append)
    assert [(r["model"], r["seed"]) for r in results["runs"]] == [
        ("ce", 0),
        ("ngebm", 0),
        ("ce", 1),
    ]
    assert results["failures"] == [
        {"model": "ngebm", "seed": 1, "error": "FloatingPointError('diverged')"}
    ]
    assert messages == ["'ngebm' failed at seed 1: FloatingPointError('diverged')"]
    write_report(results, tmp_path)
    assert "`ngebm` failed at seed 1" in (tmp_path / "report.md").read_text()


def test_unknown_and_unavailable_models():
    with pytest.raises(ValueError, match="Unknown models"):
        run_comparison(CompareConfig(models=("svm",)), registry=_registry())
    with pytest.raises(ValueError, match="None of the requested models can run here .'jem': "):
        run_comparison(CompareConfig(models=("jem",)), registry=_registry(), log=lambda m: None)


def test_no_runnable_model_is_one_error_line_on_the_command_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("ebmclassifier.experiments.compare.default_models", _registry)
    code = cli.main(["compare", "--models", "jem", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1 and "Traceback" not in err
    assert "None of the requested models can run here ('jem': ebmclassifier.jem." in err


def test_standardizer_is_per_feature_for_flat_data_and_per_channel_for_images():
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(50, 6)).astype(np.float32)
    X[:, 0] = 1.0  # constant in training: kept at scale 1, not divided by zero
    Z = Standardizer(X).transform(X)
    assert Z.shape == X.shape and Z.dtype == np.float32
    np.testing.assert_allclose(Z, StandardScaler().fit_transform(X), atol=1e-5)
    assert np.all(Z[:, 0] == 0.0)

    images = rng.normal(size=(50, 3, 4, 5)).astype(np.float32) * [[[1.0]], [[5.0]], [[0.1]]]
    images += np.arange(3, dtype=np.float32)[:, None, None]
    Z = Standardizer(images).transform(images)
    for c in range(3):  # one mean and scale per channel, over samples and positions
        channel = images[:, c]
        np.testing.assert_allclose(
            Z[:, c], (channel - channel.mean()) / channel.std(), rtol=1e-4, atol=1e-4
        )
    layer = Standardizer(images).as_module("cpu")
    np.testing.assert_allclose(layer(torch.from_numpy(images)).numpy(), Z, atol=1e-5)


def _recording_registry(seen: dict) -> dict:
    """A registry whose one model, ``ce``, stores the X it is fitted on in ``seen["X_fit"]``."""

    class Recording(SoftmaxRegression):
        def fit(self, X, y):
            seen["X_fit"] = np.asarray(X)
            return super().fit(X, y)

    return {"ce": ModelSpec("ce", "records", build=lambda p: Recording(**p))}


def test_models_train_on_standardized_inputs_and_are_attacked_in_raw_units():
    seen = {}
    registry = _recording_registry(seen)
    config = CompareConfig(models=("ce",), seeds=1, max_epochs=3, n_attack=20, progress=False)
    results = run_comparison(config, registry=registry)
    # the fit part (80% of the training split) comes from the standardized training split
    X_train = load_named_dataset("digits").X_train
    standardized = {row.tobytes() for row in Standardizer(X_train).transform(X_train)}
    assert len(seen["X_fit"]) == len(X_train) - int(np.ceil(0.2 * len(X_train)))
    assert all(row.tobytes() in standardized for row in seen["X_fit"])
    assert results["data"]["standardized"] is True
    assert results["data"]["input_range"] == [0.0, 1.0]

    raw = CompareConfig(models=("ce",), seeds=1, max_epochs=3, n_attack=20, progress=False,
                        standardize=False)  # fmt: skip
    run_comparison(raw, registry=registry)
    assert seen["X_fit"].min() >= 0.0 and seen["X_fit"].max() <= 1.0


def test_attacks_through_the_standardization_stay_inside_the_raw_ball():
    rng = np.random.default_rng(0)
    X_raw = (rng.uniform(0, 1, size=(40, 6)) * np.linspace(0.1, 1, 6)).astype(np.float32)
    y = (X_raw[:, 0] > X_raw[:, 1]).astype(int)
    standardizer = Standardizer(X_raw)
    model = SoftmaxRegression(max_epochs=20).fit(standardizer.transform(X_raw), y)
    # what compare's attack differentiates: the standardization, then the model's network
    network = torch.nn.Sequential(standardizer.as_module("cpu"), model.module_)
    x = torch.from_numpy(X_raw)
    with torch.no_grad():  # the network on raw inputs is the model on standardized ones
        np.testing.assert_allclose(
            network(x).numpy(), model._logits(standardizer.transform(X_raw)).numpy(),
            atol=1e-5,
        )  # fmt: skip
    x_adv = pgd_attack(network, x, torch.from_numpy(y), eps=0.05, norm="linf",
                       input_min=0.0, input_max=1.0)  # fmt: skip
    # the ball is in raw units: every raw feature moves at most 0.05 (in standardized units
    # the low-variance features would have moved up to 0.05 / their std)
    assert float((x_adv - x).abs().max()) <= 0.05 + 1e-6
    assert float((x_adv - x).abs().max()) > 0.04
    assert float(x_adv.min()) >= 0.0 and float(x_adv.max()) <= 1.0
    # adversarial_accuracy with the standardization as preprocess runs that same attack
    acc = adversarial_accuracy(
        model,
        X_raw,
        y,
        [0.0, 0.05],
        random_state=0,
        preprocess=standardizer.as_module("cpu"),
        input_range=(0.0, 1.0),
    )
    seed = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))
    x_adv = pgd_attack(network, x, torch.from_numpy(y), eps=0.05, input_min=0.0, input_max=1.0,
                       generator=torch.Generator().manual_seed(seed))  # fmt: skip
    with torch.no_grad():
        expected = float((network(x_adv).argmax(1).numpy() == y).mean())
    clean = model.predict(standardizer.transform(X_raw))
    assert acc[1] == expected and acc[0] == float(np.mean(clean == y))


def test_images_from_a_file_are_standardized_per_channel_and_attacked_in_raw_units(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 60)
    X = rng.uniform(0, 0.5, size=(120, 2, 4, 4)).astype(np.float32)
    X[y == 1, 0, :2] += 0.5  # class 1: the top half of channel 0 is brighter
    X[:, 1] *= 10.0  # channel 1 on another scale
    path = tmp_path / "images.npz"
    np.savez(path, X=X, y=y)
    seen = {}
    registry = _recording_registry(seen)
    config = CompareConfig(
        data=str(path), models=("ce",), seeds=1, max_epochs=30, epsilons=(0.0, 0.3),
        n_attack=None, progress=False,
    )  # fmt: skip
    results = run_comparison(config, registry=registry)
    channel_std = seen["X_fit"].std(axis=(0, 2, 3))
    np.testing.assert_allclose(channel_std, [1.0, 1.0], atol=0.15)  # both channels at scale 1
    (run,) = results["runs"]
    assert run["robust_accuracy"][0] == pytest.approx(run["accuracy"])  # eps=0: clean accuracy
    assert results["epsilons"] == [0.0, 0.3]
    assert results["data"]["input_range"][1] > 4.5  # raw units: channel 1 reaches 5


def test_network_option_trains_a_wide_resnet_on_images(tmp_path):
    from ebmclassifier.nn import WideResNet

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 40)
    X = rng.uniform(0, 1, size=(80, 3, 8, 8)).astype(np.float32)
    X[y == 1, 0] *= 0.5
    path = tmp_path / "images.npz"
    np.savez(path, X=X, y=y)
    config = CompareConfig(
        data=str(path), models=("ce",), seeds=1, max_epochs=1, network="wrn-10-1",
        n_attack=10, progress=False,
    )  # fmt: skip
    fitted = []
    registry = {
        "ce": ModelSpec(
            "ce", "records", build=lambda p: fitted.append(p) or default_models()["ce"].build(p)
        )
    }
    results = run_comparison(config, registry=registry)
    assert fitted[0]["module"] is WideResNet and fitted[0]["module__depth"] == 10
    assert results["config"]["network"] == "wrn-10-1" and len(results["runs"]) == 1
    write_report(results, tmp_path / "report")
    assert "`wrn-10-1` (WideResNet" in (tmp_path / "report" / "report.md").read_text()


def test_network_option_is_checked_before_training():
    with pytest.raises(ValueError, match="Unknown network 'resnet'"):
        run_comparison(CompareConfig(network="resnet"), registry=_registry())
    with pytest.raises(ValueError, match="depth must be 6 n"):
        run_comparison(CompareConfig(network="wrn-27-2"), registry=_registry())
    with pytest.raises(ValueError, match="takes images of shape"):
        run_comparison(CompareConfig(network="wrn-16-2"), registry=_registry())  # flat digits


def test_cli_reports_bad_data_and_options_without_a_traceback(tmp_path, capsys):
    code = cli.main(["compare", "--data", "cifar10", "--data-dir", str(tmp_path), "--no-progress"])
    assert code == 2
    assert "error: CIFAR-10 not found" in capsys.readouterr().err
    assert cli.main(["compare", "--network", "resnet", "--no-progress"]) == 2
    assert "Unknown network 'resnet'" in capsys.readouterr().err


def test_report_states_divergences(results, tmp_path):
    import copy

    results, _ = results
    results = copy.deepcopy(results)
    for run in results["runs"]:
        if run["model"] == "ngebm":
            run["divergences"] = 0
    write_report(results, tmp_path / "none")
    assert (
        "`ngebm`: no training divergence in any fit." in (tmp_path / "none/report.md").read_text()
    )
    results["runs"][2]["divergences"] = 4  # seed 0's ngebm
    write_report(results, tmp_path / "some")
    text = (tmp_path / "some/report.md").read_text()
    assert "`ngebm` recovered from 2 [0, 4] training divergences per fit." in text


def test_several_reports_are_combined_from_memory(results, tmp_path, monkeypatch):
    # write_reports used to read back each data set's report.md and results.json
    import copy
    from pathlib import Path

    from ebmclassifier.experiments.report import write_reports

    results, _ = results
    other = copy.deepcopy(results)
    other["data"]["name"] = "other"
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("a report was read back"))
    printed = write_reports([results, other], tmp_path, command="python -m ebmclassifier compare")
    monkeypatch.undo()
    assert len(printed) == 2 and printed[0]["main"] == printed[1]["main"]
    report = (tmp_path / "report.md").read_text()
    section = (tmp_path / "other" / "report.md").read_text()
    assert "## ebmclassifier compare: other" in report and "### Summary" in report
    assert "![risk_coverage.png](other/risk_coverage.png)" in report
    assert section.splitlines()[4] in report.splitlines()  # the data line, as in its folder
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["datasets"]["other"] == json.loads((tmp_path / "other/results.json").read_text())
    assert list(saved["datasets"]) == ["digits", "other"]


def _st(median, low, high, n=3):
    return {"median": median, "min": low, "max": high, "n": n}


@pytest.mark.parametrize(
    "candidates, lower, verdict, spread",
    [
        ({"a": _st(0.9, 0.88, 0.92), "b": _st(0.8, 0.7, 0.85)}, False,
         "a (0.900) ahead of b (0.800), clearly: no seed overlap", "outside the seed spread"),
        ({"a": _st(0.9, 0.8, 0.92), "b": _st(0.85, 0.7, 0.86)}, False,
         "a (0.900) ahead of b (0.850), within the seed spread", "within the seed spread"),
        ({"a": _st(0.1, 0.05, 0.12), "b": _st(0.2, 0.15, 0.3)}, True,
         "a (0.100) ahead of b (0.200), clearly: no seed overlap", "outside the seed spread"),
        ({"a": _st(0.1, 0.05, 0.2), "b": _st(0.2, 0.15, 0.3)}, True,
         "a (0.100) ahead of b (0.200), within the seed spread", "within the seed spread"),
        ({"a": _st(0.1, 0.1, 0.1, n=1), "b": _st(0.2, 0.2, 0.2, n=1)}, True,
         "a (0.100) ahead of b (0.200), one seed, so no spread to judge the gap by", "one seed"),
        ({"a": _st(0.1, 0.0, 0.2), "b": _st(0.1, 0.1, 0.1)}, True, "a and b tied (0.100)",
         "within the seed spread"),
    ],
)  # fmt: skip
def test_verdict_gap_against_the_seed_spread(candidates, lower, verdict, spread):
    # one rule for "outside the seed spread" in every verdict (_compare_best, _spread)
    from ebmclassifier.experiments._tables import _compare_best, _spread

    assert _compare_best(candidates, lower=lower) == verdict
    assert _spread(candidates["a"], candidates["b"], higher=not lower) == spread


def test_the_ce_ts_sentence_only_with_ce_ts(results, tmp_path):
    import copy

    results, _ = results
    sentence = "`ce_ts` trains nothing more than `ce` and keeps its predictions"
    write_report(results, tmp_path / "with")
    assert sentence in (tmp_path / "with" / "report.md").read_text()
    without = copy.deepcopy(results)
    del without["models"]["ce_ts"], without["calibrated"]["ce_ts"]
    without["runs"] = [r for r in without["runs"] if r["model"] != "ce_ts"]
    write_report(without, tmp_path / "without")
    text = (tmp_path / "without" / "report.md").read_text()
    assert sentence not in text and "`cost x CE`: seconds per epoch over the CE model's" in text


@pytest.mark.parametrize("name, page", [("compare", "compare.md"), ("bench", "performance.md")])
def test_every_option_of_a_command_is_in_its_docs_page(name, page):
    # the options are declared once, in the command; the docs page must not fall behind
    import re
    from pathlib import Path

    from ebmclassifier.experiments import commands

    (command,) = [c for c in commands() if c.name == name]
    text = (Path(__file__).resolve().parents[1] / "docs" / page).read_text()
    missing = [o.flag for o in command.options if not re.search(rf"{o.flag}(?![\w-])", text)]
    assert not missing, f"docs/{page} does not mention {missing}"


def test_the_reproducing_command_line_spells_every_given_option():
    from ebmclassifier.experiments.compare import COMMAND

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


# ----------------------------------------------------------------------------- issue #17:
# held-out classes, OOD files, post-hoc detectors, AURC and OOD decisions


class RecordingNGEBM(NGEBMClassifier):
    """NGEBMClassifier that keeps what it was fitted on (and itself) in ``SEEN``."""

    SEEN: dict = {}

    def fit(self, X, y, **kwargs):
        RecordingNGEBM.SEEN.update(X_fit=np.asarray(X), y_fit=np.asarray(y), model=self)
        return super().fit(X, y, **kwargs)


def _tiny_ce(params):
    return RecordingNGEBM(beta=0.0, module__hidden_sizes=(16,), **params)


@pytest.fixture(scope="module")
def near_ood(tmp_path_factory):
    """One seed of ce + ce_ts on digits without labels 8 and 9, every detector, one OOD file."""
    folder = tmp_path_factory.mktemp("ood")
    X_file = np.random.default_rng(0).uniform(0, 1, size=(30, 64)).astype(np.float32)
    np.savez(folder / "my_noise.npz", X=X_file)
    registry = {
        "ce": ModelSpec("ce", "tiny CE", build=_tiny_ce),
        "ce_ts": default_models()["ce_ts"],
    }
    config = CompareConfig(
        models=("ce", "ce_ts"), seeds=1, max_epochs=2, n_attack=10, progress=False,
        ood_classes=("8", "9"), ood_files=(str(folder / "my_noise.npz"),),
        detectors=("mahalanobis", "knn", "vim"),
    )  # fmt: skip
    results = run_comparison(config, registry=registry)
    return results, dict(RecordingNGEBM.SEEN), config, X_file


def _standardized_sets(config):
    """compare's own standardized data and the seed-0 calibration split, recomputed."""
    from sklearn.model_selection import train_test_split

    from ebmclassifier.experiments._setup import load_setup

    data = load_setup(config).data
    _, X_cal, _, _ = train_test_split(
        data.X_train, data.y_train, test_size=0.2, stratify=data.y_train, random_state=0
    )
    return data, X_cal


def test_held_out_classes_never_reach_training_and_become_ood(near_ood):
    results, seen, _, _ = near_ood
    full = load_named_dataset("digits")
    assert not np.isin(seen["y_fit"], [8, 9]).any()
    assert seen["model"].classes_.tolist() == list(range(8))  # the fitted classes lack 8, 9
    assert results["data"]["classes"] == list(range(8))
    assert results["data"]["held_out_classes"] == [8, 9]
    n_held = int(np.isin(full.y_test, [8, 9]).sum())
    assert results["data"]["ood_sets"]["held-out classes"] == n_held
    assert results["data"]["n_test"] == len(full.y_test) - n_held
    for run in results["runs"]:
        assert "held-out classes" in run["ood"]["max_softmax"]
        assert set(run["ood_decisions"]["max_softmax"]["miss_rate"]) == set(
            results["data"]["ood_sets"]
        )


def test_an_ood_file_is_read_and_standardized_like_the_test_split(near_ood):
    results, _, config, X_file = near_ood
    data, _ = _standardized_sets(config)
    assert results["data"]["ood_sets"]["my_noise"] == 30
    assert results["data"]["ood_files"] == {"my_noise": config.ood_files[0]}
    # the standardizer is the training split's (labels 0-7 only), as for the test split
    X_train = load_named_dataset("digits").X_train
    in_distribution = X_train[~np.isin(load_named_dataset("digits").y_train, [8, 9])]
    expected = Standardizer(in_distribution).transform(X_file)
    np.testing.assert_array_equal(data.ood["my_noise"], expected)


def test_detectors_are_fitted_on_the_fit_part_of_the_training_split_only(monkeypatch):
    from ebmclassifier.detectors import (
        KNNDetector,
        MahalanobisDetector,
        ViMDetector,
        penultimate_features,
    )

    fitted_on = {}
    for cls in (MahalanobisDetector, KNNDetector, ViMDetector):
        original = cls.fit

        def recording_fit(self, features, y=None, _original=original, **kwargs):
            fitted_on[type(self).__name__] = (np.asarray(features), y)
            return _original(self, features, y, **kwargs)

        monkeypatch.setattr(cls, "fit", recording_fit)
    config = CompareConfig(
        models=("ce",), seeds=1, max_epochs=1, n_attack=10, max_test=60, progress=False,
        detectors=("mahalanobis", "knn", "vim"),
    )  # fmt: skip
    registry = {"ce": ModelSpec("ce", "tiny CE", build=_tiny_ce)}
    results = run_comparison(config, registry=registry)
    seen = dict(RecordingNGEBM.SEEN)
    expected = penultimate_features(seen["model"], seen["X_fit"])
    assert set(fitted_on) == {"MahalanobisDetector", "KNNDetector", "ViMDetector"}
    for features, _ in fitted_on.values():
        # exactly the features of the samples CE trained on: no test or calibration sample
        np.testing.assert_array_equal(features, expected)
    np.testing.assert_array_equal(fitted_on["MahalanobisDetector"][1], seen["y_fit"])
    # k = max(1, round(n_fit / 1000)): 1 on digits' 1,005 fit samples
    assert results["detectors"]["knn"] == "KNNDetector(n_neighbors=1)"
    (run,) = results["runs"]
    assert {"mahalanobis", "knn", "vim"} <= set(run["ood"]) and "knn" in run["aurc"]


def test_detectors_share_one_feature_pass_per_array_and_score_as_fit_detector(monkeypatch):
    import ebmclassifier.detectors as detectors_module
    import ebmclassifier.experiments._measure as measure_module
    from ebmclassifier.detectors import (
        KNNDetector,
        MahalanobisDetector,
        ViMDetector,
        fit_detector,
        penultimate_features,
    )
    from ebmclassifier.metrics import ood_metrics

    passes = {}  # id of the array -> feature passes over it

    def counting(estimator, X, **kwargs):
        passes[id(X)] = passes.get(id(X), 0) + 1
        return penultimate_features(estimator, X, **kwargs)

    # both: fit_detector reads the name from its own module
    monkeypatch.setattr(measure_module, "penultimate_features", counting)
    monkeypatch.setattr(detectors_module, "penultimate_features", counting)
    config = CompareConfig(
        models=("ce",), seeds=1, max_epochs=1, n_attack=10, max_test=60, progress=False,
        detectors=("mahalanobis", "knn", "vim"),
    )  # fmt: skip
    results = run_comparison(config, registry={"ce": ModelSpec("ce", "tiny CE", build=_tiny_ce)})
    # the fit part, the test split, three OOD sets, the calibration split: once each (each went
    # through the network once per detector before)
    assert sorted(passes.values()) == [1] * 6
    monkeypatch.undo()
    # and the scores are fit_detector's, every detector on the same features
    seen = dict(RecordingNGEBM.SEEN)
    model, (run,) = seen["model"], results["runs"]
    data, X_cal = _standardized_sets(config)
    for name, detector in (("mahalanobis", MahalanobisDetector()), ("knn", KNNDetector(1)),
                           ("vim", ViMDetector())):  # fmt: skip
        assert results["detectors"][name] == repr(detector)
        fitted = fit_detector(detector, model, seen["X_fit"], seen["y_fit"])
        s_test = fitted.score_ood(penultimate_features(model, data.X_test))
        for ood_name, X_ood in data.ood.items():
            s_ood = fitted.score_ood(penultimate_features(model, X_ood))
            assert run["ood"][name][ood_name] == ood_metrics(s_test, s_ood), (name, ood_name)
        s_cal = np.sort(fitted.score_ood(penultimate_features(model, X_cal)))
        threshold = s_cal[int(np.ceil(0.95 * len(s_cal))) - 1]
        assert run["ood_decisions"][name]["threshold"] == threshold, name


def test_aurc_and_ood_decisions_equal_a_hand_computation(near_ood):
    from ebmclassifier.metrics import aurc

    results, seen, config, _ = near_ood
    model = seen["model"]
    data, X_cal = _standardized_sets(config)
    ce = next(r for r in results["runs"] if r["model"] == "ce")
    proba = model.predict_proba(data.X_test)
    for score in ("energy", "max_softmax", "approx_mass"):
        s_test = model.score_ood(data.X_test, method=score)
        expected = aurc(data.y_test, proba, -s_test, classes=model.classes_)
        assert ce["aurc"][score] == pytest.approx(expected, abs=1e-12)
        # calibrate_ood's rule by hand: the ceil(0.95 n)-th smallest calibration score
        s_cal = np.sort(model.score_ood(X_cal, method=score))
        threshold = s_cal[int(np.ceil(0.95 * len(s_cal))) - 1]
        decision = ce["ood_decisions"][score]
        assert decision["threshold"] == pytest.approx(threshold)
        assert decision["false_positive_rate"] == pytest.approx(np.mean(s_test > threshold))
        for name, X_ood in data.ood.items():
            missed = np.mean(model.score_ood(X_ood, method=score) <= threshold)
            assert decision["miss_rate"][name] == pytest.approx(missed), name
    # max_softmax's AURC is the plain max-probability one
    assert ce["aurc"]["max_softmax"] == pytest.approx(aurc(data.y_test, proba), abs=1e-12)
    # a detector's threshold follows the same rule over its own score
    from ebmclassifier.detectors import KNNDetector, fit_detector, penultimate_features

    knn = fit_detector(KNNDetector(n_neighbors=1), model, seen["X_fit"], seen["y_fit"])
    s_cal = np.sort(knn.score_ood(penultimate_features(model, X_cal)))
    threshold = s_cal[int(np.ceil(0.95 * len(s_cal))) - 1]
    assert ce["ood_decisions"]["knn"]["threshold"] == pytest.approx(threshold)


def test_report_shows_the_new_tables_and_figure(near_ood, tmp_path):
    results, _, _, _ = near_ood
    tabs = write_report(results, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "| model | accuracy | ECE | NLL | AURC |" in tabs["main"]
    assert (
        "| ce / knn |" in tabs["ood_auroc"] and "missed: held-out classes" in tabs["ood_decisions"]
    )
    assert "| ce_ts / max_softmax |" in tabs["aurc"]
    assert "the labels 8, 9, which no model saw in training" in report
    assert "network the estimators' default for the data's shape" in report
    assert "`my_noise` is read from" in report and "post-hoc detector `KNNDetector" in report
    assert "risk_coverage.png" in tabs["figures"]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["runs"][0]["ood_decisions"]["knn"]["miss_rate"]["held-out classes"] >= 0
    assert any(line.startswith("Calibration regime: CE's ECE") for line in tabs["verdicts"])


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


def test_an_ood_csv_with_flat_rows_is_reshaped_to_the_sample_shape(tmp_path):
    from ebmclassifier.experiments._ood_sets import read_ood_file

    rows = np.arange(64, dtype=np.float32).reshape(2, 32)
    (tmp_path / "flat.csv").write_text(
        "\n".join(",".join(f"{v:g}" for v in row) + ",0" for row in rows)  # label column last
    )
    X = read_ood_file(tmp_path / "flat.csv", (2, 4, 4), "images")
    np.testing.assert_array_equal(X, rows.reshape(2, 2, 4, 4))
    (tmp_path / "nan.csv").write_text("1,nan,0\n")
    with pytest.raises(ValueError, match="nan.csv'.*NaN"):
        read_ood_file(tmp_path / "nan.csv", (2,), "pairs")


def test_several_data_sets_run_in_one_command_one_section_each(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("ebmclassifier.experiments.compare.default_models", _registry)
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
    assert "## blobs.npz" in printed and "## wide.npz" in printed
    report = (out / "report.md").read_text()
    assert "## ebmclassifier compare: blobs.npz" in report
    assert "## ebmclassifier compare: wide.npz" in report
    assert "![risk_coverage.png](wide.npz/risk_coverage.png)" in report
    assert (out / "wide.npz" / "risk_coverage.png").exists()
    saved = json.loads((out / "results.json").read_text())
    assert list(saved["datasets"]) == ["blobs.npz", "wide.npz"]
    assert saved["datasets"]["wide.npz"]["data"]["input_shape"] == [7]


def test_holding_out_labels_the_test_split_lacks_is_refused():
    from sklearn.utils import Bunch

    from ebmclassifier.experiments._ood_sets import hold_out_classes

    X = np.zeros((3, 2), dtype=np.float32)
    data = Bunch(name="toy", X_train=X, y_train=np.array([0, 1, 2]), X_test=X[:2],
                 y_test=np.array([0, 1]), ood={})  # fmt: skip
    with pytest.raises(ValueError, match=r"toy has no sample of the labels \['2'\]"):
        hold_out_classes(data, [2])
    hold_out_classes(data, [1])
    assert data.y_train.tolist() == [0, 2] and data.y_test.tolist() == [0]
    assert len(data.ood["held-out classes"]) == 1


def test_ensembles_mix_five_seeds_nets_and_cost_five_fits(tmp_path):
    from ebmclassifier import ProductOfExperts

    built = []
    registry = default_models()
    spec = registry["ce_ens"]
    registry["ce_ens"] = ModelSpec(
        "ce_ens", spec.description, build=lambda p: built.append(spec.build(p)) or built[-1]
    )
    small = {"module__hidden_sizes": (8,)}
    config = CompareConfig(
        models=("ce", "ce_ens"), seeds=1, max_epochs=2, max_train=200, max_test=60, n_attack=10,
        progress=False, extra_params={"ce": small, "ce_ens": small},
    )  # fmt: skip
    results = run_comparison(config, registry=registry)
    (ensemble,) = built
    assert isinstance(ensemble, ProductOfExperts) and ensemble.combine == "mixture"
    assert [net.random_state for net in ensemble.estimators_] == [0, 1, 2, 3, 4]
    assert all(net.beta == 0.0 for net in ensemble.estimators_)
    run = next(r for r in results["runs"] if r["model"] == "ce_ens")
    # five fits: one epoch of each expert (skorch's median epoch duration), summed
    expected = sum(np.median([row["dur"] for row in net.history]) for net in ensemble.estimators_)
    assert run["seconds_per_epoch"] == pytest.approx(expected)
    assert run["robust_accuracy"] is None and set(run["ood"]) == {
        "energy",
        "max_softmax",
        "approx_mass",
    }
    assert run["ood_decisions"]["energy"]["false_positive_rate"] >= 0.0
    tabs = write_report(results, tmp_path)
    assert "| ce_ens |" in tabs["main"] and "not attacked" in tabs["main"]
    assert "An ensemble (`*_ens`) trains five nets" in (tmp_path / "report.md").read_text()


# ------------------------------------------------------------------ --protocol paper (#18)


def _cifar10_files(folder, n=24):
    import pickle

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = [int(k) for k in rng.integers(0, 2, size=n)]  # two classes: a quick fit
        batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": labels}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))


def test_protocol_paper_runs_end_to_end_on_cifar_files_and_is_recorded(tmp_path, capsys):
    import json

    _cifar10_files(tmp_path / "cifar")
    out = tmp_path / "report"
    code = cli.main([
        "compare", "--data", "cifar10", "--data-dir", str(tmp_path / "cifar"),
        "--protocol", "paper", "--network", "wrn-10-1", "--epochs", "1", "--seeds", "1",
        "--models", "ce,ngebm", "--n-attack", "4", "--epsilons", "0,0.01", "--out", str(out),
        "--no-progress",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    protocol = results["protocol"]
    assert protocol["network"] == "wrn-28-10" and protocol["lr"] == 1e-4
    assert protocol["lr_milestones"] == [160, 180] and protocol["augmentation"]["padding"] == 4
    assert results["config"]["network"] == "wrn-10-1"  # the command line overrides the preset
    assert results["config"]["protocol"] == "paper" and results["lr"] == 1e-4
    assert (
        "Protocol `paper` (cifar10): network wrn-28-10, 150 epochs"
        in (out / "report.md").read_text()
    )


def test_protocol_paper_builds_the_papers_estimators(tmp_path):
    from ebmclassifier.augment import Compose

    _cifar10_files(tmp_path / "cifar")
    built = {}

    def spy(name):
        def build(params):
            built[name] = params
            return default_models()[name].build(params)

        return ModelSpec(name, name, build=build)

    config = CompareConfig(
        data="cifar10", data_dir=str(tmp_path / "cifar"), models=("ngebm", "jem"), seeds=1,
        max_epochs=1, network="wrn-10-1", n_attack=4, epsilons=(0.0,), protocol="paper",
        progress=False, extra_params={"jem": {"buffer_size": 64, "sgld_steps": 2}},
    )  # fmt: skip
    run_comparison(config, registry={name: spy(name) for name in ("ngebm", "jem")})
    ngebm, jem = built["ngebm"], built["jem"]
    assert isinstance(ngebm["augmentation"], Compose) and ngebm["batch_size"] == 64
    assert ngebm["energy_var_weight"] == 0.5 and ngebm["lr"] == 1e-4
    assert [name for name, _ in ngebm["callbacks"]] == ["epoch_bar", "lr_warmup", "lr_decay"]
    assert jem["buffer_init"] == "uniform" and jem["sampler"] == "sgld"
    assert jem["buffer_size"] == 64  # explicit extra parameters win over the preset


class _Built(Exception):
    """Raised by a spy build: the parameters are known, nothing needs to train."""


@pytest.mark.parametrize("standardize, noise_std", [(True, 0.06), (False, 0.015)])
def test_protocol_paper_noise_is_in_the_units_the_models_train_in(tmp_path, standardize, noise_std):
    # The scripts add std 0.03 to images in [-1, 1]: about 0.06 on standardized inputs, 0.015
    # on [0, 1] pixels; --no-standardize used to double it as well (0.06, four times too much).
    from ebmclassifier.augment import GaussianNoise
    from ebmclassifier.experiments.report import _protocol_text
    from ebmclassifier.recipes import paper_protocol

    _cifar10_files(tmp_path / "cifar")
    built = {}

    def spy(params):
        built.update(params)
        raise _Built

    config = CompareConfig(
        data="cifar10", data_dir=str(tmp_path / "cifar"), models=("ngebm",), seeds=1,
        max_epochs=1, network="wrn-10-1", n_attack=4, epsilons=(0.0,), protocol="paper",
        progress=False, standardize=standardize,
    )  # fmt: skip
    with pytest.raises(_Built):
        run_comparison(config, registry={"ngebm": ModelSpec("ngebm", "spy", build=spy)})
    (noise,) = [t for t in built["augmentation"].transforms if isinstance(t, GaussianNoise)]
    assert noise.std == pytest.approx(noise_std)
    inputs = "standardized inputs" if standardize else "raw [0, 1] inputs"
    (text, _) = _protocol_text(paper_protocol("cifar10"), {"noise_std": noise.std}, standardize)
    assert (
        f"noise_std=0.03 (the scripts' noise, on images in [-1, 1]; applied as noise_std="
        f"{noise_std:g} on the {inputs})" in text
    )


def test_protocol_paper_is_refused_for_other_data_and_unknown_names(capsys):
    assert cli.main(["compare", "--protocol", "paper", "--no-progress"]) == 2
    assert "recipe for cifar10, cifar100, svhn; 'digits' is not one" in capsys.readouterr().err
    assert cli.main(["compare", "--protocol", "papers", "--no-progress"]) == 2
    assert "invalid choice: 'papers'" in capsys.readouterr().err
