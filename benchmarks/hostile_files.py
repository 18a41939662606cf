"""Crafted files against ``ebmclassifier.load`` on the installed library, and hostile paths.

Each crafted file is a file ``save`` wrote with one part edited. Three families:

- issue #41's: parameters that would reach code (a chain to ``load_params`` of a pickle, a
  module the command line runs), attributes past the closed list, a dtype, zip and JSON bombs,
  weights of another network or a structure shared into millions of leaves;
- issue #48's: a string dtype of item size 0 (``"<U"``, 100 kB and 160 kB), a 17 kB file whose
  parameters build a 1 GB network, metadata in UTF-16 nested 50,000 deep, a byte flipped in a
  member name of ``weights.pt``, ``n_threads=1000`` (loaded, then ``predict_proba`` run: the
  threads it used), a uniform replay buffer of ten million chains, an optimizer state expanded
  from one value to 10^8;
- pipelines (``ebmclassifier.save`` of a scikit-learn ``Pipeline``): as saved, a step replaced
  by a call of ``os.system`` or ``subprocess.Popen`` (a marker file shows whether it ran), an
  array of the skops member declaring 10^12 values, its ``schema.json`` nested 50,000 deep or
  padded to 200 MB and deflated, a JSON text in it nested 50,000 deep.

Each file is loaded in a fresh process under a 4 GiB address-space limit, which prints what
``load`` did (loaded, or the exception's first words), the growth of its peak resident memory
during ``load`` (``ru_maxrss`` after it minus before it) and its seconds. Then ``save`` over a
FIFO, over another user's file (as root) and into a missing folder. Run it on another version
of the package (``PYTHONPATH=that/checkout``) to compare; it uses public names only.

    PYTHONPATH=. python benchmarks/hostile_files.py              # builds a 3 GB bomb: ~1 min
    PYTHONPATH=. python benchmarks/hostile_files.py --bomb-gb 0  # without it
    PYTHONPATH=that/checkout python benchmarks/hostile_files.py --families 48  # one table

``tests/saving/test_saving_hostile.py`` loads the issue #48 files through
:func:`issue48_files` and :func:`load_in_child`. The tables are markdown, for the saving guide.
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
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import ebmclassifier
from ebmclassifier import JEMClassifier, NGEBMClassifier

CHILD = """
import json, os, resource, sys, time
import torch
import ebmclassifier
limit = 4 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for path, *then in json.loads(sys.argv[1]):
    start = time.perf_counter()
    try:
        obj = ebmclassifier.load(path)
        outcome = "loaded"
        if then and then[0] == "load_params":  # then load_params of a pickle, as #41's chain
            try:
                obj.load_params(f_params=then[1])
            except Exception as err:
                outcome += f"; load_params: {type(err).__name__}"
        elif then and then[0] == "predict":  # then predict_proba: the threads it runs on
            seen = []
            obj.module_.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
            obj.predict_proba(torch.zeros(2, obj.n_features_in_).numpy())
            cores = len(os.sched_getaffinity(0))
            outcome += f"; predict_proba on {max(seen)} threads ({cores} cores)"
    except BaseException as err:
        outcome = f"{type(err).__name__}: {str(err)[:150]}"
    obj = None
    seconds = time.perf_counter() - start
    # the peak's growth since the first load: at least this file's own growth
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(json.dumps({"outcome": outcome, "growth_mb": growth, "s": seconds}), flush=True)
"""


class _Opener:
    """Unpickled, it creates the file ``marker``."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def _members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(path, members: dict, deflated=()):
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


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(30, 4)).astype(np.float32), np.arange(30) % 3


def _base(folder: Path) -> Path:
    base = folder / "model.ebm"
    if not base.exists():
        NGEBMClassifier(max_epochs=1, module__hidden_sizes=(4,), random_state=0).fit(*_data()).save(
            base
        )
    return base


