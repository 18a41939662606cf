"""Pipelines and the composites around the estimators, saved without pickle (issue #48).

``ebmclassifier.save`` writes a scikit-learn object around the library's estimators (a
``Pipeline``, ``ColumnTransformer``, ``FeatureUnion``, ``CalibratedClassifierCV``, a search's
``best_estimator_``) as one file: skops's file of the scikit-learn part with a stand-in for each
estimator, and each estimator's own file. ``load`` gives back the same predictions bitwise, and
refuses a file that names a type it does not trust, by name, before anything is built.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import zipfile
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.decomposition import PCA
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

import ebmclassifier
from ebmclassifier import (
    ConceptComposition,
    DistributionalConstraint,
    JEMClassifier,
    LatentStructureClassifier,
    NGEBMClassifier,
    ProductOfExperts,
    load,
    save,
)
from ebmclassifier.saving import FileLimits

FAST = dict(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
ESTIMATORS = {
    "ngebm": lambda: NGEBMClassifier(**FAST),
    "jem": lambda: JEMClassifier(**FAST, sgld_steps=2, buffer_size=30),
    "latent": lambda: LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0),
}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)).astype(np.float32) * [1, 10, 100, 0.1]
    return X.astype(np.float32), np.array(["cat", "dog", "owl"])[np.arange(60) % 3]


@pytest.fixture(scope="module")
def frame(data):
    X, y = data
    kinds = np.array(["a", "b", "c"])[np.arange(60) % 3]
    return pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "kind": kinds}), y


def _round_trip(obj, tmp_path, **kwargs):
    path = tmp_path / "model.ebm"
    save(obj, path)
    return load(path, **kwargs)


def _members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(path, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, raw in members.items():
            archive.writestr(name, raw)


# ---------------------------------------------------------------- round trips


def test_save_is_the_library_s_beside_load():
    # ebmclassifier.save raised AttributeError: the obvious first try failed
    assert ebmclassifier.save is ebmclassifier.saving.save
    assert "save" in ebmclassifier.__all__


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_a_pipeline_of_a_scaler_and_each_estimator_predicts_the_same_bitwise(data, tmp_path, name):
    X, y = data
    pipe = make_pipeline(StandardScaler(), ESTIMATORS[name]()).fit(X, y)
    restored = _round_trip(pipe, tmp_path)
    assert type(restored) is Pipeline
    assert [step for step, _ in restored.steps] == [step for step, _ in pipe.steps]
    assert type(restored[-1]) is type(pipe[-1])
    np.testing.assert_array_equal(restored.predict_proba(X), pipe.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), pipe.predict(X))
    np.testing.assert_array_equal(restored[:-1].transform(X), pipe[:-1].transform(X))
    np.testing.assert_array_equal(restored[-1].energy(X), pipe[-1].energy(X))


def test_a_column_transformer_over_a_dataframe_predicts_the_same_bitwise(frame, tmp_path):
    X, y = frame
    columns = ColumnTransformer(
        [("numbers", StandardScaler(), ["x0", "x1", "x2"]), ("kinds", OneHotEncoder(), ["kind"])]
    )
    pipe = make_pipeline(columns, NGEBMClassifier(**FAST)).fit(X, y)
    restored = _round_trip(pipe, tmp_path)
    np.testing.assert_array_equal(restored.predict_proba(X), pipe.predict_proba(X))
    assert restored[0].feature_names_in_.tolist() == ["x0", "x1", "x2", "kind"]
    with pytest.raises(ValueError, match="columns are missing"):  # still checks its input
        restored.predict_proba(X.drop(columns="kind"))


def _constraint_pipeline(X, y):
    """A fitted scaler and a constraint over an estimator fitted on its output."""
    scaler = StandardScaler().fit(X)
    clf = NGEBMClassifier(**FAST).fit(scaler.transform(X), y)
    adapted = DistributionalConstraint(clf, priors="em").fit(scaler.transform(X))
    return Pipeline([("scaler", scaler), ("adapted", adapted)])


@pytest.mark.parametrize(
    "make",
    [
        lambda X, y: make_pipeline(
            FeatureUnion([("pca", PCA(2)), ("scaled", StandardScaler())]),
            JEMClassifier(**FAST, sgld_steps=2, buffer_size=30),
        ).fit(X, y),
        lambda X, y: CalibratedClassifierCV(NGEBMClassifier(**FAST), cv=3).fit(X, y),
        _constraint_pipeline,
    ],
    ids=["feature-union", "calibrated-cv3", "constraint"],
)
def test_the_composites_around_the_estimators_predict_the_same_bitwise(data, tmp_path, make):
    X, y = data
    fitted = make(X, y)
    restored = _round_trip(fitted, tmp_path)
    assert type(restored) is type(fitted)
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))


@pytest.mark.parametrize("combine", ["product", "mixture"])
def test_a_product_of_experts_alone_and_in_a_pipeline_needs_nothing_trusted(
    data, tmp_path, combine
):
    # one expert fitted before and frozen, one that the product trains; the same in a pipeline
    X, y = data
    old = FrozenEstimator(NGEBMClassifier(**FAST).fit(X, y))
    experts = [("old", old), ("new", JEMClassifier(**FAST, sgld_steps=2, buffer_size=30))]
    poe = ProductOfExperts(experts, combine=combine).fit(X, y)
    pipe = make_pipeline(StandardScaler(), clone(poe)).fit(X, y)
    for fitted, folder in [(poe, tmp_path / "alone"), (pipe, tmp_path / "pipe")]:
        folder.mkdir()
        restored = _round_trip(fitted, folder)
        assert type(restored) is type(fitted)
        np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
        np.testing.assert_array_equal(_product_ood(restored, X), _product_ood(fitted, X))


def _product_ood(model, X):
    """The product's OOD scores, after the pipeline's scaler when it is in one."""
    if isinstance(model, Pipeline):
        return model[-1].score_ood(model[:-1].transform(X))
    return model.score_ood(X)


def test_a_concept_composition_is_refused_at_save_time(data, tmp_path):
    # its chain start is a torch object outside the estimators, which skops cannot write
    X, y = data
    Y = np.c_[y, (X[:, 0] > 0).astype(int)]
    concepts = ConceptComposition(
        [("a", NGEBMClassifier(**FAST)), ("b", NGEBMClassifier(**FAST))]
    ).fit(X, Y)
    with pytest.raises(TypeError, match="ConceptComposition holds a torch GaussianStart"):
        save(concepts, tmp_path / "concepts.ebm")
    assert not (tmp_path / "concepts.ebm").exists()


def test_calibrated_cv_keeps_its_unfitted_estimator_as_parameters(data, tmp_path):
    X, y = data
    calibrated = CalibratedClassifierCV(NGEBMClassifier(**FAST, lr=0.003), cv=2).fit(X, y)
    restored = _round_trip(calibrated, tmp_path)
    template = restored.estimator
    assert type(template) is NGEBMClassifier and not hasattr(template, "classes_")
    assert template.get_params(deep=False) == calibrated.estimator.get_params(deep=False)
    folds = [c.estimator for c in restored.calibrated_classifiers_]
    assert all(isinstance(fold, NGEBMClassifier) and hasattr(fold, "classes_") for fold in folds)


def test_a_frozen_estimator_shared_by_two_places_is_one_object_after_loading(data, tmp_path):
    X, y = data
    clf = NGEBMClassifier(**FAST).fit(X, y)
    calibrated = CalibratedClassifierCV(FrozenEstimator(clf)).fit(X, y)
    assert calibrated.calibrated_classifiers_[0].estimator is calibrated.estimator
    restored = _round_trip(calibrated, tmp_path)
    assert restored.calibrated_classifiers_[0].estimator is restored.estimator
    assert len([n for n in _members(tmp_path / "model.ebm") if n.startswith("estimators/")]) == 1
    np.testing.assert_array_equal(restored.predict_proba(X), calibrated.predict_proba(X))


def test_a_search_s_best_estimator_predicts_the_same_bitwise(data, tmp_path):
    X, y = data
    search = GridSearchCV(
        make_pipeline(StandardScaler(), NGEBMClassifier(**FAST)),
        {"ngebmclassifier__beta": [0.2, 0.5]},
        cv=2,
    ).fit(X, y)
    restored = _round_trip(search.best_estimator_, tmp_path)
    np.testing.assert_array_equal(restored.predict_proba(X), search.predict_proba(X))
    assert restored[-1].beta == search.best_params_["ngebmclassifier__beta"]


def test_an_estimator_and_a_constraint_are_written_in_their_own_formats(data, tmp_path):
    # save(clf) and clf.save write the same bytes: one format per kind of object
    X, y = data
    clf = NGEBMClassifier(**FAST).fit(X, y)
    adapted = DistributionalConstraint(clf, priors="em").fit(X)
    for obj, path in [(clf, "clf"), (adapted, "adapted")]:
        save(obj, tmp_path / f"{path}-a.ebm")
        obj.save(tmp_path / f"{path}-b.ebm")
        a, b = _members(tmp_path / f"{path}-a.ebm"), _members(tmp_path / f"{path}-b.ebm")
        assert a.keys() == b.keys() and "composite.json" not in a
        restored = load(tmp_path / f"{path}-a.ebm")
        np.testing.assert_array_equal(restored.predict_proba(X), obj.predict_proba(X))


def test_load_gives_its_parameters_to_every_estimator_of_a_pipeline(data, tmp_path):
    X, y = data
    latent = LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0)
    union = FeatureUnion([("latent", latent), ("scaled", StandardScaler())])
    pipe = make_pipeline(union, NGEBMClassifier(**FAST)).fit(X, y)
    restored = _round_trip(pipe, tmp_path, device="cpu", verbose=1)
    for estimator in (restored[0].transformer_list[0][1], restored[-1]):
        assert estimator.device == "cpu" and str(estimator.device_) == "cpu"
        assert estimator.verbose == 1
    np.testing.assert_array_equal(restored.predict_proba(X), pipe.predict_proba(X))


def test_what_skops_cannot_save_is_refused_at_save_time(data, tmp_path):
    X, y = data
    clf = NGEBMClassifier(**FAST).fit(X, y)
    pipe = make_pipeline(FunctionTransformer(lambda x: x, validate=False), clf).fit(X, y)
    pipe.steps[0][1].extra_ = clf.module_  # a torch module outside the estimator
    with pytest.raises(TypeError, match="holds a torch MLP outside the library's estimators"):
        save(pipe, tmp_path / "model.ebm")
    assert not (tmp_path / "model.ebm").exists()


# ---------------------------------------------------------------- trust


def _pipeline_file(data, tmp_path):
    X, y = data
    path = tmp_path / "pipe.ebm"
    save(make_pipeline(StandardScaler(), NGEBMClassifier(**FAST)).fit(X, y), path)
    return path


def _replace_scaler(path, node: dict) -> None:
    """Rewrite the pipeline file ``path`` with its first step's skops node replaced."""
    members = _members(path)
    with zipfile.ZipFile(io.BytesIO(members["skeleton.skops"])) as skeleton:
        inner = {name: skeleton.read(name) for name in skeleton.namelist()}
    schema = json.loads(inner["schema.json"])
    steps = schema["content"]["content"]["steps"]["content"]
    steps[0]["content"][1] = node
    inner["schema.json"] = json.dumps(schema).encode()
    rebuilt = io.BytesIO()
    _write(rebuilt, inner)
    members["skeleton.skops"] = rebuilt.getvalue()
    _write(path, members)


