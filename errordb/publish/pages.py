"""The data of each page of the site, read from the store as plain JSON-able dicts.

Every page is ``(path, template, context)``. The context is *all* a page shows, so its hash is
the page's input hash: an incremental build re-renders a page exactly when its context changed
(a record's text, a related record's message, a family's count...). Templates get the context
and nothing else from the database.

Listings stream from the database a page (:data:`PAGE_SIZE` items) at a time; no function here
holds more than one listing page or one batch of records in memory.
"""

from __future__ import annotations

import functools
import math
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from errordb.publish import paths as P
from errordb.publish import related as site_related
from errordb.publish.text import safe_https_url, shorten
from errordb.records.snippet import enclosing_class, snippet_language, split_example_fix

PAGE_SIZE = 500
#: Errors shown under each repository on the home page, and repositories per home page.
HOME_ERRORS_PER_REPO = 10
HOME_REPOS_PER_PAGE = 50
#: Errors listed on the search page for visitors without JavaScript.
SEARCH_FALLBACK = 100
SHORT_SHA = 10

Page = tuple[tuple[str, ...], str, dict[str, Any]]

#: Columns of one item of a listing (and of the search index).
ITEM_COLUMNS = ("id", "slug", "errorMessage", "errorClass", "severity", "repo", "filePath", "lineNumber")


def item(row: tuple) -> dict[str, Any]:
    """One error in a listing: what its line shows (the message shortened)."""
    data = dict(zip(ITEM_COLUMNS, row))
    P.record_id(data["id"])
    data["path"] = list(P.record_dir(data["slug"]))
    data["errorMessage"] = shorten(data["errorMessage"], 200)
    data["filePath"] = shorten(data["filePath"], 200)
    return data


_ITEM_SELECT = ", ".join(f'r."{c}"' for c in ITEM_COLUMNS)


@dataclass(eq=False)  # hashed by identity: family_counts is cached per Source
class Source:
    """The store a worker reads pages from, with the small lookups it caches."""

    conn: sqlite3.Connection
    #: A connection to the build's scratch database (the ``shared_message`` table), or None.
    work: sqlite3.Connection | None
    dataset_version: str

    @functools.cached_property
    def families(self) -> dict[str, dict[str, str]]:
        rows = self.conn.execute("SELECT tag, title, summary, explanation FROM families ORDER BY tag")
        return {tag: {"title": title or tag, "summary": summary or "", "explanation": explanation or ""} for tag, title, summary, explanation in rows}

    @functools.cached_property
    def common_words(self) -> site_related.CommonWords:
        return site_related.CommonWords()

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one Source per worker process
    def family_counts(self, tag: str) -> tuple[int, int]:
        """(records, repositories) of a family: as the build counted them before the pages were
        read (``family_counts`` in the scratch database: a family of 125,000 records took each
        worker 0.3 s to count), else counted here."""
        if self.work is not None:
            row = self.work.execute("SELECT records, repos FROM family_counts WHERE tag = ?", [tag]).fetchone()
            if row is not None:  # (a family that got its first record during the build: counted here)
                return row
        return self.conn.execute("SELECT count(*), count(DISTINCT repo) FROM records WHERE backgroundTag = ?", [tag]).fetchone()

    def same_message(self, first_id: str, last_id: str, ids: Iterable[str] = ()) -> dict[str, list[str]]:
        """For the records with ids from ``first_id`` to ``last_id`` that share their
        messagePattern or errorMessage: the ids of the others, in id order (one question a batch).

        An incremental build groups only the records it means to render (``shared_message_scope``
        lists them); any other of ``ids`` (a page it could not reuse after all) is looked up
        in the store, one scan each.
        """
        if self.work is None:
            return {}
        sql = (
            "SELECT DISTINCT a.id, b.id FROM shared_message a JOIN shared_message b ON a.grp = b.grp "
            "WHERE a.id BETWEEN ? AND ? AND b.id != a.id ORDER BY a.id, b.id"
        )
        found: dict[str, list[str]] = {}
        for record_id, other in self.work.execute(sql, [first_id, last_id]):
            found.setdefault(record_id, []).append(other)
        if self._scoped:
            scope = {row[0] for row in self.work.execute("SELECT id FROM shared_message_scope WHERE id BETWEEN ? AND ?", [first_id, last_id])}
            for record_id in ids:
                if record_id not in scope:
                    others = [row[0] for row in self.conn.execute(_SAME_MESSAGE_SQL, [record_id])]
                    if others:
                        found[record_id] = others
        return found

    @functools.cached_property
    def _scoped(self) -> bool:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'shared_message_scope'"
        return self.work is not None and self.work.execute(sql).fetchone() is not None


