"""Changed bytes of real saves against ``ebmclassifier.load``: a result or a ``ValueError``.

A JEM file and a pipeline file (a scaler and an NG-EBM) as ``ebmclassifier.save`` writes them;
in each member, and in the members of the archives inside it (``weights.pt``'s records, the
skops member's arrays and ``schema.json``, the pipeline's estimator file), up to ``--per-member``
bytes drawn with a fixed seed are set to 0xFF and to 0x30 one at a time, and the archives are
rebuilt around the change so that every CRC holds (a changed byte that a CRC catches tests
only zipfile). Each changed file is loaded; the table counts what came: loaded, refused with
``ValueError("Cannot load '<file>': ...")``, or anything else (listed, one per member and
exception type). ``weights.pt``'s records are changed as a nested archive only, so that torch's
own reader sees them.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/mutated_files.py

Uses public names only; run it on another checkout with ``PYTHONPATH=that/checkout`` (the
pipeline needs ``ebmclassifier.save``).
"""

from __future__ import annotations

import argparse
import io
import random
import time
import warnings
import zipfile
from collections import Counter

import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import ebmclassifier
from ebmclassifier import JEMClassifier, NGEBMClassifier

#: Members that are archives themselves, changed inside.
_NESTED = (".ebm", ".skops", ".pt", ".npz")


def _members(raw: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def _archive(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def changed_files(raw: bytes, per_member: int, depth: int = 0):
    """``(where, changed archive)`` for up to ``per_member`` bytes of every member changed,
    nested archives changed inside (three deep at most), every CRC recomputed."""
    members = _members(raw)
    for index, (name, data) in enumerate(members):
        if name.endswith(_NESTED) and depth < 3:
            try:
                for where, inner in changed_files(data, per_member, depth + 1):
                    rebuilt = list(members)
                    rebuilt[index] = (name, inner)
                    yield f"{name}/{where}", _archive(rebuilt)
            except zipfile.BadZipFile:
                pass
        if name.endswith(".pt"):
            continue
        draw = random.Random(f"{depth}:{name}")
        for position in sorted(draw.sample(range(len(data)), min(len(data), per_member))):
            for value in (0xFF, 0x30):
                changed = bytearray(data)
                changed[position] = value if changed[position] != value else value ^ 0x55
                rebuilt = list(members)
                rebuilt[index] = (name, bytes(changed))
                yield f"{name}@{position}", _archive(rebuilt)


def saved_files() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)).astype(np.float32), np.arange(30) % 3
    jem = JEMClassifier(
        max_epochs=1, module__hidden_sizes=(4,), sgld_steps=1, buffer_size=20, random_state=0
    ).fit(X, y)
    files = {}
    buffer = io.BytesIO()
    jem.save(buffer)
    files["JEMClassifier"] = buffer.getvalue()
    if hasattr(ebmclassifier, "save"):
        clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(4,), random_state=0)
        buffer = io.BytesIO()
        ebmclassifier.save(make_pipeline(StandardScaler(), clf).fit(X, y), buffer)
        files["Pipeline(StandardScaler, NGEBMClassifier)"] = buffer.getvalue()
    return files


def probe(raw: bytes, per_member: int) -> tuple[Counter, list, float]:
    outcomes, others, start = Counter(), {}, time.process_time()
    for where, changed in changed_files(raw, per_member):
        try:
            ebmclassifier.load(io.BytesIO(changed))
            outcomes["loaded"] += 1
        except ValueError as err:
            if str(err).startswith("Cannot load") and not isinstance(err, UnicodeDecodeError):
                outcomes["refused"] += 1
                continue
            outcomes["other"] += 1
            others.setdefault((where.split("@")[0], type(err).__name__), (where, str(err)))
        except Exception as err:  # what the probe looks for
            outcomes["other"] += 1
            others.setdefault((where.split("@")[0], type(err).__name__), (where, str(err)))
    return outcomes, list(others.items()), time.process_time() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-member", type=int, default=120, help="bytes changed per member")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # torch warns of a pickle protocol it does not know
    print("| file | size | changed files | loaded | refused (ValueError) | other | CPU s |")
    print("|---|---|---|---|---|---|---|")
    found = []
    for name, raw in saved_files().items():
        outcomes, others, seconds = probe(raw, args.per_member)
        total = sum(outcomes.values())
        print(
            f"| {name} | {len(raw) / 1e3:.1f} kB | {total} | {outcomes['loaded']} | "
            f"{outcomes['refused']} | {outcomes['other']} | {seconds:.0f} |"
        )
        found += [(name, key, example) for key, example in others]
    for name, (_, kind), (where, message) in found:
        print(f"\n{name}: {kind} at {where}: {message[:200]}")


if __name__ == "__main__":
    main()
