"""The test suite's wall time, quiet and beside busy cores, from a fresh clone (issue #47).

Each step runs one pytest command in a fresh clone of this checkout's ``HEAD`` (so that
nothing built or cached in the checkout helps it), under ``/usr/bin/time``, while ``busy``
other processes each keep a core busy (``python -c "while True: pass"``), and keeps its
``--durations=0`` output::

    python benchmarks/suite_times.py --out times/ \
        inner inner_n full_n full full_n_busy1 full_n_busy3
    python benchmarks/suite_times.py --compare times/full_n.txt times/full_n_busy3.txt

``--compare`` prints, for every item that took at least ``--min`` seconds in the first run
(setup, call and teardown together), its time in the second and the ratio. Run it on a machine
with nothing else running: the figures of CONTRIBUTING's "The test suite" came from it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: step -> (busy loops beside it, pytest's arguments)
STEPS = {
    "inner": (0, ["-m", "not slow", "-n0"]),
    # the inner loop as typed (pyproject.toml's addopts give every run -n auto)
    "inner_n": (0, ["-m", "not slow"]),
    "full": (0, ["-n0"]),
    "full_n": (0, ["-n", "auto"]),
    "full_n_busy1": (1, ["-n", "auto"]),
    "full_n_busy3": (3, ["-n", "auto"]),
}


def run_step(name: str, clone: Path, out: Path) -> str:
    """Run one step in ``clone``; its pytest output goes to ``out / f"{name}.txt"``."""
    busy, args = STEPS[name]
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        start = time.perf_counter()
        with open(out / f"{name}.txt", "w") as log:
            done = subprocess.run([*command, "--durations=0", *args], cwd=clone, stdout=log)
        wall = time.perf_counter() - start
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    last = (out / f"{name}.txt").read_text().strip().splitlines()[-1]
    return f"{name} (busy {busy}): {wall:.1f} s wall, exit {done.returncode}: {last}"


def durations(path: Path) -> dict[str, float]:
    """``{test id: seconds}`` of setup, call and teardown together, from ``--durations=0``."""
    found: dict[str, float] = {}
    for line in path.read_text().splitlines():
        match = re.match(r"([\d.]+)s (call|setup|teardown)\s+(\S+)", line)
        if match:
            found[match[3]] = found.get(match[3], 0.0) + float(match[1])
    return found


def compare(first: Path, second: Path, least: float) -> None:
    """Each item of at least ``least`` seconds in ``first``: its time in ``second``."""
    before, after = durations(first), durations(second)
    rows = sorted(
        ((after[k] / v, v, after[k], k) for k, v in before.items() if v >= least and k in after),
        reverse=True,
    )
    print(f"{len(rows)} items of at least {least:g} s; ratio, {first.name} -> {second.name}")
    for ratio, a, b, name in rows:
        print(f"{ratio:5.2f}x  {a:7.2f} -> {b:7.2f} s  {name}")
    if rows:
        print(f"median {sorted(r[0] for r in rows)[len(rows) // 2]:.2f}x")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="*", help=f"what to run, in order: {', '.join(STEPS)}")
    parser.add_argument("--out", type=Path, default=Path("suite_times"))
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("QUIET", "BUSY"))
    parser.add_argument("--min", type=float, default=1.0, help="seconds (default 1)")
    args = parser.parse_args(argv)
    if args.compare:
        compare(*args.compare, args.min)
        return 0
    unknown = [step for step in args.steps if step not in STEPS]
    if unknown or not args.steps:
        parser.error(f"steps must be among {', '.join(STEPS)}; got {args.steps or 'none'}")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for name in args.steps:
            print(run_step(name, clone, args.out.resolve()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
