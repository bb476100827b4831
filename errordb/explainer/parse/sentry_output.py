"""Sentry's raw stack trace, as people copy it from an event's page: the ``Class: message``
line first, then how many frames Sentry folded away, then the frames, most recent call last::

    MissingSchema: Invalid URL 'example.com/x': No schema supplied. Perhaps you meant http://example.com/x?
    (6 additional frame(s) were not displayed)
    ...
      File "requests/sessions.py", line 459, in prepare_request
        hooks=merge_hooks(request.hooks, self.hooks),
      File "requests/models.py", line 388, in prepare_url
        raise MissingSchema(error)

The second line says it is Sentry's: the driver then hands the line before it (whatever its
class is named) and the frames after it to :class:`SentryReader`.
"""

from __future__ import annotations

import re

from errordb.explainer.parse.classify import FRAME_RE, line_number
from errordb.explainer.parse.parsed import Builder
from errordb.explainer.parse.reader import Host

#: The line under the title: "(6 additional frame(s) were not displayed)".
FOLDED_RE = re.compile(r"\(\d{1,6} additional frame\(s\) were not displayed\)")


class SentryReader:
    """The frames of one Sentry stack trace, after its title (a :class:`~errordb.explainer.parse.reader.Reader`)."""

    __slots__ = ("b",)

    def __init__(self, b: Builder):
        self.b = b

    def feed(self, parser: Host, t: str, no: int, hp: str) -> bool:
        s = t.strip()
        if s == "..." or FOLDED_RE.fullmatch(s):
            return False
        if s.startswith("File ") and (m := FRAME_RE.match(s)) is not None:
            self.b.add_frame(m.group(1), line_number(m.group(2)), m.group(3))
            return False
        if s and t[:1].isspace() and self.b.cur is not None and self.b.cur[3] is None:
            self.b.cur[3] = s  # the frame's source line
            return False
        self.settle(parser)
        return bool(s)  # a blank line ends it; anything else is read again, as a fresh line

    def settle(self, parser: Host) -> None:
        parser.finish()
