"""Browsing the store: ``errordb show``, ``search``, ``list`` and ``stats`` as library functions.

Every function takes an open store (the read-only :func:`errordb.store.open_connection`, or a
sqlite_utils Database) and returns data or text; the CLI only parses arguments and prints.

Record text is untrusted. Text meant for a terminal passes :func:`errordb.text.clean`; JSON
and CSV carry the data as stored (they are data formats: escaping belongs to whoever displays
them).

Search uses the store's two FTS5 indexes (porter stemming): ``records_fts`` over the message,
documentation, trigger scenarios, common situations and class, and ``solutions_fts`` over each
solution. Both are external-content tables whose rowid is the content table's rowid. A
record's score is the best (lowest) bm25 among its own row, where the message counts
:data:`MESSAGE_WEIGHT` times, and its solutions.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import os
import re
import sqlite3
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from errordb.errors import ErrordbError
from errordb.records.conventions import distribution_name_key
from errordb.explainer.render import Style, cut_line, terminal_width
from errordb.text import clean




class SearchSyntaxError(ErrordbError):
    """A ``--raw`` query that FTS5 cannot parse."""


# Filters ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """Which records to keep: each field lists allowed values; empty means no restriction.

    A record has one repository, class and family, so several values of those mean "any of
    them"; it has many tags, so several tags mean "all of them" (narrowing, like labels on gh).
    """

    repos: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    families: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    distributions: tuple[str, ...] = ()  # learned drafts of these distributions or trees (errordb learn)

    def sql(self, conn: sqlite3.Connection, alias: str = "r") -> tuple[str, dict[str, Any]]:
        """A WHERE condition over ``records AS alias`` of ``conn`` (``1`` when nothing is
        filtered) and its named parameters (``:f0``, ``:f1``...)."""
        clauses: list[str] = []
        params: dict[str, Any] = {}

        def mark(value: str) -> str:
            name = f"f{len(params)}"
            params[name] = value
            return f":{name}"

        for column, values in (("repo", self.repos), ("backgroundTag", self.families), ("errorClass", self.classes)):
            if values:
                clauses.append(f"{alias}.{column} IN ({', '.join(mark(v) for v in values)})")
        if self.distributions:  # named as pip names them: Jinja2, jinja2 and JINJA-2 alike (PEP 503)
            wanted = {distribution_name_key(name) for name in self.distributions}
            stored = [row[0] for row in conn.execute("SELECT DISTINCT distribution FROM records WHERE distribution IS NOT NULL")]
            names = [name for name in stored if distribution_name_key(name) in wanted]
            clauses.append(f"{alias}.distribution IN ({', '.join(mark(name) for name in names) or 'NULL'})")
        for tag in self.tags:
            clauses.append(f"{alias}.id IN (SELECT record_id FROM record_tags WHERE tag = {mark(tag)})")
        return (" AND ".join(clauses) or "1"), params


# show ------------------------------------------------------------------------------------------

def show(db: Any, key: str, output_format: str = "text", *, color: bool = False, width: int | None = None,
         site: str | None = None) -> str:
    """One record, rendered as explain renders its best match.

    ``text``: the terminal block of :func:`errordb.explainer.render.render_record`, with the committed
    reproduction when there is one (:func:`errordb.repro.reproduction_text`).
    ``markdown``: :func:`errordb.explainer.render.render_record_markdown`.
    ``json``: the record file's own bytes, i.e. the envelope's canonical JSON (compact, fields
    in schema order), so ``show --format json`` output is byte-identical to the file in
    ``records/``, newline aside.
    """
    from errordb.explainer import render
    from errordb.repro import reproduction_text
    from errordb.store import get_envelope, get_family, get_record
    from errordb.store.read import resolve_record_id

    record_id = resolve_record_id(db, key)
    if output_format == "json":
        from errordb.records.schema import canonical_json

        return canonical_json(get_envelope(db, record_id))
    record = get_record(db, record_id)
    record["family"] = get_family(db, record.get("backgroundTag"))
    if output_format == "markdown":
        return render.render_record_markdown(record, site)
    if output_format != "text":
        raise ValueError(f"unknown format {output_format!r}")
    return render.render_record(record, color=color, width=width, transcript=reproduction_text(record_id), site=site)


# search ----------------------------------------------------------------------------------------

#: The message is what people search for first: it weighs this much more than the other fields.
MESSAGE_WEIGHT = 4.0
RECORD_FIELDS = ("errorMessage", "documentation", "triggerScenarios", "commonSituations")
# snippet()/highlight() wrap matched tokens in these; they are control characters, which clean()
# removes from record text anyway, so they cannot be confused with anything a reader should see.
_OPEN, _CLOSE = "\x02", "\x03"
SNIPPET_TOKENS = 14
_WORD = re.compile(r"\w")


@dataclass
class Marked:
    """Text with highlighted spans: ``marks`` are ``(start, end)`` character offsets into ``text``."""

    text: str
    marks: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: str) -> Marked:
        """From FTS5 output with :data:`_OPEN`/:data:`_CLOSE` around matches; cleaned, on one line."""
        text, marks, inside = "", [], False
        for piece in re.split(f"([{_OPEN}{_CLOSE}])", raw):
            if piece == _OPEN:
                inside, start = True, len(text)
            elif piece == _CLOSE:
                if inside and len(text) > start:
                    marks.append((start, len(text)))
                inside = False
            else:
                text += re.sub(r"\s+", " ", clean(piece))
        return cls(text, marks)

    def shorten(self, limit: int) -> Marked:
        """At most ``limit`` characters (a message can be 100,000): cut with ``…``, marks kept inside."""
        if len(self.text) <= limit:
            return self
        marks = [(start, min(end, limit - 1)) for start, end in self.marks if start < limit - 1]
        return Marked(self.text[: limit - 1] + "…", marks)

    def render(self, style: Style) -> str:
        """The text with its marks in bold yellow, or between ``**`` without colour."""
        out, last = [], 0
        for start, end in self.marks:
            out.append(self.text[last:start])
            word = self.text[start:end]
            out.append(style.highlight(word) if style.color else f"**{word}**")
            last = end
        out.append(self.text[last:])
        return "".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "highlights": [list(m) for m in self.marks]}


@dataclass
class SearchHit:
    """One record that matches, with its bm25 score (lower is better) and where it matched."""

    record: dict[str, Any]  # id, slug, repo, errorClass, errorMessage, filePath, lineNumber
    score: float
    message: Marked
    snippets: list[tuple[str, Marked]]  # (field name, e.g. "documentation" or "solutions[2]", snippet)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.record,
            "bm25": self.score,
            "message": self.message.to_dict(),
            "snippets": [{"field": name, **snippet.to_dict()} for name, snippet in self.snippets],
        }


@dataclass
class SearchResult:
    """The hits shown (best first) and how many records match in all."""

    query: str
    fts_query: str
    total: int
    hits: list[SearchHit]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "ftsQuery": self.fts_query,
            "total": self.total,
            "hits": [hit.to_dict() for hit in self.hits],
        }


def fts_query(text: str) -> str:
    """The user's words as a safe FTS5 query: every word a quoted string, all of them required.

    Quoting makes FTS5 syntax characters (``"``, ``:``, ``(``, ``-``, ``*``, ``AND``...) plain
    text, so no input can be a syntax error. A word is split by the tokenizer as the indexed
    text was: ``layer_ids`` is the phrase "layer ids". A trailing ``*`` stays a prefix search.
    Words without a letter or digit (``--``, ``->``) match nothing and are dropped.
    """
    terms = []
    for word in text.replace("\x00", " ").split():  # FTS5 would end its string at a NUL
        prefix = len(word) > 1 and word.endswith("*")
        word = word.rstrip("*") if prefix else word
        if not _WORD.search(word):
            continue
        terms.append('"' + word.replace('"', '""') + '"' + ("*" if prefix else ""))
    if not terms:
        raise ErrordbError(f"nothing to search for in {text!r}: give at least one word")
    return " ".join(terms)


_RECORD_HITS = f"SELECT rowid AS rid, bm25(records_fts, {MESSAGE_WEIGHT}, 1.0, 1.0, 1.0) AS score FROM records_fts WHERE records_fts MATCH :q"
_SOLUTION_HITS = (
    "SELECT r.rowid AS rid, bm25(solutions_fts) AS score FROM solutions_fts "
    "JOIN solutions s ON s.rowid = solutions_fts.rowid JOIN records r ON r.id = s.record_id "
    "WHERE solutions_fts MATCH :q"
)


def search(db: Any, query: str, filters: Filters = Filters(), *, limit: int = 20, raw: bool = False) -> SearchResult:
    """Records whose message, documentation, trigger, situations or solutions match ``query``.

    Without ``raw`` the query is the user's words, all required (:func:`fts_query`); with it the
    query is FTS5 syntax (``errorMessage:layer* NOT pipeline``, ``NEAR(a b)``, ``"a phrase"``)
    and a syntax error is a :class:`SearchSyntaxError`. Column filters name record columns, so
    they restrict the search to the records index (solutions have only ``text``).
    """
    conn = getattr(db, "conn", db)
    match = query if raw else fts_query(query)
    where, params = filters.sql(conn, "r")
    params = {**params, "q": match, "limit": limit}
    try:
        try:
            rows = _ranked(conn, f"{_RECORD_HITS} UNION ALL {_SOLUTION_HITS}", where, params)
        except sqlite3.OperationalError as exc:
            # A raw column filter (errorMessage:x) is unknown to the solutions index: search records only.
            if not (raw and "no such column" in str(exc)):
                raise
            rows = _ranked(conn, _RECORD_HITS, where, params)
        total = rows[0][-1] if rows else 0
        hits = [_hit(conn, match, row[:-1]) for row in rows]
    except sqlite3.OperationalError as exc:
        message = str(exc)
        if "no such table" in message:
            raise ErrordbError(f"this database has no full-text index ({message}); ingest the records into a new file") from None
        if raw:
            raise SearchSyntaxError(f"bad search query {query!r}: {message.removeprefix('fts5: ')} (FTS5 syntax; drop --raw to search for the words as they are)") from None
        raise ErrordbError(f"search failed: {message}") from None
    return SearchResult(query, match, total, hits)


def _ranked(conn: sqlite3.Connection, hits_sql: str, where: str, params: dict[str, Any]) -> list[tuple]:
    """The best ``:limit`` records of the hits, each row ending with the number of matching records."""
    # MATERIALIZED: were the hits flattened into the join, SQLite could no longer call bm25()
    # ("unable to use function bm25 in the requested context"). count(*) OVER () is computed
    # before LIMIT: the total comes with the page, in one pass over the hits.
    sql = (
        f"WITH h AS MATERIALIZED ({hits_sql}) "
        "SELECT r.id, r.slug, r.repo, r.errorClass, r.errorMessage, r.filePath, r.lineNumber, r.rowid, "
        "min(h.score) AS score, count(*) OVER () "
        f"FROM h JOIN records r ON r.rowid = h.rid WHERE {where} GROUP BY r.id ORDER BY score, r.slug LIMIT :limit"
    )
    return conn.execute(sql, params).fetchall()


def _hit(conn: sqlite3.Connection, match: str, row: tuple) -> SearchHit:
    """A hit with its message highlighted and a snippet of each other field that matched."""
    record_id, slug, repo, error_class, message, file_path, line, rowid, score = row
    record = {"id": record_id, "slug": slug, "repo": repo, "errorClass": error_class, "errorMessage": message,
              "filePath": file_path, "lineNumber": line}  # fmt: skip
    columns = ", ".join(
        [f"highlight(records_fts, 0, '{_OPEN}', '{_CLOSE}')"]
        + [f"snippet(records_fts, {i}, '{_OPEN}', '{_CLOSE}', '…', {SNIPPET_TOKENS})" for i in range(1, len(RECORD_FIELDS))]
    )
    marked_message = Marked(re.sub(r"\s+", " ", clean(message)))
    snippets: list[tuple[str, Marked]] = []
    found = conn.execute(f"SELECT {columns} FROM records_fts WHERE records_fts MATCH ? AND rowid = ?", [match, rowid]).fetchone()
    if found:
        marked_message = Marked.parse(found[0])
        for name, text in zip(RECORD_FIELDS[1:], found[1:]):
            if text and _OPEN in text:
                snippets.append((name, Marked.parse(text)))
    try:
        solutions = conn.execute(
            f"SELECT s.position, snippet(solutions_fts, 0, '{_OPEN}', '{_CLOSE}', '…', {SNIPPET_TOKENS}) "
            "FROM solutions_fts JOIN solutions s ON s.rowid = solutions_fts.rowid "
            "WHERE solutions_fts MATCH ? AND s.record_id = ? ORDER BY s.position",
            [match, record_id],
        ).fetchall()
    except sqlite3.OperationalError:
        solutions = []  # a raw query with a records-only column filter
    snippets.extend((f"solutions[{position}]", Marked.parse(text)) for position, text in solutions)
    return SearchHit(record, score, marked_message, snippets)


#: In the terminal, a message or passage is cut after this many characters.
TEXT_LIMIT = 400


def render_search(result: SearchResult, *, color: bool = False, width: int | None = None, snippets: int = 2) -> str:
    """The hits for a terminal: slug, message, place, and up to ``snippets`` matching passages each."""
    style = Style(color)
    width = width or terminal_width()
    if not result.hits:
        return f"No record matches {result.query!r}."
    blocks = []
    for number, hit in enumerate(result.hits, start=1):
        record = hit.record
        lines = [style.green(f"{number}. {record['slug']}")]
        lines.append(_wrapped(style.bold(f"{clean(record['errorClass'])}:") + " " + hit.message.shorten(TEXT_LIMIT).render(style), width))
        lines.append(_wrapped(style.dim(f"{clean(record['repo'])} · {clean(record['filePath'])}:{record['lineNumber']}"), width))
        for name, snippet in hit.snippets[:snippets]:
            lines.append(_wrapped(f"{style.cyan(_field_label(name))}: {snippet.shorten(TEXT_LIMIT).render(style)}", width))
        blocks.append("\n".join(lines))
    shown = len(result.hits)
    footer = f"{shown:,} of {result.total:,} matching record{'s' if result.total != 1 else ''}"
    if shown < result.total:
        footer += " (--limit shows more)"
    return "\n\n".join(blocks) + "\n\n" + style.dim(footer)


def _wrapped(text: str, width: int) -> str:
    """``text`` under a hit, wrapped at spaces to ``width`` (a colour code counts as width, so a
    coloured line wraps a little early, never late); a path longer than the line stays whole."""
    return textwrap.fill(text, width=width, initial_indent="   ", subsequent_indent="     ",
                         break_on_hyphens=False, break_long_words=False)


def _field_label(name: str) -> str:
    if name.startswith("solutions["):
        return f"solution {int(name[10:-1]) + 1}"
    return {"triggerScenarios": "trigger", "commonSituations": "situations"}.get(name, name)


# list ------------------------------------------------------------------------------------------

LIST_COLUMNS = ("id", "slug", "repo", "errorClass", "severity", "filePath", "lineNumber", "backgroundTag", "tags", "errorMessage", "distribution")


def list_records(db: Any, filters: Filters = Filters(), *, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """The records that pass ``filters``, ordered by repository then slug, streamed from a cursor.

    Each is a dict of :data:`LIST_COLUMNS` (``tags`` a list, in the record's order).
    """
    conn = getattr(db, "conn", db)
    where, params = filters.sql(conn, "r")
    sql = (
        "SELECT r.id, r.slug, r.repo, r.errorClass, r.severity, r.filePath, r.lineNumber, r.backgroundTag, "
        "(SELECT json_group_array(tag) FROM (SELECT tag FROM record_tags t WHERE t.record_id = r.id ORDER BY position)), "
        f"r.errorMessage, r.distribution FROM records r WHERE {where} ORDER BY r.repo, r.slug"
    )
    if limit is not None:
        sql += " LIMIT :limit"
        params["limit"] = limit
    cursor = conn.execute(sql, params)
    while rows := cursor.fetchmany(500):
        for row in rows:
            item = dict(zip(LIST_COLUMNS, row))
            item["tags"] = json.loads(item["tags"])
            yield item


#: The table's columns: (header, how to get the cell). The slug names the record for show.
TABLE_COLUMNS = (
    ("SLUG", lambda r: r["slug"]),
    ("CLASS", lambda r: r["errorClass"]),
    ("REPO", lambda r: r["repo"] or f"{r['distribution']} (learned)"),
    ("RAISED AT", lambda r: f"{r['filePath']}:{r['lineNumber']}"),
)
#: Column widths are measured on this many rows, then the rest are streamed at those widths.
TABLE_SAMPLE = 500
#: No column is wider than this (a file path may be 1,000 characters).
TABLE_CELL = 80


def write_table(rows: Iterable[dict[str, Any]], out: IO[str], *, width: int | None = None, color: bool = False) -> int:
    """Write ``rows`` as an aligned table; returns the number of rows.

    Widths come from the first :data:`TABLE_SAMPLE` rows, so a listing of a million records
    streams; a longer cell is cut with ``…``. With ``width`` (a terminal's) the last column is
    cut to fit; without it nothing is cut but the sample's measure.
    """
    style = Style(color)
    iterator = iter(rows)
    sample = [next(iterator, None) for _ in range(TABLE_SAMPLE)]
    sample = [row for row in sample if row is not None]
    if not sample:
        return 0
    cells = [_cells(row) for row in sample]
    widths = [min(TABLE_CELL, max(len(header), *(len(c[i]) for c in cells))) for i, (header, _) in enumerate(TABLE_COLUMNS)]
    if width and sum(widths) + 2 * (len(widths) - 1) > width:
        out.write(_stacked_header(width, style))
        formatted = functools.partial(_stacked_record, width=width, slug_width=widths[0])
    else:
        out.write(_line([header for header, _ in TABLE_COLUMNS], widths, width, style, header=True) + "\n")
        formatted = functools.partial(_line, widths=widths, width=width, style=style)
    count = 0
    for values in itertools.chain(cells, map(_cells, iterator)):  # the sample, then the rest streamed
        out.write(formatted(values) + "\n")
        count += 1
    return count


def _cells(row: dict[str, Any]) -> list[str]:
    """A row's table cells, cleaned and on one line each."""
    return [re.sub(r"\s+", " ", clean(str(get(row)))) for _, get in TABLE_COLUMNS]


def _line(values: list[str], widths: list[int], width: int | None, style: Style, header: bool = False) -> str:
    """One row of the aligned table: cells cut to their column's width, the line to the terminal's."""
    parts = [cut_line(value, widths[i]) for i, value in enumerate(values)]
    text = "  ".join([*(part.ljust(widths[i]) for i, part in enumerate(parts[:-1])), parts[-1]])  # the last unpadded
    text = cut_line(text, width)
    return style.bold(text) if header else text


def _stacked_header(width: int, style: Style) -> str:
    return style.bold(cut_line("SLUG  CLASS", width)) + "\n" + style.bold("    REPO · RAISED AT") + "\n"


def _stacked_record(values: list[str], width: int, slug_width: int) -> str:
    """A record for a terminal too narrow for the table's four columns: slug and class, then
    repository and raise site indented, so every column is kept. A slug stays whole (it names the
    record); a raise site too long for the line keeps its end (file and line)."""
    slug, error_class, repo, raised_at = values
    rest = [repo, raised_at]
    if len(slug) + 2 + len(error_class) <= width:
        first = f"{slug.ljust(min(slug_width, width - 2 - len(error_class)))}  {error_class}"
    else:
        first, rest = slug, [error_class, *rest]  # the class heads the next line instead
    joined = " · ".join(rest)
    if len(joined) + 4 <= width:
        return f"{first}\n    {joined}"
    room = width - 4
    site = raised_at if len(raised_at) <= room else "…" + raised_at[len(raised_at) - room + 1 :]
    return "\n".join([first, *(cut_line("    " + part, width) for part in rest[:-1]), "    " + site])


def write_json(rows: Iterable[dict[str, Any]], out: IO[str]) -> int:
    """Write ``rows`` as one JSON array, an item per line, without holding them all."""
    count = 0
    out.write("[")
    for row in rows:
        out.write(("," if count else "") + "\n  " + json.dumps(row, ensure_ascii=False))
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def write_csv(rows: Iterable[dict[str, Any]], out: IO[str]) -> int:
    """Write ``rows`` as CSV with a header row; ``tags`` are joined with spaces (tags have none)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(LIST_COLUMNS)
    count = 0
    for row in rows:
        writer.writerow(["" if row[c] is None else " ".join(row[c]) if c == "tags" else row[c] for c in LIST_COLUMNS])
        count += 1
    return count


# stats -----------------------------------------------------------------------------------------


def stats(db: Any, db_path: str | os.PathLike[str] | None = None, *, top: int | None = 20) -> dict[str, Any]:
    """Counts of the store: records per repository, class, family and tag; version; size.

    ``top`` keeps the largest groups of each kind (``None``: all); ``*Groups`` say how many
    there are in all, ``withoutFamily`` and ``withoutTags`` how many records have none.
    ``bytes`` is the database file's size (with its write-ahead log, if any).
    """
    from errordb.store import meta

    conn = getattr(db, "conn", db)
    if db_path is None:
        db_path = conn.execute("PRAGMA database_list").fetchone()[2] or None
    info = meta(conn)
    size = None
    if db_path:
        size = sum(os.path.getsize(p) for p in (Path(db_path), Path(f"{db_path}-wal")) if p.exists())
    limit = "" if top is None else f" LIMIT {int(top)}"

    def grouped(sql: str) -> tuple[list[dict[str, Any]], int]:
        rows = conn.execute(f"{sql} ORDER BY 2 DESC, 1{limit}").fetchall()
        groups = conn.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
        return [{"name": name, "records": count} for name, count in rows], groups

    repos, repo_groups = grouped("SELECT repo, count(*) FROM records GROUP BY repo")
    classes, class_groups = grouped("SELECT errorClass, count(*) FROM records GROUP BY errorClass")
    families, family_groups = grouped("SELECT backgroundTag, count(*) FROM records WHERE backgroundTag IS NOT NULL GROUP BY backgroundTag")
    tags, tag_groups = grouped("SELECT tag, count(*) FROM record_tags GROUP BY tag")
    titles = dict(conn.execute("SELECT tag, title FROM families").fetchall())
    for family in families:
        family["title"] = titles.get(family["name"])
    return {
        "database": str(db_path) if db_path else None,
        "bytes": size,
        "datasetVersion": info.get("datasetVersion"),
        "storeVersion": info.get("storeVersion"),
        "contentHash": info.get("contentHash"),
        "records": conn.execute("SELECT count(*) FROM records").fetchone()[0],
        "solutions": conn.execute("SELECT count(*) FROM solutions").fetchone()[0],
        "repos": repos, "repoGroups": repo_groups,
        "classes": classes, "classGroups": class_groups,
        "families": families, "familyGroups": family_groups,
        "tags": tags, "tagGroups": tag_groups,
        "withoutFamily": conn.execute("SELECT count(*) FROM records WHERE backgroundTag IS NULL").fetchone()[0],
        "withoutTags": conn.execute("SELECT count(*) FROM records WHERE id NOT IN (SELECT record_id FROM record_tags)").fetchone()[0],
    }  # fmt: skip


def human_bytes(size: int | None) -> str:
    if size is None:
        return "?"
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"  # pragma: no cover - the loop returns


def render_stats(data: dict[str, Any], *, color: bool = False) -> str:
    """The counts for a terminal: a header, then one aligned list per kind, largest first."""
    style = Style(color)

    def plural(count: int, word: str) -> str:
        return f"{count:,} {_plural(word, count)}"

    header = [
        style.bold(clean(data["database"] or "database")),
        f"  {human_bytes(data['bytes'])} · store layout {clean(data['storeVersion'] or '?')}"
        f" · dataset version {clean(data['datasetVersion'] or '?')}",
        "  " + " · ".join(
            [plural(data["records"], "record"), plural(data["solutions"], "solution"), plural(data["repoGroups"], "repository"),
             plural(data["classGroups"], "class"), plural(data["familyGroups"], "family"), plural(data["tagGroups"], "tag")]
        ),  # fmt: skip
    ]
    blocks = ["\n".join(header)]
    kinds = (("repos", "Repositories", "repoGroups", None), ("classes", "Classes", "classGroups", None),
             ("families", "Families", "familyGroups", "withoutFamily"), ("tags", "Tags", "tagGroups", "withoutTags"))  # fmt: skip
    for key, title, total, missing in kinds:
        rows = data[key]
        if not rows:
            continue
        digits = max(len(f"{row['records']:,}") for row in rows)
        names = max(len(clean(row["name"])) for row in rows)
        lines = [style.cyan(title)]
        for row in rows:
            name = clean(row["name"])
            if row.get("title"):
                name = name.ljust(names) + style.dim(f"  {clean(row['title'])}")
            lines.append(f"  {row['records']:>{digits},}  {name}")
        if data[total] > len(rows):
            lines.append(style.dim(f"  … and {data[total] - len(rows):,} more (--top 0 shows all)"))
        if missing and data[missing]:
            have = "has" if data[missing] == 1 else "have"
            lines.append(style.dim(f"  {plural(data[missing], 'record')} {have} {'no family' if key == 'families' else 'no tags'}"))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _plural(word: str, count: int) -> str:
    if count == 1:
        return word
    if word.endswith("y"):
        return word[:-1] + "ies"
    if word.endswith("s"):
        return word + "es"
    return word + "s"


# Shell completion ------------------------------------------------------------------------------

_COMPLETIONS = {
    "key": "SELECT slug FROM records WHERE slug LIKE :p ESCAPE '\\' ORDER BY slug LIMIT 50",
    "repo": "SELECT id FROM repos WHERE id LIKE :p ESCAPE '\\' ORDER BY id LIMIT 50",
    "tag": "SELECT name FROM tags WHERE name LIKE :p ESCAPE '\\' ORDER BY name LIMIT 50",
    "family": "SELECT tag FROM families WHERE tag LIKE :p ESCAPE '\\' ORDER BY tag LIMIT 50",
    "class": "SELECT DISTINCT errorClass FROM records WHERE errorClass LIKE :p ESCAPE '\\' ORDER BY 1 LIMIT 50",
    "distribution": "SELECT DISTINCT distribution FROM records WHERE distribution LIKE :p ESCAPE '\\' ORDER BY 1 LIMIT 50",
}


def completions(db_path: str | os.PathLike[str] | None, kind: str, prefix: str) -> list[str]:
    """Values of ``kind`` (key, repo, tag, family, class, distribution) starting with ``prefix``, for shell completion.

    Never raises: a shell completing a word must not print a traceback. It does not build the
    embedded default database either (that can take seconds); without one it offers nothing.
    """
    from errordb.store import STORE_VERSION, cache_dir
    from errordb.store.default import layer_db_path

    try:
        path = db_path or os.environ.get("ERRORDB_DB")
        if not path and layer_db_path().exists():
            path = layer_db_path()  # what search and list read once errordb learn made it
        if not path:
            built = sorted(cache_dir().glob("default-*.db"))
            if not built:
                return []
            path = built[-1]
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if conn.execute("SELECT value FROM meta WHERE key = 'storeVersion'").fetchone() != (STORE_VERSION,):
                return []
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            return [row[0] for row in conn.execute(_COMPLETIONS[kind], {"p": escaped + "%"})]
        finally:
            conn.close()
    except (sqlite3.Error, OSError, KeyError):
        return []
