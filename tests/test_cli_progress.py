"""Progress: click's bar on a terminal, nothing on a pipe or with --quiet, one summary line at the end."""

from __future__ import annotations

import json
import re

import click.testing
import pytest
from click.testing import CliRunner
from helpers import RECORDS, envelope

from errordb.cli import cli
from errordb.records.loader import count_records


@pytest.fixture
def terminal(monkeypatch):
    """Standard error in CliRunner says it is a terminal, to click and to errordb."""
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: True, raising=False)


def test_count_records_counts_json_files_and_jsonl_lines(tmp_path):
    (tmp_path / "a.json").write_text("{}", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("{}\n{}\n{}", encoding="utf-8")  # the last line has no newline
    (tmp_path / "c.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("not a record", encoding="utf-8")
    assert count_records([tmp_path]) == 5
    assert count_records([RECORDS]) == 3
    assert count_records([tmp_path / "missing"]) is None


def test_ingest_draws_a_bar_on_a_terminal_then_prints_the_summary(tmp_path, terminal):
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps(envelope(i)) for i in ("b318b4f842689251", "ce31b31dd9a787ba")) + "\n", encoding="utf-8")
    db = tmp_path / "e.db"
    result = CliRunner().invoke(cli, ["ingest", str(records), "--db", str(db)])
    assert result.exit_code == 0, result.stderr
    bar, summary = result.stderr.rsplit("\n", 2)[:2]
    assert bar.startswith("\ringest  [") and bar.endswith("2/2\x1b[?25h")  # drawn in place, ends at the total
    assert re.fullmatch(rf"{re.escape(str(db))}: 2 added, 0 updated, 0 unchanged, 0 removed in \d+\.\d\ds", summary)
    quiet = CliRunner().invoke(cli, ["ingest", str(records), "--db", str(db), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""


def test_ingest_on_a_pipe_prints_only_the_summary_and_quiet_nothing(tmp_path):
    db = tmp_path / "e.db"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db)])
    assert "\r" not in result.stderr and result.stderr.count("\n") == 1
    assert re.fullmatch(r".*: 3 added, 0 updated, 0 unchanged, 0 removed in \d+\.\d\ds\n", result.stderr)
    quiet = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""


def test_export_on_a_pipe_prints_one_summary_and_quiet_nothing(tmp_path, monkeypatch):
    db = tmp_path / "e.db"
    CliRunner().invoke(cli, ["ingest", "--db", str(db), "-q"])
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(tmp_path / "api")])
    assert result.exit_code == 0 and "\r" not in result.stderr
    assert re.fullmatch(r".*api: 3 records, \d+ files, [\d.]+ MB in \d+\.\d\ds\n", result.stderr)
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: True, raising=False)
    quiet = CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(tmp_path / "api"), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_build_and_export_report_progress_to_their_callbacks(tmp_path):
    from errordb.publish.api import export_api
    from errordb.publish.site import build_site
    from errordb.store import connect, ingest

    db_path = tmp_path / "p.db"
    ingest(None, db_path)
    calls: list[tuple[int, int]] = []
    build_site(db_path, tmp_path / "site", progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] and [c[0] for c in calls] == list(range(1, len(calls) + 1))
    written: list[int] = []
    report = export_api(connect(db_path), tmp_path / "api", progress=written.append)
    assert report.records == 3 and written == [3]