def issue41_files(folder: Path, bomb_gb: float) -> dict[str, tuple]:
    """name -> (file, and what the child does after loading it)."""
    base = _base(folder)
    payload = folder / "params.pt"
    torch.save(_Opener(folder / "MARKER"), payload)
    unpickling = {"__dict__": [["weights_only", False]]}
    files = {
        "the file as saved": (base,),
        "the file as saved, then load_params of a pickle": (base, "load_params", payload),
        "torch_load_kwargs={'weights_only': False}, then load_params": (
            _edited(
                base,
                folder / "chain.ebm",
                lambda m: m["params"].update(torch_load_kwargs=unpickling),
            ),
            "load_params",
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


# ---------------------------------------------------------------- issue #48


def _strings(kilobytes: int) -> dict:
    """4,000 one-letter classes and one as long as fills ``kilobytes`` of JSON, of dtype "<U"
    (item size 0: numpy sizes every item as the longest)."""
    n_short = 4000
    return {"__array__": ["a"] * n_short + ["x" * (kilobytes * 1000 - 5 * n_short)], "dtype": "<U"}


def _utf16_nested(base: Path, path: Path, depth: int = 50_000) -> Path:
    """``metadata.json`` in UTF-16-LE with an array nested ``depth`` deep between two strings
    holding U+2200, whose byte 0x22 passes for a quote to a count of brackets on the bytes."""
    members = _members(base)
    text = members["metadata.json"].decode()[:-1]
    nested = "[" * depth + "]" * depth
    text += f', "a": "\u2200", "x": {nested}, "b": "\u2200"}}'
    members["metadata.json"] = text.encode("utf-16-le")
    return _write(path, members)


def _flipped_name(base: Path, path: Path) -> Path:
    """A byte of the name ``archive/data.pkl`` in the table of contents of ``weights.pt``
    flipped to 0xFF (torch marks its names UTF-8)."""
    members = _members(base)
    weights = bytearray(members["weights.pt"])
    weights[weights.rindex(b"archive/data.pkl") + 8] = 0xFF
    members["weights.pt"] = bytes(weights)
    return _write(path, members)


def _expanded(weights: dict) -> None:
    big = torch.zeros(1, dtype=torch.float64).expand(10**8)
    weights["states"]["optimizer_"]["state"][0] = {"step": torch.tensor(1.0), "exp_avg": big}


def issue48_files(folder: Path) -> dict[str, tuple]:
    """The issue's five crafted files (the first five), then the others of its families:
    name -> (file, and what the child does after loading it)."""
    base = _base(folder)
    wide = {"__tuple__": [16384, 16384]}
    files = {
        '100 kB of classes of dtype "<U"': (
            _edited(base, folder / "u100.ebm", lambda m: m.update(classes=_strings(100))),
        ),
        '160 kB of classes of dtype "<U"': (
            _edited(base, folder / "u160.ebm", lambda m: m.update(classes=_strings(160))),
        ),
        "module__hidden_sizes=(16384, 16384): a 1 GB network": (
            _edited(
                base, folder / "wide.ebm", lambda m: m["params"].update(module__hidden_sizes=wide)
            ),
        ),
        "metadata.json in UTF-16, nested 50,000 deep": (_utf16_nested(base, folder / "utf16.ebm"),),
        "a byte of a member name of weights.pt flipped": (
            _flipped_name(base, folder / "flipped.ebm"),
        ),
        "n_threads=1000, then predict_proba": (
            _edited(base, folder / "threads.ebm", lambda m: m["params"].update(n_threads=1000)),
            "predict",
        ),
        "an optimizer state expanded from 1 value to 10^8": (
            _weights_edited(base, folder / "expanded.ebm", _expanded),
        ),
    }
    jem = folder / "jem.ebm"
    JEMClassifier(
        max_epochs=1, module__hidden_sizes=(4,), sgld_steps=1, buffer_size=20,
        buffer_init="uniform", random_state=0,
    ).fit(*_data()).save(jem)  # fmt: skip
    files["a uniform JEM buffer of 10^7 chains (the file holds 20)"] = (
        _edited(jem, folder / "buffer.ebm", lambda m: m["params"].update(buffer_size=10**7)),
    )
    return files


# ---------------------------------------------------------------- pipelines


def _pipeline(folder: Path) -> Path:
    path = folder / "pipe.ebm"
    if not path.exists():
        clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(4,), random_state=0)
        ebmclassifier.save(make_pipeline(StandardScaler(), clf).fit(*_data()), path)
    return path


def _skeleton_edited(base: Path, path: Path, change, deflated=()) -> Path:
    members = _members(base)
    inner = _members(io.BytesIO(members["skeleton.skops"]))
    change(inner)
    rebuilt = io.BytesIO()
    _write(rebuilt, inner, deflated)
    members["skeleton.skops"] = rebuilt.getvalue()
    return _write(path, members)


def _json_node(value) -> dict:
    kind = type(value).__name__
    return {"__class__": kind, "__module__": "builtins", "__loader__": "JsonNode",
            "content": json.dumps(value), "is_json": True}  # fmt: skip


def _call(module: str, name: str, argument) -> dict:
    """A skops node that, built, calls ``module.name(argument)``."""
    if isinstance(argument, list):
        item = {"__class__": "list", "__module__": "builtins", "__loader__": "ListNode",
                "content": [_json_node(a) for a in argument]}  # fmt: skip
    else:
        item = _json_node(argument)
    content = {"__class__": "tuple", "__module__": "builtins", "__loader__": "TupleNode",
               "content": [item]}  # fmt: skip
    return {"__class__": name, "__module__": module,
            "__loader__": "ConstructorFromReduceNode", "content": content}  # fmt: skip


def _first_step(node: dict):
    def change(inner: dict) -> None:
        schema = json.loads(inner["schema.json"])
        schema["content"]["content"]["steps"]["content"][0]["content"][1] = node
        inner["schema.json"] = json.dumps(schema).encode()

    return change


def _huge_array(inner: dict) -> None:
    name = next(n for n in inner if n.endswith(".npy"))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
    )
    inner[name] = header.getvalue() + b"\0" * 8


def _deep_schema(inner: dict) -> None:
    inner["schema.json"] = b"[" * 50_000 + b"]" * 50_000


