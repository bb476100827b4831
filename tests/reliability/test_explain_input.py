"""Hostile input to explain (issue 9): huge logs, one huge line, binary junk, deep nesting, many
exceptions, terminal escape sequences. Each test states its bound in its docstring and adds what
it measured to the suite's figures (printed at the end of the run, written to
test-artifacts/reliability.json; docs/reliability.md quotes them).

Timings are never asserted: linear time is shown by counting the work the parser does
(test_the_work_grows_linearly_with_the_log) and measured by bench/parse_speed.py.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
import sys
import tomllib
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest
from helpers import BAILING_VALUE_ERROR, KIMI_VALUE_ERROR, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import INVISIBLE, TROJAN_LINE, invisible_in, run_cli

import errordb
from errordb.explainer import parse
from errordb.explainer.parse import driver
from errordb.explainer.parse.fastpath import BLOCK_LINES
from errordb import text as safe_text
from errordb.cli import _read_lines
from errordb.explainer.result import ExplainOut
from errordb.store import ingest

KIMI_TB = (REPO / "examples" / "kimi_k3_layer_ids.log").read_text(encoding="utf-8")
KIMI_MESSAGE = "DSPARK requires explicit layer_ids for aux hidden capture."
MB = 1_000_000

# Ordinary log lines of the layouts errordb meets (sglang, logging, uvicorn, Ray/vLLM, progress
# bars, JSON lines, blank lines), varied by a counter so no two runs of lines are alike.
NOISE = (
    "[2026-08-28 05:10:{s:02d} TP{r}] Decode batch. #running-req: {n}, #token: {t}, token usage: 0.{u:02d}, "
    "gen throughput (token/s): {g}.{u:02d}, #queue-req: 0",
    "2026-08-28 05:10:{s:02d},{u:03d} INFO [app.worker] picked up job {n} from queue default",
    'INFO:     10.0.0.{r}:{t} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(RayWorkerWrapper pid={t}) INFO 08-28 05:10:{s:02d} [worker.py:{u}] Memory profiling takes {g}.{u:02d} seconds",
    "Loading safetensors checkpoint shards: {u}% Completed | {r}/8 [00:{s:02d}<00:{s:02d},  1.{u:02d}it/s]",
    '{{"ts": "2026-08-28T05:10:{s:02d}Z", "level": "info", "msg": "request finished", "latency_ms": {g}, "id": "req-{n}"}}',
    "",
)
OTHER_TB = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/comm.py", line 88, in all_reduce\n'
    "    work.wait()\n"
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error\n"
)


def noise(count: int, start: int = 0) -> str:
    return "".join(
        NOISE[n % len(NOISE)].format(n=n, r=n % 8, s=n % 60, t=n % 65536, u=n % 100, g=n % 2000) + "\n"
        for n in range(start, start + count)
    )


def write_log(path: Path, megabytes: float) -> Path:
    """``megabytes`` of noise with the Kimi traceback from TP0 first, from TP1 and an NCCL error
    halfway, and from TP2 last: two distinct errors, whatever the size."""
    target, written, start = megabytes * MB, 0, 0
    with path.open("w", encoding="utf-8") as handle:
        handle.write(KIMI_TB + "\n")
        middle = False
        while written < target:
            if not middle and written >= target / 2:
                handle.write(KIMI_TB.replace("TP0", "TP1") + "\n" + OTHER_TB + "\n")
                middle = True
            chunk = noise(10_000, start)
            handle.write(chunk)
            written += len(chunk)
            start += 10_000
        handle.write(KIMI_TB.replace("TP0", "TP2"))
    return path


def check_the_two_errors(result) -> None:
    kimi, nccl = result.findings
    assert kimi.exception.exc_type == "ValueError" and kimi.exception.ranks == ["TP0", "TP1", "TP2"]
    assert kimi.matches[0].id == KIMI_VALUE_ERROR
    assert nccl.exception.exc_type == "RuntimeError" and not nccl.matches


def traced_peak(function):
    """(result, peak bytes allocated by Python while ``function`` ran)."""
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# Runs errordb in a fresh process and prints that process's peak resident memory (KB) on stderr.
# Through a small wrapper, as bench/run.py does: a process forked from the test runner (large by
# then) counts the runner's pages in its ru_maxrss, even after exec.
_WITH_MAXRSS = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-m', 'errordb', *sys.argv[1:]])\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "sys.stderr.write(f'\\nmaxrss_kb={usage.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def run_measured(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    """errordb as a real process: its result, and its peak RSS in MB."""
    done = subprocess.run([sys.executable, "-c", _WITH_MAXRSS, *map(str, args)], capture_output=True, text=True, timeout=300)
    return done, int(re.findall(r"maxrss_kb=(\d+)", done.stderr)[-1]) / 1024


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """The bundled records, ingested once for the module (the embedded default would be rebuilt
    for every test: conftest gives each its own cache)."""
    path = tmp_path_factory.mktemp("db") / "errordb.db"
    ingest(None, path)
    return path


# --------------------------------------------------------------------------------------------
# Big logs
# --------------------------------------------------------------------------------------------


def test_a_100_mb_log_is_streamed_in_bounded_memory(tmp_path, db, figures):
    """Bound: memory does not grow with the log. explain's peak traced allocation (tracemalloc)
    on a 100 MB log is at most 1.5 x its peak on a 10 MB log + 0.5 MB, and under 4 MB; the
    errordb process reading the 100 MB log with --file peaks at most 10 MB (RSS) above the same
    command on the 10 MB log. Both logs give the same two errors, the Kimi one from 3 ranks.
    (Time: bench/parse_speed.py; about 3 s for the 100 MB here.)"""
    peaks, rss, sizes = {}, {}, {}
    for megabytes in (10, 100):
        log = write_log(tmp_path / f"{megabytes}.log", megabytes)
        sizes[megabytes] = log.stat().st_size
        result, peaks[megabytes] = traced_peak(lambda: errordb.explain(_read_lines(log), db))
        check_the_two_errors(result)
        done, rss[megabytes] = run_measured("explain", "--db", db, "--file", log, "--no-color")
        assert done.returncode == 0, done.stderr
        # (its headline wrapped to the terminal's width: compared word for word)
        assert " ".join(done.stdout.split()).startswith(f"● ValueError: {KIMI_MESSAGE} (from TP0, TP1, TP2)"), done.stdout[:300]
        log.unlink()
    assert sizes[100] > 9.5 * sizes[10] > 95 * MB
    assert peaks[100] <= 1.5 * peaks[10] + 0.5 * MB and peaks[100] < 4 * MB, peaks
    assert rss[100] <= rss[10] + 10, rss
    figures.add(
        "100 MB log (explain --file)",
        f"{sizes[100] / MB:.0f} MB of sglang/logging/uvicorn/Ray lines with 4 tracebacks, against {sizes[10] / MB:.0f} MB",
        1,
        f"same 2 findings; peak traced memory {peaks[10] / 1e3:.0f} KB (10 MB) vs {peaks[100] / 1e3:.0f} KB (100 MB); "
        f"process RSS {rss[10]:.0f} MB vs {rss[100]:.0f} MB",
    )


def test_the_work_grows_linearly_with_the_log(tmp_path, db, figures, monkeypatch):
    """Bound: linear work, counted rather than timed. Lines handed to the full parser do not grow
    with the noise (10 MB and 20 MB logs with the same tracebacks: at most one block, 64 lines,
    apart); the fast path looks at each character at most twice (once in a block, once alone),
    the same share at both sizes. Before the fast path every line went to the full parser."""
    counts = {"fed": 0, "fed_chars": 0, "tested_chars": 0}
    real_feed = driver._Parser.feed
    real_all_noise = getattr(driver, "all_noise", None)

    def counting_feed(self, raw):
        counts["fed"] += 1
        counts["fed_chars"] += len(raw)
        return real_feed(self, raw)

    def counting_all_noise(lines, text=None):
        counts["tested_chars"] += sum(map(len, lines))
        return real_all_noise(lines, text)

    monkeypatch.setattr(driver._Parser, "feed", counting_feed)
    if real_all_noise is not None:
        monkeypatch.setattr(driver, "all_noise", counting_all_noise)
    seen = {}
    for megabytes in (10, 20):
        log = write_log(tmp_path / f"{megabytes}.log", megabytes)
        for key in counts:
            counts[key] = 0
        check_the_two_errors(errordb.explain(_read_lines(log), db))
        content = log.read_text(encoding="utf-8")
        seen[megabytes] = dict(counts, size=len(content), lines=content.count("\n"))
        log.unlink()
    small, large = seen[10], seen[20]
    assert large["fed"] <= small["fed"] + 64, (small, large)
    assert large["fed"] < 0.01 * large["lines"], large
    for run in (small, large):
        assert run["tested_chars"] <= 2 * run["size"], run
    share = [run["tested_chars"] / run["size"] for run in (small, large)]
    assert abs(share[0] - share[1]) < 0.05, share
    figures.add(
        "Linear work on big logs",
        "10 MB and 20 MB logs, same tracebacks; lines fully parsed and characters tested by the fast path counted",
        1,
        f"{small['fed']} / {large['fed']} lines fully parsed of {small['lines']:,} / {large['lines']:,}; "
        f"fast path tested {share[0]:.2f} / {share[1]:.2f} characters per input character",
    )


def test_one_10_mb_line_is_capped(tmp_path, db, figures):
    """Bound: one 10 MB line costs no more than holding it once it is read. The line is cut to
    MAX_LINE_CHARS (64 KiB, iter_exceptions' documented cap), its message (which the next TP0 log
    lines continue, as sglang's multi-line messages do) to the message cap, 64 KiB and a line; the
    parser adds under 1 MB to a line already in memory; through --file the reader's copies stay
    under 3 x the line + 1 MB; the title printed is under 600 characters, the text output under
    20 KB and the JSON under 200 KB; the traceback after the line is still found."""
    line = "[2026-08-28 05:10:05 TP0] ValueError: " + "x" * 10_000_000 + "\n"
    log = tmp_path / "long-line.log"
    log.write_text(noise(100) + line + noise(100, 100) + KIMI_TB, encoding="utf-8")

    found, parser_peak = traced_peak(lambda: list(parse.iter_exceptions([line, KIMI_TB])))
    assert len(found) == 2 and len(found[0].message) <= parse.MAX_LINE_CHARS
    assert parser_peak < MB, parser_peak

    result, read_peak = traced_peak(lambda: errordb.explain(_read_lines(log), db))
    long_one, kimi = result.findings
    message = long_one.exception.message
    assert long_one.exception.exc_type == "ValueError" and len(message.split("\n")[0]) <= parse.MAX_LINE_CHARS
    assert len(message) <= 2 * parse.MAX_LINE_CHARS  # the next TP0 lines go on with it, up to the message cap
    assert kimi.matches[0].id == KIMI_VALUE_ERROR
    assert read_peak < 3 * len(line) + MB, read_peak

    text = run_cli("explain", "--db", db, "--file", log)
    document = run_cli("explain", "--db", db, "--file", log, "--format", "json")
    assert text.exit_code == 0 and document.exit_code == 0
    title = " ".join(text.stdout.split("\n\n", 1)[0].split())  # the headline, however it wrapped
    assert title.startswith("● ValueError: xxx") and len(title) < 600  # render cuts a title at 500 characters
    assert len(text.stdout) < 20_000  # the title, then the Kimi record's page
    doc = json.loads(document.stdout)
    assert len(document.stdout) < 200_000 and doc["exceptions"][0]["message"] == message
    figures.add(
        "One 10 MB line",
        "a 10,000,038-character 'ValueError: xxx...' line between log lines, then a traceback",
        1,
        f"line cut to {len(message.split(chr(10))[0]):,} characters (message {len(message):,}); parser peak {parser_peak / 1e3:.0f} KB on top of the line, "
        f"{read_peak / MB:.1f} MB reading it from the file; JSON {len(document.stdout) / 1e3:.0f} KB; the next traceback found",
    )


def test_binary_data_is_read_without_crashing(tmp_path, db, figures):
    """Bound: arbitrary bytes never make explain fail. 1 MB of random bytes (NULs, invalid and
    truncated UTF-8, stray CR and ESC; decoded with errors="replace" by --file) give exit status
    0 or 1, never 2 or a traceback, in every output format; no control character reaches the text
    output; a real traceback inside the junk is still found and matched."""
    rng = random.Random(9)
    junk = bytearray(rng.randbytes(1_000_000))
    for position in rng.sample(range(len(junk)), 10_000):
        junk[position] = rng.choice(b"\x00\x00\x00\n\r\x1b\xff\xc3\xe2")
    junk += b"\xe2\x82"  # a character cut off at the end of the file
    pure = tmp_path / "junk.bin"
    pure.write_bytes(bytes(junk))
    mixed = tmp_path / "junk-with-traceback.bin"
    half = len(junk) // 2
    mixed.write_bytes(bytes(junk[:half]) + b"\n" + KIMI_TB.encode() + b"\n" + bytes(junk[half:]))

    outcomes = {}
    for path, fmt in ((pure, "text"), (pure, "json"), (mixed, "json"), (mixed, "markdown")):
        done = run_cli("explain", "--db", db, "--file", path, "--format", fmt)
        assert done.exit_code in (0, 1), (path.name, fmt, done.exit_code, done.stderr[-500:])
        assert "Traceback" not in done.stderr
        if fmt == "json":
            ExplainOut.model_validate(json.loads(done.stdout))
        else:
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", done.stdout)
        outcomes[path.name, fmt] = done
    document = json.loads(outcomes["junk-with-traceback.bin", "json"].stdout)
    assert outcomes["junk-with-traceback.bin", "json"].exit_code == 0
    assert document["matches"][0]["id"] == KIMI_VALUE_ERROR
    junk_findings = len(json.loads(outcomes["junk.bin", "json"].stdout)["exceptions"])

    # The same bytes through the Python API: decoded first, or as raw byte chunks.
    decoded = errordb.explain(bytes(mixed.read_bytes()).decode("utf-8", "replace"), db)
    assert decoded.matches[0][0].id == KIMI_VALUE_ERROR
    chunks = [mixed.read_bytes()[i : i + 65536] for i in range(0, mixed.stat().st_size, 65536)]
    assert any(e.message == KIMI_MESSAGE for e in parse.iter_exceptions(chunks))
    figures.add(
        "Binary data (explain --file)",
        "1 MB of random bytes with NULs, invalid UTF-8, CR and ESC; the same with a traceback inside; text, JSON, Markdown",
        4,
        f"exit status {outcomes['junk.bin', 'text'].exit_code} for the junk ({junk_findings} exceptions found), "
        f"0 with the traceback (matched); valid JSON; no control character in the text output",
    )


# --------------------------------------------------------------------------------------------
# Deep and wide
# --------------------------------------------------------------------------------------------


def test_a_chain_of_1000_exceptions_is_reported_whole(tmp_path, db, figures):
    """Bound: none of 1,000 chained exceptions is lost or merged: 1,000 exceptions in order, the
    first the chain's root (and the only root cause), the others "context" with chain indexes
    1-999; the JSON is valid and linear in the chain (under 600 bytes per exception)."""
    block = 'Traceback (most recent call last):\n  File "/app/c.py", line {i}, in f{i}\n    raise E{i}()\nValueError: step {i}\n'
    sep = "\nDuring handling of the above exception, another exception occurred:\n\n"
    log = tmp_path / "chain.log"
    log.write_text(sep.join(block.format(i=i) for i in range(1000)), encoding="utf-8")
    done = run_cli("explain", "--db", db, "--file", log, "--format", "json")
    document = json.loads(done.stdout)
    ExplainOut.model_validate(document)
    exceptions = document["exceptions"]
    assert [e["message"] for e in exceptions] == [f"step {i}" for i in range(1000)]
    assert [(e["role"], e["rootCause"]) for e in exceptions[:2]] == [("root", True), ("raised-during", False)]
    assert all(e["role"] == "raised-during" and not e["rootCause"] for e in exceptions[1:])
    assert len(done.stdout) < 600 * 1000
    text = run_cli("explain", "--db", db, "--file", log)
    assert text.stdout.count("● ValueError: step ") == 1000
    figures.add(
        "Traceback chain 1,000 deep",
        "1,000 exceptions chained by 'During handling of the above exception...'",
        1,
        f"all 1,000 reported in order, 1 root cause; JSON {len(done.stdout) / 1e3:.0f} KB, text {len(text.stdout) / 1e3:.0f} KB",
    )


def test_an_exception_group_nested_1000_deep_is_capped(tmp_path, db, figures):
    """Bound: group framing is followed 63 levels deep (the parser's _MAX_GROUP_DEPTH of 64); the
    groups nested deeper are still reported, in order, as members at that depth, so all 1,000 come
    out and no group_path is longer than 63; the JSON is valid."""
    lines = [
        "  + Exception Group Traceback (most recent call last):",
        '  |   File "/app/g.py", line 1, in <module>',
        "  | ExceptionGroup: level 0 (1 sub-exception)",
    ]
    for depth in range(1, 1000):
        pad = "  " * depth
        lines.append(f"{pad}+-+---------------- 1 ----------------")
        lines.append(f"{pad}  | ExceptionGroup: level {depth} (1 sub-exception)")
    log = tmp_path / "group.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run_cli("explain", "--db", db, "--file", log, "--format", "json")
    document = json.loads(done.stdout)
    ExplainOut.model_validate(document)
    exceptions = document["exceptions"]
    assert [e["message"] for e in exceptions] == [f"level {d} (1 sub-exception)" for d in range(1000)]
    paths = [e["groupPath"] for e in exceptions]
    assert paths[:3] == [[], [1], [1, 1]] and max(map(len, paths)) == 63
    assert sum(len(p) == 63 for p in paths) == 1000 - 63
    figures.add(
        "Exception group nested 1,000 deep",
        "ExceptionGroup framing ('+-+---- 1 ----', '|' margins) 1,000 levels deep",
        1,
        f"all 1,000 reported; nesting followed to depth 63 ({sum(len(p) == 63 for p in paths)} deeper groups reported at 63); "
        f"JSON {len(done.stdout) / 1e3:.0f} KB",
    )


def many_exceptions_log(path: Path, count: int) -> Path:
    """``count`` distinct tracebacks: RuntimeErrors at distinct lines, every tenth the Kimi error
    (at a line of its own each time, so no two are alike)."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            if i % 10 == 0:
                handle.write(KIMI_TB.replace("line 2892", f"line {2000 + i}") + "\n")
            else:
                handle.write(f'Traceback (most recent call last):\n  File "/app/job.py", line {i}, in run\n    work({i})\n'
                             f"RuntimeError: job {i} failed\n\n")  # fmt: skip
    return path


def test_ten_thousand_different_exceptions_are_capped_and_counted(tmp_path, db, figures):
    """Bound: of 10,000 distinct exceptions in one log, the first MAX_FINDINGS (1,000) are reported,
    in order, and the other 9,000 counted ("omittedExceptions" in JSON, "and 9,000 more exceptions
    not shown" in text and Markdown), so explain --format json as a whole stays under 8 KB of
    traced memory per reported exception plus 4 MB; the top-level "matches" list names each
    matched record once (2 here, for 100 Kimi tracebacks at different lines); the JSON is valid."""
    from errordb.explainer.explanation import MAX_FINDINGS

    assert MAX_FINDINGS == 1000
    log = many_exceptions_log(tmp_path / "many.log", 10_000)
    done, peak = traced_peak(lambda: run_cli("explain", "--db", db, "--file", log, "--format", "json"))
    document = json.loads(done.stdout)
    ExplainOut.model_validate(document)
    exceptions = document["exceptions"]
    assert done.exit_code == 0 and len(exceptions) == 1000 and document["omittedExceptions"] == 9000
    assert [e["message"] for e in exceptions[1:3]] == ["job 1 failed", "job 2 failed"]
    assert exceptions[-1]["message"] == "job 999 failed"
    assert [e["line"] for e in exceptions] == sorted(e["line"] for e in exceptions)
    assert sum(bool(e["matches"]) for e in exceptions) == 100
    assert [m["id"] for m in document["matches"]] == [KIMI_VALUE_ERROR, BAILING_VALUE_ERROR]
    assert peak < 8_000 * 1000 + 4 * MB, peak
    text = run_cli("explain", "--db", db, "--file", log)
    assert text.stdout.count("\n● ") + text.stdout.startswith("● ") == 1000
    assert "… and 9,000 more exceptions not shown" in text.stdout
    markdown = run_cli("explain", "--db", db, "--file", log, "--format", "markdown")
    assert markdown.stdout.count("\n### ") + markdown.stdout.startswith("### ") == 1000
    assert "_… and 9,000 more exceptions not shown" in markdown.stdout
    figures.add(
        "10,000 different exceptions in one log",
        "9,000 RuntimeErrors and 1,000 Kimi ValueErrors at distinct lines",
        1,
        f"the first 1,000 reported in order, 9,000 counted (omittedExceptions; 'and 9,000 more exceptions not shown'); "
        f"explain --format json peak {peak / MB:.1f} MB; top-level matches: {len(document['matches'])} records; "
        f"JSON {len(done.stdout) / MB:.1f} MB, text {len(text.stdout) / MB:.2f} MB",
    )


def test_the_cap_bounds_memory_in_the_number_of_exceptions(tmp_path, db, figures):
    """Bound: explain --format json of 100,000 distinct exceptions peaks (traced memory) at most
    1.25 x its peak on 10,000 + 1 MB, and under MAX_FINDINGS x 8 KB + 4 MB: past the cap, more
    exceptions cost no memory. (Before the cap: 6.6 KB each, 65 MB for 10,000.)"""
    peaks, sizes = {}, {}
    for count in (10_000, 100_000):
        log = many_exceptions_log(tmp_path / f"{count}.log", count)
        sizes[count] = log.stat().st_size
        done, peaks[count] = traced_peak(lambda: run_cli("explain", "--db", db, "--file", log, "--format", "json"))
        document = json.loads(done.stdout)
        assert len(document["exceptions"]) == 1000 and document["omittedExceptions"] == count - 1000
        log.unlink()
    assert peaks[100_000] <= 1.25 * peaks[10_000] + 1 * MB and peaks[100_000] < 8_000 * 1000 + 4 * MB, peaks
    figures.add(
        "100,000 different exceptions in one log (the cap)",
        f"explain --format json of 10,000 and 100,000 distinct tracebacks ({sizes[10_000] / MB:.1f} and "
        f"{sizes[100_000] / MB:.1f} MB)",
        2,
        f"1,000 reported each time, the rest counted; peak traced memory {peaks[10_000] / MB:.1f} MB (10,000) vs "
        f"{peaks[100_000] / MB:.1f} MB (100,000)",
    )


# --------------------------------------------------------------------------------------------
# Terminal escape sequences in the input
# --------------------------------------------------------------------------------------------

ESCAPES = {
    "CSI colour": "\x1b[31mred\x1b[0m",
    "CSI cursor and clear": "\x1b[2J\x1b[H\x1b[10A",
    "OSC title (BEL)": "\x1b]0;pwned\x07",
    "OSC title (ST)": "\x1b]2;pwned\x1b\\",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "DCS": "\x1bP+q544e\x1b\\",
    "APC": "\x1b_hidden\x1b\\",
    "charset switch": "\x1b(0",
    "8-bit CSI": "\x9b31m",
    "8-bit OSC": "\x9d0;pwned\x9c",
    "8-bit DCS": "\x90q\x9c",
    "NEL": "\x85",
    "backspaces": "abc\x08\x08\x08",
    "carriage return": "shown\rhidden",
    "BEL and DEL": "\x07\x7f",
}
# What may reach the terminal: no ESC or C1 introducer, no other control character. In colour,
# only errordb's own SGR sequences (ESC [ digits m).
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_OWN_SGR = re.compile(r"\x1b\[[0-9;]*m")


def test_terminal_escapes_in_the_input_never_reach_the_terminal(tmp_path, db, figures):
    """Bound: none of 15 escape forms (CSI, OSC with BEL and ST, OSC 8 links, DCS, APC, charset
    switches, their 8-bit C1 forms, BS, CR, BEL, DEL) in an exception's class, message or frame
    reaches explain's output: the text output (colour off and on, where only errordb's own SGR
    colours appear), Markdown and JSON (where C0 controls are JSON-escaped and C1 ones removed by
    the parser) hold no control character; text.clean strips each form on its own too."""
    blocks = []
    for i, (name, sequence) in enumerate(ESCAPES.items()):
        blocks.append(f"ValueError: case {i} {name} [{sequence}] end\n\n")
        blocks.append(f"Bad{sequence}Error: class {i}\n\n")
    blocks.append(
        'Traceback (most recent call last):\n  File "/app/\x1b]0;t\x07a.py", line 3, in f\x1b[31mg\n'
        "KeyError: \x1b[2Jboom\x9d0;x\x9c\n\n"
    )
    blocks.append(KIMI_TB.replace("explicit", "\x1b[1mexplicit\x1b[0m"))
    log = tmp_path / "escapes.log"
    log.write_text("".join(blocks), encoding="utf-8")

    outputs = {}
    for fmt, extra in (("text", "--no-color"), ("text", "--color"), ("markdown", "--no-color"), ("json", "--no-color")):
        done = run_cli("explain", "--db", db, "--file", log, "--format", fmt, extra)
        assert done.exit_code == 0, done.stderr
        shown = _OWN_SGR.sub("", done.stdout) if extra == "--color" else done.stdout
        assert not _UNSAFE.search(shown), (fmt, extra, sorted({hex(ord(c)) for c in _UNSAFE.findall(shown)}))
        outputs[fmt, extra] = done.stdout
    text = outputs["text", "--no-color"]
    assert "● ValueError: case 0 CSI colour [red] end" in text
    assert f"● ValueError: {KIMI_MESSAGE}" in text  # the bold escape inside the message is gone: it still matches
    document = json.loads(outputs["json", "--no-color"])
    assert document["matches"][0]["id"] == KIMI_VALUE_ERROR
    for exc in document["exceptions"]:
        fields = [exc["type"] or "", exc["message"], *exc["notes"]] + [f"{f['file']} {f['function']}" for f in exc["frames"]]
        assert not _UNSAFE.search("".join(fields)), exc
    for name, sequence in ESCAPES.items():
        assert not _UNSAFE.search(safe_text.clean(f"a{sequence}b")), name
    figures.add(
        "Terminal escapes in the input (explain)",
        f"{len(ESCAPES)} escape forms (7-bit and 8-bit) in classes, messages and frames; text (colour off/on), Markdown, JSON",
        4,
        "no control character or escape sequence from the input in any output; the escaped Kimi message still matched",
    )


def test_invisible_characters_in_the_input_are_shown_not_obeyed(tmp_path, db, figures):
    """Bound: none of the bidi controls and invisible characters of INVISIBLE in an exception's
    class position, message, notes or frames reaches the text (colour off and on) or Markdown
    output as it is: each is shown as <U+XXXX>. JSON is data: it carries them exactly."""
    # Not the line and paragraph separators: the parser reads them as line ends, as str.splitlines does.
    hidden = "".join(char for name, char in INVISIBLE.items() if not name.endswith("separator"))
    log = tmp_path / "trojan.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        f'  File "/app/{hidden}a.py", line 3, in check{hidden}\n'
        f"    {TROJAN_LINE}\n"
        f"PermissionError: access [{hidden}] denied\n\n"
        f"ValueError: {TROJAN_LINE}\n\n" + KIMI_TB,
        encoding="utf-8",
    )
    outputs = {}
    for fmt, extra in (("text", "--no-color"), ("text", "--color"), ("markdown", "--no-color"), ("json", "--no-color")):
        done = run_cli("explain", "--db", db, "--file", log, "--format", fmt, extra)
        assert done.exit_code == 0, done.stderr
        outputs[fmt, extra] = done.stdout
        if fmt != "json":
            assert invisible_in(done.stdout) == [], (fmt, extra)
            shown = " ".join(re.sub(r"\\(.)", r"\1", done.stdout).split())  # escapes undone, wrapping too
            assert "access [<U+202A><U+202B><U+202C><U+202D><U+202E><U+2066>" in shown, (fmt, shown[:300])
    assert 'ValueError: if access_level != "user<U+202E> <U+2066># Check if admin<U+2069> <U+2066>":' in " ".join(outputs["text", "--no-color"].split())
    document = json.loads(outputs["json", "--no-color"])
    assert document["exceptions"][0]["message"] == f"access [{hidden}] denied"  # the data, exactly
    assert document["matches"][0]["id"] == KIMI_VALUE_ERROR
    figures.add(
        "Invisible formatting characters in the input (explain)",
        f"{len(hidden)} bidi controls and invisible characters in a message, a frame's file and function, and the "
        "Trojan Source line as a message; text (colour off/on), Markdown, JSON",
        4,
        "none reaches the text or Markdown output as it is (each shown as <U+XXXX>); JSON carries them exactly",
    )


def test_a_stray_backtick_in_a_log_does_not_stop_the_skipping(monkeypatch):
    """Bound: one GNU-style quote (``make: `all' is up to date.``) or a lone fence-like line
    in a log leaves the lines after it skippable: lines fully parsed stay few."""
    fed = []
    real_feed = driver._Parser.feed
    monkeypatch.setattr(driver._Parser, "feed", lambda self, raw: (fed.append(raw), real_feed(self, raw))[1])
    for stray in ("make: `all' is up to date.", "see the `--force` flag and `foo"):
        fed.clear()
        lines = noise(100).splitlines(True) + [stray + "\n"] + noise(20_000, 100).splitlines(True)
        assert list(parse.iter_exceptions(lines)) == []
        assert len(fed) < 500, (stray, len(fed))


# --------------------------------------------------------------------------------------------
# The fast path changes nothing
# --------------------------------------------------------------------------------------------

_REFERENCE = REPO / "tests" / "data" / "cpython-tracebacks"
_SAMPLE_TEXTS = [p.read_text(encoding="utf-8") for p in sorted((REPO / "examples").glob("*.log"))]
_SAMPLE_TEXTS += [p.read_text(encoding="utf-8") for p in sorted((REPO / "tests" / "data" / "logs").glob("*"))]
if _REFERENCE.is_dir():
    _SAMPLE_TEXTS += [p.read_text(encoding="utf-8") for p in sorted(_REFERENCE.rglob("*.txt"))]
# What people paste into issues: Markdown fences (diff ones too), quotes and code spans.
_SAMPLE_TEXTS += [tomllib.loads(p.read_text(encoding="utf-8"))["paste"] for p in sorted((REPO / "bench" / "realworld" / "cases").glob("*.toml"))]
_SAMPLE_LINES = sorted({line for text in _SAMPLE_TEXTS for line in text.split("\n")})
_TRICKY = [
    "____ test_x ____", "_a b_", "a.py:3:", "a.py:3: in f", "a.py:\u0663: in f", "x.py:12: UserWarning: w",
    "FAILED t.py::x - ValueError: v", "ERROR t.py - boom", "E   assert 1", "| Foo: g (1 sub-exception)",
    "Stack (most recent call last):", "Fatal Python error: Aborted", '"""', "Trace\x00back (most recent call last):",
    "Trace\x1b[0mback (most recent call last):", "Trace\x85back (most recent call last):", "x [repeated 3x across cluster]",
    "____ t ____ [repeated 2x across cluster]", "foo_ \u3000", "a.py:3:\t", "Error: plain", "Warning: w", "E\u00a0 x",
]
_PREFIXES = ["", "", "[2026-08-28 05:10:05 TP0] ", "[2026-08-28 05:10:05 TP1] ", "(RayWorker pid=1) ",
             "2026-08-28 05:10:05,123 ERROR ", "svc_1  | ", "  | ", "\x1b[31m"]  # fmt: skip


_NOISE_LINE = st.integers(0, 10**6).map(lambda n: noise(1, n).rstrip("\n"))


def _run_of_lines(text: str, prefix: str, start: int, count: int) -> str:
    lines = text.split("\n")
    start %= len(lines)
    return "\n".join(prefix + line for line in lines[start : start + count])


# A run of consecutive lines of a real traceback or log (a pytest section, a group, a chain ...).
_SAMPLE_RUN = st.builds(_run_of_lines, st.sampled_from(_SAMPLE_TEXTS), st.sampled_from(_PREFIXES),
                        st.integers(0, 10**4), st.integers(1, 40))  # fmt: skip


def _summary(exceptions):
    return [(e.exc_type, e.message, e.notes, [tuple(vars(f).values()) for f in e.frames], e.role, e.chain_index,
             e.group_path, list(e.ranks), e.line_no) for e in exceptions]  # fmt: skip


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    lines=st.lists(
        st.one_of(
            _NOISE_LINE, _NOISE_LINE, _NOISE_LINE,  # mostly noise, so that whole blocks are skipped
            st.tuples(st.sampled_from(_PREFIXES), st.sampled_from(_SAMPLE_LINES + _TRICKY)).map("".join),
            _SAMPLE_RUN,
        ),
        min_size=20,
        max_size=400,
    ),
    ending=st.sampled_from(["\n", "\r\n", ""]),
    chunk=st.integers(1, 300),
)
def test_the_fast_path_changes_no_result(lines, ending, chunk, figures):
    """Bound: skipping lines while nothing is open is exact. On mixtures of log noise, real
    traceback lines and lines made to fool the skip test, under log prefixes and escapes, given as
    lines or as chunks of any size, iter_exceptions yields exactly what it yields when every line
    is parsed in full."""
    raw = [line + ending for line in lines]
    text = "".join(raw)
    chunks = [text[i : i + chunk] for i in range(0, len(text), chunk)] if ending else raw
    with mock.patch.object(driver, "_RAISE_INTERNAL_ERRORS", True):
        fast = _summary(parse.iter_exceptions(chunks))
        with mock.patch.object(driver, "all_noise", lambda lines, text=None: False):
            full = _summary(parse.iter_exceptions(chunks))
    assert fast == full
    _FAST_PATH_RUNS["examples"] += 1
    _FAST_PATH_RUNS["lines"] += len(lines)
    _FAST_PATH_RUNS["exceptions"] += len(full)
    row = next((r for r in figures.rows if r.case == _FAST_PATH_CASE), None)
    if row is None:
        figures.add(_FAST_PATH_CASE, "", 0, "")
        row = figures.rows[-1]
    row.tried = (f"hypothesis: 20-400 items, mostly log noise, with runs and single lines of real tracebacks and logs and "
                 f"{len(_TRICKY)} lines made to fool the skip test, under log prefixes, given as lines or as chunks")
    row.runs = _FAST_PATH_RUNS["examples"]
    row.result = (f"same exceptions with the fast path as without it every time ({_FAST_PATH_RUNS['lines']:,} lines, "
                  f"{_FAST_PATH_RUNS['exceptions']:,} exceptions in all)")  # fmt: skip


