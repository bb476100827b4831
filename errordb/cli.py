"""The ``errordb`` command line: parses arguments and calls the library, nothing more."""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import json
import shutil
import sys
from pathlib import Path

import click

from errordb import __version__
from errordb.errors import ErrordbError


class ErrordbGroup(click.Group):
    """Shows errors as one line on stderr (a traceback only with ``--debug``).

    Library errors (:class:`ErrordbError`) carry their own message and exit status. Files that
    cannot be read or written and databases SQLite refuses are the user's problem too: one line
    naming the file. Anything else is a bug: one line saying so, and --debug shows where.
    Every message passes :func:`errordb.text.one_line`: they quote untrusted text (file names,
    arguments, and SQLite quotes the undecodable text of a damaged database), which must not
    break the line or drive the terminal.
    """

    def invoke(self, ctx: click.Context):
        import sqlite3

        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # usage errors and exits: click prints and exits as usual
        except ErrordbError as exc:
            if ctx.params.get("debug"):
                raise
            _fail(ctx, str(exc), exc.exit_code)
        except KeyboardInterrupt:
            if ctx.params.get("debug"):
                raise
            _fail(ctx, "interrupted", 130)
        except OSError as exc:
            if ctx.params.get("debug") or exc.errno == errno.EPIPE:
                raise  # a closed pipe (`errordb list | head`): click exits quietly
            name = f"{exc.filename}: " if exc.filename else ""
            problem = exc.strerror or str(exc)
            if exc.errno in (errno.EEXIST, errno.ENOTDIR) and exc.filename and not Path(exc.filename).is_dir():
                problem = "is a file, not a folder"  # mkdir's "File exists" says it poorly
            _fail(ctx, f"{name}{problem}", 2)
        except sqlite3.Error as exc:
            if ctx.params.get("debug"):
                raise
            db = ctx.meta.get("errordb.db")
            if _is_damage(exc):
                from errordb.store import unreadable

                message = str(unreadable(db, exc))  # "the database file is damaged (...)", cut short
            else:
                message = f"{db or 'database'}: {exc} (is it an errordb database?)"
            _fail(ctx, message, 2)
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            from errordb.store import damage_found

            db = ctx.meta.get("errordb.db")
            if (damage := damage_found(db)) is not None:
                _fail(ctx, f"{db}: the database file is damaged ({damage}); ingest the records into a new file", 2)
            _fail(ctx, f"internal error: {type(exc).__name__}: {exc} (run `errordb --debug ...` for the traceback)", 70)  # EX_SOFTWARE


def _fail(ctx: click.Context, message: str, code: int) -> None:
    """Print ``errordb: message`` as one safe line on stderr and exit with ``code``."""
    from errordb.text import one_line

    click.echo(f"errordb: {one_line(message)}", err=True)
    ctx.exit(code)


def _is_damage(exc: Exception) -> bool:
    # What SQLite says of a damaged file: a malformed image, not a database, or text that is not
    # UTF-8 ("Could not decode to UTF-8 column ... with text ...", which quotes the bad bytes).
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "decode" in str(exc)


