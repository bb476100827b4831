"""The fast path: lines an idle parser ignores, recognised without parsing them.

Most lines of a big log are ordinary log records. While no source has anything open (the
driver's ``quiet``), such a line changes nothing. ``iter_exceptions`` then reads lines in blocks
and skips a whole block when :func:`all_noise` says that none of its lines can matter, instead
of cleaning, prefix-stripping and classifying every line. The test may fail on harmless lines
(they are then parsed one by one), but must never pass a line the idle state machine would
react to.

It can look at the raw lines because the content the rules see is a suffix of the cleaned
line (``strip_prefixes`` only cuts prefixes off), and the cleaned line is the raw line
right-stripped -- unless ``clean_line`` removes something (control characters, escape
sequences, an overlong tail) or a Ray "[repeated Nx across cluster]" suffix is cut off: such
lines fail.

The rules are those of ``LogSource.feed`` (group framing) and ``ChainParser._on_idle`` as an
idle source runs them: depth 0, no pending separator, not inside a RemoteTraceback's quotes, so
an exception line is judged strictly (``is_exception_class``). Each trigger is a substring that
every line a rule reacts to contains somewhere.
"""

from __future__ import annotations

import re

from errordb.explainer.parse.classify import (
    BUILTIN_EXCEPTIONS,
    CAUSE_LINE,
    CLASS_SUFFIXES,
    CONTEXT_LINE,
    EXCEPTION_MODULES,
    JSON_MESSAGE_KEYS,
)
from errordb.explainer.parse.lines import MAX_LINE_CHARS

BLOCK_LINES = 64  # lines tested at once while nothing is open ...
BLOCK_CHARS = MAX_LINE_CHARS  # ... if they are no longer than this in all

_TRIGGERS = (
    "Traceback",  # every header (plain, group, "...: Traceback (most..."), rich's box, *RemoteTraceback
    "Stack (most",  # logging's stack_info block ("Stack (most recent call last):")
    "Call stack:",  # the call stack of logging's "--- Logging error ---" report
    CAUSE_LINE[:19],  # "The above exception": a chain separator
    CONTEXT_LINE[:15],  # "During handling": the other one
    'File "',  # a frame: a traceback without its header, a SyntaxError block
    "Fatal Python error",  # faulthandler
    "Windows fatal exception",
    "E  ",  # pytest's "E   ..." lines
    *CLASS_SUFFIXES,  # a class-like name ends in one of these ...
    # ... or is a builtin name, which (today) always contains one of them anyway.
    *sorted(n for n in BUILTIN_EXCEPTIONS if not any(sfx in n for sfx in CLASS_SUFFIXES)),
)
# Triggers that start with a double quote, then "e": the message fields of JSON error bodies
# (AWS Lambda's, structlog's), which the driver pairs with a class field.
_PLAIN_TRIGGERS = tuple(f'"{key}"' for key in JSON_MESSAGE_KEYS)
assert all(t[0] == '"' and t[1] == "e" for t in _PLAIN_TRIGGERS), "the plain triggers share one prefilter"
# A class in a module of exceptions ("requests.exceptions.MissingSchema", or "errors.C" at the
# start of a line), which need not end in a suffix: the module's name and its dot.
_MODULE_TRIGGERS = tuple(f"{module}." for module in sorted(EXCEPTION_MODULES))
assert all(t[-2] in "sc" for t in _MODULE_TRIGGERS), "the module triggers share one prefilter"
# pytest's short summary "FAILED id - msg" / "ERROR id - msg" needs its " - " as well.
_SUMMARY_TRIGGERS = ("FAILED ", "ERROR ")

