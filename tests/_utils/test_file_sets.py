"""A set of files replaced together: at every moment of the write, the old set or the new one.

A kill is simulated by copying the folder as it stands just before each rename or removal the
writer makes (what a SIGKILL at that moment leaves on the disk: nothing of the writer's
clean-up runs).
"""

import itertools
import json
import os
import shutil
from pathlib import Path

import pytest

from ebmclassifier._utils.file_sets import FileSet, staged_path

NAMES = ("a.pt", "b.pt", "history.json")


def _write(files: FileSet, folder: Path, text: str) -> None:
    for name in NAMES:
        with files.stage(folder / name, "w") as file:
            file.write(f"{text} {name}")
    files.commit()


def _read(files: FileSet) -> dict:
    return {Path(t).name: Path(s).read_text() for t, s in files.sources().items()}


def _set(folder: Path) -> FileSet:
    return FileSet(
        [folder / n for n in NAMES], anchor=folder / "a.pt", first=folder / "history.json"
    )


def _killed_at_every_step(folder: Path, snapshots: Path, monkeypatch, write) -> list[Path]:
    """Copies of ``folder`` just before each rename and removal that ``write()`` makes."""
    taken = []
    real_replace, real_unlink = os.replace, os.unlink

    def snapshot():
        taken.append(snapshots / str(len(taken)))
        shutil.copytree(folder, taken[-1])

    def replace(src, dst):
        snapshot()
        return real_replace(src, dst)

    def unlink(path):
        snapshot()
        return real_unlink(path)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    write()
    monkeypatch.undo()
    taken.append(snapshots / "after")
    shutil.copytree(folder, taken[-1])
    return taken


def test_a_committed_set_leaves_no_other_file(tmp_path):
    files = _set(tmp_path)
    _write(files, tmp_path, "one")
    _write(files, tmp_path, "two")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(NAMES)
    assert _read(files) == {name: f"two {name}" for name in NAMES}


def test_a_kill_at_any_step_leaves_the_old_set_or_the_new_one(tmp_path, monkeypatch):
    folder, snapshots = tmp_path / "files", tmp_path / "snapshots"
    folder.mkdir()
    snapshots.mkdir()
    _write(_set(folder), folder, "old")
    taken = _killed_at_every_step(
        folder, snapshots, monkeypatch, lambda: _write(_set(folder), folder, "new")
    )
    # 3 staged files, the journal, 3 renames, the journal removed
    assert len(taken) == 3 + 1 + 3 + 1 + 1
    seen = []
    for copy in taken:
        read = _read(_set(copy))
        (text,) = {value.split()[0] for value in read.values()}  # one set, never a mix
        assert read == {name: f"{text} {name}" for name in NAMES}
        # the history read directly (as a user counts epochs) is that of the set
        assert (copy / "history.json").read_text() == f"{text} history.json"
        seen.append(text)
    # the old set until the history's rename commits the new one, the new one after it
    assert seen == ["old"] * 5 + ["new"] * 4


def test_a_writer_finishes_what_a_killed_writer_left(tmp_path, monkeypatch):
    folder, snapshots = tmp_path / "files", tmp_path / "snapshots"
    folder.mkdir()
    snapshots.mkdir()
    _write(_set(folder), folder, "old")
    taken = _killed_at_every_step(
        folder, snapshots, monkeypatch, lambda: _write(_set(folder), folder, "new")
    )
    for copy in taken:
        files = _set(copy)
        expected = _read(files)
        files.finish_pending()
        assert not (copy / ".a.pt.commit").exists()
        assert {n: (copy / n).read_text() for n in NAMES} == expected
        _write(files, copy, "next")  # and the next set is written as usual
        assert _read(files) == {name: f"next {name}" for name in NAMES}


