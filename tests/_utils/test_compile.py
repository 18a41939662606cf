"""compile=True trains every first-order mode (ebmclassifier/_compile.py, issue #30).

The modes compile with ``compile__backend="aot_eager"``: dynamo and AOT-autograd, the layer
whose donated buffers broke the finite difference, without inductor's C++ build (a second per
mode instead of ten). One fit takes inductor, torch's default, end to end.
"""

import pickle

import numpy as np
import pytest
import torch

import ebmclassifier._estimator.base as base_module
from ebmclassifier import JEMClassifier, LatentStructureClassifier, NGEBMClassifier
from ebmclassifier._utils.compile import compile_in_place, no_donated_buffers
from ebmclassifier._utils.parameters import InvalidParameterError
from ebmclassifier.sampling.langevin import run_sampler

# 150 samples in batches of 32: the last batch of 22 recompiles for a dynamic batch size, the
# graph that torch compiles ahead of time, with donated buffers unless they are turned off.
FAST = dict(max_epochs=2, batch_size=32, random_state=0, device="cpu")
AOT = dict(FAST, compile=True, compile__backend="aot_eager")
MODES = {
    "ce": lambda **kw: NGEBMClassifier(beta=0.0, module__hidden_sizes=(8,), **kw),
    "ngebm_fd": lambda **kw: NGEBMClassifier(
        grad_norm="finite_difference", module__hidden_sizes=(8,), **kw
    ),
    "jem": lambda **kw: JEMClassifier(
        sgld_steps=3, buffer_size=64, module__hidden_sizes=(8,), **kw
    ),
    "latent": lambda **kw: LatentStructureClassifier(n_latent=3, **kw),
}


@pytest.fixture(scope="module")
def compiled_fit(small_blobs):
    """``compiled_fit(mode)``: the mode fitted with ``compile=True`` once for the module's tests,
    which only read it."""
    fits = {}

    def fitted(mode):
        if mode not in fits:
            fits[mode] = MODES[mode](**AOT).fit(*small_blobs)
        return fits[mode]

    return fitted


@pytest.mark.slow  # a compiled fit (dynamo traces it): CI runs it
@pytest.mark.parametrize("mode", list(MODES))
def test_compile_trains_the_same_objective(small_blobs, compiled_fit, mode):
    X, y = small_blobs
    compiled = compiled_fit(mode)
    plain = MODES[mode](**FAST).fit(X, y)
    np.testing.assert_allclose(
        compiled.history[:, "train_loss"], plain.history[:, "train_loss"], rtol=1e-4
    )
    np.testing.assert_allclose(compiled.predict_proba(X), plain.predict_proba(X), atol=1e-4)
    assert type(compiled.module_) is type(plain.module_)  # compiled in place


@pytest.mark.slow
def test_compile_with_inductor_trains_the_finite_difference(small_blobs):
    # the mode that crashed in its first batch ("compiled with non-empty donated buffers")
    X, y = small_blobs
    compiled = MODES["ngebm_fd"](**FAST, compile=True).fit(X, y)
    plain = MODES["ngebm_fd"](**FAST).fit(X, y)
    np.testing.assert_allclose(
        compiled.history[:, "train_loss"], plain.history[:, "train_loss"], rtol=1e-3
    )


@pytest.mark.slow  # a compiled fit (dynamo traces it): CI runs it
def test_without_the_switch_the_finite_difference_breaks(small_blobs, monkeypatch):
    # the regression the switch fixes, reproduced on the dynamic-shape graph
    from contextlib import nullcontext

    import ebmclassifier._estimator.engine as skorch_module
    import ebmclassifier._utils.compile as compile_module

    X, y = small_blobs
    monkeypatch.setattr(compile_module, "no_donated_buffers", nullcontext)
    monkeypatch.setattr(skorch_module, "no_donated_buffers", nullcontext)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="donated buffers"):
        MODES["ngebm_fd"](**AOT).fit(X, y)
    torch._dynamo.reset()  # no graph compiled with donated buffers is left for other tests


@pytest.mark.slow  # a compiled fit (dynamo traces it): CI runs it
def test_compiled_module_keeps_its_state_and_pickles_without_the_compiled_code(
    small_blobs, compiled_fit
):
    X, y = small_blobs
    clf = compiled_fit("ngebm_fd")
    keys = list(clf.module_.state_dict())
    assert keys and not any("_orig_mod" in k for k in keys)
    restored = pickle.loads(pickle.dumps(clf))
    assert restored.module_._compiled_call_impl is None  # torch drops it
    np.testing.assert_allclose(restored.predict_proba(X), clf.predict_proba(X), atol=1e-6)
    restored.partial_fit(X, y)  # compiles again
    assert restored.module_._compiled_call_impl is not None
    layer = torch.nn.Linear(2, 2)
    assert compile_in_place(layer) is compile_in_place(layer)  # once
    with no_donated_buffers():
        assert torch._functorch.config.donated_buffer is False


@pytest.mark.slow  # a compiled fit (dynamo traces it): CI runs it
def test_a_compiled_sgld_update_draws_the_same_samples():
    weights = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))

    def energy_fn(x):
        return -torch.logsumexp(x @ weights, dim=1)

    x0 = torch.randn(16, 6, generator=torch.Generator().manual_seed(1))
    low, high = torch.full((6,), -1.0), torch.full((6,), 1.0)
    for sampler in ("sgld", "proximal"):
        kwargs = dict(n_steps=5, step_size=0.5, noise=0.05, low=low, high=high, clip_fraction=0.1)
        eager = run_sampler(
            sampler, energy_fn, x0, **kwargs, generator=torch.Generator().manual_seed(2)
        )
        fused = run_sampler(
            sampler,
            energy_fn,
            x0,
            **kwargs,
            generator=torch.Generator().manual_seed(2),
            compile_kwargs={"backend": "aot_eager"},
        )
        torch.testing.assert_close(fused, eager, rtol=1e-5, atol=1e-6)
        assert not torch.equal(eager, x0)


def test_compile_where_it_fails_is_refused_before_anything_trains(small_blobs, monkeypatch):
    X, y = small_blobs
    # the estimator asks compile_problem (imported into its module) before it builds anything
    monkeypatch.setattr(
        base_module, "compile_problem", lambda device, backend: "CppCompileError: no g++"
    )
    clf = MODES["ce"](**FAST).fit(X, y)
    clf.set_params(compile=True)
    with pytest.raises(
        InvalidParameterError, match=r"compile=True\) cannot train .*no g\+\+.*compile=False"
    ):
        clf.fit(X, y)
    assert not clf.__sklearn_is_fitted__()


def test_compile_must_be_a_bool(small_blobs):
    X, y = small_blobs
    with pytest.raises(InvalidParameterError, match="'compile' parameter .* must be a bool"):
        MODES["ce"](**FAST, compile="yes").fit(X, y)
