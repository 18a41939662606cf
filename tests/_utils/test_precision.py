"""precision="float32" | "bfloat16" | "float16" (ebmclassifier/_utils/precision.py, issue #30).

float32 is today's training bit for bit; bfloat16 trains on the CPU (its autocast) as well as
float32 does; float16 is refused on the CPU, so its scaler and divergence paths are exercised
here by lifting that refusal (CPU autocast computes float16 too, only slowly).
"""

import pickle
from contextlib import nullcontext

import numpy as np
import pytest
import torch
from sklearn.base import clone

import ebmclassifier._estimator.base as base_module
from ebmclassifier import (
    DivergenceError,
    JEMClassifier,
    LatentStructureClassifier,
    NGEBMClassifier,
    load,
)
from ebmclassifier._utils.parameters import InvalidParameterError
from ebmclassifier._utils.precision import (
    FD_STEPS,
    Precision,
    autocast,
    grad_scaler,
    precision_problem,
)
from ebmclassifier.energy import energy_grad_norm
from ebmclassifier.experiments.bench import _hand_fit
from ebmclassifier.losses import fd_step_size

from ..estimators import params

PARAMS = dict(max_epochs=2, random_state=0, device="cpu")
TINY = params("ngebm", max_epochs=2, device="cpu")
CPU = torch.device("cpu")


@pytest.fixture
def float16_on_cpu(monkeypatch):
    """Lift the refusal of float16 on the CPU, to run the scaler's code paths here (the
    estimator asks precision_problem, imported into its module, before it builds anything)."""
    monkeypatch.setattr(
        base_module,
        "precision_problem",
        lambda p, d: None if p == "float16" else precision_problem(p, d),
    )


# ----------------------------------------------------------------------------- float32


def test_float32_trains_the_hand_written_loop_bit_for_bit(digits_split):
    X, _, y, _ = digits_split
    X, y = X[:320], y[:320]
    for mode in ("exact", "finite_difference"):
        clf = NGEBMClassifier(
            grad_norm=mode, precision="float32", max_epochs=2, random_state=0, device="cpu"
        ).fit(X, y)
        assert clf.fd_step_size_ == fd_step_size(X, 0.01)  # "auto" is float32's old step
        hand = _hand_fit(X, y, clf.seed_, 2, mode, clf.fd_step_size_)
        for ours, theirs in zip(clf.module_.parameters(), hand.parameters(), strict=True):
            assert torch.equal(ours.detach(), theirs.detach())


def test_float32_builds_no_autocast_and_no_scaler():
    assert NGEBMClassifier().precision == "float32"
    assert isinstance(autocast("float32", CPU), nullcontext)
    assert grad_scaler("float32", CPU) is None and grad_scaler("bfloat16", CPU) is None


# ----------------------------------------------------------------------------- bfloat16


class _DtypeProbe(torch.nn.Module):
    """A linear classifier that records the dtype of its output at each call."""

    def __init__(self, n_features, n_classes):
        super().__init__()
        self.linear = torch.nn.Linear(n_features, n_classes)
        self.seen = []

    def forward(self, x):
        out = self.linear(x)
        self.seen.append((torch.is_grad_enabled(), out.dtype))
        return out


def test_bfloat16_runs_the_forward_passes_in_bf16_and_keeps_float32_state(small_blobs):
    X, y = small_blobs
    # n_threads=None: "auto" counts the network's multiply-adds with one float32 probe of a
    # sample per call (tests/_utils/test_threads.py), which is not one of the forward passes
    # checked here
    clf = JEMClassifier(
        module=_DtypeProbe,
        precision="bfloat16",
        sgld_steps=2,
        buffer_size=32,
        n_threads=None,
        **PARAMS,
    ).fit(X, y)
    net = clf.module_
    training = [dtype for grad, dtype in net.seen if grad]
    assert training and set(training[1:]) == {torch.bfloat16}  # the first is fit's own check
    assert all(p.dtype == torch.float32 for p in net.parameters())
    state = clf.optimizer_.state[net.linear.weight]
    assert state["exp_avg"].dtype == torch.float32
    net.seen.clear()
    proba, energies = clf.predict_proba(X), clf.energy(X)
    assert {dtype for _, dtype in net.seen} == {torch.bfloat16}
    assert proba.dtype == np.float32 and energies.dtype == np.float32
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    net.seen.clear()
    assert clf.sample(3, n_steps=2).dtype == np.float32
    assert {dtype for _, dtype in net.seen} == {torch.bfloat16}  # SGLD in bf16 too


