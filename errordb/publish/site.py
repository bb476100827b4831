"""``errordb build``: the static documentation site, rendered from the store with jinja2.

What gets written under the output folder (:mod:`errordb.publish.paths` names the pages):

- ``errors/<slug>/index.html``: one page per record (:mod:`errordb.publish.pages` holds the data);
- ``index.html`` (+ ``page-<n>.html``): the explain box and every repository with its count;
- ``errors/``, ``repos/<owner>/<name>/``, ``tags/<tag>/``, ``families/<tag>/``: listings,
  :data:`~errordb.publish.pages.PAGE_SIZE` errors a page; ``tags/`` and ``families/`` indexes;
- ``search/index.html`` and its index (``search/meta.json``, ``search/chunk-<n>.json``);
- ``docs/api/index.html`` (the JSON API explained), ``404.html``, ``sitemap.xml`` (when the
  site's URL is known), ``static/``;
- ``api/``: the static JSON API (:func:`errordb.publish.api.write_api`);
- ``.build-manifest.json``: the names of every file but the API's; a folder without it is not
  a build, and a build refuses to replace it.

A build renders everything, every time, into a new folder that replaces the old one only when
everything worked (:func:`errordb.atomic.replaced_dir`). It is deterministic: nothing records a
time, everything is read in a fixed order, so two builds of one store give the same bytes.
From :data:`POOL_THRESHOLD` records on, the pages and the API are tasks for a pool of worker
processes, each reading the store itself and writing its files into the new folder.

:class:`Site` renders any one file of the site from its path: what ``errordb serve`` answers
each request with, so a preview never waits for a build.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from errordb.atomic import replaced_dir
from errordb.publish import pages
from errordb.publish.output import dump_json
from errordb.publish import paths as P
from errordb.publish.paths import SiteError

MANIFEST = ".build-manifest.json"
MANIFEST_FORMAT = "errordb-site-manifest"
#: From this many records on, pages are rendered by a pool of worker processes.
POOL_THRESHOLD = 2000
#: Records per rendering task (and per search index chunk).
BATCH = pages.PAGE_SIZE
#: Most URLs one sitemap file may list (the sitemap protocol's limit).
SITEMAP_LIMIT = 50_000
SEARCH_FIELDS = ["slug", "errorMessage", "errorClass", "repo", "filePath", "id"]
# Every file the build writes has a name like these (directories: plain segments).
_FILE_NAME = re.compile(r"^[a-z0-9-]+(?:\.(?:html|json|xml|css|js|svg|txt))?$")
_MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".json": "application/json", ".xml": "application/xml",
                ".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8"}  # fmt: skip


@dataclass
class BuildReport:
    """What a build did."""

    out: Path
    pages: int = 0
    workers: int = 1
    seconds: float = 0.0

    def summary(self) -> str:
        return f"{self.out}: {self.pages} pages ({self.workers} process{'es' if self.workers != 1 else ''}) in {self.seconds:.2f}s"


def templates_dir() -> Path:
    """The site's templates: the source checkout's ``templates/``, or the copy in the wheel."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "templates", package / "_bundled" / "templates"):
        if (candidate / "error.html").is_file():
            return candidate
    raise SiteError("the site templates are missing from this installation")


