"""Which store a command uses: ``--db``, else ``$ERRORDB_DB``, else the embedded default, a
database built from the bundled records on first use and kept in the cache folder."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from errordb.errors import ErrordbError
from errordb.records.loader import bundled_records_dir
from errordb.store.database import (
    BUSY_TIMEOUT, STORE_VERSION, StoreError, _other_layout, _remove_dead_partials, _with_companions,
    cache_dir, connect, connect_read_only, ensure_schema,
)
from errordb.store.ingestion import ingest

if TYPE_CHECKING:  # pydantic and sqlite_utils cost ~100 ms each to import: reading must not need them

    import sqlite_utils



def records_fingerprint(folder: Path) -> str:
    """A digest of every record file's path, size and modification time under ``folder``."""
    from errordb import __version__
    from errordb.records.loader import record_files

    digest = hashlib.sha256(f"{__version__}:{STORE_VERSION}\n".encode())
    families = folder / "families.toml"
    for path in [*record_files([folder]), *([families] if families.exists() else [])]:
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def default_db_path() -> Path:
    """The embedded default database, built from the bundled records on first use.

    It is rebuilt when the records change and replaced atomically, so concurrent first runs
    are safe; stale copies are removed.
    """
    records = bundled_records_dir()
    folder = cache_dir()
    target = folder / f"default-{records_fingerprint(records)}.db"
    if target.exists() and _is_healthy(target):
        return target
    folder.mkdir(parents=True, exist_ok=True)
    # Ours, and the one ingest builds beside ours (``..default-….partial.<pid>.partial``).
    _remove_dead_partials(folder, re.compile(r"^\.\.?default-.*\.(?P<pid>\d+)\.partial$"))
    partial = folder / f".{target.name}.{os.getpid()}.partial"
    digest = _digest_path(target)
    partial_digest = folder / f".{digest.name}.{os.getpid()}.partial"
    partial.unlink(missing_ok=True)
    try:
        ingest([records], partial)
        # The file is replaced by a rename, never written in place, so it needs no WAL; and a
        # WAL file's -wal and -shm go by name, which a rename under open readers would mix up.
        conn = sqlite3.connect(partial)
        try:
            conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            conn.close()
        # The digest goes first: a default without its digest, or with another build's, is
        # rebuilt, never trusted.
        partial_digest.write_text(_file_sha256(partial) + "\n", encoding="ascii")
        os.replace(partial_digest, digest)
        os.replace(partial, target)
    finally:
        for leftover in [*_with_companions(partial), partial_digest]:
            leftover.unlink(missing_ok=True)
    for stale in [*folder.glob("default-*.db"), *folder.glob("default-*.db.sha256")]:
        if stale not in (target, digest):
            stale.unlink(missing_ok=True)
    return target


def _digest_path(default: Path) -> Path:
    """Where the SHA-256 of the embedded default's file is kept, beside it."""
    return default.with_name(default.name + ".sha256")


def _file_sha256(path: Path) -> str:
    # Here, not in errordb.atomic: importing that module (ctypes, shutil, tempfile) adds ~16 ms
    # to every cold explain, which checks the embedded default first.
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _is_healthy(path: Path) -> bool:
    """Whether the embedded default can be used as it is (else it is rebuilt).

    The default is never written after it is built, so its bytes must be those whose SHA-256
    was kept beside it: any damage (a bad disk, a crash of the file system) is found, also in
    a record's text, which ``PRAGMA quick_check`` does not read. The file is small (the bundled
    records only), so this costs less than a millisecond.
    """
    try:
        expected = _digest_path(path).read_text(encoding="ascii").strip()
        return expected == _file_sha256(path)
    except (OSError, UnicodeDecodeError):
        return False


def layer_dir() -> Path:
    """The folder of the learned layer (``errordb learn``), in the cache folder."""
    return cache_dir() / "learned"


def layer_db_path() -> Path:
    """The learned layer's store: the bundled records and every learned draft."""
    return layer_dir() / f"store-{STORE_VERSION}.db"


