"""How fast ``errordb harvest`` reads source trees: files/s and lines/s, with the record counts.

    python bench/harvest.py                  # the seven installed libraries of docs/harvest.md
    python bench/harvest.py --tree PATH ...  # any source trees (repo acme/<folder name>)

Each tree is harvested ``--repeat`` times into a fresh temporary records tree and the fastest
run is reported (a cold first run pays for imports and the file cache). The time includes
everything a run does: walking, parsing (twice where needed), reading messages, building,
validating and checking every draft, and writing the files. Prints two Markdown tables (speed;
what was harvested and why the other raises were not, by reason) and the peak memory of the
process (resident set size, for all the runs together).
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from errordb.harvest.drafts import harvest  # noqa: E402
from errordb.harvest.scan import REASONS, python_files  # noqa: E402

#: The libraries of the proof (tests/test_harvest_real.py): repository and source folder in it.
LIBRARIES = {
    "click": ("pallets/click", "src"),
    "jinja2": ("pallets/jinja", "src"),
    "pydantic": ("pydantic/pydantic", ""),
    "sqlite_utils": ("simonw/sqlite-utils", ""),
    "json": ("python/cpython", "Lib"),
    "argparse": ("python/cpython", "Lib"),
    "pathlib": ("python/cpython", "Lib"),
}
SHA = "0" * 40


def installed(module: str) -> tuple[Path, str, str]:
    """(source path, repository, prefix) of an installed module."""
    origin = Path(importlib.util.find_spec(module).origin)
    repo, root = LIBRARIES[module]
    if origin.name == "__init__.py":
        return origin.parent, repo, "/".join(p for p in (root, origin.parent.name) if p)
    return origin, repo, root


def lines_of(path: Path) -> int:
    return sum(file.read_bytes().count(b"\n") for file in python_files(path))


def measure(name: str, path: Path, repo: str, prefix: str, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            report = harvest(path, repo=repo, sha=SHA, out=Path(out) / "records", prefix=prefix, analyzed_at="2026-08-28")
            seconds = time.perf_counter() - started
        if best is None or seconds < best[0]:
            best = (seconds, report)
    seconds, report = best
    lines = lines_of(path)
    return {
        "name": name, "files": report.files, "lines": lines, "raises": report.raises,
        "records": report.records, "helpers": report.via_helpers, "unreadable": len(report.skips),
        "seconds": seconds, "reraises": report.reraises, "unparsable": len(report.unparsable),
        **{reason: report.reasons.get(reason, 0) for reason in REASONS if reason != "unparsable"},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path, help="a source tree to harvest (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tree; the fastest counts (default 3)")
    options = parser.parse_args()
    if options.tree:
        jobs = [(t.name, t, f"acme/{t.name or 'tree'}", "") for t in options.tree]
    else:
        jobs = [(module, *installed(module)) for module in LIBRARIES]
    rows = [measure(name, path, repo, prefix, options.repeat) for name, path, repo, prefix in jobs]
    total = {key: sum(r[key] for r in rows) for key in rows[0] if key != "name"}
    print("| tree | files | lines | raises | records (via helpers) | unreadable | s | files/s | lines/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in [*rows, {"name": "**total**", **total}]:
        print(
            f"| {row['name']} | {row['files']:,} | {row['lines']:,} | {row['raises']:,} | "
            f"{row['records']:,} ({row['helpers']}) | {row['unreadable']:,} | {row['seconds']:.2f} | "
            f"{row['files'] / row['seconds']:,.0f} | {row['lines'] / row['seconds']:,.0f} |"
        )
    # Why the raises without a record have none (reasons that occur anywhere), and the rest.
    reasons = [reason for reason in REASONS if reason != "unparsable" and total[reason]]
    print()
    print("| tree | raises | records (via helpers) | " + " | ".join(reasons) + " | re-raises | unparsable files |")
    print("|---" * (len(reasons) + 5) + "|")
    for row in [*rows, {"name": "**total**", **total}]:
        counts = " | ".join(f"{row[reason]:,}" for reason in reasons)
        print(f"| {row['name']} | {row['raises']:,} | {row['records']:,} ({row['helpers']}) | {counts} | "
              f"{row['reraises']:,} | {row['unparsable']:,} |")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"\npeak memory (resident): {peak:,.0f} MB; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
