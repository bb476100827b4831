"""The SQLite store: records normalised into tables with sqlite-utils, and read back.

Tables (all browsable with Datasette):

- ``records``: one row per record (its rowid is its id read as a number, so rowid order is id
  order whatever the ingest order), the record's scalar fields plus ``datasetVersion``,
  ``contentHash`` (of the record file's canonical JSON) and ``function`` (the function that
  encloses ``lineNumber`` in the snippet, found by reading the snippet, never by running it) and
  ``matchKey`` (a word every message matching the pattern contains: explain looks candidates
  up by it instead of trying every pattern);
- ``repos``; ``families`` (the ``backgroundTag`` explanations);
- ``solutions`` and ``prevention_tips``: ordered child rows;
- ``tags`` and ``record_tags`` (many-to-many, ordered);
- ``meta``: dataset version, record count and content hash of the whole store;
- what changed, so that a later reader asks "what changed since" instead of comparing every
  record: ``content_buckets`` (the records' content hashes hashed per bucket of ids, so an
  ingest rehashes only the buckets it touched), ``ingests`` (each ingest that changed
  something: its sequence number and the store's content hash after it) and ``change_log``
  (the ids each of the recent ones changed; see :func:`changed_since`);
- full-text search: ``records_fts`` (message, documentation, trigger, situations) and
  ``solutions_fts``.

:func:`ingest` is idempotent (unchanged records are not rewritten) and atomic (one transaction;
on any error nothing is left changed, and a database file it created is removed again).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import operator
import os
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errordb.errors import ErrordbError, RecordError
from errordb.records.families import Family, families_for, load_families
from errordb.records.patterns import index_key, pattern_words, rarest_word
from errordb.records.snippet import enclosing_function

if TYPE_CHECKING:  # pydantic and sqlite_utils cost ~100 ms each to import: reading must not need them
    import sqlite_utils

    from errordb.id_order import Place
    from errordb.prepare import Prepared
    from errordb.records.schema import Envelope

#: The record's fields in file order, and which of them are lists (as in errordb.records.schema).
LIST_FIELDS = ("solutions", "preventionTips", "tags")
SCALAR_FIELDS = (
    "id", "repo", "slug", "errorCode", "errorMessage", "messagePattern", "errorType", "errorClass",
    "httpStatus", "severity", "filePath", "lineNumber", "sourceCode", "sourceCodeStart", "sourceCodeEnd",
    "githubUrl", "documentation", "triggerScenarios", "commonSituations", "exampleFix", "handlingStrategy",
    "validationCode", "typeGuard", "tryCatchPattern", "backgroundTag", "analyzedSha", "analyzedAt", "schemaVersion",
)  # fmt: skip

#: Bumped whenever the table layout changes; a database of another layout is refused
#: (but for layout 2, which an ingest upgrades in place: layout 3 only added tables and an index).
STORE_VERSION = "3"
BATCH_SIZE = 2000
#: After an ingest, records whose index word is in more patterns than this get a rarer one.
REKEY_FREQUENCY = 32

RECORD_COLUMNS: dict[str, type] = {
    "id": str, "repo": str, "slug": str, "errorCode": str, "errorMessage": str,
    "messagePattern": str, "errorType": str, "errorClass": str, "httpStatus": int,
    "severity": str, "filePath": str, "lineNumber": int, "sourceCode": str,
    "sourceCodeStart": int, "sourceCodeEnd": int, "githubUrl": str, "documentation": str,
    "triggerScenarios": str, "commonSituations": str, "exampleFix": str,
    "handlingStrategy": str, "validationCode": str, "typeGuard": str, "tryCatchPattern": str,
    "backgroundTag": str, "analyzedSha": str, "analyzedAt": str, "schemaVersion": int,
    "datasetVersion": str, "contentHash": str, "function": str, "matchKey": str,
}  # fmt: skip
#: A ``records`` row's values in column order, from its dict (one C call instead of a generator).
_RECORD_VALUES = operator.itemgetter(*RECORD_COLUMNS)
#: A new record's row with its rowid (:class:`_Appender`).
_APPEND_RECORD = f"INSERT INTO main.records (rowid, {', '.join(RECORD_COLUMNS)}) VALUES ({', '.join('?' * (len(RECORD_COLUMNS) + 1))})"
_by_id = operator.attrgetter("id")
FTS_RECORD_COLUMNS = ["errorMessage", "documentation", "triggerScenarios", "commonSituations"]
#: The full-text tokenizer (Porter stemming over unicode61); errordb.publish.changes stems with it too.
FTS_TOKENIZER = "porter"
CHILD_TABLES = {"solutions": "solutions", "prevention_tips": "preventionTips"}


class StoreError(ErrordbError):
    """A database that cannot be used as an errordb store."""


@dataclass
class IngestReport:
    """What an ingest changed, by record count."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.added + self.updated + self.unchanged

    def summary(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.removed} removed in {self.seconds:.2f}s"
        )


#: Seconds a connection waits for another one's lock (an ingest waits for another ingest).
BUSY_TIMEOUT = 30


def connect(path: str | os.PathLike[str]) -> sqlite_utils.Database:
    """Open a store file for writing (created if missing) with the pragmas errordb relies on.

    Concurrency (docs/reliability.md): a file this creates is in WAL mode, so explain and the
    other readers keep reading the last committed data while an ingest writes, however long it
    runs (in the rollback journal a long ingest spills its cache, takes the exclusive lock and
    readers time out). An existing file keeps its journal mode: switching it would rewrite the
    file's header even when the ingest then fails, and a failed ingest must leave the file as it
    was, byte for byte. ``db.atomic()`` takes the write lock when the transaction begins
    (``BEGIN IMMEDIATE``), so a second ingest waits up to :data:`BUSY_TIMEOUT` seconds for the
    first instead of failing when it first writes; SQLite errors that are about the disk (full,
    read-only, locked too long) become one-line :class:`StoreError` naming the file.
    """
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    return _open(path, [f"PRAGMA page_size = {STORE_PAGE_SIZE}", "PRAGMA journal_mode = WAL"] if new else [])


#: Page size of a store errordb creates (SQLite's default is 4 KiB). A record's row is ~3-5 KB,
#: so a 4 KiB page held one and left the rest empty; 8 KiB pages hold two. At a million
#: generated records the store is 4.1 GB instead of 5.5 GB, and its first ingest 6-10% faster
#: (every index built after the rows reads the whole table; bench/RESULTS.md). A store made
#: with another page size keeps it: SQLite reads either.
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


