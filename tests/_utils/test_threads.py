"""The ``n_threads`` parameter: the intra-op threads of a fit or an inference call, restored after.

torch's thread count is one per process; every test here leaves it as it found it (the
``_torch_threads_restored`` fixture of conftest.py makes sure even a failing test does).
"""

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback

from ebmclassifier import NGEBMClassifier
from ebmclassifier._utils.threads import (
    AUTO_ONE_THREAD_MACS,
    choose_threads,
    forward_macs,
    intra_op_threads,
    threads_for,
    usable_cores,
)
from ebmclassifier.cli import main
from ebmclassifier.losses import ngebm_loss
from ebmclassifier.nn import MLP, ConvNet

from ..scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(40, 4)).astype(np.float32), np.arange(40) % 3


class RecordThreads(Callback):
    """Records torch's thread count at each epoch; raises at epoch ``fail_at`` if given."""

    def __init__(self, fail_at=None):
        self.fail_at = fail_at

    def initialize(self):
        self.seen = []
        return self

    def on_epoch_begin(self, net, **kwargs):
        self.seen.append(torch.get_num_threads())
        if self.fail_at is not None and len(self.seen) == self.fail_at:
            raise RuntimeError("the fit fails here")


def small(**params):
    return NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0, **params)


# ----------------------------------------------------------------------------- the rule


def test_forward_macs_counts_linear_and_convolution_layers_by_hand():
    # MLP(4 -> 8 -> 3): per sample 4*8 + 8*3 multiply-accumulates
    assert forward_macs(MLP(4, 3, hidden_sizes=(8,)), torch.zeros(5, 4)) == 5 * (32 + 24)
    net = ConvNet((1, 8, 8), 10, channels=(2,), hidden_size=6)
    # conv 1->2 (3x3, 8x8 out), conv 2->2 stride 2 (4x4 out), linear 32->6, linear 6->10
    expected = 2 * 64 * 9 + 2 * 16 * 2 * 9 + 32 * 6 + 6 * 10
    assert forward_macs(net, torch.zeros(1, 1, 8, 8)) == expected


def test_forward_macs_leaves_modes_and_random_state_alone():
    net = MLP(4, 3, hidden_sizes=(8,), dropout=0.5)
    net.train()
    net.net[2].eval()  # one submodule in its own mode
    state = torch.random.get_rng_state()
    forward_macs(net, torch.zeros(2, 4))
    assert net.training and not net.net[2].training and net.net[1].training
    assert torch.equal(torch.random.get_rng_state(), state)


def test_auto_is_one_thread_below_the_measured_size_and_torchs_setting_above():
    torch.set_num_threads(2)
    x = torch.zeros(10, 64)
    small_net, wide_net = MLP(64, 10), MLP(64, 10, hidden_sizes=(4096, 4096))
    assert forward_macs(small_net, x[:1]) * 64 < AUTO_ONE_THREAD_MACS
    assert forward_macs(wide_net, x[:1]) * 10 > AUTO_ONE_THREAD_MACS
    assert choose_threads("auto", small_net, x, 64) == 1
    assert choose_threads("auto", wide_net, x, 64) is None  # 10 samples: a batch of 10
    assert choose_threads("auto", wide_net, x[:1], 64) == 1  # one sample is small work
    assert choose_threads(None, small_net, x, 64) is None
    assert choose_threads(3, wide_net, x, 64) == min(3, usable_cores())
    with intra_op_threads(2, pin=True):  # a command's --threads 2: auto keeps it
        assert choose_threads("auto", small_net, x, 64) is None


def test_auto_counts_nothing_for_inputs_off_the_cpu():
    # A GPU's kernels do not run on torch's intra-op threads: no probe (it would call a compiled
    # network on a new shape). The meta device stands in for one; calling the network fails there.
    torch.set_num_threads(2)

    class Uncallable(torch.nn.Module):
        def forward(self, x):
            raise AssertionError("the network was run")

    assert choose_threads("auto", Uncallable(), torch.zeros(10, 64, device="meta"), 64) is None
    with pytest.raises(AssertionError, match="was run"):
        choose_threads("auto", Uncallable(), torch.zeros(10, 64), 64)


@pytest.mark.parametrize("cores", [1, 2, 3, 4])
def test_an_int_is_bounded_by_the_cores_the_process_may_use(monkeypatch, cores):
    # a loaded file's n_threads=64 ran 128 threads, 1000 made thread creation fail
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert usable_cores() == cores
    net, x = MLP(4, 2), torch.zeros(8, 4)
    for n in range(1, cores + 3):  # below, at and past the bound
        assert choose_threads(n, net, x, 8) == min(n, cores)
        with threads_for(n, net, x, 8):
            assert torch.get_num_threads() == min(n, cores)


def test_intra_op_threads_restores_the_setting_also_when_the_block_raises():
    torch.set_num_threads(2)
    with pytest.raises(KeyError), intra_op_threads(1):
        assert torch.get_num_threads() == 1
        raise KeyError("inside")
    assert torch.get_num_threads() == 2
    with intra_op_threads(None):
        assert torch.get_num_threads() == 2


# ----------------------------------------------------------------------------- the estimators


