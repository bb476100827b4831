"""Related errors (errordb/publish/related.py): what counts, in which order, and the limits."""

from __future__ import annotations

import importlib.util
import sqlite3

import pytest
from helpers import ALL_IDS, BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, RECORDS, REPO, copy_records, envelope, write_envelope

from errordb.publish import related as R
from errordb.store import ingest


def rec(record_id: str, **fields) -> dict:
    base = {
        "id": record_id, "slug": f"s-{record_id}", "repo": "o/r", "errorClass": "ValueError",
        "errorMessage": f"m{record_id}1 n{record_id}2", "messagePattern": f"m{record_id}1 n{record_id}2",
        "filePath": f"pkg/{record_id}.py", "function": None, "backgroundTag": None,
    }  # fmt: skip
    base.update(fields)
    return base


def test_same_function_beats_same_message_beats_family_beats_tags():
    me = rec("a", filePath="pkg/m.py", function="f", errorMessage="boom now", messagePattern="boom now", backgroundTag="fam")
    same_function = rec("b", filePath="pkg/m.py", function="f")
    same_file = rec("c", filePath="pkg/m.py", function="g")
    same_message = rec("d", errorMessage="boom now", messagePattern="boom now", repo="x/y")
    same_family = rec("e", backgroundTag="fam")
    shared_tag = rec("f")
    nothing = rec("g")
    tags = {"a": ["t1", "t2"], "f": ["t1"]}
    ranked = R.rank(me, [nothing, shared_tag, same_family, same_message, same_file, same_function], tags)
    assert [r.id for r in ranked] == ["b", "d", "c", "e", "f"]
    assert ranked[0].reasons[0] == "same function (f)"
    assert "same message" in ranked[1].reasons
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
    assert points > 0 and reasons == ["similar message"]
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
        assert {r.id for r in related} == set(ALL_IDS) - {record_id}
    kimi, tags = stored(conn, KIMI_VALUE_ERROR)
    first, second = R.related_records(conn, kimi, tags, same_message=[BAILING_VALUE_ERROR])
    assert first.id == KIMI_PP_ERROR and first.reasons[0] == "same function (set_dspark_layers_to_capture)"
    assert second.id == BAILING_VALUE_ERROR and second.reasons[:2] == ("same message", "same failure family")


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


def test_pages_that_share_candidates_read_each_candidate_row_once(tmp_path):
    # Neighbouring copies share most candidates: with one ``rows`` for the batch, a page reads
    # only those no earlier page read, and its related errors are as without it.
    records = copy_records(tmp_path / "records")
    for i in range(60):
        data = envelope(KIMI_PP_ERROR)
        data["record"].update(id=f"{i:016x}", slug=f"pp-copy-{i}", errorMessage=f"copy {i} of the PP error", messagePattern=f"copy {i} of the PP error")
        write_envelope(records, data)
    path = tmp_path / "db.db"
    ingest([records], path)
    conn = sqlite3.connect(path)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    batch = R.Batch(f"{0:016x}", f"{59:016x}")  # not planned: every question asked as it is
    rows = batch.rows
    read, asked = [], []
    for record, tags in [stored(conn, f"{i:016x}") for i in range(20, 24)]:
        candidates = R.candidate_ids(conn, record, tags)
        new = set(candidates) - set(rows)
        statements.clear()
        shared = R.related_records(conn, record, tags, batch=batch)
        # The ids asked for by rowid: the candidates no earlier page read, only.
        reads = [sql.split("rowid IN (", 1)[1] for sql in statements if "FROM records WHERE rowid IN (" in sql]
        read.append(sum(text.split(")", 1)[0].count(",") + 1 for text in reads))
        asked.append(len(candidates))
        assert read[-1] == len(new)
        assert shared == R.related_records(conn, record, tags)
        assert len(shared) == 5
    assert read[0] == asked[0] and sum(read[1:]) < sum(asked[1:]) / 2
    assert all(entry is not None for entry in rows.values())
    conn.close()


