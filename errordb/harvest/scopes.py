"""What a name holds at a raise: one pass over a module's statements, with their scopes.

:func:`index_module` walks a module's statements once (never its expressions, where no raise
can be) and notes its classes, functions and raises, each statement with its :class:`Place`:
the scope it is in (function, class body, module) and its block. :meth:`ModuleIndex.resolver`
then tells, exactly, the one value a variable holds at a place, which is how
``msg = _("..."); raise X(msg)`` gets its message read.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple


def source_lines(text: str) -> list[str]:
    """A file's lines as ast numbers them (a final newline ends the last line)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines



@dataclass(eq=False)
class Function:
    """A function definition: what it is a method of, and its own statements and raises."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    method_of: str | None  # the class it is a method of (not for static methods)
    parent: Function | None  # the function around it, whose variables it can read
    raises: list[ast.Raise] = field(default_factory=list)  # its own, not nested functions'
    statements: list[ast.stmt] = field(default_factory=list)  # likewise
    _bindings: dict[str, list[ast.expr | None]] | None = None

    @property
    def bindings(self) -> dict[str, list[ast.expr | None]]:
        """Each name bound in the function: the values bound (``None``: not a plain assignment)."""
        if self._bindings is None:
            args = self.node.args
            parameters = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            self._bindings = bindings(self.statements, [a.arg for a in parameters if a is not None])
        return self._bindings


class Frame(NamedTuple):
    scope: tuple[str, ...]  # qualified name parts
    class_body: str | None  # the class whose body the statements are in
    self_class: str | None  # the class `self` is an instance of (in methods and functions inside them)
    function: Function | None  # the function the statements belong to (None in class bodies)
    enclosing: Function | None  # the nearest function around (for closures, through class bodies)


class Place(NamedTuple):
    """Where a statement is: its frame, its block (the statement list) and position in it, and
    the branches of its function that lead there, outermost first (:func:`conditions`)."""

    frame: Frame
    block: list[ast.stmt]
    position: int
    branches: tuple[tuple[str, ast.AST], ...] = ()

    @property
    def qualname(self) -> str:
        return ".".join(self.frame.scope)


@dataclass
class ModuleIndex:
    """What one pass over a module's statements collects for the later steps."""

    path: str
    text: str
    module: ast.Module
    lines: list[str]
    classes: list[ast.ClassDef] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    raises: list[tuple[ast.Raise | ast.Assert, Place]] = field(default_factory=list)  # and asserts with a message
    top_level: list[ast.stmt] = field(default_factory=list)  # the module's own statements
    _bindings: dict[str, list[ast.expr | None]] | None = None

    def resolver(self, place: Place):
        """A lookup of the variables visible at a place: the one value a name certainly holds.

        Two rules, both exact (no value is ever guessed):

        - the nearest earlier statement of the same block that binds the name, when it is a
          plain ``name = value``: straight-line code, so at the raise the name holds ``value``
          (``msg = _("invalid choice: %(value)r"); raise ArgumentError(action, msg % args)``);
        - otherwise a name bound exactly once by a plain assignment, in the nearest function
          that binds it (or at module level when no function does and no ``global`` statement
          names it): wherever it is read it holds that value (or is unbound, and the raise
          fails anyway).

        The first rule also reads text appended with ``+=`` after the assignment, in the block or
        in one branch of an ``if`` of it (``msg += " If you're looking for ..."`` gives the
        message with and without that text).

        Anything else (a parameter, a loop variable, two assignments) gives ``None``.
        """

        def resolve(name: str) -> ast.expr | None:
            suffixes: list[tuple[ast.expr, bool]] = []  # name += value, and whether it is certain
            for statement in reversed(place.block[: place.position]):
                if name in bindings(list(_flatten(statement)), []):
                    value = _plain_value(statement, name)
                    if value is not None:
                        return _appended(value, suffixes[::-1])
                    suffix = _appended_to(statement, name)
                    if suffix is None:
                        break  # bound in a branch or a loop: only the next rule can tell
                    suffixes.append(suffix)
            if suffixes:
                return None
            function = place.frame.enclosing
            while function is not None:
                values = function.bindings.get(name)
                if values is not None:
                    return values[0] if len(values) == 1 else None
                function = function.parent
            if re.search(r"\b(?:global|nonlocal)\b[^\n]*\b" + re.escape(name) + r"\b", self.text):
                return None
            values = self.module_bindings.get(name)
            return values[0] if values is not None and len(values) == 1 else None

        return resolve

    @property
    def module_bindings(self) -> dict[str, list[ast.expr | None]]:
        if self._bindings is None:
            self._bindings = bindings(self.top_level, [])
        return self._bindings


