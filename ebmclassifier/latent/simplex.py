"""Kept from release 0.1 so that its imports and pickles work; the code moved (below)."""

from .categorical.simplex import *  # noqa: F403
from .categorical.simplex import __all__  # noqa: F401
