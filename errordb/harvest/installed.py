"""``errordb learn``: draft records from what an interpreter has installed, kept in a local layer.

The standard library and every installed distribution (or those named, or a source tree) are
harvested like ``errordb harvest`` harvests a repository, with three differences: a draft
names the distribution and version it was read from (``distribution``, ``distributionVersion``)
instead of a commit, it has no GitHub link, and its ``triggerScenarios`` says what holds where
it is raised (the conditions of the branches around the raise, read from the syntax tree).

The layer lives in the cache folder (:func:`errordb.store.default.layer_dir`): one JSON Lines file of drafts per
distribution under ``records/``, a manifest of what was learned (``learned.json``), and a store
of the bundled records and every draft (``store-<STORE_VERSION>.db``), made by the one ingest
path. ``explain``, ``show``, ``search`` and ``list`` read that store once it exists
(:func:`errordb.store.default.learned_db_path`).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from errordb.errors import ErrordbError
from errordb.harvest.drafts import check_draft, default_analyzed_at, draft_record
from errordb.harvest.scan import python_files, scan_files
from errordb.records.conventions import SOURCE_TREE, distribution_name_key

#: The script the learned interpreter runs to say what it has installed.
ENVIRONMENT_SCRIPT = Path(__file__).with_name("environment.py")
#: Folders of the standard library that are its own tests, not code a program calls.
STDLIB_SKIPPED = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"})
_GITHUB = re.compile(r"https?://(?:www\.)?github\.com/([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100}?)(?:\.git)?(?:[/#?].*)?")
_KEY = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

#: ``progress(distributions done, distributions, files done, files)``.
LearnProgress = Callable[[int, int, int, int], None]


class LearnError(ErrordbError):
    """A learn that cannot run (no such interpreter, distribution or folder); nothing was changed."""


@dataclass(frozen=True)
class Source:
    """One thing to learn: the standard library, a distribution, or a source tree."""

    key: str  # its file in the layer: stdlib, dist-<name>, path-<digest of its folder>
    name: str  # the distribution's name; "python" for the standard library; the folder for a tree
    version: str  # of the distribution, of Python, or a digest of a tree's files (its drafts say SOURCE_TREE)
    repo: str | None  # the GitHub repository its project URLs name
    files: tuple[tuple[str, str], ...]  # (file on disk, its path in the records)
    location: str

    @property
    def kind(self) -> str:
        return self.key.split("-", 1)[0]


#: Bumped whenever drafts are made differently: a layer of another version is learned again.
LAYER_VERSION = 2


@dataclass
class LearnReport:
    """What a learn did."""

    layer: Path
    learned: list[str] = field(default_factory=list)  # "name version" of each source harvested now
    unchanged: int = 0  # sources already learned at the same version
    dropped: list[str] = field(default_factory=list)  # no longer installed, or gone
    files: int = 0  # files read now
    records: int = 0  # drafts written now
    unreadable: int = 0  # files that do not parse or decode
    total_records: int = 0  # drafts in the layer
    total_sources: int = 0
    seconds: float = 0.0
    outdated: bool = False  # the layer was made by another version of errordb, and dropped

    def summary(self) -> str:
        """What a learn did, in a few lines (``errordb learn`` prints it)."""
        lines = [f"{self.layer}: learned {len(self.learned)} ({self.files:,} files, {self.records:,} drafts), "
                 f"{self.unchanged} unchanged, {len(self.dropped)} dropped, in {self.seconds:.1f}s"]
        if self.outdated:
            lines.append("  the layer was made by another version of errordb: what it held is learned again only when named "
                         "(a full `errordb learn` reads everything)")
        if self.unreadable:
            lines.append(f"  {self.unreadable:,} file{'s' if self.unreadable != 1 else ''} did not parse (counted, skipped)")
        if self.dropped:
            lines.append(f"  dropped (no longer installed): {', '.join(self.dropped)}")
        lines.append(f"  the layer holds {self.total_records:,} drafts from {self.total_sources} sources")
        return "\n".join(lines)


def default_python() -> str:
    """The interpreter to learn when none is named: the active virtual environment's
    (``$VIRTUAL_ENV``, where errordb itself may be installed elsewhere, with pipx), else the one
    errordb runs in."""
    active = os.environ.get("VIRTUAL_ENV")
    if active:
        for name in ("bin/python", "Scripts/python.exe"):
            if (Path(active) / name).is_file():
                return str(Path(active) / name)
    return sys.executable


def environment(python: str) -> dict:
    """What ``python`` has installed, as :mod:`errordb.harvest.environment` prints it."""
    try:
        done = subprocess.run([python, "-I", str(ENVIRONMENT_SCRIPT)], capture_output=True, text=True, timeout=300)
    except OSError as exc:
        raise LearnError(f"{python}: cannot be run: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise LearnError(f"{python}: did not list its distributions within 300 s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LearnError(f"{python}: could not list its distributions: {last}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise LearnError(f"{python}: could not list its distributions: it printed no JSON (is it Python 3.8 or newer?)") from None


def distribution_key(name: str) -> str:
    """A distribution's file name in the layer: ``dist-`` and its normalised name (PEP 503)."""
    return "dist-" + distribution_name_key(name)


