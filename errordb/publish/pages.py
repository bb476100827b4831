"""The data of each page of the site, read from the store as plain JSON-able dicts.

Every page is ``(path, template, context)``; templates get the context and nothing else from
the database. A page can be made on its own from its path (:func:`page_at`, what ``errordb
serve`` does for each request), and the build makes every page (:func:`listings` and
:func:`record_page` for each record). Listings are read a page at a time (``LIMIT``/``OFFSET``
in their sort order), so nothing here holds more than one listing page in memory.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from itertools import islice
from dataclasses import dataclass
from typing import Any

from errordb.publish import paths as P
from errordb.publish import related
from errordb.publish.repro_view import reproduction_view
from errordb.publish.text import safe_https_url, shorten
from errordb.records.snippet import enclosing_class, snippet_language, split_example_fix

PAGE_SIZE = 500
#: Errors shown under each repository on the home page, and repositories per home page.
HOME_ERRORS_PER_REPO = 10
HOME_REPOS_PER_PAGE = 50
#: Errors listed on the search page for visitors without JavaScript.
SEARCH_FALLBACK = 100
#: Other places shown in the "same message" box.
SAME_MESSAGE_SHOWN = 20
SHORT_SHA = 10

Page = tuple[tuple[str, ...], str, dict[str, Any]]

#: Columns of one item of a listing (and of the search index).
ITEM_COLUMNS = ("id", "slug", "errorMessage", "errorClass", "severity", "repo", "filePath", "lineNumber")
_ITEM_SELECT = ", ".join(f'r."{c}"' for c in ITEM_COLUMNS)


def item(row: tuple) -> dict[str, Any]:
    """One error in a listing: what its line shows (the message shortened)."""
    data = dict(zip(ITEM_COLUMNS, row))
    P.record_id(data["id"])
    data["path"] = list(P.record_dir(data["slug"]))
    data["errorMessage"] = shorten(data["errorMessage"], 200)
    data["filePath"] = shorten(data["filePath"], 200)
    return data


@dataclass(eq=False)  # hashed by identity: the caches below are per Source
class Source:
    """The store pages are read from, with the small lookups it caches (one per build worker
    or per served request)."""

    conn: sqlite3.Connection
    dataset_version: str = ""

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> Source:
        row = conn.execute("SELECT value FROM meta WHERE key = 'datasetVersion'").fetchone()
        return cls(conn, (row[0] if row else None) or "")

    @functools.cached_property
    def families(self) -> dict[str, dict[str, str]]:
        rows = self.conn.execute("SELECT tag, title, summary, explanation FROM families ORDER BY tag")
        return {tag: {"title": title or tag, "summary": summary or "", "explanation": explanation or ""} for tag, title, summary, explanation in rows}

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one Source per worker or request
    def family_counts(self, tag: str) -> tuple[int, int]:
        """(records, repositories) of a family."""
        return self.conn.execute("SELECT count(*), count(DISTINCT repo) FROM records WHERE backgroundTag = ?", [tag]).fetchone()

    def items(self, where: str, params: list[Any], order: str, offset: int, limit: int) -> list[dict[str, Any]]:
        sql = f"SELECT {_ITEM_SELECT} FROM records r WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?"
        return [item(row) for row in self.conn.execute(sql, [*params, limit, offset])]

    def all_items(self, where: str, params: list[Any], order: str) -> Iterator[dict[str, Any]]:
        """Every item of :meth:`items`, read by one cursor."""
        return (item(row) for row in self.conn.execute(f"SELECT {_ITEM_SELECT} FROM records r WHERE {where} ORDER BY {order}", params))

    def count(self, sql: str, params: list[Any] | None = None) -> int:
        return self.conn.execute(sql, params or []).fetchone()[0]


# Error pages ----------------------------------------------------------------------------------


def record_page(source: Source, data: dict[str, Any]) -> Page:
    """The error page of one record: every section of the reference page, as data. ``data`` is
    the record as :func:`errordb.store.iter_record_dicts` gives it (with its derived columns)."""
    P.record_id(data["id"])
    record = {key: value for key, value in data.items() if key not in ("datasetVersion", "function", "contentHash")}
    function = data.get("function")
    same = related.same_message_ids(source.conn, data)
    context: dict[str, Any] = {
        "record": record,
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
        "sameMessage": _same_message(source, data, same),
        "related": [
            {
                "slug": r.slug, "path": list(P.record_dir(r.slug)), "errorMessage": shorten(r.errorMessage, 160),
                "errorClass": r.errorClass, "repo": r.repo, "filePath": r.filePath, "fileName": r.filePath.rsplit("/", 1)[-1],
                "lineNumber": r.lineNumber, "reasons": list(r.reasons),
            }  # fmt: skip
            for r in related.related_records(source.conn, data, data["tags"], same=same)
        ],
        "repro": reproduction_view(data),
        "datasetVersion": data["datasetVersion"],
    }
    return (*P.record_dir(data["slug"]), "index.html"), "error.html", context


def _language(code: str | None) -> str:
    """How to colour a snippet: Python when it parses, shell when it reads as commands, else text."""
    kind = snippet_language(code)
    return kind if kind in ("python", "shell") else "text"


def _example_fix(text: str | None) -> dict[str, Any] | None:
    """The example fix cut at its ``# before`` / ``# after`` markers (one part without them)."""
    if not text:
        return None
    labels = {"": "", "before": "Before", "after": "After"}
    parts = split_example_fix(text).items()
    return {"parts": [{"label": labels.get(key, key.title()), "code": code, "language": _language(code)} for key, code in parts if code.strip()]}


