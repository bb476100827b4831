"""Ingest: record files into the store, idempotently and all or nothing.

:func:`ingest` is idempotent (unchanged records are not rewritten) and atomic (one transaction;
on any error nothing is left changed, and a database file it created is removed again).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import operator
import os
import re
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, groupby, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from errordb.errors import RecordError
from errordb.records.families import Family, dataset_site_url, families_for, load_families
from errordb.records.patterns import index_key, pattern_words, rarest_word
from errordb.records.snippet import enclosing_function
from errordb.records.loader import bundled_records_dir
from errordb.store.database import (
    FTS_RECORD_COLUMNS, RECORD_COLUMNS, SCALAR_FIELDS, STORE_PAGE_SIZE, StoreError, _open, _remove_dead_partials,
    _with_companions, connect, ensure_schema,
)

if TYPE_CHECKING:  # pydantic and sqlite_utils cost ~100 ms each to import: reading must not need them
    from concurrent.futures import ProcessPoolExecutor

    import sqlite_utils



#: Records written at a time (and between two calls of ingest's ``progress``).
BATCH_SIZE = 2000


#: After an ingest, records whose index word is in more patterns than this get a rarer one.
REKEY_FREQUENCY = 32


#: A ``records`` row's values in column order, from its dict (one C call instead of a generator).
_RECORD_VALUES = operator.itemgetter(*RECORD_COLUMNS)


_INSERT_RECORD = f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) VALUES ({', '.join('?' * len(RECORD_COLUMNS))})"


#: The same values with the id moved last, for :data:`_UPDATE_RECORD`.
_UPDATE_VALUES = operator.itemgetter(*list(RECORD_COLUMNS)[1:], "id")


_UPDATE_RECORD = f"UPDATE records SET {', '.join(f'[{name}] = ?' for name in list(RECORD_COLUMNS)[1:])} WHERE id = ?"


#: The child tables, their text column, and the place of their list in :attr:`Prepared.lists`.
_CHILDREN = (("solutions", "text", 0), ("prevention_tips", "text", 1), ("record_tags", "tag", 2))


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
    site = dataset_site_url(paths)
    with _opened_for_ingest(Path(db_path)) as db, db.atomic():
        db.execute(f"PRAGMA cache_size = -{INGEST_CACHE_KIB}")
        ensure_schema(db)
        _write_families(db, families)
        _write_site_url(db, site)
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
    row["function"] = record.functionName or enclosing_function(record.sourceCode, record.sourceCodeStart, record.lineNumber)
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


def _write_site_url(db: sqlite_utils.Database, site: str | None) -> None:
    """The dataset's own site URL (its ``dataset.toml``) in ``meta``, where explain and show find
    it; a dataset without one removes what an earlier ingest kept. Nothing is written unchanged."""
    stored = db.execute("SELECT value FROM meta WHERE key = 'siteUrl'").fetchone()
    if (stored[0] if stored else None) == site:
        return
    if site is None:
        db.execute("DELETE FROM meta WHERE key = 'siteUrl'")
    else:
        db["meta"].upsert({"key": "siteUrl", "value": site}, pk="key")


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
    wanted = {("repos", item.row["repo"]) for item in items if item.row["repo"]}
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
    drafts, sources = db.execute("SELECT count(*), count(DISTINCT distribution) FROM records WHERE distribution IS NOT NULL").fetchone()
    db["meta"].upsert_all(
        [
            {"key": "datasetVersion", "value": version},
            {"key": "recordCount", "value": str(count)},
            {"key": "contentHash", "value": whole.hexdigest()},
            # What explain says it searched when nothing matches (errordb learn's drafts).
            {"key": "learnedDrafts", "value": str(drafts)},
            {"key": "learnedDistributions", "value": str(sources)},
        ],
        pk="key",
    )
