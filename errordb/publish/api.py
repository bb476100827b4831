"""The static JSON API: ``errordb export`` (and ``errordb build``, which calls :func:`write_api`).

:func:`write_api` writes the whole API into an empty folder; :func:`export_api` builds it beside
the target and swaps it into place (:func:`errordb.atomic.replaced_dir`), so a failed export
leaves the previous API exactly as it was. The layout, shapes and hosting notes are in
``docs/api.md``; :mod:`errordb.publish.api_layout` names every file.

Two exports of the same data are byte-identical: everything is sorted (ids, keys, groups),
nothing records a time, gzip and zip carry fixed timestamps. The dataset is streamed from the
store (records in id order, listings as SQL cursors), so memory stays flat at any size. All
reads happen in one read transaction: a concurrent ingest cannot make one export mix two
versions of the data.

The release database (``--sqlite``) is :mod:`errordb.publish.release`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from errordb import __version__
from errordb.publish import api_layout as layout
from errordb.atomic import remove_path, replaced_dir
from errordb.publish.digest import Checkpoint, PublishedFile, Written, checkpointed_sha256
from errordb.publish.downloads import EarlierDownloadError, JsonLinesGzip, RecordDirectory, Segment, StreamingZip, zip_entries
from errordb.publish.api_layout import Urls
from errordb.publish.api_listings import Paging, write_listings
from errordb.publish.openapi import openapi_document
from errordb.publish.output import ExportError, OutputTree
from errordb.publish.api_shapes import API_VERSION
from errordb.publish.release import SqliteRelease, export_sqlite
from errordb.publish.api_update import kept_segments, update_records

__all__ = [
    "DEFAULT_PAGE_BYTES", "DEFAULT_PAGE_SIZE", "Downloads", "ExportError", "ExportReport", "SqliteRelease",
    "ApiUnderway", "PreviousApi", "begin_api", "clear_for_update", "export_api", "export_sqlite", "link_listings", "write_api", "write_api_listings",
]  # fmt: skip

#: A page of a listing holds at most this many items ...
DEFAULT_PAGE_SIZE = 1000
#: ... and at most this many bytes of item JSON (unless a single item is larger).
DEFAULT_PAGE_BYTES = 1 << 20


#: The bulk downloads, in the order ``version.json`` lists them.
_DOWNLOADS = (layout.ALL_JSONL, layout.ALL_ZIP)


@dataclass
class ExportReport:
    """What an export wrote."""

    out: Path
    records: int
    files: int
    bytes: int
    seconds: float

    def summary(self) -> str:
        return f"{self.records} records, {self.files} files, {self.bytes / 1e6:.1f} MB in {self.seconds:.2f}s"


@dataclass(frozen=True)
class PreviousApi:
    """An API written before (by an earlier site build), for :func:`write_api` to reuse.

    ``changed`` are the ids of the records added, changed or removed since it was written; with
    them, the other records' files are linked without being read, and their entries in the bulk
    downloads are copied as they are (``all.jsonl.gz`` also needs the ``segments`` that writing
    it returned). ``None``: not known, so each earlier file is read and linked only when its
    SHA-256 is the record's ``contentHash``, and the bulk downloads are compressed again.
    ``checkpoints``: per bulk download, the SHA-256 states saved while hashing it
    (:class:`Downloads`); hashing the new one starts from the last one before its first change.
    """

    folder: Path
    changed: Collection[str] | None = None
    segments: list[Segment] | None = None
    checkpoints: dict[str, list[Checkpoint]] | None = None


@dataclass(frozen=True)
class Downloads:
    """What the next build needs to know of the bulk downloads an export wrote: the segments of
    its ``all.jsonl.gz``, and per download the SHA-256 states saved while hashing it
    (:func:`errordb.publish.digest.checkpointed_sha256`)."""

    segments: list[Segment]
    checkpoints: dict[str, list[Checkpoint]]


def write_api(
    db: Any,
    out_dir: Path,
    *,
    base_url: str = "/",
    page_size: int = DEFAULT_PAGE_SIZE,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    previous: Path | PreviousApi | None = None,
    listings: bool = True,
    stale: Collection[str] | None = None,
    update_downloads: bool = False,
) -> Downloads:
    """Write the whole API into ``out_dir``, an existing empty folder; returns what the next
    build needs to know of the bulk downloads (:class:`Downloads`).

    ``db`` is an open store (sqlite_utils Database or sqlite3 connection). ``base_url`` is where
    the site is served; the API is expected at ``<base_url>api/``, which is what its links
    (``jsonUrl``, page URLs, OpenAPI ``servers``) say. ``previous`` is an API written before
    (a folder, or a :class:`PreviousApi` that says what changed since): what it holds that this
    export would write again is linked or copied, not rebuilt. ``listings=False`` leaves out
    what :func:`write_api_listings` writes, for a caller that writes those at the same time in
    another process. ``stale``: ``out_dir`` holds an API written earlier, whose record files
    are right but for those of the records in ``stale``, and :func:`clear_for_update` has
    removed the rest; only what is missing is written. ``update_downloads`` (with ``stale`` and
    a ``previous`` that knows what changed): ``out_dir`` still holds that earlier API's two bulk
    downloads (:func:`clear_for_update` with ``keep_downloads``); they are brought up to date in
    place from their first segment that holds a stale record on, where they can be, else
    written again. Nothing here is atomic: a failure leaves ``out_dir`` half-written (use
    :func:`export_api` for that).
    """
    with begin_api(
        db, out_dir, base_url=base_url, page_size=page_size, page_bytes=page_bytes, previous=previous, listings=listings, stale=stale,
        update_downloads=update_downloads,
    ) as api:
        return api.finish()


def begin_api(
    db: Any,
    out_dir: Path,
    *,
    base_url: str = "/",
    page_size: int = DEFAULT_PAGE_SIZE,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    previous: Path | PreviousApi | None = None,
    listings: bool = True,
    stale: Collection[str] | None = None,
    update_downloads: bool = False,
) -> ApiUnderway:
    """:func:`write_api` (the same arguments) but for its last step: every file is written but
    ``version.json``, which waits for the two bulk downloads' SHA-256, still being computed in
    two threads. The caller may do other work (not with these files), then calls
    :meth:`ApiUnderway.finish` inside the ``with`` block."""
    if isinstance(previous, Path):
        previous = PreviousApi(previous)
    tree, urls, paging = OutputTree(Path(out_dir)), Urls.for_site(base_url), Paging(page_size, page_bytes)
    return _begin(db, tree, urls, paging, previous=previous, listings=listings, stale=stale, update_downloads=update_downloads)


#: The files of an API that are not listings (its record files aside).
_NOT_LISTINGS = {layout.ALL_JSONL, layout.ALL_ZIP, layout.VERSION, layout.OPENAPI, layout.RECORD_SCHEMA.split("/")[0]}


def link_listings(previous: Path, out_dir: Path) -> bool:
    """Link every listing file of the API in ``previous`` into ``out_dir`` (what
    :func:`write_api_listings` writes), for a build that knows no listing changed; False, with
    nothing linked, when one of them is not a plain file."""
    files: list[Path] = []
    for entry in sorted(previous.iterdir()):
        if entry.name in _NOT_LISTINGS:
            continue
        if entry.name == "errors" and entry.is_dir() and not entry.is_symlink():
            pages = entry / "index.pages"
            files += [entry / "index.json", *(sorted(pages.iterdir()) if pages.is_dir() and not pages.is_symlink() else [pages])]
        elif entry.is_dir() and not entry.is_symlink():
            files += sorted(path for path in entry.rglob("*") if not path.is_dir() or path.is_symlink())
        else:
            files.append(entry)
    if any(file.is_symlink() or not file.is_file() for file in files):
        return False
    tree = OutputTree(Path(out_dir))
    for file in files:
        tree.adopt(file, file.relative_to(previous).as_posix())
    return True


def clear_for_update(root: Path, stale: Collection[str], keep_listings: bool = False, keep_downloads: bool = False) -> None:
    """Remove from the earlier API in ``root`` every file but the record files of the records
    not in ``stale`` (and, with ``keep_listings``, the listings, which the caller knows are
    right): what is left is what an export would write again as it is, so :func:`write_api`
    (given the same ``stale``, and ``listings=False`` with ``keep_listings``) writes only the rest.
    ``keep_downloads``: the two bulk downloads stay too, for :func:`write_api`'s ``update_downloads``."""
    for entry in sorted(root.iterdir()):
        if keep_downloads and entry.name in _DOWNLOADS and not entry.is_symlink():
            continue
        if entry.name != "errors" or entry.is_symlink() or not entry.is_dir():
            if not keep_listings or entry.name in _NOT_LISTINGS or entry.is_symlink():
                remove_path(entry)
            continue
        for name in () if keep_listings else ("index.json", "index.pages"):
            remove_path(entry / name)
        for record_id in sorted(stale):
            if isinstance(record_id, str) and layout.PLAIN_RECORD_ID.fullmatch(record_id):
                for relative in (layout.record_path(record_id), layout.record_alias_path(record_id)):
                    (root / relative).unlink(missing_ok=True)


