"""Reading an exception's message from the source, statically, and turning it into a pattern.

:func:`read_message` takes the ``ast`` node of a message argument and returns the message's
*templates*: sequences of literal text and holes (the places a runtime value goes). It reads
string literals (implicit concatenation is already one literal in the tree), ``+`` of literals
and values, f-strings, ``%`` formatting and ``str.format``, through the gettext wrappers
(``_("...")``, ``ngettext(singular, plural, n)``) and conditional expressions (``a if c else
b``). Anything else (a variable, a call, an attribute) raises :class:`Unreadable` with a short
description of what the argument is: a message errordb cannot read is reported, never guessed.

Two renderings of a template are used by a record:

- :func:`message_text` — the ``errorMessage``: the literal text with ``{…}`` placeholders
  named after the value's expression (``{name}``) or ``{…}`` when the expression is too long
  to read as a name;
- :func:`message_pattern` — the ``messagePattern``: the literal text escaped, each hole a
  ``.*`` (a value whose text may be empty: ``str()`` of a string) or ``.+`` (``repr()``,
  numbers: never empty). Patterns are matched in full by explain, so no anchors are added;
  they contain no construct outside the common subset of Python ``re`` and RE2 (and the
  site's JavaScript), so :func:`errordb.records.patterns.compile_pattern` accepts every one.

Holes are not typed more finely (``-?\\d+`` for ``%d``): ``errordb check`` requires the pattern
to match the record's own ``errorMessage``, whose placeholder is ``{count}``, not a number.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

#: The longest expression text used as a placeholder name; longer ones become ``{…}``.
MAX_NAME = 40
NEUTRAL = "…"
#: At most this many alternative templates per message (ternaries and ngettext multiply).
MAX_ALTERNATIVES = 8
#: Calls that return their (first) string argument translated; without a catalogue, unchanged.
GETTEXT = frozenset({"_", "gettext", "ugettext", "gettext_lazy", "N_", "gettext_noop"})
NGETTEXT = frozenset({"ngettext", "ungettext", "ngettext_lazy"})

# printf-style conversion spec (Python's % operator): %(key)flags width .precision length type
_PERCENT = re.compile(
    r"%(?:\((?P<key>[^()]*)\))?(?P<flags>[-#0 +]*)(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d+))?[hlL]?(?P<type>.?)",
    re.DOTALL,
)
_PERCENT_TYPES = frozenset("diouxXeEfFgGcrsa%")
# Characters with a meaning in a regex; everything else is literal in re, RE2 and JavaScript.
_REGEX_SPECIAL = frozenset("\\.^$*+?()[]{}|")
#: A word of literal text that makes a pattern specific (the harvest requires one too).
_WORD = re.compile(r"[A-Za-z]{3,}")
#: The tail of the pattern of a message that spans lines: any further lines.
MORE_LINES = r"(?:\n[\s\S]*)?"
_CONTROL_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f", "\v": "\\v"}


class Unreadable(Exception):
    """The message cannot be read from the source; ``args[0]`` says what it is instead."""


@dataclass(frozen=True)
class Hole:
    """Where a runtime value goes: its placeholder name and whether its text can be empty."""

    name: str
    may_be_empty: bool = True


#: A template: literal strings and holes, in order.
Template = tuple[str | Hole, ...]


#: Looks a name up: the expression a variable certainly holds at the raise, or ``None``.
Resolver = Callable[[str], "ast.expr | None"]
#: How many variables deep a message is followed (msg = _(...); text = msg % args).
MAX_DEPTH = 4


class _Names:
    """Variable lookups while one message is read: a name is followed once per path (no cycles)."""

    def __init__(self, resolve: Resolver | None):
        self.resolve = resolve
        self.following: list[str] = []

    def value(self, node: ast.expr) -> ast.expr | None:
        if self.resolve is None or not isinstance(node, ast.Name):
            return None
        if node.id in self.following or len(self.following) >= MAX_DEPTH:
            return None
        return self.resolve(node.id)


def read_message(node: ast.expr, resolve: Resolver | None = None) -> list[Template]:
    """The templates of a message expression (one, or a few alternatives); or :class:`Unreadable`.

    ``resolve`` looks up variables: given a name, it returns the one expression the variable
    can hold at that point (a local bound exactly once), or ``None`` to leave it unreadable.
    """
    templates = _read(node, _Names(resolve))
    # Equal alternatives (the same text in both branches of a ternary) are one.
    unique = list(dict.fromkeys(_merge(t) for t in templates))
    return unique[:MAX_ALTERNATIVES]


def describe(node: ast.expr) -> str:
    """What an unreadable message argument is, for the report: ``a variable (msg)``."""
    text = _short(node)
    if isinstance(node, ast.Name):
        return f"a variable ({text})"
    if isinstance(node, ast.Attribute):
        return f"an attribute ({text})"
    if isinstance(node, ast.Call):
        return f"a call ({text})"
    if isinstance(node, ast.Subscript):
        return f"a subscript ({text})"
    if isinstance(node, ast.Constant):
        return f"a constant that is not a string ({text})"
    if isinstance(node, ast.Starred):
        return f"unpacked arguments ({text})"
    return f"an expression ({text})"


def _short(node: ast.expr) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _read(node: ast.expr, names: _Names) -> list[Template]:
    value = names.value(node)
    if value is not None:
        names.following.append(node.id)  # type: ignore[attr-defined]
        try:
            return _read(value, names)
        except Unreadable:
            raise Unreadable(f"{describe(node)} holding {describe(value)}") from None
        finally:
            names.following.pop()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value,)]
    if isinstance(node, ast.JoinedStr):
        return [_fstring(node)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        formats = _string_constants(node.left, names)
        if formats is None:
            raise Unreadable(f"% formatting of {describe(node.left)}")
        return [_percent(text, node.right) for text in formats]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _concatenation(node, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        formats = _string_constants(node.func.value, names)
        if formats is not None:
            return [_str_format(text, node) for text in formats]
    if isinstance(node, ast.IfExp):
        return _limit(_read(node.body, names) + _read(node.orelse, names))
    formats = _string_constants(node, names)
    if formats is not None:  # a gettext call of a literal
        return [(text,) for text in formats]
    raise Unreadable(describe(node))


def _limit(templates: list[Template]) -> list[Template]:
    if len(templates) > MAX_ALTERNATIVES:
        raise Unreadable(f"more than {MAX_ALTERNATIVES} alternative messages")
    return templates


def _string_constants(node: ast.expr, names: _Names) -> list[str] | None:
    """The literal text(s) of a string literal or a gettext call of literals; else ``None``."""
    value = names.value(node)
    if value is not None:
        names.following.append(node.id)  # type: ignore[attr-defined]
        try:
            return _string_constants(value, names)
        finally:
            names.following.pop()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Call) and not node.keywords:
        name = _callee_name(node.func)
        args = node.args
        if name in GETTEXT and len(args) == 1:
            return _string_constants(args[0], names)
        if name in NGETTEXT and len(args) == 3:
            singular, plural = _string_constants(args[0], names), _string_constants(args[1], names)
            if singular is not None and plural is not None:
                return list(dict.fromkeys(singular + plural))
    return None


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _placeholder(node: ast.expr | None, fallback: str | None = None) -> str:
    """The name a value goes by in ``errorMessage``: its expression text, if short and plain."""
    if node is not None:
        text = ast.unparse(node)
        if len(text) <= MAX_NAME and not any(c in text for c in "{}\n"):
            return text
    if fallback and len(fallback) <= MAX_NAME and not any(c in fallback for c in "{}\n"):
        return fallback
    return NEUTRAL


def _fstring(node: ast.JoinedStr) -> Template:
    parts: list[str | Hole] = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(value.value)
        elif isinstance(value, ast.FormattedValue):
            # repr()/ascii() of anything, and any value under a format spec, prints something.
            nonempty = value.conversion in (ord("r"), ord("a")) or value.format_spec is not None
            parts.append(Hole(_placeholder(value.value), may_be_empty=not nonempty))
        else:  # pragma: no cover - JoinedStr holds only these two
            raise Unreadable(describe(node))
    return tuple(parts)


def _concatenation(node: ast.BinOp, names: _Names) -> list[Template]:
    """``"prefix: " + value + "..."``: literal operands are text, the others are values."""
    operands: list[ast.expr] = []

    def flatten(n: ast.expr) -> None:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            flatten(n.left)
            flatten(n.right)
        else:
            operands.append(n)

    flatten(node)
    results: list[list[str | Hole]] = [[]]
    literal_seen = False
    for operand in operands:
        try:
            choices = _read(operand, names)
            literal_seen = True
        except Unreadable:
            # `+` of a string with something else only works when that something is a str.
            choices = [(Hole(_placeholder(operand)),)]
        results = [done + list(choice) for done in results for choice in choices]
        _limit(results)  # type: ignore[arg-type]
    if not literal_seen:
        raise Unreadable(describe(node))
    return [tuple(r) for r in results]


def _percent(text: str, right: ast.expr) -> Template:
    """``text % right``: printf-style specs become holes named after their arguments."""
    parts, specs = _percent_parts(text)
    values, fallbacks = _percent_values([key for key, _ in specs], right)
    named: list[str | Hole] = []
    index = 0
    for part in parts:
        if isinstance(part, Hole):
            named.append(Hole(_placeholder(values[index], fallbacks[index]), part.may_be_empty))
            index += 1
        else:
            named.append(part)
    return tuple(named)


def _percent_parts(text: str) -> tuple[list[str | Hole], list[tuple[str | None, str]]]:
    """The literal text and unnamed holes of a % format string, and its specs' (key, type)."""
    specs = []
    position = 0
    parts: list[str | Hole] = []
    literal = ""
    while True:
        found = text.find("%", position)
        if found < 0:
            literal += text[position:]
            break
        literal += text[position:found]
        match = _PERCENT.match(text, found)
        kind = match.group("type") if match else ""
        if not match or kind not in _PERCENT_TYPES or "*" in (match.group("width") or "") + (match.group("precision") or ""):
            raise Unreadable(f"a % format string it cannot parse ({text[found:found + 10]!r})")
        position = match.end()
        if kind == "%":
            literal += "%"
            continue
        parts.append(literal)
        literal = ""
        specs.append((match.group("key"), kind))
        parts.append(Hole("", may_be_empty=kind not in "diouxXeEfFgGcra"))  # named by _percent
    parts.append(literal)
    return parts, specs


