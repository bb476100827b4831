"""The benchmark harness itself (bench/run.py): it runs end to end and its guards can fail.

No figure is checked here (timings in tests are flaky): only that every stage ran and printed
its column, and that ``--check`` trips on a ratio far outside its guard.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_run", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(work: Path, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(BENCH), "--sizes", "200", "--samples", "20", "--repeats", "1", "--work", str(work), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _table(stdout: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in stdout.splitlines() if line.startswith("| ")]
    split = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return split[0], split[1:]


def test_every_stage_runs_and_prints_its_column(bench, tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    head, rows = _table(done.stdout)
    assert head == [name for name, _, _ in bench.COLUMNS]
    for wanted in ("ingest rec/s", "re-ingest s", "ingest peak MB", "site pages/s", "site peak MB", "serve: one edit shown s", "export s", "export peak MB"):
        assert any(name.startswith(wanted) for name in head), wanted
    assert len(rows) == 1 and rows[0][0] == "200"
    assert "—" not in rows[0], done.stdout  # every stage was measured
    assert "skipped" not in done.stdout
    # (The serve stage itself checks that the edited record's page shows the edit.)
    # Every output went to the run's trash, and the trash went at the end.
    assert not [path.name for path in tmp_path.iterdir() if path.is_dir()], list(tmp_path.iterdir())


def test_discard_moves_folders_aside_under_distinct_names(bench, tmp_path):
    for turn in range(2):
        (tmp_path / "site-5" / "errors").mkdir(parents=True)
        (tmp_path / "site-5" / "errors" / "page.html").write_text(str(turn), encoding="utf-8")
        bench.discard(tmp_path / "site-5", tmp_path)
        assert not (tmp_path / "site-5").exists()
    bench.discard(tmp_path / "never-made", tmp_path)  # nothing there: nothing to do
    kept = sorted((tmp_path / bench.TRASH).glob("*/errors/page.html"))
    assert [path.read_text(encoding="utf-8") for path in kept] == ["0", "1"]


def test_skipped_stages_show_as_dashes_with_the_reason(tmp_path):
    done = _run(tmp_path, "--skip", "explain,match,export", "--site-max", "100")
    assert done.returncode == 0, done.stderr
    head, rows = _table(done.stdout)
    shown = dict(zip(head, rows[0]))
    assert shown["DB MB"] != "—"
    for name in ("cold explain s (÷ 3 records)", "match p50 / p99 ms", "site pages/s (÷ bare jinja2)", "serve: one edit shown s (÷ full build)", "export s (× dump+gzip)"):
        assert shown[name] == "—", name
    assert "200 records: site skipped (above --site-max 100)" in done.stdout
    assert "200 records: export skipped (--skip)" in done.stdout


def test_unknown_stage_is_a_usage_error(tmp_path):
    done = _run(tmp_path, "--skip", "sight")
    assert done.returncode == 2 and "unknown stage sight" in done.stderr


def _healthy_row(size: int = 10_000) -> dict:
    """A row with every ratio comfortably inside its guard."""
    return {
        "size": size, "ingest_per_s": 5_000, "raw_per_s": 20_000, "raw_every_per_s": 15_000, "ingest_mb": 150, "raw_mb": 20, "db_mb": 50.0,
        "ingest_s": size / 5_000, "reingest_same_s": 0.1, "reingest_changed_s": 0.15,
        "cold_s": 0.13, "bundled_cold_s": 0.13, "cold_mb": 29, "nomatch_s": 0.13,
        "match_p50_ms": 0.2, "match_p99_ms": 0.3, "hit_rate": 1.0, "loop_ms": 2.0, "loop_extrapolated": False,
        "site_per_s": 900, "bare_per_s": 2_000, "site_mb": 200, "bare_mb": 25, "site_s": 11.0, "serve_edit_s": 0.5, "site_pages": size + 120,
        "export_s": 3.0, "bare_export_s": 1.0, "export_mb": 60, "bare_export_mb": 12, "skipped": {},
    }  # fmt: skip


def test_check_passes_healthy_numbers(bench):
    assert bench.check([_healthy_row(1_000), _healthy_row(10_000)]) == []


@pytest.mark.parametrize(
    ("doctored", "guard"),
    [
        ({"site_per_s": 9}, "site build share of bare jinja2 pages/s"),
        ({"site_mb": 20_000}, "bare jinja2 / site build peak memory"),
        ({"serve_edit_s": 30.0}, "full build / serve showing one edit"),
        ({"export_s": 300.0}, "dump+gzip / export time"),
        ({"export_mb": 6_000}, "bare export / export peak memory"),
        ({"ingest_per_s": 500}, "ingest share of executemany"),
        ({"ingest_mb": 3_000}, "executemany / ingest peak memory"),
        ({"reingest_changed_s": 1.5}, "first ingest / re-ingest of one changed record"),
        ({"cold_s": 1.3}, "cold explain vs 3 records"),
        ({"hit_rate": 0.5}, "exact top hits"),
        ({"loop_ms": 0.2}, "plain loop / match p50"),
    ],
)
def test_check_fails_on_a_ratio_far_outside_its_guard(bench, doctored, guard):
    failed = bench.check([_healthy_row(), {**_healthy_row(), **doctored}])
    assert len(failed) == 1, failed
    assert failed[0].startswith("10,000 records: " + guard)


def test_check_ignores_stages_not_measured_and_guards_of_larger_sizes(bench):
    row = {k: v for k, v in _healthy_row().items() if not k.startswith(("site", "bare", "serve", "export"))}
    assert bench.check([row]) == []
    # Trying 1,000 patterns is as fast as the index: that guard starts at 10,000 records.
    assert bench.check([{**_healthy_row(1_000), "loop_ms": 0.2}]) == []


def test_the_table_marks_what_was_not_measured(bench):
    row = {**_healthy_row(), "skipped": {"site": "needs ~40 GB, 3 GB free"}}
    for key in ("site_per_s", "site_mb", "serve_edit_s"):
        del row[key]
    text = bench.table([row])
    assert text.splitlines()[2].count("—") == 3
    assert text.endswith("10,000 records: site skipped (needs ~40 GB, 3 GB free)")


def test_no_room_when_the_disk_cannot_hold_the_site(bench, tmp_path):
    assert bench.no_room(tmp_path, 10, 40_000, 4) is None
    assert "GB free" in bench.no_room(tmp_path, 10**12, 40_000, 4)


def test_the_adversarial_benchmark_times_every_input_and_its_check_can_fail():
    script = BENCH.with_name("adversarial.py")
    done = subprocess.run([sys.executable, str(script), "--repeats", "1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines()[1:-1] if line.strip()]
    assert len(rows) == 19 and all(line.split()[-1].replace(".", "", 1).isdigit() for line in rows)
    # A limit no input can meet (a ratio below 1 means the larger input was the faster): --check fails.
    failed = subprocess.run([sys.executable, str(script), "--repeats", "1", "--check", "--limit", "0.01"],
                            capture_output=True, text=True, timeout=600)
    assert failed.returncode == 1 and "cost grows faster than the input" in failed.stderr
