"""Writing output folders all or nothing: build beside the target, then swap it into place."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replaced_dir(target: str | os.PathLike[str], *, start_from: Path | None = None, keep_old: Path | None = None) -> Iterator[Path]:
    """Yield an empty folder beside ``target``; on success it replaces ``target``.

    On any error the new folder is removed and ``target`` is left as it was. On Linux the swap
    is one ``renameat2(RENAME_EXCHANGE)``: ``target`` is the old folder or the new one at every
    instant, even under ``kill -9``. Elsewhere it is two renames, and a crash between them
    leaves the old folder at ``.<name>.old-<pid>-*`` and no ``target``: the next run puts it
    back first. Folders left beside ``target`` by killed runs (``.<name>.new-<pid>-*``, which
    hold a half-written output or, after the exchange, the old one) are removed by the next run.

    ``start_from``: a folder beside ``target`` (a *spare*) to yield instead of an empty one; it
    is moved to the staging name first, so a run killed while it is half-updated leaves it to be
    removed like any staging folder. ``keep_old``: where the replaced folder goes, instead of
    being removed (a new spare; whatever is there already is removed).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _clean_up_after_killed_runs(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-{os.getpid()}-", dir=target.parent))
    if start_from is not None:
        os.rmdir(staging)
        os.rename(start_from, staging)
    try:
        yield staging
        os.chmod(staging, 0o755)
        if not target.exists():
            os.rename(staging, target)
        elif _exchange(staging, target):
            _retire(staging, keep_old)  # it holds the old folder now
        else:
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-{os.getpid()}-", dir=target.parent))
            os.rmdir(old)
            os.rename(target, old)
            os.rename(staging, target)
            _retire(old, keep_old)
    except BaseException:
        remove_tree(staging)
        raise


def _retire(old: Path, keep: Path | None) -> None:
    """Remove the replaced folder ``old``, or keep it at ``keep``."""
    if keep is None:
        remove_tree(old)
        return
    remove_path(keep)
    os.rename(old, keep)


def remove_path(path: Path) -> None:
    """Remove a folder and everything in it, or a file or a link (not what it points at); nothing when absent."""
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink(missing_ok=True)


_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove the folder ``path`` and everything in it, as ``shutil.rmtree(path,
    ignore_errors=True)`` does (what cannot be removed stays, silently; a symbolic link inside
    is removed, never followed, and one at ``path`` is left alone), in memory that does not
    grow with a folder's size: each folder is read one entry at a time, removing as it goes,
    where ``rmtree`` lists each folder whole first (~165 bytes an entry: ~330 MB for the API's
    two million record files at a million records). Folders are opened relative to their
    parent's descriptor, as ``rmtree`` does, so a folder swapped for a link meanwhile is not
    followed."""
    if not hasattr(os, "O_DIRECTORY") or os.scandir not in os.supports_fd:
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        top = os.open(path, _FOLDER_FLAGS)
    except OSError:
        return  # nothing there, or not a folder
    try:
        _remove_contents(top)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _remove_contents(folder: int) -> None:
    """Remove everything in the open ``folder``. Entries are removed while the folder is read;
    a file system that then skips some is read again, as long as a pass removes something."""
    while True:
        removed = False
        with os.scandir(folder) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        child = os.open(entry.name, _FOLDER_FLAGS, dir_fd=folder)
                        try:
                            _remove_contents(child)
                        finally:
                            os.close(child)
                        os.rmdir(entry.name, dir_fd=folder)
                    else:
                        os.unlink(entry.name, dir_fd=folder)
                    removed = True
        if not removed:
            return


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2():
    """glibc's renameat2, or None where there is none (not Linux, an old libc, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _exchange(a: Path, b: Path) -> bool:
    """Swap the two paths atomically; False where the system or file system cannot."""
    function = _renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _clean_up_after_killed_runs(target: Path) -> None:
    """Put back a target a killed two-rename swap left at ``.old-*``; remove killed runs' folders.

    Only folders whose process is gone are touched (the pid is in the name), so two runs at
    once never remove each other's work.
    """
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(new|old)-(?P<pid>\d+)-")
    dead = [(found.group(1), entry) for found, entry in left_by_dead_processes(target.parent, pattern)]
    olds = sorted((p for kind, p in dead if kind == "old"), key=lambda p: p.stat().st_mtime)
    if olds and not target.exists():
        os.rename(olds.pop(), target)  # the newest old folder is the last complete output
    for _, path in dead:
        if path.exists():
            remove_tree(path)


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary folder named ``<prefix><pid>-…``, removed when the block ends.

    A process killed in the block (``kill -9``, a lost machine) cannot remove its folder, and
    a site build's scratch holds files for every batch of pages (1.2 GB at a million records,
    measured), so first the folders of this prefix whose process is gone are removed: only
    this user's, in a temporary folder other users share.
    """
    pattern = re.compile(rf"^{re.escape(prefix)}(?P<pid>\d+)-")
    with contextlib.suppress(OSError):
        for _, entry in left_by_dead_processes(Path(tempfile.gettempdir()), pattern):
            if entry.lstat().st_uid == os.getuid():
                remove_tree(entry)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-") as name:
        yield Path(name)


def left_by_dead_processes(folder: Path, pattern: re.Pattern[str], *, files: bool = False) -> list[tuple[re.Match[str], Path]]:
    """The entries of ``folder`` whose name ``pattern`` matches with the ``pid`` of a process
    that is gone: what a killed run left. Plain folders (never one behind a link: a caller
    removes them whole), or with ``files`` the other entries (files, and links, which a
    caller only unlinks)."""
    found = []
    for entry in folder.iterdir():
        match = pattern.match(entry.name)
        if match and (entry.is_dir() and not entry.is_symlink()) != files and not process_alive(int(match.group("pid"))):
            found.append((match, entry))
    return found


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this one included): the pid in a staging name says whose it is."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, another user's
    return True


def file_sha256(path: Path, length: int | None = None) -> str:
    """The SHA-256 of the file at ``path`` (of its first ``length`` bytes, if given), read a
    megabyte at a time."""
    digest = hashlib.sha256()
    remaining = length
    with open(path, "rb") as handle:
        while remaining != 0 and (chunk := handle.read(1 << 20 if remaining is None else min(1 << 20, remaining))):
            digest.update(chunk)
            if remaining is not None:
                remaining -= len(chunk)
    return digest.hexdigest()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 with ``\\n`` line ends, creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