class Site:
    """The site of one store: any page, or any file, rendered from the store."""

    def __init__(self, conn: sqlite3.Connection, base_url: str = "/", templates: Path | None = None):
        from errordb.publish.templates import environment

        self.conn = conn
        self.base_url = P.normal_base_url(base_url)
        self.templates = templates or templates_dir()
        self.source = pages.Source.of(conn)
        self.env = environment(self.templates)

    def render(self, page: pages.Page) -> bytes:
        path, template, context = page
        root = self.base_url if path == ("404.html",) else P.relative_root(path)
        canonical = self.base_url + P.public_path(path) if self.base_url.startswith(("https://", "http://")) and path != ("404.html",) else None
        text = self.env.get_template(template).render(context, page_path=list(path), root=root, base_url=self.base_url, canonical=canonical)
        return text.encode("utf-8")

    def file(self, relative: str) -> tuple[bytes, str] | None:
        """The bytes and media type of the site's file at the URL path ``relative`` (``""``,
        ``errors/<slug>/``, ``api/tags.json``...), or None when the site has no such file."""
        if relative == "" or relative.endswith("/"):
            relative += "index.html"
        path = tuple(relative.split("/"))
        if path[0] == "api" and len(path) > 1:
            from errordb.publish.api import api_file

            data = api_file(self.conn, "/".join(path[1:]), base_url=self.base_url)
        elif path[0] == "static" and len(path) == 2 and _FILE_NAME.fullmatch(path[1]):
            file = self.templates / "static" / path[1]
            data = file.read_bytes() if file.is_file() else None
        elif relative in ("sitemap.xml", "search/meta.json") or re.fullmatch(r"(sitemaps/sitemap|search/chunk)-\d+\.(xml|json)", relative):
            data = self._index_file(relative)
        else:
            page = pages.page_at(self.source, path)
            data = self.render(page) if page is not None else None
        return (data, _MEDIA_TYPES.get(os.path.splitext(relative)[1], "application/octet-stream")) if data is not None else None

    def _index_file(self, relative: str) -> bytes | None:
        count = self.source.count("SELECT count(*) FROM records")
        if relative == "search/meta.json":
            return search_meta(count)
        if relative.startswith("search/"):
            number = int(re.sub(r"\D", "", relative))
            return dump_json(pages.search_chunk(self.source, number)).encode() if number * BATCH < count else None
        return dict(sitemaps(self.env, self.base_url, self.page_paths())).get(relative)

    def page_paths(self) -> Iterator[tuple[str, ...]]:
        """Every HTML page's path, in the order a build writes them."""
        fixed, named = pages.fixed_listings(self.source), pages.named_listings(self.source)
        for listing in fixed:
            yield from (P.listing_file(listing.directory, n) for n in range(1, listing.pages + 1))
        yield from (path for path, _, _ in pages.single_pages(self.source))
        for listing in named:
            yield from (P.listing_file(listing.directory, n) for n in range(1, listing.pages + 1))
        for (slug,) in self.conn.execute(f"SELECT slug FROM records ORDER BY {RECORD_ORDER}"):
            yield (*P.record_dir(slug), "index.html")


