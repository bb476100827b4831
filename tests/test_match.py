"""Matching and ranking (docs/matching.md), on the bundled records and on synthetic ones."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, envelope, write_envelope
from hypothesis import given, settings
from hypothesis import strategies as st

from errordb.explainer.match import Matcher, common_tail, near_match, reworded, same_file, score_candidate
from errordb.records.patterns import (
    SET_CHUNK,
    literal_weight,
    PatternError,
    PatternSet,
    cached_pattern,
    index_key,
    literal_runs,
    message_words,
    parsed_literal_runs,
    pattern_words,
    simple_literal_runs,
)
from errordb.store import connect, ingest

MESSAGE = "DSPARK requires explicit layer_ids for aux hidden capture."


@dataclass(frozen=True)
class F:
    file: str
    line: int | None
    function: str | None
    source: str | None = None


@pytest.fixture(scope="module")
def matcher(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "m.db"
    ingest(None, path)
    return Matcher(connect(path).conn)


def kimi_frames(line=2892):
    return [
        F("/opt/venv/lib/python3.11/site-packages/sglang/srt/speculative/dspark_worker.py", 120, "__init__"),
        F("/opt/venv/lib/python3.11/site-packages/sglang/srt/models/kimi_k3.py", line, "set_dspark_layers_to_capture"),
    ]


def bailing_frames(line=1665):
    return [F("/usr/local/lib/python3.12/dist-packages/sglang/srt/models/bailing_moe_v3.py", line, "set_dspark_layers_to_capture")]


def test_kimi_traceback_ranks_the_kimi_record_first_with_its_evidence(matcher):
    matches = matcher.match("ValueError", MESSAGE, kimi_frames())
    assert [m.id for m in matches] == [KIMI_VALUE_ERROR, BAILING_VALUE_ERROR]
    kinds = [e.kind for e in matches[0].evidence]
    assert kinds == ["message-full", "message-specific", "class-agrees", "frame-file", "frame-function", "frame-line"]
    # The message (50 letters and digits of literal text: 2.5 of 5 for being specific) and class, then the frame.
    assert matches[0].score == 100 + 2.5 + 30 + 20 + 10 + 10 and matches[1].score == 100 + 2.5 + 30


def test_bailing_traceback_ranks_the_bailing_record_first(matcher):
    matches = matcher.match("ValueError", MESSAGE, bailing_frames())
    assert [m.id for m in matches] == [BAILING_VALUE_ERROR, KIMI_VALUE_ERROR]


def test_bare_message_gives_both_records_an_equal_score(matcher):
    matches = matcher.match(None, MESSAGE, [])
    assert {m.id for m in matches} == {KIMI_VALUE_ERROR, BAILING_VALUE_ERROR}
    assert matches[0].score == matches[1].score == 102.5


def test_shifted_lines_in_a_newer_version_still_count_but_less(matcher):
    exact = matcher.match("ValueError", MESSAGE, kimi_frames(2892))[0]
    shifted = matcher.match("ValueError", MESSAGE, kimi_frames(2912))[0]
    assert exact.id == shifted.id == KIMI_VALUE_ERROR
    assert exact.score - shifted.score == pytest.approx(1.0)
    assert "20 lines from" in shifted.evidence[-1].detail


def test_windows_paths_match_too(matcher):
    frames = [F(r"C:\venv\Lib\site-packages\sglang\srt\models\bailing_moe_v3.py", 1665, "set_dspark_layers_to_capture")]
    assert matcher.match("ValueError", MESSAGE, frames)[0].id == BAILING_VALUE_ERROR


def test_class_is_compared_by_its_last_part_and_a_wrong_class_costs(matcher):
    qualified = matcher.match("builtins.NotImplementedError", "DSPARK aux hidden capture requires PP=1.", [])
    assert qualified[0].id == KIMI_PP_ERROR and qualified[0].evidence[2].kind == "class-agrees"
    # Another class says another raise printed these words: only a frame in the file can still tie them.
    assert matcher.match("RuntimeError", "DSPARK aux hidden capture requires PP=1.", []) == []
    wrong = matcher.match("RuntimeError", "DSPARK aux hidden capture requires PP=1.", kimi_frames())
    assert wrong[0].id == KIMI_PP_ERROR and [e.kind for e in wrong[0].evidence][:4] == ["message-full", "message-specific", "class-differs", "frame-file"]


def _record(pattern, error_class="ValueError", path="python/pkg/srt/models/registry.py"):
    return {"id": "1" * 16, "slug": "s", "repo": "o/pkg", "errorClass": error_class, "errorMessage": "m",
            "messagePattern": pattern, "filePath": path, "function": "f", "lineNumber": 10}  # fmt: skip


@pytest.mark.parametrize(
    "pattern, error_class, exc_type, message, stands",
    [
        # A generic message (few literal words) from a builtin class: the interpreter says the same.
        ("'.*' object has no attribute '.*'", "AttributeError", "AttributeError", "'NoneType' object has no attribute 'cpu'", False),
        ("No module named .+", "ModuleNotFoundError", "ModuleNotFoundError", "No module named 'vllm._C'", False),
        ("(?s).*", "ValueError", None, "anything at all", False),
        # ... or a class named after another package.
        ("CUDA out of memory", "torch.OutOfMemoryError", "torch.OutOfMemoryError", "CUDA out of memory", False),
        # A generic message from the project's own class, and a specific message, stand alone.
        (r"Exceeded \d+ redirects\.", "requests.exceptions.TooManyRedirects", "TooManyRedirects", "Exceeded 30 redirects.", True),
        ("Model architectures .* are not supported for now", "ValueError", "ValueError", "Model architectures ['X'] are not supported for now", True),
        ("Model architectures .* are not supported for now", "ValueError", None, "Model architectures ['X'] are not supported for now", True),
    ],
)  # fmt: skip
def test_a_match_without_a_frame_stands_only_on_a_specific_message_or_the_projects_own_class(
    pattern, error_class, exc_type, message, stands
):
    path = "src/requests/sessions.py" if "requests" in error_class else "python/pkg/srt/models/registry.py"
    record = _record(pattern, error_class, path)
    assert (score_candidate(record, exc_type, message, []) is not None) == stands
    # A frame in the record's file always lets the message match count.
    frame = F("/venv/lib/python3.11/site-packages/" + path.split("/", 1)[1], 10, "f")
    assert score_candidate(record, exc_type, message, [frame]) is not None


def test_a_frame_in_a_file_moved_within_its_package_gives_the_function_but_not_the_file():
    record = _record('field ".*" not yet prepared so type is still a ForwardRef', "ConfigError", "pydantic/v1/fields.py")
    record["function"] = "ModelField._validate_discriminated_union"
    message = 'field "_items" not yet prepared so type is still a ForwardRef'
    old_layout = F("/app/src/pydantic/pydantic/fields.py", 1093, "_validate_discriminated_union")
    match = score_candidate(record, "pydantic.errors.ConfigError", message, [old_layout])
    assert [e.kind for e in match.evidence][3:] == ["frame-function"] and "moved" in match.evidence[3].detail
    # Another function, another file name, or another package: nothing.
    for frame in (F("/app/src/pydantic/pydantic/fields.py", 1, "validate"), F("/app/src/pydantic/pydantic/main.py", 1, "_validate_discriminated_union"),
                  F("/venv/lib/python3.11/site-packages/other/pydantic/fields.py", 1, "_validate_discriminated_union")):  # fmt: skip
        assert [e.kind for e in score_candidate(record, "ConfigError", message, [frame]).evidence] == ["message-full", "message-specific", "class-agrees"]


WARMUP_ASSERT = 'assert res.status_code == 200, f"{res=}, {res.text=}"'


def _warmup_record():
    """sglang 0.5.23's warmup assert, which 0.4 raised from server.py's _wait_and_warmup."""
    record = _record(r"res=.+, res\.text=.+", "AssertionError", "python/sglang/srt/entrypoints/http_server.py")
    source = "\n".join(["def _execute_server_warmup(server_args):", "    try:", "        res = post()", "        " + WARMUP_ASSERT, "    except Exception:"])
    record.update(function="_execute_server_warmup", lineNumber=2376, sourceCode=source, sourceCodeStart=2373)
    return record


def test_a_raise_moved_to_another_file_and_function_is_found_by_the_line_the_traceback_prints():
    record, message = _warmup_record(), "res=<Response [502]>, res.text=''"
    old = F("/home/sglang/python/sglang/srt/server.py", 621, "_wait_and_warmup", WARMUP_ASSERT)
    match = score_candidate(record, "AssertionError", message, [F("/home/sglang/python/sglang/launch_server.py", 9, "<module>"), old])
    assert [e.kind for e in match.evidence] == ["message-full", "message-specific", "class-agrees", "frame-source"]
    assert "server.py prints the statement that raises it: moved from python/sglang/srt/entrypoints/http_server.py" in match.evidence[-1].detail
    installed = F("/venv/lib/python3.11/site-packages/sglang/srt/server.py", 621, "_wait_and_warmup", "  " + WARMUP_ASSERT)
    assert score_candidate(record, "AssertionError", message, [installed]).evidence[-1].kind == "frame-source"
    # The generic pattern stands on nothing else: another line printed, the line printed by an
    # outer frame only, or by a file of another package, and the match is dropped.
    for frames in ([F(old.file, 621, "_wait_and_warmup", "assert res.status_code == 200, res.text")],
                   [old, F("/home/sglang/python/sglang/srt/utils.py", 5, "post", "return session.post(url)")],
                   [F("/venv/lib/python3.11/site-packages/vllm/entrypoints/server.py", 621, "_wait_and_warmup", WARMUP_ASSERT)]):  # fmt: skip
        assert score_candidate(record, "AssertionError", message, frames) is None


@pytest.mark.parametrize("line", ["raise NotImplementedError(", "raise click.exceptions.ClickException(", "raise NotImplementedError(msg)",
                                  "assert isinstance(x, int)"])  # fmt: skip
def test_a_printed_raise_line_counts_only_when_it_says_more_than_its_keyword_and_class(line):
    # "raise NotImplementedError(" begins many raises (the line Python 3.11+ prints of one that
    # goes on): printing it says nothing of which one, and a generic pattern stays dropped.
    record = _record(r".+ is not supported\.", "NotImplementedError", "python/sglang/srt/layers/quant.py")
    record.update(lineNumber=40, sourceCode="        " + line, sourceCodeStart=40)
    frame = F("/venv/lib/python3.11/site-packages/sglang/srt/models/llama.py", 77, "load", line)
    assert score_candidate(record, "NotImplementedError", "fp8 is not supported.", [frame]) is None


def test_a_frame_in_the_records_own_file_is_judged_by_its_place_not_its_text():
    record = _warmup_record()
    here = F("/venv/lib/python3.11/site-packages/sglang/srt/entrypoints/http_server.py", 2376, "_execute_server_warmup", WARMUP_ASSERT)
    kinds = [e.kind for e in score_candidate(record, "AssertionError", "res=<Response [502]>, res.text=''", [here]).evidence]
    assert kinds[-3:] == ["frame-file", "frame-function", "frame-line"] and "frame-source" not in kinds


def test_an_innermost_frame_in_another_function_of_the_records_file_is_no_evidence():
    record = _record("'.+ object has no attribute .+'", "AttributeError", "pydantic/main.py")
    record["function"] = "BaseModel.__getattr__"
    message = "'NoneType' object has no attribute '__setitem__'"
    site = "/venv/lib/python3.11/site-packages/pydantic/main.py"
    # Raised in a lambda of main.py (by the interpreter), not by __getattr__'s raise.
    assert score_candidate(record, "AttributeError", message, [F(site, 105, "<lambda>")]) is None
    assert score_candidate(record, "AttributeError", message, [F("/app/x.py", 1, "f"), F(site, 105, "<lambda>")]) is None
    # Raised in __getattr__, or passing through main.py on the way to the raise elsewhere: the frame counts.
    assert score_candidate(record, "AttributeError", message, [F(site, 10, "__getattr__")]).score == 100 + 1.0 + 30 + 20 + 10 + 10
    assert [e.kind for e in score_candidate(record, "AttributeError", message, [F(site, 900, "validate"), F("/venv/x/y.py", 3, "g")]).evidence][3:] == ["frame-file"]


def test_message_inside_a_longer_one_is_a_partial_match(matcher):
    matches = matcher.match("RuntimeError", f"worker 3 failed: {MESSAGE} (see log)", [])
    assert {m.id for m in matches} == {KIMI_VALUE_ERROR, BAILING_VALUE_ERROR}
    assert all(m.evidence[0].kind == "message-partial" for m in matches)


def test_multi_line_message_matches_on_its_first_line(matcher):
    matches = matcher.match("NotImplementedError", "DSPARK aux hidden capture requires PP=1.\nrank 2 of 4", [])
    assert matches[0].id == KIMI_PP_ERROR and matches[0].evidence[0].kind == "message-full"


def test_unrelated_message_matches_nothing(matcher):
    assert matcher.match("ValueError", "invalid literal for int() with base 10: 'x'", []) == []
    assert matcher.match("ValueError", "DSPARK requires implicit layer_ids", []) == []


def test_a_message_cut_short_finds_its_records_as_partial_matches(matcher):
    cut = MESSAGE[:40]  # "DSPARK requires explicit layer_ids for a": cut inside a word
    bare = matcher.match("ValueError", cut, [])
    assert {m.id for m in bare} == {KIMI_VALUE_ERROR, BAILING_VALUE_ERROR}
    assert [e.kind for e in bare[0].evidence] == ["message-partial", "message-specific", "class-agrees"]
    assert bare[0].score == 40 + 1.8 + 30  # specific by the 35 letters and digits it holds, not the pattern's 50
    assert "cut short" in bare[0].evidence[0].detail
    assert [m.id for m in matcher.match("ValueError", cut, kimi_frames())][:1] == [KIMI_VALUE_ERROR]
    # Under another class it was raised elsewhere; too little of the text says nothing.
    assert matcher.match("KeyError", cut, []) == []
    assert matcher.match("ValueError", "DSPARK requires", []) == []


def test_candidates_come_from_the_index_not_every_record(matcher):
    assert matcher.candidates("nothing in common here") == []
    # The PP record is keyed on its rarest word ("pp"), which this message does not contain.
    assert {r["id"] for r in matcher.candidates(MESSAGE)} == {KIMI_VALUE_ERROR, BAILING_VALUE_ERROR}
    keys = dict(matcher.conn.execute("SELECT id, matchKey FROM records"))
    assert keys[KIMI_PP_ERROR] == "pp"


def test_the_index_word_is_one_of_the_first_words_so_a_message_cut_short_keeps_it():
    pattern = r"The checkpoint you are trying to load has model type `.*` but Transformers does not recognize it\. Update it, or it is out of date\."
    frequency = dict.fromkeys(pattern_words(pattern), 50) | {"date": 1, "checkpoint": 30}
    assert index_key(pattern, frequency) == "checkpoint"  # "date" is rarer, but a cut paste loses it first
    cut = "The checkpoint you are trying to load has model type `internvl` but Transformers does not recogn"
    assert index_key(pattern, frequency) in message_words(cut)


def test_index_key_prefers_the_rarest_word():
    pattern = r"DSPARK aux hidden capture requires PP=1\."
    assert pattern_words(pattern) == ("aux", "hidden", "capture", "requires", "pp", "1")
    assert index_key(pattern) == "requires"
    assert index_key(pattern, {"requires": 50, "capture": 3, "hidden": 3, "aux": 3, "pp": 9, "1": 9}) == "capture"


def test_a_top_level_stdlib_module_matches_its_installed_copy():
    # CPython's Lib/argparse.py is installed as lib/python3.11/argparse.py: only the file name
    # agrees, so the version folder stands in for Lib; any other folder does not.
    assert same_file("/usr/lib/python3.11/argparse.py", "Lib/argparse.py")
    assert same_file("/opt/py/lib/python3.13t/pathlib.py", "Lib/pathlib.py")
    assert same_file("C:\\Python311\\Lib\\argparse.py", "Lib/argparse.py")
    assert not same_file("/srv/app/argparse.py", "Lib/argparse.py")
    assert not same_file("/usr/lib/python3.11/site-packages/argparse.py", "Lib/argparse.py")
    assert not same_file("/usr/lib/python3.11/argparse.py", "src/argparse.py")


def test_same_file_compares_trailing_components():
    record = "python/sglang/srt/models/kimi_k3.py"
    assert same_file("/venv/lib/python3.11/site-packages/sglang/srt/models/kimi_k3.py", record)
    assert same_file("kimi_k3.py", "kimi_k3.py")
    assert not same_file("/other/project/kimi_k3.py", record)
    assert not same_file("/venv/sglang/srt/models/bailing_moe_v3.py", record)
    assert common_tail(r"C:\x\models\kimi_k3.py", record) == 2
    # Ending alike is not enough: another project's models/kimi_k3.py, or its copy of a module.
    assert not same_file("/venv/lib/python3.11/site-packages/vllm/model_executor/models/kimi_k3.py", record)
    nccl = "distributed/device_communicators/pynccl_wrapper.py"
    assert not same_file(f"/venv/site-packages/sglang/srt/{nccl}", f"vllm/{nccl}")
    assert not same_file(f"/venv/site-packages/vllm/{nccl}", f"python/sglang/srt/{nccl}")
    assert not same_file(f"/venv/site-packages/sglang/srt/{nccl}", f"python/sglang/multimodal_gen/runtime/{nccl}")
    assert same_file(f"/venv/site-packages/vllm/{nccl}", f"vllm/{nccl}")
    assert same_file(f"/home/me/sglang/python/sglang/srt/{nccl}", f"python/sglang/srt/{nccl}")  # a source checkout
    # A short path drops only its source root: src/click/core.py is installed as click/core.py.
    assert same_file("/venv/lib/python3.11/site-packages/click/core.py", "src/click/core.py")
    assert not same_file("/venv/lib/python3.11/site-packages/other/core.py", "src/click/core.py")


def test_a_catastrophic_pattern_runs_in_re2():
    record = {"id": "0" * 16, "slug": "x", "messagePattern": "(a+)+$", "errorClass": "ValueError",
              "filePath": "x.py", "function": None, "lineNumber": 1}  # fmt: skip
    # Python's own engine backtracks exponentially on this input; RE2 answers in linear time
    # (bench/adversarial.py shows it): the pattern must be an RE2 one.
    assert type(cached_pattern(record["messagePattern"])).__module__.split(".")[0] == "re2"
    frames = [F("/srv/x.py", 1, "f")]  # the pattern says too little to match without one
    assert score_candidate(record, "ValueError", "a" * 100_000 + "!", frames) is None
    match = score_candidate(record, "ValueError", "!" + "a" * 100_000, frames)
    assert match is not None and match.evidence[0].kind == "message-partial"


@pytest.mark.parametrize(
    "pattern, runs, key",
    [
        (r"DSPARK aux hidden capture requires PP=1\.", ["DSPARK aux hidden capture requires PP=1."], "requires"),
        (r"expected q/k shape (.+)", ["expected q/k shape "], "shape"),
        (r"(.+)", [], ""),
        (r"a|b c d", [], ""),
        (r"(?i)Foo BAR baz", ["foo bar baz"], "bar"),
        (r"shape \(\d+, (?:got|saw) \w+\) too big here", ["shape (", ", ", " ", ") too big here"], "big"),
    ],
)
def test_required_literals_and_index_key(pattern, runs, key):
    assert literal_runs(pattern) == runs
    assert index_key(pattern) == key


word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789_", min_size=1, max_size=8)
piece = st.one_of(word, st.sampled_from([" ", ", ", ": ", "(", ")", ".", "=", "/", "-"]))


@settings(max_examples=200, deadline=None)
@given(before=st.lists(piece, max_size=6), hole=st.sampled_from([r"(.+)", r"\d+", r"\w+", r"[a-z]*", ""]),
       after=st.lists(piece, max_size=6), value=st.text(alphabet="xyz019", min_size=1, max_size=5))  # fmt: skip
def test_every_message_the_pattern_matches_contains_its_key(before, hole, after, value):
    """The index never loses a candidate: a matching message always holds the key as a word."""
    prefix, suffix = "".join(before), "".join(after)
    pattern = re.escape(prefix) + hole + re.escape(suffix)
    message = prefix + (value if hole else "") + suffix
    compiled = cached_pattern(pattern)
    key = index_key(pattern)
    for text in (message, f"context: {message} (more)"):
        if compiled.search(text):
            assert key == "" or key in message_words(text)


hole = st.sampled_from([r"(.+)", r"(.+?)", r"(.*)", r".+", r"\d+", r"-?\d+", r"(\d+)", r"(\S+)", r"\w+"])
literal = st.text(alphabet="ab -_:/.()[]{}?*+^$|\\'\"=é", min_size=1, max_size=6).map(re.escape)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(hole, literal), max_size=8))
def test_the_fast_literal_reader_agrees_with_the_full_parser(parts):
    pattern = "".join(parts)
    simple = simple_literal_runs(pattern)
    assert simple is not None
    assert simple == parsed_literal_runs(pattern)
    re.compile(pattern)  # what the fast path assumes without checking


def test_the_fast_literal_reader_declines_anything_else():
    for pattern in (r"a|b", r"[abc]", r"a{2}", r"(?i)x", r"^x$", r"(a)(b)"):
        assert simple_literal_runs(pattern) is None


# Patterns with no index word: searched all at once --------------------------------------------


def test_a_pattern_set_finds_what_each_pattern_finds_alone():
    patterns = [f"Unsupported w{i} .*" for i in range(SET_CHUNK * 2 + 5)] + [r"(?s).*x", r"\d+ items", r"^abc", r"(?i)NOT FOUND"]
    found = PatternSet(patterns)
    texts = ["Unsupported w7 thing", f"zzz Unsupported w{SET_CHUNK * 2 + 4} q", "3 items\nnext", "abc", "xabc", "", "not found", "é"]
    for text in texts:
        assert sorted(found.search(text)) == [i for i, p in enumerate(patterns) if cached_pattern(p).search(text) is not None], text
    # A pattern RE2 refuses is "found" everywhere: whoever asked tries it alone and learns why.
    refused = PatternSet(["ok", "(a)\\1", "fine"])
    assert refused.search("nothing") == [1]
    with pytest.raises(PatternError):
        cached_pattern("(a)\\1")


def test_records_without_an_index_word_are_found_and_only_when_their_pattern_is_there(tmp_path):
    records = tmp_path / "records"
    template = envelope(KIMI_PP_ERROR)
    for i in range(SET_CHUNK + 20):  # more than one RE2 set
        data = {**template, "record": {**template["record"], "id": f"{i:016x}", "slug": f"not-supported-{i}",
                                       "errorMessage": f"Unsupported_w{i:04}", "messagePattern": f"Unsupported_w{i:04}"}}  # fmt: skip
        write_envelope(records, data)
    ingest([records], tmp_path / "s.db")
    matcher = Matcher(connect(tmp_path / "s.db").conn)
    assert matcher.conn.execute("SELECT count(*) FROM records WHERE matchKey = ''").fetchone()[0] == SET_CHUNK + 20
    hit = matcher.match("NotImplementedError", f"Unsupported_w{SET_CHUNK + 7:04}", kimi_frames())
    assert [m.id for m in hit][:1] == [f"{SET_CHUNK + 7:016x}"]
    assert {r["id"] for r in matcher.candidates(f"worker: Unsupported_w{SET_CHUNK + 7:04} here")} == {f"{SET_CHUNK + 7:016x}"}
    assert matcher.candidates("Unsupported everywhere") == []


# Messages reworded between versions ------------------------------------------------------------

HUB = "src/transformers/utils/hub.py"
LOGIN_THEN = "You are trying to access a gated repo. Make sure to request access and pass a token having permission: `huggingface-cli login`."
LOGIN_NOW = "You are trying to access a gated repo. Make sure to request access and pass a token having permission: `hf auth login`."


def _hub_record():
    record = _record(re.escape(LOGIN_NOW), "OSError", HUB)
    return {**record, "errorMessage": LOGIN_NOW, "function": "cached_files", "lineNumber": 543}


def test_a_reworded_message_raised_where_the_record_raises_is_a_near_match_that_shows_the_change():
    frames = [F("/app/main.py", 3, "<module>"), F("/venv/lib/python3.12/site-packages/transformers/utils/hub.py", 560, "cached_files")]
    match = near_match(_hub_record(), "OSError", LOGIN_THEN, frames)
    assert [e.kind for e in match.evidence] == ["message-near", "class-agrees", "frame-file", "frame-function", "frame-line"]
    assert "reads \u201chuggingface cli\u201d here" in match.evidence[0].detail and "the record's \u201chf auth\u201d" in match.evidence[0].detail
    assert match.score == 30 + 30 + 20 + 10 + round(10 * (1 - 17 / 200), 1)


@pytest.mark.parametrize(
    "exc_type, message, frame",
    [
        ("OSError", LOGIN_THEN, F("/venv/site-packages/transformers/utils/hub.py", 560, "cached_file")),  # another function
        ("OSError", LOGIN_THEN, F("/venv/site-packages/transformers/utils/other.py", 560, "cached_files")),  # another file
        ("ValueError", LOGIN_THEN, F("/venv/site-packages/transformers/utils/hub.py", 560, "cached_files")),  # another class
        ("OSError", "Connection reset by peer while reading the response", F("/venv/site-packages/transformers/utils/hub.py", 560, "cached_files")),
    ],
)  # fmt: skip
def test_a_near_match_needs_the_raise_site_the_class_and_most_of_the_words(exc_type, message, frame):
    assert near_match(_hub_record(), exc_type, message, [F("/app/main.py", 3, "<module>"), frame]) is None


def test_only_the_innermost_frame_says_where_a_near_match_was_raised():
    raised_elsewhere = [F("/venv/site-packages/transformers/utils/hub.py", 560, "cached_files"), F("/venv/site-packages/huggingface_hub/x.py", 9, "get")]
    assert near_match(_hub_record(), "OSError", LOGIN_THEN, raised_elsewhere) is None


def test_the_matcher_finds_near_matches_in_the_innermost_frames_file(tmp_path):
    records = tmp_path / "records"
    data = envelope(KIMI_VALUE_ERROR)
    write_envelope(records, data)
    ingest([records], tmp_path / "s.db")
    matcher = Matcher(connect(tmp_path / "s.db").conn)
    older = "DSPARK needs explicit layer_ids for aux hidden capture."  # "requires" was "needs"
    (match,) = matcher.match("ValueError", older, kimi_frames())
    assert match.id == KIMI_VALUE_ERROR and match.evidence[0].kind == "message-near"
    assert matcher.match("ValueError", older, []) == [] and matcher.match("KeyError", older, kimi_frames()) == []


def test_the_records_of_a_frames_file_are_found_by_their_path_under_any_root(tmp_path):
    records = tmp_path / "records"
    template = envelope(KIMI_VALUE_ERROR)
    for rid, path in (("a" * 16, "Lib/json/decoder.py"), ("b" * 16, "python/sglang/srt/models/kimi_k3.py"), ("c" * 16, "json/decoder.py")):
        write_envelope(records, {**template, "record": {**template["record"], "id": rid, "slug": f"s-{rid[:6]}", "filePath": path}})
    ingest([records], tmp_path / "s.db")
    matcher = Matcher(connect(tmp_path / "s.db").conn)
    assert {r["id"] for r in matcher.in_file("/usr/lib/python3.12/json/decoder.py")} == {"a" * 16, "c" * 16}
    assert {r["id"] for r in matcher.in_file("C:\\venv\\Lib\\site-packages\\sglang\\srt\\models\\kimi_k3.py")} == {"b" * 16}
    assert matcher.in_file("") == [] and matcher.in_file("/srv/other/decoder.py") == []


@pytest.mark.parametrize(
    "pattern, weight",
    [
        (r"\[IpcModelLoader\] After IPC mapping, .* remain", len("IpcModelLoaderAfterIPCmappingremain")),  # "\[" is a literal
        (r"[^/]+ is \d+ (?s)long", len("islong")),  # sets, class escapes and flags are not
        (r"a\\[b]c", 2),  # an escaped backslash, then a set
    ],
)  # fmt: skip
def test_literal_weight_counts_the_letters_and_digits_a_match_must_contain(pattern, weight):
    assert literal_weight(pattern) == weight


def test_words_where_a_run_should_follow_are_a_reworded_message_not_a_cut_one():
    from errordb.records.patterns import cut_match

    pattern = r"cannot save .* rows: the table is read-only"
    assert cut_match(pattern, "cannot save 3 rows: table is read only") is None  # reworded
    assert cut_match(pattern, "cannot save 3 rows: the tab") == "cannot save  rows: the tab"  # cut in a run
    assert cut_match(r"Unrecognized model in .*\. Should have", "Unrecognized model in allenai/Olmo-Hyb") == "Unrecognized model in "  # in a value


def test_a_message_a_terminal_wrapped_matches_in_full_with_its_lines_joined():
    record = _record(r"If you are using a return type annotation that is not a valid Pydantic field, see the docs\.", "FastAPIError")
    wrapped = "If you are using a return type \nannotation that is not a valid Pydantic field, see the \ndocs."
    match = score_candidate(record, "FastAPIError", wrapped, [])
    assert match.evidence[0].kind == "message-full" and "lines joined" in match.evidence[0].detail


def test_word_similarity():
    assert reworded("a b c d", "a b c d") == (1.0, "", "")
    # A placeholder is any one word: the values in its place are no rewording.
    assert reworded("cannot save {n} rows: the table is read-only", "cannot save 3 rows: table is read only") == (16 / 17, "the", "")
    assert reworded("Free memory on device ({free}/{total} GiB)", "Free memory on device cuda:0 (3.1/79 GiB)") == (14 / 17, "", "3 1 79")
    assert reworded("", "x") == (0.0, "", "")


# Classes raised without a message ------------------------------------------------------------


def test_an_exception_without_a_message_is_found_by_its_innermost_frame_and_class(tmp_path):
    records = tmp_path / "records"
    template = envelope(KIMI_PP_ERROR)  # a NotImplementedError raised in kimi_k3.py
    bare = {**template["record"], "id": "d" * 16, "slug": "notimplementederror-dddddd", "errorMessage": "", "messagePattern": ""}
    write_envelope(records, {**template, "record": bare})
    write_envelope(records, template)
    ingest([records], tmp_path / "s.db")
    matcher = Matcher(connect(tmp_path / "s.db").conn)
    (function, line) = matcher.conn.execute("SELECT function, lineNumber FROM records WHERE id = ?", ["d" * 16]).fetchone()
    frames = [F("/app/main.py", 3, "<module>"), F("/venv/lib/python3.11/site-packages/sglang/srt/models/kimi_k3.py", line, function)]
    (match,) = matcher.match("NotImplementedError", "", frames)
    assert match.id == "d" * 16
    assert [e.kind for e in match.evidence] == ["message-full", "class-agrees", "frame-file", "frame-function", "frame-line"]
    # Without a frame in its file, or under another class, a bare class says nothing; and it is
    # never a candidate for a message.
    assert matcher.match("NotImplementedError", "", []) == []
    assert matcher.match("ValueError", "", frames) == []
    assert "d" * 16 not in {m.id for m in matcher.match("NotImplementedError", "DSPARK aux hidden capture requires PP=1.", frames)}
    assert "d" * 16 not in {r["id"] for r in matcher.candidates("any message at all")}


def test_another_class_raised_in_another_installed_package_only_quotes_the_records_words():
    # vLLM's message inside the openai client's error (bench/realworld vllm-005): raised by openai.
    record = {"id": "1" * 16, "slug": "s", "messagePattern": r"max_tokens must be at least 1, got .+\.", "errorClass": "ValueError",
              "filePath": "vllm/sampling_params.py", "function": "SamplingParams._verify_args", "lineNumber": 300}  # fmt: skip
    message = "Error code: 400 - {'object': 'error', 'message': 'max_tokens must be at least 1, got -344.', 'code': 400}"
    in_openai = [F("/venv/lib/python3.10/site-packages/openai/_base_client.py", 1020, "_request")]
    assert score_candidate(record, "openai.BadRequestError", message, in_openai) is None
    assert score_candidate(record, "openai.BadRequestError", message, []) is not None  # no frame says where: kept
    in_vllm = [F("/venv/lib/python3.10/site-packages/vllm/entrypoints/serve.py", 80, "create")]
    assert score_candidate(record, "openai.BadRequestError", message, in_vllm) is not None
    assert score_candidate(record, "ValueError", message, in_openai) is not None  # its own class: not a quote
