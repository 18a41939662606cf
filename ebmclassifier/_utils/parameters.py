"""Checking parameters: :class:`ParamChecker` collects every problem, then raises them together.

One checker for the whole package, in scikit-learn's wording. It checks the parameters of an
estimator (``ParamChecker(estimator)``) or the arguments of a function
(``ParamChecker.of({"n_steps": n_steps}, owner="sgld")``); the error is an
:class:`InvalidParameterError`, both a ``ValueError`` and a ``TypeError``, as scikit-learn's
is. Plain Python and no scikit-learn, so that the functional core (``sampling/``, the
networks) checks its own arguments at its public functions without reaching the estimators'
validation (``_utils/validation.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from numbers import Integral, Real

__all__ = ["InvalidParameterError", "ParamChecker", "is_int", "is_real"]


class InvalidParameterError(ValueError, TypeError):
    """A parameter has a bad type or value (a ``ValueError`` and a ``TypeError``)."""


def is_int(value) -> bool:
    """An integer, and not a bool (``True`` is no batch size)."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """A real number, not a bool and not NaN."""
    return isinstance(value, Real) and not isinstance(value, bool) and value == value


class ParamChecker:
    """Collect messages about bad parameters, then raise them together.

    Messages follow scikit-learn's template: "The 'beta' parameter of NGEBMClassifier must be
    a float in the range [0, 1]. Got -0.1 instead." Without an owner (a function's own
    arguments): "n_steps must be an int >= 0. Got -1 instead."

    Parameters
    ----------
    estimator : object
        Whose attributes are checked; its class names the owner.
    """

    def __init__(self, estimator) -> None:
        self.owner = type(estimator).__name__
        self.values = None
        self.estimator = estimator
        self.messages: list[str] = []

    @classmethod
    def of(cls, values: dict, owner: str | None = None) -> ParamChecker:
        """A checker of plain values, e.g. a function's arguments, by name."""
        checker = cls(None)
        checker.owner, checker.values = owner, dict(values)
        return checker

    def _value(self, name: str):
        if self.values is not None:
            return self.values[name]
        return getattr(self.estimator, name)

    def _subject(self, name: str) -> str:
        if self.owner is None:
            return name
        return f"The {name!r} parameter of {self.owner}"

    def satisfies(self, name: str, ok: bool, expected: str) -> None:
        """Record that ``name`` must be ``expected`` unless ``ok`` (any constraint of one's own)."""
        if not ok:
            value = self._value(name)
            self.messages.append(
                f"{self._subject(name)} must be {expected}. Got {value!r} instead."
            )

    def real(
        self,
        name: str,
        low: float | None = None,
        high: float | None = None,
        *,
        allow_none: bool = False,
        low_open: bool = False,
        finite: bool = True,
    ) -> None:
        """Check a real number in [low, high] (``(low, high]`` if ``low_open``), not NaN.

        ``inf`` and ``-inf`` are refused unless ``finite=False``: a parameter that means
        something at infinity says so in its docstring and passes ``finite=False``.
        """
        value = self._value(name)
        if value is None and allow_none:
            return
        ok = is_real(value) and not (finite and abs(value) == float("inf"))
        if ok and low is not None:
            ok = value > low if low_open else value >= low
        if ok and high is not None:
            ok = value <= high
        if ok and isinstance(value, Integral) and abs(value) >= 2**63:
            # torch takes a Python int beyond int64 in no arithmetic ("int too big to convert")
            self.messages.append(
                f"{self._subject(name)} must be a float or an int of 64 bits. Got {value!r} "
                f"instead; pass it as a float, {float(value)!r}."
            )
            return
        unbounded = low is None or high is None
        left = "(" if low_open or low is None else "["
        right = ")" if high is None and finite else "]"
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        kind = "finite float" if finite and unbounded else "float"
        what = f"a {kind} in the range {left}{lo}, {hi}{right}"
        self.satisfies(name, ok, what + (" or None" if allow_none else ""))

    def integer(self, name: str, low: int | None = None, *, allow_none: bool = False) -> None:
        """Check an integer >= low (not a bool)."""
        value = self._value(name)
        if value is None and allow_none:
            return
        ok = is_int(value) and (low is None or value >= low)
        what = "an int" if low is None else f"an int >= {low}"
        self.satisfies(name, ok, what + (" or None" if allow_none else ""))

    def int_sequence(self, name: str, low: int = 1, *, increasing: bool = False) -> None:
        """Check a sequence of integers >= low (layer sizes); it may be empty.

        ``increasing``: strictly increasing too (the epochs of a schedule). A one-shot iterator
        such as a generator is refused: checking it would consume it.
        """
        value = self._value(name)
        try:
            items = None if isinstance(value, str | bytes | Iterator) else list(value)
        except TypeError:  # not iterable
            items = None
        ok = items is not None and all(is_int(v) and v >= low for v in items)
        if ok and increasing:
            ok = all(a < b for a, b in pairwise(items))
        what = "a strictly increasing sequence" if increasing else "a sequence"
        self.satisfies(name, ok, f"{what} of ints >= {low}")

    def choice(self, name: str, options: tuple) -> None:
        """Check membership in a set of options."""
        ok = self._value(name) in options
        self.satisfies(name, ok, "one of " + ", ".join(repr(o) for o in options))

    def add(self, message: str) -> None:
        """Add a message of one's own (for constraints between parameters)."""
        self.messages.append(message)

    def raise_if_any(self) -> None:
        """Raise an :class:`InvalidParameterError` with every message, if there is any."""
        if self.messages:
            raise InvalidParameterError("\n".join(self.messages))
