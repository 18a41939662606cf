"""The batched map of ebmclassifier._estimator.inference."""

import numpy as np

from ebmclassifier._estimator.inference import map_batches


def test_map_batches_runs_each_row_once_in_batches_of_batch_size():
    # memory stays flat only if fn sees batch_size rows at a time, each row once
    X = np.arange(10, dtype=np.float32).reshape(5, 2)
    seen = []

    def double(xb):
        seen.append(xb[:, 0].tolist())
        return 2 * xb

    out = map_batches(X, double, 2, "cpu")
    assert seen == [[0.0, 2.0], [4.0, 6.0], [8.0]]
    np.testing.assert_array_equal(out, 2 * X)
