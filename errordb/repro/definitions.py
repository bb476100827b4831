"""Reviewed definitions: ``records/repros/*.toml``, the record digests they pin, and the check
that the records about to run are the versions a reviewer read.

A definition is data, read with :mod:`tomllib`; nothing here executes record text.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from errordb.errors import ErrordbError

DEFAULT_TIMEOUT = 10.0

#: Record fields that are executed (snippets), or that verdicts are judged by.
#: Prose fields are left out, so editing documentation does not void a review.
DIGEST_FIELDS = (
    "filePath", "lineNumber", "sourceCode", "sourceCodeStart", "sourceCodeEnd",
    "errorClass", "messagePattern", "exampleFix", "validationCode", "typeGuard",
)

_SCENARIO_KEYS = {"id", "title", "description", "pp", "config", "call", "example_fix"}

#: The definitions a maintainer has read, by id: the SHA-256 of the file. A definition's prelude
#: and calls are code; one no reviewer read runs only in the sandbox, and a reviewed id whose
#: file changed does not run at all until its digest here is updated (after a review).
REVIEWED_DEFINITIONS = {
    "dspark_capture_guard": "sha256:18493fa5f8cfe876ed24a65ec783c0d4df7871efed4baba3b92a28b25c99a30d",
}


class ReproError(ErrordbError):
    """A reproduction cannot run; nothing has been executed (exit status 2)."""


class DefinitionError(ReproError):
    """A file in ``records/repros/`` is malformed."""


class ReviewMismatch(ReproError):
    """A record is missing or differs from the version that was reviewed."""


def repros_dir() -> Path | None:
    """``records/repros/`` of the bundled records: the reviewed definitions and their
    transcripts (None in an installation without the bundled records)."""
    from errordb.store import StoreError, bundled_records_dir

    try:
        return bundled_records_dir() / "repros"
    except StoreError:
        return None


def record_digest(record: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"`` over :data:`DIGEST_FIELDS` of a record dict.

    This is what a reviewed definition pins in its ``[reviewed]`` table.
    """
    payload = {name: record.get(name) for name in DIGEST_FIELDS}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    digest: str  # "sha256:<hex>" of the definition file

    @property
    def definition_reviewed(self) -> bool:
        """Whether a maintainer read this definition as it is (:data:`REVIEWED_DEFINITIONS`)."""
        return REVIEWED_DEFINITIONS.get(self.id) == self.digest

    def subject_of(self, record_id: str) -> Subject:
        for subject in self.subjects:
            if record_id in subject.records:
                return subject
        raise KeyError(record_id)

    def definition_name(self) -> str:
        """Repository-relative path of the definition (stable, for output)."""
        return f"records/repros/{self.path.name}" if self.path.parent == repros_dir() else self.path.name


def load_reproductions(directory: Path | None = None) -> list[Reproduction]:
    """All reviewed reproductions in ``directory`` (default ``records/repros``),
    sorted by id.  Only ``*.toml`` directly in that directory count. Two definitions with one
    id, or claiming one record, are an error: neither runs."""
    directory = repros_dir() if directory is None else Path(directory)
    if directory is None or not directory.is_dir():
        return []
    found = sorted((_parse_definition(p) for p in sorted(directory.glob("*.toml"))), key=lambda r: r.id)
    claimed: dict[str, Reproduction] = {}
    for repro in found:
        for key in [f"id {repro.id}", *(f"record {rid}" for rid in repro.reviewed)]:
            other = claimed.setdefault(key, repro)
            if other is not repro:
                raise DefinitionError(f"{other.path.name} and {repro.path.name} both claim {key}: "
                                      f"remove one (a record has one reproduction)")
    return found


def reproduction_for(record_id: str, directory: Path | None = None) -> Reproduction | None:
    """The reviewed reproduction covering a record, or ``None``.

    A record without a reviewed definition has no reproduction, however it got into ``records/``.
    """
    for repro in load_reproductions(directory):
        if record_id in repro.reviewed:
            return repro
    return None


