"""What records without an index word cost explain: a 1,000-exception log, with and without them.

    python bench/unindexed.py                       # 10,000 such records, a 1,000-exception log
    python bench/unindexed.py --unindexed 20000 --exceptions 2000 --repeats 5

Most record patterns hold a word that every matching message contains, and explain looks
candidates up by it (docs/matching.md). A pattern with none (``Not supported``, ``Invalid .*``,
``.* not found``: 272 of the real-world corpus's 35,751 harvested records) could match any
message, so all of them are tried for every exception: at once, in RE2 sets
(``errordb.records.patterns.PatternSet``).

In one run, with stores made in a temporary folder from bench/generate.py's records:

- ``indexed``: 10,000 generated records;
- ``+ unindexed``: the same, plus ``--unindexed`` records whose patterns have no index word
  (their messages are 2- and 3-word variations such as ``Unsupported lora17 .*``);
- ``one by one``: the second store, with every unindexed pattern tried alone for every
  exception (what explain did before the sets), for comparison: measured on the log's first 20
  exceptions and scaled to the whole log.

The log holds ``--exceptions`` tracebacks of indexed records (``bench/generate.py``'s
``sample_traceback``), and each is explained with ``errordb.explain``. Printed: the best of
``--repeats`` wall times of each, and the ratios to ``indexed`` (the issue's bound: within 2x).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generate import NOUNS, generate, sample_traceback  # noqa: E402

import errordb  # noqa: E402
from errordb.records import patterns  # noqa: E402
from errordb.store import ingest  # noqa: E402

SHAPES = ("{Head} {word}", "{Head} {word} .*", ".* {word} {tail}", "{Head} .* {word}")
HEADS = ("Unsupported", "Invalid", "Unknown", "Missing", "Cannot", "Bad", "Not")
TAILS = ("missing", "unsupported", "invalid", "failed", "found")
ONE_BY_ONE = 20  # exceptions of the log explained one pattern at a time


def unindexed(envelope: dict, serial: int, rng: random.Random) -> dict:
    """A generated record rewritten to a pattern with no index word (no word with text on both sides)."""
    word = f"{rng.choice(NOUNS).replace(' ', '_')}{serial}"
    shape = rng.choice(SHAPES).format(Head=rng.choice(HEADS), word=word, tail=rng.choice(TAILS))
    message = shape.replace(".*", "value")
    record = dict(envelope["record"], id=f"{serial:016x}", slug=f"unindexed-{serial}", errorMessage=message,
                  messagePattern=shape.replace(".*", "(.+)"))  # fmt: skip
    return {"record": record, "datasetVersion": envelope["datasetVersion"]}


def explain_seconds(log: str, db: Path, repeats: int) -> tuple[float, int]:
    """Best wall time of explaining ``log`` against ``db``, and how many exceptions it found."""
    best, found = float("inf"), 0
    for _ in range(repeats):
        started = time.perf_counter()
        found = len(errordb.explain(log, db).findings)
        best = min(best, time.perf_counter() - started)
    return best, found


class OneByOne(patterns.PatternSet):
    """Every pattern reported as found: each is then tried alone, as before the sets."""

    def __init__(self, patterns_: list[str]):
        self.count = len(patterns_)

    def search(self, text: str) -> list[int]:
        return list(range(self.count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--indexed", type=int, default=10_000, help="generated records with an index word")
    parser.add_argument("--unindexed", type=int, default=10_000, help="records whose pattern has no index word")
    parser.add_argument("--exceptions", type=int, default=1_000, help="tracebacks in the log")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="errordb-unindexed-") as work:
        work_dir = Path(work)
        envelopes = list(generate(options.indexed))
        indexed, extra = work_dir / "indexed.jsonl", work_dir / "unindexed.jsonl"
        indexed.write_text("".join(json.dumps(e) + "\n" for e in envelopes), encoding="utf-8")
        extra.write_text("".join(json.dumps(unindexed(rng.choice(envelopes), n, rng)) + "\n"
                                 for n in range(options.unindexed)), encoding="utf-8")  # fmt: skip
        plain_db, mixed_db = work_dir / "indexed.db", work_dir / "mixed.db"
        ingest([indexed], plain_db)
        ingest([indexed, extra], mixed_db)
        log = "\n".join(sample_traceback(e) for e in rng.sample(envelopes, options.exceptions))
        explain_seconds(log, plain_db, 1)  # warm-up: imports, page cache
        rows = [("indexed", *explain_seconds(log, plain_db, options.repeats))]
        rows.append(("+ unindexed", *explain_seconds(log, mixed_db, options.repeats)))
        real_set, patterns.PatternSet = patterns.PatternSet, OneByOne
        import errordb.explainer.match as match

        match.PatternSet = OneByOne
        try:  # on a few exceptions only (it takes minutes on all of them), scaled to the log
            few = log.split("Traceback")[: ONE_BY_ONE + 1]
            seconds, found = explain_seconds("Traceback".join(few), mixed_db, 1)
            rows.append((f"one by one (from {found} exceptions)", seconds * options.exceptions / found, options.exceptions))
        finally:
            patterns.PatternSet = match.PatternSet = real_set
    base = rows[0][1]
    print(f"\n## A {options.exceptions:,}-exception log, {options.indexed:,} indexed records, "
          f"{options.unindexed:,} without an index word\n")  # fmt: skip
    print("| store | seconds | × indexed | exceptions found |\n| --- | ---: | ---: | ---: |")
    for name, seconds, found in rows:
        print(f"| {name} | {seconds:.2f} | {seconds / base:.2f} | {found:,} |")


if __name__ == "__main__":
    main()
