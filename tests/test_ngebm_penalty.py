"""NG-EBM's cheaper penalty: ``penalty_every`` (lazy) and ``penalty_fraction`` (issue #40).

The defaults are the paper's loss bitwise; a lazy step's parameter gradient is the cross-entropy's
plus ``k`` times the penalty's, a skipped step the cross-entropy's alone (and it takes no input
gradient); a fraction's penalty is the one of its rows; the step count is training state, so a
lazy fit resumes bitwise wherever it was killed. The references are written here from the
equations (per-sample input gradients by ``torch.func``), not taken from the library.
"""

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.base import clone
from sklearn.datasets import load_digits, make_blobs
from sklearn.model_selection import GridSearchCV
from skorch.callbacks import Checkpoint, LoadInitState
from torch.func import functional_call, grad, vmap
from torch.utils.data import Dataset

from ebmclassifier import NGEBMClassifier, load
from ebmclassifier.distributed import DataParallelNGEBMClassifier
from ebmclassifier.energy import energy_grad_norm_finite_difference, penalty_rows
from ebmclassifier.losses import ngebm_loss

from . import estimators
from .kills import Kill, SaveEachEpoch

FAST = estimators.params("ngebm", max_epochs=2, batch_size=32)

# ---------------------------------------------------------------- references


def _penalty_by_hand(module, x, weights=None) -> torch.Tensor:
    """``sum_i w_i ||dE/dx (x_i)|| / sum_i w_i``, its graph reaching the parameters."""
    params = dict(module.named_parameters())

    def energy_one(p, xi):
        return -torch.logsumexp(functional_call(module, p, (xi.unsqueeze(0),))[0], dim=0)

    grads = vmap(grad(energy_one, argnums=1), in_dims=(None, 0))(params, x)
    norms = torch.linalg.vector_norm(grads.flatten(1), dim=1)
    return norms.mean() if weights is None else (weights * norms).sum() / weights.sum()


def _ce_by_hand(logits, y, weights=None) -> torch.Tensor:
    if weights is None:
        return F.cross_entropy(logits, y)
    return (weights * F.cross_entropy(logits, y, reduction="none")).sum() / weights.sum()


def _gradients(module, loss) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, list(module.parameters())))


def _step_gradients(clf, X, y, weights=None) -> list[torch.Tensor]:
    kwargs = {} if weights is None else {"sample_weight": weights}
    loss, _ = clf.compute_loss(X, y, training=True, **kwargs)
    return _gradients(clf.module_, loss)


def _assert_close(actual, expected, **tolerance):
    for a, b in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, b, **tolerance)


@pytest.fixture(scope="module")
def batch(small_blobs):
    X, y = small_blobs
    return torch.tensor(X[:16]), torch.tensor(y[:16])


def _fitted(small_blobs, **params) -> NGEBMClassifier:
    X, y = small_blobs
    return NGEBMClassifier(**{**FAST, "max_epochs": 1, **params}).fit(X, y)


# ---------------------------------------------------------------- the defaults: today's loss


