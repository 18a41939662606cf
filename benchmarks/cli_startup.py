"""How long the command line takes to answer ``--help`` and a bad option.

Each round starts a fresh ``python -m ebmclassifier ARGS`` from the folder ``--repo`` (whose
``ebmclassifier`` is the one imported: ``-m`` puts the current folder first on the path) and
measures its wall time and its CPU time (user + system, from the child's resource usage),
which the load of other processes affects little. Prints the median and the range of each,
the load average before and after, and whether the run imported torch (``-X importtime``).

    python benchmarks/cli_startup.py                      # this checkout
    python benchmarks/cli_startup.py --repo /path/to/other/checkout --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = (["--help"], ["compare", "--seeds", "0"])


def _one(repo: Path, argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ebmclassifier", *argv], cwd=repo, capture_output=True, check=False
    )
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def _imports_torch(repo: Path, argv: list[str]) -> bool:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ebmclassifier", *argv],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    return any(line.split("|")[-1].strip() == "torch" for line in out.stderr.splitlines())


def _range(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    repo = Path(args.repo)
    print(f"repo {repo}; load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for argv in CASES:
        _one(repo, argv)  # warm the file cache
        runs = [_one(repo, argv) for _ in range(args.rounds)]
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        torch_imported = _imports_torch(repo, argv)
        print(
            f"python -m ebmclassifier {' '.join(argv)}: wall {_range(walls)}, CPU "
            f"{_range(cpus)} over {args.rounds} rounds; imports torch: {torch_imported}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
