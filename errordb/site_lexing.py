"""Pygments' lexers, driven faster: one regex match per token instead of one per rule tried.

A Pygments ``RegexLexer`` tries each rule of its current state in turn, a Python call per rule,
until one matches; Python's lexer has dozens of rules in its main state, so a 37-line snippet
costs thousands of calls, which made lexing most of the site build's time. Python's ``re`` tries
the branches of an alternation in order and takes the first that matches, which is the same
rule, so here each state's rules are joined into one pattern ``(?:(rule1)|(rule2)|...)`` and
the number of the outer group that matched says which rule won. The tokens are Pygments' own
(the same rules, actions and state changes; ``tests/test_site_lexing.py`` compares them).

A state is left to Pygments' rule-by-rule loop when joining could change what its rules mean:
rules compiled with different flags, back-references (their group numbers would shift), or a
joined pattern that does not compile (a repeated group name, an inline flag mid-pattern).

Joining alone halves the time: ``re`` still walks every branch. So each state also has one
joined pattern per ASCII character, holding only the rules that can match text starting with
that character (:func:`_first_chars` reads it from the rule's parse tree); any doubt keeps a
rule in, so dropping rules never changes which one matches first. Other characters, and the
end of the text, use the pattern of all the rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pygments.lexer import RegexLexer
from pygments.token import Error, Whitespace, _TokenType

# A back-reference by number or by name; "\\1" (an escaped backslash) is refused too, harmlessly.
_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")
# Flags for a whole pattern ("(?i)..."), which are only allowed at the start of the joined one.
_LEADING_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")
_FLAG_LETTERS = {"a": re.A, "i": re.I, "L": re.L, "m": re.M, "s": re.S, "u": re.U, "x": re.X}


def _outer_flags(pattern: re.Pattern[str]) -> int:
    """The flags ``pattern`` was compiled with, less those its own leading ``(?i)`` sets."""
    flags = _LEADING_FLAGS.match(pattern.pattern)
    own = sum(_FLAG_LETTERS[letter] for letter in set(flags.group(1))) if flags else 0
    return pattern.flags & ~own


def _scoped(pattern: str) -> str:
    """``pattern`` with leading global flags made local to it: ``(?i)ab`` -> ``(?i:ab)``."""
    flags = _LEADING_FLAGS.match(pattern)
    return f"(?{flags.group(1)}:{pattern[flags.end():]})" if flags else pattern


class _JoinedState:
    """One state's rules as one pattern.

    ``owner[g]`` is the outer group of the rule holding group ``g``; ``rules[outer]`` its rule.
    """

    __slots__ = ("match", "rules", "owner", "rule_of", "by_char")

    def __init__(self, match: Any, rules: dict[int, tuple[Any, Any, Any]], owner: dict[int, int]):
        self.match = match
        self.rules = rules
        self.owner = owner
        #: group -> (its outer group, that rule): the lexer's loop reads both in one lookup.
        self.rule_of = {group: (outer, *rules[outer]) for group, outer in owner.items()}
        self.by_char: dict[str, _JoinedState] = {}  # on a state's whole pattern: see _ByChar

    def winner(self, m: re.Match[str]) -> int:
        """The outer group of the rule that matched."""
        # ``lastindex`` is a group of the matching branch (a failed branch's groups are reset),
        # though not always its outer one (repeats inside it can leave an inner one last).
        outer = self.owner[m.lastindex]  # type: ignore[index]
        if m.end(outer) == m.end():
            return outer
        return next(g for g in self.rules if m.start(g) != -1)  # pragma: no cover - the check above


def _join(rules: list[tuple[Any, Any, Any]]) -> _JoinedState | None:
    """The state's rules as one pattern, with one pattern per first character; None: cannot."""
    patterns = [rexmatch.__self__ for rexmatch, _, _ in rules]
    flags = {_outer_flags(p) for p in patterns}
    if len(flags) != 1 or any(_BACKREFERENCE.search(p.pattern) for p in patterns):
        return None
    flag = flags.pop()
    whole = _compile(rules, flag)
    if whole is not None:
        whole.by_char = _ByChar(rules, flag, whole)
    return whole