@contextlib.contextmanager
def _opened_for_ingest(db_path: Path) -> Iterator[sqlite_utils.Database]:
    """The store at ``db_path`` opened for one ingest, closed after it.

    A store that does not exist yet is built beside it, as ``.<name>.<pid>.partial``, with its
    rollback journal in memory and no syncing, then linked into place once complete (and
    switched to WAL, as :func:`connect` makes new files). Built in WAL, every page of a first
    ingest was written twice, to the log and then to the file (~5 GB each at a million
    records); and now no reader ever sees a half-built store. A failure removes the partial
    file; a killed ingest's is removed by the next ingest beside it.
    """
    if os.path.lexists(db_path):
        db = connect(db_path)
        try:
            yield db
        finally:
            db.close()
        return
    _remove_dead_partials(db_path.parent, re.compile(rf"^\.{re.escape(db_path.name)}\.(?P<pid>\d+)\.partial$"))
    partial = db_path.with_name(f".{db_path.name}.{os.getpid()}.partial")
    for leftover in _with_companions(partial):
        leftover.unlink(missing_ok=True)
    # Nothing to protect yet: a failure discards the file (the journal in memory still lets a
    # statement or savepoint roll back).
    db = _open(partial, [f"PRAGMA page_size = {STORE_PAGE_SIZE}", "PRAGMA journal_mode = MEMORY", "PRAGMA synchronous = OFF"], name=db_path)
    try:
        yield db
        db.execute("PRAGMA journal_mode = WAL")
        db.close()
        _publish(partial, db_path)
    finally:
        db.close()
        for leftover in _with_companions(partial):
            leftover.unlink(missing_ok=True)


def _publish(partial: Path, target: Path) -> None:
    """Put a complete new store in place, never over one another process made meanwhile."""
    try:
        with open(partial, "rb") as handle:  # written without syncing: on the disk before it is named
            os.fsync(handle.fileno())
        try:
            os.link(partial, target)
        except FileExistsError:
            raise StoreError(
                f"{target}: another process created this database while this ingest ran; nothing was "
                "written: ingest again to add these records to it"
            ) from None
        except OSError:  # a file system without hard links
            if os.path.lexists(target):
                raise
            os.replace(partial, target)
        _sync_folder(target.parent)
    except OSError as exc:
        raise StoreError(f"{target}: cannot put the new database in place ({exc.strerror or exc})") from None


