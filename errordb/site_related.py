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
    points = 0.0
    reasons: list[str] = []
    same_place = record["repo"] == other["repo"] and record["filePath"] == other["filePath"]
    if same_place and record.get("function") and record.get("function") == other.get("function"):
        points += SAME_FUNCTION
        reasons.append(f"same function ({record['function']})")
    elif same_place:
        points += SAME_FILE
        reasons.append("same file")
    if record["messagePattern"] == other["messagePattern"] or record["errorMessage"] == other["errorMessage"]:
        points += SAME_MESSAGE
        reasons.append("same message")
    else:
        mine, theirs = message_words(record["errorMessage"]), message_words(other["errorMessage"])
        if mine and theirs:
            similarity = len(mine & theirs) / len(mine | theirs)
            if similarity > 0:
                points += round(SIMILAR_WORDS * similarity, 1)
                if similarity >= 0.2:
                    reasons.append("similar message")
    if record.get("backgroundTag") and record.get("backgroundTag") == other.get("backgroundTag"):
        points += SAME_FAMILY
        reasons.append("same failure family")
    shared = sorted(set(record_tags) & set(other_tags))
    if shared:
        points += min(MAX_TAG_POINTS, SHARED_TAG * len(shared))
        reasons.append("tags: " + ", ".join(shared[:3]))
    # A shared class alone relates nothing (every ValueError would be related); it only breaks ties.
    if points and record["errorClass"] == other["errorClass"]:
        points += SAME_CLASS
    return round(points, 1), reasons


def rank(record: dict[str, Any], candidates: Iterable[dict[str, Any]], tags: dict[str, list[str]], limit: int = MAX_RELATED) -> list[Related]:
    """The best ``limit`` candidates for ``record``; ``tags`` maps record ids to their tags."""
    scored = []
    own_tags = tags.get(record["id"], ())
    for other in candidates:
        if other["id"] == record["id"]:
            continue
        points, reasons = score(record, other, own_tags, tags.get(other["id"], ()))
        if points > 0:
            scored.append((-points, other["id"], other, reasons))
    scored.sort(key=lambda item: item[:2])
    return [
        Related(other["id"], other["slug"], other["errorMessage"], other["errorClass"], other["repo"], other["filePath"], other.get("lineNumber", 0), -negated, tuple(reasons))
        for negated, _, other, reasons in scored[:limit]
    ]  # fmt: skip


#: One question :func:`candidate_ids` asked, for incremental builds: ``(kind, key, lo, hi)``.
#: Its answers are exactly the rows that match ``key`` with a rowid in ``lo..hi`` (``None``: no
#: bound), so a changed row can change the answer only if it matches and falls inside.
#: kind ``file`` (key ``repo\0filePath``), ``family`` (the tag) or ``words`` (key: the
#: full-text words, space-separated) over rowids of ``records``; ``tag`` over record ids.
Window = tuple[str, str, "int | str | None", "int | str | None"]