def _family(source: Source, tag: str | None) -> dict[str, Any] | None:
    if not tag:
        return None
    family = source.families.get(tag, {"title": tag, "summary": "", "explanation": ""})
    records, repos = source.family_counts(tag)
    return {"tag": tag, "path": list(P.family_dir(tag)), **family, "records": records, "repos": repos}


_PLACE_COLUMNS = ("id", "slug", "repo", "filePath", "lineNumber", "function", "errorClass", "sourceCode", "sourceCodeStart", "githubUrl")


def _same_message(source: Source, data: dict[str, Any], others: list[str]) -> dict[str, Any] | None:
    """The "same message, other places" box: the raise sites side by side, and what differs."""
    if not others:
        return None
    shown = others[:SAME_MESSAGE_SHOWN]
    columns = ", ".join(f'"{c}"' for c in _PLACE_COLUMNS)
    rows = source.conn.execute(f"SELECT {columns} FROM records WHERE id IN ({','.join('?' * len(shown))}) ORDER BY id", shown)
    places = [_place(data, mine=True)] + [_place(dict(zip(_PLACE_COLUMNS, row)), mine=False) for row in rows]
    compared = (("repo", "repository"), ("filePath", "file"), ("function", "function"), ("enclosingClass", "class"),
                ("errorClass", "exception class"), ("lineNumber", "line"))  # fmt: skip
    differs = [label for key, label in compared if len({p[key] for p in places}) > 1]
    # The enclosing class is shown only when a snippet shows one (a window often starts inside it).
    return {"places": places, "differsBy": differs, "more": max(0, len(others) - SAME_MESSAGE_SHOWN), "classes": any(p["enclosingClass"] for p in places)}


def _place(row: dict[str, Any], *, mine: bool) -> dict[str, Any]:
    return {
        "id": P.record_id(row["id"]),
        "slug": row["slug"],
        "path": list(P.record_dir(row["slug"])),
        "repo": row["repo"],
        "filePath": row["filePath"],
        "fileName": row["filePath"].rsplit("/", 1)[-1],
        "lineNumber": row["lineNumber"],
        "function": row.get("function"),
        "enclosingClass": enclosing_class(row["sourceCode"], row["sourceCodeStart"], row["lineNumber"]),
        "errorClass": row["errorClass"],
        "githubUrl": safe_https_url(row["githubUrl"]),
        "mine": mine,
    }


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


@dataclass(frozen=True)
class Listing:
    """A listing cut into pages of ``size`` entries: ``entries(offset, limit)`` reads one page's."""

    directory: tuple[str, ...]
    template: str
    base: dict[str, Any]
    total: int
    entries: Callable[[int, int], list[dict[str, Any]]]
    size: int = PAGE_SIZE
    key: str = "items"  # the context's name for the page's entries
    #: Every entry in order, read by one cursor: a build's pages without OFFSET skipping over
    #: all the entries before each page (quadratic in a listing's length).
    stream: Callable[[], Iterator[dict[str, Any]]] | None = None

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.size))

    def page(self, number: int, entries: list[dict[str, Any]] | None = None) -> Page | None:
        """Page ``number`` (from 1), or None past the last one; ``entries``: its entries, if read."""
        if not 1 <= number <= self.pages:
            return None
        if entries is None:
            entries = self.entries((number - 1) * self.size, self.size)
        context = {**self.base, self.key: entries, "pager": pager(self.directory, number, self.pages, self.total, self.size)}
        return P.listing_file(self.directory, number), self.template, context

    def all_pages(self) -> Iterator[Page]:
        stream = self.stream() if self.stream is not None else None
        for number in range(1, self.pages + 1):
            yield self.page(number, list(islice(stream, self.size)) if stream is not None else None)  # type: ignore[misc]


