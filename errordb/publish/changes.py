"""Which error pages a change to the store can touch, so an incremental build renders only those.

An error page shows its record, its family (with counts), the records that share its message,
and its related errors. The related errors come from a few questions asked of the store
(:func:`errordb.publish.related.candidate_ids`); each question's answer is exactly the rows that
match its key inside a range of rowids (a :data:`~errordb.publish.related.Window`). So a changed
record X (added, edited, removed, or moved to another rowid) can change page Y only when

- X is Y's own record, or covered by a reproduction (whose transcript is read from files);
- Y's family changed (its text, or its record or repository count);
- X shares Y's messagePattern or errorMessage, before or after the change;
- X matches one of the questions Y asked and its rowid lies inside that question's range,
  before the change (X was in the answer) or after it (X would now be), and X changed in a
  way that can show: in what the questions match (rowid, file, family, tags, message words)
  or in what a page shows or weighs of a related record (the listed columns and tags). An
  edit of X's documentation, say, reaches X's page and the pages sharing its message only.

Which records changed since the previous build comes from the store's change log
(:func:`errordb.store.changed_since`, from the state of the store the cache names), or, when
the log cannot tell (another store, an ingest of too many records, a store that changed while
the previous build read it), from comparing every record's content hash with the cache's.

Every build writes what it needs to answer this next time into a *build cache*, a SQLite file
in errordb's cache folder (``builds/<hash of the output folder's path>.sqlite``; not in the
site, which is published, nor beside it): per record its content hash, rowid, family, file,
message hashes, message words and tags; per page the questions it asked; per family a
fingerprint and its counts; the state of the store it read. The cache belongs to one manifest
(it stores the manifest's hash): after a killed build, or with no cache, every page's inputs
are read again, as a full build does.

Nothing here is approximate in the unsafe direction: a word test that cannot be decided
exactly (stemming, phrases) counts as a match, so at worst a page is rendered that would have
been reused; the test suite compares incremental builds with full ones byte for byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Collection, Iterable, Iterator
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from errordb.atomic import file_sha256, process_alive
from errordb.publish.digest import Checkpoint
from errordb.publish.downloads import Segment
from errordb.publish.api_layout import ALL_JSONL, ALL_ZIP
from errordb.store import FTS_TOKENIZER, cache_dir, change_state, changed_since

#: Bumped when the cache's tables or their meaning change (an old cache is then ignored).
CACHE_FORMAT = "9"
_CHUNK = 500  # ids per IN (...) query
#: The name of the manifest's rows in the cache's ``checkpoints`` table.
MANIFEST_CHECKPOINTS = "manifest"
#: A question a page asked: (record id, *:data:`errordb.publish.related.Window`).
Asked = tuple[str, str, str, Any, Any]


def cache_path(out: Path) -> Path:
    """Where the build cache of the site in ``out`` lives."""
    name = hashlib.sha256(os.fsencode(Path(out).resolve())).hexdigest()[:24]
    return cache_dir() / "builds" / f"{name}.sqlite"


def _text_hash(text: str | None) -> str | None:
    return None if text is None else hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


class Stemmer:
    """Words as the store's full-text index sees them: SQLite's own tokenizer, in memory.

    White space always separates two of the tokenizer's tokens, so a text's terms are those
    of its white-space-separated words together; each word is stemmed once (a build stems
    every record's message and every word question, made of the same few thousand words).
    """

    #: Words remembered at most (then forgotten all at once): a bound on a build's memory.
    MOST = 200_000

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(f"CREATE VIRTUAL TABLE words USING fts5(text, tokenize='{FTS_TOKENIZER}')")
        self.conn.execute("CREATE VIRTUAL TABLE words_terms USING fts5vocab(words, 'instance')")
        self._known: dict[str, frozenset[str]] = {}

    def stems(self, texts: list[str]) -> list[set[str]]:
        """The index terms of each text."""
        words = [text.split() for text in texts]
        if len(self._known) > self.MOST:
            self._known.clear()
        new = sorted({word for each in words for word in each if word not in self._known})
        if new:
            self._known.update(zip(new, self._tokenize(new)))
        known = self._known
        return [set().union(*(known[word] for word in each)) for each in words]

    def _tokenize(self, texts: list[str]) -> list[frozenset[str]]:
        self.conn.execute("DELETE FROM words")
        self.conn.executemany("INSERT INTO words (rowid, text) VALUES (?, ?)", enumerate(texts, 1))
        found: list[set[str]] = [set() for _ in texts]
        for doc, term in self.conn.execute("SELECT doc, term FROM words_terms"):
            found[doc - 1].add(term)
        return [frozenset(terms) for terms in found]

    def close(self) -> None:
        self.conn.close()


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(items: list[Any]) -> str:
    return ",".join("?" * len(items))


# Facts about records, as the store holds them now --------------------------------------------

#: What a listing (of the site or the API), the search index or a sitemap shows of a record.
LISTED_COLUMNS = ("slug", "errorMessage", "errorClass", "severity", "repo", "filePath", "lineNumber", "messagePattern", "function", "backgroundTag")


_FACT_SQL = (
    "SELECT id, contentHash, rowid, backgroundTag, repo, filePath, messagePattern, errorMessage, "
    + ", ".join(f'"{name}"' for name in LISTED_COLUMNS)
    + " FROM records WHERE id IN ({})"
)


def record_facts(store: sqlite3.Connection, ids: list[str], stemmer: Stemmer) -> Iterator[dict[str, Any]]:
    """What the cache keeps of each record in ``ids`` (those still in the store)."""
    yield from with_stems(raw_facts(store, ids), stemmer)


def raw_facts(store: sqlite3.Connection, ids: list[str]) -> Iterator[dict[str, Any]]:
    """:func:`record_facts` without the stems, with the message instead (JSON-able: workers
    send them to the main process, read in the same transaction as the pages they rendered)."""
    for chunk in _chunks(ids):
        rows = store.execute(_FACT_SQL.format(_marks(chunk)), chunk).fetchall()
        tags: dict[str, list[str]] = {}
        for record_id, tag in store.execute(f"SELECT record_id, tag FROM record_tags WHERE record_id IN ({_marks(chunk)}) ORDER BY record_id, position", chunk):
            tags.setdefault(record_id, []).append(tag)
        for row in rows:
            record_id, content, rowid, family, repo, file_path, pattern, message = row[:8]
            listed = hashlib.blake2b(json.dumps([*row[8:], tags.get(record_id, [])]).encode("utf-8"), digest_size=8).hexdigest()
            yield {
                "id": record_id, "hash": content, "rid": rowid, "family": family, "file": f"{repo}\0{file_path}",
                "ph": _text_hash(pattern), "mh": _text_hash(message), "message": message, "tags": tags.get(record_id, []),
                "listed": listed,
            }  # fmt: skip


def with_stems(facts: Iterable[dict[str, Any]], stemmer: Stemmer) -> Iterator[dict[str, Any]]:
    """The facts with the message replaced by its index terms (``stems``), a batch at a time."""
    batch: list[dict[str, Any]] = []

    def flush() -> Iterator[dict[str, Any]]:
        for fact, words in zip(batch, stemmer.stems([fact["message"] for fact in batch])):
            yield {**{k: v for k, v in fact.items() if k != "message"}, "stems": words}
        batch.clear()

    for fact in facts:
        batch.append(fact)
        if len(batch) >= _CHUNK:
            yield from flush()
    yield from flush()


class Family(NamedTuple):
    """What a family's members' pages show of it, hashed, and the counts that go into it."""

    fingerprint: str
    records: int
    repos: int


def family_fingerprints(store: sqlite3.Connection, known: dict[str, Family] | None = None, touched: Iterable[str] = ()) -> dict[str, Family]:
    """Per family with records, a hash of everything its members' pages show of it (text and
    counts). With ``known`` (the previous build's), only the ``touched`` families (those a
    changed record was or is in) are counted again; the others keep their counts."""
    definitions = {row[0]: row[1:] for row in store.execute("SELECT tag, title, summary, explanation FROM families")}
    if known is None:
        sql = "SELECT backgroundTag, count(*), count(DISTINCT repo) FROM records WHERE backgroundTag IS NOT NULL GROUP BY 1"
        counts = {tag: (records, repos) for tag, records, repos in store.execute(sql)}
    else:
        touched = set(touched)
        counts = {tag: (family.records, family.repos) for tag, family in known.items() if tag not in touched}
        sql = "SELECT count(*), count(DISTINCT repo) FROM records WHERE backgroundTag = ?"
        for tag in sorted(touched - {None}):
            records, repos = store.execute(sql, [tag]).fetchone()
            if records:
                counts[tag] = (records, repos)
    families = {}
    for tag in sorted(counts):
        records, repos = counts[tag]
        row = [tag, records, repos, *definitions.get(tag, (None, None, None))]
        families[tag] = Family(hashlib.sha256(json.dumps(row).encode()).hexdigest(), records, repos)
    return families


# Reading the previous build's cache ---------------------------------------------------------


def manifest_is(manifest: Path, sha256: str, stamp: str) -> bool:
    """Whether the file ``manifest`` is the one whose SHA-256 a cache keeps: its stamp
    (:func:`file_stamp`, taken when the build wrote it) says so, or else its bytes do. The
    stamp spares reading it (~200 MB at a million records, 0.12 s).
    """
    return bool(sha256) and ((bool(stamp) and file_stamp(manifest) == stamp) or file_sha256(manifest) == sha256)


def open_cache(out: Path, manifest: Path) -> sqlite3.Connection | None:
    """The previous build's cache, or None when there is none that belongs to its manifest."""
    path = cache_path(out)
    if not path.is_file() or not manifest.is_file():
        return None
    try:
        # Read-write: a build killed while it updated the cache left a journal, which SQLite
        # rolls back here (a read-only connection could not).
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True)
        info = dict(conn.execute("SELECT key, value FROM info"))
        if info.get("format") == CACHE_FORMAT and manifest_is(manifest, info.get("manifest", ""), info.get("manifestStamp", "")):
            return conn
        conn.close()
    except (sqlite3.Error, OSError):
        pass
    return None


