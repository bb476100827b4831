"""The record schema: every field rule accepts a real record and refuses a broken one."""

from __future__ import annotations

import json

import pytest
from helpers import ALL_IDS, BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, envelope, record_file

from errordb.errors import RecordError
from errordb.records.loader import parse_envelope, validate_envelope
from errordb.records.schema import FIELD_NAMES, Envelope, canonical_json, record_json_schema

SEED_FIELDS = [
    "id", "repo", "slug", "errorCode", "errorMessage", "messagePattern", "errorType", "errorClass",
    "httpStatus", "severity", "filePath", "lineNumber", "sourceCode", "sourceCodeStart", "sourceCodeEnd",
    "githubUrl", "documentation", "triggerScenarios", "commonSituations", "solutions", "exampleFix",
    "handlingStrategy", "validationCode", "typeGuard", "tryCatchPattern", "preventionTips", "tags",
    "backgroundTag", "analyzedSha", "analyzedAt", "schemaVersion",
]  # fmt: skip


def refusal(data: dict) -> RecordError:
    with pytest.raises(RecordError) as caught:
        validate_envelope("x.json", data)
    return caught.value


def with_field(field: str, value, record_id: str = KIMI_VALUE_ERROR) -> dict:
    data = envelope(record_id)
    data["record"][field] = value
    return data


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_bundled_records_validate_and_serialise_to_their_own_bytes(record_id):
    text = record_file(record_id).read_text(encoding="utf-8")
    parsed = parse_envelope("f.json", text)
    assert parsed.record.id == record_id
    assert canonical_json(parsed) == text


#: The fields the seeds do not have: optional, and left out of a file when unknown.
LATER_FIELDS = ("functionName", "distribution", "distributionVersion")


def test_models_cover_every_seed_field_in_file_order():
    assert [name for name in FIELD_NAMES if name not in LATER_FIELDS] == SEED_FIELDS
    assert FIELD_NAMES.index("functionName") == FIELD_NAMES.index("lineNumber") + 1
    assert FIELD_NAMES.index("distribution") == FIELD_NAMES.index("repo") + 1


def test_only_a_learned_draft_may_leave_out_its_repository_commit_and_link():
    data = json.loads(record_file(ALL_IDS[0]).read_text(encoding="utf-8"))
    for name in ("repo", "githubUrl", "analyzedSha"):
        missing = {**data, "record": {k: v for k, v in data["record"].items() if k != name}}
        with pytest.raises(RecordError) as caught:
            parse_envelope("f.json", json.dumps(missing))
        assert caught.value.field == name
    learned = {k: v for k, v in data["record"].items() if k not in ("githubUrl", "analyzedSha")}
    learned.update(distribution="sglang", distributionVersion="0.5.23")
    envelope = parse_envelope("f.json", json.dumps({**data, "record": learned}))
    assert envelope.record.githubUrl is None and '"distribution":"sglang","distributionVersion":"0.5.23"' in canonical_json(envelope)
    with pytest.raises(RecordError) as caught:
        parse_envelope("f.json", json.dumps({**data, "record": {k: v for k, v in learned.items() if k != "distributionVersion"}}))
    assert caught.value.field == "distributionVersion"


def test_a_known_function_is_written_after_the_line_and_an_unknown_one_not_at_all():
    text = record_file(ALL_IDS[0]).read_text(encoding="utf-8")
    data = json.loads(text)
    data["record"]["functionName"] = "BailingMoeV3ForCausalLM.set_dspark_layers_to_capture"
    written = canonical_json(parse_envelope("f.json", json.dumps(data)))
    assert '"lineNumber":1665,"functionName":"BailingMoeV3ForCausalLM.set_dspark_layers_to_capture","sourceCode":' in written
    data["record"]["functionName"] = None
    assert canonical_json(parse_envelope("f.json", json.dumps(data))) == text
    data["record"]["functionName"] = "not a name"
    with pytest.raises(RecordError, match="functionName"):
        parse_envelope("f.json", json.dumps(data))


