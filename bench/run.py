"""errordb's benchmark harness: one table of figures, each beside a baseline from the same run.

    python bench/run.py --sizes 1000,10000,100000,1000000

For every size it generates records (bench/generate.py, deterministic), then measures:

- ingest: records/s of a first ``errordb.store.ingest`` (validation and normalisation
  included) and its peak memory (the writing process plus its validating workers), against
  plain ``sqlite3.executemany`` of the same rows: the records' rows into one table, and every
  row an ingest stores from a record (its solutions', tips' and tags' rows too);
- re-ingest: seconds of ``ingest(..., prune=True)`` of the same records again, and of the
  records with one of them changed, as ``errordb serve`` ingests after each edit, each in a
  fresh process; against the first ingest;
- database size;
- cold ``errordb explain``: wall time and peak memory of a fresh process, against the same
  command on the three bundled records;
- in-process match: p50/p99 latency of ``Matcher.match`` on real tracebacks of the records,
  against the plain loop that tries every compiled Python regex (measured over at most
  ``--loop-limit`` patterns and scaled linearly beyond, which the table marks with ``~``);
- full site build: pages/s of ``errordb.publish.site.build_site`` and its peak memory (the build
  process plus its pool's workers), against a bare jinja2 loop that renders one page per record
  in one process (bench/child.py), run once before the build and once after (the faster is
  the baseline: files deleted shortly before slow down whatever creates files next, see
  :func:`discard`);
- serve after one edit: the records file with one record edited, ingested again with prune
  and that record's page made, as ``errordb serve`` does after an edit; seconds, against the
  full build;
- export: seconds and peak memory of ``errordb export`` (``errordb.publish.api.export_api``),
  against ``json.dump`` of each record to its own file plus one gzipped JSON Lines file.

Ingest, its baselines, the site build and export run in processes of their own
(bench/child.py), started through a small wrapper so that their peak memory is theirs.
``--skip`` leaves stages out, and ``--site-max`` builds the site only up to a size; the site
stages are also skipped, with the reason in the table, when the disk could not hold the site
(estimated from the bytes per record of the last site built in the run). What a stage writes
is moved to a trash folder under ``--work`` and deleted when the run ends, not between stages.

Machines are noisy (2 cores here): the ratios are what to read, not the absolute times.
``--check`` turns it into a regression guard that fails only when a ratio is far outside its
target (used by CI on small sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generate import GENERATOR_KEY, sample_traceback, write_jsonl  # noqa: E402

from errordb.explainer.match import Matcher  # noqa: E402
from errordb.store import ingest  # noqa: E402

FAMILIES = HERE.parent / "records" / "families.toml"
EXPLAIN_MESSAGE = "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."


#: Runs a command and prints its wall time, peak RSS (KB) and exit status. A small wrapper
#: process, because a child forked from this (large) benchmark process would count the
#: parent's pages as its own. The command's stderr passes through, for the failure message.
_MEASURE = (
    "import os, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status))\n"
)


def _child_env(**extra: str) -> dict[str, str]:
    """The environment of measured children: this checkout's errordb first on the path."""
    path = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def _child_run(command: list[str], env: dict[str, str], check: bool = False) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one fresh process running ``command``."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], env=env, capture_output=True, text=True, check=True)
    seconds, kilobytes, status = out.stdout.split()
    if check and status != "0":
        tail = "\n".join(out.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(command[:4])}... exited with status {status}:\n{tail}")
    return float(seconds), int(kilobytes) / 1024


def run_stage(stage: str, *args: object, work: Path) -> dict:
    """One stage of bench/child.py in a fresh process: what it reports, plus its wall time.

    ``peak_mb`` is the stage process's peak RSS, plus, when it ran a process pool, the number
    of workers times the largest worker's peak (RUSAGE_CHILDREN only keeps the largest). That
    is an upper bound of the memory in use at one time: the peaks need not coincide, and Linux
    starts a spawned worker's peak at its parent's resident size.
    """
    result = work / f"stage-{stage}.json"
    result.unlink(missing_ok=True)
    command = [sys.executable, str(HERE / "child.py"), str(result), stage, *map(str, args)]
    wall, _ = _child_run(command, _child_env(), check=True)
    data = json.loads(result.read_text(encoding="utf-8"))
    result.unlink()
    pool = data.get("workers", 1) if data.get("workers", 1) > 1 else 0
    data["peak_mb"] = (data["self_kb"] + pool * data["children_kb"]) / 1024
    data["wall_s"] = wall
    return data