@pytest.mark.parametrize(("n_threads", "during"), [("auto", 1), (1, 1), (3, 3), (None, 2)])
def test_fit_runs_on_the_chosen_threads_and_restores_the_users_setting(data, n_threads, during):
    during = min(during, usable_cores())
    torch.set_num_threads(2)
    record = RecordThreads()
    small(n_threads=n_threads, callbacks=[("record", record)]).fit(*data)
    assert record.seen == [during, during]
    assert torch.get_num_threads() == 2


def test_a_fit_that_raises_restores_the_users_setting(data):
    torch.set_num_threads(2)
    record = RecordThreads(fail_at=2)
    with pytest.raises(RuntimeError, match="fails here"):
        small(n_threads=1, callbacks=[("record", record)]).fit(*data)
    assert record.seen == [1, 1]
    assert torch.get_num_threads() == 2


def test_inference_runs_on_the_chosen_threads_and_restores_the_users_setting(data, monkeypatch):
    X, y = data
    clf = small(n_threads=1).fit(X, y)
    torch.set_num_threads(2)
    seen = []
    forward = clf.module_.forward
    monkeypatch.setattr(
        clf.module_, "forward", lambda x: seen.append(torch.get_num_threads()) or forward(x)
    )
    clf.predict_proba(X)
    clf.score_ood(X, method="approx_mass")
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2
    clf.set_params(n_threads=None)
    seen.clear()
    clf.predict(X)
    assert set(seen) == {2}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "all", True])
def test_a_bad_n_threads_is_refused_with_the_choices(data, bad):
    with pytest.raises(ValueError, match=r"'n_threads' parameter .* None, 'auto' or an int >= 1"):
        small(n_threads=bad).fit(*data)


# ----------------------------------------------------------------------------- the commands


def test_a_commands_threads_option_sets_the_runs_threads_and_restores_them(monkeypatch):
    from ebmclassifier.experiments import demo

    seen = []

    def fake_run_demo(seeds, max_epochs, progress):
        seen.append(torch.get_num_threads())
        return []

    monkeypatch.setattr(demo, "run_demo", fake_run_demo)
    monkeypatch.setattr(demo, "format_demo", lambda rows: "")
    torch.set_num_threads(2)
    for argv, expected in ((["demo"], 1), (["demo", "--threads", "3"], 3)):
        assert main(argv) == 0
        assert seen.pop() == expected
        assert torch.get_num_threads() == 2
    assert main(["demo", "--threads", "0"]) == 2  # refused by argparse, before the run
    assert not seen


def test_compare_runs_the_built_in_small_data_on_one_thread_and_large_networks_on_torchs():
    from ebmclassifier.cli import build_parser
    from ebmclassifier.experiments._compare_options import COMMAND

    parse = build_parser().parse_args
    assert COMMAND.threads(parse(["compare"])) == 1
    assert COMMAND.threads(parse(["compare", "--network", "wrn-16-2"])) is None
    assert COMMAND.threads(parse(["compare", "--data", "cifar10"])) is None
    assert COMMAND.threads(parse(["compare", "--threads", "3"])) == 3


# ----------------------------------------------------------------------------- the benchmark


def _threads_benchmark():
    return load_script("benchmarks/threads.py")


@pytest.mark.parametrize(
    ("name", "library_net"),
    [
        ("MLP 256x256, digits (64 features), batch 64", lambda: MLP(64, 10)),
        ("ConvNet 32-64, digits (1x8x8), batch 64", lambda: ConvNet((1, 8, 8), 10)),
        ("MLP 1024x1024, 784 features, batch 128", lambda: MLP(784, 10, (1024, 1024))),
        ("ConvNet 32-64, 3x32x32, batch 64", lambda: ConvNet((3, 32, 32), 10)),
    ],
)
def test_the_threads_benchmark_times_the_library_networks_and_loss(name, library_net):
    bench = _threads_benchmark()
    build, shape, _ = bench.NETWORKS[name]
    torch.manual_seed(0)
    net, ours = build(), library_net()
    shapes = [tuple(p.shape) for p in net.parameters()]
    assert shapes == [tuple(p.shape) for p in ours.parameters()]
    for p, q in zip(net.parameters(), ours.parameters(), strict=True):
        with torch.no_grad():
            q.copy_(p)
    x = torch.randn(4, *shape[1:])
    y = torch.tensor([0, 1, 2, 3])
    assert forward_macs(net, x) == forward_macs(ours, x)
    expected, _ = ngebm_loss(ours, x, y, beta=0.5)
    assert torch.allclose(bench.ngebm_exact_loss(net, x, y), expected, rtol=1e-5, atol=1e-6)


def test_jem_samples_on_the_chosen_threads_and_restores_the_users_setting(data, monkeypatch):
    from ebmclassifier import JEMClassifier

    X, y = data
    clf = JEMClassifier(
        max_epochs=1, sgld_steps=2, buffer_size=20, module__hidden_sizes=(8,), random_state=0
    ).fit(X, y)
    torch.set_num_threads(2)
    seen = []
    forward = clf.module_.forward
    monkeypatch.setattr(
        clf.module_, "forward", lambda x: seen.append(torch.get_num_threads()) or forward(x)
    )
    clf.sample(4, n_steps=2)
    # the first forward pass is "auto" counting the network's work, before it chooses
    assert len(seen) > 1 and set(seen[1:]) == {1}
    assert torch.get_num_threads() == 2
