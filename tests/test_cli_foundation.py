"""The foundation commands through click and through a real process."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from click.testing import CliRunner
from helpers import KIMI_PP_ERROR, REPO, copy_records, envelope, write_envelope

from errordb.cli import cli


def test_ingest_reports_counts_and_is_idempotent(tmp_path):
    db = tmp_path / "e.db"
    runner = CliRunner()
    first = runner.invoke(cli, ["ingest", "--db", str(db)])
    assert first.exit_code == 0, first.output
    assert "3 added, 0 updated, 0 unchanged, 0 removed" in first.stderr
    second = runner.invoke(cli, ["ingest", "--db", str(db)])
    assert "0 added, 0 updated, 3 unchanged, 0 removed" in second.stderr


def test_bad_record_is_one_line_on_stderr_with_exit_2(tmp_path):
    records = copy_records(tmp_path / "r")
    data = envelope(KIMI_PP_ERROR)
    data["record"]["lineNumber"] = 1
    path = write_envelope(records, data)
    db = tmp_path / "e.db"
    result = CliRunner().invoke(cli, ["ingest", str(records), "--db", str(db)])
    assert result.exit_code == 2
    assert result.stderr == f"errordb: {path}: record {KIMI_PP_ERROR}: lineNumber: 1 lies outside the snippet [2870, 2906]\n"
    assert not db.exists()


def test_schema_command_prints_the_json_schema():
    result = CliRunner().invoke(cli, ["schema"])
    schema = json.loads(result.stdout)
    assert "Record" in schema["$defs"]


def test_real_process_python_m_errordb(tmp_path):
    db = tmp_path / "p.db"
    run = subprocess.run(
        [sys.executable, "-m", "errordb", "ingest", "--db", str(db)], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    again = subprocess.run([sys.executable, "-m", "errordb", "ingest", "--db", str(db)], capture_output=True, text=True)
    assert again.returncode == 0 and hashlib.sha256(db.read_bytes()).hexdigest() == digest
    version = subprocess.run([sys.executable, "-m", "errordb", "--version"], capture_output=True, text=True)
    assert version.stdout.startswith("errordb, version ")


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- test-command -->")[1].split("<!-- /test-command -->")[0]
    command = [line[4:] for line in block.splitlines() if line.startswith("    ")]
    assert len(command) == 1 and "pytest" in command[0] and "[test]" in command[0]
    assert "test-command" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
