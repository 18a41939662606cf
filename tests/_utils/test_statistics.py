"""Column statistics read chunk by chunk are numpy's on the float32 copy, bit for bit.

The estimators derive the input range, NG-EBM's finite-difference step and generated replay's
mean and std from the training data. Input kept in its own dtype (``uint8`` images, a memmap, a
``Dataset``) is read in chunks; the reference here is what ``fit`` computed before such input
was read in chunks: numpy's reductions of ``X.astype(np.float32)``.
"""

import numpy as np
import pytest
import torch

from ebmclassifier._utils import statistics
from ebmclassifier._utils.streamed import ArrayRows, DatasetRows
from ebmclassifier.losses import fd_step_size

SHAPES = [(1000, 2), (3001, 64), (777, 1, 8, 8), (2049, 3, 5, 7), (500, 1), (40000, 40)]


def _data(shape, kind, tmp_path):
    rng = np.random.RandomState(sum(shape))
    if kind == "uint8":
        return rng.randint(0, 256, shape).astype(np.uint8)
    if kind == "float16":
        return (rng.randn(*shape) * 5).astype(np.float16)
    memmap = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.float32, shape)
    memmap[:] = rng.randn(*shape) * 3 + 1
    return memmap


def _references(F: np.ndarray) -> dict:
    """What ``fit`` computed on the float32 array (the base, NG-EBM, the continual mixin)."""
    mean = F.sum(axis=0, dtype=np.float64) / len(F)  # losses.fd_step_size before chunks
    return {
        "min": F.min(axis=0),
        "max": F.max(axis=0),
        "sum64": F.sum(axis=0, dtype=np.float64),
        "mean": F.mean(axis=0),
        "std": F.std(axis=0),
        "squares64": ((F - mean) ** 2).sum(axis=0),
    }


def _chunked(X) -> dict:
    rows = ArrayRows(X)
    mean64 = statistics.column_sum(rows) / len(rows)
    low, high = statistics.column_min_max(rows)
    return {
        "min": low,
        "max": high,
        "sum64": statistics.column_sum(rows),
        "mean": statistics.column_mean(rows),
        "std": statistics.column_mean_std(rows)[1],
        "squares64": statistics.sum_of_squares(rows, mean64),
    }


@pytest.mark.parametrize("kind", ["uint8", "float16", "memmap"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_chunked_statistics_are_numpys_of_the_float32_copy(shape, kind, tmp_path):
    X = _data(shape, kind, tmp_path)
    F = np.asarray(X, dtype=np.float32)
    expected, got = _references(F), _chunked(X)
    for name, value in expected.items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_array_equal(got[name], value, err_msg=name, strict=True)
    assert fd_step_size(ArrayRows(X), 0.01) == fd_step_size(F, 0.01)


def test_the_chunks_hold_a_fraction_of_the_data(monkeypatch):
    """The reads are chunks of CHUNK_ELEMENTS (BLOCK_SIZE) values, never the whole array."""
    X = np.random.RandomState(0).randint(0, 256, (5000, 64)).astype(np.uint8)
    rows = ArrayRows(X)
    seen = []
    original = ArrayRows.batch
    monkeypatch.setattr(
        ArrayRows, "batch", lambda self, idx: seen.append(len(idx)) or original(self, idx)
    )
    monkeypatch.setattr("ebmclassifier._utils.streamed.CHUNK_ELEMENTS", 64 * 1000)
    monkeypatch.setattr(statistics, "BLOCK_SIZE", 64 * 1000)
    statistics.column_mean_std(rows)
    assert max(seen) == 1000 and sum(seen) == 2 * len(X)  # the moments' pass, the squares'


def test_masked_rows_are_the_rows_of_positive_weight():
    X = np.random.RandomState(1).randint(0, 256, (3000, 16)).astype(np.uint8)
    keep = np.random.RandomState(2).rand(3000) > 0.4
    F = X[keep].astype(np.float32)
    rows = ArrayRows(X).subset(keep)
    np.testing.assert_array_equal(statistics.column_mean_std(rows)[1], F.std(axis=0))
    assert fd_step_size(rows, 0.01) == fd_step_size(F, 0.01)


def test_one_pass_serves_min_max_and_sums():
    """The statistics of one set of rows share one pass (``memo``)."""
    X = np.arange(200, dtype=np.uint8).reshape(100, 2)
    rows = ArrayRows(X)
    statistics.column_min_max(rows)
    rows.batch = None  # a second read would fail
    assert statistics.column_sum(rows).tolist() == X.sum(axis=0).tolist()


def test_a_dataset_gives_the_statistics_of_its_samples():
    X = np.random.RandomState(3).randint(0, 256, (700, 3, 4)).astype(np.uint8)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(X))
    rows = DatasetRows(torch.utils.data.Subset(dataset, range(700)))
    np.testing.assert_array_equal(
        statistics.column_mean_std(rows)[1], X.astype(np.float32).std(axis=0)
    )


def test_the_statistics_refuse_a_copy_of_chunked_rows():
    """Chunked rows are never turned into one array by accident (numpy would iterate them)."""
    with pytest.raises(TypeError, match="read in chunks"):
        np.asarray(ArrayRows(np.zeros((3, 2), np.uint8)))


@pytest.mark.parametrize("kind", ["uint8", "float16", "memmap"])
def test_every_chunk_size_gives_numpys_statistics(kind, tmp_path, monkeypatch):
    """The running sums carried from chunk to chunk, at every chunk size: one row, a last chunk
    of one row, of all but one, the whole data in one chunk."""
    shape = (23, 3)
    X = _data(shape, kind, tmp_path)
    expected = _references(np.asarray(X, dtype=np.float32))
    for rows in (1, 2, 3, 11, 22, 23, 24):  # 22: a last chunk of one row; 11: of one too
        monkeypatch.setattr("ebmclassifier._utils.streamed.CHUNK_ELEMENTS", rows * shape[1])
        got = _chunked(X)
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name}, {rows} rows")
