"""The ``errordb`` command line: parses arguments and calls the library, nothing more."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import click

from errordb import __version__
from errordb.errors import ErrordbError


class ErrordbGroup(click.Group):
    """Shows library errors as one line on stderr (a traceback only with ``--debug``)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ErrordbError as exc:
            if ctx.params.get("debug"):
                raise
            click.echo(f"errordb: {exc}", err=True)
            ctx.exit(exc.exit_code)


def db_option(function):
    return click.option(
        "--db",
        "db_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="ERRORDB_DB",
        help="SQLite database to use (env ERRORDB_DB). Default: one built from the bundled records.",
    )(function)


@click.group(cls=ErrordbGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="errordb")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
def cli(debug: bool) -> None:
    """errordb: say which known error a traceback is, what it means and how to fix it.

    \b
    Examples:
      errordb explain "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
      python train.py 2>&1 | errordb explain -
      errordb check records/
    """


@cli.command()
@click.argument("text", required=False)
@click.option("-f", "--file", "log_file", type=click.Path(dir_okay=False, path_type=Path), help="Read the traceback or log from this file.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: on a terminal, unless NO_COLOR is set).")
@db_option
def explain(text: str | None, log_file: Path | None, output_format: str, color: bool | None, db_path: Path | None) -> None:
    """Say which known error a traceback, log or message is, and how to fix it.

    TEXT is the traceback or message itself; `-` reads standard input; --file reads a log
    (both are read line by line, so a large log costs little memory). Every exception found
    is matched against every record's pattern and ranked by class, file, function and line
    (docs/matching.md). Exit status: 0 matched, 1 nothing matched, 2 bad usage or input.

    \b
    Examples:
      errordb explain "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
      python serve.py 2>&1 | errordb explain -
      errordb explain --file server.log --format json
    """
    from errordb.explanation import explain as explain_source
    from errordb.store import open_connection

    if (text is None) == (log_file is None):
        raise click.UsageError("give TEXT, `-` for standard input, or --file LOG (one of them)")
    db = open_connection(db_path)
    if log_file is not None:
        source = _read_lines(log_file)
    elif text == "-":
        source = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    else:
        source = text
    result = explain_source(source, db)
    if output_format == "json":
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    elif output_format == "markdown":
        from errordb.render import render_markdown

        click.echo(render_markdown(result, db), nl=False)
    else:
        from errordb.render import render_terminal, use_color

        stream = click.get_text_stream("stdout")
        click.echo(render_terminal(result, db, color=use_color(stream, color)), color=use_color(stream, color))
    sys.exit(result.exit_code)


def _read_lines(path: Path):
    try:
        handle = open(path, encoding="utf-8", errors="replace", newline="")
    except OSError as exc:
        raise ErrordbError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        yield from handle


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=False, path_type=Path))
@db_option
@click.option("--prune", is_flag=True, help="Remove records whose files are gone.")
@click.option("--families", "families_path", type=click.Path(dir_okay=False, path_type=Path),
              help="families.toml to use (default: the one beside the records).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def ingest(paths: tuple[Path, ...], db_path: Path | None, prune: bool, families_path: Path | None, quiet: bool) -> None:
    """Load record files into an SQLite database, all or nothing.

    PATHS are record files (.json, or .jsonl with one record per line) or folders, walked
    recursively; default: the bundled records. Ingesting the same records again changes
    nothing; changed records are updated in place. One bad record aborts the whole run and
    leaves the database as it was (exit status 2).

    \b
    Example:
      errordb ingest records/ --db errordb.db --prune
    """
    from errordb.store import ingest as ingest_records

    report = ingest_records(list(paths) or None, db_path or Path("errordb.db"), prune=prune, families_path=families_path)
    if not quiet:
        click.echo(f"{db_path or 'errordb.db'}: {report.summary()}", err=True)


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=False, path_type=Path))
@click.option("-q", "--quiet", is_flag=True, help="Print problems only, no summary.")
def check(paths: tuple[Path, ...], quiet: bool) -> None:
    """Validate records and the dataset's consistency; one line per problem.

    Beyond the schema: the pattern matches the message in full, the snippet's length and its
    raise line agree with the line numbers, githubUrl is pinned to the right window, slugs
    follow the convention, ids and slugs are unique. Exit status 1 when anything is wrong.

    \b
    Example:
      errordb check records/sgl-project/
    """
    from errordb.check import check as check_records

    problems = check_records(list(paths) or None)
    for problem in problems:
        click.echo(str(problem))
    if not quiet:
        click.echo(f"{len(problems)} problem{'s' if len(problems) != 1 else ''}", err=True)
    sys.exit(1 if problems else 0)


