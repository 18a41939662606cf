"""Saving for deployment: ebmclassifier.saving, pickle / joblib, and torch.export of module_."""

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile

import joblib
import numpy as np
import pandas as pd
import pytest
import torch

from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier, load
from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.saving import save

from ..estimators import params

FAST = params("ngebm", max_epochs=2, lr=1e-2)
JEM_FAST = params("jem", max_epochs=2, lr=1e-2, buffer_size=30)


def _labels(y):
    return np.array(["cat", "dog", "owl"])[y]


@pytest.fixture(scope="module")
def frame(small_blobs):
    X, y = small_blobs
    return pd.DataFrame(X, columns=["a", "b", "c", "d"]), _labels(y)


def _assert_same_predictions(restored, original, X):
    np.testing.assert_array_equal(restored.predict_proba(X), original.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), original.predict(X))
    np.testing.assert_array_equal(restored.energy(X), original.energy(X))
    for method in ("energy", "max_softmax", "approx_mass"):
        np.testing.assert_array_equal(restored.score_ood(X, method), original.score_ood(X, method))


@pytest.mark.parametrize(
    "make",
    [
        lambda: NGEBMClassifier(**FAST, grad_norm="finite_difference"),
        lambda: JEMClassifier(**JEM_FAST),
        lambda: JEMClassifier(**JEM_FAST, buffer_init="uniform", sampler="proximal"),
        lambda: LatentStructureClassifier(n_latent=3, max_epochs=2, random_state=0),
    ],
    ids=["ngebm", "jem_informative", "jem_uniform", "latent"],
)
def test_save_load_round_trip_without_the_data(frame, tmp_path, make):
    X, labels = frame
    original = make().fit(X, labels).calibrate_ood(X)
    original.save(tmp_path / "model.ebm")
    restored = load(tmp_path / "model.ebm")
    assert type(restored) is type(original)
    assert restored.get_params(deep=False) == original.get_params(deep=False)
    assert restored.classes_.tolist() == ["cat", "dog", "owl"]
    assert restored.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    assert restored.input_shape_ == (4,) and restored.n_features_in_ == 4
    assert restored.input_range() == original.input_range()
    assert restored.ood_threshold_ == original.ood_threshold_
    _assert_same_predictions(restored, original, X)
    np.testing.assert_array_equal(restored.predict_ood(X), original.predict_ood(X))
    if isinstance(original, NGEBMClassifier):
        assert restored.fd_step_size_ == original.fd_step_size_
    if isinstance(original, JEMClassifier):  # the chains and their start, for sample()
        buffer, saved = restored.replay_buffer_, original.replay_buffer_
        assert type(buffer.start) is type(saved.start)
        for (name, a), (_, b) in zip(
            buffer.state_dict().items(), saved.state_dict().items(), strict=True
        ):
            assert torch.equal(a, b), name
        torch.manual_seed(1)
        drawn = restored.sample(3, y=["cat", "dog", "owl"], n_steps=2)
        torch.manual_seed(1)
        np.testing.assert_array_equal(drawn, original.sample(3, y=["cat", "dog", "owl"], n_steps=2))


def test_training_state_lets_partial_fit_continue_as_without_the_round_trip(small_blobs, tmp_path):
    X, y = small_blobs
    original = NGEBMClassifier(**FAST).fit(X, y)
    original.save(tmp_path / "full.ebm")
    original.save(tmp_path / "small.ebm", training_state=False)
    resumed = load(tmp_path / "full.ebm")
    assert len(resumed.history) == 2
    continued = pickle.loads(pickle.dumps(original))
    for clf in (continued, resumed):
        clf.set_params(max_epochs=1).partial_fit(X, y)
    np.testing.assert_array_equal(resumed.predict_proba(X), continued.predict_proba(X))
    # without the training state: smaller, no history, predictions all the same
    assert (tmp_path / "small.ebm").stat().st_size < (tmp_path / "full.ebm").stat().st_size
    small = load(tmp_path / "small.ebm")
    assert len(small.history) == 0
    _assert_same_predictions(small, original, X)


def test_load_leaves_torch_random_state_alone(small_blobs, tmp_path):
    X, y = small_blobs
    NGEBMClassifier(**FAST).fit(X, y).save(tmp_path / "model.ebm")
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    load(tmp_path / "model.ebm")
    assert torch.equal(torch.rand(2), expected)


# ---------------------------------------------------------------- parameters not in the file


class Linear(torch.nn.Module):
    def __init__(self, n_features, n_classes):
        super().__init__()
        self.lin = torch.nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.lin(x)