def _call(module: str, name: str, *args: str) -> dict:
    """A skops node that, built, calls ``module.name(*args)``."""
    items = [
        {"__class__": "str", "__module__": "builtins", "__loader__": "JsonNode",
         "content": json.dumps(arg), "is_json": True}
        for arg in args
    ]  # fmt: skip
    content = {"__class__": "tuple", "__module__": "builtins", "__loader__": "TupleNode"}
    return {
        "__class__": name,
        "__module__": module,
        "__loader__": "ConstructorFromReduceNode",
        "content": {**content, "content": items},
    }


@pytest.mark.parametrize(
    "module, name, args",
    [
        ("os", "system", lambda marker: (f"touch {marker}",)),
        ("subprocess", "Popen", lambda marker: (["touch", str(marker)],)),
    ],
    ids=["os.system", "subprocess.Popen"],
)
def test_a_step_replaced_by_a_command_is_refused_by_name_and_nothing_runs(
    data, tmp_path, module, name, args
):
    path, marker = _pipeline_file(data, tmp_path), tmp_path / "MARKER"
    arguments = args(marker)
    node = _call(module, name, *[a if isinstance(a, str) else a for a in arguments])
    if name == "Popen":  # one argument: a list of strings
        node["content"]["content"] = [
            {"__class__": "list", "__module__": "builtins", "__loader__": "ListNode",
             "content": [{"__class__": "str", "__module__": "builtins", "__loader__": "JsonNode",
                          "content": json.dumps(a), "is_json": True} for a in arguments[0]]}
        ]  # fmt: skip
    _replace_scaler(path, node)
    with pytest.raises(
        ValueError, match=rf"^Cannot load .*names types that load does not trust: '{module}.{name}'"
    ) as info:
        load(path)
    assert f"load(path, trusted=['{module}.{name}'])" in str(info.value)
    assert "Nothing was built" in str(info.value)
    assert not marker.exists()