def cold_explain(db: Path, text: str = EXPLAIN_MESSAGE, repeats: int = 5) -> tuple[float, float]:
    """Median wall time and peak memory of ``errordb explain TEXT`` in a fresh process."""
    env = dict(os.environ, NO_COLOR="1")
    command = [sys.executable, "-m", "errordb", "explain", "--db", str(db), "--format", "json", text]
    _child_run(command, env)  # warm the OS page cache, as a user's second run would be
    runs = [_child_run(command, env) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def sample_tracebacks(jsonl: Path, count: int, seed: int = 3) -> list[tuple[str, str]]:
    """(record id, traceback) pairs for a reproducible sample of the records."""
    rng = random.Random(seed)
    with jsonl.open(encoding="utf-8") as handle:
        envelopes = [json.loads(line) for line in handle] if jsonl.stat().st_size < 50e6 else None
    if envelopes is None:  # a large file: reservoir-sample without loading it
        envelopes = []
        with jsonl.open(encoding="utf-8") as handle:
            for index, line in enumerate(handle):
                if len(envelopes) < count:
                    envelopes.append(json.loads(line))
                elif (j := rng.randrange(index + 1)) < count:
                    envelopes[j] = json.loads(line)
    picked = rng.sample(envelopes, min(count, len(envelopes)))
    return [(e["record"]["id"], sample_traceback(e)) for e in picked]


def match_latency(db: Path, samples: list[tuple[str, str]]) -> tuple[float, float, float]:
    """p50 and p99 milliseconds of one in-process match, and the share of exact top hits."""
    from errordb.explainer.parse import parse_text

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    matcher = Matcher(conn)
    parsed = [(rid, parse_text(text)[-1]) for rid, text in samples]
    for _, exc in parsed[:20]:
        matcher.match(exc.exc_type, exc.message, exc.frames)  # warm-up: page cache, pattern cache
    times, hits = [], 0
    for rid, exc in parsed:
        started = time.perf_counter()
        matches = matcher.match(exc.exc_type, exc.message, exc.frames)
        times.append((time.perf_counter() - started) * 1000)
        hits += bool(matches) and matches[0].id == rid
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))], hits / len(parsed)


def plain_loop_latency(jsonl: Path, samples: list[tuple[str, str]], limit: int) -> tuple[float, float, bool]:
    """Milliseconds per message of trying every compiled pattern, and the compile time (s)."""
    patterns = []
    with jsonl.open(encoding="utf-8") as handle:
        for line in handle:
            patterns.append(json.loads(line)["record"]["messagePattern"])
            if len(patterns) >= limit:
                break
    total = sum(1 for _ in jsonl.open(encoding="utf-8"))
    started = time.perf_counter()
    compiled = [re.compile(p) for p in patterns]
    compile_s = time.perf_counter() - started
    messages = [text.rstrip("\n").rsplit("\n", 1)[-1].split(": ", 1)[1] for _, text in samples[:20]]
    started = time.perf_counter()
    for message in messages:
        for pattern in compiled:
            pattern.fullmatch(message)
    per_message = (time.perf_counter() - started) * 1000 / len(messages)
    scale = total / len(patterns)
    return per_message * scale, compile_s * scale, scale > 1


#: Disk a built site takes per record before one has been measured in this run (pages and API:
#: ~31 KB a record measured at 1,000 records, rounded up), and its files and folders per record.
SITE_BYTES_PER_RECORD = 40_000
SITE_INODES_PER_RECORD = 4
#: The same for one export (the API alone) and its baseline together.
EXPORT_BYTES_PER_RECORD = 20_000
EXPORT_INODES_PER_RECORD = 3
#: Disk left free, whatever the estimate says.
DISK_RESERVE = 2 << 30