@cli.command()
def schema() -> None:
    """Print the JSON Schema of a record file (schemaVersion 2).

    \b
    Example:
      errordb schema > record-v2.schema.json
    """
    from errordb.schema import record_json_schema

    click.echo(json.dumps(record_json_schema(), indent=2, sort_keys=True))


@cli.command()
@click.argument("key", required=False)
@click.option("--all", "run_all", is_flag=True, help="Run every reviewed reproduction.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--color/--no-color", default=None, help="Force colour on or off.")
@db_option
def repro(key: str | None, run_all: bool, output_format: str, color: bool | None, db_path: Path | None) -> None:
    """Run a record's reviewed reproduction and show what the code really does.

    KEY is a record id, slug or page URL. Each scenario runs the record's own snippet in a
    sandboxed child process (`python -I`, a time limit, no user environment) and is judged
    against the outcome pinned by a reviewer in records/repros/. The captured traceback is
    then fed to the matcher to show which record it identifies. Only records with a reviewed
    definition can be run: ingesting or rendering a record never executes anything.
    Exit status: 0 when every scenario behaves as recorded, 1 otherwise.

    \b
    Examples:
      errordb repro dspark-aux-hidden-capture-requires-pp-1
      errordb repro --all --format json
    """
    from errordb import repro as reproductions
    from errordb.explanation import explain as explain_source
    from errordb.render import use_color
    from errordb.store import find_record_id, get_record, open_connection

    if bool(key) == run_all:
        raise click.UsageError("give a record KEY or --all (one of them)")
    db = open_connection(db_path)
    if run_all:
        chosen = reproductions.all_reproductions()
    else:
        record_id = find_record_id(db, key)
        if record_id is None:
            raise ErrordbError(f"{key}: no such record")
        found = reproductions.reproduction_for(record_id)
        if found is None:
            click.echo(f"{record_id} has no reviewed reproduction (see records/repros/README.md)", err=True)
            sys.exit(1)
        chosen = [found]

    def identify(traceback_text: str) -> list[str]:
        return [match.id for match, _ in explain_source(traceback_text, db).matches]

    reports = []
    for reproduction in chosen:
        records = {rid: get_record(db, rid) for rid in reproduction.records}
        missing = sorted(rid for rid, record in records.items() if record is None)
        if missing:
            raise ErrordbError(f"reproduction {reproduction.id}: record {missing[0]} is not in the database")
        try:
            reports.append(reproductions.run_reproduction(reproduction, records, matcher=identify))
        except reproductions.ReproError as exc:
            raise ErrordbError(f"reproduction {reproduction.id}: {exc}") from None
    if output_format == "json":
        documents = [r.to_dict() for r in reports]
        click.echo(json.dumps(documents if run_all else documents[0], indent=2, ensure_ascii=False))
    else:
        stream = click.get_text_stream("stdout")
        on = use_color(stream, color)
        click.echo("\n\n".join(reproductions.render_text(r, color=on) for r in reports), color=on)
    sys.exit(0 if all(r.ok for r in reports) else 1)


@cli.command()
@db_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("site/api"), show_default=True,
              help="Folder to write the API into; it is replaced as a whole.")
@click.option("--base-url", default="/", show_default=True,
              help="URL the site is served at; the API's links point to <base-url>api/.")
@click.option("--sqlite", "sqlite_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a compact copy of the database there, with Datasette metadata beside it.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def export(db_path: Path | None, out: Path, base_url: str, sqlite_path: Path | None, quiet: bool) -> None:
    """Write the static JSON API, and with --sqlite the database release.

    The API (record files, paged indexes, per repository, tag and family listings, patterns
    for the in-browser matcher, JSON Schemas, OpenAPI, bulk all.jsonl.gz and all.zip) is built
    beside OUT and swapped into place: a failed export leaves the previous one as it was. Two
    exports of the same data are byte-identical. Layout and hosting: docs/api.md.

    --sqlite FILE writes FILE and FILE's stem + .metadata.json, for
    `datasette FILE -m STEM.metadata.json`.

    \b
    Example:
      errordb export --db errordb.db --out site/api --base-url https://errordb.example/ --sqlite dist/errordb.db
    """
    from errordb.export import export_api, export_sqlite
    from errordb.store import open_db

    db = open_db(db_path)
    try:
        report = export_api(db, out, base_url=base_url)
        if not quiet:
            click.echo(f"{out}: {report.summary()}", err=True)
        if sqlite_path:
            release = export_sqlite(db, sqlite_path)
            if not quiet:
                click.echo(f"{release.database}, {release.metadata}: written", err=True)
    finally:
        db.close()
