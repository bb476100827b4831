"""Writing output folders all or nothing: build beside the target, then swap it into place."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from errordb.errors import ErrordbError


@contextlib.contextmanager
def replaced_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty folder beside ``target``; on success it replaces ``target``.

    On any error the new folder is removed and ``target`` is left as it was. On Linux the swap
    is one ``renameat2(RENAME_EXCHANGE)``: ``target`` is the old folder or the new one at every
    instant, even under ``kill -9``. Elsewhere it is two renames, and a crash between them
    leaves the old folder at ``.<name>.old-<pid>-*`` and no ``target``: the next run puts it
    back first. Folders left beside ``target`` by killed runs (``.<name>.new-<pid>-*``) are
    removed by the next run.
    """
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _clean_up_after_killed_runs(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-{os.getpid()}-", dir=target.parent))
    except OSError as exc:  # said of the folder asked for, not of the staging folder beside it
        if exc.errno in (errno.EEXIST, errno.ENOTDIR) and exc.filename and not Path(exc.filename).is_dir():
            raise ErrordbError(f"{exc.filename}: is a file, not a folder; nothing was changed") from exc
        raise ErrordbError(f"{target}: cannot be written there ({exc.strerror or exc}); nothing was changed") from exc
    try:
        yield staging
        os.chmod(staging, 0o755)
        if not target.exists():
            os.rename(staging, target)
        elif _exchange(staging, target):
            shutil.rmtree(staging, ignore_errors=True)  # it holds the old folder now
        else:
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-{os.getpid()}-", dir=target.parent))
            os.rmdir(old)
            os.rename(target, old)
            os.rename(staging, target)
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise _said_of(target, staging, exc) from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


#: Errors of writing the output itself: said of the folder the user asked for.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def _said_of(target: Path, staging: Path, exc: OSError) -> OSError | ErrordbError:
    """``exc`` said of ``target`` when it is about writing the output (a full disk, a file in
    the staging folder), not of the staging folder beside it, which is gone: ``site: No space
    left on device (writing errors/x/index.html); site is as it was``. Other errors as they are."""
    inside = None
    if exc.filename:
        with contextlib.suppress(ValueError):
            inside = Path(exc.filename).relative_to(staging)
    if exc.errno not in _OUTPUT_ERRNOS and inside is None:
        return exc
    where = f" (writing {inside.as_posix()})" if inside is not None and inside.parts else ""
    return ErrordbError(f"{target}: {exc.strerror or exc}{where}; {target} is as it was")


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2():
    """glibc's renameat2 (Python has no binding), or None where there is none (not Linux, musl)."""
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
            shutil.rmtree(path, ignore_errors=True)


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


def write_text(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 with ``\\n`` line ends, creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
