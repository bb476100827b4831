"""The store's file: its tables, opening it to read or to write, and its errors.

Tables (all browsable with Datasette):

- ``records``: one row per record, the record's scalar fields plus ``datasetVersion``,
  ``contentHash`` (of the record file's canonical JSON), ``function`` (the function that
  encloses ``lineNumber`` in the snippet, found by reading the snippet, never by running it),
  ``matchKey`` (a word every message matching the pattern contains: explain looks candidates
  up by it instead of trying every pattern) and ``textHash`` (of the text the record was read
  from: the next ingest does not validate that text again);
- ``repos``; ``families`` (the ``backgroundTag`` explanations);
- ``solutions`` and ``prevention_tips``: ordered child rows;
- ``tags`` and ``record_tags`` (many-to-many, ordered);
- ``terms``: how many records' patterns hold each word (explain's index word is the rarest);
- ``meta``: dataset version, record count and content hash of the whole store;
- full-text search: ``records_fts`` (message, documentation, trigger, situations) and
  ``solutions_fts``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from errordb.errors import ErrordbError

if TYPE_CHECKING:  # pydantic and sqlite_utils cost ~100 ms each to import: reading must not need them

    import sqlite_utils



#: The record's fields in file order, and which of them are lists (as in errordb.records.schema).
LIST_FIELDS = ("solutions", "preventionTips", "tags")


SCALAR_FIELDS = (
    "id", "repo", "distribution", "distributionVersion", "slug", "errorCode", "errorMessage", "messagePattern", "errorType", "errorClass",
    "httpStatus", "severity", "filePath", "lineNumber", "functionName", "sourceCode", "sourceCodeStart", "sourceCodeEnd",
    "githubUrl", "documentation", "triggerScenarios", "commonSituations", "exampleFix", "handlingStrategy",
    "validationCode", "typeGuard", "tryCatchPattern", "backgroundTag", "analyzedSha", "analyzedAt", "schemaVersion",
)  # fmt: skip


#: Bumped whenever the table layout changes; a database of another layout is refused.
STORE_VERSION = "7"


#: The ``records`` table's columns and types: the record's scalar fields, then the derived ones.
_INTEGER_FIELDS = ("httpStatus", "lineNumber", "sourceCodeStart", "sourceCodeEnd", "schemaVersion")
RECORD_COLUMNS: dict[str, type] = {
    **{name: int if name in _INTEGER_FIELDS else str for name in SCALAR_FIELDS},
    **dict.fromkeys(("datasetVersion", "contentHash", "function", "matchKey", "textHash"), str),
}


#: What full-text search reads of a record (the class last: ``errordb search ValueError`` finds
#: every record that raises one).
FTS_RECORD_COLUMNS = ["errorMessage", "documentation", "triggerScenarios", "commonSituations", "errorClass"]


#: The full-text tokenizer (Porter stemming over unicode61).
FTS_TOKENIZER = "porter"


CHILD_TABLES = {"solutions": "solutions", "prevention_tips": "preventionTips"}


class StoreError(ErrordbError):
    """A database that cannot be used as an errordb store."""


#: Seconds a connection waits for another one's lock (an ingest waits for another ingest).
BUSY_TIMEOUT = 30


def connect(path: str | os.PathLike[str]) -> sqlite_utils.Database:
    """Open a store file for writing (created if missing) with the pragmas errordb relies on.

    A file this creates is in WAL mode: readers keep reading the last committed data while an
    ingest writes (docs/reliability.md). An existing file keeps its journal mode: switching it
    rewrites the file's header even when the ingest then fails. ``db.atomic()`` begins with
    ``BEGIN IMMEDIATE``, so a second ingest waits up to :data:`BUSY_TIMEOUT` seconds for the
    first; SQLite's errors about the disk become one-line :class:`StoreError` naming the file.
    """
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    return _open(path, [f"PRAGMA page_size = {STORE_PAGE_SIZE}", "PRAGMA journal_mode = WAL"] if new else [])


#: Page size of a store errordb creates (SQLite's default is 4 KiB). A record's row is ~3-5 KB:
#: a 4 KiB page holds one and leaves the rest empty, 8 KiB pages hold two, and the store is a
#: quarter smaller (40 MB instead of 54 MB at 10,000 generated records). Either is read.
STORE_PAGE_SIZE = 8192


def _open(path: str | os.PathLike[str], pragmas: list[str], name: str | os.PathLike[str] | None = None) -> sqlite_utils.Database:
    """A writing connection to ``path`` with ``pragmas``; its errors name the store ``name`` if given."""
    name = name or path
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT)
    except sqlite3.OperationalError as exc:
        raise _write_error(name, exc) from None
    db = _store_class()(conn)
    if name != path:
        db.name_for_errors = str(name)
    try:
        for pragma in ["PRAGMA foreign_keys = ON", *pragmas]:
            db.execute(pragma)
        _read_schema(conn)
    except sqlite3.OperationalError as exc:
        conn.close()
        raise _write_error(name, exc) from None
    except sqlite3.DatabaseError:
        conn.close()
        raise
    return db


def _read_schema(conn: sqlite3.Connection) -> None:
    """Make SQLite read the file's schema now, as the first statement does anyway.

    A damaged byte in the schema's text makes SQLite's error message invalid UTF-8, which
    Python's sqlite3 raises as UnicodeDecodeError; it is raised here as the DatabaseError it is,
    so that callers report a damaged file rather than fail.
    """
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except UnicodeDecodeError:
        raise sqlite3.DatabaseError("malformed database schema: its text could not be decoded as UTF-8") from None


@functools.cache
def _store_class() -> type[sqlite_utils.Database]:
    import sqlite_utils  # ~100 ms (it probes for numpy): only for writing and browsing

    class Store(sqlite_utils.Database):
        """A sqlite_utils Database whose outermost transaction is ``BEGIN IMMEDIATE``."""

        #: The store's path as errors name it (a new store is built under another name).
        name_for_errors: str | None = None

        @contextlib.contextmanager
        def atomic(self) -> Iterator[Store]:
            if self.conn.in_transaction:  # nested: sqlite-utils' savepoints
                with super().atomic():
                    yield self
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise _write_error(_db_name(self), exc) from None
            try:
                yield self
                self.conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):  # a damaged file can refuse even that
                    self.conn.rollback()
                error = _write_error(_db_name(self), exc) if isinstance(exc, sqlite3.DatabaseError) else exc
                if error is exc:
                    raise
                raise error from None

    return Store


def _write_error(path: str | os.PathLike[str], exc: sqlite3.Error) -> Exception:
    """The one-line error for an SQLite failure to write ``path`` (``exc`` itself if it is a bug)."""
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_FULL":
        # SQLite sorts and journals large statements in its temporary folder: that disk can be the full one.
        return StoreError(
            f"{path}: the disk is full (the database's, or that of SQLite's temporary files: $SQLITE_TMPDIR, "
            "else $TMPDIR or /var/tmp); nothing was written, the database is as it was"
        )
    if name.startswith("SQLITE_READONLY"):
        return StoreError(f"{path}: cannot write: the file or its folder is read-only")
    if name.startswith("SQLITE_CANTOPEN"):
        folder = Path(path).absolute().parent
        if not folder.is_dir():
            return StoreError(f"{path}: cannot create the database: no folder {folder}")
        # A WAL database in a read-only folder: SQLite cannot create the -wal and -shm files.
        if not os.access(folder, os.W_OK):
            return StoreError(f"{path}: cannot write: its folder is read-only")
        return StoreError(f"{path}: cannot open for writing ({exc})")
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return unreadable(path, exc)
    if name.startswith("SQLITE_BUSY"):
        return StoreError(f"{path}: another process kept the database locked for {BUSY_TIMEOUT}s; try again when it has finished")
    if name.startswith("SQLITE_IOERR"):
        return StoreError(f"{path}: input/output error while writing ({exc}); the database is as it was")
    return exc


def unreadable(path: str | os.PathLike[str] | None, exc: sqlite3.Error) -> StoreError:
    """One line for an SQLite error met while reading a store (a damaged file, usually).

    SQLite's message can quote the damaged text itself ("Could not decode to UTF-8 column ...
    with text ..."): it is cut short and its control characters are escaped.
    """
    from errordb.text import printable

    text = printable(str(exc))
    text = text if len(text) <= 160 else text[:160] + "…"
    if getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "decode" in str(exc):
        return StoreError(f"{path or 'the database'}: the database file is damaged ({text}); ingest the records into a new file")
    return StoreError(f"{path or 'the database'}: cannot be read ({text})")


def damage_found(path: str | os.PathLike[str] | None) -> str | None:
    """What SQLite's ``quick_check`` finds wrong with the store at ``path`` (None: nothing).

    Damage does not always make SQLite fail: a flipped byte can turn a text into a blob, which
    the code reading it then trips over. A command that failed unexpectedly asks this first.
    """
    if path is None or not Path(path).is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)) as conn:
            rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    if rows == [("ok",)]:
        return None
    # The first problem, without the "*** in database main ***" heading of attached databases.
    return next((line for line in str(rows[0][0]).splitlines() if not line.startswith("***")), "damaged")


def ensure_schema(db: sqlite_utils.Database) -> None:
    """Create errordb's tables, indexes and full-text search in an empty database; refuse a
    database of another layout or of another kind."""
    if "meta" in db.table_names():
        version = db.execute("SELECT value FROM meta WHERE key = 'storeVersion'").fetchone()
        if version is None or version[0] != STORE_VERSION:
            raise StoreError(_other_layout(_db_name(db), version[0] if version else None))
        return
    if db.table_names():
        raise StoreError(f"{_db_name(db)}: not an errordb database (it has other tables)")
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["repos"].create({"id": str, "owner": str, "name": str, "url": str}, pk="id")
    db["families"].create({"tag": str, "title": str, "summary": str, "explanation": str}, pk="tag")
    db["records"].create(
        RECORD_COLUMNS,
        pk="id",
        not_null={"slug", "errorMessage", "messagePattern", "errorClass", "filePath", "lineNumber"},
        foreign_keys=[("repo", "repos", "id"), ("backgroundTag", "families", "tag")],
    )
    db["records"].create_index(["slug"], unique=True)
    # datasetVersion: meta's is the newest one, found through the index instead of reading every row.
    for column in ("errorClass", "filePath", "function", "matchKey", "messagePattern", "errorMessage", "datasetVersion"):
        db["records"].create_index([column])
    # A repository's records in the order its listing shows them, a file's records by id (related
    # errors), and a family's records in id order (related errors read them around a record).
    db["records"].create_index(["repo", "filePath", "lineNumber", "id"])
    db["records"].create_index(["backgroundTag", "id"])
    for table in CHILD_TABLES:
        db[table].create(
            {"record_id": str, "position": int, "text": str},
            pk=("record_id", "position"),
            foreign_keys=[("record_id", "records", "id")],
        )
    db["terms"].create({"term": str, "df": int}, pk="term")
    db["tags"].create({"name": str}, pk="name")
    db["record_tags"].create(
        {"record_id": str, "position": int, "tag": str},
        pk=("record_id", "position"),
        foreign_keys=[("record_id", "records", "id"), ("tag", "tags", "name")],
    )
    # (tag, record_id): a tag's records in id order, as related errors read them around a record.
    db["record_tags"].create_index(["tag", "record_id"])
    db["records"].enable_fts(FTS_RECORD_COLUMNS, create_triggers=True, tokenize=FTS_TOKENIZER)
    db["solutions"].enable_fts(["text"], create_triggers=True, tokenize=FTS_TOKENIZER)
    db["meta"].insert({"key": "storeVersion", "value": STORE_VERSION})


def _other_layout(name: str, version: str | None) -> str:
    return f"{name}: built by another errordb version (store layout {version or '?'}, this errordb writes {STORE_VERSION}); ingest into a new file"


def _db_name(db: sqlite_utils.Database) -> str:
    if name := getattr(db, "name_for_errors", None):
        return name
    row = db.execute("PRAGMA database_list").fetchone()
    return row[2] or ":memory:"


def cache_dir() -> Path:
    """Where errordb keeps the embedded default database (``$ERRORDB_CACHE`` to move it)."""
    if os.environ.get("ERRORDB_CACHE"):
        return Path(os.environ["ERRORDB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "errordb"


def _with_companions(path: Path) -> list[Path]:
    """A database file and the journal files SQLite may keep beside it."""
    return [path, *(path.with_name(path.name + suffix) for suffix in ("-journal", "-wal", "-shm"))]


def _remove_dead_partials(folder: Path, pattern: re.Pattern[str]) -> None:
    """Remove stores (embedded defaults, new stores) left half-built by a killed process (kill
    -9, power): the files ``pattern`` matches with the ``pid`` of a process that is gone."""
    from errordb.atomic import left_by_dead_processes  # imports ctypes: not on explain's way in

    for _, partial in left_by_dead_processes(folder, pattern, files=True):
        for leftover in _with_companions(partial):
            leftover.unlink(missing_ok=True)


def _read_only_uri(path: str | os.PathLike[str], immutable: bool = False) -> str:
    # as_uri() percent-encodes: a "?" or "#" in a file name must not end the path part.
    return Path(path).absolute().as_uri() + ("?immutable=1" if immutable else "?mode=ro")


def connect_read_only(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection that only reads the existing database file at ``path``.

    Where the file may be written it is opened read-write with ``PRAGMA query_only`` (nothing
    can be written through it): a connection that may write is what rolls back the hot journal
    an ingest killed in a rollback-journal database leaves, and what removes a WAL database's
    ``-wal`` and ``-shm`` files when it closes last (a ``mode=ro`` connection leaves both behind
    after every explain). Where it may not, it is opened ``mode=ro``; a WAL database in a
    read-only folder, whose ``-shm`` cannot be created there, is opened immutable when it has
    no ``-wal`` file: no process can write it in that folder either (that needs the ``-wal``).
    """
    try:
        conn = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=rw", uri=True, timeout=BUSY_TIMEOUT)
    except sqlite3.OperationalError:
        conn = None  # not writable (or not there: the read-only open says which)
    if conn is not None:
        try:
            conn.execute("PRAGMA query_only = ON")
            _read_schema(conn)
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            name = getattr(exc, "sqlite_errorname", "")
            if not name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
                raise
    conn = sqlite3.connect(_read_only_uri(path), uri=True, timeout=BUSY_TIMEOUT)
    try:
        _read_schema(conn)
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        name = getattr(exc, "sqlite_errorname", "")
        if name == "SQLITE_READONLY_ROLLBACK":
            raise StoreError(
                f"{path}: an interrupted ingest left {path}-journal, which only a process that may write "
                "the file can roll back; run `errordb ingest --db` on it once with write access"
            ) from None
        folder_writable = os.access(Path(path).absolute().parent, os.W_OK)
        if name != "SQLITE_CANTOPEN" or folder_writable or os.path.exists(f"{path}-wal"):
            raise
    conn = sqlite3.connect(_read_only_uri(path, immutable=True), uri=True)
    _read_schema(conn)
    return conn
