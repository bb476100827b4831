"""IPython's and Jupyter's tracebacks (Colab's too): a header line with the class, the frames
with a few lines of their source, then the ``Class: message`` line::

    ValueError                                Traceback (most recent call last)
    Cell In[2], line 1                              <- IPython 8: a notebook cell
    ----> 1 f()
    File /srv/app/jobs.py:12, in f(x)               <- IPython 8: file, line, function
         11 def f(x):
    ---> 12     raise ValueError("bad")
    /srv/app/jobs.py in f(x)                        <- before 8 (the line comes with the arrow)
    [/usr/lib/python3/dist-packages/x.py](https://localhost:8080/#) in f(x)   <- Colab's link
    4 frames                                        <- Colab: frames it folded away
    ValueError: bad

The frames are read in the order printed (outermost first, as CPython's); the ``---->`` line
gives a frame its line number, where its header has none, and its source line.
"""

from __future__ import annotations

import re

from errordb.explainer.parse.classify import parse_exc_line
from errordb.explainer.parse.parsed import Builder
from errordb.explainer.parse.reader import Host

#: ``ValueError                                Traceback (most recent call last)``: no colon.
HEADER_RE = re.compile(r"[A-Za-z_][\w.]*\s+Traceback \(most recent call last\)")
_FUNCTION = r"(<[^>]*>|[^\s(]+)"  # f, Class.f, <module>, Colab's <cell line: 0>
_FILE_FRAME = re.compile(r"File (.+?):(\d+), in " + _FUNCTION)
_CELL_FRAME = re.compile(r"(Cell In\s*\[\d*\]), line (\d+)")
_OLD_FRAME = re.compile(r"(?:\[(.+?)\]\([^)\s]*\)|(\S+\.pyw?|<ipython-input-[^>]*>)) in " + _FUNCTION)
_ARROW = re.compile(r"-*> ?(\d+)(?: (.*))?")
_CONTEXT = re.compile(r"\d+(?: .*)?")
#: Colab's "4 frames", IPython's "[... skipping hidden 1 frame]", a rule of dashes.
_SKIPPED = re.compile(r"\d+ frames?|\[\.\.\. skipping .*\]|-{10,}|\.\.\.")


class IPythonReader:
    """The frames and the exception line of one IPython traceback (a :class:`~errordb.explainer.parse.reader.Reader`)."""

    __slots__ = ("b",)

    def __init__(self, b: Builder):
        self.b = b

    def feed(self, parser: Host, t: str, no: int, hp: str) -> bool:
        s = t.strip()
        if not s or _SKIPPED.fullmatch(s):
            return False
        b = self.b
        if (m := _ARROW.fullmatch(s)) is not None:
            if b.cur is not None:
                b.cur[1] = b.cur[1] or int(m.group(1))
                b.cur[3] = (m.group(2) or "").strip() or None
            return False
        if _CONTEXT.fullmatch(s) is not None and t[:1].isspace():
            return False  # a source line around the arrow's
        if (m := _FILE_FRAME.fullmatch(s) or _FILE_FRAME.match(s)) is not None:
            b.add_frame(m.group(1), int(m.group(2)), m.group(3))
            return False
        if (m := _CELL_FRAME.fullmatch(s)) is not None:
            b.add_frame(m.group(1), int(m.group(2)), "<module>")
            return False
        if (m := _OLD_FRAME.match(s)) is not None:
            b.add_frame(m.group(1) or m.group(2), None, m.group(3))
            return False
        exc = parse_exc_line(s, strict=False)
        if exc is not None:
            parser.exception_line(b, exc, len(t) - len(t.lstrip()), hp)
            return False
        self.settle(parser)
        return True

    def settle(self, parser: Host) -> None:
        parser.finish_truncated()
