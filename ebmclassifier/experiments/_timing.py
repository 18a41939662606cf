"""Timing in rounds: every contender once per round, in a rotating order, and ratios taken
round by round, so that the slow drift of a shared machine cancels (``bench``'s clock).

What the commands say about their own timings: a figure whose spread over seeds or rounds is
wide is marked unreliable (:func:`mark_spread`), and a run during which other processes wanted
the cores its threads needed says so (:func:`machine_load`, :func:`busy_note`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np
import torch

__all__ = [
    "UNRELIABLE",
    "UNRELIABLE_NOTE",
    "WIDE_SPREAD",
    "busy_note",
    "interleaved_times",
    "machine_load",
    "mark_spread",
    "summarize",
]

#: A timing whose highest value exceeds its lowest by this factor is marked unreliable.
WIDE_SPREAD = 1.5

#: The mark :func:`mark_spread` appends.
UNRELIABLE = "(unreliable)"

#: What the mark means, printed under every table that uses it.
UNRELIABLE_NOTE = (
    f"{UNRELIABLE}: a timing so marked spread widely, its highest value (the slowest seed; "
    f"bench's 90th-percentile round) above {WIDE_SPREAD:g} times its lowest, so other "
    "processes on the machine, not the model, may have set it; rerun on a quiet machine "
    "before reading it."
)


def mark_spread(text: str, low: float | None, high: float | None) -> str:
    """``text`` with ``" (unreliable)"`` when ``high > WIDE_SPREAD * low`` (positive values).

    A table that shows the mark prints :data:`UNRELIABLE_NOTE` under it.

    Examples
    --------
    >>> mark_spread("6.85 [0.10, 10.05]", 0.10, 10.05), mark_spread("2.00 [1.9, 2.1]", 1.9, 2.1)
    ('6.85 [0.10, 10.05] (unreliable)', '2.00 [1.9, 2.1]')
    """
    if low is None or high is None or low <= 0 or high <= WIDE_SPREAD * low:
        return text
    return f"{text} {UNRELIABLE}"


def machine_load() -> dict:
    """The machine's CPUs and its 1-minute load average now (``None`` where the OS has none).

    Returns
    -------
    dict
        ``{"cpus": int, "load": float or None}``.
    """
    try:
        load = float(os.getloadavg()[0])
    except (AttributeError, OSError):  # not on Windows
        load = None
    return {"cpus": os.cpu_count() or 1, "load": load}


def busy_note(start: dict, end: dict, threads: int) -> str | None:
    """A sentence saying the machine was busy during a run, or None when it was not (or unknown).

    The others' load is the 1-minute load average at the start, or at the end less the run's
    own ``threads``; the machine was busy when that load and the run's threads need more
    cores than it has: the timings then measure the contention too.

    Parameters
    ----------
    start, end : dict
        :func:`machine_load` at the start and the end of the run.
    threads : int
        The intra-op threads the run used.

    Examples
    --------
    >>> busy_note({"cpus": 2, "load": 0.1}, {"cpus": 2, "load": 1.1}, threads=1) is None
    True
    >>> note = busy_note({"cpus": 2, "load": 2.3}, {"cpus": 2, "load": 3.4}, threads=1)
    >>> print(note[:80])
    The machine was busy: load average 2.3 at the start and 3.4 at the end on 2 CPUs
    """
    if start["load"] is None or end["load"] is None:
        return None
    others = max(start["load"], end["load"] - threads)
    if others + threads <= start["cpus"] + 0.5:
        return None
    return (
        f"The machine was busy: load average {start['load']:.1f} at the start and "
        f"{end['load']:.1f} at the end on {start['cpus']} CPUs, with {threads} thread(s) of "
        "this run; the times and cost ratios include waiting for the CPU."
    )


def interleaved_times(
    tasks: dict[str, Callable[[], object]],
    rounds: int,
    warmup: int = 2,
    sync: Callable[[], None] = lambda: None,
) -> dict[str, dict[str, list[float]]]:
    """Run every task once per round, in a rotating order, and return the seconds per run.

    Two clocks are read around each run: the wall clock and the CPU time of this process.
    On a shared machine the CPU time is the steadier measure of the work done, since it does
    not count the time the process waits for a core; on a GPU only the wall clock (after
    ``sync``) means anything.

    Parameters
    ----------
    tasks : dict of name -> callable
    rounds : int
        Timed rounds.
    warmup : int, default=2
        Untimed rounds first (allocator, caches, lazy initialisation, compilation).
    sync : callable
        Called before each clock reading, e.g. ``torch.cuda.synchronize``.

    Returns
    -------
    dict of name -> {"wall": list of float, "cpu": list of float}
        ``rounds`` durations per task and clock, in seconds, round ``r`` at index ``r``.

    Examples
    --------
    >>> times = interleaved_times({"a": lambda: None, "b": lambda: None}, rounds=3, warmup=1)
    >>> len(times["a"]["wall"]), len(times["b"]["cpu"])
    (3, 3)
    """
    names = list(tasks)
    times = {name: {"wall": [], "cpu": []} for name in names}
    for r in range(warmup + rounds):
        # Rotate the order so that no contender always runs first or after the same one.
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            sync()
            wall, cpu = time.perf_counter(), time.process_time()
            tasks[name]()
            sync()
            if r >= warmup:
                times[name]["wall"].append(time.perf_counter() - wall)
                times[name]["cpu"].append(time.process_time() - cpu)
    return times


def summarize(seconds: list[float], reference: list[float] | None = None) -> dict:
    """Median and 10th/90th percentiles in ms; with ``reference``, the same of the per-round ratio.

    Parameters
    ----------
    seconds : list of float
    reference : list of float or None
        Durations of the reference task in the same rounds.

    Returns
    -------
    dict
        ``median_ms``, ``p10_ms``, ``p90_ms``, ``n``; and ``ratio``, ``ratio_p10``,
        ``ratio_p90`` when ``reference`` is given. A ratio is the median over rounds of
        ``seconds[r] / reference[r]``, so drift that slows a whole round cancels.

    Examples
    --------
    >>> summarize([2.0, 2.0, 4.0], reference=[1.0, 1.0, 2.0])["ratio"]
    2.0
    """
    ms = np.asarray(seconds, dtype=np.float64) * 1e3
    out = {
        "median_ms": float(np.median(ms)),
        "p10_ms": float(np.percentile(ms, 10)),
        "p90_ms": float(np.percentile(ms, 90)),
        "n": len(ms),
    }
    if reference is not None:
        # A CPU-time reading can be 0 on a coarse clock; keep the ratio finite.
        ref = np.maximum(np.asarray(reference, dtype=np.float64), 1e-9)
        ratios = np.asarray(seconds, dtype=np.float64) / ref
        out["ratio"] = float(np.median(ratios))
        out["ratio_p10"] = float(np.percentile(ratios, 10))
        out["ratio_p90"] = float(np.percentile(ratios, 90))
    return out


def compare_times(times: dict, reference: str | None, clock: str) -> dict:
    """Summaries of every task on both clocks; ``ratio`` at the top is from ``clock``."""
    out = {}
    for name, clocks in times.items():
        ref = times[reference] if reference is not None else None
        entry = {c: summarize(clocks[c], None if ref is None else ref[c]) for c in clocks}
        entry["clock"] = clock
        entry["median_ms"] = entry[clock]["median_ms"]
        if ref is not None:
            entry["ratio"] = entry[clock]["ratio"]
        out[name] = entry
    return out


def sync_for(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None
