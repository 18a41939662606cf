"""The probes of issue #41 on the installed library: crafted ``.ebm`` files and hostile paths.

Each crafted file is a file ``save`` wrote with one member edited; each is loaded in a fresh
process under a 4 GiB address-space limit, which prints what ``load`` did (loaded, or the
exception's first words), its peak resident memory (``ru_maxrss``) and its seconds, beside the
same for the file as saved. Then ``save`` over a FIFO, over another user's file (as root) and
into a missing folder. Run it on another version of the package (``PYTHONPATH=that/checkout``)
to compare; it uses public names only.

    PYTHONPATH=. python benchmarks/hostile_files.py              # builds the 3 GB bomb: ~1 min
    PYTHONPATH=. python benchmarks/hostile_files.py --bomb-gb 0  # without it

The table is markdown, for the issue's note.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch

from ebmclassifier import NGEBMClassifier

CHILD = """
import json, resource, sys, time
import ebmclassifier
limit = 4 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
start = time.perf_counter()
try:
    clf = ebmclassifier.load(sys.argv[1])
    outcome = "loaded"
    if len(sys.argv) > 2:  # then load_params of a pickle, as the issue's chain
        try:
            clf.load_params(f_params=sys.argv[2])
        except Exception as err:
            outcome += f"; load_params: {type(err).__name__}"
except BaseException as err:
    outcome = f"{type(err).__name__}: {str(err)[:150]}"
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"outcome": outcome, "rss_mb": rss, "s": time.perf_counter() - start}))
"""


class _Opener:
    """Unpickled, it creates the file ``marker``."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(path: Path, members: dict, deflated=()) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            kind = zipfile.ZIP_DEFLATED if name in deflated else zipfile.ZIP_STORED
            archive.writestr(name, data, compress_type=kind)
    return path


def _edited(base: Path, path: Path, change) -> Path:
    members = _members(base)
    metadata = json.loads(members["metadata.json"])
    change(metadata)
    members["metadata.json"] = json.dumps(metadata)
    return _write(path, members)


def _weights_edited(base: Path, path: Path, change) -> Path:
    members = _members(base)
    weights = torch.load(io.BytesIO(members["weights.pt"]), weights_only=True)
    change(weights)
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    members["weights.pt"] = buffer.getvalue()
    return _write(path, members)


