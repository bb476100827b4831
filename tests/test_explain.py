"""`errordb explain` end to end: real-looking sglang tracebacks and logs, the CLI, the Python API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, REPO

pytest.importorskip("errordb.explainer.parse")

import errordb  # noqa: E402
from errordb.cli import cli  # noqa: E402
from errordb.explainer.result import ExplainOut, explain_json_schema  # noqa: E402
from errordb.store import ingest  # noqa: E402

DATA = REPO / "examples"
MESSAGE = "DSPARK requires explicit layer_ids for aux hidden capture."


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["explain", *args], input=input)


def as_json(*args: str, input: str | None = None) -> dict:
    result = run(*args, "--format", "json", input=input)
    document = json.loads(result.stdout)
    ExplainOut.model_validate(document)
    return document | {"_exit": result.exit_code}


def top_ids(document: dict) -> list[str]:
    return [m["id"] for m in document["matches"]]


def test_kimi_k3_traceback_from_a_scheduler_log_names_the_kimi_record():
    document = as_json("--file", str(DATA / "kimi_k3_layer_ids.log"))
    assert document["_exit"] == 0
    assert top_ids(document) == [KIMI_VALUE_ERROR, BAILING_VALUE_ERROR]
    best = document["matches"][0]
    assert best["tie"] is False
    assert {e["kind"] for e in best["evidence"]} >= {"message-full", "class-agrees", "frame-file", "frame-function", "frame-line"}
    frames = document["exceptions"][0]["frames"]
    assert frames[-1] == {
        "file": "/usr/local/lib/python3.12/dist-packages/sglang/srt/models/kimi_k3.py",
        "line": 2892,
        "function": "set_dspark_layers_to_capture",
    }


def test_bailing_traceback_with_shifted_lines_names_the_bailing_record():
    document = as_json("--file", str(DATA / "bailing_layer_ids.log"))
    assert top_ids(document)[0] == BAILING_VALUE_ERROR
    line_evidence = [e for e in document["matches"][0]["evidence"] if e["kind"] == "frame-line"][0]
    assert "6 lines from the record's 1665" in line_evidence["detail"]


def test_bare_message_shows_both_records_as_equally_likely_and_what_tells_them_apart():
    document = as_json(MESSAGE)
    assert set(top_ids(document)) == {KIMI_VALUE_ERROR, BAILING_VALUE_ERROR}
    assert all(m["tie"] for m in document["matches"])
    tell = document["exceptions"][0]["tellApart"]
    assert "kimi_k3.py:2892" in tell and "bailing_moe_v3.py:1665" in tell and "paste the whole traceback" in tell
    text = run(MESSAGE, "--no-color").stdout
    assert "Equally likely: 2 records" in text
    assert "python/sglang/srt/models/kimi_k3.py:2892" in text and "python/sglang/srt/models/bailing_moe_v3.py:1665" in text


def test_bare_class_and_message_line():
    document = as_json(f"ValueError: {MESSAGE}")
    assert document["exceptions"][0]["type"] == "ValueError"
    assert {m["score"] for m in document["matches"]} == {132.5}


def test_chain_matches_every_exception_and_names_the_root_cause():
    document = as_json("--file", str(DATA / "kimi_k3_pp.log"))
    first, second = document["exceptions"]
    assert (first["type"], first["role"], first["rootCause"]) == ("NotImplementedError", "root", True)
    # raised from the first ("The above exception was the direct cause of the following exception")
    assert (second["type"], second["role"], second["rootCause"]) == ("RuntimeError", "raised-from", False)
    lone = as_json("ValueError: DSPARK requires explicit layer_ids for aux hidden capture.")["exceptions"]
    assert [(e["role"], e["rootCause"]) for e in lone] == [("root", True)]  # a lone exception is its own root cause
    assert [m["id"] for m in first["matches"]] == [KIMI_PP_ERROR]
    assert second["matches"] == []
    assert top_ids(document) == [KIMI_PP_ERROR]
    text = run("--file", str(DATA / "kimi_k3_pp.log"), "--no-color").stdout
    assert "root cause" in text


def test_eight_ranks_interleaved_are_one_finding_with_the_ranks_listed():
    document = as_json("--file", str(DATA / "kimi_k3_eight_ranks.log"))
    assert len(document["exceptions"]) == 1
    assert document["exceptions"][0]["ranks"] == [f"TP{i}" for i in range(8)]
    assert top_ids(document)[0] == KIMI_VALUE_ERROR


def test_standard_input_is_read_with_a_dash():
    text = (DATA / "bailing_layer_ids.log").read_text()
    assert top_ids(as_json("-", input=text))[0] == BAILING_VALUE_ERROR


def test_nothing_matched_exits_1_and_offers_similar_records():
    result = run("ValueError: DSPARK capture layers are not configured for this model", "--no-color")
    assert result.exit_code == 1
    said = " ".join(result.stdout.split())
    assert "No known error matches this message: searched 3 records (dataset 2026-08-28T06:17:29.519Z); nothing learned yet: `errordb learn` reads" in said
    assert "Similar, not the same:" in result.stdout
    similar = result.stdout.split("Similar, not the same:\n", 1)[1].rstrip("\n").split("\n")
    assert similar and all(line.startswith("  - ") for line in similar)  # one line a record, none blank
    document = as_json("KeyError: 'completely unrelated'")
    assert document["_exit"] == 1 and document["matches"] == [] and document["similar"] == []


def test_a_similar_record_of_several_lines_is_shown_on_one_cut_line(tmp_path):
    from helpers import copy_records, envelope, write_envelope

    records = copy_records(tmp_path / "records")
    data = envelope(KIMI_PP_ERROR)
    message = "Zymurgic flux capacitor overloaded during capture.\nPossible solutions: lower the flux."
    data["record"].update(id="0" * 15 + "1", slug="zymurgic-flux-capacitor-overloaded-000001", errorMessage=message,
                          messagePattern=r"Zymurgic flux capacitor overloaded during capture\.\nPossible solutions: .*")  # fmt: skip
    write_envelope(records, data)
    db = tmp_path / "e.db"
    ingest([records], db)
    result = run("ValueError: zymurgic flux capacitor gone", "--no-color", "--db", str(db))
    similar = result.stdout.split("Similar, not the same:\n", 1)[1].rstrip("\n").split("\n")
    assert "  - zymurgic-flux-capacitor-overloaded-000001: Zymurgic flux capacitor overloaded during capture. …" in similar
    assert not any("Possible solutions" in line for line in similar)


def test_the_default_store_is_known_through_a_relative_or_linked_cache_folder(tmp_path, monkeypatch):
    from errordb.store import open_connection
    from errordb.store.default import is_default_store

    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    for cache in ("linked", "real", str(tmp_path / "linked")):
        monkeypatch.setenv("ERRORDB_CACHE", cache)
        conn = open_connection(None)
        assert is_default_store(conn), cache
        conn.close()
    db = tmp_path / "mine.db"
    ingest(None, db)
    conn = open_connection(db)
    assert not is_default_store(conn)
    conn.close()


def test_a_store_named_with_db_is_not_said_to_lack_learned_drafts(tmp_path):
    # errordb learn adds to the store errordb chooses; a store the user names never gets them.
    db = tmp_path / "mine.db"
    ingest(None, db)
    result = run("ValueError: DSPARK capture layers are not configured for this model", "--no-color", "--db", str(db))
    said = " ".join(result.stdout.split())
    assert result.exit_code == 1 and "searched 3 records (dataset 2026-08-28T06:17:29.519Z)." in said
    assert "learn" not in said


def test_no_exception_in_the_input_is_said_plainly():
    result = run("all good here\nserver started on port 30000\nready\nshutting down")
    assert result.exit_code == 1
    assert result.stdout.startswith("No exception found in the input")


def test_bad_usage_and_unreadable_input_exit_2(tmp_path):
    assert run().exit_code == 2
    assert run(MESSAGE, "--file", str(DATA / "kimi_k3_pp.log")).exit_code == 2
    missing = run("--file", str(tmp_path / "nope.log"))
    assert missing.exit_code == 2 and "nope.log" in missing.stderr


def test_terminal_output_has_every_section_and_colour_only_when_asked():
    plain = run("--file", str(DATA / "kimi_k3_layer_ids.log"), "--no-color").stdout
    for section in ("What it means", "Thrown at python/sglang/srt/models/kimi_k3.py:2892 in set_dspark_layers_to_capture",
                    "Solutions", "Example fix", "Validation", "Type guard", "When it happens", "Prevention", "Reproduction",
                    f"Show it: errordb show {KIMI_VALUE_ERROR}"):  # fmt: skip  (no site URL: the command that shows it)
        assert section in plain, section
    assert "  > 2892 |             raise ValueError(" in plain
    assert "\x1b[" not in plain
    assert "\x1b[" in run("--file", str(DATA / "kimi_k3_layer_ids.log"), "--color").stdout


def test_markdown_output_for_a_github_issue():
    text = run("--file", str(DATA / "kimi_k3_layer_ids.log"), "--format", "markdown").stdout
    assert text.startswith("### ValueError: DSPARK requires explicit layer_ids")
    assert "`python/sglang/srt/models/kimi_k3.py:2892`" in text
    assert "```python\n# before" in text


def test_json_output_validates_against_its_published_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = explain_json_schema()
    for name in ("kimi_k3_layer_ids.log", "kimi_k3_pp.log", "kimi_k3_eight_ranks.log"):
        document = json.loads(run("--file", str(DATA / name), "--format", "json").stdout)
        jsonschema.validate(document, schema)
    assert document["format"] == "errordb.explain" and document["version"] == 2


def test_past_the_cap_exceptions_are_counted_not_reported(monkeypatch):
    """explain keeps the first MAX_FINDINGS exceptions and counts the rest: "omittedExceptions" in
    JSON (valid against the schema), a closing note in text and Markdown. The last one kept still
    knows it is a chain's root cause when its cause is past the cap."""
    jsonschema = pytest.importorskip("jsonschema")
    from errordb.explainer import explanation

    monkeypatch.setattr(explanation, "MAX_FINDINGS", 1)
    log = str(DATA / "kimi_k3_pp.log")
    document = as_json("--file", log)
    jsonschema.validate({k: v for k, v in document.items() if k != "_exit"}, explain_json_schema())
    assert [(e["type"], e["rootCause"]) for e in document["exceptions"]] == [("NotImplementedError", True)]
    assert document["omittedExceptions"] == 1 and top_ids(document) == [KIMI_PP_ERROR]
    note = "… and 1 more exception not shown: explain reports the first 1 exceptions of an input"
    assert note in run("--file", log, "--no-color").stdout
    assert f"_{note}" in run("--file", log, "--format", "markdown").stdout
    assert errordb.explain(open(log, encoding="utf-8")).omitted == 1  # lines read lazily: the same


