"""``errordb explain``: parse a traceback or log, match every exception, say what it is.

The data flows one way: text → :mod:`errordb.explainer.parse` → :class:`errordb.explainer.match.Matcher` →
:class:`Explanation`, which the renderers (:mod:`errordb.explainer.render`) and ``--format json`` read.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from errordb.explainer.match import Match, Matcher, rank

SIMILAR_LIMIT = 3
#: explain reports at most this many exceptions of one input (the first ones, in input order);
#: the rest are counted, not matched (``omitted``; ``omittedExceptions`` in JSON). Each finding
#: costs a few KB until the output is written (~6.6 KB for ``--format json``), so without a cap a
#: log of a million distinct exceptions would need gigabytes; with it, ~7 MB at most.
MAX_FINDINGS = 1000
#: Name and version of the ``--format json`` document (its schema: :mod:`errordb.explainer.result`).
FORMAT_NAME = "errordb.explain"
FORMAT_VERSION = 2


@dataclass
class Finding:
    """One parsed exception and the records that match it, best first."""

    index: int
    exception: Any  # errordb.explainer.parse.ParsedException
    matches: list[Match]
    root_cause: bool

    @property
    def best(self) -> list[Match]:
        """The matches sharing the best score: one record, or several equally likely."""
        if not self.matches:
            return []
        top = self.matches[0].score
        return [m for m in self.matches if m.score == top]

    @property
    def tell_apart(self) -> str | None:
        """When several records match equally well, what tells them apart."""
        best = self.best
        if len(best) < 2:
            return None
        places = "; ".join(f"{m.record['filePath']}:{m.record['lineNumber']} in {m.record['function'] or '?'}" for m in best)
        return (
            f"{len(best)} records share this message: {places}. "
            "The traceback's frames tell them apart: paste the whole traceback."
        )


@dataclass
class Explanation:
    """Everything explain found in one input."""

    findings: list[Finding]
    dataset_version: str | None
    similar: list[dict[str, Any]] = field(default_factory=list)
    #: How many records were searched (the store's count), for "nothing matches" to say so.
    record_count: int | None = None
    #: When nothing matched in the store errordb chose (not one named with --db): (learned drafts,
    #: distributions they come from) in it.
    learned: tuple[int, int] | None = None
    #: Exceptions found after the first :data:`MAX_FINDINGS`: counted, not matched or shown.
    omitted: int = 0
    #: The stored record of every best match (:attr:`Finding.best`), by id: what the renderers show in full.
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The dataset's own site URL (its ``dataset.toml``): its records' links when none is given.
    site_url: str | None = None

    @property
    def matches(self) -> list[tuple[Match, Finding]]:
        """Each matched record once, with its best score across the input, best first."""
        best: dict[str, tuple[Match, Finding]] = {}
        for finding in self.findings:
            for match in finding.matches:
                if match.id not in best or match.score > best[match.id][0].score:
                    best[match.id] = (match, finding)
        order = rank([m for m, _ in best.values()])
        return [best[m.id] for m in order]

    @property
    def exit_code(self) -> int:
        """0 when something matched, 1 when nothing did (like grep); omitted exceptions do not count."""
        return 0 if any(f.matches for f in self.findings) else 1

    def to_dict(self) -> dict[str, Any]:
        """The ``--format json`` document (shape: :mod:`errordb.explainer.result`, version 2)."""
        from errordb import __version__

        document = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "errordbVersion": __version__,
            "datasetVersion": self.dataset_version,
            "exceptions": [_exception_dict(finding) for finding in self.findings],
            "matches": [_match_dict(match, finding) for match, finding in self.matches],
            "similar": self.similar,
        }
        # Only when something was left out: a complete document stays valid against the
        # schema as first published (which allows no other field).
        if self.omitted:
            document["omittedExceptions"] = self.omitted
        return document


def searched(explanation: Explanation) -> str:
    """What a "nothing matches" answer searched: ``3 records (dataset 2026-08-28T06:17:29Z)``,
    the learned drafts among them, or that nothing is learned yet."""
    count = explanation.record_count
    drafts, sources = explanation.learned or (0, 0)
    if count is not None and drafts:
        documented = count - drafts
        what = (f"{documented:,} documented record{'s' if documented != 1 else ''} and {drafts:,} drafts learned "
                f"from {sources:,} installed distribution{'s' if sources != 1 else ''}")
    else:
        what = f"{count:,} record{'s' if count != 1 else ''}" if count is not None else "the records"
    what = f"{what} (dataset {explanation.dataset_version})" if explanation.dataset_version else what
    if drafts or explanation.learned is None:
        return what
    return f"{what}; nothing learned yet: `errordb learn` reads the standard library and your installed packages"


#: Folders that hold code the user did not write: installed packages, the standard library.
_NOT_OWN = re.compile(r"(?:^|[/\\])(?:site-packages|dist-packages|lib[/\\]python\d+(?:\.\d+)?t?|Lib)[/\\]|^<frozen ")


def own_frame(exception: Any) -> Any | None:
    """The innermost frame in the user's own code: not in an installed package, not in the
    standard library (``<stdin>``, a notebook cell and a script are the user's)."""
    for frame in reversed(exception.frames):
        if frame.file and not _NOT_OWN.search(frame.file):
            return frame
    return None


def _evidence(match: Match) -> list[dict[str, Any]]:
    return [{"kind": e.kind, "points": e.points, "detail": e.detail} for e in match.evidence]


#: Each exception's place in its chain, as ``--format json`` (version 2) says it: the one a chain
#: starts from, or that stands alone (``root``); one raised from the one before it (``raise ...
#: from``: "the direct cause of the following exception"), or while the one before it was being
#: handled; a member of an exception group.
JSON_ROLES = {"root": "root", "cause": "raised-from", "context": "raised-during", "group-member": "group-member"}


def _exception_dict(finding: Finding) -> dict[str, Any]:
    """One entry of the JSON document's ``exceptions``."""
    exc = finding.exception
    return {
        "index": finding.index,
        "type": exc.exc_type,
        "message": exc.message,
        "notes": list(exc.notes),
        "role": JSON_ROLES[exc.role],
        "rootCause": exc.role == "root",
        "groupPath": list(exc.group_path),
        "ranks": list(exc.ranks),
        "line": exc.line_no,
        "frames": [{"file": f.file, "line": f.line, "function": f.function} for f in exc.frames],
        "matches": [
            {"id": m.id, "slug": m.record["slug"], "score": m.score, "evidence": _evidence(m)}
            for m in finding.matches
        ],
        "tellApart": finding.tell_apart,
    }


def _match_dict(match: Match, finding: Finding) -> dict[str, Any]:
    """One entry of the JSON document's ``matches``: a record, for the exception it matches best."""
    record = match.record
    entry = {
        "id": match.id,
        "slug": record["slug"],
        "score": match.score,
        "evidence": _evidence(match),
        "repo": record["repo"],
        "errorClass": record["errorClass"],
        "errorMessage": record["errorMessage"],
        "filePath": record["filePath"],
        "lineNumber": record["lineNumber"],
        "function": record["function"],
        "exception": finding.index,
        "tie": len(finding.best) > 1 and match in finding.best,
    }
    if record.get("distribution"):  # only then: other documents stay as first published
        entry["distribution"], entry["distributionVersion"] = record["distribution"], record["distributionVersion"]
    if record.get("readFrom"):
        entry["readFrom"] = record["readFrom"]
    return entry


def _is_root_cause(exc: Any, following: Any) -> bool:
    # A chain starts with role "root"; the exceptions after it ("cause"/"context") belong to it.
    return exc.role == "root" and following is not None and following.role in ("cause", "context")


def explain_exceptions(exceptions: Iterable[Any], db: Any, limit: int | None = None) -> Explanation:
    """Match parsed exceptions against the store ``db`` (a connection or sqlite_utils Database).

    Only the first ``limit`` (default :data:`MAX_FINDINGS`) are kept and matched; the rest of
    ``exceptions`` (a list, or an iterator read lazily) are counted in ``omitted``, so memory is
    bounded however many there are.
    """
    from errordb.store import meta

    limit = MAX_FINDINGS if limit is None else limit
    kept: list[Any] = []
    following = None  # the first exception after the kept ones: it says if the last kept one is a root cause
    omitted = 0
    for exc in exceptions:
        if len(kept) < limit:
            kept.append(exc)
        else:
            if not omitted:
                following = exc
            omitted += 1
    matcher = Matcher(getattr(db, "conn", db))
    findings = []
    for index, exc in enumerate(kept):
        after = kept[index + 1] if index + 1 < len(kept) else following
        matches = matcher.match(exc.exc_type, exc.message, exc.frames)
        if not matches and index < LOCAL_FINDINGS:
            from errordb.explainer.local import local_matches

            matches = local_matches(exc)
        findings.append(Finding(index, exc, matches, _is_root_cause(exc, after)))
    stats = meta(db)
    count = stats.get("recordCount")
    explanation = Explanation(findings, stats.get("datasetVersion"), omitted=omitted, records=_best_records(db, findings),
                              record_count=int(count) if count and str(count).isdigit() else None, site_url=stats.get("siteUrl"))
    if kept and not any(f.matches for f in findings):
        explanation.similar = similar_records(db, " ".join(exc.message for exc in kept))
        from errordb.store.default import is_default_store

        if is_default_store(getattr(db, "conn", db)):  # errordb learn adds to it: the answer may say so
            explanation.learned = (int(stats.get("learnedDrafts") or 0), int(stats.get("learnedDistributions") or 0))
    return explanation


def _best_records(db: Any, findings: list[Finding]) -> dict[str, dict[str, Any]]:
    """The stored record of each best match, read once each (a draft read on the fly is its
    match's record already)."""
    from errordb.store import get_family, get_record

    records: dict[str, dict[str, Any]] = {}
    for finding in findings:
        for match in finding.best:
            if match.record.get("readFrom"):
                records[match.id] = match.record
            elif match.id not in records:
                record = get_record(db, match.id)
                if record is not None:
                    record["family"] = get_family(db, record.get("backgroundTag"))  # shown with it
                    if record.get("distribution"):
                        record["alsoRaisedAt"] = _also_raised_at(db, record)
                    records[match.id] = record
    return records


#: Exceptions (the first ones) whose file is read on the fly when no record matches them.
LOCAL_FINDINGS = 20
#: Other raise sites of a learned draft's message listed with it.
ALSO_RAISED_LIMIT = 5


def _also_raised_at(db: Any, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The other raise sites of the same message in the same distribution's learned code."""
    sql = ("SELECT filePath, lineNumber, function FROM records WHERE messagePattern = ? AND errorClass = ? "
           "AND distribution = ? AND id != ? ORDER BY filePath, lineNumber LIMIT ?")
    rows = db.execute(sql, [record["messagePattern"], record["errorClass"], record["distribution"], record["id"], ALSO_RAISED_LIMIT])
    return [{"filePath": f, "lineNumber": n, "function": fn} for f, n, fn in rows]


def explain(source: str | BaseException | Iterable[str], db: Any = None) -> Explanation:
    """Explain a traceback or log text, an exception object, or lines of a log read lazily.

    The first :data:`MAX_FINDINGS` exceptions found are explained; the rest are counted
    (:attr:`Explanation.omitted`).

    ``db`` is a sqlite_utils Database, a path, or ``None`` for ``$ERRORDB_DB`` or the
    embedded default.
    """
    from errordb.explainer.parse import iter_exceptions, parse_text

    if isinstance(source, BaseException):
        source = "".join(traceback.format_exception(source))
    db = _as_db(db)
    # Lines are parsed as they are read, and only the first MAX_FINDINGS exceptions are kept. A
    # text is parsed whole (it is in memory already; parse_text puts rare interleavings in order).
    exceptions = parse_text(source) if isinstance(source, str) else iter_exceptions(source)
    return explain_exceptions(exceptions, db)


_FTS_WORD = re.compile(r"[A-Za-z0-9_]{3,}")
#: A word found in more records than this is too common to say what the message is about.
COMMON_WORD_DOCS = 1000


def similar_records(db: Any, text: str, limit: int = SIMILAR_LIMIT) -> list[dict[str, Any]]:
    """Records whose text resembles ``text`` by full-text search: similar, not the same error.

    Ranking every record that shares a common word costs time proportional to the dataset, so
    only the message's distinctive words are used: those in at most ``COMMON_WORD_DOCS``
    records (each word's count stops at that bound, so the cost is bounded too).
    """
    words = list(dict.fromkeys(w.lower() for w in _FTS_WORD.findall(text)))[:32]
    probe = "SELECT count(*) FROM (SELECT rowid FROM records_fts WHERE records_fts MATCH ? LIMIT ?)"
    distinctive = [w for w in words if db.execute(probe, [f'"{w}"', COMMON_WORD_DOCS + 1]).fetchone()[0] <= COMMON_WORD_DOCS]
    if not distinctive:
        return []
    query = " OR ".join(f'"{w}"' for w in distinctive)
    sql = (
        "SELECT records.id, records.slug, records.errorMessage FROM records_fts "
        "JOIN records ON records.rowid = records_fts.rowid WHERE records_fts MATCH ? "
        "ORDER BY bm25(records_fts), records.id LIMIT ?"
    )
    rows = db.execute(sql, [query, limit]).fetchall()
    return [{"id": r[0], "slug": r[1], "errorMessage": r[2]} for r in rows]


def _as_db(db: Any) -> Any:
    from errordb.store import open_connection

    return db if db is not None and not isinstance(db, (str, os.PathLike)) else open_connection(db, learned=True)
