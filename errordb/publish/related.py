"""Related errors for an error page: computed from the store, never hand-listed.

Two steps, so the ranking is testable without a database:

1. :func:`candidate_ids` asks a few cheap, indexed questions of the store: records raised in
   the same function or the same file of the same repository, records with the same message,
   the same family (``backgroundTag``), a shared tag, or similar message words (full-text
   search). Each question is capped, so the cost per page does not grow with the dataset.
2. :func:`score` weighs what a candidate shares with the record; :func:`rank` keeps the best
   :data:`MAX_RELATED` (score, then id, so the order is deterministic), never the record itself,
   never a candidate that shares nothing.

The scores say how close two errors are for a reader: the same raise site's neighbours first,
then the same message elsewhere, then the same family of failure, then similar wording.
"""

from __future__ import annotations

import bisect
import functools
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from errordb.store import record_rowid, rowid_record_id

MAX_RELATED = 5
#: How many rows each candidate question may return.
PER_SOURCE = 8

SAME_FUNCTION = 50
SAME_FILE = 30
SAME_MESSAGE = 40
SAME_FAMILY = 15
SHARED_TAG = 5
MAX_TAG_POINTS = 15
SIMILAR_WORDS = 30  # times the Jaccard similarity of the two messages' word sets
SAME_CLASS = 3

#: The columns :func:`score` reads.
COLUMNS = ("id", "slug", "repo", "errorClass", "errorMessage", "messagePattern", "filePath", "lineNumber", "function", "backgroundTag")
_COLUMN_LIST = ", ".join(f'"{c}"' for c in COLUMNS)

# Words too common in error messages to say two messages are alike.
_STOP_WORDS = frozenset(
    "a an and are as at be but by can cannot for from has have if in is it its must no not of on "
    "or should that the this to was were when which with without".split()
)
_WORD = re.compile(r"[a-z0-9_]+")
#: At most this many message words go into the full-text query.
MAX_QUERY_WORDS = 8


@dataclass(frozen=True)
class Related:
    """One related record, with its score and what it shares (for the page to say why)."""

    id: str
    slug: str
    errorMessage: str
    errorClass: str
    repo: str
    filePath: str
    lineNumber: int
    score: float
    reasons: tuple[str, ...] = field(default_factory=tuple)


@functools.lru_cache(maxsize=65536)
def message_words(message: str) -> frozenset[str]:
    """The words of a message that can make two messages alike (no stop words, no 1-letter words)."""
    return frozenset(w for w in _WORD.findall(message.lower()) if len(w) > 1 and w not in _STOP_WORDS)


def score(record: dict[str, Any], other: dict[str, Any], record_tags: Iterable[str] = (), other_tags: Iterable[str] = ()) -> tuple[float, list[str]]:
    """How related ``other`` is to ``record``: points and the reasons, most telling first."""
    return _Scorer(record, record_tags)(other, other_tags)