@pytest.mark.slow  # an accuracy on the digits, six trainings of 5 to 10 epochs
@pytest.mark.parametrize(
    "make",
    [
        lambda p: NGEBMClassifier(
            grad_norm="finite_difference", max_epochs=8, module__hidden_sizes=(64,), precision=p
        ),
        lambda p: JEMClassifier(
            sgld_steps=5, buffer_size=500, max_epochs=5, module__hidden_sizes=(64,), precision=p
        ),
        lambda p: LatentStructureClassifier(n_latent=10, max_epochs=10, precision=p),
    ],
    ids=["ngebm_fd", "jem", "latent"],
)
def test_bfloat16_reaches_the_float32_accuracy_on_the_digits(digits_split, make):
    X_train, X_test, y_train, y_test = digits_split
    scores = {}
    for precision in ("float32", "bfloat16"):
        clf = make(precision).set_params(random_state=0, device="cpu").fit(X_train, y_train)
        scores[precision] = clf.score(X_test, y_test)
    assert scores["float32"] > 0.8  # it learned something
    assert abs(scores["bfloat16"] - scores["float32"]) <= 0.03, scores


def test_bfloat16_finite_difference_with_its_step_follows_the_exact_gradient(digits_split):
    # The default MLP is smooth (SiLU); fit with max_epochs=0 resolves fd_step="auto".
    X, _, y, _ = digits_split
    cosines = {}
    for precision in ("float32", "bfloat16"):
        clf = NGEBMClassifier(
            grad_norm="finite_difference", precision=precision, max_epochs=0, random_state=0
        ).fit(X, y)
        assert clf.fd_step_size_ == pytest.approx(fd_step_size(X, FD_STEPS[precision]))
        params = list(clf.module_.parameters())
        xb = torch.tensor(X[:64], device=clf.device_)
        exact, _, _ = energy_grad_norm(clf.module_, xb, create_graph=True)
        g_exact = torch.cat([g.flatten() for g in torch.autograd.grad(exact.mean(), params)])
        with clf._precision().autocast():
            loss, _ = clf.compute_loss(xb, torch.tensor(y[:64]), training=True)
        # the loss is 0.5 CE + 0.5 mean ||g||: its gradient less the CE's is the penalty's
        ce = clf.classification_loss(clf.module_(xb), torch.tensor(y[:64]))
        g_loss = torch.autograd.grad(loss, params, retain_graph=True)
        g_ce = torch.autograd.grad(ce, params)
        g_fd = torch.cat([(a - 0.5 * b).flatten() for a, b in zip(g_loss, g_ce, strict=True)])
        cosines[precision] = float(torch.nn.functional.cosine_similarity(g_fd, 0.5 * g_exact, 0))
    assert cosines["float32"] > 0.999
    assert cosines["bfloat16"] >= 0.99, cosines


def test_bfloat16_at_the_float32_step_loses_the_gradient_on_the_convnet(digits_split):
    # why the step depends on the precision: a 0.01 difference of bf16 energies is noise
    X, _, y, _ = digits_split
    images = X.reshape(-1, 1, 8, 8)
    clf = NGEBMClassifier(max_epochs=0, random_state=0).fit(images, y)
    xb = torch.tensor(images[:64])
    params = list(clf.module_.parameters())

    def grad(step, precision):
        from ebmclassifier.energy import energy_grad_norm_finite_difference

        with autocast(precision, CPU):
            norms, _, _ = energy_grad_norm_finite_difference(
                clf.module_, xb, fd_step_size(images, step)
            )
        return torch.cat([g.flatten() for g in torch.autograd.grad(norms.mean(), params)])

    exact, _, _ = energy_grad_norm(clf.module_, xb, create_graph=True)
    g_exact = torch.cat([g.flatten() for g in torch.autograd.grad(exact.mean(), params)])

    def cosine(g):
        return float(torch.nn.functional.cosine_similarity(g, g_exact, 0))

    assert cosine(grad(0.01, "bfloat16")) < 0.9 < cosine(grad(FD_STEPS["bfloat16"], "bfloat16"))


# ----------------------------------------------------------------------------- round trips


