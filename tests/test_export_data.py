"""A dataset for the export tests: the bundled records plus synthetic ones that exercise paging,
several repositories, awkward tag names (``a+b``, ``v1.json`` beside ``v1``, ``index``), non-ASCII
text, a family no record uses, and a record that lists a tag twice.

The builders are imported by the other export tests; the test here keeps the data honest (it
passes ``errordb check``, so the export is tested on records the project would accept).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import KIMI_VALUE_ERROR, copy_records, envelope, write_envelope

from errordb.records.check import check
from errordb.records.conventions import github_url, slug_base
from errordb.store import ingest

SYNTHETIC = 40
REPOS = ("acme/widgets", "acme/gadgets", "Other-Org/tool.py")
FAMILIES = ("missing-required-argument", "feature-parallelism-conflict", None)
UNUSED_FAMILY = """
[unused-family]
title = "A family no record uses"
summary = "Listed with no records."
explanation = "It still gets a listing, with count 0."
"""


def synthetic_envelope(number: int) -> dict:
    """Synthetic record ``number``: a variant of a bundled record, valid under `errordb check`."""
    data = envelope(KIMI_VALUE_ERROR)
    record = data["record"]
    message = f"Synthetic failure {number}: widget “w{number}” is not ready."
    record["id"] = f"{0x5E00000000000000 + number * 7919:016x}"
    record["repo"] = REPOS[number % len(REPOS)]
    record["errorMessage"] = message
    record["messagePattern"] = f"Synthetic failure {number}: widget “w{number}” is not ready\\."
    record["slug"] = slug_base(message)
    record["githubUrl"] = github_url(
        record["repo"], record["analyzedSha"], record["filePath"], record["sourceCodeStart"], record["sourceCodeEnd"]
    )
    tags = ["synthetic", f"group-{number % 4}"]
    tags += ["a+b"] * (number % 5 == 0) + ["v1"] * (number % 7 == 0) + ["v1.json"] * (number % 3 == 0)
    tags += ["index"] * (number % 10 == 0) + ["synthetic"] * (number == 1)
    record["tags"] = tags
    record["backgroundTag"] = FAMILIES[number % len(FAMILIES)]
    record["solutions"] = [f"Fix number {number}.", "Then run it again."]
    record["preventionTips"] = [] if number % 2 else [f"Check widget w{number} first."]
    return data


def build_records(folder: Path, count: int = SYNTHETIC) -> Path:
    """A records tree: the bundled records, ``count`` synthetic ones, and an extra family."""
    copy_records(folder)
    with open(folder / "families.toml", "a", encoding="utf-8") as handle:
        handle.write(UNUSED_FAMILY)
    for number in range(count):
        write_envelope(folder, synthetic_envelope(number))
    return folder


def build_db(folder: Path, count: int = SYNTHETIC) -> Path:
    """A store holding :func:`build_records`; returns its path."""
    records = build_records(folder / "records", count)
    path = folder / "store.db"
    ingest([records], path)
    return path


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path: two trees are equal when these are."""
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def table_rows(path: Path) -> dict[str, list[tuple]]:
    """Every row of every errordb table (not the full-text tables), sorted: equal stores give equal
    dicts. Not the store's history (``ingests``, ``change_log``): the same records ingested in
    other steps make the same store with another history."""
    conn = sqlite3.connect(path)
    try:
        tables = [
            row[0]
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            if "_fts" not in row[0] and row[0] not in ("ingests", "change_log")
        ]
        rows = {}
        for table in tables:
            columns = len(conn.execute(f"PRAGMA table_info([{table}])").fetchall())
            order = ", ".join(str(n) for n in range(1, columns + 1))
            rows[table] = conn.execute(f"SELECT * FROM [{table}] ORDER BY {order}").fetchall()
        return rows
    finally:
        conn.close()


def test_synthetic_records_pass_check(tmp_path):
    records = build_records(tmp_path / "records", 12)
    assert [str(problem) for problem in check([records])] == []
