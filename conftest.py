"""Collection of the doctests (``--doctest-modules`` over ``ebmclassifier/``, pyproject.toml),
and how many workers ``-n auto`` starts."""

import os
from pathlib import Path

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


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (the dev extra)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject.toml's addopts): one worker per core for the suite or a folder of
    it; none for test files or single tests, where starting workers that each import torch
    costs more than they save (one file: 2.1 s in this process, 7.3 s with two workers).
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` or ``-n N`` still decide."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    if any(Path(arg.split("::")[0]).is_file() for arg in config.args):
        return 0
    return None


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
