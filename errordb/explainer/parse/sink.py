"""Where finished exceptions go: duplicates merged, then handed out in input order.

Duplicates (documented because no rule can be exact): the same exception (class, message,
notes, frames, role, chain position, group path) seen again -- typically from several ranks --
is reported once, with all ranks in the order their copies started. The cache of fingerprints is
bounded (the last 4096 distinct ones).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque

from errordb.explainer.parse.classify import short_name
from errordb.explainer.parse.parsed import Builder, ParsedException

_DEDUP_SIZE = 4096
_MAX_PENDING = 10_000  # exceptions waiting to be yielded in input order
_MAX_RANKS = 4096


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


class Sink:
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

    def open(self, b: Builder) -> None:
        self._seq += 1
        b.token = self._seq
        self._alive[b.token] = b.start
        heapq.heappush(self._open, (b.start, b.token))

    def discard(self, b: Builder) -> None:
        self._alive.pop(b.token, None)

    def forget_open(self) -> None:
        self._alive.clear()
        self._open.clear()

    def emit(self, b: Builder, exc: ParsedException, rank: str) -> None:
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
        key = (short_name(exc_type) if exc_type else None, message.split("\n", 1)[0].strip())
        self._pytest_seen[key] = True
        if len(self._pytest_seen) > _DEDUP_SIZE:
            self._pytest_seen.popitem(last=False)

    def seen_pytest(self, exc_type: str, message: str) -> bool:
        short = short_name(exc_type)
        first = message.split("\n", 1)[0].strip()
        if (short, first) in self._pytest_seen:
            return True
        if first.endswith("..."):  # the summary line was shortened to the terminal width
            stem = first[:-3]
            return any(k[0] == short and k[1].startswith(stem) for k in self._pytest_seen)
        return False
