"""Related errors (errordb/publish/related.py): what counts, in which order, and the limits."""

from __future__ import annotations

import sqlite3

import pytest
from helpers import ALL_IDS, BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, copy_records, envelope, write_envelope

from errordb.publish import related as R
from errordb.store import ingest


def rec(record_id: str, **fields) -> dict:
    base = {
        "id": record_id, "slug": f"s-{record_id}", "repo": "o/r", "errorClass": "ValueError",
        "errorMessage": f"m{record_id}1 n{record_id}2", "messagePattern": f"m{record_id}1 n{record_id}2",
        "filePath": f"pkg/{record_id}.py", "function": None, "backgroundTag": None, "documentation": "",
    }  # fmt: skip
    base.update(fields)
    return base


def test_same_function_beats_same_module_beats_family_beats_tags_and_the_same_message_is_left_out():
    me = rec("a", filePath="pkg/m.py", function="f", errorMessage="boom now", messagePattern="boom now", backgroundTag="fam")
    same_function = rec("b", filePath="pkg/m.py", function="f")
    same_file = rec("c", filePath="pkg/m.py", function="g")
    same_message = rec("d", errorMessage="boom now", messagePattern="boom now", repo="x/y", backgroundTag="fam")
    same_family = rec("e", backgroundTag="fam")
    shared_tag = rec("f")
    nothing = rec("g")
    similar_meaning = rec("h", documentation="The cache tensor layout changed between releases.")
    me["documentation"] = "Raised when the cache tensor layout changed between releases."
    tags = {"a": ["t1", "t2"], "f": ["t1"]}
    candidates = [nothing, shared_tag, same_family, same_message, same_file, same_function, similar_meaning]
    ranked = R.rank(me, candidates, tags, same=["d"])
    # The same message elsewhere has a box of its own on the page: never a related error. Words
    # of the record's meaning that cover another's say more than a shared module.
    assert [r.id for r in ranked] == ["b", "h", "c", "e", "f"]
    assert ranked[0].reasons[0] == "same function (f)"
    assert ranked[1].reasons == ("similar wording",)
    assert ranked[-1].reasons == ("tags: t1",)


def test_never_the_record_itself_never_unrelated_and_at_most_five():
    me = rec("a", backgroundTag="fam")
    others = [rec(f"{i:02d}", backgroundTag="fam") for i in range(12)]
    ranked = R.rank(me, [me, rec("zz"), *others], {})
    assert len(ranked) == R.MAX_RELATED == 5
    assert "a" not in {r.id for r in ranked} and "zz" not in {r.id for r in ranked}
    # Equal scores: by id, so the list is the same on every build.
    assert [r.id for r in ranked] == ["00", "01", "02", "03", "04"]


def test_similar_words_count_without_stop_words():
    me = rec("a", errorMessage="the tensor shape must match the cache")
    close = rec("b", errorMessage="cache tensor shape mismatch")
    stop_words_only = rec("c", errorMessage="the must of to")
    points, reasons = R.score(me, close)
    assert points > 0 and reasons == ["similar wording"]
    assert R.score(me, stop_words_only) == (0, [])
    assert R.message_words("The layer_ids ARE missing: a b") == {"layer_ids", "missing"}


def test_a_shared_class_alone_relates_nothing():
    assert R.score(rec("a"), rec("b")) == (0, [])


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    path = tmp_path_factory.mktemp("related") / "db.db"
    ingest(None, path)
    connection = sqlite3.connect(path)
    yield connection
    connection.close()


def stored(conn, record_id: str) -> tuple[dict, list[str]]:
    columns = ", ".join(f'"{c}"' for c in R.COLUMNS)
    record = dict(zip(R.COLUMNS, conn.execute(f"SELECT {columns} FROM records WHERE id = ?", [record_id]).fetchone()))
    tags = [t for (t,) in conn.execute("SELECT tag FROM record_tags WHERE record_id = ? ORDER BY position", [record_id])]
    return record, tags


def test_bundled_records_are_related_to_each_other_from_the_store(conn):
    for record_id in ALL_IDS:
        record, tags = stored(conn, record_id)
        related = R.related_records(conn, record, tags)
        same_words = {KIMI_VALUE_ERROR, BAILING_VALUE_ERROR} if record_id in (KIMI_VALUE_ERROR, BAILING_VALUE_ERROR) else set()
        assert {r.id for r in related} == set(ALL_IDS) - {record_id} - same_words
    kimi, tags = stored(conn, KIMI_VALUE_ERROR)
    (first,) = R.related_records(conn, kimi, tags)  # Bailing's is the same message: the box above, not here
    assert first.id == KIMI_PP_ERROR and first.reasons[0] == "same function (set_dspark_layers_to_capture)"


def test_candidates_come_from_capped_indexed_questions(tmp_path):
    # 60 records in one file and function: each question returns a bounded number of rows.
    records = copy_records(tmp_path / "records")
    template = envelope(KIMI_PP_ERROR)
    for i in range(60):
        data = envelope(KIMI_PP_ERROR)
        data["record"].update(id=f"{i:016x}", slug=f"pp-copy-{i}", errorMessage=f"copy {i} of the PP error", messagePattern=f"copy {i} of the PP error")
        write_envelope(records, data)
    path = tmp_path / "db.db"
    ingest([records], path)
    conn = sqlite3.connect(path)
    record, tags = stored(conn, template["record"]["id"])
    ids = R.candidate_ids(conn, record, tags)
    assert record["id"] not in ids
    assert len(ids) <= R.PER_SOURCE * 8 + 1
    related = R.related_records(conn, record, tags)
    assert len(related) == 5 and all(r.reasons[0].startswith("same function") for r in related)
    conn.close()


def test_similar_wording_asks_about_rarer_words_only(tmp_path):
    """A word in a few records' messages finds them; a word in more than MOST_WORD_MATCHES
    records' patterns is not asked about (it says little, and reading its rows costs)."""
    records = copy_records(tmp_path / "records")
    rare = [f"{n:016x}" for n in range(1, 4)]
    common = [f"{n:016x}" for n in range(100, 100 + R.MOST_WORD_MATCHES + 5)]
    for record_id in rare + common:
        data = envelope(KIMI_PP_ERROR)
        word = "frobnicator" if record_id in rare else "everywhere"
        message = f"the {word} refused request {int(record_id, 16)}"
        data["record"].update(id=record_id, slug=f"copy-{record_id}", errorMessage=message, messagePattern=message,
                              filePath=f"pkg/m{record_id}.py", backgroundTag=None, tags=[])  # fmt: skip
        data["record"]["githubUrl"] = data["record"]["githubUrl"].replace("python/sglang/srt/models/kimi_k3.py", f"pkg/m{record_id}.py")
        write_envelope(records, data)
    path = tmp_path / "db.db"
    ingest([records], path)
    conn = sqlite3.connect(path)
    record, tags = stored(conn, rare[0])
    found = set(R.candidate_ids(conn, record, tags))
    assert set(rare[1:]) <= found and not found & set(common)  # (and the bundled records its meaning's words find)
    related = R.related_records(conn, record, tags)
    assert [r.id for r in related[:2]] == rare[1:] and all("similar wording" in r.reasons for r in related[:2])
    record, tags = stored(conn, common[0])
    assert not set(R.candidate_ids(conn, record, tags)) & set(common)  # "everywhere" is not asked about
    conn.close()
