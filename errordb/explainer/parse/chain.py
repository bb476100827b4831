"""The state machine that reads CPython's printed exception chains, one line at a time.

A :class:`ChainParser` reads the exceptions printed at one nesting depth of one log source
(:mod:`errordb.explainer.parse.source` peels exception-group margins off and keeps one per depth).
Each state has a handler in :data:`HANDLERS`; a handler returns True to have the same line read
again in the state it switched to. When a line opens another format -- a pytest failure section,
rich's traceback box, a faulthandler dump, IPython's traceback -- the lines go to a reader for
that format (``pytest_output``, ``rich_output``, ``faulthandler_output``, ``ipython_output``)
until it is done; the contract
between the two is in :mod:`errordb.explainer.parse.reader`.

Heuristics (documented because no rule can be exact):

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
    A message continues until a blank line (two, when a blank line followed every line of the
    frames: a copy that doubled each line break), a structural line (chain separator, ``Traceback``
    header, ``File`` line, group framing, rich box, "Exception in thread ...:", "Exception
    ignored in: ...", logging's "Call stack:", pdb's ``> file(N)f()``, the closing triple
    quotes of a RemoteTraceback), a line whose kinds of log prefix differ from the exception
    line's (a new log record after an unprefixed traceback, or vLLM's ``(EngineCore pid=1) INFO
    ...`` after ``(EngineCore pid=1) Exception: ...``), or end of input. An exception line that
    is the class alone (``Empty``, no colon) after a traceback's frames has no message at all.
    So unprefixed text printed right after a traceback, without a blank line, is taken as
    message text: nothing tells it apart.
RemoteTraceback
    ``multiprocessing``/``concurrent.futures`` print the remote traceback in triple quotes after
    a ``...RemoteTraceback:`` line: it is parsed as the real start of the chain (the wrapper line
    itself is not reported), so the remote root cause is the chain's ``root``.
"""

from __future__ import annotations

import re

from errordb.explainer.parse.classify import (
    FRAME_RE, GROUP_SUFFIX_RE, LOC_RE, PDB_LOCATION_RE, SUMMARY_RE, TB_HEADER, is_caret_line, line_number, parse_exc_line,
    separator_kind, short_name,
)
from errordb.explainer.parse.faulthandler_output import FaultReader
from errordb.explainer.parse.ipython_output import HEADER_RE as IPYTHON_HEADER_RE, IPythonReader
from errordb.explainer.parse.parsed import Builder, Chain
from errordb.explainer.parse.pytest_output import PytestReader, is_pytest_header, report_summary
from errordb.explainer.parse.reader import Reader
from errordb.explainer.parse.rich_output import RichReader
from errordb.explainer.parse.sentry_output import SentryReader
from errordb.explainer.parse.sink import Sink

#: An item of a numbered list in prose: "2. Why do the results differ ...".
NUMBERED_ITEM_RE = re.compile(r"\d{1,2}[.)] +[A-Z]")
#: A bullet of a list a message holds after a line ending in a colon, blank lines around its
#: items (transformers: "Make sure that:\n\n- 'x' is a correct model identifier ...\n\n- or ...").
BULLET_RE = re.compile(r"[-*\u2022] +\S")
#: A shell's prompt, the command after it or not: the program has exited, and what follows is
#: the terminal's ("~/tmp$", "user@host:~/src$ python x.py", "(venv) root@c0ffee:/workspace# ls",
#: "PS C:\src> py x.py"). A bare "$ ..." is not one: a message may show a command that way.
SHELL_PROMPT_RE = re.compile(r"(?:\([\w.-]+\) +)?(?:[\w.-]+@[\w.-]+:)?[~/][^\s$#]*[$#](?: .*)?|PS [A-Za-z]:\\[^>]*>(?: .*)?")