def test_a_network_class_of_ones_own_is_passed_to_load(small_blobs, tmp_path):
    X, y = small_blobs
    original = NGEBMClassifier(Linear, max_epochs=2, random_state=0).fit(X, y)
    original.save(tmp_path / "model.ebm")
    with pytest.raises(ValueError, match=r"saved with module=<class '.*Linear'>.*load\(path, mod"):
        load(tmp_path / "model.ebm")
    restored = load(tmp_path / "model.ebm", module=Linear)
    _assert_same_predictions(restored, original, X)


def test_unsaved_parameters_warn_unless_given(small_blobs, tmp_path):
    from skorch.callbacks import EpochTimer

    X, y = small_blobs
    NGEBMClassifier(**FAST, callbacks=[EpochTimer()]).fit(X, y).save(tmp_path / "model.ebm")
    with pytest.warns(UserWarning, match=r"Not restored from the file: callbacks=\[<skorch"):
        restored = load(tmp_path / "model.ebm")
    assert restored.callbacks is None
    restored = load(tmp_path / "model.ebm", callbacks=[EpochTimer()], device="cpu")
    assert len(restored.callbacks) == 1 and restored.device == "cpu"


def test_a_class_load_would_refuse_is_not_saved(small_blobs, tmp_path):
    from skorch.callbacks import EpochTimer

    X, y = small_blobs
    NGEBMClassifier(**FAST, callbacks=[EpochTimer]).fit(X, y).save(tmp_path / "model.ebm")
    with zipfile.ZipFile(tmp_path / "model.ebm") as archive:
        metadata = json.loads(archive.read("metadata.json"))
    assert "callbacks" in metadata["unsaved_params"] and "callbacks" not in metadata["params"]
    with pytest.warns(UserWarning, match=r"Not restored from the file: callbacks=\[<class 'sko"):
        assert load(tmp_path / "model.ebm").callbacks is None
    assert load(tmp_path / "model.ebm", callbacks=[EpochTimer]).callbacks == [EpochTimer]


def test_a_parameter_given_to_load_is_not_read_from_the_file(saved):
    def edit(metadata):
        metadata["params"]["optimizer"] = {"__class__": "ebmclassifier.gone:Adam"}
        return metadata

    _rewrite(saved, metadata=edit)
    assert load(saved, optimizer=torch.optim.Adam).optimizer is torch.optim.Adam


# ---------------------------------------------------------------- loading is safe


def _rewrite(path, *, metadata=None, weights=None):
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    if metadata is not None:
        members["metadata.json"] = json.dumps(metadata(json.loads(members["metadata.json"])))
    if weights is not None:
        members["weights.pt"] = weights
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


RAN = []


def _side_effect(*args):
    RAN.append(args)
    return args


class _Payload:
    def __reduce__(self):
        return _side_effect, ("unpickled code ran",)


@pytest.fixture
def saved(small_blobs, tmp_path):
    X, y = small_blobs
    NGEBMClassifier(**FAST).fit(X, y).save(tmp_path / "model.ebm")
    return tmp_path / "model.ebm"


def test_weights_that_would_run_code_are_refused(saved):
    buffer = io.BytesIO()
    torch.save({"tensors": {}, "states": {}, "payload": _Payload()}, buffer)
    _rewrite(saved, weights=buffer.getvalue())
    with pytest.raises(ValueError, match="hold more than tensors, and load.. unpickles nothing"):
        load(saved)
    assert RAN == []


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("estimator", "subprocess:Popen", r"imports classes from ebmclassifier, torch, skorch"),
        ("estimator", "torch.nn:Linear", r"'torch.nn:Linear', which is not a class load"),
        ("params", {"module": {"__class__": "os:system"}}, r"names the class 'os:system'"),
        ("params", {"optimizer": {"__class__": "torch:load"}}, r"'torch:load', which is not a"),
        ("format_version", 99, r"is not a file of format 'ebmclassifier.saving' version 1"),
        # renamed or removed in another version: a ValueError, not Python's import errors
        ("estimator", "ebmclassifier.gone:NGEBMClassifier", r"cannot be imported here \(No mod"),
        (
            "params",
            {"module": {"__class__": "ebmclassifier.nn:Renamed"}},
            r"'ebmclassifier.nn:Renamed', which cannot be imported here .* 'module': pass it",
        ),
    ],
)
def test_metadata_naming_other_classes_is_refused(saved, field, value, match):
    def edit(metadata):
        if field == "params":
            metadata["params"].update(value)
        else:
            metadata[field] = value
        return metadata

    _rewrite(saved, metadata=edit)
    with pytest.raises(ValueError, match=match):
        load(saved)


