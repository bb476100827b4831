"""What a line of a log says once terminal escapes and log prefixes are taken off.

Each line is cleaned first (:func:`clean_line`: ANSI/terminal escape sequences and C0 and C1
control characters removed, only the text after the last carriage return kept), then up to four
leading log prefixes are removed (:func:`strip_prefixes`): ``[2026-08-28 05:10:05 TP0]``-style
brackets (timestamps, levels, rank tokens such as TP0/DP1/rank3, nothing else), Ray/vLLM
``(Name pid=123)`` and ``(raylet, ip=10.0.0.1)``, docker-compose ``service_1  |``,
``2026-08-28 05:10:05,123 ERROR`` and other common ``logging`` layouts, ``ERROR:root:``, vLLM's
``ERROR 08-28 05:10:05 file.py:12]``, glog and syslog. Exactly one space after a prefix is
removed, so indentation survives.

Rank-like ids in a prefix (``TP0``, ``DP1 TP3``, ``pid=123``, a compose service name) name the
*source* of the line: the driver groups lines per source, so tracebacks interleaved line by line
are taken apart, and the id is recorded in ``ranks``.
"""

from __future__ import annotations

import re

from errordb.text import without_escapes

#: Only this many characters of a line are kept; the rest of an absurdly long line is ignored.
MAX_LINE_CHARS = 64 * 1024

_MAX_PREFIX_LAYERS = 4


def clean_line(raw: str) -> str:
    """Cap, strip line ends, terminal escapes and control characters (C0, DEL, C1; tabs are kept)."""
    if len(raw) > MAX_LINE_CHARS:
        raw = raw[:MAX_LINE_CHARS]
    line = raw.rstrip("\r\n")
    if "\r" in line:
        # A carriage return redraws the line on a terminal (progress bars): keep what was drawn last.
        last = line.rsplit("\r", 1)[1]
        line = last if last.strip() else line.replace("\r", "")
    return without_escapes(line).rstrip()


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
    # honcho's and foreman's "16:50:39 web.1    | ": the time alone, when the process's column follows
    + r"|\d{2}:\d{2}:\d{2} (?=[A-Za-z0-9][\w.-]{0,63} +\|(?: |$))"
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


def strip_prefixes(text: str) -> tuple[str, list[str], str]:
    """Remove leading log prefixes: returns (content, source ids, the kinds of prefix removed).

    The kinds are one character a layer, outermost first (``[`` brackets, ``(`` Ray's
    parentheses, ``0`` a timestamp, ``a`` a level, glog or syslog prefix, ``|`` docker-compose):
    ``""`` when there was none. A traceback's lines share their kinds; a line whose kinds differ
    is another log record (vLLM's ``(EngineCore pid=1) INFO ...`` after ``(EngineCore pid=1)
    Exception: ...``).
    """
    ids: list[str] = []
    found = ""
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
        kind = c if c in "[(" else "0" if c.isdigit() else "a"
        if m is None and c.isalnum():
            m = _DOCKER_RE.match(text)
            if m is not None:
                source, kind = m.group(1), "|"
        if m is None or m.end() == 0:
            break
        found += kind
        if source:
            ids.append(source)
        text = text[m.end():]
    return text, ids, found


# A code fence (```` ```python ````, ``~~~``) or a line of HTML tags only (``</details>``,
# ``<summary>Logs</summary>``): markup around a paste, never part of a message.
_FENCE_RE = re.compile(r"(?: {0,3}|\t)(`{3,}|~{3,})\s*([\w+.#-]{0,40})$")
_TAGS_RE = re.compile(r"(?:\s*</?[a-zA-Z][\w-]{0,20}(?:\s[^<>]{0,200})?>[^<>]{0,200})*\s*</?[a-zA-Z][\w-]{0,20}(?:\s[^<>]{0,200})?>\s*$")
_QUOTE_RE = re.compile(r"(?:> ?){1,8}")
# GitHub's "Quote reply" ends the quoted line with its author: " [@name](https://github.com/name)".
_MENTION_LINK_RE = re.compile(r" ?\[@[\w-]{1,39}\]\(https://github\.com/[\w-]{1,39}\)\s*$")


