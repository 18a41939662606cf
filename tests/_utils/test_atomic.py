"""Nothing lost to a failed write: every file the library writes is the old one or the new one.

A write that fails half-way (a file that raises, a sync or a rename that fails, a full disk, a
killed process) leaves the old file loading to the same predictions, and no temporary file
beside it (but for a killed process, which cannot clean up). The rename is made durable by
syncing the folder. Only a regular file is replaced (not a FIFO, a device, a folder or a socket),
keeping its owner and mode; a link another user planted in ``/tmp`` is not followed; errors name
the caller's path (issue #41).
"""

import ast
import contextlib
import errno
import itertools
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from ebmclassifier import DistributionalConstraint, NGEBMClassifier, load, saving
from ebmclassifier._utils import atomic as _atomic
from ebmclassifier._utils.atomic import atomic_write, write_file
from ebmclassifier.plotting import finish_figure

from ..estimators import params

FAST = params("ngebm")
PACKAGE = Path(__file__).resolve().parents[2] / "ebmclassifier"


@pytest.fixture(scope="module")
def two_models(small_blobs):
    """``(X, old, new)``: two estimators whose predictions differ."""
    X, y = small_blobs
    old = NGEBMClassifier(**FAST).fit(X, y)
    new = NGEBMClassifier(**{**FAST, "max_epochs": 3, "random_state": 1}).fit(X, y)
    assert not np.array_equal(old.predict_proba(X), new.predict_proba(X))
    return X, old, new


def _only(folder: Path, *names: str) -> None:
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)


class _FailingFile:
    """A file that takes ``budget`` bytes, then fails as a full disk does."""

    def __init__(self, file, budget: int):
        self._file, self._budget = file, budget

    def write(self, data) -> int:
        data = data if isinstance(data, str) else bytes(data)
        if len(data) > self._budget:
            self._file.write(data[: self._budget])
            raise OSError(errno.ENOSPC, "No space left on device (simulated)")
        self._budget -= len(data)
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


def _fail_after(monkeypatch, budget: int) -> None:
    real = os.fdopen
    monkeypatch.setattr(_atomic.os, "fdopen", lambda *a, **k: _FailingFile(real(*a, **k), budget))


def _raise_enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device (simulated)")