_SAME_MESSAGE_SQL = (
    "SELECT b.id FROM records a JOIN records b ON b.messagePattern = a.messagePattern OR b.errorMessage = a.errorMessage "
    "WHERE a.id = ? AND b.id != a.id ORDER BY b.id"
)


def build_shared_message_table(
    conn: sqlite3.Connection, work: sqlite3.Connection, groups: Iterable[list[str]] | None = None, scope: Iterable[str] = (),
) -> None:
    """Find, in one pass each, the records that share a messagePattern or an errorMessage; or
    take the ``groups`` of ids an incremental build found for the records ``scope`` (those
    whose pages it renders).

    The store has no index on message text, so asking per page would scan the whole table per
    record; grouping once costs one sort. Only groups of two or more are kept (usually few).
    """
    work.execute("CREATE TABLE shared_message (grp INTEGER NOT NULL, id TEXT NOT NULL)")
    if groups is None:
        groups = _shared_message_groups(conn)
    else:
        work.execute("CREATE TABLE shared_message_scope (id TEXT PRIMARY KEY)")
        work.executemany("INSERT INTO shared_message_scope VALUES (?)", ((record_id,) for record_id in sorted(set(scope))))
    batch = []
    for group, ids in enumerate(groups, 1):
        batch.extend((group, record_id) for record_id in ids)
        if len(batch) >= 10_000:
            work.executemany("INSERT INTO shared_message VALUES (?, ?)", batch)
            batch.clear()
    work.executemany("INSERT INTO shared_message VALUES (?, ?)", batch)
    work.execute("CREATE INDEX shared_message_id ON shared_message (id)")
    work.execute("CREATE INDEX shared_message_grp ON shared_message (grp)")
    work.commit()


def _shared_message_groups(conn: sqlite3.Connection) -> Iterator[list[str]]:
    for column in ("messagePattern", "errorMessage"):
        sql = f'SELECT "{column}", id FROM records WHERE "{column}" IN (SELECT "{column}" FROM records GROUP BY 1 HAVING count(*) > 1) ORDER BY 1, 2'
        group: list[str] = []
        previous = None
        for value, record_id in conn.execute(sql):
            if value != previous and group:
                yield group
                group = []
            previous = value
            group.append(record_id)
        if group:
            yield group


def write_family_counts(work: sqlite3.Connection, counts: Iterable[tuple[str, int, int]]) -> None:
    """Give the workers each family's (tag, records, repositories), counted once by the build."""
    work.execute("CREATE TABLE family_counts (tag TEXT PRIMARY KEY, records INTEGER NOT NULL, repos INTEGER NOT NULL)")
    work.executemany("INSERT INTO family_counts VALUES (?, ?, ?)", counts)


# Error pages ----------------------------------------------------------------------------------


def record_pages(
    source: Source, first_id: str, last_id: str, only: list[str] | None = None,
    windows: dict[str, list[site_related.Window]] | None = None,
) -> Iterator[tuple[str, Page, dict[str, Any]]]:
    """(id, page, what its input hash is made of) of the records with ids from ``first_id``
    to ``last_id`` (or only the ids ``only`` among them), in id order; ``windows`` receives
    each page's questions by id.

    The input hash stands for the record's own fields by their ``contentHash`` (that of the
    record file, which incremental builds already trust to say what changed): hashing the
    record's ~3 KB of text again for every page cost half of the page's key.
    """
    from errordb.store import iter_record_dicts

    where, params = "id BETWEEN ? AND ?", [first_id, last_id]
    if only is not None:
        if not only:
            return
        where += f" AND id IN ({','.join('?' * len(only))})"
        params += only
    # The rows as dicts, as the store holds them (validated on the way in): a Record model
    # made and dumped again for each page gave the same dict, at ~5% of a page's time.
    records = list(iter_record_dicts(source.conn, where=where, params=params))  # type: ignore[arg-type]
    source.common_words.check(source.conn)  # after the batch's first read: see CommonWords.check
    batch = site_related.Batch(first_id, last_id, source.common_words)  # shared by these pages only
    same_message = source.same_message(first_id, last_id, [record["id"] for record in records])
    batch.plan((record, record["tags"]) for record in records)
    for data in records:
        record_id = data["id"]
        dataset_version, function = data.pop("datasetVersion"), data.pop("function")
        content_hash = data.pop("contentHash")
        asked = windows.setdefault(record_id, []) if windows is not None else None
        page = record_page(source, data, dataset_version, function, same_message.get(record_id, []), asked, batch)
        yield record_id, page, {**page[2], "record": content_hash}


