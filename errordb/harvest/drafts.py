"""``errordb harvest``: draft records from the ``raise`` statements of a Python source tree.

The tree is read with :mod:`ast`, never imported or executed. Every ``raise`` of an exception
whose message can be read statically (see :mod:`errordb.harvest.messages`) becomes a
schemaVersion-2 record with the mechanical half of an analysis filled in: message, pattern,
class, file, line, source window, pinned URL, slug, a stable id. The fields that need a human
(documentation, trigger scenarios, common situations, solutions, prevention tips) stay empty
and the record carries the tag :data:`DRAFT_TAG`. Raises whose message cannot be read are
counted and listed with the reason, never guessed. The rules are in ``docs/harvest.md``.

A run is deterministic (the same tree, options and ``--out`` tree give byte-identical files)
and all or nothing: every record is built and checked before the first file is written.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from errordb.records.conventions import github_url, slug_with_suffix
from errordb.errors import RecordError
from errordb.harvest.scan import REASONS, HarvestError, ProgressCallback, ScannedFile, Site, Skip, scan_tree

if TYPE_CHECKING:
    from errordb.records.schema import Envelope

__all__ = ["DRAFT_TAG", "REASONS", "HarvestError", "HarvestReport", "harvest", "record_id"]

#: The tag that marks a record as a machine draft, awaiting human analysis.
DRAFT_TAG = "draft"
#: Lines of source shown either side of the raise (the seeds' window: 37 lines).
CONTEXT_LINES = 18
#: Version of the id recipe; part of the hashed text so a future recipe cannot collide.
ID_SCHEME = "errordb-harvest-id-1"
#: analyzedAt when none is given and SOURCE_DATE_EPOCH is not set: a placeholder that reads
#: as "unknown" rather than a real date, so that a run depends on its inputs only.
DEFAULT_ANALYZED_AT = "1970-01-01"
#: The fields a harvest owns; every other field is the analyst's and survives a re-harvest.
MECHANICAL_FIELDS = (
    "id", "repo", "errorMessage", "errorClass", "filePath", "lineNumber", "functionName", "sourceCode",
    "sourceCodeStart", "sourceCodeEnd", "githubUrl", "analyzedSha", "analyzedAt", "schemaVersion",
)  # fmt: skip

# Matched with fullmatch: "$" would also match before a final newline.
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z)?")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")


@dataclass
class HarvestReport:
    """What a harvest read and wrote."""

    files: int = 0
    unparsable: list[Skip] = field(default_factory=list)
    raises: int = 0
    reraises: int = 0
    via_helpers: int = 0  # sites whose message is given to a helper such as fail()
    skips: list[Skip] = field(default_factory=list)
    records: int = 0
    added: int = 0
    updated: int = 0
    moved: int = 0
    unchanged: int = 0
    pruned: int = 0
    stale: list[str] = field(default_factory=list)  # vanished, but reviewed: kept
    seconds: float = 0.0

    @property
    def reasons(self) -> Counter[str]:
        return Counter(skip.reason for skip in self.skips)

    @property
    def files_per_second(self) -> float:
        return self.files / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(self.reasons.items()))
        parts = [
            f"{self.files} files ({len(self.unparsable)} unparsable), {self.raises} raises "
            f"(and {self.reraises} re-raises), {self.via_helpers} helper calls: {self.records} records",
            f"{self.added} added, {self.updated} updated ({self.moved} moved), {self.unchanged} unchanged, "
            f"{self.pruned} pruned",
            f"{len(self.skips)} unreadable" + (f" ({reasons})" if reasons else ""),
        ]
        if self.stale:
            parts.append(f"{len(self.stale)} vanished but reviewed, kept")
        return "; ".join(parts) + f" in {self.seconds:.2f}s ({self.files_per_second:.0f} files/s)"

    def listing(self) -> str:
        """Every file that did not parse and every unreadable raise, one per line."""
        return "".join(f"{skip}\n" for skip in [*self.unparsable, *self.skips])


# ---------------------------------------------------------------------------- building records


def record_id(repo: str, site: Site) -> str:
    """The stable id of a raise site: the first 16 hex digits of a SHA-256.

    Hashed, one per line: the id scheme, the repository, the file, the qualified name of the
    enclosing function, the helper's name (for a message given to a helper like ``fail``;
    else empty), the class as written, the message template (``errorMessage``) and the
    occurrence index (how many identical sites precede it in that function). Not the line: a
    raise that moves keeps its id, so a re-harvest of a newer commit updates the record
    instead of adding one. For a helper call, the file and function are the call's.
    """
    parts = [ID_SCHEME, repo, *site.identity, str(site.occurrence)]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def source_window(lines: list[str], line: int) -> tuple[str, int, int]:
    """The snippet around ``line``: 18 lines either side, clipped at the file's ends."""
    start = max(1, line - CONTEXT_LINES)
    end = min(len(lines), line + CONTEXT_LINES)
    return "\n".join(lines[start - 1 : end]), start, end


