"""compare's OOD sets (held-out classes, files), post-hoc detectors, AURC and OOD decisions
(issue #17)."""

import json

import numpy as np
import pytest

from ebmclassifier.datasets import load_named_dataset
from ebmclassifier.experiments.compare import (
    CompareConfig,
    ModelSpec,
    Standardizer,
    default_models,
    run_comparison,
    write_report,
)

from .compare_stand_ins import (
    RecordingNGEBM,
    tiny_ce,
)


@pytest.fixture(scope="module")
def near_ood(tmp_path_factory):
    """One seed of ce + ce_ts on digits without labels 8 and 9, every detector, one OOD file."""
    folder = tmp_path_factory.mktemp("ood")
    X_file = np.random.default_rng(0).uniform(0, 1, size=(30, 64)).astype(np.float32)
    np.savez(folder / "my_noise.npz", X=X_file)
    registry = {
        "ce": ModelSpec("ce", "tiny CE", build=tiny_ce),
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
    registry = {"ce": ModelSpec("ce", "tiny CE", build=tiny_ce)}
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
    results = run_comparison(config, registry={"ce": ModelSpec("ce", "tiny CE", build=tiny_ce)})
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


@pytest.mark.slow
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
    assert any(
        line.startswith("Calibration regime (ECE, lower is better): CE's ECE")
        for line in tabs["verdicts"]
    )
    # the detector the summary table pairs with ce, the first of --detectors, has its histogram
    assert results["headline_detector"] == "mahalanobis"
    assert "ood_ce_mahalanobis.png" in tabs["figures"]


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
