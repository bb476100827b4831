"""`errordb repro`: runs the reviewed reproduction, and the matcher names the record each traceback is;
--digest and --write-transcripts, what a reviewer needs."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, RECORDS

from errordb.cli import cli
from errordb.repro.definitions import REVIEWED_DEFINITIONS

DEFINITION = RECORDS / "repros" / "dspark_capture_guard.toml"
TRANSCRIPT = RECORDS / "repros" / "transcripts" / "dspark_capture_guard.json"


def test_repro_all_behaves_as_recorded_and_each_traceback_identifies_its_own_record():
    result = CliRunner().invoke(cli, ["repro", "--all", "--format", "json"])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    assert report["ok"] is True
    raised = [run for scenario in report["scenarios"] for run in scenario["runs"] if run["outcome"] == "raised"]
    assert raised, "the reproduction raises in some scenarios"
    for run in raised:
        assert run["identified"][0] == run["expected"]["raises"], run["label"]
    assert {run["identified"][0] for run in raised} == {KIMI_VALUE_ERROR, BAILING_VALUE_ERROR, KIMI_PP_ERROR}


def test_repro_by_slug_prints_scenarios_and_verdicts():
    result = CliRunner().invoke(cli, ["repro", "dspark-aux-hidden-capture-requires-pp-1", "--no-color"])
    assert result.exit_code == 0
    assert "PP=2, rank 0 (not last)" in result.stdout
    assert "matcher identifies: ce31b31dd9a787ba" in result.stdout


def test_repro_refuses_a_record_without_a_reviewed_definition(tmp_path):
    runner = CliRunner()
    assert runner.invoke(cli, ["repro"]).exit_code == 2
    missing = runner.invoke(cli, ["repro", "no-such-record"])
    assert missing.exit_code == 1 and "no such record" in missing.stderr  # as show says it


def test_repro_digest_prints_the_pins_of_the_reviewed_definition():
    result = CliRunner().invoke(cli, ["repro", "--digest", KIMI_VALUE_ERROR, "dspark-aux-hidden-capture-requires-pp-1"])
    assert result.exit_code == 0, result.output
    pinned = tomllib.loads(DEFINITION.read_text(encoding="utf-8"))["reviewed"]
    assert result.stdout.splitlines() == [f'{rid} = "{pinned[rid]}"' for rid in (KIMI_VALUE_ERROR, KIMI_PP_ERROR)]
    missing = CliRunner().invoke(cli, ["repro", "--digest", "no-such-record"])
    assert missing.exit_code == 1 and "no such record" in missing.stderr


def _transcripts_into(monkeypatch, folder: Path) -> None:
    monkeypatch.setattr("errordb.repro.transcripts.repros_dir", lambda: folder)


def test_repro_write_transcripts_writes_the_committed_bytes(tmp_path, monkeypatch):
    _transcripts_into(monkeypatch, tmp_path)
    result = CliRunner().invoke(cli, ["repro", "--write-transcripts"])
    assert result.exit_code == 0, result.output
    written = tmp_path / "transcripts" / TRANSCRIPT.name
    assert result.stdout.splitlines() == [str(written)]
    assert written.read_bytes() == TRANSCRIPT.read_bytes()


def test_repro_write_transcripts_refuses_a_reproduction_that_differs_from_its_definition(tmp_path, monkeypatch):
    text = DEFINITION.read_text(encoding="utf-8")
    pinned = f'"{KIMI_VALUE_ERROR}.validationCode" = "reject"'
    assert pinned in text
    edited = tmp_path / DEFINITION.name
    edited.write_text(text.replace(pinned, pinned.replace("reject", "accept"), 1))
    monkeypatch.setattr("errordb.repro.definitions.repros_dir", lambda: tmp_path)
    _transcripts_into(monkeypatch, tmp_path)
    # An edited definition runs only once a maintainer has read it and updated its pin
    result = CliRunner().invoke(cli, ["repro", "--write-transcripts"])
    assert result.exit_code == 2
    assert f"{DEFINITION.name}: changed since it was reviewed" in result.stderr
    digest = "sha256:" + hashlib.sha256(edited.read_bytes()).hexdigest()
    monkeypatch.setitem(REVIEWED_DEFINITIONS, "dspark_capture_guard", digest)
    result = CliRunner().invoke(cli, ["repro", "--write-transcripts"])
    assert result.exit_code == 1
    assert "dspark_capture_guard does not behave as recorded; no transcript written" in result.stderr
    assert not (tmp_path / "transcripts").exists()


def test_repro_of_a_record_no_definition_covers(tmp_path, monkeypatch):
    monkeypatch.setattr("errordb.repro.definitions.repros_dir", lambda: tmp_path)
    result = CliRunner().invoke(cli, ["repro", KIMI_PP_ERROR])
    assert result.exit_code == 1
    assert f"{KIMI_PP_ERROR} has no reviewed reproduction" in result.stderr


@pytest.mark.parametrize("args", [
    ["--all", KIMI_PP_ERROR], [KIMI_PP_ERROR, KIMI_VALUE_ERROR], ["--digest"], ["--all", "--digest", KIMI_PP_ERROR],
    ["--write-transcripts", KIMI_PP_ERROR], ["--all", "--write-transcripts"],
])
def test_repro_usage_errors(args):
    assert CliRunner().invoke(cli, ["repro", *args]).exit_code == 2
