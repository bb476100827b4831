"""errordb harvest on small source trees written here: messages, sites, records, re-runs, writes."""

from __future__ import annotations

import ast
import json
import os
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from errordb.records.check import check
from errordb.cli import cli
from errordb.harvest.drafts import DRAFT_TAG, HarvestError, harvest
from errordb.harvest.messages import Unreadable, message_pattern, message_text, read_message
from errordb.store import ingest
from errordb.records.patterns import compile_pattern, fullmatch

from helpers import copy_records

SHA1 = "1" * 40
SHA2 = "2" * 40
REPO = "acme/widgets"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def records(out: Path, repo: str = REPO) -> dict[str, dict]:
    folder = out / repo
    found = {}
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        record = json.loads(path.read_text(encoding="utf-8"))["record"]
        found[record["id"]] = record
    return found


def by_message(out: Path, repo: str = REPO) -> dict[str, dict]:
    return {r["errorMessage"]: r for r in records(out, repo).values()}


def tree_bytes(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------- reading messages


def _(text):  # gettext stand-in for the runtime half of the message cases
    return text


def ngettext(singular, plural, n):
    return singular if n == 1 else plural


# (expression, expected errorMessage); each is also evaluated, and its pattern must match the result.
MESSAGES = [
    ('"Plain message."', "Plain message."),
    ('"implicit " "concatenation"', "implicit concatenation"),
    ('f"bad value {value!r} for {name}"', "bad value {value} for {name}"),
    ('f"count {count:d} of {total:>5}"', "count {count} of {total}"),
    ('"value %s and %d items" % (value, count)', "value {value} and {count} items"),
    ('"only %r here" % value', "only {value} here"),
    ('"%(name)s takes %(count)d" % {"name": name, "count": count}', "{name} takes {count}"),
    ('"100%% sure about %s" % name', "100% sure about {name}"),
    ('"{} and {name!r}".format(value, name=name)', "{value} and {name}"),
    ('"{0} then {0}".format(count)', "{count} then {count}"),
    ('_("No such {thing}.").format(thing=name)', "No such {thing}."),
    ('ngettext("Got {n} argument", "Got {n} arguments", count).format(n=count)', "Got {n} argument"),
    ('"prefix: " + name + " (end)"', "prefix: {name} (end)"),
    ('"when true" if count else "when false"', "when true"),
    ('"special .*+?()[]{}|^$\\\\ chars"', "special .*+?()[]{}|^$\\ chars"),
    ('"first line %s\\n\\nsecond paragraph" % name', "first line {name}\n\nsecond paragraph"),
    ('"tab\\there"', "tab\there"),
]


@pytest.mark.parametrize(("expression", "message"), MESSAGES)
@pytest.mark.parametrize("values", [{"value": "x", "name": "widget", "count": 1, "total": 3},
                                    {"value": [1, "two"], "name": "", "count": -12, "total": 7.5}])
def test_message_text_pattern_and_the_runtime_message(expression, message, values):
    node = ast.parse(expression, mode="eval").body
    templates = read_message(node)
    assert message_text(templates[0]) == message
    pattern = message_pattern(templates)
    compile_pattern(pattern)  # RE2 and Python re both accept it
    assert fullmatch(pattern, message)  # errordb check's rule
    runtime = eval(expression, {"_": _, "ngettext": ngettext}, dict(values))  # our own test expressions
    assert fullmatch(pattern, runtime), (pattern, runtime)


def test_alternatives_and_the_keyerror_quotes():
    templates = read_message(ast.parse('"one" if x else f"two {x}"', mode="eval").body)
    pattern = message_pattern(templates)
    assert pattern == "(?:one|two .*)"
    quoted = message_pattern(read_message(ast.parse('f"no such key {k}"', mode="eval").body), quoted=True)
    assert fullmatch(quoted, "'no such key x'") and fullmatch(quoted, "no such key x")


def test_multiline_messages_match_their_first_line_or_more_lines():
    pattern = message_pattern(read_message(ast.parse('f"Bad {x}.\\n\\nDetails here."', mode="eval").body))
    assert fullmatch(pattern, "Bad y.")
    assert fullmatch(pattern, "Bad y.\n\nDetails here.\n\nFor further information visit https://x")
    assert not fullmatch(pattern, "Bad y.\n\nOther text.")
    # A first line without a word would match anything: then the whole message is required.
    generic = message_pattern(read_message(ast.parse('f"{e}\\n\\nTry again with --force"', mode="eval").body))
    assert not fullmatch(generic, "anything at all")
    assert fullmatch(generic, "disk full\n\nTry again with --force")


@pytest.mark.parametrize(("expression", "why"), [
    ("msg", "a variable (msg)"),
    ("str(exc)", "a call (str(exc))"),
    ("self.message", "an attribute (self.message)"),
    ("template % args", "% formatting of a variable (template)"),
    ("messages[0]", "a subscript (messages[0])"),
])  # fmt: skip
def test_unreadable_messages_say_what_they_are(expression, why):
    with pytest.raises(Unreadable, match=r"^" + __import__("re").escape(why)):
        read_message(ast.parse(expression, mode="eval").body)


def test_variables_are_read_only_through_the_resolver():
    resolve = {"msg": ast.parse('"from a variable %s"', mode="eval").body}.get
    node = ast.parse("msg % x", mode="eval").body
    assert message_text(read_message(node, resolve)[0]) == "from a variable {x}"
    looping = {"a": ast.Name("b"), "b": ast.Name("a")}.get  # a = b; b = a: never followed forever
    with pytest.raises(Unreadable):
        read_message(ast.Name("a"), looping)


# ---------------------------------------------------------------------------- sites and skips

SOURCE = '''
import errors


class WidgetError(Exception):
    def __init__(self, widget, message):
        super().__init__(message)


class BuildsItsOwn(Exception):
    def __init__(self, name):
        super().__init__(f"no {name}")


class Base:
    def fail(self, message, code=None):
        raise errors.UsageError(message)


class Child(Base):
    def check(self, value):
        if value is None:
            self.fail(f"missing value for {self!r}")
        if value < 0:
            raise ValueError(
                "negative value: %d" % value
            )
        if value == 1: raise ValueError("shares its line")
        raise NotImplementedError


def plain(x):
    raise TypeError(f"bad type {type(x).__name__}")


def kinds(x, exc):
    if x == 1:
        raise exc
    if x == 2:
        raise ValueError("two", x)
    if x == 3:
        raise WidgetError(x, "widget %s broke" % x)
    if x == 4:
        raise BuildsItsOwn(x)
    if x == 5:
        raise ValueError(f"{x}")
    if x == 6:
        raise KeyError(str(x))
    if x == 7:
        msg = "a local message %r"
        raise ValueError(msg % x)
    if x == 8:
        text = "first"
        text = "second"
        raise ValueError(text)
    try:
        pass
    except OSError:
        raise
'''


def test_sites_reasons_and_helpers(tmp_path):
    root = write_tree(tmp_path / "src", {"widgets/core.py": SOURCE, "widgets/broken.py": "def f(:\n"})
    out = tmp_path / "records"
    report = harvest(root, repo=REPO, sha=SHA1, out=out, prefix="src")
    found = by_message(out)
    assert set(found) == {
        "missing value for {self}",  # through the helper Base.fail, at its raise
        "negative value: {value}",
        "bad type {type(x).__name__}",
        "widget {x} broke",  # WidgetError takes its message second
        "a local message {x}",  # a local assigned just before
        "second",  # straight-line code: the nearest assignment before the raise
        "",  # raise NotImplementedError: a builtin class without a message prints none
    }
    bare = found[""]
    assert (bare["errorClass"], bare["messagePattern"], bare["lineNumber"], bare["functionName"]) == ("NotImplementedError", "", 28, "Child.check")
    assert bare["slug"] == f"notimplementederror-{bare['id'][:6]}"
    helper = found["missing value for {self}"]
    assert helper["filePath"] == "src/widgets/core.py"
    assert helper["errorClass"] == "errors.UsageError"
    assert helper["lineNumber"] == SOURCE.lstrip("\n").split("\n").index("        raise errors.UsageError(message)") + 1
    multi_line = found["negative value: {value}"]
    assert multi_line["lineNumber"] == 24  # the raise, not the line holding the message
    assert multi_line["sourceCode"].split("\n")[multi_line["lineNumber"] - multi_line["sourceCodeStart"]].strip() == "raise ValueError("
    reasons = {(skip.line, skip.reason) for skip in report.skips}
    assert reasons == {
        (16, "message-not-literal"),  # the helper's own raise: the message is its parameter
        (27, "shares-line"),
        (37, "not-a-class"),
        (39, "several-arguments"),
        (43, "no-message"),  # BuildsItsOwn builds its own message
        (45, "no-literal-text"),
        (47, "message-not-literal"),  # KeyError(str(x)): a call
    }
    assert report.reraises == 1
    assert report.via_helpers == 1
    assert [skip.file for skip in report.unparsable] == ["src/widgets/broken.py"]
    assert report.files == 2
    assert "1 unparsable" in report.summary()
    assert check([out]) == []


def test_straight_line_rebinding(tmp_path):
    root = write_tree(tmp_path / "pkg", {"m.py": '''
        def f(x):
            text = "first"
            text = "second"
            raise ValueError(text)


        def g(x):
            if x:
                note = "in a branch"
            raise ValueError(note)


        def h(x):
            for note in x:
                pass
            raise ValueError(note)
    '''})
    out = tmp_path / "records"
    report = harvest(root, repo=REPO, sha=SHA1, out=out)
    assert set(by_message(out)) == {"second", "in a branch"}  # g: bound once in the function
    assert [(s.line, s.reason) for s in report.skips] == [(16, "message-not-literal")]  # h: a loop variable


def test_text_appended_with_plus_equals_and_an_exception_held_in_a_variable(tmp_path):
    root = write_tree(tmp_path / "pkg", {"m.py": '''
        class Warper:
            def __init__(self, temperature):
                if temperature <= 0:
                    msg = f"`temperature` (={temperature}) has to be positive,"
                    msg += " otherwise scores are invalid."
                    if temperature == 0.0:
                        msg += " For greedy decoding, set `do_sample=False`."
                    raise ValueError(msg)

            def wait(self, pipes):
                e = Exception("WorkerProc initialization failed.")
                while pipes:
                    pipes.pop()
                raise e from None


        def looped(parts):
            msg = "parts:"
            for part in parts:
                msg += " more"
            raise ValueError(msg)
    '''})
    out = tmp_path / "records"
    report = harvest(root, repo=REPO, sha=SHA1, out=out)
    found = {r["errorMessage"]: r for r in records(out).values()}
    warper = found["`temperature` (={temperature}) has to be positive, otherwise scores are invalid. For greedy decoding, set `do_sample=False`."]
    assert (warper["functionName"], warper["lineNumber"]) == ("Warper.__init__", 8)
    for message in ("`temperature` (=0.0) has to be positive, otherwise scores are invalid.",
                    "`temperature` (=0.0) has to be positive, otherwise scores are invalid. For greedy decoding, set `do_sample=False`."):  # fmt: skip
        assert re.fullmatch(warper["messagePattern"], message)
    held = found["WorkerProc initialization failed."]
    assert (held["errorClass"], held["functionName"], held["lineNumber"]) == ("Exception", "Warper.wait", 14)
    assert [(s.line, s.reason) for s in report.skips] == [(21, "message-not-literal")]  # appended in a loop
    assert check([out]) == []  # "raise e" is a raise line of the record's class


# ---------------------------------------------------------------------------- records


def test_record_shape_window_url_and_draft(tmp_path):
    lines = ["# filler"] * 5 + ['raise RuntimeError("near the top")'] + ["# filler"] * 40
    lines += ['raise RuntimeError("in the middle")'] + ["# filler"] * 40 + ['raise RuntimeError("near the end")', ""]
    root = write_tree(tmp_path / "lib", {"mod.py": "\n".join(lines)})
    out = tmp_path / "records"
    harvest(root, repo=REPO, sha=SHA1, out=out, prefix="lib", analyzed_at="2026-08-28")
    found = by_message(out)
    top, middle, end = found["near the top"], found["in the middle"], found["near the end"]
    assert (top["lineNumber"], top["sourceCodeStart"], top["sourceCodeEnd"]) == (6, 1, 24)
    assert (middle["lineNumber"], middle["sourceCodeStart"], middle["sourceCodeEnd"]) == (47, 29, 65)
    assert (end["lineNumber"], end["sourceCodeStart"], end["sourceCodeEnd"]) == (88, 70, 88)
    assert len(middle["sourceCode"].split("\n")) == 37
    assert middle["githubUrl"] == f"https://github.com/{REPO}/blob/{SHA1}/lib/mod.py#L29-L65"
    assert middle["filePath"] == "lib/mod.py"
    assert middle["tags"] == [DRAFT_TAG]
    assert (middle["documentation"], middle["triggerScenarios"], middle["commonSituations"]) == ("", "", "")
    assert (middle["solutions"], middle["preventionTips"]) == ([], [])
    assert (middle["analyzedSha"], middle["analyzedAt"], middle["schemaVersion"]) == (SHA1, "2026-08-28", 2)
    envelope = json.loads((out / REPO / f"{middle['id']}.json").read_text())
    assert envelope["datasetVersion"] == "2026-08-28T00:00:00Z"
    assert check([out]) == []


def test_a_draft_names_its_qualified_function_from_the_syntax_tree(tmp_path):
    source = ["class Registry:", "    def resolve(self, name):"]
    source += [f"        step_{i} = {i}" for i in range(40)]  # the def is far outside the window
    source += [
        '        raise ValueError(f"Model architectures {name} are not supported for now")',
        "",
        "    class Inner:",
        "        def check(self):",
        '            raise KeyError("inner key")',
        "",
        "def outer():",
        "    def inner():",
        '        raise RuntimeError("in a closure")',
        "    return inner",
        "",
        'raise ImportError("at module level")',
        "",
        "def check(code):",
        '    assert code != 204, f"Status code {code} must not have a response body"',
        "    assert code",
        "",
    ]
    root = tmp_path / "lib"
    root.mkdir()
    (root / "mod.py").write_text("\n".join(source), encoding="utf-8")
    out = tmp_path / "records"
    harvest(root, repo=REPO, sha=SHA1, out=out, prefix="lib", analyzed_at="2026-08-28")
    found = by_message(out)
    assert found["Model architectures {name} are not supported for now"]["functionName"] == "Registry.resolve"
    assert found["inner key"]["functionName"] == "Registry.Inner.check"
    assert found["in a closure"]["functionName"] == "outer.inner"
    assert "functionName" not in found["at module level"]  # left out of the file, not written as null
    # An assert with a message raises AssertionError with it; one without a message gives nothing.
    asserted = found["Status code {code} must not have a response body"]
    assert (asserted["errorClass"], asserted["functionName"], asserted["lineNumber"]) == ("AssertionError", "check", 57)
    assert len(found) == 5
    assert check([out]) == []


def test_same_message_twice_takes_the_suffix_and_ids_differ(tmp_path):
    root = write_tree(tmp_path / "pkg", {"a.py": '''
        def one():
            raise ValueError("Shared message")


        def two():
            raise ValueError("Shared message")
            raise ValueError("Shared message")
    '''})
    out = tmp_path / "records"
    harvest(root, repo=REPO, sha=SHA1, out=out)
    found = records(out)
    assert len(found) == 3  # the second raise in two() differs by its occurrence index
    for rid, record in found.items():
        assert record["slug"] == f"shared-message-{rid[:6]}"
    assert check([out]) == []


def test_rerun_is_byte_identical_and_a_newer_sha_moves_records(tmp_path):
    root = write_tree(tmp_path / "pkg", {"m.py": '''
        def f(x):
            raise ValueError(f"bad {x}")


        def g():
            raise KeyError("missing key")
    '''})
    out = tmp_path / "records"
    first = harvest(root, repo=REPO, sha=SHA1, out=out)
    before = tree_bytes(out)
    again = harvest(root, repo=REPO, sha=SHA1, out=out)
    assert tree_bytes(out) == before
    assert (again.added, again.updated, again.unchanged) == (0, 0, 2)
    # Same inputs into a fresh tree: the same bytes.
    fresh = tmp_path / "fresh"
    harvest(root, repo=REPO, sha=SHA1, out=fresh)
    assert tree_bytes(fresh) == before
    assert first.added == 2

    # The raise moves down three lines in a newer commit: same id, new line, no duplicate.
    text = (root / "m.py").read_text()
    (root / "m.py").write_text("import os\n\n\n" + text)
    ids = set(records(out))
    moved = harvest(root, repo=REPO, sha=SHA2, out=out)
    assert (moved.added, moved.updated, moved.moved) == (0, 2, 2)
    assert set(records(out)) == ids
    f = by_message(out)["bad {x}"]
    assert (f["lineNumber"], f["analyzedSha"]) == (5, SHA2)
    assert SHA2 in f["githubUrl"]
    assert check([out]) == []


def test_prune_drops_vanished_drafts_in_scope_only(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "pkg/a.py": 'def f():\n    raise ValueError("raise in a")\n',
        "pkg/b.py": 'def g():\n    raise ValueError("raise in b")\n',
        "other/c.py": 'def h():\n    raise ValueError("raise in c")\n',
    })  # fmt: skip
    out = tmp_path / "records"
    harvest(root, repo=REPO, sha=SHA1, out=out)
    harvest(root / "pkg", repo="acme/other", sha=SHA1, out=out, prefix="pkg")
    (root / "pkg" / "b.py").write_text("def g():\n    return 1\n")
    (root / "other" / "c.py").write_text("def h():\n    return 1\n")

    kept = harvest(root / "pkg", repo=REPO, sha=SHA2, out=out, prefix="pkg")
    assert kept.pruned == 0 and "raise in b" in by_message(out)  # without --prune nothing goes

    pruned = harvest(root / "pkg", repo=REPO, sha=SHA2, out=out, prefix="pkg", prune=True)
    assert pruned.pruned == 1
    # b's record is gone; c's (outside pkg/) and acme/other's stay.
    assert set(by_message(out)) == {"raise in a", "raise in c"}
    assert set(by_message(out, "acme/other")) == {"raise in a", "raise in b"}
    assert check([out]) == []