def totals(source: Source) -> dict[str, int]:
    return {
        "records": source.count("SELECT count(*) FROM records"),
        "repos": source.count("SELECT count(DISTINCT repo) FROM records"),
        "families": source.count("SELECT count(DISTINCT backgroundTag) FROM records WHERE backgroundTag IS NOT NULL"),
        "tags": source.count("SELECT count(DISTINCT tag) FROM record_tags"),
    }


def home(source: Source) -> Listing:
    """The home page: the explain box, then every repository with its count and first errors."""
    counts = totals(source)

    def repos(offset: int, limit: int) -> list[dict[str, Any]]:
        rows = source.conn.execute("SELECT repo, count(*) FROM records GROUP BY repo ORDER BY repo LIMIT ? OFFSET ?", [limit, offset]).fetchall()
        order = "r.filePath, r.lineNumber, r.id"
        return [
            {"repo": repo, "path": list(P.repo_dir(repo)), "count": count, "more": max(0, count - HOME_ERRORS_PER_REPO),
             "errors": source.items("r.repo = ?", [repo], order, 0, HOME_ERRORS_PER_REPO)}
            for repo, count in rows
        ]  # fmt: skip

    base = {"totals": counts, "datasetVersion": source.dataset_version}
    return Listing((), "index.html", base, counts["repos"], repos, HOME_REPOS_PER_PAGE, key="repos")


def _errors(source: Source, directory: tuple[str, ...], base: dict[str, Any], where: str, params: list[Any], order: str) -> Listing:
    total = source.count(f"SELECT count(*) FROM records r WHERE {where}", params)
    base = {**base, "datasetVersion": source.dataset_version}
    return Listing(directory, "listing.html", base, total, lambda offset, limit: source.items(where, params, order, offset, limit),
                   stream=lambda: source.all_items(where, params, order))  # fmt: skip


def all_errors(source: Source) -> Listing:
    return _errors(source, ("errors",), {"kind": "all", "title": "All errors"}, "1", [], "r.slug")


def repo_errors(source: Source, repo: str) -> Listing:
    base = {"kind": "repo", "title": repo, "repo": repo, "repoUrl": safe_https_url(f"https://github.com/{repo}")}
    return _errors(source, P.repo_dir(repo), base, "r.repo = ?", [repo], "r.filePath, r.lineNumber, r.id")


def tag_errors(source: Source, tag: str) -> Listing:
    where = "r.id IN (SELECT record_id FROM record_tags WHERE tag = ?)"
    return _errors(source, P.tag_dir(tag), {"kind": "tag", "title": f"Tag: {tag}", "tag": tag}, where, [tag], "r.slug")


def family_errors(source: Source, tag: str) -> Listing:
    family = _family(source, tag)
    assert family is not None
    base = {"kind": "family", "title": family["title"], "family": family}
    return _errors(source, P.family_dir(tag), base, "r.backgroundTag = ?", [tag], "r.slug")


def tags_index(source: Source) -> Listing:
    total = source.count("SELECT count(DISTINCT tag) FROM record_tags")

    def entries(offset: int, limit: int) -> list[dict[str, Any]]:
        sql = "SELECT tag, count(DISTINCT record_id) FROM record_tags GROUP BY tag ORDER BY tag LIMIT ? OFFSET ?"
        return [{"name": tag, "path": list(P.tag_dir(tag)), "count": count} for tag, count in source.conn.execute(sql, [limit, offset])]

    return Listing(("tags",), "tags.html", {"datasetVersion": source.dataset_version}, total, entries)


def families_index(source: Source) -> Listing:
    tags = _family_tags(source)
    return Listing(("families",), "families.html", {"datasetVersion": source.dataset_version}, len(tags),
                   lambda offset, limit: [_family(source, tag) for tag in tags[offset : offset + limit]])  # fmt: skip


def _family_tags(source: Source) -> list[str]:
    return [tag for (tag,) in source.conn.execute("SELECT DISTINCT backgroundTag FROM records WHERE backgroundTag IS NOT NULL ORDER BY 1")]


def _repos(source: Source) -> list[str]:
    return [repo for (repo,) in source.conn.execute("SELECT DISTINCT repo FROM records ORDER BY 1")]