def write_api_listings(db: Any, out_dir: Path, *, base_url: str = "/", page_size: int = DEFAULT_PAGE_SIZE, page_bytes: int = DEFAULT_PAGE_BYTES) -> None:
    """Only the listings of the API (the errors index, patterns, repository, tag and family
    listings) into ``out_dir``: the part of :func:`write_api` that ``listings=False`` skips."""
    with _read_snapshot(db):
        write_listings(db, OutputTree(Path(out_dir)), Urls.for_site(base_url), Paging(page_size, page_bytes))


def export_api(
    db: Any,
    out: Path,
    *,
    base_url: str = "/",
    page_size: int = DEFAULT_PAGE_SIZE,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    progress: Callable[[int], None] | None = None,
) -> ExportReport:
    """Write the API to ``out`` all or nothing: on any error ``out`` is left as it was.

    ``progress`` is called with the number of records written so far.
    """
    started = time.perf_counter()
    urls, paging = Urls.for_site(base_url), Paging(page_size, page_bytes)
    try:
        with replaced_dir(out) as staging:
            tree = OutputTree(staging)
            with _begin(db, tree, urls, paging, progress) as api:
                api.finish()
    except sqlite3.DatabaseError as exc:
        # A damaged store: one line, without the damaged text SQLite may quote (the old API stays).
        from errordb.store import unreadable

        name = None
        with contextlib.suppress(sqlite3.Error):
            name = getattr(db, "conn", db).execute("PRAGMA database_list").fetchone()[2]
        raise unreadable(name, exc) from None
    return ExportReport(Path(out), api.records, tree.files, tree.bytes, time.perf_counter() - started)


