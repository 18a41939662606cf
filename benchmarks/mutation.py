"""Mutation testing over mutmut's results: a fixed sample of mutants, a table per module.

mutmut (``[tool.mutmut]`` in pyproject.toml, CONTRIBUTING.md "Mutation testing") writes each
source file's results to ``mutants/<path>.meta``. This script reads them:

``python benchmarks/mutation.py sample --fraction 0.2 [--pending] [PREFIX ...]``
    prints the names of a fixed fraction of every module's mutants, for ``mutmut run``. A
    mutant is in the sample when the SHA-256 of its name falls in the first ``fraction`` of the
    hash range, so the same names are drawn on every machine, and a function that changes
    keeps the draws of the mutants that did not. ``PREFIX`` keeps the modules whose dotted name
    starts with it (``ebmclassifier.energy``, ``ebmclassifier._estimator``); ``--pending``
    keeps the mutants without a result yet or stopped by the timeout (to resume a run).
``python benchmarks/mutation.py table [--fraction F] [--equivalent FILE] [PREFIX ...]``
    prints, per module, how many mutants were killed, survived, timed out, had no test or were
    not run, and the survival rate: survived / (killed + timeout + survived), a timeout counting
    as caught. ``--equivalent FILE`` moves the survivors named in FILE (any text: every
    ``module.x_function__mutmut_N`` in it counts) to a column of their own, out of the rate.

The mutants must exist: ``mutmut run`` generates them first (it is the one that writes
``mutants/``), and ``mutmut results`` / ``mutmut show NAME`` read the same files.
"""

import argparse
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

MUTANTS = Path("mutants")
NAME = re.compile(r"ebmclassifier[\w.ǁ]*__mutmut_\d+")
# mutmut's exit codes (mutmut/stats.py, status_by_exit_code), grouped as the table reports them
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", None: "not run"}
TIMEOUT = {36, 24, -24, 152, 255}
COLUMNS = ["killed", "survived", "equivalent", "timeout", "no tests", "not run", "other"]


def results():
    """``{module: {mutant name: exit code}}`` from every ``mutants/**/*.py.meta``."""
    found = {}
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        module = ".".join(meta.relative_to(MUTANTS).with_suffix("").with_suffix("").parts)
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        if codes:
            found[module] = codes
    return found


def in_sample(name, fraction):
    """Whether ``name`` is drawn: its SHA-256, read as a number in [0, 1), below ``fraction``."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def status(code):
    if code in TIMEOUT:
        return "timeout"
    return STATUS.get(code, "other")


def selected(found, prefixes, fraction):
    """The ``(module, name, code)`` of the sample, in the modules starting with ``prefixes``."""
    for module, codes in found.items():
        if prefixes and not any(module.startswith(prefix) for prefix in prefixes):
            continue
        for name, code in codes.items():
            if in_sample(name, fraction):
                yield module, name, code


def sample(args):
    for _, name, code in selected(results(), args.prefixes, args.fraction):
        if not args.pending or code is None or status(code) == "timeout":
            print(name)


def table(args):
    equivalent = set()
    if args.equivalent:
        equivalent = set(NAME.findall(Path(args.equivalent).read_text()))
    counts = {}
    for module, name, code in selected(results(), args.prefixes, args.fraction):
        kind = status(code)
        if kind == "survived" and name in equivalent:
            kind = "equivalent"
        counts.setdefault(module, Counter())[kind] += 1
    total = Counter()
    print("| module | " + " | ".join(COLUMNS) + " | survival rate |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for module, count in [*counts.items(), ("all", None)]:
        if count is None:
            count = total
        else:
            total.update(count)
        run = sum(count[c] for c in ("killed", "survived", "timeout"))
        share = f"{count['survived'] / run:.1%}" if run else "-"
        cells = " | ".join(str(count[c]) for c in COLUMNS)
        print(f"| {module.removeprefix('ebmclassifier.')} | {cells} | {share} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, run in (("sample", sample), ("table", table)):
        command = commands.add_parser(name)
        command.add_argument("prefixes", nargs="*", metavar="PREFIX")
        command.add_argument("--fraction", type=float, default=1.0)
        command.set_defaults(run=run)
    commands.choices["sample"].add_argument("--pending", action="store_true")
    commands.choices["table"].add_argument("--equivalent", metavar="FILE")
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