FAILURES = {
    "write fails half-way": lambda mp: _fail_after(mp, 1000),
    "first write fails": lambda mp: _fail_after(mp, 0),
    "fsync fails": lambda mp: mp.setattr(_atomic.os, "fsync", _raise_enospc),
    "rename fails": lambda mp: mp.setattr(_atomic.os, "replace", _raise_enospc),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failed_save_leaves_the_old_file(two_models, tmp_path, monkeypatch, failure):
    X, old, new = two_models
    path = tmp_path / "model.ebm"
    old.save(path)
    with monkeypatch.context() as patch:
        FAILURES[failure](patch)
        with pytest.raises(OSError, match="No space left") as info:
            new.save(path)
    assert info.value.filename == str(path), info.value  # a write's error named no file
    _only(tmp_path, "model.ebm")
    np.testing.assert_array_equal(load(path).predict_proba(X), old.predict_proba(X))
    new.save(path)  # and the next save goes through
    np.testing.assert_array_equal(load(path).predict_proba(X), new.predict_proba(X))
    _only(tmp_path, "model.ebm")


@pytest.mark.parametrize("failure", ["write fails half-way", "rename fails"])
def test_a_failed_constraint_save_leaves_the_old_file(two_models, tmp_path, monkeypatch, failure):
    X, old, new = two_models
    path = tmp_path / "adapted.ebm"
    adapted = DistributionalConstraint(old, priors={0: 0.2, 1: 0.3, 2: 0.5}).fit(X)
    adapted.save(path)
    other = DistributionalConstraint(new, priors={0: 0.6, 1: 0.2, 2: 0.2}).fit(X)
    with monkeypatch.context() as patch:
        FAILURES[failure](patch)
        with pytest.raises(OSError):
            other.save(path)
    _only(tmp_path, "adapted.ebm")
    np.testing.assert_array_equal(load(path).predict_proba(X), adapted.predict_proba(X))


EFBIG_CHILD = textwrap.dedent(
    """
    import errno, json, os, resource, signal, sys
    from pathlib import Path
    import numpy as np
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from ebmclassifier import NGEBMClassifier, load, save
    from ebmclassifier._utils.atomic import write_file

    folder = Path(sys.argv[1])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not the signal that kills
    X = np.random.default_rng(0).normal(size=(30, 4)).astype(np.float32)
    y = np.arange(30) % 3
    old = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(8,), random_state=0).fit(X, y)
    new = make_pipeline(StandardScaler(), NGEBMClassifier(max_epochs=1, random_state=1)).fit(X, y)
    writes = {
        "estimator": lambda path: new[-1].save(path),
        "pipeline": lambda path: save(new, path),
        "report": lambda path: write_file(path, "x" * 100_000),
    }
    for name in writes:
        save(old, folder / name)
    before = {name: (folder / name).read_bytes() for name in writes}
    limit = min(len(raw) for raw in before.values()) - 1
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    outcome = {}
    for name, write in writes.items():
        try:
            write(folder / name)
            outcome[name] = "written"
        except OSError as err:
            outcome[name] = [err.errno, err.filename, str(err)]
    intact = {name: (folder / name).read_bytes() == raw for name, raw in before.items()}
    same = np.array_equal(load(folder / "estimator").predict_proba(X), old.predict_proba(X))
    print(json.dumps({"outcome": outcome, "intact": intact, "same": bool(same),
                      "files": sorted(os.listdir(folder))}))
    """
)


@pytest.mark.slow  # a process started under a file-size limit
def test_a_save_past_a_file_size_limit_names_the_path_and_leaves_the_old_file(tmp_path):
    # a save past RLIMIT_FSIZE raised "OSError: [Errno 27] File too large" naming no path
    folder = tmp_path / "out"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", EFBIG_CHILD, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (number, filename, message) in result["outcome"].items():
        assert number == errno.EFBIG, (name, message)
        assert filename == str(folder / name) and str(folder / name) in message, message
    assert all(result["intact"].values()) and result["same"], result
    assert result["files"] == ["estimator", "pipeline", "report"]  # no temporary file left


class _RecordingFile:
    def __init__(self, fail: bool = False):
        self.writes, self.fail = [], fail

    def write(self, data) -> int:
        if self.fail:
            raise OSError(errno.EIO, "the object refuses")
        self.writes.append(bytes(data))
        return len(data)


def test_a_file_object_gets_the_whole_archive_in_one_write_or_nothing(
    two_models, tmp_path, monkeypatch
):
    X, old, _ = two_models
    target = _RecordingFile()
    old.save(target)
    assert len(target.writes) == 1
    (tmp_path / "copy.ebm").write_bytes(target.writes[0])
    np.testing.assert_array_equal(
        load(tmp_path / "copy.ebm").predict_proba(X), old.predict_proba(X)
    )
    with pytest.raises(OSError, match="refuses"):
        old.save(_RecordingFile(fail=True))
    # a save that fails before the archive is complete writes nothing at all
    target = _RecordingFile()
    with monkeypatch.context() as patch:
        patch.setattr(saving._files.torch, "save", _raise_enospc)
        with pytest.raises(OSError, match="No space left"):
            old.save(target)
    assert target.writes == []


def test_a_save_keeps_the_mode_of_the_file_it_replaces_and_follows_a_link(two_models, tmp_path):
    X, old, new = two_models
    real = tmp_path / "real.ebm"
    old.save(real)
    os.chmod(real, 0o640)
    link = tmp_path / "link.ebm"
    link.symlink_to(real)
    new.save(link)
    assert link.is_symlink() and (real.stat().st_mode & 0o777) == 0o640
    np.testing.assert_array_equal(load(real).predict_proba(X), new.predict_proba(X))
    umask = os.umask(0o022)
    try:
        old.save(tmp_path / "fresh.ebm")
    finally:
        os.umask(umask)
    assert ((tmp_path / "fresh.ebm").stat().st_mode & 0o777) == 0o644  # as open() makes it
    _only(tmp_path, "real.ebm", "link.ebm", "fresh.ebm")


def test_write_file_and_finish_figure_replace_whole_or_not_at_all(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    path = tmp_path / "report.md"
    write_file(path, "old report ✓\n")
    with monkeypatch.context() as patch:
        _fail_after(patch, 3)
        with pytest.raises(OSError):
            write_file(path, "new report, longer than three bytes")
    assert path.read_text(encoding="utf-8") == "old report ✓\n"
    figure = Figure()
    figure.add_subplot().plot([0, 1], [1, 0])
    finish_figure(figure, tmp_path / "curve.png")
    finish_figure(figure, tmp_path / "curve.svg")
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (tmp_path / "curve.svg").read_bytes()[:500]
    with monkeypatch.context() as patch:
        patch.setattr(_atomic.os, "replace", _raise_enospc)
        with pytest.raises(OSError):
            finish_figure(figure, tmp_path / "curve.svg")
    _only(tmp_path, "report.md", "curve.png", "curve.svg")
    with pytest.raises(ValueError, match="mode must be 'wb' or 'w'"):
        with atomic_write(path, "a"):
            pass


# ---------------------------------------------------------------- what is replaced (issue #41)

needs_root = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0, reason="needs Linux and root"
)


def _make(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "device":  # the null device's numbers, as the issue's /dev/null
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    else:
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))