def test_a_complete_document_is_valid_against_the_schema_as_first_published():
    """omittedExceptions is written only when something was left out, so a version stays
    compatible: without it, the schema is the one first published (no other field allowed)."""
    jsonschema = pytest.importorskip("jsonschema")
    first = explain_json_schema()
    del first["properties"]["omittedExceptions"]
    assert first["additionalProperties"] is False
    for name in ("kimi_k3_layer_ids.log", "kimi_k3_pp.log"):
        document = json.loads(run("--file", str(DATA / name), "--format", "json").stdout)
        assert "omittedExceptions" not in document
        jsonschema.validate(document, first)


def test_python_api_explains_text_and_exception_objects():
    result = errordb.explain((DATA / "bailing_layer_ids.log").read_text())
    assert result.matches[0][0].id == BAILING_VALUE_ERROR
    try:
        raise NotImplementedError("DSPARK aux hidden capture requires PP=1.")
    except NotImplementedError as exc:
        from_object = errordb.explain(exc)
    assert from_object.matches[0][0].id == KIMI_PP_ERROR


def test_the_explanation_carries_what_the_renderers_show():
    """explain reads the best matches' records from the store; rendering reads nothing (the store
    may be closed by then), and a reproduction's text is handed to it by its caller."""
    from errordb.explainer.render import render_markdown, render_terminal
    from errordb.store import open_connection

    conn = open_connection(None)
    result = errordb.explain((DATA / "kimi_k3_layer_ids.log").read_text(), conn)
    conn.close()
    assert set(result.records) == {KIMI_VALUE_ERROR}
    text = render_terminal(result, reproductions={KIMI_VALUE_ERROR: "the reproduction"})
    assert "What it means" in text and "Reproduction\n  the reproduction" in text
    assert "Reproduction" not in render_terminal(result)
    assert "`python/sglang/srt/models/kimi_k3.py:2892`" in render_markdown(result)