@pytest.mark.parametrize(
    "name, path",
    [
        ("criterion", "torch.nn:Module"),  # it loaded, and failed at the first loss
        ("criterion", "torch.nn:Linear"),
        ("criterion", "torch.optim:SGD"),
        ("optimizer", "torch.nn:CrossEntropyLoss"),
        ("optimizer", "torch.utils.data:DataLoader"),
        ("iterator_train", "torch.utils.data.datapipes.iter.fileopener:FileOpenerIterDataPipe"),
        ("iterator_valid", "torch.nn:Module"),
        ("iterator_train", "torch.utils.data:TensorDataset"),
        ("dataset", "torch.utils.data.datapipes.iter.filelister:FileListerIterDataPipe"),
        ("dataset", "torch.utils.data:DataLoader"),
        ("dataset", "torch.optim:Adam"),
        ("module", "torch.optim:Adam"),
        ("module", "skorch.dataset:Dataset"),
        ("module__activation", "torch.utils.data:DataLoader"),  # any other: a layer
    ],
)
def test_a_saved_class_of_the_wrong_role_is_refused_naming_the_parameter(saved, name, path):
    # issue #26: any torch Module, Dataset or DataLoader class loaded for any parameter
    def edit(metadata):
        metadata["params"][name] = {"__class__": path}
        return metadata

    _rewrite(saved, metadata=edit)
    qualname = path.split(":")[1]
    with pytest.raises(ValueError, match=f"parameter {name!r} the class '.*:{qualname}', but "
                       f"{name} must be .* pass it to load\\(path, {name}="):  # fmt: skip
        load(saved)


@pytest.mark.parametrize(
    "name, path",
    [
        ("criterion", "torch.nn:NLLLoss"),
        ("optimizer", "torch.optim:SGD"),
        ("iterator_train", "torch.utils.data:DataLoader"),
        ("iterator_valid", "ebmclassifier._utils.data:TensorBatchIterator"),
        ("dataset", "skorch.dataset:Dataset"),
        ("module", "ebmclassifier.nn:MLP"),
    ],
)
def test_a_saved_class_of_the_right_role_loads(saved, name, path):
    def edit(metadata):
        metadata["params"][name] = {"__class__": path}
        return metadata

    _rewrite(saved, metadata=edit)
    cls = load(saved).get_params()[name]
    assert f"{cls.__module__}:{cls.__qualname__}".endswith(path.split(":")[1])


def test_a_file_of_another_kind_is_a_value_error(tmp_path, small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(X, y)
    clf.save_params(f_params=tmp_path / "params.pt")  # skorch's, not ours
    with pytest.raises(ValueError, match="is not a file written by ebmclassifier.saving.save"):
        load(tmp_path / "params.pt")


def test_save_needs_a_fitted_estimator_and_json_labels(small_blobs, tmp_path):
    from sklearn.exceptions import NotFittedError

    X, y = small_blobs
    with pytest.raises(NotFittedError):
        save(NGEBMClassifier(), tmp_path / "model.ebm")
    labels = np.array([("a", 1), ("b", 2), ("c", 3)], dtype=object)[y]
    clf = NGEBMClassifier(**FAST).fit(X, np.array([str(t) for t in labels], dtype=object))
    clf.save(tmp_path / "ok.ebm")  # object arrays of strings are fine
    assert load(tmp_path / "ok.ebm").classes_.tolist() == clf.classes_.tolist()


# ---------------------------------------------------------------- the devices


def test_weights_are_saved_on_the_cpu_and_loaded_on_device_(saved):
    with zipfile.ZipFile(saved) as archive:
        metadata = json.loads(archive.read("metadata.json"))
        weights = torch.load(io.BytesIO(archive.read("weights.pt")), weights_only=True)
    assert metadata["params"]["device"] == "auto"
    tensors = [t for state in weights["states"].values() for t in _tensors(state)]
    assert tensors and all(t.device.type == "cpu" for t in tensors)
    # as if trained on a GPU: "auto" resolves on the loading machine
    _rewrite(saved, metadata=lambda m: {**m, "trained_on": "cuda:0"})
    restored = load(saved)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert restored.device_.type == expected
    assert next(restored.module_.parameters()).device.type == expected


def _tensors(state):
    if isinstance(state, torch.Tensor):
        yield state
    elif isinstance(state, dict | list | tuple):
        for value in state.values() if isinstance(state, dict) else state:
            yield from _tensors(value)


def test_an_explicit_cuda_device_is_overridden_at_load(saved):
    _rewrite(saved, metadata=lambda m: {**m, "params": {**m["params"], "device": "cuda"}})
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            load(saved)
    assert load(saved, device="cpu").device_ == torch.device("cpu")


@pytest.mark.cuda
def test_gpu_trained_estimator_loads_on_a_cpu(small_blobs, tmp_path):
    X, y = small_blobs
    clf = JEMClassifier(**JEM_FAST, device="cuda").fit(X, y)
    clf.save(tmp_path / "gpu.ebm")
    on_cpu = load(tmp_path / "gpu.ebm", device="cpu")
    assert on_cpu.device_ == torch.device("cpu")
    np.testing.assert_allclose(on_cpu.predict_proba(X), clf.predict_proba(X), atol=1e-5)
    # a machine without CUDA, device="auto": another process with the GPU hidden
    clf.set_params(device="auto")
    clf.save(tmp_path / "auto.ebm")
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "gpu.pkl").write_bytes(pickle.dumps(clf))  # and a pickle of it
    script = (
        "import pickle, sys, numpy as np, torch; from ebmclassifier import load; "
        "assert not torch.cuda.is_available(); X = np.load(sys.argv[3]); "
        "clf = load(sys.argv[1]); unpickled = pickle.load(open(sys.argv[4], 'rb')); "
        "assert clf.device_.type == unpickled.device_.type == 'cpu'; "
        "np.save(sys.argv[2], np.stack([clf.predict_proba(X), unpickled.predict_proba(X)]))"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = tmp_path / "proba.npy"
    subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(tmp_path / "auto.ebm"),
            str(out),
            str(tmp_path / "X.npy"),
            str(tmp_path / "gpu.pkl"),
        ],
        check=True,
        env=env,
    )
    for proba in np.load(out):
        np.testing.assert_allclose(proba, clf.predict_proba(X), atol=1e-5)


