"""The SQLite store: records normalised into tables with sqlite-utils, and read back.

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

:func:`ingest` is idempotent (unchanged records are not rewritten) and atomic (one transaction;
on any error nothing is left changed, and a database file it created is removed again).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import operator
import os
import re
import sqlite3
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, groupby, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from errordb.errors import ErrordbError, RecordError
from errordb.records.families import Family, families_for, load_families
from errordb.records.patterns import index_key, pattern_words, rarest_word
from errordb.records.snippet import enclosing_function

if TYPE_CHECKING:  # pydantic and sqlite_utils cost ~100 ms each to import: reading must not need them
    from concurrent.futures import ProcessPoolExecutor

    import sqlite_utils

    from errordb.records.schema import Envelope

#: The record's fields in file order, and which of them are lists (as in errordb.records.schema).
LIST_FIELDS = ("solutions", "preventionTips", "tags")
SCALAR_FIELDS = (
    "id", "repo", "slug", "errorCode", "errorMessage", "messagePattern", "errorType", "errorClass",
    "httpStatus", "severity", "filePath", "lineNumber", "sourceCode", "sourceCodeStart", "sourceCodeEnd",
    "githubUrl", "documentation", "triggerScenarios", "commonSituations", "exampleFix", "handlingStrategy",
    "validationCode", "typeGuard", "tryCatchPattern", "backgroundTag", "analyzedSha", "analyzedAt", "schemaVersion",
)  # fmt: skip

#: Bumped whenever the table layout changes; a database of another layout is refused.
STORE_VERSION = "4"
#: Records written at a time (and between two calls of ingest's ``progress``).
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
    "datasetVersion": str, "contentHash": str, "function": str, "matchKey": str, "textHash": str,
}  # fmt: skip
#: A ``records`` row's values in column order, from its dict (one C call instead of a generator).
_RECORD_VALUES = operator.itemgetter(*RECORD_COLUMNS)
_INSERT_RECORD = f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) VALUES ({', '.join('?' * len(RECORD_COLUMNS))})"
#: The same values with the id moved last, for :data:`_UPDATE_RECORD`.
_UPDATE_VALUES = operator.itemgetter(*list(RECORD_COLUMNS)[1:], "id")
_UPDATE_RECORD = f"UPDATE records SET {', '.join(f'[{name}] = ?' for name in list(RECORD_COLUMNS)[1:])} WHERE id = ?"
FTS_RECORD_COLUMNS = ["errorMessage", "documentation", "triggerScenarios", "commonSituations"]
#: The full-text tokenizer (Porter stemming over unicode61); errordb.publish.changes stems with it too.
FTS_TOKENIZER = "porter"
CHILD_TABLES = {"solutions": "solutions", "prevention_tips": "preventionTips"}
#: The child tables, their text column, and the place of their list in :attr:`Prepared.lists`.
_CHILDREN = (("solutions", "text", 0), ("prevention_tips", "text", 1), ("record_tags", "tag", 2))


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


@contextlib.contextmanager
def _opened_for_ingest(db_path: Path) -> Iterator[sqlite_utils.Database]:
    """The store at ``db_path`` opened for one ingest, closed after it.

    A store that does not exist yet is built beside it, as ``.<name>.<pid>.partial``, with its
    rollback journal in memory and no syncing (nothing to protect yet: a failure discards the
    file), then linked into place once complete and switched to WAL, as :func:`connect` makes
    new files: no reader ever sees a half-built store, and no page is written twice (to the
    log, then to the file). A killed ingest's partial file is removed by the next ingest beside it.
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
        not_null={"repo", "slug", "errorMessage", "messagePattern", "errorClass", "filePath", "lineNumber"},
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


# Ingest -----------------------------------------------------------------------------------------


