"""Peak memory of batched inference on a large input, for ``python -m ebmclassifier bench``.

The design promises that inference runs in batches so that memory stays flat: predicting or
scoring a million rows should need little beyond the input and the output themselves. This
measures it. For each method (``predict_proba``, ``energy``, ``score_ood`` with
``approx_mass``) the fitted estimator is unpickled in a fresh Python process, runs there on a
``(n_rows, 64)`` input made there, and the figure is how far the process's resident memory rose
above its level just before the call, at its peak, as a multiple of the input's size (0 would
be no memory beyond the input; the output, which the call must return, is reported beside it).

The resident peak is read from Linux's ``VmHWM`` after resetting it (``/proc/self/clear_refs``),
so it counts every allocation, torch's included. Elsewhere ``ru_maxrss`` is used, which cannot
be reset: its rise is then only a lower bound (``"exact": False``).
``tracemalloc``'s peak is reported too: it sees the allocations of numpy and Python (e.g. a
float64 input cast to float32), not torch's.
"""

from __future__ import annotations

import ctypes
import gc
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

_PROC = Path("/proc/self")
METHODS = ("predict_proba", "energy", "approx_mass")


def _proc_bytes(key: str) -> int:
    """A ``kB`` line of /proc/self/status (``VmRSS``, ``VmHWM``) in bytes."""
    for line in (_PROC / "status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _release_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``), if possible.

    Memory a previous call freed stays resident in the heap; a call that reuses it would not
    raise the resident peak, and its own need would be hidden.
    """
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak() -> bool:
    """Reset the resident-memory peak to the current level (Linux); False where impossible."""
    _release_freed_memory()
    try:
        (_PROC / "clear_refs").write_text("5")
        _proc_bytes("VmHWM")
    except (OSError, KeyError):
        return False
    return True


def _max_rss() -> int:
    import resource

    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def peak_memory_above(call: Callable[[], object]) -> tuple[object, dict]:
    """Run ``call()`` and measure how far memory peaked above its level before the call.

    Parameters
    ----------
    call : callable
        Run once, without arguments.

    Returns
    -------
    result : object
        What ``call`` returned (still alive: its memory is part of the peak).
    memory : dict
        ``resident_bytes`` (the rise of the resident peak, or None where neither /proc nor
        ``resource`` exists), ``exact`` (False: a lower bound from ``ru_maxrss``),
        ``traced_bytes`` (tracemalloc's peak: numpy and Python allocations only) and
        ``seconds``.

    Examples
    --------
    >>> import numpy as np
    >>> _, memory = peak_memory_above(lambda: np.ones(2_000_000))  # 16 MB
    >>> memory["traced_bytes"] >= 16_000_000
    True
    """
    gc.collect()
    exact = _reset_peak()
    if exact:
        before = _proc_bytes("VmRSS")
    else:
        try:
            before = _max_rss()
        except ImportError:  # no resource module (Windows)
            before = None
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = call()
        seconds = time.perf_counter() - start
        traced = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    resident = None
    if before is not None:
        resident = (_proc_bytes("VmHWM") if exact else _max_rss()) - before
    memory = {"resident_bytes": resident, "exact": exact, "traced_bytes": traced}
    return result, {**memory, "seconds": seconds}


def _score(estimator, method: str) -> Callable:
    if method == "predict_proba":
        return estimator.predict_proba
    if method == "energy":
        return estimator.energy
    return partial(estimator.score_ood, method=method)


def measure_in_this_process(argv: list[str]) -> None:
    """The child's side: load the pickled estimator, make the input, measure one call.

    ``argv``: the pickle's path, the method, the dtype, the number of rows and of torch
    threads. Prints one JSON line, the row of :func:`bench_memory`.
    """
    import pickle

    import torch

    path, method, dtype, n_rows, threads = argv
    torch.set_num_threads(int(threads))
    with open(path, "rb") as f:
        estimator = pickle.load(f)
    score = _score(estimator, method)
    shape = (int(n_rows), estimator.n_features_in_)
    score(np.zeros((2, shape[1]), dtype=dtype))  # what a first call sets up is not per row
    X = np.random.default_rng(0).standard_normal(shape, dtype=np.dtype(dtype))
    scores, memory = peak_memory_above(partial(score, X))
    print(json.dumps(_row(X, scores, memory, estimator.batch_size)))


def _measure_in_a_fresh_process(path: Path, method: str, dtype: str, n_rows: int) -> dict:
    import torch

    import ebmclassifier

    # the child imports the package this process imported: its folder is the child's working
    # folder, which ``python -c`` puts first on sys.path
    root = str(Path(ebmclassifier.__file__).resolve().parents[1])
    code = (
        "import sys; from ebmclassifier.experiments._memory import measure_in_this_process; "
        "measure_in_this_process(sys.argv[1:])"
    )
    argv = [str(path), method, dtype, str(n_rows), str(torch.get_num_threads())]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=root, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the memory measurement of {method} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_memory(
    n_rows: int = 1_000_000,
    dtypes: tuple[str, ...] = ("float32", "float64"),
    methods: tuple[str, ...] = METHODS,
) -> dict:
    """Peak memory of each inference method on ``n_rows`` x 64 inputs, relative to the input.

    Each measurement runs in a fresh Python process: in a process that already computed,
    freed memory stays in the heap and a later call that reuses it hides its own need (in
    one process the ratios changed by a factor of ten with the order of the calls).

    Parameters
    ----------
    n_rows : int, default=1_000_000
    dtypes : tuple of str, default=("float32", "float64")
        The input's dtype: float32 is what the estimators compute in; float64 (numpy's
        default) is cast by the validation first.
    methods : tuple of str, default=("predict_proba", "energy", "approx_mass")

    Returns
    -------
    dict of "<method>/<dtype>" -> {"input_mb", "output_mb", "peak_above_mb",
    "ratio_to_input", "traced_peak_mb", "traced_ratio_to_input", "exact", "seconds",
    "n_rows", "batch_size"}
        ``ratio_to_input`` is the rise of resident memory over the input's size.
    """
    import pickle
    import tempfile

    from ..ngebm import NGEBMClassifier
    from ._steps import digits

    X_train, y_train = digits()
    estimator = NGEBMClassifier(max_epochs=1, random_state=0, device="cpu").fit(X_train, y_train)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "estimator.pkl"
        path.write_bytes(pickle.dumps(estimator))
        return {
            f"{method}/{dtype}": _measure_in_a_fresh_process(path, method, dtype, n_rows)
            for dtype in dtypes
            for method in methods
        }


def _row(X: np.ndarray, scores: np.ndarray, memory: dict, batch_size: int) -> dict:
    resident = memory["resident_bytes"]
    return {
        "n_rows": len(X),
        "input_mb": X.nbytes / 1e6,
        "output_mb": scores.nbytes / 1e6,
        "peak_above_mb": None if resident is None else resident / 1e6,
        "ratio_to_input": None if resident is None else resident / X.nbytes,
        "traced_peak_mb": memory["traced_bytes"] / 1e6,
        "traced_ratio_to_input": memory["traced_bytes"] / X.nbytes,
        "exact": memory["exact"],
        "seconds": memory["seconds"],
        "batch_size": batch_size,
    }