IDLE = "idle"  # between exceptions
FRAMES = "frames"  # after a Traceback header: File lines, source lines, carets
MESSAGE = "message"  # after the exception line: continuation lines, notes
AFTER = "after"  # an exception ended: a chain separator may follow
REMOTE_OPEN = "remote-open"  # after "...RemoteTraceback: ", expecting '"""'
WARN_SOURCE = "warn-source"  # after "path:N: SomeWarning: msg", expecting its source line
STACK = "stack"  # logging's "Stack (most recent call last):" (not an exception): skipped
#: logging's stack_info block, and the call stack of its "--- Logging error ---" report (after
#: the formatting error's traceback, before "Message: ..." and "Arguments: ...").
STACK_HEADERS = ("Stack (most recent call last):", "Call stack:")
IGNORE = "ignore"  # a "+---- ... ----" group member: "and N more exceptions"
IPYTHON_TB_END = "Traceback (most recent call last)"  # IPython's header line ends so (no colon)
READER = "reader"  # another format's lines (pytest, rich, faulthandler): ChainParser.reader reads them


class ChainParser:
    """Reads the exceptions printed at one nesting depth of one log source.

    Depth 0 is plain output. Inside an exception group every sub-exception gets its own parser
    at depth ``d`` (the ``|`` margins already removed); the top-level group itself is read by a
    depth-1 parser that shares the depth-0 chain, since the group is an element of that chain.
    """

    def __init__(self, sink: Sink, rank: str, depth: int, path: tuple, chain: Chain, member: bool):
        self.sink = sink
        self.rank = rank
        self.depth = depth
        self.path = path  # group_path of the exceptions read here
        self.chain = chain
        self.member = member  # a sub-exception of a group: its last exception is "group-member"
        self.state = IDLE
        self.b: Builder | None = None
        self.reader: Reader | None = None  # in state READER
        self.held: tuple | None = None  # member parsers: last finished exception, role not final yet
        self.in_remote = False  # inside the '"""' quotes of a RemoteTraceback
        self.remote_stash: tuple | None = None

    # -- driving ------------------------------------------------------------------------------

    def feed(self, t: str, no: int, hp: str) -> None:
        """Read one line (prefix and group margin removed); ``hp``: the kinds of log prefix the raw
        line had (:func:`~errordb.explainer.parse.lines.strip_prefixes`; ``""``: none)."""
        for _ in range(6):  # a handler may ask for the line again after switching state
            if not HANDLERS[self.state](self, t, no, hp):
                return

    def settle(self) -> None:
        """Finish the exception being read, if any; the chain stays open."""
        st = self.state
        if st in (MESSAGE, WARN_SOURCE):
            self.finish()
        elif st == FRAMES:
            self.finish_truncated()
        elif st == READER:
            self.reader.settle(self)
        elif st == REMOTE_OPEN:
            self._remote_fallback()  # no '"""' came: it was an ordinary exception line
            self.finish()
        elif st in (STACK, IGNORE):
            self.state = IDLE

    def close(self) -> None:
        """No more lines will come: finish everything."""
        self.settle()
        if self.held is not None:
            self._release_held(final=True)
        self.state = IDLE
        self.reader = None
        self.in_remote = False

    def read_with(self, reader: Reader) -> None:
        """Hand the next lines to ``reader`` until it leaves this state."""
        self.reader = reader
        self.state = READER

    def read_sentry(self, exc: tuple[str, str], no: int, hp: str) -> bool:
        """Sentry's stack trace: line ``no`` was its title, ``Class: message`` (``exc``), read
        as a bare exception or as text; its frames follow. False when this parser is inside
        something else."""
        b = self.b
        if b is None and self.state in (IDLE, AFTER):
            b = self.open(no, hp)
            self.exception_line(b, exc, 0, hp)
        elif b is None or self.state != MESSAGE or b.start != no or b.nframes:
            return False
        self.read_with(SentryReader(b))
        return True

    def to_idle(self) -> None:
        """Read the next line as a fresh one (no chain separator can follow what was read)."""
        self.state = IDLE

    # -- exception lifecycle --------------------------------------------------------------------

    def open(self, no: int, hp: str) -> Builder:
        """Start an exception at line ``no``: it takes the next place in the chain."""
        if self.b is not None:
            self.finish_truncated()
        if self.held is not None:  # something follows it in its chain: it is not the member itself
            self._release_held(final=False)
        role, index = self.chain.take()
        b = Builder(no, role, index, self.path, hp)
        self.sink.open(b)
        self.b = b
        return b

    def finish(self) -> None:
        """Report the exception being read; a chain separator may follow."""
        b = self.b
        self.b = None
        self.state = AFTER
        if b is None:
            return
        exc = b.build()
        if self.member:
            if self.held is not None:
                self._release_held(final=False)
            self.held = (b, exc)
        else:
            self.sink.emit(b, exc, self.rank)

    def finish_truncated(self) -> None:
        """A traceback cut before its exception line: report its frames, if it has any."""
        b = self.b
        if b is not None and b.nframes == 0 and b.exc_type is None:
            self.sink.discard(b)
            self.b = None
            self.state = AFTER
            return
        self.finish()

    def _release_held(self, final: bool) -> None:
        b, exc = self.held
        self.held = None
        if final:
            exc.role = "group-member"
        self.sink.emit(b, exc, self.rank)

    def exception_line(self, b: Builder, exc: tuple[str, str], col: int, hp: str) -> None:
        """``Class: message`` of ``b`` read at column ``col``; its continuation lines follow."""
        cls, msg = exc
        b.exc_type = cls
        b.msg_col = col
        b.has_prefix = hp
        b.add_message_line(msg)
        if self.depth and GROUP_SUFFIX_RE.search(msg):
            b.in_notes = True  # the group's message ends here; what follows are notes
        self.state = MESSAGE

    def _start_bare(self, exc: tuple[str, str], col: int, no: int, hp: str) -> None:
        cls, msg = exc
        if not msg and short_name(cls).endswith("RemoteTraceback"):
            # multiprocessing / concurrent.futures: the remote traceback follows in '"""' quotes
            self.remote_stash = (exc, col, no, hp)
            self.state = REMOTE_OPEN
            return
        self.exception_line(self.open(no, hp), exc, col, hp)

    def _remote_fallback(self) -> None:
        exc, col, no, hp = self.remote_stash
        self.remote_stash = None
        self.exception_line(self.open(no, hp), exc, col, hp)

    # -- between exceptions -------------------------------------------------------------------

    def _on_idle(self, t: str, no: int, hp: str) -> bool:
        s = t.strip()
        if not s:
            return False
        kind = separator_kind(s)
        if kind:
            self.chain.pending = kind
            return False
        if s.endswith(TB_HEADER):
            b = self.open(no, hp)
            # A header at the start of its line gives the traceback's base column; one that ends
            # a longer line ("... hit an exception: Traceback ...") leaves it to the first frame.
            if s.startswith(("Traceback", "Exception Group Traceback")):
                b.base = len(t) - len(t.lstrip())
            self.state = FRAMES
            return False
        if s.endswith(IPYTHON_TB_END) and IPYTHON_HEADER_RE.fullmatch(s):
            self.read_with(IPythonReader(self.open(no, hp)))
            return False
        first = s[0]
        if first == "F":
            if s.startswith("File ") and FRAME_RE.match(s):
                # A traceback without its header, or a SyntaxError block (which has none).
                self.open(no, hp)
                self.state = FRAMES
                return True
            if s.startswith("Fatal Python error: "):
                self.read_with(FaultReader(self.open(no, hp), s))
                return False
        elif first == "W" and s.startswith("Windows fatal exception: "):
            self.read_with(FaultReader(self.open(no, hp), s))
            return False
        elif first == "\u256d":  # "╭": rich's box
            if "Traceback" in s:
                self.open(no, hp)
                self.read_with(RichReader())
                return False
        elif first == '"' and s == '"""' and self.in_remote:
            self.in_remote = False
            return False
        elif s in STACK_HEADERS:
            self.state = STACK
            return False
        if (t[0] == "E" and t[1:3] == "  ") or (first == "_" and is_pytest_header(s)):
            self._enter_pytest(no)
            return True
        return self._on_idle_text(t, s, no, hp)

    def _on_idle_text(self, t: str, s: str, no: int, hp: str) -> bool:
        """A line that opens no block: pytest's summary or location, a warning, an exception line."""
        col = len(t) - len(t.lstrip())
        if col == 0:
            if s[0] in "FE" and s.startswith(("FAILED ", "ERROR ")):
                m = SUMMARY_RE.match(s)
                if m is not None and m.group(2):
                    report_summary(self, m.group(1), m.group(2).strip(), no, hp)
                    return False
            if ":" in t:
                m = LOC_RE.match(t)
                if m is not None:
                    rest = (m.group(3) or "").strip()
                    if not rest or rest.startswith("in "):
                        self._enter_pytest(no)  # pytest's "path:N: " / "path:N: in f" frames
                        return True
                    exc = parse_exc_line(rest, strict=True)
                    if exc is not None:  # "path:N: UserWarning: msg", "path:N: TypeError"
                        b = self.open(no, hp)
                        b.add_frame(m.group(1), line_number(m.group(2)), None)
                        self.exception_line(b, exc, 0, hp)
                        self.state = WARN_SOURCE
                        return False
        # Out of context only a class-looking name counts; inside a group or right after a
        # chain separator, the line is in the place of an exception line.
        exc = parse_exc_line(s, strict=not (self.depth or self.chain.pending))
        if exc is not None:
            self._start_bare(exc, col, no, hp)
            return False
        self.chain.pending = None  # unrelated text: whatever came before does not chain on
        return False

    def _enter_pytest(self, no: int) -> None:
        self.chain.pending = None
        self.read_with(PytestReader(no))

    # -- inside a traceback ---------------------------------------------------------------------

    def _on_frames(self, t: str, no: int, hp: str) -> bool:
        b = self.b
        s = t.strip()
        if not s:
            b.frame_blanks += 1
            return False  # not printed by CPython, but logs insert blank lines: tolerate them
        b.frame_lines += 1
        col = len(t) - len(t.lstrip())
        if s.startswith("File "):
            m = FRAME_RE.match(s)
            if m is not None:
                if b.nframes == 0:
                    b.frames_hp = hp
                    if b.base is None:
                        b.base = max(col - 2, 0)
                elif hp != b.frames_hp:
                    self.finish_truncated()
                    return True
                b.add_frame(m.group(1), line_number(m.group(2)), m.group(3))
                b.frame_col = col
                return False
        if b.nframes and hp != b.frames_hp:
            self.finish_truncated()  # a different kind of line: a new log record, not ours
            return True
        if s.startswith("[Previous line repeated "):
            return False
        if separator_kind(s) or (self.in_remote and s == '"""') or (
            # A header ends the traceback, unless the line is its exception line with a message
            # that quotes another traceback ("RuntimeError: Initialization failed. state: Traceback ...").
            s.endswith(TB_HEADER) and not (b.nframes and s != TB_HEADER and parse_exc_line(s, True))
        ):
            self.finish_truncated()
            return True
        cur = b.cur
        if cur is not None:
            if b.frame_col > (b.base or 0):
                # The usual layout: source and carets are indented deeper than the File line.
                if col > b.frame_col:
                    if cur[3] is None and not is_caret_line(s):
                        cur[3] = s
                    return False
            else:
                # Indentation was lost (a "flat" paste): a source line is anything that is not
                # clearly an exception line.
                exc = parse_exc_line(s, True) or (cur[3] is not None and parse_exc_line(s, False))
                if not exc:
                    if cur[3] is None and not is_caret_line(s):
                        cur[3] = s
                    return False
                self._last_line(b, exc, s, col, hp)
                return False
        exc = parse_exc_line(s, strict=False)
        if exc is not None:
            self._last_line(b, exc, s, col, hp)
            return False
        self.finish_truncated()
        return True

    def _last_line(self, b: Builder, exc: tuple[str, str], s: str, col: int, hp: str) -> None:
        """The exception line that ends a traceback's frames."""
        self.exception_line(b, exc, col, hp)
        if s == exc[0] and not self.depth:
            self.finish()  # the class alone, no colon: an empty message, which nothing continues

    def _ends_message(self, s: str) -> bool:
        if s.startswith("File "):
            return FRAME_RE.match(s) is not None
        return (
            s.endswith(TB_HEADER)
            or separator_kind(s) is not None
            or s == '"""'  # the end of a RemoteTraceback's quotes (whose opening line may be cut)
            or (s[0] == ">" and PDB_LOCATION_RE.match(s) is not None)
            or s[0] == "\u256d"
            # the headers CPython prints before a thread's or an unraisable exception's report
            or s.startswith(("Fatal Python error: ", "Exception in thread ", "Exception ignored "))
            or s in STACK_HEADERS
            or SHELL_PROMPT_RE.fullmatch(s) is not None
        )

    @staticmethod
    def _next_list_item(b: Builder, s: str) -> bool:
        """Whether ``s`` is the next item of a list the writer of a bare exception line is
        writing (``2. Why do ...``): the message is one sentence, with no traceback before it."""
        return (
            b.nframes == 0 and len(b.msg_lines) == 1 and b.msg_lines[0].rstrip().endswith((".", "?", "!"))
            and NUMBERED_ITEM_RE.match(s) is not None
        )

    @staticmethod
    def _opens_list(b: Builder) -> bool:
        """Whether the message's last line introduces a list (it ends with a colon) or is one of
        its bullets: a blank line then may come between items, and ends the message only when
        no bullet follows it."""
        last = b.msg_lines[-1].strip() if b.msg_lines else ""
        return last.endswith(":") or (len(b.msg_lines) > 1 and BULLET_RE.match(last) is not None)

    def _on_message(self, t: str, no: int, hp: str) -> bool:
        b = self.b
        s = t.strip()
        if not s:
            if not b.held_blank and (b.double_spaced or self._opens_list(b)):
                b.held_blank = True  # a line break, if text of the message follows
                return False
            self.finish()  # a blank line ends the message
            return False
        if hp != b.has_prefix or self._ends_message(s) or self._next_list_item(b, s) or (
            b.held_blank and not b.double_spaced and BULLET_RE.match(s) is None
        ):
            self.finish()
            return True
        if b.held_blank:
            b.held_blank = False
            (b.add_note if b.in_notes else b.add_message_line)("")
        lead = len(t) - len(t.lstrip(" "))
        line = t[min(lead, b.msg_col):]  # keep the continuation's own indentation
        if b.in_notes:
            b.add_note(line)
        else:
            b.add_message_line(line)
            if self.depth and GROUP_SUFFIX_RE.search(s):
                b.in_notes = True
        return False

    # -- after an exception, and the small formats ------------------------------------------------

    def _on_after(self, t: str, no: int, hp: str) -> bool:
        s = t.strip()
        if not s:
            return False
        kind = separator_kind(s)
        if kind:
            self.chain.pending = kind
            self.state = IDLE
            return False
        if self.in_remote and s == '"""':
            self.in_remote = False  # end of the remote traceback; the chain goes on outside
            return False
        self.state = IDLE
        self.chain.pending = None
        return True

    def _on_remote_open(self, t: str, no: int, hp: str) -> bool:
        if t.strip() == '"""':
            self.remote_stash = None
            self.in_remote = True
            self.state = IDLE
            return False
        self._remote_fallback()  # not the multiprocessing layout after all
        return True

    def _on_warn_source(self, t: str, no: int, hp: str) -> bool:
        b = self.b
        if t[:1] in (" ", "\t") and t.strip() and hp == b.has_prefix:
            b.cur[3] = t.strip()
            self.finish()
            self.state = IDLE
            return False
        self.finish()
        self.state = IDLE
        return True

    def _on_stack(self, t: str, no: int, hp: str) -> bool:
        if t[:1] in (" ", "\t"):
            return False  # a frame or its source line
        self.state = IDLE
        return bool(t.strip())

    def _on_ignore(self, t: str, no: int, hp: str) -> bool:
        return False

    def _on_reader(self, t: str, no: int, hp: str) -> bool:
        return self.reader.feed(self, t, no, hp)


HANDLERS = {
    IDLE: ChainParser._on_idle,
    FRAMES: ChainParser._on_frames,
    MESSAGE: ChainParser._on_message,
    AFTER: ChainParser._on_after,
    REMOTE_OPEN: ChainParser._on_remote_open,
    WARN_SOURCE: ChainParser._on_warn_source,
    STACK: ChainParser._on_stack,
    IGNORE: ChainParser._on_ignore,
    READER: ChainParser._on_reader,
}
