"""Reference reproductions: run a record's stored guard code in a sandbox.

A *reproduction* runs the code of a record exactly as the record stores it --
the function in ``sourceCode`` that contains ``lineNumber`` -- on small
stand-in objects, and compares what happens with what the record says.

Safety model (record code is data, and untrusted):

* Only reproductions **defined in reviewed files** of this repository
  (``records/repros/*.toml``) run anything.  A definition pins a digest of
  every record field that gets executed or checked (:func:`record_digest`);
  when a record changes (re-ingest, hand edit) its digest no longer matches
  and the reproduction refuses to run (:class:`ReviewMismatch`) until someone
  has read the new code and updated the pin.
* This module (the parent process) never executes record text: it only
  parses it with :mod:`ast` to find the function and to classify snippets.
  ``exec``/``eval``/``compile`` of snippet text happen only in
  ``errordb/repro/child.py``, started as ``python -I -S -B`` in an empty
  temporary directory with a minimal environment and a time limit; a hang or
  a crash is reported as such.
* Ingesting, rendering and exporting never execute anything: renderers read
  the committed transcripts (:func:`load_transcript`), which
  :func:`write_transcripts` produces and a test keeps current.

Typical use (the CLI wires ``errordb repro`` to this)::

    repro = reproduction_for(record_id)            # None if not reviewed
    report = run_reproduction(repro, records)      # records: {id: record}
    print(render_text(report, color=True))
    sys.exit(0 if report.ok else 1)

Maintenance: ``python -m errordb.repro.reproduction digest|write-transcripts|check-transcripts``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from errordb.records.snippet import MAX_SNIPPET_CHARS, snippet_language, split_example_fix

__all__ = [
    "AdviceResult", "DefinitionError", "Disagreement", "ExtractedFunction", "GuardInfo",
    "ExtractionError", "ReproError", "ReproReport", "Reproduction", "ReviewMismatch",
    "ScenarioReport", "ScenarioRun", "SnippetCheck", "all_reproductions",
    "check_transcripts", "extract_enclosing_function", "load_records",
    "load_reproductions", "load_transcript", "record_digest", "render_text",
    "reproduction_for", "run_reproduction", "side_by_side", "snippet_language",
    "split_example_fix", "traceback_path", "transcript_is_current", "transcript_path",
    "transcript_text", "write_transcripts",
]

# --------------------------------------------------------------------------
# locations and constants
# --------------------------------------------------------------------------

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
CHILD_SCRIPT = Path(__file__).resolve().parent / "child.py"


def _records_root() -> Path:
    """``records/`` of the source tree, else the copy bundled in the wheel."""
    in_tree = _PACKAGE_DIR.parent / "records"
    if in_tree.is_dir():
        return in_tree
    return _PACKAGE_DIR / "_bundled" / "records"


RECORDS_ROOT = _records_root()
REPROS_DIR = RECORDS_ROOT / "repros"
TRANSCRIPTS_DIR = REPROS_DIR / "transcripts"

DEFAULT_TIMEOUT = 10.0
PROTOCOL = 1
TRANSCRIPT_KIND = "errordb.reproduction-transcript"
TRANSCRIPT_VERSION = 1

#: Record fields that are executed (snippets), or that verdicts are judged by.
#: Prose fields are left out, so editing documentation does not void a review.
DIGEST_FIELDS = (
    "filePath", "lineNumber", "sourceCode", "sourceCodeStart", "sourceCodeEnd",
    "errorClass", "messagePattern", "exampleFix", "validationCode", "typeGuard",
)



# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


class ReproError(Exception):
    """A reproduction cannot run; nothing has been executed."""


class DefinitionError(ReproError):
    """A file in ``records/repros/`` is malformed."""


class ReviewMismatch(ReproError):
    """A record is missing or differs from the version that was reviewed."""


class ExtractionError(ReproError):
    """No enclosing function can be found for a record's ``lineNumber``."""


# --------------------------------------------------------------------------
# static analysis of record text (parsing only, never execution)
# --------------------------------------------------------------------------