def affected_records(store: sqlite3.Connection, cache: sqlite3.Connection, covered: Iterable[str]) -> Changes:
    """What changed in the store since the previous build, and which pages that can reach.

    ``covered`` are the records with a reproduction (always rendered: their transcripts are
    files the cache does not follow).
    """
    changed_old, changed_new, logged = _changed(store, cache)
    affected = set(changed_old) | set(changed_new)
    present = {row[0] for chunk in _chunks(sorted(set(covered))) for row in store.execute(f"SELECT id FROM records WHERE id IN ({_marks(chunk)})", chunk)}
    affected |= present
    stemmer = Stemmer()
    try:
        before = list(_cached_facts(cache, sorted(changed_old)))
        now = list(record_facts(store, sorted(changed_new), stemmer))
    finally:
        stemmer.close()
    old_families = {row[0]: Family(*row[1:]) for row in cache.execute("SELECT tag, fingerprint, records, repos FROM families")}
    # From the change log, the cache's counts are those of the store as it was then, so only a
    # family a record came into or left is counted again (one family of 125,000 records: 0.3 s,
    # against 2 s for all of them at a million); without it, every family is.
    new_families = family_fingerprints(store, old_families, _recounted(before, now)) if logged else family_fingerprints(store)
    families = sorted(tag for tag in old_families.keys() | new_families.keys() if old_families.get(tag, (None,))[0] != new_families.get(tag, (None,))[0])
    for chunk in _chunks(families):
        affected.update(row[0] for row in store.execute(f"SELECT id FROM records WHERE backgroundTag IN ({_marks(chunk)})", chunk))
    # A record that looks the same to every question and to the pages that list it among their
    # related errors reaches only its message group (the "same message" box shows more of it).
    faces = {fact["id"]: _face(fact) for fact in before}
    unseen = {fact["id"] for fact in now if faces.get(fact["id"]) == _face(fact)}
    for fact in before + now:
        affected.update(_reached(cache, fact, windows=fact["id"] not in unseen))
    listed_before = {fact["id"]: fact["listed"] for fact in before}
    listed_now = {fact["id"]: fact["listed"] for fact in now}
    # Listings show a few columns of each record (and its tags and family): when no record came
    # or went and none of those changed, every listing is what it was.
    listings_same = listed_before == listed_now and not families and cache_info(cache, "families") == listing_inputs(store)["families"]
    return Changes(affected, set(changed_old) | set(changed_new), set(changed_old) - set(changed_new), listings_same, new_families)