def _remember_db(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    # ctx.meta is shared by the whole command chain: ErrordbGroup names the file in SQLite errors.
    ctx.meta["errordb.db"] = value
    return value


color_option = click.option("--color/--no-color", default=None,
                            help="Force colour on or off (default: on a terminal, or with FORCE_COLOR or CLICOLOR_FORCE set; never with NO_COLOR set).")


site_url_option = click.option(
    "--site-url", "site", metavar="URL", envvar="ERRORDB_SITE_URL",
    help="Where the site is published (env ERRORDB_SITE_URL), for the records' Page and JSON links; "
         "without it, links say `errordb show ID`.",
)


def db_option(function, help: str = "SQLite database to use (env ERRORDB_DB). Default: one built from the bundled records."):  # noqa: A002
    return click.option(
        "--db",
        "db_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="ERRORDB_DB",
        callback=_remember_db,
        help=help,
    )(function)


@click.group(cls=ErrordbGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="errordb")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
def cli(debug: bool) -> None:
    """errordb: say which known error a traceback is, what it means and how to fix it.

    \b
    Shell completion (zsh_source and fish_source for zsh and fish; docs/cli.md):
      eval "$(_ERRORDB_COMPLETE=bash_source errordb)"

    \b
    Examples:
      errordb explain "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
      python train.py 2>&1 | errordb explain -
      errordb search "layer_ids" --repo sgl-project/sglang
      errordb check records/
    """


@cli.command()
@click.argument("words", nargs=-1, metavar="[TEXT]...")
@click.option("-f", "--file", "log_file", type=click.Path(dir_okay=False, path_type=Path), help="Read the traceback or log from this file.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@color_option
@site_url_option
@db_option
def explain(words: tuple[str, ...], log_file: Path | None, output_format: str, color: bool | None, site: str | None,
            db_path: Path | None) -> None:  # fmt: skip
    """Say which known error a traceback, log or message is, and how to fix it.

    TEXT is the traceback or message itself (unquoted words are joined with spaces:
    `errordb explain ValueError: bad value` works); `-` reads standard input; --file reads a log
    (a pipe and a log are read line by line, so a large log costs little memory; a paste at a
    terminal is read whole, as TEXT is). Each exception found
    (the first 1,000; the rest are counted) is matched against every record's pattern and
    ranked by class, file, function and line (docs/matching.md). Exit status: 0 matched,
    1 nothing matched, 2 bad usage or input.

    \b
    Examples:
      errordb explain "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
      python serve.py 2>&1 | errordb explain -
      errordb explain --file server.log --format json
    """
    from errordb.explainer.explanation import explain as explain_source
    from errordb.explainer.render import site_url
    from errordb.store import open_connection

    text = " ".join(words) if words else None
    site = site_url(site)  # a bad --site-url is said before anything is read
    if (text is None) == (log_file is None):
        raise click.UsageError("give TEXT, `-` for standard input, or --file LOG (one of them)")
    db = open_connection(db_path, learned=True)
    if log_file is not None:
        source = _read_lines(log_file)
    elif text == "-":
        source = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
        if sys.stdin.isatty():  # a paste: said what it waits for, and read whole, as TEXT is
            click.echo("Paste the traceback or log, then press Ctrl-D on a line of its own (Ctrl-Z, Enter on Windows).", err=True)
            source = source.read()
    else:
        source = text
    result = explain_source(source, db)
    site = site or result.site_url
    if output_format == "json":
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    elif output_format == "markdown":
        from errordb.explainer.render import render_markdown

        click.echo(render_markdown(result, site), nl=False)
    else:
        from errordb.explainer.render import render_terminal, use_color
        from errordb.repro import best_reproductions

        on = use_color(sys.stdout, color)
        click.echo(render_terminal(result, reproductions=best_reproductions(result), color=on, site=site), color=on)
    sys.exit(result.exit_code)


@contextlib.contextmanager
def _progress(label: str, total: int | None, quiet: bool):
    """A callback ``advance(done, total=None, note=None)`` drawing click's progress bar on a
    terminal's stderr (``note`` after it); it draws nothing with ``quiet`` or when stderr is not
    a terminal."""
    if quiet or not sys.stderr.isatty():
        yield lambda done, total=None, note=None: None
        return
    with click.progressbar(length=total or 0, label=label, file=sys.stderr, show_pos=True, item_show_func=lambda note: note) as bar:

        def advance(done: int, new_total: int | None = None, note: str | None = None) -> None:
            if new_total is not None:
                bar.length = new_total
            bar.update(done - bar.pos, current_item=note)

        yield advance


@contextlib.contextmanager
def _stage_progress(label: str, quiet: bool):
    """A callback ``update(stage, done, total)`` drawing one of :func:`_progress`'s bars per
    stage, labelled ``label: stage``."""
    with contextlib.ExitStack() as stack:
        current: dict = {}

        def update(stage: str, done: int, total: int | None) -> None:
            if current.get("stage") != stage:
                stack.close()  # the previous stage's bar is finished
                current.update(stage=stage, advance=stack.enter_context(_progress(f"{label}: {stage}", total, quiet)))
            current["advance"](done)

        yield update


def _read_lines(path: Path):
    try:
        handle = open(path, encoding="utf-8", errors="replace", newline="")
    except OSError as exc:
        raise ErrordbError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        yield from handle


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=False, path_type=Path))
@functools.partial(db_option, help="SQLite database to write (env ERRORDB_DB; required: the embedded default holds the "
                                   "bundled records and is never written). Other commands read it when given it the same way.")