class PaperLoss(NGEBMClassifier):
    """The loss of the paper written out, as the estimator trained it before issue #40."""

    def compute_loss(self, X, y, training, sample_weight=None):
        x = X.detach().requires_grad_(True)
        logits = self.module_(x)
        energies = -torch.logsumexp(logits, dim=1)
        create = training and self.grad_norm == "exact"
        (g,) = torch.autograd.grad(energies.sum(), x, create_graph=create, retain_graph=True)
        flat = g.flatten(1)
        norms = torch.linalg.vector_norm(flat, dim=1)
        if self.grad_norm == "finite_difference":
            h = self.fd_step_size_
            v = (flat / norms.clamp_min(torch.finfo(flat.dtype).tiny).unsqueeze(1)).view_as(g)
            shifted = -torch.logsumexp(self.module_(x.detach() + h * v), dim=1)
            difference = (shifted - energies) / h
            norms = norms + (difference - difference.detach())
        if sample_weight is None:
            ce, penalty = F.cross_entropy(logits, y), norms.mean()
        else:
            w, total = sample_weight, sample_weight.sum()
            ce = (w * F.cross_entropy(logits, y, reduction="none")).sum() / total
            penalty = (w * norms).sum() / total
        return (1.0 - self.beta) * ce + self.beta * penalty, logits


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("grad_norm", ["exact", "finite_difference"])
def test_interval_1_fraction_1_is_the_paper_loss_bitwise(small_blobs, grad_norm, weighted):
    X, y = small_blobs
    weights = np.linspace(0.5, 2.0, len(y)) if weighted else None
    params = dict(FAST, beta=0.3, grad_norm=grad_norm)
    new = NGEBMClassifier(penalty_every=1, penalty_fraction=1.0, **params)
    new.fit(X, y, sample_weight=weights)
    old = PaperLoss(**params).fit(X, y, sample_weight=weights)
    for (name, a), b in zip(new.module_.state_dict().items(),
                            old.module_.state_dict().values(), strict=True):  # fmt: skip
        assert torch.equal(a, b), name
    assert new.history[:, "train_loss"] == old.history[:, "train_loss"]


# ---------------------------------------------------------------- the lazy penalty


@pytest.mark.parametrize("grad_norm", ["exact", "finite_difference"])
def test_a_lazy_step_is_ce_plus_k_times_the_penalty_and_a_skipped_step_ce(
    small_blobs, batch, grad_norm
):
    X, y = batch
    lazy = _fitted(small_blobs, beta=0.3, penalty_every=4, grad_norm=grad_norm)
    ce = _gradients(lazy.module_, _ce_by_hand(lazy.module_(X), y))
    penalty = _gradients(lazy.module_, _penalty_by_hand(lazy.module_, X))
    lazy.penalty_every, lazy.train_steps_ = 1, 9  # the full penalty runs at every step
    full_step = _step_gradients(lazy, X, y)
    lazy.penalty_every, lazy.train_steps_ = 4, 8  # 8 % 4 == 0: the penalty, weighted by 4
    lazy_step = _step_gradients(lazy, X, y)
    # on the steps it runs, the lazy penalty's gradient is 4 times the full penalty's
    _assert_close([a - 0.7 * c for a, c in zip(lazy_step, ce, strict=True)],
                  [4 * (b - 0.7 * c) for b, c in zip(full_step, ce, strict=True)],
                  rtol=1e-4, atol=1e-6)  # fmt: skip
    if grad_norm == "exact":  # and both are the penalty of the equation
        expected = [0.7 * c + 4 * 0.3 * p for c, p in zip(ce, penalty, strict=True)]
        _assert_close(lazy_step, expected, rtol=1e-4, atol=1e-6)
    for skipped in (9, 10, 11):
        lazy.train_steps_ = skipped
        _assert_close(_step_gradients(lazy, X, y), [0.7 * c for c in ce], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("grad_norm", ["exact", "finite_difference"])
def test_a_skipped_step_pays_for_no_input_gradient(small_blobs, batch, grad_norm, monkeypatch):
    X, y = batch
    lazy = _fitted(small_blobs, penalty_every=2, grad_norm=grad_norm)
    forwards = []
    lazy.module_.register_forward_hook(lambda module, args, out: forwards.append(len(args[0])))
    calls, original = [], torch.autograd.grad

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch.autograd, "grad", counted)
    lazy.train_steps_ = 3
    lazy.compute_loss(X, y, training=True)[0].backward()
    assert forwards == [16] and calls == []  # the cross-entropy's forward pass alone
    lazy.train_steps_ = 4
    forwards.clear()
    lazy.compute_loss(X, y, training=True)[0].backward()
    assert forwards == ([16] if grad_norm == "exact" else [16, 16]) and calls == [1]


