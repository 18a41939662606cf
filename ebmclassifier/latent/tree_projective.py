"""Kept from release 0.1 so that its imports and pickles work; the code moved (below)."""

from .trees.projective import *  # noqa: F403
from .trees.projective import __all__  # noqa: F401
