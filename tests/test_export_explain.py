"""``errordb explain --format json`` is part of the API: its output validates against the schema
the export publishes at ``schema/explain-v<version>.json``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import RECORDS

from errordb.cli import cli
from errordb.publish.api import export_api
from errordb.store import connect, ingest

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("errordb.explainer.result")

INPUTS = {
    "message": "ValueError: DSPARK requires explicit layer_ids for aux hidden capture.",
    "traceback": (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/models/kimi_k3.py", line 2892, in set_dspark_layers_to_capture\n'
        "    raise ValueError(\n"
        "ValueError: DSPARK requires explicit layer_ids for aux hidden capture.\n"
    ),
    "no match": "KeyError: 'nothing errordb knows about'",
}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    folder = tmp_path_factory.mktemp("explain")
    ingest([RECORDS], folder / "errordb.db")
    db = connect(folder / "errordb.db")
    export_api(db, folder / "api")
    db.close()
    from errordb.explainer.result import FORMAT_VERSION

    schema = json.loads((folder / "api" / "schema" / f"explain-v{FORMAT_VERSION}.json").read_text())
    return folder / "errordb.db", schema


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_explain_json_validates_against_the_published_schema(published, kind):
    db_path, schema = published
    result = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--format", "json", INPUTS[kind]])
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema).validate(document)
    from errordb.explainer.result import FORMAT_VERSION

    assert document["version"] == FORMAT_VERSION  # the version in the schema's file name
    assert bool(document["matches"]) == (kind != "no match")


def test_the_published_schema_is_the_result_models(published):
    from errordb.explainer.result import explain_json_schema

    _, schema = published
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == explain_json_schema()
