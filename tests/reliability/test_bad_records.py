"""Every way a record file can be wrong: one line naming file, record and field, exit 2, and
nothing changed (the database byte for byte, the site built from it).

Each case writes one bad file into a copy of the bundled records and ingests the whole tree
through the CLI into one shared database; the database's bytes are compared after every refusal,
and at the end the site built from that database is compared with the site built before.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import KIMI_PP_ERROR, KIMI_VALUE_ERROR, copy_records, envelope, write_envelope
from reliability_support import assert_one_line_error, db_files, run_cli, run_process, tree_digest

K = KIMI_VALUE_ERROR


def _place(records: Path) -> Path:
    return records / "sgl-project" / "sglang" / f"{K}.json"


def _with(**changes) -> Callable[[Path], Path]:
    """Rewrite the Kimi ValueError record with ``changes`` to its fields."""

    def setup(records: Path) -> Path:
        data = envelope(K)
        data["record"].update(changes)
        # At the original file's place whatever the id or repo says (a "../" in them must not
        # move the file: it is the loader that has to refuse it).
        return write_envelope(records, data, name=f"sgl-project/sglang/{K}.json")

    return setup


def _raw(edit: Callable[[bytes], bytes]) -> Callable[[Path], Path]:
    """Rewrite the Kimi ValueError file's bytes with ``edit``."""

    def setup(records: Path) -> Path:
        path = _place(records)
        path.write_bytes(edit(path.read_bytes()))
        return path

    return setup


def _without(name: str) -> Callable[[Path], Path]:
    def setup(records: Path) -> Path:
        data = envelope(K)
        del data["record"][name]
        return write_envelope(records, data)

    return setup


def _envelope_with(**changes) -> Callable[[Path], Path]:
    def setup(records: Path) -> Path:
        data = envelope(K)
        data.update(changes)
        return write_envelope(records, data)

    return setup


def _duplicate_id(records: Path) -> Path:
    write_envelope(records, envelope(K), name="aaa-first/copy.json")  # walked before sgl-project/
    return _place(records)


def _duplicate_slug(records: Path) -> Path:
    data = envelope(KIMI_PP_ERROR)
    data["record"].update(id="ffffffffffffffff", slug=envelope(K)["record"]["slug"])
    return write_envelope(records, data)


def _big_field(records: Path) -> Path:
    return _with(documentation="x" * 50_000_000)(records)


def _huge_file(records: Path) -> Path:
    # 65 MB: over the loader's 64 MB cap, so it is refused before it is parsed.
    path = _place(records)
    head = f'{{"record":{{"id":"{K}","documentation":"'.encode()
    with open(path, "wb") as handle:
        handle.write(head)
        handle.write(b"x" * (65 << 20))
    return path


def _hostile_file_name(records: Path) -> Path:
    path = records / "evil\x1b]0;pwned\x07\x1b[2J\nname.json"
    path.write_text("{", encoding="utf-8")
    return path


def _bad_json_line(records: Path) -> Path:
    path = records / "more.jsonl"
    good = envelope(KIMI_PP_ERROR)
    good["record"].update(id="eeeeeeeeeeeeeeee", slug="another-slug")
    path.write_text(json.dumps(good) + "\n" + '{"record": {"id": "dddddddddddddddd", "slug": ' + "\n", encoding="utf-8")
    return path


def _deep(records: Path) -> Path:
    return _raw(lambda b: b.replace(b'"tags":[', b'"tags":[' + b"[" * 100_000 + b"]" * 100_000 + b",", 1))(records)


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Path], Path]
    record: str | None  # the id the error must name (None: none, the file alone)
    field: str | None  # the field it must name (None: a problem of the whole file)
    says: str
    source_suffix: str = ""  # ":2" for the second line of a JSON Lines file


