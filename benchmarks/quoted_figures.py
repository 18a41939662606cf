"""Check the figures the README and the docs quote against the commands that produced them.

``benchmarks/quoted_figures/figures.json`` lists, for each command whose output the docs
quote (``demo``, ``compare --data digits``, the main job ``compare``), the command, the
environment its recorded output holds for (torch, threads, CPU, date, load, CPU and wall
time) and the file of that output (``demo.txt``, ...), and for every quoted line: the doc, the
line's start (which finds it there), the line of the command's output it quotes, which of its
numbers it quotes and the tolerance of each. A tolerance is named: ``exact`` (the figure as the
command prints it, for cross-entropy and NG-EBM, whose fits on one thread are bitwise on one
machine), ``jem`` (JEM's figures, whose sampler amplifies the last bits that float kernels of
another CPU change), and so on; ``figures.json`` says why each is what it is.

Two checks, each a failure with one line per mismatch and exit status 1:

- the docs against the recorded outputs (``--recorded``, the default; a second): every quoted
  line is found in its doc, its words are the output's and each number is within its
  tolerance of the output's. A figure changed by hand in a doc, or a verdict that no longer
  reads as the command printed it, fails here;
- the docs against a fresh run (``--rerun``): the cheap commands (``demo`` and
  ``compare --data digits``, a few minutes of CPU) run again, on one thread, and the same
  comparison is made with their output; ``--rerun --all`` runs the main job too (about ten
  minutes of CPU). Timings are reported beside the recorded ones, never compared: they move
  with the machine and its load. On another CPU or torch version than the recorded one, an
  ``exact`` figure is held to the ``another_machine`` tolerance instead, and the script says so.
  CI runs ``--rerun`` after the tests (``.ci/run``).

    python benchmarks/quoted_figures.py                  # the docs against the recorded runs
    OMP_NUM_THREADS=1 python benchmarks/quoted_figures.py --rerun
    python benchmarks/quoted_figures.py --rerun --record  # rewrite the recorded outputs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).resolve().parent / "quoted_figures" / "figures.json"
NUMBER = re.compile(r"-?\d+\.\d+")


def numbers(text: str) -> list[str]:
    """The decimal numbers of ``text``, as written (integers are words: "3 seeds")."""
    return NUMBER.findall(text)


def _cells(line: str, cells: list[int] | None) -> str:
    """The markdown table cells ``cells`` of ``line`` (all of it when None), joined."""
    if cells is None:
        return line
    parts = [part.strip() for part in line.strip().strip("|").split("|")]
    return " | ".join(parts[i] for i in cells)


def _find(lines: list[str], start: str, after: str | None = None) -> str | None:
    """The first line that starts with ``start`` (blanks before it ignored), after the first
    line that starts with ``after`` when given."""
    begun = after is None
    for line in lines:
        if not begun:
            begun = line.strip().startswith(after)
            continue
        if line.strip().startswith(start.strip()):
            return line.strip()
    return None


def _within(doc: str, run: str, tolerance: float) -> bool:
    """Whether a quoted number matches the run's: as printed when the tolerance is 0, else
    within it."""
    if tolerance == 0:
        return doc == run
    return abs(float(doc) - float(run)) <= tolerance + 1e-12


def check_quote(quote: dict, doc_lines: list[str], run_lines: list[str], tolerances: dict):
    """The problems of one quoted line (an empty list when it matches), each a sentence."""
    where = f"{quote['doc']}: {quote['line'][:60]!r}"
    doc_line = _find(doc_lines, quote["line"], quote.get("doc_after"))
    if doc_line is None:
        return [f"{where}: the line is not in the doc"]
    run_line = _find(run_lines, quote.get("run_line", quote["line"]), quote.get("run_after"))
    if run_line is None:
        return [f"{where}: the {quote['run']} output has no line {quote.get('run_line')!r}"]
    doc_text = _cells(doc_line, quote.get("cells"))
    run_text = _cells(run_line, quote.get("run_cells", quote.get("cells")))
    quoted, printed = numbers(doc_text), numbers(run_text)
    pick = quote.get("pick", list(range(len(printed))))
    printed = [printed[i] for i in pick if i < len(printed)]
    if len(quoted) != len(printed):
        return [f"{where}: quotes {len(quoted)} numbers, the output's line has {len(printed)}"]
    names = quote.get("tolerance", "exact")
    names = [names] * len(quoted) if isinstance(names, str) else names
    problems = [
        f"{where}: quotes {q}, the {quote['run']} output {p} (tolerance {name}: "
        f"{tolerances[name]['value']:g})"
        for q, p, name in zip(quoted, printed, names, strict=True)
        if not _within(q, p, tolerances[name]["value"])
    ]
    if quote.get("words", True):  # the words around the numbers must match too
        if NUMBER.sub("#", doc_text) != NUMBER.sub("#", run_text):
            problems.append(f"{where}: its words differ from the {quote['run']} output's line")
    return problems


def check(table: dict, outputs: dict[str, str], root: Path = ROOT) -> list[str]:
    """Every problem of the docs against ``outputs`` (``{run: its printed text}``); runs
    missing from ``outputs`` are not checked."""
    problems = []
    docs = {}
    for quote in table["quotes"]:
        if quote["run"] not in outputs:
            continue
        if quote["doc"] not in docs:
            docs[quote["doc"]] = (root / quote["doc"]).read_text().splitlines()
        problems += check_quote(
            quote, docs[quote["doc"]], outputs[quote["run"]].splitlines(), table["tolerances"]
        )
    return problems


def recorded_outputs(table: dict, folder: Path = TABLE.parent) -> dict[str, str]:
    return {name: (folder / run["output"]).read_text() for name, run in table["runs"].items()}


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict:
    import torch

    return {
        "torch": torch.__version__,
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def rerun(table: dict, names: list[str]) -> tuple[dict[str, str], dict[str, dict]]:
    """Run each command on one thread; its output, and its environment and cost."""
    outputs, measured = {}, {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for name in names:
        with tempfile.TemporaryDirectory() as out:
            command = table["runs"][name]["command"].format(out=out).split()
            date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            load, start, before = os.getloadavg()[0], time.perf_counter(), os.times()
            done = subprocess.run(
                [sys.executable, *command[1:]], cwd=ROOT, env=env, capture_output=True, text=True
            )
            after = os.times()
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
        cpu = sum(
            getattr(after, k) - getattr(before, k) for k in ("children_user", "children_system")
        )
        outputs[name] = done.stdout
        measured[name] = {
            "date": date,
            "cpu_seconds": round(cpu, 1),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        }
    return outputs, measured


def _differs(recorded: dict, here: dict) -> dict:
    """What of ``here``'s environment differs from the ``recorded`` one (threads aside: the
    rerun sets one)."""
    return {
        k: (recorded.get(k), v) for k, v in here.items() if k != "threads" and recorded.get(k) != v
    }


def _another_machine(tolerances: dict) -> dict:
    """The tolerances of a rerun in another environment: ``exact`` figures within
    ``another_machine``, the others as they are."""
    return {**tolerances, "exact": {**tolerances["another_machine"], "why": "another machine"}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerun", action="store_true", help="run the cheap commands again")
    parser.add_argument("--all", action="store_true", help="with --rerun: the main job too")
    parser.add_argument("--record", action="store_true", help="with --rerun: keep the outputs")
    parser.add_argument("--table", default=str(TABLE))
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose docs are checked")
    args = parser.parse_args(argv)
    table_path = Path(args.table)
    table = json.loads(table_path.read_text())
    root = Path(args.root)
    if not args.rerun:
        problems = check(table, recorded_outputs(table, table_path.parent), root)
        count = len(problems) or "no"
        print(
            f"{len(table['quotes'])} quoted lines against the recorded outputs: {count} problem(s)"
        )
        print("\n".join(problems))
        return 1 if problems else 0
    names = [n for n, run in table["runs"].items() if args.all or run["cheap"]]
    here = environment()
    for name in names:
        there = table["runs"][name]["environment"]
        differs = _differs(there, here)
        if differs:
            print(
                f"{name}: recorded in another environment, {differs}: float kernels differ "
                "between CPUs and torch versions, so exact figures may differ in the last digit"
            )
    if any(_differs(table["runs"][name]["environment"], here) for name in names):
        print(
            "exact figures are held to the another_machine tolerance "
            f"({table['tolerances']['another_machine']['value']:g}) in this environment"
        )
        table = {**table, "tolerances": _another_machine(table["tolerances"])}
    outputs, measured = rerun(table, names)
    for name in names:
        print(f"{name}: {measured[name]} (recorded: {table['runs'][name]['cost']})")
    problems = check(table, outputs, root)
    quoted = sum(q["run"] in names for q in table["quotes"])
    print(
        f"{quoted} quoted lines of {', '.join(names)} against a fresh run: "
        f"{len(problems) or 'no'} problem(s)"
    )
    print("\n".join(problems))
    if args.record:
        for name in names:
            (table_path.parent / table["runs"][name]["output"]).write_text(outputs[name])
            table["runs"][name]["environment"] = {**here, "threads": 1}
            table["runs"][name]["cost"] = measured[name]
        table_path.write_text(json.dumps(table, indent=2, ensure_ascii=False) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