def record_digest(record: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"`` over :data:`DIGEST_FIELDS` of a record dict.

    This is what a reviewed definition pins in its ``[reviewed]`` table.
    """
    payload = {name: record.get(name) for name in DIGEST_FIELDS}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ExtractedFunction:
    """The function of a record's snippet that encloses ``lineNumber``.

    ``text`` is the function's lines exactly as stored (original indentation,
    decorators included); line numbers are the real ones of the file.
    """

    name: str
    first_line: int  # first decorator, or the ``def`` line
    def_line: int
    last_line: int
    text: str

    @property
    def indent(self) -> str:
        first = self.text.splitlines()[0]
        return first[: len(first) - len(first.lstrip())]

    def padded_source(self) -> str:
        """Source whose code objects carry the real line numbers.

        Blank lines stand in for the lines above the function.  An indented
        method gets an ``if True:`` header on the line just above it, so the
        stored text is compiled byte for byte as it is (no dedent, which
        would change multi-line strings and column offsets).
        """
        if not self.indent:
            return "\n" * (self.first_line - 1) + self.text + "\n"
        if self.first_line < 2:
            raise ExtractionError("an indented function cannot start on line 1")
        return "\n" * (self.first_line - 2) + "if True:\n" + self.text + "\n"


_DEF_LINE = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(")


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _is_noise(line: str) -> bool:
    """Blank and comment-only lines: Python ignores their indentation."""
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def extract_enclosing_function(source: str, start_line: int, line: int) -> ExtractedFunction:
    """Find the innermost ``def`` in ``source`` (a file window starting at
    real line ``start_line``) whose body contains real line ``line``.

    The window usually begins and ends mid-statement, so it is never parsed
    as a whole.  For each ``def`` above the line (nearest first), the longest
    run of lines from it that parses gives the function; it must be
    *provably complete* -- followed, inside the window, by a line at or left
    of its ``def`` (a prefix of a cut-off body parses too, and running half
    a function would be a rewrite) -- and must reach ``line``.  Decorators
    are included, and the function must not start at the window's top edge
    (decorators could be cut off).  Only :func:`ast.parse` is used.
    """
    if len(source) > MAX_SNIPPET_CHARS:
        raise ExtractionError("snippet too large")
    lines = source.splitlines()
    target = line - start_line
    if not 0 <= target < len(lines):
        raise ExtractionError(
            f"line {line} is outside the snippet (lines {start_line}..{start_line + len(lines) - 1})")
    for index in range(target, -1, -1):
        match = _DEF_LINE.match(lines[index])
        if not match:
            continue
        indent, name = match.group(1), match.group(2)
        last = _parse_function_at(lines, index, indent, name)
        if last is None or last < target:
            continue  # incomplete, or it ends above the line: look further up
        following = next((text for text in lines[last + 1:] if not _is_noise(text)), None)
        if following is None or len(_indent_of(following)) > len(indent):
            raise ExtractionError(
                f"{name}() may continue past the end of the snippet (line {start_line + len(lines) - 1})")
        first = _decorators_start(lines, index, last, indent, name)
        if all(_is_noise(text) for text in lines[:first]):
            raise ExtractionError(f"{name}() starts at the top of the snippet; decorators may be cut off")
        return ExtractedFunction(
            name=name,
            first_line=start_line + first,
            def_line=start_line + index,
            last_line=start_line + last,
            text="\n".join(lines[first:last + 1]),
        )
    raise ExtractionError(f"no complete function in the snippet encloses line {line}")


def _parse_block(lines: list[str], indent: str) -> ast.Module | None:
    header = "if True:\n" if indent else ""
    try:
        return ast.parse(header + "\n".join(lines))
    except (SyntaxError, ValueError):
        return None


def _first_function(tree: ast.Module, indent: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body = tree.body[0].body if indent and tree.body else tree.body
    node = body[0] if body else None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
        return node
    return None


def _parse_function_at(lines: list[str], index: int, indent: str, name: str) -> int | None:
    """Index of the last line of the function whose ``def`` is ``lines[index]``
    (the longest parseable run of lines from it), or None."""
    offset = 1 if indent else 0
    for end in range(len(lines), index, -1):
        tree = _parse_block(lines[index:end], indent)
        if tree is None:
            continue
        node = _first_function(tree, indent, name)
        return None if node is None else index + node.end_lineno - 1 - offset
    return None


def _decorators_start(lines: list[str], index: int, last: int, indent: str, name: str) -> int:
    """Index of the function's first decorator line (``index`` if none).

    Walks up over ``@`` lines at the def's indentation and deeper lines (a
    multi-line decorator, or the body of the previous function); each ``@``
    candidate is confirmed by parsing.  A statement at the def's level or
    left of it ends the search.
    """
    offset = 1 if indent else 0
    first = index
    for s in range(index - 1, -1, -1):
        text = lines[s]
        if _is_noise(text):
            continue
        here = _indent_of(text)
        if here == indent and text.lstrip().startswith("@"):
            tree = _parse_block(lines[s:last + 1], indent)
            node = tree and _first_function(tree, indent, name)
            # Confirmed when the parsed function's first decorator starts here.
            if node and node.decorator_list and min(d.lineno for d in node.decorator_list) - offset == 1:
                first = s
            continue
        if len(here) <= len(indent):
            break
    return first


def traceback_path(record: Mapping[str, Any]) -> str:
    """The path the reproduced frames carry: ``/opt/<repo name>/<filePath>``.

    Absolute, like every real traceback; a source-checkout layout so the
    record's ``filePath`` appears verbatim as a suffix (what a matcher
    compares); obviously not a path of this machine; and constant, so
    transcripts are byte-identical everywhere.
    """
    repo_name = str(record.get("repo") or "project").rsplit("/", 1)[-1]
    return f"/opt/{repo_name}/{str(record['filePath']).lstrip('/')}"


# --------------------------------------------------------------------------
# reviewed definitions (records/repros/*.toml)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """What a scenario must do on one subject, as pinned by the reviewer."""

    raises: str | None = None          # record id whose error it must raise
    state: dict[str, str] | None = None  # exact state after a normal return
    advice: dict[str, str] = field(default_factory=dict)  # "<id>.<field>" -> verdict


@dataclass(frozen=True)
class SubjectScenario:
    call: str | None = None
    example_fix: str | None = None  # "before" / "after" of the primary record
    guard_record: str | None = None
    expect: Expectation = field(default_factory=Expectation)


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    description: str
    pp: dict[str, int]
    config: dict[str, Any]
    per_subject: dict[str, SubjectScenario]


@dataclass(frozen=True)
class Subject:
    id: str
    label: str
    records: tuple[str, ...]  # first one: default source of the guard
    prelude: str = ""
    state: dict[str, str] = field(default_factory=dict)
    model_state: dict[str, str] = field(default_factory=dict)
    type_guard_calls: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reproduction:
    """A reviewed reproduction, read from ``records/repros/<id>.toml``."""

    id: str
    title: str
    summary: str
    path: Path
    reviewed: dict[str, str]  # record id -> pinned digest
    subjects: tuple[Subject, ...]
    scenarios: tuple[Scenario, ...]
    checks: dict[str, dict[str, str]]  # record id -> {"fails_in", "fixed_in"}
    config: dict[str, Any]
    stand_in_modules: dict[str, dict[str, str]]
    enabled_when: str
    timeout: float

    @property
    def records(self) -> tuple[str, ...]:
        return tuple(self.reviewed)

    def subject_of(self, record_id: str) -> Subject:
        for subject in self.subjects:
            if record_id in subject.records:
                return subject
        raise KeyError(record_id)

    def definition_name(self) -> str:
        """Repository-relative path of the definition (stable, for output)."""
        try:
            return self.path.relative_to(RECORDS_ROOT.parent).as_posix()
        except ValueError:
            return self.path.name


def _require(table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = table.get(key)
    if not isinstance(value, kind):
        raise DefinitionError(f"{where}: {key!r} must be a {kind.__name__}")
    return value


def _parse_definition(path: Path) -> Reproduction:
    """Read one definition file; data only (``tomllib``), nothing is run."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DefinitionError(f"{path.name}: {exc}") from exc
    where = path.name
    reviewed = dict(_require(data, "reviewed", dict, where))
    subjects = []
    for raw in _require(data, "subjects", list, where):
        subjects.append(Subject(
            id=_require(raw, "id", str, where),
            label=_require(raw, "label", str, where),
            records=tuple(_require(raw, "records", list, where)),
            prelude=raw.get("prelude", ""),
            state=dict(raw.get("state", {})),
            model_state=dict(raw.get("model_state", {})),
            type_guard_calls=dict(raw.get("type_guard_calls", {})),
        ))
    subject_ids = {s.id for s in subjects}
    covered = [rid for s in subjects for rid in s.records]
    if sorted(covered) != sorted(reviewed) or len(set(covered)) != len(covered):
        raise DefinitionError(f"{where}: every reviewed record must belong to exactly one subject")
    base_config = dict(data.get("config", {}))
    scenarios = []
    for raw in _require(data, "scenarios", list, where):
        sid = _require(raw, "id", str, where)
        per_subject = {}
        for subject_id in subject_ids:
            entry = raw.get(subject_id)
            if entry is None:
                continue
            expect = entry.get("expect", {})
            per_subject[subject_id] = SubjectScenario(
                call=entry.get("call", raw.get("call")),
                example_fix=entry.get("example_fix", raw.get("example_fix")),
                guard_record=entry.get("guard_record"),
                expect=Expectation(
                    raises=expect.get("raises"),
                    state=expect.get("state"),
                    advice=dict(entry.get("advice", {})),
                ),
            )
        for name, value in per_subject.items():
            if (value.call is None) == (value.example_fix is None):
                raise DefinitionError(f"{where}: scenario {sid}/{name} needs exactly one of call, example_fix")
            if (value.expect.raises is None) == (value.expect.state is None):
                raise DefinitionError(f"{where}: scenario {sid}/{name} expects either raises or state")
        unknown = set(raw) - subject_ids - {"id", "title", "description", "pp", "config", "call", "example_fix"}
        if unknown:
            raise DefinitionError(f"{where}: scenario {sid}: unknown keys {sorted(unknown)}")
        scenarios.append(Scenario(
            id=sid,
            title=_require(raw, "title", str, where),
            description=raw.get("description", ""),
            pp=dict(raw.get("pp", {"world_size": 1, "rank": 0})),
            config={**base_config, **raw.get("config", {})},
            per_subject=per_subject,
        ))
    if len({s.id for s in scenarios}) != len(scenarios):
        raise DefinitionError(f"{where}: duplicate scenario ids")
    checks = {rid: dict(value) for rid, value in data.get("checks", {}).items()}
    for rid, value in checks.items():
        if rid not in reviewed or not {"fails_in", "fixed_in"} <= set(value):
            raise DefinitionError(f"{where}: checks.{rid} needs a reviewed record, fails_in and fixed_in")
    return Reproduction(
        id=_require(data, "id", str, where),
        title=_require(data, "title", str, where),
        summary=data.get("summary", "").strip(),
        path=path,
        reviewed=reviewed,
        subjects=tuple(subjects),
        scenarios=tuple(scenarios),
        checks=checks,
        config=base_config,
        stand_in_modules={k: dict(v) for k, v in data.get("stand_in_modules", {}).items()},
        enabled_when=data.get("enabled_when", ""),
        timeout=float(data.get("timeout_seconds", DEFAULT_TIMEOUT)),
    )


