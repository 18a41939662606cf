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

What is replaced:

- only a regular file, or nothing: a folder, a named pipe (FIFO), a device or a socket at the
  path is a ``ValueError`` before anything is written (renaming over ``/dev/null`` as root would
  replace the device by a file); the check is made again just before the rename;
- the replaced file keeps its permission bits, and its owner and group where the system allows
  it (as root, a file of another user stays that user's; a user who may not give the file away
  becomes its owner, as with any file they write);
- a symbolic link is followed: its target is replaced and the link kept, as an editor does. But
  a link in a folder that is sticky and writable by all (``/tmp``) is followed only if it is
  the writer's or the folder owner's, which is the rule of Linux's ``fs.protected_symlinks``:
  the path is resolved here rather than by ``open``, so that rule would otherwise not apply, and
  a link another user planted in ``/tmp`` would send a root's file anywhere.

An error names the path the caller gave, not the temporary file; a write that fails without
naming a file (a full disk, a file-size limit) names it too.

The price: the folder needs room for the old and the new file at once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

__all__ = ["atomic_write", "replace_staged", "resolved_path", "write_file"]

#: What a path that is not a regular file is, for the message that refuses it.
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
#: The most symbolic links a path may lead through (Linux's own limit).
_MAX_LINKS = 40


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


def _check_link(link: str, shown: str) -> None:
    """Refuse the link ``link`` that Linux's ``fs.protected_symlinks`` would not follow: in a
    sticky folder writable by all, owned by neither the writer nor the folder's owner."""
    folder = os.lstat(os.path.dirname(link))
    owner = os.lstat(link).st_uid
    shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    if shared and owner not in (os.geteuid(), folder.st_uid):
        raise ValueError(
            f"{shown!r} leads through the symbolic link {link!r}, which user {owner} owns in a "
            "folder that anyone may write to (sticky, as /tmp): it is not followed, as the "
            "kernel's protected_symlinks rule would not follow it. Remove the link, or write "
            "to another path."
        )


def _resolve(shown: str) -> str:
    """The file that the path ``shown`` names, its symbolic links followed one by one, each
    checked by :func:`_check_link` (``os.path.realpath`` where there are no owners: Windows)."""
    if os.name != "posix":
        return os.path.realpath(shown)
    resolved, rest, links = "/", os.path.abspath(shown).split("/")[::-1], 0
    while rest:
        part = rest.pop()
        if part in ("", "."):
            continue
        if part == "..":
            resolved = os.path.dirname(resolved)  # a folder without links: lexically right
            continue
        candidate = os.path.join(resolved, part)
        if not os.path.islink(candidate):
            resolved = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), shown)
        _check_link(candidate, shown)
        target = os.readlink(candidate)
        resolved = "/" if os.path.isabs(target) else resolved
        rest.extend(target.split("/")[::-1])
    return resolved


def _existing(target: str, shown: str) -> os.stat_result | None:
    """The status of the regular file at ``target``, None if there is none; any other kind of
    file there is a ``ValueError``."""
    try:
        status = os.stat(target)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(status.st_mode):
        kind = _KINDS.get(stat.S_IFMT(status.st_mode), "not a regular file")
        raise ValueError(
            f"{shown!r} is {kind}: the library writes only over regular files (or where there "
            "is no file). Choose another path."
        )
    return status


def _keep_owner_and_mode(descriptor: int, existing: os.stat_result) -> None:
    """Give the new file (open as ``descriptor``) the replaced file's owner and group where the
    system allows it (root, or a group of the writer's), then its permission bits (changing
    the owner clears the set-user-ID bit, so the mode comes second)."""
    if hasattr(os, "fchown"):
        mine = os.fstat(descriptor)
        uid = existing.st_uid if existing.st_uid != mine.st_uid else -1
        gid = existing.st_gid if existing.st_gid != mine.st_gid else -1
        for owner in ((uid, gid), (-1, gid)):
            if owner != (-1, -1):
                try:
                    os.fchown(descriptor, *owner)
                    break
                except OSError:  # not allowed (EPERM), or a file system without owners
                    continue
    os.chmod(descriptor, existing.st_mode & 0o7777)