@dataclass(frozen=True)
class Changes:
    """What :func:`affected_records` found."""

    #: Ids of the records whose pages may differ from the previous build.
    affected: set[str]
    #: Ids of the records added, changed or removed since.
    changed: set[str]
    #: Ids of those removed.
    removed: set[str]
    #: Whether every listing (pages, search index, sitemaps, the API's listings) is as it was,
    #: as far as the records go (the build also compares the dataset version and its plan).
    listings_same: bool
    #: The families' fingerprints now (:func:`family_fingerprints`).
    families: dict[str, Family]


def message_groups(store: sqlite3.Connection, cache: sqlite3.Connection, ids: set[str], changed: set[str]) -> list[list[str]]:
    """The groups (of two or more, each in id order) of the records that share a messagePattern
    or an errorMessage with one of ``ids``: what :func:`errordb.publish.pages.build_shared_message_table`
    finds for those records, without grouping the whole store.

    ``changed`` are the records added, changed or removed since the cache's build (those in the
    store among them are in ``ids``, as the affected records hold them): the cache's message
    hashes of every other record are those of its text now. Hashes only find candidates; the
    texts themselves decide.
    """
    texts: dict[str, tuple[str, str]] = {}

    def read(wanted: Iterable[str]) -> None:
        for chunk in _chunks(sorted(set(wanted) - texts.keys())):
            sql = f"SELECT id, messagePattern, errorMessage FROM records WHERE id IN ({_marks(chunk)})"
            texts.update((record_id, (pattern, message)) for record_id, pattern, message in store.execute(sql, chunk))

    read(ids)
    mine = set(texts)
    groups = []
    for position, column in enumerate(("ph", "mh")):
        values = {texts[record_id][position] for record_id in mine}
        hashes = sorted({_text_hash(value) for value in values})
        candidates = set(mine)
        for chunk in _chunks(hashes):
            candidates.update(row[0] for row in cache.execute(f"SELECT id FROM records WHERE {column} IN ({_marks(chunk)})", chunk) if row[0] not in changed)
        read(candidates)
        members: dict[str, list[str]] = {}
        for record_id in sorted(candidates & texts.keys()):
            value = texts[record_id][position]
            if value in values:
                members.setdefault(value, []).append(record_id)
        groups.extend(group for _, group in sorted(members.items()) if len(group) > 1)
    return groups