def _tags(source: Source) -> list[str]:
    return [tag for (tag,) in source.conn.execute("SELECT DISTINCT tag FROM record_tags ORDER BY 1")]


def fixed_listings(source: Source) -> list[Listing]:
    """The listings every site has: home, all errors, the families and the tags."""
    return [home(source), all_errors(source), families_index(source), tags_index(source)]


#: The listings of each family, tag and repository: (kind, the names, the folder of one, its listing).
_NAMED = {
    "family": (_family_tags, P.family_dir, family_errors),
    "tag": (_tags, P.tag_dir, tag_errors),
    "repo": (_repos, P.repo_dir, repo_errors),
}


def named_listing_keys(source: Source) -> Iterator[tuple[str, str]]:
    """(kind, name) of every family's, tag's and repository's listing, in a fixed order."""
    for kind, (names, _, _) in _NAMED.items():
        yield from ((kind, name) for name in names(source))


def named_listing(source: Source, kind: str, name: str) -> Listing:
    return _NAMED[kind][2](source, name)


def named_listings(source: Source) -> Iterator[Listing]:
    return (named_listing(source, kind, name) for kind, name in named_listing_keys(source))


def single_pages(source: Source) -> list[Page]:
    """The pages that are neither an error nor a listing."""
    fallback = source.items("1", [], "r.slug", 0, SEARCH_FALLBACK)
    search = {"items": fallback, "total": totals(source)["records"], "datasetVersion": source.dataset_version}
    example = source.conn.execute("SELECT id, slug FROM records ORDER BY id LIMIT 1").fetchone()
    api = {"example": {"id": P.record_id(example[0]), "slug": example[1]} if example else None, "datasetVersion": source.dataset_version}
    return [
        (("search", "index.html"), "search.html", search),
        (("docs", "api", "index.html"), "api.html", api),
        (("404.html",), "404.html", {"datasetVersion": source.dataset_version}),
    ]


_SEARCH_ENTRY = "SELECT slug, errorMessage, errorClass, repo, filePath, id FROM records ORDER BY id"


def search_chunk(source: Source, number: int) -> list[list[Any]]:
    """Entries ``number`` (from 0) of the search index, :data:`PAGE_SIZE` records in id order:
    ``[slug, message, class, repo, file, id]``."""
    return [_search_entry(row) for row in source.conn.execute(_SEARCH_ENTRY + " LIMIT ? OFFSET ?", [PAGE_SIZE, number * PAGE_SIZE])]


def search_chunks(source: Source) -> Iterator[list[list[Any]]]:
    """Every :func:`search_chunk` in order, read by one cursor."""
    cursor = source.conn.execute(_SEARCH_ENTRY)
    while rows := cursor.fetchmany(PAGE_SIZE):
        yield [_search_entry(row) for row in rows]


def _search_entry(row: tuple) -> list[Any]:
    slug, message, error_class, repo, file_path, record_id = row
    P.segment(slug, "slug")
    return [slug, shorten(message, 300), error_class, repo, file_path, P.record_id(record_id)]


# A page from its path (errordb serve) -----------------------------------------------------------

_PAGE_FILE = re.compile(r"(?:index|page-([1-9][0-9]*))\.html")


def page_at(source: Source, path: tuple[str, ...]) -> Page | None:
    """The page at ``path`` (``("errors", slug, "index.html")``...), or None when there is none."""
    from errordb.store import iter_record_dicts

    if len(path) == 3 and path[0] == "errors" and path[2] == "index.html":
        records = list(iter_record_dicts(source.conn, where="slug = ?", params=[path[1]]))  # type: ignore[arg-type]
        return record_page(source, records[0]) if records else None
    for page in single_pages(source):
        if page[0] == path:
            return page
    found = _PAGE_FILE.fullmatch(path[-1]) if path else None
    listing = _listing_at(source, path[:-1]) if found else None
    return listing.page(int(found.group(1) or 1)) if listing is not None and found is not None else None


def _listing_at(source: Source, directory: tuple[str, ...]) -> Listing | None:
    fixed = {(): home, ("errors",): all_errors, ("tags",): tags_index, ("families",): families_index}
    if directory in fixed:
        return fixed[directory](source)
    kind = {"repos": "repo", "tags": "tag", "families": "family"}.get(directory[0]) if directory else None
    if kind is None:
        return None
    names, folder, listing = _NAMED[kind]
    return next((listing(source, name) for name in names(source) if folder(name) == directory), None)
