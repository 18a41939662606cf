"""Errors and warnings of ebmclassifier."""

__all__ = ["DivergenceError"]


class DivergenceError(FloatingPointError):
    """Training diverged: the loss, the energies or the samples stopped being finite.

    Raised during ``fit`` instead of leaving a model that predicts NaN. The message names the
    epoch and batch, and what to change (usually a lower ``lr``).
    """