def no_room(folder: Path, size: int, bytes_per_record: float, inodes_per_record: float) -> str | None:
    """Why ``size`` records' worth of files would not fit in ``folder``'s file system, or None."""
    stat = os.statvfs(folder)
    free, need = stat.f_bavail * stat.f_frsize - DISK_RESERVE, size * bytes_per_record
    if need > free:
        return f"needs ~{need / 1e9:.0f} GB, {max(free, 0) / 1e9:.0f} GB free"
    if stat.f_files and size * inodes_per_record > stat.f_favail:  # f_files is 0 where inodes are unlimited
        return f"needs ~{size * inodes_per_record / 1e6:.1f}M inodes, {stat.f_favail / 1e6:.1f}M free"
    return None


def disk_bytes(folder: Path) -> tuple[int, int]:
    """Bytes allocated under ``folder`` (hard links counted once), and its number of entries."""
    seen, total, entries = set(), 0, 0
    stack = [folder]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                entries += 1
                info = entry.stat(follow_symlinks=False)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
    return total, entries


def discard(folder: Path, work: Path) -> None:
    """Move ``folder`` (if there) into the run's trash, emptied when the run ends.

    Not removed at once: on an ext4 file system without a journal (this machine's disk), every
    new file or folder is given an inode only after the allocator has skipped each inode freed
    in the last minute or more (``recently_deleted`` in Linux's fs/ext4/ialloc.c), so deleting
    a 10,000-page site made the next stage's 10,000 pages ~10× slower to create (0.8 s against
    8.4 s for 10,000 folders with a file each). A stage must not pay for the one before it,
    and a baseline must not run under other conditions than what it is compared with.
    """
    if folder.exists():
        trash = work / TRASH
        trash.mkdir(exist_ok=True)
        folder.rename(trash / f"{len(os.listdir(trash))}-{folder.name}")


#: The run's trash, under ``--work`` (see :func:`discard`).
TRASH = ".trash"


#: The id of a generated record, the first one on its line (bench/generate.py writes it first).
_RECORD_ID = re.compile(r'^\{"record": ?\{"id": ?"([0-9a-f]{16})"')


def edited_copy(jsonl: Path, out: Path, edit: str = "Edited by the re-ingest benchmark.") -> Path:
    """A copy of a JSON Lines file with the first record's documentation edited."""
    with jsonl.open(encoding="utf-8") as source, out.open("w", encoding="utf-8") as target:
        envelope = json.loads(source.readline())
        envelope["record"]["documentation"] += " " + edit
        target.write(json.dumps(envelope, ensure_ascii=False) + "\n")
        shutil.copyfileobj(source, target)
    return out


def site_stage(jsonl: Path, db: Path, work: Path, size: int) -> dict:
    """Full build, its bare jinja2 baseline, and what ``errordb serve`` does after one edit."""
    bare_out, out = work / f"bare-site-{size}", work / f"site-{size}"
    for folder in (bare_out, out):
        discard(folder, work)
    # The baseline before and after the build, the faster run kept: the disk's state (files
    # deleted shortly before, see discard) weighs on whatever runs first.
    bare = run_stage("bare-site", jsonl, bare_out, work=work)
    full = run_stage("build", db, out, work=work)
    discard(bare_out, work)
    bare = min(bare, run_stage("bare-site", jsonl, bare_out, work=work), key=lambda run: run["seconds"])
    site_bytes, site_entries = disk_bytes(out)
    edited = edited_copy(jsonl, work / f"served-{size}.jsonl", "Edited while served.")
    slug = json.loads(edited.open(encoding="utf-8").readline())["record"]["slug"]
    served = run_stage("serve-edit", db, edited, FAMILIES, slug, work=work)
    for folder in (bare_out, out):
        discard(folder, work)
    return {
        "site_pages": full["pages"],
        "site_per_s": full["pages"] / full["seconds"],
        "site_workers": full["workers"],
        "site_mb": full["peak_mb"],
        "bare_per_s": bare["pages"] / bare["seconds"],
        "bare_mb": bare["peak_mb"],
        "site_s": full["seconds"],
        "serve_edit_s": served["seconds"],
        "site_bytes_per_record": site_bytes / size,
        "site_entries_per_record": site_entries / size,
    }


