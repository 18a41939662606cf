"""The batched inference of ebmclassifier._estimator.inference."""

import copy
import pickle
import threading

import numpy as np
from sklearn.base import clone

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


def test_predict_from_other_threads_while_partial_fit_runs_waits_for_it(small_blobs):
    # predict_proba from other threads during partial_fit put the network in evaluation mode
    # under the training steps (and training mode under the predictions: dropout), and left
    # it in training mode afterwards; the calls of one estimator are now serialised
    X, y = small_blobs
    clf = NGEBMClassifier(
        max_epochs=1, module__hidden_sizes=(16,), module__dropout=0.5, batch_size=8,
        random_state=0, n_threads=1,
    ).fit(X, y)  # fmt: skip
    before = clf.predict_proba(X)
    seen, results, done = [], [], threading.Event()
    clf.module_.register_forward_pre_hook(
        lambda module, args: seen.append((threading.get_ident(), module.training))
    )

    def predict():
        while not done.is_set():
            results.append(clf.predict_proba(X))

    def train():
        try:
            clf.set_params(max_epochs=4).partial_fit(X, y)
        finally:
            done.set()

    trainer = threading.Thread(target=train)
    predictors = [threading.Thread(target=predict) for _ in range(2)]
    for thread in (*predictors, trainer):
        thread.start()
    for thread in (trainer, *predictors):
        thread.join(timeout=600)
    after = clf.predict_proba(X)
    assert not clf.module_.training  # predict_proba's mode, the last call's
    training = {ident for ident, mode in seen if ident == trainer.ident}
    assert training and {mode for ident, mode in seen if ident == trainer.ident} == {True}
    assert {mode for ident, mode in seen if ident != trainer.ident} == {False}
    assert results and not np.array_equal(before, after)
    for proba in results:  # the weights before the call or after it, never between
        assert np.array_equal(proba, before) or np.array_equal(proba, after)


def test_an_estimator_with_its_lock_still_pickles_and_clones(small_blobs):
    X, y = small_blobs
    clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0).fit(X, y)
    clf.predict_proba(X)  # its lock exists now
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(copy.deepcopy(clf).predict_proba(X), clf.predict_proba(X))
    assert clone(clf).get_params()["max_epochs"] == 1