def test_the_validation_loss_is_the_whole_objective(small_blobs, batch):
    X, y = batch
    lazy = _fitted(small_blobs, penalty_every=4, penalty_fraction=0.25)
    lazy.train_steps_ = 1  # a skipped training step
    loss, logits = lazy.compute_loss(X, y, training=False)
    expected, _ = ngebm_loss(lazy.module_, X, y, beta=0.5, create_graph=False)
    assert torch.equal(loss, expected)


def test_steps_are_counted_since_the_network_was_built(small_blobs):
    X, y = small_blobs  # 150 samples in batches of 32: 5 steps per epoch
    clf = NGEBMClassifier(**FAST, penalty_every=3).fit(X, y)
    assert clf.train_steps_ == 10
    clf.set_params(max_epochs=1).partial_fit(X, y)
    assert clf.train_steps_ == 15
    assert clf.set_params(warm_start=True).fit(X, y).train_steps_ == 20
    assert clf.set_params(warm_start=False).fit(X, y).train_steps_ == 5  # a new network


def test_partial_fit_continues_the_rhythm_bitwise(small_blobs):
    # 5 steps per epoch, an interval of 3: a count restarting per call would move the penalty
    X, y = small_blobs
    straight = NGEBMClassifier(**{**FAST, "max_epochs": 4}, penalty_every=3).fit(X, y)
    continued = NGEBMClassifier(**FAST, penalty_every=3).fit(X, y).partial_fit(X, y)
    for a, b in zip(straight.module_.parameters(), continued.module_.parameters(), strict=True):
        assert torch.equal(a, b)


# ---------------------------------------------------------------- streamed input, early stopping


class Pairs(Dataset):
    """A user's map-style dataset of ``(sample, label)`` pairs."""

    def __init__(self, X, y):
        self.X, self.y = X, y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


def test_streamed_input_trains_the_lazy_fraction_as_the_array(tmp_path):
    # uint8 images, a memmap and a Dataset are read batch by batch (issue #38): the same
    # shuffled batches, so the same first rows carry the penalty and the fit is the array's
    X, y = load_digits(return_X_y=True)
    X, y = (X[:300] * 15).astype(np.uint8), y[:300]
    params = dict(FAST, penalty_every=3, penalty_fraction=0.25)
    reference = NGEBMClassifier(**params).fit(X.astype(np.float32), y)
    memmap = np.lib.format.open_memmap(tmp_path / "X.npy", "w+", np.uint8, X.shape)
    memmap[:] = X
    for data, labels in [(X, y), (memmap, y), (Pairs(X, y), None)]:
        clf = NGEBMClassifier(**params).fit(data, labels)
        assert clf.train_steps_ == reference.train_steps_ == 20  # 10 batches of 32 per epoch
        assert _same_parameters(clf, reference)


def test_early_stopping_monitors_the_whole_objective(small_blobs, monkeypatch):
    # the held-out loss skorch's EarlyStopping reads is gamma CE + beta penalty over every row
    # at every epoch, whatever the training steps do
    seen = []
    original = NGEBMClassifier.compute_loss

    def spy(self, X, y, training, sample_weight=None):
        loss, logits = original(self, X, y, training, sample_weight=sample_weight)
        if not training:
            whole, _ = ngebm_loss(self.module_, X, y, beta=0.5, create_graph=False)
            seen.append((loss.item(), whole.item()))
        return loss, logits

    monkeypatch.setattr(NGEBMClassifier, "compute_loss", spy)
    params = dict(FAST, max_epochs=4, penalty_every=4, penalty_fraction=0.25)
    clf = NGEBMClassifier(**params, early_stopping=True, validation_fraction=0.2)
    clf.fit(*small_blobs)
    recorded = [
        b["valid_loss"] for epoch in clf.history for b in epoch["batches"] if "valid_loss" in b
    ]
    assert len(seen) == len(recorded) == 4  # 30 held-out samples: one batch per epoch
    assert [loss for loss, _ in seen] == [whole for _, whole in seen] == recorded
    assert clf.train_steps_ == 16  # 120 training samples: 4 batches per epoch