def listing_inputs(store: sqlite3.Connection) -> dict[str, str]:
    """What listings show beyond their records' columns, to keep in the cache's ``info``: the
    families table (a family is listed even without records, so it is not in the fingerprints)."""
    rows = store.execute("SELECT tag, title, summary, explanation FROM families ORDER BY tag").fetchall()
    return {"families": hashlib.sha256(json.dumps(rows).encode()).hexdigest()}


def store_state(store: sqlite3.Connection) -> dict[str, str]:
    """What the cache keeps of the store's change log (its last ingest), for the next build."""
    state = change_state(store)
    return {"storeSequence": str(state[0]), "storeHash": state[1]} if state else {"storeSequence": "", "storeHash": ""}


def _changed(store: sqlite3.Connection, cache: sqlite3.Connection) -> tuple[list[str], list[str], bool]:
    """Ids whose (content, rowid) differ: as the cache knew them, and as the store has them;
    and whether the store's change log said which to compare (else every record was)."""
    sequence = cache_info(cache, "storeSequence")
    logged = changed_since(store, int(sequence), cache_info(cache, "storeHash")) if sequence else None
    if logged is None:
        return *_compare_all(store, cache), False
    changed_old: list[str] = []
    changed_new: list[str] = []
    for chunk in _chunks(logged):
        old = {row[0]: row[1:] for row in cache.execute(f"SELECT id, hash, rid FROM records WHERE id IN ({_marks(chunk)})", chunk)}
        new = {row[0]: row[1:] for row in store.execute(f"SELECT id, contentHash, rowid FROM records WHERE id IN ({_marks(chunk)})", chunk)}
        changed_old.extend(record_id for record_id in chunk if record_id in old and old[record_id] != new.get(record_id))
        changed_new.extend(record_id for record_id in chunk if record_id in new and new[record_id] != old.get(record_id))
    return changed_old, changed_new, True


