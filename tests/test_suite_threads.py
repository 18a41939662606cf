"""The suite's thread pools: one thread each, in the test process and in the processes it
starts (``tests/conftest.py``), so that a test keeps its share of a busy machine."""

import json
import subprocess
import sys

import pytest
import torch
from threadpoolctl import threadpool_info

CHILD = """
import json, os
import numpy, torch
from threadpoolctl import threadpool_info
print(json.dumps({
    "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                            "OPENBLAS_NUM_THREADS")},
    "pools": [p["num_threads"] for p in threadpool_info()],
    "torch": torch.get_num_threads(),
}))
"""


def test_the_test_process_runs_every_pool_on_one_thread():
    assert torch.get_num_threads() == 1
    pools = threadpool_info()
    assert any(p["user_api"] == "blas" for p in pools)  # numpy's BLAS is among them
    assert {p["num_threads"] for p in pools} == {1}, pools


@pytest.mark.slow
def test_a_process_a_test_starts_runs_every_pool_on_one_thread():
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    child = json.loads(run.stdout)
    assert set(child["env"].values()) == {"1"}
    assert set(child["pools"]) == {1} and child["torch"] == 1
