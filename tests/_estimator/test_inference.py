"""The batched inference of ebmclassifier._estimator.inference."""

import numpy as np

from ebmclassifier import NGEBMClassifier
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


def test_inference_runs_in_batches_of_iterator_valid_batch_size(small_blobs):
    # skorch's spelling of the inference batch size, apart from the training batch_size
    X, y = small_blobs
    clf = NGEBMClassifier(
        max_epochs=1,
        module__hidden_sizes=(8,),
        random_state=0,
        batch_size=64,
        iterator_valid__batch_size=40,
        n_threads=1,
    ).fit(X, y)
    sizes = []
    hook = clf.module_.register_forward_pre_hook(lambda module, args: sizes.append(len(args[0])))
    clf.predict_proba(X)
    hook.remove()
    assert sizes == [40, 40, 40, 30]