def test_precision_round_trips_through_clone_pickle_and_save(small_blobs, tmp_path):
    X, y = small_blobs
    clf = NGEBMClassifier(precision="bfloat16", **TINY).fit(X, y)
    assert clone(clf).precision == "bfloat16"
    assert clf.get_params()["precision"] == "bfloat16"
    expected = clf.predict_proba(X)
    unpickled = pickle.loads(pickle.dumps(clf))
    assert unpickled.precision == "bfloat16"
    np.testing.assert_array_equal(unpickled.predict_proba(X), expected)
    clf.save(tmp_path / "model.ebm")
    loaded = load(tmp_path / "model.ebm", device="cpu")
    assert loaded.precision == "bfloat16" and loaded.fd_step == "auto"
    np.testing.assert_array_equal(loaded.predict_proba(X), expected)


@pytest.mark.cuda
def test_a_bfloat16_model_trained_on_the_gpu_predicts_on_the_cpu(small_blobs, tmp_path):
    X, y = small_blobs
    precision = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    clf = JEMClassifier(precision=precision, sgld_steps=2, buffer_size=32, **TINY)
    clf = clf.set_params(device="cuda").fit(X, y)
    assert clf.device_.type == "cuda"
    clf.save(tmp_path / "model.ebm")
    on_cpu = load(tmp_path / "model.ebm", device="cpu")
    assert on_cpu.device_.type == "cpu" and on_cpu.precision == precision
    np.testing.assert_allclose(on_cpu.predict_proba(X), clf.predict_proba(X), atol=2e-2)


# ----------------------------------------------------------------------------- refusals


def _unfitted(clf) -> bool:
    return not clf.__sklearn_is_fitted__()


