"""Every command's errors are one line on stderr, without a traceback unless --debug; every
command has --help with an example; --db and ERRORDB_DB; --version; shell completion."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import KIMI_PP_ERROR, damage_schema_text

from errordb.cli import cli
from errordb.store import ingest

#: A command line for each command that reads a database (``--db`` is added by the tests).
DB_COMMANDS = {
    "explain": ["explain", "ValueError: x"],
    "show": ["show", KIMI_PP_ERROR],
    "search": ["search", "layer"],
    "list": ["list"],
    "stats": ["stats"],
    "repro": ["repro", KIMI_PP_ERROR],
    "export": ["export", "--out", "{tmp}/api"],
    "build": ["build", "--out", "{tmp}/site"],
    "ingest": ["ingest"],
    "serve": ["serve", "--port", "0"],
}


def bad_databases(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not an SQLite file\n" * 100)
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    return {"garbage": garbage, "foreign": foreign, "missing": tmp_path / "missing.db", "damaged schema": damaged_schema(tmp_path / "damaged.db")}


def damaged_schema(path):
    """A store whose schema's text holds a byte that is not UTF-8."""
    ingest(None, path)
    damage_schema_text(path)
    return path


def invoke(args, env=None):
    result = CliRunner().invoke(cli, args, env=env)
    return result


