"""How fast the traceback/log parser reads a log, beside the speed of just reading the file.

    python bench/parse_speed.py                      # 10 MB corpora
    python bench/parse_speed.py --mb 50 --repeats 1
    git show da7c771:errordb/parse.py > /tmp/parse_old.py   # the parser before the fast path
    git show 178cd69:errordb/explainer/parse.py > /tmp/parse_old.py   # ... or before it became a package
    python bench/parse_speed.py --compare /tmp/parse_old.py   # adds the old parser's figures

Two deterministic corpora are written to a temporary folder:

- ``noise``: ordinary log lines only (sglang, vLLM, Ray, glog, uvicorn, ``logging``, JSON
  lines, progress bars, blank lines): the common case of a big log;
- ``tracebacks``: the same noise with a traceback every few lines (plain 3.12 tracebacks with
  carets, chains, sglang's rank-prefixed ones, ``logging.exception`` output), most messages
  distinct; about 60% of its lines are traceback lines.

Each is read the way ``errordb explain --file`` reads a log (:func:`errordb.cli._read_lines`
into :func:`errordb.explainer.parse.iter_exceptions`). The baseline is the same file read and split
into lines with nothing done to them (``for line in file: pass``), measured in the same run,
so "× read" says how far the parser is from I/O speed on this machine. A scaling section
reads the noise corpus at 1×, 2× and 4× the size: time per MB staying flat shows the parser is
linear in the input. Best of ``--repeats`` runs. Never used as a timed test.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from errordb.explainer import parse as current_parse  # noqa: E402
from errordb.cli import _read_lines  # noqa: E402

# --------------------------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------------------------


# Ordinary log lines in the layouts errordb meets in real logs; the fields are random numbers.
NOISE = (
    "[{ts} TP{rank}] Decode batch. #running-req: {a}, #token: {b}, token usage: 0.{c:02d}, "
    "gen throughput (token/s): {x:.2f}, #queue-req: {rank}",
    "[{ts} TP{rank}] Prefill batch. #new-seq: 1, #new-token: {b}, #cached-token: {a}, token usage: 0.{c:02d}, "
    "#running-req: {a}",
    "{ts},{c:03d} INFO [app.worker] picked up job {n} from queue default (priority {rank})",
    'INFO:     10.0.{c}.{rank}:{b} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 08-28 {hms} [model_runner.py:{a}] Loading model weights took {x:.2f} GiB",
    "(RayWorkerWrapper pid={b}) INFO 08-28 {hms} [worker.py:{a}] Memory profiling takes {x:.2f} seconds; "
    "the current memory usage is {x:.2f}GiB",
    "I0828 {hms}.{b:06d}  {a} ProcessGroupNCCL.cpp:{a}] [Rank {rank}] ProcessGroupNCCL initialization options: "
    "size: 8, global rank: {rank}, TIMEOUT(ms): 600000",
    "Loading safetensors checkpoint shards: {c}% Completed | {rank}/8 [00:{s:02d}<00:{s:02d},  1.{c:02d}it/s]",
    '{{"ts": "2026-08-28T{hms}.{c:03d}Z", "level": "info", "msg": "request finished", "path": "/v1/completions", '
    '"status": 200, "latency_ms": {x:.1f}, "request_id": "req-{n}"}}',
    "{ts},{c:03d} WARNING [app.http] retrying request {n} after a timeout (attempt {rank}/5)",
    "{ts},{c:03d} ERROR [app.worker] job {n} failed: connection reset by peer; it will be retried",
    "",
)


def noise_line(rng: random.Random, n: int) -> str:
    """One ordinary log line (``n`` numbers jobs and requests)."""
    m, s = rng.randrange(60), rng.randrange(60)
    return rng.choice(NOISE).format(
        ts=f"2026-08-28 05:{m:02d}:{s:02d}", hms=f"05:{m:02d}:{s:02d}", s=s, n=n, rank=rng.randrange(8),
        a=rng.randrange(4000), b=rng.randrange(99999), c=rng.randrange(100), x=rng.random() * 2000,
    )


def traceback_block(rng: random.Random, n: int) -> list[str]:
    """A traceback in one of four common shapes; ``n`` keeps the messages distinct."""
    kind = n % 4
    if kind == 0:  # plain 3.12, carets
        return [
            "Traceback (most recent call last):",
            '  File "/srv/app/worker.py", line 88, in run_job',
            "    cfg = load_config(job.raw)",
            "          ^^^^^^^^^^^^^^^^^^^^",
            '  File "/usr/lib/python3.12/json/decoder.py", line 355, in raw_decode',
            '    raise JSONDecodeError("Expecting value", s, err.value) from None',
            f"json.decoder.JSONDecodeError: Expecting value: line 1 column {n} (char {n - 1})",
            "",
        ]
    if kind == 1:  # a chain
        return [
            "Traceback (most recent call last):",
            '  File "/srv/app/store.py", line 41, in get',
            "    return self.items[key]",
            f"KeyError: 'job-{n}'",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            '  File "/srv/app/worker.py", line 43, in load',
            "    raise LookupError(key) from e",
            f"LookupError: job-{n}",
            "",
        ]
    if kind == 2:  # sglang: rank prefix on the first line only
        tp = rng.randrange(8)
        return [
            f"[2026-08-28 05:10:05 TP{tp}] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 3112, in run_scheduler_process',
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/models/kimi_k3.py", line 2892, in set_dspark_layers_to_capture',
            "    raise ValueError(",
            f"ValueError: DSPARK requires explicit layer_ids for aux hidden capture (request {n}).",
            "",
        ]
    ts = "2026-08-28 05:10:05,123"  # logging.exception: every line after the first is unprefixed
    return [
        f"{ts} ERROR [app.worker] job {n} failed",
        "Traceback (most recent call last):",
        '  File "/srv/app/worker.py", line 12, in handle',
        "    conn.send(payload)",
        f"ConnectionResetError: [Errno 104] Connection reset by peer (job {n})",
    ]


def write_corpus(path: Path, kind: str, megabytes: float, seed: int = 7) -> tuple[int, int]:
    """Write ``megabytes`` of the corpus; returns (lines, bytes)."""
    rng = random.Random(seed)
    target = int(megabytes * 1e6)
    lines = size = n = 0
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        while size < target:
            n += 1
            if kind == "tracebacks" and n % 3 == 0:
                chunk = traceback_block(rng, n)
            else:
                chunk = [noise_line(rng, n)]
            text = "\n".join(chunk) + "\n"
            handle.write(text)
            lines += len(chunk)
            size += len(text.encode("utf-8"))
    return lines, size


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


def best_time(function, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def read_only(path: Path) -> int:
    count = 0
    for _ in _read_lines(path):
        count += 1
    return count


def parse_with(module, path: Path) -> int:
    return sum(1 for _ in module.iter_exceptions(_read_lines(path)))


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location("errordb_parse_compare", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it is executed
    spec.loader.exec_module(module)
    return module


def rate(lines: int, size: int, seconds: float) -> str:
    return f"{lines / seconds:,.0f} lines/s, {size / seconds / 1e6:.1f} MB/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=10.0, help="size of each corpus in MB (default 10)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement; the best is kept (default 3)")
    ap.add_argument("--compare", type=Path, help="a parser in one file (an older parse.py) to measure beside it")
    args = ap.parse_args()
    old = load_module(args.compare) if args.compare else None

    with tempfile.TemporaryDirectory(prefix="errordb-parse-speed-") as tmp:
        print(f"Python {sys.version.split()[0]}, corpora of {args.mb:g} MB, best of {args.repeats}\n")
        print("| corpus | lines | read only (baseline) | parser | parser ÷ read | exceptions |"
              + (" old parser | speed-up |" if old else ""))  # fmt: skip
        print("|---|---|---|---|---|---|" + ("---|---|" if old else ""))
        for kind in ("noise", "tracebacks"):
            path = Path(tmp) / f"{kind}.log"
            lines, size = write_corpus(path, kind, args.mb)
            t_read, _ = best_time(lambda: read_only(path), args.repeats)
            t_new, found = best_time(lambda: parse_with(current_parse, path), args.repeats)
            row = (f"| {kind} | {lines:,} | {rate(lines, size, t_read)} | {rate(lines, size, t_new)} "
                   f"| {t_new / t_read:.1f}× | {found:,} |")
            if old:
                t_old, found_old = best_time(lambda: parse_with(old, path), args.repeats)
                same = "" if found_old == found else f" (found {found_old:,}!)"
                row += f" {rate(lines, size, t_old)}{same} | {t_old / t_new:.2f}× |"
            print(row, flush=True)

        print("\nScaling (noise corpus, this parser): time per MB should stay flat\n")
        print("| MB | lines | seconds | s per MB |")
        print("|---|---|---|---|")
        for factor in (1, 2, 4):
            path = Path(tmp) / f"noise-{factor}.log"
            lines, size = write_corpus(path, "noise", args.mb * factor)
            seconds, _ = best_time(lambda: parse_with(current_parse, path), max(1, args.repeats - 1))
            print(f"| {size / 1e6:.0f} | {lines:,} | {seconds:.2f} | {seconds / (size / 1e6):.3f} |", flush=True)
            path.unlink()


if __name__ == "__main__":
    main()
