"""``errordb build``: the static documentation site, rendered from the store with jinja2.

What gets written under the output folder (see :mod:`errordb.publish.paths` for the names):

- ``errors/<slug>/index.html``: one page per record (:mod:`errordb.publish.pages` holds the data);
- ``index.html`` (+ ``page-<n>.html``): the explain box and every repository with its count;
- ``errors/``, ``repos/<owner>/<name>/``, ``tags/<tag>/``, ``families/<tag>/``: listings,
  :data:`~errordb.publish.pages.PAGE_SIZE` errors a page; ``tags/`` and ``families/`` indexes;
- ``search/index.html`` and its index (``search/meta.json``, ``search/chunk-<n>.json``);
- ``docs/api/index.html`` (the JSON API explained), ``404.html``, ``sitemap.xml``, ``static/``;
- ``api/``: the static JSON API, written by :func:`errordb.publish.api.write_api`;
- ``.build-manifest.json``: every rendered file with its input hash and content hash.

How it is built:

- *All or nothing*: into a fresh folder that replaces the old one only when everything worked
  (:func:`errordb.atomic.replaced_dir`).
- *Deterministic*: no build times anywhere, everything in a fixed order; two builds of one
  database give the same bytes.
- *Streaming*: pages are rendered from the store a batch at a time, never from a list of the
  whole dataset. Above :data:`POOL_THRESHOLD` records the work is spread over a process pool
  (each worker opens the store itself, read-only); small sets render in-process.
- *Incremental*: a page's input hash covers everything it shows (its context), the templates,
  the site code and the options. With ``incremental=True`` a page whose hash is the one in the
  old manifest is hard-linked from the old build instead of rendered again. With the previous
  build's cache (:mod:`errordb.publish.changes`) an error page that no changed record can reach is
  linked without even reading its inputs, and the API's record files whose content hash is
  unchanged are linked too.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import hashlib
import itertools
import json
import marshal
import multiprocessing
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlite_utils

from errordb.publish import changes as site_changes
from errordb.publish import pages
from errordb.publish import paths
from errordb.atomic import remove_path, replaced_dir, scratch_dir
from errordb.publish.api_layout import ALL_JSONL
from errordb.publish.paths import SiteError

if TYPE_CHECKING:
    from errordb.publish.digest import Checkpoint
    from errordb.publish.api import ApiUnderway, Downloads, PreviousApi

#: Bumped when the output changes in a way the input hashes cannot see.
BUILD_FORMAT = "1"
MANIFEST = ".build-manifest.json"
MANIFEST_FORMAT = "errordb-site-manifest"
#: From this many records on, pages are rendered by a pool of worker processes.
POOL_THRESHOLD = 2000
#: An incremental build that renders at most this share of the error pages finds the records
#: that share their message through the build cache instead of grouping the whole store.
TARGETED_SHARE = 0.1
#: Records per rendering task (and per search index chunk).
BATCH = pages.PAGE_SIZE
#: Most URLs one sitemap file may list (the sitemap protocol's limit).
SITEMAP_LIMIT = 50_000
# Every file the build writes has a name like these (directories: plain segments).
_FILE_NAME = re.compile(r"^[a-z0-9-]+(?:\.(?:html|json|xml|css|js|svg|txt))?$")


@dataclass
class BuildReport:
    """What a build did."""

    out: Path
    pages: int = 0
    rendered: int = 0
    reused: int = 0
    workers: int = 1
    seconds: float = 0.0
    #: Records changed since the previous build (None: not known, every page's inputs were read).
    changed: int | None = None

    def summary(self) -> str:
        changed = f", {self.changed} record{'s' if self.changed != 1 else ''} changed" if self.changed is not None else ""
        return (
            f"{self.out}: {self.pages} pages, {self.rendered} rendered, {self.reused} unchanged{changed}"
            f" ({self.workers} process{'es' if self.workers != 1 else ''}) in {self.seconds:.2f}s"
        )


def templates_dir() -> Path:
    """The site's templates: the source checkout's ``templates/``, or the copy in the wheel."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "templates", package / "_bundled" / "templates"):
        if (candidate / "error.html").is_file():
            return candidate
    raise SiteError("the site templates are missing from this installation")


def build_site(
    db: sqlite_utils.Database | str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] = "site",
    *,
    base_url: str = "/",
    incremental: bool = False,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BuildReport:
    """Render the store ``db`` (a database or its path; ``None``: the default) into ``out_dir``.

    ``base_url`` is where the site will be served (``/``, ``/errordb/`` or
    ``https://example.org/errordb/``): links are relative anyway, it is used by ``sitemap.xml``,
    canonical links, the 404 page and the API export. ``incremental`` reuses the pages of the
    previous build in ``out_dir`` whose inputs did not change. ``jobs`` is the number of worker
    processes (default: up to 2 from :data:`POOL_THRESHOLD` records on, else 1). ``progress``
    is called with (render tasks done, render tasks in all) as the pages are rendered.
    """
    started = time.perf_counter()
    base_url = paths.normal_base_url(base_url)
    out = Path(out_dir)
    _check_replaceable(out)
    database, db_path, owned = _open(db)
    try:
        report = _build(database, db_path, out, base_url, incremental, jobs, progress or _no_progress)
    except sqlite3.DatabaseError as exc:
        # A damaged store: one line, without the damaged text SQLite may quote (the old site stays).
        from errordb.store import unreadable

        raise unreadable(db_path, exc) from None
    finally:
        if owned:
            database.close()
    report.seconds = time.perf_counter() - started
    return report


def _no_progress(done: int, total: int) -> None:
    pass


