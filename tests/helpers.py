"""Helpers shared by the tests: the bundled records as data, and writing variants of them."""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "records"
KIMI_VALUE_ERROR = "b318b4f842689251"
KIMI_PP_ERROR = "ce31b31dd9a787ba"
BAILING_VALUE_ERROR = "3083cb312003fdcc"
ALL_IDS = (BAILING_VALUE_ERROR, KIMI_VALUE_ERROR, KIMI_PP_ERROR)


def record_file(record_id: str) -> Path:
    return RECORDS / "sgl-project" / "sglang" / f"{record_id}.json"


def envelope(record_id: str) -> dict:
    """A fresh, mutable copy of a bundled record's envelope."""
    return copy.deepcopy(json.loads(record_file(record_id).read_text(encoding="utf-8")))


def copy_records(target: Path) -> Path:
    """A copy of the bundled records tree (records and families, no reproductions)."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(RECORDS / "sgl-project", target / "sgl-project", dirs_exist_ok=True)
    shutil.copy(RECORDS / "families.toml", target / "families.toml")
    return target


def write_envelope(folder: Path, data: dict, name: str | None = None) -> Path:
    """Write ``data`` where its repo and id say (or at ``name``), compact like the bundled files."""
    record = data["record"]
    path = folder / (name or f"{record['repo']}/{record['id']}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return path


def write_jsonl(path: Path, envelopes) -> Path:
    """Write ``envelopes`` to ``path`` as JSON Lines, one compact envelope a line."""
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in envelopes), encoding="utf-8")
    return path


def damage_schema_text(path) -> None:
    """Put a byte that is not UTF-8 into the schema text of the store at ``path`` (its ``tags``
    table): SQLite's error message then quotes it, and Python's sqlite3 raises
    UnicodeDecodeError instead of an sqlite3.Error."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA writable_schema = ON")
    with conn:
        conn.execute("UPDATE sqlite_master SET sql = CAST(x'435245415445205441424c45207461677320ff287829' AS TEXT) WHERE name = 'tags'")
    conn.close()