# All triggers are found in one pass over the encoded text. The regex engine scans fast only
# for a literal first character, so bytes.translate maps the first letter of every trigger (all
# are ASCII capitals: T, S, D, F, W, E, I) to \x01, and the triggers, translated the same way,
# become one pattern that starts with \x01. The same pass maps the ASCII characters clean_line
# removes (C0 controls but tab and newline, and DEL) to \x02 and carriage returns to \x03. UTF-8
# keeps ASCII bytes for ASCII characters only, so encoding neither loses a trigger nor makes one
# up; C1 controls, which clean_line removes too, are two bytes (\xc2 \x80-\x9f): _C1_UTF8_RE.
# "." and the double quote both become \x04, so that one scan for "\x04e" finds where a plain
# trigger may be, and two for "s\x04" and "c\x04" where a module trigger may be (each scan of a
# block costs as much as the rest of the test).
_ANCHORS = frozenset(t[0] for t in _TRIGGERS + _SUMMARY_TRIGGERS)
assert all(ord(c) < 128 and c.isupper() for c in _ANCHORS), "a trigger must start with an ASCII capital"
_FAST_TABLE = bytes(
    1 if chr(b) in _ANCHORS else 3 if b == 13 else 2 if (b < 32 and b not in (9, 10)) or b == 127 else 4 if chr(b) in '."' else b
    for b in range(256)
)
_C1_UTF8_RE = re.compile(rb"\xc2[\x80-\x9f]")
_FAST_TRIGGERS = [t.encode().translate(_FAST_TABLE) for t in _TRIGGERS]
_FAST_SUMMARIES = [t.encode().translate(_FAST_TABLE) for t in _SUMMARY_TRIGGERS]
_FAST_PLAIN = [t.encode().translate(_FAST_TABLE) for t in _PLAIN_TRIGGERS]
_FAST_MODULES = [t.encode().translate(_FAST_TABLE) for t in _MODULE_TRIGGERS]
_TRIGGER_RE = re.compile(
    # \x01, then a look at the next byte, which turns away most capitals (of "INFO", "TP0", ...)
    # before the alternatives are tried one by one.
    rb"\x01(?=["
    + re.escape(bytes({t[1] for t in _FAST_TRIGGERS + _FAST_SUMMARIES}))
    + rb"])(?:"
    + b"|".join([re.escape(t[1:]) for t in _FAST_TRIGGERS] + [re.escape(t[1:]) + rb"\S+ - " for t in _FAST_SUMMARIES])
    + b")"
)
# pytest's location "path:N: in f" (its "path:N: Class: msg" holds a class trigger). On bytes,
# a non-ASCII byte may be part of a Unicode digit or space, which LOC_RE's \d and strip() take.
_LOC_IN_RE = re.compile(rb":[0-9\x80-\xff]{1,48}: [\s\x80-\xff]*in ")
# The rules that look at the end of the content, which is the end of its line: pytest's
# "____ test ____" title ends with "_", its "path:N:" location with a digit and ":", a group's
# "| Name: msg (N sub-exceptions)" (which opens group framing) with "sub-exception(s))", the
# Ray suffix with "across cluster]", and Sentry's "(N additional frame(s) were not displayed)".
# They are matched on the reversed text, where each starts at a newline: a literal first
# character again.
_LINE_END_RE = re.compile(r"\n[^\S\n]*(?:_|:\d|\)s?noitpecxe-bus|\]retsulc ssorca|\)deyalpsid ton erew)")


def all_noise(lines: list[str] | tuple[str, ...], text: str | None = None) -> bool:
    """Whether an idle parser would do nothing with any of ``lines`` (physical lines).

    ``text`` is the lines joined, when the driver could join them (each ends with a newline,
    at most BLOCK_CHARS in all). Several lines are tested only when they are at most
    BLOCK_CHARS long in all, so that the copies made here stay small and no line is long enough
    for clean_line to cut it; one line only if clean_line keeps it whole.
    """
    if text is None:
        if len(lines) == 1:
            text = lines[0]
            if len(text) > MAX_LINE_CHARS:
                return False  # clean_line cuts it: its end is not where _LINE_END_RE looks
        elif sum(map(len, lines)) > BLOCK_CHARS:
            return False  # too long to copy as a whole: read its lines one by one
        else:
            text = "\n".join(lines)  # every line ends at a newline
    try:
        data = text.encode().translate(_FAST_TABLE)
    except UnicodeEncodeError:  # a lone surrogate
        return False
    if 2 in data or (not text.isascii() and 0xC2 in data and _C1_UTF8_RE.search(data)):
        return False  # a control character (ESC and 8-bit CSI included) that clean_line removes
    if 3 in data and data.count(3) != data.count(b"\x03\n") + data.endswith(b"\x03"):
        return False  # a carriage return inside a line (only one ending it is left alone)
    return not (
        _TRIGGER_RE.search(data)
        or (b"\x04e" in data and any(trigger in data for trigger in _FAST_PLAIN))
        or ((b"s\x04" in data or b"c\x04" in data) and any(trigger in data for trigger in _FAST_MODULES))
        or ("in " in text and _LOC_IN_RE.search(data))
        or _opens_markdown(text)
        or _LINE_END_RE.search("\n" + text[::-1])
    )


def _opens_markdown(text: str) -> bool:
    """Whether ``text`` holds what the Markdown reader reacts to (a fence, a code span, a quote),
    which changes how the next lines read: the driver is quiet only while none of it is open
    (``Markdown.neutral``)."""
    return "`" in text or "~~~" in text or text[:1] == ">" or "\n>" in text