class Markdown:
    """Takes off what Markdown wraps a paste in, one line at a time.

    Fences and tag-only lines become empty lines, which end a message as a blank line does
    (the closing fence of an issue's code block is not the last line of the exception's
    message). A blockquote's ``>`` markers are removed: a line ``> text`` (one space, then
    text) starts a quote, and while it lasts ``>`` is removed from the lines that follow (a
    quoted frame is ``>   File ...``). pytest marks the failing source line ``>   code``, with
    three spaces or more, and ``>>>`` is Python's prompt: neither starts a quote (an empty
    prompt after a traceback ends its message); inside a fence nothing starts a quote (pdb's
    ``> file(12)f()``). In a ``diff`` fence, the ``+``, ``-`` or space that starts each line is
    taken off, and so is the author link GitHub's "Quote reply" appends to a quoted line
    (`` [@name](https://github.com/name)``). Outside fences, lines wrapped whole in backticks one
    after another lose them (a lone one is a code span in a sentence, and the next line is not
    its message's), and a code span left open at the end of a line ends at the next line's first
    backtick: the rest is prose (`` `... FastAPIError: Invalid args ...`. Moreover, ...``).
    """

    def __init__(self) -> None:
        self.quoting = False
        self.fence: str | None = None  # the opening fence's marker while inside a fence
        self.diff = False
        self.span_open = False  # a line ended inside an inline code span
        self.wrapped = False  # the last line that was not blank was wrapped whole in backticks

    def unwrap(self, line: str) -> str:
        if "](https://github.com/" in line:
            line = _MENTION_LINK_RE.sub("", line)
        first = line[:1]
        if self.diff and first in "+- ":
            line = line[1:]
            first = line[:1]
        if first in ("`", "~", " ", "\t") and (fence := _FENCE_RE.match(line)):
            self._on_fence(fence.group(1), fence.group(2))
            return ""
        if line == ">>>":
            return ""  # the interpreter's prompt after a traceback: not part of its message
        if first == ">" and not line.startswith(">>>") and (self.fence is None or self.quoting):
            marker = _QUOTE_RE.match(line)
            rest = line[marker.end():]
            if self.quoting or not rest[:1].isspace():
                self.quoting = True
                return self._code(rest)
        elif line.strip():
            if self.fence is None:
                self.quoting = False
        if "<" in line and ">" in line and _TAGS_RE.match(line):
            return ""
        return self._code(line)

    def neutral(self) -> bool:
        """Whether no fence or quote is open: a line without Markdown of its own (no fence, no
        quote, no backtick) then reads as :meth:`plain` says, and does only :meth:`read_plain`."""
        return self.fence is None and not self.quoting

    @staticmethod
    def plain(line: str) -> str:
        """A line without Markdown of its own as :meth:`unwrap` gives it while no fence or quote
        is open: without a "Quote reply" author link, and empty if it holds only tags."""
        if "](https://github.com/" in line:
            line = _MENTION_LINK_RE.sub("", line)
        return "" if "<" in line and ">" in line and _TAGS_RE.match(line) else line

    def read_plain(self, line: str) -> None:
        """What such a line does to this reader, unread: a blank one ends a code span left open,
        any other ends a run of lines wrapped whole in backticks."""
        blank = not self.plain(line).strip()
        self.span_open = self.span_open and not blank
        self.wrapped = self.wrapped and blank

    def _on_fence(self, marker: str, info: str) -> None:
        if self.fence is None:
            self.fence, self.diff = marker, info == "diff"
        elif not info and marker[0] == self.fence[0] and len(marker) >= len(self.fence):
            self.fence, self.diff = None, False
        self.span_open = False

    def _code(self, line: str) -> str:
        """Inline code outside fences: see the class."""
        if self.fence is not None or "`" not in line:
            self.wrapped = self.wrapped and not line.strip()
            self.span_open = self.span_open and bool(line.strip())
            return line
        body = line.strip()
        wrapped, self.wrapped = self.wrapped, len(body) > 1 and body[0] == body[-1] == "`" and body.count("`") == 2
        if wrapped and self.wrapped:
            return line.replace("`", "")
        if self.span_open:
            self.span_open = False
            return line[: line.index("`")]
        self.span_open = line.count("`") % 2 == 1
        return line
