"""Comparing float32 results whose kernels may round differently, in units of float32 epsilon.

Matrix products and reductions sum in an order that depends on the batch's layout (its size,
the order of its rows, where a row falls among the kernel's tiles) and on the thread count, so
the same rows in another batch may differ in the last bits. Such results are compared within a
stated number of float32 epsilons (``EPS32 = 2**-23``, about 1.19e-7) of the largest magnitude
involved; results the library promises bitwise (a seeded refit, a resumed fit, a save/load
round trip, the fit snapshot), computed with the same layout and thread count, are compared
exactly.
"""

from __future__ import annotations

import numpy as np
import torch

EPS32 = float(np.finfo(np.float32).eps)


def _numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


def assert_close_f32(actual, expected, ulps: float = 16, err_msg: str = "") -> None:
    """``|actual - expected| <= ulps * EPS32 * max(1, max |expected|)``, elementwise.

    The scale is the largest magnitude of ``expected`` (at least 1, so that values near 0 are
    held to the absolute bound): the rounding of a sum is relative to its terms, not to the
    result, which may cancel to nearly nothing.
    """
    a, b = _numpy(actual), _numpy(expected)
    assert a.shape == b.shape, f"shapes differ: {a.shape} and {b.shape}. {err_msg}"
    scale = max(1.0, float(np.abs(b).max())) if b.size else 1.0
    bound = ulps * EPS32 * scale
    np.testing.assert_allclose(
        a, b, rtol=0, atol=bound, err_msg=f"not within {ulps} float32 eps of {scale:.3g}. {err_msg}"
    )


#: scikit-learn checks that compare two fits' predictions at float64's tolerance (1e-7, one
#: float32 epsilon): run at float32's by :func:`run_sklearn_check`.
FLOAT32_CHECKS = ("check_sample_weight_equivalence_on_dense_data",)


def run_sklearn_check(check, estimator, monkeypatch) -> None:
    """Run a check of ``parametrize_with_checks``; those of :data:`FLOAT32_CHECKS` with their
    comparison at float32 precision (16 epsilons), since the estimators compute in float32.

    Weighting a sample by 2 and repeating it change the batches, so the losses sum in another
    order: the predictions agree to a few float32 epsilons (1e-7 to 5e-7 relative), which the
    check's ``rtol=1e-7`` makes pass or fail by the luck of the rounding.
    """
    from sklearn.utils import estimator_checks

    if getattr(check, "func", check).__name__ in FLOAT32_CHECKS:
        monkeypatch.setattr(
            estimator_checks,
            "assert_allclose_dense_sparse",
            lambda x, y, err_msg="", **_: assert_close_f32(x, y, err_msg=err_msg),
        )
    check(estimator)
