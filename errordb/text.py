"""Untrusted text made safe to show: in a terminal, in one line of an error message.

Record text, pasted tracebacks, file names and SQLite's messages can hold terminal escape
sequences and invisible formatting characters. Everything errordb prints passes one of these.
"""

from __future__ import annotations

import re

# Every alternative starts with a fixed character and its repeated parts are disjoint character
# classes, so the pattern runs in linear time whatever the text.
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # other escape sequences (charset selection, ESC 7, ...)
    r"|\x1b"  # a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
# C0 controls but tab and newline, DEL, and the C1 controls (U+0080-U+009F): some terminals
# obey C1 introducers (OSC, DCS, ...) in UTF-8 text as they obey ESC sequences.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Characters that are not drawn but change how the text around them is drawn: Unicode's format
# characters (category Cf) and the line and paragraph separators. The bidirectional embeddings,
# overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) make a
# terminal or a browser show text in another order than it is read ("Trojan Source": code that
# looks harmless and is not); zero-width spaces, word joiners, invisible operators, the BOM and
# the tag characters hide text or split words invisibly. They are shown as <U+XXXX> rather than
# removed, so the reader sees that the text was made to look different from what it is, and
# where. Left as they are: the zero-width joiner and non-joiner (U+200C, U+200D), which emoji and
# several scripts need to be drawn right and which reorder nothing.
# (tests/test_render_invisible.py checks this against the running Python's Unicode database.)
_INVISIBLE = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
# Control characters in a one-line message: shown as \xNN escapes (the line stays one line).
_ONE_LINE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def reveal_invisible(text: str) -> str:
    """``text`` with each invisible formatting character (bidi controls...) written as ``<U+XXXX>``."""
    if text.isascii():  # the common case, and none of them is ASCII
        return text
    return _INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def without_escapes(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (C0, DEL, C1; newlines
    and tabs stay)."""
    if "\x1b" in text or "\x9b" in text:
        text = _ESCAPE.sub("", text)
    return text if text.isprintable() else _CONTROL.sub("", text)


def clean(text: str | None) -> str:
    """``text`` for a terminal: :func:`without_escapes`, invisible formatting characters shown as
    ``<U+XXXX>``."""
    return reveal_invisible(without_escapes(text or ""))


def one_line(text: str) -> str:
    """``text`` as one safe line: control characters (newlines, ESC...) written as ``\\xNN``,
    invisible formatting characters as ``<U+XXXX>``. For error messages that quote untrusted
    text (file names, command-line arguments, SQLite's messages quoting a damaged database)."""
    return reveal_invisible(printable(text))


def printable(text: str) -> str:
    """``text`` with control characters written as ``\\xNN``: safe in a one-line message."""
    return _ONE_LINE_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