@click.option("--prune", is_flag=True, help="Remove records whose files are gone.")
@click.option("--families", "families_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
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
    from errordb.records.loader import count_records
    from errordb.store import bundled_records_dir
    from errordb.store import ingest as ingest_records

    if db_path is None:
        raise click.UsageError("give the database to write: --db FILE, or ERRORDB_DB=FILE (then explain, show and "
                               "the rest read it too); the embedded default holds the bundled records only")

    # The bar's total costs a walk of the files: only worth it when a bar will be drawn.
    total = count_records(list(paths) or [bundled_records_dir()]) if not quiet and sys.stderr.isatty() else None
    with _progress("ingest", total, quiet) as advance:
        report = ingest_records(list(paths) or None, db_path, prune=prune, families_path=families_path, progress=advance)
    if not quiet:
        click.echo(f"{db_path}: {report.summary()}", err=True)


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
    from errordb.records.check import check as check_records

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
    from errordb.records.schema import record_json_schema

    click.echo(json.dumps(record_json_schema(), indent=2, sort_keys=True))


@cli.command()
@click.argument("keys", nargs=-1, metavar="[KEY]...")
@click.option("--all", "run_all", is_flag=True, help="Run every reviewed reproduction.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--color/--no-color", default=None, help="Force colour on or off.")
@click.option("--digest", "digest", is_flag=True,
              help="Print the [reviewed] lines pinning the records KEY... as stored; run nothing.")
@click.option("--write-transcripts", "write", is_flag=True,
              help="Run every reviewed reproduction and write records/repros/transcripts/ "
                   "(nothing is written unless all behave as recorded).")
@click.option("--unsafe", is_flag=True,
              help="Where there is no sandbox, run a definition no maintainer reviewed anyway, under "
                   "resource limits only (the output says so).")
@db_option
def repro(keys: tuple[str, ...], run_all: bool, output_format: str, color: bool | None, digest: bool, write: bool,
          unsafe: bool, db_path: Path | None) -> None:  # fmt: skip
    """Run a record's reviewed reproduction and show what the code really does.

    KEY is a record id, slug or page URL. Each scenario runs the record's own snippet in a
    sandbox (bubblewrap on Linux: no network, nothing of the file system but a read-only
    interpreter and its own folder; and `python -I`, a time limit, no user environment) and is
    judged against the outcome pinned in a definition in records/repros/. The captured
    traceback is then fed to the matcher to show which record it identifies. Only records with
    a definition can be run: ingesting or rendering a record never executes anything. Where
    there is no sandbox, only definitions a maintainer reviewed run (--unsafe: any).
    Exit status: 0 when every scenario behaves as recorded, 1 otherwise, 2 when it cannot run.

    For reviewers (records/repros/README.md): --digest prints the digests to pin in a
    definition's [reviewed] table; --write-transcripts regenerates the committed transcripts.

    \b
    Examples:
      errordb repro dspark-aux-hidden-capture-requires-pp-1
      errordb repro --all --format json
      errordb repro --digest b318b4f842689251 ce31b31dd9a787ba
      errordb repro --write-transcripts
    """
    from errordb.explainer.render import terminal_width, use_color
    from errordb.repro import commands
    from errordb.repro.transcripts import render_text
    from errordb.store import open_connection
    from errordb.store.read import resolve_record_id

    if digest + write + run_all > 1:
        raise click.UsageError("give one of --all, --digest, --write-transcripts")
    if write and keys:
        raise click.UsageError("--write-transcripts writes every transcript: give no KEY")
    if digest and not keys:
        raise click.UsageError("--digest needs the records: give KEY...")
    if not (digest or write) and (bool(keys) == run_all or len(keys) > 1):
        raise click.UsageError("give a record KEY or --all (one of them)")
    db = open_connection(db_path)
    try:
        if digest:
            click.echo("\n".join(commands.digest_lines(db, keys)))
            return
        if write:
            for path in commands.write_transcripts(db):
                click.echo(str(path))
            return
        reports = commands.run_reproductions(db, None if run_all else keys[0], unsafe=unsafe)
        record = None if run_all else resolve_record_id(db, keys[0])  # repro ID shows that record's runs
    finally:
        db.close()
    if output_format == "json":
        documents = [r.to_dict() for r in reports]
        click.echo(json.dumps(documents if run_all else documents[0], indent=2, ensure_ascii=False))
    else:
        on = use_color(sys.stdout, color)
        width = terminal_width() if sys.stdout.isatty() else None
        click.echo("\n\n".join(render_text(r, color=on, width=width, record=record) for r in reports), color=on)
    sys.exit(0 if all(r.ok for r in reports) else 1)


# Browsing: show, search, list, stats, serve ------------------------------------------------------


def _complete(kind: str):
    """A shell-completion callback offering values of ``kind`` from the database (never fails)."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        from errordb.browse import completions

        return completions(ctx.params.get("db_path"), kind, incomplete)

    return complete


def filter_options(function):
    """--repo, --tag, --family, --class and --distribution, shared by search and list."""
    options = [
        click.option("--repo", "repos", multiple=True, metavar="OWNER/NAME", shell_complete=_complete("repo"),
                     help="Only records of this repository (repeat: any of them)."),
        click.option("--tag", "tags", multiple=True, metavar="TAG", shell_complete=_complete("tag"),
                     help="Only records with this tag (repeat: all of them)."),
        click.option("--family", "families", multiple=True, metavar="TAG", shell_complete=_complete("family"),
                     help="Only records of this failure family, the backgroundTag (repeat: any of them)."),
        click.option("--class", "classes", multiple=True, metavar="NAME", shell_complete=_complete("class"),
                     help="Only records raising this exception class, e.g. ValueError (repeat: any of them)."),
        click.option("--distribution", "distributions", multiple=True, metavar="NAME", shell_complete=_complete("distribution"),
                     help="Only drafts learned from this installed distribution or source tree, e.g. requests (repeat: any of them)."),
    ]  # fmt: skip
    for option in reversed(options):
        function = option(function)
    return function


def _filters(repos: tuple[str, ...], tags: tuple[str, ...], families: tuple[str, ...], classes: tuple[str, ...],
             distributions: tuple[str, ...]):  # fmt: skip
    from errordb.browse import Filters

    return Filters(repos=repos, tags=tags, families=families, classes=classes, distributions=distributions)


def _dataset_site_url(db_path: Path | None) -> str | None:
    """The site URL the store's dataset names for itself (its ``dataset.toml``), if any."""
    from errordb.store import meta, open_connection

    db = open_connection(db_path)
    try:
        return meta(db).get("siteUrl")
    finally:
        db.close()


def _stdout_color(color: bool | None) -> bool:
    from errordb.explainer.render import use_color

    return use_color(sys.stdout, color)


@cli.command()
@click.argument("key", shell_complete=_complete("key"))
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True,
              help="json: the record file itself (compact canonical JSON, byte for byte as in records/).")