@pytest.mark.parametrize(
    "staged", [subset for n in range(len(NAMES)) for subset in itertools.combinations(NAMES, n)]
)
def test_a_set_with_any_file_not_staged_is_refused_and_changes_nothing(tmp_path, staged):
    # committing a part would replace some files and keep the others: files of two epochs
    _write(_set(tmp_path), tmp_path, "old")
    files = _set(tmp_path)
    for name in staged:
        with files.stage(tmp_path / name, "w") as file:
            file.write(f"new {name}")
    missing = sorted(str(tmp_path / n) for n in NAMES if n not in staged)
    with pytest.raises(FileNotFoundError, match="Not every file of the set was staged") as info:
        files.commit()
    assert all(name in str(info.value) for name in missing)
    assert {n: (tmp_path / n).read_text() for n in NAMES} == {n: f"old {n}" for n in NAMES}
    assert _read(files) == {n: f"old {n}" for n in NAMES}
    assert not (tmp_path / ".a.pt.commit").exists()


def test_a_set_without_a_first_file_commits_with_its_journal(tmp_path):
    files = FileSet([tmp_path / "a.pt", tmp_path / "b.pt"], anchor=tmp_path / "a.pt")
    for name in ("a.pt", "b.pt"):
        (tmp_path / name).write_text("old")
        Path(staged_path(str(tmp_path / name))).write_text("new")
    (tmp_path / ".a.pt.commit").write_text(json.dumps({"targets": ["a.pt", "b.pt"], "first": None}))
    assert set(_read(files).values()) == {"new"}


def test_a_journal_cannot_make_the_writer_touch_other_files(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    Path(staged_path(str(outside))).write_text("overwrite")
    folder = tmp_path / "run"
    folder.mkdir()
    files = FileSet([folder / "a.pt"], anchor=folder / "a.pt")
    (folder / ".a.pt.commit").write_text(json.dumps({"targets": ["../outside.txt"], "first": None}))
    files.finish_pending()
    assert outside.read_text() == "keep"
    (folder / ".a.pt.commit").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not one that this library wrote; delete it"):
        files.sources()


# ---------------------------------------------------------------- what is replaced (atomic's rules)


def test_a_target_that_is_not_a_regular_file_is_refused_before_anything_is_staged(tmp_path):
    # os.replace over the staged file would have replaced a FIFO (or, as root, a device)
    _write(_set(tmp_path), tmp_path, "old")
    os.unlink(tmp_path / "b.pt")
    os.mkfifo(tmp_path / "b.pt")
    files = _set(tmp_path)
    with pytest.raises(ValueError, match=r"b\.pt' is a named pipe \(FIFO\)"):
        with files.stage(tmp_path / "b.pt", "w") as file:
            file.write("new")
    assert Path(tmp_path / "b.pt").is_fifo() and not os.path.exists(staged_path(tmp_path / "b.pt"))


def test_a_fifo_appearing_before_the_rename_is_refused(tmp_path):
    files = _set(tmp_path)
    for name in NAMES:
        with files.stage(tmp_path / name, "w") as file:
            file.write(f"new {name}")
    os.mkfifo(tmp_path / "b.pt")
    with pytest.raises(ValueError, match=r"b\.pt' is a named pipe"):
        files.commit()
    assert Path(tmp_path / "b.pt").is_fifo()


def test_the_replaced_files_keep_their_owner_and_mode(tmp_path):
    _write(_set(tmp_path), tmp_path, "old")
    os.chmod(tmp_path / "a.pt", 0o640)
    if os.geteuid() == 0:  # as root: another user's file stays theirs
        os.chown(tmp_path / "a.pt", 1000, 1000)
    _write(_set(tmp_path), tmp_path, "new")
    status = os.stat(tmp_path / "a.pt")
    assert (tmp_path / "a.pt").read_text() == "new a.pt"
    assert status.st_mode & 0o7777 == 0o640
    if os.geteuid() == 0:
        assert (status.st_uid, status.st_gid) == (1000, 1000)


def test_a_symbolic_link_is_followed_and_kept(tmp_path):
    real, links = tmp_path / "real", tmp_path / "links"
    real.mkdir()
    links.mkdir()
    for name in NAMES:
        (real / name).write_text("old")
        (links / name).symlink_to(real / name)
    _write(_set(links), links, "new")
    for name in NAMES:
        assert (links / name).is_symlink() and (real / name).read_text() == f"new {name}"
    assert sorted(p.name for p in real.iterdir()) == sorted(NAMES)
