"""Property: whatever is done to a valid record file, ingest accepts it (when it is valid) or
refuses it with a RecordError, and a refusal leaves the database file byte for byte as it was.

Hypothesis deletes, adds and retypes fields, puts random and huge values and any Unicode in
them, and cuts, overwrites or inserts bytes of the file. Ingest runs in this process (the CLI
turns a RecordError into its one line; that path is test_bad_records.py's).
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import pytest
from helpers import KIMI_VALUE_ERROR, copy_records, envelope
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from reliability_support import db_files

from errordb.errors import RecordError
from errordb.records.schema import Envelope, canonical_json
from errordb.store import connect, get_envelope, ingest

BASE = envelope(KIMI_VALUE_ERROR)
FIELDS = list(BASE["record"])
#: Free text, where most random strings are valid: these mutations keep many records valid.
TEXT_FIELDS = ["documentation", "triggerScenarios", "commonSituations", "exampleFix", "validationCode", "typeGuard", "errorCode"]
EXAMPLES = 200

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**62, max_value=2**70), st.floats(allow_nan=False),
    st.text(max_size=40), st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=20),
    st.sampled_from(["", "\x00", "\x1b[2J", "\x9b", "\ud800", "../..", "a/b", "<script>", "{{ 7*7 }}", "DSPARK"]),
)  # fmt: skip
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=10)
huge = st.sampled_from(["x" * 100_001, "y" * 250_000, ["z"] * 201, list(range(300)), 10**40, -(2**63), 2**31])

mutation = st.one_of(
    st.tuples(st.just("delete"), st.sampled_from(FIELDS)),
    st.tuples(st.just("add"), st.text(min_size=1, max_size=12), json_values),
    st.tuples(st.just("set"), st.sampled_from(FIELDS), json_values | huge),
    st.tuples(st.just("text"), st.sampled_from(FIELDS), st.text(max_size=200)),
    st.tuples(st.just("text"), st.sampled_from(TEXT_FIELDS), st.text(max_size=2000)),
    st.tuples(st.just("list"), st.sampled_from(["solutions", "preventionTips"]), st.lists(st.text(max_size=300), max_size=5)),
    st.tuples(st.just("new id"), st.from_regex(r"\A[0-9a-f]{16}\Z")),
    st.tuples(st.just("envelope"), st.sampled_from(["datasetVersion", "record", "extra"]), json_values),
)
byte_edit = st.one_of(
    st.tuples(st.just("cut"), st.floats(0, 1)),
    st.tuples(st.just("overwrite"), st.floats(0, 1), st.binary(min_size=1, max_size=4)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
)


def mutate(data: dict, changes: list[tuple]) -> dict:
    record = data["record"]
    for change in changes:
        kind = change[0]
        if kind == "delete":
            record.pop(change[1], None)
        elif kind == "add":
            record[change[1]] = change[2]
        elif kind in ("set", "text"):
            record[change[1]] = change[2]
        elif kind == "list":
            record[change[1]] = change[2]
        elif kind == "new id":
            record["id"] = change[1]
            record["slug"] = f"mutant-{change[1]}"  # a new record: its own slug, else it clashes
        elif kind == "envelope":
            data[change[1]] = change[2]
            if change[1] == "record":
                break  # the record itself is gone
            record = data["record"]
    return data


def edit_bytes(raw: bytes, edits: list[tuple]) -> bytes:
    for edit in edits:
        at = int(edit[1] * len(raw))
        if edit[0] == "cut":
            raw = raw[:at]
        elif edit[0] == "overwrite":
            raw = raw[:at] + edit[2] + raw[at + len(edit[2]) :]
        else:
            raw = raw[:at] + edit[2] + raw[at:]
    return raw


@pytest.fixture(scope="module")
def base_db(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("mutations")
    path = folder / "errordb.db"
    ingest([copy_records(folder / "records")], path)
    return path.read_bytes()


OUTCOMES = {"accepted": 0, "refused": 0, "refused after validating": 0}


@seed(20260901)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(changes=st.lists(mutation, min_size=1, max_size=3), edits=st.just([]) | st.lists(byte_edit, min_size=1, max_size=2), ascii_only=st.booleans())
def test_ingest_accepts_a_valid_record_or_refuses_it_cleanly(base_db, changes, edits, ascii_only):
    data = mutate(json.loads(json.dumps(BASE)), changes)
    raw = edit_bytes(json.dumps(data, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"), edits)
    try:
        valid = Envelope.model_validate(json.loads(raw.decode("utf-8"))) if not edits else None
    except Exception:
        valid = None
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        db = folder / "errordb.db"
        db.write_bytes(base_db)
        (folder / "records").mkdir()
        (folder / "records" / "record.json").write_bytes(raw)
        before = db_files(db)
        try:
            ingest([folder / "records"], db)
        except RecordError as exc:
            assert "\n" not in str(exc) and "\x1b" not in str(exc)
            assert db_files(db) == before, "a refused ingest changed the database"
            if valid is not None:
                # A valid record can still clash with the stored ones: only in its id or slug.
                assert exc.field in ("slug", "id"), exc
                OUTCOMES["refused after validating"] += 1
            else:
                OUTCOMES["refused"] += 1
            return
        OUTCOMES["accepted"] += 1
        stored = json.loads(raw.decode("utf-8"))
        store = connect(db)
        try:
            assert store.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            got = get_envelope(store, stored["record"]["id"])
            assert got is not None and canonical_json(got) == canonical_json(Envelope.model_validate(stored))
        finally:
            store.close()


def test_mutation_figures(figures):
    total = sum(OUTCOMES.values())
    assert total >= EXAMPLES * 0.9, OUTCOMES  # the property test above ran
    figures.add(
        "Mutated records (hypothesis)",
        "1-3 of: delete, add or retype a field; random, huge and any-Unicode values; new id; envelope fields; "
        "plus cut, overwritten or inserted bytes; ingested into a copy of the store",
        total,
        f"{OUTCOMES['accepted']} accepted and read back identical, {OUTCOMES['refused']} refused by validation, "
        f"{OUTCOMES['refused after validating']} valid but refused for an id/slug clash; never another exception; "
        "database bytes unchanged after every refusal",
    )


def test_a_refused_ingest_into_a_rollback_journal_database_is_byte_identical_too(base_db, tmp_path):
    """A database made by an earlier errordb (rollback journal, not WAL) is refused into the same way."""
    db = tmp_path / "legacy.db"
    db.write_bytes(base_db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = db_files(db)
    (tmp_path / "records").mkdir()
    bad = mutate(json.loads(json.dumps(BASE)), [("set", "lineNumber", "nope")])
    (tmp_path / "records" / "r.json").write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(RecordError):
        ingest([tmp_path / "records"], db)
    assert db_files(db) == before