def test_prune_refuses_a_draft_that_shares_a_json_lines_file(tmp_path):
    root = write_tree(tmp_path / "repo", {"pkg/a.py": 'def f():\n    raise ValueError("raise in a")\n',
                                          "pkg/b.py": 'def g():\n    raise ValueError("raise in b")\n'})  # fmt: skip
    out = tmp_path / "records"
    harvest(root, repo=REPO, sha=SHA1, out=out)
    harvest(root, repo="acme/other", sha=SHA1, out=out)
    # Someone gathered both repositories' records of b.py into one file.
    gathered = [path for path in sorted(out.rglob("*.json")) if "raise in b" in path.read_text()]
    lines = out / "gathered.jsonl"
    lines.write_text("".join(json.dumps(json.loads(path.read_text())) + "\n" for path in gathered))
    for path in gathered:
        path.unlink()
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    (root / "pkg" / "b.py").write_text("def g():\n    return 1\n")
    with pytest.raises(HarvestError, match=r"gathered\.jsonl:\d: record \w+: --prune would remove it, but it is a line of a JSON Lines file"):
        harvest(root, repo=REPO, sha=SHA2, out=out, prune=True)
    # Nothing changed: acme/other's record of b.py is still there.
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before


def test_reviewed_records_keep_their_analysis_and_are_not_pruned(tmp_path):
    root = write_tree(tmp_path / "pkg", {"m.py": 'def f(x):\n    raise ValueError(f"reviewed {x}")\n'})
    out = tmp_path / "records"
    harvest(root, repo=REPO, sha=SHA1, out=out)
    (record,) = records(out).values()
    path = out / REPO / f"{record['id']}.json"
    envelope = json.loads(path.read_text())
    envelope["record"].update(documentation="What it means.", solutions=["Do this."], tags=["reviewed"],
                              messagePattern="reviewed .+")  # fmt: skip
    path.write_text(json.dumps(envelope, separators=(",", ":"), ensure_ascii=False))

    (root / "m.py").write_text('\n\ndef f(x):\n    raise ValueError(f"reviewed {x}")\n')
    harvest(root, repo=REPO, sha=SHA2, out=out)
    updated = records(out)[record["id"]]
    assert updated["lineNumber"] == 4 and updated["analyzedSha"] == SHA2
    assert (updated["documentation"], updated["solutions"], updated["tags"]) == ("What it means.", ["Do this."], ["reviewed"])
    assert updated["messagePattern"] == "reviewed .+"  # an analyst's pattern is kept

    (root / "m.py").write_text("def f(x):\n    return x\n")
    report = harvest(root, repo=REPO, sha=SHA2, out=out, prune=True)
    assert report.stale == [record["id"]] and report.pruned == 0
    assert path.exists()


