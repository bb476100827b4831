"""Find Python exceptions in pasted tracebacks and log excerpts.

This module turns text -- a traceback copied from a terminal, a chunk of a server log, pytest
output -- into :class:`ParsedException` records that the matcher compares with known errors.
It is pure standard library and imports nothing heavy, because it runs on the CLI's cold path.

Entry points
------------
:func:`parse_text` parses a whole string and returns a list in input order.
:func:`iter_exceptions` does the same work line by line, in bounded memory. While no traceback
is open it skips ordinary log lines in blocks, after one cheap test for anything the parser
reacts to ("The fast path" below), which makes a big log about ten times faster to read.

What is understood
------------------
* CPython tracebacks, 3.8 to 3.13: frames (``File "x", line N, in f``) with or without a
  source line, ``[Previous line repeated N more times]``, the caret and tilde lines of 3.11+
  (never kept as source or message), 3.13's ``...<N lines>...`` (only the first source line of a
  frame is kept), SyntaxError/IndentationError blocks with or without a ``Traceback`` header.
* Chains: "The above exception was the direct cause..." (role ``cause``), "During handling of
  the above exception..." (role ``context``); the first printed exception is ``root``.
* Exception groups: the ``|`` margins, ``+-+---- N ----`` separators, nesting,
  ``+---- ... ----``/"and N more exceptions" and "... (max_group_depth is N)" (both skipped).
  The group itself is a normal chain element; every sub-exception gets a ``group_path``.
  Inside one sub-exception, the sub-exception itself (the last exception printed in its own
  chain) has role ``group-member``; exceptions printed before it in that sub-chain keep the
  roles ``root``/``cause``/``context`` and the same ``group_path``.
* ``multiprocessing``/``concurrent.futures`` RemoteTraceback: the triple-quoted remote
  traceback is parsed as the real start of the chain (the RemoteTraceback wrapper line itself is
  not reported), so the remote root cause is the chain's ``root``.
* pytest's long and short failure formats (``E   ...`` lines, ``path:N: in f`` and
  ``path:N: ValueError`` locations, ``FAILED id - ValueError: msg`` summaries, which are only
  reported when the long form did not already report the same class and message), rich's
  boxed tracebacks, faulthandler dumps (``exc_type`` None, message "Fatal Python error: ...",
  frames reversed to outermost first) and warnings (``path:N: UserWarning: msg``).

Heuristics (documented because no rule can be exact)
----------------------------------------------------
Notes vs. multi-line messages
    CPython prints ``add_note()`` notes right after the message lines, in the same way, so the
    two cannot be told apart in general. Rule: for an exception group (a message line inside
    group framing that ends with ``(N sub-exception[s])``), every later line is a note -- that is
    exact, because the suffix ends the group's message. For every other exception, all
    continuation lines are kept in ``message`` and ``notes`` stays empty: a note then shows up
    as an extra message line, which costs nothing to the matcher (it matches the first line of a
    multi-line message in full), whereas cutting a real multi-line message (pydantic, torch
    state_dict errors) would lose text it needs.
End of a message
    A message continues until a blank line, a structural line (chain separator, ``Traceback``
    header, ``File`` line, group framing, rich box, "Exception in thread ...:", "Exception
    ignored in: ..."), a line whose log prefix differs from the exception line's (a new log
    record after an unprefixed traceback), or end of input. So unprefixed text printed right
    after a traceback, without a blank line, is taken as message text: nothing tells it apart.
Bare lines
    A line ``Name: message`` outside a traceback is an exception only if ``Name`` looks like an
    exception class: its last dotted part (ignoring a ``(...)`` suffix) is a builtin exception
    name, or starts with an upper-case letter and ends in Error, Exception, Warning, Exit,
    Interrupt or Iteration with something before the suffix (``ValueError``, ``torch.
    OutOfMemoryError``; not ``Error``, ``INFO``, ``Note``, ``http``). Where the position proves
    it is an exception line (after frames, inside group framing, after a chain separator), any
    dotted name is accepted (``E: <exception str() failed>``) except log-level words.
    If nothing is found and the whole input has at most 3 non-empty lines and no traceback, it
    is reported as one exception with ``exc_type`` None and those lines as the message.
Log prefixes
    Each line is cleaned first (ANSI/terminal escape sequences and C0 and C1 control characters
    removed, only the text after the last carriage return kept), then up to four leading log
    prefixes are removed: ``[2026-08-28 05:10:05 TP0]``-style brackets (timestamps, levels, rank
    tokens such as TP0/DP1/rank3, nothing else), Ray/vLLM ``(Name pid=123)`` and ``(raylet,
    ip=10.0.0.1)``, docker-compose ``service_1  |``, ``2026-08-28 05:10:05,123 ERROR`` and other
    common ``logging`` layouts, ``ERROR:root:``, vLLM's ``ERROR 08-28 05:10:05 file.py:12]``,
    glog and syslog. Exactly one space after a prefix is removed, so indentation survives.
    Rank-like ids in a prefix (``TP0``, ``DP1 TP3``, ``pid=123``, a compose service name) name
    the *source* of the line: lines are grouped per source, so tracebacks interleaved line by
    line are taken apart, and the id is recorded in ``ranks``. An unprefixed line continues the
    traceback of the previous line's source when that traceback started on a prefixed line
    (sglang's ``[... TP0] Scheduler hit an exception: Traceback ...`` style).
Duplicates
    The same exception (class, message, notes, frames, role, chain position, group path) seen
    again -- typically from several ranks -- is reported once, with all ranks in the order their
    copies started. The cache of fingerprints is bounded (the last 4096 distinct ones).
"""

from __future__ import annotations

import builtins
import heapq
import re
from collections import OrderedDict, deque
from itertools import islice
from operator import itemgetter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

__all__ = ["Frame", "ParsedException", "parse_text", "iter_exceptions", "MAX_LINE_CHARS"]

#: Only this many characters of a line are kept; the rest of an absurdly long line is ignored.
MAX_LINE_CHARS = 64 * 1024

# Bounds that keep memory flat whatever the input (see iter_exceptions).
_MAX_MESSAGE_LINES = 200
_MAX_MESSAGE_CHARS = 64 * 1024
_MAX_NOTES = 100
_MAX_HEAD_FRAMES = 50  # outermost frames kept ...
_MAX_TAIL_FRAMES = 200  # ... and innermost frames kept (the ones the matcher cares about most)
_MAX_E_LINES = 200  # pytest "E" lines kept per failure
_MAX_SOURCES = 1024  # log sources (ranks) tracked at once
_IDLE_FLUSH_LINES = 2000  # a source silent for this many lines is finished
_DEDUP_SIZE = 4096
_MAX_PENDING = 10_000  # exceptions waiting to be yielded in input order
_MAX_RANKS = 4096
_MAX_GROUP_DEPTH = 64
_MAX_PREFIX_LAYERS = 4
_BARE_MAX_LINES = 3
_BLOCK_LINES = 64  # lines tested at once by the fast path while nothing is open ...
_BLOCK_CHARS = MAX_LINE_CHARS  # ... if they are no longer than this in all

#: Set by the test-suite so that a parser bug fails loudly; in production a line that trips an
#: internal error resets the parser state and parsing goes on (the parser must never raise).
_RAISE_INTERNAL_ERRORS = False


@dataclass(frozen=True)
class Frame:
    """One traceback entry, as printed."""

    file: str  # path as printed ("/usr/lib/python3.12/json/decoder.py", "<string>")
    line: int | None
    function: str | None  # "<module>" etc.; None where the format has none (SyntaxError)
    source: str | None  # the source line printed under the frame, stripped; None if none


@dataclass
class ParsedException:
    """One exception found in the input. See the module docstring for the heuristics."""

    exc_type: str | None
    message: str
    notes: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    role: str = "root"  # "root" | "cause" | "context" | "group-member"
    chain_index: int = 0
    group_path: tuple[int, ...] = ()
    ranks: list[str] = field(default_factory=list)
    line_no: int = 1

    @property
    def short_type(self) -> str | None:
        """The last dotted component of ``exc_type``: ``torch.OutOfMemoryError`` -> ``OutOfMemoryError``."""
        if self.exc_type is None:
            return None
        base, paren, rest = self.exc_type.partition("(")
        return base.rsplit(".", 1)[-1] + paren + rest


# --------------------------------------------------------------------------------------------
# Line cleaning
# --------------------------------------------------------------------------------------------

# Every alternative starts with a fixed character and its repeated parts are disjoint character
# classes, so the pattern runs in linear time whatever the line.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # other escape sequences (charset selection, ESC 7, ...)
    r"|\x1b"  # a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