def draft_record(
    site: Site, lines: list[str], *, repo: str | None, sha: str | None, analyzed_at: str, installed: tuple[str, str] | None = None,
    id_key: str | None = None,
) -> dict[str, Any]:
    """A draft record (as a dict in schema order) for one raise site.

    Its slug is the message's (the class's, for a raise without a message) with the id's suffix:
    unique across repositories without looking at any other record, so it stays the same when
    another project is harvested beside it. A draft learned from an installed distribution
    (``installed``: its name and version) names it, is identified by it rather than by the
    repository (or by ``id_key``), has no commit or GitHub link, and says in
    ``triggerScenarios`` what holds where it is raised (:func:`raised_when`).
    """
    source, start, end = source_window(lines, site.line)
    # A file read on the fly (repository and distribution unknown) is identified by its site alone.
    rid = record_id(id_key or (f"installed:{installed[0].lower()}" if installed else repo or ""), site)
    return {
        "id": rid,
        "repo": repo,
        "distribution": installed[0] if installed else None,
        "distributionVersion": installed[1] if installed else None,
        "slug": slug_with_suffix(site.message or site.error_class, rid),
        "errorCode": None,
        "errorMessage": site.message,
        "messagePattern": site.pattern,
        "errorType": "exception",
        "errorClass": site.error_class,
        "httpStatus": None,
        "severity": "error",
        "filePath": site.file,
        "lineNumber": site.line,
        # A raise through a message helper is in the helper; its caller is what qualname names.
        "functionName": None if site.via else site.qualname or None,
        "sourceCode": source,
        "sourceCodeStart": start,
        "sourceCodeEnd": end,
        "githubUrl": github_url(repo, sha, site.file, start, end) if repo and sha else None,
        "documentation": "",
        "triggerScenarios": raised_when(site.conditions) if installed else "",
        "commonSituations": "",
        "solutions": [],
        "exampleFix": None,
        "handlingStrategy": None,
        "validationCode": None,
        "typeGuard": None,
        "tryCatchPattern": None,
        "preventionTips": [],
        "tags": [DRAFT_TAG],
        "backgroundTag": None,
        "analyzedSha": sha,
        "analyzedAt": analyzed_at,
        "schemaVersion": 2,
    }


def raised_when(conditions: tuple[str, ...]) -> str:
    """A sentence of what holds where a draft's raise is (``Site.conditions``, innermost first):
    ``Raised when `layer_ids is None`, after `self.pp_group.is_last_rank`.``; "" when nothing does."""
    if not conditions:
        return ""
    parts = [f"while handling `{c[7:]}`" if c.startswith("except ") else f"`{c}`" for c in conditions]
    first = parts[0] if parts[0].startswith("while") else f"when {parts[0]}"
    return f"Raised {first}" + (f", after {', '.join(parts[1:])}" if parts[1:] else "") + "."


def is_draft(record: Any) -> bool:
    """Whether a record (model or dict) is still a machine draft."""
    tags = record["tags"] if isinstance(record, dict) else record.tags
    return DRAFT_TAG in tags