def _check_replaceable(out: Path) -> None:
    """Refuse to replace a folder that is not a previous build (``--out ~`` must not wipe ~)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SiteError(f"{out}: not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise SiteError(f"{out}: not a site built by errordb (no {MANIFEST}), so it is not replaced; remove it or choose another --out")


def _open(db: sqlite_utils.Database | str | os.PathLike[str] | None) -> tuple[sqlite_utils.Database, str | None, bool]:
    from errordb.store import open_db

    if isinstance(db, sqlite_utils.Database):
        row = db.execute("PRAGMA database_list").fetchone()
        return db, (row[2] or None), False
    database = open_db(db)
    row = database.execute("PRAGMA database_list").fetchone()
    return database, row[2], True


@dataclass(frozen=True)
class _Config:
    """What a worker needs to render pages (picklable: sent to each worker process)."""

    db_path: str | None
    scratch: str
    staging: str
    previous: str | None  # the old build to reuse pages from, when incremental
    changes: bool  # the ``affected`` table lists the only records whose pages may have changed
    in_place: bool  # staging is the spare, brought up to date (``stale_paths`` may differ from previous)
    listings_same: bool  # every listing is the previous build's (``listing_entries`` says which files)
    api_listings_kept: bool  # in_place, and the spare's API listings are the previous build's: they stay
    spare_downloads: bool  # in_place, and the spare's bulk downloads are the ones its build wrote: updated in place
    keeping: bool  # the build this one replaces is kept as the next one's spare
    base_url: str
    environment: str
    templates: str
    dataset_version: str


def _build(
    db: sqlite_utils.Database, db_path: str | None, out: Path, base_url: str, incremental: bool, jobs: int | None,
    progress: Callable[[int, int], None],
) -> BuildReport:
    from errordb.store import meta

    templates = templates_dir()
    environment = environment_key(templates, base_url)
    record_count = db.execute("SELECT count(*) FROM records").fetchone()[0]
    workers = _worker_count(jobs, record_count, db_path)
    report = BuildReport(out=out, workers=workers)
    old_cache = None
    removed: set[str] = set()
    changed: set[str] | None = None
    with site_changes.new_cache_file(out) as new_cache:
        # The previous build's cache, opened once (it hashes the whole manifest to know it is its own).
        cache = site_changes.open_cache(out, out / MANIFEST) if incremental and _manifest_environment(out / MANIFEST) == environment else None
        try:
            spare, keep = _spare_plan(out, cache)
            with scratch_dir("errordb-build-") as scratch, replaced_dir(out, start_from=spare, keep_old=keep) as staging:
                (scratch / "entries").mkdir()
                (scratch / "windows").mkdir()
                work = sqlite3.connect(scratch / "work.sqlite")
                stale_records: set[str] | None = None
                spare_downloads = False
                try:
                    # Read first: whatever changes after it is a change since it for the next build.
                    store_state = site_changes.store_state(db.conn)
                    families = None
                    groups, scope = None, set()  # of the records that share a message: all, or those of the pages rendered
                    # Without a cache the old manifest alone says what can be reused. With one (it
                    # holds the manifest's hash) the manifest is read once the changes are known,
                    # and only where they reach when the plan is the old one.
                    previous = out if incremental and cache is None and _load_manifest(out, environment, work) else None
                    tasks: list[tuple[Any, ...]] = []
                    untouched: dict[int, site_changes.TaskLines] = {}
                    old_cache = cache
                    if old_cache is not None:
                        changes = _find_affected(db.conn, old_cache, work, report)
                        changed, removed, families = changes.changed, changes.removed, changes.families
                        if len(changes.affected) <= record_count * TARGETED_SHARE:
                            scope = changes.affected
                            groups = site_changes.message_groups(db.conn, old_cache, scope, changed)
                        if changes.listings_same:
                            # The plan is made of the records' ids and listed columns: the old one.
                            tasks = site_changes.cached_plan(old_cache)
                    tasks = tasks or list(_plan(db))
                    dataset_version = meta(db).get("datasetVersion") or ""
                    listing_info = {**site_changes.listing_inputs(db.conn), "plan": _plan_hash(tasks), "datasetVersion": dataset_version}
                    listings_same = api_listings_kept = False
                    if old_cache is not None:
                        listings_same = changes.listings_same and all(
                            site_changes.cache_info(old_cache, key) == value for key, value in listing_info.items()
                        )
                        if listings_same:
                            site_changes.load_listing_entries(old_cache, work)
                    if families is None:
                        families = site_changes.family_fingerprints(db.conn)
                    # Both before any page reads them.
                    pages.build_shared_message_table(db.conn, work, groups, scope)
                    pages.write_family_counts(work, ((tag, family.records, family.repos) for tag, family in families.items()))
                    if spare is not None:
                        if old_cache is None or changed is None:
                            _empty(staging)  # the cache went away since it was checked: build afresh
                            spare = None
                        else:
                            stale_records = site_changes.load_stale(old_cache, work) | changed
                            spare_downloads = site_changes.spare_downloads_kept(old_cache, staging / "api")
                            if listings_same:
                                untouched = _untouched_tasks(old_cache, work, tasks)
                                # The previous build reused the listings of the build it kept: the spare's.
                                api_listings_kept = site_changes.cache_info(old_cache, "spareListings") == "same"
                    if old_cache is not None:
                        previous = out
                        if not _load_manifest(out, environment, work, untouched.values()):
                            raise SiteError(f"{out / MANIFEST}: cannot be read, though the build cache matches it; build without --incremental")
                finally:
                    work.commit()
                    work.close()
                kept = site_changes.cache_info(old_cache, "manifest") if keep is not None and old_cache is not None and changed is not None else ""
                kept_stamp = site_changes.cache_info(old_cache, "manifestStamp") if kept and old_cache is not None else ""
                # The kept build's bulk downloads, as it left them: the next build may update them in place.
                kept_downloads = {key: site_changes.cache_info(old_cache, old) if kept and old_cache is not None else "" for key, old in (("spareJsonl", "jsonl"), ("spareZip", "zip"))}
                config = _Config(
                    db_path, str(scratch), str(staging), str(previous) if previous else None, old_cache is not None, spare is not None,
                    listings_same, api_listings_kept, spare_downloads, bool(kept), base_url, environment, str(templates), dataset_version,
                )  # fmt: skip
                old_api = _previous_api(out, old_cache, changed) if previous is not None else None
                manifest_checkpoints = site_changes.cached_checkpoints(old_cache, site_changes.MANIFEST_CHECKPOINTS) if old_cache is not None else []
                if old_cache is not None:
                    old_cache.close()  # the writer updates it in place
                cache_file = site_changes.cache_path(out) if old_cache is not None else new_cache
                with site_changes.CacheWriter(cache_file, removed, update=old_cache is not None) as cache_writer:
                    downloads, manifest = _render(
                        db, config, staging, tasks, record_count, workers, report, progress, old_api, stale_records, cache_writer, untouched,
                        manifest_checkpoints,
                    )  # fmt: skip
                    spare_paths = _settle(scratch, staging, config)
                    if site_changes.store_state(db.conn) != store_state:
                        # The store changed while the pages were read: what the cache knows is of
                        # no single state of it, so the next build compares every record.
                        store_state = dict.fromkeys(store_state, "")
                    cache_writer.finish(
                        out, families, tasks, manifest, downloads, staging / "api",
                        site_changes.Spare(kept, kept_stamp, spare_paths, changed if kept and changed else set()),
                        {**listing_info, **store_state, **kept_downloads, "spareListings": "same" if kept and listings_same else ""},
                        _listing_entries(scratch, tasks, untouched), set(untouched),
                    )  # fmt: skip
        finally:
            if cache is not None:
                cache.close()
        site_changes.install_cache(out, new_cache if old_cache is None else None)
    return report


def spare_path(out: Path) -> Path:
    """Where the build before the current one is kept, to be brought up to date by the next:
    a hidden folder beside ``out`` (``.site.spare`` for ``site``)."""
    return out.parent / f".{out.name}.spare"


def _spare_plan(out: Path, cache: sqlite3.Connection | None) -> tuple[Path | None, Path | None]:
    """(the spare to bring up to date instead of starting from an empty folder, or None; where
    to keep the build this one replaces, or None to remove it).

    A spare is used only when the current build's ``cache`` (None: none to use) says it is the
    build the current one was made from (the SHA-256 of its manifest) and lists what differs
    between the two; the replaced build is kept only when that can be said of it, that is when
    the cache is used. A spare that cannot be used is removed.
    """
    spare = spare_path(out)
    use = keep = None
    if cache is not None:
        keep = spare
        wanted = site_changes.cache_info(cache, "spare")  # the manifest's SHA-256 of the spare it was made beside
        manifest = spare / MANIFEST
        if wanted and spare.is_dir() and not spare.is_symlink() and manifest.is_file() and not manifest.is_symlink():
            use = spare if site_changes.manifest_is(manifest, wanted, site_changes.cache_info(cache, "spareStamp")) else None
    if use is None and keep is None and (spare.exists() or spare.is_symlink()):
        remove_path(spare)
    return use, keep


def _manifest_environment(manifest: Path) -> str | None:
    try:
        with open(manifest, encoding="utf-8") as handle:
            header = json.loads(handle.readline().rstrip().removesuffix('"files": [').rstrip(", ") + "}")
    except (OSError, ValueError):
        return None
    return header.get("environment") if isinstance(header, dict) and header.get("format") == MANIFEST_FORMAT else None


def _empty(folder: Path) -> None:
    for entry in sorted(folder.iterdir()):
        remove_path(entry)


def _settle(scratch: Path, staging: Path, config: _Config) -> list[tuple[str, int | None]]:
    """After rendering: remove from a spare what the new build does not have. ``keeping``: the
    build this one replaces is kept as the next one's spare, so return the paths whose file
    differs from it (or that it had and this one has not), with the task that wrote each (None
    for the latter): those the next build brings up to date in it.

    Both manifests' tables hold the lines of the tasks this build ran, and the files written
    beside the tasks; a task that was not run has the old build's lines, so nothing to compare.
    """
    keeping = config.keeping
    if not config.in_place and not keeping:
        return []
    work = sqlite3.connect(scratch / "work.sqlite")
    try:
        work.execute(_PREVIOUS_TABLE)  # (empty when the previous manifest was not read)
        if config.in_place:
            leftovers = work.execute(
                "SELECT path FROM previous WHERE path NOT IN (SELECT path FROM current)"
                " UNION SELECT path FROM stale_paths WHERE path NOT IN (SELECT path FROM current) ORDER BY 1"
            ).fetchall()
            for (name,) in leftovers:
                _remove_page(staging, tuple(name.split("/")))
        if not keeping:
            return []
        # Both manifests by (path, sha), so that comparing them reads these two indexes alone: at
        # a million files 0.7 s, against 4.6 s fetching each row's sha; making them takes 1.7 s.
        work.execute("CREATE INDEX IF NOT EXISTS previous_path_sha ON previous (path, sha)")
        work.execute("CREATE INDEX IF NOT EXISTS current_path_sha ON current (path, sha, task)")
        differ = work.execute(
            "SELECT c.path, c.task FROM current c INDEXED BY current_path_sha LEFT JOIN previous p INDEXED BY previous_path_sha"
            " ON p.path = c.path WHERE p.sha IS NOT c.sha"
            " UNION SELECT path, NULL FROM previous WHERE path NOT IN (SELECT path FROM current) ORDER BY 1"
        )
        return differ.fetchall()
    finally:
        work.close()


def _remove_page(root: Path, path: tuple[str, ...]) -> None:
    """Remove one file the build no longer has, and the folders it leaves empty."""
    target = output_path(root, path)
    target.unlink(missing_ok=True)
    folder = target.parent
    while folder != root:
        try:
            folder.rmdir()
        except OSError:
            break  # not empty
        folder = folder.parent


def _find_affected(store: sqlite3.Connection, old_cache: sqlite3.Connection, work: sqlite3.Connection, report: BuildReport) -> site_changes.Changes:
    """Fill ``work``'s ``affected`` table (the records whose pages may differ from the old
    build); returns what changed."""
    from errordb.publish.repro_view import covered_records

    changes = site_changes.affected_records(store, old_cache, covered_records())
    report.changed = len(changes.changed)
    work.execute("CREATE TABLE affected (id TEXT PRIMARY KEY)")
    work.executemany("INSERT INTO affected VALUES (?)", ((record_id,) for record_id in sorted(changes.affected)))
    work.commit()
    return changes


def _plan_hash(tasks: list[tuple[Any, ...]]) -> str:
    """A hash of the plan: its tasks, in order, with the first and last record of each record task."""
    return hashlib.sha256(json.dumps(tasks).encode()).hexdigest()


def _untouched_tasks(cache: sqlite3.Connection, work: sqlite3.Connection, tasks: list[tuple[Any, ...]]) -> dict[int, site_changes.TaskLines]:
    """The tasks whose files are the old build's and in the spare already, with where their lines
    are in the old manifest: those that hold no affected record and no stale file of the spare.

    Asked only when the plan is the old build's and so is every listing, with the spare in use:
    then a listing task would reuse its files and a record task would keep each page, so
    running them would only copy their lines.
    """
    lines = site_changes.task_lines(cache)
    if len(lines) != len(tasks):
        return {}
    busy = {row[0] for row in work.execute("SELECT DISTINCT task FROM stale_paths WHERE task IS NOT NULL")}
    record_tasks = [(index, task[2], task[3]) for index, task in enumerate(tasks) if task[0] == "records"]
    firsts = [first for _, first, _ in record_tasks]
    for (record_id,) in work.execute("SELECT id FROM affected"):
        at = bisect.bisect_right(firsts, record_id) - 1
        if at >= 0 and record_id <= record_tasks[at][2]:
            busy.add(record_tasks[at][0])
    return {index: task_lines for index, task_lines in enumerate(lines) if index not in busy}


def _listing_entries(scratch: Path, tasks: list[tuple[Any, ...]], untouched: Collection[int]) -> Iterator[tuple[int, str, str, str]]:
    """(task, path, input hash, content hash) of the files the listing tasks wrote, but for the
    ``untouched`` ones (not run: the cache has theirs)."""
    for index, task in enumerate(tasks):
        if task[0] != "records" and index not in untouched:
            yield from ((index, *entry) for entry in _task_entries(scratch, index))


def _previous_api(out: Path, old_cache: sqlite3.Connection | None, changed: set[str] | None) -> PreviousApi | None:
    """The old build's API, with what the cache knows of it (nothing without a cache)."""
    from errordb.publish.api import PreviousApi

    folder = out / "api"
    if not folder.is_dir() or folder.is_symlink():
        return None
    if old_cache is None or changed is None:
        return PreviousApi(folder)
    return PreviousApi(folder, changed, site_changes.cached_segments(old_cache, folder / ALL_JSONL), site_changes.download_checkpoints(old_cache, folder))


