"""The joined-pattern lexer (errordb/site_lexing.py) gives exactly Pygments' tokens."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pygments.lexers import BashLexer, PythonLexer

from errordb.site_lexing import JoinedRegexLexer, _first_chars

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {"stripnl": False, "stripall": False, "ensurenl": False}


class _Python(JoinedRegexLexer, PythonLexer):
    pass


class _Bash(JoinedRegexLexer, BashLexer):
    pass


def _texts() -> list[str]:
    texts = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "errordb").glob("*.py"))]
    for path in sorted((ROOT / "records").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8")).get("record", {})
        texts += [value for value in record.values() if isinstance(value, str)]
    # Awkward corners: string prefixes, f-strings, unterminated strings, odd characters.
    texts += ['f"{x!r:>{w}}" rb\'\\x00\' Rb"""a\nb""" u\'\' br"\\"', "'unterminated\nx = 1", "\u212a = 1 # kelvin", "@dec\nclass A(B, metaclass=M): ...", "\t\\\n$`~?", ""]
    rng = random.Random(5)
    alphabet = "abcdefrRbBuUfF_ 0123456789.()[]{}:'\"#\\\n\t=+-*/%@!<>,;$`~?é\u212a"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(400)]
    return texts


@pytest.mark.parametrize(("plain", "joined"), [(PythonLexer, _Python), (BashLexer, _Bash)])
def test_the_tokens_are_pygments_tokens(plain, joined):
    slow, fast = plain(**OPTIONS), joined(**OPTIONS)
    for text in _texts():
        assert list(fast.get_tokens(text)) == list(slow.get_tokens(text)), text


def test_first_characters_are_a_superset_or_unknown():
    assert _first_chars(r"[^\S\n]+", 0) == frozenset(c for c in map(chr, range(128)) if c.isspace() and c != "\n")
    assert _first_chars(r"(?i)(rb|br)", 0) == frozenset("rRbB")
    assert _first_chars(r"(?<!\.)(abs|all)\b", 0) == frozenset("a")
    assert _first_chars(r"x?y", 0) == frozenset("xy")
    assert _first_chars(r"x*", 0) is None  # can match empty: always tried
    assert _first_chars(r".", 0) is None
    assert _first_chars("\u212a", 0) == frozenset()  # matches no ASCII character at all
    assert _first_chars("(?i)\u212a", 0) is None  # folds to "k"
