"""The training engine (ebmclassifier/_estimator/engine.py): skorch's hooks and overrides."""

import copy
import operator
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import skorch
import torch
from sklearn.base import clone
from skorch.callbacks import Callback
from skorch.dataset import Dataset, ValidSplit

from ebmclassifier import DivergenceError, NGEBMClassifier
from ebmclassifier._estimator.base import EBMClassifierBase
from ebmclassifier._utils.generators import FitGenerators

from ..estimators import params

FAST = params("ngebm", max_epochs=2, lr=1e-2)


@pytest.fixture
def fitted(fitted_model):
    """Fitted once per session on small_blobs, read-only (tests/estimators.py)."""
    return fitted_model("ngebm", **FAST)


@pytest.fixture
def changed(fitted):
    """A copy for a test that changes it (a history row, a network built anew)."""
    return copy.deepcopy(fitted)


def _tensors(clf, X, y, n=8):
    return (
        torch.tensor(X[:n], dtype=torch.float32, device=clf.device_),
        torch.tensor(y[:n], device=clf.device_),
    )


PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
_COMPARE = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def _version(text: str) -> tuple[int, int, int]:
    """``"1.4.0"`` -> ``(1, 4, 0)``, ``"1.5"`` -> ``(1, 5, 0)``: comparable as tuples."""
    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def skorch_requirement() -> str:
    """The skorch entry of pyproject.toml's dependencies, the one place its range is written."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the dev extra installs tomli
        import tomli as tomllib
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (requirement,) = [d for d in dependencies if re.match(r"skorch\s*[<>=!~]", d)]
    return requirement


def within(version: str, requirement: str) -> bool:
    """Whether ``version`` meets every bound (``>=``, ``>``, ``<=``, ``<``) of ``requirement``."""
    bounds = re.findall(r"(>=|<=|>|<)\s*([\d.]+)", requirement)
    assert bounds, f"no version bound in {requirement!r}"
    return all(_COMPARE[op](_version(version), _version(bound)) for op, bound in bounds)


def test_skorch_is_a_version_the_overrides_were_written_for():
    requirement = skorch_requirement()
    assert within(skorch.__version__, requirement), (
        f"skorch {skorch.__version__} is installed, but ebmclassifier/_estimator/engine.py was "
        f"written for {requirement} (pyproject.toml). Check skorch's changes to "
        "NeuralNet.partial_fit and fit_loop (the order of the notifications, "
        "run_single_epoch), __setstate__ (the device it maps to), _get_param_names, "
        "initialize / set_params / load_params (their use of self.device), save_params, "
        "_initialize_callbacks / initialize_callbacks, get_split_datasets, infer, train_step, "
        "train_step_single, _step_optimizer and torch_compile; run the whole test suite; then "
        "widen the skorch range in pyproject.toml."
    )


def test_the_skorch_range_is_read_as_written():
    # the check above must be able to fail: versions outside the range are refused
    versions = ("1.1.9", "1.2.0", "1.4.0", "1.4.9.dev0", "1.5.0", "2.0")
    verdicts = [within(v, "skorch>=1.2,<1.5") for v in versions]
    assert verdicts == [False, True, True, True, False, False]


# ---------------------------------------------------------------- the device


def test_save_params_load_params_round_trip_with_device_auto(fitted, small_blobs, tmp_path):
    X, y = small_blobs
    files = {name: tmp_path / f"{name}.pt" for name in ("f_params", "f_optimizer")}
    fitted.save_params(**files, f_history=tmp_path / "history.json")
    # max_epochs=0: fit validates the data and builds the network, without training
    fresh = NGEBMClassifier(**{**FAST, "max_epochs": 0}).fit(X, y)
    assert not np.allclose(fresh.predict_proba(X), fitted.predict_proba(X))
    fresh.load_params(**files, f_history=tmp_path / "history.json")
    np.testing.assert_array_equal(fresh.predict_proba(X), fitted.predict_proba(X))
    assert fresh.device == "auto" and fresh.device_ == fitted.device_
    assert len(fresh.history) == len(fitted.history)
    # the optimizer's state and the history came along: one more epoch trains both alike
    original = pickle.loads(pickle.dumps(fitted)).set_params(max_epochs=1).partial_fit(X, y)
    fresh.set_params(max_epochs=1).partial_fit(X, y)
    np.testing.assert_array_equal(fresh.predict_proba(X), original.predict_proba(X))


def test_unpickling_keeps_the_device_parameter_as_given(fitted):
    # skorch maps the tensors to state["device"]; the parameter comes back as the user gave it
    restored = pickle.loads(pickle.dumps(fitted))
    assert restored.get_params()["device"] == "auto" and restored.device_ == fitted.device_


def test_set_params_reinitializes_a_fitted_module_on_its_device(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(X, y)
    clf.set_params(module__hidden_sizes=(4,))
    assert clf.module_.net[1].out_features == 4
    assert next(clf.module_.parameters()).device.type == clf.device_.type
    assert clf.device == "auto"
    clf.set_params(device="cpu")
    assert clf.get_params()["device"] == "cpu"


class _DeviceSeen(Callback):
    def on_batch_end(self, net, **kwargs):
        net.devices_seen_.add(net.device)


def test_loader_parameters_set_on_a_fitted_net_take_effect_without_a_refit(fitted, small_blobs):
    # skorch 1.4 raised "Something went wrong, please open an issue" for these on a fitted net
    X, _ = small_blobs
    net = clone(fitted)
    net.__dict__.update({k: v for k, v in fitted.__dict__.items() if k.endswith("_")})
    before = net.module_
    net.set_params(iterator_valid__batch_size=7, iterator_train__num_workers=0, dataset__foo=1)
    assert net.module_ is before and net.get_params()["iterator_valid__batch_size"] == 7
    assert net.get_params()["dataset__foo"] == 1
    np.testing.assert_allclose(net.predict_proba(X), fitted.predict_proba(X), rtol=1e-5)


def test_the_device_parameter_stays_as_given_during_fit(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST, callbacks=[_DeviceSeen()])
    clf.devices_seen_ = set()
    clf.fit(X, y)
    assert clf.devices_seen_ == {"auto"} and clf.device == "auto"


def test_scoring_callbacks_predict_through_infer(small_blobs):
    # skorch's default valid_acc scores the validation Dataset through forward() and infer()
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST, train_split=ValidSplit(5)).fit(X, y)
    assert all(0.0 <= acc <= 1.0 for acc in clf.history[:, "valid_acc"])
    Xt, yt = _tensors(clf, X, y)
    with torch.no_grad():
        torch.testing.assert_close(clf.infer(Xt), clf.module_(Xt))


# ---------------------------------------------------------------- the training loop


def test_check_data_leaves_validation_to_fit(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST)
    assert clf.check_data(X, y[:5]) is None
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(X, y[:5])


def test_on_epoch_begin_seeds_the_fits_own_generators_never_torchs(changed):
    before = torch.get_rng_state()
    changed.on_epoch_begin(changed)  # as skorch does before epoch 3
    try:
        assert len(changed.history) == 3 and torch.equal(torch.get_rng_state(), before)
        # the batch order keeps the stream torch.manual_seed(seed_ + epoch) gave it before
        order = torch.randperm(10, generator=changed._generator("shuffle", "cpu"))
        torch.manual_seed(changed.seed_ + 3)
        assert torch.equal(order, torch.randperm(10))
        # each purpose a stream of its own, from (seed_, epoch, purpose) alone
        seeds = {p: changed._generator(p).initial_seed() for p in ("sampler", "augment")}
        again = FitGenerators(changed.seed_, 0)
        again.begin(3)
        assert seeds == {p: again(p, "cpu").initial_seed() for p in seeds}
        assert len(set(seeds.values()) | {changed.seed_ + 3}) == 3
    finally:
        changed.history = changed.history[:-1]
        changed._generators = None
        torch.set_rng_state(before)


def test_initialize_module_builds_the_network_for_the_data(changed):
    assert changed.initialize_module() is changed
    shapes = [tuple(p.shape) for p in changed.module_.parameters()]
    assert shapes == [(8, 4), (8,), (3, 8), (3,)]  # 4 features -> 8 -> 3 classes
    with pytest.raises(RuntimeError, match=r"so initialize\(\) has no network .* before fit"):
        NGEBMClassifier().initialize()


@pytest.mark.parametrize("call", ["initialize", "load_params"])
def test_building_a_network_before_fit_names_the_documented_routes(call, tmp_path):
    # the issue: initialize() + load_params was refused without naming the route that works
    from skorch.exceptions import NotInitializedError

    clf = NGEBMClassifier()
    error = RuntimeError if call == "initialize" else NotInitializedError
    with pytest.raises(error) as caught:
        if call == "initialize":
            clf.initialize()
        else:
            clf.load_params(f_params=str(tmp_path / "params.pt"))
    message = str(caught.value)
    assert "ebmclassifier.load(path)" in message and "save(path)" in message
    assert "fit(X, y) with max_epochs=0" in message and "then call load_params" in message


def test_train_step_single_back_propagates_without_stepping(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST).fit(X, y)
    before = [p.detach().clone() for p in clf.module_.parameters()]
    clf.optimizer_.zero_grad()
    step = clf.train_step_single(_tensors(clf, X, y))
    assert sorted(step) == ["loss", "y_pred"] and tuple(step["y_pred"].shape) == (8, 3)
    assert not step["loss"].requires_grad and clf.module_.training
    assert all(p.grad is not None for p in clf.module_.parameters())
    for p, b in zip(clf.module_.parameters(), before, strict=True):
        assert torch.equal(p, b)


def test_validation_step_is_in_eval_mode_without_a_graph(changed, small_blobs):
    X, y = small_blobs
    with torch.no_grad():  # the gradient-norm term is computed all the same
        step = changed.validation_step(_tensors(changed, X, y))
    assert bool(torch.isfinite(step["loss"])) and not step["loss"].requires_grad
    assert not changed.module_.training


def test_history_records_the_validation_batches(small_blobs):
    X, y = small_blobs
    data = Dataset(torch.as_tensor(X[:40]), torch.as_tensor(y[:40]))
    clf = NGEBMClassifier(
        **FAST, batch_size=16, train_split=lambda dataset, y=None: (dataset, data)
    ).fit(X, y)
    assert clf.history[-1, "valid_batch_count"] == 3
    assert clf.history[-1, "batches", :, "valid_batch_size"] == [16, 16, 8]


# ---------------------------------------------------------------- the hooks of the step

STEP_HOOKS = ("compute_loss", "classification_loss", "augment_batch", "handle_divergence")


def test_the_template_declares_every_hook_its_step_calls():
    from ebmclassifier._estimator.engine import TrainingEngine

    for name in STEP_HOOKS:
        assert name in vars(TrainingEngine), f"TrainingEngine does not declare {name}"
        assert getattr(EBMClassifierBase, name) is vars(TrainingEngine)[name], name


class _Plain(EBMClassifierBase):
    """The base with every hook at its default."""


def test_the_hooks_defaults(small_blobs):
    X, y = small_blobs
    clf = _Plain(**FAST).fit(X, y)
    Xt, yt = _tensors(clf, X, y)
    # augment_batch: the batch itself, without an augmentation
    assert clf.augment_batch(Xt) is Xt
    # compute_loss: the criterion's mean of the module's logits
    loss, logits = clf.compute_loss(Xt, yt, training=True)
    torch.testing.assert_close(logits, clf.module_(Xt))
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, yt))
    # ... weighted per sample, through classification_loss
    w = torch.tensor([1.0, 0.0, 2.0, 1.0, 0.0, 1.0, 1.0, 3.0], device=clf.device_)
    weighted, _ = clf.compute_loss(Xt, yt, training=True, sample_weight=w)
    ce = torch.nn.functional.cross_entropy(logits, yt, reduction="none")
    torch.testing.assert_close(weighted, (w * ce).sum() / w.sum())
    torch.testing.assert_close(clf.classification_loss(logits, yt, w), weighted)
    # handle_divergence: raises, naming the estimator and the loss
    with pytest.raises(
        DivergenceError, match="_Plain diverged in epoch 2: the training loss is inf"
    ):
        clf.handle_divergence(torch.tensor(float("inf")))


def test_the_training_step_calls_the_hooks_on_the_augmented_batch(small_blobs):
    X, y = small_blobs
    seen = {}

    class Recording(_Plain):
        def augment_batch(self, X):
            seen["augmented"] = X + 1.0
            return seen["augmented"]

        def compute_loss(self, X, y, training, sample_weight=None):
            seen.setdefault("losses", []).append((training, X, sample_weight))
            return super().compute_loss(X, y, training, sample_weight)

        def handle_divergence(self, loss):
            seen["diverged"] = loss.item()

    clf = Recording(**FAST).fit(X, y)
    Xt, yt = _tensors(clf, X, y)
    seen.clear()
    clf.train_step_single((Xt, yt))
    ((training, X_loss, weights),) = seen["losses"]
    assert training and X_loss is seen["augmented"] and weights is None
    assert "diverged" not in seen
    clf.validation_step((Xt, yt))  # never augmented
    assert seen["losses"][-1][0] is False and seen["losses"][-1][1] is Xt
    Xt[0, 0] = float("nan")
    clf.train_step_single((Xt, yt))
    assert np.isnan(seen["diverged"])