def _cache_task(scratch: Path, index: int, cache_writer: site_changes.CacheWriter) -> None:
    """Give the build cache the questions and the facts of the pages task ``index`` rendered from
    their inputs (a task of error pages; the others have none)."""
    file = scratch / "windows" / f"{index:08d}.marshal"
    if file.exists():
        asked = marshal.loads(file.read_bytes())
        cache_writer.add(asked["windows"], asked["facts"])


def _render(
    db: sqlite_utils.Database, config: _Config, staging: Path, tasks: list[tuple[Any, ...]], record_count: int, workers: int,
    report: BuildReport, progress: Callable[[int, int], None], old_api: PreviousApi | None, stale_records: set[str] | None,
    cache_writer: site_changes.CacheWriter, untouched: dict[int, site_changes.TaskLines], manifest_checkpoints: list[Checkpoint],
) -> tuple[Downloads, site_changes.Manifest]:
    """Every page, the API, the static files, sitemaps and the manifest, into ``staging``;
    returns what the API's export says of its bulk downloads and what was written of the manifest.
    ``stale_records``: staging is the spare, whose API's record files are right but for these
    records'. ``cache_writer`` gets each task's questions as the task is done. The tasks in
    ``untouched`` are not run: their files are in staging, their lines in the old manifest
    (whose SHA-256 states are ``manifest_checkpoints``)."""
    scratch = Path(config.scratch)
    templates = Path(config.templates)
    base_url, environment = config.base_url, config.environment
    old_manifest = Path(config.previous) / MANIFEST if untouched else None
    results = {index: (lines.html, 0, lines.html) for index, lines in untouched.items()}
    todo = [index for index in range(len(tasks)) if index not in untouched]
    if untouched:
        progress(len(results), len(tasks))
    # The bulk downloads are hashed in two threads while the pages and the manifest are written
    # (at a million records, 0.7 s for the hashes at least, 0.4 s for the manifest).
    with contextlib.ExitStack() as stack:
        _remove_meanwhile(staging / MANIFEST, stack)  # a spare's: this build writes its own
        if workers > 1:
            context = multiprocessing.get_context("spawn")  # never fork a process holding SQLite handles
            with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker, initargs=(config,)) as pool:
                _api_folder(staging, stale_records, config)
                # The API's listings in a worker, its records and bulk files here, while the workers render.
                listings = None if config.api_listings_kept else pool.submit(_run_api_listings, old_api.folder if config.listings_same and old_api else None)
                futures = {index: pool.submit(_run_task, index, tasks[index]) for index in todo}
                try:
                    api = stack.enter_context(_write_api(db, staging, base_url, old_api, stale_records, config.spare_downloads, listings=False))
                    # In task order, as the workers finish them: the cache is written beside the
                    # rendering rather than after the last page (at 10,000 pages ~1 s on one core).
                    for index, future in futures.items():
                        results[index] = future.result()
                        _cache_task(scratch, index, cache_writer)
                        progress(len(results), len(tasks))
                    if listings is not None:
                        listings.result()
                except BaseException:
                    pool.shutdown(cancel_futures=True)  # one failure fails the build: stop the rest
                    raise
        else:
            _init_worker(config, db.conn)
            try:
                for index in todo:
                    results[index] = _run_task(index, tasks[index])
                    _cache_task(scratch, index, cache_writer)
                    progress(len(results), len(tasks))
            finally:
                _close_worker()
            _api_folder(staging, stale_records, config)
            reuse_listings = config.listings_same and old_api is not None
            listings = not reuse_listings and not config.api_listings_kept
            api = stack.enter_context(_write_api(db, staging, base_url, old_api, stale_records, config.spare_downloads, listings=listings))
            if reuse_listings and not config.api_listings_kept:
                _api_listings(db.conn, staging / "api", base_url, old_api.folder)  # type: ignore[union-attr]
        for html_pages, rendered, reused in results.values():
            report.pages += html_pages
            report.rendered += rendered
            report.reused += reused
        extra = _copy_static(templates, staging)
        extra += _write_search_meta(staging, record_count)
        sitemaps = _reuse_sitemaps(config) if config.listings_same else None
        if sitemaps is None:
            _entries_from_manifest(scratch, old_manifest, untouched)  # the sitemaps list every task's pages
            sitemaps = _write_sitemaps(scratch, staging, len(tasks), report.pages, base_url, templates, environment)
        extra += sitemaps
        # What the spare's update and the next one need: every file of this build, in the work database.
        listing = config.in_place or config.keeping
        work = sqlite3.connect(scratch / "work.sqlite") if listing else None
        try:
            html = [results[index][0] for index in range(len(tasks))]
            manifest = _write_manifest(scratch, staging, html, environment, extra, work, untouched, old_manifest, manifest_checkpoints)
        finally:
            if work is not None:
                work.commit()
                work.close()
        return api.finish(), manifest