def _begin(
    db: Any, tree: OutputTree, urls: Urls, paging: Paging, progress: Callable[[int], None] | None = None,
    previous: PreviousApi | None = None, listings: bool = True, stale: Collection[str] | None = None, update_downloads: bool = False,
) -> ApiUnderway:
    """Every file of the API but ``version.json`` (see :func:`begin_api`)."""
    from errordb.store import meta

    hashes = _Hashes(tree, previous.checkpoints if previous is not None and previous.checkpoints else {})
    try:
        with _read_snapshot(db):
            count, segments = _write_records(db, tree, hashes, progress, previous, stale, update_downloads)
            if listings:
                write_listings(db, tree, urls, paging)
            stats = meta(db)
        explain = _write_schemas(tree)
        tree.write_json(layout.OPENAPI, openapi_document(urls, explain_version=explain), pretty=True)
        version = _version_info(urls, stats, count, explain)
    except BaseException:
        hashes.close()
        raise
    return ApiUnderway(tree, urls, version, segments, hashes)


class _Hashes:
    """The two bulk downloads' SHA-256, each in a thread of its own (the hashing lets go of the
    GIL): one follows its writer when the file is a spare's copy updated in place (hashing goes
    on while the file is being written), else starts once the file is written. Each starts
    from the last state saved before its first byte that differs from the previous API's
    download (:mod:`errordb.publish.digest`): at a million records 1.6 GB, 0.7 s hashed whole."""

    def __init__(self, tree: OutputTree, earlier: dict[str, list[Checkpoint]]) -> None:
        from concurrent.futures import Future, ThreadPoolExecutor

        self._tree, self._earlier = tree, earlier
        self._pool = ThreadPoolExecutor(max_workers=len(_DOWNLOADS))
        self._futures: dict[str, Future[tuple[str, list[Checkpoint]]]] = {}
        self._followed: dict[str, Written] = {}

    def follow(self, name: str, file: IO[bytes]) -> PublishedFile:
        """``file``, positioned where its writer starts, wrapped to tell the hash what is written."""
        written = self._followed[name] = Written()
        self._submit(name, file.tell(), written)
        return PublishedFile(file, written, file.tell())

    def abandon(self) -> None:
        """The followed files are to be written again from the start: their hashes stop."""
        for written in self._followed.values():
            written.abandon()
        self._followed.clear()

    def written(self, name: str, size: int, unchanged: int) -> None:
        """The file ``name`` is written: ``size`` bytes, of which the first ``unchanged`` are the
        previous API's download's."""
        if name in self._followed:
            self._followed[name].complete(size)
        else:
            self._submit(name, unchanged)

    def _submit(self, name: str, unchanged: int, written: Written | None = None) -> None:
        self._futures[name] = self._pool.submit(checkpointed_sha256, self._tree.path(name), self._earlier.get(name, []), unchanged, written)

    def results(self) -> dict[str, tuple[str, list[Checkpoint]]]:
        """Per download (in the order ``version.json`` lists them), its SHA-256 and checkpoints."""
        return {name: self._futures[name].result() for name in _DOWNLOADS}

    def close(self) -> None:
        """Stop and wait for the hashing: a hash still following a writer stops."""
        self.abandon()
        self._pool.shutdown(wait=True, cancel_futures=True)