class _ByChar(dict):
    """A state's pattern for each first character, compiled when that character is first met.

    Lazily, because compiling all of them for every state costs seconds, and a build of a few
    pages meets few states and characters.
    """

    def __init__(self, rules: list[tuple[Any, Any, Any]], flags: int, whole: _JoinedState):
        super().__init__()
        self.rules, self.flags, self.whole = rules, flags, whole
        self.firsts: list[frozenset[str] | None] | None = None
        self.shared: dict[tuple[int, ...], _JoinedState] = {}

    def __missing__(self, char: str) -> _JoinedState:
        if len(char) != 1 or char not in _ASCII:
            state = self.whole  # the end of the text, or a character the first sets do not cover
        else:
            if self.firsts is None:
                self.firsts = [_first_chars(rexmatch.__self__.pattern, rexmatch.__self__.flags) for rexmatch, _, _ in self.rules]
            chosen = tuple(n for n, first in enumerate(self.firsts) if first is None or char in first)
            if chosen not in self.shared:
                self.shared[chosen] = _compile([self.rules[n] for n in chosen], self.flags) or self.whole
            state = self.shared[chosen]
        self[char] = state
        return state


def _compile(rules: list[tuple[Any, Any, Any]], flags: int) -> _JoinedState | None:
    if not rules:
        return _JoinedState(_never, {}, {})
    patterns = [rexmatch.__self__.pattern for rexmatch, _, _ in rules]
    try:
        joined = re.compile("|".join(f"(?P<_rule{n}>{_scoped(p)})" for n, p in enumerate(patterns)), flags)
    except (re.error, TypeError):
        return None
    outers = [joined.groupindex[f"_rule{n}"] for n in range(len(rules))]
    owner = {group: outer for outer, following in zip(outers, [*outers[1:], joined.groups + 1]) for group in range(outer, following)}
    return _JoinedState(joined.match, dict(zip(outers, rules)), owner)


def _never(text: str, position: int) -> None:
    return None


# First characters ------------------------------------------------------------------------------

_ASCII = frozenset(map(chr, range(128)))


def _first_chars(pattern: str, flags: int) -> frozenset[str] | None:
    """The ASCII characters a match of ``pattern`` can start with; None when unsure or it can be empty.

    A superset is always safe (a rule is then merely tried when it cannot match), so anything
    this does not understand answers None.
    """
    try:
        from re import _parser  # the stdlib's own regex parser (private, hence the guard)

        tree = _parser.parse(pattern, flags)
        first, nullable = _sequence(list(tree), bool(tree.state.flags & re.IGNORECASE))
    except Exception:  # noqa: BLE001 - any surprise means "unsure", never a wrong answer
        return None
    return None if nullable or first is None else frozenset(first)


