"""Tests for errordb.explainer.parse: real CPython output (3.8-3.13), log layouts, robustness."""

from __future__ import annotations

import dataclasses
import itertools
import tracemalloc
from unittest import mock
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errordb.explainer import parse
from errordb.explainer.parse import chain, driver
from errordb.explainer.parse import Frame, ParsedException, iter_exceptions, parse_text
from errordb.explainer.parse.lines import strip_prefixes

REF = Path(__file__).resolve().parent / "data" / "cpython-tracebacks"  # what CPython 3.8-3.13 printed: its README
LOGS = Path(__file__).resolve().parent / "data" / "logs"
VERSIONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
ROLES = {"root", "cause", "context", "group-member"}
ANY = object()  # "do not check this field"


@pytest.fixture(autouse=True)
def _strict_parser(monkeypatch):
    """Let internal errors surface: the production safety net would hide parser bugs."""
    monkeypatch.setattr(driver, "_RAISE_INTERNAL_ERRORS", True)


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------


def vt(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def one(excs: list[ParsedException]) -> ParsedException:
    assert len(excs) == 1, summary(excs)
    return excs[0]


def summary(excs):
    return [(e.role, e.chain_index, e.group_path, e.exc_type, e.message) for e in excs]


def assert_frames(exc: ParsedException, expected: list[tuple]) -> None:
    """Each expected frame is (path suffix, line, function, source); ANY skips a field."""
    got = [dataclasses.astuple(f) for f in exc.frames]
    assert len(exc.frames) == len(expected), got
    for frame, (suffix, line, function, source) in zip(exc.frames, expected):
        assert frame.file == suffix or frame.file.endswith("/" + suffix), got
        if line is not ANY:
            assert frame.line == line, got
        if function is not ANY:
            assert frame.function == function, got
        if source is not ANY:
            assert frame.source == source, got


def assert_exc(exc, exc_type, message, role="root", chain_index=0, group_path=(), notes=()):
    assert exc.exc_type == exc_type, summary([exc])
    if message is not ANY:
        assert exc.message == message, summary([exc])
    assert exc.role == role, summary([exc])
    assert exc.chain_index == chain_index, summary([exc])
    assert exc.group_path == group_path, summary([exc])
    assert exc.notes == list(notes), exc.notes


def check_invariants(excs, text: str) -> None:
    """What must hold for any input whatsoever."""
    n_lines = text.count("\n") + 1
    assert isinstance(excs, list)
    last = 0
    for e in excs:
        assert isinstance(e, ParsedException)
        assert e.exc_type is None or (isinstance(e.exc_type, str) and e.exc_type)
        assert isinstance(e.message, str) and "\x1b" not in e.message
        assert e.role in ROLES
        assert isinstance(e.chain_index, int) and e.chain_index >= 0
        assert isinstance(e.group_path, tuple) and all(isinstance(i, int) for i in e.group_path)
        assert isinstance(e.ranks, list) and len(set(e.ranks)) == len(e.ranks)
        assert all(isinstance(r, str) and r for r in e.ranks)
        assert 1 <= e.line_no <= n_lines
        assert e.line_no >= last  # input order
        last = e.line_no
        assert all(isinstance(n, str) for n in e.notes)
        for f in e.frames:
            assert isinstance(f, Frame) and isinstance(f.file, str)
            assert f.line is None or isinstance(f.line, int)
            assert f.source is None or (f.source == f.source.strip() and f.source)


def assert_nothing_left_open(text: str) -> None:
    """Every exception the parser started was reported or dropped, none lost half-read."""
    parser = driver._Parser()
    for line in driver._split_text(text):
        parser.feed(line)
    parser.finish()
    assert not parser.sink._alive, text[:200]
    assert not parser.sink._pending


def ref_files():
    if not REF.is_dir():
        return []
    return sorted(p for p in REF.rglob("*.txt") if p.is_file())


def ref_text(version: str, case: str) -> str:
    path = REF / version / f"{case}.txt"
    if not path.is_file():
        pytest.skip(f"reference file {path} missing")
    return path.read_text(encoding="utf-8")


def needs_ref(fn):
    return pytest.mark.skipif(not REF.is_dir(), reason=f"reference data not found at {REF}")(fn)


# ------------------------------------------------------------------------------------------
# Reference data: what CPython 3.8-3.13 really printed
# ------------------------------------------------------------------------------------------


def check_asyncio_case(v, excs):
    e = one(excs)
    assert_exc(e, "ConnectionError", "Connection refused")
    middle = [("asyncio/runners.py", ANY, "run", ANY)]
    if vt(v) >= (3, 11):
        middle *= 2
    assert_frames(
        e,
        [("asyncio_case.py", 6, "<module>", "asyncio.run(main())")]
        + middle
        + [
            ("asyncio/base_events.py", ANY, "run_until_complete", "return future.result()"),
            ("asyncio_case.py", 5, "main", "await asyncio.gather(fetch())"),
            ("asyncio_case.py", 3, "fetch", 'raise ConnectionError("Connection refused")'),
        ],
    )


def check_attrerr(v, excs):
    e = one(excs)
    suffix = ". Did you mean: 'namedtuple'?" if vt(v) >= (3, 10) else ""
    assert_exc(e, "AttributeError", "module 'collections' has no attribute 'namedtupel'" + suffix)
    frames = [("attrerr.py", 2, "<module>", 'collections.namedtupel("A", "x")')]
    if vt(v) < (3, 10):
        frames.append(("collections/__init__.py", ANY, "__getattr__", ANY))
    assert_frames(e, frames)


def check_carets(v, excs):
    e = one(excs)
    assert_exc(e, "AttributeError", "'NoneType' object has no attribute 'other'")
    assert_frames(
        e,
        [("carets.py", 5, "<module>", "f(A())"), ("carets.py", 2, "f", "return x.attr.other + 1")],
    )


def check_carets2(v, excs):
    e = one(excs)
    assert_exc(e, "ZeroDivisionError", "division by zero")
    assert_frames(e, [("carets2.py", 3, "<module>", "print(a[0] / b)")])


def check_cause(v, excs):
    assert len(excs) == 2, summary(excs)
    inner, outer = excs
    assert_exc(inner, "json.decoder.JSONDecodeError", "Expecting value: line 1 column 1 (char 0)")
    assert inner.short_type == "JSONDecodeError"
    assert_frames(
        inner,
        [
            ("cause.py", 4, "parse", "return json.loads(s)"),
            ("json/__init__.py", ANY, "loads", "return _default_decoder.decode(s)"),
            ("json/decoder.py", ANY, "decode", ANY),
            ("json/decoder.py", ANY, "raw_decode", 'raise JSONDecodeError("Expecting value", s, err.value) from None'),
        ],
    )
    assert_exc(outer, "ValueError", "bad config file", role="cause", chain_index=1)
    assert_frames(
        outer,
        [
            ("cause.py", 7, "<module>", 'parse("not json")'),
            ("cause.py", 6, "parse", 'raise ValueError("bad config file") from e'),
        ],
    )
    assert inner.line_no == 1 and outer.line_no > inner.line_no


def check_cf(v, excs):
    assert len(excs) == 2, summary(excs)
    remote, local = excs
    # the RemoteTraceback wrapper is not reported; the remote traceback is the chain's root
    assert_exc(remote, "ZeroDivisionError", "division by zero")
    assert_frames(
        remote,
        [
            ("concurrent/futures/process.py", ANY, "_process_worker", ANY),
            ("cf.py", 3, "work", "return 1 / x"),
        ],
    )
    assert remote.line_no == 3
    assert_exc(local, "ZeroDivisionError", "division by zero", role="cause", chain_index=1)
    assert_frames(
        local,
        [
            ("cf.py", 6, "<module>", "ex.submit(work, 0).result()"),
            ("concurrent/futures/_base.py", ANY, "result", "return self.__get_result()"),
            ("concurrent/futures/_base.py", ANY, "__get_result", "raise self._exception"),
        ],
    )


def check_context(v, excs):
    assert len(excs) == 2, summary(excs)
    assert_exc(excs[0], "KeyError", "'missing'")
    assert_frames(excs[0], [("context.py", 3, "<module>", 'd["missing"]')])
    assert_exc(excs[1], "ZeroDivisionError", "division by zero", role="context", chain_index=1)
    assert_frames(excs[1], [("context.py", 5, "<module>", "1 / 0")])


def check_exec_string(v, excs):
    e = one(excs)
    assert_exc(e, "NameError", "name 'undefined_name' is not defined")
    assert_frames(
        e,
        [
            ("exec_string.py", 1, "<module>", ANY),
            ("<string>", 3, "<module>", None),
            ("<string>", 2, "g", None),
        ],
    )
    assert e.frames[0].source.startswith("exec(")


def check_faulthandler_segv(v, excs):
    e = one(excs)
    assert_exc(e, None, "Fatal Python error: Segmentation fault")
    assert_frames(  # printed most recent first; reported outermost first like a traceback
        e,
        [
            ("segv.py", 5, "<module>", None),
            ("segv.py", 4, "crash", None),
            ("ctypes/__init__.py", ANY, "string_at", None),
        ],
    )


def check_fromnone(v, excs):
    e = one(excs)
    assert_exc(e, "RuntimeError", "lookup failed")
    assert_frames(e, [("fromnone.py", 5, "<module>", 'raise RuntimeError("lookup failed") from None')])


def _no_exception_group(excs, frames=2):
    e = one(excs)
    assert_exc(e, "NameError", "name 'ExceptionGroup' is not defined")
    assert len(e.frames) == frames


def check_group(v, excs):
    if vt(v) < (3, 11):
        return _no_exception_group(excs)
    assert len(excs) == 6, summary(excs)
    g = excs[0]
    assert_exc(g, "ExceptionGroup", "many errors (3 sub-exceptions)")
    assert_frames(
        g,
        [
            ("group.py", 7, "<module>", "f()"),
            # 3.13 prints the multi-line statement as three lines; the first is the source
            ("group.py", 2, "f", 'raise ExceptionGroup("many errors", ['),
        ],
    )
    expected = [
        ("ValueError", "bad value 1", (1,)),
        ("TypeError", "bad type", (2,)),
        ("ExceptionGroup", "nested (2 sub-exceptions)", (3,)),
        ("FileNotFoundError", "[Errno 2] No such file or directory", (3, 1)),
        ("KeyError", "'k'", (3, 2)),
    ]
    for e, (exc_type, message, path) in zip(excs[1:], expected):
        assert_exc(e, exc_type, message, role="group-member", group_path=path)
        assert e.frames == []


def check_groupcause(v, excs):
    if vt(v) < (3, 11):
        assert len(excs) == 2, summary(excs)
        assert_exc(excs[0], "KeyError", "'x'")
        assert_exc(excs[1], "NameError", "name 'ExceptionGroup' is not defined", role="context", chain_index=1)
        return
    assert len(excs) == 3, summary(excs)
    assert_exc(excs[0], "KeyError", "'x'")
    assert_exc(excs[1], "ExceptionGroup", "eg (1 sub-exception)", role="cause", chain_index=1, notes=["group note"])
    assert_frames(excs[1], [("groupcause.py", 6, "<module>", "raise eg from e")])
    assert_exc(excs[2], "ValueError", "v", role="group-member", group_path=(1,))


def check_groupchain(v, excs):
    if vt(v) < (3, 11):
        assert len(excs) == 3, summary(excs)
        assert_exc(excs[0], "KeyError", "'cfg'")
        assert_exc(excs[1], "ValueError", "config missing", role="cause", chain_index=1)
        assert_exc(
            excs[2], "AttributeError", "'ValueError' object has no attribute 'add_note'",
            role="context", chain_index=2,
        )
        return
    assert len(excs) == 3, summary(excs)
    assert_exc(excs[0], "ExceptionGroup", "startup failed (1 sub-exception)")
    # inside member 1: a chain KeyError -> ValueError; the ValueError is the member itself
    assert_exc(excs[1], "KeyError", "'cfg'", role="root", chain_index=0, group_path=(1,))
    assert_frames(excs[1], [("groupchain.py", 3, "inner", '{}["cfg"]')])
    # the add_note() line can't be told from a message line outside groups: it stays in the message
    assert_exc(
        excs[2], "ValueError", "config missing\nwhile loading worker 3",
        role="group-member", chain_index=1, group_path=(1,),
    )
    assert_frames(
        excs[2],
        [
            ("groupchain.py", 8, "<module>", "inner()"),
            ("groupchain.py", 5, "inner", 'raise ValueError("config missing") from e'),
        ],
    )


def check_groupdeep(v, excs):
    if vt(v) < (3, 11):
        return _no_exception_group(excs, frames=1)
    # levels 11 .. 2 are printed; "... (max_group_depth is 10)" is not an exception
    assert len(excs) == 10, summary(excs)
    for depth, e in enumerate(excs):
        assert e.exc_type == "ExceptionGroup"
        assert e.message == f"level {11 - depth} (1 sub-exception)"
        assert e.group_path == (1,) * depth
        assert e.role == ("root" if depth == 0 else "group-member")


def check_groupmany(v, excs):
    if vt(v) < (3, 11):
        return _no_exception_group(excs, frames=1)
    # 15 members are printed, then "+---- ... ----" / "and 5 more exceptions"
    assert len(excs) == 16, summary(excs)
    assert_exc(excs[0], "ExceptionGroup", "eg (20 sub-exceptions)")
    for i, e in enumerate(excs[1:]):
        assert_exc(e, "ValueError", str(i), role="group-member", group_path=(i + 1,))


def check_importerr(v, excs):
    e = one(excs)
    assert e.exc_type == "ImportError"
    assert e.message.startswith(f"cannot import name 'loadz' from 'json' (/usr/lib/python{v}/json/__init__.py)")
    assert e.message.endswith(". Did you mean: 'load'?") == (vt(v) >= (3, 12))
    assert_frames(e, [("importerr.py", 1, "<module>", "from json import loadz")])


def check_indent(v, excs):
    e = one(excs)
    assert_exc(e, "IndentationError", "unexpected indent")
    assert_frames(e, [("indent.py", 3, None, "y = 2")])


def check_kbint(v, excs):
    e = one(excs)
    assert_exc(e, "KeyboardInterrupt", "")
    assert_frames(
        e, [("kbint.py", 4, "<module>", "work()"), ("kbint.py", 3, "work", "time.sleep(10)")]
    )


def check_logexc(v, excs):
    e = one(excs)
    assert_exc(e, "ValueError", "invalid literal for int() with base 10: 'abc'")
    assert_frames(e, [("logexc.py", 5, "<module>", 'int("abc")')])
    assert e.line_no == 2  # the "Traceback" line, after the logging line


def check_mnf(v, excs):
    e = one(excs)
    assert_exc(e, "ModuleNotFoundError", "No module named 'nonexistent_pkg_xyz'")
    assert_frames(e, [("mnf.py", 1, "<module>", "import nonexistent_pkg_xyz")])


def check_mp(v, excs):
    assert len(excs) == 2, summary(excs)
    remote, local = excs
    assert_exc(remote, "KeyError", "'b'")
    assert_frames(
        remote,
        [
            ("multiprocessing/pool.py", 125, "worker", "result = (True, func(*args, **kwds))"),
            ("multiprocessing/pool.py", 48, "mapstar", "return list(map(*args))"),
            ("mp.py", 3, "work", 'return {"a": 1}[x]'),
        ],
    )
    assert_exc(local, "KeyError", "'b'", role="cause", chain_index=1)
    assert_frames(
        local,
        [
            ("mp.py", 6, "<module>", 'p.map(work, ["b"])'),
            ("multiprocessing/pool.py", ANY, "map", ANY),
            ("multiprocessing/pool.py", ANY, "get", "raise self._value"),
        ],
    )


def check_multiline(v, excs):
    e = one(excs)
    assert_exc(
        e,
        "RuntimeError",
        'Error(s) in loading state_dict for Net:\n'
        '\tMissing key(s) in state_dict: "fc.weight", "fc.bias".\n'
        '\tUnexpected key(s) in state_dict: "head.weight".',
    )
    assert len(e.frames) == 1 and e.frames[0].source.startswith('raise RuntimeError("Error(s)')


def check_nameerr(v, excs):
    e = one(excs)
    suffix = ". Did you mean: 'lenght'?" if vt(v) >= (3, 10) else ""
    assert_exc(e, "NameError", "name 'length' is not defined" + suffix)
    assert_frames(e, [("nameerr.py", 3, "<module>", "print(length)")])


def check_nomsg(v, excs):
    e = one(excs)
    assert_exc(e, "NotImplementedError", "")
    assert_frames(e, [("nomsg.py", 3, "<module>", "f()"), ("nomsg.py", 2, "f", "raise NotImplementedError")])


def check_note(v, excs):
    if vt(v) < (3, 11):  # no add_note(): the AttributeError is chained as context
        assert len(excs) == 2, summary(excs)
        assert_exc(excs[0], "ValueError", "invalid literal for int() with base 10: 'abc'")
        assert_exc(excs[1], "AttributeError", "'ValueError' object has no attribute 'add_note'",
                   role="context", chain_index=1)
        return
    e = one(excs)
    # Documented heuristic: outside exception groups, note lines are kept in the message (they
    # print exactly like message lines); the first line is the real message.
    assert_exc(
        e,
        "ValueError",
        "invalid literal for int() with base 10: 'abc'\nwhile parsing row 17 of data.csv\nhint: check the delimiter",
    )
    assert e.message.split("\n")[0] == "invalid literal for int() with base 10: 'abc'"


def check_oserr(v, excs):
    e = one(excs)
    assert_exc(e, "FileNotFoundError", "[Errno 2] No such file or directory: '/nonexistent/dir/config.yaml'")
    assert_frames(e, [("oserr.py", 1, "<module>", 'open("/nonexistent/dir/config.yaml")')])


def check_plain(v, excs):
    e = one(excs)
    assert_exc(e, "TypeError", "'NoneType' object is not subscriptable")
    assert_frames(
        e,
        [
            ("plain.py", 8, "<module>", "main()"),
            ("plain.py", 6, "main", "return load(cfg)"),
            ("plain.py", 2, "load", 'return cfg["model"]["name"]'),
        ],
    )


def check_qualified(v, excs):
    e = one(excs)
    assert_exc(
        e, "json.decoder.JSONDecodeError",
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    )
    assert e.short_type == "JSONDecodeError"
    assert [f.function for f in e.frames] == ["<module>", "loads", "decode", "raw_decode"]


def check_qualified2(v, excs):
    assert len(excs) == 2, summary(excs)
    assert_exc(
        excs[0],
        "custom_mod.ValidationError",
        "1 validation error for Model\nage\n"
        "  Input should be a valid integer [type=int_parsing, input_value='x', input_type=str]",
    )
    assert excs[0].short_type == "ValidationError"
    local = "__main__.LocalError" if vt(v) < (3, 11) else "LocalError"
    assert_exc(excs[1], local, "wrapped", role="context", chain_index=1)
    assert excs[1].short_type == "LocalError"
    assert_frames(excs[1], [("qualified2.py", 6, "<module>", 'raise LocalError("wrapped")')])


def check_recursion(v, excs):
    e = one(excs)
    assert_exc(e, "RecursionError", "maximum recursion depth exceeded")
    # "[Previous line repeated 996 more times]" is not a frame
    assert_frames(
        e,
        [("recursion.py", 3, "<module>", "f(0)")] + [("recursion.py", 2, "f", "return f(n + 1)")] * 3,
    )


def check_strfail(v, excs):
    e = one(excs)
    assert_exc(e, "__main__.E" if vt(v) < (3, 11) else "E", "<exception str() failed>")
    assert e.short_type == "E"
    assert_frames(e, [("strfail.py", 4, "<module>", "raise E()")])


def check_syntax(v, excs):
    e = one(excs)
    assert_exc(e, "SyntaxError", "invalid syntax")
    assert_frames(e, [("syntax.py", 1, None, "def f(:")])


def check_syntax2(v, excs):
    e = one(excs)
    assert_exc(e, "SyntaxError", "expected ':'" if vt(v) >= (3, 10) else "invalid syntax")
    assert_frames(e, [("syntax2.py", 2, None, "if x == 1")])


def check_syntax_import(v, excs):
    e = one(excs)
    assert_exc(e, "SyntaxError", "expected ':'" if vt(v) >= (3, 10) else "invalid syntax")
    assert_frames(
        e, [("syntax_import.py", 3, "<module>", "import syntax2"), ("syntax2.py", 2, None, "if x == 1")]
    )


def check_systemexit(v, excs):
    # sys.exit("fatal: cannot continue") prints only the text: a bare message without a class
    e = one(excs)
    assert_exc(e, None, "fatal: cannot continue")
    assert e.frames == []


def check_taskgroup(v, excs):
    if vt(v) < (3, 11):
        e = one(excs)
        assert_exc(e, "AttributeError", "module 'asyncio' has no attribute 'TaskGroup'")
        assert e.frames[-1].function == "main"
        return
    assert len(excs) == 3, summary(excs)
    g = excs[0]
    assert_exc(g, "ExceptionGroup", "unhandled errors in a TaskGroup (2 sub-exceptions)")
    assert (g.frames[0].function, g.frames[0].line) == ("<module>", 8)
    assert g.frames[-1].file.endswith("asyncio/taskgroups.py") and g.frames[-1].function == "__aexit__"
    assert g.frames[-1].source == "raise me from None"
    assert len(g.frames) == 6
    for i, e in enumerate(excs[1:], start=1):
        assert_exc(e, "ValueError", f"task {i} failed", role="group-member", group_path=(i,))
        assert_frames(e, [("taskgroup.py", 3, "bad", 'raise ValueError(f"task {i} failed")')])


def check_thread(v, excs):
    e = one(excs)  # "Exception in thread Worker-1:" is not an exception line
    assert_exc(e, "ValueError", "boom in thread")
    assert [f.function for f in e.frames] == ["_bootstrap_inner", "run", "run"]
    assert e.frames[-1].file.endswith("thread.py") and e.frames[-1].line == 3
    assert e.line_no == 2


def check_typeerr(v, excs):
    e = one(excs)
    prefix = "A." if vt(v) >= (3, 10) else ""
    assert_exc(e, "TypeError", prefix + "f() takes 2 positional arguments but 3 were given")
    assert_frames(e, [("typeerr.py", 4, "<module>", "A().f(1, 2)")])


def check_unicodeerr(v, excs):
    e = one(excs)
    assert_exc(e, "UnicodeDecodeError", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte")


def check_unraisable(v, excs):
    e = one(excs)  # "Exception ignored in: <function ...>" is not an exception line
    assert_exc(e, "ValueError", "in del")
    assert_frames(e, [("unraisable.py", 3, "__del__", 'raise ValueError("in del")')])


def check_warn(v, excs):
    assert len(excs) == 2, summary(excs)
    assert_exc(excs[0], "DeprecationWarning", "this API is deprecated")
    assert_frames(
        excs[0],
        [("warn.py", 2, None, 'warnings.warn("this API is deprecated", DeprecationWarning, stacklevel=1)')],
    )
    assert_exc(excs[1], "UserWarning", "x")
    assert_frames(excs[1], [("warn.py", 3, None, 'warnings.warn("x")')])


CHECKS = {
    name[len("check_"):]: fn for name, fn in dict(globals()).items() if name.startswith("check_") and name != "check_invariants"
}
CHECKS["carets2_color"] = check_carets2  # 3.13 printed it in colour; ANSI codes are stripped

REF_CASES = [
    (p.parent.name, p.stem) for p in ref_files() if p.parent.name in VERSIONS
]


@needs_ref
def test_every_reference_case_is_checked():
    cases = {case for _, case in REF_CASES}
    assert cases, "no reference files found"
    assert cases <= set(CHECKS), sorted(cases - set(CHECKS))
    assert {v for v, _ in REF_CASES} == set(VERSIONS)


@needs_ref
@pytest.mark.parametrize(("version", "case"), REF_CASES or [("3.12", "plain")])
def test_reference_case(version, case):
    text = ref_text(version, case)
    excs = parse_text(text)
    check_invariants(excs, text)
    CHECKS[case](version, excs)


@needs_ref
@pytest.mark.parametrize("path", ref_files() or [REF / "missing.txt"], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_never_keeps_carets_or_escapes(path):
    text = path.read_text(encoding="utf-8")
    excs = parse_text(text)
    check_invariants(excs, text)
    for e in excs:
        for line in e.message.split("\n") + e.notes:
            assert not (line.strip() and not line.strip().strip("^~ ")), (path, line)
            assert "\x1b" not in line
        for f in e.frames:
            assert f.source is None or f.source.strip("^~ "), (path, f)


@needs_ref
def test_reference_color_output_matches_plain():
    plain = parse_text(ref_text("3.13", "carets2"))
    color_text = ref_text("3.13", "carets2_color")
    assert "\x1b[" in color_text
    assert parse_text(color_text) == plain


@needs_ref
def test_reference_pytest_output():
    text = (REF / "pytest_3.12.txt").read_text(encoding="utf-8")
    excs = parse_text(text)
    check_invariants(excs, text)
    # the "short test summary" repeats both failures: they are not reported twice
    assert len(excs) == 2, summary(excs)
    assert_exc(excs[0], "TypeError", "'NoneType' object is not subscriptable")
    assert_frames(
        excs[0],
        [
            ("test_x.py", 5, "test_parse", 'assert parse({"model": None}) == "x"'),
            ("test_x.py", 2, "parse", 'return cfg["model"]["name"]'),
        ],
    )
    assert_exc(
        excs[1], "AssertionError",
        "assert [1, 2, 3] == [1, 2, 4]\n\n  At index 2 diff: 3 != 4\n  Use -v to get more diff",
    )
    assert_frames(excs[1], [("test_x.py", 8, "test_eq", "assert [1, 2, 3] == [1, 2, 4]")])


@needs_ref
def test_reference_rich_output():
    text = (REF / "rich_3.12.txt").read_text(encoding="utf-8")
    e = one(parse_text(text))
    assert_exc(e, "TypeError", "'NoneType' object is not subscriptable")
    assert_frames(
        e,
        [
            ("richtb.py", 5, "<module>", 'load({"model": None})'),
            ("richtb.py", 4, "load", 'return cfg["model"]["name"]'),
        ],
    )


@needs_ref
def test_reference_pydantic_output():
    text = (REF / "pydantic_3.12.txt").read_text(encoding="utf-8")
    e = one(parse_text(text))
    assert e.exc_type == "pydantic_core._pydantic_core.ValidationError"
    assert e.short_type == "ValidationError"
    lines = e.message.split("\n")
    assert lines[0] == "2 validation errors for User"
    assert lines[1] == "id"
    assert lines[2].startswith("  Input should be a valid integer, unable to parse string as an integer")
    assert lines[3] == "    For further information visit https://errors.pydantic.dev/2.14/v/int_parsing"
    assert lines[4] == "name"
    assert lines[5] == "  Field required [type=missing, input_value={'id': 'abc'}, input_type=dict]"
    assert len(lines) == 7 and e.notes == []
    assert_frames(
        e,
        [
            ("pyd.py", 5, "<module>", 'User(id="abc")'),
            (".venv/lib/site-packages/pydantic/main.py", 280, "__init__", ANY),
        ],
    )


@needs_ref
def test_reference_truncated_at_every_line():
    """Every prefix of every reference file parses, and never reports more than the whole."""
    for path in ref_files():
        lines = path.read_text(encoding="utf-8").split("\n")
        whole = len(parse_text("\n".join(lines)))
        for cut in range(len(lines)):
            text = "\n".join(lines[:cut])
            excs = parse_text(text)
            check_invariants(excs, text)
            assert_nothing_left_open(text)
            assert len(excs) <= whole + 1, (path, cut, summary(excs))


# ------------------------------------------------------------------------------------------
# Literal tracebacks
# ------------------------------------------------------------------------------------------

PLAIN_312 = """\
Traceback (most recent call last):
  File "/app/main.py", line 8, in <module>
    main()
  File "/app/main.py", line 6, in main
    return load(cfg)
           ^^^^^^^^^
  File "/app/main.py", line 2, in load
    return cfg["model"]["name"]
           ~~~~~~~~~~~~^^^^^^^^
TypeError: 'NoneType' object is not subscriptable
"""

SGLANG_TB = """\
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2702, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1011, in init_aux_hidden
    raise ValueError("DSPARK requires explicit layer_ids for aux hidden capture.")
ValueError: DSPARK requires explicit layer_ids for aux hidden capture."""

SGLANG_FRAMES = [
    ("srt/managers/scheduler.py", 2702, "run_scheduler_process",
     "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
    ("srt/model_executor/model_runner.py", 1011, "init_aux_hidden",
     'raise ValueError("DSPARK requires explicit layer_ids for aux hidden capture.")'),
]


def assert_sglang(e, ranks=()):
    assert_exc(e, "ValueError", "DSPARK requires explicit layer_ids for aux hidden capture.")
    assert_frames(e, SGLANG_FRAMES)
    assert e.ranks == list(ranks)


def test_plain_traceback_with_carets():
    e = one(parse_text(PLAIN_312))
    assert_exc(e, "TypeError", "'NoneType' object is not subscriptable")
    assert_frames(
        e,
        [
            ("/app/main.py", 8, "<module>", "main()"),
            ("/app/main.py", 6, "main", "return load(cfg)"),
            ("/app/main.py", 2, "load", 'return cfg["model"]["name"]'),
        ],
    )
    assert e.line_no == 1 and e.ranks == []


def test_frames_without_source_and_repeated_lines():
    text = """\
Traceback (most recent call last):
  File "<string>", line 3, in <module>
  File "/app/r.py", line 2, in f
    return f(n + 1)
           ^^^^^^^^
  [Previous line repeated 996 more times]
  File "<frozen importlib._bootstrap>", line 1204, in _gcd_import
RecursionError: maximum recursion depth exceeded
"""
    e = one(parse_text(text))
    assert_frames(
        e,
        [
            ("<string>", 3, "<module>", None),
            ("/app/r.py", 2, "f", "return f(n + 1)"),
            ("<frozen importlib._bootstrap>", 1204, "_gcd_import", None),
        ],
    )
    assert e.message == "maximum recursion depth exceeded"


def test_313_multiline_statement_keeps_first_source_line():
    text = """\
Traceback (most recent call last):
  File "/app/g.py", line 2, in f
    raise ValueError(
    ...<3 lines>...
    )
ValueError: x
"""
    e = one(parse_text(text))
    assert e.frames[0].source == "raise ValueError("
    assert e.message == "x"


def test_chain_with_context_and_from_none():
    text = """\
Traceback (most recent call last):
  File "/app/a.py", line 3, in <module>
    d["missing"]
KeyError: 'missing'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/a.py", line 5, in <module>
    raise RuntimeError("lookup failed")
RuntimeError: lookup failed

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/a.py", line 9, in <module>
    raise SystemExit("bye") from e
SystemExit: bye
"""
    excs = parse_text(text)
    assert [(e.exc_type, e.role, e.chain_index) for e in excs] == [
        ("KeyError", "root", 0),
        ("RuntimeError", "context", 1),
        ("SystemExit", "cause", 2),
    ]
    assert [e.line_no for e in excs] == [1, 8, 15]


def test_from_none_is_a_single_root():
    text = 'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n    raise X() from None\nRuntimeError: lookup failed\n'
    e = one(parse_text(text))
    assert_exc(e, "RuntimeError", "lookup failed")


def test_two_separate_tracebacks_are_two_roots():
    excs = parse_text(PLAIN_312 + "\n" + PLAIN_312.replace("line 2,", "line 3,"))
    assert [(e.role, e.chain_index) for e in excs] == [("root", 0), ("root", 0)]


def test_chain_whose_first_exception_has_no_traceback():
    text = """\
ValueError: inner

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "a.py", line 3, in <module>
    raise RuntimeError("outer") from ValueError("inner")
RuntimeError: outer
"""
    excs = parse_text(text)
    assert len(excs) == 2
    assert_exc(excs[0], "ValueError", "inner")
    assert excs[0].frames == []
    assert_exc(excs[1], "RuntimeError", "outer", role="cause", chain_index=1)


def test_chain_of_one_thousand_exceptions():
    block = 'Traceback (most recent call last):\n  File "c.py", line {i}, in f{i}\n    raise E{i}()\nValueError: step {i}\n'
    sep = "\nDuring handling of the above exception, another exception occurred:\n\n"
    text = sep.join(block.format(i=i) for i in range(1000))
    excs = parse_text(text)  # its cost, linear in the chain: bench/adversarial.py
    assert len(excs) == 1000
    assert excs[0].role == "root" and excs[0].chain_index == 0
    assert all(e.role == "context" and e.chain_index == i for i, e in enumerate(excs) if i)
    assert excs[-1].message == "step 999" and excs[-1].frames[0].line == 999


def test_exception_group_literal_with_nested_group_traceback_and_truncation():
    text = """\
  + Exception Group Traceback (most recent call last):
  |   File "/app/m.py", line 9, in <module>
  |     raise ExceptionGroup("outer", [inner, ValueError("a")])
  | ExceptionGroup: outer (2 sub-exceptions)
  | note on outer
  +-+---------------- 1 ----------------
    | Exception Group Traceback (most recent call last):
    |   File "/app/m.py", line 4, in make
    |     raise ExceptionGroup("inner", [KeyError("k"), OSError("o")])
    | ExceptionGroup: inner (2 sub-exceptions)
    +-+---------------- 1 ----------------
      | KeyError: 'k'
      +---------------- 2 ----------------
      | OSError: o
      +------------------------------------
    +---------------- 2 ----------------
    | ValueError: a
    +---------------- ... ----------------
    | and 3 more exceptions
    +------------------------------------

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/m.py", line 12, in <module>
    raise RuntimeError("startup") from eg
RuntimeError: startup
"""
    excs = parse_text(text)
    assert summary(excs) == [
        ("root", 0, (), "ExceptionGroup", "outer (2 sub-exceptions)"),
        ("group-member", 0, (1,), "ExceptionGroup", "inner (2 sub-exceptions)"),
        ("group-member", 0, (1, 1), "KeyError", "'k'"),
        ("group-member", 0, (1, 2), "OSError", "o"),
        ("group-member", 0, (2,), "ValueError", "a"),
        ("cause", 1, (), "RuntimeError", "startup"),
    ]
    assert excs[0].notes == ["note on outer"]
    assert_frames(excs[1], [("/app/m.py", 4, "make", 'raise ExceptionGroup("inner", [KeyError("k"), OSError("o")])')])
    assert [e.line_no for e in excs] == [1, 7, 12, 14, 17, 24]


def test_exception_group_without_traceback():
    text = """\
  | ExceptionGroup: never raised (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | ValueError: 1
    +---------------- 2 ----------------
    | ValueError: 2
    +------------------------------------
"""
    excs = parse_text(text)
    assert summary(excs) == [
        ("root", 0, (), "ExceptionGroup", "never raised (2 sub-exceptions)"),
        ("group-member", 0, (1,), "ValueError", "1"),
        ("group-member", 0, (2,), "ValueError", "2"),
    ]


def test_exception_group_with_many_members():
    lines = [
        "  + Exception Group Traceback (most recent call last):",
        '  |   File "g.py", line 1, in <module>',
        "  | ExceptionGroup: big (1000 sub-exceptions)",
    ]
    for i in range(1, 1001):
        first = "  +-+---------------- 1 ----------------"
        lines.append(first if i == 1 else f"    +---------------- {i} ----------------")
        lines.append(f"    | ValueError: v{i}")
    lines.append("    +------------------------------------")
    excs = parse_text("\n".join(lines))
    assert len(excs) == 1001
    assert [e.group_path for e in excs[1:]] == [(i,) for i in range(1, 1001)]
    assert all(e.role == "group-member" for e in excs[1:])
    assert excs[-1].message == "v1000"


def test_deeply_nested_group_framing_is_bounded():
    lines = ["  + Exception Group Traceback (most recent call last):",
             '  |   File "g.py", line 1, in <module>',
             "  | ExceptionGroup: level 0 (1 sub-exception)"]
    for depth in range(1, 1000):
        pad = "  " * depth
        lines.append(f"{pad}+-+---------------- 1 ----------------")
        lines.append(f"{pad}  | ExceptionGroup: level {depth} (1 sub-exception)")
    text = "\n".join(lines)
    excs = parse_text(text)
    check_invariants(excs, text)
    assert excs[0].message == "level 0 (1 sub-exception)"
    assert excs[1].group_path == (1,) and excs[2].group_path == (1, 1)
    assert max(len(e.group_path) for e in excs) < 100


def test_group_note_vs_member_message_heuristic():
    text = """\
  + Exception Group Traceback (most recent call last):
  |   File "g.py", line 1, in <module>
  | ExceptionGroup: first line
  | second line (1 sub-exception)
  | a note
  | another note
  +-+---------------- 1 ----------------
    | ValueError: member message
    | member note or second line
    +------------------------------------
"""
    g, member = parse_text(text)
    assert g.message == "first line\nsecond line (1 sub-exception)"
    assert g.notes == ["a note", "another note"]
    assert member.message == "member message\nmember note or second line" and member.notes == []


def test_module_qualified_classes():
    text = PLAIN_312.replace(
        "TypeError: 'NoneType' object is not subscriptable",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.10 GiB",
    )
    e = one(parse_text(text))
    assert e.exc_type == "torch.OutOfMemoryError"
    assert e.short_type == "OutOfMemoryError"
    assert e.message.startswith("CUDA out of memory. Tried to allocate 20.00 MiB.")
    for exc_type in ["__main__.LocalError", "LocalError", "pydantic_core._pydantic_core.ValidationError",
                     "f.<locals>.Custom", "ray.exceptions.RayTaskError(ValueError)"]:
        e = one(parse_text(PLAIN_312.replace("TypeError", exc_type)))
        assert e.exc_type == exc_type
    assert one(parse_text("ray.exceptions.RayTaskError(ValueError): boom")).short_type == "RayTaskError(ValueError)"


def test_short_type_without_class():
    assert ParsedException(exc_type=None, message="x").short_type is None
    assert ParsedException(exc_type="ValueError", message="x").short_type == "ValueError"


def test_syntax_error_without_header_and_with_carets():
    text = """\
  File "/app/conf.py", line 12
    print "hello"
    ^^^^^^^^^^^^^
SyntaxError: Missing parentheses in call to 'print'. Did you mean print(...)?
"""
    e = one(parse_text(text))
    assert_exc(e, "SyntaxError", "Missing parentheses in call to 'print'. Did you mean print(...)?")
    assert_frames(e, [("/app/conf.py", 12, None, 'print "hello"')])


def test_remote_traceback_literal_in_a_log():
    text = """\
2026-08-28 05:10:05,000 ERROR pool failed
multiprocessing.pool.RemoteTraceback: 
\"\"\"
Traceback (most recent call last):
  File "/app/w.py", line 3, in work
    return 1 / x
ZeroDivisionError: division by zero
\"\"\"

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/m.py", line 6, in <module>
    p.map(work, [0])
ZeroDivisionError: division by zero
"""
    remote, local = parse_text(text)
    assert_exc(remote, "ZeroDivisionError", "division by zero")
    assert_frames(remote, [("/app/w.py", 3, "work", "return 1 / x")])
    assert_exc(local, "ZeroDivisionError", "division by zero", role="cause", chain_index=1)


def test_remote_traceback_name_without_quotes_is_an_ordinary_exception():
    e = one(parse_text("concurrent.futures.process._RemoteTraceback: \nsomething else"))
    assert e.exc_type == "concurrent.futures.process._RemoteTraceback"


@pytest.mark.parametrize("tail", ["", "\n"])
def test_remote_traceback_line_at_end_of_input(tail):
    text = "x\ny\nmultiprocessing.pool.RemoteTraceback: " + tail
    e = one(parse_text(text))
    assert (e.exc_type, e.message, e.line_no) == ("multiprocessing.pool.RemoteTraceback", "", 3)
    assert_nothing_left_open(text)
    grouped = (
        "  | ExceptionGroup: e (1 sub-exception)\n  +-+---------------- 1 ----------------\n"
        "    | multiprocessing.pool.RemoteTraceback: \n    +------------------------------------" + tail
    )
    assert summary(parse_text(grouped)) == [
        ("root", 0, (), "ExceptionGroup", "e (1 sub-exception)"),
        ("group-member", 0, (1,), "multiprocessing.pool.RemoteTraceback", ""),
    ]
    assert_nothing_left_open(grouped)


def test_thread_unraisable_and_logging_exception_headers():
    text = """\
Exception in thread Thread-3 (worker):
Traceback (most recent call last):
  File "/app/t.py", line 3, in worker
    raise ValueError("boom in thread")
ValueError: boom in thread
Exception ignored in: <function Conn.__del__ at 0x7f0307888b80>
Traceback (most recent call last):
  File "/app/c.py", line 9, in __del__
    self.close()
OSError: [Errno 9] Bad file descriptor
2026-12-02 13:10:07,511 ERROR [app.worker] failed to parse input
Traceback (most recent call last):
  File "/app/l.py", line 5, in <module>
    int("abc")
ValueError: invalid literal for int() with base 10: 'abc'
"""
    excs = parse_text(text)
    assert [(e.exc_type, e.message, e.line_no) for e in excs] == [
        ("ValueError", "boom in thread", 2),
        ("OSError", "[Errno 9] Bad file descriptor", 7),
        ("ValueError", "invalid literal for int() with base 10: 'abc'", 12),
    ]


def test_pytest_short_format_and_summary_only():
    text = """\
________________________________ test_parse ________________________________
test_x.py:5: in test_parse
    assert parse({"model": None}) == "x"
test_x.py:2: in parse
    return cfg["model"]["name"]
E   TypeError: 'NoneType' object is not subscriptable
=========================== short test summary info ============================
FAILED test_x.py::test_parse - TypeError: 'NoneType' object is not subscriptable
FAILED tests/test_y.py::TestY::test_other[param-1] - KeyError: 'x'
ERROR tests/test_z.py - ModuleNotFoundError: No module named 'foo'
FAILED tests/test_w.py::test_eq - assert 1 == 2
"""
    excs = parse_text(text)
    assert [(e.exc_type, e.message) for e in excs] == [
        ("TypeError", "'NoneType' object is not subscriptable"),
        ("KeyError", "'x'"),
        ("ModuleNotFoundError", "No module named 'foo'"),
        ("AssertionError", "assert 1 == 2"),
    ]
    assert_frames(
        excs[0],
        [
            ("test_x.py", 5, "test_parse", 'assert parse({"model": None}) == "x"'),
            ("test_x.py", 2, "parse", 'return cfg["model"]["name"]'),
        ],
    )
    assert_frames(excs[1], [("tests/test_y.py", None, "test_other", None)])
    assert_frames(excs[2], [("tests/test_z.py", None, None, None)])


def test_faulthandler_literal_prefers_current_thread():
    text = """\
Fatal Python error: Segmentation fault

Thread 0x00007f1 (most recent call first):
  File "/app/other.py", line 10 in idle

Current thread 0x00007f2 (most recent call first):
  File "/app/crash.py", line 4 in crash
  File "/app/crash.py", line 9 in <module>

Extension modules: numpy.core._multiarray_umath (total: 1)
"""
    e = one(parse_text(text))
    assert_exc(e, None, "Fatal Python error: Segmentation fault")
    assert_frames(e, [("/app/crash.py", 9, "<module>", None), ("/app/crash.py", 4, "crash", None)])


def test_truncated_traceback_reports_its_frames_without_class():
    e = one(parse_text('Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n    main()\n'))
    assert e.exc_type is None and e.message == ""
    assert_frames(e, [("a.py", 3, "<module>", "main()")])
    assert parse_text("Traceback (most recent call last):\n") == []


def test_flat_traceback_without_indentation():
    text = "\n".join(line.strip() for line in SGLANG_TB.split("\n"))
    assert_sglang(one(parse_text(text)))
    flat = 'Traceback (most recent call last):\nFile "<string>", line 2, in g\nNameError: name \'x\' is not defined'
    e = one(parse_text(flat))
    assert_exc(e, "NameError", "name 'x' is not defined")
    assert_frames(e, [("<string>", 2, "g", None)])


def test_logging_stack_info_is_not_an_exception():
    text = "2026-08-28 05:10:05,123 INFO hello\nStack (most recent call last):\n  File \"a.py\", line 3, in <module>\n    main()\n2026-08-28 05:10:05,124 INFO bye"
    assert parse_text(text) == []


def test_message_ends_at_blank_line_and_at_a_new_log_record():
    text = PLAIN_312 + "\nsomething printed later\n"
    assert one(parse_text(text)).message == "'NoneType' object is not subscriptable"
    # Documented limit: unprefixed text right after the exception line, with no blank line in
    # between, cannot be told from a message line, so it is kept (the first line is unchanged).
    text = PLAIN_312 + "something printed later\n"
    assert one(parse_text(text)).message == "'NoneType' object is not subscriptable\nsomething printed later"
    logged = "2026-08-28 05:10:05,100 ERROR failed\n" + PLAIN_312 + "2026-08-28 05:10:05,200 INFO next request\n"
    assert one(parse_text(logged)).message == "'NoneType' object is not subscriptable"


# ------------------------------------------------------------------------------------------
# ANSI and terminal escapes
# ------------------------------------------------------------------------------------------


def test_ansi_csi_and_osc_sequences_are_removed():
    text = (
        "\x1b]0;window title\x07\x1b[?25lTraceback (most recent call last):\n"
        '  File \x1b[35m"/app/x.py"\x1b[0m, line \x1b[35m3\x1b[0m, in \x1b[35m<module>\x1b[0m\n'
        "    \x1b[31mprint(a[0] / b)\x1b[0m\n"
        "          \x1b[31m~~~~~\x1b[0m\x1b[1;31m^\x1b[0m\x1b[31m~~\x1b[0m\n"
        "\x1b[1;35mZeroDivisionError\x1b[0m: \x1b[35mdivision by zero \x1b]8;;https://x.example\x1b\\(docs)\x1b]8;;\x1b\\\x1b[0m\n"
    )
    e = one(parse_text(text))
    assert_exc(e, "ZeroDivisionError", "division by zero (docs)")
    assert_frames(e, [("/app/x.py", 3, "<module>", "print(a[0] / b)")])


def test_carriage_returns_and_crlf():
    text = PLAIN_312.replace("\n", "\r\n")
    assert one(parse_text(text)).message == "'NoneType' object is not subscriptable"
    progress = "Loading 10%\rLoading 100%\r\n" + PLAIN_312
    assert one(parse_text(progress)).line_no == 2


# ------------------------------------------------------------------------------------------
# Log prefixes, ranks, interleaving, deduplication
# ------------------------------------------------------------------------------------------


def prefixed(prefix: str, text: str) -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


@pytest.mark.parametrize(
    ("prefix", "ranks"),
    [
        ("2026-08-28 05:10:05,123 ERROR ", []),
        ("2026-08-28 05:10:05,123 - sglang.srt.managers.scheduler - ERROR - ", []),
        ("2026-08-28T05:10:05.123456789Z ", []),
        ("2026-08-28 05:10:05.123 | ERROR    | sglang.launch:main:12 - ", []),
        ("ERROR 08-28 05:10:05 [model_runner.py:1011] ", []),
        ("[2026-08-28 05:10:05 TP0] ", ["TP0"]),
        ("[2026-08-28 05:10:05 DP1 TP3] ", ["DP1 TP3"]),
        ("[2026-08-28 05:10:05] ", []),
        ("[rank3]: ", ["rank3"]),
        ("(RayWorker pid=123) ", ["pid=123"]),
        ("(RayWorker pid=123, ip=10.0.0.2) ", ["pid=123, ip=10.0.0.2"]),
        ("(raylet, ip=10.0.0.1) ", ["raylet, ip=10.0.0.1"]),
        ("(VllmWorkerProcess pid=4567) ERROR 08-28 05:10:05 multiproc_worker_utils.py:226] ", ["pid=4567"]),
        ("service_1  | ", ["service_1"]),
        ("16:50:39 web.1            | ", ["web.1"]),  # honcho's and foreman's Procfile runners (held-out frappe#7149)
        ("api-server-1  | [2026-08-28 05:10:05 TP2] ", ["api-server-1 TP2"]),
        ("E0828 05:10:05.123456 12345 scheduler.cc:42] ", []),
        ("Aug 28 05:10:05 gpu-node-3 python3[9876]: ", ["pid=9876"]),
        ("\x1b[36m(RayWorker pid=77)\x1b[0m ", ["pid=77"]),
    ],
)
def test_prefix_on_every_line_is_removed(prefix, ranks):
    excs = parse_text(prefixed(prefix, SGLANG_TB))
    assert_sglang(one(excs), ranks)


def test_padded_level_keeps_relative_indentation():
    # logging's "%(levelname)-8s" pads the level; one space after the prefix is removed, the
    # padding stays and the traceback is read relative to its header's column.
    text = prefixed("2026-08-28 05:10:05,123 ERROR    ", SGLANG_TB)
    assert_sglang(one(parse_text(text)))


def test_chained_traceback_with_prefix_and_blank_prefixed_lines():
    chained = PLAIN_312.rstrip("\n").replace("TypeError", "KeyError") + (
        "\n\nThe above exception was the direct cause of the following exception:\n\n" + SGLANG_TB
    )
    excs = parse_text(prefixed("[2026-08-28 05:10:05 TP5] ", chained))
    assert [(e.exc_type, e.role, e.chain_index, e.ranks) for e in excs] == [
        ("KeyError", "root", 0, ["TP5"]),
        ("ValueError", "cause", 1, ["TP5"]),
    ]


def test_eight_interleaved_tp_ranks_give_one_finding():
    per_rank = [prefixed(f"[2026-08-28 05:10:05 TP{r}] ", SGLANG_TB).split("\n") for r in range(8)]
    noise = "[2026-08-28 05:10:04 TP0] Load weight end. type=LlamaForCausalLM, avail mem=12.34 GB"
    lines = [noise]
    for row in zip(*per_rank):  # line i of every rank, then line i+1 of every rank, ...
        lines.extend(row)
    lines.append("[2026-08-28 05:10:06] Received sigquit from a child process. It usually means the child failed.")
    e = one(parse_text("\n".join(lines)))
    assert_sglang(e, [f"TP{r}" for r in range(8)])
    assert e.line_no == 2


def test_interleaved_ranks_with_different_errors_are_separated():
    other = SGLANG_TB.replace("ValueError: DSPARK requires explicit layer_ids for aux hidden capture.",
                              "torch.OutOfMemoryError: CUDA out of memory.")
    a = prefixed("[2026-08-28 05:10:05 TP1] ", SGLANG_TB).split("\n")
    b = prefixed("[2026-08-28 05:10:05 TP0] ", other).split("\n")
    c = prefixed("[2026-08-28 05:10:05 TP2] ", SGLANG_TB).split("\n")
    lines = [line for row in zip(a, b, c) for line in row]
    excs = parse_text("\n".join(lines))
    assert [(e.exc_type, e.ranks) for e in excs] == [
        ("ValueError", ["TP1", "TP2"]),
        ("torch.OutOfMemoryError", ["TP0"]),
    ]


def test_ranks_are_in_first_seen_order():
    lines = []
    for r in [3, 1, 2]:
        lines.extend(prefixed(f"[2026-08-28 05:10:05 TP{r}] ", SGLANG_TB).split("\n"))
    assert one(parse_text("\n".join(lines))).ranks == ["TP3", "TP1", "TP2"]


def test_sglang_style_prefix_on_first_line_only():
    text = (
        "[2026-08-28 05:10:04 TP0] Init torch distributed begin.\n"
        "[2026-08-28 05:10:05 TP0] Scheduler hit an exception: " + SGLANG_TB + "\n\n"
        "[2026-08-28 05:10:05 TP1] Scheduler hit an exception: " + SGLANG_TB + "\n\n"
        "[2026-08-28 05:10:06] Received sigquit from a child process. It usually means the child failed.\n"
    )
    e = one(parse_text(text))
    assert_sglang(e, ["TP0", "TP1"])
    assert e.line_no == 2


def test_same_traceback_twice_in_one_log_is_reported_once():
    text = "starting\n" + PLAIN_312 + "\nretrying\n" + PLAIN_312
    e = one(parse_text(text))
    assert e.line_no == 2 and e.ranks == []


def test_exception_group_inside_prefixed_log():
    text = """\
  + Exception Group Traceback (most recent call last):
  |   File "/app/t.py", line 8, in <module>
  |     asyncio.run(main())
  | ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | ValueError: task 1 failed
    +---------------- 2 ----------------
    | ValueError: task 2 failed
    +------------------------------------"""
    excs = parse_text(prefixed("(RayWorker pid=42) ", text))
    assert [(e.exc_type, e.group_path, e.ranks) for e in excs] == [
        ("ExceptionGroup", (), ["pid=42"]),
        ("ValueError", (1,), ["pid=42"]),
        ("ValueError", (2,), ["pid=42"]),
    ]


def test_mixed_service_log_file():
    text = (LOGS / "mixed_service.txt").read_text(encoding="utf-8")
    excs = parse_text(text)
    check_invariants(excs, text)
    assert [(e.exc_type, e.role, e.chain_index, e.ranks, e.line_no) for e in excs] == [
        ("json.decoder.JSONDecodeError", "root", 0, [], 9),
        ("app.errors.ConfigError", "cause", 1, [], 22),
        ("ModuleNotFoundError", "root", 0, ["api_1"], 32),
        ("DeprecationWarning", "root", 0, [], 36),
    ]
    assert excs[1].message == "job 17: bad config"  # the next log record is not message text
    assert_frames(excs[2], [("/srv/api/main.py", 12, "<module>", "import torch")])
    assert_frames(excs[3], [("/srv/app/legacy.py", 7, None, "import pkg_resources")])


# ------------------------------------------------------------------------------------------
# Bare lines
# ------------------------------------------------------------------------------------------


def test_bare_exception_line():
    e = one(parse_text("ValueError: message"))
    assert_exc(e, "ValueError", "message")
    assert e.frames == [] and e.line_no == 1


def test_bare_message_without_class():
    e = one(parse_text("DSPARK requires explicit layer_ids for aux hidden capture.\n"))
    assert_exc(e, None, "DSPARK requires explicit layer_ids for aux hidden capture.")
    assert e.frames == []
    e = one(parse_text("\n\n  [2026-08-28 05:10:05 TP4] DSPARK requires explicit layer_ids.\n".strip()))
    assert (e.exc_type, e.message, e.ranks) == (None, "DSPARK requires explicit layer_ids.", ["TP4"])
    e = one(parse_text("load failed\n\nsee the log for details\nretry later"))
    assert e.message == "load failed\nsee the log for details\nretry later"


def test_bare_multiline_pydantic_message():
    text = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for Model\n"
        "age\n"
        "  Input should be a valid integer [type=int_parsing, input_value='x', input_type=str]\n"
    )
    e = one(parse_text(text))
    assert e.exc_type == "pydantic_core._pydantic_core.ValidationError"
    assert e.message == "1 validation error for Model\nage\n  Input should be a valid integer [type=int_parsing, input_value='x', input_type=str]"


def test_ordinary_log_lines_are_not_exceptions():
    text = "\n".join([
        "INFO: server started",
        "Note: something",
        "http://x",
        "https://example.com/a:b",
        "Status: ok",
        "Error: could not connect (this CLI prints plain Error:)",
        "WARNING: the cache is cold",
        "Usage: prog [options]",
        "Exception in thread Worker-1:",
        "Exception ignored in: <function A.__del__ at 0x1>",
        "2026-08-28 05:10:05,123 INFO retrying after ConnectionError: timeout",
    ])
    assert parse_text(text) == []


def test_empty_and_blank_input():
    assert parse_text("") == []
    assert parse_text("\n\n   \n") == []


@pytest.mark.parametrize(
    ("line", "exc_type"),
    [
        ("ConnectionError: refused", "ConnectionError"),
        ("torch.OutOfMemoryError: CUDA out of memory.", "torch.OutOfMemoryError"),
        ("KeyboardInterrupt", "KeyboardInterrupt"),
        ("StopIteration", "StopIteration"),
        ("SystemExit: 2", "SystemExit"),
        ("Exception: generic", "Exception"),
        ("DeprecationWarning: old", "DeprecationWarning"),
        ("app.errors.CustomException: x", "app.errors.CustomException"),
        ("KeyError: 'x'", "KeyError"),
        ("Info: not a class", None),
        ("Note: not a class", None),
        ("Error: not a class", None),
        ("http://x", None),
        ("somemodule.helper: not a class", None),
        ("Timeout: not a class either", None),
    ],
)
def test_class_shape_rule_in_a_larger_log(line, exc_type):
    text = "INFO starting\nINFO loading\nINFO ready\n" + line + "\nINFO shutting down\n"
    found = [e.exc_type for e in parse_text(text)]
    assert found == ([exc_type] if exc_type else [])


# ------------------------------------------------------------------------------------------
# API, streaming, bounded resources
# ------------------------------------------------------------------------------------------


def test_frame_is_frozen_and_hashable():
    f = Frame("a.py", 1, "f", "x = 1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.line = 2  # type: ignore[misc]
    assert {f, Frame("a.py", 1, "f", "x = 1")} == {f}


def test_iter_exceptions_accepts_file_like_lines_and_bytes():
    lines = [line + "\n" for line in PLAIN_312.split("\n")]
    a = list(iter_exceptions(lines))
    b = list(iter_exceptions([PLAIN_312]))  # one chunk holding many lines
    c = list(iter_exceptions([line.encode() for line in lines]))
    assert a == b == c == parse_text(PLAIN_312)


def test_iter_exceptions_is_lazy():
    consumed = 0

    def lines():
        nonlocal consumed
        for i in itertools.count():
            consumed += 1
            if i % 50 == 0:
                yield from PLAIN_312.replace("line 2,", f"line {i},").split("\n")
            else:
                yield f"2026-08-28 05:10:05,123 INFO request {i}"

    it = iter_exceptions(lines())
    first = next(it)
    second = next(it)
    assert first.frames[-1].line == 0 and second.frames[-1].line == 50
    assert consumed < 200  # an endless input is read only as far as needed


def test_streaming_memory_is_bounded():
    tb_a = PLAIN_312.split("\n")
    tb_b = SGLANG_TB.split("\n")
    filler = "x" * 400
    n_lines = 25_000

    def lines():
        for i in range(n_lines):
            if i % 500 == 0:
                yield from (tb_a if i % 1000 else tb_b)
            yield f"2026-08-28 05:10:05,123 INFO request {i} {filler}"

    total_chars = n_lines * 440
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_exceptions(lines()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 2
    assert peak < 1_000_000 < total_chars  # constant (~20 KB measured), not the ~11 MB of input


def test_ten_thousand_exceptions_in_one_log():
    blocks = [
        f'Traceback (most recent call last):\n  File "/app/job.py", line {i}, in run\n    work({i})\nRuntimeError: job {i} failed\n'
        for i in range(10_000)
    ]
    text = "".join(blocks)
    excs = parse_text(text)  # its cost, linear in the log: bench/adversarial.py
    assert len(excs) == 10_000
    assert [e.message for e in excs[:3]] == ["job 0 failed", "job 1 failed", "job 2 failed"]
    assert excs[-1].frames[0].line == 9999 and excs[-1].line_no == 4 * 9999 + 1


def test_huge_line_is_capped():
    # what it costs (the same at 2.5 and 10 MB): bench/adversarial.py
    e = one(parse_text("ValueError: " + "x" * 10_000_000 + "\nnext"))
    assert e.exc_type == "ValueError"
    assert len(e.message) <= parse.MAX_LINE_CHARS + len("\nnext")
    excs = parse_text(PLAIN_312 + "\n" + "junk " * 2_000_000 + "\n" + PLAIN_312)
    assert len(excs) == 1


@pytest.mark.parametrize(
    "line",
    [
        'File "' + '", line 1' * 6000,
        "a." * 30000 + "!",
        "[" * 60000,
        "(" * 30000 + "pid=1" + ")" * 30000,
        "1:" * 30000,
        "_ " * 30000,
        "\u2502" + "x:1 in " * 8000,
        "\x1b[" * 30000,
        "\x1b]" * 30000,
        "E" + " " * 60000 + "x",
        "x" * 60000 + ": y",
        "2026-08-28 05:10:05" + " -" * 30000,
        "svc" + " " * 60000 + "|",
        "+" + "-" * 60000,
        "  | " * 15000 + "ValueError: x (2 sub-exceptions)",
    ],
    ids=lambda s: repr(s[:12]),
)
def test_adversarial_lines_are_read(line):
    # Lines built to make the parser's regexes backtrack; that their cost is linear in their
    # length is shown by bench/adversarial.py (a ratio within one run, not a timed test).
    text = "\n".join([line, PLAIN_312, line, line])
    excs = parse_text(text)
    check_invariants(excs, text)


def test_internal_errors_are_contained(monkeypatch):
    """In production a bug on one line must not escape: the parser resets and continues."""
    monkeypatch.setattr(driver, "_RAISE_INTERNAL_ERRORS", False)
    calls = {"n": 0}
    real = chain.ChainParser._on_frames

    def flaky(self, t, no, hp):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated bug")
        return real(self, t, no, hp)

    monkeypatch.setitem(chain.HANDLERS, chain.FRAMES, flaky)
    excs = parse_text(PLAIN_312 + "\n" + SGLANG_TB)
    assert excs[-1].exc_type == "ValueError"  # what follows the bad line is still found


# ------------------------------------------------------------------------------------------
# Property tests: never raise, stay sane
# ------------------------------------------------------------------------------------------

REF_TEXTS = [p.read_text(encoding="utf-8") for p in ref_files()] or [PLAIN_312, SGLANG_TB]
REF_LINES = sorted({line for text in REF_TEXTS for line in text.split("\n")}) + SGLANG_TB.split("\n")
PREFIXES = [
    "", "", "", "[2026-08-28 05:10:05 TP0] ", "[2026-08-28 05:10:05 TP1] ", "(RayWorker pid=1) ",
    "2026-08-28 05:10:05,123 ERROR ", "svc_1  | ", "[rank0]: ", "2026-08-28 05:10:05,123 - app - ERROR - ",
    "(VllmWorkerProcess pid=4567) ERROR 08-28 05:10:05 multiproc_worker_utils.py:226] ",
    "2026-08-28 05:10:05.123 | ERROR    | app:main:3 - ", "Aug 28 05:10:05 host python3[9]: ",
    "  | ", "    | ", "E       ", "\x1b[31m",
]
LOG_PREFIXES = PREFIXES[3:13]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.text(max_size=3000))
def test_property_arbitrary_text(text):
    check_invariants(parse_text(text), text)
    assert_nothing_left_open(text)


@FAST
@given(st.sampled_from(REF_TEXTS), st.integers(0, 5000), st.integers(0, 5000))
def test_property_random_slices_of_reference(text, a, b):
    piece = text[min(a, b):max(a, b)]
    check_invariants(parse_text(piece), piece)
    assert_nothing_left_open(piece)


@FAST
@given(st.lists(st.tuples(st.sampled_from(PREFIXES), st.sampled_from(REF_LINES)), max_size=120))
def test_property_shuffled_reference_lines_with_prefixes(pairs):
    text = "\n".join(prefix + line for prefix, line in pairs)
    check_invariants(parse_text(text), text)
    assert_nothing_left_open(text)


@FAST
@given(st.binary(max_size=6000), st.sampled_from(["utf-8", "latin-1", "utf-16-le"]))
def test_property_binary_junk(data, encoding):
    text = data.decode(encoding, errors="replace")
    check_invariants(parse_text(text), text)
    list(iter_exceptions([data]))  # raw bytes go through iter_exceptions too


@FAST
@given(st.sampled_from(REF_TEXTS), st.lists(st.sampled_from(LOG_PREFIXES), min_size=1, max_size=3))
def test_property_prefixing_every_line_keeps_the_findings(text, prefixes):
    """A traceback reads the same with a log prefix on every line (the rank aside)."""
    prefix = "".join(dict.fromkeys(prefixes))  # several layers, e.g. docker + sglang
    plain = [(e.exc_type, e.message, e.frames, e.role, e.group_path) for e in parse_text(text)]
    wrapped_text = prefixed(prefix, text)
    wrapped = parse_text(wrapped_text)
    check_invariants(wrapped, wrapped_text)
    if any(e.exc_type is None and not e.frames for e in parse_text(text)):
        return  # bare messages ("fatal: cannot continue") are not affected by prefixes the same way
    assert [(e.exc_type, e.message, e.frames, e.role, e.group_path) for e in wrapped] == plain


@needs_ref
def test_every_reference_file_reads_the_same_under_every_log_prefix():
    """Deterministic companion of the property above: all files x every single prefix, and
    a few two-layer prefixes (docker-compose around sglang, Ray around vLLM)."""
    combos = LOG_PREFIXES + ["svc_1  | [2026-08-28 05:10:05 TP1] ", "(RayWorker pid=1) [rank0]: "]
    for text in REF_TEXTS:
        base = parse_text(text)
        if any(e.exc_type is None and not e.frames for e in base):
            continue  # bare messages: see the property test
        plain = [(e.exc_type, e.message, e.frames, e.role, e.chain_index, e.group_path) for e in base]
        for prefix in combos:
            got = parse_text(prefixed(prefix, text))
            assert [(e.exc_type, e.message, e.frames, e.role, e.chain_index, e.group_path) for e in got] == plain, (
                prefix, text[:80])


# Markdown around a paste (shapes seen in bench/realworld/cases/) -----------------------------

FENCED = "```python\nTraceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n    main()\nValueError: bad input\n```\n</details>\n\nAny idea?"


def test_a_closing_fence_or_tag_ends_the_message():
    (e,) = parse.parse_text(FENCED)
    assert (e.exc_type, e.message, len(e.frames)) == ("ValueError", "bad input", 1)


def test_a_quoted_traceback_is_read_as_if_unquoted():
    quoted = "\n".join("> " + line if line else ">" for line in FENCED.splitlines()[1:5]) + "\n> \n> Thanks"
    (e,) = parse.parse_text(quoted)
    assert (e.exc_type, e.message, e.frames[0].file, e.frames[0].source) == ("ValueError", "bad input", "app.py", "main()")


def test_pytests_failing_line_marker_is_not_a_quote():
    text = (
        "    def test_x():\n>       raise ValueError('boom')\nE       ValueError: boom\n\ntests/test_x.py:2: ValueError"
    )
    (e,) = parse.parse_text(text)
    assert (e.exc_type, e.message) == ("ValueError", "boom")


@pytest.mark.parametrize(
    "prose, expected",
    [
        ("I get an error: `AttributeError: 'function' object has no attribute 'group'`",
         ("AttributeError", "'function' object has no attribute 'group'")),
        ("An error occurred:\n**ModuleNotFoundError: No module named 'vllm._C'**\nSo, why?",
         ("ModuleNotFoundError", "No module named 'vllm._C'")),
        ('the error, "ImportError: cannot import name \'X\' from \'y\'" appears', ("ImportError", "cannot import name 'X' from 'y'")),
        ("print(Model.model_json_schema())\n# raises KeyError: 'Output__1'", ("KeyError", "'Output__1'")),
        ("d = {a: 2}\n\n>>> TypeError: unhashable type: 'A'", ("TypeError", "unhashable type: 'A'")),
    ],
)  # fmt: skip
def test_an_exception_named_in_prose_is_reported_when_nothing_else_is(prose, expected):
    (e,) = parse.parse_text(prose)
    assert (e.exc_type, e.message) == expected


@pytest.mark.parametrize(
    "prose, expected",
    [
        # the class's module says it is an exception class, whatever its name
        ("'requests.exceptions.TooManyRedirects: Exceeded 30 redirects.'\ni am already increase max redirect",
         ("requests.exceptions.TooManyRedirects", "Exceeded 30 redirects.")),
        ("\t```\n\t_csv.Error: field larger than field limit (131072)\n\t```", ("_csv.Error", "field larger than field limit (131072)")),
        # a name that is not a class comes first on the line
        ("I receive an error message: openai.BadRequestError: Error code: 400", ("openai.BadRequestError", "Error code: 400")),
        ("您好，我也遇到了类似的错误ValueError: Image features and image tokens do not match",
         ("ValueError", "Image features and image tokens do not match")),
        # reprs, and VS Code's debugger
        ('```\nTypeError("Parameter.make_metavar() missing 1 required positional argument: \'ctx\'")\n```',
         ("TypeError", "Parameter.make_metavar() missing 1 required positional argument: 'ctx'")),
        ("`Exception has occurred: TypeError unhashable type: 'list'`", ("TypeError", "unhashable type: 'list'")),
        ("> Exception has occurred: ValueError       (note: full exception trace is shown but execution is paused at: f)\n"
         "> Couldn't instantiate the backend tokenizer", ("ValueError", "Couldn't instantiate the backend tokenizer")),
        # a code span ends the message where it closes, not at a pair of backticks inside it
        ("now throwing this error: `RuntimeError: Tensors must be on the same device except `step` tensors that can be CPU\n`",
         ("RuntimeError", "Tensors must be on the same device except `step` tensors that can be CPU")),
        ("`RuntimeError: generator didn't yield`, make `solve_dependencies` cache", ("RuntimeError", "generator didn't yield")),
        # error reports: AWS Lambda's and structlog's JSON, an HTTP error body, Django's debug page
        ('{\n\n"errorMessage": "Unable to import module \'app\': No module named \'app\'",\n\n"errorType": "Runtime.ImportModuleError",\n'
         '"requestId": "b256388f",\n"stackTrace": []\n}', ("Runtime.ImportModuleError", "Unable to import module 'app': No module named 'app'")),
        ('{\n  "event": "Block run completed.",\n  "exception": [\n    {\n      "exc_type": "RunnerError",\n'
         '      "exc_value": "Cannot start plugin: \'\' is not a valid StateBackend",\n      "is_cause": false\n    }\n  ]\n}',
         ("RunnerError", "Cannot start plugin: '' is not a valid StateBackend")),
        ('when request api:\n\n{"object":"error","message":"The model `Q` does not exist.","type":"NotFoundError","code":404}',
         ("NotFoundError", "The model `Q` does not exist.")),
        ("> TooManyRedirects at /pointer/init\n> Exceeded 30 redirects.\n> Request Method:\tGET\n> Exception Type:\tTooManyRedirects\n"
         "> Exception Value:\t\n> Exceeded 30 redirects.\n> Exception Location:\tsessions.py in resolve_redirects, line 110",
         ("TooManyRedirects", "Exceeded 30 redirects.")),
    ],
)  # fmt: skip
def test_an_exception_named_in_other_shapes_is_reported_when_nothing_else_is(prose, expected):
    assert [(e.exc_type, e.message) for e in parse.parse_text(prose)][-1:] == [expected]


def test_the_fast_path_wakes_up_for_classes_of_exception_modules_and_error_bodies():
    noise = "\n".join(f"2026-08-28 05:10:{i % 60:02d} INFO step {i} done" for i in range(130)) + "\n"
    line = "requests.exceptions.MissingSchema: Invalid URL 'x': No scheme supplied."
    assert [(e.exc_type, e.message) for e in parse.parse_text(noise + line + "\n" + noise)] == [
        ("requests.exceptions.MissingSchema", "Invalid URL 'x': No scheme supplied.")]
    body = '{\n"errorMessage": "Unable to import module \'app\'",\n"requestId": "b2",\n"errorType": "Runtime.ImportModuleError"\n}\n'
    assert [(e.exc_type, e.message) for e in parse.parse_text(noise + body + noise)] == [("Runtime.ImportModuleError", "Unable to import module 'app'")]


def test_an_exception_named_in_prose_but_not_a_class_is_not_reported_as_one():
    assert [e.exc_type for e in parse.parse_text("note: `Hint: try again` or \"TypeError(x)\"\n\nthanks\nbye\nok")] == []


def test_a_traceback_in_a_json_string_is_read_and_ends_with_the_string():
    line = ('\t"exc_info": "Traceback (most recent call last):\\n  File \\"/app/tasks.py\\", line 168, in send_sms\\n'
            '    raise NotImplementedError()\\nNotImplementedError",\n\t"time": "2017-08-31T12:50:34",\n}')
    (e,) = parse.parse_text('```json\n{\n\t"levelname": "ERROR",\n' + line + "\n```")
    assert (e.exc_type, e.message, e.frames[0].file, e.frames[0].function) == ("NotImplementedError", "", "/app/tasks.py", "send_sms")
    (e,) = parse.parse_text('{"msg": "boom", "exc": "Traceback (most recent call last):\\n  File \\"x.py\\", line 1, in f\\nValueError: caf\\u00e9"}')
    assert (e.exc_type, e.message) == ("ValueError", "café")


def test_markdown_around_tracebacks_in_issues():
    # every line in its own backticks
    each = "`>>>r = requests.get(url)`\n`Traceback (most recent call last):`\n`...`\n`   raise InvalidSchema(\"x\")`\n`requests.exceptions.InvalidSchema: Missing dependencies for SOCKS support.`"
    assert [(e.exc_type, e.message) for e in parse.parse_text(each)] == [("requests.exceptions.InvalidSchema", "Missing dependencies for SOCKS support.")]
    # a code span opened on the line before ends inside the exception line
    span = ("when using `f: Annotated[X, Depends()]`: ` raise fastapi.exceptions.FastAPIError(\n"
            "fastapi.exceptions.FastAPIError: Invalid args for response field! Read more: https://x/`. Moreover, the padlock")
    assert [(e.exc_type, e.message) for e in parse.parse_text(span)] == [("fastapi.exceptions.FastAPIError", "Invalid args for response field! Read more: https://x/")]
    # a diff fence around a fence: the diff's + is taken off
    diff = "````diff\n+\n+```pytb\n+UnicodeEncodeError: 'charmap' codec can't encode character\n+```\n+\n+This is not a bug.\n````"
    assert [(e.exc_type, e.message) for e in parse.parse_text(diff)] == [("UnicodeEncodeError", "'charmap' codec can't encode character")]
    # GitHub's quote reply appends the author's link to the quoted line
    reply = "> torch 2.7.0 also has this bug.\n> \n> ImportError: x.so: undefined symbol: _ZN5torch [@yinfan98](https://github.com/yinfan98)\n\nNot supported yet."
    assert [(e.exc_type, e.message) for e in parse.parse_text(reply)] == [("ImportError", "x.so: undefined symbol: _ZN5torch")]
    # inside a fence, ">" is pdb's, not a quote, and pdb's location line ends the message
    pdb = ("```\nFile ~\\Python310\\lib\\encodings\\cp1252.py:23, in IncrementalDecoder.decode(self, input, final)\n\n"
           "UnicodeDecodeError: 'charmap' codec can't decode byte 0x81\n> c:\\python310\\lib\\encodings\\cp1252.py(23)decode()\n     21 class X:\n```")
    assert [(e.exc_type, e.message) for e in parse.parse_text(pdb)][-1] == ("UnicodeDecodeError", "'charmap' codec can't decode byte 0x81")


def test_an_exception_line_that_quotes_a_traceback_is_the_exception_line():
    text = ('Traceback (most recent call last):\n  File "/x/server.py", line 365, in launch_server\n    raise RuntimeError(\n'
            "RuntimeError: Initialization failed. controller_init_state: Traceback (most recent call last):\n"
            '  File "/x/controller.py", line 10, in start\n')
    found = parse.parse_text(text)
    assert (found[0].exc_type, found[0].message) == ("RuntimeError", "Initialization failed. controller_init_state: Traceback (most recent call last):")
    assert found[-1].exc_type is None and found[-1].frames[0].file == "/x/controller.py"  # the quoted traceback, cut


def test_a_commands_error_line_is_reported_only_when_it_ends_the_input():
    session = "~ ❯ pip install click==8.3\nSuccessfully installed click-8.3.0\n~ ❯ python optional_value.py --name\nError: Option '--name' requires an argument.\n```\n"
    assert [(e.exc_type, e.message) for e in parse.parse_text(session)] == [(None, "Option '--name' requires an argument.")]
    assert parse.parse_text(session + "Any idea why?\n") == []  # then it was a line of the paste, not its end
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad\n\nError: bad\n'
    assert [(e.exc_type, e.message) for e in parse.parse_text(traceback)] == [("ValueError", "bad")]


def test_a_commands_error_message_goes_on_to_the_end_of_the_code_block_that_holds_it():
    # sqlite-utils' ClickException (bench/realworld sqlite-utils-001): click prints the whole message
    block = "```\n % sqlite-utils insert t.db text big.json\nError: table text has no column named colun\n\nTry using --alter to add additional columns\n```\n"
    want = [(None, "table text has no column named colun\n\nTry using --alter to add additional columns")]
    assert [(e.exc_type, e.message) for e in parse.parse_text(block)] == want
    assert parse.parse_text(block + "Any idea?\n") == []  # text after the block: the line was not the end
    unfenced = "$ ls\nt.db big.json\n" + block.replace("```\n", "")
    assert parse.parse_text(unfenced) == []  # no block: only a last line counts
    longer = block.replace("Try using", "a\nb\nc\nTry using")
    assert parse.parse_text(longer) == []  # more than a few lines: a log, not one message


def test_a_short_paste_may_start_with_a_class_retyped_in_lower_case():
    text = "importError: libharpcuda.so.0: cannot open shared object file: No such file or directory\n"
    found = parse.parse_text(text)
    assert [(e.exc_type, e.message) for e in found] == [("importError", "libharpcuda.so.0: cannot open shared object file: No such file or directory")]
    assert [e.exc_type for e in parse.parse_text("we saw importError: libx.so\n")] == [None]  # only where it starts the paste


def test_a_double_spaced_copy_keeps_the_blank_lines_of_its_message():
    # A log viewer's copy with a blank line after every line (bench/realworld shapes-029).
    lines = ['  File "/usr/lib/python3.10/site-packages/pydantic/main.py", line 171, in __init__',
             "    self.__pydantic_validator__.validate_python(data, self_instance=self)",
             "pydantic_core._pydantic_core.ValidationError: 1 validation error for Settings",
             "REMOVE_API_KEYS", "  Input should be a valid boolean [type=bool_parsing, input_value='', input_type=str]",
             "ERROR:    Application startup failed. Exiting.", "getting this error with docker compose"]
    found = parse.parse_text("\n\n".join(lines) + "\n")
    assert [(e.exc_type, e.message) for e in found] == [(
        "pydantic_core._pydantic_core.ValidationError",
        "1 validation error for Settings\n\nREMOVE_API_KEYS\n\n  Input should be a valid boolean [type=bool_parsing, input_value='', input_type=str]",
    )]
    # single-spaced, the blank line ends the message as always
    single = "\n".join(lines[:3]) + "\n\nREMOVE_API_KEYS\n"
    assert [e.message for e in parse.parse_text(single)] == ["1 validation error for Settings"]


def test_a_bare_class_after_frames_has_an_empty_message_that_another_process_cannot_continue():
    # Two Python 2 workers' tracebacks interleaved line by line (bench/realworld shapes-203).
    text = ('Traceback (most recent call last):\n  File "/usr/lib/python2.7/multiprocessing/managers.py", line 774, in _callmethod\n'
            "    raise convert_to_error(kind, result)\nEmpty\n    raise convert_to_error(kind, result)\nEmpty\n")
    assert [(e.exc_type, e.message) for e in parse.parse_text(text)][0] == ("Empty", "")


def test_a_line_with_other_kinds_of_log_prefix_is_another_record_not_the_message():
    text = ("(EngineCore_DP0 pid=1088)     raise Exception(f\"is_gds_supported({device.index}) failed\")\n"
            "(EngineCore_DP0 pid=1088) Exception: is_gds_supported(1) failed\n"
            "(EngineCore_DP0 pid=1088) INFO 12-17 23:28:01 [ray_executor.py:121] Shutting down Ray distributed executor.\n")
    assert [(e.exc_type, e.message) for e in parse.parse_text(text)] == [("Exception", "is_gds_supported(1) failed")]
    assert strip_prefixes("(EngineCore_DP0 pid=1088) INFO 12-17 23:28:01 [ray_executor.py:121] Shutting")[2] == "(a"
    assert strip_prefixes("svc_1  | [2026-08-28 05:10:05 TP1] x") == ("x", ["svc_1", "TP1"], "|[")


def test_loggings_report_of_an_error_while_logging_ends_with_its_call_stack_not_an_exception():
    text = ("--- Logging error ---\nTraceback (most recent call last):\n  File \"/usr/lib/python3.12/logging/__init__.py\", line 392, in getMessage\n"
            "    msg = msg % self.args\nTypeError: not all arguments converted during string formatting\nCall stack:\n"
            "  File \"/app/replay.py\", line 126, in <module>\n    logging.info(\"replay err\", e)\nMessage: 'replay err'\nArguments: (1,)\n")
    for lines in (text, "\n".join(["INFO ok"] * 70) + "\n" + text):  # and after a block the fast path skips
        assert [(e.exc_type, e.message) for e in parse.parse_text(lines)] == [("TypeError", "not all arguments converted during string formatting")]


def test_the_end_of_remote_traceback_quotes_ends_a_message_even_when_its_start_was_cut():
    text = '  File "main.py", line 72, in gen_img_retry\n    raise Exception\nException\n"""\n\nThe above exception was the direct cause of the following exception:\n'
    assert [(e.exc_type, e.message) for e in parse.parse_text(text)][0] == ("Exception", "")


def test_a_traceback_wins_over_exceptions_named_in_prose():
    text = "Like `KeyError: 'x'` before, but now:\n" + FENCED
    assert [(e.exc_type, e.message) for e in parse.parse_text(text)] == [("ValueError", "bad input")]



def test_an_empty_prompt_after_a_traceback_ends_its_message_and_single_quotes_name_an_exception():
    text = 'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\nZeroDivisionError: division by zero\n>>>'
    assert [(e.exc_type, e.message) for e in parse.parse_text(text)] == [("ZeroDivisionError", "division by zero")]
    said = "the log says 'zmq.error.ZMQError: Cannot assign requested address' every time"
    assert [(e.exc_type, e.message) for e in parse.parse_text(said)] == [("zmq.error.ZMQError", "Cannot assign requested address")]


@pytest.mark.parametrize("text, frames", [
    ("---------------------------------------------------------------------------\n"
     "ValueError                                Traceback (most recent call last)\nCell In[2], line 1\n----> 1 f()\n\n"
     "File /srv/app/jobs.py:12, in f(x)\n     11 def f(x):\n---> 12     raise ValueError(\"bad thing\")\n\nValueError: bad thing\n",
     [("Cell In[2]", 1, "<module>", "f()"), ("/srv/app/jobs.py", 12, "f", 'raise ValueError("bad thing")')]),
    ("ValueError                                Traceback (most recent call last)\n<ipython-input-3-abc> in <module>()\n----> 1 f()\n\n"
     "/home/u/jobs.py in f(x)\n      2 def f(x):\n----> 3     raise ValueError(\"bad thing\")\n\nValueError: bad thing\n",
     [("<ipython-input-3-abc>", 1, "<module>", "f()"), ("/home/u/jobs.py", 3, "f", 'raise ValueError("bad thing")')]),
    # Colab: paths as Markdown links, folded frames (bench/realworld vllm-021)
    ("ValueError                           Traceback (most recent call last)\n"
     "[/tmp/ipython-input-33.py](https://localhost:8080/#) in <cell line: 0>()\n      1 x = 1\n----> 2 f()\n\n4 frames\n"
     "[/usr/local/lib/python3.11/dist-packages/pkg/jobs.py](https://localhost:8080/#) in f(*args)\n--> 123         raise ValueError(\"bad thing\")\n"
     "    124 \n\nValueError: bad thing\n",
     [("/tmp/ipython-input-33.py", 2, "<cell line: 0>", "f()"), ("/usr/local/lib/python3.11/dist-packages/pkg/jobs.py", 123, "f", 'raise ValueError("bad thing")')]),
])
def test_ipython_and_jupyter_tracebacks_give_their_frames(text, frames):
    (exc,) = parse_text(text)
    assert (exc.exc_type, exc.message) == ("ValueError", "bad thing")
    assert [(f.file, f.line, f.function, f.source) for f in exc.frames] == frames


def test_a_class_of_a_module_of_exceptions_wakes_the_fast_path_wherever_its_name_starts():
    # Found by tests/reliability's fast-path property: a log read in chunks of 16 characters put
    # "errors.ConfigErr" at the start of a chunk, a class in the module "errors" that no other
    # trigger catches; the block was skipped though the full parse reads it.
    from errordb.explainer.parse.fastpath import all_noise

    for line in ("errors.C: bad config", "exceptions.Missing: x", "exc.Gone: y", "app.errors.Bad: z"):
        assert parse_text(line)[0].exc_type == line.split(":")[0]
        assert not all_noise((line + "\n",)) and not all_noise(["INFO ok\n"] * 3 + [line + "\n"])
    text = "\n".join(["INFO ok"] * 70) + "\nerrors.C: bad config\n"
    chunks = [text[i : i + 16] for i in range(0, len(text), 16)]
    fast = [(e.exc_type, e.message) for e in iter_exceptions(chunks)]
    with mock.patch.object(driver, "all_noise", lambda lines, text=None: False):
        full = [(e.exc_type, e.message) for e in iter_exceptions(chunks)]
    assert fast == full and any(exc_type and exc_type.startswith("errors.") for exc_type, _ in fast), fast


# Where a message ends when the writer's own words follow it (cases from bench/realworld).

TRACEBACK_OF_AN_API_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app.py", line 3, in <module>\n'
    "    client.completions.create(max_tokens=-344)\n"
    "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'max_tokens must be at least 1, got -344.', "
    "'code': 400}  : is the problem with the model !!!\n"
)


def test_an_http_error_s_message_ends_where_its_body_closes():
    [exc] = parse_text(TRACEBACK_OF_AN_API_ERROR)
    assert exc.message.endswith("'code': 400}")
    # A quote inside a string of the other kind, and a full stop after the body.
    [exc] = parse_text('BadRequestError: Error code: 400 - {"error": {"message": "This model\'s limit is 4097."}}.\n')
    assert exc.message == 'Error code: 400 - {"error": {"message": "This model\'s limit is 4097."}}'
    # A body cut short by the paste is kept as it is.
    [exc] = parse_text("BadRequestError: Error code: 400 - {'error': {'message': 'too long\n")
    assert exc.message == "Error code: 400 - {'error': {'message': 'too long"


@pytest.mark.parametrize("line, message", [
    ("calls raise a TypeError: f() got an unexpected keyword argument '_x', breaking all code that relies on it.",
     "f() got an unexpected keyword argument '_x'"),
    ("when i run it i got Error AttributeError: 'FastAPI' object has no attribute 'debug' like this,",
     "'FastAPI' object has no attribute 'debug'"),
    # The words after a quoted name are the message's own when nothing says the sentence goes on.
    ("then it fails with TypeError: 'NoneType' object is not subscriptable", "'NoneType' object is not subscriptable"),
])
def test_the_writer_s_words_after_a_message_named_in_a_sentence_are_not_its_own(line, message):
    [exc] = parse_text(f"I tried this.\n{line}\nHow can I fix it?\n")
    assert exc.message == message


def test_the_next_item_of_the_writer_s_list_ends_a_bare_exception_s_message():
    text = ("1. How to load a model on 8 GPUs? I get an error\n"
            "ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (8).\n"
            "2. Why do the results differ from HF transformers?\n")
    [exc] = parse_text(text)
    assert exc.message == "Total number of attention heads (52) must be divisible by tensor parallel size (8)."
    # After a traceback the lines that follow are the message's own, numbered or not.
    tb = ('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n    check()\n'
          "RuntimeError: The check failed.\n1. Set A\n2. Set B\n")
    [exc] = parse_text(tb)
    assert exc.message == "The check failed.\n1. Set A\n2. Set B"


def test_a_repr_set_off_as_code_in_a_sentence_that_calls_it_an_error_is_the_exception():
    text = "Upserting without a key\n\nThis throws an error: `PrimaryKeyRequired('upsert() requires a pk')`\n"
    for found in (parse_text(text), list(iter_exceptions(iter(text.splitlines(keepends=True))))):
        assert [(e.exc_type, e.message) for e in found] == [("PrimaryKeyRequired", "upsert() requires a pk")]
    # Not in a sentence about an error, or not set off as code: a call, not an exception.
    assert all(e.exc_type != "Table" for e in parse_text("Then call `Table('docs')` to get the table.\n"))
    assert all(e.exc_type != "Table" for e in parse_text("The error was in Table('docs') somewhere.\n"))


TB_HEAD = 'Traceback (most recent call last):\n  File "/app/run.py", line 3, in <module>\n    main()\n'


def test_a_list_after_a_colon_is_the_message_s_own_across_blank_lines():
    # transformers' message (held-out paste, Fraser-Greenlee/transformer-vae#3), in a fence.
    listed = ("OSError: Can't load config for 't5-vae-poet'. Make sure that:\n\n"
              "- 't5-vae-poet' is a correct model identifier listed on 'https://huggingface.co/models'\n\n"
              "- or 't5-vae-poet' is the correct path to a directory containing a config.json file")
    for text in (f"```\n{listed}\n```\n", TB_HEAD + listed + "\n\n"):
        [exc] = parse_text(text)
        assert exc.message == listed.split(": ", 1)[1]
    # Prose after the blank line is the writer's, and a chain still chains.
    [exc] = parse_text(TB_HEAD + "ValueError: Expected one of:\n\nI have no idea what it expects.\n")
    assert exc.message == "Expected one of:"
    def chain(message):
        text = f"{TB_HEAD}KeyError: {message}\n\nThe above exception was the direct cause of the following exception:\n\n{TB_HEAD}RuntimeError: boom\n"
        return [(e.exc_type, e.message, e.role, e.chain_index) for e in parse_text(text)]

    assert chain("missing:") == [(k, m + ":" if k == "KeyError" else m, r, i) for k, m, r, i in chain("missing")]
    assert len(chain("missing:")) == 2


@pytest.mark.parametrize("prompt", ["~/tmp$ ", "~/tmp$ cget blah", "user@host:~/src$ python run.py", "(venv) root@c0ffee:/workspace# ls",
                                    "/home/u$", "PS C:\\src> py run.py"])  # fmt: skip
def test_a_shell_prompt_after_a_traceback_is_not_its_message(prompt):
    # A shell session pasted whole (held-out paste, pfultz2/cget#53).
    [exc] = parse_text(f"```\n~/tmp$ cget blah\n{TB_HEAD}KeyError: u'blah'\n{prompt}\n```\n")
    assert (exc.exc_type, exc.message) == ("KeyError", "u'blah'")


def test_a_command_shown_in_a_message_is_part_of_it():
    [exc] = parse_text(TB_HEAD + "ImportError: the tokenizer needs sentencepiece; install it with\n$ pip install sentencepiece\n")
    assert exc.message == "the tokenizer needs sentencepiece; install it with\n$ pip install sentencepiece"


SENTRY = ("MissingSchema: Invalid URL 'log.example.com/stream': No schema supplied. Perhaps you meant http://log.example.com/stream?\n"
          "(6 additional frame(s) were not displayed)\n...\n"
          '  File "requests/sessions.py", line 459, in prepare_request\n    hooks=merge_hooks(request.hooks, self.hooks),\n'
          '  File "requests/models.py", line 388, in prepare_url\n    raise MissingSchema(error)\n')


@pytest.mark.parametrize("wrap", ["{}", "```\n{}\n```\n", "{}\nUnhandled exception in task 5b84b0c1.\n", "Sentry says:\n\n{}",
                                  "We see this.\nIt happens often.\nOn prod.\nAnd on staging.\nAnd at night.\n\n{}"])
def test_sentry_s_stack_trace_names_its_exception_first(wrap):
    # Sentry's raw view (held-out pastes, thorrak/fermentrack#518, #519): the title first, the frames after.
    found = parse_text(wrap.format(SENTRY))
    exc = found[-1]
    assert (exc.exc_type, exc.message) == ("MissingSchema", "Invalid URL 'log.example.com/stream': No schema supplied. Perhaps you meant http://log.example.com/stream?")
    assert [(f.file, f.line, f.function, f.source) for f in exc.frames] == [
        ("requests/sessions.py", 459, "prepare_request", "hooks=merge_hooks(request.hooks, self.hooks),"),
        ("requests/models.py", 388, "prepare_url", "raise MissingSchema(error)")]
    # A class named like one reads the same; without the fold line it is no Sentry trace.
    [exc] = parse_text(SENTRY.replace("MissingSchema:", "requests.exceptions.InvalidSchema:"))
    assert exc.exc_type == "requests.exceptions.InvalidSchema" and len(exc.frames) == 2
    assert all(e.exc_type != "MissingSchema" for e in parse_text(SENTRY.replace("(6 additional frame(s) were not displayed)\n", "")))


def test_a_paste_wrapped_whole_in_double_quotes_is_read_without_them():
    # held-out paste, bghira/SimpleTuner#1383: the writer quoted a progress line and the traceback.
    body = f"Epoch 1/417, Steps:   0%| | 0/10000 [00:01<?, ?it/s]\n{TB_HEAD}AttributeError: 'HiDream' object has no attribute 'transformer'"
    [exc] = parse_text(f'"{body}"\n')
    assert exc.message == "'HiDream' object has no attribute 'transformer'" and exc.line_no == 2  # its header's line
    # Quotes the message's own line closes itself, or a single line: the quotes are the text's own.
    assert parse_text(f'{TB_HEAD}KeyError: "a"\n')[0].message == '"a"'
    assert parse_text(f'"{TB_HEAD.strip()}"\nKeyError: "a"\n')[0].message == '"a"'


def test_a_class_printed_as_its_repr_names_the_exception():
    # A program that printed type(e) and e (held-out paste, frappe/frappe#7149: Python 2's SocketServer).
    tb = f"{TB_HEAD}<type 'exceptions.ImportError'>: No module named traceback\n"
    assert [(e.exc_type, e.message, len(e.frames)) for e in parse_text(tb)] == [("exceptions.ImportError", "No module named traceback", 1)]
    assert [(e.exc_type, e.message) for e in parse_text("<class 'KeyError'>: 'x'\n")] == [("KeyError", "'x'")]
    # Out of context a repr of a class not named like an exception is not one.
    assert all(e.exc_type != "dict" for e in parse_text("Got <class 'dict'>: {'a': 1} from the API.\nThen it stopped.\n"))
    assert all(e.exc_type != "dict" for e in parse_text("<class 'dict'>: {'a': 1}\n"))
