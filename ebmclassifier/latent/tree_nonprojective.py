"""Kept from release 0.1 so that its imports and pickles work; the code moved (below)."""

from .trees.nonprojective import *  # noqa: F403
from .trees.nonprojective import __all__  # noqa: F401
