"""`errordb repro`: runs the reviewed reproduction, and the matcher names the record each traceback is."""

from __future__ import annotations

import json

from click.testing import CliRunner
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR

from errordb.cli import cli


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
    assert missing.exit_code == 2 and "no such record" in missing.stderr