def export_stage(jsonl: Path, db: Path, work: Path, size: int) -> dict:
    """``errordb export`` and its json.dump + gzip baseline."""
    out, bare_out = work / f"export-{size}", work / f"bare-export-{size}"
    for folder in (out, bare_out):
        discard(folder, work)
    export = run_stage("export", db, out, work=work)
    bare = run_stage("bare-export", jsonl, bare_out, work=work)
    for folder in (out, bare_out):
        discard(folder, work)
    return {"export_s": export["seconds"], "export_mb": export["peak_mb"], "bare_export_s": bare["seconds"], "bare_export_mb": bare["peak_mb"]}


def run_size(size: int, work: Path, bundled_cold: tuple[float, float], args, estimate: dict) -> dict:
    """Every stage not skipped at ``size``; ``estimate`` carries disk per record between sizes."""
    jsonl = write_jsonl(size, work / f"records-{size}-{GENERATOR_KEY}.jsonl")
    db = work / f"errordb-{size}.db"
    db.unlink(missing_ok=True)
    ingested = run_stage("ingest", jsonl, db, FAMILIES, work=work)
    edited = edited_copy(jsonl, work / f"edited-{size}.jsonl")
    again = run_stage("reingest", jsonl, edited, db, work=work)
    edited.unlink()
    raw = {}
    for rows in ("records", "every"):
        raw_db = work / f"raw-{size}.db"
        raw_db.unlink(missing_ok=True)
        raw[rows] = run_stage("bare-ingest", jsonl, raw_db, rows, work=work)
        raw_db.unlink()
    row = {
        "size": size, "ingest_per_s": ingested["records"] / ingested["seconds"], "ingest_mb": ingested["peak_mb"],
        "raw_per_s": raw["records"]["records"] / raw["records"]["seconds"],
        "raw_every_per_s": raw["every"]["records"] / raw["every"]["seconds"], "raw_mb": raw["every"]["peak_mb"],
        "db_mb": db.stat().st_size / 1e6, "skipped": {}, "ingest_s": ingested["seconds"],
        "reingest_same_s": again["same_s"], "reingest_changed_s": again["changed_s"],
    }  # fmt: skip
    skip = set(args.skip)
    samples = [] if {"explain", "match"} <= skip else sample_tracebacks(jsonl, args.samples)
    if "explain" not in skip:
        # The same traceback-shaped input on both sides: one of the records' own tracebacks
        # here, a bundled record's message on the 3-record baseline.
        cold_s, cold_mb = cold_explain(db, samples[0][1], args.repeats)
        nomatch_s, _ = cold_explain(db, EXPLAIN_MESSAGE, args.repeats)
        row.update(cold_s=cold_s, cold_mb=cold_mb, nomatch_s=nomatch_s, bundled_cold_s=bundled_cold[0])
    if "match" not in skip:
        p50, p99, hit_rate = match_latency(db, samples)
        loop_ms, loop_compile_s, extrapolated = plain_loop_latency(jsonl, samples, args.loop_limit)
        row.update(match_p50_ms=p50, match_p99_ms=p99, hit_rate=hit_rate, loop_ms=loop_ms,
                   loop_compile_s=loop_compile_s, loop_extrapolated=extrapolated)  # fmt: skip
    if "site" in skip:
        row["skipped"]["site"] = "--skip"
    elif args.site_max is not None and size > args.site_max:
        row["skipped"]["site"] = f"above --site-max {args.site_max:,}"
    elif reason := no_room(work, size, 1.5 * estimate["site_bytes"], 1.5 * estimate["site_inodes"]):
        # The site, and the bare baseline's pages kept until the end.
        row["skipped"]["site"] = reason
    else:
        row.update(site_stage(jsonl, db, work, size))
        estimate.update(site_bytes=row["site_bytes_per_record"], site_inodes=row["site_entries_per_record"])
    if "export" in skip:
        row["skipped"]["export"] = "--skip"
    elif reason := no_room(work, size, EXPORT_BYTES_PER_RECORD, EXPORT_INODES_PER_RECORD):
        row["skipped"]["export"] = reason
    else:
        row.update(export_stage(jsonl, db, work, size))
    return row


