"""The site's Python colouring (errordb/publish/lexing.py): every character kept, escaped, and
coloured as Pygments would colour it but for the details the module decides on purpose."""

from __future__ import annotations

import html
import json
import random
import re
import sysconfig
from pathlib import Path

import pytest
from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES

from errordb.publish import lexing as site_lexing
from errordb.publish.lexing import python_lines

ROOT = Path(__file__).resolve().parents[1]
_PIECE = re.compile(r'<span class="([a-z0-9]+)">([^<]*)</span>|([^<]+)')


def _pieces(source: str) -> list[tuple[str, str]]:
    """(class, text) of each run of ``python_lines(source)``, line ends as ("", "\\n")."""
    out: list[tuple[str, str]] = []
    for index, line in enumerate(python_lines(source)):
        if index:
            out.append(("", "\n"))
        position = 0
        for found in _PIECE.finditer(line):
            assert found.start() == position, f"unexpected markup in {line!r}"
            css, inner, plain = found.groups()
            out.append((css or "", html.unescape(inner if css else plain)))
            position = found.end()
        assert position == len(line), f"unexpected markup in {line!r}"
    return out


def _text(source: str) -> str:
    return "".join(text for _, text in _pieces(source))


def _classes(source: str, wanted: str) -> list[str]:
    """The texts coloured ``wanted``."""
    return [text for css, text in _pieces(source) if css == wanted]


#: What style.css tells apart: Pygments' classes in the colour groups a reader sees.
_GROUPS = {
    **dict.fromkeys(("k", "kn", "kd", "kr", "kp", "ow"), "keyword"),
    "kc": "constant",
    **dict.fromkeys(("nf", "fm", "nc"), "defined"),
    **dict.fromkeys(("nb", "bp", "ne", "nv", "nt"), "builtin"),
    **dict.fromkeys(("s", "s1", "s2", "sa", "sb", "sc", "sd", "se", "sh", "si", "sx", "dl"), "string"),
    **dict.fromkeys(("m", "mi", "mf", "mh", "mo", "mb", "il"), "number"),
    **dict.fromkeys(("c", "c1", "cm", "cs", "ch", "cp"), "comment"),
    "o": "operator",
    "nd": "decorator",
}


def _pygments_groups(source: str) -> list[str]:
    groups = []
    for _, token, text in PythonLexer(stripnl=False, stripall=False, ensurenl=False).get_tokens_unprocessed(source):
        while token not in STANDARD_TYPES and token.parent is not None:
            token = token.parent
        groups += [_GROUPS.get(STANDARD_TYPES.get(token, ""), "")] * len(text)
    return groups


def _our_groups(source: str) -> list[str]:
    return [_GROUPS.get(css, "") for css, text in _pieces(source) for _ in text]


def _real_sources() -> list[str]:
    texts = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "errordb").glob("*.py"))]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts += [path.read_text(encoding="utf-8") for path in sorted(stdlib.glob("[a-s]*.py"))[:80]]
    for path in sorted((ROOT / "records").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8")).get("record", {})
        texts += [record[name] for name in ("sourceCode", "exampleFix", "validationCode", "typeGuard", "tryCatchPattern") if record.get(name)]
    return texts


def test_colours_agree_with_pygments_on_real_code():
    """Character by character, in the colour groups the page shows: real modules (this
    project's, the standard library's, the records' snippets)."""
    same = total = 0
    differences: dict[tuple[str, str], int] = {}
    for source in _real_sources():
        theirs, ours = _pygments_groups(source), _our_groups(source)
        assert len(theirs) == len(ours) == len(source)
        for char, their, our in zip(source, theirs, ours):
            if char.isspace():
                continue
            total += 1
            same += their == our
            if their != our:
                differences[their, our] = differences.get((their, our), 0) + 1
    assert total > 1_000_000
    # Measured 99.97%: special methods Pygments leaves plain (__class_getitem__), builtins its
    # list lacks (exec), names imported from a module (compile in "from re import compile").
    assert same / total > 0.999, sorted(differences.items(), key=lambda item: -item[1])[:10]


AWKWARD = ['f"{x!r:>{w}}" rb\'\\x00\' Rb"""a\nb""" u\'\' br"\\""', "'unterminated\nx = 1", "\u212a = 1 # kelvin",
           "@dec.x\nclass A(B, metaclass=M): ...", "\t\\\n$`~?", "", "\n", "x\n\n", 'f"""a\n{b\n+ 1}\n"""',
           'f"{"', 'f"}"', "f'{x:{y:{z}}}'", 'f"{x = !r:>3}{y==1}{z!=2}{a<=b}"', "'''open\n\n", "0x1F 1_000.5e-3j .5 1.",
           "x = 'a' \\\n    'b'", "# only a comment", "<script>&amp;</script>", "a @ b @c\n@d"]  # fmt: skip


def _random_texts(count: int = 600) -> list[str]:
    rng = random.Random(5)
    alphabet = "abcdefrRbBuUfFtT_ 0123456789.()[]{}:'\"#\\\n\t=+-*/%@!<>,;$`~?é\u212a\u2028\u00a0"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(count)]


def _check_kept(source: str) -> None:
    lines = python_lines(source)
    assert len(lines) == source.count("\n") + 1, source
    assert _text(source) == source.replace("\u2028", "<U+2028>"), source
    for line in lines:  # no raw markup but ours
        assert re.sub(r'<span class="[a-z0-9]+">|</span>', "", line).count("<") == 0, source