def record_page(
    source: Source, data: dict[str, Any], dataset_version: str, function: str | None, same: list[str],
    windows: list[site_related.Window] | None = None, batch: site_related.Batch | None = None,
) -> Page:
    """The error page of one record (``data``: its fields, as :func:`errordb.store.iter_record_dicts`
    gives them without the derived columns): every section of the reference page, as data.

    ``same``: the ids of the other records with its message (:meth:`Source.same_message`).
    ``windows``, when given, receives the questions asked for its related errors; ``batch``
    is what the pages rendered with this one share (:class:`errordb.publish.related.Batch`).
    """
    P.record_id(data["id"])
    path = (*P.record_dir(data["slug"]), "index.html")
    context: dict[str, Any] = {
        "record": data,
        "function": function,
        "enclosingClass": enclosing_class(data["sourceCode"], data["sourceCodeStart"], data["lineNumber"]),
        "repoPath": list(P.repo_dir(data["repo"])),
        "repoUrl": safe_https_url(f"https://github.com/{data['repo']}"),
        "githubUrl": safe_https_url(data["githubUrl"]) if data["githubUrl"].startswith("https://github.com/") else None,
        "shortSha": data["analyzedSha"][:SHORT_SHA],
        "tags": [{"name": tag, "path": list(P.tag_dir(tag))} for tag in data["tags"]],
        "family": _family(source, data["backgroundTag"]),
        "exampleFix": _example_fix(data["exampleFix"]),
        "snippets": {
            name: {"code": data[name], "language": _language(data[name])}
            for name in ("validationCode", "typeGuard", "tryCatchPattern")
            if data[name]
        },
        "sameMessage": _same_message(source, data, function, same),
        "related": [
            {
                "slug": r.slug, "path": list(P.record_dir(r.slug)), "errorMessage": shorten(r.errorMessage, 160),
                "errorClass": r.errorClass, "repo": r.repo, "filePath": r.filePath, "fileName": r.filePath.rsplit("/", 1)[-1],
                "lineNumber": r.lineNumber, "reasons": list(r.reasons),
            }  # fmt: skip
            for r in site_related.related_records(source.conn, {**data, "function": function}, data["tags"], same, windows=windows, batch=batch)
        ],
        "repro": _repro(data),
        "datasetVersion": dataset_version,
    }
    return path, "error.html", context


def _language(code: str | None) -> str:
    """How to colour a snippet: Python when it parses, shell when it reads as commands, else text."""
    kind = snippet_language(code)
    return kind if kind in ("python", "shell") else "text"


def _example_fix(text: str | None) -> dict[str, Any] | None:
    """The example fix cut at its ``# before`` / ``# after`` markers (one part without them)."""
    if not text:
        return None
    parts = split_example_fix(text)
    labels = {"": "", "before": "Before", "after": "After"}
    return {"parts": [{"label": labels.get(key, key.title()), "code": code, "language": _language(code)} for key, code in parts.items() if code.strip()]}


def _family(source: Source, tag: str | None) -> dict[str, Any] | None:
    if not tag:
        return None
    family = source.families.get(tag, {"title": tag, "summary": "", "explanation": ""})
    records, repos = source.family_counts(tag)
    return {"tag": tag, "path": list(P.family_dir(tag)), **family, "records": records, "repos": repos}


def _same_message(source: Source, data: dict[str, Any], function: str | None, others: list[str]) -> dict[str, Any] | None:
    """The "same message, other places" box: the raise sites side by side, and what differs."""
    if not others:
        return None
    marks = ",".join("?" * len(others[:20]))
    rows = source.conn.execute(
        f'SELECT id, slug, repo, filePath, lineNumber, "function", errorClass, sourceCode, sourceCodeStart, githubUrl FROM records WHERE id IN ({marks}) ORDER BY id',
        others[:20],
    ).fetchall()
    places = [_place(data["id"], data["slug"], data["repo"], data["filePath"], data["lineNumber"], function, data["errorClass"], data["sourceCode"], data["sourceCodeStart"], data["githubUrl"], mine=True)]
    places += [_place(*row, mine=False) for row in rows]
    differs = [label for key, label in (("repo", "repository"), ("filePath", "file"), ("function", "function"), ("enclosingClass", "class"), ("errorClass", "exception class"), ("lineNumber", "line")) if len({p[key] for p in places}) > 1]
    # The enclosing class is shown only when a snippet shows one (a window often starts inside it).
    return {"places": places, "differsBy": differs, "more": max(0, len(others) - 20), "classes": any(p["enclosingClass"] for p in places)}


