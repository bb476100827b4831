"""`errordb check`: the dataset's consistency rules, each with a passing and a failing case."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, copy_records, envelope, write_envelope

from errordb.records.check import check
from errordb.cli import cli
from errordb.records.conventions import slug_base


@pytest.fixture
def records(tmp_path):
    return copy_records(tmp_path / "records")


def problems_of(records):
    return [(p.record_id, p.field, p.problem) for p in check([records])]


def test_bundled_records_pass():
    assert check() == []


def test_slug_convention_matches_the_seeds():
    assert slug_base("DSPARK aux hidden capture requires PP=1.") == "dspark-aux-hidden-capture-requires-pp-1"
    assert slug_base("DSPARK requires explicit layer_ids for aux hidden capture.") == "dspark-requires-explicit-layer-ids-for-aux-hidden"
    assert slug_base("expected q/k shape {expected_shape}") == "expected-q-k-shape-expected-shape"
    assert slug_base("!!!") == "error"


def mutated(records, record_id, **changes):
    data = envelope(record_id)
    data["record"].update(changes)
    write_envelope(records, data)
    return problems_of(records)


def test_a_pattern_that_matches_almost_any_message_is_flagged(records):
    found = mutated(records, KIMI_PP_ERROR, messagePattern=r"(.+) (.+) (.+)")
    assert (KIMI_PP_ERROR, "messagePattern", "matches almost any message: it requires 0 letters or digits of literal text") in found
    assert mutated(records, KIMI_PP_ERROR, messagePattern=r"DSPARK .+") == []


def test_pattern_must_fully_match_the_message(records):
    found = mutated(records, KIMI_PP_ERROR, messagePattern=r"DSPARK aux hidden")
    assert (KIMI_PP_ERROR, "messagePattern", "does not fully match errorMessage") in found


def test_snippet_length_must_match_the_window(records):
    data = envelope(KIMI_PP_ERROR)["record"]
    found = mutated(records, KIMI_PP_ERROR, sourceCode=data["sourceCode"] + "\n    extra = 1")
    assert any(f == "sourceCode" and "has 38 lines" in p for _, f, p in found)


def test_line_number_must_point_at_the_raise(records):
    found = mutated(records, KIMI_VALUE_ERROR, lineNumber=2893)
    assert any(f == "lineNumber" and "is not a raise" in p for _, f, p in found)
    found = mutated(records, KIMI_VALUE_ERROR, lineNumber=2888)
    assert any(f == "lineNumber" and "raises NotImplementedError, not ValueError" in p for _, f, p in found)


def test_github_url_must_be_pinned_to_the_window(records):
    data = envelope(KIMI_PP_ERROR)["record"]
    wrong = data["githubUrl"].replace("#L2870-L2906", "#L2870-L2907")
    found = mutated(records, KIMI_PP_ERROR, githubUrl=wrong)
    assert any(f == "githubUrl" and p.endswith("#L2870-L2906") for _, f, p in found)


def test_slugs_follow_the_convention_and_collisions_take_a_suffix(records):
    found = mutated(records, KIMI_PP_ERROR, slug="something-else")
    assert any(f == "slug" and "dspark-aux-hidden-capture-requires-pp-1" in p for _, f, p in found)
    # The id's suffix is always allowed (harvested drafts always take it) ...
    assert mutated(records, KIMI_PP_ERROR, slug="dspark-aux-hidden-capture-requires-pp-1-ce31b3") == []
    copy_records(records)
    # ... and needed when two records would have one slug.
    found = mutated(records, KIMI_VALUE_ERROR, slug="dspark-requires-explicit-layer-ids-for-aux-hidden")
    assert found == []
    found = mutated(records, BAILING_VALUE_ERROR, slug="dspark-requires-explicit-layer-ids-for-aux-hidden")
    ((rid, field, problem),) = found  # the second of the two, in file order
    assert (rid, field) == (KIMI_VALUE_ERROR, "slug")
    assert f"also the slug of record {BAILING_VALUE_ERROR}; use dspark-requires-explicit-layer-ids-for-aux-hidden-b318b4" in problem


def test_duplicate_ids_and_misplaced_files(records):
    write_envelope(records, envelope(KIMI_PP_ERROR), name="elsewhere/x.json")
    found = problems_of(records)
    assert any(f == "id" and "duplicate id" in p for _, f, p in found)
    assert any(f == "id" and "file should be at" in p for _, f, p in found)


def test_background_tag_needs_a_family(records):
    found = mutated(records, KIMI_PP_ERROR, backgroundTag="no-such-family")
    assert any(f == "backgroundTag" and "no entry" in p for _, f, p in found)


def test_cli_prints_one_line_per_problem_and_exits_1(records):
    data = envelope(KIMI_PP_ERROR)
    data["record"]["messagePattern"] = "nothing"
    path = write_envelope(records, data)
    result = CliRunner().invoke(cli, ["check", str(records)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"{path}: record {KIMI_PP_ERROR}: messagePattern: does not fully match errorMessage"]
    clean = CliRunner().invoke(cli, ["check"])
    assert clean.exit_code == 0 and clean.stdout == ""


def test_cli_reports_a_file_that_does_not_validate(records):
    path = records / "sgl-project" / "sglang" / f"{KIMI_PP_ERROR}.json"
    path.write_text("{", encoding="utf-8")
    result = CliRunner().invoke(cli, ["check", str(records)])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{path}: malformed JSON")


def test_names_that_not_every_host_can_hold_as_files_are_flagged(records):
    found = mutated(records, KIMI_PP_ERROR, tags=["dspark", "nul"], backgroundTag=None)
    assert (KIMI_PP_ERROR, "tags", "'nul' is a device name on Windows (NUL): no file or folder can be named so there") in found
    data = envelope(BAILING_VALUE_ERROR)
    data["record"]["repo"] = "SGL-Project/sglang"  # the same repository on GitHub, another spelling
    write_envelope(records, data)
    (records / "sgl-project" / "sglang" / f"{BAILING_VALUE_ERROR}.json").unlink()
    assert any(field == "repo" and "only in case" in text for _, field, text in problems_of(records))


def test_a_device_name_is_any_case_and_any_extension():
    from errordb.records.conventions import reserved_name

    assert all(reserved_name(n) for n in ("con", "AUX", "nul.json", "com1", "LPT9.tar.gz"))
    assert not any(reserved_name(n) for n in ("console", "com0", "com10", "auxiliary", "a.con", "nul-pointer"))
