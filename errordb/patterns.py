"""Record regexes, run only in a linear-time engine.

``messagePattern`` is untrusted text. It is written in the common subset of Python's ``re``
syntax and RE2's: it must compile in both, so that the pattern means the same wherever it is
read, and it is only ever *run* by RE2 (google-re2), whose matching time is linear in the input.
Constructs RE2 cannot run in linear time (backreferences, lookaround) are refused when a
record is validated, so a catastrophic pattern such as ``(a+)+$`` cannot hang anything.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_MESSAGE_WORD = re.compile(r"[a-z0-9_]+")
#: The most words of one message that take part in the candidate lookup.
MAX_MESSAGE_WORDS = 4096


class PatternError(ValueError):
    """A messagePattern that errordb will not run."""


#: RE2's own memory budget for one compiled pattern; a pattern that needs more is refused.
RE2_MAX_MEM = 8 << 20


@functools.cache
def _re2() -> tuple[Any, Any]:
    import re2  # ~10 ms to import: only when a pattern is compiled

    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise print parse errors on stderr
    options.max_mem = RE2_MAX_MEM
    return re2, options


# Most record patterns are escaped literal text with a few common holes. Those are read by one
# C-speed regex instead of Python's pure-Python regex parser (~0.3 ms a pattern, the largest
# cost of an ingest); anything else takes the full parser.
_SIMPLE_HOLES = (r"\(\.\+\)", r"\(\.\+\?\)", r"\(\.\*\)", r"\(\.\*\?\)", r"\.\+", r"\.\*", r"\(\\d\+\)", r"-\?\\d\+",
                 r"\\d\+", r"\(\\S\+\)", r"\\S\+", r"\(\\w\+\)", r"\\w\+")  # fmt: skip
# Holes are tried before literals, so "-?\d+" is one hole, not a literal "-" then a hole.
_SIMPLE_TOKEN = re.compile("(" + "|".join(_SIMPLE_HOLES) + r")|(\\[^A-Za-z0-9]|[^\\\[\](){}.*+?^$|])")
_SIMPLE_PATTERN = re.compile("(?:" + "|".join(_SIMPLE_HOLES) + r"|\\[^A-Za-z0-9]|[^\\\[\](){}.*+?^$|])*")


def simple_literal_runs(pattern: str) -> list[str] | None:
    """The literal runs of a pattern made only of literal text and common holes, else ``None``."""
    if _SIMPLE_PATTERN.fullmatch(pattern) is None:
        return None
    runs, current = [], []
    for hole, literal in _SIMPLE_TOKEN.findall(pattern):
        if literal:
            current.append(literal[-1])
        elif current:
            runs.append("".join(current))
            current = []
    if current:
        runs.append("".join(current))
    return runs


def compile_pattern(pattern: str) -> Any:
    """Compile ``pattern`` with RE2 after checking it is valid Python ``re`` syntax too.

    Raises :class:`PatternError` with a message that says what is wrong.
    """
    if "\x00" in pattern:
        raise PatternError("must not contain NUL")
    try:
        if simple_literal_runs(pattern) is None:  # simple patterns are valid in both by construction
            re.compile(pattern)
    except re.error as exc:
        raise PatternError(f"does not compile: {exc}") from None
    except RecursionError:
        raise PatternError("does not compile: nested too deeply") from None
    re2, options = _re2()
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(
            f"RE2 cannot run this pattern in linear time ({reason}); "
            "backreferences and lookaround are not allowed in record patterns"
        ) from None


@functools.lru_cache(maxsize=4096)
def cached_pattern(pattern: str) -> Any:
    """:func:`compile_pattern`, memoised: the same pattern is compiled once per process."""
    return compile_pattern(pattern)


def fullmatch(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches the whole of ``text`` (in RE2)."""
    return cached_pattern(pattern).fullmatch(text) is not None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (in RE2)."""
    return cached_pattern(pattern).search(text) is not None


def literal_runs(pattern: str) -> list[str]:
    """The runs of literal text that every match of ``pattern`` must contain, in order.

    Read from Python's own parse tree of the pattern (the same syntax RE2 accepts); anything
    that is not a plain literal (a class, a repeat, an alternation) ends a run, so the runs are
    a necessary condition for a match, never a guess.
    """
    simple = simple_literal_runs(pattern)
    return simple if simple is not None else parsed_literal_runs(pattern)


def parsed_literal_runs(pattern: str) -> list[str]:
    """:func:`literal_runs` read from Python's full parse tree (any pattern)."""
    from re import _parser  # the parser behind re.compile; stable across 3.11-3.13

    try:
        tree = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return []
    runs: list[str] = []
    current = [""]
    _collect(tree, runs, current)
    _flush(runs, current)
    if tree.state.flags & re.IGNORECASE:
        return [run.lower() for run in runs]
    return runs


def _collect(items: Any, runs: list[str], current: list[str]) -> None:
    from re import _constants as sre

    repeats = (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT))
    for op, arg in items.data if hasattr(items, "data") else items:
        if op is sre.LITERAL:
            current[0] += chr(arg)
        elif op is sre.SUBPATTERN and arg[1] == 0 and arg[2] == 0:
            # A group in sequence is required: its literals join the surrounding run.
            _collect(arg[3], runs, current)
        elif op in repeats and arg[0] >= 1:
            _flush(runs, current)
            _collect(arg[2], runs, current)
            _flush(runs, current)
        elif op is sre.AT:
            continue  # anchors match no text: the run goes on
        else:
            _flush(runs, current)


def _flush(runs: list[str], current: list[str]) -> None:
    if current[0]:
        runs.append(current[0])
    current[0] = ""


@functools.lru_cache(maxsize=8192)
def pattern_words(pattern: str) -> tuple[str, ...]:
    """The whole words that every message matching ``pattern`` contains, lower-cased, in order.

    A word counts only when literal non-word characters bound it on both sides inside one
    run, so it is a whole word of any matching message too (a word at the edge of a run could
    be the end of a longer word in the message).
    """
    words: dict[str, None] = {}
    for run in literal_runs(pattern):
        run = run.lower()
        word = ""
        for position, char in enumerate(run):
            if char in _WORD_CHARS:
                word += char
                continue
            start = position - len(word)
            if word and start > 0 and run[start - 1] not in _WORD_CHARS:
                words[word] = None
            word = ""
    return tuple(words)


def index_key(pattern: str, frequency: dict[str, int] | None = None) -> str:
    """The word explain looks a record up by: one that every matching message contains.

    The rarest of :func:`pattern_words` by ``frequency`` (how many records' patterns contain
    each word), then the longest, then the first in alphabetical order; without frequencies,
    the longest. Patterns with no such word get ``""``: they are tried for every message.
    """
    frequency = frequency or {}
    words = pattern_words(pattern)
    if not words:
        return ""
    return min(words, key=lambda w: (frequency.get(w, 0), -len(w), w))


def message_words(message: str) -> list[str]:
    """The distinct lower-case words of a message, to look candidates up by :func:`index_key`."""
    words = dict.fromkeys(_MESSAGE_WORD.findall(message.lower()))
    return list(words)[:MAX_MESSAGE_WORDS]