# ---------------------------------------------------------------- pickle, joblib, torch.export


def test_joblib_round_trip(small_blobs, tmp_path):
    X, y = small_blobs
    clf = JEMClassifier(**JEM_FAST).fit(X, y)
    joblib.dump(clf, tmp_path / "model.joblib")
    _assert_same_predictions(joblib.load(tmp_path / "model.joblib"), clf, X)


@pytest.mark.parametrize("shape", [(4,), (1, 8, 8)], ids=["mlp", "convnet"])
def test_module_exports_with_torch_export(shape, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, *shape)).astype(np.float32)
    y = np.arange(60) % 3
    options = {"module__hidden_sizes": (8,)} if len(shape) == 1 else {"module__channels": (4,)}
    clf = NGEBMClassifier(max_epochs=1, random_state=0, device="cpu", **options).fit(X, y)
    module = clf.module_.eval()
    example = torch.as_tensor(X[:8])
    batch = torch.export.Dim("batch", min=1)
    exported = torch.export.export(module, (example,), dynamic_shapes=({0: batch},))
    torch.export.save(exported, tmp_path / "module.pt2")
    reloaded = torch.export.load(tmp_path / "module.pt2")
    x = torch.as_tensor(X[8:13])  # another batch size
    with torch.no_grad():
        expected = module(x)
    torch.testing.assert_close(exported.module()(x), expected)
    torch.testing.assert_close(reloaded.module()(x), expected)
    np.testing.assert_allclose(
        torch.softmax(reloaded.module()(x), dim=1).detach().numpy(),
        clf.predict_proba(X[8:13]),
        atol=1e-6,
    )


def test_a_tree_model_keeps_its_vocabulary(tmp_path):
    # the embeddings index vocabulary_, so a tree model without it would read other ids
    X, y, _ = make_latent_trees(24, max_length=4, random_state=0)
    X = np.where(X > 0, X * 1000 + 7, 0)  # ids that are not embedding rows
    original = LatentStructureClassifier(structure="dependency_tree", max_epochs=1, random_state=0)
    original.fit(X, y).save(tmp_path / "tree.ebm")
    restored = load(tmp_path / "tree.ebm")
    np.testing.assert_array_equal(restored.vocabulary_, original.vocabulary_)
    assert restored.vocabulary_.dtype == np.int64
    np.testing.assert_array_equal(restored.predict_proba(X), original.predict_proba(X))
    np.testing.assert_array_equal(restored.transform(X), original.transform(X))
    np.testing.assert_array_equal(restored.predict_latent(X), original.predict_latent(X))


def test_a_dict_parameter_keeps_its_keys_and_values(small_blobs, tmp_path):
    # a dict is written as its (key, value) pairs, each decoded: int keys stay ints
    X, y = small_blobs
    weights = {0: 2.0, 1: 1.0, 2: 0.5}
    NGEBMClassifier(**FAST, class_weight=weights).fit(X, y).save(tmp_path / "model.ebm")
    restored = load(tmp_path / "model.ebm")
    assert restored.class_weight == weights
    assert [type(key) for key in restored.class_weight] == [int, int, int]