def candidate_ids(
    conn: sqlite3.Connection, record: dict[str, Any], tags: list[str], same_message: Iterable[str] = (),
    windows: list[Window] | None = None,
) -> list[str]:
    """Ids of records worth scoring for ``record``: a few capped questions, each an index seek.

    ``same_message`` are the ids already known to share the record's message (the site build
    finds them in one pass over the store; there is no index on message text). Family, tag and
    word neighbours are read from the record's own row on, as if the rows were a ring
    (:func:`_around`), so a large family does not send every page to the same few records,
    and no question reads more than :data:`PER_SOURCE` rows however large the dataset. ``windows``, when given, receives each
    question asked (:data:`Window`): :mod:`errordb.site_changes` uses them to find the pages
    that a changed record can reach.
    """
    trace = windows if windows is not None else []
    found: dict[str, None] = dict.fromkeys(same_message)
    rowid = record_rowid(record["id"])

    def add(ids: Iterable[Any]) -> None:
        found.update(dict.fromkeys(ids))

    same_file = conn.execute(f"SELECT id, rowid FROM records WHERE filePath = ? AND repo = ? ORDER BY rowid LIMIT {PER_SOURCE + 1}", [record["filePath"], record["repo"]]).fetchall()
    add(r[0] for r in same_file)
    trace.append(("file", f"{record['repo']}\0{record['filePath']}", None, same_file[-1][1] if len(same_file) > PER_SOURCE else None))
    if record.get("backgroundTag"):
        add(_around(conn, "SELECT id, rowid FROM records WHERE backgroundTag = ? AND rowid {op} ? ORDER BY rowid", [record["backgroundTag"], rowid], trace, "family"))
    # From the record's id on in the (tag, record_id) index: an index seek, whatever the tag's size.
    for tag in tags[:3]:
        add(_around(conn, "SELECT DISTINCT record_id, record_id FROM record_tags WHERE tag = ? AND record_id {op} ? ORDER BY record_id", [tag, record["id"]], trace, "tag"))
    # Similar wording: records holding all of the message's longest words, then records holding
    # one of its three longest. An AND costs what its rarest word costs (unlike one big OR), and
    # reading from the record's rowid on instead of ranking every match keeps common words cheap;
    # score() weighs the words afterwards. Quoted, so a word is never FTS5 syntax.
    words = sorted(message_words(record["errorMessage"]), key=lambda w: (-len(w), w))
    groups = ([words[: MAX_QUERY_WORDS // 2]] if len(words) > 1 else []) + [[word] for word in words[:3]]
    rowids: list[int] = []
    for group in groups:
        query = "errorMessage : (" + " AND ".join('"' + w + '"' for w in group) + ")"
        try:
            rowids += _around(conn, "SELECT rowid, rowid FROM records_fts WHERE records_fts MATCH ? AND rowid {op} ? ORDER BY rowid", [query, rowid], trace, "words", " ".join(group))
        except sqlite3.OperationalError:
            break  # a store without full-text search still gets the other candidates
    add(rowid_record_id(r) for r in sorted(rowids))
    found.pop(record["id"], None)
    return list(found)


def _around(conn: sqlite3.Connection, sql: str, params: list[Any], trace: list[Window], kind: str, key: str | None = None) -> list[Any]:
    """Up to :data:`PER_SOURCE` rows of ``sql`` after the given rowid, then from the first on
    (as if the rows were a ring) if too few.

    ``sql`` selects (value, position) in position order and has ``{op}`` for the side; its last
    parameter is the record's own position (rowid, or id for tags). Both reads go
    forwards: FTS5 reads a term's list of rows backwards only by loading all of it, so a
    descending question cost ~1 ms at a million records where a forward one cost ~0.1 ms
    (bench/RESULTS.md). The question goes into ``trace`` with the positions its answers cover.
    """
    name = params[0] if key is None else key
    after = conn.execute(sql.format(op=">") + f" LIMIT {PER_SOURCE}", params).fetchall()
    if len(after) == PER_SOURCE:
        # Covered: from just after the record (its own row is not an answer) to the last answer.
        trace.append((kind, name, params[-1], after[-1][1]))
        return [r[0] for r in after]
    first = conn.execute(sql.format(op="<") + f" LIMIT {PER_SOURCE - len(after)}", params).fetchall()
    if len(first) == PER_SOURCE - len(after):
        # Every row after the record, and the first rows up to the last answer.
        trace.append((kind, name, params[-1], None))
        trace.append((kind, name, None, first[-1][1]))
    else:
        trace.append((kind, name, None, None))  # every row but the record's own: all answers
    return [r[0] for r in after] + [r[0] for r in first]


#: Candidates' rows and tags as :func:`related_records` read them, by id (None: not in the store).
CandidateRows = dict[str, "tuple[dict[str, Any], list[str]] | None"]


def related_records(
    conn: sqlite3.Connection, record: dict[str, Any], tags: list[str], same_message: Iterable[str] = (),
    limit: int = MAX_RELATED, windows: list[Window] | None = None, rows: CandidateRows | None = None,
) -> list[Related]:
    """The related errors of ``record`` (a dict with :data:`COLUMNS`), best first.

    ``rows`` keeps the candidates read, for the next pages of the same read transaction:
    records next to each other in id order mostly have the same neighbours (for 400 pages in
    a row, 19 in 20 candidate rows had been read for an earlier page).
    """
    ids = candidate_ids(conn, record, tags, same_message, windows)
    if not ids:
        return []
    known: CandidateRows = rows if rows is not None else {}
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