def read_layer_manifest() -> dict:
    """What the learned layer holds: ``{"bundled": fingerprint, "sources": {key: {...}}}``; {} before the first learn."""
    try:
        return json.loads((layer_dir() / "learned.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def write_layer_manifest(manifest: dict) -> None:
    """Replace the learned layer's manifest (beside, then renamed: a reader sees one or the other)."""
    partial = layer_dir() / f".learned.json.{os.getpid()}.partial"
    partial.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, layer_dir() / "learned.json")


def learned_db_path() -> Path | None:
    """The learned layer's store, when ``errordb learn`` has made one; brought up to date first
    when the bundled records changed since (an upgrade of errordb)."""
    path = layer_db_path()
    if not path.exists():
        return None
    manifest = read_layer_manifest()
    records = bundled_records_dir()
    fingerprint = records_fingerprint(records)
    if manifest.get("bundled") != fingerprint:
        try:
            ingest([records, layer_dir() / "records"], path, prune=True)
            write_layer_manifest({**manifest, "bundled": fingerprint})
        except (ErrordbError, OSError):
            return None  # cannot be brought up to date here (a read-only cache): the bundled records alone
    return path


def is_default_store(conn: sqlite3.Connection) -> bool:
    """Whether ``conn`` reads the store errordb chose itself (the embedded default, or the
    learned layer's), which ``errordb learn`` adds to, rather than one the user named."""
    files = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main" and row[2]]
    if not files:
        return False
    path = Path(files[0]).resolve()  # SQLite names the file with its symlinks resolved
    default = path.parent == cache_dir().resolve() and path.name.startswith("default-") and path.suffix == ".db"
    return default or path == layer_db_path().resolve()


def resolve_db_path(db_path: str | os.PathLike[str] | None = None, *, learned: bool = False) -> Path:
    """``db_path``, else ``$ERRORDB_DB``, else (with ``learned``) the learned layer's store once
    there is one, else the embedded default (built when needed)."""
    path = Path(db_path or os.environ.get("ERRORDB_DB") or (learned and learned_db_path()) or default_db_path())
    if not path.exists():
        raise StoreError(f"{path}: no such database; create it with `errordb ingest --db {path}`")
    return path


def open_connection(db_path: str | os.PathLike[str] | None = None, *, learned: bool = False) -> sqlite3.Connection:
    """A read-only connection to the store: the fast path for explain and show. With
    ``learned``, the default is the learned layer's store when ``errordb learn`` made one.

    Every read function here accepts it as well as a sqlite_utils Database.
    """
    path = resolve_db_path(db_path, learned=learned)
    try:
        conn = connect_read_only(path)
        row = conn.execute("SELECT value FROM meta WHERE key = 'storeVersion'").fetchone()
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_BUSY"):
            raise StoreError(f"{path}: locked by another process for {BUSY_TIMEOUT}s; try again") from None
        raise StoreError(f"{path}: not an errordb database ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not an errordb database ({exc})") from None
    if row is None or row[0] != STORE_VERSION:
        conn.close()
        raise StoreError(_other_layout(str(path), row[0] if row else None))
    return conn


def open_db(db_path: str | os.PathLike[str] | None = None) -> sqlite_utils.Database:
    """Open the store at ``db_path``, else ``$ERRORDB_DB``, else the embedded default."""
    path = resolve_db_path(db_path)
    try:
        db = connect(path)
        try:
            db.table_names()
        except sqlite3.DatabaseError:
            db.close()
            raise
    except (StoreError, sqlite3.OperationalError):
        # A file SQLite will not open for writing (a read-only folder or file, a hot journal):
        # build and export only read, so a read-only connection serves them.
        import sqlite_utils

        try:
            db = sqlite_utils.Database(connect_read_only(path))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: cannot be read as an SQLite database ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot be read as an SQLite database ({exc})") from None
    try:
        if "meta" not in db.table_names():
            raise StoreError(f"{path}: not an errordb database")
        ensure_schema(db)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreError(f"{path}: cannot be read as an SQLite database ({exc})") from None
    return db
