"""The contract between the chain parser and the readers of other formats.

When a line opens a pytest failure section, a rich traceback box or a faulthandler dump, the
:class:`~errordb.explainer.parse.chain.ChainParser` (a :class:`Host`) hands the following lines
to a :class:`Reader` for that format until the reader leaves. A reader builds its exceptions
through the host, so chain positions, group members and reporting stay in one place. A new
format is a new reader and the line in ``ChainParser._on_idle`` that starts it.
"""

from __future__ import annotations

from typing import Protocol

from errordb.explainer.parse.parsed import Builder, Chain
from errordb.explainer.parse.sink import Sink


class Host(Protocol):
    """What a reader uses of the chain parser it reads for."""

    b: Builder | None  # the exception being read, once opened
    chain: Chain
    sink: Sink

    def open(self, no: int, hp: str) -> Builder:
        """Start an exception at line ``no``; ``hp``: the kinds of log prefix its line had."""

    def exception_line(self, b: Builder, exc: tuple[str, str], col: int, hp: str) -> None:
        """``b``'s ``Class: message`` line; the host reads its continuation lines."""

    def finish(self) -> None:
        """Report the exception being read."""

    def finish_truncated(self) -> None:
        """Report the exception being read if it has anything to report."""

    def read_with(self, reader: Reader) -> None:
        """Hand the next lines to ``reader``."""

    def to_idle(self) -> None:
        """Leave the reader: the next line is read as a fresh one."""


class Reader(Protocol):
    """Reads the lines of one other format for a :class:`Host`."""

    def feed(self, parser: Host, t: str, no: int, hp: str) -> bool:
        """Read one line; True to have it read again by ``parser`` in the state it is now in."""

    def settle(self, parser: Host) -> None:
        """Report what was read so far and leave ``parser`` out of this format."""
