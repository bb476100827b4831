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
from itertools import repeat
from operator import neg
from typing import Any

_MESSAGE_WORD = re.compile(r"[a-z0-9_]+")
# A word of a literal run with a non-word character right before and right after it, inside the run.
_BOUNDED_WORD = re.compile(r"(?<=[^A-Za-z0-9_])[A-Za-z0-9_]+(?=[^A-Za-z0-9_])")
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
_SIMPLE_PATTERN = re.compile("(?:" + "|".join(_SIMPLE_HOLES) + r"|\\[^A-Za-z0-9]|[^\\\[\](){}.*+?^$|])*")

# A run is the literal tokens up to the next hole (or the end), taken lazily so that at every
# token a hole is tried first: "-?\d+" is one hole, not a literal "-" then a hole.
_SIMPLE_RUN = re.compile(r"((?:\\[^A-Za-z0-9]|[^\\\[\](){}.*+?^$|])*?)(" + "|".join(_SIMPLE_HOLES) + r"|\Z)")
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


@functools.lru_cache(maxsize=256)  # asked twice per record at ingest (validation, then its words)
def is_simple(pattern: str) -> bool:
    """Whether ``pattern`` is only literal text and common holes (valid in re and RE2 by construction)."""
    return _SIMPLE_PATTERN.fullmatch(pattern) is not None


def simple_literal_runs(pattern: str) -> list[str] | None:
    """The literal runs of a pattern made only of literal text and common holes, else ``None``."""
    tokens = simple_tokens(pattern)
    return None if tokens is None else [token for token in tokens if token is not None]


@functools.lru_cache(maxsize=4096)
def simple_tokens(pattern: str) -> tuple[str | None, ...] | None:
    """A simple pattern (:func:`is_simple`) as its literal runs and holes (``None``), which
    alternate; ``None`` for any other pattern."""
    if not is_simple(pattern):
        return None
    tokens: list[str | None] = []
    # Each a run, then the hole after it ("" at the end); findall's C-speed string work instead of
    # a match object each (this runs for every record).
    for run, hole in _SIMPLE_RUN.findall(pattern):
        if run:
            tokens.append(_unescape(run))
        if hole and (not tokens or tokens[-1] is not None):
            tokens.append(None)  # holes side by side are one hole
    return tuple(tokens)


def cut_match(pattern: str, message: str) -> str | None:
    """When ``message`` could be the start of a message ``pattern`` matches in full (it was cut
    short), the literal text of the pattern that it holds; else ``None``.

    Only simple patterns are read (literal text and holes, :func:`simple_tokens`), and the
    simple head of one that ends in an optional group (``head(?:\\n...)?``, as the harvest writes
    messages of several lines). The message may end inside a run, or inside a hole when what it
    holds there is one value (no white space: ``in allenai/Olmo-Hyb``); words in a hole where a
    run should follow are a reworded message, not a cut one. Each run after a hole is placed at
    its first occurrence, which places as many runs as any placement can.
    """
    tokens = simple_tokens(pattern)
    if tokens is None and (head := _head_before_optional_group(pattern)):
        tokens = simple_tokens(head)  # a message cut before the optional part is cut in the head
    if not tokens:
        return None
    held: list[str] = []
    pos = 0
    if tokens[0] is not None:
        rest, run = message, tokens[0]
        if rest.startswith(run):
            if len(tokens) == 1 and len(rest) > len(run):
                return None  # text after the pattern's only run
            held.append(run)
            pos = len(run)
        elif run.startswith(rest):
            return rest or None  # cut inside the first run
        else:
            return None
    for index in range(1 if tokens[0] is not None else 0, len(tokens) - 1, 2):
        run = tokens[index + 1]  # tokens alternate: a hole at index, then a run
        found = message.find(run, pos)
        if found < 0:
            # The message ends inside this hole, or inside the run: credit the run's start it ends with.
            tail = next((run[:k] for k in range(min(len(run), len(message) - pos), 0, -1) if message.endswith(run[:k])), "")
            if not tail and _holds_words(message[pos:]):
                return None
            held.append(tail)
            break
        if index + 2 == len(tokens) and found + len(run) < len(message):
            if _holds_words(message[pos:]):
                return None
            break  # the last run is not at the end: the message ends inside the hole before it
        held.append(run)
        pos = found + len(run)
    return "".join(held) or None


