"""Writing a file whole or not at all: a temporary file in the same folder, then ``os.replace``.

Every file the library writes (``save``, ``DistributionalConstraint.save``, the commands'
reports, ``results.json`` and figures) goes through :func:`atomic_write`. The data go to a new
file beside the target; it is flushed and ``fsync``-ed, then renamed over the target with
``os.replace``, which POSIX and Windows make atomic within one file system; the folder is
``fsync``-ed too, so that the rename itself survives a power cut. At every moment the target is
either the old file or the new one, never a torn one: a full disk, an error while writing or a
killed process leaves the old file as it was. A failure removes the temporary file; only a
process killed between its creation and the rename (``SIGKILL``, a power cut) leaves one, named
``.<target>.<random>.tmp``, which nothing reads and a later write does not reuse.

The price: the folder needs room for the old and the new file at once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

__all__ = ["atomic_write", "write_file"]


def _fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened: Windows)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems refuse to sync a folder; the rename is done regardless
    finally:
        os.close(descriptor)


@contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "wb", encoding: str | None = None
) -> Iterator[IO]:
    """A file object whose content replaces ``path`` at once when the block ends without error.

    Parameters
    ----------
    path : str or path-like
        The target. A symbolic link is followed: its target is replaced, the link kept.
    mode : {"wb", "w"}, default="wb"
        Binary or text.
    encoding : str or None, default=None
        For ``mode="w"``; None means UTF-8.

    Yields
    ------
    file
        Open for writing, on a temporary file beside the target. An exception in the block
        (or in flushing, syncing or renaming) removes it and leaves ``path`` as it was.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w'. Got {mode!r} instead.")
    target = os.path.realpath(os.fspath(path))
    folder, name = os.path.split(target)
    temporary = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    # 0o666 as open() uses, so that the umask applies as it does to any new file; O_BINARY
    # (Windows) leaves the newlines to Python, as open() does
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    descriptor = os.open(temporary, flags, 0o666)
    try:
        text = {"encoding": encoding or "utf-8"} if mode == "w" else {}
        with os.fdopen(descriptor, mode, **text) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileNotFoundError):  # a new file keeps its default mode
            os.chmod(temporary, os.stat(target).st_mode & 0o7777)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_folder(folder)


def write_file(path: str | os.PathLike, data: str | bytes) -> None:
    """Replace ``path`` by ``data`` (UTF-8 text, or bytes) at once (:func:`atomic_write`).

    Parameters
    ----------
    path : str or path-like
    data : str or bytes

    Returns
    -------
    None
    """
    with atomic_write(path, "w" if isinstance(data, str) else "wb") as file:
        file.write(data)
