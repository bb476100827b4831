"""The report of a reproduction run, and how each observed outcome is judged against the
outcome the reviewer pinned.

``ReproReport.to_dict()`` is the JSON form: ``--format json`` and the committed transcript.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from errordb.records.patterns import cached_pattern
from errordb.records.snippet import snippet_language, split_example_fix
from errordb.repro.definitions import Reproduction, Subject, SubjectScenario
from errordb.repro.extract import ExtractedFunction

TRANSCRIPT_KIND = "errordb.reproduction-transcript"
TRANSCRIPT_VERSION = 1

#: Receives a captured traceback text, returns the record id(s) it identifies, best first.
Matcher = Callable[[str], "Sequence[str] | str | None"]


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
    isolation: str = ""  # how the code ran (this machine's: not part of a transcript)

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
        if not self.isolation:
            del data["isolation"]
        runs = self.runs
        data["ok"] = self.ok
        data["totals"] = {
            "runs": len(runs),
            "asRecorded": sum(run.ok for run in runs),
            "snippetChecksFailed": sum(c.verdict == "fail" for c in self.snippet_checks),
        }
        return data


def judge_run(repro: Reproduction, subject: Subject, spec: SubjectScenario, run: dict[str, Any], *,
              call: str, guard_record: str, guard: ExtractedFunction, guard_file: str,
              records: Mapping[str, Mapping[str, Any]], matcher: Matcher | None) -> ScenarioRun:
    """One scenario's raw result from the child, judged against the pinned expectation.

    ``guard`` is the function that ran, known to tracebacks as ``guard_file``.
    """
    if run.get("exception") is not None:
        run["exception"]["patternMatches"] = _pattern_matches(run["exception"]["message"], subject, records)
    decision = _decision(repro, run)
    changes = _changes(initial_state(subject), run.get("state"))
    advice = [AdviceResult(a["record"], a["field"], a["verdict"], a["detail"]) for a in run.get("advice", [])]
    identified, identify_error = _identify(matcher, run.get("traceback"))
    problems = _problems(spec, run, guard, guard_file, records)
    return ScenarioRun(
        subject=subject.id, label=subject.label, code=call, guard_record=guard_record,
        outcome=run["outcome"], decision=decision,
        summary=_summarise(run, changes, decision),
        exception=run.get("exception"), traceback=run.get("traceback"),
        return_value=run.get("returnValue"), state=run.get("state"), changes=changes,
        advice=advice + advice_snippets(subject, records)[1],
        expected={"raises": spec.expect.raises, "state": spec.expect.state,
                  "advice": dict(sorted(spec.expect.advice.items()))},
        ok=not problems, problems=problems, identified=identified,
        identify_error=identify_error,
    )


def initial_state(subject: Subject) -> dict[str, str]:
    """The stand-in's starting attributes in repr form (as the child reports them)."""
    state = {k: repr(ast.literal_eval(v)) for k, v in subject.state.items()}
    state.update({"model." + k: repr(ast.literal_eval(v)) for k, v in subject.model_state.items()})
    return state