def load_reproductions(directory: Path | None = None) -> list[Reproduction]:
    """All reviewed reproductions in ``directory`` (default ``records/repros``),
    sorted by id.  Only ``*.toml`` directly in that directory count."""
    directory = REPROS_DIR if directory is None else Path(directory)
    if not directory.is_dir():
        return []
    return sorted((_parse_definition(p) for p in sorted(directory.glob("*.toml"))), key=lambda r: r.id)


def all_reproductions(directory: Path | None = None) -> list[Reproduction]:
    """Alias of :func:`load_reproductions`, for ``errordb repro --all``."""
    return load_reproductions(directory)


def reproduction_for(key: str, records: Mapping[str, Mapping[str, Any]] | None = None,
                     directory: Path | None = None) -> Reproduction | None:
    """The reviewed reproduction covering a record, or ``None``.

    ``key`` is a record id, or a slug when ``records`` (id -> record dict) is
    given to resolve it.  A record without a reviewed definition has no
    reproduction, however it got into ``records/``.
    """
    record_id = key
    if records is not None and key not in records:
        for rid, record in records.items():
            if record.get("slug") == key:
                record_id = rid
                break
    for repro in load_reproductions(directory):
        if record_id in repro.reviewed:
            return repro
    return None


# --------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _to_dict(obj: Any) -> dict[str, Any]:
    return asdict(obj, dict_factory=lambda items: {_camel(k): v for k, v in items})


@dataclass
class AdviceResult:
    """What one record advice snippet (validationCode / typeGuard) said about
    a scenario's input: ``accept``, ``reject``, ``error`` (the snippet broke),
    ``not executed`` (shell / not Python) or ``not evaluated``."""

    record: str
    field: str
    verdict: str
    detail: str

    @property
    def key(self) -> str:
        return f"{self.record}.{self.field}"


@dataclass
class ScenarioRun:
    """One scenario on one subject: the code, what happened, the verdict.

    ``outcome``: ``raised`` | ``returned`` | ``hang`` | ``crash`` | ``error``
    (harness could not set up) | ``not run``.  ``decision`` is what the guard
    did with the input: ``reject`` (raised), ``accept`` (capture switched on),
    ``skip`` (returned, nothing switched on), or ``None``.
    """

    subject: str
    label: str
    code: str
    guard_record: str
    outcome: str
    decision: str | None
    summary: str
    exception: dict[str, Any] | None
    traceback: str | None
    return_value: str | None
    state: dict[str, str] | None
    changes: dict[str, str] | None
    advice: list[AdviceResult]
    expected: dict[str, Any]
    ok: bool
    problems: list[str]
    identified: list[str] | None = None  # matcher's answer, when one is given
    identify_error: str | None = None  # the matcher raised (shown, not fatal)


@dataclass
class ScenarioReport:
    id: str
    title: str
    description: str
    setup: dict[str, Any]
    runs: list[ScenarioRun]


@dataclass
class SnippetCheck:
    """Check of a record's exampleFix / validationCode / typeGuard part.

    ``verdict``: ``ok`` | ``fail`` | ``not executed`` (shell) | ``absent``.
    """

    record: str
    field: str
    part: str
    language: str
    executed: bool
    verdict: str
    detail: str


@dataclass
class Disagreement:
    """An advice snippet judges a scenario's input differently from the guard."""

    scenario: str
    subject: str
    record: str
    field: str
    advice: str
    guard: str
    note: str
    # False when the guard raised *another* record's error: the advice is
    # only meant to prevent its own record's error, so this is expected.
    own_error: bool


@dataclass
class GuardInfo:
    subject: str
    label: str
    record: str
    file_path: str
    traceback_path: str
    function: str
    first_line: int
    def_line: int
    last_line: int
    code: str
    same_in: list[str]  # other records of the subject storing identical code
    initial_state: dict[str, str]