_FAST_PATH_CASE = "Fast path (skipping noise) is exact"
_FAST_PATH_RUNS = {"examples": 0, "lines": 0, "exceptions": 0}


# For each rule of the skip test, lines whose result changes if the line holding only that
# rule's trigger is skipped (the other lines may hold triggers of their own).
_SCENARIOS = [
    "KeyboardInterrupt",  # a bare builtin name: "Interrupt"
    "SystemExit: 2",
    "StopIteration",
    "Exception: boom",
    "Warning: careful",
    "app.Oops: x\n\nThe above exception was the direct cause of the following exception:\n\napp.Boom: y",
    "app.Oops: x\n\nDuring handling of the above exception, another exception occurred:\n\napp.Boom: y",
    'Stack (most recent call last):\n  File "/app/a.py", line 1, in f\n    g()',
    '  File "/app/a.py", line 1, in f\n    g()\napp.Boom: y',
    'File "/app/a.py", line 3\n    x = = 1\n        ^\nSyntaxError: invalid syntax',
    "Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call first):\n  File \"/app/a.py\", line 1 in f",
    "Windows fatal exception: access violation\n\nCurrent thread 0x1 (most recent call first):\n  File \"a.py\", line 1 in f",
    "E   something went wrong",
    "ERROR tests/t.py - boom",
    "FAILED tests/t.py::test_x - oops",
    "____________ test_x ____________\n\n    def test_x():\n>       check()\n\nE   assert 0",
    "tests/t.py:12:\nE   assert 0",
    "tests/t.py:12: in test_x\n    check()\nE   assert 0",
    "(pid=3) ____ test_x ____ [repeated 2x across cluster]\n(pid=3) \n(pid=3) E   assert 0",
    "| MyGroup: g (1 sub-exception)\n+-+---------------- 1 ----------------\n  | Oops: member\n  +------------------------------------",
    'Trace\x85back (most recent call last):\n  File "/app/a.py", line 1, in f\n    g()\napp.Boom: y',
    'Trace\x00back (most recent call last):\n  File "/app/a.py", line 1, in f\n    g()\napp.Boom: y',
    'Trace\x1b[0mback (most recent call last):\n  File "/app/a.py", line 1, in f\n    g()\napp.Boom: y',
    'Trace\rback (most recent call last):\r \n  File "/app/a.py", line 1, in f\n    g()\napp.Boom: y',
    "╭──── Traceback (most recent call last) ────╮\n│ /app/a.py:1 in f │\n╰──────────────────────────────────────╯\napp.Boom: y",
    'multiprocessing.pool.RemoteTraceback: \n"""\nTraceback (most recent call last):\n  File "/app/w.py", line 5, in job\n'
    '    run()\napp.Boom: remote\n"""',
    # Sentry's title, then its fold line: the title is read as a line before a trigger.
    'MissingSchema: no schema\n(3 additional frame(s) were not displayed)\n...\n  File "r/models.py", line 9, in prepare_url\n    raise X',
    'MissingSchema: no schema\n\n(3 additional frame(s) were not displayed)\n  File "r/models.py", line 9, in prepare_url',
]