def check_reviewed(repro: Reproduction, records: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise :class:`ReviewMismatch` unless every reviewed record is there, as pinned."""
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


def _require(table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = table.get(key)
    if not isinstance(value, kind):
        raise DefinitionError(f"{where}: {key!r} must be a {kind.__name__}")
    return value


def _parse_definition(path: Path) -> Reproduction:
    """Read one definition file; data only (``tomllib``), nothing is run."""
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DefinitionError(f"{path.name}: {exc}") from exc
    where = path.name
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    pinned = REVIEWED_DEFINITIONS.get(data.get("id"))
    if pinned is not None and pinned != digest:
        raise DefinitionError(f"{where}: changed since it was reviewed ({digest}, reviewed {pinned}); it runs "
                              f"again once a maintainer has read it and updated REVIEWED_DEFINITIONS "
                              f"(errordb/repro/definitions.py)")
    reviewed = dict(_require(data, "reviewed", dict, where))
    subjects = [_parse_subject(raw, where) for raw in _require(data, "subjects", list, where)]
    covered = [rid for s in subjects for rid in s.records]
    if sorted(covered) != sorted(reviewed) or len(set(covered)) != len(covered):
        raise DefinitionError(f"{where}: every reviewed record must belong to exactly one subject")
    base_config = dict(data.get("config", {}))
    subject_ids = [s.id for s in subjects]
    scenarios = [_parse_scenario(raw, subject_ids, base_config, where)
                 for raw in _require(data, "scenarios", list, where)]
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
        digest=digest,
    )


def _parse_subject(raw: Mapping[str, Any], where: str) -> Subject:
    return Subject(
        id=_require(raw, "id", str, where),
        label=_require(raw, "label", str, where),
        records=tuple(_require(raw, "records", list, where)),
        prelude=raw.get("prelude", ""),
        state=dict(raw.get("state", {})),
        model_state=dict(raw.get("model_state", {})),
        type_guard_calls=dict(raw.get("type_guard_calls", {})),
    )


def _pipeline(table: Any, where: str) -> dict[str, int]:
    """A scenario's pipeline-parallel setup with both values given, so that the run, its
    transcript and its page say the same: ``rank`` is the last rank unless the file says."""
    world = table.get("world_size", 1) if isinstance(table, Mapping) else None
    rank = table.get("rank", world - 1 if type(world) is int else None) if isinstance(table, Mapping) else None
    if type(world) is not int or type(rank) is not int or not 0 <= rank < world or set(table) - {"world_size", "rank"}:
        raise DefinitionError(f"{where}: pp must be {{ world_size = N, rank = R }} with 0 <= R < N")
    return {"world_size": world, "rank": rank}


def _parse_scenario(raw: Mapping[str, Any], subject_ids: list[str], base_config: dict[str, Any],
                    where: str) -> Scenario:
    sid = _require(raw, "id", str, where)
    per_subject = {}
    for subject_id in subject_ids:
        entry = raw.get(subject_id)
        if entry is None:
            continue
        expect = entry.get("expect", {})
        value = SubjectScenario(
            call=entry.get("call", raw.get("call")),
            example_fix=entry.get("example_fix", raw.get("example_fix")),
            guard_record=entry.get("guard_record"),
            expect=Expectation(raises=expect.get("raises"), state=expect.get("state"),
                               advice=dict(entry.get("advice", {}))),
        )
        if (value.call is None) == (value.example_fix is None):
            raise DefinitionError(f"{where}: scenario {sid}/{subject_id} needs exactly one of call, example_fix")
        if (value.expect.raises is None) == (value.expect.state is None):
            raise DefinitionError(f"{where}: scenario {sid}/{subject_id} expects either raises or state")
        per_subject[subject_id] = value
    unknown = set(raw) - set(subject_ids) - _SCENARIO_KEYS
    if unknown:
        raise DefinitionError(f"{where}: scenario {sid}: unknown keys {sorted(unknown)}")
    return Scenario(
        id=sid,
        title=_require(raw, "title", str, where),
        description=raw.get("description", ""),
        pp=_pipeline(raw.get("pp", {}), f"{where}: scenario {sid}"),
        config={**base_config, **raw.get("config", {})},
        per_subject=per_subject,
    )