def _named(err: OSError, temporary: str, target: str, shown: str) -> OSError:
    """``err`` naming the caller's path where it named the temporary file (or the target it
    resolved to) or no file (a write, flush or sync that failed: a full disk, ``EFBIG`` past a
    file-size limit), of the same class (``OSError(errno, ...)`` picks it)."""
    named = {err.filename, err.filename2} - {None}
    if err.errno is None or (named and not named & {temporary, target}):
        return err
    return OSError(err.errno, err.strerror, shown)


def resolved_path(path: str | os.PathLike) -> str:
    """The file that ``path`` names, its symbolic links followed as :func:`atomic_write`
    follows them (a link another user planted in a sticky folder anyone may write to is a
    ``ValueError``)."""
    return _resolve(os.fspath(path))


def replace_staged(staged: str, path: str | os.PathLike) -> None:
    """Rename the file ``staged`` (written whole beside ``path``'s resolved target, e.g. by
    ``atomic_write(staged, like=path)``) over that target, which must still be a regular file
    or none; an error names ``path``. The caller syncs the folder."""
    shown = os.fspath(path)
    target = _resolve(shown)
    _existing(target, shown)
    try:
        os.replace(staged, target)
    except OSError as err:
        raise _named(err, staged, target, shown) from None


@contextmanager
def atomic_write(
    path: str | os.PathLike,
    mode: str = "wb",
    encoding: str | None = None,
    *,
    like: str | os.PathLike | None = None,
) -> Iterator[IO]:
    """A file object whose content replaces ``path`` at once when the block ends without error.

    Parameters
    ----------
    path : str or path-like
        The target: a regular file, or no file (the module's notes). A symbolic link is
        followed: its target is replaced, the link kept.
    mode : {"wb", "w"}, default="wb"
        Binary or text.
    encoding : str or None, default=None
        For ``mode="w"``; None means UTF-8.
    like : str, path-like or None, default=None
        For a file staged to replace another later (:func:`replace_staged`): the file it will
        replace, which must be a regular file or none, whose owner and mode it takes, and which
        errors name. None: ``path`` itself.

    Yields
    ------
    file
        Open for writing, on a temporary file beside the target. An exception in the block
        (or in flushing, syncing or renaming) removes it and leaves ``path`` as it was.

    Raises
    ------
    ValueError
        Before writing, for a path to a folder, a named pipe, a device or a socket, or through
        a symbolic link another user planted in a folder anyone may write to.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w'. Got {mode!r} instead.")
    shown = os.fspath(path if like is None else like)
    target = _resolve(os.fspath(path))
    existing = _existing(target, shown)
    if like is not None:  # the owner and mode of the file it will replace
        existing = _existing(_resolve(shown), shown)
    folder, name = os.path.split(target)
    temporary = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    # 0o666 as open() uses, so that the umask applies as it does to any new file; O_BINARY
    # (Windows) leaves the newlines to Python, as open() does
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(temporary, flags, 0o666)
    except OSError as err:
        raise _named(err, temporary, target, shown) from None  # a missing folder, say
    try:
        text = {"encoding": encoding or "utf-8"} if mode == "w" else {}
        with os.fdopen(descriptor, mode, **text) as file:
            yield file
            file.flush()
            if existing is not None and os.chmod in os.supports_fd:
                _keep_owner_and_mode(file.fileno(), existing)
            os.fsync(file.fileno())
        if existing is not None and os.chmod not in os.supports_fd:  # Windows: the mode only
            os.chmod(temporary, existing.st_mode & 0o7777)
        _existing(target, shown)  # still no folder, pipe or device where the file goes
        os.replace(temporary, target)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(err, OSError) and _named(err, temporary, target, shown) is not err:
            raise _named(err, temporary, target, shown) from None
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