def test_draft_slugs_take_the_id_suffix_and_leave_other_records_alone(tmp_path):
    out = copy_records(tmp_path / "records")  # the bundled sglang records
    seed_file = out / "sgl-project/sglang/ce31b31dd9a787ba.json"
    seed = seed_file.read_bytes()
    message = "DSPARK aux hidden capture requires PP=1."  # the plain slug of record ce31b31d...
    root = write_tree(tmp_path / "pkg", {"m.py": f'def f():\n    raise NotImplementedError("{message}")\n'})
    harvest(root, repo=REPO, sha=SHA1, out=out)
    ((rid, draft),) = [(rid, r) for rid, r in records(out).items() if r["repo"] == REPO]
    assert draft["slug"] == f"dspark-aux-hidden-capture-requires-pp-1-{rid[:6]}"
    assert seed_file.read_bytes() == seed and check([out]) == []
    # Another project raising the same words, harvested separately into another tree: the two
    # trees ingest into one store (each slug is unique by its id), and the first keeps its slug.
    other = tmp_path / "other"
    harvest(write_tree(tmp_path / "pkg2", {"n.py": f'def g():\n    raise NotImplementedError("{message}")\n'}), repo="other/project", sha=SHA1, out=other)
    ingest([out, other], tmp_path / "store.db")
    assert records(out)[rid]["slug"] == draft["slug"]