def test_an_unknown_precision_is_named(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(precision="half", **TINY)
    with pytest.raises(InvalidParameterError, match="'precision' parameter of NGEBMClassifier"):
        clf.fit(X, y)
    assert _unfitted(clf)


def test_float16_on_the_cpu_is_refused_before_anything_trains(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(**TINY).fit(X, y)
    clf.set_params(precision="float16")
    with pytest.raises(InvalidParameterError, match="needs a CUDA device.*precision='bfloat16'"):
        clf.fit(X, y)
    assert _unfitted(clf)  # a refit that raises before training leaves it unfitted
    assert "\n" not in precision_problem("float16", CPU)


def test_bfloat16_on_a_gpu_without_it_names_float16(monkeypatch):
    # an emulating GPU (a V100): bf16 "supported" only when emulation counts, which is slow
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100")
    monkeypatch.setattr(torch.cuda, "device", lambda device: torch.no_grad())
    message = precision_problem("bfloat16", torch.device("cuda"))
    assert "Tesla V100 has none; use precision='float16'" in message
    assert precision_problem("float16", torch.device("cuda")) is None


# ----------------------------------------------------------------------------- float16


def test_float16_scales_the_gradients_and_skips_the_steps_that_overflow(
    small_blobs, float16_on_cpu
):
    X, y = small_blobs
    clf = NGEBMClassifier(precision="float16", **TINY).fit(X, y)
    assert 0 < clf.loss_scale_ <= 2.0**16
    before = [p.detach().clone() for p in clf.module_.parameters()]
    clf.loss_scale_ = 2.0**24  # the first scaled gradients overflow float16
    clf.set_params(max_epochs=4).partial_fit(X, y)  # 12 steps
    assert clf.loss_scale_ < 2.0**24  # the scaler backed off ...
    assert all(torch.isfinite(p).all() for p in clf.module_.parameters())  # ... skipping steps
    moved = any(
        not torch.equal(p, b) for p, b in zip(clf.module_.parameters(), before, strict=True)
    )
    assert moved and np.isfinite(clf.predict_proba(X)).all()


def _layer_and_optimizer():
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    return layer, torch.optim.SGD(layer.parameters(), lr=0.1)


@pytest.mark.parametrize("scale", [2.0**4, 2.0**60])
def test_the_precision_object_steps_as_torchs_amp_recipe(scale):
    # Precision.backward + step against torch's own GradScaler recipe, at a scale whose
    # gradients are finite and one that overflows (the step is skipped, the scale lowered)
    x, y = torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    ours, opt = _layer_and_optimizer()
    precision = Precision("float16", CPU, scale=scale)
    with precision.autocast():
        loss = torch.nn.functional.cross_entropy(ours(x), y)
    precision.backward(loss, [opt])
    precision.step(lambda: None, [opt], plain_step=lambda fn: pytest.fail("not a plain step"))
    theirs, ref_opt = _layer_and_optimizer()
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    with torch.autocast("cpu", dtype=torch.float16):
        ref_loss = torch.nn.functional.cross_entropy(theirs(x), y)
    scaler.scale(ref_loss).backward()
    scaler.unscale_(ref_opt)
    scaler.step(ref_opt)
    scaler.update()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)
    assert precision.state_dict() == {"scale": float(scaler.get_scale())}


def test_the_precision_object_leaves_a_step_without_scaled_gradients_alone():
    layer, opt = _layer_and_optimizer()
    before = [p.detach().clone() for p in layer.parameters()]
    precision = Precision("float16", CPU, scale=8.0)
    ran = []
    precision.step(lambda: ran.append(1), [opt], plain_step=lambda fn: pytest.fail("plain"))
    assert ran == [1] and precision.state_dict() == {"scale": 8.0}
    assert all(torch.equal(p, b) for p, b in zip(layer.parameters(), before, strict=True))


@pytest.mark.parametrize("name", ["float32", "bfloat16"])
def test_the_precision_object_without_a_scaler_keeps_skorchs_step(name):
    layer, opt = _layer_and_optimizer()
    precision = Precision(name, CPU)
    loss = layer(torch.ones(1, 3)).sum()
    precision.backward(loss, [opt])
    stepped = []
    precision.step(lambda: None, [opt], plain_step=stepped.append)
    assert len(stepped) == 1 and precision.state_dict() == {}
    assert Precision("float16", CPU, training=False).state_dict() == {}  # inference: no scaler


def test_the_precision_objects_state_round_trips():
    precision = Precision("float16", CPU, scale=2.0**10)
    again = Precision("float16", CPU)
    again.load_state_dict(precision.state_dict())
    assert again.state_dict() == {"scale": 2.0**10}
    assert Precision("bfloat16", CPU).run(torch.nn.Linear(3, 2))(torch.ones(1, 3)).dtype == (
        torch.float32
    )
    assert Precision("float32", CPU).fd_step == FD_STEPS["float32"]


class _Overflow(torch.nn.Module):
    """Logits beyond float16's 65504 when the forward pass runs in float16."""

    def __init__(self, n_features, n_classes):
        super().__init__()
        self.linear = torch.nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.linear(x * 1e5)


def test_a_float16_overflow_goes_to_the_divergence_handling(small_blobs, float16_on_cpu):
    X, y = small_blobs
    NGEBMClassifier(module=_Overflow, beta=0.0, **PARAMS).fit(X, y)  # finite in float32
    clf = NGEBMClassifier(module=_Overflow, beta=0.0, precision="float16", **PARAMS)
    with pytest.raises(DivergenceError, match="float16 .* try precision='bfloat16'"):
        clf.fit(X, y)


class _JEMNanOnce(JEMClassifier):
    def compute_loss(self, X, y, training, sample_weight=None):
        loss, logits = super().compute_loss(X, y, training, sample_weight)
        self.calls_ = getattr(self, "calls_", 0) + 1
        return (loss * float("nan") if self.calls_ == 3 else loss), logits


def test_a_float16_jem_divergence_is_rolled_back(small_blobs, float16_on_cpu):
    X, y = small_blobs
    clf = _JEMNanOnce(precision="float16", sgld_steps=2, buffer_size=32, **TINY)
    with pytest.warns(RuntimeWarning, match="recovered from 1 divergence"):
        clf.fit(X, y)
    assert clf.n_divergences_ == 1
    assert all(torch.isfinite(p).all() for p in clf.module_.parameters())


def test_float16_survives_batches_without_weight_and_rejected_steps(small_blobs, float16_on_cpu):
    X, y = small_blobs
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    weights = (y != 0).astype(float)  # the first batches weigh nothing: no step, no scaler step
    clf = NGEBMClassifier(
        precision="float16", batch_size=16, iterator_train__shuffle=False, **TINY
    ).fit(X, y, sample_weight=weights)
    assert clf.loss_scale_ > 0 and np.isfinite(clf.predict_proba(X)).all()


def test_compositions_train_their_clones_in_the_experts_precision(small_blobs):
    from ebmclassifier import ProductOfExperts

    X, y = small_blobs
    experts = [(f"e{k}", NGEBMClassifier(precision="bfloat16", **TINY)) for k in range(2)]
    ensemble = ProductOfExperts(experts).fit(X, y)
    assert all(est.precision == "bfloat16" for est in ensemble.estimators_)
    proba = ensemble.predict_proba(X)
    assert proba.dtype == np.float32 and np.allclose(proba.sum(1), 1.0, atol=1e-5)