@color_option
@site_url_option
@db_option
def show(key: str, output_format: str, color: bool | None, site: str | None, db_path: Path | None) -> None:
    """Show one record in full, as explain shows its best match.

    KEY is a record id, a slug, or a page or JSON URL ending in one. The text is explain's
    (what it means, the source with the raise marked, solutions, fixes, when it happens, the
    committed reproduction, links); markdown is for pasting into an issue; json is the record
    file exactly as stored (pipe it to `python -m json.tool` to indent it).
    Exit status: 0 shown, 1 no such record.

    \b
    Examples:
      errordb show dspark-aux-hidden-capture-requires-pp-1
      errordb show b318b4f842689251 --format json > record.json
      errordb show https://errordb.example/errors/dspark-aux-hidden-capture-requires-pp-1/ --format markdown
    """
    from errordb.browse import show as show_record
    from errordb.explainer.render import site_url
    from errordb.store import meta, open_connection

    site = site_url(site)
    db = open_connection(db_path, learned=True)
    try:
        site = site or meta(db).get("siteUrl")  # else the dataset's own setting (its dataset.toml)
        on = _stdout_color(color) if output_format == "text" else False
        click.echo(show_record(db, key, output_format, color=on, site=site), color=on)
    finally:
        db.close()


@cli.command()
@click.argument("words", nargs=-1, required=True, metavar="QUERY...")
@filter_options
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True, metavar="N", help="Show at most N records.")
@click.option("--raw", is_flag=True, help="QUERY is FTS5 syntax (AND, OR, NOT, NEAR, \"phrases\", prefix*, column:word).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@color_option
@db_option
def search(words: tuple[str, ...], repos, tags, families, classes, distributions, limit: int, raw: bool, output_format: str,
           color: bool | None, db_path: Path | None) -> None:  # fmt: skip
    """Full-text search of classes, messages, documentation, triggers, situations and solutions.

    QUERY is one or more words, quoted or not. Every word must occur (stemmed: "layers" finds
    "layer"); `word*` finds words starting with it. Punctuation is plain text: `layer_ids` is the phrase "layer ids",
    `"` and `:` mean nothing special. Results are ranked by bm25, message matches weighing
    most, and show each record's message and the passages that matched (highlighted; without
    colour between **). --raw takes SQLite FTS5 query syntax instead; a malformed query is
    then a one-line error (exit status 2). Exit status: 0 found, 1 nothing found.

    \b
    Examples:
      errordb search "layer_ids capture"
      errordb search "pipeline parallel" --class NotImplementedError --tag dspark
      errordb search --raw 'errorMessage:dspark NOT pipeline' --format json
    """
    from errordb.browse import render_search
    from errordb.browse import search as search_records
    from errordb.store import open_connection

    query = " ".join(words)
    db = open_connection(db_path, learned=True)
    try:
        result = search_records(db, query, _filters(repos, tags, families, classes, distributions), limit=limit, raw=raw)
    finally:
        db.close()
    if output_format == "json":
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        on = _stdout_color(color)
        click.echo(render_search(result, color=on), color=on)
    sys.exit(0 if result.hits else 1)


@cli.command("list")
@filter_options
@click.option("-n", "--limit", type=click.IntRange(min=1), metavar="N", help="List at most N records (default: all).")
@click.option("--format", "output_format", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True,
              help="table: slug, class, repository and place; json and csv add id, severity, family, tags and message.")
@color_option
@db_option
def list_command(repos, tags, families, classes, distributions, limit: int | None, output_format: str, color: bool | None,
                 db_path: Path | None) -> None:  # fmt: skip
    """List records, ordered by repository and slug, with the same filters as search.

    The listing is streamed: rows are written as SQLite reads them, so a million records
    cost no more memory than ten. The table fits the terminal (long cells end in …); json is
    one array, csv has a header row and tags separated by spaces. Exit status: 0 listed, 1 no
    record matches.

    \b
    Examples:
      errordb list --repo sgl-project/sglang
      errordb list --tag dspark --format csv > dspark.csv
      errordb list --family missing-required-argument --format json | jq '.[].slug'
      errordb list --distribution requests
    """
    from errordb import browse
    from errordb.store import open_connection

    db = open_connection(db_path, learned=True)
    try:
        rows = browse.list_records(db, _filters(repos, tags, families, classes, distributions), limit=limit)
        out = sys.stdout
        if output_format == "json":
            count = browse.write_json(rows, out)
        elif output_format == "csv":
            count = browse.write_csv(rows, out)
        else:
            width = shutil.get_terminal_size().columns if out.isatty() else None
            count = browse.write_table(rows, out, width=width, color=_stdout_color(color))
            if count == 0:
                click.echo("No record matches these filters.", err=True)
    finally:
        db.close()
    sys.exit(0 if count else 1)


@cli.command()
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True, metavar="N", help="Show the largest N groups of each kind (0: all).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@color_option
@db_option
def stats(top: int, output_format: str, color: bool | None, db_path: Path | None) -> None:
    """Count the records per repository, exception class, failure family and tag.

    Also the dataset version (the newest datasetVersion ingested), the store layout, the
    database file's size and its path.

    \b
    Examples:
      errordb stats
      errordb stats --db errordb.db --top 0 --format json
    """
    from errordb import browse
    from errordb.store import open_connection, resolve_db_path

    path = resolve_db_path(db_path, learned=True)
    db = open_connection(path)
    try:
        data = browse.stats(db, path, top=top or None)
    finally:
        db.close()
    if output_format == "json":
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        on = _stdout_color(color)
        click.echo(browse.render_stats(data, color=on), color=on)


@cli.command()
@click.option("--records", "records", type=click.Path(exists=True, path_type=Path), metavar="PATH",
              help="Record files or folder to preview (default: the bundled records); ingested into a temporary database.")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDRESS", help="Address to listen on.")
@click.option("-p", "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, metavar="PORT", help="Port to listen on (0: any free port).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True, metavar="SECONDS",
              help="Seconds between checks for changed records or templates.")
@click.option("-v", "--verbose", is_flag=True, help="Log every request.")
@click.pass_context
def serve(ctx: click.Context, records: Path | None, db_path: Path | None, host: str, port: int, interval: float, verbose: bool) -> None:
    """Preview the site: serve it from the store, each page made when it is asked for.

    The pages come from --records (ingested into a temporary database), or from --db (only
    read), or from the bundled records; --records wins over $ERRORDB_DB. They are served on
    http://127.0.0.1:8000/ by a local HTTP server, never cached by the browser, and always
    show the store and the templates as they are now: when a record file or families.toml
    changes, the records are ingested again (unchanged ones cost little); reload the page to
    see it. A failed ingest is reported in one line and the records stay as they were.
    Ctrl-C stops the server and removes the temporary files. For a preview only: use
    `errordb build` and a real web server to publish.

    \b
    Examples:
      errordb serve
      errordb serve --records records/ --port 8080
      errordb serve --db errordb.db --port 0
    """
    from errordb.publish.serve import serve as serve_site

    if records is not None and db_path is not None:
        if ctx.get_parameter_source("db_path") == click.core.ParameterSource.ENVIRONMENT:
            db_path = None  # an explicit --records beats the environment's database
        else:
            raise click.UsageError("give --records or --db, not both")
    serve_site(records, db_path, host=host, port=port, interval=interval, verbose=verbose)


@cli.command()
@db_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("site/api"), show_default=True,
              help="Folder to write the API into; it is replaced as a whole.")
