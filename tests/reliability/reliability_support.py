"""Helpers of the reliability suite: running errordb, and fingerprints of files and folders."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from errordb.cli import cli

#: Files SQLite keeps beside a database while it is open or after a crash.
COMPANIONS = ("-journal", "-wal", "-shm")


def run_cli(*args: str):
    """errordb in this process (fast): a click Result with exit_code, stdout and stderr."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def run_process(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """errordb as a real process (python -m errordb, so PYTHONPATH picks the code under test)."""
    return subprocess.run([sys.executable, "-m", "errordb", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)  # fmt: skip


def popen(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "errordb", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, **kwargs)  # fmt: skip


def assert_one_line_error(stderr: str, exit_code: int, *needles: str, code: int = 2) -> str:
    """The error is exit status ``code`` and exactly one line ``errordb: ...`` holding ``needles``."""
    assert exit_code == code, (exit_code, stderr)
    assert stderr.startswith("errordb: ") and stderr.count("\n") == 1 and stderr.endswith("\n"), repr(stderr)
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)
    return stderr


def file_bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def db_files(path: Path) -> dict[str, bytes | None]:
    """A database file's bytes and those of its journal files (None: absent)."""
    return {path.name + suffix: file_bytes(path.with_name(path.name + suffix)) for suffix in ("", *COMPANIONS)}


def tree_digest(folder: Path) -> str | None:
    """One hash of every file's relative path and bytes under ``folder`` (None: no folder)."""
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def db_state(path: Path) -> tuple[str, str | None, str | None]:
    """``PRAGMA integrity_check`` and the meta table's record count and content hash.

    Opened read-write on purpose: a writer rolls a hot journal back, as the next errordb
    command to write would.
    """
    conn = sqlite3.connect(path)
    try:
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        return check, meta.get("recordCount"), meta.get("contentHash")
    finally:
        conn.close()
