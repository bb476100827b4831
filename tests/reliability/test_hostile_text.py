"""Hostile text in records: escaped or dropped wherever it is shown.

One record, valid and ingested through the schema like any contributed record, carries in every
text field: HTML and ``<script>``, ``javascript:`` and ``data:`` URLs, jinja syntax, Markdown
that tries to make links and images, and terminal escape sequences (CSI, OSC 8 links, OSC 52
clipboard writes, DCS, cursor moves with carriage returns, bells and backspaces). It is then
shown every way errordb shows a record: ``explain`` and ``show`` on the terminal (with and
without colour), as Markdown and as JSON, the JSON API, and the site.
(tests/test_site_hostile.py covers the site for hand-edited databases; this adds the records
that pass validation, data: URLs, the site's JSON files and scripts.)
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import KIMI_PP_ERROR, copy_records, envelope, write_envelope
from reliability_support import INVISIBLE, TROJAN_LINE, invisible_in, run_cli
from test_site_dom import parse_html

from errordb.cli import cli

HOSTILE_ID = "badc0ffee0ddf00d"
ESCAPES = {
    "CSI clear screen": "\x1b[2J",
    "SGR colour": "\x1b[31;1m",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example/\x07click me\x1b]8;;\x07",
    "OSC 52 clipboard write": "\x1b]52;c;cm0gLXJmIH4K\x07",
    "OSC title, ST-terminated": "\x1b]0;pwned\x1b\\",
    "DCS request": "\x1bP+q544e\x1b\\",
    "cursor up and carriage return": "\x1b[1A\r\x1b[2Kfake prompt $ ",
    "bell, backspace, vertical tab, form feed": "\x07\x08\x08\x0b\x0c",
    "bare ESC": "\x1b",
}
MARKUP = (
    "<script>alert(1)</script> <img src=x onerror=alert(1)> [click](javascript:alert(1)) "
    "![pixel](data:image/svg+xml;base64,PHN2Zz4=) <https://evil.example/> [ref]: javascript:alert(2) "
    "<a href=\"data:text/html,<b>x</b>\">a</a> {{ 7*7 }} {% if true %}yes{% endif %} `tick ``` fence"
)
PAYLOAD = " ".join(ESCAPES.values()) + " " + MARKUP
# errordb's own colour codes (SGR): the only escape sequences the terminal output may hold.
_OWN_SGR = re.compile(r"\x1b\[[0-9;]*m")
_FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile_envelope() -> dict:
    data = envelope(KIMI_PP_ERROR)
    record = data["record"]
    record.update(
        id=HOSTILE_ID, slug="hostile-zebra", errorClass="RuntimeError", errorCode=PAYLOAD,
        errorMessage=f"Hostile zebra sighted by the test suite {PAYLOAD}", messagePattern=r"Hostile zebra sighted by the test suite .*",
        filePath="evil/\x1b[2J<script>.py", documentation=f"Docs {PAYLOAD}\n\n{PAYLOAD}",
        triggerScenarios=PAYLOAD, commonSituations=PAYLOAD, solutions=[PAYLOAD, f"second {MARKUP}"],
        exampleFix=f"# before\n{PAYLOAD}\n# after\n```\n{MARKUP}", validationCode=PAYLOAD, typeGuard=PAYLOAD,
        tryCatchPattern=PAYLOAD, preventionTips=[PAYLOAD], tags=["evil"],
    )  # fmt: skip
    source = record["sourceCode"].split("\n")
    source[0] = f"# {PAYLOAD}"
    record["sourceCode"] = "\n".join(source)
    return data


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-text")
    records = copy_records(folder / "records")
    write_envelope(records, hostile_envelope())
    path = folder / "errordb.db"
    result = run_cli("ingest", records, "--db", path, "-q")
    assert result.exit_code == 0, result.stderr  # the record is valid: nothing stops it at the door
    return path


@pytest.fixture(scope="module")
def c1_db(db, tmp_path_factory) -> Path:
    """The same, hand-edited to hold 8-bit C1 controls (U+009B is CSI), which the schema refuses."""
    path = tmp_path_factory.mktemp("c1") / "errordb.db"
    shutil.copy(db, path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE records SET documentation = documentation || ?, errorMessage = errorMessage || ? WHERE id = ?",
                     ["\x9b2J\x9d0;pwned\x9c\x90+q\x9c", "\x9b31m", HOSTILE_ID])  # fmt: skip
        conn.execute("UPDATE solutions SET text = text || ? WHERE record_id = ?", ["\x9b1A\x85", HOSTILE_ID])
    conn.close()
    return path


def assert_terminal_safe(text: str, color: bool) -> None:
    if color:
        text = _OWN_SGR.sub("", text)
    assert "\x1b" not in text, repr(text[max(0, text.find("\x1b") - 40) : text.find("\x1b") + 40])
    found = _FORBIDDEN.search(text)
    assert found is None, (hex(ord(found.group())), text[max(0, found.start() - 40) : found.start() + 40])


def has_show() -> bool:
    return "show" in cli.commands


TERMINAL_COMMANDS = {
    "explain": ["explain", "RuntimeError: Hostile zebra sighted by the test suite plain"],
    "show": ["show", HOSTILE_ID],
}


@pytest.mark.parametrize("color", ["--color", "--no-color"])
@pytest.mark.parametrize("command", sorted(TERMINAL_COMMANDS))
def test_no_escape_sequence_reaches_the_terminal(db, c1_db, command, color, figures):
    if command == "show" and not has_show():
        pytest.skip("errordb show is not there yet (being added in errordb/cli.py and errordb/browse.py)")
    for database in (db, c1_db):
        result = run_cli(*TERMINAL_COMMANDS[command], "--db", database, color)
        assert result.exit_code == 0, result.output
        assert_terminal_safe(result.stdout, color == "--color")
        # Dropped, not the text around them: the record is still readable.
        assert "Hostile zebra sighted by the test suite" in result.stdout and "click me" in result.stdout and "fake prompt $" in result.stdout
        assert "{{ 7*7 }}" in result.stdout and "<script>alert(1)</script>" in result.stdout  # literal, never evaluated
    if command == "explain" and color == "--color":
        figures.add(
            "Terminal escapes in a record (explain, show)",
            f"{len(ESCAPES)} kinds of escape sequence ({', '.join(ESCAPES)}) in every text field, plus 8-bit C1 "
            "controls in a hand-edited database; explain and show, with and without --color",
            2 * 2 * 2,
            "no ESC, C0 (but newline and tab), DEL or C1 character reaches stdout except errordb's own colour codes; "
            "the text around them is kept",
        )


def markdown_injections(markdown: str) -> list[str]:
    """What in ``markdown`` would become a link, an image, HTML or a link definition on GitHub."""
    text = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1[ \t]*$", "", markdown)  # fenced code blocks
    text = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)  # code spans
    text = re.sub(r"\\.", "", text)  # backslash escapes are literal characters
    # errordb's own links: the record's source on GitHub (and its page and JSON on a configured site)
    text = re.sub(r"\[(?:Source|Page|JSON)\]\(<https://[^\s<>]*>\)", "", text)
    patterns = {
        "inline link or image": r"\]\(",
        "HTML tag or autolink": r"<[A-Za-z/!?]",
        "link reference definition": r"(?m)^ {0,3}\[[^\]]*\]:",
        "image": r"!\[",
    }
    return [name for name, pattern in patterns.items() if re.search(pattern, text)]


MARKDOWN_COMMANDS = {
    "explain --format markdown": ["explain", "RuntimeError: Hostile zebra sighted by the test suite plain", "--format", "markdown"],
    "show --format markdown": ["show", HOSTILE_ID, "--format", "markdown"],
}


@pytest.mark.parametrize("name", sorted(MARKDOWN_COMMANDS))
def test_markdown_output_cannot_make_links_images_or_html(db, c1_db, name, figures):
    if name.startswith("show") and not has_show():
        pytest.skip("errordb show is not there yet")
    for database in (db, c1_db):
        result = run_cli(*MARKDOWN_COMMANDS[name], "--db", database)
        assert result.exit_code == 0, result.output
        assert markdown_injections(result.stdout) == [], result.stdout
        assert_terminal_safe(result.stdout, color=False)
    assert markdown_injections("[x](javascript:alert(1)) <b> ![i](data:x)") == ["inline link or image", "HTML tag or autolink", "image"]
    if name.startswith("explain"):
        figures.add(
            "Markdown injection in a record (explain, show --format markdown)",
            "inline links and images with javascript: and data: URLs, autolinks, link definitions, raw HTML, "
            "backticks and fences that try to close code",
            4,
            "no unescaped link, image, HTML tag or link definition outside code; no control characters",
        )


@pytest.mark.parametrize("args", [["explain", "RuntimeError: Hostile zebra sighted by the test suite plain", "--format", "json"], ["show", HOSTILE_ID, "--format", "json"]])
def test_json_output_is_valid_json_carrying_the_text_escaped(db, args):
    if args[0] == "show" and not has_show():
        pytest.skip("errordb show is not there yet")
    result = run_cli(*args, "--db", db)
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout and not _FORBIDDEN.search(result.stdout.replace("\n", ""))  # \u001b, not ESC
    assert any(PAYLOAD in text for text in strings(json.loads(result.stdout)))  # the data itself is kept exactly


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_the_api_is_valid_json_with_every_control_character_escaped(db, tmp_path):
    api = tmp_path / "api"
    assert run_cli("export", "--db", db, "--out", api, "-q").exit_code == 0
    record = api / "errors" / f"{HOSTILE_ID}.json"
    assert json.loads(record.read_text(encoding="utf-8")) == hostile_envelope()
    for path in api.rglob("*.json"):
        raw = path.read_text(encoding="utf-8")
        json.loads(raw)
        assert not _FORBIDDEN.search(raw.replace("\n", "")), path


def test_the_site_shows_validated_hostile_records_as_text(db, tmp_path, figures):
    site = tmp_path / "site"
    assert run_cli("build", "--db", db, "--out", site, "-q").exit_code == 0
    pages = sorted(site.rglob("*.html"))
    for path in pages:
        text = path.read_text(encoding="utf-8")
        assert "<script>alert" not in text and "<img" not in text and "<b>x</b>" not in text, path
        for node in parse_html(text).iter():
            assert not any(name.startswith("on") for name in node.attrs), (path, node)
            for name in ("href", "src", "action", "formaction"):
                value = (node.attrs.get(name) or "").strip().lower()
                assert not value.startswith(("javascript:", "data:", "vbscript:")), (path, name, value)
    page = parse_html((site / "errors" / "hostile-zebra" / "index.html").read_text(encoding="utf-8"))
    meaning = page.by_id("meaning").text()
    assert "{{ 7*7 }}" in meaning and "<script>alert(1)</script>" in meaning and "javascript:alert(1)" in meaning
    # Plain https URLs are linked by design (rel=nofollow noopener); javascript: and data: never.
    links = [a for a in page.by_id("meaning").find_all("a") if a.attrs.get("class") != "anchor"]  # not the heading's
    assert links and all(a.attrs["href"] == "https://evil.example/" and "nofollow" in a.attrs["rel"] for a in links)
    for path in site.rglob("*.json"):
        json.loads(path.read_text(encoding="utf-8"))  # the search index and the API stay data
    figures.add(
        "HTML, script, javascript:/data: URLs and jinja in a validated record (site)",
        "the record above, built into the site",
        len(pages),
        "no tag, event handler or javascript:/data: URL from the record in any page; jinja shown literally; every JSON file parses",
    )


def test_the_site_scripts_never_parse_record_text_as_html():
    """The search and explain boxes put record text into the page with textContent only."""
    from errordb.publish.site import templates_dir

    for script in (templates_dir() / "static").glob("*.js"):
        source = script.read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute(\"on"):
            assert sink not in source, (script.name, sink)
        for link in re.findall(r"href:\s*([^,}]+)", source):
            assert "encodeURIComponent" in link, (script.name, link)  # slugs go into URLs encoded


def test_a_hand_edited_slug_with_escapes_does_not_reach_the_terminal(db, tmp_path):
    path = tmp_path / "slug.db"
    shutil.copy(db, path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE records SET slug = ? WHERE id = ?", ["hostile\x1b]0;pwned\x07", HOSTILE_ID])
    conn.close()
    result = run_cli("explain", "RuntimeError: Hostile zebra sighted by the test suite plain", "--db", path, "--no-color")
    assert_terminal_safe(result.stdout, color=False)


# Invisible formatting characters ("Trojan Source") --------------------------------------------

TROJAN_ID = "7e57b1d1c0ffee00"
HIDDEN = "".join(INVISIBLE.values())


def trojan_envelope() -> dict:
    """A valid record with every INVISIBLE character in its message, prose, solutions and code,
    and the Trojan Source line in its source snippet."""
    data = envelope(KIMI_PP_ERROR)
    record = data["record"]
    record.update(
        id=TROJAN_ID, slug="trojan-zebra", errorClass="RuntimeError", errorMessage=f"Trojan zebra sighted by the test suite [{HIDDEN}] end",
        messagePattern=r"Trojan zebra sighted by the test suite .*", documentation=f"Docs [{HIDDEN}] {TROJAN_LINE}",
        solutions=[f"Check [{HIDDEN}]"], exampleFix=f"{TROJAN_LINE}\n    grant()", validationCode=TROJAN_LINE,
        triggerScenarios=f"When [{HIDDEN}]", tags=["evil"],
    )  # fmt: skip
    source = record["sourceCode"].split("\n")
    source[0] = TROJAN_LINE
    record["sourceCode"] = "\n".join(source)
    return data


@pytest.fixture(scope="module")
def trojan_db(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("trojan")
    records = copy_records(folder / "records")
    write_envelope(records, trojan_envelope())
    path = folder / "errordb.db"
    result = run_cli("ingest", records, "--db", path, "-q")
    assert result.exit_code == 0, result.stderr  # valid: the schema has no rule against them
    return path


TROJAN_COMMANDS = {
    "explain": ["explain", "RuntimeError: Trojan zebra sighted by the test suite plain"],
    "explain --color": ["explain", "RuntimeError: Trojan zebra sighted by the test suite plain", "--color"],
    "explain --format markdown": ["explain", "RuntimeError: Trojan zebra sighted by the test suite plain", "--format", "markdown"],
    "show": ["show", TROJAN_ID],
    "show --color": ["show", TROJAN_ID, "--color"],
    "show --format markdown": ["show", TROJAN_ID, "--format", "markdown"],
}


def test_invisible_characters_in_a_record_are_shown_not_obeyed(trojan_db, figures):
    """explain and show (text, colour on and off, Markdown) show each bidi control and invisible
    character of a record as <U+XXXX>: the terminal or the Markdown viewer never gets to reorder
    or hide the text, and the reader sees where it was made to look different from what it is."""
    for name, args in TROJAN_COMMANDS.items():
        result = run_cli(*args, "--db", trojan_db)
        assert result.exit_code == 0, (name, result.output)
        assert invisible_in(result.stdout) == [], name
        shown = re.sub(r"\\(.)", r"\1", result.stdout)  # Markdown's backslash escapes undone
        assert "[<U+202A><U+202B><U+202C><U+202D><U+202E><U+2066><U+2067>" in shown, (name, shown[:400])
        if "markdown" not in name:
            assert 'if access_level != "user<U+202E> <U+2066># Check if admin<U+2069> <U+2066>":' in shown, name
    figures.add(
        "Invisible formatting characters in a record (explain, show)",
        f"{len(INVISIBLE)} characters ({', '.join(INVISIBLE)}) in the message, prose, solutions, example fix and "
        "source snippet (the Trojan Source line); explain and show as text (colour off and on) and Markdown",
        len(TROJAN_COMMANDS),
        "none reaches the output as it is: each is shown as <U+XXXX> where it was; the text around them is kept",
    )


def test_invisible_characters_in_a_record_are_shown_in_the_site_code(trojan_db, tmp_path, figures):
    """On the site, code blocks (the message, the source snippet, the example fix, validation
    code) show them as <U+XXXX> too: a browser would otherwise draw the Trojan Source line as the
    harmless-looking one. (Prose and headings are left to the browser.)"""
    site = tmp_path / "site"
    assert run_cli("build", "--db", trojan_db, "--out", site, "-q").exit_code == 0
    page = parse_html((site / "errors" / "trojan-zebra" / "index.html").read_text(encoding="utf-8"))
    blocks = [node.text() for node in page.iter() if node.tag == "pre"]
    assert blocks and not any(invisible_in(text) for text in blocks), [invisible_in(t) for t in blocks]
    trojan = [t for t in blocks if "access_level" in t]
    assert len(trojan) >= 3 and all("user<U+202E> <U+2066># Check if admin<U+2069> <U+2066>" in t for t in trojan), trojan
    figures.add(
        "Invisible formatting characters in a record (site)",
        "the record above, built into the site: its page's code blocks (message, source snippet, example fix, validation code)",
        len(blocks),
        f"no bidi control or invisible character in any of the {len(blocks)} code blocks: each shown as <U+XXXX>",
    )


# Error messages quoting untrusted text -----------------------------------------------------------

HOSTILE_NAME = "x\n\x1b[2J\x1b]0;pwned\x07y\u202ez\x9b"


def _error_cases(tmp_path: Path, db: Path) -> dict[str, list[str]]:
    blocker = tmp_path / f"file{HOSTILE_NAME}"
    blocker.write_text("a file, not a folder", encoding="utf-8")
    return {
        "no such record (ErrordbError)": ["show", HOSTILE_NAME, "--db", db],
        "unreadable log (ErrordbError)": ["explain", "--file", tmp_path / f"missing{HOSTILE_NAME}.log", "--db", db],
        "no such database (ErrordbError)": ["explain", "x", "--db", tmp_path / f"missing{HOSTILE_NAME}.db"],
        "a file in the way (OSError)": ["export", "--db", db, "--out", blocker / "api", "-q"],
    }


def test_error_messages_quoting_untrusted_text_are_one_safe_line(db, tmp_path, monkeypatch, figures):
    """Errors quote file names, arguments and (internal errors) exception messages: newlines,
    escape sequences, C1 and bidi controls in them are written as \\xNN or <U+XXXX>, so the error
    stays one line and cannot drive the terminal (colour forced on: click keeps escapes then)."""
    from click.testing import CliRunner

    cases = _error_cases(tmp_path, db)
    for name, args in cases.items():
        result = CliRunner().invoke(cli, [str(a) for a in args], color=True)
        assert result.exit_code in (1, 2), (name, result.exit_code, result.output)
        line = result.stderr
        assert line.startswith("errordb: ") and line.count("\n") == 1 and line.endswith("\n"), (name, line)
        assert not _FORBIDDEN.search(line[:-1]) and "\x1b" not in line and not invisible_in(line), (name, line)
        assert "x\\x0a\\x1b[2J\\x1b]0;pwned\\x07y<U+202E>z\\x9b" in line, (name, line)  # shown, escaped
    from errordb import browse

    def broken(*args, **kwargs):
        raise RuntimeError(f"bug {HOSTILE_NAME}")

    monkeypatch.setattr(browse, "show", broken)
    result = CliRunner().invoke(cli, ["show", "x", "--db", str(db)], color=True)
    assert result.exit_code == 70 and result.stderr.count("\n") == 1 and "\x1b" not in result.stderr, result.stderr
    assert "internal error: RuntimeError: bug x\\x0a" in result.stderr
    figures.add(
        "Untrusted text in error messages (CLI)",
        "a name with a newline, CSI and OSC sequences, BEL, U+202E and 8-bit CSI as a record key, a log file, a "
        "database file, a file in the way of --out, and in an internal error's message; colour forced on",
        len(cases) + 1,
        "each error is one line with exit 1, 2 or 70; the name shown with \\xNN and <U+XXXX> escapes, no control character",
    )
