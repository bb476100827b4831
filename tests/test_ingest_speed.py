"""The fast paths of ingest give the same results as the plain ones they replace."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from pydantic_core import to_json

import errordb.records.patterns as patterns
from errordb.errors import RecordError
from errordb.records.loader import load_records
from errordb.records.schema import canonical_json
from errordb.store import ingest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from generate import write_jsonl  # noqa: E402

FAMILIES = Path(__file__).resolve().parents[1] / "records" / "families.toml"


def test_pydantic_writes_every_code_point_as_json_dumps_does():
    # canonical_json relies on this (escaping is per character, so one string says it all).
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    assert to_json(text).decode("utf-8") == json.dumps(text, ensure_ascii=False)


def test_canonical_json_is_compact_json_in_schema_order(tmp_path):
    from errordb.store import bundled_records_dir

    for loaded in load_records([bundled_records_dir()]):
        plain = json.dumps(loaded.envelope.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
        assert canonical_json(loaded.envelope) == plain


def _words_one_char_at_a_time(pattern: str) -> tuple[str, ...]:
    """pattern_words as first written: a word bounded by non-word characters inside one run."""
    word_chars = set("abcdefghijklmnopqrstuvwxyz0123456789_")
    words: dict[str, None] = {}
    for run in patterns.literal_runs(pattern):
        run, word = run.lower(), ""
        for position, char in enumerate(run):
            if char in word_chars or char in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
                word += char
                continue
            start = position - len(word)
            if word and start > 0:
                words[word] = None
            word = ""
    return tuple(words)


@pytest.mark.parametrize("pattern", [
    r"DSPARK aux hidden capture requires PP=1\.", r"expected q/k shape (.+) got (\d+) items", r"(.+)",
    r"a b c", r"x_1 y-2 (z3) \[w4\] end", r"(?i)Foo BAR baz qux", r"Kelvin \u212a k and \é é ok", "tab\there\nnew line x",
])  # fmt: skip
def test_pattern_words_agree_with_the_character_loop(pattern):
    patterns.pattern_words.cache_clear()
    assert patterns.pattern_words(pattern) == _words_one_char_at_a_time(pattern)


@pytest.mark.parametrize("pattern, message", [
    (r"got (.+)", "got 3"), (r"got (.+)", "got"), (r"a(?=b)", "ab"), (r"(a)\1", "aa"), ("é+", "éé"), (r"x{2,}", "xx"),
])  # fmt: skip
def test_validate_pattern_says_what_the_public_re2_api_says(monkeypatch, pattern, message):
    def verdict():
        try:
            return patterns.validate_pattern(pattern, message)
        except patterns.PatternError as exc:
            return str(exc)

    fast = verdict()
    monkeypatch.setattr(patterns, "_re2_extension", lambda: None)
    assert verdict() == fast


def _dump(path: Path) -> dict[str, list]:
    conn = sqlite3.connect(path)
    tables = conn.execute("SELECT name, sql LIKE '%WITHOUT ROWID' FROM sqlite_master WHERE type='table' AND name NOT LIKE '%fts%'").fetchall()
    dump = {name: conn.execute(f"SELECT {'' if keyed else 'rowid, '}* FROM {name} ORDER BY 1, 2").fetchall() for name, keyed in tables}
    dump["fts"] = conn.execute("SELECT rowid FROM records_fts WHERE records_fts MATCH 'tensor' ORDER BY rowid").fetchall()
    dump["solutions_fts"] = conn.execute("SELECT rowid FROM solutions_fts WHERE solutions_fts MATCH 'check' ORDER BY rowid").fetchall()
    conn.close()
    return dump


def test_worker_processes_store_what_one_process_stores(tmp_path, monkeypatch):
    data = write_jsonl(1200, tmp_path / "records.jsonl")  # several chunks: the workers start
    ingest([data], tmp_path / "pooled.db", families_path=FAMILIES)
    monkeypatch.setattr("errordb.store.ingestion.os.cpu_count", lambda: 1)  # one core: no worker
    ingest([data], tmp_path / "inline.db", families_path=FAMILIES)
    assert _dump(tmp_path / "pooled.db") == _dump(tmp_path / "inline.db")


def test_a_bad_record_deep_in_a_pooled_ingest_is_named_and_changes_nothing(tmp_path):
    data = write_jsonl(1200, tmp_path / "records.jsonl")
    lines = data.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[900])
    bad["record"]["lineNumber"] = "12"
    lines[900] = json.dumps(bad)
    lines[1100] = "{not json"  # a later error must not win over the first
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as raised:
        ingest([data], tmp_path / "e.db", families_path=FAMILIES)
    assert str(raised.value).startswith(f"{data}:901: record {bad['record']['id']}: lineNumber: ")
    assert not (tmp_path / "e.db").exists()


def test_a_file_that_cannot_be_read_is_named_after_the_records_before_it(tmp_path):
    data = write_jsonl(1200, tmp_path / "records.jsonl")
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(RecordError, match="no such file or folder") as raised:
        ingest([data, missing], tmp_path / "e.db", families_path=FAMILIES)
    assert raised.value.source == str(missing)
    # A bad record before it, validated by a worker, is named first.
    lines = data.read_text(encoding="utf-8").splitlines()
    lines[1100] = "{not json"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match="malformed JSON") as raised:
        ingest([data, missing], tmp_path / "e.db", families_path=FAMILIES)
    assert raised.value.source == f"{data}:1101"
    assert not (tmp_path / "e.db").exists()