class _Scorer:
    """:func:`score` for one record against many candidates (its own fields read once)."""

    __slots__ = ("repo", "file", "function", "pattern", "message", "words", "family", "tags", "error_class")

    def __init__(self, record: dict[str, Any], record_tags: Iterable[str]):
        self.repo, self.file, self.function = record["repo"], record["filePath"], record.get("function")
        self.pattern, self.message = record["messagePattern"], record["errorMessage"]
        self.words = message_words(self.message)
        self.family, self.error_class = record.get("backgroundTag"), record["errorClass"]
        self.tags = frozenset(record_tags)

    def __call__(self, other: dict[str, Any], other_tags: Iterable[str]) -> tuple[float, list[str]]:
        """Points and reasons."""
        points = 0.0
        reasons: list[str] = []
        same_place = self.repo == other["repo"] and self.file == other["filePath"]
        if same_place and self.function and self.function == other.get("function"):
            points += SAME_FUNCTION
            reasons.append(f"same function ({self.function})")
        elif same_place:
            points += SAME_FILE
            reasons.append("same file")
        if self.pattern == other["messagePattern"] or self.message == other["errorMessage"]:
            points += SAME_MESSAGE
            reasons.append("same message")
        else:
            mine, theirs = self.words, message_words(other["errorMessage"])
            if mine and theirs:
                shared_words = len(mine & theirs)
                if shared_words:
                    similarity = shared_words / (len(mine) + len(theirs) - shared_words)  # Jaccard
                    points += round(SIMILAR_WORDS * similarity, 1)
                    if similarity >= 0.2:
                        reasons.append("similar message")
        if self.family and self.family == other.get("backgroundTag"):
            points += SAME_FAMILY
            reasons.append("same failure family")
        shared = self.tags.intersection(other_tags) if self.tags else ()
        if shared:
            points += min(MAX_TAG_POINTS, SHARED_TAG * len(shared))
            reasons.append("tags: " + ", ".join(sorted(shared)[:3]))
        # A shared class alone relates nothing (every ValueError would be related); it only breaks ties.
        if points and self.error_class == other["errorClass"]:
            points += SAME_CLASS
        return round(points, 1), reasons

    def points(self, other: dict[str, Any], other_tags: Iterable[str]) -> float:
        """The points of :meth:`__call__` alone, by the same sums in the same order (a page
        scores ~33 candidates and shows 5: reasons are made for those only)."""
        points = 0.0
        if self.repo == other["repo"] and self.file == other["filePath"]:
            points += SAME_FUNCTION if self.function and self.function == other.get("function") else SAME_FILE
        if self.pattern == other["messagePattern"] or self.message == other["errorMessage"]:
            points += SAME_MESSAGE
        elif self.words:
            mine, theirs = self.words, message_words(other["errorMessage"])
            shared_words = len(mine & theirs)
            if shared_words:
                points += round(SIMILAR_WORDS * (shared_words / (len(mine) + len(theirs) - shared_words)), 1)
        if self.family and self.family == other.get("backgroundTag"):
            points += SAME_FAMILY
        if self.tags:
            shared_tags = len(self.tags.intersection(other_tags))
            if shared_tags:
                points += min(MAX_TAG_POINTS, SHARED_TAG * shared_tags)
        if points and self.error_class == other["errorClass"]:
            points += SAME_CLASS
        return round(points, 1)


def rank(record: dict[str, Any], candidates: Iterable[dict[str, Any]], tags: dict[str, list[str]], limit: int = MAX_RELATED) -> list[Related]:
    """The best ``limit`` candidates for ``record``; ``tags`` maps record ids to their tags."""
    scored = []
    weigh = _Scorer(record, tags.get(record["id"], ()))
    points_of, own_id = weigh.points, record["id"]
    for other in candidates:
        other_id = other["id"]
        if other_id == own_id:
            continue
        points = points_of(other, tags.get(other_id, ()))
        if points > 0:
            scored.append((-points, other_id, other))
    scored.sort(key=lambda item: item[:2])
    return [
        Related(other["id"], other["slug"], other["errorMessage"], other["errorClass"], other["repo"], other["filePath"], other.get("lineNumber", 0), -negated, tuple(weigh(other, tags.get(other["id"], ()))[1]))
        for negated, _, other in scored[:limit]
    ]  # fmt: skip


#: One question :func:`candidate_ids` asked, for incremental builds: ``(kind, key, lo, hi)``.
#: Its answers are exactly the rows that match ``key`` with a rowid in ``lo..hi`` (``None``: no
#: bound), so a changed row can change the answer only if it matches and falls inside.
#: kind ``file`` (key ``repo\0filePath``), ``family`` (the tag) or ``words`` (key: the
#: full-text words, space-separated) over rowids of ``records``; ``tag`` over record ids.
Window = tuple[str, str, "int | str | None", "int | str | None"]