def _holds_words(text: str) -> bool:
    """Whether the text a cut message ends with, inside a hole, is more than one value: ASCII
    white space inside it (the explain box reads the same characters)."""
    return any(c in _ASCII_SPACE for c in text.strip(_ASCII_SPACE))


_ASCII_SPACE = " \t\n\r\f\v"


def _head_before_optional_group(pattern: str) -> str | None:
    """``head`` of a pattern ``head(?:...)?`` (the group at the top level, no ``|`` outside it)."""
    if not pattern.endswith(")?"):
        return None
    depth, start, index = 0, -1, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":  # a character set, up to its closing bracket (one right after [ or [^ is literal)
            index += 2 if pattern[index + 1 : index + 2] == "^" else 1
            index += 1 if pattern[index : index + 1] == "]" else 0
            while index < len(pattern) and pattern[index] != "]":
                index += 2 if pattern[index] == "\\" else 1
        elif char == "(":
            start = index if depth == 0 else start
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0 and index == len(pattern) - 2 and pattern.startswith("(?:", start):
                return pattern[:start]
        elif char == "|" and depth == 0:
            return None
        index += 1
    return None


def _unescape(run: str) -> str:
    # In a literal run every backslash starts a two-character escape; without an escaped
    # backslash in it, dropping the backslashes is the same as unescaping (and 10x cheaper).
    return run.replace("\\", "") if "\\\\" not in run else _ESCAPED.sub(r"\1", run)


def compile_pattern(pattern: str) -> Any:
    """Compile ``pattern`` with RE2 after checking it is valid Python ``re`` syntax too.

    Raises :class:`PatternError` with a message that says what is wrong.
    """
    _check_python_syntax(pattern)
    re2, options = _re2()
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise _refused_by_re2(exc.args[0] if exc.args else exc) from None


def validate_pattern(pattern: str, message: str | None) -> bool:
    """Check ``pattern`` as :func:`compile_pattern` does; whether it matches all of ``message``.

    For validating records: the compiled pattern is not kept. The same RE2 calls as
    ``compile_pattern(pattern).fullmatch(message)``, made on google-re2's extension directly
    when it has the expected shape: its Python wrapper rebuilds the options and converts match
    offsets on every call, which costs as much as compiling (this runs for every ingested record).
    """
    _check_python_syntax(pattern)
    engine = _re2_extension()
    if engine is None:
        compiled = compile_pattern(pattern)
        fullmatch = compiled.fullmatch
    else:
        regexp = engine.RE2(pattern.encode("utf-8"), _re2()[1])
        if not regexp.ok():
            raise _refused_by_re2(regexp.error())

        def fullmatch(text: str) -> bool:
            data = text.encode("utf-8")
            return regexp.Match(engine.RE2.Anchor.ANCHOR_BOTH, data, 0, len(data))[0] != (-1, -1)

    # Matching the empty message is rare, so the probes run for almost no pattern.
    if fullmatch("") and all(fullmatch(probe) for probe in _PROBES):
        raise PatternError("matches every message: it would claim every exception")
    return message is not None and bool(fullmatch(message))


class PatternSet:
    """Many patterns searched at once: the positions of those found somewhere in a text.

    RE2's sets run all their patterns in one pass over the text. They are kept small (a
    :data:`SET_CHUNK` of patterns each), because a set whose lazy DFA runs out of memory drops
    matches without a word; a pattern RE2 refuses is reported as found in every text, so that
    whoever asked still tries it alone (and learns it is refused).
    """

    def __init__(self, patterns: list[str]):
        re2, options = _re2()
        self._sets: list[tuple[Any, list[int]]] = []
        self._always: list[int] = []
        for start in range(0, len(patterns), SET_CHUNK):
            chunk = re2.Set.SearchSet(options)
            positions = []
            for position in range(start, min(start + SET_CHUNK, len(patterns))):
                try:
                    chunk.Add(patterns[position])
                    positions.append(position)
                except re2.error:
                    self._always.append(position)
            if positions:
                chunk.Compile()
                self._sets.append((chunk, positions))

    def search(self, text: str) -> list[int]:
        """The positions, in the list the set was made of, of the patterns found in ``text``."""
        data = text.encode("utf-8", "surrogatepass")
        found = list(self._always)
        for chunk, positions in self._sets:
            found.extend(positions[index] for index in chunk.Match(data) or ())
        return found


