"""errordb on real pastes: every case of bench/realworld/cases/ explained against a real store.

    python bench/realworld/run.py             # fetch and harvest (cached), ingest, explain, score
    python bench/realworld/run.py -k vllm     # only the cases whose file name contains "vllm"

The store holds the bundled records and the harvest of every release in projects.toml, each
harvested into a tree of its own (bench/realworld/dataset.py) and ingested together. Each case (a paste copied verbatim from a public issue, with its
address and labels: README.md in this folder) is explained with ``errordb.explain``, and scored:

- parse: the input's final exception (the last one printed: a traceback cut before its
  exception line prints none) has exactly the labelled class
  and message (white space at the ends of its lines aside), over the cases that print it (not
  those labelled ``printed = false``: cut before it, or shown without its class, as click's
  ``Error: ...``);
- raise site: over the cases whose raise the pinned release has (``harvestable``), the top
  answer for the final exception is a record of the labelled module and qualified function (or
  of ``pinned_module`` and ``pinned_function``, where the pinned release raises it when the
  raise moved since the paste's version);
- false attribution: over the negatives (raised by code the store does not hold), the final
  exception matched any record of a store project (the issue allows a match on identical words
  when the case is labelled ``acceptable_message_only`` and the match is shown as message-only;
  errordb marks no match so yet, so every match counts);
- time: the median wall time of one ``errordb.explain`` call, in this process.

Every miss is printed with what was expected and what came out; the last line is the summary,
``realworld: N cases, parse P%, raise site S%, false attribution F%, median T ms``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from dataset import Project, cache_dir, fetch, harvested, projects  # noqa: E402

import errordb  # noqa: E402
from errordb.store import STORE_VERSION, bundled_records_dir, ingest  # noqa: E402
from errordb.text import one_line  # noqa: E402


@dataclass
class Case:
    name: str
    source: str
    paste: str
    expected: dict

    @classmethod
    def load(cls, path: Path) -> Case:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
        return cls(path.stem, data["source"], data["paste"], data["expected"])


@dataclass
class Outcome:
    case: Case
    seconds: float
    parsed: tuple[str | None, str] | None  # (class, message) of the final exception
    top: tuple[str | None, str | None, str] | None  # (module, function, record id) of its best match
    claimed_by: list[str]  # store projects with a record matching the final exception

    @property
    def parse_ok(self) -> bool:
        want = (self.case.expected["class"], _lines(self.case.expected["message"]))
        return self.parsed is not None and (self.parsed[0], _lines(self.parsed[1])) == want

    @property
    def sites(self) -> list[tuple[str, str | None]]:
        """The labelled raise site, and where the pinned release raises it when that moved."""
        expected = self.case.expected
        sites = [(expected["module"], _function(expected["function"]))]
        if "pinned_module" in expected:
            sites.append((expected["pinned_module"], _function(expected["pinned_function"])))
        return sites

    @property
    def site_ok(self) -> bool:
        return self.top is not None and self.top[:2] in self.sites

    @property
    def module_ok(self) -> bool:
        return self.top is not None and self.top[0] in [module for module, _ in self.sites]

    @property
    def falsely_attributed(self) -> bool:
        return bool(self.claimed_by)


def _lines(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _function(name: str | None) -> str | None:
    return None if name in (None, "", "<module>") else name


def explain_case(case: Case, db: Path, by_repo: dict[str, Project]) -> Outcome:
    started = time.perf_counter()
    explanation = errordb.explain(case.paste, db)
    seconds = time.perf_counter() - started
    if not explanation.findings:
        return Outcome(case, seconds, None, None, [])
    printed = [f for f in explanation.findings if f.exception.exc_type or f.exception.message] or explanation.findings
    final = max(printed, key=lambda finding: (finding.exception.line_no, finding.index))
    parsed = (final.exception.exc_type, final.exception.message)
    top = None
    if final.matches:
        record = final.matches[0].record
        project = by_repo.get(record["repo"])
        module = project.module_of(record["filePath"]) if project else None
        top = (module, _function(record.get("function")), final.matches[0].id)
    claimed = sorted({by_repo[m.record["repo"]].name for m in final.matches if m.record["repo"] in by_repo})
    return Outcome(case, seconds, parsed, top, claimed)


def report_misses(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        case, expected = outcome.case, outcome.case.expected
        problems = []
        if expected.get("printed", True) and not outcome.parse_ok:
            got = "nothing" if outcome.parsed is None else f"{outcome.parsed[0]}: {outcome.parsed[1]}"
            problems.append(f"parse: got {one_line(got)[:160]!r}, want {one_line(expected['class'] + ': ' + expected['message'])[:160]!r}")
        if expected["harvestable"] and not expected["negative"] and not outcome.site_ok:
            got = "no match" if outcome.top is None else f"{outcome.top[0]}:{outcome.top[1]} ({outcome.top[2]})"
            want = " or ".join(f"{module}:{function}" for module, function in outcome.sites)
            problems.append(f"raise site: got {got}, want {want}")
        if expected["negative"] and outcome.falsely_attributed:
            got = f"{outcome.top[0]}:{outcome.top[1]} ({outcome.top[2]})" if outcome.top else "?"
            problems.append(f"false attribution: raised by {expected['raised_by']}, claimed by {', '.join(outcome.claimed_by)}; top {got}")
        if problems:
            print(f"{case.name}  {case.source}")
            for problem in problems:
                print(f"    {problem}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the cases whose file name contains this")
    options = parser.parse_args()
    cases = [Case.load(path) for path in sorted((HERE / "cases").glob("*.toml")) if options.k in path.stem]
    by_repo = {project.repo: project for project in projects()}
    db = cache_dir() / f"store-{STORE_VERSION}.db"  # a store of another layout is not reused
    trees = harvested(cache_dir(), {project: fetch(project, cache_dir()) for project in projects()})
    ingest([*trees, bundled_records_dir()], db, prune=True)
    errordb.explain("ValueError: warm-up", db)  # the first call opens the store and compiles the patterns
    outcomes = [explain_case(case, db, by_repo) for case in cases]
    report_misses(outcomes)

    def percent(hits: int, total: int) -> str:
        return f"{100 * hits / total:.0f}%" if total else "n/a"

    printed = [o for o in outcomes if o.case.expected.get("printed", True)]
    site_cases = [o for o in outcomes if o.case.expected["harvestable"] and not o.case.expected["negative"]]
    negatives = [o for o in outcomes if o.case.expected["negative"]]
    print(f"\nparse {sum(o.parse_ok for o in printed)}/{len(printed)}, raise site {sum(o.site_ok for o in site_cases)}/"
          f"{len(site_cases)} (right module: {sum(o.module_ok for o in site_cases)}), "
          f"false attribution {sum(o.falsely_attributed for o in negatives)}/{len(negatives)}")  # fmt: skip
    print(
        f"realworld: {len(outcomes)} cases, parse {percent(sum(o.parse_ok for o in printed), len(printed))}, "
        f"raise site {percent(sum(o.site_ok for o in site_cases), len(site_cases))}, "
        f"false attribution {percent(sum(o.falsely_attributed for o in negatives), len(negatives))}, "
        f"median {statistics.median(o.seconds for o in outcomes) * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
