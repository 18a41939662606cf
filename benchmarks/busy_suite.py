"""The suite's slow items beside busy cores: wall time, CPU time and a fair share to compare with.

Runs the given pytest items (node ids; default :data:`ITEMS`, the end-to-end runs that
dominate the suite) in one pytest process per block, while 0, 1, 3, ... other processes keep a
core busy each (``python -c "while True: pass"``, started here and ended after their block).
For each item it records the wall time of its setup, call and teardown, and the CPU time
(user + sys) of the pytest process and of the child processes it waited for in that time.
Just before and just after each item, a reference of pure-Python work on one thread
(:data:`REFERENCE_S` seconds of CPU) is timed: its wall time over its CPU time (the mean of the
two) is the slowdown a single-threaded job gets from the load of that moment, the *fair*
slowdown, whatever else runs on the machine.

The table gives, per item and busy count, the wall time, the ratio to the quiet block's, the
reference's ratio (the fair share's), their quotient (*excess*: 1 is fair, above 1 the item
lost more than a single-threaded job would) and the CPU time (a pool that spins while it waits
shows as CPU time that grows with the load)::

    python benchmarks/busy_suite.py --busy 0,3 --rounds 1 --json busy.json

Blocks run in an order that rotates over rounds; ``--pythonpath`` times another checkout
(``git worktree add /tmp/base main``, then ``--pythonpath /tmp/base``). ``os.getloadavg()`` is
printed at the start and end of each block.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The end-to-end items that dominated the quiet suite (issue #47), by their node ids.
ITEMS = (
    "tests/_utils/test_compile.py::test_compile_with_inductor_trains_the_finite_difference",
    "tests/test_gpu_check.py::test_dry_run_writes_every_figure",
    "tests/experiments/test_bench.py::test_quick_bench_json_structure",
    "tests/test_readme.py::test_readme_python_blocks_run",
    "tests/test_distributed.py::test_data_parallel_two_processes_match_one",
    "tests/test_distributed.py::test_grid_search_on_dask_cluster_equals_single_process",
    "tests/experiments/test_compare_small_data.py::test_the_main_job_on_60_wine_samples_finishes",
    "tests/_utils/test_streamed.py::test_a_memmap_trains_under_a_memory_limit_the_float_copy_exceeds",
    "tests/_utils/test_atomic.py::test_a_process_killed_while_saving_leaves_a_whole_file",
    "tests/experiments/test_demo.py::test_default_accuracy_is_that_of_mlpclassifier",
    "tests/test_docs_front_page.py::test_the_front_page_example_runs_as_written",
)
#: CPU seconds of the pure-Python reference timed before each item.
REFERENCE_S = 0.5


def reference_slowdown(cpu_s: float = REFERENCE_S) -> float:
    """Wall time over CPU time of ``cpu_s`` seconds of pure-Python work on this thread."""
    start_wall, start_cpu = time.perf_counter(), time.thread_time()
    while time.thread_time() - start_cpu < cpu_s:
        sum(range(1000))
    return (time.perf_counter() - start_wall) / (time.thread_time() - start_cpu)


def _cpu() -> float:
    """User + sys CPU seconds of this process and of the children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timer(rows: dict[str, dict]):
    """A pytest plugin filling ``rows``: per item, the reference slowdown, the wall and CPU
    time from its setup to its teardown, and its outcome."""
    import pytest

    class Timer:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            before = reference_slowdown()
            row = {"outcome": "passed"}
            rows[item.nodeid] = row
            start_wall, start_cpu = time.perf_counter(), _cpu()
            yield
            row["wall_s"] = time.perf_counter() - start_wall
            row["cpu_s"] = _cpu() - start_cpu
            row["reference"] = (before + reference_slowdown()) / 2

        def pytest_runtest_logreport(self, report):
            row = rows.get(report.nodeid)
            if row is not None and report.outcome != "passed":
                row["outcome"] = report.outcome

    return Timer()


def run_block(items: list[str], out: Path) -> None:
    """In a child process: run the items in one pytest session, write the rows to ``out``."""
    import pytest

    rows: dict[str, dict] = {}
    code = pytest.main(["-q", "-n0", "-p", "no:cacheprovider", *items], plugins=[timer(rows)])
    out.write_text(json.dumps({"exit": int(code), "rows": rows}))


def block(items: list[str], busy: int, pythonpath: str | None) -> dict:
    """Run the items in a fresh pytest process beside ``busy`` busy loops."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    cwd = pythonpath or str(ROOT)
    try:
        load_start = os.getloadavg()
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "rows.json"
            command = [sys.executable, str(Path(__file__).resolve()), "--child", str(out), *items]
            subprocess.run(command, env=env, cwd=cwd, check=False, stdout=subprocess.DEVNULL)
            result = json.loads(out.read_text())
        result["load"] = {"start": load_start, "end": os.getloadavg()}
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    return result


def summarize(blocks: dict[int, list[dict]], items: list[str]) -> list[dict]:
    """Per item and busy count: medians over rounds, ratios to the quiet block."""

    def median(values: list[float]) -> float:
        values = sorted(values)
        return values[len(values) // 2]

    rows = []
    for item in items:
        quiet = None
        for busy, results in sorted(blocks.items()):
            found = [r["rows"][item] for r in results if "wall_s" in r["rows"].get(item, {})]
            if not found:
                continue
            row = {
                "item": item,
                "busy": busy,
                "wall_s": median([f["wall_s"] for f in found]),
                "cpu_s": median([f["cpu_s"] for f in found]),
                "reference": median([f["reference"] for f in found]),
                "outcomes": sorted({f["outcome"] for f in found}),
            }
            if busy == 0:
                quiet = row
            if quiet is not None:
                row["ratio"] = row["wall_s"] / quiet["wall_s"]
                row["fair"] = row["reference"] / quiet["reference"]
                row["excess"] = row["ratio"] / row["fair"]
            rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'item':58s} busy  wall_s  ratio  fair  excess  cpu_s")
    for row in rows:
        name = row["item"].split("::")[-1][:58]
        ratios = (
            f"{row['ratio']:5.2f}  {row['fair']:4.2f}  {row['excess']:6.2f}"
            if "ratio" in row
            else f"{'':5s}  {'':4s}  {'':6s}"
        )
        print(f"{name:58s} {row['busy']:4d} {row['wall_s']:7.2f}  {ratios}  {row['cpu_s']:5.2f}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        run_block(sys.argv[3:], Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("items", nargs="*", help="pytest node ids (default: ITEMS)")
    parser.add_argument("--busy", default="0,3", help="busy loops per block (default 0,3)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--pythonpath", help="the checkout to time (default: this one)")
    parser.add_argument("--json", help="write the blocks and the table here")
    args = parser.parse_args()
    items = args.items or list(ITEMS)
    counts = [int(n) for n in args.busy.split(",")]
    blocks: dict[int, list[dict]] = {n: [] for n in counts}
    for r in range(args.rounds):
        shift = r % len(counts)
        for busy in counts[shift:] + counts[:shift]:
            result = block(items, busy, args.pythonpath)
            print(f"round {r}, {busy} busy: exit {result['exit']}, load {result['load']}")
            blocks[busy].append(result)
    rows = summarize(blocks, items)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"blocks": blocks, "table": rows}, indent=1))


if __name__ == "__main__":
    main()