# C0 controls but tab and newline, DEL, and the C1 controls (U+0080-U+009F): some terminals
# obey C1 introducers (OSC, DCS, ...) in UTF-8 text as they obey ESC sequences.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(raw: str) -> str:
    """Cap, strip line ends, terminal escapes and control characters (C0, DEL, C1; tabs are kept)."""
    if len(raw) > MAX_LINE_CHARS:
        raw = raw[:MAX_LINE_CHARS]
    line = raw.rstrip("\r\n")
    if "\r" in line:
        # A carriage return redraws the line on a terminal (progress bars): keep what was drawn last.
        last = line.rsplit("\r", 1)[1]
        line = last if last.strip() else line.replace("\r", "")
    if "\x1b" in line or "\x9b" in line:
        line = _ANSI_RE.sub("", line)
    if not line.isprintable():
        line = _CONTROL_RE.sub("", line)
    return line.rstrip()


# --------------------------------------------------------------------------------------------
# Log prefixes
# --------------------------------------------------------------------------------------------

_LEVEL = r"(?:DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE)"
_DATE_TIME = (
    r"(?:\d{4}-\d{2}-\d{2}[ T]|\d{4}/\d{2}/\d{2} |\d{2}-\d{2} )"
    r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
)
# "2026-08-28 05:10:05,123 ERROR ", "... - app - ERROR - ", loguru's "... | ERROR    | mod:f:1 - ",
# ISO timestamps of docker/kubernetes ("2026-08-28T05:10:05.123Z ").
# Lines are right-stripped before this runs, so a prefix followed by nothing has lost its final
# space: every pattern accepts the end of the line in its place.
_TS_PREFIX_RE = re.compile(
    _DATE_TIME
    + r"(?: - \S{1,200} - " + _LEVEL + r" -(?: |$)"
    + r"| \| " + _LEVEL + r" *\|(?:$| (?:\S{1,200} -(?: |$))?)"
    + r"| \[?" + _LEVEL + r"\]?:? ?"
    + r"| ?)"
)
# vLLM's "ERROR 08-28 05:10:05 [file.py:12] " / "ERROR 08-28 05:10:05 file.py:12] ",
# logging.BASIC_FORMAT's "ERROR:root:", and "ERROR: " / uvicorn's "ERROR:    ".
_LEVEL_PREFIX_RE = re.compile(
    _LEVEL
    + r"(?: \d{2}-\d{2} \d{1,2}:\d{2}:\d{2}(?:\.\d{1,9})? (?:\[[^\]]{1,200}\]|[^\s\]]{1,200}\]) ?"
    + r"|:[\w.<>-]{1,200}:"
    + r"|: ?)"
)
_GLOG_RE = re.compile(r"[IWEF]\d{4} \d{1,2}:\d{2}:\d{2}\.\d{1,9} +\d{1,10} [^\s\]]{1,200}\] ?")
_SYSLOG_RE = re.compile(
    r"[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} [\w.-]{1,100} [\w./-]{1,100}(?:\[(\d{1,10})\])?: ?"
)
_BRACKET_RE = re.compile(r"\[([^\[\]]{1,200})\]:? ?")
_PAREN_RE = re.compile(r"\(([^()]{1,200})\)(?: |$)")
_DOCKER_RE = re.compile(r"([A-Za-z0-9][\w.-]{0,63}) +\|(?: |$)")
_RAY_REPEAT_RE = re.compile(r" *\[repeated \d{1,10}x across cluster\]$")

_TOKEN_TIME_RE = re.compile(
    r"(?:\d{4}[-/]\d{2}[-/]\d{2}(?:T\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?|\d{2}[-/]\d{2}),?$"
)
_TOKEN_LEVEL_RE = re.compile(_LEVEL + r":?$", re.IGNORECASE)
_TOKEN_RANK_RE = re.compile(r"(?:[A-Z]{2,4}|[Rr]ank|default|worker|node|gpu)[-_]?\d{1,6}$|pid=\d{1,10}$")


def _bracket_ranks(inner: str) -> list[str] | None:
    """Rank ids of a ``[...]`` log prefix, or None if the brackets are not a log prefix.

    A bracket is a prefix only when every word in it is a date, a time, a level or a rank
    token, so message text like ``[app.worker]`` or ``[Previous line repeated ...]`` stays.
    """
    tokens = inner.split()
    if not tokens or len(tokens) > 8:
        return None
    ranks = []
    for tok in tokens:
        if _TOKEN_RANK_RE.match(tok):
            ranks.append(tok)
        elif not (_TOKEN_TIME_RE.match(tok) or _TOKEN_LEVEL_RE.match(tok)):
            return None
    return ranks


def _strip_prefixes(text: str) -> tuple[str, list[str], bool]:
    """Remove leading log prefixes: returns (content, source ids, whether any prefix was removed)."""
    ids: list[str] = []
    found = False
    for _ in range(_MAX_PREFIX_LAYERS):
        if not text:
            break
        c = text[0]
        m = None
        source = None
        if c == "[":
            m = _BRACKET_RE.match(text)
            if m is not None:
                ranks = _bracket_ranks(m.group(1))
                if ranks is None:
                    m = None
                elif ranks:
                    source = " ".join(ranks)
        elif c == "(":
            m = _PAREN_RE.match(text)
            if m is not None:
                inner = m.group(1)
                pid = inner.find("pid=")
                if pid >= 0:
                    source = inner[pid:]
                elif "ip=" in inner:
                    source = inner
                else:
                    m = None
                if m is not None:
                    # Ray folds repeated lines into one with this suffix; it is not message text.
                    rest = _RAY_REPEAT_RE.sub("", text[m.end():])
                    text = text[: m.end()] + rest
        elif c.isdigit():
            m = _TS_PREFIX_RE.match(text)
        elif c.isalpha():
            m = _LEVEL_PREFIX_RE.match(text) or _GLOG_RE.match(text)
            if m is None:
                m = _SYSLOG_RE.match(text)
                if m is not None and m.group(1):
                    source = "pid=" + m.group(1)
        if m is None and c.isalnum():
            m = _DOCKER_RE.match(text)
            if m is not None:
                source = m.group(1)
        if m is None or m.end() == 0:
            break
        found = True
        if source:
            ids.append(source)
        text = text[m.end():]
    return text, ids, found


# --------------------------------------------------------------------------------------------
# Line classifiers
# --------------------------------------------------------------------------------------------

_TB_HEADER = "Traceback (most recent call last):"
_GROUP_TB_HEADER = "Exception Group Traceback (most recent call last):"
_CAUSE_LINE = "The above exception was the direct cause of the following exception:"
_CONTEXT_LINE = "During handling of the above exception, another exception occurred:"

# `File "x", line N, in f`; also faulthandler's `File "x", line N in f` and SyntaxError's
# `File "x", line N`. Line numbers are capped at 12 digits so int() never sees a huge string.
_FRAME_RE = re.compile(r'File "(.*?)", line (\d{1,12}|\?\?\?)(?:,? in (.*))?$')
_IDENT = r"(?:[^\W\d]\w*|<\w+>)"
_CLASS = _IDENT + r"(?:\." + _IDENT + r")*(?:\([\w.]{1,200}\))?"
_EXC_RE = re.compile("(" + _CLASS + r")(?:: ?(.*))?$")
_CLASS_FULL_RE = re.compile(_CLASS + "$")
_GROUP_SUFFIX_RE = re.compile(r"\(\d{1,12} sub-exceptions?\)$")
_MEMBER_SEP_RE = re.compile(r"\+(-\+)?-{3,} (\d{1,12}|\.\.\.) -{3,}$")
_CLOSE_RE = re.compile(r"\+-{3,}$")
_LOC_RE = re.compile(r"(\S+?):(\d{1,12}):(?: (.*))?$")  # "path:N: rest" (pytest, warnings)
_SUMMARY_RE = re.compile(r"(?:FAILED|ERROR) (\S+)(?: - (.*))?$")  # pytest's short summary
_DEF_RE = re.compile(r"(?:async\s+)?def\s+([^\W\d]\w*)")
_RICH_FRAME_RE = re.compile(r"(.+?):(\d{1,12}) in (\S.*)$")
_RICH_SOURCE_RE = re.compile(r"\u2771\s*\d{1,12} (.*)$")  # "❱ 5 load(...)"
_FAULT_THREAD_RE = re.compile(
    r"(Current thread|Thread|Stack)(?: 0x[0-9a-fA-F]{1,16})? \(most recent call first\):$"
)

_BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
)
_CLASS_SUFFIXES = ("Error", "Exception", "Warning", "Exit", "Interrupt", "Iteration")
# Words that head ordinary log lines ("INFO: ...", "Note: ...", "https://...") and are never
# taken as an exception class, even where an exception line is expected.
_NOT_CLASSES = frozenset(
    "debug info notice note warn warning error critical fatal trace hint tip http https ftp file "
    "usage see".split()
)


