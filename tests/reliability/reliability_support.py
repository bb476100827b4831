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


#: Characters that are not drawn but change how text is drawn ("Trojan Source"): the bidi
#: embeddings, overrides, isolates and marks, and the invisible characters that hide or split
#: text. Terminal and Markdown output show each as <U+XXXX>; none may reach them as it is.
INVISIBLE = {
    "LRE": "\u202a", "RLE": "\u202b", "PDF": "\u202c", "LRO": "\u202d", "RLO": "\u202e",
    "LRI": "\u2066", "RLI": "\u2067", "FSI": "\u2068", "PDI": "\u2069",
    "LRM": "\u200e", "RLM": "\u200f", "ALM": "\u061c",
    "zero-width space": "\u200b", "word joiner": "\u2060", "BOM": "\ufeff", "soft hyphen": "\u00ad",
    "tag A": "\U000e0041", "line separator": "\u2028", "paragraph separator": "\u2029",
}  # fmt: skip
# The Trojan Source paper's example, in Python: it reads as a comment after the comparison, but
# the comparison really is with the whole string up to the last quote.
TROJAN_LINE = 'if access_level != "user\u202e \u2066# Check if admin\u2069 \u2066":'


def invisible_in(text: str) -> list[str]:
    """The names of the INVISIBLE characters in ``text``."""
    return [name for name, char in INVISIBLE.items() if char in text]