def merge(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """A re-harvested record: the harvest's fields from ``new``, the analyst's from ``old``.

    While a record is a draft its pattern and slug are the harvest's too (a newer errordb may
    read the message better, and the slug follows the message); once reviewed, a pattern an
    analyst may have refined and the slug its page is known by are kept.
    """
    merged = dict(old)
    for name in MECHANICAL_FIELDS:
        merged[name] = new[name]
    if is_draft(old):
        merged["messagePattern"] = new["messagePattern"]
        merged["slug"] = new["slug"]
    return {name: merged.get(name) for name in new}  # schema order (a field left out of a file is None)


# ---------------------------------------------------------------------------- the run


@dataclass
class _Existing:
    """A record already in the --out tree, read as plain JSON (validated only when used)."""

    path: Path
    source: str  # path, or path:line in a JSON Lines file
    text: str  # the envelope's JSON text as stored
    data: dict[str, Any]
    raw: bytes  # the whole file's bytes (to put back if the run fails)

    @property
    def record(self) -> dict[str, Any]:
        return self.data["record"]

    def validated(self) -> Envelope:
        """The envelope, validated: a record this run rewrites or merges must be a good one."""
        from errordb.records.loader import parse_envelope

        try:
            return parse_envelope(self.source, self.text)
        except RecordError as exc:
            raise HarvestError(f"--out tree: {exc}") from None


def _validate_options(repo: str, sha: str, prefix: str, analyzed_at: str, dataset_version: str) -> None:
    if not _REPO.fullmatch(repo) or repo.split("/")[1] in (".", ".."):
        raise HarvestError(f"--repo {repo!r}: give the GitHub repository as OWNER/NAME")
    if not _SHA.fullmatch(sha):
        raise HarvestError(f"--sha {sha!r}: give the full 40-digit lowercase hex commit sha")
    if not _DATE.fullmatch(analyzed_at):
        raise HarvestError(f"--analyzed-at {analyzed_at!r}: give a UTC date (2026-08-28) or time (2026-08-28T06:17:29Z)")
    if not _DATETIME.fullmatch(dataset_version):
        raise HarvestError(f"--dataset-version {dataset_version!r}: give a UTC time (2026-08-28T06:17:29.519Z)")
    if prefix:
        parts = prefix.split("/")
        if prefix.startswith("/") or "\\" in prefix or any(p in ("", ".", "..") for p in parts):
            raise HarvestError(f"--prefix {prefix!r}: give a relative path inside the repository (src/click)")


def default_analyzed_at() -> str:
    """``$SOURCE_DATE_EPOCH`` as a UTC date when set (the reproducible-builds convention), else
    :data:`DEFAULT_ANALYZED_AT`. Never the clock: a harvest depends on its inputs only."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return time.strftime("%Y-%m-%d", time.gmtime(int(epoch)))
    return DEFAULT_ANALYZED_AT


def harvest(
    path: str | os.PathLike[str],
    *,
    repo: str,
    sha: str,
    out: str | os.PathLike[str] = "records",
    prefix: str = "",
    prune: bool = False,
    analyzed_at: str | None = None,
    dataset_version: str | None = None,
    progress: ProgressCallback | None = None,
) -> HarvestReport:
    """Harvest draft records from the Python files under ``path`` into the records tree ``out``.

    ``prefix`` is where ``path`` sits inside the repository ``repo`` at commit ``sha``. Records
    of the same raise site (same id) are updated in place, keeping what an analyst wrote; with
    ``prune``, draft records of ``repo`` under the harvested path whose raise is gone are
    deleted. Other records are never touched. Raises :class:`HarvestError` (and writes nothing)
    when the options or the ``out`` tree are unusable.

    ``progress``, if given, is called as ``progress(stage, done, total)`` while the run goes
    through its stages, in order: ``"classes"`` and ``"raises"`` (the two passes over the
    files, counted in files), ``"checking"`` (drafts built, validated and checked) and
    ``"writing"`` (files written or deleted). Each stage starts with ``done`` 0 and ends with
    ``done == total``.
    """
    started = time.perf_counter()
    root = Path(path)
    out = Path(out)
    prefix = prefix.strip("/") if prefix else ""
    analyzed_at = analyzed_at or default_analyzed_at()
    if dataset_version is None:
        dataset_version = analyzed_at if "T" in analyzed_at else f"{analyzed_at}T00:00:00Z"
    _validate_options(repo, sha, prefix, analyzed_at, dataset_version)
    if not root.exists():
        raise HarvestError(f"{root}: no such file or folder")
    if root.is_file() and root.suffix != ".py":
        raise HarvestError(f"{root}: not a Python file")

    step = progress or (lambda stage, done, total: None)
    report = HarvestReport()
    scanned, report.unparsable = scan_tree(root, prefix, step)
    report.files = len(scanned) + len(report.unparsable)
    run = _Run(out, repo, dataset_version, report)
    run.check_drafts(scanned, sha, analyzed_at, step)
    existing = _read_out_tree(out)
    final, deletes, merged = run.plan(existing, _scope(root, prefix) if prune else None)
    _check_slugs(final, set(run.drafts))
    writes = run.files(final, existing, merged)
    previous = {item.path: item.raw for item in existing.values() if item.path in writes}
    _commit(writes, deletes, previous, lambda done, total: step("writing", done, total))
    report.seconds = time.perf_counter() - started
    return report


@dataclass
class _Run:
    """One harvest's drafts, from their checking to the files they become."""

    out: Path
    repo: str
    dataset_version: str
    report: HarvestReport
    drafts: dict[str, dict[str, Any]] = field(default_factory=dict)
    checked: dict[str, Envelope] = field(default_factory=dict)  # the drafts, validated and checked

    def check_drafts(self, scanned: list[ScannedFile], sha: str, analyzed_at: str, step: ProgressCallback) -> None:
        """Build, validate and check a draft of every site; a draft that fails is a skip."""
        report = self.report
        sites, done = sum(len(file.sites) for file in scanned), 0
        step("checking", 0, sites)
        for file in scanned:
            report.raises += file.raises
            report.reraises += file.reraises
            report.via_helpers += sum(1 for site in file.sites if site.via)
            report.skips.extend(file.skips)
            for site in file.sites:
                done += 1
                step("checking", done, sites)
                record = draft_record(site, file.lines, repo=self.repo, sha=sha, analyzed_at=analyzed_at)
                envelope, problem = check_draft(record, self.dataset_version)
                if record["id"] in self.drafts:  # cannot happen with distinct identities; never overwrite
                    other = self.drafts[record["id"]]
                    problem = f"id: the same as the site at {other['filePath']}:{other['lineNumber']}"
                if problem:
                    report.skips.append(Skip(site.file, site.line, "failed-check", problem))
                    continue
                self.drafts[record["id"]] = record
                self.checked[record["id"]] = envelope

    def plan(self, existing: dict[str, _Existing], in_scope) -> tuple[dict[str, dict[str, Any]], list[Path], set[str]]:
        """(every record the tree will hold by id, the files to delete, the ids merged with an
        analyst's record). ``in_scope``: with --prune, whether a filePath was harvested now."""
        deletes: list[Path] = []
        final: dict[str, dict[str, Any]] = {}
        for rid, item in existing.items():
            if rid in self.drafts:
                continue
            record = item.record
            if in_scope is not None and record["repo"] == self.repo and in_scope(record["filePath"]):
                if is_draft(record):
                    if item.path.suffix == ".jsonl":  # deleting the file would take its other records along
                        raise HarvestError(f"{item.source}: record {rid}: --prune would remove it, but it is a line of a JSON "
                                           "Lines file, and --prune removes whole files; move it to a .json file of its own, "
                                           "or delete its line")
                    deletes.append(item.path)
                    self.report.pruned += 1
                    continue
                self.report.stale.append(rid)
            final[rid] = record
        merged: set[str] = set()
        for rid, record in self.drafts.items():
            old = existing.get(rid)
            if old is not None:
                if old.path != _target(self.out, record):
                    raise HarvestError(f"{old.path}: record {rid} is harvested again but lives outside {_target(self.out, record)}")
                record = merge(record, old.validated().record.model_dump(mode="json"))
                merged.add(rid)
            final[rid] = record
        return final, deletes, merged

    def files(self, final: dict[str, dict[str, Any]], existing: dict[str, _Existing], merged: set[str]) -> dict[Path, str]:
        """The text of every file to write: this run's records that changed."""
        writes: dict[Path, str] = {}
        for rid, record in final.items():
            if rid in self.drafts:
                text = _canonical_text(self._envelope(rid, record, rid in merged))
                if self._count(existing.get(rid), record, text):
                    writes[_target(self.out, record)] = text
        return writes

    def _envelope(self, rid: str, record: dict[str, Any], merged: bool) -> Envelope:
        from errordb.records.schema import Envelope

        if merged:
            return Envelope.model_validate({"record": record, "datasetVersion": self.dataset_version})
        return self.checked[rid]  # validated and checked already

    def _count(self, old: _Existing | None, record: dict[str, Any], text: str) -> bool:
        """Count one of this run's records in the report; whether its file is to be written."""
        report = self.report
        report.records += 1
        if old is None:
            report.added += 1
        elif old.text == text:
            report.unchanged += 1
            return False
        else:
            report.updated += 1
            report.moved += old.record["lineNumber"] != record["lineNumber"]
        return True


def _canonical_text(envelope: Envelope) -> str:
    from errordb.records.schema import canonical_json

    return canonical_json(envelope)


def check_draft(record: dict[str, Any], dataset_version: str) -> tuple[Envelope | None, str | None]:
    """The draft validated, and the first problem ``errordb check`` would report (or ``None``)."""
    from pydantic import ValidationError

    from errordb.records.check import check_record
    from errordb.records.loader import LoadedRecord
    from errordb.records.schema import Envelope

    try:
        envelope = Envelope.model_validate({"record": record, "datasetVersion": dataset_version})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return None, f"{'.'.join(map(str, first['loc'][1:]))}: {first['msg']}"
    problems = check_record(LoadedRecord(record["filePath"], envelope))
    return envelope, (f"{problems[0].field}: {problems[0].problem}" if problems else None)


def _scope(root: Path, prefix: str):
    """Whether a record's filePath lies in what this run harvested (for --prune)."""
    if root.is_file():
        only = str(PurePosixPath(prefix, root.name)) if prefix else root.name
        return lambda file_path: file_path == only
    if not prefix:
        return lambda file_path: True
    return lambda file_path: file_path.startswith(prefix + "/")


def _target(out: Path, record: dict[str, Any]) -> Path:
    return out / record["repo"] / f"{record['id']}.json"


#: The fields of an existing record a harvest reads without validating the whole record.
_PEEKED = {"id": str, "repo": str, "slug": str, "errorMessage": str, "filePath": str, "lineNumber": int, "tags": list}


def _read_out_tree(out: Path) -> dict[str, _Existing]:
    """Every record already under ``out``: its id, repo, slug, message, file and tags.

    Records are validated only when this run rewrites or merges them (reading a large tree
    through the full schema would cost more than the harvest); a file that is not JSON or
    lacks those fields stops the run before anything is written.
    """
    import json

    from errordb.records.loader import record_files

    if not out.exists():
        return {}
    if not out.is_dir():
        raise HarvestError(f"--out {out}: not a folder")
    found: dict[str, _Existing] = {}
    try:
        paths = list(record_files([out]))
    except RecordError as exc:
        raise HarvestError(f"--out tree: {exc}") from None
    for path in paths:
        try:
            raw = path.read_bytes()
            content = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HarvestError(f"{path}: cannot read: {exc}") from None
        lines = content.split("\n") if path.suffix == ".jsonl" else [content]
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            source = f"{path}:{number}" if path.suffix == ".jsonl" else str(path)
            try:
                data = json.loads(text)
                record = data["record"]
                if not all(isinstance(record[k], t) for k, t in _PEEKED.items()):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                raise HarvestError(f"{source}: not a record file (run errordb check)") from None
            rid = record["id"]
            if rid in found:
                raise HarvestError(f"{source}: duplicate id {rid} (also in {found[rid].source}); fix the records tree first")
            found[rid] = _Existing(path, source, text, data, raw)
    return found


def _check_slugs(final: dict[str, dict[str, Any]], ours: set[str]) -> None:
    """Refuse a run whose records would share a slug with another record of the tree."""
    holders: dict[str, str] = {}
    for rid in sorted(final):
        other = holders.setdefault(final[rid]["slug"], rid)
        if other != rid and (rid in ours or other in ours):
            raise HarvestError(f"records {other} and {rid} would share the slug {final[rid]['slug']!r}")


def _commit(writes: dict[Path, str], deletes: list[Path], previous: dict[Path, bytes], progress=None) -> None:
    """Write and delete files all or nothing, as far as a file system allows.

    Every new file is first written beside its target under a temporary name (starting with
    ``.``, which the loader skips); then each is renamed over its target, and each file to
    delete is renamed aside. Any failure undoes what was done: renamed files get their
    ``previous`` bytes back (or are removed if they are new), files set aside return, and
    temporary files are removed. Each rename replaces one file whole, so a reader never sees
    a half-written record. ``progress(done, total)`` counts the files written and deleted.
    """
    pid = os.getpid()
    total, done = len(writes) + len(deletes), 0
    progress = progress or (lambda done, total: None)
    progress(0, total)
    staged: list[tuple[Path, Path]] = []
    replaced: list[Path] = []
    aside: list[tuple[Path, Path]] = []
    try:
        for target, text in sorted(writes.items()):
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.{pid}.tmp")
            staged.append((temporary, target))
            with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
            done += 1
            progress(done, total)
        for temporary, target in staged:
            os.replace(temporary, target)
            replaced.append(target)
        for path in sorted(deletes):
            hidden = path.with_name(f".{path.name}.{pid}.del")
            os.replace(path, hidden)
            aside.append((hidden, path))
            done += 1
            progress(done, total)
    except BaseException:
        for hidden, path in reversed(aside):
            os.replace(hidden, path)
        for target in reversed(replaced):
            if target in previous:
                target.write_bytes(previous[target])
            else:
                target.unlink(missing_ok=True)
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        raise
    for hidden, _ in aside:
        hidden.unlink(missing_ok=True)