def repository(urls: list[str]) -> str | None:
    """The GitHub repository a distribution's URLs name most often (``owner/name``), or None."""
    found = Counter()
    for url in urls:
        match = _GITHUB.fullmatch(url.strip())
        if match and match.group(1).lower() != "sponsors" and match.group(2) not in (".", ".."):
            found[f"{match.group(1)}/{match.group(2)}"] += 1
    return found.most_common(1)[0][0] if found else None


def stdlib_source(env: dict) -> Source:
    """The standard library, as CPython's repository lays it out (``Lib/json/decoder.py``)."""
    root = Path(env["stdlib"])
    files = []
    for file in python_files(root) if root.is_dir() else ():
        relative = file.relative_to(root)
        if not STDLIB_SKIPPED.intersection(relative.parts[:-1]):
            files.append((str(file), "Lib/" + relative.as_posix()))
    return Source("stdlib", "python", env["python"], "python/cpython", tuple(files), str(root))


def distribution_source(dist: dict) -> Source | None:
    """One installed distribution (None when its name cannot name a file)."""
    key = distribution_key(dist["name"])
    if not _KEY.fullmatch(key[5:]):
        return None
    location = Path(dist["location"])
    files = []
    for relative in dist["files"]:
        parts = Path(relative).parts
        if ".." in parts or Path(relative).is_absolute():
            continue  # scripts installed elsewhere (../../bin/...)
        files.append((str(location / relative), Path(relative).as_posix()))
    return Source(key, dist["name"], dist["version"], repository(dist["urls"]), tuple(files), str(location))


def tree_source(folder: Path) -> Source:
    """A source tree (``--path``): its files under its folder's name, versioned by their sizes and times."""
    folder = folder.resolve()
    if not folder.is_dir():
        raise LearnError(f"{folder}: no such folder")
    digest = hashlib.sha256()
    files = []
    for file in python_files(folder):
        stat = file.stat()
        relative = file.relative_to(folder).as_posix()
        digest.update(f"{relative}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
        files.append((str(file), f"{folder.name}/{relative}"))
    key = "path-" + hashlib.sha256(str(folder).encode()).hexdigest()[:16]
    return Source(key, tree_name(folder.name), digest.hexdigest()[:16], None, tuple(files), str(folder))


def tree_name(folder: str) -> str:
    """A tree's name as its drafts' ``distribution``, which is a distribution's name: ASCII
    letters, digits and ``._-`` (``Über Proj`` -> ``Uber-Proj``); its files keep the folder's."""
    ascii_name = unicodedata.normalize("NFKD", folder).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_name).strip("._-") or "tree"


def _wanted(env: dict, names: tuple[str, ...], paths: tuple[Path, ...]) -> list[Source]:
    sources = [tree_source(Path(p)) for p in paths]
    if paths and not names:
        return sources
    installed = {distribution_key(d["name"]): d for d in env["distributions"]}
    if names:
        for name in names:
            if distribution_key(name) not in installed:
                raise LearnError(f"{name}: not installed for {env['executable']}")
        chosen = [installed[distribution_key(n)] for n in names]
    else:
        sources.append(stdlib_source(env))
        chosen = list(installed.values())
    sources += [s for s in map(distribution_source, chosen) if s is not None]
    return sources


