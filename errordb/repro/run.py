"""Running a reviewed reproduction: plan every scenario, send each subject's scenarios to a
sandboxed child (:mod:`errordb.repro.sandbox`), and judge what came back into a report.

This process never executes record text: it parses it (:mod:`errordb.repro.extract`) and sends
it, as JSON, to ``errordb/repro/child.py``, the only place that compiles and runs it.
"""

from __future__ import annotations

from typing import Any, Mapping

from errordb.records.snippet import snippet_language, split_example_fix
from errordb.repro.definitions import DefinitionError, ReproError, Reproduction, Subject, check_reviewed
from errordb.repro.extract import ExtractedFunction, extract_enclosing_function
from errordb.repro.report import (
    GuardInfo, Matcher, ReproReport, ScenarioReport, advice_snippets, disagreements, initial_state, judge_run,
    snippet_checks,
)
from errordb.repro.sandbox import run_in_child, sandbox_problem

PROTOCOL = 1

#: Subject id -> scenario id -> (the call it runs, the record whose guard it runs).
Plan = dict[str, dict[str, tuple[str, str]]]


#: How a run was isolated, as the report says it.
SANDBOXED = "sandbox (bubblewrap: no network, a read-only interpreter and its own folder only)"
REVIEWED_ONLY = "no sandbox ({problem}); a reviewed definition, run under resource limits only"
UNSAFE = "NO SANDBOX (--unsafe: {problem}); unreviewed code run under resource limits only"


class NoSandbox(ReproError):
    """Unreviewed code, and no sandbox to run it in."""


def isolation_for(repro: Reproduction, *, unsafe: bool = False) -> tuple[bool, str]:
    """Whether ``repro`` runs in the sandbox, and the words that say how it runs.

    Always in the sandbox where there is one; else a reviewed definition runs under the
    resource limits, and any other only with ``unsafe`` (:class:`NoSandbox` otherwise).
    """
    problem = sandbox_problem()
    if problem is None:
        return True, SANDBOXED
    if repro.definition_reviewed:
        return False, REVIEWED_ONLY.format(problem=problem)
    if unsafe:
        return False, UNSAFE.format(problem=problem)
    raise NoSandbox(f"{repro.definition_name()} is not a reviewed definition, and there is no sandbox to run "
                    f"its code in: {problem}. Install bubblewrap, or run it anyway with --unsafe "
                    f"(no isolation but resource limits)")


def run_reproduction(repro: Reproduction, records: Mapping[str, Mapping[str, Any]], *,
                     matcher: Matcher | None = None, unsafe: bool = False) -> ReproReport:
    """Run every scenario of ``repro`` on every subject and judge the results.

    ``records`` maps record id -> record dict; it must hold every record the definition
    reviewed, unchanged (else :class:`~errordb.repro.definitions.ReviewMismatch`, raised before
    anything runs).  Each subject's scenarios run in one child process, within the definition's
    time limit (default 10 s).  ``matcher``, when given, receives each captured traceback text and
    returns the record id(s) it identifies, best first; that answer is shown, and does not change
    verdicts. Where it runs: :func:`isolation_for`.
    """
    check_reviewed(repro, records)
    sandboxed, isolation = isolation_for(repro, unsafe=unsafe)
    extracted = {rid: _guard_for(records[rid]) for subject in repro.subjects for rid in subject.records}
    guards = [_guard_info(subject, records, extracted) for subject in repro.subjects]
    plan = _plan(repro, records)
    jobs = {subject.id: _subject_job(repro, subject, records, extracted, plan[subject.id])
            for subject in repro.subjects}
    # Everything is planned (and every definition error raised) before the first child starts.
    raw = {subject_id: _run_subject(job, repro.timeout, sandboxed) for subject_id, job in jobs.items()}

    scenario_reports = []
    for scenario in repro.scenarios:
        runs = []
        for subject in repro.subjects:
            spec = scenario.per_subject.get(subject.id)
            if spec is None:
                continue
            call, guard_record = plan[subject.id][scenario.id]
            run = raw[subject.id].get(scenario.id, {"outcome": "not run", "detail": "no result"})
            runs.append(judge_run(
                repro, subject, spec, run, call=call, guard_record=guard_record,
                guard=extracted[guard_record], guard_file=traceback_path(records[guard_record]),
                records=records, matcher=matcher))
        scenario_reports.append(ScenarioReport(
            id=scenario.id, title=scenario.title, description=scenario.description,
            setup={"pp": scenario.pp, "config": scenario.config}, runs=runs))

    return ReproReport(
        reproduction=repro.id, title=repro.title, summary=repro.summary,
        definition=repro.definition_name(),
        records={rid: {"subject": repro.subject_of(rid).id, "digest": repro.reviewed[rid]}
                 for rid in repro.reviewed},
        guards=guards, scenarios=scenario_reports,
        snippet_checks=snippet_checks(repro, records, scenario_reports),
        disagreements=disagreements(scenario_reports),
        isolation=isolation,
    )


