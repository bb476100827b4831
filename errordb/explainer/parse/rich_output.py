"""rich's boxed tracebacks: ``╭─ Traceback ─╮``, a ``path:N in f`` line per frame, ``❱`` on
the line being executed, nested boxes of locals (skipped), then the exception line after the box."""

from __future__ import annotations

import re

from errordb.explainer.parse.classify import parse_exc_line
from errordb.explainer.parse.reader import Host

_RICH_FRAME_RE = re.compile(r"(.+?):(\d{1,12}) in (\S.*)$")
_RICH_SOURCE_RE = re.compile(r"\u2771\s*\d{1,12} (.*)$")  # "❱ 5 load(...)"


def _strip_guides(code: str) -> str | None:
    code = code.strip()
    while code.startswith("\u2502"):  # rich draws indent guides with "│"
        code = code[1:].lstrip()
    return code or None


class RichReader:
    """The box's lines, then the exception line, into the open exception (a :class:`~errordb.explainer.parse.reader.Reader`)."""

    __slots__ = ("box_done",)

    def __init__(self) -> None:
        self.box_done = False

    def settle(self, parser: Host) -> None:
        parser.finish_truncated()

    def feed(self, parser: Host, t: str, no: int, hp: str) -> bool:
        if self.box_done:
            return self._after_box(parser, t, hp)
        s = t.strip()
        if not s:
            return False
        c = s[0]
        if c == "\u2570":  # "╰": end of the box; the exception line follows
            self.box_done = True
            return False
        if c != "\u2502":  # not "│": the box was cut off
            self.box_done = True
            return True
        inner = s[1:]
        if inner.endswith("\u2502"):
            inner = inner[:-1]
        inner = inner.strip()
        if not inner or inner[0] in "\u256d\u2502\u2570":  # a nested box (locals)
            return False
        b = parser.b
        if inner[0] == "\u2771":  # "❱": the line being executed
            m = _RICH_SOURCE_RE.match(inner)
            if m is not None and b.cur is not None and b.cur[3] is None:
                b.cur[3] = _strip_guides(m.group(1))
            return False
        m = _RICH_FRAME_RE.match(inner)
        if m is not None:
            b.add_frame(m.group(1), int(m.group(2)), m.group(3))
        return False

    def _after_box(self, parser: Host, t: str, hp: str) -> bool:
        s = t.strip()
        if not s:
            return False
        exc = parse_exc_line(s, strict=False)
        if exc is not None:
            parser.exception_line(parser.b, exc, len(t) - len(t.lstrip()), hp)
            return False
        parser.finish_truncated()
        return True