def _sync_folder(folder: Path) -> None:
    """Make a new name in ``folder`` durable (where folders can be opened and synced)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the name is then as durable as they make it
    finally:
        os.close(handle)


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
        # Ingest stages new records in SQLite's temporary folder: that disk can be the full one.
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


def ensure_schema(db: sqlite_utils.Database, upgrade: bool = False) -> bool:
    """Create errordb's tables, indexes and full-text search where they are missing. With
    ``upgrade`` (an ingest's transaction), a store of layout 2 is brought to this layout; True
    when it was (its content hash and change log then start again)."""
    if "meta" in db.table_names():
        version = db.execute("SELECT value FROM meta WHERE key = 'storeVersion'").fetchone()
        if version == ("2",) and upgrade:
            _create_change_tables(db)
            db.execute("UPDATE meta SET value = ? WHERE key = 'storeVersion'", [STORE_VERSION])
            return True
        if version is None or version[0] != STORE_VERSION:
            raise StoreError(_other_layout(_db_name(db), version[0] if version else None))
        return False
    if db.table_names():
        raise StoreError(f"{_db_name(db)}: not an errordb database (it has other tables)")
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["repos"].create({"id": str, "owner": str, "name": str, "url": str}, pk="id")
    db["families"].create({"tag": str, "title": str, "summary": str, "explanation": str}, pk="tag")
    db["records"].create(
        RECORD_COLUMNS,
        pk="id",
        not_null={"repo", "slug", "errorMessage", "messagePattern", "errorClass", "filePath", "lineNumber"},
        foreign_keys=[("repo", "repos", "id"), ("backgroundTag", "families", "tag")],
    )
    db["records"].create_index(["slug"], unique=True)
    for column in ("errorClass", "filePath", "function", "matchKey", "messagePattern", "errorMessage"):
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
    # How many records' patterns contain each word: explain's index word is the rarest one.
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
    _create_change_tables(db)
    db["meta"].insert({"key": "storeVersion", "value": STORE_VERSION})
    return False


def _other_layout(name: str, version: str | None) -> str:
    if version == "2":
        return f"{name}: store layout 2, older than this errordb's {STORE_VERSION}; one `errordb ingest --db {name}` (of any records) upgrades it in place"
    return f"{name}: built by another errordb version (store layout {version or '?'}, this errordb writes {STORE_VERSION}); ingest into a new file"


def _create_change_tables(db: sqlite_utils.Database) -> None:
    db.execute("CREATE TABLE content_buckets (bucket TEXT PRIMARY KEY, hash TEXT NOT NULL)")
    db.execute("CREATE TABLE ingests (sequence INTEGER PRIMARY KEY, contentHash TEXT NOT NULL, listed INTEGER NOT NULL)")
    db.execute("CREATE TABLE change_log (sequence INTEGER NOT NULL, id TEXT NOT NULL, PRIMARY KEY (sequence, id)) WITHOUT ROWID")
    # meta's datasetVersion is the newest one: without an index, finding it read the whole table
    # (1.3 s at a million records, for every ingest however small).
    db["records"].create_index(["datasetVersion"])


def _db_name(db: sqlite_utils.Database) -> str:
    if name := getattr(db, "name_for_errors", None):
        return name
    row = db.execute("PRAGMA database_list").fetchone()
    return row[2] or ":memory:"


#: 16 hex digits run to 2**64; SQLite's rowids are signed 64-bit numbers.
_ROWID_SHIFT = 1 << 63


def record_rowid(record_id: str) -> int:
    """The rowid of a record: its id read as a number (16 hex digits, shifted into SQLite's range).

    So rowid order is id order, whatever order the records were ingested in: the questions
    related errors ask "around a record's rowid" give the same answers for the same records.
    """
    return int(record_id, 16) - _ROWID_SHIFT


def rowid_record_id(rowid: int) -> str:
    """The id of the record at ``rowid`` (the inverse of :func:`record_rowid`)."""
    return f"{rowid + _ROWID_SHIFT:016x}"


def record_row(envelope: Envelope) -> dict[str, Any]:
    """The ``records`` row of an envelope (scalar fields and derived columns)."""
    record = envelope.record
    row = {name: getattr(record, name) for name in SCALAR_FIELDS}
    row["datasetVersion"] = envelope.datasetVersion
    row["contentHash"] = content_hash(envelope)
    row["function"] = enclosing_function(record.sourceCode, record.sourceCodeStart, record.lineNumber)
    row["matchKey"] = index_key(record.messagePattern)  # refined by _assign_keys with frequencies
    return row


def content_hash(envelope: Envelope) -> str:
    """SHA-256 of the envelope's canonical JSON: equal hashes mean equal record files."""
    from errordb.records.schema import canonical_json

    return hashlib.sha256(canonical_json(envelope).encode("utf-8")).hexdigest()


def ingest(
    paths: Iterable[str | os.PathLike[str]] | None = None,
    db_path: str | os.PathLike[str] = "errordb.db",
    *,
    prune: bool = False,
    families_path: str | os.PathLike[str] | None = None,
    progress: Callable[[int], None] | None = None,
    storing: Callable[[int, int], None] | None = None,
) -> IngestReport:
    """Load record files into the store at ``db_path``, all or nothing.

    ``paths`` are files (``.json``, ``.jsonl``) or folders walked recursively; ``None`` means the
    bundled records. With ``prune``, records in the store that none of the files hold are
    removed. ``progress`` is called with the number of records read so far.

    The records are read in the order of their ids (:mod:`errordb.id_order`), and each batch's
    new records are appended to the store as they come. Where that order cannot be planned, or
    appending fails (a bad record, an id or slug given twice), they are read in file order
    instead, from the start: that names the first bad record as a reader of the files meets it,
    and allows what only that order does (a new record taking the slug an update gives up). In
    file order, new records are staged and moved into the store once every record is read and
    checked, and ``storing`` is called with (new records stored, new records in all) meanwhile.
    """
    from errordb.id_order import IdOrder
    from errordb.records.loader import record_texts

    started = time.perf_counter()
    paths = [Path(p) for p in paths] if paths is not None else [bundled_records_dir()]
    families_file = Path(families_path) if families_path else families_for(paths)
    families = load_families(families_file) if families_file else {}
    report = None
    in_id_order = IdOrder.plan(paths)
    if in_id_order is not None:
        try:
            report = _ingest(in_id_order.units(), db_path, prune, families, progress, storing, appending=True)
        except (RecordError, _NotAppendable):  # nothing was written: read again, in file order
            pass
    if report is None:
        report = _ingest(record_texts(paths), db_path, prune, families, progress, storing, appending=False)
    report.seconds = time.perf_counter() - started
    return report


class _NotAppendable(Exception):
    """Records read in id order that cannot all be appended (two new records with one id or slug)."""


def _ingest(
    texts: Iterator[tuple[str, str | Place]],
    db_path: str | os.PathLike[str],
    prune: bool,
    families: dict[str, Family],
    progress: Callable[[int], None] | None,
    storing: Callable[[int, int], None] | None,
    appending: bool,
) -> IngestReport:
    """One ingest of ``texts``: appending each batch's new records to the store as it comes
    (``texts`` in id order), or staging them to be copied in id order after the last one."""
    from errordb.prepare import PreparedRecords

    report = IngestReport()
    # The records are validated in worker processes, started (forked) before the database is
    # opened; the main process only writes.
    with PreparedRecords(texts) as records, _opened_for_ingest(Path(db_path)) as db:
        _attach_scratch(db)
        with db.atomic():
            _tune_for_bulk_writes(db)
            upgraded = ensure_schema(db, upgrade=True)
            _write_families(db, families)
            db.execute(f"CREATE TABLE {SCRATCH}.seen (id TEXT PRIMARY KEY, source TEXT NOT NULL, batch INTEGER NOT NULL)")
            if not appending:
                _create_staging(db)
            fresh = db.execute("SELECT 1 FROM main.records LIMIT 1").fetchone() is None
            appender = _Appender(db, fresh) if appending else None
            read = 0
            ensured: set[tuple[str, str]] = set()
            changed = _ChangedIds()
            for batch in _batches(iter(records), BATCH_SIZE):
                _write_batch(db, batch, report, ensured, changed, appender, fresh)
                read += len(batch)
                if progress:
                    progress(read)
            if appender is not None:
                appender.finish(db)
            else:
                _store_staged(db, storing)
            if prune and not fresh:  # an empty store has nothing the files do not hold
                report.removed = _prune(db, changed)
            _merge_full_text(db, report.added + report.updated + report.removed)
            if report.added or report.updated or report.removed or upgraded:
                _rekey(db)
                _drop_orphans(db)
                _log_changes(db, None if upgraded else changed.ids)
        db.execute(f"DETACH DATABASE {SCRATCH}")
    return report


#: Page cache of the ingest's connection for the store (KiB, SQLite's negative form): the
#: indexes on random keys (slug, matchKey, filePath…) are written all over the file, and
#: SQLite's default 2 MB makes a large ingest re-read the same pages. It also bounds each sort
#: of a deferred CREATE INDEX. 256 MB stored a million records' rows 30% faster, but the whole
#: ingest only ~4% (one run each, within the noise) for ~190 MB more: not worth it
#: (bench/RESULTS.md).
INGEST_CACHE_KIB = 65536

#: Page cache of the ingest's temporary tables (KiB). Staging appends, which needs few pages;
#: reading the staged rows back in id order jumps all over them, so a larger cache hardly ever
#: hits (64 MB holds 2% of a million records' staged rows). 8 MB instead of 64 MB: the same
#: speed, and 56-66 MB less at 100k-1M (bench/RESULTS.md).
STAGING_CACHE_KIB = 8192


#: Page size of the ingest's temporary tables (SQLite's default is 4 KiB). Staging writes and
#: reads back every new record (~5 KB each): in 64 KiB pages that is a sixteenth of the
#: system calls, and the ingest 7-9% faster at 100k (alternating runs, bench/RESULTS.md).
#: Nothing stored is affected: the temporary tables live in a file of their own.
STAGING_PAGE_SIZE = 65536


#: The ingest's scratch database: the ids read so far (``seen``), checked and added batch by
#: batch in random order. Not among the temporary tables: their 64 KiB pages and shared cache
#: made each insert read and write whole 64 KiB pages once the ids outgrew the cache (14 s of
#: a million records' ingest; bench/RESULTS.md).
SCRATCH = "ingest_scratch"
#: Its page cache (KiB): a million ids take ~40 MB.
SCRATCH_CACHE_KIB = 16384


def _attach_scratch(db: sqlite_utils.Database) -> None:
    # Before the transaction: SQLite refuses ATTACH inside one. '' is a file of SQLite's own in
    # its temporary folder, deleted when the connection closes. Its journal is in memory, so
    # COMMIT needs no super-journal across the two files.
    db.execute(f"ATTACH DATABASE '' AS {SCRATCH}")
    db.execute(f"PRAGMA {SCRATCH}.page_size = 4096")
    db.execute(f"PRAGMA {SCRATCH}.cache_size = -{SCRATCH_CACHE_KIB}")
    db.execute(f"PRAGMA {SCRATCH}.journal_mode = MEMORY")


def _tune_for_bulk_writes(db: sqlite_utils.Database) -> None:
    # Connection settings only: nothing here is stored in the file or weakens the transaction.
    db.execute(f"PRAGMA cache_size = -{INGEST_CACHE_KIB}")
    # Before the first temporary table, which creates the temporary database with this page size.
    db.execute(f"PRAGMA temp.page_size = {STAGING_PAGE_SIZE}")
    db.execute(f"PRAGMA temp.cache_size = -{STAGING_CACHE_KIB}")


def _batches(items: Iterator[Prepared], size: int) -> Iterator[list[Prepared]]:
    while batch := list(islice(items, size)):
        yield batch


def _write_families(db: sqlite_utils.Database, families: dict[str, Family]) -> None:
    # Compare first: an ingest that changes nothing must not write (the file stays identical).
    current = {row["tag"]: row for row in db["families"].rows}
    wanted = [
        {"tag": f.tag, "title": f.title, "summary": f.summary, "explanation": f.explanation}
        for f in families.values()
    ]
    changed = [row for row in wanted if current.get(row["tag"]) != row]
    if changed:
        db["families"].upsert_all(changed, pk="tag")


def _write_batch(
    db: sqlite_utils.Database,
    batch: list[Prepared],
    report: IngestReport,
    ensured: set[tuple[str, str]],
    changed_ids: _ChangedIds,
    appender: _Appender | None,
    fresh: bool,
) -> None:
    """Stage or append a batch's new records, update its changed ones. ``fresh``: the store had
    no records when the ingest began, so every record is new (``seen`` refuses an id twice)."""
    if fresh and appender is not None:
        # Appended into an empty store, an id given twice breaks the records' own primary key
        # (the reading in file order then names both): nothing to remember or look up.
        known = {}
    else:
        _refuse_duplicates(db, batch, report.total)  # the records before: a batch's number
        known = {} if fresh else _content_hashes(db, [item.id for item in batch])
    added, updated = [], []
    for item in batch:
        previous = known.get(item.id)
        if previous is None:
            added.append(item)
        elif previous != item.row["contentHash"]:
            updated.append(item)
        else:
            report.unchanged += 1
    if not added and not updated:
        return
    changed = added + updated
    _ensure_parents(db, changed, ensured)
    if updated:
        _count_terms(db, map(pattern_words, _patterns_of(db, [item.id for item in updated])), -1)
        _delete_children(db, [item.id for item in updated])
    _count_terms(db, [item.words for item in changed], +1)
    _assign_keys(db, changed)
    for item in updated:
        try:
            db["records"].update(item.id, item.row)
        except sqlite3.IntegrityError as exc:
            raise _integrity_error(db, item, exc) from None
    if appender is not None:
        appender.append(db, added, changed)
    else:
        if added:
            columns = list(RECORD_COLUMNS)
            rows = [[record_rowid(item.id), item.source, *_RECORD_VALUES(item.row)] for item in added]
            _insert_rows(db, "temp.new_records", ["rid", "source", *columns], rows)
        _insert_children(db, changed)
    report.added += len(added)
    report.updated += len(updated)
    changed_ids.add(item.id for item in changed)


#: New records appended between two writes of their full-text rows (:class:`_Appender`): few
#: enough that the rows are read back from the page cache, and that the validating workers,
#: which stop once 16 chunks ahead, wait little meanwhile (every 50,000: 4 s more at 1M).
FULL_TEXT_EVERY = 10_000


class _Appender:
    """Appends an ingest's new records, read in id order, and every changed record's child rows.

    Read in id order, new records go to the end of the table rather than all over it. Their
    full-text rows are written by statements of their own every :data:`FULL_TEXT_EVERY` new
    records (FTS5 writes a segment at the end of every statement: a segment a batch cost 45%
    more to write and merge; bench/RESULTS.md), so the insert triggers are dropped meanwhile;
    into an empty store the indexes too, each built by one sorted pass at the end. Nothing is
    dropped before there is something to append: an ingest that changes nothing writes nothing.
    """

    def __init__(self, db: sqlite_utils.Database, fresh: bool):
        self.fresh = fresh
        self.restore: list[str] | None = None  # the SQL that makes what was dropped again
        self.rowids: list[int] = []  # appended records whose full-text rows are not written yet
        self.last_solution = _max_rowid(db, "solutions")  # the solutions after it are new

    def append(self, db: sqlite_utils.Database, added: list[Prepared], changed: list[Prepared]) -> None:
        """Insert ``added`` records and the child rows of all ``changed`` ones (added ones too)."""
        if self.restore is None:
            self.restore = (_drop_indexes(db) if self.fresh else []) + _drop_insert_triggers(db)
        if added:
            rows = [[record_rowid(item.id), *_RECORD_VALUES(item.row)] for item in added]
            try:
                # executemany, not many rows a statement: with foreign keys checked, that was
                # 2.5 times as slow (bench/RESULTS.md).
                db.conn.executemany(_APPEND_RECORD, rows)
            except sqlite3.IntegrityError:  # an id or slug taken: the reading in file order names the record
                raise _NotAppendable from None
            self.rowids.extend(row[0] for row in rows)
        # One statement a table for the whole batch: a JSON object of each record's lists by id
        # (ids are hex digits, the lists JSON already), in id order, so solutions are numbered
        # in it. A third cheaper than an array of [id, lists] pairs, and than executemany.
        lists = "{" + ",".join(f'"{item.id}":{item.lists}' for item in sorted(changed, key=_by_id)) + "}"
        for table, value, place in _CHILDREN:
            db.execute(
                f"INSERT INTO main.{table} (record_id, position, {value}) SELECT record.key, item.key, item.value "
                f"FROM json_each(?) AS record, json_each(record.value, '$[{place}]') AS item",
                [lists],
            )
        if len(self.rowids) >= FULL_TEXT_EVERY:
            self._write_full_text(db)

    def finish(self, db: sqlite_utils.Database) -> None:
        """Write the last full-text rows; make the triggers and indexes again."""
        if self.restore is None:
            return
        self._write_full_text(db)
        try:
            for sql in self.restore:
                db.execute(sql)
        except sqlite3.IntegrityError:  # the unique index on slugs: the reading in file order names the record
            raise _NotAppendable from None

    def _write_full_text(self, db: sqlite_utils.Database) -> None:
        db.execute(
            f"INSERT INTO main.records_fts (rowid, {', '.join(FTS_RECORD_COLUMNS)}) "
            f"SELECT rowid, {', '.join(FTS_RECORD_COLUMNS)} FROM main.records "
            f"WHERE rowid IN (SELECT value FROM json_each(?)) ORDER BY rowid",
            [json.dumps(self.rowids)],
        )
        self.rowids = []
        db.execute(
            "INSERT INTO main.solutions_fts (rowid, text) SELECT rowid, text FROM main.solutions WHERE rowid > ? ORDER BY rowid",
            [self.last_solution],
        )
        self.last_solution = _max_rowid(db, "solutions")


def _content_hashes(db: sqlite_utils.Database, ids: list[str]) -> dict[str, str]:
    """The stored content hash of each of ``ids`` the store holds."""
    # By rowid, which needs no index.
    rowids = [record_rowid(record_id) for record_id in ids]
    marks = ",".join("?" * len(rowids))
    return dict(db.execute(f"SELECT id, contentHash FROM records WHERE rowid IN ({marks})", rowids).fetchall())


def _max_rowid(db: sqlite_utils.Database, table: str) -> int:
    """The largest rowid in ``table`` (0 when empty). A table's new rows get rowids after it
    (SQLite's rule until the largest possible rowid, which counting from 1 never reaches), so
    the rows inserted since are those after it."""
    return db.execute(f"SELECT max(rowid) FROM main.{table}").fetchone()[0] or 0



def _insert_rows(db: sqlite_utils.Database, table: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Insert ``rows`` with as few statements as SQLite's limit on parameters allows.

    Many rows a statement, not executemany's one: a batch's rows reach SQLite in a few calls.
    (Before ingest staged its rows, this also kept FTS5 from writing a tiny segment a row; the
    staged copy into the tables with FTS5 triggers is now one statement a range of ids.)
    """
    per_statement = max(1, min(len(rows), db.conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(columns)))
    row_marks = "(" + ",".join("?" * len(columns)) + ")"
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        db.conn.execute(head + ",".join([row_marks] * len(chunk)), list(chain.from_iterable(chunk)))


def _patterns_of(db: sqlite_utils.Database, ids: list[str]) -> list[str]:
    marks = ",".join("?" * len(ids))
    return [row[0] for row in db.execute(f"SELECT messagePattern FROM records WHERE id IN ({marks})", ids)]


def _count_terms(db: sqlite_utils.Database, word_lists: Iterable[tuple[str, ...]], step: int) -> None:
    """Add ``step`` to the pattern count of each word, once per pattern's words in ``word_lists``."""
    counts = Counter(chain.from_iterable(word_lists))  # counted in C
    db.conn.executemany(
        "INSERT INTO terms (term, df) VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET df = df + excluded.df",
        sorted((word, count * step) for word, count in counts.items()),
    )
    if step < 0:
        db.execute("DELETE FROM terms WHERE df <= 0")


def _frequencies(db: sqlite_utils.Database, words: set[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    ordered = sorted(words)
    for start in range(0, len(ordered), 900):
        chunk = ordered[start : start + 900]
        marks = ",".join("?" * len(chunk))
        found.update(db.execute(f"SELECT term, df FROM terms WHERE term IN ({marks})", chunk).fetchall())
    return found


def _assign_keys(db: sqlite_utils.Database, items: list[Prepared]) -> None:
    frequency = _frequencies(db, set(chain.from_iterable(item.words for item in items)))
    for item in items:
        item.row["matchKey"] = rarest_word(item.words, frequency)


def _rekey(db: sqlite_utils.Database) -> None:
    """Give records keyed on a word that became common a rarer word, now that all counts are in."""
    sql = (
        "SELECT id, messagePattern, matchKey FROM records WHERE matchKey IN "
        "(SELECT term FROM terms WHERE df > ?) ORDER BY id"
    )
    cursor = db.execute(sql, [REKEY_FREQUENCY])
    while rows := cursor.fetchmany(BATCH_SIZE):
        frequency = _frequencies(db, {w for _, pattern, _ in rows for w in pattern_words(pattern)})
        changes = [(key, rid) for rid, pattern, old in rows if (key := index_key(pattern, frequency)) != old]
        db.conn.executemany("UPDATE records SET matchKey = ? WHERE id = ?", changes)


def _refuse_duplicates(db: sqlite_utils.Database, batch: list[Prepared], batch_number: int) -> None:
    sources: dict[str, str] = {}
    for item in batch:
        other = sources.setdefault(item.id, item.source)
        if other != item.source:
            raise RecordError(item.source, item.id, "id", f"duplicate id: {other} has a record with the same id")
    # Inserted first and looked up only when an id was already there (most batches have none);
    # ``batch_number`` tells this batch's rows from those of the batches before.
    inserted = db.conn.executemany(
        f"INSERT INTO {SCRATCH}.seen (id, source, batch) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
        [(record_id, source, batch_number) for record_id, source in sources.items()],
    ).rowcount
    if inserted == len(sources):
        return
    marks = ",".join("?" * len(sources))
    earlier = dict(db.execute(f"SELECT id, source FROM {SCRATCH}.seen WHERE batch < ? AND id IN ({marks})", [batch_number, *sources]).fetchall())
    item = next(item for item in batch if item.id in earlier)
    raise RecordError(item.source, item.id, "id", f"duplicate id: {earlier[item.id]} has a record with the same id")


#: The child tables, their text column, and the place of their lists in a staged ``lists``.
_CHILDREN = (("solutions", "text", 0), ("prevention_tips", "text", 1), ("record_tags", "tag", 2))


def _create_staging(db: sqlite_utils.Database) -> None:
    # Temporary tables: in a file of their own that SQLite deletes, never in the store.
    db.execute(f"CREATE TEMP TABLE new_records (rid INTEGER NOT NULL, source TEXT NOT NULL, {', '.join(RECORD_COLUMNS)})")
    # A changed record's child rows, staged as one row of JSON lists (Prepared.lists) and
    # expanded by SQLite when they are stored: a row a record, not one a solution, tip and tag.
    db.execute("CREATE TEMP TABLE new_lists (record_id TEXT NOT NULL, lists TEXT NOT NULL)")


#: Staged records moved into the store per statement (a progress step; FTS5 flushes per statement).
STORE_CHUNK = 50_000


def _store_staged(db: sqlite_utils.Database, progress: Callable[[int, int], None] | None = None) -> None:
    """Move the new records and every changed record's child rows into the store, in key order.

    Ingest stages them instead of inserting each batch: a record's rowid is its id read as a
    number, so new records land all over the table, and inserting ~5 KB rows (with their FTS5
    entries) at random places costs twice as much as appending them, more as the table grows
    (62 s against 31 s for 300,000 records; bench/RESULTS.md). Staged rows are appended to
    temporary tables, then copied in rowid order through indexes on them, a range of ids at a
    time: each range's records and their full-text rows, then their child rows, expanded from
    the staged JSON lists, and the solutions' full-text rows (ids sort as their rowids do).
    """
    _refuse_taken_slugs(db)
    db.execute("CREATE INDEX temp.new_records_rid ON new_records (rid)")
    # Covering: the lists are read in id order without a look-up into the table for each.
    db.execute("CREATE INDEX temp.new_lists_key ON new_lists (record_id, lists)")
    total = db.execute("SELECT count(*) FROM temp.new_records").fetchone()[0]
    columns = ", ".join(RECORD_COLUMNS)
    # Into an empty store, each index is built once the rows are in, by one sorted pass, instead
    # of being updated a row at a time (~1 s of a 15-16 s first ingest at 100k; bench/RESULTS.md).
    deferred = _drop_indexes(db) if db.execute("SELECT 1 FROM main.records LIMIT 1").fetchone() is None else []
    # The full-text rows are written by a statement of their own after each range's rows, not by
    # the insert triggers (the same rows in the same order): with the triggers, each copy kept a
    # statement journal in the temporary folder and wrote the records' and the index's pages
    # interleaved. The records' copy at 300k: 6.4 s, now 2.3 s and 2.3 s (bench/RESULTS.md).
    staged = total or db.execute("SELECT 1 FROM temp.new_lists LIMIT 1").fetchone()
    triggers = _drop_insert_triggers(db) if staged else []
    record_fts = ", ".join(f"r.[{column}]" for column in FTS_RECORD_COLUMNS)
    stored = 0
    for low, high in _id_ranges(db, STORE_CHUNK):
        where, params = range_condition("rid", low, high, record_rowid)
        moved = db.execute(
            f"INSERT INTO main.records (rowid, {columns}) "
            f"SELECT rid, {columns} FROM temp.new_records INDEXED BY new_records_rid WHERE {where} ORDER BY rid",
            params,
        ).rowcount
        if moved:
            db.execute(
                f"INSERT INTO main.records_fts (rowid, {', '.join(FTS_RECORD_COLUMNS)}) SELECT r.rowid, {record_fts} "
                f"FROM temp.new_records INDEXED BY new_records_rid JOIN main.records r ON r.rowid = rid "
                f"WHERE {where} ORDER BY rid",
                params,
            )
        last_solution = _max_rowid(db, "solutions")  # the range's solutions are those after it
        where, params = range_condition("n.record_id", low, high)
        for table, value, place in _CHILDREN:
            db.execute(
                f"INSERT INTO main.{table} (record_id, position, {value}) SELECT n.record_id, item.key, item.value "
                f"FROM temp.new_lists n INDEXED BY new_lists_key, json_each(n.lists, '$[{place}]') item "
                f"WHERE {where} ORDER BY n.record_id, item.key",
                params,
            )
        db.execute(
            "INSERT INTO main.solutions_fts (rowid, text) SELECT rowid, text FROM main.solutions WHERE rowid > ? ORDER BY rowid",
            [last_solution],
        )
        stored += moved
        if progress and moved:
            progress(stored, total)
    # The staged tables are left for closing the connection to delete with its temporary file:
    # dropping them reads every page (1.2 s at 300k).
    for sql in deferred + triggers:
        db.execute(sql)


#: The triggers that index a new row's text, which :func:`_store_staged` does itself.
_INSERT_TRIGGERS = ("records_ai", "solutions_ai")


def _drop_insert_triggers(db: sqlite_utils.Database) -> list[str]:
    """Drop the full-text insert triggers; returns the statements that create them again."""
    return _drop_from_schema(db, "trigger", "name", _INSERT_TRIGGERS)


def _drop_indexes(db: sqlite_utils.Database) -> list[str]:
    """Drop the records' and their child rows' own indexes (not those of primary keys); returns
    the statements that create them again, as the schema holds them."""
    return _drop_from_schema(db, "index", "tbl_name", ("records", *(table for table, _, _ in _CHILDREN)))


def _drop_from_schema(db: sqlite_utils.Database, kind: str, column: str, values: tuple[str, ...]) -> list[str]:
    """Drop the ``kind`` objects (index, trigger) whose ``column`` in ``sqlite_master`` is one of
    ``values`` and that have SQL of their own; returns their CREATE statements, by name."""
    found = db.execute(
        f"SELECT name, sql FROM main.sqlite_master WHERE type = ? AND sql IS NOT NULL "
        f"AND {column} IN ({','.join('?' * len(values))}) ORDER BY name",
        [kind, *values],
    ).fetchall()
    for name, _ in found:
        db.execute(f"DROP {kind.upper()} main.[{name}]")
    return [sql for _, sql in found]


#: An ingest that writes at least this share of the store's records merges its full-text indexes.
MERGE_SHARE = 0.1


def _merge_full_text(db: sqlite_utils.Database, written: int) -> None:
    """Merge each full-text index into one segment after an ingest that wrote much of the store.

    FTS5 keeps an index as segments and merges them only a few at a time, so a large ingest
    leaves several (9 for 100,000 generated records); every full-text question then reads each
    of them, and the site's related errors ask four a page. Merging took 0.5 s there and made
    the error pages' contexts 10-30% cheaper to build (bench/RESULTS.md). It rewrites the
    whole index, so a small ingest (one edited record, say) leaves it to FTS5's own merging.
    """
    if not written or written < MERGE_SHARE * db.execute("SELECT count(*) FROM records").fetchone()[0]:
        return
    for table in ("records_fts", "solutions_fts"):
        db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


def _id_ranges(db: sqlite_utils.Database, size: int) -> Iterator[tuple[str | None, str | None]]:
    """Consecutive ranges (low, high] of staged record ids, ``size`` records each; None: open."""
    low = None
    while True:
        after, params = ("WHERE rid > ? ", [record_rowid(low)]) if low is not None else ("", [])
        row = db.execute(
            f"SELECT id FROM temp.new_records INDEXED BY new_records_rid {after}ORDER BY rid LIMIT 1 OFFSET ?",
            [*params, size - 1],
        ).fetchone()
        high = row[0] if row else None
        yield low, high
        if high is None:
            return
        low = high


def range_condition(column: str, low: str | None, high: str | None, convert: Callable[[str], Any] = str) -> tuple[str, list[Any]]:
    """A WHERE condition and its parameters for ``low < column <= high`` (None: no bound),
    each bound passed through ``convert`` (a record id to a rowid, say)."""
    conditions, params = ["1"], []
    if low is not None:
        conditions.append(f"{column} > ?")
        params.append(convert(low))
    if high is not None:
        conditions.append(f"{column} <= ?")
        params.append(convert(high))
    return " AND ".join(conditions), params


def _refuse_taken_slugs(db: sqlite_utils.Database) -> None:
    """Raise for the first new record (in ingest order) whose slug a stored or earlier new one holds."""
    db.execute("CREATE INDEX temp.new_records_slug ON new_records (slug)")
    taken = db.execute(
        "SELECT min(n.rowid) FROM temp.new_records AS n INDEXED BY new_records_slug "
        "WHERE EXISTS (SELECT 1 FROM main.records AS r WHERE r.slug = n.slug) "
        "OR EXISTS (SELECT 1 FROM temp.new_records AS e WHERE e.slug = n.slug AND e.rowid < n.rowid)"
    ).fetchone()[0]
    if taken is not None:
        source, record_id, slug = db.execute("SELECT source, id, slug FROM temp.new_records WHERE rowid = ?", [taken]).fetchone()
        holder = db.execute(
            "SELECT id FROM main.records WHERE slug = ? UNION ALL "
            "SELECT id FROM (SELECT id FROM temp.new_records WHERE slug = ? AND rowid < ? ORDER BY rowid LIMIT 1)",
            [slug, slug, taken],
        ).fetchone()[0]
        raise RecordError(source, record_id, "slug", f"{slug!r} is already the slug of record {holder}")


def _integrity_error(db: sqlite_utils.Database, item: Prepared, exc: sqlite3.IntegrityError) -> RecordError:
    slug = item.row["slug"]
    if "records.slug" in str(exc):
        other = db.execute("SELECT id FROM records WHERE slug = ?", [slug]).fetchone()
        holder = f"record {other[0]}" if other else "another record"
        return RecordError(item.source, item.id, "slug", f"{slug!r} is already the slug of {holder}")
    return RecordError(item.source, item.id, None, f"cannot be stored: {exc}")


def _ensure_parents(db: sqlite_utils.Database, items: list[Prepared], ensured: set[tuple[str, str]]) -> None:
    """Give the repositories, tags and families ``items`` name a row where they have none.

    ``ensured`` holds the (table, name) pairs this ingest has seen to already: most batches name
    no new one, and each ``insert_all`` costs ~5 ms however few its rows (profiled at 100k).
    """
    wanted = {("repos", item.row["repo"]) for item in items}
    wanted.update(("tags", tag) for item in items for tag in item.tags)
    # A backgroundTag without an entry in families.toml still needs its row (`check` reports it).
    wanted.update(("families", item.row["backgroundTag"]) for item in items if item.row["backgroundTag"])
    new = wanted - ensured
    if not new:
        return
    repos = sorted(name for table, name in new if table == "repos")
    db["repos"].insert_all(
        ({"id": repo, "owner": repo.split("/")[0], "name": repo.split("/")[1], "url": f"https://github.com/{repo}"} for repo in repos),
        pk="id",
        ignore=True,
    )
    db["tags"].insert_all(({"name": name} for name in sorted(name for table, name in new if table == "tags")), pk="name", ignore=True)
    db["families"].insert_all(({"tag": name} for name in sorted(name for table, name in new if table == "families")), pk="tag", ignore=True)
    ensured.update(new)


def _delete_children(db: sqlite_utils.Database, ids: list[str]) -> None:
    marks = ",".join("?" * len(ids))
    for table in (*CHILD_TABLES, "record_tags"):
        db.execute(f"DELETE FROM {table} WHERE record_id IN ({marks})", ids)


def _insert_children(db: sqlite_utils.Database, items: list[Prepared]) -> None:
    _insert_rows(db, "temp.new_lists", ["record_id", "lists"], [[item.id, item.lists] for item in items])


def _prune(db: sqlite_utils.Database, changed: _ChangedIds) -> int:
    """Remove the records none of this ingest's files held; returns how many."""
    gone = f"SELECT id FROM records WHERE id NOT IN (SELECT id FROM {SCRATCH}.seen)"
    count = db.execute(f"SELECT count(*) FROM ({gone})").fetchone()[0]
    if count:
        changed.add(row[0] for row in db.execute(gone))
        patterns = [row[0] for row in db.execute(f"SELECT messagePattern FROM records WHERE id IN ({gone})")]
        _count_terms(db, map(pattern_words, patterns), -1)
        for table in (*CHILD_TABLES, "record_tags"):
            db.execute(f"DELETE FROM {table} WHERE record_id IN ({gone})")
        db.execute(f"DELETE FROM records WHERE id IN ({gone})")
    return count


def _drop_orphans(db: sqlite_utils.Database) -> None:
    db.execute("DELETE FROM repos WHERE id NOT IN (SELECT repo FROM records)")
    db.execute("DELETE FROM tags WHERE name NOT IN (SELECT tag FROM record_tags)")


#: Hex digits of an id that name its bucket of content hashes (4,096 buckets).
BUCKET_DIGITS = 3
#: An ingest that changed more records than this is logged without its ids: a reader then
#: compares every record, which costs no more than such an ingest did.
LOGGED_IDS_MOST = 10_000
#: The change log keeps the ids of the newest ingests, up to this many rows in all...
LOG_ROWS_MOST = 100_000
#: ... and of at most this many ingests.
LOG_INGESTS_MOST = 1_000


class _ChangedIds:
    """The ids an ingest added, changed or removed, up to :data:`LOGGED_IDS_MOST` (past it,
    only that there were more: a first ingest of a million records keeps none)."""

    def __init__(self) -> None:
        self.ids: list[str] | None = []

    def add(self, ids: Iterable[str]) -> None:
        if self.ids is not None:
            self.ids.extend(ids)
            if len(self.ids) > LOGGED_IDS_MOST:
                self.ids = None


def _log_changes(db: sqlite_utils.Database, ids: list[str] | None) -> None:
    """Record an ingest that changed the records ``ids`` (None: more than the log lists, or
    anywhere, as after an upgrade): rehash their buckets, log the ingest and its ids, and write
    the ``meta`` table."""
    _rehash_buckets(db, {record_id[:BUCKET_DIGITS] for record_id in ids} if ids is not None else None)
    digest = hashlib.sha256()
    for bucket, bucket_hash in db.execute("SELECT bucket, hash FROM content_buckets ORDER BY bucket"):
        digest.update(f"{bucket}:{bucket_hash}\n".encode())
    store_hash = digest.hexdigest()
    sequence = (db.execute("SELECT max(sequence) FROM ingests").fetchone()[0] or 0) + 1
    db.execute("INSERT INTO ingests (sequence, contentHash, listed) VALUES (?, ?, ?)", [sequence, store_hash, int(ids is not None)])
    if ids is not None:
        db.conn.executemany("INSERT OR IGNORE INTO change_log (sequence, id) VALUES (?, ?)", ((sequence, i) for i in sorted(ids)))
    _trim_log(db, sequence)
    count, version = db.execute("SELECT count(*), max(datasetVersion) FROM records").fetchone()
    db["meta"].upsert_all(
        [
            {"key": "datasetVersion", "value": version},
            {"key": "recordCount", "value": str(count)},
            {"key": "contentHash", "value": store_hash},
        ],
        pk="key",
    )


def _rehash_buckets(db: sqlite_utils.Database, buckets: set[str] | None) -> None:
    """Hash again the ``buckets`` of records (None: all): SHA-256 over ``id:contentHash`` lines
    in id order; an empty bucket has no row."""
    if buckets is None:
        db.execute("DELETE FROM content_buckets")
        ranges: Iterable[tuple[str | None, int, int]] = [(None, record_rowid("0" * 16), record_rowid("f" * 16))]
    else:
        pad = 16 - BUCKET_DIGITS
        ranges = [(b, record_rowid(b + "0" * pad), record_rowid(b + "f" * pad)) for b in sorted(buckets)]
    rows = []
    for wanted, low, high in ranges:
        current, digest = wanted, hashlib.sha256()
        filled = False
        cursor = db.execute("SELECT id, contentHash FROM records WHERE rowid BETWEEN ? AND ? ORDER BY rowid", [low, high])
        for record_id, record_hash in cursor:
            bucket = record_id[:BUCKET_DIGITS]
            if bucket != current:  # only when hashing every bucket in one pass
                if filled:
                    rows.append((current, digest.hexdigest()))
                current, digest, filled = bucket, hashlib.sha256(), False
            digest.update(f"{record_id}:{record_hash}\n".encode())
            filled = True
        if filled:
            rows.append((current, digest.hexdigest()))
        elif wanted is not None:
            db.execute("DELETE FROM content_buckets WHERE bucket = ?", [wanted])
    db.conn.executemany("INSERT OR REPLACE INTO content_buckets (bucket, hash) VALUES (?, ?)", rows)


def _trim_log(db: sqlite_utils.Database, sequence: int) -> None:
    """Forget the oldest ingests past the log's bounds (a reader from before them compares every record)."""
    oldest = sequence - LOG_INGESTS_MOST + 1
    rows = 0
    for older, count in db.execute("SELECT sequence, count(*) FROM change_log GROUP BY sequence ORDER BY sequence DESC"):
        rows += count
        if rows > LOG_ROWS_MOST:
            oldest = max(oldest, older)  # a reader from `older` needs only the rows after it
            break
    db.execute("DELETE FROM ingests WHERE sequence < ?", [oldest])
    db.execute("DELETE FROM change_log WHERE sequence <= ?", [oldest])


def change_state(conn: Any) -> tuple[int, str] | None:
    """(sequence number, content hash) of the store's last ingest; None for a store without one."""
    row = conn.execute("SELECT sequence, contentHash FROM ingests ORDER BY sequence DESC LIMIT 1").fetchone()
    return (row[0], row[1]) if row else None


def changed_since(conn: Any, sequence: int, content_hash: str) -> list[str] | None:
    """The ids of the records added, changed or removed since the store's ingest ``sequence``,
    in id order (a record changed back again is listed too); None when the store cannot tell.

    The store must have been in the state ``content_hash`` at that ingest: a copy of the file
    that went its own way since, or another store, cannot tell what changed since a state it
    was never in. It cannot either when an ingest since changed too many records to list
    them, or when the log no longer reaches back that far.
    """
    row = conn.execute("SELECT contentHash FROM ingests WHERE sequence = ?", [sequence]).fetchone()
    if row is None or row[0] != content_hash:
        return None
    if conn.execute("SELECT 1 FROM ingests WHERE sequence > ? AND NOT listed LIMIT 1", [sequence]).fetchone():
        return None
    return [row[0] for row in conn.execute("SELECT DISTINCT id FROM change_log WHERE sequence > ? ORDER BY id", [sequence])]


# Reading back ---------------------------------------------------------------------------------


def meta(db: sqlite_utils.Database) -> dict[str, str]:
    """The ``meta`` table as a dict (dataset version, record count, content hash)."""
    return dict(db.execute("SELECT key, value FROM meta").fetchall())


def get_envelope(db: sqlite_utils.Database, record_id: str) -> Envelope | None:
    """The record with ``record_id`` rebuilt from its rows, as the file that held it."""
    rows = list(iter_envelopes(db, where="id = ?", params=[record_id]))
    return rows[0] if rows else None


def get_record(db: sqlite_utils.Database, record_id: str) -> dict[str, Any] | None:
    """The record with ``record_id`` as a plain dict (record fields plus derived columns)."""
    rows = list(iter_record_dicts(db, where="id = ?", params=[record_id]))
    return rows[0] if rows else None


def find_record_id(db: sqlite_utils.Database, key: str) -> str | None:
    """The id of the record named by ``key``: an id, a slug, or a page or JSON URL ending in one."""
    candidates = [key.strip()]
    tail = key.strip().rstrip("/").rsplit("/", 1)[-1]
    candidates += [tail, tail.removesuffix(".json")]
    for candidate in candidates:
        row = db.execute("SELECT id FROM records WHERE id = ? OR slug = ?", [candidate, candidate]).fetchone()
        if row:
            return row[0]
    return None


DERIVED_COLUMNS = ("datasetVersion", "function", "contentHash")


def iter_record_dicts(
    db: sqlite_utils.Database, where: str | None = None, params: list[Any] | None = None, batch: int = 1000
) -> Iterator[dict[str, Any]]:
    """Every record (or those matching ``where``) as a dict with its lists, in id order, a batch at a time.

    Besides the record's fields each dict has ``datasetVersion``, ``function`` and ``contentHash``.
    """
    columns = ", ".join(f'"{name}"' for name in (*SCALAR_FIELDS, *DERIVED_COLUMNS))
    sql = f"SELECT {columns} FROM records"
    if where:
        sql += f" WHERE {where}"
    sql += " ORDER BY id"
    cursor = db.execute(sql, params or [])
    while rows := cursor.fetchmany(batch):
        lists = _child_lists(db, [row[0] for row in rows])
        for row in rows:
            record = dict(zip((*SCALAR_FIELDS, *DERIVED_COLUMNS), row))
            for name in LIST_FIELDS:
                record[name] = lists[name].get(record["id"], [])
            yield record


def iter_envelopes(
    db: sqlite_utils.Database, where: str | None = None, params: list[Any] | None = None, batch: int = 1000
) -> Iterator[Envelope]:
    """Every record (or those matching ``where``), rebuilt as envelopes, in id order."""
    from errordb.records.schema import Envelope, Record

    for record in iter_record_dicts(db, where, params, batch):
        version = record.pop("datasetVersion")
        for name in DERIVED_COLUMNS[1:]:
            del record[name]
        # The rows were validated on the way in; constructing skips validating them again.
        yield Envelope.model_construct(record=Record.model_construct(**record), datasetVersion=version)


def iter_record_files(
    db: sqlite_utils.Database, where: str | None = None, params: list[Any] | None = None, batch: int = 1000
) -> Iterator[tuple[str, bytes]]:
    """(id, record file) of every record (or those matching ``where``), in id order: the bytes of
    :func:`errordb.records.schema.canonical_json` of its envelope, made from the row without a model."""
    from pydantic_core import PydanticSerializationError, to_json

    from errordb.records.schema import FIELD_NAMES, canonical_json

    for record in iter_record_dicts(db, where, params, batch):
        # The fields in the schema's order, which is the file's; the serialiser is the one
        # canonical_json's models use (tests/test_export.py compares the two).
        envelope = {"record": {name: record[name] for name in FIELD_NAMES}, "datasetVersion": record["datasetVersion"]}
        try:
            yield record["id"], to_json(envelope)
        except PydanticSerializationError:  # text the serialiser refuses: fail, or not, as canonical_json does
            from errordb.records.schema import Envelope, Record

            model = Envelope.model_construct(record=Record.model_construct(**envelope["record"]), datasetVersion=envelope["datasetVersion"])
            yield record["id"], canonical_json(model).encode("utf-8")


def _child_lists(db: sqlite_utils.Database, ids: list[str]) -> dict[str, dict[str, list[str]]]:
    marks = ",".join("?" * len(ids))
    sources = {"solutions": ("solutions", "text"), "preventionTips": ("prevention_tips", "text"), "tags": ("record_tags", "tag")}
    lists: dict[str, dict[str, list[str]]] = {}
    for name, (table, column) in sources.items():
        grouped: dict[str, list[str]] = {}
        sql = f"SELECT record_id, {column} FROM {table} WHERE record_id IN ({marks}) ORDER BY record_id, position"
        for record_id, value in db.execute(sql, ids):
            grouped.setdefault(record_id, []).append(value)
        lists[name] = grouped
    return lists


# The embedded default --------------------------------------------------------------------------


def bundled_records_dir() -> Path:
    """The records shipped with errordb: inside the installed package, or the source checkout's."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_bundled" / "records", package.parent / "records"):
        if candidate.is_dir():
            return candidate
    raise StoreError("the bundled records are missing from this installation; pass --db")


def cache_dir() -> Path:
    """Where errordb keeps the embedded default database (``$ERRORDB_CACHE`` to move it)."""
    if os.environ.get("ERRORDB_CACHE"):
        return Path(os.environ["ERRORDB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "errordb"


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
    # Not errordb.atomic.file_sha256: importing that module (ctypes, shutil, tempfile) adds
    # ~16 ms to every cold explain, which checks the embedded default first.
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


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


def resolve_db_path(db_path: str | os.PathLike[str] | None = None) -> Path:
    """``db_path``, else ``$ERRORDB_DB``, else the embedded default (built when needed)."""
    path = Path(db_path or os.environ.get("ERRORDB_DB") or default_db_path())
    if not path.exists():
        raise StoreError(f"{path}: no such database; create it with `errordb ingest --db {path}`")
    return path


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


def open_connection(db_path: str | os.PathLike[str] | None = None) -> sqlite3.Connection:
    """A read-only connection to the store: the fast path for explain and show.

    Every read function here accepts it as well as a sqlite_utils Database.
    """
    path = resolve_db_path(db_path)
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