def candidate_ids(
    conn: sqlite3.Connection, record: dict[str, Any], tags: list[str], same_message: Iterable[str] = (),
    windows: list[Window] | None = None, batch: Batch | None = None,
) -> list[str]:
    """Ids of records worth scoring for ``record``: a few capped questions, each an index seek.

    ``same_message`` are the ids already known to share the record's message (the site build
    finds them in one pass over the store; there is no index on message text). Family, tag and
    word neighbours are read from the record's own row on, as if the rows were a ring
    (:func:`_around`), so a large family does not send every page to the same few records,
    and no question reads more than :data:`PER_SOURCE` rows however large the dataset. ``windows``, when given, receives each
    question asked (:data:`Window`): :mod:`errordb.publish.changes` uses them to find the pages
    that a changed record can reach. ``batch``: the pages rendered with this one (see
    :class:`Batch`); the answers are the same with or without it.
    """
    trace = windows if windows is not None else []
    found: dict[str, None] = dict.fromkeys(same_message)

    def add(ids: Iterable[Any]) -> None:
        found.update(dict.fromkeys(ids))

    place = (record["repo"], record["filePath"])
    same_file = batch.same_file.get(place) if batch is not None else None
    if same_file is None:
        same_file = conn.execute(f"SELECT id, rowid FROM records WHERE filePath = ? AND repo = ? ORDER BY rowid LIMIT {PER_SOURCE + 1}", [place[1], place[0]]).fetchall()
        if batch is not None:
            batch.same_file[place] = same_file
    add(r[0] for r in same_file)
    trace.append(("file", f"{record['repo']}\0{record['filePath']}", None, same_file[-1][1] if len(same_file) > PER_SOURCE else None))
    rowids: list[int] = []
    questions = batch.questions(record, tags) if batch is not None else ring_questions(record, tags)
    few = FewRows(conn, batch)
    for ring, position in questions:
        if ring.kind != "words":
            add(_around(conn, ring, position, trace, batch))
            continue
        try:
            rowids += _around(conn, ring, position, trace, batch, few)
        except sqlite3.OperationalError:
            break  # a store without full-text search still gets the other candidates
    add(rowid_record_id(r) for r in sorted(rowids))
    found.pop(record["id"], None)
    return list(found)


@dataclass(frozen=True)
class Ring:
    """One question read around a record: the rows whose key is ``value``, in position order.

    ``select`` has ``{cond}`` for the condition on ``column`` (the position: ``rowid`` of
    ``records``, or ``record_id`` for tags); ``name`` is the key as traced in a :data:`Window`.
    """

    kind: str
    name: str
    value: str
    select: str
    column: str

    def sql(self, cond: str) -> str:
        return self.select.format(cond=f"{self.column} {cond}")

    def all_rows(self, conn: sqlite3.Connection, fewer_than: int) -> list[Any] | None:
        """Every row of the question in position order, or None when it has ``fewer_than`` or more."""
        rows = conn.execute(self.sql("IS NOT NULL") + f" LIMIT {fewer_than}", [self.value]).fetchall()
        return rows if len(rows) < fewer_than else None


_FAMILY = "SELECT id, rowid FROM records WHERE backgroundTag = ? AND {cond} ORDER BY rowid"
_TAG = "SELECT DISTINCT record_id, record_id FROM record_tags WHERE tag = ? AND {cond} ORDER BY record_id"
_WORDS = "SELECT rowid, rowid FROM records_fts WHERE records_fts MATCH ? AND {cond} ORDER BY rowid"


