"""Ingest into SQLite: round trips, idempotency, updates, pruning, atomicity, the embedded default."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sqlite3
from pathlib import Path

import pytest
from helpers import ALL_IDS, BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, RECORDS, copy_records, damage_schema_text, envelope, record_file, write_envelope, write_jsonl

from errordb.errors import RecordError
from errordb.records.schema import canonical_json
from errordb.store import (
    STORE_VERSION,
    StoreError,
    connect,
    default_db_path,
    find_record_id,
    get_envelope,
    ingest,
    iter_envelopes,
    meta,
    open_db,
)


def file_digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def records(tmp_path):
    return copy_records(tmp_path / "records")


@pytest.fixture
def db_path(tmp_path, records):
    path = tmp_path / "e.db"
    ingest([records], path)
    return path


def test_round_trip_rebuilds_every_record_file_byte_for_byte(db_path):
    db = connect(db_path)
    rebuilt = {env.record.id: canonical_json(env) for env in iter_envelopes(db)}
    assert sorted(rebuilt) == sorted(ALL_IDS)
    for record_id, text in rebuilt.items():
        assert text == record_file(record_id).read_text(encoding="utf-8")


def test_child_rows_keep_every_character(records, tmp_path):
    # What comes back must be the text itself, escapes and all.
    data = envelope(KIMI_PP_ERROR)
    tricky = ['quote " and \\ backslash', "tab\tnew\nline\r", "\u2028 \u2029 \x7f é 中文 🐍", "\\u0041 is not A", "[1, 2]"]
    data["record"]["solutions"] = tricky
    data["record"]["preventionTips"] = list(reversed(tricky))
    write_envelope(records, data, name=record_file(KIMI_PP_ERROR).relative_to(RECORDS).as_posix())
    db = connect(tmp_path / "tricky.db")
    ingest([records], tmp_path / "tricky.db")
    record = next(env.record for env in iter_envelopes(db) if env.record.id == KIMI_PP_ERROR)
    assert (record.solutions, record.preventionTips) == (tricky, list(reversed(tricky)))


def test_normalised_tables(db_path):
    db = connect(db_path)
    assert db["repos"].get("sgl-project/sglang")["url"] == "https://github.com/sgl-project/sglang"
    solutions = db.execute(
        "SELECT position, text FROM solutions WHERE record_id = ? ORDER BY position", [KIMI_VALUE_ERROR]
    ).fetchall()
    assert [p for p, _ in solutions] == [0, 1, 2]
    assert solutions[0][1].startswith("Pass an explicit list of layer ids")
    tags = [r[0] for r in db.execute("SELECT tag FROM record_tags WHERE record_id = ? ORDER BY position", [KIMI_PP_ERROR])]
    assert tags == ["dspark", "pipeline-parallel", "speculative-decoding", "kimi"]
    assert db["families"].get("missing-required-argument")["title"] == "Missing required argument"
    functions = {r["id"]: r["function"] for r in db["records"].rows}
    assert set(functions.values()) == {"set_dspark_layers_to_capture"}
    foreign = {(fk.column, fk.other_table) for fk in db["records"].foreign_keys}
    assert foreign == {("repo", "repos"), ("backgroundTag", "families")}
    assert meta(db)["recordCount"] == "3"
    assert meta(db)["datasetVersion"] == "2026-08-28T06:17:29.519Z"


def test_full_text_search_covers_messages_documentation_and_solutions(db_path):
    db = connect(db_path)
    hits = [r["id"] for r in db["records"].search("pipeline")]
    assert KIMI_PP_ERROR in hits
    solution_hits = db.execute(
        "SELECT solutions.record_id FROM solutions_fts JOIN solutions ON solutions.rowid = solutions_fts.rowid "
        "WHERE solutions_fts MATCH 'relaunch'"
    ).fetchall()
    assert solution_hits == [(KIMI_PP_ERROR,)]


def test_ingest_twice_changes_nothing(records, db_path):
    before = file_digest(db_path)
    report = ingest([records], db_path)
    assert (report.added, report.updated, report.unchanged, report.removed) == (0, 0, 3, 0)
    assert file_digest(db_path) == before


def test_changed_record_is_updated_in_place(records, db_path):
    data = envelope(KIMI_PP_ERROR)
    data["record"]["solutions"] = ["Only this one now."]
    data["record"]["tags"] = ["dspark"]
    write_envelope(records, data)
    report = ingest([records], db_path)
    assert (report.added, report.updated, report.unchanged) == (0, 1, 2)
    db = connect(db_path)
    assert get_envelope(db, KIMI_PP_ERROR).record.solutions == ["Only this one now."]
    assert canonical_json(get_envelope(db, KIMI_PP_ERROR)) == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    found = db.execute("SELECT rowid FROM solutions_fts WHERE solutions_fts MATCH 'relaunch'").fetchall()
    assert found == []
    assert db.execute("SELECT count(*) FROM tags WHERE name = 'pipeline-parallel'").fetchone()[0] == 0


def test_prune_removes_records_whose_files_are_gone(records, db_path):
    (records / "sgl-project" / "sglang" / f"{KIMI_PP_ERROR}.json").unlink()
    kept = ingest([records], db_path)
    assert kept.removed == 0 and connect(db_path)["records"].count == 3
    pruned = ingest([records], db_path, prune=True)
    assert pruned.removed == 1
    db = connect(db_path)
    assert db["records"].count == 2
    assert db.execute("SELECT count(*) FROM solutions WHERE record_id = ?", [KIMI_PP_ERROR]).fetchone()[0] == 0
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_json_lines_input(tmp_path):
    lines = "\n".join(record_file(i).read_text(encoding="utf-8") for i in ALL_IDS) + "\n"
    source = tmp_path / "all.jsonl"
    source.write_text(lines, encoding="utf-8")
    report = ingest([source], tmp_path / "j.db", families_path=RECORDS / "families.toml")
    assert report.added == 3


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["record"].update(lineNumber="2888"), "lineNumber"),
        (lambda d: d["record"].pop("errorClass"), "errorClass"),
        (lambda d: d["record"].update(messagePattern="DSPARK ("), "messagePattern"),
        (lambda d: d["record"].update(bogus=True), "bogus"),
    ],
)
def test_one_bad_record_aborts_and_leaves_the_database_unchanged(records, db_path, mutate, field):
    good = envelope(KIMI_VALUE_ERROR)
    good["record"]["solutions"] = ["changed, and must not be stored"]
    write_envelope(records, good)
    bad = envelope(KIMI_PP_ERROR)
    mutate(bad)
    bad_path = write_envelope(records, bad)
    before = file_digest(db_path)
    with pytest.raises(RecordError) as caught:
        ingest([records], db_path)
    assert caught.value.source == str(bad_path)
    assert caught.value.record_id == KIMI_PP_ERROR
    assert caught.value.field == field
    assert file_digest(db_path) == before


def test_malformed_json_aborts_with_the_file_named(records, db_path):
    broken = records / "sgl-project" / "sglang" / f"{KIMI_PP_ERROR}.json"
    broken.write_text(broken.read_text()[:200], encoding="utf-8")
    before = file_digest(db_path)
    with pytest.raises(RecordError, match=r"malformed JSON") as caught:
        ingest([records], db_path)
    assert caught.value.source == str(broken)
    assert file_digest(db_path) == before


@pytest.mark.parametrize("batch_size", [1, 2000])
def test_duplicate_id_across_files_is_refused(records, db_path, monkeypatch, batch_size):
    # In one batch or in two, the file read later is named, and the other file in the message.
    monkeypatch.setattr("errordb.store.ingestion.BATCH_SIZE", batch_size)
    copy = write_envelope(records, envelope(KIMI_PP_ERROR), name="zz-copy/ce31b31dd9a787ba.json")
    first = str(record_file(KIMI_PP_ERROR)).replace(str(RECORDS), str(records))
    before = file_digest(db_path)
    with pytest.raises(RecordError, match=f"duplicate id: {first} has a record with the same id") as caught:
        ingest([records], db_path)
    assert (caught.value.source, caught.value.record_id, caught.value.field) == (str(copy), KIMI_PP_ERROR, "id")
    assert file_digest(db_path) == before


def test_a_file_named_twice_or_inside_a_folder_named_is_read_once(records, tmp_path):
    one = record_file(KIMI_PP_ERROR).relative_to(RECORDS)
    folder = records / one.parent
    report = ingest([records / one, folder, records, records, folder / ".." / one.parent.name / one.name], tmp_path / "once.db")
    assert (report.added, report.total) == (len(ALL_IDS), len(ALL_IDS))
    with pytest.raises(RecordError, match="no such file or folder"):  # inside a folder given, but missing
        ingest([records, folder / "ffffffffffffffff.json"], tmp_path / "missing.db")


def test_a_file_named_inside_a_folder_the_walk_skips_is_still_read(records, tmp_path):
    hidden = write_envelope(records, envelope(KIMI_PP_ERROR), name="_drafts/ce31b31dd9a787ba.json")
    # The walk of ``records`` skips "_drafts", so the file named on its own is the second copy.
    with pytest.raises(RecordError, match="duplicate id") as caught:
        ingest([records, hidden], tmp_path / "twice.db")
    assert caught.value.source == str(hidden)


def test_duplicate_slug_is_refused(records, db_path):
    data = envelope(BAILING_VALUE_ERROR)
    data["record"]["slug"] = "dspark-aux-hidden-capture-requires-pp-1"
    write_envelope(records, data)
    with pytest.raises(RecordError, match="already the slug of record ce31b31dd9a787ba") as caught:
        ingest([records], db_path)
    assert caught.value.field == "slug"


@pytest.mark.parametrize("batch_size", [1, 2000])
def test_duplicate_slug_is_found_across_batches(records, tmp_path, monkeypatch, batch_size):
    # A slug taken in an earlier batch is refused, and whatever the batches, the later file (in
    # reading order) is the one named.
    monkeypatch.setattr("errordb.store.ingestion.BATCH_SIZE", batch_size)
    data = envelope(BAILING_VALUE_ERROR)  # 3083cb…: read before ce31b3…
    data["record"]["slug"] = "dspark-aux-hidden-capture-requires-pp-1"
    write_envelope(records, data)
    target = tmp_path / "new.db"
    with pytest.raises(RecordError, match=f"already the slug of record {BAILING_VALUE_ERROR}") as caught:
        ingest([records], target)
    assert (caught.value.record_id, caught.value.field) == (KIMI_PP_ERROR, "slug")
    assert caught.value.source.endswith(f"{KIMI_PP_ERROR}.json")
    assert not target.exists()


def test_a_new_record_may_take_the_slug_an_update_gives_up(records, db_path, monkeypatch):
    # The new record's file is read first, in a batch of its own, before the update that frees
    # its slug: a record whose slug is taken waits for the end of the ingest.
    monkeypatch.setattr("errordb.store.ingestion.BATCH_SIZE", 1)
    freed = envelope(KIMI_PP_ERROR)["record"]["slug"]
    renamed = envelope(KIMI_PP_ERROR)
    renamed["record"]["slug"] = "dspark-pp-1-only"
    write_envelope(records, renamed)
    new = envelope(KIMI_PP_ERROR)
    new["record"].update(id="0000000000000001", slug=freed)
    write_envelope(records, new, name="0-first/0000000000000001.json")
    report = ingest([records], db_path)
    assert (report.added, report.updated, report.unchanged) == (1, 1, 2)
    db = connect(db_path)
    slugs = dict(db.execute("SELECT id, slug FROM records WHERE id IN (?, ?)", [KIMI_PP_ERROR, "0000000000000001"]).fetchall())
    assert slugs == {KIMI_PP_ERROR: "dspark-pp-1-only", "0000000000000001": freed}
    solutions = db.execute("SELECT count(*) FROM solutions WHERE record_id = ?", ["0000000000000001"]).fetchone()[0]
    assert solutions == len(new["record"]["solutions"])


def test_records_are_stored_a_few_at_a_time_as_in_one_go(tmp_path, records, monkeypatch):
    # One record per batch and one new record per full-text statement: the same store.
    monkeypatch.setattr("errordb.store.ingestion.BATCH_SIZE", 1)
    monkeypatch.setattr("errordb.store.ingestion.FULL_TEXT_EVERY", 1)
    read: list[int] = []
    ingest([records], tmp_path / "chunked.db", progress=read.append)
    assert read == [1, 2, 3]
    db = connect(tmp_path / "chunked.db")
    assert {env.record.id: canonical_json(env) for env in iter_envelopes(db)} == {
        record_id: record_file(record_id).read_text(encoding="utf-8") for record_id in ALL_IDS
    }
    counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("solutions", "prevention_tips", "record_tags")}
    expected = {"solutions": "solutions", "prevention_tips": "preventionTips", "record_tags": "tags"}
    assert counts == {t: sum(len(envelope(i)["record"][f]) for i in ALL_IDS) for t, f in expected.items()}
    for table in ("records_fts", "solutions_fts"):
        db.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")  # raises if wrong


def _rows(path: Path) -> dict[str, list[tuple]]:
    """Every row of every table a store's content lies in, and what the full-text indexes hold.
    Not the index words (matchKey): they depend on the order records are counted in."""
    conn = sqlite3.connect(path)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(records)") if row[1] != "matchKey"]
    tables = {"records": f"SELECT {', '.join(columns)} FROM records"}
    for table in ("solutions", "prevention_tips", "record_tags", "repos", "tags", "families", "terms"):
        tables[table] = f"SELECT * FROM {table}"
    tables["records_fts"] = "SELECT r.id, d.sz FROM records_fts_docsize d JOIN records r ON r.rowid = d.id"
    tables["solutions_fts"] = "SELECT s.record_id, s.position, d.sz FROM solutions_fts_docsize d JOIN solutions s ON s.rowid = d.id"
    try:
        return {table: sorted(conn.execute(sql).fetchall(), key=repr) for table, sql in tables.items()}
    finally:
        conn.close()


def test_batches_of_any_size_store_the_same_rows(tmp_path, monkeypatch):
    # Generated records in a shuffled file, 300 of them, in one batch or in batches of 40 (with
    # full-text rows written every 90 new records), then updated and added to.
    import random

    envelopes = _generated(300)
    random.Random(3).shuffle(envelopes)
    first = write_jsonl(tmp_path / "first.jsonl", envelopes[:200])
    for item in envelopes[:20]:
        item["record"]["solutions"].append("Quench the zymurgic flux.")
    second = write_jsonl(tmp_path / "second.jsonl", envelopes)
    stores = {}
    for size in (2000, 40):
        monkeypatch.setattr("errordb.store.ingestion.BATCH_SIZE", size)
        monkeypatch.setattr("errordb.store.ingestion.FULL_TEXT_EVERY", min(size, 90))
        stores[size] = tmp_path / f"{size}.db"
        assert ingest([first], stores[size]).added == 200
        report = ingest([second], stores[size])
        assert (report.added, report.updated, report.unchanged) == (100, 20, 180)
    whole, batched = _rows(stores[2000]), _rows(stores[40])
    assert len(whole["records"]) == 300 and len(whole["solutions_fts"]) == len(whole["solutions"]) > 300
    assert whole == batched
    for path in stores.values():
        conn = sqlite3.connect(path)
        for table in ("records_fts", "solutions_fts"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")  # raises if wrong
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM solutions_fts WHERE solutions_fts MATCH 'zymurgic'").fetchone()[0] == 20
        conn.close()


def test_the_first_bad_record_in_file_order_is_named(tmp_path):
    # The file's second record is bad, and so is its third, which has the lower id.
    envelopes = _generated(3)
    envelopes[0]["record"]["id"] = "0000000000000001"
    envelopes[0]["record"]["lineNumber"] = "soon"
    envelopes[1]["record"]["id"] = "ffffffffffffff01"
    envelopes[1]["record"].pop("errorClass")
    path = write_jsonl(tmp_path / "bad.jsonl", [envelopes[2], envelopes[1], envelopes[0]])
    with pytest.raises(RecordError) as caught:
        ingest([path], tmp_path / "bad.db")
    assert (caught.value.source, caught.value.record_id, caught.value.field) == (f"{path}:2", "ffffffffffffff01", "errorClass")
    assert not (tmp_path / "bad.db").exists()


def test_repositories_tags_and_families_of_every_batch_get_their_rows(tmp_path, records, monkeypatch):
    # Ingest remembers which it made already; a record per batch must still give each one its row.
    # No families file: each family's row then comes from its records alone.
    no_families = tmp_path / "no-families.toml"
    whole = tmp_path / "whole.db"
    ingest([records], whole, families_path=no_families)
    monkeypatch.setattr("errordb.store.ingestion.BATCH_SIZE", 1)
    one_by_one = tmp_path / "one-by-one.db"
    ingest([records], one_by_one, families_path=no_families)
    for table in ("repos", "tags", "families"):
        rows = [connect(path).execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for path in (whole, one_by_one)]
        assert rows[0] == rows[1] and rows[0], table
    db = connect(one_by_one)
    assert {row[0] for row in db.execute("SELECT tag FROM record_tags")} == {row[0] for row in db.execute("SELECT name FROM tags")}
    used = {row[0] for row in db.execute("SELECT backgroundTag FROM records WHERE backgroundTag IS NOT NULL")}
    assert used and used == {row[0] for row in db.execute("SELECT tag FROM families")}


def test_failed_ingest_into_a_new_file_leaves_no_file(tmp_path, records):
    bad = envelope(KIMI_PP_ERROR)
    bad["record"]["severity"] = "nope"
    write_envelope(records, bad)
    target = tmp_path / "new.db"
    with pytest.raises(RecordError):
        ingest([records], target)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records"]  # no partial store left either


def _schema(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    finally:
        conn.close()


def test_a_new_store_is_built_beside_its_name_and_appears_complete(tmp_path, records, monkeypatch):
    from errordb.store import ingestion as store

    target = tmp_path / "new.db"
    seen = {}
    real_merge = store._merge_full_text

    def watching(db, written):  # once every record is in, before the store is put in place
        partials = list(tmp_path.glob(".new.db.*.partial"))
        seen.update(target_exists=target.exists(), partials=[p.name for p in partials])
        seen["journal"] = db.execute("PRAGMA journal_mode").fetchone()[0]
        return real_merge(db, written)

    monkeypatch.setattr(store, "_merge_full_text", watching)
    report = ingest([records], target)
    assert seen == {"target_exists": False, "partials": [f".new.db.{os.getpid()}.partial"], "journal": "memory"}
    assert report.added == len(ALL_IDS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db", "records"]
    conn = sqlite3.connect(target)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # as connect() makes new files
    assert conn.execute("PRAGMA page_size").fetchone()[0] == store.STORE_PAGE_SIZE != 4096
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert {env.record.id for env in iter_envelopes(connect(target))} == set(ALL_IDS)


def test_a_store_keeps_the_page_size_it_was_made_with(tmp_path, records):
    from errordb.store import database as store

    made = connect(tmp_path / "made.db")  # as `errordb` makes an empty store
    store.ensure_schema(made)
    made.close()
    older = tmp_path / "older.db"  # a store made before errordb chose its page size
    conn = sqlite3.connect(older)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    made = connect(older)
    store.ensure_schema(made)
    made.close()
    for path, size in ((tmp_path / "made.db", store.STORE_PAGE_SIZE), (older, 4096)):
        ingest([records], path)
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA page_size").fetchone()[0] == size, path.name
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == len(ALL_IDS)
        conn.close()


def test_an_ingest_into_an_empty_store_builds_the_same_indexes(tmp_path, records):
    # The full-text insert triggers are dropped while records are written: none may be lost.
    from errordb.store import ensure_schema

    plain = connect(tmp_path / "plain.db")  # the layout as ensure_schema makes it, no ingest
    ensure_schema(plain)
    plain.close()
    schema_before = _schema(tmp_path / "plain.db")
    empty_folder = tmp_path / "none"
    empty_folder.mkdir()
    existing = tmp_path / "existing.db"
    ingest([empty_folder], existing)
    ingest([records], existing)
    fresh = tmp_path / "fresh.db"
    ingest([records], fresh)
    assert _schema(existing) == _schema(fresh) == schema_before
    assert sum(sql.startswith("CREATE INDEX") or sql.startswith("CREATE UNIQUE INDEX") for _, sql in schema_before if sql) >= 9
    conn = sqlite3.connect(existing)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # every index holds every row
    plan = conn.execute("EXPLAIN QUERY PLAN SELECT id FROM records WHERE slug = 'x'").fetchall()
    assert "idx_records_slug" in str(plan)


def test_a_killed_ingests_partial_store_is_removed_by_the_next_one(tmp_path, records):
    dead = tmp_path / ".new.db.999999999.partial"  # no such process
    alive = tmp_path / f".new.db.{os.getppid()}.partial"  # another ingest, still running
    for path in (dead, Path(f"{dead}-journal"), alive):
        path.write_bytes(b"half a database")
    ingest([records], tmp_path / "new.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["new.db", "records", alive.name])


def test_a_store_another_process_made_meanwhile_is_not_replaced(tmp_path, records, monkeypatch):
    from errordb.store import ingestion as store

    target = tmp_path / "new.db"
    real_merge = store._merge_full_text

    def racing(db, written):
        target.write_bytes(b"made by another ingest")
        return real_merge(db, written)

    monkeypatch.setattr(store, "_merge_full_text", racing)
    with pytest.raises(StoreError, match=r"new\.db: another process created this database while this ingest ran"):
        ingest([records], target)
    assert target.read_bytes() == b"made by another ingest"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db", "records"]


def test_a_database_of_another_kind_is_refused(tmp_path, records):
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.commit()
    with pytest.raises(StoreError, match="not an errordb database"):
        ingest([records], other)


def test_find_record_by_id_slug_or_url(db_path):
    db = connect(db_path)
    assert find_record_id(db, BAILING_VALUE_ERROR) == BAILING_VALUE_ERROR
    assert find_record_id(db, "dspark-aux-hidden-capture-requires-pp-1") == KIMI_PP_ERROR
    assert find_record_id(db, "https://example.org/errors/dspark-aux-hidden-capture-requires-pp-1/") == KIMI_PP_ERROR
    assert find_record_id(db, f"/api/errors/{KIMI_VALUE_ERROR}.json") == KIMI_VALUE_ERROR
    assert find_record_id(db, "nothing-like-it") is None


def test_embedded_default_is_built_once_from_a_clean_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "fresh-cache"))
    first = default_db_path()
    assert first.parent == tmp_path / "fresh-cache"
    assert connect(first)["records"].count == 3
    stamp = first.stat().st_mtime_ns
    assert default_db_path() == first and first.stat().st_mtime_ns == stamp
    db = open_db()
    assert {r["id"] for r in db["records"].rows} == set(ALL_IDS)


def test_embedded_default_rebuilds_a_corrupt_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "c"))
    path = default_db_path()
    path.write_bytes(b"this is not sqlite" * 100)
    assert default_db_path() == path
    assert connect(path)["records"].count == 3


def test_embedded_default_rebuilds_a_cache_whose_record_text_is_damaged(tmp_path, monkeypatch):
    # One byte of a record's text changed: SQLite's own checks cannot see it (they check the
    # file's structure), and the store would answer with the wrong text.
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "c"))
    path = default_db_path()
    text = open_db(path).execute("SELECT documentation FROM records WHERE id = ?", [KIMI_PP_ERROR]).fetchone()[0]
    raw = bytearray(path.read_bytes())
    at = raw.index(text.encode("utf-8")) + 10
    raw[at] = ord("#") if raw[at] != ord("#") else ord("%")
    path.write_bytes(bytes(raw))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT documentation FROM records WHERE id = ?", [KIMI_PP_ERROR]).fetchone()[0] != text
    conn.close()
    assert default_db_path() == path
    assert open_db(path).execute("SELECT documentation FROM records WHERE id = ?", [KIMI_PP_ERROR]).fetchone()[0] == text


def test_embedded_default_without_its_digest_is_rebuilt(tmp_path, monkeypatch):
    # As one built before errordb kept the digest is: its bytes cannot be vouched for.
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "c"))
    path = default_db_path()
    digest = path.with_name(path.name + ".sha256")
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, digest.name]
    digest.unlink()
    stamp = path.stat().st_mtime_ns
    os.utime(path, ns=(stamp - 10**9, stamp - 10**9))
    assert default_db_path() == path and digest.exists()
    assert path.stat().st_mtime_ns != stamp - 10**9  # a new file


def test_embedded_default_rebuilds_a_cache_whose_schema_text_is_damaged(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "c"))
    path = default_db_path()
    damage_schema_text(path)
    with pytest.raises(UnicodeDecodeError):
        sqlite3.connect(path).execute("PRAGMA quick_check").fetchone()
    assert default_db_path() == path
    assert meta(open_db(path))["storeVersion"] == STORE_VERSION
    assert connect(path)["records"].count == 3


def test_open_db_names_a_missing_file(tmp_path):
    with pytest.raises(StoreError, match="no such database"):
        open_db(tmp_path / "missing.db")


def _generated(count: int) -> list[dict]:
    spec = importlib.util.spec_from_file_location("bench_generate", Path(__file__).resolve().parents[1] / "bench" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.generate(count, seed=11))


def test_ingest_indexes_the_text_of_new_and_changed_records_as_the_triggers_would(tmp_path, monkeypatch):
    # Ingest writes the full-text rows of new records itself (the insert triggers are dropped
    # meanwhile): seven at a time, into an empty store and into a full one.
    monkeypatch.setattr("errordb.store.ingestion.FULL_TEXT_EVERY", 7)
    monkeypatch.setattr("errordb.store.ingestion.BATCH_SIZE", 3)
    envelopes = _generated(30)

    db_path = tmp_path / "g.db"
    ingest([write_jsonl(tmp_path / "first.jsonl", envelopes[:20])], db_path)
    for item in envelopes[:3]:
        item["record"]["solutions"] = ["Quench the zymurgic flux."]
        item["record"]["documentation"] += " Zymurgy."
    report = ingest([write_jsonl(tmp_path / "second.jsonl", envelopes)], db_path)
    assert (report.added, report.updated, report.unchanged) == (10, 3, 17)
    conn = sqlite3.connect(db_path)
    for table in ("records_fts", "solutions_fts"):
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")  # raises if wrong
        indexed = conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]
        assert indexed == conn.execute(f"SELECT count(*) FROM {table.removesuffix('_fts')}").fetchone()[0]
    found = conn.execute("SELECT r.id FROM records_fts JOIN records r ON r.rowid = records_fts.rowid WHERE records_fts MATCH 'zymurgy' ORDER BY r.id")
    assert [row[0] for row in found] == sorted(e["record"]["id"] for e in envelopes[:3])
    assert conn.execute("SELECT count(*) FROM solutions_fts WHERE solutions_fts MATCH 'zymurgic'").fetchone()[0] == 3
    triggers = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"records_ai", "solutions_ai", "records_au", "solutions_ad"} <= triggers
    conn.close()


def _segments(path) -> int:
    # FTS5's %_idx shadow table has rows for every segment's leaves, keyed (segid, term).
    return connect(path).execute("SELECT count(DISTINCT segid) FROM records_fts_idx").fetchone()[0]


def test_an_ingest_that_writes_much_of_the_store_merges_its_full_text_index(tmp_path):
    envelopes = _generated(40)

    db_path = tmp_path / "g.db"
    ingest([write_jsonl(tmp_path / "all.jsonl", envelopes)], db_path)
    assert _segments(db_path) == 1
    # Three small ingests (one record in forty each) leave FTS5's own segments alone...
    for round_ in range(3):
        envelopes[round_]["record"]["documentation"] += f" Edited {round_}."
        ingest([write_jsonl(tmp_path / f"edit-{round_}.jsonl", [envelopes[round_]])], db_path)
    assert _segments(db_path) > 1
    # ...one that rewrites a tenth of the store merges them into one again.
    for item in envelopes[10:14]:
        item["record"]["documentation"] += " Edited again."
    report = ingest([write_jsonl(tmp_path / "edits.jsonl", envelopes[10:14])], db_path)
    assert report.updated == 4
    assert _segments(db_path) == 1
    db = connect(db_path)
    db.execute("INSERT INTO records_fts (records_fts) VALUES ('integrity-check')")  # raises if the index is wrong
    found = db.execute("SELECT count(*) FROM records_fts WHERE records_fts MATCH 'edited'").fetchone()[0]
    assert found == 7


def test_a_text_read_again_unchanged_is_not_validated_again(records, db_path, monkeypatch, tmp_path):
    from errordb.store import ingestion as store

    edited = envelope(KIMI_PP_ERROR)
    edited["record"]["documentation"] += " Edited."
    write_envelope(records, edited)
    validated: list[str] = []
    real_prepare = store._prepare
    monkeypatch.setattr(store, "_prepare", lambda source, text: validated.append(source) or real_prepare(source, text))
    report = ingest([records], db_path, prune=True)
    assert (report.added, report.updated, report.unchanged, report.removed) == (0, 1, 2, 0)
    assert validated == [str(record_file(KIMI_PP_ERROR)).replace(str(RECORDS), str(records))]
    # The same record in another text (its file's JSON laid out otherwise) is validated once, counted
    # unchanged, and its text is then known too.
    relaid = records / record_file(KIMI_VALUE_ERROR).relative_to(RECORDS)
    relaid.write_text(json.dumps(envelope(KIMI_VALUE_ERROR), ensure_ascii=False) + "\n", encoding="utf-8")  # ", " and ": "
    validated.clear()
    report = ingest([records], db_path, prune=True)
    assert (report.added, report.updated, report.unchanged, validated) == (0, 0, 3, [str(relaid)])
    validated.clear()
    before = file_digest(db_path)
    assert ingest([records], db_path, prune=True).unchanged == 3 and validated == []
    assert file_digest(db_path) == before
    # As a line of a JSON Lines file, with its newline, a record file's text is the same text.
    lines = tmp_path / "all.jsonl"
    lines.write_text("".join(path.read_text(encoding="utf-8").strip() + "\n" for path in sorted(records.rglob("*.json"))), encoding="utf-8")
    assert ingest([lines], db_path, prune=True).unchanged == 3 and validated == []
    assert file_digest(db_path) == before


def test_an_unchanged_text_given_twice_is_still_a_duplicate(records, db_path):
    copy = records / "zz-copy" / f"{KIMI_PP_ERROR}.json"
    copy.parent.mkdir()
    copy.write_bytes(record_file(KIMI_PP_ERROR).read_bytes())  # the stored text itself
    before = file_digest(db_path)
    with pytest.raises(RecordError, match="duplicate id") as caught:
        ingest([records], db_path)
    assert (caught.value.source, caught.value.record_id) == (str(copy), KIMI_PP_ERROR)
    assert file_digest(db_path) == before


def test_a_store_of_an_older_layout_is_refused(tmp_path, records):
    old = tmp_path / "old.db"
    ingest([records], old)
    conn = sqlite3.connect(old)
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'storeVersion'")
    conn.commit()
    conn.close()
    before = file_digest(old)
    for attempt in (lambda: open_db(old), lambda: ingest([records], old)):
        with pytest.raises(StoreError, match=f"store layout 3, this errordb writes {STORE_VERSION}.*ingest into a new file"):
            attempt()
    assert file_digest(old) == before


def _edit(envelopes: list[dict], rng, serial: int) -> None:
    """Update, add or remove a few records (the ids spread over many buckets)."""
    import copy

    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["update", "update", "add", "remove"])
        index = rng.randrange(len(envelopes))
        if kind == "update":
            envelopes[index]["record"]["documentation"] += f" Edit {serial}."
        elif kind == "remove" and len(envelopes) > 10:
            del envelopes[index]
        else:
            new = copy.deepcopy(envelopes[index])
            new["record"]["id"] = f"{rng.getrandbits(64):016x}"
            new["record"]["slug"] = f"{new['record']['slug'][:30].rstrip('-')}-copy-{serial}-{rng.randrange(10**6)}"
            envelopes.append(new)


def test_the_content_hash_is_that_of_the_records_however_they_were_ingested(tmp_path):
    import random

    rng = random.Random(8)
    envelopes = _generated(300)
    db = tmp_path / "e.db"
    ingest([write_jsonl(tmp_path / "first.jsonl", envelopes)], db, prune=True)
    hashes = {meta(open_db(db))["contentHash"]}
    for serial in range(5):
        _edit(envelopes, rng, serial)
        ingest([write_jsonl(tmp_path / f"step-{serial}.jsonl", envelopes)], db, prune=True)
        hashes.add(meta(open_db(db))["contentHash"])
    assert len(hashes) == 6  # every change changed it
    fresh = tmp_path / "fresh.db"
    ingest([write_jsonl(tmp_path / "fresh.jsonl", list(reversed(envelopes)))], fresh)
    assert meta(open_db(fresh))["contentHash"] == meta(open_db(db))["contentHash"]


def test_the_content_hash_is_what_docs_api_md_says(tmp_path):
    from errordb.store import iter_record_files

    db = tmp_path / "e.db"
    ingest([write_jsonl(tmp_path / "first.jsonl", _generated(80))], db)
    store = open_db(db)
    buckets: dict[str, hashlib._Hash] = {}
    for record_id, data in iter_record_files(store):  # in id order
        line = f"{record_id}:{hashlib.sha256(data).hexdigest()}\n"
        buckets.setdefault(record_id[:3], hashlib.sha256()).update(line.encode())
    whole = hashlib.sha256("".join(f"{bucket}:{digest.hexdigest()}\n" for bucket, digest in sorted(buckets.items())).encode())
    assert meta(store)["contentHash"] == whole.hexdigest()