def test_the_payload_of_the_refused_file_is_live_once_trusted(data, tmp_path):
    # the control of the test above: the same file, its command trusted by the caller, runs it
    path, marker = _pipeline_file(data, tmp_path), tmp_path / "MARKER"
    _replace_scaler(path, _call("os", "system", f"touch {marker}"))
    with pytest.raises(ValueError, match="Cannot load"):
        load(path)
    assert not marker.exists()
    try:
        load(path, trusted=["os.system"])
    except Exception:  # the pipeline it then builds is broken: an int stands for the scaler
        pass
    assert marker.exists()


def test_trusted_takes_types_and_names(data, tmp_path):
    X, y = data
    path = tmp_path / "model.ebm"
    pipe = make_pipeline(FunctionTransformer(np.log1p), NGEBMClassifier(**FAST)).fit(np.abs(X), y)
    save(pipe, path)  # numpy's ufuncs are trusted by skops
    np.testing.assert_array_equal(
        load(path).predict_proba(np.abs(X)), pipe.predict_proba(np.abs(X))
    )
    for bad in (["os system"], [1], "os.system()"):
        with pytest.raises(TypeError, match="trusted must be a list of types or of their names"):
            load(path, trusted=bad)
    load(path, trusted=[subprocess.Popen, "os.system"])  # trusting more changes nothing here


