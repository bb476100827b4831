"""What the parser reports (:class:`Frame`, :class:`ParsedException`), and how one is put
together while its lines are read (:class:`Builder`, with its place in a chain from :class:`Chain`).

Every part of an exception is capped, so one absurd traceback costs bounded memory: the
outermost :data:`MAX_HEAD_FRAMES` and innermost :data:`MAX_TAIL_FRAMES` frames are kept (the
inner ones are those the matcher cares about most), and messages and notes are cut.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

MAX_HEAD_FRAMES = 50  # outermost frames kept ...
MAX_TAIL_FRAMES = 200  # ... and innermost frames kept
#: The OpenAI client's API errors (and those of every OpenAI-compatible server): "Error code: 400 - "
#: and the response's body, a dict or list; what follows the body on its line is the writer's.
_HTTP_BODY_MESSAGE = re.compile(r"Error code: \d{3} - (?=[{\[])")
_MAX_MESSAGE_LINES = 200
_MAX_MESSAGE_CHARS = 64 * 1024
_MAX_NOTES = 100


@dataclass(frozen=True)
class Frame:
    """One traceback entry, as printed."""

    file: str  # path as printed ("/usr/lib/python3.12/json/decoder.py", "<string>")
    line: int | None
    function: str | None  # "<module>" etc.; None where the format has none (SyntaxError)
    source: str | None  # the source line printed under the frame, stripped; None if none


@dataclass
class ParsedException:
    """One exception found in the input (the heuristics: :mod:`errordb.explainer.parse`)."""

    exc_type: str | None
    message: str
    notes: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    role: str = "root"  # "root" | "cause" | "context" | "group-member"
    chain_index: int = 0
    group_path: tuple[int, ...] = ()
    ranks: list[str] = field(default_factory=list)
    line_no: int = 1

    @property
    def short_type(self) -> str | None:
        """The last dotted component of ``exc_type``: ``torch.OutOfMemoryError`` -> ``OutOfMemoryError``."""
        if self.exc_type is None:
            return None
        base, paren, rest = self.exc_type.partition("(")
        return base.rsplit(".", 1)[-1] + paren + rest


class Chain:
    """Position bookkeeping of one printed chain (one per context depth)."""

    __slots__ = ("next_index", "pending")

    def __init__(self) -> None:
        self.next_index = 0
        self.pending: str | None = None  # "cause"/"context" after a separator line

    def take(self) -> tuple[str, int]:
        """Role and chain index of the exception that starts now."""
        if self.pending is None:
            role, index = "root", 0  # no separator before it: a new chain
        else:
            role, index = self.pending, self.next_index
        self.pending = None
        self.next_index = index + 1
        return role, index


class Builder:
    """An exception being read; frames are lists so a source line can be filled in later."""

    __slots__ = (
        "start", "token", "role", "chain_index", "group_path", "has_prefix", "frames_hp",
        "exc_type", "msg_lines", "msg_chars", "notes", "in_notes", "msg_col",
        "head", "tail", "nframes", "cur", "base", "frame_col", "frame_lines", "frame_blanks", "held_blank",
    )

    def __init__(self, start: int, role: str, chain_index: int, group_path: tuple, has_prefix: str):
        self.start = start
        self.token = 0
        self.role = role
        self.chain_index = chain_index
        self.group_path = group_path
        self.has_prefix = has_prefix  # prefix kinds of the exception line (the message ends where they change)
        self.frames_hp = has_prefix  # prefix kinds of the first frame (the frames end where they change)
        self.exc_type: str | None = None
        self.msg_lines: list[str] = []
        self.msg_chars = 0
        self.notes: list[str] = []
        self.in_notes = False
        self.msg_col = 0
        self.head: list[list] = []
        self.tail: deque | None = None
        self.nframes = 0
        self.cur: list | None = None
        self.base: int | None = None  # column of the traceback header
        self.frame_col = 0  # column of the last File line
        self.frame_lines = 0  # non-blank lines read among the frames, the exception line too
        self.frame_blanks = 0  # blank lines among them
        self.held_blank = False  # a blank line in a double-spaced message, kept until text follows

    @property
    def double_spaced(self) -> bool:
        """Whether a blank line followed every line of the frames: a copy (from some terminals and
        log viewers) that doubled each line break, where one blank line is a line break."""
        return self.frame_lines >= 3 and self.frame_blanks >= self.frame_lines - 1

    def add_frame(self, file: str, line: int | None, function: str | None, source: str | None = None) -> None:
        entry = [file, line, (function or "").strip() or None, source]
        if len(self.head) < MAX_HEAD_FRAMES:
            self.head.append(entry)
        else:
            if self.tail is None:
                self.tail = deque(maxlen=MAX_TAIL_FRAMES)
            self.tail.append(entry)
        self.cur = entry
        self.nframes += 1

    def add_message_line(self, line: str) -> None:
        if len(self.msg_lines) < _MAX_MESSAGE_LINES and self.msg_chars < _MAX_MESSAGE_CHARS:
            self.msg_lines.append(line)
            self.msg_chars += len(line) + 1

    def add_note(self, line: str) -> None:
        if len(self.notes) < _MAX_NOTES:
            self.notes.append(line)

    def build(self) -> ParsedException:
        entries = self.head if self.tail is None else self.head + list(self.tail)
        return ParsedException(
            exc_type=self.exc_type,
            message=_to_body_end("\n".join(self.msg_lines).rstrip()),
            notes=list(self.notes),
            frames=[Frame(e[0], e[1], e[2], e[3]) for e in entries],
            role=self.role,
            chain_index=self.chain_index,
            group_path=self.group_path,
            ranks=[],
            line_no=self.start,
        )


def _to_body_end(message: str) -> str:
    """An HTTP error's message (:data:`_HTTP_BODY_MESSAGE`) cut where its body closes; any other
    message, or a body that does not close (a cut paste), as it is."""
    start = _HTTP_BODY_MESSAGE.match(message)
    if start is None:
        return message
    depth, quote, i = 0, "", start.end()
    while i < len(message):
        c = message[i]
        if quote:
            if c == "\\":
                i += 1  # the escaped character
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return message[: i + 1]
        i += 1
    return message