@pytest.mark.parametrize("size", [0, 3, 7, 8, 9, 12, 20])
def test_a_row_that_would_change_an_answer_falls_inside_a_window_it_traced(size):
    # The contract site_changes relies on: inserting a matching row changes what _around
    # answers only if the row's position is inside one of the windows traced for it.
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (k TEXT, pos INTEGER)")
    ring = R.Ring("family", "a", "a", "SELECT pos, pos FROM t WHERE k = ? AND {cond} ORDER BY pos", "pos")

    def answer(rows: list[int], own: int) -> tuple[list[int], list[R.Window]]:
        conn.execute("DELETE FROM t")
        conn.executemany("INSERT INTO t VALUES ('a', ?)", [(p,) for p in rows])
        trace: list[R.Window] = []
        return R._around(conn, ring, own, trace), trace

    rows = [10 * (i + 1) for i in range(size)]
    for own in [5, *rows[::3], 10 * size + 5]:
        answers, trace = answer(rows, own)
        assert len(answers) == min(R.PER_SOURCE, len([p for p in rows if p != own]))
        for new in range(1, 10 * size + 10, 2):  # odd: never a position already there
            changed = answer(sorted([*rows, new]), own)[0] != answers
            inside = any((lo is None or lo <= new) and (hi is None or new <= hi) for _, _, lo, hi in trace)
            assert inside or not changed, (size, own, new, trace)


