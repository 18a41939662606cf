"""Run the pytorch-ood comparison of tests/detectors/ where torchvision does not load.

pytorch-ood imports torchvision at package import, and PyPI's torchvision wheel does not load
beside the CPU build of torch this project installs, so ``test_agrees_with_pytorch_ood`` is
skipped there. The three detectors it compares (``KNN``, ``Mahalanobis``, ``ViM``) use only
torch and scikit-learn; this script puts an empty stand-in for torchvision on the import path
and runs that one test against pytorch-ood's real detector code. A check for developers, not
part of the test suite:

    pip install --no-deps pytorch-ood
    python benchmarks/check_against_pytorch_ood.py
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from unittest import mock

import pytest


class _StandInTorchvision(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Every ``torchvision`` module is a MagicMock: enough for pytorch-ood's imports."""

    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = mock.MagicMock(name=spec.name)
        module.__path__, module.__spec__ = [], spec
        return module

    def exec_module(self, module):
        pass


if __name__ == "__main__":
    sys.meta_path.insert(0, _StandInTorchvision())
    test = Path(__file__).resolve().parents[1] / "tests" / "detectors" / "test_detectors.py"
    code = pytest.main(
        ["-q", "-n0", "-p", "no:cacheprovider", "-rs", f"{test}::test_agrees_with_pytorch_ood"]
    )
    sys.exit(code)
