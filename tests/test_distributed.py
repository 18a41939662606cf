"""Scaling out: grid search on a dask cluster, data-parallel training under torchrun."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV

from ebmclassifier import NGEBMClassifier
from ebmclassifier.distributed import (
    DataParallelMixin,
    DataParallelNGEBMClassifier,
    ShardedBatches,
    _shard_bounds,
)

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def _env() -> dict:
    """The child processes import this checkout of the package, one thread each."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


# ---------------------------------------------------------------- safe for joblib / dask


@pytest.mark.slow
def test_no_cuda_before_fit():
    # Importing, constructing, cloning and pickling must not touch CUDA: a parent process that
    # initialised it cannot fork workers that use it. Any CUDA query fails in this child.
    code = """
import torch
def boom(*args, **kwargs):
    raise AssertionError("CUDA was queried before fit")
for name in ("is_available", "device_count", "init", "_lazy_init", "current_device"):
    setattr(torch.cuda, name, boom)
import pickle
from sklearn.base import clone
import ebmclassifier
from ebmclassifier import LatentStructureClassifier, NGEBMClassifier
clf = clone(NGEBMClassifier(beta=0.3, device="auto"))
restored = pickle.loads(pickle.dumps(clf))
assert restored.get_params()["beta"] == 0.3 and restored.device == "auto"
latent = pickle.loads(pickle.dumps(clone(LatentStructureClassifier(device="auto"))))
assert latent.device == "auto"
assert not torch.cuda.is_initialized()
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_pickles_before_and_after_fit(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(max_epochs=2, random_state=0, module__hidden_sizes=(8,))
    unfitted = pickle.loads(pickle.dumps(clf))
    assert unfitted.get_params()["random_state"] == 0
    fitted = pickle.loads(pickle.dumps(unfitted.fit(X, y)))
    np.testing.assert_array_equal(fitted.predict_proba(X), unfitted.predict_proba(X))


@pytest.mark.parametrize(
    ("local_rank", "n_gpus", "expected"),
    [("1", 2, "cuda:1"), ("3", 2, "cuda:1"), (None, 2, "cuda")],
)
def test_auto_device_follows_local_rank(monkeypatch, local_rank, n_gpus, expected):
    from ebmclassifier._utils.device import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n_gpus)
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)
    assert resolve_device("auto") == torch.device(expected)


def _blobs(n: int = 60):
    rng = np.random.default_rng(1)
    centers = np.array([[1.5, 0.0, 0.0], [-1.5, 0.0, 0.0], [0.0, 1.5, 0.0]])
    y = rng.integers(0, 3, size=n)
    return (centers[y] + 0.8 * rng.standard_normal((n, 3))).astype(np.float32), y


def _beta_search(n_jobs):
    estimator = NGEBMClassifier(
        max_epochs=3, batch_size=10, random_state=0, device="cpu", module__hidden_sizes=(8,)
    )
    # neg_log_loss: a continuous score, so "equal" says more than equal accuracies would.
    return GridSearchCV(
        estimator, {"beta": [0.0, 0.5, 0.9]}, cv=2, scoring="neg_log_loss", n_jobs=n_jobs
    )


@pytest.mark.slow
def test_grid_search_on_dask_cluster_equals_single_process():
    distributed = pytest.importorskip("dask.distributed")
    X, y = _blobs()
    # The dask workers run one thread each (dask sets OMP_NUM_THREADS=1); so does the reference.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = _beta_search(n_jobs=1).fit(X, y)
    finally:
        torch.set_num_threads(threads)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        with joblib.parallel_backend("dask"):
            search = _beta_search(n_jobs=-1).fit(X, y)
        # The fits really ran on both workers, not in this process.
        assert len(client.scheduler_info()["workers"]) == 2
    for key in ("mean_test_score", "split0_test_score", "split1_test_score"):
        np.testing.assert_array_equal(search.cv_results_[key], reference.cv_results_[key])
    assert search.best_params_ == reference.best_params_
    np.testing.assert_array_equal(
        search.best_estimator_.predict_proba(X), reference.best_estimator_.predict_proba(X)
    )


# ---------------------------------------------------------------- data-parallel training


@pytest.mark.parametrize(("n", "world_size"), [(15, 2), (10, 2), (7, 3), (3, 3), (4, 1)])
def test_shard_bounds_partition_the_batch(n, world_size):
    bounds = [_shard_bounds(n, rank, world_size) for rank in range(world_size)]
    covered = np.concatenate([np.arange(start, stop) for start, stop in bounds])
    np.testing.assert_array_equal(covered, np.arange(n))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_sharded_batches_union_is_the_global_batch():
    X = torch.arange(23.0).unsqueeze(1)
    y = torch.arange(23)
    batches = [(X[i : i + 10], y[i : i + 10]) for i in range(0, 23, 10)]  # 10, 10, 3
    shards = [list(ShardedBatches(batches, rank, 4)) for rank in range(4)]
    # The trailing batch of 3 < 4 processes is dropped on every process.
    assert [len(s) for s in shards] == [2, 2, 2, 2]
    for step in range(2):
        joined = torch.cat([shards[rank][step][1] for rank in range(4)])
        np.testing.assert_array_equal(joined.numpy(), batches[step][1].numpy())


@pytest.mark.parametrize(
    ("n", "batch_size", "drop_last"), [(23, 10, False), (21, 10, False), (23, 10, True)]
)
def test_sharded_batches_len_counts_the_batches(n, batch_size, drop_last):
    from skorch.dataset import Dataset

    from ebmclassifier._utils.data import TensorBatchIterator

    dataset = Dataset(torch.zeros(n, 2), torch.zeros(n, dtype=torch.long))
    batches = TensorBatchIterator(dataset, batch_size=batch_size, drop_last=drop_last)
    sharded = ShardedBatches(batches, rank=0, world_size=2)
    assert len(sharded) == len(list(sharded))


def test_data_parallel_refuses_unsupported_settings(small_blobs):
    X, y = small_blobs
    with pytest.raises(ValueError, match="energy_var_weight=0.5 penalises the variance"):
        DataParallelNGEBMClassifier(energy_var_weight=0.5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="needs an int random_state"):
        DataParallelNGEBMClassifier().fit(X, y)


def test_data_parallel_refuses_estimators_not_ready_for_it(small_blobs):
    from ebmclassifier._estimator.base import EBMClassifierBase

    # An estimator that has not opted in (as JEM, whose replay buffer is not sharded yet).
    class NotReady(DataParallelMixin, EBMClassifierBase):
        pass

    with pytest.raises(ValueError, match="has not been made ready for data-parallel"):
        NotReady(random_state=0).fit(*small_blobs)

    from ebmclassifier import JEMClassifier

    # JEM's replay buffer is not sharded per process yet (docs/scaling.md has the plan).
    class DataParallelJEM(DataParallelMixin, JEMClassifier):
        pass

    with pytest.raises(ValueError, match="DataParallelJEM has not been made ready"):
        DataParallelJEM(random_state=0).fit(*small_blobs)


@pytest.fixture()
def group_of_one(tmp_path):
    """A gloo process group of this one process."""
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.skip("this torch build has no torch.distributed with the gloo backend")
    if torch.distributed.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    store = (tmp_path / "store").as_uri()
    torch.distributed.init_process_group("gloo", init_method=store, rank=0, world_size=1)
    yield
    torch.distributed.destroy_process_group()


def test_only_the_training_batches_are_sharded(small_blobs, group_of_one):
    from skorch.dataset import Dataset
    from torch.nn.parallel import DistributedDataParallel

    X, y = small_blobs
    data = Dataset(torch.as_tensor(X), torch.as_tensor(y))
    clf = DataParallelNGEBMClassifier(max_epochs=1, device="cpu", random_state=0).fit(X, y)
    assert type(clf.get_iterator(data, training=True)).__name__ == "ShuffledTensorBatchIterator"
    clf.module_ = DistributedDataParallel(clf.module_)  # as during fit
    assert isinstance(clf.get_iterator(data, training=True), ShardedBatches)
    assert type(clf.get_iterator(data, training=False)).__name__ == "TensorBatchIterator"


def test_history_records_the_global_batch_sizes(small_blobs, group_of_one):
    X, y = small_blobs
    clf = DataParallelNGEBMClassifier(max_epochs=1, batch_size=64, device="cpu", random_state=0)
    clf.fit(X, y)
    assert clf.history[-1, "batches", :, "train_batch_size"] == [64, 64, 22]


def test_data_parallel_validation_losses_are_the_single_process_ones(small_blobs, group_of_one):
    from skorch.dataset import ValidSplit

    X, y = small_blobs
    options = dict(max_epochs=2, train_split=ValidSplit(4), device="cpu", random_state=0)
    options.update(module__hidden_sizes=(8,))
    clf = DataParallelNGEBMClassifier(**options).fit(X, y)
    single = NGEBMClassifier(**options).fit(X, y)
    np.testing.assert_allclose(clf.history[:, "valid_loss"], single.history[:, "valid_loss"])


def test_data_parallel_needs_a_process_group(small_blobs):
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        DataParallelNGEBMClassifier(random_state=0).fit(*small_blobs)


@pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="this torch build has no torch.distributed with the gloo backend",
)
@pytest.mark.slow
def test_data_parallel_two_processes_match_one(tmp_path):
    # torchrun starts two CPU processes (gloo); each trains on its shard of every global batch.
    sys.path.insert(0, str(TESTS))
    try:
        from ddp_script import GRAD_NORMS, PARAMS, problem
    finally:
        sys.path.remove(str(TESTS))
    out = tmp_path / "ddp"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(TESTS / "ddp_script.py"),
        str(out),
    ]
    run = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [np.load(f"{out}.{rank}.npz") for rank in range(2)]
    X, y = problem()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for grad_norm in GRAD_NORMS:
            single = NGEBMClassifier(grad_norm=grad_norm, **PARAMS).fit(X, y)
            for name, value in single.module_.state_dict().items():
                key = f"{grad_norm}/{name}"
                # Both processes hold the same network ...
                np.testing.assert_array_equal(ranks[0][key], ranks[1][key])
                # ... the one a single process trains on the whole batches, up to summation
                # order (a batch size of 16 instead of 15 moves these weights by 5e-2).
                np.testing.assert_allclose(ranks[0][key], value.numpy(), rtol=0, atol=2e-5)
            for loss in ("train_loss", "valid_loss"):
                np.testing.assert_allclose(
                    ranks[0][f"{grad_norm}/{loss}"], single.history[:, loss], rtol=1e-5
                )
            # The fitted data-parallel estimator unpickles here, outside any process group.
            restored = pickle.loads(ranks[0][f"{grad_norm}/pickled"].tobytes())
            assert isinstance(restored, DataParallelNGEBMClassifier)
            np.testing.assert_allclose(
                restored.predict_proba(X), single.predict_proba(X), rtol=0, atol=1e-5
            )
    finally:
        torch.set_num_threads(threads)