def test_the_fast_path_changes_no_result_on_the_sample_corpus(figures):
    """Bound: the same, deterministically, for every sample text (the examples, the test logs,
    the CPython reference corpus: plain, chained, group, pytest, rich, faulthandler, RemoteTraceback
    ... output, and the real-world corpus's pastes) and for a scenario per rule of the skip test,
    between runs of noise long enough to be skipped, plain and under a log prefix; the text
    starting in a block's middle, or as the last line of a block (read alone)."""
    after = noise(70, 200).splitlines(True)
    runs = exceptions = 0
    cases = itertools.product(_SAMPLE_TEXTS + _SCENARIOS, ("", "[2026-08-28 05:10:05 TP3] "), (70, 2 * BLOCK_LINES - 1))
    with mock.patch.object(driver, "_RAISE_INTERNAL_ERRORS", True):
        for text, prefix, before in cases:
            lines = noise(before).splitlines(True) + [prefix + line + "\n" for line in text.split("\n")] + after
            fast = _summary(parse.iter_exceptions(lines))
            with mock.patch.object(driver, "all_noise", lambda lines, text=None: False):
                full = _summary(parse.iter_exceptions(lines))
            assert fast == full, (prefix, before, text[:200])
            runs += 1
            exceptions += len(full)
    figures.add(
        "Fast path is exact on the sample corpus",
        f"{len(_SAMPLE_TEXTS)} sample texts (examples, test logs, CPython reference output, real-world pastes) and {len(_SCENARIOS)} scenarios, "
        "one per rule of the skip test, after 70 or 127 noise lines (in a block's middle, or a block's last line) and before 70, plain and prefixed",
        runs,
        f"same {exceptions:,} exceptions with the fast path as without it",
    )
