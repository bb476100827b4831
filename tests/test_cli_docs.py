"""docs/cli.md is generated from the --help texts; this fails when it is stale."""

from __future__ import annotations

from errordb import docs_cli
from errordb.cli import cli


def test_docs_cli_md_is_up_to_date():
    assert docs_cli.DOC.read_text(encoding="utf-8") == docs_cli.render(), (
        "docs/cli.md is stale: run `python -m errordb.docs_cli` and commit the result"
    )


def test_every_command_is_documented_with_its_help():
    text = docs_cli.render()
    for name in cli.commands:
        assert f"\n## errordb {name}\n\n```text\nUsage: errordb {name} " in text
    assert '_ERRORDB_COMPLETE=bash_source errordb' in text


def test_the_generator_does_not_depend_on_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    narrow = docs_cli.render()
    monkeypatch.setenv("COLUMNS", "250")
    assert docs_cli.render() == narrow


def test_check_mode_reports_staleness(tmp_path, monkeypatch):
    stale = tmp_path / "cli.md"
    head = f"# Written by hand\n\n{docs_cli.MARKER}\n"
    stale.write_text(head + "old\n", encoding="utf-8")
    monkeypatch.setattr(docs_cli, "DOC", stale)
    assert docs_cli.main(["--check"]) == 1
    assert docs_cli.main([]) == 0
    assert docs_cli.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8").startswith(head + "\n| command |")  # only what follows the marker is generated