#: The fields of a statement that hold statements; raise is a statement, so only these are
#: walked to find raises (expressions are most of a tree and never hold one).
_BODIES = ("body", "orelse", "finalbody")


def _statements(module: ast.Module) -> Iterator[tuple[ast.stmt, Place]]:
    """Every statement of a module with its place; a function definition's frame gets an
    entry (``Function``) that the statements inside it refer to."""
    stack: list[tuple[list[ast.stmt], Frame, tuple]] = [(module.body, Frame((), None, None, None, None), ())]
    while stack:
        body, frame, branches = stack.pop()
        for position, statement in enumerate(body):
            yield statement, Place(frame, body, position, branches)
            if isinstance(statement, ast.ClassDef):
                inner = Frame((*frame.scope, statement.name), statement.name, None, None, frame.enclosing)
                stack.append((statement.body, inner, ()))
                continue
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                static = any(dotted(d) == "staticmethod" for d in statement.decorator_list)
                entry = Function(statement, frame.class_body if not static else None, frame.enclosing)
                # A function nested in a method still sees the method's `self`.
                inner = Frame((*frame.scope, statement.name), None, entry.method_of or frame.self_class, entry, entry)
                stack.append((statement.body, inner, ()))
                continue
            test = getattr(statement, "test", None) if isinstance(statement, (ast.If, ast.While)) else None
            for name in _BODIES:
                inner_body = getattr(statement, name, None)
                if inner_body:
                    kind = ("if" if name == "body" else "else") if test is not None else None
                    stack.append((inner_body, frame, (*branches, (kind, test)) if kind else branches))
            for handler in getattr(statement, "handlers", ()):
                stack.append((handler.body, frame, (*branches, ("except", handler.type)) if handler.type else branches))
            for case in getattr(statement, "cases", ()):
                stack.append((case.body, frame, branches))


#: Longest condition quoted in full; a longer one is cut (the source window shows it all).
CONDITION_CHARS = 100

_NEGATED = {
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn,
    ast.NotIn: ast.In, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
}  # fmt: skip


