"""``errordb check``: the schema plus the dataset's own consistency rules, one problem per line.

Rules beyond the schema (which refuses a pattern that does not fully match the message, or that
matches every message: check reports it as the file's validation error): the pattern requires a
few letters or digits of literal text (``(.+): (.+)`` would claim almost any exception); the
snippet has exactly ``sourceCodeEnd - sourceCodeStart + 1`` lines; the line at ``lineNumber`` is
the ``raise`` of the record's class (or the line that begins it; a ``raise e`` of a variable
cannot say its class); ``githubUrl`` is the pinned URL of exactly that window; slugs follow the
convention (the message's, alone or with the id's suffix) and are unique; ids are unique; a file
inside a records tree lives at ``<owner>/<repo>/<id>.json``; every ``backgroundTag`` has a
family entry; no name that makes a file or folder of the site or the API is a Windows device
name, and no two repositories differ only in case.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from errordb.records.conventions import allowed_slugs, github_url, path_name_problems
from errordb.errors import RecordError
from errordb.records.families import families_for, load_families
from errordb.records.loader import LoadedRecord, bundled_records_dir, load_file, record_files
from errordb.records.patterns import ALMOST_ANYTHING, literal_weight
from errordb.records.schema import Record
from errordb.records.snippet import line_at, raised_class, snippet_lines


def check(paths: Iterable[str | os.PathLike[str]] | None = None) -> list[RecordError]:
    """Every problem found in the records under ``paths`` (default: the bundled records)."""
    roots = [Path(p) for p in paths] if paths is not None else [bundled_records_dir()]
    problems: list[RecordError] = []
    loaded: list[LoadedRecord] = []
    try:
        files = list(record_files(roots))
    except RecordError as exc:
        return [exc]
    for path in files:
        try:
            items = list(load_file(path))
        except RecordError as exc:
            problems.append(exc)
            continue
        for item in items:
            problems.extend(check_record(item))
            problems.extend(_check_location(item, path, roots))
        loaded.extend(items)
    problems.extend(_check_dataset(loaded))
    families_file = families_for(roots)
    try:
        families = load_families(families_file) if families_file else {}
    except RecordError as exc:
        return [*problems, exc]
    for item in loaded:
        tag = item.record.backgroundTag
        if tag and tag not in families:
            where = families_file or "families.toml"
            problems.append(RecordError(item.source, item.record.id, "backgroundTag", f"{tag!r} has no entry in {where}"))
    return problems


def _is_class_name(name: str) -> bool:
    """Whether a raise line names a class, not a variable that holds the exception (``raise e``)."""
    return "." in name or not name[0].islower()


def check_record(item: LoadedRecord) -> list[RecordError]:
    """The consistency problems of one validated record (the schema's rules hold for it already)."""
    record: Record = item.record
    problems = []

    def problem(field: str, text: str) -> None:
        problems.append(RecordError(item.source, record.id, field, text))

    weight = literal_weight(record.messagePattern)
    if weight < ALMOST_ANYTHING and record.messagePattern:  # "" matches only the empty message
        problem("messagePattern", f"matches almost any message: it requires {weight} letters or digits of literal text")
    expected_lines = record.sourceCodeEnd - record.sourceCodeStart + 1
    actual_lines = len(snippet_lines(record.sourceCode))
    if actual_lines != expected_lines:
        problem("sourceCode", f"has {actual_lines} lines; sourceCodeStart..sourceCodeEnd spans {expected_lines}")
    line = line_at(record.sourceCode, record.sourceCodeStart, record.lineNumber)
    if record.errorType in (None, "exception") and line is not None:
        raised = raised_class(line)
        if raised is None:
            problem("lineNumber", f"line {record.lineNumber} is not a raise: {line.strip()[:80]!r}")
        elif _is_class_name(raised) and raised.rsplit(".", 1)[-1] != record.errorClass.rsplit(".", 1)[-1]:
            problem("lineNumber", f"line {record.lineNumber} raises {raised}, not {record.errorClass}")
    if record.repo and record.analyzedSha:  # a learned draft has neither (the schema checks that)
        url = github_url(record.repo, record.analyzedSha, record.filePath, record.sourceCodeStart, record.sourceCodeEnd)
        if record.githubUrl != url:
            problem("githubUrl", f"should be {url}")
    if record.slug not in allowed_slugs(record.errorMessage or record.errorClass, record.id):
        problem("slug", f"should be {' or '.join(allowed_slugs(record.errorMessage or record.errorClass, record.id))}")
    return problems


def _check_location(item: LoadedRecord, path: Path, roots: list[Path]) -> list[RecordError]:
    if path.suffix != ".json":
        return []
    record = item.record
    for root in roots:
        if root.is_dir() and path.is_relative_to(root):
            expected = Path(record.repo or record.distribution or "") / f"{record.id}.json"
            if path.relative_to(root) != expected:
                return [RecordError(item.source, record.id, "id", f"file should be at {root / expected}")]
    return []


def _check_dataset(items: list[LoadedRecord]) -> list[RecordError]:
    problems = []
    first_source: dict[str, str] = {}
    slug_owner: dict[str, str] = {}
    for item in items:
        record = item.record
        if record.id in first_source:
            problems.append(RecordError(item.source, record.id, "id", f"duplicate id: also in {first_source[record.id]}"))
        first_source.setdefault(record.id, item.source)
        if record.slug in slug_owner and slug_owner[record.slug] != record.id:
            base, suffixed = allowed_slugs(record.errorMessage or record.errorClass, record.id)
            hint = f"; use {suffixed}" if record.slug == base else ""
            problems.append(RecordError(item.source, record.id, "slug", f"{record.slug!r} is also the slug of record {slug_owner[record.slug]}{hint}"))
        slug_owner.setdefault(record.slug, record.id)
    rows = [(i.record.id, i.record.repo, i.record.slug, i.record.tags, i.record.backgroundTag) for i in items]
    problems.extend(RecordError(first_source[record_id], record_id, field, text) for record_id, field, text in path_name_problems(rows))
    return problems