@dataclass
class ReproReport:
    """The result of :func:`run_reproduction`.  ``to_dict()`` is the JSON
    form (``--format json`` and the committed transcript)."""

    reproduction: str
    title: str
    summary: str
    definition: str
    records: dict[str, dict[str, str]]
    guards: list[GuardInfo]
    scenarios: list[ScenarioReport]
    snippet_checks: list[SnippetCheck]
    disagreements: list[Disagreement]

    @property
    def runs(self) -> list[ScenarioRun]:
        return [run for scenario in self.scenarios for run in scenario.runs]

    @property
    def ok(self) -> bool:
        """Every scenario behaves as recorded and no snippet check failed."""
        return all(run.ok for run in self.runs) and not any(
            check.verdict == "fail" for check in self.snippet_checks)

    def to_dict(self) -> dict[str, Any]:
        data = {"kind": TRANSCRIPT_KIND, "version": TRANSCRIPT_VERSION}
        data.update(_to_dict(self))
        runs = self.runs
        data["ok"] = self.ok
        data["totals"] = {
            "runs": len(runs),
            "asRecorded": sum(run.ok for run in runs),
            "snippetChecksFailed": sum(c.verdict == "fail" for c in self.snippet_checks),
        }
        return data


# --------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------


def _check_reviewed(repro: Reproduction, records: Mapping[str, Mapping[str, Any]]) -> None:
    for record_id, pinned in repro.reviewed.items():
        record = records.get(record_id)
        if record is None:
            raise ReviewMismatch(f"record {record_id} (reviewed by {repro.id}) is not available")
        actual = record_digest(record)
        if actual != pinned:
            raise ReviewMismatch(
                f"record {record_id} differs from the version reviewed for {repro.id} "
                f"(pinned {pinned}, now {actual}); nothing was executed -- read the new "
                f"code, then update [reviewed] in {repro.definition_name()}")


def _guard_for(record: Mapping[str, Any]) -> ExtractedFunction:
    return extract_enclosing_function(
        str(record["sourceCode"]), int(record["sourceCodeStart"]), int(record["lineNumber"]))


def _scenario_call(repro: Reproduction, subject: Subject, spec: SubjectScenario,
                   records: Mapping[str, Mapping[str, Any]]) -> str:
    if spec.call is not None:
        return spec.call
    primary = records[subject.records[0]]
    part = split_example_fix(primary.get("exampleFix")).get(spec.example_fix or "")
    if not part or snippet_language(part) != "python":
        raise DefinitionError(
            f"{repro.id}: exampleFix {spec.example_fix!r} of {subject.records[0]} is not a Python call")
    return part


def _subject_job(repro: Reproduction, subject: Subject, records: Mapping[str, Mapping[str, Any]],
                 scenario_keys: Sequence[tuple[Scenario, str, str]]) -> dict[str, Any]:
    """The JSON job for one child: snippet texts, stand-in data, scenarios.

    The child gets nothing else -- no paths of this machine, no environment.
    """
    guards = {}
    for record_id in subject.records:
        record = records[record_id]
        guard = _guard_for(record)
        guards[record_id] = {
            "filename": traceback_path(record),
            "source": guard.padded_source(),
            "function": guard.name,
            "first_line": guard.first_line,
            "prelude": subject.prelude,
        }
    advice = []
    for record_id in subject.records:
        record = records[record_id]
        for field_name in ("validationCode", "typeGuard"):
            text = record.get(field_name)
            if snippet_language(text) != "python":
                continue
            call = None
            if field_name == "typeGuard":
                call = subject.type_guard_calls.get(record_id)
                if call is None:
                    continue  # no reviewed way to call it; reported as not evaluated
            advice.append({
                "key": f"{record_id}.{field_name}", "record": record_id, "field": field_name,
                "filename": f"<record {record_id} {field_name}>", "source": text, "call": call,
            })
    jobs = []
    for scenario, call, guard_record in scenario_keys:
        jobs.append({
            "key": scenario.id,
            "guard": guard_record,
            "call": call,
            "caller_filename": f"<repro {repro.id}:{scenario.id}>",
            "pp": scenario.pp,
            "config": scenario.config,
            "state": subject.state,
            "model_state": subject.model_state,
        })
    return {
        "protocol": PROTOCOL,
        "limits": {"cpu_seconds": int(repro.timeout) + 1, "address_space_bytes": 2 << 30},
        "guards": guards,
        "stand_in_modules": repro.stand_in_modules,
        "advice": advice,
        "patterns": {rid: records[rid].get("messagePattern") for rid in subject.records
                     if records[rid].get("messagePattern")},
        "scenarios": jobs,
    }


_CHILD_ENV = {"PATH": os.defpath, "LC_ALL": "C.UTF-8"}
#: -I isolated mode (no PYTHON* variables, no user site, no script directory
#: on sys.path); -S no ``site`` at all, so no site-packages and none of their
#: ``.pth`` files (an editable install would otherwise put the project on the
#: child's path); -B no bytecode files.  The child needs only the stdlib.
CHILD_FLAGS = ("-I", "-S", "-B")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it spawned
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()