def test_install_prints_the_explanation_after_the_traceback(tmp_path):
    program = textwrap.dedent(
        f"""
        import errordb
        errordb.install()
        raise ValueError({MESSAGE!r})
        """
    )
    env = dict(os.environ, ERRORDB_CACHE=str(tmp_path / "cache"), NO_COLOR="1")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    traceback_end = done.stderr.index(f"ValueError: {MESSAGE}")
    explanation = done.stderr.index("Equally likely: 2 records")
    assert traceback_end < explanation


def test_real_process_pipe_with_no_color(tmp_path):
    env = dict(os.environ, ERRORDB_CACHE=str(tmp_path / "cache"))
    log = (DATA / "kimi_k3_layer_ids.log").read_text()
    done = subprocess.run([sys.executable, "-m", "errordb", "explain", "-"], input=log, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout
    assert done.stdout.splitlines()[0].startswith("● ValueError: DSPARK requires explicit layer_ids")


def test_a_large_log_is_read_as_a_stream_in_bounded_memory(tmp_path):
    """Peak memory does not grow with the log: a log four times larger costs no more."""
    import tracemalloc

    from errordb.cli import _read_lines

    noise = "[2026-08-28 05:10:05 TP3] Decode batch. #running-req: 12, #token: 40960, gen throughput (token/s): 812.33\n"
    traceback_text = (DATA / "kimi_k3_layer_ids.log").read_text()

    def peak_for(lines_of_noise: int) -> int:
        log = tmp_path / f"log-{lines_of_noise}.txt"
        with log.open("w") as handle:
            handle.write(noise * (lines_of_noise // 2) + traceback_text + noise * (lines_of_noise // 2))
        tracemalloc.start()
        result = errordb.explain(_read_lines(log))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert result.matches[0][0].id == KIMI_VALUE_ERROR
        return peak

    small, large = peak_for(10_000), peak_for(40_000)  # about 1 MB and 4.5 MB of log
    assert large < small * 1.5 + 500_000, f"peak grew from {small / 1e6:.2f} MB to {large / 1e6:.2f} MB"


def test_nothing_matched_says_where_in_the_users_own_code_it_was_raised(tmp_path):
    # A real traceback: the standard library raised it (os, frozen into the interpreter, or os.py,
    # whose `raise KeyError(key)` gives no draft when it is read on the fly), the user's script called it.
    script = tmp_path / "load_config.py"
    script.write_text('import os\n\n\ndef load():\n    return os.environ["ERRORDB_NO_SUCH_SETTING"]\n\n\nload()\n')
    traceback_text = subprocess.run([sys.executable, str(script)], capture_output=True, text=True).stderr
    assert "in __getitem__" in traceback_text.splitlines()[-2]  # the innermost frame is the standard library's
    result = run("-", "--no-color", input=traceback_text)
    assert result.exit_code == 1
    words = " ".join(result.stdout.split())  # however the terminal's width wrapped it
    assert f"In your code: {script}, line 5, in load return os.environ[\"ERRORDB_NO_SUCH_SETTING\"]" in words
    markdown = run("-", "--format", "markdown", input=traceback_text).stdout
    assert f"In your code: `{script}, line 5, in load` `return os.environ[\"ERRORDB_NO_SUCH_SETTING\"]`" in markdown


def test_force_color_and_clicolor_force_turn_colour_on_and_no_color_wins():
    message = "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
    for env, coloured in (({"FORCE_COLOR": "1"}, True), ({"CLICOLOR_FORCE": "1"}, True), ({"FORCE_COLOR": "0"}, False),
                          ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False), ({}, False)):  # fmt: skip
        result = CliRunner().invoke(cli, ["explain", message], env={"NO_COLOR": None, "FORCE_COLOR": None, "CLICOLOR_FORCE": None, **env})
        assert ("\x1b[" in result.stdout) == coloured, env


def test_explain_dash_on_a_terminal_says_what_it_waits_for():
    import pty

    leader, follower = pty.openpty()  # a real terminal as standard input
    try:
        process = subprocess.Popen([sys.executable, "-m", "errordb", "explain", "-", "--no-color"], stdin=follower,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(follower)
        # A paste the writer quoted whole: read whole, as a paste given as TEXT is, without its quotes.
        os.write(leader, b'"Seen in the log:\nValueError: DSPARK requires explicit layer_ids for aux hidden capture."\n\x04')
        out, err = process.communicate(timeout=120)
    finally:
        os.close(leader)
    assert err.startswith("Paste the traceback or log, then press Ctrl-D")
    assert "dspark-requires-explicit-layer-ids-for-aux-hidden" in out and process.returncode == 0
    assert "● ValueError: DSPARK requires explicit layer_ids for aux hidden capture.\n" in out


def test_explain_and_show_name_the_failure_family_of_the_record():
    message = "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
    text = run(message, "--no-color").stdout
    assert "Failure family Missing required argument" in text
    markdown = run(message, "--format", "markdown").stdout
    assert "Failure family: **Missing required argument**." in markdown
    shown = CliRunner().invoke(cli, ["show", KIMI_VALUE_ERROR, "--no-color"]).stdout
    assert "Failure family Missing required argument" in shown