class ApiUnderway:
    """An API written but for ``version.json`` while its bulk downloads are hashed (:func:`begin_api`).

    Leaving the ``with`` block waits for the hashing threads, finished or not: they read files
    the caller may delete once it is done with them (after a failure, say)."""

    def __init__(self, tree: OutputTree, urls: Urls, version: dict[str, Any], segments: list[Segment], hashes: _Hashes) -> None:
        self.records: int = version["recordCount"]
        self._tree, self._urls, self._version, self._segments, self._hashes = tree, urls, version, segments, hashes

    def __enter__(self) -> ApiUnderway:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._hashes.close()

    def finish(self) -> Downloads:
        """Wait for the hashes and write ``version.json``; returns what the next build needs to
        know of the bulk downloads."""
        hashes = self._hashes.results()
        self._version["downloads"] = {
            name: {"url": self._urls.api(name), "bytes": os.path.getsize(self._tree.path(name)), "sha256": digest}
            for name, (digest, _) in hashes.items()
        }
        self._tree.write_json(layout.VERSION, self._version, pretty=True)
        return Downloads(self._segments, {name: checkpoints for name, (_, checkpoints) in hashes.items()})


@contextlib.contextmanager
def _read_snapshot(db: Any) -> Iterator[None]:
    """One read transaction around the export's queries (unless the caller has one open)."""
    conn = getattr(db, "conn", db)
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.rollback()  # it only read


def _write_records(
    db: Any, tree: OutputTree, hashes: _Hashes, progress: Callable[[int], None] | None = None, previous: PreviousApi | None = None,
    stale: Collection[str] | None = None, update_downloads: bool = False,
) -> tuple[int, list[Segment]]:
    """``errors/<id>.json`` and ``errors/<id>`` for each record, and the two bulk files, in one
    pass (with ``stale``, see :func:`write_api`, the record files of the others are there).
    Returns the number of records and the segments of ``all.jsonl.gz``; ``hashes`` hashes the
    two bulk downloads."""
    with contextlib.ExitStack() as stack:
        old_jsonl, old_zip = _previous_bulk(stack, previous)
        # From a spare, with both earlier downloads: in runs (errordb.publish.api_update), not per record.
        directory = RecordDirectory.read(old_zip) if stale is not None and old_jsonl is not None and old_zip is not None else None
        updating = directory is not None and previous is not None and previous.changed is not None and old_jsonl is not None
        spare = _spare_downloads(stack, tree, old_jsonl, directory, stale) if update_downloads and updating else None  # type: ignore[arg-type]
        if spare is not None:
            jsonl_file, zip_file, done = spare
            entries = sum(segment.count for segment in old_jsonl[1][:done])  # type: ignore[index]
            jsonl_file, zip_file = hashes.follow(layout.ALL_JSONL, jsonl_file), hashes.follow(layout.ALL_ZIP, zip_file)
        else:
            if update_downloads:  # the spare's, kept for an update that cannot be made: written anew
                for name in _DOWNLOADS:
                    tree.path(name).unlink(missing_ok=True)
            jsonl_file, zip_file = stack.enter_context(tree.open(layout.ALL_JSONL)), stack.enter_context(tree.open(layout.ALL_ZIP))
            done = entries = 0
        jsonl = JsonLinesGzip(jsonl_file, old_jsonl, written=done)
        archive = StreamingZip(zip_file, (directory, entries) if done else None)  # type: ignore[arg-type]
        count = None
        if updating:
            try:
                count = update_records(getattr(db, "conn", db), tree, previous.folder, previous.changed, stale, jsonl, old_jsonl[1], archive, directory, progress, done)  # type: ignore
            except EarlierDownloadError:  # not what they say: both downloads again, record by record
                archive.discard()
                hashes.abandon()
                for handle in (jsonl_file, zip_file):
                    handle.seek(0)
                    handle.truncate()
                jsonl, archive = JsonLinesGzip(jsonl_file, old_jsonl), StreamingZip(zip_file)
        if count is None:
            count = _write_each_record(db, tree, progress, previous, stale, jsonl, archive, old_zip)
        jsonl.close()
        archive.close()
        for name, handle, unchanged in ((layout.ALL_JSONL, jsonl_file, jsonl.unchanged), (layout.ALL_ZIP, zip_file, archive.unchanged)):
            handle.truncate()  # an earlier copy updated in place may have been longer
            hashes.written(name, handle.tell(), unchanged)
    if progress:
        progress(count)
    return count, jsonl.segments


