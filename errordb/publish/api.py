"""The static JSON API: ``errordb export`` (and ``errordb build``, which calls :func:`write_api`).

:func:`write_api` writes the whole API into an empty folder; :func:`export_api` builds it beside
the target and swaps it into place (:func:`errordb.atomic.replaced_dir`), so a failed export
leaves the previous API exactly as it was; :func:`api_file` makes one file of it, for
``errordb serve``. The layout, shapes and hosting notes are in ``docs/api.md``;
:mod:`errordb.publish.api_layout` names every file.

Two exports of the same data are byte-identical: everything is sorted (ids, keys, groups),
nothing records a time, gzip and zip carry fixed timestamps. The dataset is streamed from the
store (records in id order, listings as SQL cursors), so memory stays flat at any size. All
reads happen in one read transaction: a concurrent ingest cannot make one export mix two
versions of the data.

The release database (``--sqlite``) is :mod:`errordb.publish.release`.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from errordb import __version__
from errordb.atomic import replaced_dir
from errordb.publish import api_layout as layout
from errordb.publish.api_layout import Urls
from errordb.publish.api_listings import (
    Paging, write_errors_index, write_family_listings, write_listings, write_repo_listings, write_tag_listings,
)  # fmt: skip
from errordb.publish.api_shapes import API_VERSION
from errordb.publish.downloads import Downloads
from errordb.publish.openapi import openapi_document
from errordb.publish.output import ExportError, MemoryTree, OutputTree
from errordb.publish.release import SqliteRelease, export_sqlite

__all__ = ["DEFAULT_PAGE_BYTES", "DEFAULT_PAGE_SIZE", "ExportError", "ExportReport", "SqliteRelease", "api_file", "export_api", "export_sqlite", "write_api"]

#: A page of a listing holds at most this many items ...
DEFAULT_PAGE_SIZE = 1000
#: ... and at most this many bytes of item JSON (unless a single item is larger).
DEFAULT_PAGE_BYTES = 1 << 20


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


def write_api(
    db: Any, out_dir: Path, *, base_url: str = "/", page_size: int = DEFAULT_PAGE_SIZE, page_bytes: int = DEFAULT_PAGE_BYTES,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write the whole API into ``out_dir``, an existing empty folder; returns the number of records.

    ``db`` is an open store (sqlite_utils Database or sqlite3 connection). ``base_url`` is where
    the site is served; the API is expected at ``<base_url>api/``, which is what its links
    (``jsonUrl``, page URLs, OpenAPI ``servers``) say. ``progress`` is called with the number of
    records written so far. Nothing here is atomic: a failure leaves ``out_dir`` half-written
    (use :func:`export_api` for that).
    """
    return _write(db, OutputTree(Path(out_dir)), Urls.for_site(base_url), Paging(page_size, page_bytes), progress)


def export_api(
    db: Any, out: Path, *, base_url: str = "/", page_size: int = DEFAULT_PAGE_SIZE, page_bytes: int = DEFAULT_PAGE_BYTES,
    progress: Callable[[int], None] | None = None,
) -> ExportReport:
    """Write the API to ``out`` all or nothing: on any error ``out`` is left as it was."""
    started = time.perf_counter()
    urls, paging = Urls.for_site(base_url), Paging(page_size, page_bytes)
    refuse_learned_drafts(db)
    _check_path_names(db)
    try:
        with replaced_dir(out) as staging:
            tree = OutputTree(staging)
            count = _write(db, tree, urls, paging, progress)
    except sqlite3.DatabaseError as exc:
        # A damaged store: one line, without the damaged text SQLite may quote (the old API stays).
        from errordb.store import unreadable

        name = None
        with contextlib.suppress(sqlite3.Error):
            name = getattr(db, "conn", db).execute("PRAGMA database_list").fetchone()[2]
        raise unreadable(name, exc) from None
    return ExportReport(Path(out), count, tree.files, tree.bytes, time.perf_counter() - started)


def refuse_learned_drafts(db: Any) -> None:
    """Refuse a store that holds drafts learned from installed distributions (``errordb learn``):
    they describe one machine's installed code, have no GitHub source, and are not published."""
    count, first = getattr(db, "conn", db).execute("SELECT count(*), min(id) FROM records WHERE distribution IS NOT NULL").fetchone()
    if count:
        raise ExportError(f"record {first}: distribution: the store holds {count:,} drafts learned from installed distributions "
                          "(errordb learn); they are local to this machine and are not published: publish a store of your record files")


def _check_path_names(db: Any) -> None:
    """Refuse, before anything is written, names the API's files cannot have on every common host:
    they are used as they are (``repos/<owner>/<name>.json``, ``tags/<tag>.json``)."""
    from errordb.records.conventions import path_name_problems
    from errordb.store import iter_path_names

    problems = path_name_problems(iter_path_names(db))
    if problems:
        record_id, field, text = problems[0]
        more = f" (and {len(problems) - 1} more; `errordb check` on the record files lists them)" if len(problems) > 1 else ""
        raise ExportError(f"record {record_id}: {field}: {text}{more}")