def test_a_type_skops_does_not_trust_by_default_warns_at_save_and_loads_when_trusted(
    data, tmp_path
):
    X, y = data
    search = GridSearchCV(NGEBMClassifier(**FAST), {"beta": [0.2, 0.5]}, cv=2).fit(X, y)
    path = tmp_path / "search.ebm"
    with pytest.warns(UserWarning, match="names types that ebmclassifier.load does not trust"):
        save(search, path)
    with pytest.raises(ValueError, match="does not trust: .*_PassthroughScorer"):
        load(path)
    names = [
        "sklearn.metrics._scorer._PassthroughScorer",
        "sklearn.model_selection._split.StratifiedKFold",
    ]
    restored = load(path, trusted=names)
    np.testing.assert_array_equal(restored.predict_proba(X), search.predict_proba(X))


# ---------------------------------------------------------------- hostile composite files


@pytest.fixture
def pipe_file(data, tmp_path):
    return _pipeline_file(data, tmp_path)


def _edit_composite(path, change) -> None:
    members = _members(path)
    metadata = json.loads(members["composite.json"])
    change(metadata, members)
    members["composite.json"] = json.dumps(metadata).encode()
    _write(path, members)


@pytest.mark.parametrize(
    "change, match",
    [
        (
            lambda m, ms: m.update(format_version=2),
            "not a file of format 'ebmclassifier.composite'",
        ),
        (
            lambda m, ms: m["estimators"].append({"member": "estimators/1.ebm"}),
            "are not the estimators",
        ),
        (lambda m, ms: m["estimators"].clear(), "are not the estimators"),
        (lambda m, ms: m.update(estimators={}), "no list of 'estimators'"),
        (lambda m, ms: m["estimators"].__setitem__(0, {"member": "../x"}), "malformed entry"),
        (lambda m, ms: ms.update({"estimators/7.ebm": b"x"}), "are not the estimators"),
        (
            lambda m, ms: (
                ms.pop("estimators/0.ebm"),
                m["estimators"].__setitem__(
                    0, {"estimator": "os:system", "params": {}, "unsaved_params": {}}
                ),
            ),
            "names the class 'os:system'; load imports classes from ebmclassifier",
        ),
        (
            lambda m, ms: ms.update({"estimators/0.ebm": b"not a zip"}),
            "in its estimators/0.ebm, it is not a file written by",
        ),
    ],
)
def test_a_crafted_composite_file_is_refused_naming_it(pipe_file, change, match):
    _edit_composite(pipe_file, change)
    with pytest.raises(ValueError, match=f"^Cannot load '{pipe_file}': .*{match}"):
        load(pipe_file)


