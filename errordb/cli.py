"""The ``errordb`` command line: parses arguments and calls the library, nothing more."""

from __future__ import annotations

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