def _ratio(r: dict, top: str, bottom: str) -> float | None:
    """``r[top] / r[bottom]``, or None when the stage was not measured."""
    return r[top] / r[bottom] if top in r and bottom in r else None


def _loop(r: dict) -> str:
    mark = "~" if r["loop_extrapolated"] else ""
    return f"{mark}{r['loop_ms']:.1f} ({mark}{r['loop_ms'] / r['match_p50_ms']:,.0f}×)"


#: The table's columns: a heading, the key that must be in the row, and how to show it.
COLUMNS = [
    ("records", "size", lambda r: f"{r['size']:,}"),
    ("ingest rec/s (÷ executemany: records' rows / every row)", "ingest_per_s",
     lambda r: f"{r['ingest_per_s']:,.0f} ({r['ingest_per_s'] / r['raw_per_s']:.0%} / {r['ingest_per_s'] / r['raw_every_per_s']:.0%})"),
    ("re-ingest s: same / 1 changed (÷ first ingest)", "reingest_same_s",
     lambda r: f"{r['reingest_same_s']:.2f} / {r['reingest_changed_s']:.2f} ({r['reingest_same_s'] / r['ingest_s']:.0%} / {r['reingest_changed_s'] / r['ingest_s']:.0%})"),
    ("ingest peak MB (executemany)", "ingest_mb", lambda r: f"{r['ingest_mb']:.0f} ({r['raw_mb']:.0f})"),
    ("DB MB", "db_mb", lambda r: f"{r['db_mb']:.1f}"),
    ("cold explain s (÷ 3 records)", "cold_s", lambda r: f"{r['cold_s']:.3f} ({r['cold_s'] / r['bundled_cold_s']:.2f}×)"),
    ("no match s", "nomatch_s", lambda r: f"{r['nomatch_s']:.3f}"),
    ("peak MB", "cold_mb", lambda r: f"{r['cold_mb']:.0f}"),
    ("match p50 / p99 ms", "match_p50_ms", lambda r: f"{r['match_p50_ms']:.3f} / {r['match_p99_ms']:.3f}"),
    ("plain loop ms/msg (× slower)", "loop_ms", _loop),
    ("top hit", "hit_rate", lambda r: f"{r['hit_rate']:.0%}"),
    ("site pages/s (÷ bare jinja2)", "site_per_s", lambda r: f"{r['site_per_s']:,.0f} ({r['site_per_s'] / r['bare_per_s']:.0%})"),
    ("site peak MB (bare)", "site_mb", lambda r: f"{r['site_mb']:.0f} ({r['bare_mb']:.0f})"),
    ("serve: one edit shown s (÷ full build)", "serve_edit_s", lambda r: f"{r['serve_edit_s']:.2f} ({r['serve_edit_s'] / r['site_s']:.1%})"),
    ("export s (× dump+gzip)", "export_s", lambda r: f"{r['export_s']:.2f} ({r['export_s'] / r['bare_export_s']:.1f}×)"),
    ("export peak MB (bare)", "export_mb", lambda r: f"{r['export_mb']:.0f} ({r['bare_export_mb']:.0f})"),
]