def ring_questions(record: dict[str, Any], tags: list[str]) -> list[tuple[Ring, Any]]:
    """The questions read around ``record`` (:func:`_around`), each with the record's position."""
    rowid = record_rowid(record["id"])
    questions: list[tuple[Ring, Any]] = []
    if record.get("backgroundTag"):
        questions.append((Ring("family", record["backgroundTag"], record["backgroundTag"], _FAMILY, "rowid"), rowid))
    # From the record's id on in the (tag, record_id) index: an index seek, whatever the tag's size.
    questions += [(Ring("tag", tag, tag, _TAG, "record_id"), record["id"]) for tag in tags[:3]]
    # Similar wording: records holding all of the message's longest words, then records holding
    # one of its three longest. An AND costs what its rarest word costs (unlike one big OR), and
    # reading from the record's rowid on instead of ranking every match keeps common words cheap;
    # score() weighs the words afterwards. Quoted, so a word is never FTS5 syntax.
    words = sorted(message_words(record["errorMessage"]), key=lambda w: (-len(w), w))
    groups = ([words[: MAX_QUERY_WORDS // 2]] if len(words) > 1 else []) + [[word] for word in words[:3]]
    questions += [(_words_ring(group), rowid) for group in groups]
    return questions


def _words_ring(words: list[str]) -> Ring:
    query = "errorMessage : (" + " AND ".join('"' + w + '"' for w in words) + ")"
    return Ring("words", " ".join(words), query, _WORDS, "rowid")


class FewRows:
    """Every row of a page's words questions that have few (fewer than :data:`WHOLE`), each
    read once; None for a question with more.

    A page's own words are mostly rare (often only in its own message). Such a question is
    answered from one read of all its rows instead of the two reads of :func:`_around`, and
    the all-words question needs no read at all when one of its words is that rare: its rows
    are among that word's rows (every row holding all the words holds each), so when those
    are the record's own row alone, it has no answer either. That question, four words long,
    cost ~65 us of full-text search a page at a million records (~400 us when its words are
    all common ones), a one-word one ~10-20 us.
    """

    def __init__(self, conn: sqlite3.Connection, batch: Batch | None = None):
        self.conn = conn
        self.batch = batch
        self._rows: dict[str, list[Any] | None] = {}

    def rows(self, ring: Ring, position: Any) -> list[Any] | None:
        """All the rows of ``ring`` (a words question of the page at ``position``), or None."""
        if ring.name in self._rows:
            return self._rows[ring.name]
        found = None
        if " " in ring.name:
            for word in ring.name.split(" "):
                single = _words_ring([word])
                if self.batch is not None and self.batch.shares(single):
                    continue  # asked by several pages of the batch: a common word
                some = self.rows(single, position)
                if some is not None and all(row[1] == position for row in some):
                    found = []  # at most the record's own row, never an answer
                    break
            if found is None and self.batch is not None and self.batch.common is not None:
                found = self.batch.common.rows(self.conn, ring)  # all its words common ones
        else:
            found = ring.all_rows(self.conn, WHOLE)
        self._rows[ring.name] = found
        return found


class CommonWords:
    """All the rows of all-words questions whose words are all common ones, kept across the
    batches of one worker while the store does not change (:meth:`check`).

    Rows holding four common words at once are few and far apart: finding the eight after a
    record took ~1 ms at 100,000 records and ~2 ms at a million (FTS5 walks every word's list
    of rows to their end), and such a question comes back: the generated records' messages
    ask ~3,300 of them ~19,000 times at a million.
    """

    #: A question with this many rows or more is not kept (it is asked as :func:`_around` asks).
    MOST_ROWS = 256
    #: Rows kept at most (then all forgotten at once): a bound on a worker's memory (~40 MB).
    MOST = 300_000

    def __init__(self) -> None:
        self._rows: dict[str, list[Any] | None] = {}
        self._kept = 0
        self._version: int | None = None

    def check(self, conn: sqlite3.Connection) -> None:
        """Forget what was kept if another connection wrote to the store since the last check
        (asked inside a batch's read transaction, after its first read)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._forget()
            self._version = version

    def rows(self, conn: sqlite3.Connection, ring: Ring) -> list[Any] | None:
        """All the rows of ``ring``, or None when it has :data:`MOST_ROWS` or more."""
        if ring.name not in self._rows:
            rows = ring.all_rows(conn, self.MOST_ROWS)
            kept = len(rows) + 1 if rows is not None else 1
            if self._kept + kept > self.MOST:
                self._forget()
            self._rows[ring.name] = rows
            self._kept += kept
        return self._rows[ring.name]

    def _forget(self) -> None:
        self._rows.clear()
        self._kept = 0


#: A words question that no other page of its batch asks reads up to this many rows of its
#: key first (:class:`FewRows`): fewer means they are all of them, enough for any position
#: (PER_SOURCE after the record, PER_SOURCE from the first on, and its own).
WHOLE = 2 * PER_SOURCE + 2


def _around(conn: sqlite3.Connection, ring: Ring, position: Any, trace: list[Window], batch: Batch | None = None, few: FewRows | None = None) -> list[Any]:
    """Up to :data:`PER_SOURCE` rows of ``ring`` after ``position``, then from the first on
    (as if the rows were a ring) if too few.

    Both reads go forwards: FTS5 reads a term's list of rows backwards only by loading all of
    it, so a descending question cost ~1 ms at a million records where a forward one cost
    ~0.1 ms (bench/RESULTS.md). The question goes into ``trace`` with the positions its
    answers cover. ``few``: for a words question, all its rows when it has few (:class:`FewRows`).
    """
    after = batch.after(conn, ring, position) if batch is not None else None
    first = None
    if after is None and few is not None and ring.kind == "words":
        rows = few.rows(ring, position)
        if rows is not None:
            after = [row for row in rows if row[1] > position][:PER_SOURCE]
            first = [row for row in rows if row[1] < position][: PER_SOURCE - len(after)]
    if after is None:
        after = conn.execute(ring.sql("> ?") + f" LIMIT {PER_SOURCE}", [ring.value, position]).fetchall()
    if len(after) == PER_SOURCE:
        # Covered: from just after the record (its own row is not an answer) to the last answer.
        trace.append((ring.kind, ring.name, position, after[-1][1]))
        return [r[0] for r in after]
    need = PER_SOURCE - len(after)
    if first is None:
        first = batch.before(conn, ring, position, need) if batch is not None else None
    if first is None:
        first = conn.execute(ring.sql("< ?") + f" LIMIT {need}", [ring.value, position]).fetchall()
    if len(first) == need:
        # Every row after the record, and the first rows up to the last answer.
        trace.append((ring.kind, ring.name, position, None))
        trace.append((ring.kind, ring.name, None, first[-1][1]))
    else:
        trace.append((ring.kind, ring.name, None, None))  # every row but the record's own: all answers
    return [r[0] for r in after] + [r[0] for r in first]


#: Candidates' rows and tags as :func:`related_records` read them, by id (None: not in the store).
CandidateRows = dict[str, "tuple[dict[str, Any], list[str]] | None"]


class Batch:
    """What the pages of one batch share: the records with ids ``first``..``last``, rendered in
    id order in one read transaction.

    Neighbouring pages ask about the same files, families, tags and words. A question that
    :meth:`plan` saw asked by more than one page is read once for the batch, from the first
    page that asks it to the batch's last position and :data:`PER_SOURCE` rows past it: every
    later page's answer lies inside those rows. Questions asked once go to SQLite as they are.
    ``rows`` keeps the candidates read (records next to each other in id order mostly have the
    same neighbours: for 400 pages in a row, 19 in 20 candidate rows had been read for an
    earlier page).
    """

    def __init__(self, first: str, last: str, common: CommonWords | None = None):
        #: The worker's all-words questions of common words, checked for this batch.
        self.common = common
        self.rows: CandidateRows = {}
        self.same_file: dict[tuple[str, str], list[Any]] = {}
        self._last = {"rowid": record_rowid(last), "record_id": last}
        self._shared: set[tuple[str, str]] = set()
        self._planned: dict[str, list[tuple[Ring, Any]]] = {}
        self._ahead: dict[tuple[str, str], tuple[Any, list[Any], list[Any]]] = {}
        self._heads: dict[tuple[str, str], list[Any]] = {}

    def plan(self, records: Iterable[tuple[dict[str, Any], list[str]]]) -> None:
        """Note the questions of the batch's pages (record, tags), to read shared ones once."""
        seen: set[tuple[str, str]] = set()
        for record, tags in records:
            questions = self._planned[record["id"]] = ring_questions(record, tags)
            for ring, _ in questions:
                key = (ring.kind, ring.name)
                if key in seen:
                    self._shared.add(key)
                seen.add(key)

    def shares(self, ring: Ring) -> bool:
        """Whether more than one page of the batch asks ``ring``'s question."""
        return (ring.kind, ring.name) in self._shared

    def questions(self, record: dict[str, Any], tags: list[str]) -> list[tuple[Ring, Any]]:
        """:func:`ring_questions` of ``record``, as :meth:`plan` made them when it saw the record."""
        planned = self._planned.get(record["id"])
        return planned if planned is not None else ring_questions(record, tags)

    def after(self, conn: sqlite3.Connection, ring: Ring, position: Any) -> list[Any] | None:
        """The first :data:`PER_SOURCE` rows after ``position`` (None: ask SQLite)."""
        key = (ring.kind, ring.name)
        last = self._last[ring.column]
        if key not in self._shared or position > last:
            return None
        ahead = self._ahead.get(key)
        if ahead is None or position < ahead[0]:
            # Every row up to the batch's last position, then PER_SOURCE more (or the end):
            # so for any later position in the batch, its PER_SOURCE next rows are all here.
            rows = conn.execute(ring.sql(f"> ? AND {ring.column} <= ?"), [ring.value, position, last]).fetchall()
            rows += conn.execute(ring.sql("> ?") + f" LIMIT {PER_SOURCE}", [ring.value, last]).fetchall()
            ahead = self._ahead[key] = (position, rows, [r[1] for r in rows])
        _, rows, positions = ahead
        start = bisect.bisect_right(positions, position)
        return rows[start : start + PER_SOURCE]

    def before(self, conn: sqlite3.Connection, ring: Ring, position: Any, need: int) -> list[Any] | None:
        """The first ``need`` rows (at most :data:`PER_SOURCE`) before ``position`` (None: ask SQLite)."""
        key = (ring.kind, ring.name)
        if key not in self._shared:
            return None
        heads = self._heads.get(key)
        if heads is None:
            # The key's first PER_SOURCE rows: the first ``need`` before any position are among them.
            heads = self._heads[key] = conn.execute(ring.sql("IS NOT NULL") + f" LIMIT {PER_SOURCE}", [ring.value]).fetchall()
        return [row for row in heads if row[1] < position][:need]


def related_records(
    conn: sqlite3.Connection, record: dict[str, Any], tags: list[str], same_message: Iterable[str] = (),
    limit: int = MAX_RELATED, windows: list[Window] | None = None, batch: Batch | None = None,
) -> list[Related]:
    """The related errors of ``record`` (a dict with :data:`COLUMNS`), best first.

    ``batch``: what the pages rendered with this one in the same read transaction share
    (:class:`Batch`); the answer is the same without it.
    """
    ids = candidate_ids(conn, record, tags, same_message, windows, batch)
    if not ids:
        return []
    known: CandidateRows = batch.rows if batch is not None else {}
    _read_candidates(conn, [i for i in ids if i not in known], known)
    candidates = []
    tag_map: dict[str, list[str]] = {}
    for candidate_id in ids:
        entry = known[candidate_id]
        if entry is not None:
            candidates.append(entry[0])
            tag_map[candidate_id] = entry[1]
    tag_map[record["id"]] = list(tags)
    return rank(record, candidates, tag_map, limit)


def _read_candidates(conn: sqlite3.Connection, ids: list[str], into: CandidateRows) -> None:
    if not ids:
        return
    marks = ",".join("?" * len(ids))
    # By rowid, the table's own key: no detour through the id index for each candidate.
    for row in conn.execute(f"SELECT {_COLUMN_LIST} FROM records WHERE rowid IN ({marks})", [record_rowid(i) for i in ids]):
        data = dict(zip(COLUMNS, row))
        into[data["id"]] = (data, [])
    for record_id, tag in conn.execute(f"SELECT record_id, tag FROM record_tags WHERE record_id IN ({marks}) ORDER BY record_id, position", ids):
        into[record_id][1].append(tag)  # type: ignore[index]
    for candidate_id in ids:
        into.setdefault(candidate_id, None)
