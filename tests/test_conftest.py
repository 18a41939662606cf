"""The root conftest.py's answer to ``-n auto``: workers for the suite, none for files."""

import types

import pytest

from .scripts import load_script


@pytest.fixture(scope="module")
def root_conftest():
    return load_script("conftest.py")


def _config(*args):
    return types.SimpleNamespace(args=list(args))


def test_files_and_single_tests_run_in_this_process(root_conftest, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    workers = root_conftest.pytest_xdist_auto_num_workers
    assert workers(_config("tests/test_nn.py")) == 0
    assert workers(_config("tests/test_nn.py::test_wrn_28_10_has_the_published_size")) == 0
    assert workers(_config("tests/_utils", "tests/test_nn.py")) == 0  # any file among them
    # the suite or a folder: xdist's own count (one per core)
    assert workers(_config("ebmclassifier", "tests")) is None
    assert workers(_config("tests/latent")) is None


def test_the_users_count_decides(root_conftest, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert root_conftest.pytest_xdist_auto_num_workers(_config("tests/test_nn.py")) is None
