"""Kept from release 0.1 so that its imports and pickles work; the code moved (below)."""

from .trees.sparsemap import *  # noqa: F403
from .trees.sparsemap import __all__  # noqa: F401