# ---------------------------------------------------------------- the fraction


def test_penalty_rows_is_the_ceiling_of_the_fraction():
    assert [penalty_rows(64, f) for f in (1.0, 0.5, 0.25, 0.1, 0.001)] == [64, 32, 16, 7, 1]
    assert penalty_rows(30, 0.1) == 3  # 0.1 * 30 is 3.0000000000000004 in floating point
    assert penalty_rows(5, 0.5) == 3 and penalty_rows(1, 0.5) == 1
    for bad in (0.0, -0.5, 1.5, float("nan"), True, "half"):
        with pytest.raises(ValueError, match="penalty_fraction must be a float in the range"):
            penalty_rows(8, bad)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_the_fraction_is_the_penalty_of_its_rows(small_blobs, batch, weighted):
    X, y = batch  # 16 rows, a quarter: the first 4
    weights = torch.linspace(0.0, 3.0, 16) if weighted else None  # the first row weighs 0
    clf = _fitted(small_blobs, beta=0.3, penalty_fraction=0.25)
    actual = _step_gradients(clf, X, y, weights)
    module = clf.module_
    loss = 0.7 * _ce_by_hand(module(X), y, weights)
    loss = loss + 0.3 * _penalty_by_hand(module, X[:4], None if weights is None else weights[:4])
    _assert_close(actual, _gradients(module, loss), rtol=1e-4, atol=1e-6)


