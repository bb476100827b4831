"""errordb's benchmark harness: one table of figures, each beside a baseline from the same run.

    python bench/run.py --sizes 1000,10000,100000,1000000

For every size it generates records (bench/generate.py, deterministic), then measures:

- ingest: records/s of ``errordb.store.ingest`` (validation and normalisation included),
  against plain ``sqlite3.executemany`` of the same rows into one table;
- database size;
- cold ``errordb explain``: wall time and peak memory of a fresh process, against the same
  command on the three bundled records;
- in-process match: p50/p99 latency of ``Matcher.match`` on real tracebacks of the records,
  against the plain loop that tries every compiled Python regex (measured over at most
  ``--loop-limit`` patterns and scaled linearly beyond, which the table marks with ``~``).

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
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generate import sample_traceback, write_jsonl  # noqa: E402

from errordb.match import Matcher  # noqa: E402
from errordb.store import connect, ingest  # noqa: E402

EXPLAIN_MESSAGE = "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."


#: Runs a command and prints its wall time and peak RSS. A small wrapper process, because a
#: child forked from this (large) benchmark process would count the parent's pages as its own.
_MEASURE = (
    "import os, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "_, _, usage = os.wait4(child.pid, 0)\n"
    "print(time.perf_counter() - start, usage.ru_maxrss)\n"
)


def _child_run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one fresh process running ``command``."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], env=env, capture_output=True, text=True, check=True)
    seconds, kilobytes = out.stdout.split()
    return float(seconds), int(kilobytes) / 1024


def cold_explain(db: Path, text: str = EXPLAIN_MESSAGE, repeats: int = 5) -> tuple[float, float]:
    """Median wall time and peak memory of ``errordb explain TEXT`` in a fresh process."""
    env = dict(os.environ, NO_COLOR="1")
    command = [sys.executable, "-m", "errordb", "explain", "--db", str(db), "--format", "json", text]
    _child_run(command, env)  # warm the OS page cache, as a user's second run would be
    runs = [_child_run(command, env) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def baseline_executemany(jsonl: Path, db: Path) -> float:
    """Records/s of inserting the same records' rows with plain sqlite3 executemany."""
    conn = sqlite3.connect(db)
    first = json.loads(jsonl.open(encoding="utf-8").readline())["record"]
    columns = [k for k, v in first.items() if not isinstance(v, list)]
    conn.execute(f"CREATE TABLE records ({', '.join(columns)}, PRIMARY KEY (id))")
    sql = f"INSERT INTO records VALUES ({', '.join('?' * len(columns))})"
    started = time.perf_counter()
    count = 0
    with jsonl.open(encoding="utf-8") as handle:
        batch = []
        for line in handle:
            record = json.loads(line)["record"]
            batch.append([record[c] for c in columns])
            if len(batch) == 2000:
                conn.executemany(sql, batch)
                count += len(batch)
                batch = []
        conn.executemany(sql, batch)
        count += len(batch)
    conn.commit()
    conn.close()
    return count / (time.perf_counter() - started)


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
    from errordb.parse import parse_text

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


def run_size(size: int, work: Path, bundled_db: Path, bundled_cold: tuple[float, float], args) -> dict:
    jsonl = write_jsonl(size, work / f"records-{size}.jsonl")
    db = work / f"errordb-{size}.db"
    db.unlink(missing_ok=True)
    started = time.perf_counter()
    ingest([jsonl], db, families_path=HERE.parent / "records" / "families.toml")
    ingest_rate = size / (time.perf_counter() - started)
    raw_db = work / f"raw-{size}.db"
    raw_db.unlink(missing_ok=True)
    raw_rate = baseline_executemany(jsonl, raw_db)
    raw_db.unlink()
    samples = sample_tracebacks(jsonl, args.samples)
    # The same traceback-shaped input on both sides: one of the records' own tracebacks here,
    # a bundled record's message on the 3-record baseline.
    cold_s, cold_mb = cold_explain(db, samples[0][1])
    nomatch_s, _ = cold_explain(db, EXPLAIN_MESSAGE)
    p50, p99, hit_rate = match_latency(db, samples)
    loop_ms, loop_compile_s, extrapolated = plain_loop_latency(jsonl, samples, args.loop_limit)
    return {
        "size": size,
        "ingest_per_s": ingest_rate,
        "raw_per_s": raw_rate,
        "db_mb": db.stat().st_size / 1e6,
        "cold_s": cold_s,
        "cold_mb": cold_mb,
        "nomatch_s": nomatch_s,
        "bundled_cold_s": bundled_cold[0],
        "match_p50_ms": p50,
        "match_p99_ms": p99,
        "hit_rate": hit_rate,
        "loop_ms": loop_ms,
        "loop_compile_s": loop_compile_s,
        "loop_extrapolated": extrapolated,
    }


def table(rows: list[dict]) -> str:
    head = ("| records | ingest rec/s (÷ executemany) | DB MB | cold explain s (÷ 3 records) | no match s | peak MB "
            "| match p50 / p99 ms | plain loop ms/msg (× slower) | top hit |")  # fmt: skip
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        mark = "~" if r["loop_extrapolated"] else ""
        lines.append(
            f"| {r['size']:,} | {r['ingest_per_s']:,.0f} ({r['ingest_per_s'] / r['raw_per_s']:.0%}) "
            f"| {r['db_mb']:.1f} | {r['cold_s']:.3f} ({r['cold_s'] / r['bundled_cold_s']:.2f}×) | {r['nomatch_s']:.3f} | {r['cold_mb']:.0f} "
            f"| {r['match_p50_ms']:.3f} / {r['match_p99_ms']:.3f} "
            f"| {mark}{r['loop_ms']:.1f} ({mark}{r['loop_ms'] / r['match_p50_ms']:,.0f}×) | {r['hit_rate']:.0%} |"
        )
    return "\n".join(lines)


#: Regression guards for --check: far outside the targets, so noise never trips them.
GUARDS = {
    "ingest share of executemany": (lambda r: r["ingest_per_s"] / r["raw_per_s"], 0.05),
    "cold explain vs 3 records (at most)": (lambda r: r["bundled_cold_s"] / r["cold_s"], 1 / 3.0),
    "plain loop / match p50": (lambda r: r["loop_ms"] / r["match_p50_ms"], 2.0),
    "exact top hits": (lambda r: r["hit_rate"], 0.95),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated record counts")
    parser.add_argument("--samples", type=int, default=300, help="tracebacks matched per size")
    parser.add_argument("--loop-limit", type=int, default=100_000, help="patterns the plain loop compiles at most")
    parser.add_argument("--work", type=Path, default=HERE / "out", help="where generated data goes")
    parser.add_argument("--check", action="store_true", help="exit 1 when a ratio is far outside its target")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    bundled_db = args.work / "bundled.db"
    bundled_db.unlink(missing_ok=True)
    ingest(None, bundled_db)
    bundled_cold = cold_explain(bundled_db)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.append(run_size(size, args.work, bundled_db, bundled_cold, args))
        print(f"measured {size:,} records", file=sys.stderr)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"cold explain on the 3 bundled records: {bundled_cold[0]:.3f} s, {bundled_cold[1]:.0f} MB peak")
    print(table(rows))
    failed = []
    if args.check:
        for row in rows:
            for name, (ratio, floor) in GUARDS.items():
                if ratio(row) < floor:
                    failed.append(f"{row['size']:,} records: {name} is {ratio(row):.3f}, guard {floor:.3f}")
        print("\n".join(failed) or "all ratios inside their guards")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