@pytest.mark.parametrize("source", AWKWARD)
def test_every_character_is_kept_in_order_and_escaped(source):
    _check_kept(source)


def test_random_text_is_kept_in_order_and_escaped():
    for source in _random_texts():
        _check_kept(source)


def test_record_text_never_becomes_markup_and_invisible_characters_show():
    source = 'x = "</pre><script>alert(1)</script>"  # <b>&\n\u202e = 1\ny = "\u2066abc"'
    lines = python_lines(source)
    assert "<script>" not in "".join(lines) and "&lt;script&gt;" in lines[0] and "&amp;" in lines[0]
    assert "<U+202E>" in html.unescape(lines[1]) and "\u202e" not in lines[1]
    assert "<U+2066>" in html.unescape(lines[2]) and "\u2066" not in lines[2]


def test_what_is_coloured():
    source = (
        "import os.path as p\nfrom . import (a,\n  b)\n"
        "@dataclass\nclass Thing(Base):\n    def __init__(self, x=None):\n        super().__init__()\n"
        "        print(x.print, len(self), exec)\n        raise ValueError('m') from None\n"
    )
    assert _classes(source, "kn") == ["import", "from", "import", "from"]
    assert _classes(source, "k") == ["as", "class", "def", "raise"]
    assert _classes(source, "nd") == ["@dataclass"]
    assert _classes(source, "nc") == ["Thing"]
    assert _classes(source, "fm") == ["__init__", "__init__"]
    assert _classes(source, "nb") == ["super", "print", "len", "exec"]  # not x.print
    assert _classes(source, "bp") == ["self", "self"]
    assert _classes(source, "kc") == ["None", "None"]  # "from None" is not an import
    assert _classes(source, "ne") == ["ValueError"]
    assert _classes(source, "s1") == ["'m'"]
    assert "." not in _classes(source, "o")[:1]  # os.path and ". import" are module paths
    assert _classes("os.path", "o") == ["."]


def test_soft_keywords_only_at_the_head_of_a_statement():
    assert _classes("match command.split():\n    case [x]:\n        pass", "k") == ["match", "case", "pass"]
    assert _classes("match = 1\nmatch.group()\nx = match\ncase: int", "k") == []


def test_f_strings_show_their_fields_as_python():
    pieces = _pieces('f"a {x.y!r:>{w}} {{b}} {d[\'k\'] + 1} {z=}"')
    assert ("sa", "f") in pieces and ("se", "{{") in pieces and ("se", "}}") in pieces
    assert ("si", "!r:>") in pieces  # conversion and spec, then the spec's own field
    assert ("o", ".") in pieces and ("o", "+") in pieces and ("m", "1") in pieces and ("s1", "'k'") in pieces
    assert ("si", "=") in pieces  # the self-documenting "=", not an operator
    assert _classes('f"{a == b}"', "o") == ["=="]
    # Fields over several lines of a triple-quoted f-string keep the lines.
    assert python_lines('f"""a\n{b\n+ 1}\n"""')[1:3] == ['<span class="si">{</span>b', '<span class="o">+</span> <span class="m">1</span><span class="si">}</span>']


def test_a_remembered_line_is_coloured_as_the_line_in_its_own_text():
    """Lines are remembered by their text (site_lexing._LINES) once coloured from one line end
    to the next. Windows of real modules cut at random lines (inside docstrings, strings
    continued with a backslash, open brackets), the awkward and the random texts, in a random
    order: each coloured with every line remembered from the others is what the lexer makes
    of it alone."""
    rng = random.Random(11)
    windows = AWKWARD + _random_texts(300) + [text + "\n" + text for text in AWKWARD + _random_texts(100)]
    for source in _real_sources()[:60]:
        lines = source.split("\n")
        for _ in range(12):
            start = rng.randrange(len(lines))
            windows.append("\n".join(lines[start : start + rng.choice([1, 5, 37])]))
    rng.shuffle(windows)
    alone = []
    for window in windows:
        site_lexing._LINES.clear()
        alone.append(python_lines(window))
    site_lexing._LINES.clear()
    remembered = total = 0
    for window, expected in zip(windows, alone):
        remembered += sum(line in site_lexing._LINES for line in window.split("\n")[:-1])
        total += window.count("\n")
        assert python_lines(window) == expected, window
    assert remembered > total / 4, (remembered, total)  # enough lines came from memory to test it


def test_only_lines_of_usual_length_are_remembered():
    site_lexing._LINES.clear()
    long_line, short_line = "x = " + "a + " * 60, "y = 1"
    python_lines(f"{long_line}\n{short_line}\nz")
    assert list(site_lexing._LINES) == [short_line]  # the last line is never remembered either
    site_lexing._LINES.clear()


@pytest.mark.parametrize(
    "source",
    ['"' + "\\" * 100_001, "f'" + "{" * 50_000, "f'" + "}" * 100_000 + "'", "'''" + "'" * 99_999, 'f"{' + "(" * 50_000, "f'{x:" + "{y:" * 30_000, "x" * 200_000, "." * 100_000],
    ids=["backslashes", "open-fields", "closing-braces", "quotes", "open-brackets", "nested-specs", "one-name", "dots"],
)
def test_hostile_snippets_are_lexed_in_one_pass(source):
    """Each of these would take minutes (or overflow the stack) if any step went back over the
    text or recursed per character."""
    assert _text(source) == source