@pytest.mark.parametrize(
    "field, good, bad",
    [
        ("id", "0123456789abcdef", "0123456789ABCDEF"),
        ("id", "0123456789abcdef", "../../etc/passwd"),
        ("repo", "owner-1/name.with_dots", "no-slash"),
        ("repo", "a/b", "a/.."),
        ("analyzedSha", "f" * 40, "f" * 39),
        ("githubUrl", None, "http://github.com/sgl-project/sglang"),
        ("githubUrl", None, "https://gitlab.com/sgl-project/sglang"),
        ("githubUrl", None, "javascript:alert(1)"),
        ("messagePattern", r"DSPARK requires .+\.", "DSPARK ("),
        ("messagePattern", None, r"(a)\1"),
        ("messagePattern", None, r"DSPARK(?=x)"),
        ("messagePattern", None, r"(?s).*"),  # matches every message: it would claim every exception
        ("messagePattern", None, r"[\s\S]*|DSPARK"),
        ("solutions", ["one", "two"], ["one", 2]),
        ("solutions", [], "not a list"),
        ("tags", ["a-b", "c.d"], ["Has Space"]),
        ("lineNumber", 2892, "2892"),
        ("httpStatus", 404, 99),
        ("severity", "warning", "catastrophic"),
        ("filePath", "python/sglang/x.py", "../outside.py"),
        ("filePath", None, "/abs/path.py"),
        ("filePath", None, "a\x00b.py"),
        ("slug", "a-b-c", "A Slug"),
        ("slug", None, "../x"),
        ("analyzedAt", "2026-08-28", "yesterday"),
        ("errorClass", "torch.OutOfMemoryError", "not a class"),
        ("errorCode", None, 5),
    ],
)
def test_field_rules(field, good, bad):
    if good is not None:
        validate_envelope("x.json", with_field(field, good))
    error = refusal(with_field(field, bad))
    assert error.field.split("[")[0] == field
    # An id that is itself invalid is not echoed back: the file alone names the record.
    named = "" if field == "id" else f"record {KIMI_VALUE_ERROR}: "
    assert str(error).startswith(f"x.json: {named}{error.field}: ")


@pytest.mark.parametrize("version", [1, 3, "2", 2.5])
def test_other_schema_versions_are_refused_with_the_supported_one_named(version):
    error = refusal(with_field("schemaVersion", version))
    assert error.field == "schemaVersion"
    assert "supported" in error.problem and "2" in error.problem


def test_line_number_must_lie_inside_the_snippet_window():
    validate_envelope("x.json", with_field("lineNumber", 2874))
    validate_envelope("x.json", with_field("lineNumber", 2910))
    for outside in (2873, 2911):
        error = refusal(with_field("lineNumber", outside))
        assert error.field == "lineNumber"
        assert "[2874, 2910]" in error.problem


def test_unknown_fields_are_refused_not_dropped():
    data = envelope(KIMI_PP_ERROR)
    data["record"]["surprise"] = 1
    assert refusal(data).field == "surprise"
    data = envelope(KIMI_PP_ERROR)
    data["extra"] = 1
    assert refusal(data).field == "extra"


def test_missing_field_is_named():
    data = envelope(KIMI_PP_ERROR)
    del data["record"]["errorMessage"]
    error = refusal(data)
    assert (error.record_id, error.field) == (KIMI_PP_ERROR, "errorMessage")
    assert "required" in error.problem.lower()


def test_nullable_fields_are_those_the_records_leave_null():
    bailing = envelope(BAILING_VALUE_ERROR)["record"]
    nulls = sorted(k for k, v in bailing.items() if v is None)
    assert nulls == ["errorCode", "errorType", "handlingStrategy", "httpStatus", "tryCatchPattern", "typeGuard"]
    for field in ("errorMessage", "filePath", "lineNumber", "solutions", "schemaVersion"):
        assert refusal(with_field(field, None)).field == field


def test_dataset_version_must_be_utc_iso8601():
    data = envelope(KIMI_PP_ERROR)
    data["datasetVersion"] = "2026-08-28 06:17"
    assert refusal(data).field == "datasetVersion"


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"record": ', "malformed JSON"),
        ('{"record": {}, "record": {}}', "duplicate key"),
        ("[1, 2]", "valid dictionary"),
        ('{"record": {"lineNumber": NaN}}', "NaN"),
    ],
)
def test_malformed_json_is_a_record_error(text, problem):
    with pytest.raises(RecordError) as caught:
        parse_envelope("bad.json", text)
    assert caught.value.source == "bad.json"
    assert problem.lower() in str(caught.value).lower()


def test_json_schema_is_generated_from_the_models():
    schema = record_json_schema()
    record = schema["$defs"]["Record"]
    assert set(record["properties"]) == {*SEED_FIELDS, *LATER_FIELDS}
    assert record["additionalProperties"] is False
    assert "id" in record["required"] and "errorCode" not in record["required"] and "functionName" not in record["required"]
    assert json.loads(json.dumps(schema)) == schema
    assert Envelope.model_json_schema()["properties"]["datasetVersion"]["pattern"]


def test_store_field_lists_agree_with_the_models():
    from errordb import store
    from errordb.records import schema

    assert store.SCALAR_FIELDS == schema.SCALAR_FIELDS
    assert store.LIST_FIELDS == schema.LIST_FIELDS


def test_a_pattern_that_matches_every_message_is_refused_and_says_why():
    assert "matches every message" in str(refusal(with_field("messagePattern", r"(?s)(.*)")))
    validate_envelope("x.json", with_field("messagePattern", r"(?s).*\."))  # requires a final "."
