"""Tests of the reference reproductions (errordb/repro/, records/repros/).

The real DSPARK reproduction runs once per session (two child processes,
~0.3 s); the sandbox behaviour (hang, crash, isolation) is shown on small
synthetic records whose definitions live in this (reviewed) test file.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ALL_IDS, envelope
from hypothesis import given, settings, strategies as st

from errordb import repro as R
from errordb.records.snippet import snippet_language, split_example_fix

REPO = Path(__file__).resolve().parent.parent
KIMI_VALUE = "b318b4f842689251"
KIMI_PP = "ce31b31dd9a787ba"
BAILING = "3083cb312003fdcc"
VALUE_MESSAGE = "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
PP_MESSAGE = "NotImplementedError: DSPARK aux hidden capture requires PP=1."


@pytest.fixture(scope="session")
def records():
    return {record_id: envelope(record_id)["record"] for record_id in ALL_IDS}


@pytest.fixture(scope="session")
def dspark():
    repro = R.reproduction_for(KIMI_VALUE)
    assert repro is not None
    return repro


@pytest.fixture(scope="session")
def report(dspark, records):
    return R.run_reproduction(dspark, records)


# ---------------------------------------------------------------------------
# the pinned behaviour (found by running; a change here is a behaviour change)
# ---------------------------------------------------------------------------

KIMI_ON = "returns; capture ON: capture_aux_hidden_states=True, model.dspark_layers_to_capture="
BAILING_ON = ("returns; capture ON: capture_aux_hidden_states=True, "
              "model.capture_aux_hidden_states=True, model.layers_to_capture=")
OFF = "returns silently; capture stays OFF (nothing set)"

EXPECTED_TABLE = [
    ["scenario", "Kimi K3", "Bailing MoE v3"],
    ["layer_ids=None, PP=1 (last rank)",
     VALUE_MESSAGE + " (kimi_k3.py:2892)", VALUE_MESSAGE + " (bailing_moe_v3.py:1665)"],
    ["PP=2, rank 0 (not last), explicit layer ids", PP_MESSAGE + " (kimi_k3.py:2888)", OFF],
    ["PP=2, rank 1 (last), explicit layer ids",
     PP_MESSAGE + " (kimi_k3.py:2888)", BAILING_ON + "[5, 11, 17, 23]"],
    ["PP=2, rank 0 (not last), layer_ids=None", PP_MESSAGE + " (kimi_k3.py:2888)", OFF],
    ['exampleFix "after" call, PP=1 (last rank)', KIMI_ON + "[0, 1, 2]", BAILING_ON + "[5, 11, 17, 23]"],
    ["layer_ids=[] (empty list), PP=1", KIMI_ON + "[]", BAILING_ON + "[]"],
    ["layer_ids=[0, 24] with num_hidden_layers=24, PP=1", KIMI_ON + "[0, 24]", BAILING_ON + "[0, 24]"],
    ["layer_ids=[-1], PP=1", KIMI_ON + "[-1]", BAILING_ON + "[-1]"],
    ["layer_ids=(0, 1, 2) (tuple), PP=1", KIMI_ON + "[0, 1, 2]", BAILING_ON + "[0, 1, 2]"],
]

# (scenario, subject) -> {advice key: verdict}; "b318.vc" = b318... validationCode
A = {"kv": f"{KIMI_VALUE}.validationCode", "kt": f"{KIMI_VALUE}.typeGuard",
     "pv": f"{KIMI_PP}.validationCode", "bv": f"{BAILING}.validationCode"}
EXPECTED_ADVICE = {
    "none-pp1-last":  ({"kv": "reject", "kt": "reject", "pv": "accept"}, {"bv": "reject"}),
    "pp2-rank0":      ({"kv": "accept", "kt": "accept", "pv": "reject"}, {"bv": "accept"}),
    "pp2-rank1":      ({"kv": "accept", "kt": "accept", "pv": "reject"}, {"bv": "accept"}),
    "pp2-rank0-none": ({"kv": "reject", "kt": "reject", "pv": "reject"}, {"bv": "reject"}),
    "example-fix":    ({"kv": "accept", "kt": "accept", "pv": "accept"}, {"bv": "accept"}),
    "empty-list":     ({"kv": "reject", "kt": "accept", "pv": "accept"}, {"bv": "reject"}),
    "id-past-end":    ({"kv": "reject", "kt": "reject", "pv": "accept"}, {"bv": "accept"}),
    "negative-id":    ({"kv": "reject", "kt": "reject", "pv": "accept"}, {"bv": "accept"}),
    "tuple":          ({"kv": "accept", "kt": "accept", "pv": "accept"}, {"bv": "accept"}),
}

# Where a record's advice judges an input differently from the guard, on the
# advice's own concern: (scenario, subject, advice key, advice says, guard does)
EXPECTED_DISAGREEMENTS = {
    ("pp2-rank0", "bailing_moe_v3", A["bv"], "accept", "skip"),
    ("pp2-rank0-none", "bailing_moe_v3", A["bv"], "reject", "skip"),
    ("empty-list", "kimi_k3", A["kv"], "reject", "accept"),
    ("empty-list", "bailing_moe_v3", A["bv"], "reject", "accept"),
    ("id-past-end", "kimi_k3", A["kv"], "reject", "accept"),
    ("id-past-end", "kimi_k3", A["kt"], "reject", "accept"),
    ("negative-id", "kimi_k3", A["kv"], "reject", "accept"),
    ("negative-id", "kimi_k3", A["kt"], "reject", "accept"),
}


def test_every_scenario_behaves_as_recorded(report):
    failures = {(s.id, run.subject): run.problems for s in report.scenarios for run in s.runs if not run.ok}
    assert failures == {}
    assert report.ok
    assert len(report.runs) == 18


def test_side_by_side_table(report):
    assert R.side_by_side(report) == EXPECTED_TABLE


def test_advice_verdicts(report):
    for scenario in report.scenarios:
        kimi, bailing = EXPECTED_ADVICE[scenario.id]
        for run, expected in zip(scenario.runs, (kimi, bailing)):
            observed = {a.key: a.verdict for a in run.advice}
            assert observed == {A[k]: v for k, v in expected.items()}, (scenario.id, run.subject)


def test_disagreements_with_the_guard(report):
    own = {(d.scenario, d.subject, f"{d.record}.{d.field}", d.advice, d.guard)
           for d in report.disagreements if d.own_error}
    assert own == EXPECTED_DISAGREEMENTS
    # The others are advice for one record's error meeting another record's
    # error on Kimi K3 (e.g. the PP-only validationCode and layer_ids=None).
    others = {(d.scenario, d.record) for d in report.disagreements if not d.own_error}
    assert others == {("none-pp1-last", KIMI_PP), ("pp2-rank0", KIMI_VALUE), ("pp2-rank1", KIMI_VALUE)}


def test_reproduced_errors_match_their_records(report, records):
    """Message against messagePattern, raising line against lineNumber, and the
    traceback frame exactly as the real one would print it."""
    raised = 0
    for run in report.runs:
        record_id = run.expected["raises"]
        if record_id is None:
            assert run.outcome == "returned"
            continue
        raised += 1
        record = records[record_id]
        assert run.outcome == "raised"
        assert run.exception["name"] == record["errorClass"]
        assert re.search(record["messagePattern"], run.exception["message"])
        frame = run.exception["raisingFrame"]
        assert frame["line"] == record["lineNumber"]
        assert frame["file"].endswith("/" + record["filePath"])
        expected_frame = (f'  File "/opt/sglang/{record["filePath"]}", line {record["lineNumber"]}, '
                          f"in set_dspark_layers_to_capture\n    raise ")
        assert expected_frame in run.traceback
        assert run.traceback.endswith(f"{record['errorClass']}: {record['errorMessage']}\n")
    assert raised == 5


def test_full_traceback_text(report):
    run = next(r for r in report.scenarios[0].runs if r.subject == "kimi_k3")
    assert run.traceback == textwrap.dedent("""\
        Traceback (most recent call last):
          File "<repro dspark_capture_guard:none-pp1-last>", line 1, in <module>
            model.set_dspark_layers_to_capture(None)
          File "/opt/sglang/python/sglang/srt/models/kimi_k3.py", line 2892, in set_dspark_layers_to_capture
            raise ValueError(
        ValueError: DSPARK requires explicit layer_ids for aux hidden capture.
        """)


def test_example_fix_calls_are_run_verbatim(report, records):
    by_key = {(s.id, run.subject): run for s in report.scenarios for run in s.runs}
    assert by_key[("example-fix", "kimi_k3")].code == "model.set_dspark_layers_to_capture([0, 1, 2])"
    assert by_key[("example-fix", "bailing_moe_v3")].code == \
        "model.set_dspark_layers_to_capture(layer_ids=[5, 11, 17, 23])"
    for record_id, subject in ((KIMI_VALUE, "kimi_k3"), (BAILING, "bailing_moe_v3")):
        fix = split_example_fix(records[record_id]["exampleFix"])
        assert by_key[("none-pp1-last", subject)].code == fix["before"]
        assert by_key[("example-fix", subject)].code == fix["after"]


def test_guards_are_the_stored_functions(report, records):
    kimi, bailing = report.guards
    assert (kimi.first_line, kimi.last_line, kimi.same_in) == (2884, 2896, [KIMI_PP])
    assert (bailing.first_line, bailing.last_line) == (1652, 1670)
    for guard in report.guards:
        record = records[guard.record]
        offset = guard.first_line - record["sourceCodeStart"]
        stored = record["sourceCode"].splitlines()[offset:offset + guard.code.count("\n") + 1]
        assert guard.code == "\n".join(stored)  # byte for byte, not a rewrite


def test_snippet_checks(report):
    verdicts = {(c.record, c.field, c.part): (c.language, c.verdict) for c in report.snippet_checks}
    assert verdicts == {
        (KIMI_VALUE, "exampleFix", "before"): ("python", "ok"),
        (KIMI_VALUE, "exampleFix", "after"): ("python", "ok"),
        (KIMI_VALUE, "validationCode", ""): ("python", "ok"),
        (KIMI_VALUE, "typeGuard", ""): ("python", "ok"),
        (KIMI_PP, "exampleFix", "before"): ("shell", "not executed"),
        (KIMI_PP, "exampleFix", "after"): ("shell", "not executed"),
        (KIMI_PP, "validationCode", ""): ("python", "ok"),
        (KIMI_PP, "typeGuard", ""): ("empty", "absent"),
        (BAILING, "exampleFix", "before"): ("python", "ok"),
        (BAILING, "exampleFix", "after"): ("python", "ok"),
        (BAILING, "validationCode", ""): ("python", "ok"),
        (BAILING, "typeGuard", ""): ("empty", "absent"),
    }
    assert not any(c.executed for c in report.snippet_checks if c.language == "shell")


# ---------------------------------------------------------------------------
# transcripts, views
# ---------------------------------------------------------------------------


def test_committed_transcript_is_current(report, records):
    path = R.transcript_path("dspark_capture_guard")
    assert path.read_text(encoding="utf-8") == R.transcript_text(report), \
        "stale transcript: run `errordb repro --write-transcripts`"
    for record_id in (KIMI_VALUE, KIMI_PP, BAILING):
        transcript = R.load_transcript(record_id)
        assert transcript is not None and transcript["reproduction"] == "dspark_capture_guard"
        assert R.transcript_is_current(transcript, records[record_id])
    changed = dict(records[BAILING], lineNumber=1666)
    assert not R.transcript_is_current(R.load_transcript(BAILING), changed)


def test_transcript_is_deterministic(dspark, records, report):
    again = R.run_reproduction(dspark, records)
    text = R.transcript_text(again)
    assert text == R.transcript_text(report)
    for machine_specific in (str(REPO), sys.prefix, "/tmp/", "errordb-repro-"):
        assert machine_specific not in text


def test_renderers_work_from_the_transcript_alone(report):
    transcript = R.load_transcript(BAILING)
    # all but where it ran, which is this machine's and no part of a transcript
    assert f"\nran in: {report.isolation}\n" in R.render_text(report)
    assert R.render_text(transcript) == R.render_text(report).replace(f"ran in: {report.isolation}\n", "")
    assert R.side_by_side(transcript) == EXPECTED_TABLE
    text = R.render_text(report)
    assert "OK: 18/18 scenario runs as recorded" in text
    assert "\033[" not in text and "\033[" in R.render_text(report, color=True)
    assert json.loads(json.dumps({k: v for k, v in report.to_dict().items() if k != "isolation"})) == transcript


def test_matcher_hook(dspark, records):
    def matcher(traceback_text):  # a toy matcher: frame path + message pattern
        hits = []
        for record_id, record in records.items():
            frame = f'{record["filePath"]}", line {record["lineNumber"]},'
            if frame in traceback_text and re.search(record["messagePattern"], traceback_text):
                hits.append(record_id)
        return hits

    report = R.run_reproduction(dspark, records, matcher=matcher)
    for run in report.runs:
        if run.traceback:
            assert run.identified == [run.expected["raises"]]
        else:
            assert run.identified is None
    assert "matcher identifies: b318b4f842689251" in R.render_text(report)


def test_broken_matcher_does_not_lose_the_report(tmp_path):
    repro, records = _probe_reproduction(tmp_path, ["raise"])

    def matcher(traceback_text):
        raise RuntimeError("no parser yet")

    (run,) = R.run_reproduction(repro, records, matcher=matcher).runs
    assert run.ok and run.identified is None and run.identify_error == "RuntimeError: no parser yet"


# ---------------------------------------------------------------------------
# static analysis: extraction and snippet classification
# ---------------------------------------------------------------------------


def test_extraction_for_every_line_of_the_method(records):
    record = records[KIMI_VALUE]
    source, start = record["sourceCode"], record["sourceCodeStart"]
    for line in range(2885, 2897):  # the body of set_dspark_layers_to_capture
        found = R.extract_enclosing_function(source, start, line)
        assert (found.name, found.first_line, found.last_line) == ("set_dspark_layers_to_capture", 2884, 2896)
    assert R.extract_enclosing_function(source, start, 2882).name == "get_input_embeddings"
    with pytest.raises(R.ExtractionError):  # __init__'s def is above the window
        R.extract_enclosing_function(source, start, 2879)
    with pytest.raises(R.ExtractionError):  # forward() is cut off by the window
        R.extract_enclosing_function(source, start, 2905)
    with pytest.raises(R.ExtractionError):
        R.extract_enclosing_function(source, start, 3000)


def test_extraction_decorators_nesting_and_padding():
    source = textwrap.dedent('''\
        x = (
            1)
        class A:
            @staticmethod
            @other(
                2)
            def f(a):
                def g():
                    return """
        not code
        """
                return g
            y = 1
        ''')
    outer = R.extract_enclosing_function(source, 10, 21)  # `return g`
    assert (outer.name, outer.first_line, outer.def_line, outer.last_line) == ("f", 13, 16, 21)
    inner = R.extract_enclosing_function(source, 10, 19)  # string content at column 0
    assert (inner.name, inner.first_line, inner.last_line) == ("g", 17, 20)
    with pytest.raises(R.ExtractionError):  # `y = 1` is in no function
        R.extract_enclosing_function(source, 10, 22)
    with pytest.raises(R.ExtractionError):  # f() runs to the end of this window
        R.extract_enclosing_function(source.rsplit("    y = 1", 1)[0], 10, 21)
    with pytest.raises(R.ExtractionError):  # decorators could be above this window
        R.extract_enclosing_function(source.split("\n", 6)[6], 16, 21)
    # The padded source keeps the stored text and the real line numbers.
    padded = inner.padded_source()
    assert inner.text in padded
    tree = ast.parse(padded)
    assert tree.body[0].body[0].lineno == 17


@pytest.mark.parametrize("text, language", [
    ("model.set_dspark_layers_to_capture([0, 1, 2])", "python"),
    ("assert x is not None\nassert len(x) > 0", "python"),
    ("python -m sglang.launch_server --model kimi-k3 --pp 2 --speculative-algorithm DSPARK ...", "shell"),
    ("CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc-per-node 2 train.py", "shell"),
    ("$ pip install -U sglang", "shell"),
    ("pip install 'sglang[all]'", "shell"),
    ("python -m sglang.launch_server \\\n    --model x \\\n    --pp 1", "shell"),
    ("# comment\nexport SGLANG_X=1\nsglang serve --tp 8", "shell"),
    ('print "hello"', "invalid"),
    ("def f(:\n  pass", "invalid"),
    ("python -m x --pp 1\nmodel.f(None)", "invalid"),
    ("", "empty"),
    ("# before\n\n", "empty"),
    (None, "empty"),
])
def test_snippet_language(text, language):
    assert snippet_language(text) == language


def test_split_example_fix():
    assert split_example_fix("# before\nf(None)\n\n# After:\nf([1])\n") == {"before": "f(None)", "after": "f([1])"}
    assert split_example_fix("f([1])") == {"": "f([1])"}
    assert split_example_fix(None) == {}


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_static_analysis_never_fails_on_junk(text):
    assert snippet_language(text) in {"python", "shell", "empty", "invalid"}
    split_example_fix(text)
    try:
        R.extract_enclosing_function(text, 1, 1)
    except R.ExtractionError:
        pass


# ---------------------------------------------------------------------------
# nothing unreviewed is executed
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(p.name for p in (REPO / "errordb" / "repro").glob("*.py")
                                           if p.name != "child.py"))
def test_parent_modules_never_execute_code(module):
    """exec/eval/compile of snippet text happen only in the child script."""
    tree = ast.parse((REPO / "errordb" / "repro" / module).read_text(encoding="utf-8"))
    forbidden = {"exec", "eval", "compile", "__import__", "execfile"}
    called = {node.func.id for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert not called & forbidden
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names} | {node.module for node in ast.walk(tree)
                                            if isinstance(node, ast.ImportFrom)}
    assert not imported & {"importlib", "runpy", "code", "pickle", "marshal"}


def _no_processes(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a child process was started")
    monkeypatch.setattr(subprocess, "Popen", refuse)


MALICIOUS = textwrap.dedent('''\
    open(MARKER, "w").write("module level ran")
    class Evil:
        def set_dspark_layers_to_capture(self, layer_ids):
            open(MARKER, "w").write("method ran")
            raise ValueError("DSPARK requires explicit layer_ids for aux hidden capture.")
    open(MARKER, "w").write("module level ran")
    ''')


def test_ingested_record_without_reviewed_reproduction_is_never_executed(tmp_path, monkeypatch):
    marker = tmp_path / "executed"
    record = {"id": "0123456789abcdef", "slug": "evil", "repo": "evil/evil", "filePath": "evil.py",
              "sourceCode": MALICIOUS.replace("MARKER", repr(str(marker))), "sourceCodeStart": 1,
              "sourceCodeEnd": 6, "lineNumber": 5, "errorClass": "ValueError",
              "messagePattern": "DSPARK", "exampleFix": "# before\nmodel.set_dspark_layers_to_capture(None)",
              "validationCode": f"open({str(marker)!r}, 'w')", "typeGuard": None}
    _no_processes(monkeypatch)

    assert R.reproduction_for("0123456789abcdef") is None
    assert R.reproduction_for("evil") is None
    assert R.load_transcript("0123456789abcdef") is None
    # Everything the renderers and ingest may call on a record is static.
    R.extract_enclosing_function(record["sourceCode"], 1, 5).padded_source()
    for part in split_example_fix(record["exampleFix"]).values():
        snippet_language(part)
    snippet_language(record["validationCode"])
    R.record_digest(record)
    assert not marker.exists()


def test_changed_record_is_refused_before_anything_runs(dspark, records, tmp_path, monkeypatch):
    marker = tmp_path / "executed"
    tampered = copy.deepcopy(dict(records))
    tampered[KIMI_VALUE]["sourceCode"] = tampered[KIMI_VALUE]["sourceCode"].replace(
        "if layer_ids is None:", f"open({str(marker)!r}, 'w')\n        if layer_ids is None:")
    _no_processes(monkeypatch)
    with pytest.raises(R.ReviewMismatch, match=KIMI_VALUE):
        R.run_reproduction(dspark, tampered)
    missing = {k: v for k, v in records.items() if k != BAILING}
    with pytest.raises(R.ReviewMismatch, match=BAILING):
        R.run_reproduction(dspark, missing)
    assert not marker.exists()


# ---------------------------------------------------------------------------
# the sandbox: hang, crash, isolation (synthetic, reviewed-here definitions)
# ---------------------------------------------------------------------------

PROBE_SOURCE = textwrap.dedent('''\
    import os
    class Probe:
        def poke(self, mode):
            if mode == "hang":
                while True:
                    pass
            if mode == "exit":
                os._exit(3)
            if mode == "segv":
                import signal
                os.kill(os.getpid(), signal.SIGSEGV)
            if mode == "print":
                print('{"key": "print", "outcome": "returned", "state": {}}', flush=True)
            if mode == "env":
                import sys
                self.isolated = sys.flags.isolated
                self.no_site = sys.flags.no_site
                self.env = sorted(os.environ)
                self.cwd_empty = os.listdir(".") == []
                self.repo_visible = any(REPO in p for p in sys.path)
                try:
                    import errordb
                    self.errordb = "importable"
                except ImportError:
                    self.errordb = "not importable"
                try:
                    with open(TARGET, "w") as handle:
                        handle.write("x" * 10)
                    self.write = "written"
                except OSError as exc:
                    self.write = type(exc).__name__
                return
            raise ValueError("poked " + mode)
        other = 1
    ''')


# The real line of the probe's `raise` when its window starts at line 100.
PROBE_RAISE_LINE = 100 + next(i for i, line in enumerate(PROBE_SOURCE.splitlines())
                              if line.strip().startswith("raise ValueError"))


def _probe_reproduction(tmp_path, scenarios, timeout=10):
    """A reviewed (by this test file) definition over a synthetic record."""
    record = {"id": "feedfacefeedface", "repo": "acme/probe", "filePath": "src/probe.py",
              "sourceCode": PROBE_SOURCE.replace("REPO", repr(str(REPO)))
                                         .replace("TARGET", repr(str(tmp_path / "written.txt"))),
              "sourceCodeStart": 100, "lineNumber": PROBE_RAISE_LINE, "errorClass": "ValueError",
              "messagePattern": r"poked \w+", "exampleFix": None, "validationCode": None,
              "typeGuard": None}
    record["sourceCodeEnd"] = 100 + record["sourceCode"].count("\n") - 1
    body = "\n".join(f'[[scenarios]]\nid = "{mode}"\ntitle = "{mode}"\ncall = \'model.poke("{mode}")\'\n'
                     f'[scenarios.probe]\nexpect = {{ raises = "feedfacefeedface" }}\n' for mode in scenarios)
    directory = tmp_path / "repros"
    directory.mkdir()
    (directory / "probe.toml").write_text(textwrap.dedent(f'''\
        id = "probe"
        title = "sandbox probe"
        timeout_seconds = {timeout}
        enabled_when = "isolated"
        [reviewed]
        feedfacefeedface = "{R.record_digest(record)}"
        [[subjects]]
        id = "probe"
        label = "Probe"
        records = ["feedfacefeedface"]
        prelude = "import os"  # the module-level import, outside the function
        ''') + body)
    (repro,) = R.load_reproductions(directory)
    return repro, {record["id"]: record}


def _outcomes(report):
    return {scenario.id: scenario.runs[0] for scenario in report.scenarios}


def test_hang_and_crash_are_reported_and_do_not_hide_other_scenarios(tmp_path):
    repro, records = _probe_reproduction(tmp_path, ["raise", "hang", "exit", "segv", "again"], timeout=1.5)
    report = R.run_reproduction(repro, records, unsafe=True)
    runs = _outcomes(report)
    assert not report.ok
    text = R.render_text(report)
    assert "HANG: killed after 1.5 s" in text and "CRASH: killed by SIGSEGV" in text
    json.dumps(report.to_dict())
    assert runs["raise"].ok and runs["raise"].exception["message"] == "poked raise"
    assert runs["raise"].exception["raisingFrame"] == {"file": "/opt/probe/src/probe.py", "line": PROBE_RAISE_LINE,
                                                      "function": "poke"}
    assert runs["hang"].outcome == "hang" and "killed after 1.5 s" in runs["hang"].summary
    assert runs["exit"].outcome == "crash" and "exit status 3" in runs["exit"].summary
    assert runs["segv"].outcome == "crash" and "SIGSEGV" in runs["segv"].summary
    assert runs["again"].ok  # ran in a fresh child after the crashes
    assert not any(runs[k].ok for k in ("hang", "exit", "segv"))


def test_child_is_isolated_and_its_output_cannot_forge_results(tmp_path):
    repro, records = _probe_reproduction(tmp_path, ["env", "print"])
    runs = _outcomes(R.run_reproduction(repro, records, unsafe=True))
    state = runs["env"].state
    assert state["isolated"] == "1" and state["no_site"] == "1"
    assert set(ast.literal_eval(state["env"])) <= {"PATH", "LC_ALL", "LC_CTYPE"}
    assert state["cwd_empty"] == "True"
    assert state["repo_visible"] == "False"
    assert state["errordb"] == "'not importable'"
    if sys.platform.startswith("linux"):
        # The sandbox shows no folder of this machine; without it, RLIMIT_FSIZE = 0 writes nothing.
        from errordb.repro.sandbox import sandbox_problem

        assert state["write"] == ("'OSError'" if sandbox_problem() else "'FileNotFoundError'")
        target = tmp_path / "written.txt"
        assert not target.exists() or target.read_text() == ""
    # The snippet printed a fake result line; the real result is still there.
    assert runs["print"].outcome == "raised" and runs["print"].exception["message"] == "poked print"


def test_malformed_definition_is_rejected(tmp_path):
    (tmp_path / "bad.toml").write_text('id = "bad"\ntitle = "x"\n[reviewed]\nabc = "sha256:0"\n'
                                       '[[subjects]]\nid = "s"\nlabel = "S"\nrecords = []\n'
                                       '[[scenarios]]\nid = "x"\ntitle = "x"\n')
    with pytest.raises(R.DefinitionError):
        R.load_reproductions(tmp_path)
    (tmp_path / "bad.toml").write_text("not = [toml")
    with pytest.raises(R.DefinitionError):
        R.load_reproductions(tmp_path)


@pytest.mark.parametrize("pp, expected", [("", (1, 0)), ("pp = { world_size = 4 }", (4, 3)), ("pp = { world_size = 4, rank = 1 }", (4, 1)),
                                          ("pp = { world_size = 2, rank = 2 }", None), ("pp = { world_size = 0 }", None),
                                          ('pp = { world_size = "2" }', None), ("pp = { world_size = 2, ranks = 1 }", None),
                                          ("pp = 2", None)])  # fmt: skip
def test_a_scenarios_pipeline_setup_is_read_whole(tmp_path, pp, expected):
    """The run, its transcript and its page all read the rank the file gives, else the last one."""
    text = (REPO / "records" / "repros" / "dspark_capture_guard.toml").read_text(encoding="utf-8")
    assert text.count("pp = { world_size = 1, rank = 0 }\n") >= 1
    text = text.replace('id = "dspark_capture_guard"', 'id = "pp_setup"', 1)  # not the reviewed definition
    (tmp_path / "d.toml").write_text(text.replace("pp = { world_size = 1, rank = 0 }\n", pp + "\n", 1), encoding="utf-8")
    if expected is None:
        with pytest.raises(R.DefinitionError, match="pp must be"):
            R.load_reproductions(tmp_path)
    else:
        (reproduction,) = R.load_reproductions(tmp_path)
        changed = next(s for s in reproduction.scenarios if s.id == "none-pp1-last")
        assert changed.pp == dict(zip(("world_size", "rank"), expected))