def test_the_finite_difference_fraction_is_the_penalty_of_its_rows(small_blobs, batch):
    X, y = batch
    clf = _fitted(small_blobs, beta=0.3, penalty_fraction=0.5, grad_norm="finite_difference")
    weights = torch.linspace(1.0, 2.0, 16)
    actual = _step_gradients(clf, X, y, weights)
    module, h = clf.module_, clf.fd_step_size_
    norms, _, _ = energy_grad_norm_finite_difference(module, X[:8], h)
    penalty = (weights[:8] * norms).sum() / weights[:8].sum()
    loss = 0.7 * _ce_by_hand(module(X), y, weights) + 0.3 * penalty
    _assert_close(actual, _gradients(module, loss), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad_norm", ["exact", "finite_difference"])
def test_the_fraction_backpropagates_through_its_rows_only(small_blobs, batch, grad_norm):
    X, y = batch
    clf = _fitted(small_blobs, penalty_fraction=0.25, grad_norm=grad_norm)
    forwards = []
    clf.module_.register_forward_hook(lambda module, args, out: forwards.append(len(args[0])))
    loss, logits = clf.compute_loss(X, y, training=True)
    # the penalty's rows with their input gradient, the others for the cross-entropy alone
    assert forwards == ([4, 12] if grad_norm == "exact" else [4, 12, 4])
    torch.testing.assert_close(logits, clf.module_(X))  # in the batch's order


# ---------------------------------------------------------------- resume


EPOCHS = 6


def _lazy(**params) -> NGEBMClassifier:
    # 5 steps per epoch, an interval of 3: epoch 2 ends at step 10, between two penalty steps
    lazy = dict(FAST, max_epochs=EPOCHS, penalty_every=3, penalty_fraction=0.5)
    return NGEBMClassifier(**{**lazy, **params})


@pytest.fixture(scope="module")
def uninterrupted(small_blobs):
    return _lazy().fit(*small_blobs)


def _resumed(small_blobs, folder, how, forget_the_count=False) -> NGEBMClassifier:
    """Killed after epoch 2, then resumed ``how``, with torch's generator elsewhere."""
    X, y = small_blobs
    checkpoint = Checkpoint(monitor=None, dirname=str(folder), f_training_state="state.pt")
    saving = checkpoint if how == "checkpoint" else SaveEachEpoch(folder / "run.ebm")
    with pytest.raises(KeyError, match="killed"):
        _lazy(callbacks=[saving, Kill(2)]).fit(X, y)
    with torch.random.fork_rng():
        torch.manual_seed(987)  # as in another process
        if how == "checkpoint":
            resumed = _lazy(max_epochs=EPOCHS - 2, callbacks=[LoadInitState(checkpoint)])
            return resumed.fit(X, y)
        resumed = load(folder / "run.ebm", callbacks=None)
        assert resumed.train_steps_ == 10
        if forget_the_count:
            resumed.train_steps_ = 0
        return resumed.set_params(max_epochs=EPOCHS - 2).partial_fit(X, y)


def _same_parameters(a, b) -> bool:
    pairs = zip(a.module_.parameters(), b.module_.parameters(), strict=True)
    return all(torch.equal(p, q) for p, q in pairs)


@pytest.mark.parametrize("how", ["checkpoint", "save"])
def test_a_killed_lazy_fit_resumes_bitwise(small_blobs, uninterrupted, tmp_path, how):
    resumed = _resumed(small_blobs, tmp_path, how)
    assert resumed.train_steps_ == uninterrupted.train_steps_ == 30
    assert _same_parameters(resumed, uninterrupted)
    X, _ = small_blobs
    np.testing.assert_array_equal(resumed.predict_proba(X), uninterrupted.predict_proba(X))


def test_without_the_step_count_a_lazy_fit_resumes_out_of_rhythm(
    small_blobs, uninterrupted, tmp_path
):
    resumed = _resumed(small_blobs, tmp_path, "save", forget_the_count=True)
    assert not _same_parameters(resumed, uninterrupted)


def test_a_class_incremental_stream_resumes_bitwise_between_tasks(tmp_path):
    X, y = make_blobs(240, n_features=4, centers=4, random_state=0)
    X = X.astype(np.float32)
    params = dict(FAST, class_incremental=True, penalty_every=3, penalty_fraction=0.5)
    params.update(replay_per_class=5, generated_per_class=0)  # the reservoir, no sampling
    tasks = [np.isin(y, labels) for labels in ((0, 1), (2, 3))]
    straight = NGEBMClassifier(**params)
    for rows in tasks:
        straight.partial_fit(X[rows], y[rows])
    first = NGEBMClassifier(**params).partial_fit(X[tasks[0]], y[tasks[0]])
    first.save(tmp_path / "task1.ebm")
    resumed = load(tmp_path / "task1.ebm").partial_fit(X[tasks[1]], y[tasks[1]])
    assert resumed.classes_.tolist() == [0, 1, 2, 3]
    assert resumed.train_steps_ == straight.train_steps_ > first.train_steps_ == 8
    assert _same_parameters(resumed, straight)


# ---------------------------------------------------------------- the estimator's face


def test_bad_values_are_named(small_blobs):
    X, y = small_blobs
    for params, message in [
        (dict(penalty_every=0), "'penalty_every' parameter of NGEBMClassifier must be an int"),
        (dict(penalty_every=2.0), "'penalty_every' parameter of NGEBMClassifier must be an int"),
        (dict(penalty_fraction=0.0), "'penalty_fraction' parameter .* range \\(0.0, 1.0\\]"),
        (dict(penalty_fraction=1.5), "'penalty_fraction' parameter .* range \\(0.0, 1.0\\]"),
        (dict(penalty_fraction=0.5, iterator_train__shuffle=False), "Shuffle the batches"),
    ]:
        with pytest.raises(ValueError, match=message):
            NGEBMClassifier(**FAST, **params).fit(X, y)


def test_data_parallel_training_refuses_a_fraction(small_blobs):
    with pytest.raises(ValueError, match="penalty_fraction=0.5 takes the penalty from the first"):
        DataParallelNGEBMClassifier(penalty_fraction=0.5, random_state=0).fit(*small_blobs)


def test_clone_and_grid_search_take_the_parameters(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(penalty_every=4, penalty_fraction=0.5)
    assert clone(clf).get_params()["penalty_every"] == 4
    assert clone(clf).penalty_fraction == 0.5
    grid = {"penalty_every": [1, 8], "penalty_fraction": [0.25]}
    search = GridSearchCV(NGEBMClassifier(**{**FAST, "max_epochs": 1}), grid, cv=2).fit(X, y)
    assert search.best_params_["penalty_every"] in (1, 8)
    assert search.best_estimator_.penalty_fraction == 0.25


def test_save_and_load_keep_the_parameters_and_the_count(small_blobs, tmp_path):
    X, y = small_blobs
    clf = NGEBMClassifier(**FAST, penalty_every=3, penalty_fraction=0.5).fit(X, y)
    clf.save(tmp_path / "lazy.ebm")
    restored = load(tmp_path / "lazy.ebm")
    assert (restored.penalty_every, restored.penalty_fraction) == (3, 0.5)
    assert restored.train_steps_ == 10
    clf.save(tmp_path / "inference.ebm", training_state=False)
    assert load(tmp_path / "inference.ebm").train_steps_ == 0  # a new count, as for a new fit


def test_a_file_from_before_the_option_loads_with_the_defaults():
    old = load(Path(__file__).parent / "fixtures" / "saved" / "ngebm.ebm")
    assert (old.penalty_every, old.penalty_fraction, old.train_steps_) == (1, 1.0, 0)


@pytest.mark.parametrize("count", [-1, 2.5, "3"])
def test_a_file_with_a_bad_count_is_refused(small_blobs, tmp_path, count):
    clf = NGEBMClassifier(**FAST, penalty_every=3).fit(*small_blobs)
    buffer = io.BytesIO()
    clf.save(buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    weights = torch.load(io.BytesIO(members["weights.pt"]), weights_only=True)
    weights["states"]["training_state_"]["estimator"]["train_steps"] = count
    forged = io.BytesIO()
    torch.save(weights, forged)
    members["weights.pt"] = forged.getvalue()
    path = tmp_path / "forged.ebm"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match="step count must be an int >= 0"):
        load(path)


# ---------------------------------------------------------------- precision and compile


def test_bfloat16_trains_lazily_and_reproducibly(small_blobs):
    X, y = small_blobs
    params = dict(FAST, precision="bfloat16", penalty_every=2, penalty_fraction=0.5)
    first = NGEBMClassifier(**params).fit(X, y)
    second = NGEBMClassifier(**params).fit(X, y)
    assert _same_parameters(first, second) and first.train_steps_ == 10
    assert np.isfinite(first.history[:, "train_loss"]).all()


@pytest.mark.cuda
def test_float16_on_a_gpu_trains_lazily(small_blobs):
    X, y = small_blobs
    params = dict(FAST, device="cuda", precision="float16", penalty_every=2)
    clf = NGEBMClassifier(**params, penalty_fraction=0.5).fit(X, y)
    assert clf.train_steps_ == 10 and np.isfinite(clf.history[:, "train_loss"]).all()


@pytest.mark.slow  # a compiled fit (dynamo traces it): CI runs it
def test_compile_trains_the_same_lazy_objective(small_blobs):
    X, y = small_blobs
    params = dict(FAST, grad_norm="finite_difference", penalty_every=2, penalty_fraction=0.5)
    compiled = NGEBMClassifier(**params, compile=True, compile__backend="aot_eager").fit(X, y)
    plain = NGEBMClassifier(**params).fit(X, y)
    np.testing.assert_allclose(
        compiled.history[:, "train_loss"], plain.history[:, "train_loss"], rtol=1e-4
    )
    np.testing.assert_allclose(compiled.predict_proba(X), plain.predict_proba(X), atol=1e-4)