def assert_one_line_error(result, *needles, code=2):
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    assert result.stderr.startswith("errordb: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in result.stderr


@pytest.mark.parametrize("command", sorted(DB_COMMANDS))
@pytest.mark.parametrize("kind", ["garbage", "foreign", "missing", "damaged schema"])
def test_a_bad_db_is_one_line_naming_the_file(tmp_path, command, kind):
    if command == "ingest" and kind == "missing":
        pytest.skip("ingest creates a missing database")
    db = bad_databases(tmp_path)[kind]
    args = [a.format(tmp=tmp_path) for a in DB_COMMANDS[command]]
    result = invoke([args[0], "--db", str(db), *args[1:]])
    assert_one_line_error(result, str(db))
    assert not (tmp_path / "api").exists() and not (tmp_path / "site").exists()


def test_errordb_db_in_the_environment_is_used(tmp_path):
    db = tmp_path / "e.db"
    ingest(None, db)
    assert invoke(["show", KIMI_PP_ERROR], env={"ERRORDB_DB": str(db)}).exit_code == 0
    garbage = bad_databases(tmp_path)["garbage"]
    assert_one_line_error(invoke(["stats"], env={"ERRORDB_DB": str(garbage)}), str(garbage))


def test_debug_shows_the_traceback(tmp_path):
    garbage = bad_databases(tmp_path)["garbage"]
    result = invoke(["--debug", "show", KIMI_PP_ERROR, "--db", str(garbage)])
    assert result.exit_code == 1 and type(result.exception).__name__ == "StoreError"
    run = subprocess.run([sys.executable, "-m", "errordb", "--debug", "stats", "--db", str(garbage)], capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback (most recent call last)" in run.stderr


def test_missing_record_paths(tmp_path):
    missing = tmp_path / "nowhere"
    assert_one_line_error(invoke(["ingest", str(missing), "--db", str(tmp_path / "e.db")]), str(missing), "no such file or folder")
    assert not (tmp_path / "e.db").exists()
    check = invoke(["check", str(missing)])
    assert check.exit_code == 1 and f"{missing}: no such file or folder" in check.stdout
    serve = invoke(["serve", "--records", str(missing)])
    assert serve.exit_code == 2 and "does not exist" in serve.stderr
    families = invoke(["ingest", "--families", str(missing), "--db", str(tmp_path / "e.db")])
    assert families.exit_code == 2 and "does not exist" in families.stderr


def test_malformed_record_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert_one_line_error(invoke(["ingest", str(bad), "--db", str(tmp_path / "e.db")]), str(bad), "malformed JSON")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_files_are_one_line(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("ValueError: x\n", encoding="utf-8")
    log.chmod(0)
    assert_one_line_error(invoke(["explain", "--file", str(log)]), str(log), "cannot read")
    record = tmp_path / "records" / "r.json"
    record.parent.mkdir()
    record.write_text("{}", encoding="utf-8")
    record.chmod(0)
    assert_one_line_error(invoke(["ingest", str(record.parent), "--db", str(tmp_path / "e.db")]), str(record))


def test_os_errors_are_one_line_naming_the_file(monkeypatch, tmp_path):
    # Stands in for files root can read anyway: whatever raises an OSError, the user sees one line.
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/data/errordb.db")

    monkeypatch.setattr("errordb.store.open_connection", refuse)
    assert_one_line_error(invoke(["stats"]), "errordb: /data/errordb.db: Permission denied")


def test_an_output_path_that_is_a_file_is_one_line(tmp_path):
    db = tmp_path / "e.db"
    ingest(None, db)
    (tmp_path / "file").write_text("x", encoding="utf-8")
    result = invoke(["export", "--db", str(db), "--out", str(tmp_path / "file" / "api")])
    assert_one_line_error(result, f"{tmp_path / 'file'}: is a file, not a folder")


def test_an_output_folder_that_cannot_be_made_is_named_as_given_not_by_its_staging_folder(tmp_path):
    db = tmp_path / "e.db"
    ingest(None, db)
    for command in ("export", "build"):
        result = invoke([command, "--db", str(db), "--out", "/proc/errordb-out", "-q"])  # no folder can be made in /proc
        assert_one_line_error(result, "/proc/errordb-out: cannot be written there (")
        assert ".new-" not in result.stderr


def test_a_bug_is_one_line_that_points_to_debug(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("errordb.browse.stats", broken)
    result = invoke(["stats"])
    assert_one_line_error(result, "internal error: RuntimeError: boom", "--debug", code=70)


def test_every_command_has_help_with_an_example_and_db_where_it_reads_one():
    for name, command in cli.commands.items():
        result = invoke([name, "--help"])
        assert result.exit_code == 0, name
        assert "Example" in result.stdout, f"{name} --help has no example"
        if name in DB_COMMANDS:
            assert "--db FILE" in result.stdout and "ERRORDB_DB" in result.stdout, name
    assert invoke(["-h"]).exit_code == 0


def test_version():
    result = invoke(["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("errordb, version ")


def test_shell_completion_script_and_record_completion(tmp_path):
    db = tmp_path / "e.db"
    ingest(None, db)
    env = {**os.environ, "_ERRORDB_COMPLETE": "bash_source"}
    script = subprocess.run([sys.executable, "-c", "from errordb.cli import cli; cli(prog_name='errordb')"], capture_output=True, text=True, env=env)
    assert "_errordb_completion" in script.stdout and "complete " in script.stdout
    completing = {"_ERRORDB_COMPLETE": "bash_complete", "COMP_WORDS": f"errordb show --db {db} dspark-aux", "COMP_CWORD": "4"}
    result = CliRunner().invoke(cli, [], prog_name="errordb", env=completing)
    assert result.stdout.splitlines() == ["plain,dspark-aux-hidden-capture-requires-pp-1"]
    tags = {"_ERRORDB_COMPLETE": "bash_complete", "COMP_WORDS": f"errordb list --db {db} --tag spec", "COMP_CWORD": "5"}
    assert CliRunner().invoke(cli, [], prog_name="errordb", env=tags).stdout.splitlines() == ["plain,speculative-decoding"]
    garbage = bad_databases(tmp_path)["garbage"]
    broken = {"_ERRORDB_COMPLETE": "bash_complete", "COMP_WORDS": f"errordb show --db {garbage} x", "COMP_CWORD": "4"}
    result = CliRunner().invoke(cli, [], prog_name="errordb", env=broken)
    assert result.exit_code == 0 and result.stdout.strip() == ""  # completion never fails loudly


def test_serve_takes_records_or_db_and_records_beat_the_environment(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("errordb.publish.serve.serve", lambda records, db_path, **options: calls.append((records, db_path, options)))
    db = tmp_path / "e.db"
    ingest(None, db)
    both = invoke(["serve", "--records", str(tmp_path), "--db", str(db)])
    assert both.exit_code == 2 and "give --records or --db, not both" in both.stderr
    assert invoke(["serve", "--records", str(tmp_path)], env={"ERRORDB_DB": str(db)}).exit_code == 0
    assert invoke(["serve", "-p", "0"], env={"ERRORDB_DB": str(db)}).exit_code == 0
    assert calls[0][:2] == (tmp_path, None)
    assert calls[1][:2] == (None, db) and calls[1][2]["host"] == "127.0.0.1" and calls[1][2]["port"] == 0


def test_a_failure_on_a_damaged_database_blames_the_damage(monkeypatch, tmp_path):
    # Damage SQLite reads without complaint (a flipped byte can turn a text into a blob) makes the
    # code fail instead; the command then says what quick_check found, exit 2, as for SQLite's own errors.
    db = tmp_path / "e.db"
    ingest(None, db)
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        index_page = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' ORDER BY rootpage DESC").fetchone()[0]
    raw = bytearray(db.read_bytes())
    start = (index_page - 1) * page_size
    raw[start : start + page_size] = bytes(page_size)  # an index page: stats never reads it
    db.write_bytes(bytes(raw))

    def trips(*args, **kwargs):
        raise TypeError("cannot use a string pattern on a bytes-like object")

    monkeypatch.setattr("errordb.browse.stats", trips)
    result = invoke(["stats", "--db", str(db)])
    assert_one_line_error(result, f"{db}: the database file is damaged (", "ingest the records into a new file")
    assert "internal error" not in result.stderr


def test_ingest_without_a_database_says_where_to_give_it_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["ingest"], env={"ERRORDB_DB": None})
    assert result.exit_code == 2 and "give the database to write: --db FILE, or ERRORDB_DB=FILE" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing in the working folder
    written = CliRunner().invoke(cli, ["ingest", "-q"], env={"ERRORDB_DB": str(tmp_path / "mine.db")})
    assert written.exit_code == 0 and (tmp_path / "mine.db").exists()
    assert CliRunner().invoke(cli, ["stats"], env={"ERRORDB_DB": str(tmp_path / "mine.db")}).exit_code == 0  # and the rest read it
