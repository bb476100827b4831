"""The API's listings: the errors index, the matcher's patterns, and the repository, tag and
family listings with their indexes.

Each listing is one SQL query in its final order (grouped listings by group, then id), streamed
row by row into :class:`~errordb.publish.output.Pager` objects: memory holds one page per open
listing, never the dataset. Shapes: :mod:`errordb.publish.api_shapes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from errordb.publish import api_layout as layout
from errordb.publish.api_layout import Urls
from errordb.publish.output import OutputTree, Pager
from errordb.records.snippet import line_at

#: The ``records`` columns a summary or pattern entry needs.
SUMMARY_COLUMNS = ("id", "slug", "repo", "errorClass", "errorMessage", "messagePattern", "filePath", "lineNumber", "function")
_SELECT = ", ".join(f'r."{name}"' for name in SUMMARY_COLUMNS)


@dataclass(frozen=True)
class Paging:
    """How big a page may get: items, and bytes of item JSON."""

    page_size: int
    page_bytes: int

    def pager(self, tree: OutputTree, urls: Urls, listing: str, *, inline_first: bool = True) -> Pager:
        return Pager(tree, urls, listing, page_size=self.page_size, page_bytes=self.page_bytes, inline_first=inline_first)


def error_summary(row: dict[str, Any], urls: Urls) -> dict[str, Any]:
    """A record's entry in the index and the listings (shape ``ErrorSummary``)."""
    summary = {name: row[name] for name in SUMMARY_COLUMNS if name != "function"}
    summary["pageUrl"] = urls.record_page(row["slug"])
    summary["jsonUrl"] = urls.record_json(row["id"])
    return summary


def pattern_entry(row: dict[str, Any]) -> dict[str, Any]:
    """A record's entry in ``patterns.json`` (shape ``PatternEntry``); ``row`` also needs
    ``sourceCode`` and ``sourceCodeStart``."""
    entry = {name: row[name] for name in SUMMARY_COLUMNS}
    line = line_at(row["sourceCode"], row["sourceCodeStart"], row["lineNumber"])
    entry["raiseLine"] = line.strip() if line is not None else None
    return entry


def write_listings(db: Any, tree: OutputTree, urls: Urls, paging: Paging) -> None:
    """Every listing of the API, into ``tree``."""
    write_errors_index(db, tree, urls, paging)
    write_repo_listings(db, tree, urls, paging)
    write_tag_listings(db, tree, urls, paging)
    write_family_listings(db, tree, urls, paging)


def write_errors_index(db: Any, tree: OutputTree, urls: Urls, paging: Paging) -> None:
    """``errors/index.json`` (a manifest of pages) and ``patterns.json``, in one pass by id."""
    index = paging.pager(tree, urls, layout.ERRORS_INDEX, inline_first=False)
    patterns = paging.pager(tree, urls, layout.PATTERNS)
    for row in _rows(db, f"SELECT {_SELECT}, r.sourceCode, r.sourceCodeStart FROM records r ORDER BY r.id"):
        index.add(row["id"], error_summary(row, urls))
        patterns.add(row["id"], pattern_entry(row))
    index.finish()
    patterns.finish()


def write_repo_listings(db: Any, tree: OutputTree, urls: Urls, paging: Paging) -> None:
    """``repos/<owner>/<name>.json`` for every repository, and ``repos/index.json``."""
    sql = f"""
        SELECT p.owner AS _owner, p.name AS _name, p.url AS _url, {_SELECT}
        FROM records r JOIN repos p ON p.id = r.repo
        ORDER BY r.repo, r.id
    """
    overview = paging.pager(tree, urls, layout.REPOS_INDEX)
    for repo, rows in groupby(_rows(db, sql), key=lambda row: row["repo"]):
        first = next(rows)
        header = {"repo": repo, "owner": first["_owner"], "name": first["_name"], "url": first["_url"]}
        listing = layout.repo_listing(repo)
        count = _write_group(tree, urls, paging, listing, header, _chain(first, rows))
        overview.add(repo, {**header, "count": count, "listingUrl": urls.api(listing)})
    overview.finish()


def write_tag_listings(db: Any, tree: OutputTree, urls: Urls, paging: Paging) -> None:
    """``tags/<tag>.json`` for every tag in use, and ``tags/index.json``."""
    # DISTINCT: a record that lists a tag twice is still listed once under it.
    sql = f"""
        SELECT DISTINCT t.tag AS _tag, {_SELECT}
        FROM record_tags t JOIN records r ON r.id = t.record_id
        ORDER BY t.tag, r.id
    """
    overview = paging.pager(tree, urls, layout.TAGS_INDEX)
    for tag, rows in groupby(_rows(db, sql), key=lambda row: row["_tag"]):
        listing = layout.tag_listing(tag)
        count = _write_group(tree, urls, paging, listing, {"tag": tag}, rows)
        overview.add(tag, {"tag": tag, "count": count, "listingUrl": urls.api(listing)})
    overview.finish()


def write_family_listings(db: Any, tree: OutputTree, urls: Urls, paging: Paging) -> None:
    """``families/<tag>.json`` for every family, with or without records, and ``families/index.json``."""
    sql = f"""
        SELECT f.tag AS _tag, f.title AS _title, f.summary AS _summary, f.explanation AS _explanation, {_SELECT}
        FROM families f LEFT JOIN records r ON r.backgroundTag = f.tag
        ORDER BY f.tag, r.id
    """
    overview = paging.pager(tree, urls, layout.FAMILIES_INDEX)
    for tag, rows in groupby(_rows(db, sql), key=lambda row: row["_tag"]):
        first = next(rows)
        header = {"tag": tag, "title": first["_title"], "summary": first["_summary"], "explanation": first["_explanation"]}
        # A family no record uses comes back as one row without a record.
        members = _chain(first, rows) if first["id"] is not None else iter(())
        listing = layout.family_listing(tag)
        count = _write_group(tree, urls, paging, listing, header, members)
        entry = {"tag": tag, "title": header["title"], "summary": header["summary"], "count": count}
        overview.add(tag, {**entry, "listingUrl": urls.api(listing)})
    overview.finish()


def _write_group(
    tree: OutputTree, urls: Urls, paging: Paging, listing: str, header: dict[str, Any], rows: Iterator[dict[str, Any]]
) -> int:
    pager = paging.pager(tree, urls, listing)
    for row in rows:
        pager.add(row["id"], error_summary(row, urls))
    pager.finish(header)
    return pager.count


def _rows(db: Any, sql: str, params: list[Any] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of ``sql`` as dicts, streamed (``db``: an sqlite3 connection or sqlite_utils Database)."""
    cursor = db.execute(sql, params or [])
    names = [column[0] for column in cursor.description]
    while batch := cursor.fetchmany(1000):
        for row in batch:
            yield dict(zip(names, row))


def _chain(first: dict[str, Any], rest: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield first
    yield from rest