def build_site(
    db: Any = None,
    out_dir: str | os.PathLike[str] = "site",
    *,
    base_url: str = "/",
    incremental: bool = False,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BuildReport:
    """Render the store ``db`` (its path, an open store, or ``None``: the default) into ``out_dir``.

    ``base_url`` is where the site will be served (``/``, ``/errordb/`` or
    ``https://example.org/errordb/``): links are relative anyway, it is used by ``sitemap.xml``,
    canonical links, the 404 page and the API. ``incremental`` is accepted for the command
    line's sake: every build renders everything. ``jobs`` is the number of worker processes
    (default: up to 2 from :data:`POOL_THRESHOLD` records on, else 1). ``progress`` is called
    with (tasks done, tasks in all) as the pages are rendered.
    """
    from errordb.store import open_connection, unreadable

    started = time.perf_counter()
    base_url = P.normal_base_url(base_url)
    out = Path(out_dir)
    _check_replaceable(out)
    db_path = _path_of(db)
    conn = open_connection(db_path) if db_path is not None else getattr(db, "conn", db)
    try:
        from errordb.publish.api import refuse_learned_drafts

        refuse_learned_drafts(conn)
        report = _build(conn, db_path, out, base_url, jobs, progress or (lambda done, total: None))
    except sqlite3.DatabaseError as exc:
        raise unreadable(db_path, exc) from None  # one line, without the damaged text SQLite may quote
    finally:
        if db_path is not None:
            conn.close()
    report.seconds = time.perf_counter() - started
    return report


def _path_of(db: Any) -> str | None:
    """The store's file (None for an open in-memory store, which workers cannot open)."""
    from errordb.store import resolve_db_path

    if db is None or isinstance(db, (str, os.PathLike)):
        return str(resolve_db_path(db))
    row = getattr(db, "conn", db).execute("PRAGMA database_list").fetchone()
    return row[2] or None


def _check_replaceable(out: Path) -> None:
    """Refuse to replace a folder that is not a previous build (``--out ~`` must not wipe ~)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SiteError(f"{out}: not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise SiteError(f"{out}: not a site built by errordb (no {MANIFEST}), so it is not replaced; remove it or choose another --out")


def _build(conn: sqlite3.Connection, db_path: str | None, out: Path, base_url: str, jobs: int | None, progress: Callable[[int, int], None]) -> BuildReport:
    record_count = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    workers = _worker_count(jobs, record_count, db_path)
    report = BuildReport(out=out, workers=workers)
    with replaced_dir(out) as staging:
        tasks = [("api",), *_plan(conn)]  # the API first: the longest task, beside the pages
        written: list[str] = []
        html: list[tuple[str, ...]] = []
        for done, (files, page_paths) in enumerate(_run_tasks(tasks, workers, db_path, conn, base_url, staging), start=1):
            written += files
            html += page_paths
            progress(done, len(tasks))
        site = Site(conn, base_url)
        for relative, data in _extra_files(site, html, record_count):
            written.append(_write(staging, relative, data))
        manifest = {"format": MANIFEST_FORMAT, "version": 3, "files": sorted(written)}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=0, separators=(",", ":")) + "\n", encoding="utf-8")
    report.pages = len(html)
    return report


def _worker_count(jobs: int | None, record_count: int, db_path: str | None) -> int:
    if db_path is None:
        return 1  # an in-memory database cannot be opened by another process
    if jobs is not None:
        return max(1, jobs)
    return min(2, os.cpu_count() or 1) if record_count >= POOL_THRESHOLD else 1


#: The order error pages are rendered in: the windows of one file share most of their lines,
#: and each line is coloured once per process (errordb.publish.highlight).
RECORD_ORDER = "repo, filePath, lineNumber, id"


def _plan(conn: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    """The rendering tasks, small and in a fixed order: the listings, then the records by batch."""
    yield ("fixed",)
    yield from pages.named_listing_keys(pages.Source(conn))
    cursor = conn.execute(f"SELECT id FROM records ORDER BY {RECORD_ORDER}")
    while rows := cursor.fetchmany(BATCH):
        # A hand-edited id refuses the build before anything is written.
        yield ("records", tuple(P.record_id(record_id) for (record_id,) in rows))


def _run_tasks(tasks: list[tuple[Any, ...]], workers: int, db_path: str | None, conn: sqlite3.Connection, base_url: str, staging: Path) -> Iterator[Any]:
    """Each task's result, in task order: in this process, or in a pool of ``workers``."""
    if workers == 1:
        _Worker.start(conn, base_url, staging)
        try:
            yield from map(_run_task, tasks)
        finally:
            _Worker.current = None
        return
    # Spawned, never forked: a forked child would inherit this process's SQLite handles.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(db_path, base_url, str(staging))) as pool:
        yield from pool.imap(_run_task, tasks)


class _Worker:
    """What a rendering process holds: the site of its store, and where to write."""

    current: _Worker | None = None

    def __init__(self, site: Site, staging: Path):
        self.site, self.staging = site, staging

    @classmethod
    def start(cls, conn: sqlite3.Connection, base_url: str, staging: Path) -> None:
        cls.current = cls(Site(conn, base_url), staging)


def _init_worker(db_path: str, base_url: str, staging: str) -> None:
    from errordb.store import connect_read_only

    _Worker.start(connect_read_only(db_path), base_url, Path(staging))


def _run_task(task: tuple[Any, ...]) -> tuple[list[str], list[tuple[str, ...]]]:
    """Render one task into the staging folder; returns the relative path of each file written
    and the paths of its HTML pages."""
    worker = _Worker.current
    assert worker is not None
    site, source = worker.site, worker.site.source
    kind = task[0]
    if kind == "api":
        from errordb.publish.api import write_api

        (worker.staging / "api").mkdir()
        write_api(site.conn, worker.staging / "api", base_url=site.base_url)
        return [], []
    if kind == "records":
        return _render_records(worker, task[1])
    if kind == "fixed":
        rendered = [page for listing in pages.fixed_listings(source) for page in listing.all_pages()] + pages.single_pages(source)
        search = [_write(worker.staging, f"search/chunk-{n}.json", dump_json(chunk).encode()) for n, chunk in enumerate(pages.search_chunks(source))]
    else:
        rendered, search = list(pages.named_listing(source, kind, task[1]).all_pages()), []
    files = [_write(worker.staging, "/".join(page[0]), site.render(page)) for page in rendered]
    return search + files, [page[0] for page in rendered]


def _render_records(worker: _Worker, ids: tuple[str, ...]) -> tuple[list[str], list[tuple[str, ...]]]:
    from errordb.store import iter_record_dicts

    site = worker.site
    marks = ",".join("?" * len(ids))
    records = {data["id"]: data for data in iter_record_dicts(site.conn, where=f"id IN ({marks})", params=list(ids))}  # type: ignore[arg-type]
    rendered = [pages.record_page(site.source, records[record_id]) for record_id in ids if record_id in records]
    return [_write(worker.staging, "/".join(page[0]), site.render(page)) for page in rendered], [page[0] for page in rendered]


def output_path(root: Path, path: tuple[str, ...]) -> Path:
    """The file ``path`` under ``root``, refusing any name that could leave ``root``."""
    if not path or any(not isinstance(part, str) or not _FILE_NAME.fullmatch(part) for part in path):
        raise SiteError(f"refusing to write {'/'.join(map(str, path))!r}: not a plain page name")
    # Each part is a plain name (no "..", no separator), and every folder under the staging root
    # was made by this build (no symbolic links in it), so the file is inside root.
    return root.joinpath(*path)


def _write(staging: Path, relative: str, data: bytes) -> str:
    """Write ``data`` at ``relative`` in ``staging``; returns ``relative``."""
    target = output_path(staging, tuple(relative.split("/")))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(target, "xb") as handle:
            handle.write(data)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(target)  # a write's ENOSPC names no file: say which one it was
        raise
    return relative


def _extra_files(site: Site, html: list[tuple[str, ...]], record_count: int) -> Iterator[tuple[str, bytes]]:
    """The files written after the pages: static files, the search index's meta, the sitemaps."""
    for source in sorted((site.templates / "static").iterdir()):
        if source.is_file() and _FILE_NAME.fullmatch(source.name):
            yield f"static/{source.name}", source.read_bytes()
    yield "search/meta.json", search_meta(record_count)
    yield from sitemaps(site.env, site.base_url, html)


def search_meta(record_count: int) -> bytes:
    return dump_json({"chunks": (record_count + BATCH - 1) // BATCH, "count": record_count, "fields": SEARCH_FIELDS}).encode()


def sitemaps(env: Any, base_url: str, html: Iterator[tuple[str, ...]] | list[tuple[str, ...]]) -> list[tuple[str, bytes]]:
    """``sitemap.xml``: one file, or an index of files of :data:`SITEMAP_LIMIT` URLs each; none
    when the site's URL is not known (``--base-url`` a path): the protocol takes only full URLs,
    and search engines reject the rest."""
    if not base_url.startswith(("https://", "http://")):
        return []
    urls = [base_url + P.public_path(path) for path in html if path != ("404.html",)]
    template = env.get_template("sitemap.xml")
    if len(urls) <= SITEMAP_LIMIT:
        return [("sitemap.xml", template.render(urls=urls).encode("utf-8"))]
    parts = [urls[start : start + SITEMAP_LIMIT] for start in range(0, len(urls), SITEMAP_LIMIT)]
    files = [(f"sitemaps/sitemap-{n}.xml", template.render(urls=part).encode("utf-8")) for n, part in enumerate(parts, start=1)]
    index = [f"{base_url}sitemaps/sitemap-{n}.xml" for n in range(1, len(parts) + 1)]
    return [*files, ("sitemap.xml", env.get_template("sitemap-index.xml").render(sitemaps=index).encode("utf-8"))]
