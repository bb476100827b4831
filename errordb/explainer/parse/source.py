"""One log source: exception-group framing peeled off over a stack of chain parsers.

Exception groups (3.11+): the ``|`` margins, ``+-+---- N ----`` separators, nesting,
``+---- ... ----``/"and N more exceptions" and "... (max_group_depth is N)" (both skipped).
The group itself is a normal chain element; every sub-exception gets a ``group_path``. Inside
one sub-exception, the sub-exception itself (the last exception printed in its own chain) has
role ``group-member``; exceptions printed before it in that sub-chain keep the roles
``root``/``cause``/``context`` and the same ``group_path``.
"""

from __future__ import annotations

import re

from errordb.explainer.parse.chain import AFTER, IDLE, IGNORE, ChainParser
from errordb.explainer.parse.classify import (
    GROUP_SUFFIX_RE,
    GROUP_TB_HEADER,
    parse_exc_line,
)
from errordb.explainer.parse.parsed import Chain
from errordb.explainer.parse.sink import Sink

_MAX_GROUP_DEPTH = 64
_MEMBER_SEP_RE = re.compile(r"\+(-\+)?-{3,} (\d{1,12}|\.\.\.) -{3,}$")
_CLOSE_RE = re.compile(r"\+-{3,}$")


class LogSource:
    """All lines of one log source (one rank, one container, or the unprefixed lines).

    Exception-group framing is peeled off here: a line's margin (``|`` or ``+`` at column
    ``c0 + 2 * (depth - 1)``, where ``c0`` is the column of the top-level group's margin) says
    which depth it belongs to, and ``ctx[depth]`` reads its content.
    """

    def __init__(self, sink: Sink, rank: str):
        self.sink = sink
        self.rank = rank
        self.root_chain = Chain()
        self.ctx = [ChainParser(sink, rank, 0, (), self.root_chain, member=False)]
        self.c0: int | None = None  # column of the depth-1 margin while inside a group
        self.last_line = 0
        self.prev_unprefixed = False
        self.prev_header = False

    @property
    def busy(self) -> bool:
        return self.c0 is not None or self.ctx[0].state != IDLE

    def settled(self, is_last: bool) -> bool:
        """Whether nothing is open here, so that a noise line would leave this source as it is.

        Nothing open: no group framing, no exception being read, no chain separator or
        RemoteTraceback quote waiting for what follows. Such a source reads every later line
        as a fresh one would (``root_chain.next_index`` only matters after a separator).
        "after" (an exception just ended) reads lines exactly as "idle" does once no separator
        is pending; it differs only in being ``busy``, which routes the next unprefixed line
        here -- and that can only happen while this is the source of the last line
        (``is_last``) and that line allowed continuation. What makes the driver's ``skip`` safe.
        """
        p = self.ctx[0]
        if self.c0 is not None or len(self.ctx) != 1 or p.b is not None or p.held is not None:
            return False
        if p.chain.pending is not None or p.in_remote:
            return False
        if p.state == IDLE:
            return True
        return p.state == AFTER and not (is_last and (self.prev_unprefixed or self.prev_header))

    def feed(self, t: str, no: int, hp: str) -> None:
        if self.c0 is None and t:
            s = t.lstrip()
            if s[:1] in ("+", "|") and (
                s.startswith("+ " + GROUP_TB_HEADER)
                or (s.startswith("| ") and GROUP_SUFFIX_RE.search(s) and parse_exc_line(s[2:].strip(), False))
            ):
                self.c0 = len(t) - len(s)
        if self.c0 is not None and self._feed_group(t, no, hp):
            return
        self.ctx[0].feed(t, no, hp)

    def read_sentry(self, exc: tuple[str, str], no: int, hp: str) -> bool:
        """Hand a Sentry stack trace whose title was line ``no`` to this source's parser
        (:meth:`ChainParser.read_sentry`); not inside an exception group's framing."""
        return self.c0 is None and self.ctx[0].read_sentry(exc, no, hp)

    def close_all(self) -> None:
        self._pop_to(0)
        self.c0 = None
        self.ctx[0].close()

    def _end_group(self) -> None:
        self._pop_to(0)
        self.c0 = None

    def _feed_group(self, t: str, no: int, hp: str) -> bool:
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

    def _text_at(self, depth: int, content: str, no: int, hp: str) -> None:
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
                self.ctx.append(ChainParser(self.sink, self.rank, 1, (), self.root_chain, member=False))
            else:  # a member whose separator we did not see (the input starts mid-group)
                self.ctx.append(ChainParser(self.sink, self.rank, d, parent.path + (0,), Chain(), member=True))

    def _pop_to(self, depth: int) -> None:
        while len(self.ctx) - 1 > depth:
            self.ctx.pop().close()
            if len(self.ctx) == 1:
                self.ctx[0].state = AFTER  # the top-level group ended: a separator may follow

    def _member(self, depth: int, index: str, no: int) -> None:
        self._pop_to(depth - 1)
        if len(self.ctx) < depth:
            self._push_to(depth - 1)
        parent = self.ctx[depth - 1]
        parent.settle()  # the group's own message and notes are complete
        if index == "...":  # "and N more exceptions": not printed, nothing to report
            child = ChainParser(self.sink, self.rank, depth, parent.path, Chain(), member=False)
            child.state = IGNORE
        else:
            child = ChainParser(self.sink, self.rank, depth, parent.path + (int(index),), Chain(), member=True)
        self.ctx.append(child)