def test_a_failed_write_leaves_the_tree_as_it_was(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "pkg", {"m.py": 'def f():\n    raise ValueError("one message")\n'})
    out = tmp_path / "records"
    harvest(root, repo=REPO, sha=SHA1, out=out)
    (root / "m.py").write_text('\n\ndef f():\n    raise ValueError("one message")\n\n\n'
                               'def g():\n    raise ValueError("another message")\n')  # fmt: skip
    before = tree_bytes(out)
    calls = []
    real_replace = os.replace

    def failing_replace(source, target):
        calls.append(target)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr("errordb.harvest.drafts.os.replace", failing_replace)
    with pytest.raises(OSError):
        harvest(root, repo=REPO, sha=SHA2, out=out)
    assert len(calls) == 2  # one file had been replaced already: it was put back
    assert tree_bytes(out) == before  # no temporary files either


def test_a_bad_out_tree_or_bad_options_write_nothing(tmp_path):
    root = write_tree(tmp_path / "pkg", {"m.py": 'raise ValueError("module level")\n'})
    out = tmp_path / "records"
    (out / REPO).mkdir(parents=True)
    (out / REPO / "broken.json").write_text("{not json")
    with pytest.raises(HarvestError, match="broken.json: not a record file"):
        harvest(root, repo=REPO, sha=SHA1, out=out)
    assert [p.name for p in (out / REPO).iterdir()] == ["broken.json"]
    for options, problem in [({"sha": "abc"}, "--sha"), ({"repo": "nope"}, "--repo"),
                             ({"analyzed_at": "yesterday"}, "--analyzed-at"), ({"prefix": "../up"}, "--prefix")]:  # fmt: skip
        arguments = {"repo": REPO, "sha": SHA1, "out": tmp_path / "other", **options}
        with pytest.raises(HarvestError, match=problem):
            harvest(root, **arguments)
    assert not (tmp_path / "other").exists()