def _place(record_id, slug, repo, file_path, line, function, error_class, source_code, start, github_url, *, mine: bool) -> dict[str, Any]:
    return {
        "id": P.record_id(record_id),
        "slug": slug,
        "path": list(P.record_dir(slug)),
        "repo": repo,
        "filePath": file_path,
        "fileName": file_path.rsplit("/", 1)[-1],
        "lineNumber": line,
        "function": function,
        "enclosingClass": enclosing_class(source_code, start, line),
        "errorClass": error_class,
        "githubUrl": safe_https_url(github_url),
        "mine": mine,
    }


def _repro(data: dict[str, Any]) -> dict[str, Any] | None:
    from errordb.publish.repro_view import reproduction_view

    return reproduction_view(data)


# Listings -----------------------------------------------------------------------------------


def pager(directory: tuple[str, ...], page: int, pages: int, total: int, size: int = PAGE_SIZE) -> dict[str, Any]:
    """Where a listing page sits among its pages: numbers, previous/next and a few page links."""
    shown = sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)})
    return {
        "page": page,
        "pages": pages,
        "total": total,
        "first": (page - 1) * size + 1 if total else 0,
        "last": min(total, page * size),
        "prev": list(P.listing_file(directory, page - 1)) if page > 1 else None,
        "next": list(P.listing_file(directory, page + 1)) if page < pages else None,
        "links": [{"n": n, "path": list(P.listing_file(directory, n)), "gap": i > 0 and n - shown[i - 1] > 1} for i, n in enumerate(shown)],
    }


def paged(directory: tuple[str, ...], template: str, base: dict[str, Any], total: int, items: Iterable[dict[str, Any]], size: int = PAGE_SIZE) -> Iterator[Page]:
    """A listing cut into pages of ``size`` items, streaming from ``items``."""
    pages = max(1, math.ceil(total / size))
    stream = iter(items)
    for number in range(1, pages + 1):
        chunk = list(islice(stream, size))
        yield P.listing_file(directory, number), template, {**base, "items": chunk, "pager": pager(directory, number, pages, total, size)}


def _items(source: Source, sql: str, params: list[Any]) -> Iterator[dict[str, Any]]:
    cursor = source.conn.execute(sql, params)
    while rows := cursor.fetchmany(PAGE_SIZE):
        yield from (item(row) for row in rows)


def totals(source: Source) -> dict[str, int]:
    conn = source.conn
    return {
        "records": conn.execute("SELECT count(*) FROM records").fetchone()[0],
        "repos": conn.execute("SELECT count(DISTINCT repo) FROM records").fetchone()[0],
        "families": conn.execute("SELECT count(DISTINCT backgroundTag) FROM records WHERE backgroundTag IS NOT NULL").fetchone()[0],
        "tags": conn.execute("SELECT count(DISTINCT tag) FROM record_tags").fetchone()[0],
    }


def home_pages(source: Source) -> Iterator[Page]:
    """The home page: the explain box, then every repository with its count and first errors."""
    counts = totals(source)
    repo_count = counts["repos"]
    pages = max(1, math.ceil(repo_count / HOME_REPOS_PER_PAGE))
    cursor = source.conn.execute("SELECT repo, count(*) FROM records GROUP BY repo ORDER BY repo")
    for number in range(1, pages + 1):
        repos = []
        for repo, count in cursor.fetchmany(HOME_REPOS_PER_PAGE):
            shown = list(_items(source, f"SELECT {_ITEM_SELECT} FROM records r WHERE r.repo = ? ORDER BY r.filePath, r.lineNumber, r.id LIMIT ?", [repo, HOME_ERRORS_PER_REPO]))
            repos.append({"repo": repo, "path": list(P.repo_dir(repo)), "count": count, "errors": shown, "more": count - len(shown)})
        context = {"totals": counts, "repos": repos, "pager": pager((), number, pages, repo_count, HOME_REPOS_PER_PAGE), "datasetVersion": source.dataset_version}
        yield P.listing_file((), number), "index.html", context


