"""Replacing a set of files together: every reader finds the old set or the new one, whole.

:func:`~ebmclassifier._utils.atomic.atomic_write` makes one file whole or absent; a set of files
written one after the other (skorch's ``Checkpoint``: the criterion, the optimizer, the
parameters, the training state, the history) can still be caught half-way by a kill, leaving
files of two epochs. A :class:`FileSet` writes them in two phases, as a database's journal
does:

1. each new file is *staged* whole beside its target, as ``.<name>.next``
   (:func:`~ebmclassifier._utils.atomic.atomic_write`); the targets are untouched;
2. once every file of the set is staged, a *journal* naming the set's targets is written whole
   (``.<anchor>.commit``, beside the anchor, the set's training state);
3. the staged files are renamed over their targets, the *first* one (the history, which users
   read to count the epochs done) before the others: that rename commits the set;
4. the journal is removed.

A kill before (3) leaves the old set as it was (the staged files are left over, and a later
write replaces them); a kill after it leaves the journal, and the new set is made of the
staged files that remain and the targets already renamed. A reader asks :meth:`FileSet.sources`
where each file of the set is now; a writer first finishes (or drops) what a killed writer left
(:meth:`FileSet.finish_pending`). The journal names targets only, each checked against the
set's own: a journal cannot make the writer rename anything else. A set without a first file
commits when its journal is written.

Each file is replaced as :func:`~ebmclassifier._utils.atomic.atomic_write` replaces one: only
a regular file (a FIFO or a device at a target is a ``ValueError`` before anything is staged,
and again before the rename), keeping its owner and mode, a symbolic link followed (the staged
file waits beside the link's target), errors naming the target.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO

from .atomic import _fsync_folder, atomic_write, replace_staged, resolved_path

__all__ = ["FileSet", "staged_path"]

FORMAT = 1


def staged_path(target: str) -> str:
    """Where the new version of ``target`` waits until its set commits: ``.<name>.next`` beside
    the file ``target`` names (its symbolic links followed, as ``atomic_write`` follows
    them)."""
    folder, name = os.path.split(resolved_path(target))
    return os.path.join(folder, f".{name}.next")


def _absolute(path) -> str:
    return os.path.abspath(os.fspath(path))


class FileSet:
    """Files replaced together: an ``anchor`` (its journal's name), the other targets, and
    the ``first`` file whose rename commits the set (None: the journal commits it).

    Parameters
    ----------
    targets : iterable of path-like
        Every file of the set, ``anchor`` and ``first`` included.
    anchor : path-like
        The journal is ``.<anchor's name>.commit`` in the anchor's folder.
    first : path-like or None, default=None

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = tempfile.mkdtemp()
    >>> a, b = Path(folder, "a.txt"), Path(folder, "b.txt")
    >>> files = FileSet([a, b], anchor=a, first=b)
    >>> for path, text in ((a, "new a"), (b, "new b")):
    ...     with files.stage(path, "w") as file:
    ...         _ = file.write(text)
    >>> files.commit()
    >>> a.read_text(), b.read_text(), sorted(p.name for p in Path(folder).iterdir())
    ('new a', 'new b', ['a.txt', 'b.txt'])
    """

    def __init__(self, targets: Iterable, anchor, first=None) -> None:
        self.targets = sorted({_absolute(t) for t in targets})
        self.anchor = _absolute(anchor)
        self.first = None if first is None else _absolute(first)
        if self.first is not None and self.first not in self.targets:
            raise ValueError(f"The first file {first!r} is not one of the targets.")
        folder, name = os.path.split(self.anchor)
        self.journal = os.path.join(folder, f".{name}.commit")

    # ---------------------------------------------------------------- reading

    def _pending(self) -> list[str] | None:
        """The targets of this set that a committed journal names; ``[]`` for a journal of a
        set that was not committed; None without a journal."""
        try:
            with open(self.journal, encoding="utf-8") as file:
                journal = json.load(file)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"The journal {self.journal!r} of the files {self.targets!r} cannot be read "
                f"({exc}); delete it to keep the files as they are."
            ) from exc
        named = journal.get("targets") if isinstance(journal, dict) else None
        first = journal.get("first") if isinstance(journal, dict) else None
        if not isinstance(named, list) or not all(
            isinstance(t, str) for t in [*named, first or ""]
        ):
            raise ValueError(
                f"The journal {self.journal!r} is not one that this library wrote; delete it "
                "to keep the files as they are."
            )
        folder = os.path.dirname(self.journal)
        named = {os.path.normpath(os.path.join(folder, t)) for t in named}
        if first is not None and os.path.exists(staged_path(os.path.join(folder, first))):
            return []  # its first file was not renamed: the set was not committed
        return [t for t in self.targets if t in named]

    def sources(self) -> dict[str, str]:
        """Where each target's current content is: the target, or its staged file when a
        writer was killed after committing the set and before renaming that file.

        Returns
        -------
        dict of str to str
            Target (absolute path) to the path to read.
        """
        sources = {t: t for t in self.targets}
        for target in self._pending() or []:
            if os.path.exists(staged_path(target)):
                sources[target] = staged_path(target)
        return sources

    # ---------------------------------------------------------------- writing

    def finish_pending(self) -> None:
        """Finish the renames of a committed set a killed writer left, or drop an uncommitted
        one (the old files stay); then no journal is left."""
        pending = self._pending()
        if pending is None:
            return
        self._rename(pending)
        self._remove_journal()

    @contextmanager
    def stage(self, target, mode: str = "wb") -> Iterator[IO]:
        """A file whose content becomes ``target``'s when the set commits."""
        target = _absolute(target)
        if target not in self.targets:
            raise ValueError(f"{target!r} is not a file of this set: {self.targets!r}.")
        with atomic_write(staged_path(target), mode, like=target) as file:
            yield file

    def commit(self) -> None:
        """Replace every target by its staged file: the journal, the first rename (the
        commit), the other renames, the journal removed."""
        missing = [t for t in self.targets if not os.path.exists(staged_path(t))]
        if missing:
            raise FileNotFoundError(f"Not every file of the set was staged: {missing!r}.")
        folder = os.path.dirname(self.journal)
        named = [os.path.relpath(t, folder) for t in self.targets]
        first = None if self.first is None else os.path.relpath(self.first, folder)
        with atomic_write(self.journal, "w") as file:
            file.write(json.dumps({"format": FORMAT, "targets": named, "first": first}))
        self._rename(self.targets)
        self._remove_journal()

    def _rename(self, targets: list[str]) -> None:
        ordered = sorted(targets, key=lambda t: t != self.first)  # the first file first
        for target in ordered:
            if os.path.exists(staged_path(target)):  # else renamed before a kill
                replace_staged(staged_path(target), target)
        for folder in {os.path.dirname(resolved_path(t)) for t in ordered}:
            _fsync_folder(folder)

    def _remove_journal(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.journal)
        _fsync_folder(os.path.dirname(self.journal))