#: Bytes before the first one to be written over that an earlier copy must share with the
#: previous API's download, as a last check that it is the copy it is said to be.
_SHARED_TAIL = 4096


def _spare_downloads(
    stack: contextlib.ExitStack, tree: OutputTree, old_jsonl: tuple[IO[bytes], list[Segment]], directory: RecordDirectory, stale: Collection[str],
) -> tuple[IO[bytes], IO[bytes], int] | None:
    """The two bulk downloads ``tree`` holds from an earlier export (a spare's), open to be
    updated in place and positioned after what they share with the previous API's (whose
    ``all.jsonl.gz`` and its segments are ``old_jsonl``, and whose ``all.zip`` has
    ``directory``), with the number of segments shared (0: written over from the start, which
    spares freeing the old file's blocks and allocating new ones); None when they cannot be
    used so.

    They are the earlier export's when the caller says so; each must still be a plain file
    with no other name (a file also in a live site is never written into), at least as long
    as what it shares, and end what it shares with the previous download's bytes.
    """
    segments = old_jsonl[1]
    done = kept_segments(segments, directory, stale)
    ends = {
        layout.ALL_JSONL: (old_jsonl[0], segments[done - 1].offset + segments[done - 1].length if done else 0),
        layout.ALL_ZIP: (directory.archive, directory.offset(sum(segment.count for segment in segments[:done])) if done else 0),
    }
    handles = []
    for name, (previous, shared) in ends.items():
        try:
            handle = stack.enter_context(open(tree.path(name), "r+b", opener=_no_symlink))
        except OSError:
            return None
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1 or status.st_size < shared:
            return None
        start = max(0, shared - _SHARED_TAIL)
        handle.seek(start)
        previous.seek(start)
        if handle.read(shared - start) != previous.read(shared - start):
            return None
        handles.append(handle)
    return handles[0], handles[1], done


def _no_symlink(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0))


def _write_each_record(
    db: Any, tree: OutputTree, progress: Callable[[int], None] | None, previous: PreviousApi | None, stale: Collection[str] | None,
    jsonl: JsonLinesGzip, archive: StreamingZip, old_zip: IO[bytes] | None,
) -> int:
    """:func:`_write_records` a record at a time (the unchanged ones' gzip segments and zip
    entries still copied from the previous API's downloads where they can be)."""
    count = 0
    old_entries = zip_entries(old_zip) if old_zip is not None else iter(())
    entry = next(old_entries, None)
    for record_id, data, old, unchanged in _record_files(db, previous):
        there = stale is not None and record_id not in stale and isinstance(record_id, str) and layout.PLAIN_RECORD_ID.fullmatch(record_id)
        if not there:  # (else its two files are there already)
            if old is None or not tree.adopt(old, layout.record_path(record_id), missing_ok=True):
                data = data if isinstance(data, bytes) else data()
                tree.write_bytes(layout.record_path(record_id), data)
            tree.link(layout.record_path(record_id), layout.record_alias_path(record_id))
        jsonl.add(record_id, data, unchanged)
        name = f"{record_id}.json".encode()
        while entry is not None and entry.name < name:
            entry = next(old_entries, None)
        if not (unchanged and entry is not None and entry.name == name and archive.copy(entry, old_zip)):  # type: ignore[arg-type]
            archive.add(name.decode(), data if isinstance(data, bytes) else data())
        count += 1
        if progress and count % 1000 == 0:
            progress(count)
    return count


def _previous_bulk(stack: contextlib.ExitStack, previous: PreviousApi | None) -> tuple[tuple[IO[bytes], list[Segment]] | None, IO[bytes] | None]:
    """The previous API's bulk files, open, when what changed since is known (else None, None)."""
    if previous is None or previous.changed is None:
        return None, None
    files = []
    for name in _DOWNLOADS:
        path = previous.folder / name
        try:
            files.append(stack.enter_context(open(path, "rb")) if path.is_file() and not path.is_symlink() else None)
        except OSError:
            files.append(None)
    jsonl = (files[0], previous.segments) if files[0] is not None and previous.segments else None
    return jsonl, files[1]


