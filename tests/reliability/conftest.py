"""The reliability suite's figures: each test says what it tried, how often, and what happened.

Tests call the ``figures`` fixture (``figures.add(case, tried, runs, result)``); at the end of the
session the rows are printed under "reliability figures" and written to
``test-artifacts/reliability.json``, which is where the table in docs/reliability.md comes from.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

ARTIFACT = Path(__file__).resolve().parents[2] / "test-artifacts" / "reliability.json"


@dataclass
class Figure:
    case: str
    tried: str
    runs: int
    result: str


@dataclass
class Figures:
    rows: list[Figure] = field(default_factory=list)

    def add(self, case: str, tried: str, runs: int, result: str) -> None:
        self.rows.append(Figure(case, tried, runs, result))


_FIGURES = Figures()


@pytest.fixture(scope="session")
def figures() -> Figures:
    return _FIGURES


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _FIGURES.rows:
        return
    terminalreporter.section("reliability figures")
    for row in _FIGURES.rows:
        terminalreporter.write_line(f"{row.case} | {row.tried} | {row.runs} | {row.result}")
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps([asdict(r) for r in _FIGURES.rows], indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