@pytest.mark.parametrize("size", [0, 1, 2, 7, 8, 9, 15, 16, 17, 18, 19, 30])
def test_a_words_question_read_whole_answers_as_the_two_reads_do(size):
    # A words question first reads up to WHOLE rows of its key (FewRows); when that is all of
    # them, the ring is cut from them. Answers and traced windows must be those of the two plain
    # reads, at every position: on rows, between them, before the first and after the last.
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (k TEXT, pos INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO t VALUES ('a', ?)", [(10 * (i + 1),) for i in range(size)])
    conn.execute("INSERT INTO t VALUES ('b', 5)")
    select = "SELECT pos, pos FROM t WHERE k = ? AND {cond} ORDER BY pos"
    words, plain = R.Ring("words", "a", "a", select, "pos"), R.Ring("family", "a", "a", select, "pos")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    for own in range(0, 10 * size + 15, 5):
        words_trace: list[R.Window] = []
        plain_trace: list[R.Window] = []
        statements.clear()
        answer = R._around(conn, words, own, words_trace, few=R.FewRows(conn))
        asked = len(statements)
        assert answer == R._around(conn, plain, own, plain_trace), (size, own)
        assert [window[1:] for window in words_trace] == [window[1:] for window in plain_trace], (size, own)
        assert (asked == 1) == (size < R.WHOLE), (size, own, statements)  # all rows in one read when they fit
    conn.set_trace_callback(None)


def _word_store(path: str = ":memory:") -> tuple[sqlite3.Connection, dict[int, str]]:
    """A full-text table of 40 messages: words in 1, 2, 3, 5, 25, 35 and 40 rows, an underscore
    word (an FTS5 phrase) among them, and every fourth message without a word of its own."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE records_fts USING fts5(errorMessage, tokenize='porter')")
    messages = {}
    for i in range(40):
        rowid = R.record_rowid(f"{(i + 1) * 0x0123456789ab:016x}")
        words = ["every", f"solitary{i}" if i % 4 else "", "pairs" if i % 20 == 0 else "", "triple" if i % 13 == 1 else "", "nines" if i % 9 == 0 else ""]
        words += ["many_layers" if i % 8 else "", "commons" if i < 25 else ""]
        messages[rowid] = " ".join(w for w in words if w) + " failed."
        conn.execute("INSERT INTO records_fts (rowid, errorMessage) VALUES (?, ?)", [rowid, messages[rowid]])
    conn.commit()
    return conn, messages


def test_words_questions_answered_from_all_their_rows_as_sqlite_answers_them():
    # Every row holding all of a message's words holds each: when one of them is in the
    # record's own message only, the all-words question has no answer and is not asked; when
    # all are common, its rows are kept for the worker (CommonWords) and asked once. Every
    # page's every words question, twice (the second time from what was kept), against the
    # plain reads.
    conn, messages = _word_store()
    first, last = R.rowid_record_id(min(messages)), R.rowid_record_id(max(messages))
    records = [({"id": R.rowid_record_id(rowid), "errorMessage": message}, []) for rowid, message in messages.items()]
    common = R.CommonWords()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    all_words_read = {"own word": [0, 0], "common words": [0, 0]}
    for round_ in (0, 1):
        common.check(conn)
        batch = R.Batch(first, last, common)
        batch.plan(records)  # so the common words are the batch's, as in a build
        for record, tags in records:
            few = R.FewRows(conn, batch)
            for ring, position in batch.questions(record, tags):
                statements.clear()
                fast_trace: list[R.Window] = []
                plain_trace: list[R.Window] = []
                fast = R._around(conn, ring, position, fast_trace, batch, few)
                kind = "own word" if "solitary" in record["errorMessage"] else "common words"
                if not batch.shares(ring):  # (a shared one is read for the whole batch instead)
                    all_words_read[kind][round_] += sum(1 for sql in statements if '" AND "' in sql)  # two words of one MATCH
                statements.clear()
                assert fast == R._around(conn, ring, position, plain_trace) and fast_trace == plain_trace, (record, ring.name)
    conn.set_trace_callback(None)
    assert all_words_read["own word"] == [0, 0]  # answered from the page's own word's rows
    assert all_words_read["common words"][0] > 0 and all_words_read["common words"][1] == 0  # kept


def test_common_words_keep_a_bounded_number_of_rows(monkeypatch):
    conn, _ = _word_store()
    monkeypatch.setattr(R.CommonWords, "MOST", 40)
    common = R.CommonWords()
    common.check(conn)
    rings = [R._words_ring(words) for words in (["commons", "every"], ["many_layers", "every"], ["commons", "failed"])]
    answers = [common.rows(conn, ring) for ring in rings]  # 25, 35 and 25 rows: each forgets the one before
    assert [len(rows) for rows in answers] == [25, 35, 25] and common._kept <= 40
    assert list(common._rows) == [rings[2].name]
    assert common.rows(conn, rings[0]) == answers[0]  # read again, the same


def test_common_words_are_forgotten_when_the_store_changes(tmp_path):
    conn, messages = _word_store(str(tmp_path / "fts.db"))
    ring = R._words_ring(["many_layers", "commons", "every"])
    common = R.CommonWords()
    common.check(conn)
    before = common.rows(conn, ring)
    assert before is not None and 0 < len(before) < R.CommonWords.MOST_ROWS
    other = sqlite3.connect(tmp_path / "fts.db")
    other.execute("INSERT INTO records_fts (rowid, errorMessage) VALUES (7, 'every commons many_layers')")
    other.commit()
    assert common.rows(conn, ring) == before  # kept until checked: a batch reads one snapshot
    common.check(conn)
    assert common.rows(conn, ring) == sorted([(7, 7), *before])
    other.close()
    conn.close()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """400 generated records (bench/generate.py): few families and tags, shared message words."""
    spec = importlib.util.spec_from_file_location("bench_generate", REPO / "bench" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    folder = tmp_path_factory.mktemp("generated")
    jsonl = generate.write_jsonl(400, folder / "records.jsonl")
    path = folder / "db.db"
    ingest([jsonl], path, families_path=RECORDS / "families.toml")
    connection = sqlite3.connect(path)
    yield connection
    connection.close()


@pytest.mark.parametrize("batch_size", [1, 7, 100, 400])
def test_a_batch_reads_shared_questions_once_and_answers_as_each_page_alone(generated, batch_size):
    conn = generated
    ids = [record_id for (record_id,) in conn.execute("SELECT id FROM records ORDER BY id")]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    alone_count = shared_count = 0
    for start in range(0, len(ids), batch_size):
        chunk = [stored(conn, record_id) for record_id in ids[start : start + batch_size]]
        conn.execute("BEGIN")  # as the site build: the pages of a batch in one read transaction
        planned, unplanned = R.Batch(chunk[0][0]["id"], chunk[-1][0]["id"]), R.Batch(chunk[0][0]["id"], chunk[-1][0]["id"])
        planned.plan(chunk)
        for record, tags in chunk:
            alone_windows: list[R.Window] = []
            shared_windows: list[R.Window] = []
            statements.clear()
            alone = R.related_records(conn, record, tags, windows=alone_windows, batch=unplanned)
            alone_count += _our_statements(statements)
            statements.clear()
            shared = R.related_records(conn, record, tags, windows=shared_windows, batch=planned)
            shared_count += _our_statements(statements)
            assert shared == alone and shared_windows == alone_windows, record["id"]
        conn.rollback()
    conn.set_trace_callback(None)
    if batch_size >= 100:  # eight families and eight tags: most questions are shared
        assert shared_count < alone_count * 0.7, (shared_count, alone_count)
    else:
        assert shared_count <= alone_count


def _our_statements(statements: list[str]) -> int:
    return sum(1 for sql in statements if not sql.startswith("--"))  # not FTS5's own reads


@pytest.mark.parametrize("size", [0, 1, 5, 8, 9, 12, 15, 16, 30])
def test_a_batch_answers_each_position_as_sqlite_does_in_either_order(size):
    # A key with few rows is where the batch's shortcuts differ most from a plain question:
    # answers that wrap to the first rows, rows after the batch's end, and fewer than asked for.
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (k TEXT, pos INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO t VALUES ('a', ?)", [(10 * (i + 1),) for i in range(size)])
    conn.execute("INSERT INTO t VALUES ('b', 5)")
    ring = R.Ring("family", "a", "a", "SELECT pos, pos FROM t WHERE k = ? AND {cond} ORDER BY pos", "rowid")
    owns = list(range(5, 10 * size + 10, 5))  # on rows and between them
    first, last = R.rowid_record_id(owns[0]), R.rowid_record_id(owns[len(owns) * 2 // 3])  # rows after the batch too
    inside = [own for own in owns if own <= R.record_rowid(last)]
    outside = [own for own in owns if own not in inside]  # not the batch's pages: asked of SQLite
    for order in (inside, inside[::-1]):
        batch = R.Batch(first, last)
        batch.plan([({"id": R.rowid_record_id(own), "backgroundTag": "a", "errorMessage": ""}, []) for own in order])
        for own in order + outside:
            alone_trace: list[R.Window] = []
            shared_trace: list[R.Window] = []
            alone = R._around(conn, ring, own, alone_trace)
            assert R._around(conn, ring, own, shared_trace, batch) == alone and shared_trace == alone_trace, (size, own)


def test_the_points_alone_are_the_points_with_reasons(generated):
    # rank() weighs every candidate with _Scorer.points and makes reasons for the shown ones
    # only: the two must give the same points for every pair, here 400 x 400 generated records
    # (few families and tags, shared message words: every kind of points occurs).
    rows = [stored(generated, record_id) for (record_id,) in generated.execute("SELECT id FROM records ORDER BY id")]
    kinds = set()
    for record, tags in rows:
        weigh = R._Scorer(record, tags)
        for other, other_tags in rows:
            points, reasons = weigh(other, other_tags)
            assert weigh.points(other, other_tags) == points, (record["id"], other["id"])
            kinds.update(reason.split(" (")[0].split(":")[0] for reason in reasons)
    assert kinds >= {"same function", "same message", "similar message", "same failure family", "tags"}, kinds