def ingest(
    paths: Iterable[str | os.PathLike[str]] | None = None,
    db_path: str | os.PathLike[str] = "errordb.db",
    *,
    prune: bool = False,
    families_path: str | os.PathLike[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestReport:
    """Load record files into the store at ``db_path``, all or nothing.

    ``paths`` are files (``.json``, ``.jsonl``) or folders walked recursively; ``None`` means the
    bundled records. With ``prune``, records in the store that none of the files hold are
    removed. ``progress`` is called with the number of records read so far.

    The records are read in file order, validated (:class:`_Validation`) and written a batch at
    a time, all in one transaction; the first bad record in file order is raised as a
    :class:`RecordError` and nothing is changed. A text the store was built from (its
    ``textHash``) is not validated again: re-ingesting a folder costs little more than reading it.
    """
    started = time.perf_counter()
    paths = [Path(p) for p in paths] if paths is not None else [bundled_records_dir()]
    families_file = Path(families_path) if families_path else families_for(paths)
    families = load_families(families_file) if families_file else {}
    with _opened_for_ingest(Path(db_path)) as db, db.atomic():
        db.execute(f"PRAGMA cache_size = -{INGEST_CACHE_KIB}")
        ensure_schema(db)
        _write_families(db, families)
        writer = _Writer(db)
        with _Validation() as validation:
            read = 0
            for batch in _batches(writer.distinct(validation.records(_texts(paths, writer.known))), BATCH_SIZE):
                writer.write(batch)
                read += len(batch)
                if progress:
                    progress(read)
        writer.finish(prune)
    writer.report.seconds = time.perf_counter() - started
    return writer.report


#: Page cache of an ingest's connection (KiB): the indexes on random keys (slug, file, index
#: word...) are written all over the file, and in SQLite's default 2 MB their pages are read
#: again and again (~10% of the writing process's CPU at 100,000 records).
INGEST_CACHE_KIB = 65536


class Prepared(NamedTuple):
    """One validated record, as ingest writes it."""

    id: str
    source: str  # the file, or file:line, it came from
    row: dict[str, Any]  # its ``records`` row; textHash and matchKey are set by the writing process
    words: tuple[str, ...]  # errordb.records.patterns.pattern_words of its messagePattern
    tags: list[str]
    lists: str  # its child rows' text, as JSON: [solutions, preventionTips, tags]


def _prepare(source: str, text: str) -> Prepared:
    """Parse and validate one record's JSON text and derive its row; raises RecordError."""
    from errordb.records.loader import parse_envelope
    from errordb.records.schema import canonical_json

    envelope = parse_envelope(source, text)
    record = envelope.record
    row = {name: getattr(record, name) for name in SCALAR_FIELDS}
    row["datasetVersion"] = envelope.datasetVersion
    row["contentHash"] = hashlib.sha256(canonical_json(envelope).encode("utf-8")).hexdigest()
    row["function"] = enclosing_function(record.sourceCode, record.sourceCodeStart, record.lineNumber)
    lists = json.dumps([record.solutions, record.preventionTips, record.tags], ensure_ascii=False, separators=(",", ":"))
    return Prepared(record.id, source, row, pattern_words(record.messagePattern), record.tags, lists)


def _prepare_chunk(texts: list[tuple[str, str]]) -> tuple[list[Prepared], tuple[Any, ...] | None]:
    """:func:`_prepare` of each ``(source, text)`` up to the first bad one, whose RecordError comes
    back as its fields (raised by the writing process in its place)."""
    done = []
    # Validation makes many short-lived objects and no cycles: the cyclic collector's passes
    # would cost ~15% of it, and reference counting frees the garbage all the same.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for source, text in texts:
            done.append(_prepare(source, text))
    except RecordError as exc:
        return done, (exc.source, exc.record_id, exc.field, exc.problem)
    finally:
        if collecting:
            gc.enable()
    return done, None


class _Text(NamedTuple):
    """A record's text as read. ``id`` is that of the stored record read from the same text (not
    validated again; ``text`` is then None), else None."""

    source: str
    text_hash: str
    id: str | None
    text: str | None


def _texts(paths: list[Path], known: dict[str, str]) -> Iterator[_Text | RecordError]:
    """Each record text under ``paths`` in file order; a file that cannot be read comes as its
    RecordError, in its place. ``known`` maps the text hashes of the stored records to their ids."""
    from errordb.records.loader import record_texts

    try:
        for source, text in record_texts(paths):
            # Stripped: a .json file with or without its last newline, or the same text as a
            # .jsonl line, is the same record.
            digest = hashlib.sha256(text.strip().encode("utf-8")).hexdigest()
            record_id = known.get(digest)
            yield _Text(source, digest, record_id, None if record_id else text)
    except RecordError as exc:
        yield exc


#: Records validated per task: enough that handing them to a worker is a small share of the work.
CHUNK_SIZE = 250
#: Chunks handed out ahead of the writer per worker: enough to keep the workers busy while it
#: writes a batch or full-text rows; each holds its texts, then its results (~1.5 MB), in the
#: writing process.
AHEAD_PER_WORKER = 8


class _Validation:
    """Record texts validated in file order, in worker processes once two chunks of them wait
    (a few edited records are validated in this process, without starting any).

    Where workers are forked (Linux), they inherit the open store: they never touch it.
    """

    def __init__(self) -> None:
        self.workers = os.cpu_count() or 1
        self.pool: ProcessPoolExecutor | None = None
        # [units, their texts to validate, the future of that validation (None: not handed out)]
        self.pending: deque[list[Any]] = deque()

    def __enter__(self) -> _Validation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def records(self, units: Iterator[_Text | RecordError]) -> Iterator[Prepared | _Text]:
        """Each unit in order: validated (:class:`Prepared`), or as it is when the store holds its
        text. The first bad record's RecordError is raised in its place."""
        while chunk := list(islice(units, CHUNK_SIZE)):
            self._add(chunk)
            while len(self.pending) > AHEAD_PER_WORKER * self.workers:
                yield from self._next()
        while self.pending:
            yield from self._next()

    def _add(self, chunk: list[_Text | RecordError]) -> None:
        texts = [(unit.source, unit.text) for unit in chunk if isinstance(unit, _Text) and unit.id is None]
        # The texts go with the task alone: once it is done, only its results are held.
        units = [unit._replace(text=None) if isinstance(unit, _Text) else unit for unit in chunk]
        self.pending.append([units, texts, None])
        waiting = [entry for entry in self.pending if entry[1] and entry[2] is None]
        if self.workers > 1 and (len(waiting) > 1 or (self.pool and waiting)):
            if self.pool is None:
                from concurrent.futures import ProcessPoolExecutor

                # Imported here first, so that forked workers inherit them instead of importing.
                import errordb.records.loader
                import errordb.records.schema  # noqa: F401

                self.pool = ProcessPoolExecutor(self.workers)
            for entry in waiting:
                entry[2] = self.pool.submit(_prepare_chunk, entry[1])
                entry[1] = None

    def _next(self) -> Iterator[Prepared | _Text]:
        units, texts, future = self.pending.popleft()
        done, error = future.result() if future is not None else _prepare_chunk(texts)
        validated = iter(done)
        for unit in units:
            if isinstance(unit, RecordError):
                raise unit
            if unit.id is not None:
                yield unit
                continue
            item = next(validated, None)
            if item is None:
                raise RecordError(*error)
            item.row["textHash"] = unit.text_hash
            yield item


def _batches(items: Iterator[Prepared | _Text], size: int) -> Iterator[list[Prepared | _Text]]:
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


#: New records whose full-text rows are written by one statement (FTS5 writes a segment of its
#: index per statement, so not a row at a time through the triggers); few enough that their
#: text is still in SQLite's page cache when it is read back.
FULL_TEXT_EVERY = 10_000
#: The triggers that index a new row's text, replaced by :meth:`_Writer._index_text` meanwhile.
_INSERT_TRIGGERS = ("records_ai", "solutions_ai")


class _Writer:
    """Writes one ingest's records into the store, a batch at a time, in its transaction."""

    def __init__(self, db: sqlite_utils.Database):
        self.db = db
        self.report = IngestReport()
        self.fresh = db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None
        #: textHash -> id of every stored record.
        self.known: dict[str, str] = {} if self.fresh else dict(db.execute("SELECT textHash, id FROM records"))
        self.seen: dict[str, str] = {}  # id -> source of every record read
        self.ensured: set[tuple[str, str]] = set()  # parent rows (table, name) made or found
        self.deferred: list[tuple[Prepared, bool]] = []  # (record, is an update) whose slug was taken
        self.triggers: list[str] | None = None  # the CREATE statements of the dropped insert triggers
        self.unindexed_after: tuple[int, int] | None = None  # rowids of records, solutions
        self.unindexed = 0

    def distinct(self, items: Iterator[Prepared | _Text]) -> Iterator[Prepared | _Text]:
        """``items``, refusing an id met before (the later record is named, with the earlier's file)."""
        for item in items:
            if item.id in self.seen:
                raise RecordError(item.source, item.id, "id", f"duplicate id: {self.seen[item.id]} has a record with the same id")
            self.seen[item.id] = item.source
            yield item

    def write(self, batch: list[Prepared | _Text]) -> None:
        """Add the batch's new records, update its changed ones, count the others unchanged."""
        validated = [item for item in batch if isinstance(item, Prepared)]
        self.report.unchanged += len(batch) - len(validated)
        if not validated:
            return
        stored = {} if self.fresh else {row[0]: row[1] for row in self._select("id, contentHash", "id", [i.id for i in validated])}
        added, updated, retexted = [], [], []
        for item in validated:
            if item.id not in stored:
                added.append(item)
            elif stored[item.id] != item.row["contentHash"]:
                updated.append(item)
            else:  # the same record in another text (reformatted): only its textHash changes
                retexted.append((item.row["textHash"], item.id))
        self.report.unchanged += len(retexted)
        self.db.conn.executemany("UPDATE records SET textHash = ? WHERE id = ?", retexted)
        holders = {row[0]: row[1] for row in self._select("slug, id", "slug", [item.row["slug"] for item in added + updated])}
        claimed: tuple[list[Prepared], list[Prepared]] = ([], [])
        for item in added + updated:
            is_update = item.id in stored
            # A slug another record holds waits for the end: that record may give it up later.
            if holders.setdefault(item.row["slug"], item.id) != item.id:
                self.deferred.append((item, is_update))
            else:
                claimed[is_update].append(item)
        self._store(*claimed)

    def finish(self, prune: bool) -> None:
        """Prune, store the records that waited for their slug, and bring derived data up to date."""
        db, report = self.db, self.report
        if prune and not self.fresh:  # an empty store has nothing the files do not hold
            report.removed = _prune(db, self.seen)
        for item, is_update in self.deferred:
            holder = db.execute("SELECT id FROM records WHERE slug = ?", [item.row["slug"]]).fetchone()
            if holder is not None and holder[0] != item.id:
                raise RecordError(item.source, item.id, "slug", f"{item.row['slug']!r} is already the slug of record {holder[0]}")
            self._store(*(([], [item]) if is_update else ([item], [])))
        self._index_text()
        for sql in self.triggers or []:
            db.execute(sql)
        if report.added or report.updated or report.removed:
            _rekey(db)
            _drop_orphans(db)
            _merge_full_text(db, report.added + report.updated + report.removed)
            _write_meta(db)

    def _select(self, columns: str, key: str, values: list[str]) -> list[tuple[Any, ...]]:
        """``columns`` of the records whose ``key`` is one of ``values``."""
        sql = f"SELECT {columns} FROM records WHERE {key} IN (SELECT value FROM json_each(?))"
        return self.db.execute(sql, [json.dumps(values)]).fetchall()

    def _store(self, added: list[Prepared], updated: list[Prepared]) -> None:
        db, changed = self.db, added + updated
        if not changed:
            return
        _ensure_parents(db, changed, self.ensured)
        if updated:
            ids = [item.id for item in updated]
            _count_terms(db, [pattern_words(row[0]) for row in self._select("messagePattern", "id", ids)], -1)
            for table, _, _ in _CHILDREN:
                db.execute(f"DELETE FROM {table} WHERE record_id IN (SELECT value FROM json_each(?))", [json.dumps(ids)])
        _count_terms(db, [item.words for item in changed], +1)
        _assign_keys(db, changed)
        if self.triggers is None:  # only now: an ingest that changes nothing writes nothing
            self.triggers = _drop_insert_triggers(db)
        if self.unindexed_after is None:  # after the deletes above, which can lower the largest rowid
            self.unindexed_after = (_max_rowid(db, "records"), _max_rowid(db, "solutions"))
        # executemany: with foreign keys checked, faster than statements of many rows each.
        db.conn.executemany(_UPDATE_RECORD, map(_UPDATE_VALUES, [item.row for item in updated]))
        db.conn.executemany(_INSERT_RECORD, map(_RECORD_VALUES, [item.row for item in added]))
        # One statement a table: a JSON object of each record's lists by id (ids are hex digits,
        # the lists JSON already), a third cheaper than executemany of the rows.
        lists = "{" + ",".join(f'"{item.id}":{item.lists}' for item in changed) + "}"
        for table, column, place in _CHILDREN:
            db.execute(
                f"INSERT INTO {table} (record_id, position, {column}) SELECT record.key, item.key, item.value "
                f"FROM json_each(?) AS record, json_each(record.value, '$[{place}]') AS item",
                [lists],
            )
        self.report.added += len(added)
        self.report.updated += len(updated)
        self.unindexed += len(changed)
        if self.unindexed >= FULL_TEXT_EVERY:
            self._index_text()

    def _index_text(self) -> None:
        """Write the full-text rows of the records and solutions inserted since the last time.

        New rows get rowids after the largest one (SQLite's rule until the largest possible
        rowid, which counting from 1 never reaches); an updated record's own row is reindexed by
        its update trigger, its solutions are new rows.
        """
        if self.unindexed_after is None:
            return
        records, solutions = self.unindexed_after
        columns = ", ".join(FTS_RECORD_COLUMNS)
        self.db.execute(
            f"INSERT INTO records_fts (rowid, {columns}) SELECT rowid, {columns} FROM records WHERE rowid > ? ORDER BY rowid",
            [records],
        )
        self.db.execute(
            "INSERT INTO solutions_fts (rowid, text) SELECT rowid, text FROM solutions WHERE rowid > ? ORDER BY rowid",
            [solutions],
        )
        self.unindexed_after, self.unindexed = None, 0


def _max_rowid(db: sqlite_utils.Database, table: str) -> int:
    return db.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0


def _drop_insert_triggers(db: sqlite_utils.Database) -> list[str]:
    """Drop the full-text insert triggers; returns the statements that create them again."""
    found = db.execute(
        f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN ({','.join('?' * len(_INSERT_TRIGGERS))}) ORDER BY name",
        _INSERT_TRIGGERS,
    ).fetchall()
    for name, _ in found:
        db.execute(f"DROP TRIGGER [{name}]")
    return [sql for _, sql in found]


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
    sql = "SELECT term, df FROM terms WHERE term IN (SELECT value FROM json_each(?))"
    return dict(db.execute(sql, [json.dumps(sorted(words))]).fetchall())


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


def _ensure_parents(db: sqlite_utils.Database, items: list[Prepared], ensured: set[tuple[str, str]]) -> None:
    """Give the repositories, tags and families ``items`` name a row where they have none;
    ``ensured`` holds the (table, name) pairs this ingest has seen to already."""
    wanted = {("repos", item.row["repo"]) for item in items}
    wanted.update(("tags", tag) for item in items for tag in item.tags)
    # A backgroundTag without an entry in families.toml still needs its row (`check` reports it).
    wanted.update(("families", item.row["backgroundTag"]) for item in items if item.row["backgroundTag"])
    new = sorted(wanted - ensured)
    db.conn.executemany(
        "INSERT OR IGNORE INTO repos (id, owner, name, url) VALUES (?, ?, ?, ?)",
        [(repo, *repo.split("/", 1), f"https://github.com/{repo}") for table, repo in new if table == "repos"],
    )
    db.conn.executemany("INSERT OR IGNORE INTO tags (name) VALUES (?)", [(name,) for table, name in new if table == "tags"])
    db.conn.executemany("INSERT OR IGNORE INTO families (tag) VALUES (?)", [(name,) for table, name in new if table == "families"])
    ensured.update(new)


def _prune(db: sqlite_utils.Database, seen: dict[str, str]) -> int:
    """Remove the records none of this ingest's files held; returns how many."""
    gone = json.dumps([record_id for (record_id,) in db.execute("SELECT id FROM records") if record_id not in seen])
    ids = "(SELECT value FROM json_each(?))"
    patterns = [row[0] for row in db.execute(f"SELECT messagePattern FROM records WHERE id IN {ids}", [gone])]
    if patterns:
        _count_terms(db, map(pattern_words, patterns), -1)
        for table, _, _ in _CHILDREN:
            db.execute(f"DELETE FROM {table} WHERE record_id IN {ids}", [gone])
        db.execute(f"DELETE FROM records WHERE id IN {ids}", [gone])
    return len(patterns)


def _drop_orphans(db: sqlite_utils.Database) -> None:
    db.execute("DELETE FROM repos WHERE id NOT IN (SELECT repo FROM records)")
    db.execute("DELETE FROM tags WHERE name NOT IN (SELECT tag FROM record_tags)")


#: An ingest that writes at least this share of the store's records merges its full-text indexes.
MERGE_SHARE = 0.1


def _merge_full_text(db: sqlite_utils.Database, written: int) -> None:
    """Merge each full-text index into one segment after an ingest that wrote much of the store.

    FTS5 keeps an index as segments and merges them only a few at a time, so a large ingest
    leaves several, and every full-text question reads each of them. Merging rewrites the whole
    index, so a small ingest (one edited record, say) leaves it to FTS5's own merging.
    """
    if written < MERGE_SHARE * db.execute("SELECT count(*) FROM records").fetchone()[0]:
        return
    for table in ("records_fts", "solutions_fts"):
        db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


def _write_meta(db: sqlite_utils.Database) -> None:
    """The ``meta`` table's dataset version, record count and content hash, as the records now are.

    The content hash is the one docs/api.md defines: the records in buckets by the first three
    hex digits of their id, each bucket the SHA-256 of its ``<id>:<contentHash>\\n`` lines in id
    order, and the whole the SHA-256 of the non-empty buckets' ``<bucket>:<bucket hash>\\n``
    lines in bucket order.
    """
    whole = hashlib.sha256()
    # Sorted here: read in id order, through the index on ids, the rows cost 3-6 times as much.
    rows = sorted(db.execute("SELECT id, contentHash FROM records"))
    for bucket, records in groupby(rows, key=lambda row: row[0][:3]):
        digest = hashlib.sha256("".join(f"{record_id}:{record_hash}\n" for record_id, record_hash in records).encode())
        whole.update(f"{bucket}:{digest.hexdigest()}\n".encode())
    count, version = db.execute("SELECT count(*), max(datasetVersion) FROM records").fetchone()
    db["meta"].upsert_all(
        [
            {"key": "datasetVersion", "value": version},
            {"key": "recordCount", "value": str(count)},
            {"key": "contentHash", "value": whole.hexdigest()},
        ],
        pk="key",
    )


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