def _compare_all(store: sqlite3.Connection, cache: sqlite3.Connection) -> tuple[list[str], list[str]]:
    """:func:`_changed` by comparing every record, in one pass over both in id order."""
    old = cache.execute("SELECT id, hash, rid FROM records ORDER BY id")
    new = store.execute("SELECT id, contentHash, rowid FROM records ORDER BY id")
    changed_old: list[str] = []
    changed_new: list[str] = []
    a, b = next(old, None), next(new, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            changed_old.append(a[0])  # removed
            a = next(old, None)
        elif a is None or b[0] < a[0]:
            changed_new.append(b[0])  # added
            b = next(new, None)
        else:
            if (a[1], a[2]) != (b[1], b[2]):
                changed_old.append(a[0])
                changed_new.append(b[0])
            a, b = next(old, None), next(new, None)
    return changed_old, changed_new


def _cached_facts(cache: sqlite3.Connection, ids: list[str]) -> Iterator[dict[str, Any]]:
    for chunk in _chunks(ids):
        tags: dict[str, list[str]] = {}
        for record_id, tag in cache.execute(f"SELECT id, tag FROM tags WHERE id IN ({_marks(chunk)})", chunk):
            tags.setdefault(record_id, []).append(tag)
        sql = f"SELECT id, hash, rid, family, file, ph, mh, stems, listed FROM records WHERE id IN ({_marks(chunk)})"
        for record_id, content, rowid, family, file, ph, mh, stems, listed in cache.execute(sql, chunk):
            yield {
                "id": record_id, "hash": content, "rid": rowid, "family": family, "file": file, "ph": ph, "mh": mh,
                "stems": set(stems.split()), "tags": tags.get(record_id, []), "listed": listed,
            }  # fmt: skip


_INSIDE = "(lo IS NULL OR lo <= ?) AND (hi IS NULL OR hi >= ?)"


def _recounted(before: list[dict[str, Any]], now: list[dict[str, Any]]) -> set[str]:
    """The families whose counts (records, repositories) the change from ``before`` to ``now``
    can move: those of a record that came, went, or changed its family or its repository."""
    was = {fact["id"]: (fact["family"], fact["file"].split("\0")[0]) for fact in before}
    is_ = {fact["id"]: (fact["family"], fact["file"].split("\0")[0]) for fact in now}
    moved = [record_id for record_id in was.keys() | is_.keys() if was.get(record_id) != is_.get(record_id)]
    return {place[0] for record_id in moved for place in (was.get(record_id), is_.get(record_id)) if place is not None}


def _face(fact: dict[str, Any]) -> tuple[Any, ...]:
    """What the questions match of a record version and what related errors show or weigh of it."""
    return (fact["rid"], fact["file"], fact["family"], frozenset(fact["tags"]), frozenset(fact["stems"]), fact["listed"])


def _reached(cache: sqlite3.Connection, fact: dict[str, Any], windows: bool = True) -> set[str]:
    """The pages that share a message with record version ``fact`` and, with ``windows``, those
    it is (or would be) an answer of."""
    found: set[str] = set()
    for column in ("ph", "mh"):
        if fact[column] is not None:
            found.update(row[0] for row in cache.execute(f"SELECT id FROM records WHERE {column} = ?", [fact[column]]))
    if not windows:
        return found
    rowid = fact["rid"]

    def ask(kind: str, key: str, row: int | str) -> Iterator[tuple[str, str]]:
        yield from cache.execute(f"SELECT id, stems FROM windows WHERE kind = ? AND key = ? AND {_INSIDE}", [kind, key, row, row])

    found.update(page for page, _ in ask("file", fact["file"], rowid))
    if fact["family"]:
        found.update(page for page, _ in ask("family", fact["family"], rowid))
    for tag in fact["tags"]:
        found.update(page for page, _ in ask("tag", tag, fact["id"]))  # tag questions are asked by id
    stems = fact["stems"]
    for key in sorted(stems | {""}):
        found.update(page for page, needed in ask("words", key, rowid) if set(needed.split()) <= stems)
    return found


# Writing this build's cache -----------------------------------------------------------------

_SCHEMA = """
CREATE TABLE info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (id TEXT PRIMARY KEY, hash TEXT, rid INTEGER, family TEXT, file TEXT, ph TEXT, mh TEXT, stems TEXT NOT NULL, listed TEXT);
CREATE TABLE tags (id TEXT NOT NULL, tag TEXT NOT NULL);
-- lo and hi without a declared type, so without affinity: rowids (integers) for most kinds,
-- record ids (text, kept as text even when all digits) for tags.
CREATE TABLE windows (id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, lo, hi, stems TEXT NOT NULL);
CREATE TABLE families (tag TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, records INTEGER NOT NULL, repos INTEGER NOT NULL);
-- What differs between this build and the one before it, which is kept beside it as its spare
-- (info's "spare": the SHA-256 of that one's manifest): the next build brings the spare up to
-- date by rewriting these files (pages, by path, with the task of this build that wrote them,
-- NULL for a file the spare alone has; the API's record files, by record id).
CREATE TABLE spare_paths (path TEXT PRIMARY KEY, task INTEGER);
CREATE TABLE spare_records (id TEXT PRIMARY KEY);
-- The files each listing task of the build wrote (task: its index in the plan), for a next build
-- whose listings are all unchanged (see Changes.listings_same).
CREATE TABLE listing_entries (task INTEGER NOT NULL, path TEXT NOT NULL, key TEXT NOT NULL, sha TEXT NOT NULL);
-- The build's plan: each task (as JSON), where its lines are in the build's manifest (bytes
-- start to end, their separators included) and how many HTML pages it made. A next build whose
-- records and listed columns are the same has the same plan, and copies the lines of the tasks
-- it need not run.
CREATE TABLE tasks (task INTEGER PRIMARY KEY, plan TEXT NOT NULL, start INTEGER NOT NULL, "end" INTEGER NOT NULL, html INTEGER NOT NULL);
-- The segments of the build's api/all.jsonl.gz (errordb.publish.downloads.Segment), so the next build
-- copies those whose records did not change; info's "jsonl" says which file they describe.
CREATE TABLE segments (first TEXT NOT NULL, last TEXT NOT NULL, count INTEGER NOT NULL, "offset" INTEGER NOT NULL,
                       length INTEGER NOT NULL, crc INTEGER NOT NULL, size INTEGER NOT NULL);
-- The SHA-256 states saved while hashing the build's manifest (name "manifest") and its two bulk
-- downloads (by file name; info's "jsonl" and "zip" say which files), so the next build hashes
-- each only from its first change on (errordb.publish.digest).
CREATE TABLE checkpoints (name TEXT NOT NULL, "offset" INTEGER NOT NULL, state BLOB NOT NULL, PRIMARY KEY (name, "offset"));
"""
_INDEXES = """
CREATE INDEX tags_id ON tags (id);
CREATE INDEX windows_key ON windows (kind, key);
-- A page rendered again has its questions replaced: at a million records, finding them without
-- this index read all eight million (0.4-2 s a rebuild; making it takes a full build 2.4 s).
CREATE INDEX windows_id ON windows (id);
CREATE INDEX records_ph ON records (ph);
CREATE INDEX records_mh ON records (mh);
"""


class CacheWriter:
    """This build's cache of the site ``out``, written to ``path`` as the build goes.

    :meth:`add` takes, per rendering task, the questions (``windows``) and the facts
    (:func:`raw_facts`) of the pages rendered from their inputs, as the workers read them while
    rendering: a record that changes during the build then differs from its cached facts next
    time, and is rendered again. They are written as the tasks finish, while the workers render
    the next ones, rather than all after the last page. With ``update``, ``path`` is the
    previous build's cache, in which the rows of those records and of the ``removed`` ones are
    replaced; the other records' rows hold unchanged, as their pages were reused only because
    nothing they depend on changed. Without it, ``path`` is a new file and every record was
    rendered. Nothing is committed until :meth:`finish`: a build that fails leaves the previous
    cache as it was (one transaction, where copying it took 1.3 s at a million records).
    """

    def __init__(self, path: Path, removed: set[str], update: bool):
        self.update = update
        self.conn = sqlite3.connect(path)
        self.stemmer = Stemmer()
        self._word_terms: dict[str, tuple[str, str]] = {}
        if not update:
            # Indexed in finish(), once the rows are in: at a million records, inserting eight
            # million windows into an index on random keys was most of writing the cache.
            self.conn.executescript(_SCHEMA)
        else:
            _delete_rows(self.conn, sorted(removed))
            for table in ("checkpoints", "families", "info", "segments", "spare_paths", "spare_records", "tasks"):
                self.conn.execute(f"DELETE FROM {table}")

    def __enter__(self) -> CacheWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stemmer.close()
        self.conn.close()

    def add(self, windows: list[Asked], facts: list[dict[str, Any]]) -> None:
        """The questions and facts of one rendering task."""
        if self.update:
            _delete_rows(self.conn, sorted({window[0] for window in windows} | {fact["id"] for fact in facts}))
        _write_windows(self.conn, windows, self.stemmer, self._word_terms)
        _write_facts(self.conn, with_stems(facts, self.stemmer))

    def finish(
        self, out: Path, families: dict[str, Family], plan: list[tuple[Any, ...]], manifest: Manifest, downloads: Any, api: Path,
        spare: Spare, info: dict[str, str], listing_entries: Iterable[tuple[int, str, str, str]], kept_tasks: Collection[int] = (),
    ) -> None:
        """The rest, and commit. ``families``: the fingerprints read before the pages were.
        ``plan``: the build's tasks; ``manifest``: what it wrote of its manifest, task by task.
        ``downloads``: what :class:`errordb.publish.api.Downloads` says of the bulk downloads in the
        build's API folder ``api``. ``spare``: how this build differs from the one it
        replaces, kept as its spare. ``info``: more to keep in the ``info`` table (what the
        build's listings were made from); ``listing_entries``: (task, path, input hash, content
        hash) of every file its listing tasks wrote, but for the ``kept_tasks`` (of the same
        plan as the previous build's, not run), whose rows the previous cache has."""
        conn = self.conn
        rows = ((index, json.dumps(task), *lines) for index, (task, lines) in enumerate(zip(plan, manifest.tasks, strict=True)))
        conn.executemany("INSERT INTO tasks VALUES (?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO families VALUES (?, ?, ?, ?)", ((tag, *family) for tag, family in families.items()))
        conn.executemany("INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?, ?)", (astuple(segment) for segment in downloads.segments))
        files = sorted({**downloads.checkpoints, MANIFEST_CHECKPOINTS: manifest.checkpoints}.items())
        conn.executemany("INSERT INTO checkpoints VALUES (?, ?, ?)", ((name, point.offset, point.state) for name, points in files for point in points))
        conn.executemany("INSERT INTO spare_paths VALUES (?, ?)", spare.paths)
        conn.execute("DELETE FROM listing_entries WHERE task NOT IN (SELECT value FROM json_each(?))", [json.dumps(sorted(kept_tasks))])
        conn.executemany("INSERT INTO listing_entries VALUES (?, ?, ?, ?)", listing_entries)
        conn.executemany("INSERT INTO spare_records VALUES (?)", ((record_id,) for record_id in sorted(spare.records)))
        rows = [
            ("format", CACHE_FORMAT), ("manifest", manifest.sha256), ("manifestStamp", manifest.stamp), ("out", str(out.resolve())),
            ("jsonl", file_stamp(api / ALL_JSONL)), ("zip", file_stamp(api / ALL_ZIP)), ("spare", spare.manifest), ("spareStamp", spare.stamp),
            *sorted(info.items()),
        ]  # fmt: skip
        conn.executemany("INSERT INTO info VALUES (?, ?)", rows)
        if not self.update:
            conn.executescript(_INDEXES)
        conn.commit()


@dataclass(frozen=True)
class Spare:
    """How a build differs from the one it replaced, kept beside it (``manifest``: the SHA-256
    of that build's manifest, empty when it is not kept; ``stamp``: that file's
    :func:`file_stamp`; ``paths``: (path, the task of this build that wrote it or None) of each
    file that differs)."""

    manifest: str
    stamp: str
    paths: list[tuple[str, int | None]]
    records: set[str]


class TaskLines(NamedTuple):
    """Where one task's lines are in a manifest (bytes ``start`` to ``end``), and how many of its
    files are HTML pages."""

    start: int
    end: int
    html: int


@dataclass(frozen=True)
class Manifest:
    """What a build wrote of its manifest: its SHA-256, its :func:`file_stamp`, each task's
    lines, in plan order, and the SHA-256 states saved while hashing it."""

    sha256: str
    stamp: str
    tasks: list[TaskLines]
    checkpoints: list[Checkpoint] = field(default_factory=list)


def cache_info(cache: sqlite3.Connection, key: str) -> str:
    """One value of the cache's ``info`` table ("" when it has none): ``manifest`` (the SHA-256
    of its build's manifest; ``manifestStamp``, its :func:`file_stamp`), ``spare`` (that of the
    spare's, "" when none was kept; ``spareStamp``), ``jsonl`` and ``zip`` (the :func:`file_stamp`
    of the build's bulk downloads; ``spareJsonl`` and ``spareZip``, those of the spare's, as its
    build left them), and what :func:`listing_inputs` gave."""
    row = cache.execute("SELECT value FROM info WHERE key = ?", [key]).fetchone()
    return row[0] if row else ""


def load_stale(cache: sqlite3.Connection, work: sqlite3.Connection) -> set[str]:
    """Copy the cache's ``spare_paths`` into ``work``'s ``stale_paths``; returns ``spare_records``."""
    work.execute("CREATE TABLE stale_paths (path TEXT PRIMARY KEY, task INTEGER)")
    cursor = cache.execute("SELECT path, task FROM spare_paths")
    while rows := cursor.fetchmany(10_000):
        work.executemany("INSERT INTO stale_paths VALUES (?, ?)", rows)
    return {row[0] for row in cache.execute("SELECT id FROM spare_records")}


def load_listing_entries(cache: sqlite3.Connection, work: sqlite3.Connection) -> None:
    """Copy the cache's ``listing_entries`` into ``work`` (same table)."""
    work.execute("CREATE TABLE listing_entries (task INTEGER NOT NULL, path TEXT NOT NULL, key TEXT NOT NULL, sha TEXT NOT NULL)")
    work.executemany("INSERT INTO listing_entries VALUES (?, ?, ?, ?)", cache.execute("SELECT task, path, key, sha FROM listing_entries ORDER BY rowid"))
    work.execute("CREATE INDEX listing_entries_task ON listing_entries (task)")


def cached_plan(cache: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """The tasks of the cache's build, in order."""
    return [tuple(tuple(part) if isinstance(part, list) else part for part in json.loads(row[0])) for row in cache.execute("SELECT plan FROM tasks ORDER BY task")]


def task_lines(cache: sqlite3.Connection) -> list[TaskLines]:
    """The cache's :class:`TaskLines`, in plan order."""
    return [TaskLines(*row) for row in cache.execute('SELECT start, "end", html FROM tasks ORDER BY task')]


def file_stamp(path: Path) -> str:
    """Size, modification time and inode: enough to tell that a file of ours was replaced or edited."""
    try:
        status = path.stat()
    except OSError:
        return ""
    return f"{status.st_size}:{status.st_mtime_ns}:{status.st_ino}"


def cached_segments(cache: sqlite3.Connection, jsonl: Path) -> list[Segment] | None:
    """The segments of ``jsonl`` (the previous build's ``all.jsonl.gz``) the cache holds, or None
    when that file is not the one they describe any more."""
    stamp = cache_info(cache, "jsonl")
    if not stamp or stamp != file_stamp(jsonl):
        return None
    return [Segment(*row) for row in cache.execute('SELECT first, last, count, "offset", length, crc, size FROM segments ORDER BY "offset"')]


def cached_checkpoints(cache: sqlite3.Connection, name: str) -> list[Checkpoint]:
    """The SHA-256 checkpoints the cache holds for its build's file ``name`` (the manifest's
    name, or a bulk download's)."""
    rows = cache.execute('SELECT "offset", state FROM checkpoints WHERE name = ? ORDER BY "offset"', [name])
    return [Checkpoint(offset, bytes(state)) for offset, state in rows]


def download_checkpoints(cache: sqlite3.Connection, api: Path) -> dict[str, list[Checkpoint]]:
    """Per bulk download of ``api`` (the previous build's API folder), the SHA-256 checkpoints
    the cache holds for it: none for a file that is not the one they were saved for any more."""
    found: dict[str, list[Checkpoint]] = {}
    for name, key in ((ALL_JSONL, "jsonl"), (ALL_ZIP, "zip")):
        stamp = cache_info(cache, key)
        if stamp and stamp == file_stamp(api / name):
            found[name] = cached_checkpoints(cache, name)
    return found


def spare_downloads_kept(cache: sqlite3.Connection, api: Path) -> bool:
    """Whether the bulk downloads in ``api`` (the spare's API folder) are still the files the
    spare's own build wrote, by the stamps the cache kept of them."""
    stamps = [(cache_info(cache, key), file_stamp(api / name)) for name, key in ((ALL_JSONL, "spareJsonl"), (ALL_ZIP, "spareZip"))]
    return all(kept and kept == now for kept, now in stamps)


def _delete_rows(conn: sqlite3.Connection, ids: list[str]) -> None:
    for chunk in _chunks(ids):
        for table in ("records", "tags", "windows"):
            conn.execute(f"DELETE FROM {table} WHERE id IN ({_marks(chunk)})", chunk)


def _write_windows(conn: sqlite3.Connection, windows: Iterable[Asked], stemmer: Stemmer, known: dict[str, tuple[str, str]]) -> None:
    """Insert one task's questions; a words question is kept as its longest term and all its
    terms, ``known`` by its text across tasks (most are a single common word)."""
    windows = list(windows)
    if len(known) > Stemmer.MOST:
        known.clear()
    texts = sorted({window[2] for window in windows if window[1] == "words" and window[2] not in known})
    for text, needed in zip(texts, stemmer.stems(texts)):
        known[text] = (max(needed, key=lambda s: (len(s), s)) if needed else "", " ".join(sorted(needed)))
    rows = []
    for page, kind, key, lo, hi in windows:
        if kind == "words":
            longest, terms = known[key]
            rows.append((page, kind, longest, lo, hi, terms))
        else:
            rows.append((page, kind, key, lo, hi, ""))
    conn.executemany("INSERT INTO windows VALUES (?, ?, ?, ?, ?, ?)", rows)


def _write_facts(conn: sqlite3.Connection, facts: Iterable[dict[str, Any]]) -> None:
    facts = list(facts)
    conn.executemany(
        "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(fact["id"], fact["hash"], fact["rid"], fact["family"], fact["file"], fact["ph"], fact["mh"], " ".join(sorted(fact["stems"])), fact["listed"]) for fact in facts],
    )
    conn.executemany("INSERT INTO tags VALUES (?, ?)", [(fact["id"], tag) for fact in facts for tag in fact["tags"]])


@contextlib.contextmanager
def new_cache_file(out: Path) -> Iterator[Path]:
    """A fresh file beside the cache; moved over it by :func:`install_cache`, removed on error."""
    target = cache_path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f"{target.name}.new-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not process_alive(int(pid)):
            stale.unlink(missing_ok=True)  # left by a killed build
    path = target.parent / f"{target.name}.new-{os.getpid()}"
    path.unlink(missing_ok=True)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def install_cache(out: Path, path: Path | None) -> None:
    """Move the new cache ``path`` over the site's (None: it was updated in place), and remove
    the caches of sites that are gone."""
    target = cache_path(out)
    if path is not None:
        # A journal left by a killed update of the old cache must not be applied to the new one.
        Path(f"{target}-journal").unlink(missing_ok=True)
        os.replace(path, target)
    _prune_orphans(target.parent)


def forget(out: Path) -> None:
    """Remove the build cache of the site in ``out`` (a site about to be removed)."""
    with contextlib.suppress(OSError):
        cache_path(out).unlink(missing_ok=True)
        Path(f"{cache_path(out)}-journal").unlink(missing_ok=True)


def _prune_orphans(folder: Path) -> None:
    """Remove the caches of sites whose folder is gone (~1.2 KB a record each)."""
    for cache in sorted(folder.glob("*.sqlite")):
        with contextlib.suppress(sqlite3.Error, OSError):
            conn = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
            try:
                row = conn.execute("SELECT value FROM info WHERE key = 'out'").fetchone()
            finally:
                conn.close()
            if row is None or not Path(row[0]).is_dir():
                cache.unlink(missing_ok=True)
