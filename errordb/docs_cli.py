"""Generate ``docs/cli.md`` from the command line's own ``--help`` texts.

    python -m errordb.docs_cli            # rewrite docs/cli.md
    python -m errordb.docs_cli --check    # exit 1 if docs/cli.md is stale (tests do this)

The help is rendered at a fixed width (:data:`WIDTH`) with no terminal involved, so the output
depends only on the code: the same commit always gives the same file, wherever it runs.
Commands are listed in click's order (alphabetical), each with its full help. Only what follows
the :data:`MARKER` line is generated: the text above it is written in docs/cli.md itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from errordb.atomic import write_text

#: Help is wrapped at this many columns, whatever the terminal.
WIDTH = 100
DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"

#: The line after which docs/cli.md is generated; the text above it is written by hand, there.
MARKER = "<!-- Generated below by `python -m errordb.docs_cli` from the commands' --help texts. -->"


def _help(command: click.Command, name: str, parent: click.Context | None) -> str:
    ctx = click.Context(command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH,
                        help_option_names=["-h", "--help"])
    return command.get_help(ctx)


def render(head: str | None = None) -> str:
    """The whole of ``docs/cli.md``: ``head`` (default: the file's own text up to its
    :data:`MARKER` line, that line included), then the commands' help."""
    from errordb.cli import cli

    root = click.Context(cli, info_name="errordb", terminal_width=WIDTH, max_content_width=WIDTH, help_option_names=["-h", "--help"])
    names = cli.list_commands(root)
    out = [_head() if head is None else head]
    out.append("| command | what it does |\n| --- | --- |")
    for name in names:
        command = cli.get_command(root, name)
        out.append(f"| [`{name}`](#errordb-{name}) | {command.get_short_help_str(limit=200)} |")
    out.append("")
    out.append("## errordb\n\n```text\n" + _help(cli, "errordb", None) + "\n```\n")
    for name in names:
        command = cli.get_command(root, name)
        out.append(f"## errordb {name}\n\n```text\n{_help(command, name, root)}\n```\n")
    return "\n".join(out)


def _head() -> str:
    """The hand-written part of docs/cli.md, its :data:`MARKER` line included."""
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    at = text.find("\n" + MARKER + "\n")
    if at < 0:
        raise SystemExit(f"{DOC}: no line {MARKER!r} to generate below; nothing written")
    return text[: at + len(MARKER) + 2]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args == ["--check"]:
        if DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run `python -m errordb.docs_cli`", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: python -m errordb.docs_cli [--check]", file=sys.stderr)
        return 2
    write_text(DOC, text)
    print(f"{DOC}: written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
