"""text.clean and text.one_line: invisible formatting characters are shown, never passed on."""

from __future__ import annotations

import sys
import unicodedata

from errordb.text import clean, one_line, reveal_invisible

JOINERS = {"\u200c", "\u200d"}  # kept: emoji and several scripts need them


def test_every_format_character_of_this_pythons_unicode_is_revealed():
    """The list in render.py against the running Python's Unicode database: every format
    character (Cf) and the line and paragraph separators but the two joiners."""
    missed = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cf", "Zl", "Zp")
        and chr(code) not in JOINERS
        and reveal_invisible(chr(code)) != f"<U+{code:04X}>"
    ]
    assert missed == [], (unicodedata.unidata_version, missed)


def test_reveal_keeps_ordinary_text():
    text = "héllo wörld ‑ 日本語 עברית العربية 👩\u200d💻 ok"
    assert reveal_invisible(text) == text and clean(text) == text


def test_clean_drops_controls_and_reveals_bidi():
    assert clean("a\x1b[2Jb\u202ec\n\td\x9b") == "ab<U+202E>c\n\td"


def test_one_line_escapes_controls_and_reveals_bidi():
    assert one_line("a\nb\x1b[2J\tc\u2066d\x7f") == "a\\x0ab\\x1b[2J\\x09c<U+2066>d\\x7f"
    assert one_line("plain: text") == "plain: text"
