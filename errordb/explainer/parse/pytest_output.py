"""pytest's failure reports: the long and short formats and the short test summary.

Read: ``E   ...`` lines (the message), ``path:N: in f`` and ``path:N: ValueError`` locations, the
``>`` line being executed, ``____ test ____`` section titles, ``_ _ _`` frame separators and
chained exceptions printed as consecutive entries. ``FAILED id - ValueError: msg`` summaries
are only reported when the long form did not already report the same class and message.
"""

from __future__ import annotations

import re

from errordb.explainer.parse.classify import (
    CLASS_FULL_RE, LOC_RE, SUMMARY_RE, TB_HEADER, line_number, parse_exc_line, separator_kind, short_name,
)
from errordb.explainer.parse.parsed import MAX_HEAD_FRAMES, MAX_TAIL_FRAMES
from errordb.explainer.parse.reader import Host

_MAX_E_LINES = 200  # "E" lines kept per failure
_DEF_RE = re.compile(r"(?:async\s+)?def\s+([^\W\d]\w*)")


def is_pytest_header(s: str) -> bool:
    """pytest's ``____ test_name ____`` section title (not the ``_ _ _`` frame separator)."""
    return (
        len(s) >= 5
        and s[0] == "_"
        and s[-1] == "_"
        and not s.startswith("_ _")
        and " " in s
        and bool(s.strip("_ "))
    )


def _is_frame_separator(s: str) -> bool:
    return s.startswith("_ _") and not s.replace("_", "").replace(" ", "")


def _ends_section(s: str) -> bool:
    """A line after which what follows is read normally again (``s`` stripped, not empty)."""
    return (
        s.startswith("=====")
        or (s.startswith("---") and "Captured" in s)
        or s.endswith(TB_HEADER)
        or s.startswith(("FAILED ", "Fatal Python error: "))
        or (s.startswith("ERROR ") and SUMMARY_RE.match(s) is not None)
    )


def report_summary(parser: Host, nodeid: str, rest: str, no: int, hp: str) -> None:
    """A ``FAILED nodeid - rest`` summary line, unless the long form reported it already."""
    exc = parse_exc_line(rest, strict=False)
    if exc is None:
        if not rest.startswith("assert "):
            return
        exc = ("AssertionError", rest)
    if parser.sink.seen_pytest(exc[0], exc[1]):
        return
    parser.chain.pending = None
    b = parser.open(no, hp)
    path, _, test = nodeid.partition("::")
    func = test.rsplit("::", 1)[-1].split("[", 1)[0] if test else None
    b.add_frame(path, None, func)
    parser.exception_line(b, exc, 0, hp)
    parser.finish()
    parser.to_idle()


class PytestReader:
    """The lines of one pytest failure section (a :class:`~errordb.explainer.parse.reader.Reader`)."""

    __slots__ = ("start", "frames", "func", "source", "e_lines", "e_indent", "wait", "hp")

    def __init__(self, start: int | None):
        self._reset(start)

    def _reset(self, start: int | None) -> None:
        self.start = start
        self.frames: list[list] = []
        self.func: str | None = None
        self.source: str | None = None
        self.e_lines: list[str] = []
        self.e_indent = 0
        self.wait: list | None = None  # a short-format frame whose source line comes next
        self.hp = ""

    def settle(self, parser: Host) -> None:
        if self.e_lines:  # E lines set start, so the failure has a start line
            self._failure(parser, None, self.start)
        parser.to_idle()

    def feed(self, parser: Host, t: str, no: int, hp: str) -> bool:
        s = t.strip()
        if not s:
            return False
        if _ends_section(s):
            self.settle(parser)  # the section is over; what follows is read normally
            return True
        kind = separator_kind(s)
        if kind:  # pytest prints chained exceptions as consecutive entries
            if self.e_lines:
                self._failure(parser, None, no)
            self._reset(None)
            parser.chain.pending = kind
            return False
        if is_pytest_header(s):
            if self.e_lines:
                self._failure(parser, None, no)
            parser.chain.pending = None
            self._reset(no)
            return False
        if _is_frame_separator(s):
            self.func = self.source = None
            return False
        if self.start is None:
            self.start = no
        c = t[0]
        if c == ">":
            self.source = t[1:].strip() or None
            return False
        if c == "E" and (len(t) == 1 or t[1] == " "):
            self._e_line(t, hp)
            return False
        if c not in " \t":
            return self._margin_line(parser, t, s, no)
        if self.wait is not None:
            self.wait[3] = s
            self.wait = None
            return False
        m = _DEF_RE.match(s)
        if m is not None:
            self.func = m.group(1)
        return False

    def _e_line(self, t: str, hp: str) -> None:
        rest = t[1:]
        lead = len(rest) - len(rest.lstrip(" "))
        if not self.e_lines:
            self.e_indent = lead
            self.hp = hp
        if len(self.e_lines) < _MAX_E_LINES:
            self.e_lines.append(rest[min(lead, self.e_indent):])

    def _margin_line(self, parser: Host, t: str, s: str, no: int) -> bool:
        """An unindented line that is not an ``E`` line: a location, or the section's end."""
        m = LOC_RE.match(t)
        if m is not None:
            path, line, rest = m.group(1), line_number(m.group(2)), (m.group(3) or "").strip()
            if not rest:
                self._add_frame([path, line, self.func, self.source])
                self.func = self.source = None
            elif rest.startswith("in "):
                entry = [path, line, rest[3:].strip(), None]
                self._add_frame(entry)
                self.wait = entry
            elif CLASS_FULL_RE.match(rest):
                self._add_frame([path, line, self.func, self.source])
                self._failure(parser, rest, no)
            return False
        if parse_exc_line(s, strict=True) is not None:
            self.settle(parser)  # a plain exception line is not pytest's
            return True
        return False  # argument values ("cfg = {...}") and the like

    def _add_frame(self, entry: list) -> None:
        if len(self.frames) >= MAX_HEAD_FRAMES + MAX_TAIL_FRAMES:
            del self.frames[MAX_HEAD_FRAMES]  # keep the outermost and the innermost, as Builder does
        self.frames.append(entry)

    def _failure(self, parser: Host, cls: str | None, no: int) -> None:
        """One failure's text is complete (``cls`` from pytest's ``path:N: Class`` line)."""
        lines = self.e_lines
        first = lines[0].strip() if lines else ""
        parsed = parse_exc_line(first, strict=False) if first else None
        if parsed is not None and (cls is None or short_name(parsed[0]) == short_name(cls)):
            exc_type, msg_lines = parsed[0], [parsed[1]] + lines[1:]
        elif cls is not None:
            exc_type, msg_lines = cls, lines
        elif first.startswith("assert "):
            exc_type, msg_lines = "AssertionError", lines
        elif lines:
            exc_type, msg_lines = None, lines
        else:
            self._reset(None)
            return
        b = parser.open(self.start or no, self.hp)
        for f in self.frames:
            b.add_frame(*f)
        b.exc_type = exc_type
        for line in msg_lines:
            b.add_message_line(line)
        parser.sink.note_pytest(exc_type, "\n".join(msg_lines))
        parser.finish()
        parser.read_with(self)  # the section goes on: the next failure, or its end
        self._reset(None)
