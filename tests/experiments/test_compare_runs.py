"""compare's pipeline: every model trained and measured per seed, skips, failures, the
network option, ensembles (a small stand-in estimator where the real ones are not needed)."""

import numpy as np
import pytest

from ebmclassifier.experiments.compare import (
    CompareConfig,
    ModelSpec,
    default_models,
    run_comparison,
    write_report,
)
from ebmclassifier.experiments.report import summarise

from .compare_stand_ins import (
    SoftmaxRegression,
    stand_in_registry,
)


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_failed_fit_is_recorded_and_the_run_goes_on(tmp_path):
    registry = {
        **stand_in_registry(),
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
        run_comparison(CompareConfig(models=("svm",)), registry=stand_in_registry())
    with pytest.raises(ValueError, match="None of the requested models can run here .'jem': "):
        run_comparison(
            CompareConfig(models=("jem",)), registry=stand_in_registry(), log=lambda m: None
        )


@pytest.mark.slow
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
        run_comparison(CompareConfig(network="resnet"), registry=stand_in_registry())
    with pytest.raises(ValueError, match="depth must be 6 n"):
        run_comparison(CompareConfig(network="wrn-27-2"), registry=stand_in_registry())
    with pytest.raises(ValueError, match="takes images of shape"):
        run_comparison(
            CompareConfig(network="wrn-16-2"), registry=stand_in_registry()
        )  # flat digits


@pytest.mark.slow
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