@pytest.mark.parametrize(
    "kind, what",
    [
        ("fifo", "a named pipe"),
        ("folder", "a folder"),
        ("socket", "a socket"),
        pytest.param("device", "a character device", marks=needs_root),
    ],
)
def test_a_save_writes_only_over_a_regular_file(two_models, tmp_path, kind, what):
    # as root, save over a FIFO or a device node replaced it by a regular file
    X, old, _ = two_models
    path = tmp_path / "model.ebm"
    _make(path, kind)
    before = os.lstat(path)
    with pytest.raises(ValueError, match=f"'{path}' is {what}.*: the library writes only over"):
        old.save(path)
    after = os.lstat(path)
    assert (after.st_ino, stat.S_IFMT(after.st_mode)) == (
        before.st_ino,
        stat.S_IFMT(before.st_mode),
    )
    _only(tmp_path, "model.ebm")


def test_a_fifo_put_in_the_files_place_while_writing_is_not_replaced(tmp_path):
    # checked again just before the rename
    path = tmp_path / "report.md"
    path.write_text("old")
    with pytest.raises(ValueError, match="is a named pipe"):
        with atomic_write(path, "w") as file:
            file.write("new")
            path.unlink()
            os.mkfifo(path)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    _only(tmp_path, "report.md")


@needs_root
@pytest.mark.parametrize("mode", [0o640, 0o2750])
def test_a_save_over_another_users_file_keeps_its_owner_and_mode(two_models, tmp_path, mode):
    # it became root's, mode kept, and its owner (without write access to root's file) was
    # locked out; the set-group-ID bit survives the change of owner
    X, old, new = two_models
    path = tmp_path / "model.ebm"
    old.save(path)
    os.chown(path, 1000, 1000)
    os.chmod(path, mode)
    new.save(path)
    status = os.stat(path)
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (1000, 1000, mode)
    np.testing.assert_array_equal(load(path).predict_proba(X), new.predict_proba(X))
    _only(tmp_path, "model.ebm")


