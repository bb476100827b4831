"""The store's change log and bucketed content hash (``errordb.store.changed_since``).

A reader (the site build) that knows the store's state at some ingest asks which records
changed since, instead of comparing every record: these tests check that the answer is every
record each later ingest added, changed or removed, that the store cannot be asked about a
state it was never in, and that the content hash kept per bucket of ids is the hash of the
records alone, however they got there.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from errordb import store as store_module
from errordb.store import StoreError, change_state, changed_since, ingest, meta, open_db

GENERATOR = Path(__file__).resolve().parents[1] / "bench" / "generate.py"
FAMILIES = Path(__file__).resolve().parents[1] / "records" / "families.toml"


def _generated(count: int, seed: int = 5) -> list[dict]:
    spec = importlib.util.spec_from_file_location("bench_generate", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.generate(count, seed=seed))


def _write(envelopes: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in envelopes), encoding="utf-8")
    return path


def _ingest(envelopes: list[dict], db: Path, folder: Path, name: str) -> store_module.IngestReport:
    return ingest([_write(envelopes, folder / f"{name}.jsonl")], db, prune=True, families_path=FAMILIES)


def _hashes(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT id, contentHash FROM records"))
    finally:
        conn.close()


def _state(db: Path) -> tuple[int, str]:
    conn = sqlite3.connect(db)
    try:
        state = change_state(conn)
    finally:
        conn.close()
    assert state is not None
    return state


def _since(db: Path, state: tuple[int, str]) -> list[str] | None:
    conn = sqlite3.connect(db)
    try:
        return changed_since(conn, *state)
    finally:
        conn.close()


def _edit(envelopes: list[dict], rng: random.Random, serial: int) -> None:
    """Update, add or remove a few records (the ids spread over many buckets)."""
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


def test_the_log_lists_every_record_each_later_ingest_changed(tmp_path):
    rng = random.Random(3)
    envelopes = _generated(300)
    db = tmp_path / "e.db"
    _ingest(envelopes, db, tmp_path, "first")
    states = [_state(db)]
    changed_by: list[set[str]] = []  # what ingest i + 1 changed: the ids whose content hash it changed
    for serial in range(8):
        _edit(envelopes, rng, serial)
        before = _hashes(db)
        _ingest(envelopes, db, tmp_path, f"step-{serial}")
        after = _hashes(db)
        changed_by.append({i for i in before.keys() | after.keys() if before.get(i) != after.get(i)})
        states.append(_state(db))
        assert states[-1][0] == states[-2][0] + 1
        for start, state in enumerate(states):
            expected = set().union(*changed_by[start:])
            assert _since(db, state) == sorted(expected), (serial, start)
    # An ingest that changes nothing starts no new state.
    _ingest(envelopes, db, tmp_path, "again")
    assert _state(db) == states[-1]


def test_the_content_hash_is_that_of_the_records_however_they_were_ingested(tmp_path):
    rng = random.Random(8)
    envelopes = _generated(300)
    db = tmp_path / "e.db"
    _ingest(envelopes, db, tmp_path, "first")
    hashes = {meta(open_db(db))["contentHash"]}
    for serial in range(5):
        _edit(envelopes, rng, serial)
        _ingest(envelopes, db, tmp_path, f"step-{serial}")
        hashes.add(meta(open_db(db))["contentHash"])
    assert len(hashes) == 6  # every change changed it
    fresh = tmp_path / "fresh.db"
    _ingest(list(reversed(envelopes)), fresh, tmp_path, "fresh")
    assert meta(open_db(fresh))["contentHash"] == meta(open_db(db))["contentHash"]
    # The buckets an ingest rehashed are those hashing every one of them gives.
    conn = sqlite3.connect(db)
    kept = conn.execute("SELECT bucket, hash FROM content_buckets ORDER BY bucket").fetchall()
    assert 200 < len(kept) <= 4096
    conn.close()
    fresh_conn = sqlite3.connect(fresh)
    assert fresh_conn.execute("SELECT bucket, hash FROM content_buckets ORDER BY bucket").fetchall() == kept
    fresh_conn.close()


def test_a_store_cannot_tell_what_changed_since_a_state_it_was_never_in(tmp_path):
    envelopes = _generated(60)
    db = tmp_path / "e.db"
    _ingest(envelopes, db, tmp_path, "first")
    start = _state(db)
    copied = tmp_path / "copy.db"
    shutil.copyfile(db, copied)
    mine, theirs = copy.deepcopy(envelopes), copy.deepcopy(envelopes)
    mine[3]["record"]["documentation"] += " Mine."
    theirs[4]["record"]["documentation"] += " Theirs."
    _ingest(mine, db, tmp_path, "mine")
    _ingest(theirs, copied, tmp_path, "theirs")
    # Both copies are at the same sequence number, in different states.
    assert _state(db)[0] == _state(copied)[0] == start[0] + 1
    assert _since(copied, _state(db)) is None
    assert _since(db, _state(copied)) is None
    assert _since(db, (start[0], "0" * 64)) is None
    assert _since(db, (start[0] + 5, _state(db)[1])) is None
    # From the state they shared, each tells its own change.
    assert _since(db, start) == [mine[3]["record"]["id"]]
    assert _since(copied, start) == [theirs[4]["record"]["id"]]


def test_an_ingest_of_too_many_changes_is_logged_without_its_ids(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "LOGGED_IDS_MOST", 5)
    envelopes = _generated(40)
    db = tmp_path / "e.db"
    _ingest(envelopes, db, tmp_path, "first")
    start = _state(db)
    for record in envelopes[:6]:
        record["record"]["documentation"] += " Many."
    _ingest(envelopes, db, tmp_path, "many")
    middle = _state(db)
    assert _since(db, start) is None
    envelopes[9]["record"]["documentation"] += " One."
    _ingest(envelopes, db, tmp_path, "one")
    assert _since(db, start) is None
    assert _since(db, middle) == [envelopes[9]["record"]["id"]]


@pytest.mark.parametrize("bound", ["ingests", "rows"])
def test_the_log_forgets_the_oldest_ingests(tmp_path, monkeypatch, bound):
    if bound == "ingests":
        monkeypatch.setattr(store_module, "LOG_INGESTS_MOST", 3)
    else:
        monkeypatch.setattr(store_module, "LOG_ROWS_MOST", 5)  # each ingest below changes two records
    envelopes = _generated(40)
    db = tmp_path / "e.db"
    _ingest(envelopes, db, tmp_path, "first")
    states = [_state(db)]
    for serial in range(6):
        for index in (serial, serial + 10):
            envelopes[index]["record"]["documentation"] += f" Step {serial}."
        _ingest(envelopes, db, tmp_path, f"step-{serial}")
        states.append(_state(db))
    told = [_since(db, state) is not None for state in states]
    # The newest states can still be asked about (the last with no change since), the oldest not.
    assert told == [False] * 4 + [True] * 3
    assert _since(db, states[-2]) == sorted(envelopes[i]["record"]["id"] for i in (5, 15))
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM ingests").fetchone()[0] == 3
    assert conn.execute("SELECT count(*) FROM change_log").fetchone()[0] == 4
    conn.close()


def test_a_store_of_layout_2_is_upgraded_in_place_by_an_ingest(tmp_path):
    envelopes = _generated(50)
    db = tmp_path / "e.db"
    _ingest(envelopes, db, tmp_path, "first")
    expected = meta(open_db(db))["contentHash"]
    # What an errordb of layout 2 left: no change tables, no datasetVersion index, its own hash.
    conn = sqlite3.connect(db)
    for table in ("content_buckets", "ingests", "change_log"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DROP INDEX idx_records_datasetVersion")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'storeVersion'")
    conn.execute("UPDATE meta SET value = 'old' WHERE key = 'contentHash'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="store layout 2.*upgrades it in place"):
        open_db(db)
    report = _ingest(envelopes, db, tmp_path, "same")
    assert (report.added, report.updated, report.removed) == (0, 0, 0)
    upgraded = open_db(db)
    assert meta(upgraded)["storeVersion"] == store_module.STORE_VERSION
    assert meta(upgraded)["contentHash"] == expected
    state = _state(db)
    assert _since(db, state) == []
    envelopes[2]["record"]["documentation"] += " After."
    _ingest(envelopes, db, tmp_path, "after")
    assert _since(db, state) == [envelopes[2]["record"]["id"]]


def test_the_content_hash_is_what_docs_api_md_says(tmp_path):
    import hashlib

    from errordb.store import iter_record_files

    envelopes = _generated(80)
    db = tmp_path / "e.db"
    _ingest(envelopes, db, tmp_path, "first")
    store = open_db(db)
    buckets: dict[str, hashlib._Hash] = {}
    for record_id, data in iter_record_files(store):  # in id order
        line = f"{record_id}:{hashlib.sha256(data).hexdigest()}\n"
        buckets.setdefault(record_id[:3], hashlib.sha256()).update(line.encode())
    whole = hashlib.sha256("".join(f"{bucket}:{digest.hexdigest()}\n" for bucket, digest in sorted(buckets.items())).encode())
    assert meta(store)["contentHash"] == whole.hexdigest()