def _short_name(cls: str) -> str:
    return cls.split("(", 1)[0].rsplit(".", 1)[-1]


def _is_exception_class(cls: str) -> bool:
    """Whether ``cls`` looks like an exception class out of context (see "Bare lines")."""
    short = _short_name(cls)
    if short in _BUILTIN_EXCEPTIONS:
        return True
    head = short.lstrip("_")
    if not head or not head[0].isupper():
        return False
    if head.endswith("RemoteTraceback"):
        return True
    return any(head.endswith(sfx) and len(head) > len(sfx) for sfx in _CLASS_SUFFIXES)


def _parse_exc_line(s: str, strict: bool) -> tuple[str, str] | None:
    """Split ``Class: message`` (``s`` already stripped); None if it is not an exception line."""
    m = _EXC_RE.match(s)
    if m is None:
        return None
    cls = m.group(1)
    if strict:
        if not _is_exception_class(cls):
            return None
    elif cls.lower() in _NOT_CLASSES and cls not in _BUILTIN_EXCEPTIONS:
        return None
    return cls, (m.group(2) or "").rstrip()


def _separator_kind(s: str) -> str | None:
    if s == _CAUSE_LINE:
        return "cause"
    if s == _CONTEXT_LINE:
        return "context"
    return None


def _is_caret_line(s: str) -> bool:
    """3.11+ position markers (``^^^^``, ``~~~^^^``) and SyntaxError's ``^``."""
    return not s.strip("^~ ")


def _line_number(s: str) -> int | None:
    return None if s == "???" else int(s)


def _is_pytest_header(s: str) -> bool:
    """pytest's ``____ test_name ____`` section title (not the ``_ _ _`` frame separator)."""
    return (
        len(s) >= 5
        and s[0] == "_"
        and s[-1] == "_"
        and not s.startswith("_ _")
        and " " in s
        and bool(s.strip("_ "))
    )


def _is_pytest_frame_sep(s: str) -> bool:
    return s.startswith("_ _") and not s.replace("_", "").replace(" ", "")


def _strip_rich_guides(code: str) -> str | None:
    code = code.strip()
    while code.startswith("\u2502"):  # rich draws indent guides with "│"
        code = code[1:].lstrip()
    return code or None


def _mentions_traceback(s: str) -> bool:
    return "Traceback (most recent call last)" in s or (
        s.lstrip().startswith("File ") and _FRAME_RE.match(s.lstrip()) is not None
    )


# --------------------------------------------------------------------------------------------
# The fast path: lines an idle parser ignores
# --------------------------------------------------------------------------------------------

# Most lines of a big log are ordinary log records. While no source has anything open
# (_Parser.quiet), such a line changes nothing. iter_exceptions then reads lines in blocks and
# skips a whole block when _all_noise says that none of its lines can matter, instead of
# cleaning, prefix-stripping and classifying every line. The test may fail on harmless lines
# (they are then parsed one by one), but must never pass a line the idle state machine would
# react to.
#
# It can look at the raw lines because the content the rules see is a suffix of the cleaned
# line (_strip_prefixes only cuts prefixes off), and the cleaned line is the raw line
# right-stripped -- unless _clean removes something (control characters, escape sequences, an
# overlong tail) or a Ray "[repeated Nx across cluster]" suffix is cut off: such lines fail.
#
# The rules are those of _Source.feed (group framing) and _ChainParser._on_idle as an idle
# source runs them: depth 0, no pending separator, not inside a RemoteTraceback's quotes, so an
# exception line is judged strictly (_is_exception_class). Each trigger is a substring that
# every line a rule reacts to contains somewhere:
_TRIGGERS = (
    "Traceback",  # every header (plain, group, "...: Traceback (most..."), rich's box, *RemoteTraceback
    "Stack (most",  # logging's stack_info block ("Stack (most recent call last):")
    _CAUSE_LINE[:19],  # "The above exception": a chain separator
    _CONTEXT_LINE[:15],  # "During handling": the other one
    'File "',  # a frame: a traceback without its header, a SyntaxError block
    "Fatal Python error",  # faulthandler
    "Windows fatal exception",
    "E  ",  # pytest's "E   ..." lines
    *_CLASS_SUFFIXES,  # a class-like name ends in one of these ...
    # ... or is a builtin name, which (today) always contains one of them anyway.
    *sorted(n for n in _BUILTIN_EXCEPTIONS if not any(sfx in n for sfx in _CLASS_SUFFIXES)),
)
# pytest's short summary "FAILED id - msg" / "ERROR id - msg" needs its " - " as well.
_SUMMARY_TRIGGERS = ("FAILED ", "ERROR ")

# All triggers are found in one pass over the encoded text. The regex engine scans fast only
# for a literal first character, so bytes.translate maps the first letter of every trigger (all
# are ASCII capitals: T, S, D, F, W, E, I) to \x01, and the triggers, translated the same way,
# become one pattern that starts with \x01. The same pass maps the ASCII characters _clean
# removes (C0 controls but tab and newline, and DEL) to \x02 and carriage returns to \x03. UTF-8
# keeps ASCII bytes for ASCII characters only, so encoding neither loses a trigger nor makes one
# up; C1 controls, which _clean removes too, are two bytes (\xc2 \x80-\x9f): _C1_UTF8_RE.
_ANCHORS = frozenset(t[0] for t in _TRIGGERS + _SUMMARY_TRIGGERS)
assert all(ord(c) < 128 and c.isupper() for c in _ANCHORS), "a trigger must start with an ASCII capital"
_FAST_TABLE = bytes(
    1 if chr(b) in _ANCHORS else 3 if b == 13 else 2 if (b < 32 and b not in (9, 10)) or b == 127 else b
    for b in range(256)
)
_C1_UTF8_RE = re.compile(rb"\xc2[\x80-\x9f]")
_FAST_TRIGGERS = [t.encode().translate(_FAST_TABLE) for t in _TRIGGERS]
_FAST_SUMMARIES = [t.encode().translate(_FAST_TABLE) for t in _SUMMARY_TRIGGERS]
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
# a non-ASCII byte may be part of a Unicode digit or space, which _LOC_RE's \d and strip() take.
_LOC_IN_RE = re.compile(rb":[0-9\x80-\xff]{1,48}: [\s\x80-\xff]*in ")
# The rules that look at the end of the content, which is the end of its line: pytest's
# "____ test ____" title ends with "_", its "path:N:" location with a digit and ":", a group's
# "| Name: msg (N sub-exceptions)" (which opens group framing) with "sub-exception(s))", and
# the Ray suffix with "across cluster]". They are matched on the reversed text, where each
# starts at a newline: a literal first character again.
_LINE_END_RE = re.compile(r"\n[^\S\n]*(?:_|:\d|\)s?noitpecxe-bus|\]retsulc ssorca)")


def _all_noise(lines: list[str] | tuple[str, ...], text: str | None = None) -> bool:
    """Whether an idle parser would do nothing with any of ``lines`` (physical lines).

    ``text`` is the lines joined, when _line_blocks could join them (each ends with a newline,
    at most _BLOCK_CHARS in all). Several lines are tested only when they are at most
    _BLOCK_CHARS long in all, so that the copies made here stay small and no line is long enough
    for _clean to cut it; one line only if _clean keeps it whole.
    """
    if text is None:
        if len(lines) == 1:
            text = lines[0]
            if len(text) > MAX_LINE_CHARS:
                return False  # _clean cuts it: its end is not where _LINE_END_RE looks
        elif sum(map(len, lines)) > _BLOCK_CHARS:
            return False  # too long to copy as a whole: read its lines one by one
        else:
            text = "\n".join(lines)  # every line ends at a newline
    try:
        data = text.encode().translate(_FAST_TABLE)
    except UnicodeEncodeError:  # a lone surrogate
        return False
    if 2 in data or (not text.isascii() and 0xC2 in data and _C1_UTF8_RE.search(data)):
        return False  # a control character (ESC and 8-bit CSI included) that _clean removes
    if 3 in data and data.count(3) != data.count(b"\x03\n") + data.endswith(b"\x03"):
        return False  # a carriage return inside a line (only one ending it is left alone)
    return not (
        _TRIGGER_RE.search(data)
        or ("in " in text and _LOC_IN_RE.search(data))
        or _LINE_END_RE.search("\n" + text[::-1])
    )


# --------------------------------------------------------------------------------------------
# Building exceptions
# --------------------------------------------------------------------------------------------