def _record_files(db: Any, previous: PreviousApi | None) -> Iterator[tuple[str, bytes | Callable[[], bytes], str | None, bool]]:
    """Per record, by id: (id, its file's bytes or a function that makes them, the previous
    API's file holding those bytes or None, whether that file is known to be unchanged)."""
    from errordb.store import iter_record_files

    if previous is None:
        for record_id, data in iter_record_files(db):
            yield record_id, data, None, False
        return
    conn = getattr(db, "conn", db)

    def made(record_id: str) -> Callable[[], bytes]:
        def make() -> bytes:
            ((_, data),) = iter_record_files(db, where="id = ?", params=[record_id])
            return data

        return make

    folder = os.fspath(previous.folder)  # paths as text: a Path per record costs more than the rest
    cursor = conn.execute("SELECT id, contentHash FROM records ORDER BY id")
    while rows := cursor.fetchmany(1000):
        fresh: list[str] = []
        found: dict[str, tuple[bytes | Callable[[], bytes], str | None, bool]] = {}
        for record_id, content_hash in rows:
            # Ids are checked on ingest, but a path is built from this one: never from a hand-edited id.
            plain = isinstance(record_id, str) and layout.PLAIN_RECORD_ID.fullmatch(record_id) is not None
            old = os.path.join(folder, layout.record_path(record_id)) if plain else None
            if previous.changed is not None:
                if plain and record_id not in previous.changed:
                    found[record_id] = (made(record_id), old, True)  # its earlier file is trusted, as its page is
                else:
                    fresh.append(record_id)
                continue
            data = b""
            if old is not None:
                with contextlib.suppress(OSError):
                    if not os.path.islink(old):
                        with open(old, "rb") as handle:
                            data = handle.read()
            if data and hashlib.sha256(data).hexdigest() == content_hash:
                found[record_id] = (data, old, False)
            else:
                fresh.append(record_id)
        if fresh:
            marks = ",".join("?" * len(fresh))
            for record_id, data in iter_record_files(db, where=f"id IN ({marks})", params=fresh):
                found[record_id] = (data, None, False)
        for record_id, _ in rows:
            data, old, unchanged = found[record_id]
            yield record_id, data, old, unchanged


def _write_schemas(tree: OutputTree) -> int | None:
    """The published JSON Schemas; returns the version of the explain schema among them, if any."""
    from errordb.records.schema import record_json_schema

    tree.write_json(layout.RECORD_SCHEMA, record_json_schema(), pretty=True)
    explain = _explain_result_module()
    if explain is None:
        return None
    tree.write_json(layout.explain_schema_path(explain.FORMAT_VERSION), explain.explain_json_schema(), pretty=True)
    return explain.FORMAT_VERSION


def _explain_result_module() -> Any:
    """:mod:`errordb.explainer.result` (the shape of ``explain --format json``), or None without one.

    Imported lazily: the explain output is versioned by that module, not by the export. Only
    the module's absence counts; an error inside it is a bug and propagates.
    """
    try:
        from errordb.explainer import result
    except ModuleNotFoundError as exc:
        if exc.name != "errordb.explainer.result":
            raise
        return None
    return result if hasattr(result, "explain_json_schema") else None


def _version_info(urls: Urls, stats: dict[str, str], count: int, explain: int | None) -> dict[str, Any]:
    """``version.json`` but for its ``downloads``, which :meth:`ApiUnderway.finish` fills in."""
    from errordb.records.schema import SUPPORTED_SCHEMA_VERSIONS

    if stats.get("recordCount") not in (None, str(count)):
        # The meta table is written in the same transaction as the records; a mismatch is a damaged store.
        raise ExportError(f"the store's meta table says {stats['recordCount']} records, but it holds {count}")
    schemas = {"record": urls.api(layout.RECORD_SCHEMA)}
    if explain is not None:
        schemas["explain"] = urls.api(layout.explain_schema_path(explain))
    return {
        "apiVersion": API_VERSION,
        "datasetVersion": stats.get("datasetVersion"),
        "recordCount": count,
        "contentHash": stats.get("contentHash"),
        "schemaVersion": SUPPORTED_SCHEMA_VERSIONS[-1],
        "errordbVersion": __version__,
        "downloads": None,
        "schemas": schemas,
    }

