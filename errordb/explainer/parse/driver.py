"""The driver: reads the input, routes each line to its log source, and hands out what is found.

Lines are cleaned and their log prefixes removed (:mod:`~errordb.explainer.parse.lines`); the
source ids in the prefixes say which :class:`~errordb.explainer.parse.source.LogSource` reads
the line, so tracebacks of several ranks interleaved line by line are taken apart. An
unprefixed line continues the traceback of the previous line's source when that traceback
started on a prefixed line (sglang's ``[... TP0] Scheduler hit an exception: Traceback ...``
style). While nothing is open, blocks of ordinary log lines are skipped after one cheap test
(:mod:`~errordb.explainer.parse.fastpath`).

A JSON string that holds an escaped traceback (``"exc_info": "Traceback ...\\n  File ..."``) is
decoded in place and read as the lines it holds.

When no traceback and no exception line is found, the exceptions named otherwise are reported:
in prose (:func:`~errordb.explainer.parse.classify.find_mention`: backticks, quotes, a repr, a
debugger's report) or in an error report's fields (a JSON error body's class and message, a
Django debug page's). Failing those, an input of at most 3 non-empty lines and no traceback is
reported as one exception with ``exc_type`` None and those lines as the message (or with the
class a person retyped in lower case, ``importError: ...``, that starts them). Before that
fallback, an ``Error: message`` line that ends the input, or ends the code block that holds it
with at most 3 more lines (what click and other command-line tools print, pasted with the
command that failed), is reported as an exception with ``exc_type`` None and those lines as
the message; one in the middle of a log is not.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from itertools import islice
from operator import itemgetter

from errordb.explainer.parse.classify import (
    ESCAPED_HEADER, error_fields, escaped_traceback, find_mention, mentions_traceback, might_mention, parse_exc_line,
)
from errordb.explainer.parse.fastpath import BLOCK_CHARS, BLOCK_LINES, all_noise
from errordb.explainer.parse.lines import MAX_LINE_CHARS, Markdown, clean_line, strip_prefixes
from errordb.explainer.parse.parsed import ParsedException
from errordb.explainer.parse.sentry_output import FOLDED_RE
from errordb.explainer.parse.sink import Sink
from errordb.explainer.parse.source import LogSource

_MAX_SOURCES = 1024  # log sources (ranks) tracked at once
_IDLE_FLUSH_LINES = 2000  # a source silent for this many lines is finished
_BARE_MAX_LINES = 3
#: A class as a person retyped it, lower case first (``importError: libfoo.so.0: cannot open ...``):
#: it starts a short paste only.
_TYPED_CLASS = re.compile(r"([a-z]\w*(?:Error|Exception|Warning)):[ \t]+")
_MAX_MENTIONS = 16
_CLI_MORE_LINES = 3
_FIELD_LINES = 12  # an error report's class and message fields are at most this many lines apart

#: Set by the test-suite so that a parser bug fails loudly; in production a line that trips an
#: internal error resets the parser state and parsing goes on (the parser must never raise).
_RAISE_INTERNAL_ERRORS = False


class _Parser:
    """Routes lines to log sources; remembers the first lines for the bare-message fallback."""

    def __init__(self) -> None:
        self.sink = Sink()
        self.sources: OrderedDict[str, LogSource] = OrderedDict()  # least recently used first
        self.last_key: str | None = None
        self.no = 0
        self.nonempty = 0
        self.bare: list[tuple[str, int, str]] = []  # the first few non-empty lines
        self.active: set[str] = set()  # keys of the sources that are not settled
        # True when no source has anything open and the bare-message fallback (the first few
        # non-empty lines) is decided: then a line with no trigger (all_noise) changes nothing.
        self.quiet = False
        self.markdown = Markdown()
        # The line before this one (content, line, source key, prefix kinds; None if blank): the
        # title of a Sentry stack trace when this one says so. A skipped line leaves its raw text
        # and number instead, read only if a Sentry fold line follows.
        self.title: tuple[str, int, str, str] | None = None
        self.skipped: tuple[str, int] | None = None
        # Exceptions named in prose (class, message, line, rank): reported when nothing else is.
        self.mentions: list[tuple[str, str, int, str]] = []
        self.fields: dict[str, tuple[str, int]] = {}  # an error report's "class"/"message" -> (value, line)
        self.field_waits = False  # a message field's value is on the next line
        # An "Error: message" line and the few after it (None: where the fence around them closed).
        self.cli_error: tuple[list[str | None], int, str] | None = None

    def skip(self, lines: list[str] | tuple[str, ...]) -> None:
        """Account for noise ``lines`` read while quiet, without parsing them.

        Fed in full, such a line would only be routed to a settled source (creating it, or
        refreshing its place in the LRU order), move it from "after" to "idle" and become the
        last line. None of that changes a later result (see LogSource.settled): it only lets
        settled sources be dropped sooner (by the idle flush or the _MAX_SOURCES eviction), and
        dropping a settled source reports nothing. What they do to a code span left open is
        done here as their reading would; the last one is kept, unread, as the next line's title.
        """
        self.no += len(lines)
        if self.markdown.span_open or self.markdown.wrapped:
            for raw in lines:
                self.markdown.read_plain(clean_line(raw))
        self.title, self.skipped = None, (lines[-1], self.no)

    def feed(self, raw: str) -> None:
        self.no += 1
        fenced = self.markdown.fence is not None
        line = self.markdown.unwrap(clean_line(raw))
        if fenced and self.markdown.fence is None and self.cli_error is not None:
            self.cli_error[0].append(None)  # the fence that held the output closed: its message ends
        if "\\n" in line and ESCAPED_HEADER in line:
            for inner in escaped_traceback(line):
                self._feed_line(clean_line(inner), self.no)
        else:
            self._feed_line(line, self.no)

    def _feed_line(self, line: str, no: int) -> None:
        content, ids, hp = strip_prefixes(line) if line else ("", [], "")
        rank = " ".join(ids)
        stripped = content.strip()
        if stripped:
            self.nonempty += 1
            if self.nonempty <= _BARE_MAX_LINES:
                self.bare.append((stripped, no, rank))
        if self.cli_error is not None or stripped.startswith("Error: "):
            self._cli_line(stripped, no, rank)
        if self.sink.emitted == 0 and stripped:
            last = self.mentions[-1] if self.mentions else None
            if last is not None and not last[1] and last[2] == no - 1:
                # A debugger's report names the class; its message is the next line.
                self.mentions[-1] = (last[0], stripped, *last[2:])
            elif might_mention(stripped):
                mention = find_mention(stripped, unmarked=not hp)
                if mention is not None and len(self.mentions) < _MAX_MENTIONS:
                    self.mentions.append((*mention, no, rank))
            if self.field_waits:
                self.field_waits = False
                self._error_field("message", stripped, no, rank)
            elif '"' in stripped or stripped.startswith("Exception "):
                for kind, value in error_fields(stripped):
                    self._error_field(kind, value, no, rank)
        key = rank
        if not rank and not hp and self.last_key:
            # An unprefixed line continues the previous line's source if that source is inside
            # a traceback that is itself unprefixed or whose header was on the previous line.
            prev = self.sources.get(self.last_key)
            if prev is not None and prev.busy and (prev.prev_unprefixed or prev.prev_header):
                key = self.last_key
        src = self.sources.get(key)
        if src is None:
            if len(self.sources) >= _MAX_SOURCES:
                old_key, oldest = self.sources.popitem(last=False)
                oldest.close_all()
                self.active.discard(old_key)
            src = self.sources[key] = LogSource(self.sink, key)
        else:
            self.sources.move_to_end(key)
        src.last_line = no
        src.prev_unprefixed = not hp
        src.prev_header = "Traceback (most recent call last)" in content
        if not self._sentry(src, key, stripped):
            src.feed(content, no, hp)
        self.title, self.skipped = (stripped, no, key, hp) if stripped else None, None
        if src.settled(is_last=True):
            self.active.discard(key)
        else:
            self.active.add(key)
        if self.last_key != key and self.last_key in self.active:
            # The previous line's source is no longer the last one: that may settle it.
            prev = self.sources.get(self.last_key)
            if prev is None or prev.settled(is_last=False):
                self.active.discard(self.last_key)
        self.last_key = key
        if not no & 255:
            self._finish_idle_sources()
        self.sink.release()
        self.quiet = not self.active and self.nonempty > _BARE_MAX_LINES and not self._waiting() and self.markdown.neutral()

    def _sentry(self, src: LogSource, key: str, stripped: str) -> bool:
        """Whether ``stripped`` says the line before it was the title of a Sentry stack trace
        (:mod:`~errordb.explainer.parse.sentry_output`), now read as such."""
        if stripped[:1] != "(" or FOLDED_RE.fullmatch(stripped) is None:
            return False
        if self.skipped is not None:
            raw, no = self.skipped
            content, ids, hp = strip_prefixes(Markdown.plain(clean_line(raw)))
            # No source is inside anything while quiet, so the line's source is its prefix's rank.
            self.title = (content.strip(), no, " ".join(ids), hp) if content.strip() else None
        if self.title is None:
            return False
        title, no, title_key, hp = self.title
        exc = parse_exc_line(title, strict=False) if title_key == key else None
        return exc is not None and src.read_sentry(exc, no, hp)

    def _cli_line(self, stripped: str, no: int, rank: str) -> None:
        """A command's "Error: message" counts only at the end of the input, or of the code block
        that holds it, which then may hold a few more lines of the message (click prints it whole:
        sqlite-utils' "...\n\nTry using --alter to add additional columns"); one followed by more
        text is in the middle of a log, not at its end."""
        if stripped.startswith("Error: "):
            self.cli_error = ([stripped[7:]], no, rank)
        elif self.cli_error is not None:
            lines = self.cli_error[0]
            if not stripped:
                if None not in lines:
                    lines.append("")
            elif None in lines or sum(map(bool, lines)) > _CLI_MORE_LINES:
                self.cli_error = None  # more text: the line was not the end of the command's output
            else:
                lines.append(stripped)

    def _cli_message(self) -> str | None:
        if self.cli_error is None:
            return None
        lines = self.cli_error[0]
        if None not in lines and any(lines[1:]):
            return None  # more lines, and no code block that ends with them
        return "\n".join(line for line in lines if line is not None).strip()

    def _waiting(self) -> bool:
        """Whether a half-read mention waits for its message (an error report's class field, a
        debugger's report), or an ``Error:`` line for what follows it: the next lines must be read
        even if they hold no trigger."""
        if self.sink.emitted:
            return False
        if self.fields and self.no - min(no for _, no in self.fields.values()) >= _FIELD_LINES:
            self.fields.clear()
        last = self.mentions[-1] if self.mentions else None
        return (
            self.field_waits or bool(self.fields) or self.cli_error is not None
            or (last is not None and not last[1] and last[2] == self.no)
        )

    def _error_field(self, kind: str, value: str, no: int, rank: str) -> None:
        """An error's class or message in a field of an error report (classify.error_fields),
        taken as a mention once both are seen a few lines apart."""
        if kind == "message" and not value:
            self.field_waits = True  # "Exception Value:" with the message on the next line
            return
        other = "message" if kind == "class" else "class"
        if other in self.fields and no - self.fields[other][1] <= _FIELD_LINES:
            exc_type, message = (value, self.fields[other][0]) if kind == "class" else (self.fields[other][0], value)
            if len(self.mentions) < _MAX_MENTIONS:
                self.mentions.append((exc_type, message, no, rank))
            self.fields.clear()
        else:
            self.fields[kind] = (value, no)

    def _finish_idle_sources(self) -> None:
        limit = self.no - _IDLE_FLUSH_LINES
        while self.sources:
            key, src = next(iter(self.sources.items()))
            if src.last_line > limit:
                break
            src.close_all()
            del self.sources[key]
            self.active.discard(key)

    def finish(self) -> None:
        for src in list(self.sources.values()):
            src.close_all()
        self.sink.release(force=True)
        if self.sink.emitted == 0 and self.mentions:
            for exc_type, message, no, rank in self.mentions:
                self.sink.out.append(ParsedException(exc_type=exc_type, message=message, ranks=[rank] if rank else [], line_no=no))
        elif self.sink.emitted == 0 and (cli_message := self._cli_message()) is not None:
            _, no, rank = self.cli_error
            self.sink.out.append(ParsedException(exc_type=None, message=cli_message, ranks=[rank] if rank else [], line_no=no))
        elif (
            self.sink.emitted == 0
            and 0 < self.nonempty <= _BARE_MAX_LINES
            and not any(mentions_traceback(text) for text, _, _ in self.bare)
        ):
            ranks: list[str] = []
            for _, _, rank in self.bare:
                if rank and rank not in ranks:
                    ranks.append(rank)
            message = "\n".join(text for text, _, _ in self.bare)
            typed = _TYPED_CLASS.match(message)
            self.sink.out.append(
                ParsedException(
                    exc_type=typed.group(1) if typed else None,
                    message=message[typed.end():] if typed else message,
                    ranks=ranks,
                    line_no=self.bare[0][1],
                )
            )

    def recover(self) -> None:
        """After an internal error: forget all state (what was already reported stays)."""
        self.sources.clear()
        self.active.clear()
        self.quiet = False
        self.last_key = None
        self.sink.forget_open()


def _physical_lines(lines: Iterable) -> Iterator[str]:
    """Physical lines (each keeps its newline, if it had one); chunks holding several lines
    are split, bytes decoded."""
    for chunk in lines:
        if not isinstance(chunk, str):
            if isinstance(chunk, (bytes, bytearray)):
                chunk = bytes(chunk).decode("utf-8", "replace")
            else:
                chunk = str(chunk)
        pos = chunk.find("\n")
        if pos < 0 or pos == len(chunk) - 1:
            yield chunk
        else:
            parts = chunk.split("\n")
            if parts[-1] == "":
                parts.pop()
            yield from parts


def _line_blocks(lines: Iterable) -> Iterator[tuple[list[str], str | None]]:
    """The physical lines of ``lines`` (as :func:`_physical_lines` makes them) in lists of at
    most BLOCK_LINES, each with its lines joined when they all end with a newline and are not
    too long to be tested as a block (see all_noise).

    When every chunk read is one line ending with its newline (lines read from a file,
    _split_text), the chunks are the list: a few C-level calls replace a generator step per
    line.
    """
    chunks = iter(lines)
    ended = False
    while not ended:
        block: list = []
        try:
            block.extend(islice(chunks, BLOCK_LINES))
        except Exception:
            # The input itself failed: what it gave before still counts, as it did line by line.
            yield from _split_block(block)
            raise
        # A short block is the end: the input is not read again (a terminal's end, Ctrl-D, is
        # not sticky, and another read would wait for a second one).
        ended = len(block) < BLOCK_LINES
        if not block:
            return
        try:
            all_end_a_line = "".join(map(_last_char, block)) == "\n" * len(block)
            if all_end_a_line and sum(map(len, block)) <= BLOCK_CHARS:
                text = "".join(block)
                if text.count("\n") == len(block):
                    yield block, text
                    continue
        except (TypeError, IndexError):  # bytes or other objects, an empty chunk
            pass
        yield from _split_block(block)


def _split_block(chunks: list) -> Iterator[tuple[list[str], None]]:
    physical = list(_physical_lines(chunks))
    for start in range(0, len(physical), BLOCK_LINES):
        yield physical[start : start + BLOCK_LINES], None


_last_char = itemgetter(-1)


def _split_text(text: str) -> Iterator[str]:
    """The lines of ``text`` (split on "\\n" only, which each keeps), cut to MAX_LINE_CHARS."""
    start, n = 0, len(text)
    while start < n:
        end = text.find("\n", start)
        if end < 0:
            end = n
        yield text[start : min(end + 1, start + MAX_LINE_CHARS)]
        start = end + 1


def iter_exceptions(lines: Iterable[str]) -> Iterator[ParsedException]:
    """Parse lines one by one and yield the exceptions found, in bounded memory.

    ``lines`` may be any iterable of strings (an open file works; newlines are optional, bytes
    are decoded as UTF-8 with replacement). Only the first :data:`MAX_LINE_CHARS` (64 KiB)
    characters of a line are kept, so one absurdly long line costs no more than that; messages,
    notes and frames are capped too (the outermost 50 and innermost 200 frames of a traceback
    are kept), as are the number of log sources tracked at once and the duplicate cache (the
    last 4096 distinct exceptions), so a log of any size is read in constant memory.

    Exceptions come out deduplicated, in order of ``line_no``, as soon as nothing that started
    earlier is still open. ``lines`` is read in blocks of up to 64 lines (so that ordinary log
    lines can be skipped in bulk, which makes a big log about ten times faster to read), so
    reading runs up to 63 lines ahead of what has been yielded. When a duplicate is seen after
    its first copy was yielded, the already-yielded object's ``ranks`` list is extended in
    place, so read ``ranks`` after the iteration ends (or use :func:`parse_text`). Never raises
    on any input text.
    """
    parser = _Parser()
    out = parser.sink.out
    for block, text in _line_blocks(lines):
        # The common case of a big log: nothing is open and the block is noise, skipped whole
        # (see all_noise). Otherwise its lines are read one by one.
        if parser.quiet and all_noise(block, text):
            parser.skip(block)
            continue
        for raw in block:
            if parser.quiet and all_noise((raw,)):
                parser.skip((raw,))
                continue
            try:
                parser.feed(raw)
            except Exception:
                if _RAISE_INTERNAL_ERRORS:
                    raise
                parser.recover()
            while out:
                yield out.popleft()
    try:
        parser.finish()
    except Exception:
        if _RAISE_INTERNAL_ERRORS:
            raise
        parser.sink.release(force=True)
    while out:
        yield out.popleft()


def parse_text(text: str) -> list[ParsedException]:
    """Parse a pasted traceback or log excerpt; returns the exceptions in input order.

    Duplicates (the same traceback printed by several ranks or processes) are merged into one
    entry listing all ranks. Returns [] when nothing was found. Never raises on any input.
    """
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
    found = list(iter_exceptions(_split_text(_unquoted(text))))
    found.sort(key=lambda exc: exc.line_no)  # stable; only reorders in rare interleavings
    return found


def _unquoted(text: str) -> str:
    """``text`` without the pair of double quotes a writer put around a whole paste of several
    lines (``"Epoch 1/417 ...\nTraceback ...\nAttributeError: 'X' object has no attribute 'y'"``):
    its first line opens a quote that no quote there closes, and its last line closes one. The
    lines keep their numbers."""
    inner = text.strip()
    first, _, rest = inner.partition("\n")
    last = rest.rpartition("\n")[2]
    if not (rest and first[:1] == '"' and last[-1:] == '"' and first.count('"') % 2 and last.count('"') % 2):
        return text
    first, last = text.index('"'), text.rindex('"')
    return text[:first] + text[first + 1 : last] + text[last + 1 :]