class _Chain:
    """Position bookkeeping of one printed chain (one per context depth)."""

    __slots__ = ("next_index", "pending")

    def __init__(self) -> None:
        self.next_index = 0
        self.pending: str | None = None  # "cause"/"context" after a separator line

    def take(self) -> tuple[str, int]:
        """Role and chain index of the exception that starts now."""
        if self.pending is None:
            role, index = "root", 0  # no separator before it: a new chain
        else:
            role, index = self.pending, self.next_index
        self.pending = None
        self.next_index = index + 1
        return role, index


class _Builder:
    """An exception being read; frames are lists so a source line can be filled in later."""

    __slots__ = (
        "start", "token", "role", "chain_index", "group_path", "has_prefix", "frames_hp",
        "exc_type", "msg_lines", "msg_chars", "notes", "in_notes", "msg_col",
        "head", "tail", "nframes", "cur", "base", "frame_col",
    )

    def __init__(self, start: int, role: str, chain_index: int, group_path: tuple, has_prefix: bool):
        self.start = start
        self.token = 0
        self.role = role
        self.chain_index = chain_index
        self.group_path = group_path
        self.has_prefix = has_prefix  # prefix state of the exception line (ends the message if it changes)
        self.frames_hp = has_prefix  # prefix state of the first frame (ends the frames if it changes)
        self.exc_type: str | None = None
        self.msg_lines: list[str] = []
        self.msg_chars = 0
        self.notes: list[str] = []
        self.in_notes = False
        self.msg_col = 0
        self.head: list[list] = []
        self.tail: deque | None = None
        self.nframes = 0
        self.cur: list | None = None
        self.base: int | None = None  # column of the traceback header
        self.frame_col = 0  # column of the last File line

    def add_frame(self, file: str, line: int | None, function: str | None, source: str | None = None) -> None:
        entry = [file, line, (function or "").strip() or None, source]
        if len(self.head) < _MAX_HEAD_FRAMES:
            self.head.append(entry)
        else:
            if self.tail is None:
                self.tail = deque(maxlen=_MAX_TAIL_FRAMES)
            self.tail.append(entry)
        self.cur = entry
        self.nframes += 1

    def add_message_line(self, line: str) -> None:
        if len(self.msg_lines) < _MAX_MESSAGE_LINES and self.msg_chars < _MAX_MESSAGE_CHARS:
            self.msg_lines.append(line)
            self.msg_chars += len(line) + 1

    def add_note(self, line: str) -> None:
        if len(self.notes) < _MAX_NOTES:
            self.notes.append(line)

    def build(self) -> ParsedException:
        entries = self.head if self.tail is None else self.head + list(self.tail)
        return ParsedException(
            exc_type=self.exc_type,
            message="\n".join(self.msg_lines).rstrip(),
            notes=list(self.notes),
            frames=[Frame(e[0], e[1], e[2], e[3]) for e in entries],
            role=self.role,
            chain_index=self.chain_index,
            group_path=self.group_path,
            ranks=[],
            line_no=self.start,
        )


class _Record:
    """A reported exception and where its copies (ranks) were seen."""

    __slots__ = ("exc", "released", "rank_lines")

    def __init__(self, exc: ParsedException):
        self.exc = exc
        self.released = False
        self.rank_lines: dict[str, int] = {}

    def add_rank(self, rank: str, line_no: int) -> None:
        if not rank:
            return
        ranks = self.exc.ranks
        old = self.rank_lines.get(rank)
        if old is None:
            if len(self.rank_lines) >= _MAX_RANKS:
                return
            self.rank_lines[rank] = line_no
            if not ranks or line_no >= self.rank_lines[ranks[-1]]:
                ranks.append(rank)
                return
        elif line_no >= old:
            return
        else:
            self.rank_lines[rank] = line_no
        ranks[:] = sorted(self.rank_lines, key=self.rank_lines.__getitem__)


class _Sink:
    """Collects finished exceptions: deduplicates them and hands them out in input order.

    An exception is handed out once no exception that started earlier is still being read
    (several sources, or an exception group whose members finish before the group's last
    member does). Every structure here is bounded.
    """

    def __init__(self) -> None:
        self.out: deque[ParsedException] = deque()
        self.emitted = 0
        self._seq = 0
        self._pending: list = []  # heap of (line_no, seq, record)
        self._open: list = []  # heap of (start line, token) of exceptions being read
        self._alive: dict[int, int] = {}  # token -> start line
        self._dedup: OrderedDict = OrderedDict()
        self._pytest_seen: OrderedDict = OrderedDict()

    def open(self, b: _Builder) -> None:
        self._seq += 1
        b.token = self._seq
        self._alive[b.token] = b.start
        heapq.heappush(self._open, (b.start, b.token))

    def discard(self, b: _Builder) -> None:
        self._alive.pop(b.token, None)

    def forget_open(self) -> None:
        self._alive.clear()
        self._open.clear()

    def emit(self, b: _Builder, exc: ParsedException, rank: str) -> None:
        self._alive.pop(b.token, None)
        self.emitted += 1
        fp = (exc.exc_type, exc.message, tuple(exc.notes), tuple(exc.frames), exc.role,
              exc.chain_index, exc.group_path)
        rec = self._dedup.get(fp)
        if rec is not None:
            self._dedup.move_to_end(fp)
            rec.add_rank(rank, exc.line_no)
            if not rec.released and exc.line_no < rec.exc.line_no:
                rec.exc.line_no = exc.line_no  # the earliest copy says where it starts
                self._push(rec)
            return
        rec = _Record(exc)
        rec.add_rank(rank, exc.line_no)
        self._dedup[fp] = rec
        if len(self._dedup) > _DEDUP_SIZE:
            self._dedup.popitem(last=False)
        self._push(rec)

    def _push(self, rec: _Record) -> None:
        self._seq += 1
        heapq.heappush(self._pending, (rec.exc.line_no, self._seq, rec))

    def release(self, force: bool = False) -> None:
        """Move exceptions that can no longer be preceded by another one to ``out``."""
        if not self._pending:
            return
        limit = None
        if not force:
            if len(self._open) > 2 * len(self._alive) + 64:  # drop finished entries now and then
                self._open = [(s, t) for s, t in self._open if t in self._alive]
                heapq.heapify(self._open)
            while self._open and self._open[0][1] not in self._alive:
                heapq.heappop(self._open)
            if self._open:
                limit = self._open[0][0]
        while self._pending:
            line_no, _, rec = self._pending[0]
            if limit is not None and line_no > limit and len(self._pending) <= _MAX_PENDING:
                break
            heapq.heappop(self._pending)
            if rec.released or line_no != rec.exc.line_no:
                continue  # stale heap entry
            rec.released = True
            self.out.append(rec.exc)

    # pytest prints each failure twice (long form, then the short summary): remember the first.
    def note_pytest(self, exc_type: str | None, message: str) -> None:
        key = (_short_name(exc_type) if exc_type else None, message.split("\n", 1)[0].strip())
        self._pytest_seen[key] = True
        if len(self._pytest_seen) > _DEDUP_SIZE:
            self._pytest_seen.popitem(last=False)

    def seen_pytest(self, exc_type: str, message: str) -> bool:
        short = _short_name(exc_type)
        first = message.split("\n", 1)[0].strip()
        if (short, first) in self._pytest_seen:
            return True
        if first.endswith("..."):  # the summary line was shortened to the terminal width
            stem = first[:-3]
            return any(k[0] == short and k[1].startswith(stem) for k in self._pytest_seen)
        return False


# --------------------------------------------------------------------------------------------
# The chain parser: one per (source, group depth)
# --------------------------------------------------------------------------------------------

# States. Each has a handler below; a handler returns True to have the same line read again in
# the state it switched to.
_IDLE = "idle"  # between exceptions
_FRAMES = "frames"  # after a Traceback header: File lines, source lines, carets
_MESSAGE = "message"  # after the exception line: continuation lines, notes
_AFTER = "after"  # an exception ended: a chain separator may follow
_REMOTE_OPEN = "remote-open"  # after "...RemoteTraceback: ", expecting '"""'
_WARN_SOURCE = "warn-source"  # after "path:N: SomeWarning: msg", expecting its source line
_STACK = "stack"  # logging's "Stack (most recent call last):" (not an exception): skipped
_PYTEST = "pytest"  # inside a pytest failure section
_RICH = "rich"  # inside rich's traceback box
_RICH_DONE = "rich-done"  # after the box, expecting the exception line
_FAULT = "fault"  # faulthandler dump
_IGNORE = "ignore"  # a "+---- ... ----" group member: "and N more exceptions"


