"""Kept from release 0.1 so that its imports and pickles work; the code moved (below)."""

from .trees.networks import *  # noqa: F403
from .trees.networks import __all__  # noqa: F401
