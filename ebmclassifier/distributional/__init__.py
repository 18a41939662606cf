"""Distributional constraints on a classifier's predictions: the core and the estimator.

A wing: its functional core and its face side by side.

- :mod:`~ebmclassifier.distributional.posteriors`: the functions on arrays (the tilt of the
  posteriors and its convex dual, the EM and BBSE estimates of the priors, the Bayes
  correction, the demographic-parity constraints);
- :mod:`~ebmclassifier.distributional.calibration`: (bias-corrected) temperature scaling,
  the calibration that label-shift EM is paired with;
- :mod:`~ebmclassifier.distributional.shift_test`: the test of whether the class priors moved
  at all, which decides whether EM's priors are adopted;
- :mod:`~ebmclassifier.distributional.constraint`: :class:`DistributionalConstraint`, the
  meta-estimator that calls them.
"""

from .calibration import calibrated_log_proba, fit_temperature
from .constraint import DistributionalConstraint
from .posteriors import (
    bayes_correction,
    bayes_offset,
    bbse_priors,
    check_reachable,
    demographic_parity,
    dual_objective,
    em_priors,
    feasibility_margin,
    solve_dual,
    tilted_log_proba,
)
from .shift_test import PriorShiftTest, prior_shift_statistic, prior_shift_test

__all__ = [
    "DistributionalConstraint",
    "PriorShiftTest",
    "bayes_correction",
    "bayes_offset",
    "bbse_priors",
    "calibrated_log_proba",
    "check_reachable",
    "demographic_parity",
    "dual_objective",
    "em_priors",
    "feasibility_margin",
    "fit_temperature",
    "prior_shift_statistic",
    "prior_shift_test",
    "solve_dual",
    "tilted_log_proba",
]