@click.option("--base-url", envvar="ERRORDB_SITE_URL",
              help="URL the site is served at (env ERRORDB_SITE_URL; default: the dataset's own site_url, else /); "
                   "the API's links point to <base-url>api/.")
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
    from errordb.publish.api import export_api, export_sqlite
    from errordb.store import meta, open_db

    db = open_db(db_path)
    try:
        total = int(meta(db).get("recordCount") or 0)
        with _progress("export", total, quiet) as advance:
            report = export_api(db, out, base_url=base_url or meta(db).get("siteUrl") or "/", progress=advance)
        if not quiet:
            click.echo(f"{out}: {report.summary()}", err=True)
        if sqlite_path:
            if not quiet:
                click.echo(f"writing {sqlite_path} ...", err=True)
            release = export_sqlite(db, sqlite_path)
            if not quiet:
                click.echo(f"{release.database}, {release.metadata}: written", err=True)
    finally:
        db.close()


@cli.command()
@db_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("site"), show_default=True,
              help="Folder to write the site into; it is replaced as a whole.")
@click.option("--base-url", envvar="ERRORDB_SITE_URL",
              help="Where the site is served (/, /errordb/ or https://host/errordb/; env ERRORDB_SITE_URL; default: the "
                   "dataset's own site_url, else /): used by "
                   "canonical links, the 404 page and the API, and for sitemap.xml, written only for a full URL. Links "
                   "between pages are relative.")