def traceback_path(record: Mapping[str, Any]) -> str:
    """The path the reproduced frames carry: ``/opt/<repo name>/<filePath>``.

    Absolute, like every real traceback; a source-checkout layout so the
    record's ``filePath`` appears verbatim as a suffix (what a matcher
    compares); obviously not a path of this machine; and constant, so
    transcripts are byte-identical everywhere.
    """
    repo_name = str(record.get("repo") or "project").rsplit("/", 1)[-1]
    return f"/opt/{repo_name}/{str(record['filePath']).lstrip('/')}"


def _guard_for(record: Mapping[str, Any]) -> ExtractedFunction:
    return extract_enclosing_function(
        str(record["sourceCode"]), int(record["sourceCodeStart"]), int(record["lineNumber"]))


def _guard_info(subject: Subject, records: Mapping[str, Mapping[str, Any]],
                extracted: Mapping[str, ExtractedFunction]) -> GuardInfo:
    primary = subject.records[0]
    guard = extracted[primary]
    return GuardInfo(
        subject=subject.id, label=subject.label, record=primary,
        file_path=str(records[primary]["filePath"]),
        traceback_path=traceback_path(records[primary]),
        function=guard.name, first_line=guard.first_line, def_line=guard.def_line,
        last_line=guard.last_line, code=guard.text,
        same_in=[rid for rid in subject.records[1:] if extracted[rid] == guard],
        initial_state=initial_state(subject),
    )


def _plan(repro: Reproduction, records: Mapping[str, Mapping[str, Any]]) -> Plan:
    """Each subject's scenarios with the call they run and the record whose guard runs it."""
    plan: Plan = {}
    for subject in repro.subjects:
        planned = plan.setdefault(subject.id, {})
        for scenario in repro.scenarios:
            spec = scenario.per_subject.get(subject.id)
            if spec is None:
                continue
            if spec.call is not None:
                call = spec.call
            else:
                part = split_example_fix(records[subject.records[0]].get("exampleFix")).get(spec.example_fix or "")
                if not part or snippet_language(part) != "python":
                    raise DefinitionError(f"{repro.id}: exampleFix {spec.example_fix!r} of "
                                          f"{subject.records[0]} is not a Python call")
                call = part
            guard_record = spec.guard_record or spec.expect.raises or subject.records[0]
            if guard_record not in subject.records:
                raise DefinitionError(f"{repro.id}: {scenario.id}/{subject.id}: {guard_record} is not this subject's")
            planned[scenario.id] = (call, guard_record)
    return plan


def _subject_job(repro: Reproduction, subject: Subject, records: Mapping[str, Mapping[str, Any]],
                 extracted: Mapping[str, ExtractedFunction],
                 planned: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The JSON job for one child: snippet texts, stand-in data, scenarios.

    The child gets nothing else -- no paths of this machine, no environment.
    """
    guards = {
        record_id: {
            "filename": traceback_path(records[record_id]),
            "source": extracted[record_id].padded_source(),
            "function": extracted[record_id].name,
            "first_line": extracted[record_id].first_line,
            "prelude": subject.prelude,
        }
        for record_id in subject.records
    }
    scenarios = [{
        "key": scenario.id,
        "guard": planned[scenario.id][1],
        "call": planned[scenario.id][0],
        "caller_filename": f"<repro {repro.id}:{scenario.id}>",
        "pp": scenario.pp,
        "config": scenario.config,
        "state": subject.state,
        "model_state": subject.model_state,
    } for scenario in repro.scenarios if scenario.id in planned]
    return {
        "protocol": PROTOCOL,
        "guards": guards,
        "stand_in_modules": repro.stand_in_modules,
        "advice": advice_snippets(subject, records)[0],
        "scenarios": scenarios,
    }


def _run_subject(job: dict[str, Any], timeout: float, sandboxed: bool) -> dict[str, dict[str, Any]]:
    """Run all scenarios of one subject, restarting after a hang or a crash.

    The scenario that was running when the child died gets the hang/crash
    result; the ones after it run in a fresh child, so one bad scenario does
    not hide the others.
    """
    pending = list(job["scenarios"])
    results: dict[str, dict[str, Any]] = {}
    while pending:
        lines, abnormal, detail = run_in_child({**job, "scenarios": pending}, timeout, sandbox=sandboxed)
        for line in lines:
            results[line["key"]] = line
        done = len(lines)
        if abnormal is None or done >= len(pending):
            break
        culprit = pending[done]
        results[culprit["key"]] = {"key": culprit["key"], "outcome": abnormal, "detail": detail}
        pending = pending[done + 1:]
    return results