def _write(db: Any, tree: OutputTree | MemoryTree, urls: Urls, paging: Paging, progress: Callable[[int], None] | None = None) -> int:
    from errordb.store import meta

    with _read_snapshot(db):
        count, downloads = _write_records(db, tree, progress)
        write_listings(db, tree, urls, paging)
        stats = meta(db)
    explain = _write_schemas(tree)
    tree.write_json(layout.OPENAPI, openapi_document(urls, explain_version=explain), pretty=True)
    version = _version_info(urls, stats, count, explain)
    version["downloads"] = {name: {"url": urls.api(name), **facts} for name, facts in downloads.items()}
    tree.write_json(layout.VERSION, version, pretty=True)
    return count


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


def _write_records(db: Any, tree: OutputTree | MemoryTree, progress: Callable[[int], None] | None) -> tuple[int, dict[str, dict[str, Any]]]:
    """``errors/<id>.json`` and ``errors/<id>`` for each record, and the two bulk downloads, in
    one pass; returns the number of records and the downloads' sizes and SHA-256."""
    from errordb.store import iter_record_files

    downloads = Downloads(tree)
    count = 0
    try:
        for record_id, data in iter_record_files(db):
            # Ids are checked on ingest, but a path is built from this one: never from a hand-edited id.
            if not isinstance(record_id, str) or not layout.PLAIN_RECORD_ID.fullmatch(record_id):
                raise ExportError(f"record id {record_id!r} is not 16 lowercase hex digits: it cannot name a file")
            tree.write_bytes(layout.record_path(record_id), data)
            tree.link(layout.record_path(record_id), layout.record_alias_path(record_id))
            downloads.add(record_id, data)
            count += 1
            if progress and count % 1000 == 0:
                progress(count)
    except BaseException:
        downloads.discard()
        raise
    facts = downloads.close()
    if progress:
        progress(count)
    return count, facts


def _write_schemas(tree: OutputTree | MemoryTree) -> int:
    """The published JSON Schemas; returns the version of the explain output's schema."""
    from errordb.explainer import result
    from errordb.records.schema import record_json_schema

    tree.write_json(layout.RECORD_SCHEMA, record_json_schema(), pretty=True)
    tree.write_json(layout.explain_schema_path(result.FORMAT_VERSION), result.explain_json_schema(), pretty=True)
    return result.FORMAT_VERSION


def _version_info(urls: Urls, stats: dict[str, str], count: int, explain: int) -> dict[str, Any]:
    """``version.json`` but for its ``downloads``."""
    from errordb.records.schema import SUPPORTED_SCHEMA_VERSIONS

    if stats.get("recordCount") not in (None, str(count)):
        # The meta table is written in the same transaction as the records; a mismatch is a damaged store.
        raise ExportError(f"the store's meta table says {stats['recordCount']} records, but it holds {count}")
    return {
        "apiVersion": API_VERSION,
        "datasetVersion": stats.get("datasetVersion"),
        "recordCount": count,
        "contentHash": stats.get("contentHash"),
        "schemaVersion": SUPPORTED_SCHEMA_VERSIONS[-1],
        "errordbVersion": __version__,
        "downloads": None,
        "schemas": {"record": urls.api(layout.RECORD_SCHEMA), "explain": urls.api(layout.explain_schema_path(explain))},
    }


# One file, for errordb serve -------------------------------------------------------------------

_RECORD_FILE = re.compile(r"errors/([0-9a-f]{16})(?:\.json)?")
#: The listings each folder or file of the API belongs to.
_LISTINGS = {
    "errors": write_errors_index, "patterns": write_errors_index, "repos": write_repo_listings,
    "tags": write_tag_listings, "families": write_family_listings,
}  # fmt: skip


def api_file(db: Any, relative: str, *, base_url: str = "/") -> bytes | None:
    """The bytes of the API file at ``relative`` (``errors/<id>.json``, ``tags.json``...), made
    from the store as an export would write it; None when the API has no such file.

    A listing is made with the others of its kind, everything else but a record file with the
    whole API: meant for a preview server's requests, not for the whole API file by file.
    """
    from errordb.store import iter_record_files

    found = _RECORD_FILE.fullmatch(relative)
    if found:
        files = list(iter_record_files(db, where="id = ?", params=[found.group(1)]))
        return files[0][1] if files else None
    tree = MemoryTree()
    urls, paging = Urls.for_site(base_url), Paging(DEFAULT_PAGE_SIZE, DEFAULT_PAGE_BYTES)
    kind = re.split(r"[/.]", relative, maxsplit=1)[0]
    with _read_snapshot(db):
        if kind in _LISTINGS:
            _LISTINGS[kind](db, tree, urls, paging)
        else:
            _write(db, tree, urls, paging)
    return tree.files.get(relative)
