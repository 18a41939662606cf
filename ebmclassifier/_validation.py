"""One small helper to check constructor parameters and report every problem at once."""

from __future__ import annotations

from numbers import Integral, Real

__all__ = ["ParamChecker"]


class ParamChecker:
    """Collect messages about bad parameters, then raise them together.

    Messages follow scikit-learn's template: "The 'beta' parameter of NGEBMClassifier must be
    a float in the range [0, 1]. Got -0.1 instead."
    """

    def __init__(self, estimator) -> None:
        self.owner = type(estimator).__name__
        self.estimator = estimator
        self.messages: list[str] = []

    def _fail(self, name: str, expected: str) -> None:
        value = getattr(self.estimator, name)
        self.messages.append(
            f"The {name!r} parameter of {self.owner} must be {expected}. Got {value!r} instead."
        )

    def real(
        self,
        name: str,
        low: float | None = None,
        high: float | None = None,
        *,
        allow_none: bool = False,
        low_open: bool = False,
    ) -> None:
        """Check a real number in [low, high] (``(low, high]`` if ``low_open``)."""
        value = getattr(self.estimator, name)
        if value is None and allow_none:
            return
        ok = isinstance(value, Real) and not isinstance(value, bool) and value == value
        if ok and low is not None:
            ok = value > low if low_open else value >= low
        if ok and high is not None:
            ok = value <= high
        if not ok:
            left = "(" if low_open else "["
            lo = "-inf" if low is None else low
            hi = "inf" if high is None else high
            what = f"a float in the range {left}{lo}, {hi}]"
            self._fail(name, what + (" or None" if allow_none else ""))

    def integer(self, name: str, low: int | None = None, *, allow_none: bool = False) -> None:
        """Check an integer >= low."""
        value = getattr(self.estimator, name)
        if value is None and allow_none:
            return
        if not (isinstance(value, Integral) and not isinstance(value, bool)) or (
            low is not None and value < low
        ):
            self._fail(name, f"an int >= {low}" + (" or None" if allow_none else ""))

    def choice(self, name: str, options: tuple) -> None:
        """Check membership in a set of options."""
        if getattr(self.estimator, name) not in options:
            self._fail(name, "one of " + ", ".join(repr(o) for o in options))

    def add(self, message: str) -> None:
        """Add a message of one's own (for constraints between parameters)."""
        self.messages.append(message)

    def raise_if_any(self) -> None:
        if self.messages:
            raise ValueError("\n".join(self.messages))
