"""Reading records back from the store: one at a time, or all of them a batch at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from errordb.store.database import LIST_FIELDS, SCALAR_FIELDS

if TYPE_CHECKING:  # pydantic and sqlite_utils cost ~100 ms each to import: reading must not need them

    import sqlite_utils

    from errordb.records.schema import Envelope


def meta(db: sqlite_utils.Database) -> dict[str, str]:
    """The ``meta`` table as a dict (dataset version, record count, content hash)."""
    return dict(db.execute("SELECT key, value FROM meta").fetchall())


def get_envelope(db: sqlite_utils.Database, record_id: str) -> Envelope | None:
    """The record with ``record_id`` rebuilt from its rows, as the file that held it."""
    rows = list(iter_envelopes(db, where="id = ?", params=[record_id]))
    return rows[0] if rows else None


def get_record(db: sqlite_utils.Database, record_id: str) -> dict[str, Any] | None:
    """The record with ``record_id`` as a plain dict (record fields plus derived columns)."""
    rows = list(iter_record_dicts(db, where="id = ?", params=[record_id]))
    return rows[0] if rows else None


def find_record_id(db: sqlite_utils.Database, key: str) -> str | None:
    """The id of the record named by ``key``: an id, a slug, or a page or JSON URL ending in one;
    else the one record whose id starts with ``key`` or whose slug ends with it (``b318b4``, the
    id's first digits a draft's slug ends with)."""
    candidates = [key.strip()]
    tail = key.strip().rstrip("/").rsplit("/", 1)[-1]
    candidates += [tail, tail.removesuffix(".json")]
    for candidate in candidates:
        row = db.execute("SELECT id FROM records WHERE id = ? OR slug = ?", [candidate, candidate]).fetchone()
        if row:
            return row[0]
    found = records_named_by_part(db, key)
    return found[0] if len(found) == 1 else None


def resolve_record_id(db: sqlite_utils.Database, key: str) -> str:
    """The id of the record ``key`` names (:func:`find_record_id`); :class:`~errordb.errors.NotFound`
    saying so, or naming the records it could be, otherwise."""
    from errordb.errors import NotFound

    record_id = find_record_id(db, key)
    if record_id is not None:
        return record_id
    several = records_named_by_part(db, key)
    if len(several) > 1:
        more = "" if len(several) < 5 else ", ..."
        raise NotFound(f"{key}: names several records ({', '.join(several)}{more}); give more of the id or slug")
    raise NotFound(f"{key}: no such record (give an id, a slug, the end of a slug or a page URL; `errordb search` finds them)")


#: A part of an id or a slug that may name a record on its own: a few letters, digits or hyphens.
_PART = re.compile(r"[0-9a-z-]{4,80}")


def records_named_by_part(db: sqlite_utils.Database, key: str, limit: int = 5) -> list[str]:
    """The ids (at most ``limit``) of the records whose id starts with ``key`` or whose slug ends
    with ``-key``: one means ``key`` names it, more that it is ambiguous."""
    key = key.strip()
    if not _PART.fullmatch(key):
        return []
    rows = db.execute("SELECT id FROM records WHERE id LIKE ? || '%' OR slug LIKE '%-' || ? ORDER BY id LIMIT ?",
                      [key, key, limit]).fetchall()
    return [row[0] for row in rows]


DERIVED_COLUMNS = ("datasetVersion", "function", "contentHash")


def iter_record_dicts(
    db: sqlite_utils.Database, where: str | None = None, params: list[Any] | None = None, batch: int = 1000
) -> Iterator[dict[str, Any]]:
    """Every record (or those matching ``where``) as a dict with its lists, in id order, a batch at a time.

    Besides the record's fields each dict has ``datasetVersion``, ``function`` and ``contentHash``.
    """
    columns = ", ".join(f'"{name}"' for name in (*SCALAR_FIELDS, *DERIVED_COLUMNS))
    sql = f"SELECT {columns} FROM records"
    if where:
        sql += f" WHERE {where}"
    sql += " ORDER BY id"
    cursor = db.execute(sql, params or [])
    while rows := cursor.fetchmany(batch):
        lists = _child_lists(db, [row[0] for row in rows])
        for row in rows:
            record = dict(zip((*SCALAR_FIELDS, *DERIVED_COLUMNS), row))
            for name in LIST_FIELDS:
                record[name] = lists[name].get(record["id"], [])
            yield record


def iter_envelopes(
    db: sqlite_utils.Database, where: str | None = None, params: list[Any] | None = None, batch: int = 1000
) -> Iterator[Envelope]:
    """Every record (or those matching ``where``), rebuilt as envelopes, in id order."""
    from errordb.records.schema import Envelope, Record

    for record in iter_record_dicts(db, where, params, batch):
        version = record.pop("datasetVersion")
        for name in DERIVED_COLUMNS[1:]:
            del record[name]
        # The rows were validated on the way in; constructing skips validating them again.
        yield Envelope.model_construct(record=Record.model_construct(**record), datasetVersion=version)


def iter_record_files(
    db: sqlite_utils.Database, where: str | None = None, params: list[Any] | None = None, batch: int = 1000
) -> Iterator[tuple[str, bytes]]:
    """(id, record file) of every record (or those matching ``where``), in id order: the bytes of
    :func:`errordb.records.schema.canonical_json` of its envelope."""
    from errordb.records.schema import canonical_json

    for envelope in iter_envelopes(db, where, params, batch):
        yield envelope.record.id, canonical_json(envelope).encode("utf-8")


def _child_lists(db: sqlite_utils.Database, ids: list[str]) -> dict[str, dict[str, list[str]]]:
    marks = ",".join("?" * len(ids))
    sources = {"solutions": ("solutions", "text"), "preventionTips": ("prevention_tips", "text"), "tags": ("record_tags", "tag")}
    lists: dict[str, dict[str, list[str]]] = {}
    for name, (table, column) in sources.items():
        grouped: dict[str, list[str]] = {}
        sql = f"SELECT record_id, {column} FROM {table} WHERE record_id IN ({marks}) ORDER BY record_id, position"
        for record_id, value in db.execute(sql, ids):
            grouped.setdefault(record_id, []).append(value)
        lists[name] = grouped
    return lists


def iter_path_names(db: sqlite_utils.Database) -> Iterator[tuple[str, str, str, list[str], str | None]]:
    """``(id, repo, slug, tags, backgroundTag)`` of every record: the names files are made from."""
    tags: dict[str, list[str]] = {}
    for record_id, tag in db.execute("SELECT record_id, tag FROM record_tags ORDER BY record_id, position"):
        tags.setdefault(record_id, []).append(tag)
    for record_id, repo, slug, family in db.execute("SELECT id, repo, slug, backgroundTag FROM records ORDER BY id"):
        yield record_id, repo, slug, tags.get(record_id, []), family


def get_family(db: sqlite_utils.Database, tag: str | None) -> dict[str, str] | None:
    """The failure family ``tag`` names (``tag``, ``title``, ``summary``, ``explanation``), or None."""
    if not tag:
        return None
    row = db.execute("SELECT tag, title, summary, explanation FROM families WHERE tag = ?", [tag]).fetchone()
    return dict(zip(("tag", "title", "summary", "explanation"), row)) if row else None
