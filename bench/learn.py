"""How fast ``errordb learn`` learns an environment, and what a large learned layer costs explain.

    python bench/learn.py                       # the interpreter running this script
    python bench/learn.py --python PATH         # another environment
    python bench/learn.py --drafts 200000       # the cold-explain comparison at that many drafts

1. **Learning.** The standard library and every distribution of the environment are learned
   into an empty cache, timed whole (listing, two parses of each file, drafts built and
   validated, JSON Lines written, the layer's store ingested). The baseline, measured in the
   same run: ``ast.parse`` alone of the same files, one core.
2. **Cold explain.** ``errordb explain`` in a fresh process, with the bundled records only
   (baseline) and with a learned layer of ``--drafts`` generated drafts (bench/generate.py,
   given a distribution and no commit, as learn writes them), same traceback, median of runs.

Prints a Markdown table with the ratios; the targets (issue "errordb learn") are under 60 s
for about 60 distributions and the standard library, at least 300 files/s, and cold explain
within 1.5x of the bundled-only time.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.generate import write_jsonl  # noqa: E402
from errordb.harvest.installed import _wanted, environment  # noqa: E402
from errordb.harvest.scan import read_source  # noqa: E402

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/main.py", line 12, in <module>
    data = json.loads(body)
  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""


def parse_baseline(files: list[str]) -> float:
    """Seconds ``ast.parse`` takes over ``files``, in this process (one core)."""
    started = time.perf_counter()
    for file in files:
        try:
            ast.parse(read_source(Path(file)))
        except (SyntaxError, ValueError, UnicodeDecodeError, LookupError):
            pass
    return time.perf_counter() - started


def timed_learn(python: str, cache: Path) -> tuple[float, str]:
    env = dict(os.environ, ERRORDB_CACHE=str(cache))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "errordb", "learn", "--python", python], env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stderr.strip()


def cold_explain(cache: Path, repeats: int) -> float:
    env = dict(os.environ, ERRORDB_CACHE=str(cache), NO_COLOR="1")
    env.pop("ERRORDB_DB", None)
    command = [sys.executable, "-m", "errordb", "explain", "--format", "json", TRACEBACK]
    subprocess.run(command, env=env, capture_output=True)  # builds what is built on first use; warms the page cache
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, env=env, capture_output=True)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def learned_layer(cache: Path, drafts: int) -> None:
    """A learned layer of ``drafts`` generated drafts, made as learn makes one (JSON Lines, then ingest)."""
    from errordb.records.loader import bundled_records_dir
    from errordb.store.default import layer_db_path
    from errordb.store.ingestion import ingest

    generated = write_jsonl(drafts, HERE / ".cache" / f"records-{drafts}.jsonl")
    records = cache / "learned" / "records"
    records.mkdir(parents=True)
    with open(generated, encoding="utf-8") as source, open(records / "dist-bench.jsonl", "w", encoding="utf-8") as out:
        for line in source:
            envelope = json.loads(line)
            record = envelope["record"]
            record.update(distribution="bench", distributionVersion="1.0")
            for name in ("githubUrl", "analyzedSha"):
                del record[name]
            ordered = {name: record[name] for name in ("id", "repo", "distribution", "distributionVersion")}
            out.write(json.dumps({"record": {**ordered, **record}, "datasetVersion": envelope["datasetVersion"]}) + "\n")
    os.environ["ERRORDB_CACHE"] = str(cache)
    ingest([bundled_records_dir(), records], layer_db_path(), prune=True)
    from errordb.store.default import records_fingerprint

    manifest = {"bundled": records_fingerprint(bundled_records_dir()), "sources": {}}
    (cache / "learned" / "learned.json").write_text(json.dumps(manifest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the environment to learn (default: this interpreter)")
    parser.add_argument("--drafts", type=int, default=200_000, help="learned drafts for the cold-explain comparison (0: skip)")
    parser.add_argument("--repeat", type=int, default=5, help="cold explain runs (median)")
    options = parser.parse_args()

    env = environment(options.python)
    env["executable"] = options.python
    sources = _wanted(env, (), ())
    files = [file for source in sources for file, _ in source.files]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        seconds, summary = timed_learn(options.python, Path(work) / "learn")
        parse = parse_baseline(files)
        distributions = len(sources) - 1
        rows.append(("learn: stdlib + {} distributions, {:,} files".format(distributions, len(files)), f"{seconds:.1f} s",
                     f"{len(files) / seconds:.0f} files/s", f"ast.parse alone, one core: {len(files) / parse:.0f} files/s",
                     f"{(len(files) / seconds) / (len(files) / parse):.2f}"))
        print(summary, file=sys.stderr)
        if options.drafts:
            bundled = cold_explain(Path(work) / "bundled", options.repeat)
            learned_layer(Path(work) / "layer", options.drafts)
            layered = cold_explain(Path(work) / "layer", options.repeat)
            rows.append((f"cold explain, {options.drafts:,} learned drafts", f"{layered * 1000:.0f} ms", "",
                         f"bundled records only: {bundled * 1000:.0f} ms", f"{layered / bundled:.2f}"))
    print("| what | time | rate | baseline (same run) | ratio |")
    print("|---|---:|---:|---|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