@needs_root
def test_a_link_another_user_planted_in_a_shared_folder_is_not_followed(two_models, tmp_path):
    # the path is resolved by atomic_write, not by open(), so the kernel's protected_symlinks
    # did not apply: root saving to /tmp/model.ebm replaced whatever the link pointed at
    X, old, _ = two_models
    shared, victim = tmp_path / "shared", tmp_path / "victim.ebm"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim.write_bytes(b"precious")
    link = shared / "model.ebm"
    link.symlink_to(victim)
    os.lchown(link, 1000, 1000)
    with pytest.raises(ValueError, match=r"symbolic link .* user 1000 owns in a folder that any"):
        old.save(link)
    assert victim.read_bytes() == b"precious"
    os.lchown(link, 0, 0)  # the writer's own link is followed, as any link elsewhere
    old.save(link)
    assert link.is_symlink()
    np.testing.assert_array_equal(load(victim).predict_proba(X), old.predict_proba(X))


def test_an_error_names_the_path_given_not_the_temporary_file(two_models, tmp_path, monkeypatch):
    # a save into a missing folder named the hidden .model.ebm.<hex>.tmp
    _, old, _ = two_models
    path = tmp_path / "missing" / "model.ebm"
    with pytest.raises(FileNotFoundError) as info:
        old.save(path)
    assert info.value.filename == str(path) and ".tmp" not in str(info.value)

    def refuse(source, target):
        raise OSError(errno.EACCES, "Permission denied", source, None, target)

    monkeypatch.setattr(_atomic.os, "replace", refuse)
    with pytest.raises(PermissionError) as info:
        old.save(tmp_path / "model.ebm")
    assert info.value.filename == str(tmp_path / "model.ebm") and ".tmp" not in str(info.value)
    _only(tmp_path)


def test_the_folder_is_synced_after_the_rename(tmp_path, monkeypatch):
    # the promise of the module: a power cut after the save keeps the new file
    events, real_open, real_fsync, real_replace = [], os.open, os.fsync, os.replace

    def opening(path, flags, *args, **kwargs):
        descriptor = real_open(path, flags, *args, **kwargs)
        events.append(("open", os.fspath(path), descriptor))
        return descriptor

    def syncing(descriptor):
        events.append(("fsync", descriptor))
        return real_fsync(descriptor)

    def replacing(source, target):
        events.append(("replace", os.fspath(target)))
        return real_replace(source, target)

    for name, fake in [("open", opening), ("fsync", syncing), ("replace", replacing)]:
        monkeypatch.setattr(_atomic.os, name, fake)
    write_file(tmp_path / "report.md", "new")
    renamed = events.index(("replace", str(tmp_path / "report.md")))
    opened = [
        (i, event[2])
        for i, event in enumerate(events)
        if event[0] == "open" and event[1] == str(tmp_path) and i > renamed
    ]
    assert opened, events
    assert any(events[j] == ("fsync", opened[0][1]) for j in range(opened[0][0] + 1, len(events)))