def _pattern_matches(message: str, subject: Subject, records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The subject's records whose messagePattern is found in ``message``, run by RE2 as every
    pattern is (:mod:`errordb.records.patterns`; a stored pattern compiles: ingest checks it)."""
    return [record_id for record_id in subject.records if (pattern := records[record_id].get("messagePattern"))
            and cached_pattern(pattern).search(message) is not None]


def _identify(matcher: Matcher | None, traceback: str | None) -> tuple[list[str] | None, str | None]:
    """The matcher's answer for a captured traceback, or the error it raised."""
    if matcher is None or not traceback:
        return None, None
    try:
        answer = matcher(traceback)
    except Exception as exc:  # a broken matcher must not lose the report
        return None, f"{type(exc).__name__}: {exc}"
    return ([answer] if isinstance(answer, str) else list(answer or [])), None


def _changes(initial: Mapping[str, str], state: Mapping[str, str] | None) -> dict[str, str] | None:
    if state is None:
        return None
    return {k: v for k, v in state.items() if initial.get(k) != v}


def _decision(repro: Reproduction, run: dict[str, Any]) -> str | None:
    if run["outcome"] == "raised":
        return "reject"
    if run["outcome"] == "returned":
        flag = (run.get("state") or {}).get(repro.enabled_when)
        return "accept" if flag == "True" else "skip"
    return None


def _summarise(run: dict[str, Any], changes: dict[str, str] | None, decision: str | None) -> str:
    outcome = run["outcome"]
    if outcome == "raised":
        exc = run["exception"]
        frame = exc.get("raisingFrame") or {}
        where = f" ({frame['file'].rsplit('/', 1)[-1]}:{frame['line']})" if frame else ""
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


def _problems(spec: SubjectScenario, run: dict[str, Any], guard: ExtractedFunction, guard_file: str,
              records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """How one observed run differs from the reviewer's pinned expectation (empty: it does not)."""
    outcome = run["outcome"]
    expect = spec.expect
    if outcome in ("hang", "crash", "error", "not run"):
        return [f"{outcome}: {run.get('detail') or run.get('harnessError') or ''}".rstrip(": ")]
    if expect.raises is not None:
        problems = _raise_problems(expect.raises, run, guard, guard_file, records)
    elif outcome != "returned":
        exc = run.get("exception") or {}
        problems = [f"expected a normal return, got {exc.get('type')}: {exc.get('message')}"]
    elif dict(run.get("state") or {}) != dict(expect.state or {}):
        problems = [f"state after the call is {run.get('state')}, expected {expect.state}"]
    else:
        problems = []
    observed = {f"{a['record']}.{a['field']}": a["verdict"] for a in run.get("advice", [])}
    for key, verdict in observed.items():
        if key not in expect.advice:
            problems.append(f"advice {key} -> {verdict} is not pinned in the definition")
        elif expect.advice[key] != verdict:
            problems.append(f"advice {key} -> {verdict}, expected {expect.advice[key]}")
    for key in expect.advice.keys() - observed.keys():
        problems.append(f"advice {key} expected {expect.advice[key]} but was not evaluated")
    return problems


def _raise_problems(record_id: str, run: dict[str, Any], guard: ExtractedFunction, guard_file: str,
                    records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """How a run differs from raising record ``record_id``'s error where the record says."""
    record = records[record_id]
    if run["outcome"] != "raised":
        return [f"expected {record['errorClass']} of record {record_id}, but the call returned"]
    problems = []
    exc = run["exception"]
    want_class = str(record.get("errorClass") or "").rsplit(".", 1)[-1]
    if exc["name"] != want_class:
        problems.append(f"raised {exc['type']}, record {record_id} says {record.get('errorClass')}")
    if record_id not in exc["patternMatches"]:
        problems.append(f"message {exc['message']!r} does not match messagePattern of {record_id}")
    frame = exc.get("raisingFrame") or {}
    if frame.get("file") != guard_file or not guard_file.endswith(str(record["filePath"])):
        problems.append(f"raised in {frame.get('file')}, not in {record['filePath']}")
    if frame.get("line") != record.get("lineNumber"):
        problems.append(f"raised at line {frame.get('line')}, record says {record.get('lineNumber')}")
    if frame.get("function") != guard.name:
        problems.append(f"raised in function {frame.get('function')}, not {guard.name}")
    return problems


def advice_snippets(subject: Subject, records: Mapping[str, Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[AdviceResult]]:
    """A subject's advice snippets (validationCode, typeGuard): the jobs for those the child
    judges each input with (Python, and a typeGuard only with the definition's call for it), and
    the others, said explicitly: shell or broken ones, a typeGuard the definition gives no call for."""
    sent: list[dict[str, Any]] = []
    unsent: list[AdviceResult] = []
    for record_id in subject.records:
        for field_name in ("validationCode", "typeGuard"):
            text = records[record_id].get(field_name)
            language = snippet_language(text)
            if language == "empty":
                continue
            if language != "python":
                unsent.append(AdviceResult(record_id, field_name, "not executed", f"{language}, not executed"))
            elif field_name == "typeGuard" and record_id not in subject.type_guard_calls:
                unsent.append(AdviceResult(record_id, field_name, "not evaluated", "no reviewed call for this typeGuard"))
            else:
                sent.append({"key": f"{record_id}.{field_name}", "record": record_id, "field": field_name,
                             "filename": f"<record {record_id} {field_name}>", "source": text,
                             "call": subject.type_guard_calls[record_id] if field_name == "typeGuard" else None})
    return sent, unsent


_SHELL = "shell command, recognised and not executed"


def snippet_checks(repro: Reproduction, records: Mapping[str, Mapping[str, Any]],
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
            checks.append(_example_fix_check(record_id, part, text, pair, failing, fixed))
        for field_name in ("validationCode", "typeGuard"):
            checks.append(_advice_check(record_id, field_name, record.get(field_name), pair, failing, fixed))
    return checks


def _example_fix_check(record_id: str, part: str, text: str, pair: Mapping[str, str] | None,
                       failing: ScenarioRun | None, fixed: ScenarioRun | None) -> SnippetCheck:
    language = snippet_language(text)
    check = SnippetCheck(record_id, "exampleFix", part or "(unlabelled)", language, False, "ok", "")
    if language == "shell":
        check.verdict, check.detail = "not executed", _SHELL
    elif language != "python":
        check.verdict, check.detail = "fail", f"neither Python nor a shell command ({language})"
    elif part not in ("before", "after") or not pair:
        check.detail = "parses (not tied to a scenario)"
    else:
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
    return check


def _advice_check(record_id: str, field_name: str, text: str | None, pair: Mapping[str, str] | None,
                  failing: ScenarioRun | None, fixed: ScenarioRun | None) -> SnippetCheck:
    language = snippet_language(text)
    check = SnippetCheck(record_id, field_name, "", language, False, "ok", "")
    if language == "empty":
        check.verdict, check.detail = "absent", "the record has none"
    elif language == "shell":
        check.verdict, check.detail = "not executed", _SHELL
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
    return check


_ADVICE_NOTES = {
    ("accept", "reject"): "the advice lets through an input the guard refuses",
    ("reject", "accept"): "the advice refuses an input the guard accepts",
    ("accept", "skip"): "the advice accepts, but the guard returns without switching capture on",
    ("reject", "skip"): "the advice refuses; the guard silently does nothing",
}


def disagreements(scenarios: Sequence[ScenarioReport]) -> list[Disagreement]:
    """Where an advice snippet judges a scenario's input differently from the guard."""
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