class _ChainParser:
    """Reads the exceptions printed at one nesting depth of one log source.

    Depth 0 is plain output. Inside an exception group every sub-exception gets its own parser
    at depth ``d`` (the ``|`` margins already removed); the top-level group itself is read by a
    depth-1 parser that shares the depth-0 chain, since the group is an element of that chain.
    """

    def __init__(self, sink: _Sink, rank: str, depth: int, path: tuple, chain: _Chain, member: bool):
        self.sink = sink
        self.rank = rank
        self.depth = depth
        self.path = path  # group_path of the exceptions read here
        self.chain = chain
        self.member = member  # a sub-exception of a group: its last exception is "group-member"
        self.state = _IDLE
        self.b: _Builder | None = None
        self.held: tuple | None = None  # member parsers: last finished exception, role not final yet
        self.in_remote = False  # inside the '"""' quotes of a RemoteTraceback
        self.remote_stash: tuple | None = None

    # -- driving ------------------------------------------------------------------------------

    def feed(self, t: str, no: int, hp: bool) -> None:
        """Read one line (prefix and group margin removed); ``hp``: the raw line had a log prefix."""
        for _ in range(6):  # a handler may ask for the line again after switching state
            if not _HANDLERS[self.state](self, t, no, hp):
                return

    def settle(self) -> None:
        """Finish the exception being read, if any; the chain stays open."""
        st = self.state
        if st in (_MESSAGE, _WARN_SOURCE):
            self._finish()
        elif st in (_FRAMES, _RICH, _RICH_DONE):
            self._finish_truncated()
        elif st == _FAULT:
            self._fault_finish()
        elif st == _PYTEST:
            self._pytest_end()
        elif st == _REMOTE_OPEN:
            self._remote_fallback()  # no '"""' came: it was an ordinary exception line
            self._finish()
        elif st in (_STACK, _IGNORE):
            self.state = _IDLE

    def close(self) -> None:
        """No more lines will come: finish everything."""
        self.settle()
        if self.held is not None:
            self._release_held(final=True)
        self.state = _IDLE
        self.in_remote = False

    # -- exception lifecycle --------------------------------------------------------------------

    def _open(self, no: int, hp: bool) -> _Builder:
        if self.b is not None:
            self._finish_truncated()
        if self.held is not None:  # something follows it in its chain: it is not the member itself
            self._release_held(final=False)
        role, index = self.chain.take()
        b = _Builder(no, role, index, self.path, hp)
        self.sink.open(b)
        self.b = b
        return b

    def _finish(self) -> None:
        b = self.b
        self.b = None
        self.state = _AFTER
        if b is None:
            return
        exc = b.build()
        if self.member:
            if self.held is not None:
                self._release_held(final=False)
            self.held = (b, exc)
        else:
            self.sink.emit(b, exc, self.rank)

    def _finish_truncated(self) -> None:
        """A traceback cut before its exception line: report its frames, if it has any."""
        b = self.b
        if b is not None and b.nframes == 0 and b.exc_type is None:
            self.sink.discard(b)
            self.b = None
            self.state = _AFTER
            return
        self._finish()

    def _release_held(self, final: bool) -> None:
        b, exc = self.held
        self.held = None
        if final:
            exc.role = "group-member"
        self.sink.emit(b, exc, self.rank)

    def _exception_line(self, b: _Builder, exc: tuple[str, str], col: int, hp: bool) -> None:
        cls, msg = exc
        b.exc_type = cls
        b.msg_col = col
        b.has_prefix = hp
        b.add_message_line(msg)
        if self.depth and _GROUP_SUFFIX_RE.search(msg):
            b.in_notes = True  # the group's message ends here; what follows are notes
        self.state = _MESSAGE

    def _start_bare(self, exc: tuple[str, str], col: int, no: int, hp: bool) -> None:
        cls, msg = exc
        if not msg and _short_name(cls).endswith("RemoteTraceback"):
            # multiprocessing / concurrent.futures: the remote traceback follows in '"""' quotes
            self.remote_stash = (exc, col, no, hp)
            self.state = _REMOTE_OPEN
            return
        self._exception_line(self._open(no, hp), exc, col, hp)

    def _remote_fallback(self) -> None:
        exc, col, no, hp = self.remote_stash
        self.remote_stash = None
        self._exception_line(self._open(no, hp), exc, col, hp)

    # -- state handlers ---------------------------------------------------------------------

    def _on_idle(self, t: str, no: int, hp: bool) -> bool:
        s = t.strip()
        if not s:
            return False
        kind = _separator_kind(s)
        if kind:
            self.chain.pending = kind
            return False
        if s.endswith(_TB_HEADER):
            b = self._open(no, hp)
            # A header at the start of its line gives the traceback's base column; one that ends
            # a longer line ("... hit an exception: Traceback ...") leaves it to the first frame.
            if s.startswith(("Traceback", "Exception Group Traceback")):
                b.base = len(t) - len(t.lstrip())
            self.state = _FRAMES
            return False
        first = s[0]
        if first == "F":
            if s.startswith("File ") and _FRAME_RE.match(s):
                # A traceback without its header, or a SyntaxError block (which has none).
                self._open(no, hp)
                self.state = _FRAMES
                return True
            if s.startswith("Fatal Python error: "):
                self._start_fault(s, no, hp)
                return False
        elif first == "W" and s.startswith("Windows fatal exception: "):
            self._start_fault(s, no, hp)
            return False
        elif first == "\u256d":  # "╭": rich's box
            if "Traceback" in s:
                self._open(no, hp)
                self.state = _RICH
                return False
        elif first == '"' and s == '"""' and self.in_remote:
            self.in_remote = False
            return False
        elif first == "S" and s == "Stack (most recent call last):":
            self.state = _STACK
            return False
        if (t[0] == "E" and t[1:3] == "  ") or (first == "_" and _is_pytest_header(s)):
            self._enter_pytest(no)
            return True
        col = len(t) - len(t.lstrip())
        if col == 0:
            if first in "FE" and s.startswith(("FAILED ", "ERROR ")):
                m = _SUMMARY_RE.match(s)
                if m is not None and m.group(2):
                    self._pytest_summary(m.group(1), m.group(2).strip(), no, hp)
                    return False
            if ":" in t:
                m = _LOC_RE.match(t)
                if m is not None:
                    rest = (m.group(3) or "").strip()
                    if not rest or rest.startswith("in "):
                        self._enter_pytest(no)  # pytest's "path:N: " / "path:N: in f" frames
                        return True
                    exc = _parse_exc_line(rest, strict=True)
                    if exc is not None:  # "path:N: UserWarning: msg", "path:N: TypeError"
                        b = self._open(no, hp)
                        b.add_frame(m.group(1), _line_number(m.group(2)), None)
                        self._exception_line(b, exc, 0, hp)
                        self.state = _WARN_SOURCE
                        return False
        # Out of context only a class-looking name counts; inside a group or right after a
        # chain separator, the line is in the place of an exception line.
        exc = _parse_exc_line(s, strict=not (self.depth or self.chain.pending))
        if exc is not None:
            self._start_bare(exc, col, no, hp)
            return False
        self.chain.pending = None  # unrelated text: whatever came before does not chain on
        return False

    def _on_frames(self, t: str, no: int, hp: bool) -> bool:
        b = self.b
        s = t.strip()
        if not s:
            return False  # not printed by CPython, but logs insert blank lines: tolerate them
        col = len(t) - len(t.lstrip())
        if s.startswith("File "):
            m = _FRAME_RE.match(s)
            if m is not None:
                if b.nframes == 0:
                    b.frames_hp = hp
                    if b.base is None:
                        b.base = max(col - 2, 0)
                elif hp != b.frames_hp:
                    self._finish_truncated()
                    return True
                b.add_frame(m.group(1), _line_number(m.group(2)), m.group(3))
                b.frame_col = col
                return False
        if b.nframes and hp != b.frames_hp:
            self._finish_truncated()  # a different kind of line: a new log record, not ours
            return True
        if s.startswith("[Previous line repeated "):
            return False
        if _separator_kind(s) or s.endswith(_TB_HEADER) or (self.in_remote and s == '"""'):
            self._finish_truncated()
            return True
        cur = b.cur
        if cur is not None:
            if b.frame_col > (b.base or 0):
                # The usual layout: source and carets are indented deeper than the File line.
                if col > b.frame_col:
                    if cur[3] is None and not _is_caret_line(s):
                        cur[3] = s
                    return False
            else:
                # Indentation was lost (a "flat" paste): a source line is anything that is not
                # clearly an exception line.
                exc = _parse_exc_line(s, True) or (cur[3] is not None and _parse_exc_line(s, False))
                if not exc:
                    if cur[3] is None and not _is_caret_line(s):
                        cur[3] = s
                    return False
                self._exception_line(b, exc, col, hp)
                return False
        exc = _parse_exc_line(s, strict=False)
        if exc is not None:
            self._exception_line(b, exc, col, hp)
            return False
        self._finish_truncated()
        return True

    def _ends_message(self, s: str) -> bool:
        if s.startswith("File "):
            return _FRAME_RE.match(s) is not None
        return (
            s.endswith(_TB_HEADER)
            or _separator_kind(s) is not None
            or (self.in_remote and s == '"""')
            or s[0] == "\u256d"
            # the headers CPython prints before a thread's or an unraisable exception's report
            or s.startswith(("Fatal Python error: ", "Exception in thread ", "Exception ignored "))
        )

    def _on_message(self, t: str, no: int, hp: bool) -> bool:
        b = self.b
        s = t.strip()
        if not s:
            self._finish()  # a blank line ends the message
            return False
        if hp != b.has_prefix or self._ends_message(s):
            self._finish()
            return True
        lead = len(t) - len(t.lstrip(" "))
        line = t[min(lead, b.msg_col):]  # keep the continuation's own indentation
        if b.in_notes:
            b.add_note(line)
        else:
            b.add_message_line(line)
            if self.depth and _GROUP_SUFFIX_RE.search(s):
                b.in_notes = True
        return False

    def _on_after(self, t: str, no: int, hp: bool) -> bool:
        s = t.strip()
        if not s:
            return False
        kind = _separator_kind(s)
        if kind:
            self.chain.pending = kind
            self.state = _IDLE
            return False
        if self.in_remote and s == '"""':
            self.in_remote = False  # end of the remote traceback; the chain goes on outside
            return False
        self.state = _IDLE
        self.chain.pending = None
        return True

    def _on_remote_open(self, t: str, no: int, hp: bool) -> bool:
        if t.strip() == '"""':
            self.remote_stash = None
            self.in_remote = True
            self.state = _IDLE
            return False
        self._remote_fallback()  # not the multiprocessing layout after all
        return True

    def _on_warn_source(self, t: str, no: int, hp: bool) -> bool:
        b = self.b
        if t[:1] in (" ", "\t") and t.strip() and hp == b.has_prefix:
            b.cur[3] = t.strip()
            self._finish()
            self.state = _IDLE
            return False
        self._finish()
        self.state = _IDLE
        return True

    def _on_stack(self, t: str, no: int, hp: bool) -> bool:
        if t[:1] in (" ", "\t"):
            return False  # a frame or its source line
        self.state = _IDLE
        return bool(t.strip())

    def _on_ignore(self, t: str, no: int, hp: bool) -> bool:
        return False

    # -- pytest -----------------------------------------------------------------------------

    def _enter_pytest(self, no: int) -> None:
        self.state = _PYTEST
        self.chain.pending = None
        self._pt_reset(no)

    def _pt_reset(self, start: int | None) -> None:
        self.pt_start = start
        self.pt_frames: list[list] = []
        self.pt_func: str | None = None
        self.pt_source: str | None = None
        self.pt_e: list[str] = []
        self.pt_eindent = 0
        self.pt_wait: list | None = None  # a short-format frame whose source line comes next
        self.pt_hp = False

    def _pytest_failure(self, cls: str | None, no: int) -> None:
        """One failure's text is complete (``cls`` from pytest's ``path:N: Class`` line)."""
        lines = self.pt_e
        first = lines[0].strip() if lines else ""
        parsed = _parse_exc_line(first, strict=False) if first else None
        if parsed is not None and (cls is None or _short_name(parsed[0]) == _short_name(cls)):
            exc_type, msg_lines = parsed[0], [parsed[1]] + lines[1:]
        elif cls is not None:
            exc_type, msg_lines = cls, lines
        elif first.startswith("assert "):
            exc_type, msg_lines = "AssertionError", lines
        elif lines:
            exc_type, msg_lines = None, lines
        else:
            self._pt_reset(None)
            return
        b = self._open(self.pt_start or no, self.pt_hp)
        for f in self.pt_frames:
            b.add_frame(*f)
        b.exc_type = exc_type
        for line in msg_lines:
            b.add_message_line(line)
        self.sink.note_pytest(exc_type, "\n".join(msg_lines))
        self._finish()
        self.state = _PYTEST
        self._pt_reset(None)

    def _pytest_end(self) -> None:
        if self.pt_e:  # E lines set pt_start, so the failure has a start line
            self._pytest_failure(None, self.pt_start)
        self.state = _IDLE

    def _pt_add_frame(self, entry: list) -> None:
        if len(self.pt_frames) >= _MAX_HEAD_FRAMES + _MAX_TAIL_FRAMES:
            del self.pt_frames[_MAX_HEAD_FRAMES]  # keep the outermost and the innermost, as _Builder does
        self.pt_frames.append(entry)

    def _pytest_summary(self, nodeid: str, rest: str, no: int, hp: bool) -> None:
        exc = _parse_exc_line(rest, strict=False)
        if exc is None:
            if not rest.startswith("assert "):
                return
            exc = ("AssertionError", rest)
        if self.sink.seen_pytest(exc[0], exc[1]):
            return
        self.chain.pending = None
        b = self._open(no, hp)
        path, _, test = nodeid.partition("::")
        func = test.rsplit("::", 1)[-1].split("[", 1)[0] if test else None
        b.add_frame(path, None, func)
        self._exception_line(b, exc, 0, hp)
        self._finish()
        self.state = _IDLE

    def _on_pytest(self, t: str, no: int, hp: bool) -> bool:
        s = t.strip()
        if not s:
            return False
        if (
            s.startswith("=====")
            or (s.startswith("---") and "Captured" in s)
            or s.endswith(_TB_HEADER)
            or s.startswith(("FAILED ", "Fatal Python error: "))
            or (s.startswith("ERROR ") and _SUMMARY_RE.match(s))
        ):
            self._pytest_end()  # the section is over; what follows is read normally
            return True
        kind = _separator_kind(s)
        if kind:  # pytest prints chained exceptions as consecutive entries
            if self.pt_e:
                self._pytest_failure(None, no)
            self._pt_reset(None)
            self.chain.pending = kind
            return False
        if _is_pytest_header(s):
            if self.pt_e:
                self._pytest_failure(None, no)
            self.chain.pending = None
            self._pt_reset(no)
            return False
        if _is_pytest_frame_sep(s):
            self.pt_func = self.pt_source = None
            return False
        if self.pt_start is None:
            self.pt_start = no
        c = t[0]
        if c == ">":
            self.pt_source = t[1:].strip() or None
            return False
        if c == "E" and (len(t) == 1 or t[1] == " "):
            rest = t[1:]
            lead = len(rest) - len(rest.lstrip(" "))
            if not self.pt_e:
                self.pt_eindent = lead
                self.pt_hp = hp
            if len(self.pt_e) < _MAX_E_LINES:
                self.pt_e.append(rest[min(lead, self.pt_eindent):])
            return False
        if c not in " \t":
            m = _LOC_RE.match(t)
            if m is not None:
                path, line, rest = m.group(1), _line_number(m.group(2)), (m.group(3) or "").strip()
                if not rest:
                    self._pt_add_frame([path, line, self.pt_func, self.pt_source])
                    self.pt_func = self.pt_source = None
                elif rest.startswith("in "):
                    entry = [path, line, rest[3:].strip(), None]
                    self._pt_add_frame(entry)
                    self.pt_wait = entry
                elif _CLASS_FULL_RE.match(rest):
                    self._pt_add_frame([path, line, self.pt_func, self.pt_source])
                    self._pytest_failure(rest, no)
                return False
            if _parse_exc_line(s, strict=True) is not None:
                self._pytest_end()  # a plain exception line is not pytest's
                return True
            return False  # argument values ("cfg = {...}") and the like
        if self.pt_wait is not None:
            self.pt_wait[3] = s
            self.pt_wait = None
            return False
        m = _DEF_RE.match(s)
        if m is not None:
            self.pt_func = m.group(1)
        return False

    # -- rich -------------------------------------------------------------------------------

    def _on_rich(self, t: str, no: int, hp: bool) -> bool:
        s = t.strip()
        if not s:
            return False
        c = s[0]
        if c == "\u2570":  # "╰": end of the box; the exception line follows
            self.state = _RICH_DONE
            return False
        if c != "\u2502":  # not "│": the box was cut off
            self.state = _RICH_DONE
            return True
        inner = s[1:]
        if inner.endswith("\u2502"):
            inner = inner[:-1]
        inner = inner.strip()
        if not inner or inner[0] in "\u256d\u2502\u2570":  # a nested box (locals)
            return False
        b = self.b
        if inner[0] == "\u2771":  # "❱": the line being executed
            m = _RICH_SOURCE_RE.match(inner)
            if m is not None and b.cur is not None and b.cur[3] is None:
                b.cur[3] = _strip_rich_guides(m.group(1))
            return False
        m = _RICH_FRAME_RE.match(inner)
        if m is not None:
            b.add_frame(m.group(1), int(m.group(2)), m.group(3))
        return False

    def _on_rich_done(self, t: str, no: int, hp: bool) -> bool:
        s = t.strip()
        if not s:
            return False
        exc = _parse_exc_line(s, strict=False)
        if exc is not None:
            self._exception_line(self.b, exc, len(t) - len(t.lstrip()), hp)
            return False
        self._finish_truncated()
        return True

    # -- faulthandler -----------------------------------------------------------------------

    def _start_fault(self, s: str, no: int, hp: bool) -> None:
        b = self._open(no, hp)
        b.add_message_line(s)  # no class: the whole "Fatal Python error: ..." line is the message
        self.f_block: str | None = None
        self.f_current: list = []
        self.f_first: list = []
        self.f_have_current = False
        self.state = _FAULT

    def _on_fault(self, t: str, no: int, hp: bool) -> bool:
        s = t.strip()
        if not s:
            return False
        m = _FAULT_THREAD_RE.match(s)
        if m is not None:
            if m.group(1) != "Thread":  # "Current thread ..." / "Stack ...": the crashing one
                self.f_block = "current"
                self.f_have_current = True
            elif not self.f_first and not self.f_have_current:
                self.f_block = "first"
            else:
                self.f_block = None
            return False
        if s.startswith("File "):
            m = _FRAME_RE.match(s)
            if m is not None:
                frame = (m.group(1), _line_number(m.group(2)), m.group(3))
                target = {"current": self.f_current, "first": self.f_first}.get(self.f_block)
                if target is not None and len(target) < _MAX_HEAD_FRAMES + _MAX_TAIL_FRAMES:
                    target.append(frame)
                return False
        if s == "<no Python frame>" or s.startswith(("Extension modules:", "Python runtime state:")):
            return False
        self._fault_finish()
        return True

    def _fault_finish(self) -> None:
        frames = self.f_current if self.f_have_current else self.f_first
        for frame in reversed(frames):  # faulthandler prints the most recent call first
            self.b.add_frame(*frame)
        self._finish()