def learn(
    names: tuple[str, ...] = (),
    paths: tuple[Path, ...] = (),
    *,
    python: str | None = None,
    progress: LearnProgress | None = None,
    jobs: int | None = None,
) -> LearnReport:
    """Learn the standard library and every distribution ``python`` has installed (default:
    :func:`default_python`), or only the distributions ``names``, or the source trees ``paths``.

    A source already learned at the same version is not read again; with neither names nor
    paths, distributions no longer installed (and trees no longer there) are dropped. The
    layer's store is then brought up to date by :func:`errordb.store.ingest`.
    """
    from errordb.records.loader import bundled_records_dir
    from errordb.store.default import layer_db_path, layer_dir, read_layer_manifest, records_fingerprint, write_layer_manifest
    from errordb.store.ingestion import ingest

    started = time.perf_counter()
    layer = layer_dir()
    report = LearnReport(layer)
    python = python or default_python()
    env = environment(python)
    env["executable"] = python
    wanted = _wanted(env, tuple(names), tuple(paths))
    manifest = read_layer_manifest()
    known: dict[str, dict] = manifest.get("sources", {})
    records = layer / "records"
    if manifest and manifest.get("version") != LAYER_VERSION:  # drafts made by other rules: none is kept
        report.outdated, known = True, {}
        shutil.rmtree(records, ignore_errors=True)
    todo = []
    for source in wanted:
        entry = known.get(source.key)
        if entry and entry.get("version") == source.version and (records / f"{source.key}.jsonl").is_file():
            report.unchanged += 1
        else:
            todo.append(source)
    if not names and not paths:
        current = {s.key for s in wanted}
        for key, entry in sorted(known.items()):
            gone = key not in current if entry["kind"] != "path" else not Path(entry["location"]).is_dir()
            if gone:
                report.dropped.append(f"{entry['name']} {entry['version']}")
                del known[key]
                (records / f"{key}.jsonl").unlink(missing_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    total_files = sum(len(s.files) for s in todo)
    done_files = 0
    step = progress or (lambda *args: None)
    step(0, len(todo), 0, total_files)
    for number, (source, learnt) in enumerate(zip(todo, _learn_each(todo, jobs)), start=1):
        text, counts = learnt
        partial = records / f".{source.key}.jsonl.{os.getpid()}.partial"
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, records / f"{source.key}.jsonl")
        known[source.key] = {
            "kind": source.kind, "name": source.name, "version": source.version, "location": source.location,
            "files": len(source.files), "records": counts["records"], "unreadable": counts["unreadable"],
        }  # fmt: skip
        report.learned.append(f"{source.name} {source.version}")
        report.files += len(source.files)
        report.records += counts["records"]
        report.unreadable += counts["unreadable"]
        done_files += len(source.files)
        step(number, len(todo), done_files, total_files)
    bundled = bundled_records_dir()
    write_layer_manifest({"format": "errordb-learned", "version": LAYER_VERSION, "bundled": records_fingerprint(bundled), "sources": dict(sorted(known.items()))})
    ingest([bundled, records], layer_db_path(), prune=True)
    report.total_sources = len(known)
    report.total_records = sum(entry["records"] for entry in known.values())
    report.seconds = time.perf_counter() - started
    return report


def _learn_each(sources: list[Source], jobs: int | None) -> Iterator[tuple[str, dict]]:
    """:func:`learn_source` of each source, in order: here, or in a pool of processes."""
    workers = jobs if jobs is not None else min(2, os.cpu_count() or 1)
    if workers <= 1 or len(sources) < 2:
        yield from map(learn_source, sources)
        return
    # Spawned, never forked: a fork would copy whatever the calling program holds.
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield from pool.imap(learn_source, sources)


def learn_source(source: Source) -> tuple[str, dict]:
    """The drafts of one source as JSON Lines (one envelope a line, in id order), and counts:
    ``records``, ``unreadable`` (files that do not parse or decode). A draft that would fail
    ``errordb check`` is left out, as harvest leaves it out."""
    from errordb.records.schema import canonical_json

    files, unreadable = scan_files([(Path(file), path) for file, path in source.files], workers=1)
    analyzed_at = default_analyzed_at()
    dataset_version = analyzed_at if "T" in analyzed_at else f"{analyzed_at}T00:00:00Z"
    if source.kind == "path":  # two trees may share a folder name: its path tells them apart
        installed, id_key = (source.name, SOURCE_TREE), source.key
    else:
        installed, id_key = (source.name, source.version), None
    lines: dict[str, str] = {}
    for scanned in files:
        for site in scanned.sites:
            record = draft_record(site, scanned.lines, repo=source.repo, sha=None, analyzed_at=analyzed_at, installed=installed, id_key=id_key)
            envelope, problem = check_draft(record, dataset_version)
            if envelope is not None and not problem:
                lines.setdefault(record["id"], canonical_json(envelope))
    body = "".join(lines[rid] + "\n" for rid in sorted(lines))
    return body, {"records": len(lines), "unreadable": len(unreadable)}
