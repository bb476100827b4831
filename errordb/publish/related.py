"""Related errors for an error page: computed from the store, never hand-listed.

Two steps, so the ranking is testable without a database:

1. :func:`candidate_ids` asks a few capped, indexed questions of the store: records raised in
   the same file of the same repository, records with the same message, the same family
   (``backgroundTag``), a shared tag, or a rarer word of the message (full-text search). No
   question reads more than a few hundred rows, so a page costs the same at any dataset size.
2. :func:`score` weighs what a candidate shares with the record; :func:`rank` keeps the best
   :data:`MAX_RELATED` (score, then id, so the order is deterministic), never the record itself,
   never one with the same message (the page lists those in a box of their own), never a
   candidate that shares nothing.

The scores say how close two errors are for a reader: the same function first, then what the
record's message and meaning say that the other's words are about, the same module, the same
family of failure, shared tags.
Every question is answered in id order, so the same records give the same related errors
whatever order they were ingested in.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from errordb.records import patterns

MAX_RELATED = 5
#: How many rows each candidate question may return.
PER_SOURCE = 8
#: A message word in more records' patterns than this says little: it is not asked about.
MOST_WORD_MATCHES = 50
#: The message words asked about, longest first.
WORDS_ASKED = 3

SAME_FUNCTION = 50
SAME_FILE = 20
SAME_FAMILY = 15
SHARED_TAG = 5
MAX_TAG_POINTS = 15
SIMILAR_WORDS = 40  # times how much of the other's message and meaning the record's own words cover
SAME_CLASS = 3

#: The columns :func:`score` reads.
COLUMNS = ("id", "slug", "repo", "errorClass", "errorMessage", "messagePattern", "filePath", "lineNumber", "function",
           "backgroundTag", "documentation")
_COLUMN_LIST = ", ".join(f'"{c}"' for c in COLUMNS)

# Words too common in error messages to say two messages are alike.
_STOP_WORDS = frozenset(
    "a an and are as at be but by can cannot for from has have if in is it its must no not of on "
    "or should that the this to was were when which with without".split()
)


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
    """The words of a message (:func:`errordb.records.patterns.message_words`, all of them) that
    can make two messages alike: no stop words, no 1-letter words."""
    return frozenset(w for w in patterns.message_words(message, None) if len(w) > 1 and w not in _STOP_WORDS)


def score(record: dict[str, Any], other: dict[str, Any], record_tags: Iterable[str] = (), other_tags: Iterable[str] = ()) -> tuple[float, list[str]]:
    """How related ``other`` is to ``record``: points and the reasons, most telling first."""
    points = 0.0
    reasons: list[str] = []
    function = record.get("function")
    if record["repo"] == other["repo"] and record["filePath"] == other["filePath"]:
        if function and function == other.get("function"):
            points += SAME_FUNCTION
            reasons.append(f"same function ({function})")
        else:
            points += SAME_FILE
            reasons.append("same file")
    similarity = _covered(record, other)
    if similarity:
        points += round(SIMILAR_WORDS * similarity, 1)
        if similarity >= 0.3:
            reasons.append("similar wording")
    family = record.get("backgroundTag")
    if family and family == other.get("backgroundTag"):
        points += SAME_FAMILY
        reasons.append("same failure family")
    shared = set(record_tags).intersection(other_tags)
    if shared:
        points += min(MAX_TAG_POINTS, SHARED_TAG * len(shared))
        reasons.append("tags: " + ", ".join(sorted(shared)[:3]))
    # A shared class alone relates nothing (every ValueError would be related); it only breaks ties.
    if points and record["errorClass"] == other["errorClass"]:
        points += SAME_CLASS
    return round(points, 1), reasons


def _words(record: dict[str, Any]) -> frozenset[str]:
    """A record's words: its message's and its meaning's (documentation; a draft has none yet)."""
    return message_words(record["errorMessage"]) | message_words(record.get("documentation") or "")


def _covered(record: dict[str, Any], other: dict[str, Any]) -> float:
    """How much of ``other``'s words ``record``'s words cover (0 to 1): a short message whose
    every word the record's message or meaning uses is about the same thing, though the
    record's own text is longer."""
    theirs = _words(other)
    return len(_words(record) & theirs) / len(theirs) if theirs else 0.0


def same_message_ids(conn: sqlite3.Connection, record: dict[str, Any]) -> list[str]:
    """The other records with the record's messagePattern or errorMessage, in id order (none
    for a class raised without a message: every bare ``raise NotImplementedError`` has "")."""
    if not record["errorMessage"]:
        return []
    sql = "SELECT id FROM records WHERE messagePattern = ? UNION SELECT id FROM records WHERE errorMessage = ? ORDER BY id"
    return [row[0] for row in conn.execute(sql, [record["messagePattern"], record["errorMessage"]]) if row[0] != record["id"]]


