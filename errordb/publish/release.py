"""The SQLite release: a compact copy of the store, with Datasette metadata beside it.

``errordb export --sqlite errordb.db`` writes ``errordb.db`` and ``errordb.metadata.json``;
``datasette errordb.db -m errordb.metadata.json`` then shows the records with titles,
descriptions, licence and source, full-text search, facets, and solutions and tags one click
away (foreign keys). The metadata file uses the Datasette 0.65 format (title, description,
licence, source, per-table descriptions and column descriptions, ``label_column``, ``sort``,
``facets``, canned queries); Datasette 1.0 reads the descriptive keys from the same file.

The copy is made with ``VACUUM INTO``: a consistent snapshot, rebuilt without free pages or a
journal, and the same bytes for the same database (with the same SQLite). Both files are
written beside their targets and renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from errordb.atomic import left_by_dead_processes
from errordb.publish.output import ExportError, dump_pretty

TITLE = "errordb"
DESCRIPTION = (
    "Analysed Python errors: where each one is raised, what it means, how to fix it. "
    "One row of `records` per error; solutions, prevention tips and tags are their own tables. "
    "The source windows (`sourceCode`) quote the analysed repositories and stay under those "
    "repositories' own licences (each record's `repo` and `githubUrl` name its origin)."
)
#: The licence of errordb's code and of the records' own text; the quoted source windows keep
#: their repositories' licences (sglang's, for the bundled records, is Apache-2.0), which the
#: description says, because one licence field cannot hold both.
LICENSE = "MIT"
LICENSE_URL = "https://opensource.org/license/mit"
SOURCE = "errordb records (records/<owner>/<repo>/<id>.json), schemaVersion 2"

TABLES: dict[str, dict[str, Any]] = {
    "records": {
        "title": "Error records",
        "description": "One analysed error per row: the message and its pattern, where it is raised, "
        "what it means. Search it with the search box (full-text search over message, documentation, "
        "trigger and situations).",
        "label_column": "slug",
        "sort": "id",
        "facets": ["repo", "errorClass", "severity", "backgroundTag"],
    },
    "solutions": {
        "title": "Solutions",
        "description": "How to fix each record's error, in order (position 0 first).",
    },
    "prevention_tips": {"title": "Prevention tips", "description": "How to avoid each record's error, in order."},
    "tags": {"title": "Tags", "description": "Every tag in use; record_tags links them to records."},
    "terms": {
        "title": "Pattern words",
        "description": "How many records' message patterns contain each whole word; explain looks records up by their rarest word (matchKey).",
    },
    "record_tags": {
        "title": "Record tags",
        "description": "Which records carry which tag, in each record's order.",
        "facets": ["tag"],
    },
    "repos": {"title": "Repositories", "description": "The GitHub repositories the errors are raised in."},
    "families": {
        "title": "Failure families",
        "description": "The families of errors (a record's backgroundTag), with a summary and an explanation each.",
        "label_column": "title",
    },
    "meta": {
        "title": "Dataset facts",
        "description": "datasetVersion, recordCount, contentHash (SHA-256 over every record's id and content hash) "
        "and the store layout version.",
    },
    "records_fts": {"description": "Full-text index of records (porter stemming); used by the records search box."},
    "solutions_fts": {"description": "Full-text index of solutions."},
}

#: Column descriptions of ``records``: every column of the table must have one (a test says so).
RECORD_COLUMNS = {
    "id": "16 lowercase hex digits, stable for one raise site.",
    "repo": "GitHub repository, owner/name (null for a draft learned from a distribution that names none).",
    "distribution": "For a draft learned from an installed distribution (errordb learn): its name; python for the standard library.",
    "distributionVersion": "The version of that distribution (of Python, for the standard library).",
    "slug": "URL name of the record's page: <site>/errors/<slug>/.",
    "errorCode": "An error code the message carries, if any.",
    "errorMessage": "The message as raised.",
    "messagePattern": "Regular expression (RE2 syntax) matching the message at run time.",
    "errorType": "Kind of error: exception, warning, log message...",
    "errorClass": "The exception class, dotted as printed.",
    "httpStatus": "HTTP status the error maps to, where it is served over HTTP.",
    "severity": "critical, error, warning or info.",
    "filePath": "File inside the repository that raises it.",
    "lineNumber": "Line of the raise in filePath.",
    "functionName": "The record's qualified name of the function that raises (Class.method), when it gives one (harvested drafts do).",
    "sourceCode": "The source window around the raise (sourceCodeStart..sourceCodeEnd), quoted from "
    "the analysed repository under its own licence.",
    "sourceCodeStart": "First line of sourceCode in filePath.",
    "sourceCodeEnd": "Last line of sourceCode in filePath.",
    "githubUrl": "The source window on GitHub, pinned to analyzedSha (null in a learned draft).",
    "documentation": "What the error means.",
    "triggerScenarios": "What triggers it.",
    "commonSituations": "Where people run into it.",
    "exampleFix": "A before/after example of the fix.",
    "handlingStrategy": "How calling code should handle it (fail-fast, retry, ...).",
    "validationCode": "Code that checks the fix worked.",
    "typeGuard": "A check that avoids the error up front.",
    "tryCatchPattern": "How to catch and handle it.",
    "backgroundTag": "Failure family: see the families table.",
    "analyzedSha": "Commit of the repository that was analysed (null in a learned draft: an installed copy names none).",
    "analyzedAt": "UTC date or time of the analysis.",
    "schemaVersion": "Record format version (2).",
    "datasetVersion": "Release of the dataset the record belongs to.",
    "contentHash": "SHA-256 of the record file's canonical JSON.",
    "function": "The function that raises: functionName, else the def that encloses lineNumber in the snippet (found by reading it, never running it).",
    "matchKey": "The rarest word every matching message contains: explain looks candidates up by it.",
    "textHash": "SHA-256 of the text the record was read from (its .json file, or its .jsonl line, stripped): "
    "ingest does not validate that text again.",
}

CHILD_COLUMNS = {
    "record_id": "The record (records.id).",
    "position": "Order within the record, from 0.",
    "text": "The text.",
    "tag": "The tag (tags.name).",
}

QUERIES = {
    "search": {
        "title": "Search records",
        "description": "Full-text search (SQLite FTS5 syntax: words, \"phrases\", OR, prefix*), best matches first.",
        "sql": "select records.id, records.slug, records.repo, records.errorClass, records.errorMessage\n"
        "from records_fts join records on records.rowid = records_fts.rowid\n"
        "where records_fts match :q\norder by records_fts.rank limit 100",
    },
    "record_solutions": {
        "title": "Solutions of one record",
        "description": "A record (by id or slug) with its solutions in order.",
        "sql": "select records.id, records.slug, solutions.position, solutions.text\n"
        "from records join solutions on solutions.record_id = records.id\n"
        "where records.id = :record or records.slug = :record\norder by solutions.position",
    },
}


@dataclass(frozen=True)
class SqliteRelease:
    """The two files of the release: the database, and its Datasette metadata."""

    database: Path
    metadata: Path


def metadata_path(database: Path) -> Path:
    """``errordb.db`` → ``errordb.metadata.json``."""
    return database.with_name(f"{database.stem}.metadata.json")


def export_sqlite(db: Any, target: Path, *, source_url: str | None = None) -> SqliteRelease:
    """Write a compact copy of the store to ``target`` and its Datasette metadata beside it.

    ``db`` is the open store (sqlite_utils Database or sqlite3 connection); it must not be in a
    transaction. ``source_url``, if given, is where the records are published.
    """
    conn = getattr(db, "conn", db)
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_partials(target)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial_metadata = target.with_name(f".{target.stem}.metadata.json.{os.getpid()}.partial")
    try:
        partial.unlink(missing_ok=True)
        try:
            conn.execute("VACUUM INTO ?", [str(partial)])
        except Exception as exc:  # sqlite3.OperationalError, e.g. inside a transaction
            raise ExportError(f"{target}: cannot copy the database: {exc}") from None
        metadata = datasette_metadata(conn, database_name=target.stem, source_url=source_url)
        partial_metadata.write_text(dump_pretty(metadata), encoding="utf-8")
        os.replace(partial, target)
        os.replace(partial_metadata, metadata_path(target))
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
            partial_metadata.unlink(missing_ok=True)
    return SqliteRelease(target, metadata_path(target))


def _remove_dead_partials(target: Path) -> None:
    """Remove the ``.partial`` files of exports that were killed (their pid is gone), and the
    ``-journal`` that ``VACUUM INTO`` may leave beside one."""
    names = f"{re.escape(target.name)}|{re.escape(target.stem)}\\.metadata\\.json"
    pattern = re.compile(rf"^\.(?:{names})\.(?P<pid>\d+)\.partial")
    for _, leftover in left_by_dead_processes(target.parent, pattern, files=True):
        leftover.unlink(missing_ok=True)


def datasette_metadata(db: Any, *, database_name: str, source_url: str | None = None) -> dict[str, Any]:
    """Datasette's metadata for the store ``db`` served under ``database_name`` (the file stem)."""
    facts = dict(db.execute("SELECT key, value FROM meta").fetchall())
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables = {}
    for name, entry in TABLES.items():
        if name not in present:
            continue
        entry = dict(entry)
        if name == "records":
            entry["columns"] = {c: RECORD_COLUMNS.get(c, "") for c in _columns(db, name)}
        elif name in ("solutions", "prevention_tips", "record_tags"):
            entry["columns"] = {c: CHILD_COLUMNS[c] for c in _columns(db, name) if c in CHILD_COLUMNS}
        tables[name] = entry
    version = facts.get("datasetVersion") or "empty"
    description = f"{DESCRIPTION} Dataset {version}, {facts.get('recordCount', '0')} records."
    source = {"source": SOURCE, **({"source_url": source_url} if source_url else {})}
    return {
        "title": TITLE,
        "description": description,
        "license": LICENSE,
        "license_url": LICENSE_URL,
        **source,
        "databases": {
            database_name: {
                "title": TITLE,
                "description": description,
                "tables": tables,
                "queries": QUERIES,
            }
        },
    }


def _columns(db: Any, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info([{table}])")]