def test_analyzed_at_follows_source_date_epoch(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "pkg", {"m.py": 'raise ValueError("module level")\n'})
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1788000000")
    harvest(root, repo=REPO, sha=SHA1, out=tmp_path / "a")
    (record,) = records(tmp_path / "a").values()
    assert record["analyzedAt"] == "2026-08-29"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    harvest(root, repo=REPO, sha=SHA1, out=tmp_path / "b")
    (record,) = records(tmp_path / "b").values()
    assert record["analyzedAt"] == "1970-01-01"  # never the clock


def test_cli_harvest(tmp_path):
    root = write_tree(tmp_path / "pkg", {"m.py": 'def f(x):\n    raise ValueError(x)\n    raise ValueError("fine")\n'})
    out, listing = tmp_path / "records", tmp_path / "unreadable.txt"
    runner = CliRunner()
    result = runner.invoke(cli, ["harvest", str(root), "--repo", REPO, "--sha", SHA1, "--out", str(out),
                                 "--report", str(listing), "--analyzed-at", "2026-08-28"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "1 records" in result.output and "1 unreadable (1 message-not-literal)" in result.output
    assert listing.read_text() == "m.py:2: message-not-literal: ValueError: the message is a variable (x)\n"
    assert runner.invoke(cli, ["check", str(out)]).exit_code == 0
    bad = runner.invoke(cli, ["harvest", str(root), "--repo", REPO, "--sha", "short", "--out", str(out)])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == ["errordb: --sha 'short': give the full 40-digit lowercase hex commit sha"]


# ---------------------------------------------------------------------------- progress (issue 7)


def test_progress_callback_reports_each_stage_from_zero_to_its_total(tmp_path):
    root = write_tree(tmp_path / "pkg", {f"m{i}.py": f'def f():\n    raise ValueError("message number {i}")\n' for i in range(3)})
    (root / "broken.py").write_text("def f(:\n", encoding="utf-8")
    calls: list[tuple[str, int, int]] = []
    report = harvest(root, repo=REPO, sha=SHA1, out=tmp_path / "records", progress=lambda *call: calls.append(call))
    stages = list(dict.fromkeys(stage for stage, _, _ in calls))
    assert stages == ["classes", "raises", "checking", "writing"]
    for stage in stages:
        steps = [(done, total) for s, done, total in calls if s == stage]
        dones = [done for done, _ in steps]
        assert dones[0] == 0 and dones == sorted(dones) and len({total for _, total in steps}) == 1
        assert dones[-1] == steps[-1][1]
    totals = {stage: total for stage, _, total in calls}
    # 4 files walked, 3 of them parsed; 3 drafts; 3 files written.
    assert totals == {"classes": 4, "raises": 3, "checking": 3, "writing": 3}
    assert report.records == 3


def test_cli_harvest_bar_on_a_terminal_nothing_on_a_pipe_or_when_quiet(tmp_path, monkeypatch):
    import click.testing

    root = write_tree(tmp_path / "pkg", {"a.py": 'raise ValueError("first message")\n',
                                         "b.py": 'def f(x):\n    raise ValueError(x)\n'})  # fmt: skip
    arguments = ["harvest", str(root), "--repo", REPO, "--sha", SHA1]
    summary = (r"2 files \(0 unparsable\), 2 raises \(and 0 re-raises\), 0 helper calls: 1 records; "
               r"1 added, 0 updated \(0 moved\), 0 unchanged, 0 pruned; "
               r"1 unreadable \(1 message-not-literal\) in \d+\.\d\ds \(\d+ files/s\)")

    pipe = CliRunner().invoke(cli, [*arguments, "--out", str(tmp_path / "piped")])
    assert pipe.exit_code == 0, pipe.output
    assert "\r" not in pipe.stderr and pipe.stderr.count("\n") == 1
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'piped'))}: {summary}\n", pipe.stderr)

    # Standard error says it is a terminal, to click and to errordb: click's bar, one per stage.
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: True, raising=False)
    terminal = CliRunner().invoke(cli, [*arguments, "--out", str(tmp_path / "drawn")])
    assert terminal.exit_code == 0, terminal.output
    *bars, last = terminal.stderr.split("\x1b[?25h\n")
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'drawn'))}: {summary}\n", last)  # after the bars
    drawn = [line for bar in bars for line in bar.split("\r") if line]
    stages = list(dict.fromkeys(line.split("  [", 1)[0] for line in drawn))
    assert stages == ["harvest: classes", "harvest: raises", "harvest: checking", "harvest: writing"]
    assert any(line.endswith("2/2") for line in drawn if line.startswith("harvest: raises"))
    assert any(line.endswith("1/1") for line in drawn if line.startswith("harvest: checking"))

    quiet = CliRunner().invoke(cli, [*arguments, "--out", str(tmp_path / "quiet"), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""
    assert len(records(tmp_path / "quiet")) == 1  # quiet, not idle


def test_drafts_are_accepted_by_ingest_and_shown_as_drafts_by_the_site(tmp_path):
    from errordb.publish.site import build_site

    out = copy_records(tmp_path / "records")  # drafts beside reviewed records
    root = write_tree(tmp_path / "pkg", {"m.py": 'def f(x):\n    raise ValueError(f"bad widget {x!r}")\n'})
    harvest(root, repo=REPO, sha=SHA1, out=out)
    (draft,) = records(out).values()
    db_path = tmp_path / "e.db"
    assert ingest([out], db_path).added == 4
    build_site(db_path, tmp_path / "site")
    page = (tmp_path / "site" / "errors" / draft["slug"] / "index.html").read_text(encoding="utf-8")
    assert 'href="../../tags/draft/index.html">draft</a>' in page  # the record's page names it a draft
    # It says what is missing instead of showing empty sections, and claims no analysis.
    assert 'id="draft"' in page and "Not analysed yet." in page and 'id="when"' not in page
    assert "Harvested draft from" in page and "AI-assisted" not in page
    reviewed = next((tmp_path / "site" / "errors").glob("dspark-*/index.html")).read_text(encoding="utf-8")
    assert 'id="draft"' not in reviewed and 'id="when"' in reviewed and "AI-assisted analysis of" in reviewed
    listing = (tmp_path / "site" / "tags" / "draft" / "index.html").read_text(encoding="utf-8")
    assert draft["slug"] in listing  # and tags/draft/ lists what awaits analysis
    assert "dspark" not in listing  # reviewed records are not in it


def test_classes_raised_without_a_message_have_pages_named_after_the_class(tmp_path):
    from errordb.publish.site import build_site

    out = tmp_path / "records"
    root = write_tree(tmp_path / "pkg", {"m.py": "class A:\n    def f(self):\n        raise NotImplementedError\n\n    def g(self):\n        raise NotImplementedError()\n"})
    harvest(root, repo=REPO, sha=SHA1, out=out)
    bare = sorted(records(out).values(), key=lambda r: r["lineNumber"])
    assert [(r["errorMessage"], r["messagePattern"], r["functionName"]) for r in bare] == [("", "", "A.f"), ("", "", "A.g")]
    assert check([out]) == []
    db_path = tmp_path / "e.db"
    ingest([out], db_path)
    build_site(db_path, tmp_path / "site")
    page = (tmp_path / "site" / "errors" / bare[0]["slug"] / "index.html").read_text(encoding="utf-8")
    assert "<h1>NotImplementedError</h1>" in page and "raised without a message" in page
    # Every bare NotImplementedError has the message "": that makes them no "same message" of each other.
    assert "Same message" not in page and "same message" not in page


def test_a_pool_of_processes_and_one_process_find_the_same_sites():
    # Real code with message helpers (click's self.fail) and raises whose message depends on
    # another file's class: read by two worker processes, and in this process.
    import click

    from errordb.harvest import scan

    root = Path(click.__file__).parent
    alone = scan.scan_tree(root, "src/click", workers=1)
    pooled = scan.scan_tree(root, "src/click", workers=2)
    assert [(f.path, f.sites, f.skips, f.raises, f.reraises, f.lines) for f in alone[0]] == \
        [(f.path, f.sites, f.skips, f.raises, f.reraises, f.lines) for f in pooled[0]]
    assert alone[1] == pooled[1]
    assert sum(len(f.sites) for f in alone[0]) > 50 and any(site.via for f in alone[0] for site in f.sites)