def rank(record: dict[str, Any], candidates: Iterable[dict[str, Any]], tags: dict[str, list[str]], limit: int = MAX_RELATED,
         same: Iterable[str] = ()) -> list[Related]:
    """The best ``limit`` candidates for ``record``, none of ``same`` (the records with its
    message: :func:`same_message_ids`); ``tags`` maps record ids to their tags."""
    own_tags = tags.get(record["id"], ())
    left_out = {record["id"], *same}
    scored = []
    for other in candidates:
        if other["id"] in left_out:
            continue
        points, reasons = score(record, other, own_tags, tags.get(other["id"], ()))
        if points > 0:
            scored.append((-points, other["id"], other, reasons))
    scored.sort(key=lambda item: item[:2])
    return [
        Related(other["id"], other["slug"], other["errorMessage"], other["errorClass"], other["repo"], other["filePath"],
                other.get("lineNumber", 0), -negated, tuple(reasons))
        for negated, _, other, reasons in scored[:limit]
    ]  # fmt: skip


def candidate_ids(conn: sqlite3.Connection, record: dict[str, Any], tags: list[str]) -> list[str]:
    """Ids of records worth scoring for ``record``: a few capped questions, each an index seek.

    Family, tag and word neighbours are read from the record's own id on, as if the rows were a ring
    (:func:`_around`), so a large family does not send every page to the same few records.
    """
    record_id = record["id"]
    found: dict[str, None] = {}
    same_file = "SELECT id FROM records WHERE repo = ? AND filePath = ? ORDER BY id LIMIT ?"
    found.update(dict.fromkeys(row[0] for row in conn.execute(same_file, [record["repo"], record["filePath"], PER_SOURCE + 1])))
    if record.get("backgroundTag"):
        family = "SELECT id FROM records WHERE backgroundTag = ? AND id {} ? ORDER BY id LIMIT ?"
        found.update(dict.fromkeys(_around(conn, family, record["backgroundTag"], record_id)))
    tagged = "SELECT DISTINCT record_id FROM record_tags WHERE tag = ? AND record_id {} ? ORDER BY record_id LIMIT ?"
    for tag in tags[:3]:
        found.update(dict.fromkeys(_around(conn, tagged, tag, record_id)))
    found.update(dict.fromkeys(_similar_wording(conn, record)))
    found.pop(record_id, None)
    return list(found)


def _around(conn: sqlite3.Connection, sql: str, key: str, record_id: str) -> list[str]:
    """Up to :data:`PER_SOURCE` ids of ``sql``'s rows for ``key`` after ``record_id``, then
    from the first on (as if the rows were a ring) if too few. ``sql`` has ``{}`` for the
    comparison with the record's id."""
    after = [row[0] for row in conn.execute(sql.format(">"), [key, record_id, PER_SOURCE])]
    if len(after) < PER_SOURCE:
        after += [row[0] for row in conn.execute(sql.format("<"), [key, record_id, PER_SOURCE - len(after)])]
    return after


def _similar_wording(conn: sqlite3.Connection, record: dict[str, Any]) -> list[str]:
    """Records whose message holds one of the message's rarer words: of the words that at
    most :data:`MOST_WORD_MATCHES` records' patterns contain (the store's ``terms``; a common
    word says little, and reading all its rows would cost more than the rest of the page), the
    :data:`WORDS_ASKED` longest. Quoted, so a word is never FTS5 syntax."""
    words = sorted(_words(record))
    if not words:
        return []
    marks = ",".join("?" * len(words))
    rare = conn.execute(f"SELECT term FROM terms WHERE term IN ({marks}) AND df BETWEEN 2 AND ?", [*words, MOST_WORD_MATCHES])
    asked = sorted((term for (term,) in rare), key=lambda w: (-len(w), w))[:WORDS_ASKED]
    found: set[str] = set()
    sql = "SELECT r.id FROM records r WHERE r.rowid IN (SELECT rowid FROM records_fts WHERE records_fts MATCH ? LIMIT ?)"
    for word in asked:
        try:
            ids = [row[0] for row in conn.execute(sql, [f'errorMessage : "{word}"', MOST_WORD_MATCHES + 1])]
        except sqlite3.OperationalError:
            return []  # a store without full-text search still gets the other candidates
        if len(ids) <= MOST_WORD_MATCHES:  # stemming can make a word match more messages than its count
            found.update(ids)
    ordered = sorted(found)
    after = [i for i in ordered if i > record["id"]][:PER_SOURCE]
    return after + [i for i in ordered if i < record["id"]][: PER_SOURCE - len(after)]


def related_records(
    conn: sqlite3.Connection, record: dict[str, Any], tags: list[str], limit: int = MAX_RELATED, same: list[str] | None = None,
) -> list[Related]:
    """The related errors of ``record`` (a dict with :data:`COLUMNS`), best first; ``same``: its
    :func:`same_message_ids`, when they are known already."""
    ids = candidate_ids(conn, record, tags)
    if not ids:
        return []
    candidates, tag_map = _read_candidates(conn, ids)
    tag_map[record["id"]] = list(tags)
    return rank(record, candidates, tag_map, limit, same_message_ids(conn, record) if same is None else same)


def _read_candidates(conn: sqlite3.Connection, ids: list[str]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    marks = ",".join("?" * len(ids))
    candidates = [dict(zip(COLUMNS, row)) for row in conn.execute(f"SELECT {_COLUMN_LIST} FROM records WHERE id IN ({marks})", ids)]
    tags: dict[str, list[str]] = {}
    for record_id, tag in conn.execute(f"SELECT record_id, tag FROM record_tags WHERE record_id IN ({marks}) ORDER BY record_id, position", ids):
        tags.setdefault(record_id, []).append(tag)
    return candidates, tags
