"""Collection of the doctests (``--doctest-modules`` over ``ebmclassifier/``, pyproject.toml)."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

# Importing it runs the command line.
collect_ignore = ["ebmclassifier/__main__.py"]


def _slow_doctest(item) -> bool:
    """The commands' doctests run a command's code end to end (a bench, a report); a doctest
    that fits with ``compile=True`` compiles (tests/_utils/test_compile.py tests it)."""
    if item.nodeid.startswith("ebmclassifier/experiments/"):
        return True
    return any("compile=True" in example.source for example in item.dtest.examples)


def pytest_collection_modifyitems(items):
    # slow: `python -m pytest -m "not slow"` leaves them out, also with `pytest ebmclassifier`
    for item in items:
        if type(item).__name__ == "DoctestItem" and _slow_doctest(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _shared_doctest_names(request):
    """Names the docstring examples share: ``np``, ``torch`` and a small three-class problem.

    ``X, y = make_blobs(40, n_features=4, centers=3, random_state=0)``, fresh for each
    example, as the module docstring of ``ebmclassifier._estimator.base`` says. The tests
    under ``tests/`` are no examples: they skip it.
    """
    if type(request.node).__name__ != "DoctestItem":
        return
    X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
    request.getfixturevalue("doctest_namespace").update(np=np, torch=torch, X=X, y=y)