def _schema_bomb(inner: dict) -> None:
    inner["schema.json"] = inner["schema.json"][:-1] + b', "pad": "' + b" " * 200_000_000 + b'"}'


def _deep_text(inner: dict) -> None:
    deep = b'"content": "' + b"[" * 50_000 + b'"'
    inner["schema.json"] = inner["schema.json"].replace(b'"content": "true"', deep, 1)


def pipeline_files(folder: Path) -> dict[str, tuple]:
    """name -> (file, and what the child does after loading it); the markers that a command
    of the file would create are ``folder / "MARKER-system"`` and ``"MARKER-popen"``."""
    base = _pipeline(folder)
    system = _call("os", "system", f"touch {folder / 'MARKER-system'}")
    popen = _call("subprocess", "Popen", ["touch", str(folder / "MARKER-popen")])
    return {
        "a pipeline as saved (scaler + NGEBMClassifier)": (base,),
        "its scaler replaced by a call of os.system": (
            _skeleton_edited(base, folder / "system.ebm", _first_step(system)),
        ),
        "its scaler replaced by a call of subprocess.Popen": (
            _skeleton_edited(base, folder / "popen.ebm", _first_step(popen)),
        ),
        "an array of its skops member declaring 10^12 values": (
            _skeleton_edited(base, folder / "npy.ebm", _huge_array),
        ),
        "its schema.json nested 50,000 deep": (
            _skeleton_edited(base, folder / "schema.ebm", _deep_schema),
        ),
        "its schema.json padded to 200 MB, deflated": (
            _skeleton_edited(base, folder / "padded.ebm", _schema_bomb, {"schema.json"}),
        ),
        "a JSON text in its schema.json nested 50,000 deep": (
            _skeleton_edited(base, folder / "text.ebm", _deep_text),
        ),
    }


def load_in_child(files: tuple, timeout: float) -> dict:
    """``{"outcome", "growth_mb", "s"}`` of loading ``files[0]`` in a fresh process under a
    4 GiB address-space limit (then what ``files[1:]`` say)."""
    return load_all_in_child([files], timeout)[0]


def load_all_in_child(many: list[tuple], timeout: float) -> list[dict]:
    """:func:`load_in_child`'s record of each of ``many`` loaded in turn in one fresh process;
    ``growth_mb`` is the peak's growth since the first load, so it bounds each file's own.
    A child that dies or runs out of time gives that outcome to the files it did not report."""
    command = [sys.executable, "-c", CHILD, json.dumps([list(map(str, f)) for f in many])]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        lines, ended = done.stdout.strip().splitlines(), f"exit {done.returncode}"
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        lines, ended = out.strip().splitlines(), f"still running after {timeout:g} s (killed)"
    records = [json.loads(line) for line in lines]
    missing = {"outcome": ended, "growth_mb": None, "s": None}
    return records + [missing] * (len(many) - len(records))


def save_probes(folder: Path) -> list[tuple[str, str]]:
    """``save`` over a FIFO, over another user's file (root only) and into a missing folder."""
    clf = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(4,), random_state=0).fit(*_data())
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


def _table(files: dict, timeout: float, hidden: str) -> None:
    print("| file | size | load | peak RSS growth (MB) | s |")
    print("|---|---|---|---|---|")
    for name, paths in files.items():
        result = load_in_child(paths, timeout)
        growth = "" if result["growth_mb"] is None else f"{result['growth_mb']:.0f}"
        seconds = "" if result["s"] is None else f"{result['s']:.2f}"
        size = f"{Path(paths[0]).stat().st_size / 1e3:.1f} kB"
        outcome = " ".join(result["outcome"].split()).replace("|", "/").replace(hidden, "…")
        print(f"| {name} | {size} | {outcome} | {growth} | {seconds} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-gb", type=float, default=3.0, help="0 leaves the bomb out")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per load")
    parser.add_argument(
        "--families",
        default="41,48,pipelines,save",
        help="which tables, comma-separated (pipelines need ebmclassifier.save: issue #48's)",
    )
    args = parser.parse_args(argv)
    families = set(args.families.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"ebmclassifier {ebmclassifier.__version__}, torch {torch.__version__}")
        if "41" in families:
            print("\nIssue #41's files\n")
            _table(issue41_files(folder, args.bomb_gb), args.timeout, tmp)
            marker = "appeared" if (folder / "MARKER").exists() else "never appeared"
            print(f"\nThe chain's marker file {marker}.")
        if "48" in families:
            print("\nIssue #48's files\n")
            _table(issue48_files(folder), args.timeout, tmp)
        if "pipelines" in families and hasattr(ebmclassifier, "save"):
            print("\nPipelines\n")
            _table(pipeline_files(folder), args.timeout, tmp)
            for name in ("MARKER-system", "MARKER-popen"):
                state = "appeared" if (folder / name).exists() else "never appeared"
                print(f"\nThe marker of the {name[7:]} call {state}.")
        if "save" in families:
            print("\n| save | outcome |")
            print("|---|---|")
            for name, outcome in save_probes(folder):
                print(f"| {name} | {outcome.replace(tmp, '…')} |")


if __name__ == "__main__":
    main()
