"""The reproduction section of an error page, read from committed transcripts.

A reviewed reproduction (``records/repros/<id>.toml``) has a transcript of its captured run
(``records/repros/transcripts/<id>.json``). The site only *reads* transcripts through
:mod:`errordb.repro` (``load_transcript``, ``side_by_side``, ``transcript_is_current``): building
the site never executes record code, and never starts the reproduction sandbox.

:func:`reproduction_view` turns a transcript into plain data for the template.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _covered() -> dict[str, str]:
    """Record id -> reproduction id, for every reviewed definition (parsed once per process)."""
    from errordb import repro

    covered: dict[str, str] = {}
    for definition in repro.load_reproductions():
        for record_id in sorted(definition.reviewed):
            covered.setdefault(record_id, definition.id)
    return covered


@functools.cache
def _transcript(record_id: str) -> dict[str, Any] | None:
    from errordb import repro

    return repro.load_transcript(record_id)


def reproduction_view(record: dict[str, Any]) -> dict[str, Any] | None:
    """What the page shows of the reproduction covering ``record``, or ``None`` when there is none.

    When the transcript was made from another version of the record (its digest differs), the
    view says so and shows no outcomes: they may no longer describe this record.
    """
    if record["id"] not in _covered():
        return None
    transcript = _transcript(record["id"])
    if transcript is None:
        return None
    from errordb import repro

    view: dict[str, Any] = {
        "id": transcript.get("reproduction", ""),
        "title": transcript.get("title", ""),
        "summary": _paragraphs(transcript.get("summary", "")),
        "definition": transcript.get("definition", ""),
        "current": repro.transcript_is_current(transcript, record),
    }
    if not view["current"]:
        return view
    entry = transcript.get("records", {}).get(record["id"], {})
    subject = entry.get("subject")
    guards = transcript.get("guards", [])
    rows = repro.side_by_side(transcript)
    subjects = [g.get("subject") for g in guards]
    view.update(
        subject=next((g.get("label") for g in guards if g.get("subject") == subject), None),
        # Column of this record's subject in the table (0 is the scenario column).
        column=subjects.index(subject) + 1 if subject in subjects else None,
        header=rows[0],
        rows=rows[1:],
        guards=[
            {
                "label": g.get("label", ""),
                "filePath": g.get("filePath", ""),
                "firstLine": g.get("firstLine", 1),
                "lastLine": g.get("lastLine", 1),
                "code": g.get("code", ""),
                "record": g.get("record", ""),
                "sameIn": list(g.get("sameIn", [])),
                "mine": g.get("subject") == subject,
            }
            for g in guards
        ],
        scenarios=[_scenario(s) for s in transcript.get("scenarios", [])],
        ok=bool(transcript.get("ok")),
    )
    return view


def _scenario(scenario: dict[str, Any]) -> dict[str, Any]:
    pp = scenario["setup"]["pp"]  # both values given (errordb.repro.definitions reads them whole)
    world, rank = pp["world_size"], pp["rank"]
    return {
        "id": scenario.get("id", ""),
        "title": scenario.get("title", ""),
        "description": scenario.get("description", ""),
        "setup": f"pipeline parallel world_size={world}, rank={rank} ({'last rank' if rank == world - 1 else 'not the last rank'})",
        "runs": [
            {
                "label": run.get("label", ""),
                "code": run.get("code", ""),
                "traceback": run.get("traceback") or "",
                "summary": run.get("summary", ""),
                "ok": bool(run.get("ok")),
            }
            for run in scenario.get("runs", [])
        ],
    }


def _paragraphs(text: str) -> list[str]:
    """Hard-wrapped text as paragraphs (blank lines separate them; line breaks are spaces)."""
    return [" ".join(block.split()) for block in text.split("\n\n") if block.strip()]