def _negation(test: ast.expr) -> str:
    """``test`` negated as a reader would write it: ``x is not None`` rather than ``not x is None``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.unparse(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _NEGATED:
        return ast.unparse(ast.Compare(test.left, [_NEGATED[type(test.ops[0])]()], test.comparators))
    text = ast.unparse(test)
    return f"not {text}" if isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"not ({text})"


def conditions(place: Place) -> tuple[str, ...]:
    """What holds where a statement runs, innermost first, read from the branches around it in
    its function: ``x is None`` (inside ``if x is None``), ``x is not None`` (its ``else``),
    ``except KeyError`` (in that handler); a ``while`` loop's test like an ``if``'s."""
    found: list[str] = []
    for kind, node in reversed(place.branches):
        if isinstance(node, ast.Constant):
            continue  # while True: always
        text = f"except {ast.unparse(node)}" if kind == "except" else _negation(node) if kind == "else" else ast.unparse(node)
        text = text if len(text) <= CONDITION_CHARS else text[: CONDITION_CHARS - 1] + "\u2026"
        if text not in found:
            found.append(text)
    return tuple(found)


def _flatten(statement: ast.stmt) -> Iterator[ast.stmt]:
    """A statement and the statements in its blocks (not inside a nested def or class)."""
    yield statement
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    blocks = [getattr(statement, name, None) or [] for name in _BODIES]
    blocks += [h.body for h in getattr(statement, "handlers", ())] + [c.body for c in getattr(statement, "cases", ())]
    for block in blocks:
        for inner in block:
            yield from _flatten(inner)


def _plain_value(statement: ast.stmt, name: str) -> ast.expr | None:
    """The value of ``name = value`` (or ``name: T = value``); ``None`` for any other binding."""
    if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets):
        unpacked = [t for t in statement.targets if not isinstance(t, ast.Name)]  # msg = (a, msg) = ...
        if any(isinstance(n, ast.Name) and n.id == name for t in unpacked for n in ast.walk(t)):
            return None
        return statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.target.id == name:
        return statement.value
    return None


def _appended_to(statement: ast.stmt, name: str) -> tuple[ast.expr, bool] | None:
    """``(value, certain)`` when ``statement`` only appends to ``name``: ``name += value`` itself
    (certain), or an ``if`` whose one binding of ``name`` is such a statement in one of its
    branches, outside any loop (not certain); else ``None``."""
    if isinstance(statement, ast.AugAssign):
        target = statement.target
        if isinstance(target, ast.Name) and target.id == name and isinstance(statement.op, ast.Add):
            return statement.value, True
        return None
    if not isinstance(statement, ast.If):
        return None
    inner = [s for s in list(_flatten(statement))[1:] if name in bindings([s], [])]
    if len(inner) != 1 or not any(inner[0] in block for block in (statement.body, statement.orelse)):
        return None
    found = _appended_to(inner[0], name)
    return (found[0], False) if found else None


def _appended(value: ast.expr, suffixes: list[tuple[ast.expr, bool]]) -> ast.expr:
    """``value`` with each suffix appended in order: always when certain, else as an alternative."""
    for suffix, certain in suffixes:
        longer = ast.BinOp(left=value, op=ast.Add(), right=suffix)
        value = longer if certain else ast.IfExp(test=ast.Constant(True), body=longer, orelse=value)
    return value


def _expressions(statement: ast.stmt) -> Iterator[ast.AST]:
    """Every node of a statement outside the statements it holds."""
    for name, value in ast.iter_fields(statement):
        if name in _BODIES or name in ("handlers", "cases"):
            continue
        for part in value if isinstance(value, list) else [value]:
            if isinstance(part, ast.AST):
                yield from ast.walk(part)


def bindings(statements: list[ast.stmt], parameters: list[str]) -> dict[str, list[ast.expr | None]]:
    """The names a scope's own statements bind, each with the values bound to it.

    A plain ``name = value`` binds ``value``; every other way of binding a name (a parameter,
    a loop or ``with`` target, ``except ... as``, an import, ``def``, ``:=``, ``+=``, ``del``,
    ``global``) counts as an unknown value (``None``), so that name is never resolved.
    """
    found: dict[str, list[ast.expr | None]] = {}

    def bind(name: str, value: ast.expr | None = None) -> None:
        found.setdefault(name, []).append(value)

    for name in parameters:
        bind(name)
    for statement in statements:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    bind(target.id, statement.value)
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.value is not None:
                bind(statement.target.id, statement.value)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                bind((alias.asname or alias.name).split(".")[0])
        elif isinstance(statement, (ast.Global, ast.Nonlocal)):
            for name in statement.names:
                bind(name), bind(name)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(statement.name)
            continue  # its body is another scope
        for handler in getattr(statement, "handlers", ()):
            if handler.name:
                bind(handler.name)
        for node in _expressions(statement):
            # Stores other than the plain targets above: tuple targets, loop targets, :=, del.
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                if not (isinstance(statement, (ast.Assign, ast.AnnAssign)) and _is_plain_target(statement, node)):
                    bind(node.id)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                bind(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                bind(node.rest)
    return found


def _is_plain_target(statement: ast.Assign | ast.AnnAssign, node: ast.Name) -> bool:
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return any(target is node for target in targets)


def index_module(path: str, text: str, module: ast.Module) -> ModuleIndex:
    """Walk a module's statements once, noting classes, functions and raises with their frames."""
    index = ModuleIndex(path, text, module, source_lines(text))
    seen: dict[int, Function] = {}
    for statement, place in _statements(module):
        frame = place.frame
        if frame.function is not None:
            frame.function.statements.append(statement)
            seen.setdefault(id(frame.function), frame.function)
        elif not frame.scope:
            index.top_level.append(statement)
        if isinstance(statement, ast.ClassDef):
            index.classes.append(statement)
        elif isinstance(statement, ast.Raise):
            index.raises.append((statement, place))
            if frame.function is not None:
                frame.function.raises.append(statement)
        elif isinstance(statement, ast.Assert) and statement.msg is not None:
            index.raises.append((statement, place))  # `assert x, "msg"` raises AssertionError("msg")
    index.functions = list(seen.values())
    return index


def module_calls(index: ModuleIndex) -> Iterator[tuple[ast.Call, Place]]:
    """Every call in a module, with the place of the statement it is in."""
    for statement, place in _statements(index.module):
        for node in _expressions(statement):
            if isinstance(node, ast.Call):
                yield node, place


def dotted(node: ast.expr) -> str | None:
    """``a.b.C`` for a name or a chain of attributes of a name; ``None`` otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