#: Patterns per RE2 set of :class:`PatternSet`.
SET_CHUNK = 100


#: Messages unlike each other; a pattern that matches all of them (and "") matches anything.
_PROBES = ("\n", "x", "Traceback (most recent call last):\n  0 é\t€", "the whole\nmessage: [1, 2]")


# An escape as a whole first, so that "\[" is not read as the start of a character set.
_LITERAL_NOISE = re.compile(r"\\.|\[(?:\\.|[^\]])*\]|\(\?[A-Za-z]+\)")
_WORD_CHARACTER = re.compile(r"\w", re.ASCII)
#: A pattern with fewer word characters of literal text than this matches almost any message.
ALMOST_ANYTHING = 3


@functools.lru_cache(maxsize=4096)
def literal_weight(pattern: str) -> int:
    """The word characters of a pattern's literal text: every ``[A-Za-z0-9_]`` but those of
    escapes (``\\d``; an escaped ``\\[`` is a literal, not a set), character sets (``[^/]``) and
    inline flags (``(?s)``)."""
    return word_characters(_LITERAL_NOISE.sub("", pattern))


def word_characters(text: str) -> int:
    """How many ``[A-Za-z0-9_]`` ``text`` holds."""
    return len(_WORD_CHARACTER.findall(text))


@functools.cache
def _re2_extension() -> Any:
    """google-re2's compiled module, or ``None`` when it lacks what :func:`validate_pattern` uses."""
    re2, _ = _re2()
    engine = getattr(re2, "_re2", None)
    needed = ("ok", "error", "Match", "Anchor")
    if engine is None or not all(hasattr(getattr(engine, "RE2", None), name) for name in needed):
        return None
    return engine


def _check_python_syntax(pattern: str) -> None:
    if "\x00" in pattern:
        raise PatternError("must not contain NUL")
    try:
        if not is_simple(pattern):  # simple patterns are valid in both by construction
            re.compile(pattern)
    except re.error as exc:
        raise PatternError(f"does not compile: {exc}") from None
    except RecursionError:
        raise PatternError("does not compile: nested too deeply") from None


def _refused_by_re2(reason: Any) -> PatternError:
    reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    return PatternError(
        f"RE2 cannot run this pattern in linear time ({reason}); "
        "backreferences and lookaround are not allowed in record patterns"
    )


@functools.lru_cache(maxsize=4096)
def cached_pattern(pattern: str) -> Any:
    """:func:`compile_pattern`, memoised: the same pattern is compiled once per process."""
    return compile_pattern(pattern)


def fullmatch(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches the whole of ``text`` (in RE2)."""
    return cached_pattern(pattern).fullmatch(text) is not None


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
        words.update(dict.fromkeys(_BOUNDED_WORD.findall(run.lower())))
    return tuple(words)


def index_key(pattern: str, frequency: dict[str, int] | None = None) -> str:
    """The word explain looks a record up by: one that every matching message contains.

    The rarest of the first :data:`KEY_WORDS` of :func:`pattern_words` by ``frequency`` (how
    many records' patterns contain each word), then the longest, then the first in
    alphabetical order; without frequencies, the longest. Patterns with no such word get
    ``""``: they are tried for every message (:class:`PatternSet`).
    """
    return rarest_word(pattern_words(pattern), frequency)


#: Only a pattern's first words are index words: a pasted message cut short keeps its start.
KEY_WORDS = 8


def rarest_word(words: tuple[str, ...], frequency: dict[str, int] | None = None) -> str:
    """:func:`index_key` of a pattern whose :func:`pattern_words` are ``words``."""
    if not words:
        return ""
    words = words[:KEY_WORDS]
    # (count, -length, word) built by map and zip, not a key function: ingest calls this for
    # every record, and a lambda a word was most of its cost.
    counts = map((frequency or {}).get, words, repeat(0))
    return min(zip(counts, map(neg, map(len, words)), words))[2]


def message_words(message: str, limit: int | None = MAX_MESSAGE_WORDS) -> list[str]:
    """The distinct lower-case words (``[a-z0-9_]+``) of a message, in order, at most ``limit``:
    what explain looks candidates up by (:func:`index_key`)."""
    words = dict.fromkeys(_MESSAGE_WORD.findall(message.lower()))
    return list(words)[:limit]