def _sequence(items: list[Any], ignore_case: bool) -> tuple[set[str] | None, bool]:
    """(first characters, can match empty) of a sequence of parse-tree items."""
    first: set[str] = set()
    for op, value in items:
        name = str(op)
        if name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue  # zero width: they only narrow what follows, so ignoring them is a superset
        if name == "LITERAL":
            chars = _case(chr(value), ignore_case)
            return (None, False) if chars is None else (first | chars, False)
        if name == "IN":
            chars = _in(value, ignore_case)
            return (None, False) if chars is None else (first | chars, False)
        if name in ("SUBPATTERN", "ATOMIC_GROUP"):
            if name == "SUBPATTERN":
                _, add, remove, body = value
                inner = (ignore_case or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE
            else:
                body, inner = value, ignore_case
            chars, nullable = _sequence(list(body), inner)
        elif name == "BRANCH":
            chars, nullable = set(), False
            for branch in value[1]:
                part, empty = _sequence(list(branch), ignore_case)
                if part is None:
                    return None, False
                chars |= part
                nullable = nullable or empty
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _, body = value
            chars, nullable = _sequence(list(body), ignore_case)
            nullable = nullable or low == 0
        else:
            return None, False  # ANY, NOT_LITERAL, group references...: unsure
        if chars is None:
            return None, False
        first |= chars
        if not nullable:
            return first, False
    return first, True


def _case(char: str, ignore_case: bool) -> set[str] | None:
    if not ignore_case:
        return {char} & _ASCII
    if char not in _ASCII:
        return None  # a non-ASCII letter may fold to an ASCII one (the Kelvin sign and k)
    return {char.lower(), char.upper()}


def _in(items: list[Any], ignore_case: bool) -> set[str] | None:
    """The ASCII characters a ``[...]`` set matches."""
    negate = False
    chars: set[str] = set()
    for op, value in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            found = _case(chr(value), ignore_case)
            if found is None:
                return None
            chars |= found
        elif name == "RANGE":
            low, high = value
            if ignore_case and high >= 128:
                return None
            for code in range(low, min(high, 127) + 1):
                chars |= _case(chr(code), ignore_case) or set()
        elif name == "CATEGORY":
            test = _CATEGORIES.get(str(value))
            if test is None:
                return None
            chars |= {c for c in _ASCII if test.fullmatch(c)}
        else:
            return None
    return set(_ASCII - chars) if negate else chars


_CATEGORIES = {
    f"CATEGORY_{name}": re.compile(escape)
    for name, escape in (("DIGIT", r"\d"), ("NOT_DIGIT", r"\D"), ("SPACE", r"\s"), ("NOT_SPACE", r"\S"), ("WORD", r"\w"), ("NOT_WORD", r"\W"))
}


class JoinedRegexLexer(RegexLexer):
    """Mix in before a ``RegexLexer`` subclass: the same tokens, from joined state patterns."""

    def get_tokens_unprocessed(self, text: str, stack: tuple[str, ...] = ("root",)) -> Iterator[tuple[int, Any, str]]:  # type: ignore[override]
        # This mirrors RegexLexer.get_tokens_unprocessed; only the choice of the rule differs.
        joined = self._joined_states()
        tokendefs = self._tokens
        position = 0
        statestack = list(stack)
        current = joined[statestack[-1]]
        statetokens = tokendefs[statestack[-1]]
        while True:
            matched = False
            if current is not None:
                state = current.by_char[text[position : position + 1]]
                m = state.match(text, position)
                if m is not None:
                    matched = True
                    # winner(), inlined: this runs once per token of every page.
                    outer, rexmatch, action, new_state = state.rule_of[m.lastindex]
                    if m.end(outer) != m.end():  # pragma: no cover - see winner()
                        rexmatch, action, new_state = state.rules[state.winner(m)]
                    if type(action) is _TokenType:
                        yield position, action, m.group()
                    else:
                        m = rexmatch(text, position)  # the rule's own match: actions read its groups
                        if action is not None:
                            yield from action(self, m)
                    position = m.end()
            else:
                for rexmatch, action, new_state in statetokens:
                    m = rexmatch(text, position)
                    if m:
                        matched = True
                        if action is not None:
                            if type(action) is _TokenType:
                                yield position, action, m.group()
                            else:
                                yield from action(self, m)
                        position = m.end()
                        break
            if matched:
                if new_state is not None:
                    _change_state(statestack, new_state)
                    current = joined[statestack[-1]]
                    statetokens = tokendefs[statestack[-1]]
                continue
            # No rule matched: Pygments' fallback (a newline resets to "root", else one Error char).
            if position >= len(text):
                break
            if text[position] == "\n":
                statestack = ["root"]
                current = joined["root"]
                statetokens = tokendefs["root"]
                yield position, Whitespace, "\n"
            else:
                yield position, Error, text[position]
            position += 1

    @classmethod
    def _joined_states(cls) -> dict[str, _JoinedState | None]:
        joined = cls.__dict__.get("_joined")
        if joined is None:
            joined = cls._joined = _States(cls._tokens)
        return joined


class _States(dict):
    """State name -> its joined patterns (None: Pygments' loop), joined when first entered."""

    def __init__(self, tokendefs: dict[str, list[tuple[Any, Any, Any]]]):
        super().__init__()
        self.tokendefs = tokendefs

    def __missing__(self, name: str) -> _JoinedState | None:
        state = self[name] = _join(self.tokendefs[name])
        return state


def _change_state(statestack: list[str], new_state: Any) -> None:
    """Apply a rule's state change to the stack, as Pygments does."""
    if isinstance(new_state, tuple):
        for state in new_state:
            if state == "#pop":
                if len(statestack) > 1:
                    statestack.pop()
            elif state == "#push":
                statestack.append(statestack[-1])
            else:
                statestack.append(state)
    elif isinstance(new_state, int):
        # Pop, but keep at least one state on the stack.
        if abs(new_state) >= len(statestack):
            del statestack[1:]
        else:
            del statestack[new_state:]
    elif new_state == "#push":
        statestack.append(statestack[-1])
    else:  # pragma: no cover - Pygments' own check of a lexer's definition
        raise AssertionError(f"wrong state def: {new_state!r}")
