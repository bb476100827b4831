"""Transcripts: the committed record of a reproduction's run, what renderers read, and the
views of a report (the side-by-side table, the terminal text).

Everything here works on a live report or on a transcript dict, and never executes anything.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Mapping

from errordb.explainer.render import cut_line
from errordb.repro.definitions import record_digest, repros_dir, reproduction_for
from errordb.repro.report import TRANSCRIPT_KIND, ReproReport

_GOOD, _BAD, _DIM, _BOLD = "32", "31", "2", "1"


def transcript_path(repro_id: str) -> Path:
    """``records/repros/transcripts/<reproduction id>.json``."""
    return repros_dir() / "transcripts" / f"{repro_id}.json"


def transcript_text(report: ReproReport) -> str:
    """The exact bytes of a transcript file (deterministic: no times, no
    machine paths, no PIDs; sorted keys would reorder the table, so the
    report's own order is kept)."""
    data = report.to_dict()
    data.pop("isolation", None)  # where it ran differs between machines; what it did does not
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def load_transcript(record_id: str) -> dict[str, Any] | None:
    """The committed transcript of the reproduction covering ``record_id``,
    or ``None`` (no reviewed reproduction, or no transcript yet).  Reads a
    file; runs nothing.  Use :func:`transcript_is_current` to make sure it
    describes the record as it is stored now."""
    repro = reproduction_for(record_id)
    if repro is None:
        return None
    path = transcript_path(repro.id)
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


def _as_dict(report: ReproReport | Mapping[str, Any]) -> Mapping[str, Any]:
    return report.to_dict() if isinstance(report, ReproReport) else report


def side_by_side(report: ReproReport | Mapping[str, Any]) -> list[list[str]]:
    """Rows of the ``scenario | <subject> | <subject>`` table, header first.

    Works on a live report or a transcript dict.  Each cell is the guard's
    outcome summary, marked when it differs from the record.
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
            row.append(run["summary"] + ("" if run["ok"] else "  [DIFFERS FROM RECORD]"))
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


def render_text(report: ReproReport | Mapping[str, Any], color: bool = False, *, width: int | None = None,
                record: str | None = None) -> str:
    """Terminal rendering: guard code, every scenario with its code, the
    captured traceback or result, advice, and a verdict; then the side-by-side
    table, snippet checks and disagreements.  Accepts a transcript dict too.

    ``record``: only the guard and the runs of that record's subject (the table still shows
    every subject). ``width``: lines of prose wrap to it, lines of code are cut with a marker,
    and a table wider than it is shown as a list.
    """
    data = _as_dict(report)
    subject = data["records"].get(record, {}).get("subject") if record else None
    if subject is not None:
        data = {**data, "guards": [g for g in data["guards"] if g["subject"] == subject],
                "scenarios": [{**s, "runs": [r for r in s["runs"] if r["subject"] == subject]} for s in data["scenarios"]]}

    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    out = [paint(f"Reproduction {data['reproduction']}: {data['title']}", _BOLD),
           f"definition: {data['definition']}"]
    if data.get("isolation"):
        out.append(f"ran in: {data['isolation']}")
    if data.get("summary"):
        out += ["", data["summary"]]
    out += ["", paint("Guard code, as stored in the records (run as is, not rewritten):", _BOLD)]
    out += _guard_lines(data, paint)
    for number, scenario in enumerate(data["scenarios"], 1):
        out += _scenario_lines(scenario, f"[{number}/{len(data['scenarios'])}]", paint)
    out += ["", paint("Side by side:", _BOLD)]
    table = ["  " + line for line in _table(side_by_side(report))]
    out += table if width is None or max(map(len, table)) <= width else _stacked(side_by_side(report), width)
    out += ["", paint("Record snippets:", _BOLD)]
    for check in data["snippetChecks"]:
        part = f" ({check['part']})" if check["part"] else ""
        verdict = paint(check["verdict"], _BAD if check["verdict"] == "fail" else _GOOD)
        out.append(f"  {check['record']} {check['field']}{part}: {check['language']}, {verdict}"
                   + (f" -- {check['detail']}" if check["detail"] else ""))
    out += _disagreement_lines(data, paint)
    totals = data["totals"]
    status = paint("OK", _GOOD) if data["ok"] else paint("FAILED", _BAD)
    out += ["", f"{status}: {totals['asRecorded']}/{totals['runs']} scenario runs as recorded, "
                f"{totals['snippetChecksFailed']} snippet check(s) failed"]
    if subject is not None:
        out.append(f"(the runs of {', '.join(g['label'] for g in data['guards'])} only; `errordb repro --all` shows every subject's)")
    if width is not None:
        out = [_fit_line(line, width) for line in "\n".join(out).split("\n")]
    return "\n".join(out) + "\n"


def _fit_line(line: str, width: int) -> str:
    """A line of the report as it fits ``width``: code (indented 4 or more) cut with a marker,
    prose wrapped at spaces under its own indent."""
    if len(line) <= width:
        return line
    indent = len(line) - len(line.lstrip(" "))
    if indent >= 4 or "\033[" in line:
        return cut_line(line, width)
    return textwrap.fill(line.strip(), width=width, initial_indent=" " * indent, subsequent_indent=" " * (indent + 2),
                         break_on_hyphens=False, break_long_words=False)


def _stacked(rows: list[list[str]], width: int) -> list[str]:
    """The side-by-side table as a list, for a terminal too narrow for its columns."""
    header, *body = rows
    out = []
    for row in body:
        out.append(textwrap.fill(f"- {row[0]}", width=width, initial_indent="  ", subsequent_indent="    "))
        for name, cell in zip(header[1:], row[1:]):
            out.append(textwrap.fill(f"{name}: {cell}", width=width, initial_indent="    ", subsequent_indent="      ",
                                     break_on_hyphens=False, break_long_words=False))
    return out


def _guard_lines(data: Mapping[str, Any], paint) -> list[str]:
    out = []
    for guard in data["guards"]:
        same = f" (identical in {', '.join(guard['sameIn'])})" if guard["sameIn"] else ""
        out.append(f"  {guard['label']}: {guard['filePath']} lines {guard['firstLine']}-{guard['lastLine']}, "
                   f"record {guard['record']}{same}")
        for offset, line in enumerate(guard["code"].splitlines()):
            out.append(paint(f"    {guard['firstLine'] + offset:>5} ", _DIM) + line)
        if guard["initialState"]:
            shown = ", ".join(f"{k}={v}" for k, v in guard["initialState"].items())
            out.append(f"    stand-in starts with: {shown}")
    return out


def _scenario_lines(scenario: Mapping[str, Any], number: str, paint) -> list[str]:
    pp = scenario["setup"]["pp"]
    world, rank = pp["world_size"], pp["rank"]
    last = "last rank" if rank == world - 1 else "not the last rank"
    out = ["", paint(f"{number} {scenario['title']}", _BOLD),
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
            out.append(paint(f"    verdict: as recorded ({what})", _GOOD))
        else:
            out.append(paint("    verdict: DIFFERS", _BAD))
            out += [paint(f"      - {p}", _BAD) for p in run["problems"]]
    return out


def _disagreement_lines(data: Mapping[str, Any], paint) -> list[str]:
    titles = {s["id"]: s["title"] for s in data["scenarios"]}
    labels = {g["subject"]: g["label"] for g in data["guards"]}
    out = []
    for own, heading in ((True, "Where the records' advice and the guard disagree:"),
                         (False, "Advice silent about another record's error (each advice targets its own record):")):
        chosen = [d for d in data["disagreements"] if d["ownError"] is own]
        if chosen:
            out += ["", paint(heading, _BOLD)]
        for d in chosen:
            out.append(f"  {titles.get(d['scenario'], d['scenario'])}, {labels.get(d['subject'], d['subject'])}: "
                       f"{d['record']} {d['field']} says {d['advice']}, the guard does {d['guard']}"
                       + (f" -- {d['note']}" if d["note"] else ""))
    return out


def reproduction_text(record_id: str) -> str | None:
    """The committed reproduction of a record as a side-by-side list, for ``errordb explain``
    and ``errordb show``; None when there is none. Reads the transcript file; runs nothing."""
    transcript = load_transcript(record_id)
    if transcript is None:
        return None
    header, *body = side_by_side(transcript)
    lines = [f"{transcript.get('title', '')}".strip(), ""]
    for row in body:
        lines.append(f"- {row[0]}")
        lines.extend(f"    {name}: {cell}" for name, cell in zip(header[1:], row[1:]))
    lines.append("")
    lines.append(f"Run it: errordb repro {record_id}")
    return "\n".join(lines)


def best_reproductions(explanation: Any) -> dict[str, str]:
    """The reproduction text of each record an explanation shows in full (its best matches)."""
    ids: Iterable[str] = dict.fromkeys(match.id for finding in explanation.findings for match in finding.best)
    texts = {record_id: reproduction_text(record_id) for record_id in ids}
    return {record_id: text for record_id, text in texts.items() if text is not None}
