"""The compare pipeline on a small stand-in estimator: runs, skips, summaries, report files."""

import json
import time

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from ebmclassifier import cli
from ebmclassifier.attacks import pgd_attack
from ebmclassifier.compare import (
    CompareConfig,
    ModelSpec,
    Standardizer,
    default_models,
    run_comparison,
    write_report,
)
from ebmclassifier.datasets import load_named_dataset
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
    } | {"reliability_ce_ts.png", "ood_ce_ts.png", "robustness.png"}
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
    with pytest.raises(RuntimeError, match="None of the requested models"):
        run_comparison(CompareConfig(models=("jem",)), registry=_registry(), log=lambda m: None)


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
        "python -m ebmclassifier compare --data digits --models ce,ngebm --seeds 3 --out report "
        "--lr 0.003 --device auto --network wrn-16-2 --epsilons 0,0.05 --norm linf "
        "--attack-steps 10 --n-attack 500 --no-standardize"
    )
    config = CompareConfig(**COMMAND.fields(args))
    assert (config.epsilons, config.standardize, config.progress) == ([0.0, 0.05], False, False)
    default = cli.build_parser().parse_args(["compare"])
    assert "--network" not in COMMAND.command_line(default)