def _remove_meanwhile(path: Path, stack: contextlib.ExitStack) -> None:
    """Remove ``path``, if there, in a thread that ``stack`` waits for when it closes: freeing a
    large file's blocks takes a while (a 200 MB manifest at a million records, 0.1 s)."""
    from concurrent.futures import ThreadPoolExecutor

    trash = path.with_name(f"{path.name}.old")
    try:
        os.replace(path, trash)
    except FileNotFoundError:
        return
    removing = stack.enter_context(ThreadPoolExecutor(max_workers=1)).submit(remove_path, trash)
    stack.callback(removing.result)  # first, as stacks go: a failure is the build's


def _api_folder(staging: Path, stale_records: set[str] | None, config: _Config) -> None:
    """The API's folder: a new one, or the spare's, with what will be written again removed
    (its listings stay when they are the previous build's, its bulk downloads when they are
    to be updated in place)."""
    if stale_records is None or not (staging / "api").is_dir():
        (staging / "api").mkdir(exist_ok=stale_records is not None)
        return
    from errordb.publish.api import clear_for_update

    clear_for_update(staging / "api", stale_records, config.api_listings_kept, config.spare_downloads)


def _worker_count(jobs: int | None, record_count: int, db_path: str | None) -> int:
    if db_path is None:
        return 1  # an in-memory database cannot be opened by another process
    if jobs is not None:
        return max(1, jobs)
    return min(2, os.cpu_count() or 1) if record_count >= POOL_THRESHOLD else 1


