"""What ``errordb repro`` does, on the records of a store: run reproductions (each captured
traceback identified by the matcher), print the digests a reviewer pins, write the transcripts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from errordb.atomic import write_text
from errordb.errors import ErrordbError
from errordb.repro.definitions import ReproError, Reproduction, load_reproductions, record_digest, reproduction_for
from errordb.repro.report import Matcher, ReproReport
from errordb.repro.run import run_reproduction
from errordb.repro.transcripts import transcript_path, transcript_text
from errordb.store.read import resolve_record_id


class NoReproduction(ErrordbError):
    """The record exists, but no reviewed definition covers it."""

    exit_code = 1


class NotAsRecorded(ErrordbError):
    """A reproduction does not behave as its definition pins."""

    exit_code = 1


def run_reproductions(db: Any, key: str | None, *, unsafe: bool = False) -> list[ReproReport]:
    """Run the reproduction covering the record ``key`` (an id, slug or page URL), or every
    reviewed reproduction when ``key`` is None, on the records of the store ``db`` (in the
    sandbox; ``unsafe`` lets unreviewed code run without one: :func:`~errordb.repro.run.isolation_for`).

    Each captured traceback is given to the matcher (:func:`errordb.explainer.explanation.explain`
    on ``db``), and the records it identifies are part of the report.
    """
    if key is None:
        chosen = load_reproductions()
    else:
        chosen = [_reproduction_of(db, key)]
    matcher = _matcher(db)
    return [_run(repro, _records(db, repro), matcher, unsafe) for repro in chosen]


def digest_lines(db: Any, keys: Iterable[str]) -> list[str]:
    """The ``[reviewed]`` lines that pin the records ``keys`` as stored in ``db``:
    ``<id> = "sha256:<hex>"`` (see :func:`~errordb.repro.definitions.record_digest`)."""
    from errordb.store import get_record

    lines = []
    for key in keys:
        record_id = resolve_record_id(db, key)
        lines.append(f'{record_id} = "{record_digest(get_record(db, record_id))}"')
    return lines


def write_transcripts(db: Any) -> list[Path]:
    """Run every reviewed reproduction on the records of ``db`` and write its transcript,
    ``records/repros/transcripts/<id>.json``; returns the paths written.

    Refuses (:class:`NotAsRecorded`) before writing anything when a reproduction does not behave
    as recorded, so a committed transcript always shows the behaviour as recorded.
    """
    reports = [_run(repro, _records(db, repro), None) for repro in load_reproductions()]
    for report in reports:
        if not report.ok:
            raise NotAsRecorded(f"{report.reproduction} does not behave as recorded; no transcript written "
                                f"(`errordb repro --all` shows where)")
    written = []
    for report in reports:
        path = transcript_path(report.reproduction)
        write_text(path, transcript_text(report))
        written.append(path)
    return written


def _reproduction_of(db: Any, key: str) -> Reproduction:
    record_id = resolve_record_id(db, key)
    found = reproduction_for(record_id)
    if found is None:
        raise NoReproduction(f"{record_id} has no reviewed reproduction (see records/repros/README.md)")
    return found


def _records(db: Any, repro: Reproduction) -> dict[str, dict[str, Any]]:
    """The records ``repro`` reviewed, as ``db`` stores them."""
    from errordb.store import get_record

    records = {rid: get_record(db, rid) for rid in repro.reviewed}
    missing = sorted(rid for rid, record in records.items() if record is None)
    if missing:
        raise ErrordbError(f"reproduction {repro.id}: record {missing[0]} is not in the database")
    return records


def _run(repro: Reproduction, records: dict[str, dict[str, Any]], matcher: Matcher | None,
         unsafe: bool = False) -> ReproReport:
    try:
        return run_reproduction(repro, records, matcher=matcher, unsafe=unsafe)
    except ReproError as exc:
        raise ErrordbError(f"reproduction {repro.id}: {exc}") from None


def _matcher(db: Any) -> Matcher:
    """The record ids ``errordb explain`` finds in a traceback, best first."""
    from errordb.explainer.explanation import explain

    def identify(traceback_text: str) -> list[str]:
        return [match.id for match, _ in explain(traceback_text, db).matches]

    return identify