def _percent_values(keys: list[str | None], right: ast.expr) -> tuple[list[ast.expr | None], list[str | None]]:
    """Which expression each spec formats (a tuple's items, a dict's values, or the one value),
    and the name to fall back on (the spec's key)."""
    if any(key is not None for key in keys):
        mapping = _mapping(right)
        return [mapping.get(key) if key is not None else None for key in keys], list(keys)
    if isinstance(right, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in right.elts):
        items: list[ast.expr | None] = list(right.elts)
    elif len(keys) == 1 and not isinstance(right, ast.Tuple):
        items = [right]
    else:
        items = [None] * len(keys)
    return (items + [None] * len(keys))[: len(keys)], [None] * len(keys)


def _mapping(node: ast.expr) -> dict[str, ast.expr]:
    """The key → value expressions of ``{"k": v}`` or ``dict(k=v)``; ``{}`` for anything else."""
    if isinstance(node, ast.Dict):
        return {
            k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {kw.arg: kw.value for kw in node.keywords if kw.arg}
    return {}


def _str_format(text: str, call: ast.Call) -> Template:
    """``text.format(...)``: each replacement field becomes a hole named after its argument."""
    positional = [None if isinstance(a, ast.Starred) else a for a in call.args]
    if any(isinstance(a, ast.Starred) for a in call.args):
        positional = []  # positions are unknown after *args
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    parts: list[str | Hole] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise Unreadable(f"a format string it cannot parse ({exc})") from None
    for literal, field, spec, conversion in parsed:
        parts.append(literal)
        if field is None:
            continue
        head = re.split(r"[.\[]", field, maxsplit=1)[0]
        node: ast.expr | None = None
        if head == "":
            node = positional[auto] if auto < len(positional) else None
            auto += 1
        elif head.isdigit():
            index = int(head)
            node = positional[index] if index < len(positional) else None
        else:
            node = keywords.get(head)
        if spec and "{" in spec:
            auto += sum(1 for _, f, _, _ in string.Formatter().parse(spec) if f == "")
        # A named field as written ({value}, {ctx.name}) is the clearest name; {} and {0}
        # take their argument's expression.
        name = _placeholder(None, field) if head and not head.isdigit() else _placeholder(node)
        nonempty = conversion in ("r", "a") or bool(spec)
        parts.append(Hole(name, may_be_empty=not nonempty))
    return tuple(parts)


def _merge(template: Template) -> Template:
    """Adjacent literals joined and empty ones dropped, so equal messages compare equal."""
    merged: list[str | Hole] = []
    for part in template:
        if isinstance(part, str):
            if not part:
                continue
            if merged and isinstance(merged[-1], str):
                merged[-1] += part
                continue
        merged.append(part)
    return tuple(merged)


def message_text(template: Template) -> str:
    """The ``errorMessage`` of a template: literal text, ``{name}`` where values go."""
    return "".join(part if isinstance(part, str) else "{" + part.name + "}" for part in template)


def literal_text(template: Template) -> str:
    """Only the literal parts of a template, joined with a space where a value goes."""
    return " ".join(part for part in template if isinstance(part, str))


def escape(text: str) -> str:
    """``text`` as a regex matching exactly it, in Python ``re``, RE2 and JavaScript alike."""
    out = []
    for char in text:
        if char in _REGEX_SPECIAL:
            out.append("\\" + char)
        elif char in _CONTROL_ESCAPES:
            out.append(_CONTROL_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


def template_pattern(template: Template) -> str:
    """One template as a regex: literals escaped, holes ``.*`` or ``.+``."""
    return "".join(escape(p) if isinstance(p, str) else (".*" if p.may_be_empty else ".+") for p in template)


def _multiline_pattern(template: Template) -> str:
    """A template whose literal text spans lines: its first line, then optionally the rest.

    A traceback parser may keep only a message's first line or paragraph, and some classes
    append lines of their own (pydantic's "For further information visit ..."), so the
    pattern matches the first line alone, or the whole message, or the whole message with
    more lines after it. A first line without a literal word would match any line, so then
    the whole message is required.
    """
    for position, part in enumerate(template):
        if isinstance(part, str) and "\n" in part:
            before, after = part.split("\n", 1)
            first = (*template[:position], before)
            rest = template_pattern((after, *template[position + 1 :]))
            if not _WORD.search(literal_text(first)):
                return template_pattern(first) + "\\n" + rest + MORE_LINES
            return f"{template_pattern(first)}(?:\\n{rest}{MORE_LINES})?"
    return template_pattern(template)


def message_pattern(templates: list[Template], *, quoted: bool = False) -> str:
    """The ``messagePattern`` of a message: its templates as one regex (alternatives ``(?:a|b)``).

    ``quoted`` is for ``KeyError``, whose ``str()`` is the ``repr()`` of its argument: the
    pattern then also accepts the message in quotes. A message of several lines is matched by
    its first line alone too (:func:`_multiline_pattern`).
    """
    bodies = list(dict.fromkeys(_multiline_pattern(t) for t in templates))
    body = bodies[0] if len(bodies) == 1 else "(?:" + "|".join(bodies) + ")"
    if quoted:
        body = f"['\"]?{body}['\"]?"
    return body