def all_errors_pages(source: Source) -> Iterator[Page]:
    total = source.conn.execute("SELECT count(*) FROM records").fetchone()[0]
    items = _items(source, f"SELECT {_ITEM_SELECT} FROM records r ORDER BY r.slug", [])
    return paged(("errors",), "listing.html", {"kind": "all", "title": "All errors", "datasetVersion": source.dataset_version}, total, items)


def repo_pages(source: Source, repo: str) -> Iterator[Page]:
    total = source.conn.execute("SELECT count(*) FROM records WHERE repo = ?", [repo]).fetchone()[0]
    items = _items(source, f"SELECT {_ITEM_SELECT} FROM records r WHERE r.repo = ? ORDER BY r.filePath, r.lineNumber, r.id", [repo])
    base = {"kind": "repo", "title": repo, "repo": repo, "repoUrl": safe_https_url(f"https://github.com/{repo}"), "datasetVersion": source.dataset_version}
    return paged(P.repo_dir(repo), "listing.html", base, total, items)


def tag_pages(source: Source, tag: str) -> Iterator[Page]:
    total = source.conn.execute("SELECT count(DISTINCT record_id) FROM record_tags WHERE tag = ?", [tag]).fetchone()[0]
    sql = f"SELECT {_ITEM_SELECT} FROM records r WHERE r.id IN (SELECT record_id FROM record_tags WHERE tag = ?) ORDER BY r.slug"
    base = {"kind": "tag", "title": f"Tag: {tag}", "tag": tag, "datasetVersion": source.dataset_version}
    return paged(P.tag_dir(tag), "listing.html", base, total, _items(source, sql, [tag]))


def family_pages(source: Source, tag: str) -> Iterator[Page]:
    family = _family(source, tag)
    assert family is not None
    items = _items(source, f"SELECT {_ITEM_SELECT} FROM records r WHERE r.backgroundTag = ? ORDER BY r.slug", [tag])
    base = {"kind": "family", "title": family["title"], "family": family, "datasetVersion": source.dataset_version}
    return paged(P.family_dir(tag), "listing.html", base, family["records"], items)


def tags_index_pages(source: Source) -> Iterator[Page]:
    total = source.conn.execute("SELECT count(DISTINCT tag) FROM record_tags").fetchone()[0]
    cursor = source.conn.execute("SELECT tag, count(DISTINCT record_id) FROM record_tags GROUP BY tag ORDER BY tag")
    entries = ({"name": tag, "path": list(P.tag_dir(tag)), "count": count} for tag, count in cursor)
    return paged(("tags",), "tags.html", {"datasetVersion": source.dataset_version}, total, entries)


def families_index_pages(source: Source) -> Iterator[Page]:
    tags = [tag for (tag,) in source.conn.execute("SELECT DISTINCT backgroundTag FROM records WHERE backgroundTag IS NOT NULL ORDER BY 1")]
    entries = (_family(source, tag) for tag in tags)
    return paged(("families",), "families.html", {"datasetVersion": source.dataset_version}, len(tags), entries)


def search_page(source: Source) -> Page:
    fallback = list(_items(source, f"SELECT {_ITEM_SELECT} FROM records r ORDER BY r.slug LIMIT ?", [SEARCH_FALLBACK]))
    context = {"items": fallback, "total": totals(source)["records"], "datasetVersion": source.dataset_version}
    return ("search", "index.html"), "search.html", context


def api_page(source: Source) -> Page:
    example = source.conn.execute("SELECT id, slug FROM records ORDER BY id LIMIT 1").fetchone()
    context = {"example": {"id": P.record_id(example[0]), "slug": example[1]} if example else None, "datasetVersion": source.dataset_version}
    return ("docs", "api", "index.html"), "api.html", context


def not_found_page(source: Source) -> Page:
    return ("404.html",), "404.html", {"datasetVersion": source.dataset_version}


def search_chunk(source: Source, first_id: str, last_id: str) -> list[list[Any]]:
    """The search index entries of a batch of records: ``[slug, message, class, repo, file, id]``."""
    sql = "SELECT slug, errorMessage, errorClass, repo, filePath, id FROM records WHERE id BETWEEN ? AND ? ORDER BY id"
    out = []
    for slug, message, error_class, repo, file_path, record_id in source.conn.execute(sql, [first_id, last_id]):
        P.segment(slug, "slug")
        out.append([slug, shorten(message, 300), error_class, repo, file_path, P.record_id(record_id)])
    return out