def _write_api(
    db: sqlite_utils.Database, staging: Path, base_url: str, previous: PreviousApi | None, stale: set[str] | None,
    update_downloads: bool = False, listings: bool = True,
) -> ApiUnderway:
    # Imported here: the API export is its own module (issue 6); a build without it is an error.
    from errordb.publish.api import begin_api

    return begin_api(db, staging / "api", base_url=base_url, previous=previous, listings=listings, stale=stale, update_downloads=update_downloads)


# Planning ---------------------------------------------------------------------------------------


def _plan(db: sqlite_utils.Database) -> Iterator[tuple[Any, ...]]:
    """The rendering tasks, small and in a fixed order (their order is the manifest's)."""
    yield ("home",)
    yield ("singles",)
    yield ("all",)
    yield ("families-index",)
    yield ("tags-index",)
    yield from _grouped("families", db.execute("SELECT backgroundTag, count(*) FROM records WHERE backgroundTag IS NOT NULL GROUP BY 1 ORDER BY 1"))
    yield from _grouped("tags", db.execute("SELECT tag, count(*) FROM record_tags GROUP BY 1 ORDER BY 1"))
    yield from _grouped("repos", db.execute("SELECT repo, count(*) FROM records GROUP BY 1 ORDER BY 1"))
    cursor = db.execute("SELECT id FROM records ORDER BY id")
    chunk = 0
    while rows := cursor.fetchmany(BATCH):
        yield ("records", chunk, rows[0][0], rows[-1][0])
        chunk += 1


def _grouped(kind: str, rows: Any, budget: int = 4 * BATCH, most: int = 200) -> Iterator[tuple[Any, ...]]:
    """Listings of small groups share a task; a big group gets one of its own."""
    names: list[str] = []
    size = 0
    for name, count in rows:
        names.append(name)
        size += count
        if size >= budget or len(names) >= most:
            yield (kind, tuple(names))
            names, size = [], 0
    if names:
        yield (kind, tuple(names))


# Workers ---------------------------------------------------------------------------------------

_renderer: _Renderer | None = None


def _init_worker(config: _Config, conn: sqlite3.Connection | None = None) -> None:
    global _renderer
    _renderer = _Renderer(config, conn)
    if conn is None:  # a pool's worker, not the building process
        # Rendering allocates a great many short-lived objects and makes few cycles: the
        # collector ran ~1,100 times per worker for 10,000 pages (0.8 s); with what was loaded
        # so far frozen out of its way and a larger first generation, ~55 times (0.3 s).
        gc.freeze()
        gc.set_threshold(10_000, 20, 100)


def _close_worker() -> None:
    global _renderer
    if _renderer is not None:
        _renderer.close()
    _renderer = None


def _run_api_listings(previous: Path | None) -> None:
    """The API's listings, written by a worker (see :func:`errordb.publish.api.write_api_listings`),
    or linked from the ``previous`` API when every listing is unchanged."""
    assert _renderer is not None
    _api_listings(_renderer.conn, _renderer.staging / "api", _renderer.config.base_url, previous)


def _api_listings(conn: sqlite3.Connection, api: Path, base_url: str, previous: Path | None) -> None:
    """Link the ``previous`` API's listings (all unchanged), or write them."""
    from errordb.publish.api import link_listings, write_api_listings

    if previous is None or not link_listings(previous, api):
        write_api_listings(conn, api, base_url=base_url)


def _run_task(index: int, task: tuple[Any, ...]) -> tuple[int, int, int]:
    """Render one task's pages; returns (html pages, rendered, reused)."""
    assert _renderer is not None
    return _renderer.run(index, task)