def test_the_estimator_inside_a_pipeline_file_is_read_as_hostile_too(pipe_file):
    members = _members(pipe_file)
    inner = _members(io.BytesIO(members["estimators/0.ebm"]))
    metadata = json.loads(inner["metadata.json"])
    metadata["params"]["module__hidden_sizes"] = {"__tuple__": [16384, 16384]}
    inner["metadata.json"] = json.dumps(metadata).encode()
    rebuilt = io.BytesIO()
    _write(rebuilt, inner)
    members["estimators/0.ebm"] = rebuilt.getvalue()
    _write(pipe_file, members)
    with pytest.raises(ValueError, match="in its estimators/0.ebm, its parameters build a module_"):
        load(pipe_file)
    named = f"^Cannot load '{re.escape(str(pipe_file))}': in its estimators/0.ebm"
    with pytest.raises(ValueError, match=named):
        load(pipe_file)


def _edit_skeleton(path, change) -> None:
    members = _members(path)
    inner = _members(io.BytesIO(members["skeleton.skops"]))
    change(inner)
    rebuilt = io.BytesIO()
    _write(rebuilt, inner)
    members["skeleton.skops"] = rebuilt.getvalue()
    _write(path, members)


def _npy_header(shape, dtype="<f8") -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": dtype, "fortran_order": False, "shape": shape}
    )
    return header.getvalue()


def _first_npy(inner: dict) -> str:
    return next(name for name in inner if name.endswith(".npy"))


def _npy_of_shape(inner: dict) -> None:
    inner[_first_npy(inner)] = _npy_header((10**6, 10**6)) + b"\0" * 8


def _deep_json_text(inner: dict) -> None:
    """A number's JSON text (``"content": "true"``) replaced by one nested 300 deep."""
    deep = b'"content": "' + b"[" * 300 + b'"'
    inner["schema.json"] = inner["schema.json"].replace(b'"content": "true"', deep, 1)


SKELETONS = {
    # np.load allocates the header's shape before it reads
    "npy-shape": (
        _npy_of_shape,
        r"declares shape \(1000000, 1000000\) of float64 \(8000000000000 bytes\) where it holds 8",
    ),
    "npy-object": (
        lambda inner: inner.update({_first_npy(inner): _npy_header((2,), "|O") + b"\0" * 16}),
        "declares shape",
    ),
    "npy-version": (
        lambda inner: inner.update({_first_npy(inner): b"\x93NUMPY\x09\x00"}),
        "not numpy's",
    ),
    # a header cut inside its dict: numpy's tokenizer raised TokenError
    "npy-header-cut": (
        lambda inner: inner.update(
            {_first_npy(inner): b"\x93NUMPY\x01\x00\x1e\x00{'descr': '<f8', 'shape': (2,\n"}
        ),
        "whose header is not numpy's",
    ),
    "no-schema": (lambda inner: inner.pop("schema.json"), "has no schema.json"),
    "utf-16": (
        lambda inner: inner.update({"schema.json": inner["schema.json"].decode().encode("utf-16")}),
        "schema.json is not UTF-8 text",
    ),
    "deep": (
        lambda inner: inner.update({"schema.json": b"[" * 201 + b"]" * 201}),
        "schema.json nests 201 deep, deeper than the 200 .*skops_depth",
    ),
    # a JSON text inside the schema, which skops parses when it builds the value
    "deep-text": (_deep_json_text, "holds a JSON text nested deeper than the 200"),
    "protocol": (
        lambda inner: inner.update({"schema.json": b'{"protocol": 99}'}),
        "not a file skops can read",
    ),
    "no-loader": (
        lambda inner: inner.update({"schema.json": b'{"protocol": 2, "__class__": "X"}'}),
        "not a file skops can read",
    ),
}