@click.option("--incremental", is_flag=True, hidden=True, help="Accepted for older scripts: every build renders everything.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: 2 from 2000 records on, else 1).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def build(db_path: Path | None, out: Path, base_url: str, incremental: bool, jobs: int | None, quiet: bool) -> None:
    """Build the static documentation site, with the JSON API under OUT/api.

    One page per error at errors/<slug>/, the index with the explain box, pages per
    repository, tag and failure family, search, a page documenting the JSON API, 404.html and,
    with a full --base-url, sitemap.xml. Everything works from file:// and under any sub-path;
    nothing is fetched from other hosts. The site is built beside OUT and swapped into place: a
    failed build leaves the previous site as it was. Two builds of the same database are byte-identical. Every build
    renders every page (to preview edits as you make them, use `errordb serve`).

    \b
    Example:
      errordb build --db errordb.db --out site/ --base-url https://errordb.example/
    """
    from errordb.publish.site import build_site

    with _progress("build", None, quiet) as advance:
        report = build_site(db_path, out, base_url=base_url or _dataset_site_url(db_path) or "/", incremental=incremental,
                            jobs=jobs, progress=advance)
    if not quiet:
        click.echo(report.summary(), err=True)


@cli.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--repo", required=True, help="GitHub repository the sources belong to, as OWNER/NAME.")
@click.option("--sha", required=True, help="Full 40-digit commit sha of the sources (githubUrl is pinned to it).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("records"), show_default=True,
              help="Records tree to write into, as <out>/<owner>/<repo>/<id>.json.")
@click.option("--prefix", default="", help="Where PATH sits inside the repository (src/click); default: PATH is its root.")
@click.option("--prune", is_flag=True, help="Delete draft records of REPO under PATH whose raise is gone.")
@click.option("--analyzed-at", help="analyzedAt of the records, a UTC date or time "
              "(default: $SOURCE_DATE_EPOCH, else 1970-01-01: never the clock, so runs are reproducible).")
@click.option("--dataset-version", help="datasetVersion of the records, a UTC time (default: analyzedAt at midnight).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every unreadable raise there, one 'file:line: reason: detail' a line.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def harvest(path: Path, repo: str, sha: str, out: Path, prefix: str, prune: bool, analyzed_at: str | None,
            dataset_version: str | None, report_path: Path | None, quiet: bool) -> None:
    """Draft records from the raise statements of a Python source tree.

    PATH (a folder or one .py file) is read with ast, never imported or run. Every raise
    whose message can be read from the source (a literal, an f-string, % or .format of a
    literal, a variable certainly holding one) becomes a draft record: message, pattern, class, file,
    line, source window, pinned URL, slug and a stable id are filled in; documentation and
    solutions are left for an analyst, and the record is tagged `draft`. Raises whose message
    cannot be read are counted and listed (--report), never guessed. Running again on a newer
    commit updates moved raises in place and keeps what an analyst wrote. Nothing is written
    unless the whole run succeeds; rules and the id scheme: docs/harvest.md.

    \b
    Example:
      errordb harvest ~/src/click/src/click --prefix src/click --repo pallets/click \\
          --sha 0123456789abcdef0123456789abcdef01234567 --out records/ --prune --analyzed-at 2026-08-28
    """
    from errordb.harvest.drafts import harvest as harvest_tree

    # One bar per stage of the run (two passes over the files, checking drafts, writing).
    with _stage_progress("harvest", quiet) as update:
        report = harvest_tree(path, repo=repo, sha=sha, out=out, prefix=prefix, prune=prune,
                              analyzed_at=analyzed_at, dataset_version=dataset_version, progress=update)
    if report_path is not None:
        from errordb.atomic import write_text

        write_text(report_path, report.listing())
    if not quiet:
        click.echo(f"{out}: {report.summary()}", err=True)


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--path", "paths", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Learn a source tree too (your own project): its .py files, under the folder's name. Repeatable.")
@click.option("--python", "python", metavar="PYTHON", help="Learn what this interpreter has installed (a project's "
              ".venv/bin/python). Default: the active virtual environment's ($VIRTUAL_ENV), else the one errordb runs in.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Processes that read sources: the standard library, distributions, trees (default: up to 2).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def learn(names: tuple[str, ...], paths: tuple[Path, ...], python: str | None, jobs: int | None, quiet: bool) -> None:
    """Learn the errors your installed Python code can raise, as draft records.

    Reads the standard library and every distribution installed for the interpreter (or only
    the distributions NAMES, or the trees given with --path) with ast, never importing or
    running them, and keeps a draft record of each raise whose message can be read, in a
    local layer in the cache folder. explain, show, search and list then answer from the
    bundled records and these drafts together: a draft says which installed distribution and
    version it comes from, where it is raised, and when (the conditions of the branches
    around the raise). A distribution already learned at the same version is skipped, one
    that changed version is read again, and (when learning everything) one no longer
    installed is dropped. Files that do not parse are counted, never fatal.

    \b
    Examples:
      errordb learn                            # the standard library and every installed distribution
      errordb learn requests click             # only these
      errordb learn --python .venv/bin/python  # another environment
      errordb learn --path src/myproject       # your own code
    """
    from errordb.harvest.installed import learn as learn_installed

    with _progress("learn: files", None, quiet) as advance:
        report = learn_installed(names, paths, python=python, jobs=jobs,
                                 progress=lambda done, total, files, all_files: advance(files, all_files, f"{done}/{total} distributions"))
    if not quiet:
        click.echo(report.summary(), err=True)