# ---------------------------------------------------------------- a real full disk


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs, where the platform lets the test mount one (Linux, as root)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs Linux and root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"the platform refused a tmpfs mount: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_save_on_a_full_disk_leaves_the_old_file(small_blobs, small_disk):
    X, y = small_blobs
    wide = dict(FAST, module__hidden_sizes=(64, 64))  # ~100 KiB files: the disk fills mid-write
    old = NGEBMClassifier(**wide).fit(X, y)
    new = NGEBMClassifier(**{**wide, "random_state": 1}).fit(X, y)
    path = small_disk / "model.ebm"
    old.save(path)
    size = path.stat().st_size
    stats = os.statvfs(small_disk)
    free = stats.f_bavail * stats.f_frsize
    filler = small_disk / "filler"
    filler.write_bytes(bytes(free - size // 2))  # room for half a model
    with pytest.raises(OSError) as info:
        new.save(path)
    assert info.value.errno == errno.ENOSPC
    _only(small_disk, "model.ebm", "filler")
    np.testing.assert_array_equal(load(path).predict_proba(X), old.predict_proba(X))
    filler.unlink()
    new.save(path)
    np.testing.assert_array_equal(load(path).predict_proba(X), new.predict_proba(X))
    _only(small_disk, "model.ebm")


# ---------------------------------------------------------------- a killed process

KILLED_WRITER = """
import sys
import numpy as np
from ebmclassifier import NGEBMClassifier
X = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
models = [NGEBMClassifier(max_epochs=1, module__hidden_sizes=(64, 64), random_state=seed)
          .fit(X, np.arange(60) % 3) for seed in (0, 1)]
print("ready", flush=True)
for i in range(10**6):
    models[i % 2].save(sys.argv[1])
"""


@pytest.mark.slow
def test_a_process_killed_while_saving_leaves_a_whole_file(tmp_path):
    path = tmp_path / "model.ebm"
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_WRITER), str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert writer.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 120
    while not path.exists() and time.monotonic() < deadline:  # the first save, on a busy machine
        time.sleep(0.01)
    time.sleep(0.3)  # then many more
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    X = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
    restored = load(path)  # whole: one of the two models, never a torn archive
    assert restored.random_state in (0, 1)
    expected = NGEBMClassifier(max_epochs=1, module__hidden_sizes=(64, 64))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the writer: a seeded fit is bitwise for a given thread count
    try:
        expected.set_params(random_state=restored.random_state).fit(X, np.arange(60) % 3)
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_array_equal(restored.predict_proba(X), expected.predict_proba(X))
    # at most the killed write's own temporary file is left, under a name nothing reads
    assert all(p.name.startswith(".model.ebm.") for p in tmp_path.iterdir() if p != path)


# ---------------------------------------------------------------- every writer


WRITES = ("write_text", "write_bytes", "savefig", "dump")


def _direct_writes(path: Path) -> list[str]:
    """Calls that write a file in place: ``open(..., "w")``, ``.write_text``, ``.savefig``,
    ``ZipFile(..., "w")``, ``json.dump``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        modes = node.args[1:2] + [k.value for k in node.keywords if k.arg == "mode"]
        writing = any(isinstance(m, ast.Constant) and "w" in str(m.value) for m in modes)
        opened = name in ("open", "ZipFile") and writing
        if opened or name in WRITES:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    return found


# In place on purpose: a pickle in a temporary folder of the memory benchmark, the kernel's
# clear_refs file, the zip archive that write_archive builds inside atomic_write, and the
# figure that finish_figure saves inside atomic_write (or into a file object it is given).
ALLOWED = {"experiments/_memory.py": 2, "saving/_archive.py": 1, "plotting.py": 2}


def test_the_library_writes_files_only_through_atomic_write():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() != "_utils/atomic.py":
            for hit in _direct_writes(path):
                found.setdefault(str(path.relative_to(PACKAGE)), []).append(hit)
    assert {k: len(v) for k, v in found.items()} == ALLOWED, found


def test_a_failed_checkpoint_write_leaves_the_previous_files(two_models, tmp_path, monkeypatch):
    X, old, new = two_models
    files = {key: tmp_path / name for key, name in [("f_params", "params.pt"),
             ("f_history", "history.json"), ("f_training_state", "training_state.pt")]}  # fmt: skip
    old.save_params(**files)
    before = {key: path.read_bytes() for key, path in files.items()}
    with monkeypatch.context() as patch:
        FAILURES["write fails half-way"](patch)
        with pytest.raises(OSError, match="No space left"):
            new.save_params(**files)
    assert {key: path.read_bytes() for key, path in files.items()} == before
    _only(tmp_path, "params.pt", "history.json", "training_state.pt")
    new.save_params(**files)
    restored = NGEBMClassifier(**FAST).fit(X[:30], np.arange(30) % 3)
    restored.load_params(**files)
    np.testing.assert_array_equal(restored.predict_proba(X), new.predict_proba(X))


# ---------------------------------------------------------------- the symlink rule (#47)
# Linux's protected_symlinks rule, which atomic_write applies itself: a link in a folder that
# is sticky and writable by all is followed only if the writer or the folder's owner owns it.
# As root, the writer and the folder's owner are one user here, so the rule is a truth table
# walked by a writer who is not root (the test's effective user set to uid A), over every
# folder mode, folder owner and link owner.

A, B = 61_001, 61_002  # two users without a name: setuid needs none


@contextlib.contextmanager
def _effective_user(uid: int, groups: tuple[int, ...] = ()):
    """Run the block as the user ``uid`` (its group, and ``groups`` besides), in this process:
    the kernel checks files against the effective ids, and mutmut sees the calls (a forked
    child's it cannot). Root's ids and groups come back after the block, whatever it raised."""
    before = os.getgroups()
    os.setgroups(list(groups))
    os.setegid(uid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(before)


def _write_as(uid: int, links: list[str]) -> dict[str, str]:
    """``{link: outcome}`` of ``write_file(link, "new")`` written as ``uid``: "followed",
    "refused" (the rule), or another error."""
    outcome = {}
    with _effective_user(uid):
        for link in links:
            try:
                write_file(link, "new")
                outcome[link] = "followed"
            except ValueError as err:
                rule = "protected_symlinks" in str(err)
                outcome[link] = "refused" if rule else repr(err)
            except OSError as err:
                outcome[link] = repr(err)
    return outcome


@needs_root
def test_a_writer_who_is_not_root_follows_links_by_the_protected_symlinks_rule():
    root = Path(tempfile.mkdtemp(prefix="symlinks-"))  # pytest's tmp_path is root's alone
    try:
        os.chmod(root, 0o755)
        home = root / "home"  # the writer's own folder, where the links lead
        home.mkdir()
        os.chown(home, A, A)
        expected = {}
        for mode, folder_owner, link_owner in itertools.product(
            (0o1777, 0o0777, 0o1775), (0, A, B), (0, A, B)
        ):
            name = f"{mode:o}-{folder_owner}-{link_owner}"
            folder = root / name
            folder.mkdir()
            os.chown(folder, folder_owner, folder_owner)
            os.chmod(folder, mode)
            victim = home / f"{name}.txt"
            victim.write_text("precious")
            os.chown(victim, A, A)
            link = folder / "report.txt"
            link.symlink_to(victim)
            os.lchown(link, link_owner, link_owner)
            shared = mode & 0o1002 == 0o1002  # sticky and writable by others
            followed = not shared or link_owner in (A, folder_owner)
            expected[str(link)] = "followed" if followed else "refused"
        assert _write_as(A, list(expected)) == expected
        for link, result in expected.items():
            content = Path(link).resolve().read_text()
            assert content == ("new" if result == "followed" else "precious"), link
    finally:
        shutil.rmtree(root)


@needs_root
@pytest.mark.parametrize("writer", [0, A])
def test_a_replaced_file_keeps_its_owner_and_group_where_the_writer_may_give_them(writer):
    # the writer's own ids, another user's, a group the writer is in (G) or not (H); the
    # set-group-ID bit, which a change of owner clears, survives with the mode
    G, H = 61_003, 61_004
    root = Path(tempfile.mkdtemp(prefix="owners-"))
    try:
        os.chmod(root, 0o755)
        os.chown(root, writer, writer)
        expected = {}
        for uid, gid in itertools.product((writer, B), (writer, G, H)):
            path = root / f"{uid}-{gid}.txt"
            path.write_text("old")
            os.chown(path, uid, gid)
            os.chmod(path, 0o2664)
            # root gives the file to anyone; a user keeps the group if it is one of theirs
            if writer == 0:
                expected[path] = (uid, gid)
            else:
                expected[path] = (writer, gid if gid in (writer, G) else writer)
        with _effective_user(writer, groups=(G,)) if writer else contextlib.nullcontext():
            for path in expected:
                write_file(path, "new")
        for path, owner in expected.items():
            status = os.stat(path)
            assert (status.st_uid, status.st_gid) == owner, path
            assert stat.S_IMODE(status.st_mode) == 0o2664 and path.read_text() == "new", path
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("names", ["both", "staged", "target", "none"])
def test_a_failed_rename_of_a_staged_file_names_the_path_given(
    tmp_path, monkeypatch, names, linked
):
    # the rename's error names the staged file, the target (a link's target when the path
    # given is a link), both or neither (a disk's EIO): the error names the path given
    path = tmp_path / "model.ebm"
    target = tmp_path / "real" / "model.ebm" if linked else path
    target.parent.mkdir(exist_ok=True)
    target.write_text("old")
    if linked:
        path.symlink_to(target)
    staged = target.parent / ".model.ebm.next"
    staged.write_text("new")
    named = {"both": (str(staged), None, str(target)), "staged": (str(staged),)}
    named.update(target=(str(target),), none=())

    def refuse(source, destination):
        raise OSError(errno.EACCES, "Permission denied", *named[names])

    monkeypatch.setattr(_atomic.os, "replace", refuse)
    with pytest.raises(PermissionError) as info:
        _atomic.replace_staged(str(staged), path)
    assert info.value.filename == str(path) and info.value.filename2 is None
    assert staged.read_text() == "new" and target.read_text() == "old"


@pytest.mark.parametrize(
    "data", ["text ✓\nline 2", "", b"\xff\x00bytes\r\n that are not UTF-8", b""]
)
def test_write_file_writes_bytes_as_given_and_text_as_utf8(tmp_path, data):
    path = tmp_path / "out"
    write_file(path, data)
    assert path.read_bytes() == (data.encode("utf-8") if isinstance(data, str) else data)


@pytest.mark.parametrize(
    "target", ["real.ebm", "./real.ebm", "../data/real.ebm", "sub/../real.ebm", "sub/hop"]
)
def test_a_relative_link_is_followed_from_its_own_folder(tmp_path, target):
    # a link's target is read from the link's folder, ".." lexically (no link in between),
    # a link met inside a target followed in turn; the links stay links
    (tmp_path / "data").mkdir()
    (tmp_path / "models" / "sub").mkdir(parents=True)
    real = (tmp_path / "models" / "real.ebm").resolve()
    if target.startswith("../"):
        real = (tmp_path / "data" / "real.ebm").resolve()
    real.write_text("old")
    (tmp_path / "models" / "sub" / "hop").symlink_to("../real.ebm")
    link = tmp_path / "models" / "model.ebm"
    link.symlink_to(target)
    write_file(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert _atomic.resolved_path(link) == str(real)


@pytest.mark.parametrize("chain", [1, 39, 40, 41])
def test_links_are_followed_up_to_the_kernels_limit_of_40(tmp_path, chain):
    # Linux follows at most 40 links in a path (ELOOP after): so does atomic_write, naming
    # the path given
    real = tmp_path / "real.txt"
    real.write_text("old")
    previous = real
    for i in range(chain):
        link = tmp_path / f"link{i}"
        link.symlink_to(previous.name)
        previous = link
    if chain <= 40:
        write_file(previous, "new")
        assert real.read_text() == "new"
        return
    with pytest.raises(OSError) as info:
        write_file(previous, "new")
    assert (info.value.errno, info.value.filename) == (errno.ELOOP, str(previous))
    assert info.value.strerror == os.strerror(errno.ELOOP) and real.read_text() == "old"


@needs_root
@pytest.mark.parametrize("through", ["path", "link target"])
def test_a_planted_link_is_refused_wherever_the_path_meets_it(tmp_path, through):
    # another user's link to a folder, in a sticky folder anyone may write to: refused when
    # the path given passes through it, and when a link's target does; the error names the
    # path given
    shared, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    shared.mkdir()
    elsewhere.mkdir()
    os.chmod(shared, 0o1777)
    (elsewhere / "victim.txt").write_text("precious")
    planted = shared / "planted"
    planted.symlink_to(elsewhere)
    os.lchown(planted, B, B)
    path = planted / "victim.txt"
    if through == "link target":
        path = tmp_path / "model.txt"
        path.symlink_to(planted / "victim.txt")
    with pytest.raises(ValueError, match="protected_symlinks") as info:
        write_file(path, "new")
    assert str(info.value).startswith(
        f"{str(path)!r} leads through the symbolic link {str(planted)!r}"
    )
    assert (elsewhere / "victim.txt").read_text() == "precious"