DSPARK = "DSPARK requires explicit layer_ids for aux hidden capture."
CASES = [
    Case("malformed JSON (a missing comma)", _raw(lambda b: b.replace(b'"severity":"error",', b'"severity":"error" ', 1)), K, "severity", "malformed JSON: Expecting ',' delimiter"),
    Case("truncated file", _raw(lambda b: b[: len(b) // 2]), K, "githubUrl", "malformed JSON: Unterminated string"),
    Case("empty file", _raw(lambda b: b""), None, None, "malformed JSON: Expecting value"),
    Case("not an object", _raw(lambda b: b"[" + b + b"]"), None, None, "Input should be a valid dictionary"),
    Case("duplicate JSON key", _raw(lambda b: b.replace(b'"severity":"error"', b'"severity":"error","severity":"info"', 1)), K, "severity", "duplicate key 'severity'"),
    Case("NaN", _raw(lambda b: b.replace(b'"lineNumber":2892', b'"lineNumber":NaN', 1)), K, None, "NaN is not valid JSON"),
    Case("nesting 100,000 deep", _deep, K, None, "malformed JSON: maximum recursion depth"),
    Case("wrong type: string for int", _with(lineNumber="2892"), K, "lineNumber", "valid integer"),
    Case("wrong type: bool for int", _with(lineNumber=True), K, "lineNumber", "valid integer"),
    Case("wrong type: float for int", _with(lineNumber=2892.0), K, "lineNumber", "valid integer"),
    Case("wrong type: list in a list", _with(tags=[["dspark"]]), K, "tags[0]", "valid string"),
    Case("wrong type: object for text", _with(documentation={"a": 1}), K, "documentation", "valid string"),
    Case("wrong type: null for required", _with(errorClass=None), K, "errorClass", "valid string"),
    Case("integer beyond SQLite's 64 bits", _with(sourceCodeStart=10**30, lineNumber=10**30, sourceCodeEnd=10**30), K, "lineNumber", "less than or equal to 2147483647"),
    Case("line number 2**63", _with(sourceCodeEnd=2**63), K, "sourceCodeEnd", "less than or equal to 2147483647"),
    Case("missing field", _without("severity"), K, "severity", "Field required"),
    Case("missing envelope field", _raw(lambda b: json.dumps({"record": json.loads(b)["record"]}).encode()), K, "datasetVersion", "Field required"),
    Case("unknown field", _with(extraField=1), K, "extraField", "Extra inputs are not permitted"),
    Case("unknown envelope field", _envelope_with(signature="x"), K, "signature", "Extra inputs are not permitted"),
    Case("schemaVersion 3", _with(schemaVersion=3), K, "schemaVersion", "not supported"),
    Case("invalid regex", _with(messagePattern="DSPARK ("), K, "messagePattern", "does not compile"),
    Case("catastrophic regex (a+)+$", _with(messagePattern="(a+)+$"), K, "messagePattern", "does not fully match errorMessage"),
    Case("backreference (RE2 refuses)", _with(errorMessage="aa", messagePattern=r"(a)\1"), K, "messagePattern", "RE2 cannot run this pattern"),
    Case("lookahead (RE2 refuses)", _with(messagePattern=r"DSPARK(?= requires).*"), K, "messagePattern", "RE2 cannot run this pattern"),
    Case("repeat over RE2's limit", _with(errorMessage="a" * 1001, messagePattern="a{1001}"), K, "messagePattern", "RE2 cannot run this pattern"),
    Case("pattern over RE2's memory budget", _with(messagePattern="((((a{100}){100}){100}){100})|" + DSPARK.replace(".", r"\.")), K, "messagePattern", "RE2 cannot run this pattern"),
    Case("pattern that does not match its message", _with(messagePattern=r"DSPARK requires explicit layer_ids"), K, "messagePattern", "does not fully match errorMessage"),
    Case("id with ../", _with(id="../../etc/passwd"), None, "id", "should match pattern"),
    Case("id with /", _with(id="/etc/passwd/0000"), None, "id", "should match pattern"),
    Case("id with NUL", _with(id="b318b4f84268925\x00"), None, "id", "should match pattern"),
    Case("slug with ../", _with(slug="../escaped"), K, "slug", "should match pattern"),
    Case("slug with /", _with(slug="a/b"), K, "slug", "should match pattern"),
    Case("slug with NUL", _with(slug="a\x00b"), K, "slug", "should match pattern"),
    Case("repo ..", _with(repo="sgl-project/.."), K, "repo", "must not be '.' or '..'"),
    Case("filePath with ../", _with(filePath="../../etc/passwd"), K, "filePath", "relative path inside the repository"),
    Case("githubUrl javascript:", _with(githubUrl="javascript:alert(1)"), K, "githubUrl", "https URL on github.com"),
    Case("githubUrl with a final newline", _with(githubUrl="https://github.com/sgl-project/sglang\n"), K, "githubUrl",
         "https URL on github.com"),
    Case("NUL in text", _with(errorMessage="DSPARK\x00", messagePattern="DSPARK."), K, "errorMessage", "control character U+0000"),
    Case("C1 control (8-bit CSI) in a list item", _with(solutions=["fine", "\x9b2J"]), K, "solutions[1]", "control character U+009B"),
    Case("duplicate id", _duplicate_id, K, "id", "duplicate id"),
    Case("duplicate slug", _duplicate_slug, "ffffffffffffffff", "slug", "is already the slug of record"),
    Case("50 MB field", _big_field, K, "documentation", "at most 100000 characters"),
    Case("65 MB file", _huge_file, K, None, "record files are limited to 67108864"),
    Case("invalid UTF-8", _raw(lambda b: b.replace(b"DSPARK requires", b"DSP\xffRK requires", 1)), K, "errorMessage", "not valid UTF-8"),
    Case("lone surrogate", _raw(lambda b: b.replace(b"DSPARK requires", b"DSP\\ud800RK requires", 1)), K, "errorMessage", "valid string"),
    Case("UTF-8 byte-order mark", _raw(lambda b: b"\xef\xbb\xbf" + b), K, None, "byte-order mark"),
    Case("control characters in the file name", _hostile_file_name, None, None, "malformed JSON"),
    Case("bad line in JSON Lines", _bad_json_line, "dddddddddddddddd", "slug", "malformed JSON", source_suffix=":2"),
]  # fmt: skip


def _shown(path: Path) -> str:
    """How the error names ``path``: control characters as \\x escapes."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in str(path))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The bundled records in a database, and the site built from it (both through the CLI)."""
    folder = tmp_path_factory.mktemp("store")
    db = folder / "errordb.db"
    assert run_cli("ingest", copy_records(folder / "records"), "--db", db, "-q").exit_code == 0
    site = folder / "site"
    assert run_cli("build", "--db", db, "--out", site, "-q").exit_code == 0
    return {"db": db, "before": db_files(db), "site": site, "site_before": tree_digest(site), "refused": []}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_record_file_is_one_line_exit_2_and_changes_nothing(case, store, tmp_path):
    records = copy_records(tmp_path / "records")
    bad = case.setup(records)
    result = run_cli("ingest", records, "--db", store["db"], "-q")
    where = f"{_shown(bad)}{case.source_suffix}: " + (f"record {case.record}: " if case.record else "") + (f"{case.field}: " if case.field else "")
    line = assert_one_line_error(result.stderr, result.exit_code, where, case.says)
    assert "\x1b" not in line and "\x07" not in line
    assert db_files(store["db"]) == store["before"], "the database changed"
    store["refused"].append(case.name)
    # The same file into a database that does not exist yet: no file is left behind.
    fresh = tmp_path / "new.db"
    assert run_cli("ingest", records, "--db", fresh, "-q").exit_code == 2
    assert sorted(os.listdir(tmp_path)) == ["records"]


def test_the_site_built_after_every_refusal_is_the_site_before(store, figures):
    assert len(store["refused"]) == len(CASES)
    assert run_cli("build", "--db", store["db"], "--out", store["site"], "-q").exit_code == 0
    assert tree_digest(store["site"]) == store["site_before"]
    figures.add(
        "Bad record files",
        f"{len(CASES)} kinds of broken file ({'; '.join(c.name for c in CASES)}; CASES in "
        "tests/reliability/test_bad_records.py), ingested through the CLI into an existing database and into a new one",
        len(CASES) * 2,
        f"all {len(CASES)} refused with exit 2 and one line naming file, record and field; database bytes unchanged "
        "after each; no new file left; site rebuilt afterwards byte-identical",
    )


def test_the_cli_as_a_process_gives_the_same_one_line(store, tmp_path):
    records = copy_records(tmp_path / "records")
    bad = _with(messagePattern="DSPARK (")(records)
    done = run_process("ingest", records, "--db", store["db"])
    assert_one_line_error(done.stderr, done.returncode, f"{bad}: record {K}: messagePattern: does not compile")
    assert db_files(store["db"]) == store["before"]


def test_check_still_reports_a_pattern_that_does_not_match_its_message(tmp_path):
    records = copy_records(tmp_path / "records")
    bad = _with(messagePattern="DSPARK")(records)
    result = run_cli("check", records)
    assert result.exit_code == 1
    assert f"{bad}: record {K}: messagePattern: does not fully match errorMessage" in result.stdout.splitlines()


def test_a_catastrophic_pattern_that_matches_its_message_is_accepted_and_runs_in_linear_time(tmp_path, figures):
    # (a+)+$ backtracks exponentially in Python's re; RE2 runs it in time linear in the input.
    records = copy_records(tmp_path / "records")
    _with(errorMessage="aaaa", messagePattern="(a+)+$", slug="aaaa")(records)
    db = tmp_path / "errordb.db"
    assert run_cli("ingest", records, "--db", db, "-q").exit_code == 0
    hostile = "ValueError: " + "a" * 100_000 + "!"
    started = time.perf_counter()
    result = run_cli("explain", hostile, "--db", db, "--format", "json")
    seconds = time.perf_counter() - started
    assert result.exit_code in (0, 1), result.output  # it ends (in RE2: bench/adversarial.py times it)
    figures.add("Catastrophic regex in a record", "(a+)+$ against 100,000 a's and a '!' (explain)", 1, f"finished in {seconds:.2f} s")


# build and export read a database: a bad one is refused, and the previous output stays. -------


def _damaged_databases(clean: Path, folder: Path) -> dict[str, tuple[Path, list[str]]]:
    """Databases build and export must refuse, each with what the error has to name."""
    folder.mkdir()
    garbage = folder / "garbage.db"
    garbage.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    truncated = folder / "truncated.db"
    truncated.write_bytes(clean.read_bytes()[: len(clean.read_bytes()) // 3])
    slug, record_id = folder / "slug.db", folder / "id.db"
    for path, sql in ((slug, "UPDATE records SET slug = '../../x' WHERE id = ?"), (record_id, "UPDATE records SET id = 'ZZZ/../x' WHERE id = ?")):
        shutil.copy(clean, path)
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("PRAGMA foreign_keys = OFF")
            conn.execute(sql, [K])
        conn.close()
    # What each command's error must hold; None: the command accepts the database (the API
    # is data: a slug is a value in it, not a path, so export takes a slug build refuses).
    return {
        "garbage after an SQLite header": (garbage, {"build": [str(garbage)], "export": [str(garbage)]}),
        "truncated to a third": (truncated, {"build": [str(truncated), "malformed"], "export": [str(truncated), "malformed"]}),
        "hand-edited slug ../../x": (slug, {"build": ["slug '../../x' cannot name a page"], "export": None}),
        "hand-edited id ZZZ/../x": (record_id, {"build": ["record id 'ZZZ/../x'"], "export": ["record id 'ZZZ/../x'"]}),
    }


def test_build_and_export_refuse_a_bad_database_and_leave_the_previous_output(store, tmp_path, figures):
    site, api = tmp_path / "site", tmp_path / "api"
    assert run_cli("build", "--db", store["db"], "--out", site, "-q").exit_code == 0
    assert run_cli("export", "--db", store["db"], "--out", api, "-q").exit_code == 0
    before = {"build": tree_digest(site), "export": tree_digest(api)}
    damaged = _damaged_databases(store["db"], tmp_path / "dbs")
    refused = 0
    for name, (db, expected) in damaged.items():
        for command, out in (("build", site), ("export", api)):
            result = run_cli(command, "--db", db, "--out", out, "-q")
            if expected[command] is None:
                assert result.exit_code == 0, (name, result.stderr)
                assert run_cli(command, "--db", store["db"], "--out", out, "-q").exit_code == 0  # back to the clean one
            else:
                assert_one_line_error(result.stderr, result.exit_code, *expected[command])
                refused += 1
            assert tree_digest(out) == before[command], (name, command)
            assert sorted(os.listdir(tmp_path)) == ["api", "dbs", "site"], name  # no staging folder left
    figures.add(
        "Bad database for build and export",
        f"{len(damaged)} damaged databases ({'; '.join(damaged)}) given to `errordb build` and `errordb export` "
        "over an existing site and API",
        len(damaged) * 2,
        f"{refused} refused with exit 2 and one line naming the file or the bad value; export takes the ../ slug "
        "(a value in JSON, not a path); site and API unchanged after every refusal; no staging folder left",
    )
