"""A command's ``--threads``: torch's intra-op threads and numpy's BLAS threads of its run."""

import argparse

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from ebmclassifier.experiments._command import THREADS, Command


def _blas_threads() -> set[int]:
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


def test_a_commands_run_has_numpys_blas_on_its_threads():
    seen = []

    def run(args):
        seen.append((_blas_threads(), torch.get_num_threads()))
        return 0

    parser = argparse.ArgumentParser()
    Command("probe", "help", "description", (THREADS,), run).add_to(parser.add_subparsers())
    # as in a fresh process on two cores: a pool of two BLAS threads before the command runs
    with threadpool_limits(limits=2, user_api="blas"):
        outside = _blas_threads()
        if outside == {1}:
            pytest.skip("numpy's BLAS runs one thread at most here")
        for argv in (["probe"], ["probe", "--threads", "1"], ["probe", "--threads", "2"]):
            args = parser.parse_args(argv)
            assert args.func(args) == 0
        assert _blas_threads() == outside  # given back after the run
    assert seen == [({1}, 1), ({1}, 1), ({2}, 2)]