def table(rows: list[dict]) -> str:
    """The results as one Markdown table; a stage not measured at a size shows as —."""
    lines = ["| " + " | ".join(name for name, _, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(show(r) if key in r else "—" for _, key, show in COLUMNS) + " |")
    notes = [f"{r['size']:,} records: {stage} skipped ({why})" for r in rows for stage, why in r.get("skipped", {}).items()]
    return "\n".join(lines + notes)


#: Regression guards for --check: name -> (ratio of a row, floor, smallest size it applies to).
#: Each floor is about ten times below the target, or below today's figure where the target is
#: not met yet, so that noise never trips a guard and a 10x regression does. A ratio of a stage
#: not measured at a size is not checked.
GUARDS = {
    "ingest share of executemany": (lambda r: _ratio(r, "ingest_per_s", "raw_per_s"), 0.05, 0),
    "executemany / ingest peak memory": (lambda r: _ratio(r, "raw_mb", "ingest_mb"), 0.01, 0),
    # A re-ingest that validated every record again would cost about what a first ingest does.
    "first ingest / re-ingest of one changed record": (lambda r: _ratio(r, "ingest_s", "reingest_changed_s"), 1.5, 10_000),
    "cold explain vs 3 records (at most)": (lambda r: _ratio(r, "bundled_cold_s", "cold_s"), 1 / 3.0, 0),
    # Below ~10,000 patterns trying them all is about as fast as an index lookup (1x at 1,000).
    "plain loop / match p50": (lambda r: _ratio(r, "loop_ms", "match_p50_ms"), 2.0, 10_000),
    "exact top hits": (lambda r: r.get("hit_rate"), 0.95, 0),
    "site build share of bare jinja2 pages/s": (lambda r: _ratio(r, "site_per_s", "bare_per_s"), 0.01, 0),
    "bare jinja2 / site build peak memory": (lambda r: _ratio(r, "bare_mb", "site_mb"), 0.01, 0),
    "full build / serve showing one edit": (lambda r: _ratio(r, "site_s", "serve_edit_s"), 1.5, 10_000),
    "dump+gzip / export time": (lambda r: _ratio(r, "bare_export_s", "export_s"), 0.05, 0),
    "bare export / export peak memory": (lambda r: _ratio(r, "bare_export_mb", "export_mb"), 0.02, 0),
}


def check(rows: list[dict]) -> list[str]:
    """One line per guard a row falls below; empty when every measured ratio is inside."""
    failed = []
    for row in rows:
        for name, (ratio, floor, from_size) in GUARDS.items():
            value = ratio(row) if row["size"] >= from_size else None
            if value is not None and value < floor:
                failed.append(f"{row['size']:,} records: {name} is {value:.3f}, guard {floor:.3f}")
    return failed


STAGES = ("explain", "match", "site", "export")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated record counts")
    parser.add_argument("--samples", type=int, default=300, help="tracebacks matched per size")
    parser.add_argument("--repeats", type=int, default=5, help="cold explain runs per size (the median is shown)")
    parser.add_argument("--loop-limit", type=int, default=100_000, help="patterns the plain loop compiles at most")
    parser.add_argument("--skip", type=lambda text: [s for s in text.split(",") if s], default=[],
                        help=f"comma-separated stages to leave out at every size: {', '.join(STAGES)}")  # fmt: skip
    parser.add_argument("--site-max", type=int, help="build the site only at sizes up to this")
    parser.add_argument("--work", type=Path, default=HERE / "out", help="where generated data goes")
    parser.add_argument("--check", action="store_true", help="exit 1 when a ratio is far outside its target")
    args = parser.parse_args(argv)
    if unknown := set(args.skip) - set(STAGES):
        parser.error(f"--skip: unknown stage {', '.join(sorted(unknown))} (stages: {', '.join(STAGES)})")
    args.work.mkdir(parents=True, exist_ok=True)
    bundled_cold = (float("nan"), float("nan"))
    if "explain" not in args.skip:
        bundled_db = args.work / "bundled.db"
        bundled_db.unlink(missing_ok=True)
        ingest(None, bundled_db)
        bundled_cold = cold_explain(bundled_db, repeats=args.repeats)
    rows = []
    estimate = {"site_bytes": SITE_BYTES_PER_RECORD, "site_inodes": SITE_INODES_PER_RECORD}
    shutil.rmtree(args.work / TRASH, ignore_errors=True)  # a killed run's
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            started = time.perf_counter()
            rows.append(run_size(size, args.work, bundled_cold, args, estimate))
            print(f"measured {size:,} records in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        shutil.rmtree(args.work / TRASH, ignore_errors=True)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    if "explain" not in args.skip:
        print(f"cold explain on the 3 bundled records: {bundled_cold[0]:.3f} s, {bundled_cold[1]:.0f} MB peak")
    print(table(rows))
    failed = check(rows) if args.check else []
    if args.check:
        print("\n".join(failed) or "all ratios inside their guards")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