def _run_child(job: dict[str, Any], timeout: float) -> tuple[list[dict[str, Any]], str | None, str]:
    """Run one child; returns (complete result lines, abnormal end, detail).

    abnormal end is ``"hang"`` (killed after ``timeout`` s), ``"crash"``
    (non-zero exit or signal, or exited before finishing) or ``None``.
    """
    payload = json.dumps(job).encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="errordb-repro-") as cwd:
        proc = subprocess.Popen(
            [sys.executable, *CHILD_FLAGS, str(CHILD_SCRIPT)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, env=_CHILD_ENV, start_new_session=True,
        )
        hung = False
        try:
            out, err = proc.communicate(payload, timeout=timeout)
        except subprocess.TimeoutExpired:
            hung = True
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a grandchild escaped and holds the pipe
                out, err = b"", b""
                for stream in (proc.stdout, proc.stderr):
                    if stream:
                        stream.close()
                proc.wait()
    results = []
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a partial line from a killed child
    stderr_tail = err.decode("utf-8", "replace").replace(str(CHILD_SCRIPT), "<errordb.repro.child>")
    stderr_tail = stderr_tail.strip()[-600:]
    if hung:
        return results, "hang", f"killed after {timeout:g} s"
    if proc.returncode != 0:
        if proc.returncode < 0:
            try:
                how = f"killed by {signal.Signals(-proc.returncode).name}"
            except ValueError:
                how = f"killed by signal {-proc.returncode}"
        else:
            how = f"exit status {proc.returncode}"
        return results, "crash", how + (f": {stderr_tail}" if stderr_tail else "")
    if len(results) < len(job["scenarios"]):
        return results, "crash", "the child exited before finishing" + (f": {stderr_tail}" if stderr_tail else "")
    return results, None, ""


def _run_subject(job: dict[str, Any], timeout: float) -> dict[str, dict[str, Any]]:
    """Run all scenarios of one subject, restarting after a hang or a crash.

    The scenario that was running when the child died gets the hang/crash
    result; the ones after it run in a fresh child, so one bad scenario does
    not hide the others.
    """
    pending = list(job["scenarios"])
    results: dict[str, dict[str, Any]] = {}
    while pending:
        lines, abnormal, detail = _run_child({**job, "scenarios": pending}, timeout)
        for line in lines:
            results[line["key"]] = line
        done = len(lines)
        if abnormal is None:
            break
        culprit = pending[done] if done < len(pending) else None
        if culprit is None:
            break
        results[culprit["key"]] = {"key": culprit["key"], "outcome": abnormal, "detail": detail}
        pending = pending[done + 1:]
    return results


def _changes(initial: Mapping[str, str], state: Mapping[str, str] | None) -> dict[str, str] | None:
    if state is None:
        return None
    return {k: v for k, v in state.items() if initial.get(k) != v}


def _initial_state(subject: Subject) -> dict[str, str]:
    """The stand-in's starting attributes in repr form (as the child reports them)."""
    state = {k: repr(ast.literal_eval(v)) for k, v in subject.state.items()}
    state.update({"model." + k: repr(ast.literal_eval(v)) for k, v in subject.model_state.items()})
    return state


def _short_path(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _summarise(run: dict[str, Any], changes: dict[str, str] | None, decision: str | None) -> str:
    outcome = run["outcome"]
    if outcome == "raised":
        exc = run["exception"]
        frame = exc.get("raisingFrame") or {}
        where = f" ({_short_path(frame['file'])}:{frame['line']})" if frame else ""
        return f"{exc['type']}: {exc['message']}{where}"
    if outcome == "returned":
        if decision == "accept":
            shown = ", ".join(f"{k}={v}" for k, v in (changes or {}).items())
            return f"returns; capture ON: {shown}"
        if changes:
            shown = ", ".join(f"{k}={v}" for k, v in changes.items())
            return f"returns; capture stays OFF ({shown})"
        return "returns silently; capture stays OFF (nothing set)"
    if outcome in ("hang", "crash"):
        return f"{outcome.upper()}: {run.get('detail', '')}"
    if outcome == "error":
        return f"HARNESS ERROR: {run.get('harnessError') or run.get('detail')}"
    return outcome


def _judge(repro: Reproduction, spec: SubjectScenario, run: dict[str, Any], guard: ExtractedFunction,
           guard_file: str, records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Compare one observed run with the reviewer's pinned expectation."""
    problems: list[str] = []
    outcome = run["outcome"]
    expect = spec.expect
    if outcome in ("hang", "crash", "error", "not run"):
        problems.append(f"{outcome}: {run.get('detail') or run.get('harnessError') or ''}".rstrip(": "))
        return problems
    if expect.raises is not None:
        record = records[expect.raises]
        if outcome != "raised":
            problems.append(f"expected {record['errorClass']} of record {expect.raises}, but the call returned")
        else:
            exc = run["exception"]
            want_class = str(record.get("errorClass") or "").rsplit(".", 1)[-1]
            if exc["name"] != want_class:
                problems.append(f"raised {exc['type']}, record {expect.raises} says {record.get('errorClass')}")
            if expect.raises not in exc.get("patternMatches", []):
                problems.append(f"message {exc['message']!r} does not match messagePattern of {expect.raises}")
            frame = exc.get("raisingFrame") or {}
            if frame.get("file") != guard_file or not guard_file.endswith(str(record["filePath"])):
                problems.append(f"raised in {frame.get('file')}, not in {record['filePath']}")
            if frame.get("line") != record.get("lineNumber"):
                problems.append(f"raised at line {frame.get('line')}, record says {record.get('lineNumber')}")
            if frame.get("function") != guard.name:
                problems.append(f"raised in function {frame.get('function')}, not {guard.name}")
    else:
        if outcome != "returned":
            exc = run.get("exception") or {}
            problems.append(f"expected a normal return, got {exc.get('type')}: {exc.get('message')}")
        elif dict(run.get("state") or {}) != dict(expect.state or {}):
            problems.append(f"state after the call is {run.get('state')}, expected {expect.state}")
    observed = {f"{a['record']}.{a['field']}": a["verdict"] for a in run.get("advice", [])}
    for key, verdict in observed.items():
        if key not in expect.advice:
            problems.append(f"advice {key} -> {verdict} is not pinned in the definition")
        elif expect.advice[key] != verdict:
            problems.append(f"advice {key} -> {verdict}, expected {expect.advice[key]}")
    for key in expect.advice.keys() - observed.keys():
        problems.append(f"advice {key} expected {expect.advice[key]} but was not evaluated")
    return problems


def _decision(repro: Reproduction, run: dict[str, Any]) -> str | None:
    if run["outcome"] == "raised":
        return "reject"
    if run["outcome"] == "returned":
        flag = (run.get("state") or {}).get(repro.enabled_when)
        return "accept" if flag == "True" else "skip"
    return None


def _snippet_checks(repro: Reproduction, records: Mapping[str, Mapping[str, Any]],
                    scenarios: Sequence[ScenarioReport]) -> list[SnippetCheck]:
    """exampleFix / validationCode / typeGuard of every reviewed record.

    Python parts must parse and, in the scenarios the definition names
    (``checks.<id>.fails_in`` / ``fixed_in``), the failing call must fail and
    the fixed one pass.  Shell parts are recognised and not executed.
    """
    by_key = {(s.id, run.subject): run for s in scenarios for run in s.runs}
    checks: list[SnippetCheck] = []
    for record_id in repro.reviewed:
        record = records[record_id]
        subject = repro.subject_of(record_id).id
        pair = repro.checks.get(record_id)
        failing = by_key.get((pair["fails_in"], subject)) if pair else None
        fixed = by_key.get((pair["fixed_in"], subject)) if pair else None

        for part, text in split_example_fix(record.get("exampleFix")).items():
            language = snippet_language(text)
            check = SnippetCheck(record_id, "exampleFix", part or "(unlabelled)", language, False, "ok", "")
            if language == "shell":
                check.verdict, check.detail = "not executed", "shell command, recognised and not executed"
            elif language != "python":
                check.verdict, check.detail = "fail", f"neither Python nor a shell command ({language})"
            elif part in ("before", "after") and pair:
                run = failing if part == "before" else fixed
                check.executed = run is not None and run.code == text
                if run is None or run.code != text:
                    check.verdict = "fail"
                    check.detail = f"no scenario runs this {part!r} call exactly"
                elif part == "before":
                    ok = run.ok and run.outcome == "raised"
                    check.verdict = "ok" if ok else "fail"
                    check.detail = (f"raises the record's error in scenario {pair['fails_in']}" if ok
                                    else f"does not raise the record's error in {pair['fails_in']}")
                else:
                    ok = run.ok and run.decision == "accept"
                    check.verdict = "ok" if ok else "fail"
                    check.detail = (f"runs without error and switches capture on in scenario {pair['fixed_in']}"
                                    if ok else f"does not succeed in {pair['fixed_in']}")
            else:
                check.detail = "parses (not tied to a scenario)"
            checks.append(check)

        for field_name in ("validationCode", "typeGuard"):
            text = record.get(field_name)
            language = snippet_language(text)
            check = SnippetCheck(record_id, field_name, "", language, False, "ok", "")
            if language == "empty":
                check.verdict, check.detail = "absent", "the record has none"
            elif language == "shell":
                check.verdict, check.detail = "not executed", "shell command, recognised and not executed"
            elif language != "python":
                check.verdict, check.detail = "fail", "does not parse as Python"
            elif not pair or failing is None or fixed is None:
                check.detail = "parses (no failing/fixed scenario named)"
            else:
                key = f"{record_id}.{field_name}"
                said = {name: next((a.verdict for a in run.advice if a.key == key), "not evaluated")
                        for name, run in (("failing", failing), ("fixed", fixed))}
                check.executed = "not evaluated" not in said.values()
                good = said["failing"] == "reject" and said["fixed"] == "accept"
                check.verdict = "ok" if good else "fail"
                check.detail = (f"{said['failing']}s the failing call ({pair['fails_in']}), "
                                f"{said['fixed']}s the fixed one ({pair['fixed_in']})")
            checks.append(check)
    return checks


_ADVICE_NOTES = {
    ("accept", "reject"): "the advice lets through an input the guard refuses",
    ("reject", "accept"): "the advice refuses an input the guard accepts",
    ("accept", "skip"): "the advice accepts, but the guard returns without switching capture on",
    ("reject", "skip"): "the advice refuses; the guard silently does nothing",
}


def _disagreements(scenarios: Sequence[ScenarioReport]) -> list[Disagreement]:
    found = []
    for scenario in scenarios:
        for run in scenario.runs:
            if run.decision is None:
                continue
            raised = run.expected["raises"] if run.ok else None
            for advice in run.advice:
                if advice.verdict not in ("accept", "reject") or advice.verdict == run.decision:
                    continue
                own = run.decision != "reject" or raised == advice.record
                note = _ADVICE_NOTES.get((advice.verdict, run.decision), "")
                if not own:
                    note += f" (the guard raised the error of record {raised}, not this advice's record)"
                found.append(Disagreement(
                    scenario=scenario.id, subject=run.subject, record=advice.record,
                    field=advice.field, advice=advice.verdict, guard=run.decision,
                    note=note, own_error=own))
    return found


def _unsent_advice(subject: Subject, records: Mapping[str, Mapping[str, Any]]) -> list[AdviceResult]:
    """Advice snippets that exist but were not sent to the child, said explicitly:
    shell or broken ones, and a typeGuard the definition gives no call for."""
    unsent = []
    for record_id in subject.records:
        for field_name in ("validationCode", "typeGuard"):
            language = snippet_language(records[record_id].get(field_name))
            if language == "empty":
                continue
            if language != "python":
                unsent.append(AdviceResult(record_id, field_name, "not executed", f"{language}, not executed"))
            elif field_name == "typeGuard" and record_id not in subject.type_guard_calls:
                unsent.append(AdviceResult(record_id, field_name, "not evaluated",
                                           "no reviewed call for this typeGuard"))
    return unsent


Matcher = Callable[[str], "Sequence[str] | str | None"]


def run_reproduction(repro: Reproduction, records: Mapping[str, Mapping[str, Any]], *,
                     timeout: float | None = None, matcher: Matcher | None = None) -> ReproReport:
    """Run every scenario of ``repro`` on every subject and judge the results.

    ``records`` maps record id -> the inner ``"record"`` dict; it must hold
    every record the definition reviewed, unchanged (else
    :class:`ReviewMismatch`, raised before anything runs).  Each subject's
    scenarios run in one child process (``timeout`` seconds per child,
    default from the definition, 10 s).  ``matcher``, when given, receives
    each captured traceback text and returns the record id(s) it identifies,
    best first; that answer is shown, and does not change verdicts.
    """
    _check_reviewed(repro, records)
    timeout = repro.timeout if timeout is None else timeout

    guards: list[GuardInfo] = []
    extracted: dict[str, ExtractedFunction] = {}
    for subject in repro.subjects:
        for record_id in subject.records:
            extracted[record_id] = _guard_for(records[record_id])
        primary = subject.records[0]
        guard = extracted[primary]
        guards.append(GuardInfo(
            subject=subject.id, label=subject.label, record=primary,
            file_path=str(records[primary]["filePath"]),
            traceback_path=traceback_path(records[primary]),
            function=guard.name, first_line=guard.first_line, def_line=guard.def_line,
            last_line=guard.last_line, code=guard.text,
            same_in=[rid for rid in subject.records[1:] if extracted[rid] == guard],
            initial_state=_initial_state(subject),
        ))

    raw: dict[str, dict[str, dict[str, Any]]] = {}
    jobs: dict[str, dict[str, Any]] = {}
    calls: dict[tuple[str, str], tuple[str, str]] = {}
    for subject in repro.subjects:
        planned = []
        for scenario in repro.scenarios:
            spec = scenario.per_subject.get(subject.id)
            if spec is None:
                continue
            call = _scenario_call(repro, subject, spec, records)
            guard_record = spec.guard_record or spec.expect.raises or subject.records[0]
            if guard_record not in subject.records:
                raise DefinitionError(f"{repro.id}: {scenario.id}/{subject.id}: {guard_record} is not this subject's")
            planned.append((scenario, call, guard_record))
            calls[(scenario.id, subject.id)] = (call, guard_record)
        jobs[subject.id] = _subject_job(repro, subject, records, planned)
    # Everything is planned (and every definition error raised) before the
    # first child starts.
    for subject_id, job in jobs.items():
        raw[subject_id] = _run_subject(job, timeout)

    scenario_reports = []
    for scenario in repro.scenarios:
        runs = []
        for subject in repro.subjects:
            spec = scenario.per_subject.get(subject.id)
            if spec is None:
                continue
            call, guard_record = calls[(scenario.id, subject.id)]
            run = raw[subject.id].get(scenario.id, {"outcome": "not run", "detail": "no result"})
            initial = _initial_state(subject)
            decision = _decision(repro, run)
            changes = _changes(initial, run.get("state"))
            problems = _judge(repro, spec, run, extracted[guard_record],
                              traceback_path(records[guard_record]), records)
            advice = [AdviceResult(a["record"], a["field"], a["verdict"], a["detail"])
                      for a in run.get("advice", [])]
            advice += _unsent_advice(subject, records)
            identified, identify_error = None, None
            if matcher is not None and run.get("traceback"):
                try:
                    answer = matcher(run["traceback"])
                    identified = [answer] if isinstance(answer, str) else list(answer or [])
                except Exception as exc:  # a broken matcher must not lose the report
                    identify_error = f"{type(exc).__name__}: {exc}"
            runs.append(ScenarioRun(
                subject=subject.id, label=subject.label, code=call, guard_record=guard_record,
                outcome=run["outcome"], decision=decision,
                summary=_summarise(run, changes, decision),
                exception=run.get("exception"), traceback=run.get("traceback"),
                return_value=run.get("returnValue"), state=run.get("state"), changes=changes,
                advice=advice,
                expected={"raises": spec.expect.raises, "state": spec.expect.state,
                          "advice": dict(sorted(spec.expect.advice.items()))},
                ok=not problems, problems=problems, identified=identified,
                identify_error=identify_error,
            ))
        scenario_reports.append(ScenarioReport(
            id=scenario.id, title=scenario.title, description=scenario.description,
            setup={"pp": scenario.pp, "config": scenario.config}, runs=runs))

    return ReproReport(
        reproduction=repro.id, title=repro.title, summary=repro.summary,
        definition=repro.definition_name(),
        records={rid: {"subject": repro.subject_of(rid).id, "digest": repro.reviewed[rid]}
                 for rid in repro.reviewed},
        guards=guards, scenarios=scenario_reports,
        snippet_checks=_snippet_checks(repro, records, scenario_reports),
        disagreements=_disagreements(scenario_reports),
    )


# --------------------------------------------------------------------------
# views (work on a report or on its dict / a transcript; never execute)
# --------------------------------------------------------------------------


def _as_dict(report: ReproReport | Mapping[str, Any]) -> Mapping[str, Any]:
    return report.to_dict() if isinstance(report, ReproReport) else report


def side_by_side(report: ReproReport | Mapping[str, Any], *, with_advice: bool = False) -> list[list[str]]:
    """Rows of the ``scenario | <subject> | <subject>`` table, header first.

    Works on a live report or a transcript dict.  Each cell is the guard's
    outcome summary; with ``with_advice`` the cell gets one more line per
    advice snippet (``b318b4f842689251 typeGuard: reject``).
    """
    data = _as_dict(report)
    subjects = [(g["subject"], g["label"]) for g in data["guards"]]
    rows = [["scenario"] + [label for _, label in subjects]]
    for scenario in data["scenarios"]:
        by_subject = {run["subject"]: run for run in scenario["runs"]}
        row = [scenario["title"]]
        for subject_id, _ in subjects:
            run = by_subject.get(subject_id)
            if run is None:
                row.append("n/a")
                continue
            cell = run["summary"] + ("" if run["ok"] else "  [DIFFERS FROM RECORD]")
            if with_advice:
                cell += "".join(f"\n{a['record']} {a['field']}: {a['verdict']}" for a in run["advice"])
            row.append(cell)
        rows.append(row)
    return rows


def _table(rows: list[list[str]], width: int = 52) -> list[str]:
    """A plain text table; long cells wrap inside their column."""
    wrapped = [[sum((textwrap.wrap(part, width) or [""] for part in cell.split("\n")), []) for cell in row]
               for row in rows]
    widths = [max(len(line) for row in wrapped for line in row[i]) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(wrapped):
        height = max(len(cell) for cell in row)
        for i in range(height):
            out.append(" | ".join((cell[i] if i < len(cell) else "").ljust(w)
                                  for cell, w in zip(row, widths)).rstrip())
        if n == 0:
            out.append("-+-".join("-" * w for w in widths))
    return out


def render_text(report: ReproReport | Mapping[str, Any], color: bool = False) -> str:
    """Terminal rendering: guard code, every scenario with its code, the
    captured traceback or result, advice, and a verdict; then the side-by-side
    table, snippet checks and disagreements.  Accepts a transcript dict too."""
    data = _as_dict(report)

    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    good, bad, dim, bold = "32", "31", "2", "1"
    out = [paint(f"Reproduction {data['reproduction']}: {data['title']}", bold),
           f"definition: {data['definition']}"]
    if data.get("summary"):
        out += ["", data["summary"]]
    out += ["", paint("Guard code, as stored in the records (run as is, not rewritten):", bold)]
    for guard in data["guards"]:
        same = f" (identical in {', '.join(guard['sameIn'])})" if guard["sameIn"] else ""
        out.append(f"  {guard['label']}: {guard['filePath']} lines {guard['firstLine']}-{guard['lastLine']}, "
                   f"record {guard['record']}{same}")
        for offset, line in enumerate(guard["code"].splitlines()):
            out.append(paint(f"    {guard['firstLine'] + offset:>5} ", dim) + line)
        if guard["initialState"]:
            shown = ", ".join(f"{k}={v}" for k, v in guard["initialState"].items())
            out.append(f"    stand-in starts with: {shown}")
    for number, scenario in enumerate(data["scenarios"], 1):
        pp = scenario["setup"]["pp"]
        world, rank = pp.get("world_size", 1), pp.get("rank", 0)
        last = "last rank" if rank == world - 1 else "not the last rank"
        out += ["", paint(f"[{number}/{len(data['scenarios'])}] {scenario['title']}", bold),
                f"  setup: PP world_size={world}, rank={rank} ({last}); config {scenario['setup']['config']}"]
        if scenario.get("description"):
            out.append(f"  {scenario['description']}")
        for run in scenario["runs"]:
            out += ["", f"  {run['label']}:", f"    >>> {run['code']}"]
            if run.get("traceback"):
                out += ["    " + line for line in run["traceback"].rstrip("\n").splitlines()]
            else:
                out.append(f"    {run['summary']}")
            for advice in run["advice"]:
                out.append(f"    {advice['record']} {advice['field']}: {advice['verdict']}"
                           + (f" ({advice['detail']})" if advice["detail"] else ""))
            if run.get("identified") is not None:
                out.append(f"    matcher identifies: {', '.join(run['identified']) or 'nothing'}")
            if run.get("identifyError"):
                out.append(f"    matcher failed: {run['identifyError']}")
            if run["ok"]:
                what = f"raises the error of record {run['expected']['raises']}" if run["expected"]["raises"] \
                    else "outcome as pinned"
                out.append(paint(f"    verdict: as recorded ({what})", good))
            else:
                out.append(paint("    verdict: DIFFERS", bad))
                out += [paint(f"      - {p}", bad) for p in run["problems"]]
    out += ["", paint("Side by side:", bold)]
    out += ["  " + line for line in _table(side_by_side(data))]
    out += ["", paint("Record snippets:", bold)]
    for check in data["snippetChecks"]:
        part = f" ({check['part']})" if check["part"] else ""
        verdict = paint(check["verdict"], bad if check["verdict"] == "fail" else good)
        out.append(f"  {check['record']} {check['field']}{part}: {check['language']}, {verdict}"
                   + (f" -- {check['detail']}" if check["detail"] else ""))
    titles = {s["id"]: s["title"] for s in data["scenarios"]}
    labels = {g["subject"]: g["label"] for g in data["guards"]}
    for own, heading in ((True, "Where the records' advice and the guard disagree:"),
                         (False, "Advice silent about another record's error (each advice targets its own record):")):
        chosen = [d for d in data["disagreements"] if d["ownError"] is own]
        if chosen:
            out += ["", paint(heading, bold)]
        for d in chosen:
            out.append(f"  {titles.get(d['scenario'], d['scenario'])}, {labels.get(d['subject'], d['subject'])}: "
                       f"{d['record']} {d['field']} says {d['advice']}, the guard does {d['guard']}"
                       + (f" -- {d['note']}" if d["note"] else ""))
    totals = data["totals"]
    status = paint("OK", good) if data["ok"] else paint("FAILED", bad)
    out += ["", f"{status}: {totals['asRecorded']}/{totals['runs']} scenario runs as recorded, "
                f"{totals['snippetChecksFailed']} snippet check(s) failed"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------
# transcripts (committed; what renderers read)
# --------------------------------------------------------------------------


def transcript_path(repro_id: str, directory: Path | None = None) -> Path:
    """``records/repros/transcripts/<reproduction id>.json``."""
    return (TRANSCRIPTS_DIR if directory is None else Path(directory)) / f"{repro_id}.json"


def transcript_text(report: ReproReport) -> str:
    """The exact bytes of a transcript file (deterministic: no times, no
    machine paths, no PIDs; sorted keys would reorder the table, so the
    report's own order is kept)."""
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"


def write_transcripts(records: Mapping[str, Mapping[str, Any]],
                      reproductions: Iterable[Reproduction] | None = None,
                      directory: Path | None = None) -> list[Path]:
    """Run reproductions (default: all) and write their transcripts.

    Returns the paths written.  Refuses (ReproError) rather than writing a
    transcript of a failing run, so a committed transcript always shows the
    behaviour as recorded.
    """
    written = []
    for repro in (all_reproductions() if reproductions is None else reproductions):
        report = run_reproduction(repro, records)
        if not report.ok:
            raise ReproError(f"{repro.id} does not behave as recorded; transcript not written:\n"
                             + render_text(report))
        path = transcript_path(repro.id, directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(transcript_text(report), encoding="utf-8")
        written.append(path)
    return written


def check_transcripts(records: Mapping[str, Mapping[str, Any]],
                      reproductions: Iterable[Reproduction] | None = None,
                      directory: Path | None = None) -> list[str]:
    """Re-run and compare with the committed transcripts; returns the ids
    of reproductions whose transcript is missing or stale (empty = fresh)."""
    stale = []
    for repro in (all_reproductions() if reproductions is None else reproductions):
        path = transcript_path(repro.id, directory)
        current = transcript_text(run_reproduction(repro, records))
        if not path.is_file() or path.read_text(encoding="utf-8") != current:
            stale.append(repro.id)
    return stale


def load_transcript(record_id: str, directory: Path | None = None,
                    repros_dir: Path | None = None) -> dict[str, Any] | None:
    """The committed transcript of the reproduction covering ``record_id``,
    or ``None`` (no reviewed reproduction, or no transcript yet).  Reads a
    file; runs nothing.  Use :func:`transcript_is_current` to make sure it
    describes the record as it is stored now."""
    repro = reproduction_for(record_id, directory=repros_dir)
    if repro is None:
        return None
    path = transcript_path(repro.id, directory)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("kind") != TRANSCRIPT_KIND:
        return None
    return data


def transcript_is_current(transcript: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """True when the transcript was made from this exact version of ``record``."""
    entry = transcript.get("records", {}).get(record.get("id"))
    return bool(entry) and entry.get("digest") == record_digest(record)


# --------------------------------------------------------------------------
# stopgap record loading (the store owns this; used by tests and main())
# --------------------------------------------------------------------------


def load_records(root: Path | None = None) -> dict[str, dict[str, Any]]:
    """``{id: inner record}`` from ``root/<owner>/<repo>/<id>.json`` envelopes.

    ``records/repros/`` is not a record directory and is skipped.
    """
    root = RECORDS_ROOT if root is None else Path(root)
    records = {}
    for path in sorted(root.glob("*/*/*.json")):
        if path.relative_to(root).parts[0] == "repros":
            continue
        envelope = json.loads(path.read_text(encoding="utf-8"))
        record = envelope.get("record") if isinstance(envelope, dict) else None
        if isinstance(record, dict) and "id" in record:
            records[record["id"]] = record
    return records


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m errordb.repro.reproduction`` -- maintenance commands::

        digest ID...            print the digests to pin in [reviewed]
        run ID|SLUG [--json]    run the reproduction covering a record
        write-transcripts       regenerate records/repros/transcripts/
        check-transcripts       exit 1 if a transcript is stale
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m errordb.repro.reproduction")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("digest").add_argument("ids", nargs="+")
    run_parser = sub.add_parser("run")
    run_parser.add_argument("key")
    run_parser.add_argument("--json", action="store_true")
    sub.add_parser("write-transcripts")
    sub.add_parser("check-transcripts")
    args = parser.parse_args(argv)
    records = load_records()
    try:
        if args.command == "digest":
            for record_id in args.ids:
                print(f'{record_id} = "{record_digest(records[record_id])}"')
        elif args.command == "run":
            repro = reproduction_for(args.key, records)
            if repro is None:
                print(f"no reviewed reproduction for {args.key}", file=sys.stderr)
                return 1
            report = run_reproduction(repro, records)
            print(json.dumps(report.to_dict(), indent=2) if args.json
                  else render_text(report, color=sys.stdout.isatty()), end="")
            return 0 if report.ok else 1
        elif args.command == "write-transcripts":
            for path in write_transcripts(records):
                print(path.relative_to(RECORDS_ROOT.parent))
        elif args.command == "check-transcripts":
            stale = check_transcripts(records)
            for repro_id in stale:
                print(f"stale transcript: {repro_id}", file=sys.stderr)
            return 1 if stale else 0
    except ReproError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