_HANDLERS = {
    _IDLE: _ChainParser._on_idle,
    _FRAMES: _ChainParser._on_frames,
    _MESSAGE: _ChainParser._on_message,
    _AFTER: _ChainParser._on_after,
    _REMOTE_OPEN: _ChainParser._on_remote_open,
    _WARN_SOURCE: _ChainParser._on_warn_source,
    _STACK: _ChainParser._on_stack,
    _PYTEST: _ChainParser._on_pytest,
    _RICH: _ChainParser._on_rich,
    _RICH_DONE: _ChainParser._on_rich_done,
    _FAULT: _ChainParser._on_fault,
    _IGNORE: _ChainParser._on_ignore,
}


# --------------------------------------------------------------------------------------------
# One log source: exception-group framing over a stack of chain parsers
# --------------------------------------------------------------------------------------------


class _Source:
    """All lines of one log source (one rank, one container, or the unprefixed lines).

    Exception-group framing is peeled off here: a line's margin (``|`` or ``+`` at column
    ``c0 + 2 * (depth - 1)``, where ``c0`` is the column of the top-level group's margin) says
    which depth it belongs to, and ``ctx[depth]`` reads its content.
    """

    def __init__(self, sink: _Sink, rank: str):
        self.sink = sink
        self.rank = rank
        self.root_chain = _Chain()
        self.ctx = [_ChainParser(sink, rank, 0, (), self.root_chain, member=False)]
        self.c0: int | None = None  # column of the depth-1 margin while inside a group
        self.last_line = 0
        self.prev_unprefixed = False
        self.prev_header = False

    @property
    def busy(self) -> bool:
        return self.c0 is not None or self.ctx[0].state != _IDLE

    def settled(self, is_last: bool) -> bool:
        """Whether nothing is open here, so that a noise line would leave this source as it is.

        Nothing open: no group framing, no exception being read, no chain separator or
        RemoteTraceback quote waiting for what follows. Such a source reads every later line
        as a fresh one would (``root_chain.next_index`` only matters after a separator).
        "after" (an exception just ended) reads lines exactly as "idle" does once no separator
        is pending; it differs only in being ``busy``, which routes the next unprefixed line
        here -- and that can only happen while this is the source of the last line
        (``is_last``) and that line allowed continuation. What makes :meth:`_Parser.skip` safe.
        """
        p = self.ctx[0]
        if self.c0 is not None or len(self.ctx) != 1 or p.b is not None or p.held is not None:
            return False
        if p.chain.pending is not None or p.in_remote:
            return False
        if p.state == _IDLE:
            return True
        return p.state == _AFTER and not (is_last and (self.prev_unprefixed or self.prev_header))

    def feed(self, t: str, no: int, hp: bool) -> None:
        if self.c0 is None and t:
            s = t.lstrip()
            if s[:1] in ("+", "|") and (
                s.startswith("+ " + _GROUP_TB_HEADER)
                or (s.startswith("| ") and _GROUP_SUFFIX_RE.search(s) and _parse_exc_line(s[2:].strip(), False))
            ):
                self.c0 = len(t) - len(s)
        if self.c0 is not None and self._feed_group(t, no, hp):
            return
        self.ctx[0].feed(t, no, hp)

    def close_all(self) -> None:
        self._pop_to(0)
        self.c0 = None
        self.ctx[0].close()

    def _end_group(self) -> None:
        self._pop_to(0)
        self.c0 = None

    def _feed_group(self, t: str, no: int, hp: bool) -> bool:
        """Handle a line while group framing is open; False if the framing just ended."""
        s = t.lstrip()
        off = len(t) - len(s) - self.c0
        if not s or s[0] not in "|+" or off < 0 or off % 2:
            self._end_group()
            return False
        depth = min(off // 2 + 1, _MAX_GROUP_DEPTH)
        if s[0] == "|":
            self._text_at(depth, s[2:] if s.startswith("| ") else s[1:], no, hp)
            return True
        if s.startswith("+ "):  # the top-level group's "+ Exception Group Traceback" line
            if depth == 1 and len(self.ctx) > 1:
                self._pop_to(0)  # a new top-level group: the previous one is over
            self._text_at(depth, s[2:], no, hp)
            return True
        m = _MEMBER_SEP_RE.match(s)
        if m is not None:
            # "+-+---- 1 ----" opens the first member one level deeper than its own column.
            member_depth = min(max(depth + 1 if m.group(1) else depth, 2), _MAX_GROUP_DEPTH)
            self._member(member_depth, m.group(2), no)
            return True
        if _CLOSE_RE.match(s):
            # One closing rule may end several nested groups at once (CPython prints only one).
            self._pop_to(max(depth - 1, 1))
            return True
        self._end_group()
        return False

    def _text_at(self, depth: int, content: str, no: int, hp: bool) -> None:
        top = len(self.ctx) - 1
        if depth < top:
            self._pop_to(depth)
        elif depth > top:
            self._push_to(depth)
        self.ctx[depth].feed(content, no, hp)

    def _push_to(self, depth: int) -> None:
        while len(self.ctx) <= depth:
            d = len(self.ctx)
            parent = self.ctx[d - 1]
            parent.settle()
            if d == 1:  # the top-level group: an element of the depth-0 chain
                self.ctx.append(_ChainParser(self.sink, self.rank, 1, (), self.root_chain, member=False))
            else:  # a member whose separator we did not see (the input starts mid-group)
                self.ctx.append(_ChainParser(self.sink, self.rank, d, parent.path + (0,), _Chain(), member=True))

    def _pop_to(self, depth: int) -> None:
        while len(self.ctx) - 1 > depth:
            self.ctx.pop().close()
            if len(self.ctx) == 1:
                self.ctx[0].state = _AFTER  # the top-level group ended: a separator may follow

    def _member(self, depth: int, index: str, no: int) -> None:
        self._pop_to(depth - 1)
        if len(self.ctx) < depth:
            self._push_to(depth - 1)
        parent = self.ctx[depth - 1]
        parent.settle()  # the group's own message and notes are complete
        if index == "...":  # "and N more exceptions": not printed, nothing to report
            child = _ChainParser(self.sink, self.rank, depth, parent.path, _Chain(), member=False)
            child.state = _IGNORE
        else:
            child = _ChainParser(self.sink, self.rank, depth, parent.path + (int(index),), _Chain(), member=True)
        self.ctx.append(child)


# --------------------------------------------------------------------------------------------
# Routing lines to sources
# --------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self) -> None:
        self.sink = _Sink()
        self.sources: OrderedDict[str, _Source] = OrderedDict()  # least recently used first
        self.last_key: str | None = None
        self.no = 0
        self.nonempty = 0
        self.bare: list[tuple[str, int, str]] = []  # the first few non-empty lines
        self.active: set[str] = set()  # keys of the sources that are not settled
        # True when no source has anything open and the bare-message fallback (the first few
        # non-empty lines) is decided: then a line with no trigger (_all_noise) changes nothing.
        self.quiet = False

    def skip(self, count: int) -> None:
        """Account for ``count`` noise lines read while quiet, without parsing them.

        Fed in full, such a line would only be routed to a settled source (creating it, or
        refreshing its place in the LRU order), move it from "after" to "idle" and become the
        last line. None of that changes a later result (see _Source.settled): it only lets
        settled sources be dropped sooner (by the idle flush or the _MAX_SOURCES eviction), and
        dropping a settled source reports nothing.
        """
        self.no += count

    def feed(self, raw: str) -> None:
        self.no += 1
        no = self.no
        line = _clean(raw)
        content, ids, hp = _strip_prefixes(line) if line else ("", [], False)
        rank = " ".join(ids)
        stripped = content.strip()
        if stripped:
            self.nonempty += 1
            if self.nonempty <= _BARE_MAX_LINES:
                self.bare.append((stripped, no, rank))
        key = rank
        if not rank and not hp and self.last_key:
            # An unprefixed line continues the previous line's source if that source is inside
            # a traceback that is itself unprefixed or whose header was on the previous line.
            prev = self.sources.get(self.last_key)
            if prev is not None and prev.busy and (prev.prev_unprefixed or prev.prev_header):
                key = self.last_key
        src = self.sources.get(key)
        if src is None:
            if len(self.sources) >= _MAX_SOURCES:
                old_key, oldest = self.sources.popitem(last=False)
                oldest.close_all()
                self.active.discard(old_key)
            src = self.sources[key] = _Source(self.sink, key)
        else:
            self.sources.move_to_end(key)
        src.last_line = no
        src.prev_unprefixed = not hp
        src.prev_header = "Traceback (most recent call last)" in content
        src.feed(content, no, hp)
        if src.settled(is_last=True):
            self.active.discard(key)
        else:
            self.active.add(key)
        if self.last_key != key and self.last_key in self.active:
            # The previous line's source is no longer the last one: that may settle it.
            prev = self.sources.get(self.last_key)
            if prev is None or prev.settled(is_last=False):
                self.active.discard(self.last_key)
        self.last_key = key
        if not no & 255:
            self._finish_idle_sources()
        self.sink.release()
        self.quiet = not self.active and self.nonempty > _BARE_MAX_LINES

    def _finish_idle_sources(self) -> None:
        limit = self.no - _IDLE_FLUSH_LINES
        while self.sources:
            key, src = next(iter(self.sources.items()))
            if src.last_line > limit:
                break
            src.close_all()
            del self.sources[key]
            self.active.discard(key)

    def finish(self) -> None:
        for src in list(self.sources.values()):
            src.close_all()
        self.sink.release(force=True)
        if (
            self.sink.emitted == 0
            and 0 < self.nonempty <= _BARE_MAX_LINES
            and not any(_mentions_traceback(text) for text, _, _ in self.bare)
        ):
            ranks: list[str] = []
            for _, _, rank in self.bare:
                if rank and rank not in ranks:
                    ranks.append(rank)
            self.sink.out.append(
                ParsedException(
                    exc_type=None,
                    message="\n".join(text for text, _, _ in self.bare),
                    ranks=ranks,
                    line_no=self.bare[0][1],
                )
            )

    def recover(self) -> None:
        """After an internal error: forget all state (what was already reported stays)."""
        self.sources.clear()
        self.active.clear()
        self.quiet = False
        self.last_key = None
        self.sink.forget_open()


def _physical_lines(lines: Iterable) -> Iterator[str]:
    """Physical lines (each keeps its newline, if it had one); chunks holding several lines
    are split, bytes decoded."""
    for chunk in lines:
        if not isinstance(chunk, str):
            if isinstance(chunk, (bytes, bytearray)):
                chunk = bytes(chunk).decode("utf-8", "replace")
            else:
                chunk = str(chunk)
        pos = chunk.find("\n")
        if pos < 0 or pos == len(chunk) - 1:
            yield chunk
        else:
            parts = chunk.split("\n")
            if parts[-1] == "":
                parts.pop()
            yield from parts


def _line_blocks(lines: Iterable) -> Iterator[tuple[list[str], str | None]]:
    """The physical lines of ``lines`` (as :func:`_physical_lines` makes them) in lists of at
    most _BLOCK_LINES, each with its lines joined when they all end with a newline and are not
    too long to be tested as a block (see _all_noise).

    When every chunk read is one line ending with its newline (lines read from a file,
    _split_text), the chunks are the list: a few C-level calls replace a generator step per
    line.
    """
    chunks = iter(lines)
    while True:
        block: list = []
        try:
            block.extend(islice(chunks, _BLOCK_LINES))
        except Exception:
            # The input itself failed: what it gave before still counts, as it did line by line.
            yield from _split_block(block)
            raise
        if not block:
            return
        try:
            all_end_a_line = "".join(map(_last_char, block)) == "\n" * len(block)
            if all_end_a_line and sum(map(len, block)) <= _BLOCK_CHARS:
                text = "".join(block)
                if text.count("\n") == len(block):
                    yield block, text
                    continue
        except (TypeError, IndexError):  # bytes or other objects, an empty chunk
            pass
        yield from _split_block(block)


def _split_block(chunks: list) -> Iterator[tuple[list[str], None]]:
    physical = list(_physical_lines(chunks))
    for start in range(0, len(physical), _BLOCK_LINES):
        yield physical[start : start + _BLOCK_LINES], None


_last_char = itemgetter(-1)


def _split_text(text: str) -> Iterator[str]:
    """The lines of ``text`` (split on "\\n" only, which each keeps), cut to MAX_LINE_CHARS."""
    start, n = 0, len(text)
    while start < n:
        end = text.find("\n", start)
        if end < 0:
            end = n
        yield text[start : min(end + 1, start + MAX_LINE_CHARS)]
        start = end + 1


def iter_exceptions(lines: Iterable[str]) -> Iterator[ParsedException]:
    """Parse lines one by one and yield the exceptions found, in bounded memory.

    ``lines`` may be any iterable of strings (an open file works; newlines are optional, bytes
    are decoded as UTF-8 with replacement). Only the first :data:`MAX_LINE_CHARS` (64 KiB)
    characters of a line are kept, so one absurdly long line costs no more than that; messages,
    notes and frames are capped too (the outermost 50 and innermost 200 frames of a traceback
    are kept), as are the number of log sources tracked at once and the duplicate cache (the
    last 4096 distinct exceptions), so a log of any size is read in constant memory.

    Exceptions come out deduplicated, in order of ``line_no``, as soon as nothing that started
    earlier is still open. ``lines`` is read in blocks of up to 64 lines (so that ordinary log
    lines can be skipped in bulk, which makes a big log about ten times faster to read), so
    reading runs up to 63 lines ahead of what has been yielded. When a duplicate is seen after
    its first copy was yielded, the already-yielded object's ``ranks`` list is extended in
    place, so read ``ranks`` after the iteration ends (or use :func:`parse_text`). Never raises
    on any input text.
    """
    parser = _Parser()
    out = parser.sink.out
    for block, text in _line_blocks(lines):
        # The common case of a big log: nothing is open and the block is noise, skipped whole
        # (see _all_noise). Otherwise its lines are read one by one.
        if parser.quiet and _all_noise(block, text):
            parser.skip(len(block))
            continue
        for raw in block:
            if parser.quiet and _all_noise((raw,)):
                parser.skip(1)
                continue
            try:
                parser.feed(raw)
            except Exception:
                if _RAISE_INTERNAL_ERRORS:
                    raise
                parser.recover()
            while out:
                yield out.popleft()
    try:
        parser.finish()
    except Exception:
        if _RAISE_INTERNAL_ERRORS:
            raise
        parser.sink.release(force=True)
    while out:
        yield out.popleft()


def parse_text(text: str) -> list[ParsedException]:
    """Parse a pasted traceback or log excerpt; returns the exceptions in input order.

    Duplicates (the same traceback printed by several ranks or processes) are merged into one
    entry listing all ranks. Returns [] when nothing was found. Never raises on any input.
    """
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
    found = list(iter_exceptions(_split_text(text)))
    found.sort(key=lambda exc: exc.line_no)  # stable; only reorders in rare interleavings
    return found
