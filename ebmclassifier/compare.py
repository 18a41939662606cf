"""The comparison behind ``python -m ebmclassifier compare``, importable from Python.

The code lives in :mod:`ebmclassifier.experiments.compare`; this module keeps its documented
names where they were (:class:`CompareConfig`, :func:`run_comparison`, :func:`write_report`,
:class:`Standardizer`, ...). See ``docs/compare.md`` for what the comparison measures.
"""

from .experiments.compare import *  # noqa: F403
from .experiments.compare import __all__  # noqa: F401