class _Renderer:
    """Renders pages into the staging folder, reusing unchanged ones from the previous build."""

    def __init__(self, config: _Config, conn: sqlite3.Connection | None):
        from errordb.publish.templates import environment

        self.config = config
        self.staging = Path(config.staging)
        self.previous = Path(config.previous) if config.previous else None
        self.own_conn = conn is None
        if conn is None:
            conn = sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True, timeout=30)
        self.conn = conn
        self.work = sqlite3.connect(f"file:{Path(config.scratch) / 'work.sqlite'}?mode=ro", uri=True)
        self.source = pages.Source(conn, self.work, config.dataset_version)
        self.env = environment(Path(config.templates), config.environment)
        self.entries: list[tuple[str, str, str]] = []
        self.html = self.rendered = self.reused = 0

    def close(self) -> None:
        self.work.close()
        if self.own_conn:
            self.conn.close()

    def run(self, index: int, task: tuple[Any, ...]) -> tuple[int, int, int]:
        self.entries = []
        self.html = self.rendered = self.reused = 0
        if task[0] == "records":
            _, chunk, first, last = task
            self._records(index, first, last)
            path = ("search", f"chunk-{chunk}.json")
            if not (self.config.listings_same and self._reuse(path, None)):
                self.json(path, pages.search_chunk(self.source, first, last))
        elif not (self.config.listings_same and self._reuse_task(index)):
            self.entries = []
            self.html = self.reused = 0
            for page in self._pages(task):
                self.page(*page)
        with open(Path(self.config.scratch) / "entries" / f"{index:08d}.json", "w", encoding="utf-8") as handle:
            json.dump(self.entries, handle, separators=(",", ":"))
        return self.html, self.rendered, self.reused

    def _reuse_task(self, index: int) -> bool:
        """Reuse every file the previous build's listing task ``index`` wrote (False when one is missing)."""
        rows = self.work.execute("SELECT path, key FROM listing_entries WHERE task = ? ORDER BY rowid", [index]).fetchall()
        for name, key in rows:
            if not self._reuse(tuple(name.split("/")), key):
                return False
            self.html += name.endswith(".html")
            self.reused += name.endswith(".html")
        return bool(rows)

    def _records(self, index: int, first: str, last: str) -> None:
        """The error pages of one batch: reused untouched when no change can reach them, else
        rendered from their inputs (and reused after all when their input hash is the old one)."""
        rows = self.conn.execute("SELECT id, slug FROM records WHERE id BETWEEN ? AND ? ORDER BY id", [first, last]).fetchall()
        entries: dict[str, list[tuple[str, str, str]]] = {}
        pending = []
        affected = None
        if self.config.changes:
            affected = {row[0] for row in self.work.execute("SELECT id FROM affected WHERE id BETWEEN ? AND ?", [first, last])}
        kept = self._kept_in_spare([slug for record_id, slug in rows if record_id not in affected]) if affected is not None else {}
        for record_id, slug in rows:
            if affected is not None and record_id not in affected:
                if slug in kept:
                    self.html += 1
                    self.reused += 1
                    entries[record_id] = [kept[slug]]
                    continue
                self.entries = []
                if self._reuse((*paths.record_dir(slug), "index.html"), None):
                    self.html += 1
                    self.reused += 1
                    entries[record_id] = self.entries
                    continue
            pending.append(record_id)
        windows: dict[str, list[Any]] = {}
        # One read transaction: the facts the cache keeps are those of the records as rendered.
        began = not self.conn.in_transaction
        if began:
            self.conn.execute("BEGIN")
        try:
            for record_id, page, key_input in pages.record_pages(self.source, first, last, pending if affected is not None else None, windows):
                self.entries = []
                self.page(*page, key_input=key_input)
                entries[record_id] = self.entries
            facts = list(site_changes.raw_facts(self.conn, sorted(windows)))
        finally:
            if began:
                self.conn.rollback()  # it only read
        self.entries = [entry for record_id, _ in rows for entry in entries.get(record_id, [])]
        asked = {"facts": facts, "windows": [(record_id, *window) for record_id in sorted(windows) for window in windows[record_id]]}
        # marshal: this process's own plain data for the building process (JSON cost ~1% of the build).
        with open(Path(self.config.scratch) / "windows" / f"{index:08d}.marshal", "wb") as handle:
            marshal.dump(asked, handle)

    def _kept_in_spare(self, slugs: list[str]) -> dict[str, tuple[str, str, str]]:
        """Slug -> manifest entry of the error pages among ``slugs`` that the spare holds as the
        previous build made them (what :func:`reuse_file` finds one page at a time, for a
        batch in two questions: the pages no change reaches are most of a rebuild's pages)."""
        if not self.config.in_place or not slugs:
            return {}
        slug_of = {"/".join((*paths.record_dir(slug), "index.html")): slug for slug in slugs}
        names = list(slug_of)
        kept: dict[str, tuple[str, str, str]] = {}
        for start in range(0, len(names), 500):  # well under SQLite's limit of bound parameters
            chunk = names[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.work.execute(
                f"SELECT path, key, sha FROM previous WHERE path IN ({marks})"
                f" AND path NOT IN (SELECT path FROM stale_paths WHERE path IN ({marks}))",
                chunk + chunk,
            )  # fmt: skip
            kept.update((slug_of[name], (name, key, sha)) for name, key, sha in rows)
        return kept

    def _pages(self, task: tuple[Any, ...]) -> Iterator[pages.Page]:
        kind, source = task[0], self.source
        if kind == "home":
            yield from pages.home_pages(source)
        elif kind == "singles":
            yield pages.search_page(source)
            yield pages.api_page(source)
            yield pages.not_found_page(source)
        elif kind == "all":
            yield from pages.all_errors_pages(source)
        elif kind == "families-index":
            yield from pages.families_index_pages(source)
        elif kind == "tags-index":
            yield from pages.tags_index_pages(source)
        elif kind == "families":
            for tag in task[1]:
                yield from pages.family_pages(source, tag)
        elif kind == "tags":
            for tag in task[1]:
                yield from pages.tag_pages(source, tag)
        elif kind == "repos":
            for repo in task[1]:
                yield from pages.repo_pages(source, repo)
        else:  # pragma: no cover - the plan only makes the kinds above
            raise SiteError(f"unknown build task {kind!r}")

    def page(self, path: tuple[str, ...], template: str, context: dict[str, Any], key_input: Any = None) -> None:
        """Render (or reuse) one HTML page; its input hash is that of ``key_input`` when given
        (what the context is made of), else of the context."""
        self.html += 1
        key = input_key(self.config.environment, template, context if key_input is None else key_input)
        if self._reuse(path, key):
            self.reused += 1
            return
        root = self.config.base_url if path == ("404.html",) else paths.relative_root(path)
        text = self.env.get_template(template).render(
            context,
            page_path=list(path),
            root=root,
            base_url=self.config.base_url,
            canonical=_canonical(self.config.base_url, path),
        )
        self._write(path, key, text.encode("utf-8"))
        self.rendered += 1

    def json(self, path: tuple[str, ...], data: Any) -> None:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        key = input_key(self.config.environment, "json", text)
        if not self._reuse(path, key):
            self._write(path, key, text.encode("utf-8"))

    def _reuse(self, path: tuple[str, ...], key: str | None) -> bool:
        """Link the old build's file when its input hash is ``key`` (``None``: whatever it is)."""
        entry = reuse_file(self.work, self.config, path, key)
        if entry is not None:
            self.entries.append(entry)
        return entry is not None

    def _write(self, path: tuple[str, ...], key: str, data: bytes) -> None:
        target = output_path(self.staging, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Replaced, not written into, where a file is there already: in the spare, or linked from
        # the live site by a listing task that then had to render after all.
        put_file(target, data, self.config.in_place)
        self.entries.append(("/".join(path), key, hashlib.sha256(data).hexdigest()))


def reuse_file(work: sqlite3.Connection, config: _Config, path: tuple[str, ...], key: str | None) -> tuple[str, str, str] | None:
    """Give the staging folder the previous build's file ``path`` when its input hash is ``key``
    (``None``: whatever it is); returns its manifest entry, or None when it cannot be reused."""
    if config.previous is None:
        return None
    name = "/".join(path)
    row = work.execute("SELECT key, sha FROM previous WHERE path = ?", [name]).fetchone()
    if row is None or (key is not None and row[0] != key):
        return None
    target = output_path(Path(config.staging), path)
    if config.in_place and work.execute("SELECT 1 FROM stale_paths WHERE path = ?", [name]).fetchone() is None:
        return (name, row[0], row[1])  # the spare holds the previous build's file already
    old = Path(config.previous).joinpath(*path)
    if not old.is_file() or old.is_symlink():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target
    if config.in_place:
        temporary = target.with_name(f".{target.name}.new")
        temporary.unlink(missing_ok=True)
    try:
        os.link(old, temporary)  # the old build may be removed after the swap; the link keeps the file
    except OSError:
        shutil.copyfile(old, temporary)
    if temporary != target:
        os.replace(temporary, target)
    return (name, row[0], row[1])


def _reuse_sitemaps(config: _Config) -> list[tuple[str, str, str]] | None:
    """The previous build's sitemaps, reused (the same pages, so the same bytes); None when one is missing."""
    work = sqlite3.connect(f"file:{Path(config.scratch) / 'work.sqlite'}?mode=ro", uri=True)
    try:
        names = [row[0] for row in work.execute("SELECT path FROM previous WHERE path = 'sitemap.xml' OR path LIKE 'sitemaps/%' ORDER BY path")]
        entries = [reuse_file(work, config, tuple(name.split("/")), None) for name in names]
    finally:
        work.close()
    if not names or None in entries:
        return None
    # The order _write_sitemaps gives: the parts, then the index (or sitemap.xml alone).
    return sorted(entries, key=lambda entry: (entry[0] == "sitemap.xml", _part_number(entry[0])))  # type: ignore[arg-type, return-value]


def _part_number(name: str) -> int:
    found = re.search(r"(\d+)\.xml$", name)
    return int(found.group(1)) if found else 0


def put_file(target: Path, data: bytes, replace: bool) -> None:
    """Write ``data`` to ``target`` as a new file; with ``replace``, or where a file is there
    already, as a new file renamed over the old one, never into it (in a spare, a file may be
    a hard link to the live site's)."""
    if not replace:
        try:
            with open(target, "xb") as handle:  # made here, or there already (not asked first: a page's stat)
                handle.write(data)
            return
        except FileExistsError:
            pass
    temporary = target.with_name(f".{target.name}.new")
    temporary.write_bytes(data)
    os.replace(temporary, target)


def output_path(root: Path, path: tuple[str, ...]) -> Path:
    """The file ``path`` under ``root``, refusing any name that could leave ``root``."""
    if not path or any(not isinstance(part, str) or not _FILE_NAME.fullmatch(part) for part in path):
        raise SiteError(f"refusing to write {'/'.join(map(str, path))!r}: not a plain page name")
    # Each part is a plain name (no "..", no separator), and every folder under the staging root
    # was made by this build (no symbolic links in it), so the file is inside root.
    return root.joinpath(*path)


def input_key(environment: str, template: str, context: Any) -> str:
    """The hash of everything a file is made from."""
    digest = hashlib.sha256(f"{environment}\0{template}\0".encode())
    digest.update(json.dumps(context, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    return digest.hexdigest()


def environment_key(templates: Path, base_url: str) -> str:
    """The hash of what every page depends on: options, templates, site code, library versions."""
    import jinja2
    import pygments

    from errordb import __version__

    digest = hashlib.sha256(f"{BUILD_FORMAT}\0{base_url}\0{__version__}\0{jinja2.__version__}\0{pygments.__version__}\0".encode())
    package = Path(__file__).resolve().parent
    files = sorted(package.glob("*.py")) + sorted(p for p in templates.rglob("*") if p.is_file())
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _canonical(base_url: str, path: tuple[str, ...]) -> str | None:
    if not base_url.startswith(("https://", "http://")) or path == ("404.html",):
        return None
    return base_url + paths.public_path(path)


# Files written by the main process ------------------------------------------------------------


def _copy_static(templates: Path, staging: Path) -> list[tuple[str, str, str]]:
    entries = []
    for source in sorted((templates / "static").iterdir()):
        if source.is_file() and _FILE_NAME.fullmatch(source.name):
            data = source.read_bytes()
            target = output_path(staging, ("static", source.name))
            target.parent.mkdir(parents=True, exist_ok=True)
            put_file(target, data, False)
            digest = hashlib.sha256(data).hexdigest()
            entries.append((f"static/{source.name}", digest, digest))
    return entries


def _write_search_meta(staging: Path, record_count: int) -> list[tuple[str, str, str]]:
    chunks = (record_count + BATCH - 1) // BATCH
    data = {"chunks": chunks, "count": record_count, "fields": ["slug", "errorMessage", "errorClass", "repo", "filePath", "id"]}
    return [_write_small(staging, ("search", "meta.json"), json.dumps(data, sort_keys=True, separators=(",", ":")))]


def _write_small(staging: Path, path: tuple[str, ...], text: str) -> tuple[str, str, str]:
    data = text.encode("utf-8")
    target = output_path(staging, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    put_file(target, data, False)
    digest = hashlib.sha256(data).hexdigest()
    return ("/".join(path), digest, digest)


def _entries(scratch: Path, tasks: int) -> Iterator[tuple[str, str, str]]:
    """Every file the tasks wrote, in task order (so, deterministically)."""
    for index in range(tasks):
        yield from _task_entries(scratch, index)


def _task_entries(scratch: Path, index: int) -> list[tuple[str, str, str]]:
    """(path, input hash, content hash) of each file task ``index`` wrote."""
    with open(scratch / "entries" / f"{index:08d}.json", encoding="utf-8") as handle:
        return [tuple(entry) for entry in json.load(handle)]  # type: ignore[misc]


def _write_sitemaps(scratch: Path, staging: Path, tasks: int, page_count: int, base_url: str, templates: Path, version: str) -> list[tuple[str, str, str]]:
    """``sitemap.xml``: one file, or an index of files of :data:`SITEMAP_LIMIT` URLs each."""
    from errordb.publish.templates import environment

    env = environment(templates, version)
    urls = (base_url + paths.public_path(tuple(name.split("/"))) for name, _, _ in _entries(scratch, tasks) if name.endswith(".html") and name != "404.html")
    if page_count <= SITEMAP_LIMIT:
        return [_write_small(staging, ("sitemap.xml",), env.get_template("sitemap.xml").render(urls=urls))]
    written = []
    part = 0
    while True:
        chunk = [url for _, url in zip(range(SITEMAP_LIMIT), urls)]
        if not chunk:
            break
        part += 1
        written.append(_write_small(staging, ("sitemaps", f"sitemap-{part}.xml"), env.get_template("sitemap.xml").render(urls=chunk)))
    parts = [f"{base_url}sitemaps/sitemap-{n}.xml" for n in range(1, part + 1)]
    written.append(_write_small(staging, ("sitemap.xml",), env.get_template("sitemap-index.xml").render(sitemaps=parts)))
    return written


def _write_manifest(
    scratch: Path, staging: Path, html: list[int], environment: str, extra: list[tuple[str, str, str]], work: sqlite3.Connection | None,
    untouched: dict[int, site_changes.TaskLines], old_manifest: Path | None, old_checkpoints: list[Checkpoint],
) -> site_changes.Manifest:
    """One file per line, so the next incremental build reads it without holding it all: each
    task's files in plan order (``html``: how many HTML pages each task made), then ``extra``
    (never empty). The lines of the ``untouched`` tasks are copied from ``old_manifest`` (by
    the kernel), and its SHA-256 is resumed from the last of ``old_checkpoints`` (the states
    saved while hashing it) before the first line that differs, in a thread that follows the
    writing from there. With ``work``, the other tasks' files and ``extra`` also go into its
    ``current`` table."""
    from concurrent.futures import ThreadPoolExecutor

    from errordb.publish.digest import PublishedFile, Written, checkpointed_sha256
    from errordb.publish.downloads import copy_range

    if work is not None:
        work.execute("CREATE TABLE current (path TEXT NOT NULL, sha TEXT NOT NULL, task INTEGER)")
    written: list[site_changes.TaskLines] = []
    # Written beside and renamed over the spare's own (which the next build would otherwise trust).
    beside = staging / f"{MANIFEST}.new"
    earlier = old_checkpoints if old_manifest else []
    hashing = None
    with ThreadPoolExecutor(max_workers=1) as pool, Written() as published, open(beside, "wb") as file, open(old_manifest or os.devnull, "rb") as old:
        handle: Any = file
        header = (json.dumps({"format": MANIFEST_FORMAT, "version": 1, "environment": environment})[:-1] + ', "files": [\n').encode()
        handle.write(header)
        # How many bytes from the start are the old manifest's: its SHA-256 is resumed from there.
        same = len(header) if old.read(len(header)) == header else 0
        position = len(header)
        copy: list[int] = []  # the old manifest's bytes to copy next, as [start, end]: one copy a run of tasks

        def end_copy() -> None:
            if copy and copy_range(old, copy[0], copy[1] - copy[0], handle) != copy[1] - copy[0]:
                raise SiteError(f"{old_manifest}: shorter than its build cache says; build without --incremental")
            copy.clear()

        for index, pages_made in enumerate(html):
            start = position
            if index in untouched:
                lines = untouched[index]
                if copy and copy[1] == lines.start:
                    copy[1] = lines.end
                else:
                    end_copy()
                    copy[:] = [lines.start, lines.end]
                if same == start == lines.start:
                    same = lines.end
                position += lines.end - lines.start
            else:
                end_copy()
                if hashing is None:  # the first line that may differ: from here the hash follows the writing
                    hashing = pool.submit(checkpointed_sha256, beside, earlier, same, published)
                    handle = PublishedFile(file, published, position)
                # Every task line ends with a separator: the extra files always follow.
                entries = _task_entries(scratch, index)
                data = "".join([_manifest_line(entry) + ",\n" for entry in entries]).encode("utf-8")
                handle.write(data)
                position += len(data)
                if work is not None:
                    work.executemany("INSERT INTO current VALUES (?, ?, ?)", ((path, sha, index) for path, _, sha in entries))
            written.append(site_changes.TaskLines(start, position, pages_made))
        end_copy()
        handle.write((",\n".join(map(_manifest_line, extra)) + "\n]}\n").encode("utf-8"))
        handle.flush()
        published.complete(file.tell())
        if work is not None:
            work.executemany("INSERT INTO current VALUES (?, ?, NULL)", ((path, sha) for path, _, sha in extra))
    if work is not None:
        _key_by_path(work, "current")
    sha256, checkpoints = hashing.result() if hashing is not None else checkpointed_sha256(beside, earlier, same)
    os.replace(beside, staging / MANIFEST)
    return site_changes.Manifest(sha256, site_changes.file_stamp(staging / MANIFEST), written, checkpoints)


def _entries_from_manifest(scratch: Path, manifest: Path | None, tasks: dict[int, site_changes.TaskLines]) -> None:
    """Write the entries file of each of ``tasks`` (not run) from its lines in the old ``manifest``."""
    if not tasks:
        return
    with open(manifest, "rb") as handle:  # type: ignore[arg-type]
        for index, lines in tasks.items():
            handle.seek(lines.start)
            entries = [json.loads(line.rstrip(b",")) for line in handle.read(lines.end - lines.start).splitlines()]
            with open(scratch / "entries" / f"{index:08d}.json", "w", encoding="utf-8") as out:
                json.dump(entries, out, separators=(",", ":"))


_PREVIOUS_TABLE = "CREATE TABLE IF NOT EXISTS previous (path TEXT NOT NULL, key TEXT NOT NULL, sha TEXT NOT NULL)"


def _key_by_path(work: sqlite3.Connection, table: str) -> None:
    """Index the manifest ``table`` by path once its rows are in: at a million files, 1.7 s
    against 6.6 s for inserting them into a table keyed by path, in the manifest's order. Of a
    path listed twice the last row is kept, as ``INSERT OR REPLACE`` into a keyed table did."""
    try:
        work.execute(f"CREATE UNIQUE INDEX {table}_path ON {table} (path)")
    except sqlite3.IntegrityError:
        work.execute(f"DELETE FROM {table} WHERE rowid NOT IN (SELECT max(rowid) FROM {table} GROUP BY path)")
        work.execute(f"CREATE UNIQUE INDEX {table}_path ON {table} (path)")


def _load_manifest(out: Path, environment: str, work: sqlite3.Connection, skip: Iterable[site_changes.TaskLines] = ()) -> bool:
    """Load the previous build's manifest into ``work``, but for the lines of the tasks ``skip``;
    False when there is none to reuse.

    A manifest of another environment (templates, site code, options or library versions
    changed) is not loaded: every page is rendered again.
    """
    work.execute(_PREVIOUS_TABLE)
    manifest = out / MANIFEST
    if not manifest.is_file() or _manifest_environment(manifest) != environment:
        return False
    try:
        _insert_batches(work, "INSERT INTO previous VALUES (?, ?, ?)", _manifest_entries(manifest, skip))
        _key_by_path(work, "previous")
    except (OSError, ValueError, TypeError, sqlite3.IntegrityError):  # IntegrityError: a null in an entry
        work.execute("DELETE FROM previous")
        work.commit()
        return False  # an unreadable manifest means a full build, not a failed one
    work.commit()
    return True


#: Text that JSON writes as it is (no escapes): every page name and hash of a manifest.
_PLAIN_TEXT = re.compile(r"[a-z0-9./-]*")


def _manifest_line(entry: tuple[str, str, str]) -> str:
    """``json.dumps(list(entry))``, formatted directly when its three strings are plain (a
    quarter of the time: 0.57 µs against 2.1 µs a line)."""
    if _PLAIN_TEXT.fullmatch("".join(entry)):
        return '["%s", "%s", "%s"]' % entry
    return json.dumps(list(entry), ensure_ascii=False)


def _manifest_entries(manifest: Path, skip: Iterable[site_changes.TaskLines] = ()) -> Iterator[tuple[str, str, str]]:
    """The (path, input hash, content hash) lines of a manifest, one at a time, but for those in
    the byte ranges of ``skip``."""
    gaps: list[list[int]] = []
    for start, end, _ in sorted(skip):
        if gaps and gaps[-1][1] == start:
            gaps[-1][1] = end  # the next task's lines: one gap
        else:
            gaps.append([start, end])
    with open(manifest, "rb") as handle:
        handle.readline()  # the header
        for start, end in gaps:
            while handle.tell() < start:
                line = handle.readline()
                if not line:
                    raise ValueError(f"{manifest}: shorter than the lines to skip")
                yield from _manifest_entry(line)
            handle.seek(end)
        for line in handle:
            yield from _manifest_entry(line)


def _manifest_entry(line: bytes) -> Iterator[tuple[str, str, str]]:
    line = line.strip().removesuffix(b",")
    if line not in (b"", b"]}"):
        name, key, sha = json.loads(line)
        yield name, key, sha


def _insert_batches(work: sqlite3.Connection, sql: str, rows: Iterator[tuple[Any, ...]]) -> None:
    while batch := list(itertools.islice(rows, 10_000)):
        work.executemany(sql, batch)