def _bomb(base: Path, path: Path, gigabytes: float) -> Path:
    """``metadata.json`` padded with ``gigabytes`` GB of spaces, deflated (about 1000:1)."""
    members = _members(base)
    text = members["metadata.json"][:-1] + b', "pad": "'
    with zipfile.ZipFile(path, "w") as archive:
        info = zipfile.ZipInfo("metadata.json")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as member:
            member.write(text)
            block = b" " * 2**24
            for _ in range(int(gigabytes * 1e9) // len(block)):
                member.write(block)
            member.write(b'"}')
        archive.writestr("weights.pt", members["weights.pt"])
    return path


def _nested(base: Path, path: Path) -> Path:
    members = _members(base)
    text = members["metadata.json"].decode()
    members["metadata.json"] = text[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    return _write(path, members)


def _shared(weights: dict, levels: int = 21) -> None:
    nested = [torch.zeros(1)]
    for _ in range(levels):
        nested = [nested, nested]
    weights["states"]["optimizer_"]["state"][0] = {"x": nested}


def crafted_files(folder: Path, bomb_gb: float) -> dict[str, tuple[Path, ...]]:
    """name -> (file, and for the chain the pickle that load_params is then given)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)).astype(np.float32), np.arange(30) % 3
    base = folder / "model.ebm"
    NGEBMClassifier(max_epochs=1, module__hidden_sizes=(4,), random_state=0).fit(X, y).save(base)
    payload = folder / "params.pt"
    torch.save(_Opener(folder / "MARKER"), payload)
    unpickling = {"__dict__": [["weights_only", False]]}
    files = {
        "the file as saved": (base,),
        "the file as saved, then load_params of a pickle": (base, payload),
        "torch_load_kwargs={'weights_only': False}, then load_params": (
            _edited(
                base,
                folder / "chain.ebm",
                lambda m: m["params"].update(torch_load_kwargs=unpickling),
            ),
            payload,
        ),
    }
    for name, value in [
        ("criterion", {"__class__": "torch.nn.modules.module:Module"}),
        ("iterator_train", {"__class__": "torch.utils.data.dataloader:DataLoader"}),
        ("predict_proba", 1),
    ]:
        edit = lambda m, name=name, value=value: m["attributes"].update({name: value})  # noqa: E731
        files[f"attributes[{name!r}]"] = (_edited(base, folder / f"attr_{name}.ebm", edit),)
    files["classes of dtype <U500000000"] = (
        _edited(
            base,
            folder / "dtype.ebm",
            lambda m: m.update(classes={"__array__": ["a", "b", "c"], "dtype": "<U500000000"}),
        ),
    )
    files["JSON nested 100,000 deep"] = (_nested(base, folder / "nested.ebm"),)
    files["module_ weight of shape (400, 4)"] = (
        _weights_edited(
            base,
            folder / "shape.ebm",
            lambda w: w["states"]["module_"].update({"net.1.weight": torch.zeros(400, 4)}),
        ),
    )
    files["a list shared 21 levels deep (2M leaves)"] = (
        _weights_edited(base, folder / "shared.ebm", _shared),
    )
    files["ebmclassifier.__main__ named as the module"] = (
        _edited(
            base,
            folder / "main.ebm",
            lambda m: m["params"].update(module={"__class__": "ebmclassifier.__main__:main"}),
        ),
    )
    if bomb_gb > 0:
        files[f"metadata.json of {bomb_gb:g} GB deflated"] = (
            _bomb(base, folder / "bomb.ebm", bomb_gb),
        )
    return files


def load_in_child(files: tuple[Path, ...], timeout: float) -> dict:
    command = [sys.executable, "-c", CHILD, *map(str, files)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": f"still running after {timeout:g} s (killed)", "rss_mb": None, "s": None}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"outcome": f"exit {done.returncode}", "rss_mb": None, "s": None}
    return json.loads(lines[-1])


def save_probes(folder: Path) -> list[tuple[str, str]]:
    """``save`` over a FIFO, over another user's file (root only) and into a missing folder."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)).astype(np.float32), np.arange(30) % 3
    clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(4,), random_state=0).fit(X, y)
    rows = []
    fifo = folder / "fifo.ebm"
    os.mkfifo(fifo)
    try:
        clf.save(fifo)
        outcome = "saved"
    except (ValueError, OSError) as err:
        outcome = f"{type(err).__name__}: {str(err)[:90]}"
    kind = "still a FIFO" if stat.S_ISFIFO(os.lstat(fifo).st_mode) else "now a regular file"
    rows.append(("save over a FIFO", f"{outcome} ({kind})"))
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        other = folder / "other.ebm"
        clf.save(other)
        os.chown(other, 1000, 1000)
        os.chmod(other, 0o640)
        clf.save(other)
        status = os.stat(other)
        rows.append(
            (
                "save as root over uid 1000's file (0o640)",
                f"owner {status.st_uid}:{status.st_gid}, mode {oct(status.st_mode & 0o7777)}",
            )
        )
    try:
        clf.save(folder / "missing" / "model.ebm")
    except OSError as err:
        rows.append(("save into a missing folder", f"{type(err).__name__}: {err}"))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-gb", type=float, default=3.0, help="0 leaves the bomb out")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per load")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = crafted_files(folder, args.bomb_gb)
        print("| file | size | load | peak RSS (MB) | s |")
        print("|---|---|---|---|---|")
        for name, paths in files.items():
            result = load_in_child(paths, args.timeout)
            rss = "" if result["rss_mb"] is None else f"{result['rss_mb']:.0f}"
            seconds = "" if result["s"] is None else f"{result['s']:.2f}"
            size = f"{paths[0].stat().st_size / 1e3:.1f} kB"
            outcome = " ".join(result["outcome"].split()).replace("|", "/").replace(tmp, "…")
            print(f"| {name} | {size} | {outcome} | {rss} | {seconds} |")
        marker = "appeared" if (folder / "MARKER").exists() else "never appeared"
        print(f"\nThe chain's marker file {marker}.\n")
        print("| save | outcome |")
        print("|---|---|")
        for name, outcome in save_probes(folder):
            print(f"| {name} | {outcome.replace(tmp, '…')} |")


if __name__ == "__main__":
    main()
