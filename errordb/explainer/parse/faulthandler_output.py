"""faulthandler's dumps: ``Fatal Python error: ...`` (or ``Windows fatal exception: ...``), then
each thread's stack, most recent call first.

Reported as one exception with ``exc_type`` None, the first line as its message, and the
crashing thread's frames (``Current thread``/``Stack``; else the first thread's) reversed to
outermost first, as a traceback lists them.
"""

from __future__ import annotations

import re

from errordb.explainer.parse.classify import FRAME_RE, line_number
from errordb.explainer.parse.parsed import MAX_HEAD_FRAMES, MAX_TAIL_FRAMES, Builder
from errordb.explainer.parse.reader import Host

_FAULT_THREAD_RE = re.compile(
    r"(Current thread|Thread|Stack)(?: 0x[0-9a-fA-F]{1,16})? \(most recent call first\):$"
)


class FaultReader:
    """The stacks of one dump (a :class:`~errordb.explainer.parse.reader.Reader`)."""

    __slots__ = ("target", "current", "first", "have_current")

    def __init__(self, b: Builder, first_line: str):
        b.add_message_line(first_line)  # no class: the whole "Fatal Python error: ..." line is the message
        self.target: list | None = None  # where the frames read now go
        self.current: list = []
        self.first: list = []
        self.have_current = False

    def feed(self, parser: Host, t: str, no: int, hp: str) -> bool:
        s = t.strip()
        if not s:
            return False
        m = _FAULT_THREAD_RE.match(s)
        if m is not None:
            if m.group(1) != "Thread":  # "Current thread ..." / "Stack ...": the crashing one
                self.target = self.current
                self.have_current = True
            elif not self.first and not self.have_current:
                self.target = self.first
            else:
                self.target = None
            return False
        if s.startswith("File "):
            m = FRAME_RE.match(s)
            if m is not None:
                target = self.target
                if target is not None and len(target) < MAX_HEAD_FRAMES + MAX_TAIL_FRAMES:
                    target.append((m.group(1), line_number(m.group(2)), m.group(3)))
                return False
        if s == "<no Python frame>" or s.startswith(("Extension modules:", "Python runtime state:")):
            return False
        self.settle(parser)
        return True

    def settle(self, parser: Host) -> None:
        frames = self.current if self.have_current else self.first
        for frame in reversed(frames):  # faulthandler prints the most recent call first
            parser.b.add_frame(*frame)
        parser.finish()
