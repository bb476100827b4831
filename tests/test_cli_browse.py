"""show, search, list and stats: through click's runner, as functions, and in a real process.

The dataset is the bundled records plus three variants (built once per module): one whose
message says "zebra" (and whose solution alone says "quokka"), one whose documentation alone
says "zebra", and a hostile one full of terminal escape sequences.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, copy_records, envelope, record_file, write_envelope

from errordb.cli import cli
from errordb.store import STORE_VERSION

#: A record whose *message* says zebra, with a solution that alone says quokka.
ZEBRA_MESSAGE = "aaaa000000000001"
#: A record whose *documentation* (only) says zebra.
ZEBRA_DOCS = "aaaa000000000002"
#: A record full of terminal escape sequences, in another repository.
HOSTILE = "aaaa000000000003"


def _variant(base: str, record_id: str, **fields) -> dict:
    data = envelope(base)
    data["record"].update(id=record_id, **fields)
    return data


def browse_records(folder: Path) -> Path:
    """The bundled records and three variants, written under ``folder``."""
    copy_records(folder)
    write_envelope(folder, _variant(
        KIMI_VALUE_ERROR, ZEBRA_MESSAGE, repo="acme/widgets", slug="zebra-crossing-missing-from-the-map",
        errorClass="KeyError", errorMessage="zebra crossing missing from the map", messagePattern=r"zebra crossing missing from the map",
        documentation="The map loader could not find the crossing it needs.", triggerScenarios="Loading an old map.",
        commonSituations="Maps made before version 2.", solutions=["Feed the quokka before retrying.", "Rebuild the map."],
        tags=["zoo", "maps"], backgroundTag=None,
    ))  # fmt: skip
    write_envelope(folder, _variant(
        KIMI_VALUE_ERROR, ZEBRA_DOCS, repo="acme/widgets", slug="unrelated-failure-in-widgets",
        errorClass="ValueError", errorMessage="unrelated failure in widgets", messagePattern=r"unrelated failure in widgets",
        documentation="Raised when the zebra is not where the widget expects it.", triggerScenarios="Any widget call.",
        commonSituations="Often.", solutions=["Check the widget configuration."], tags=["zoo"],
        backgroundTag="missing-required-argument",
    ))  # fmt: skip
    write_envelope(folder, _variant(
        KIMI_PP_ERROR, HOSTILE, repo="evil/repo", slug="hostile-record",
        errorClass="RuntimeError", errorMessage="\x1b[31mred\x1b[0m zebra \x1b]8;;https://evil.example\x07link\x1b]8;;\x07",
        messagePattern=r".*zebra.*", documentation="Clear the screen \x1b[2J zebra\x07 and ring the bell.",
        triggerScenarios="\x1b[?1049h", commonSituations="", solutions=["\x1b[31mzebra\x1b[0m solution"], tags=["evil"],
    ))  # fmt: skip
    return folder


BUNDLED = (BAILING_VALUE_ERROR, KIMI_VALUE_ERROR, KIMI_PP_ERROR)
PP_SLUG = "dspark-aux-hidden-capture-requires-pp-1"
WIDTH_ENV = {"COLUMNS": "100", "NO_COLOR": ""}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from errordb.store import ingest

    folder = tmp_path_factory.mktemp("browse")
    path = folder / "browse.db"
    ingest([browse_records(folder / "records")], path)
    return path


def run(db, *args, env=None):
    command, *rest = args
    result = CliRunner().invoke(cli, [command, "--db", str(db), *rest], env={**WIDTH_ENV, **(env or {})})
    assert "Traceback" not in result.output + result.stderr
    return result


# show ------------------------------------------------------------------------------------------


def test_show_finds_a_record_by_id_slug_and_url(db):
    outputs = {
        key: run(db, "show", key)
        for key in (KIMI_PP_ERROR, PP_SLUG, f"https://errordb.example/errors/{PP_SLUG}/", f"/api/errors/{KIMI_PP_ERROR}.json")
    }
    assert {r.exit_code for r in outputs.values()} == {0}
    assert len({r.stdout for r in outputs.values()}) == 1
    text = outputs[PP_SLUG].stdout
    for section in ("What it means", "Thrown at python/sglang/srt/models/kimi_k3.py:2888", "Solutions", "Reproduction",
                    f"Show it: errordb show {KIMI_PP_ERROR}"):  # fmt: skip
        assert section in text


def test_show_text_is_the_block_explain_prints_for_the_record(db):
    explained = run(db, "explain", "ValueError: DSPARK requires explicit layer_ids for aux hidden capture.").stdout
    for record_id in (KIMI_VALUE_ERROR, BAILING_VALUE_ERROR):
        shown = run(db, "show", record_id).stdout
        assert shown.rstrip("\n") in explained  # the same renderer, not a copy of it


def test_show_json_is_the_record_file_byte_for_byte(db):
    for record_id in BUNDLED:
        result = run(db, "show", record_id, "--format", "json")
        assert result.stdout == record_file(record_id).read_text(encoding="utf-8") + "\n"


def test_show_markdown_has_a_heading_and_escapes_record_text(db):
    result = run(db, "show", KIMI_VALUE_ERROR, "--format", "markdown")
    assert result.stdout.startswith("### ValueError: DSPARK requires explicit layer_ids for aux hidden capture.\n\n")
    assert "**ValueError** in `sgl-project/sglang` at `python/sglang/srt/models/kimi_k3.py:2892`\n" in result.stdout
    assert "score" not in result.stdout  # no match, so no score or evidence
    assert "```python\n# before" in result.stdout


def test_show_unknown_key_is_one_line_and_exit_1(db):
    result = run(db, "show", "no-such-record")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("errordb: no-such-record: no such record") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("output_format", ["text", "markdown", "json"])
def test_show_never_prints_a_records_escape_sequences(db, output_format):
    for color in ("--color", "--no-color"):
        out = run(db, "show", HOSTILE, "--format", output_format, color).stdout
        assert "\x1b]" not in out and "\x1b[31m" not in out and "\x1b[2J" not in out and "\x07" not in out


# search ----------------------------------------------------------------------------------------


def search_json(db, *args) -> dict:
    result = run(db, "search", *args, "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_search_ranks_message_matches_above_documentation_matches(db):
    found = search_json(db, "zebra")
    ids = [hit["id"] for hit in found["hits"]]
    assert set(ids) == {ZEBRA_MESSAGE, ZEBRA_DOCS, HOSTILE} and found["total"] == 3
    assert ids[-1] == ZEBRA_DOCS
    scores = [hit["bm25"] for hit in found["hits"]]
    assert scores == sorted(scores)


def test_search_finds_words_only_in_solutions_and_says_where(db):
    found = search_json(db, "quokka")
    assert [hit["id"] for hit in found["hits"]] == [ZEBRA_MESSAGE]
    (snippet,) = found["hits"][0]["snippets"]
    assert snippet["field"] == "solutions[0]"
    assert [snippet["text"][s:e] for s, e in snippet["highlights"]] == ["quokka"]


def test_search_highlights_are_offsets_of_the_matched_words(db):
    found = search_json(db, "layer_ids")
    assert found["ftsQuery"] == '"layer_ids"'
    assert {hit["id"] for hit in found["hits"]} == set(BUNDLED)
    kimi = next(hit for hit in found["hits"] if hit["id"] == KIMI_VALUE_ERROR)
    message = kimi["message"]
    assert [message["text"][s:e] for s, e in message["highlights"]] == ["layer_ids"]
    assert any(s["field"] == "documentation" for s in kimi["snippets"])


def test_search_stems_words(db):
    assert {hit["id"] for hit in search_json(db, "crossings")["hits"]} == {ZEBRA_MESSAGE}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (["--repo", "acme/widgets"], {ZEBRA_MESSAGE, ZEBRA_DOCS}),
        (["--repo", "acme/widgets", "--repo", "evil/repo"], {ZEBRA_MESSAGE, ZEBRA_DOCS, HOSTILE}),
        (["--class", "KeyError"], {ZEBRA_MESSAGE}),
        (["--tag", "zoo"], {ZEBRA_MESSAGE, ZEBRA_DOCS}),
        (["--tag", "zoo", "--tag", "maps"], {ZEBRA_MESSAGE}),  # repeated tags narrow
        (["--family", "missing-required-argument"], {ZEBRA_DOCS}),
        (["--repo", "nobody/nothing"], set()),
    ],
)
def test_search_filters(db, filters, expected):
    assert {hit["id"] for hit in search_json(db, "zebra", *filters)["hits"]} == expected


def test_search_limit_and_the_footer_say_how_many_match(db):
    result = run(db, "search", "zebra", "--limit", "1")
    assert result.exit_code == 0
    assert result.stdout.count("\n1. ") + result.stdout.startswith("1. ") == 1 and "2. " not in result.stdout
    assert result.stdout.rstrip().endswith("1 of 3 matching records (--limit shows more)")


def test_search_text_output(db):
    result = run(db, "search", "quokka")
    assert result.stdout == (
        "1. zebra-crossing-missing-from-the-map\n"
        "   KeyError: zebra crossing missing from the map\n"
        "   acme/widgets · python/sglang/srt/models/kimi_k3.py:2892\n"
        "   solution 1: Feed the **quokka** before retrying.\n"
        "\n"
        "1 of 1 matching record\n"
    )


def test_search_colour_highlights_instead_of_asterisks(db):
    result = run(db, "search", "quokka", "--color")
    assert "\x1b[1;33mquokka\x1b[0m" in result.stdout and "**" not in result.stdout


def test_search_nothing_found_exits_1(db):
    result = run(db, "search", "platypus")
    assert result.exit_code == 1
    assert result.stdout == "No record matches 'platypus'.\n"


HOSTILE_QUERIES = ['"', 'a"b', "AND", "OR x", "NOT", "x NOT", "(", ")", "*", "a*", "**", ":", "errorMessage:", "col:x",
                   "NEAR(", "NEAR(a b", "^", "-x", "+", "{a b}", "[x]", "x'", "\\", "zebra OR", "é", "日本", "\x00", "a\x00b"]  # fmt: skip


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_search_words_are_never_fts_syntax(db, query):
    result = run(db, "search", "--", query)
    assert result.exit_code in (0, 1, 2)
    if result.exit_code == 2:  # only a query without any word is refused, in one line
        assert result.stderr.startswith("errordb: nothing to search for") and result.stderr.count("\n") == 1


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_search_function_accepts_any_text(db, text):
    from errordb.browse import search
    from errordb.errors import ErrordbError
    from errordb.store import open_connection

    conn = open_connection(db)
    try:
        search(conn, text)
    except ErrordbError as exc:
        assert str(exc).startswith("nothing to search for")
    finally:
        conn.close()


def test_search_raw_takes_fts_syntax_and_reports_bad_syntax_in_one_line(db):
    found = search_json(db, "--raw", "errorMessage:zebra NOT crossing")
    assert {hit["id"] for hit in found["hits"]} == {HOSTILE}
    near = search_json(db, "--raw", 'NEAR(zebra map, 5) OR "where the widget"')
    assert {hit["id"] for hit in near["hits"]} == {ZEBRA_MESSAGE, ZEBRA_DOCS}
    for bad in ("zebra AND", '"unclosed', "NEAR(", "nosuchcolumn:x"):
        result = run(db, "search", "--raw", bad)
        assert result.exit_code == 2, bad
        assert result.stderr.startswith(f"errordb: bad search query {bad!r}: ") and result.stderr.count("\n") == 1


def test_search_output_never_carries_a_records_escape_sequences(db):
    for color in ("--color", "--no-color"):
        out = run(db, "search", "zebra", color).stdout
        assert "\x1b]" not in out and "\x1b[31m" not in out and "\x1b[2J" not in out and "\x07" not in out
    raw_json = run(db, "search", "zebra", "--format", "json").stdout
    assert "\x1b" not in raw_json  # JSON escapes control characters (\u001b): data, not terminal codes


# list ------------------------------------------------------------------------------------------


def test_list_table_is_ordered_by_repository_then_slug(db):
    result = run(db, "list")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["SLUG", "CLASS", "REPO", "RAISED", "AT"]
    slugs = [line.split()[0] for line in lines[1:]]
    assert slugs == ["unrelated-failure-in-widgets", "zebra-crossing-missing-from-the-map", "hostile-record",
                     PP_SLUG, "dspark-requires-explicit-layer-ids-for-aux-hidden-3083cb",
                     "dspark-requires-explicit-layer-ids-for-aux-hidden-b318b4"]  # fmt: skip
    assert lines[4] == (
        "dspark-aux-hidden-capture-requires-pp-1                   NotImplementedError  sgl-project/sglang  "
        "python/sglang/srt/models/kimi_k3.py:2888"
    )


def test_list_csv_and_json_carry_the_same_rows(db):
    rows = list(csv.DictReader(io.StringIO(run(db, "list", "--format", "csv").stdout)))
    items = json.loads(run(db, "list", "--format", "json").stdout)
    assert [row["id"] for row in rows] == [item["id"] for item in items]
    assert len(items) == 6
    zebra = next(item for item in items if item["id"] == ZEBRA_MESSAGE)
    assert zebra["tags"] == ["zoo", "maps"] and zebra["backgroundTag"] is None and zebra["lineNumber"] == 2892
    row = next(row for row in rows if row["id"] == ZEBRA_MESSAGE)
    assert row["tags"] == "zoo maps" and row["backgroundTag"] == "" and row["lineNumber"] == "2892"


def test_list_filters_and_limit(db):
    def ids(*args):
        return [item["id"] for item in json.loads(run(db, "list", "--format", "json", *args).stdout)]

    assert ids("--tag", "kimi") == [KIMI_PP_ERROR, KIMI_VALUE_ERROR]
    assert ids("--class", "ValueError", "--repo", "sgl-project/sglang") == [BAILING_VALUE_ERROR, KIMI_VALUE_ERROR]
    assert ids("--family", "feature-parallelism-conflict") == [HOSTILE, KIMI_PP_ERROR]
    assert ids("--limit", "2") == [ZEBRA_DOCS, ZEBRA_MESSAGE]
    assert ids("--tag", "nothing") == []


def test_list_with_no_match_says_so_on_stderr_and_exits_1_as_search_does(db):
    result = run(db, "list", "--repo", "nobody/nothing")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == "No record matches these filters.\n"
    assert run(db, "list", "--repo", "nobody/nothing", "--format", "json").exit_code == 1


def test_words_after_explain_and_search_are_joined_and_search_finds_the_class(db):
    unquoted = run(db, "explain", "ValueError:", "DSPARK", "requires", "explicit", "layer_ids", "for", "aux", "hidden", "capture.")
    assert unquoted.exit_code == 0 and "DSPARK requires explicit layer_ids for aux hidden capture." in unquoted.stdout
    found = run(db, "search", "ValueError", "--format", "json")
    classes = [hit["errorClass"] for hit in json.loads(found.stdout)["hits"]]
    listed = json.loads(run(db, "list", "--class", "ValueError", "--format", "json").stdout)
    assert classes.count("ValueError") == len(listed) >= 2  # the class is searched, not only the text
    assert run(db, "search", "layer", "ids", "capture").stdout == run(db, "search", "layer ids capture").stdout


def test_a_record_is_named_by_any_unique_start_of_its_id_or_end_of_its_slug(db):
    from helpers import KIMI_VALUE_ERROR

    for key in (KIMI_VALUE_ERROR[:6], KIMI_VALUE_ERROR[:10]):  # a draft's slug ends with its id's first six digits
        result = run(db, "show", key, "--format", "json")
        assert result.exit_code == 0 and json.loads(result.stdout)["record"]["id"] == KIMI_VALUE_ERROR, key
    missing = run(db, "show", "zzzz")
    assert missing.exit_code == 1 and "zzzz: no such record" in missing.stderr
    assert run(db, "repro", "zzzz").exit_code == 1  # the same situation, the same status in every command


def test_list_table_cleans_hostile_text(db):
    out = run(db, "list", "--repo", "evil/repo", "--color").stdout
    assert "\x1b]" not in out and "\x1b[31m" not in out


# stats -----------------------------------------------------------------------------------------


def test_stats_counts_every_kind(db):
    data = json.loads(run(db, "stats", "--format", "json").stdout)
    assert data["records"] == 6 and data["solutions"] == 8 + 3 + 1
    assert data["repos"] == [{"name": "sgl-project/sglang", "records": 3}, {"name": "acme/widgets", "records": 2},
                             {"name": "evil/repo", "records": 1}]  # fmt: skip
    assert data["classes"][0] == {"name": "ValueError", "records": 3}
    assert data["families"][0] == {"name": "missing-required-argument", "records": 3, "title": "Missing required argument"}
    assert {"name": "zoo", "records": 2} in data["tags"] and data["tagGroups"] == 8
    assert data["withoutFamily"] == 1 and data["withoutTags"] == 1
    assert data["datasetVersion"] == "2026-08-28T06:17:29.519Z" and data["storeVersion"] == STORE_VERSION
    assert data["database"] == str(db) and data["bytes"] == db.stat().st_size


def test_stats_text_and_top(db):
    text = run(db, "stats").stdout
    assert f"{db}\n" in text
    assert "6 records · 12 solutions · 3 repositories · 4 classes · 2 families · 8 tags" in text
    assert "  3  missing-required-argument     Missing required argument\n" in text
    assert "1 record has no tags" in text
    top = run(db, "stats", "--top", "1").stdout
    assert "… and 7 more (--top 0 shows all)" in top and "… and 2 more" in top


# The functions behind the commands ------------------------------------------------------------


def test_every_command_is_a_function(db):
    from errordb import browse
    from errordb.store import open_connection

    conn = open_connection(db)
    try:
        assert browse.show(conn, PP_SLUG, "json").startswith('{"record":{"id":"ce31b31dd9a787ba"')
        result = browse.search(conn, "zebra", browse.Filters(classes=("KeyError",)), limit=5)
        assert [hit.record["id"] for hit in result.hits] == [ZEBRA_MESSAGE]
        assert [row["slug"] for row in browse.list_records(conn, browse.Filters(tags=("evil",)))] == ["hostile-record"]
        assert browse.stats(conn, db)["records"] == 6
    finally:
        conn.close()


# A real process --------------------------------------------------------------------------------


def test_real_process_search_show_and_list_through_a_pipe(db, tmp_path):
    env = {**os.environ, "ERRORDB_DB": str(db), "ERRORDB_CACHE": str(tmp_path / "cache")}
    env.pop("NO_COLOR", None)

    def errordb(*args):
        return subprocess.run([sys.executable, "-m", "errordb", *args], capture_output=True, text=True, env=env, timeout=60)

    found = errordb("search", "layer_ids")
    assert found.returncode == 0, found.stderr
    assert "\x1b" not in found.stdout  # a pipe gets no colour
    assert "DSPARK requires explicit **layer_ids** for aux hidden capture." in found.stdout
    shown = errordb("show", KIMI_PP_ERROR, "--format", "json")
    assert shown.stdout == record_file(KIMI_PP_ERROR).read_text(encoding="utf-8") + "\n"
    listed = errordb("list", "--format", "csv")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 7
    missing = errordb("show", "nothing-like-this")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr
