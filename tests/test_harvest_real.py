"""Proof on real code: harvest installed libraries, trigger their real errors, explain them.

The installed sources of click, jinja2, pydantic, sqlite_utils and the standard library's
json, argparse and pathlib are harvested once per session (never imported by the harvest;
the libraries are imported here only to make them fail). Each case below misuses a library
the way a user would; the exception's traceback goes to ``errordb.explain`` against a
database ingested from the harvested records, and the top match must name the exact file
and raise line of the frame that raised (the innermost one). docs/harvest.md lists the
misses and why.

An exception whose innermost frame is not a ``raise`` statement (it was raised by C code,
or the library rewrote the traceback, as jinja2 does for template errors) has no raise line
to match: it is reported in its own group and left out of the rate.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import linecache
import pathlib
import sqlite3
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import click
import jinja2
import pydantic
import pytest
import sqlite_utils

from errordb.records.check import check
from errordb.explainer.explanation import explain
from errordb.harvest.drafts import harvest
from errordb.store import connect, ingest

#: Harvested modules: (repository, the folder the module's source sits in, in the repository).
LIBRARIES = {
    "click": ("pallets/click", "src"),
    "jinja2": ("pallets/jinja", "src"),
    "pydantic": ("pydantic/pydantic", ""),
    "sqlite_utils": ("simonw/sqlite-utils", ""),
    "json": ("python/cpython", "Lib"),
    "argparse": ("python/cpython", "Lib"),
    "pathlib": ("python/cpython", "Lib"),
}
#: The commit of the installed versions is unknown: a fixed placeholder sha (docs/harvest.md).
PLACEHOLDER_SHA = "0" * 40
ANALYZED_AT = "2026-08-28"
#: The case name prefix of each library.
PREFIXES = {"click": "click", "jinja": "jinja2", "pyd": "pydantic", "su": "sqlite_utils",
            "json": "json", "ap": "argparse", "pl": "pathlib"}  # fmt: skip
MIN_CASES = 50
MIN_EXACT_RATE = 0.90


def source_of(module: str) -> tuple[Path, str]:
    """The installed source of a module (its package folder or its file) and its path in the repository."""
    origin = Path(importlib.util.find_spec(module).origin)
    root = LIBRARIES[module][1]
    if origin.name == "__init__.py":
        return origin.parent, "/".join(p for p in (root, origin.parent.name) if p)
    return origin, root


@dataclass
class Harvested:
    out: Path
    db_path: Path
    counts: dict[str, int]
    files: int
    seconds: float


@pytest.fixture(scope="session")
def harvested(tmp_path_factory) -> Harvested:
    out = tmp_path_factory.mktemp("harvest") / "records"
    counts, files, seconds = {}, 0, 0.0
    for module, (repo, _) in LIBRARIES.items():
        path, prefix = source_of(module)
        started = time.perf_counter()
        report = harvest(path, repo=repo, sha=PLACEHOLDER_SHA, out=out, prefix=prefix, analyzed_at=ANALYZED_AT)
        seconds += time.perf_counter() - started
        counts[module] = report.records
        files += report.files
    db_path = out.parent / "harvest.db"
    ingest([out], db_path)
    return Harvested(out, db_path, counts, files, seconds)


def test_harvested_records_pass_check(harvested):
    assert check([harvested.out]) == []
    assert all(count > 10 for count in harvested.counts.values()), harvested.counts


# ---------------------------------------------------------------------------- the cases

CASES = []


def case(function):
    CASES.append(function)
    return function

# ---- click: bad values for parameter types, misdeclared options, bad command lines
@case
def click_int():
    click.INT.convert("abc", None, None)

@case
def click_float():
    click.FLOAT.convert("x1", None, None)

@case
def click_bool():
    click.BOOL.convert("maybe", None, None)

@case
def click_choice():
    click.Choice(["a", "b"]).convert("c", None, None)

@case
def click_intrange():
    click.IntRange(0, 10).convert(42, None, None)

@case
def click_floatrange():
    click.FloatRange(0, 1).convert(5.0, None, None)

@case
def click_datetime():
    click.DateTime().convert("not a date", None, None)

@case
def click_path_missing():
    click.Path(exists=True).convert("/no/such/file/here", None, None)

@case
def click_path_dir():
    click.Path(dir_okay=False).convert("/tmp", None, None)

@case
def click_uuid():
    click.UUID.convert("nope", None, None)

@case
def click_file():
    click.File("r").convert("/no/such/file", None, None)

@case
def click_multiple_flag():
    click.Option(["--a"], is_flag=True, multiple=True, count=True)

@case
def click_count_flag():
    click.Option(["--a"], count=True, is_flag=True)

@case
def click_nargs_option():
    click.Option(["--a"], nargs=-1)

@case
def click_no_context():
    click.get_current_context()

@case
def click_twice():
    @click.command()
    def f(): pass
    click.command()(f)

@case
def click_argument_two_decls():
    click.Argument(["a", "b"])

@case
def click_extra_args():
    @click.command()
    def f(): pass
    f.main(["x"], standalone_mode=False)

@case
def click_missing_command():
    @click.group()
    def g(): pass
    @g.command()
    def sub(): pass
    g.main([], standalone_mode=False, )

@case
def click_option_requires_arg():
    @click.command()
    @click.option("--n")
    def f(n): pass
    f.main(["--n"], standalone_mode=False)

@case
def click_flag_value():
    @click.command()
    @click.option("--v", is_flag=True)
    def f(v): pass
    f.main(["--v=3"], standalone_mode=False)

@case
def click_unknown_color():
    click.style("x", fg="nocolor")

@case
def click_missing_option():
    @click.command()
    @click.option("--n", required=True)
    def f(n): pass
    f.main([], standalone_mode=False)

@case
def click_no_such_option():
    @click.command()
    def f(): pass
    f.main(["--zzz"], standalone_mode=False)

@case
def click_prompt_hide_flag():
    click.Option(["--a"], prompt=True, hide_input=True, is_flag=True)

@case
def click_same_flag():
    click.Option(["--x/--x"])

@case
def click_no_name():
    click.Option([])

@case
def click_secondary_nonbool():
    click.Option(["--x/--no-x"], type=int, is_flag=False)

@case
def click_progress_no_iter():
    click.progressbar()

@case
def click_progress_no_with():
    iter(click.progressbar([1]))

@case
def click_write_dl():
    click.HelpFormatter().write_dl([("a",)])

@case
def click_option_name_twice():
    click.Option(["a", "b", "--x"])

# ---- jinja2: missing templates and loaders, bad templates, bad filter arguments, macros, nodes
@case
def jinja_no_loader():
    jinja2.Environment().get_template("x.html")

@case
def jinja_not_found():
    jinja2.Environment(loader=jinja2.DictLoader({})).get_template("missing.html")

@case
def jinja_fs_not_found():
    jinja2.Environment(loader=jinja2.FileSystemLoader("/nonexistent/errordb-templates")).get_template("missing.html")

@case
def jinja_select_empty():
    jinja2.Environment(loader=jinja2.DictLoader({})).select_template([])

@case
def jinja_syntax():
    jinja2.Environment().from_string("{% if %}")

@case
def jinja_unexpected_end():
    jinja2.Environment().from_string("{% for x in y %}")

@case
def jinja_undefined():
    jinja2.Environment(undefined=jinja2.StrictUndefined).from_string("{{ x + 1 }}").render()

@case
def jinja_no_filter():
    jinja2.Environment().from_string("{{ x|nosuchfilter }}")

@case
def jinja_round_method():
    jinja2.Environment().from_string("{{ 1.5|round(method='x') }}").render()

@case
def jinja_dictsort():
    jinja2.Environment().from_string("{{ d|dictsort(by='x') }}").render(d={})

@case
def jinja_cycler():
    jinja2.utils.Cycler()

@case
def jinja_macro_kwargs():
    jinja2.Environment().from_string("{% macro m(a) %}{% endmacro %}{{ m(1, b=2) }}").render()

@case
def jinja_macro_too_many():
    jinja2.Environment().from_string("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").render()

@case
def jinja_map_no_filter():
    jinja2.Environment().from_string("{{ [1]|map|list }}").render()

@case
def jinja_urlize_scheme():
    jinja2.Environment().from_string("{{ 'x'|urlize(extra_schemes=['bad']) }}").render()

@case
def jinja_xmlattr_key():
    jinja2.Environment().from_string("{{ {'a b': 1}|xmlattr }}").render()

@case
def jinja_sandbox_range():
    from jinja2.sandbox import SandboxedEnvironment
    SandboxedEnvironment().from_string("{{ range(10**9)|list }}").render()

@case
def jinja_compile_nontemplate():
    from jinja2 import nodes
    jinja2.Environment().compile(nodes.Const(1))

@case
def jinja_loader_list():
    jinja2.BaseLoader().list_templates()

@case
def jinja_package_loader():
    jinja2.PackageLoader("json", "templates")

@case
def jinja_node_args():
    from jinja2 import nodes
    nodes.Const(1, 2, 3)

@case
def jinja_node_attr():
    from jinja2 import nodes
    nodes.Const(1, foo=2)

@case
def jinja_node_abstract():
    from jinja2 import nodes
    nodes.Node()

@case
def jinja_sandbox_range2():
    from jinja2.sandbox import SandboxedEnvironment
    SandboxedEnvironment().from_string("{{ range(100000000) }}").render()

# ---- pydantic: models, fields, validators and configuration used wrongly
@case
def pyd_validation():
    class M(pydantic.BaseModel):
        x: int
    M(x="a")

@case
def pyd_bad_config():
    class M(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="bad")
        x: int
    M(x=1)

@case
def pyd_not_defined():
    class M(pydantic.BaseModel):
        x: "Undefined"  # noqa: F821 - the point: a name that is never defined
    M(x=1)

@case
def pyd_validator_no_field():
    class M(pydantic.BaseModel):
        x: int
        @pydantic.field_validator("y")
        @classmethod
        def v(cls, value): return value

@case
def pyd_schema_gen():
    class Foo: pass
    class M(pydantic.BaseModel):
        x: Foo

@case
def pyd_dataclass_twice():
    pydantic.TypeAdapter(int, config=pydantic.ConfigDict()).validate_python("x")

@case
def pyd_field_default_and_factory():
    pydantic.Field(default=1, default_factory=list)

@case
def pyd_computed_no_return():
    class M(pydantic.BaseModel):
        @pydantic.computed_field
        def y(self): return 1
    M.model_json_schema()

@case
def pyd_non_annotated():
    class M(pydantic.BaseModel):
        x = 1

@case
def pyd_root_model_extra():
    class R(pydantic.RootModel[int]):
        model_config = pydantic.ConfigDict(extra="allow")

@case
def pyd_validate_call_bad():
    pydantic.validate_call(1)

@case
def pyd_copy_validate():
    class M(pydantic.BaseModel):
        x: int
    M.model_validate_json("{bad")

@case
def pyd_private_attr():
    class M(pydantic.BaseModel):
        _p: int = pydantic.PrivateAttr(1)
    M().__pydantic_private__.clear(); M()._q

@case
def pyd_field_validator_bare():
    pydantic.field_validator(lambda cls, v: v)

@case
def pyd_ta_config_model():
    class M(pydantic.BaseModel):
        x: int
    pydantic.TypeAdapter(M, config=pydantic.ConfigDict())

# ---- sqlite_utils: tables, columns, keys and searches that do not exist or do not fit
def _db():
    return sqlite_utils.Database(memory=True)

@case
def su_no_args():
    sqlite_utils.Database()

@case
def su_recreate_conn():
    sqlite_utils.Database(sqlite3.connect(":memory:"), recreate=True)

@case
def su_get_missing():
    db = _db(); db["t"].insert({"id": 1}, pk="id"); db["t"].get(2)

@case
def su_transform_missing():
    _db()["nope"].transform()

@case
def su_ignore_replace():
    _db()["t"].insert({"a": 1}, ignore=True, replace=True)

@case
def su_add_fk_no_table():
    db = _db(); db["t"].insert({"a": 1}); db["t"].add_foreign_key("a", "other", "id")

@case
def su_add_fk_no_column():
    db = _db(); db["t"].insert({"a": 1}); db["o"].insert({"id": 1}, pk="id"); db["t"].add_foreign_key("b", "o", "id")

@case
def su_search_no_fts():
    db = _db(); db["t"].insert({"a": "x"}); list(db["t"].search("x"))

@case
def su_pk_hash_id():
    _db()["t"].insert({"a": 1}, pk="a", hash_id="id")

@case
def su_upsert_no_pk():
    db = _db(); db["t"].insert({"id": 1, "a": 1}, pk="id"); db["t"].upsert({"a": 2})

@case
def su_create_no_columns():
    _db().create_table("t", {})

@case
def su_view_missing():
    _db().view("nope").drop()

@case
def su_lookup_not_dict():
    _db()["t"].lookup("x")

@case
def su_drop_index():
    db = _db(); db["t"].insert({"a": 1}); db["t"].drop_index("nope")

@case
def su_rows_bad_json():
    from sqlite_utils.utils import rows_from_file, Format
    rows_from_file(io.BytesIO(b'"x"'), Format.JSON)

@case
def su_not_null_missing():
    _db().create_table("t", {"a": int}, not_null={"b"})

@case
def su_extract_bad():
    db = _db(); db["t"].insert({"a": 1}); db["t"].extract("zz")

@case
def su_fk_bad_tuple():
    _db()["t"].insert({"a": 1}, foreign_keys=[("a",)])

@case
def su_search_query_key():
    db = _db(); db["t"].insert({"a": "x"}); db["t"].enable_fts(["a"]); list(db["t"].search("x", where_args={"query": 1}))

@case
def su_convert_output():
    db = _db(); db["t"].insert({"a": "x", "b": "y"}); db["t"].convert(["a", "b"], str.upper, output="c")

@case
def su_lookup_pk_none():
    _db()["t"].lookup({"a": 1}, pk=None)

@case
def su_fk_other_column():
    db = _db(); db["t"].insert({"a": 1}); db["o"].insert({"id": 1}, pk="id"); db["t"].add_foreign_key("a", "o", "zz")

# ---- json: bad JSON text, values that cannot be encoded
@case
def json_empty():
    json.loads("")

@case
def json_extra():
    json.loads("[1] x")

@case
def json_bom():
    json.loads("\ufeff[]")

@case
def json_type():
    json.loads(5)

@case
def json_unserializable():
    json.dumps(object())

@case
def json_nan():
    json.dumps(float("nan"), allow_nan=False)

@case
def json_circular():
    a = []; a.append(a); json.dumps(a)

@case
def json_keys():
    json.dumps({(1, 2): 3})

@case
def json_property():
    json.loads("{")

@case
def json_delim():
    json.loads('{"a" 1}')

@case
def json_pure_keys():
    json.dumps({(1,): 1}, indent=2)

@case
def json_pure_circular():
    a = {}; a["x"] = a; json.dumps(a, indent=2)

@case
def json_nan_pure():
    json.dumps(float("nan"), allow_nan=False, indent=2)

@case
def json_unterminated():
    json.loads('"abc')

# ---- argparse: bad declarations and bad command lines (exit_on_error=False)
def _parser():
    return argparse.ArgumentParser(exit_on_error=False)

@case
def ap_invalid_choice():
    p = _parser(); p.add_argument("--c", choices=["a", "b"]); p.parse_args(["--c", "z"])

@case
def ap_invalid_int():
    p = _parser(); p.add_argument("--n", type=int); p.parse_args(["--n", "x"])

@case
def ap_conflict():
    p = _parser(); p.add_argument("--a"); p.add_argument("--a")

@case
def ap_not_callable():
    p = _parser(); p.add_argument("--a", type=5)

@case
def ap_unknown_action():
    p = _parser(); p.add_argument("--a", action="nope")

@case
def ap_nargs_zero():
    p = _parser(); p.add_argument("--a", nargs=0)

@case
def ap_required_positional():
    p = _parser(); p.add_argument("a", required=True)

@case
def ap_dest_twice():
    p = _parser(); p.add_argument("a", dest="b")

@case
def ap_mutex():
    p = _parser(); g = p.add_mutually_exclusive_group(); g.add_argument("--a", action="store_true"); g.add_argument("--b", action="store_true"); p.parse_args(["--a", "--b"])

@case
def ap_mutex_required():
    p = _parser(); g = p.add_mutually_exclusive_group(); g.add_argument("a")

@case
def ap_metavar():
    p = _parser(); p.add_argument("--a", nargs=2, metavar=("X", "Y", "Z"))

@case
def ap_filetype_class():
    p = _parser(); p.add_argument("--a", type=argparse.FileType)

@case
def ap_expected_one():
    p = _parser(); p.add_argument("--a"); p.parse_args(["--a"])

@case
def ap_conflict_handler():
    argparse.ArgumentParser(conflict_handler="bogus").add_argument("--x")

@case
def ap_const_nargs():
    p = _parser(); p.add_argument("--a", const=1, nargs=2)

@case
def ap_subparser_conflict():
    p = _parser(); s = p.add_subparsers(); s.add_parser("x"); s.add_parser("x")

@case
def ap_unknown_parser():
    p = _parser(); s = p.add_subparsers(); s.add_parser("x"); p.parse_args(["y"])

@case
def ap_filetype_missing():
    argparse.FileType("r")("/no/such/file")

@case
def ap_intermixed_remainder():
    p = _parser(); p.add_argument("a", nargs=argparse.REMAINDER); p.parse_intermixed_args([])

@case
def ap_bad_nargs():
    p = _parser(); p.add_argument("--a", nargs="x")

# ---- pathlib: bad names, suffixes, patterns and paths
@case
def pl_with_suffix():
    pathlib.PurePath("a.txt").with_suffix("txt")

@case
def pl_with_name_empty():
    pathlib.PurePath("/").with_name("x")

@case
def pl_with_name_bad():
    pathlib.PurePath("a").with_name("b/c")

@case
def pl_relative_to():
    pathlib.PurePath("/a").relative_to("/b")

@case
def pl_as_uri():
    pathlib.PurePath("a").as_uri()

@case
def pl_glob_empty():
    list(pathlib.Path(".").glob(""))

@case
def pl_glob_absolute():
    list(pathlib.Path(".").glob("/x"))

@case
def pl_write_text_bytes():
    pathlib.Path("/nonexistent/errordb-harvest.txt").write_text(b"x")

@case
def pl_bad_arg():
    pathlib.PurePath(5)

@case
def pl_stat_missing():
    pathlib.Path("/no/such/file").stat()

@case
def pl_parents_index():
    pathlib.PurePath("a/b").parents[5]

@case
def pl_double_star():
    list(pathlib.Path(".").glob("a**"))

@case
def pl_with_stem():
    pathlib.PurePath("").with_stem("x")

@case
def pl_bad_suffix2():
    pathlib.PurePath("a").with_suffix("/x")

@case
def pl_bad_suffix_dot():
    pathlib.PurePath("a").with_suffix(".")

# ---------------------------------------------------------------------------- measuring


@dataclass
class Outcome:
    name: str
    kind: str  # exact, miss, tie, no-raise-line
    exception: str
    frame: str
    top: str


def _relative(record: dict) -> str:
    """The record's path as installed: without the repository's source folder (src/, Lib/)."""
    root = next((r for repo, r in LIBRARIES.values() if repo == record["repo"] and r), "")
    path = record["filePath"]
    return path[len(root) + 1 :] if root and path.startswith(root + "/") else path


def outcome(function, db) -> Outcome | None:
    """Run one case; ``None`` if this version of the library no longer fails that way."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            function()
        except Exception as exc:  # the point of each case
            error = exc
        else:
            return None
    frame = traceback.extract_tb(error.__traceback__)[-1]
    where = f"{frame.filename.rsplit('/', 2)[-2:][0]}/{Path(frame.filename).name}:{frame.lineno}"
    text = "".join(traceback.format_exception(error))
    finding = explain(text, db).findings[-1]  # the exception caught is printed last
    best = finding.best
    top = best[0].record if best else None
    summary = f"{type(error).__name__}: {str(error).splitlines()[0][:70] if str(error) else ''}"
    top_text = f"{top['filePath']}:{top['lineNumber']} ({best[0].score:g})" if top else "no match"
    if not linecache.getline(frame.filename, frame.lineno).lstrip().startswith("raise"):
        return Outcome(function.__name__, "no-raise-line", summary, where, top_text)
    places = {(r.record["filePath"], r.record["lineNumber"]) for r in best}
    exact = top is not None and frame.filename.endswith("/" + _relative(top)) and frame.lineno == top["lineNumber"]
    kind = "miss" if not exact else ("exact" if len(places) == 1 else "tie")
    return Outcome(function.__name__, kind, summary, where, top_text + (f", tied with {len(best) - 1}" if kind == "tie" else ""))


def test_real_exceptions_are_matched_to_their_raise_line(harvested, capsys):
    db = connect(harvested.db_path)
    outcomes = [o for o in (outcome(function, db) for function in CASES) if o is not None]
    db.close()
    gated = [o for o in outcomes if o.kind != "no-raise-line"]
    exact = [o for o in gated if o.kind in ("exact", "tie")]  # the top match is the raise line
    rate = len(exact) / len(gated)
    with capsys.disabled():
        print(f"\nharvest: {harvested.files} files in {harvested.seconds:.2f}s "
              f"({harvested.files / harvested.seconds:.0f} files/s); records: {harvested.counts}")  # fmt: skip
        print(f"{len(outcomes)} exceptions: {len(gated)} raised by a raise statement, {len(exact)} of them "
              f"matched to their exact file and line ({rate:.1%}; {sum(o.kind == 'tie' for o in gated)} "
              f"of those tied with another line); {len(outcomes) - len(gated)} without a raise line")  # fmt: skip
        for o in outcomes:
            if o.kind != "exact":
                print(f"  {o.kind:13} {o.name:28} {o.frame:32} {o.exception}  -> {o.top}")
    assert len(gated) >= MIN_CASES
    assert rate >= MIN_EXACT_RATE, [o for o in gated if o.kind == "miss"]
