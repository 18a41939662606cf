"""The stand-in comparison several compare test files read (never modified: copy it first)."""

import pytest

from ebmclassifier.experiments.compare import CompareConfig, run_comparison

from .compare_stand_ins import stand_in_registry


@pytest.fixture(scope="session")
def results():
    """Two seeds of the stand-ins on digits, and what the run logged."""
    config = CompareConfig(
        data="digits", seeds=2, max_epochs=20, n_attack=60, progress=False,
        models=("ce", "ce_ts", "ngebm", "jem"),
    )  # fmt: skip
    messages = []
    return run_comparison(config, registry=stand_in_registry(), log=messages.append), messages