@pytest.mark.parametrize("case", sorted(SKELETONS))
def test_a_crafted_skops_member_is_refused_before_skops_reads_it(pipe_file, case):
    change, match = SKELETONS[case]
    _edit_skeleton(pipe_file, change)
    with pytest.raises(ValueError, match=f"^Cannot load '{pipe_file}': .*{match}"):
        load(pipe_file)


def test_the_skops_member_is_within_the_limits(pipe_file):
    members = _members(pipe_file)
    skeleton = len(members["skeleton.skops"])
    estimator = len(members["estimators/0.ebm"])
    total = skeleton + estimator
    assert load(pipe_file, limits=FileLimits(weights_bytes=total)) is not None
    with pytest.raises(
        ValueError, match=f"declare {total} bytes together, more than the {total - 1}"
    ):
        load(pipe_file, limits=FileLimits(weights_bytes=total - 1))


def test_every_byte_of_a_pipeline_file_flipped_is_a_value_error_or_loads(pipe_file):
    # the pipeline file is a new surface: one byte of every 97 flipped (its headers, the
    # skops schema, the estimator's members); a crash or another exception type fails here
    raw = pipe_file.read_bytes()
    outcomes = {"refused": 0, "loaded": 0}
    for position in range(0, len(raw), 97):
        flipped = bytearray(raw)
        flipped[position] ^= 0xFF
        pipe_file.write_bytes(bytes(flipped))
        try:
            load(pipe_file)
            outcomes["loaded"] += 1
        except ValueError as err:
            assert str(err).startswith("Cannot load"), (position, err)
            assert not isinstance(err, UnicodeDecodeError), position
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == len(range(0, len(raw), 97))


def test_a_pipeline_file_is_not_pickled(data, tmp_path):
    path = _pipeline_file(data, tmp_path)
    for name, raw in _members(path).items():
        assert not raw.startswith(b"\x80"), name  # a pickle's protocol opcode
    assert os.path.getsize(path) > 0


def test_the_walk_for_estimators_descends_into_each_object_once(data, monkeypatch):
    # what several places share (a list, an estimator) is walked and listed once: the walk's
    # cost is one visit per object, however often the object is referred to
    from ebmclassifier.saving import _composite

    clf = NGEBMClassifier(**FAST).fit(*data)
    shared = [clf, {"scale": np.arange(3.0)}]
    graph = Pipeline([("a", FunctionTransformer()), ("b", FunctionTransformer())])
    graph.first_, graph.second_, graph.both_ = shared, shared, [shared, (shared, clf)]
    visits = Counter()
    children = _composite._children

    def counted(obj):
        visits[id(obj)] += 1
        return children(obj)

    monkeypatch.setattr(_composite, "_children", counted)
    assert _composite.library_objects(graph) == [clf]
    assert visits[id(shared)] == 1 and max(visits.values()) == 1


def test_the_walk_finds_an_estimator_held_in_an_object_array(data):
    from ebmclassifier.saving import _composite

    clf = NGEBMClassifier(**FAST).fit(*data)
    step = FunctionTransformer()
    step.held_ = np.array([None, clf], dtype=object)
    assert _composite.library_objects(make_pipeline(step)) == [clf]
