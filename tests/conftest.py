import gc
import os

#: The thread pools of the suite and of every process it starts, set before numpy, scipy or
#: torch load their libraries (OpenMP and MKL read them once, OpenBLAS too): one thread each.
#: Beside other busy processes a second thread of a pool waits for a core and the first spins
#: waiting for it: demo's MLPClassifier (numpy's OpenBLAS on two threads) took twice the CPU
#: time of one thread and lost 1.6 times its fair share beside three busy loops
#: (benchmarks/busy_suite.py; CONTRIBUTING.md, "A busy machine"). Tests of threading set their
#: own counts.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
os.environ.update(ONE_THREAD)

import matplotlib  # noqa: E402 (after the thread settings)
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from .estimators import FittedModels  # noqa: E402

# A library loaded before this file (by a plugin, or a doctest of the package collected first)
# read no variable: threadpoolctl sets its pool directly, for the whole session.
_ONE_BLAS_THREAD = threadpool_limits(limits=1)

# hypothesis: a test whose every example fits an estimator takes the profile's number of
# examples (`settings.default.max_examples`): few by default, all of them with `pytest
# --hypothesis-profile thorough`; a test whose examples fit nothing sets its own, many.
settings.register_profile("fits-few", max_examples=40)
settings.register_profile("thorough", max_examples=100)
settings.load_profile("fits-few")

# One intra-op thread: the suite's networks and tensors are tiny, where a second thread gains
# little on a quiet machine and, beside any other busy process, makes torch's operations wait
# for the descheduled thread (a float64 gradcheck of SparseMAP took 1.8 s on one thread and 50 s
# on two at load average 3; docs/performance.md, "Threads on a shared machine"). Tests of the
# threading set their own count; the fixture below restores it after each test.
torch.set_num_threads(1)


def pytest_configure(config):
    # `pytest -m cuda` runs the tests that need a GPU (benchmarks/gpu_check.py does).
    config.addinivalue_line("markers", "cuda: needs a CUDA device; skipped without one")


def pytest_collection_finish(session):
    # What the imports and the collection made (modules, test items, parameters: some 400,000
    # objects) lives as long as the session: the cyclic collector's full passes need not walk
    # it each time (they took about a tenth of a second each, 7 % of a run's CPU time).
    # gc.freeze() sets it aside; what the tests make is collected as before.
    gc.collect()
    gc.freeze()


def pytest_runtest_setup(item):
    if item.get_closest_marker("cuda") is not None and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Give the next test the suite's thread count, whatever this one set."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _matplotlib_style_restored():
    """Undo a test's changes to matplotlib's global style when it ends. Importing quapy (a
    reference in tests/distributional) sets figure.dpi=200 and font.size=18 for the process,
    and the layout test of a figure drawn later failed or passed by the order of the tests."""
    with matplotlib.rc_context():
        yield


@pytest.fixture(scope="session")
def digits_split():
    """Standardized digits, 70/30 stratified split (the issue's protocol)."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=0
    )
    scaler = StandardScaler().fit(X_train)
    return (
        scaler.transform(X_train).astype(np.float32),
        scaler.transform(X_test).astype(np.float32),
        y_train,
        y_test,
    )


@pytest.fixture(scope="session")
def small_blobs():
    """A small, easy 3-class problem for fast contract tests."""
    rng = np.random.default_rng(0)
    centers = np.array([[2.0, 0.0, 0.0, 0.0], [-2.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
    y = rng.integers(0, 3, size=150)
    X = centers[y] + 0.5 * rng.standard_normal((150, 4))
    return X.astype(np.float32), y


@pytest.fixture(scope="session")
def _shared_models(request):
    return FittedModels(request.getfixturevalue)


@pytest.fixture
def fitted_model(_shared_models):
    """``fitted_model(kind, data="small_blobs", **overrides)``: a small estimator fitted once per
    session on a shared data set (``tests/estimators.py``), read-only: a test that changes it
    fails here, after it ran."""
    yield _shared_models
    changed = _shared_models.changed()
    assert not changed, f"the test changed shared fitted models (take a deepcopy): {changed}"
