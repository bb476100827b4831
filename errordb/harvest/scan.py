"""Finding the raise sites of a Python source tree with :mod:`ast` (nothing is imported or run).

A *site* is one ``raise`` of an exception class whose message :mod:`errordb.harvest.messages`
can read. Two things about the tree are learnt first, from all its files:

- its classes, and where each one's ``__init__`` takes the message: ``ArgumentError(argument,
  message)`` carries it second, ``NoSuchOption(option_name, ...)`` builds its own (so a raise
  of it has no message to read);
- its *message helpers*: functions whose one ``raise`` raises the message they are given, such
  as click's ``ParamType.fail(message)``. A call ``self.fail(_("{value!r} is not a valid
  integer."))`` is then a site too, at the helper's ``raise`` (the line a traceback's innermost
  frame shows), with the call's message.

Every raise that gives no site is a :class:`Skip` with a reason from :data:`REASONS`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import gc
import io
import multiprocessing
import os
import re
import tokenize
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from errordb.errors import ErrordbError
from errordb.harvest.messages import (
    Template,
    Unreadable,
    describe,
    literal_text,
    message_pattern,
    message_text,
    read_message,
)
from errordb.harvest.scopes import Function, ModuleIndex, Place, conditions, dotted, index_module, module_calls
from errordb.records.snippet import raised_class

#: Parameter names that carry an exception class's message.
MESSAGE_PARAMETERS = ("message", "msg")
#: A helper's parameter must be named like a message (message, msg, error_message, ...) for
#: calls of it to count: a helper is found by its name, and a name like ``get(key)`` is
#: shared with calls that pass anything but messages.
_MESSAGE_NAME = re.compile(r"(?:^|_)(?:message|msg)(?:$|_)|^(?:text|reason|description|detail)$")
#: Python's own exception classes: their ``str()`` with several arguments is a tuple's repr.
BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)
_LITERAL_WORD = re.compile(r"[A-Za-z]{3,}")

#: Why a raise gave no record. The keys are stable: the report, tests and docs/harvest.md use them.
REASONS = {
    "no-message": "raises a class without a message (raise X, raise X(), only other arguments, "
    "or a class that builds its own message)",
    "not-a-class": "raises a value, not a call of a class (raise exc, raise self.error(...))",
    "message-not-literal": "the message is not a literal, f-string, + of literals, % or .format of a literal",
    "several-arguments": "a built-in exception with several arguments prints the tuple of them",
    "no-literal-text": "the message has no literal word of three letters; its pattern would match anything",
    "not-utf8": "the message holds characters a UTF-8 record cannot store (lone surrogates)",
    "shares-line": "the raise does not begin its line (if x: raise ...), so that line is not a raise",
    "failed-check": "the draft record would fail errordb check",
    "unparsable": "the file does not parse (or decode) as Python",
}


class HarvestError(ErrordbError):
    """A harvest that cannot run (bad options, an unusable --out tree); nothing was written."""


@dataclass(frozen=True)
class Skip:
    """A raise (or file) that gave no record, and why (a key of :data:`REASONS`)."""

    file: str
    line: int
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}: {self.detail}"


@dataclass(frozen=True)
class Site:
    """One harvestable raise: where it is and what it raises."""

    file: str  # repository-relative POSIX path of the raise
    line: int
    qualname: str  # Class.method around the raise (or around the helper call); "" at module level
    error_class: str  # as written: click.BadParameter
    templates: tuple[Template, ...]
    origin: str = ""  # for a message given to a helper: the file of the call
    via: str = ""  # ... and the helper's name
    order: tuple[int, int] = (0, 0)  # (line, column) of the raise or call, for numbering
    occurrence: int = 0  # how many identical sites precede it in the same function
    conditions: tuple[str, ...] = ()  # what holds where it is raised, innermost first (scopes.conditions)

    @property
    def message(self) -> str:
        return message_text(self.templates[0])

    @property
    def pattern(self) -> str:
        if self.templates == (("",),):
            return ""  # raised without a message: it prints none
        # KeyError's str() is the repr() of its argument: 'message' in quotes.
        return message_pattern(list(self.templates), quoted=self.error_class.rsplit(".", 1)[-1] == "KeyError")

    @property
    def identity(self) -> tuple[str, ...]:
        """What identifies the site apart from its occurrence index (and never its line)."""
        return (self.origin or self.file, self.qualname, self.via, self.error_class, self.message)


@dataclass
class ScannedFile:
    """What one source file gave: its lines, its sites, its unreadable raises."""

    path: str
    lines: list[str]
    sites: list[Site]
    skips: list[Skip]
    raises: int = 0  # raise statements with an exception (re-raises not included)
    reraises: int = 0  # bare `raise`
    #: Raises whose site depends on where their class takes its message (:class:`PendingSite`),
    #: known once the whole tree's classes are.
    pending: list[PendingSite] = field(default_factory=list)


# ---------------------------------------------------------------------------- reading files


def python_files(root: Path) -> Iterator[Path]:
    """The ``.py`` files under ``root`` (or ``root`` itself), in sorted order."""
    if root.is_file():
        yield root
        return
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from python_files(Path(entry.path))
        elif entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def read_source(path: Path) -> str:
    """A source file's text, decoded as Python decodes it (PEP 263), newlines as ``\\n``."""
    data = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    # ast counts \r\n and a lone \r as line ends; record snippets are split on \n only.
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------------------- classes and helpers


@dataclass(frozen=True)
class ClassInfo:
    """A class defined in the tree: its bases and where its ``__init__`` takes a message."""

    bases: tuple[str, ...]
    #: The message's positional index (after self); -1: __init__ takes no message (the class
    #: builds its own); None: no __init__ here (ask the bases).
    message_index: int | None
    message_keyword: str | None


@dataclass(frozen=True)
class Helper:
    """A function that raises an exception with the message it is given (``fail(message)``)."""

    name: str
    file: str
    owner: str | None  # the class it is a method of
    line: int  # of its raise
    error_class: str
    parameter: str  # the message parameter
    index: int | None  # its position among the positional parameters (after self)


@dataclass
class Tree:
    """What the whole harvested tree defines: classes and message helpers, by name.

    Lookups are memoised: a large tree defines the same class name (``Error``) hundreds of
    times, and every raise asks. The classes must all be known before the first lookup.
    """

    classes: dict[str, list[ClassInfo]] = field(default_factory=dict)
    helpers: dict[str, list[Helper]] = field(default_factory=dict)
    _positions: dict[str, tuple[int | None, str | None]] = field(default_factory=dict)
    _lineages: dict[str, list[str]] = field(default_factory=dict)
    _helper_call: re.Pattern[str] | None = None

    def message_position(self, short: str) -> tuple[int | None, str | None]:
        """Where class ``short`` takes its message; ``(None, None)``: unknown (the first argument)."""
        if short not in self._positions:
            self._positions[short] = (None, None)  # while being computed: a cycle of bases ends here
            self._positions[short] = self._position(short)
        return self._positions[short]

    def _position(self, short: str) -> tuple[int | None, str | None]:
        answers = set()
        for info in self.classes.get(short, ()):
            if info.message_index is None and info.message_keyword is None:
                bases = [b for b in info.bases if b in self.classes and b != short]
                answers.add(self.message_position(bases[0]) if bases else (None, None))
            else:
                answers.add((info.message_index, info.message_keyword))
        # Several classes of that name: only an answer they all agree on is used.
        return answers.pop() if len(answers) == 1 else (None, None)

    def calls_a_helper(self, text: str) -> bool:
        """Whether a module's text calls something named like one of the helpers."""
        if not self.helpers:
            return False
        if self._helper_call is None:
            names = "|".join(map(re.escape, sorted(self.helpers)))
            self._helper_call = re.compile(rf"\b(?:{names})\s*\(")
        return self._helper_call.search(text) is not None

    def lineage(self, owner: str) -> list[str]:
        """``owner`` and its bases defined in the tree, nearest first (an MRO by names)."""
        if owner not in self._lineages:
            order, queue = [], [owner]
            while queue:
                name = queue.pop(0)
                if name in order or name not in self.classes:
                    continue
                order.append(name)
                for info in self.classes[name]:
                    queue.extend(info.bases)
            self._lineages[owner] = order
        return self._lineages[owner]


def _base_name(node: ast.expr) -> str | None:
    # class Choice(ParamType[T]): a subscripted generic base is still that base.
    if isinstance(node, ast.Subscript):
        node = node.value
    name = dotted(node)
    return name.rsplit(".", 1)[-1] if name else None


def class_info(node: ast.ClassDef) -> ClassInfo:
    """Where a class's ``__init__`` takes the message (by the parameter's name)."""
    bases = tuple(name for name in map(_base_name, node.bases) if name)
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            params = [a.arg for a in [*item.args.posonlyargs, *item.args.args][1:]]
            for name in MESSAGE_PARAMETERS:
                if name in params:
                    return ClassInfo(bases, params.index(name), name)
            keyword_only = [a.arg for a in item.args.kwonlyargs]
            for name in MESSAGE_PARAMETERS:
                if name in keyword_only:
                    return ClassInfo(bases, None, name)
            # Named parameters, none of them the message: the class builds its own message
            # (NoSuchOption(option_name, ...)). Only *args: the message is the first argument.
            return ClassInfo(bases, -1 if params else 0, None)
    return ClassInfo(bases, None, None)


def looks_like_class(name: str) -> bool:
    """Whether a raised name reads as a class (CapWords), not a variable holding one."""
    last = name.rsplit(".", 1)[-1]
    # `error` is the lower-case exception class name of the standard library (re.error, ...).
    return last[:1].isupper() or last == "error"


class _Skipped(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


def message_argument(tree: Tree, name: str, call: ast.Call) -> ast.expr:
    """The argument of ``name(...)`` that carries the message, by what the class's ``__init__`` takes."""
    short = name.rsplit(".", 1)[-1]
    positional = list(call.args)
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    if short in BUILTIN_EXCEPTIONS and len(positional) > 1:
        raise _Skipped("several-arguments", f"{name} with {len(positional)} arguments")
    index, keyword = tree.message_position(short)
    if keyword and keyword in keywords:
        return keywords[keyword]
    if index is None and not positional:
        for alias in MESSAGE_PARAMETERS:
            if alias in keywords:
                return keywords[alias]
    if index == -1:
        raise _Skipped("no-message", f"{name} builds its own message (its __init__ takes no message parameter)")
    index = index or 0
    if any(isinstance(a, ast.Starred) for a in positional[: index + 1]):
        raise _Skipped("message-not-literal", f"{name}: the message is in unpacked arguments")
    if index < len(positional):
        return positional[index]
    raise _Skipped("no-message", ast.unparse(call)[:60])


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> list[str]:
    names = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    return names[1:] if is_method and names else names


def _assigns(function: ast.AST, name: str) -> bool:
    return any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del))
        for node in ast.walk(function)
    )


@dataclass(frozen=True)
class HelperCandidate:
    """A function whose one raise might raise a parameter as the message (decided once the
    whole tree's classes are known). Small: it keeps the raise's call, not the module."""

    name: str
    file: str
    owner: str | None
    line: int
    error_class: str
    call: ast.Call
    parameters: tuple[str, ...]  # positional, after self
    keyword_only: tuple[str, ...]
    reassigned: frozenset[str]  # parameters the function assigns to

    def helper(self, tree: Tree) -> Helper | None:
        try:
            argument = message_argument(tree, self.error_class, self.call)
        except _Skipped:
            return None
        if not isinstance(argument, ast.Name) or argument.id not in self.parameters + self.keyword_only:
            return None
        if not _MESSAGE_NAME.search(argument.id):
            return None  # get(self, key): raise KeyError(key) passes a key, not a message
        if argument.id in self.reassigned:
            return None  # the message is changed before the raise
        position = self.parameters.index(argument.id) if argument.id in self.parameters else None
        return Helper(self.name, self.file, self.owner, self.line, self.error_class, argument.id, position)


def helper_candidate(index: ModuleIndex, function: Function) -> HelperCandidate | None:
    """``function`` if it may be a message helper: one raise, of a named class, on its own line."""
    node = function.node
    if node.name.startswith("__") and node.name.endswith("__"):
        return None  # __getattr__(name) and the like are called by Python, not with messages
    raises = [r for r in function.raises if isinstance(r.exc, ast.Call)]
    if len(raises) != 1:
        return None  # none, or several: which line a call ends at is not known
    raise_node = raises[0]
    call = raise_node.exc
    name = dotted(call.func)
    params = tuple(_parameters(node, function.method_of is not None))
    keyword_only = tuple(a.arg for a in node.args.kwonlyargs)
    # `raise exc(msg)` with the class a parameter is left out: the line must name the class.
    if name is None or not looks_like_class(name) or name in params + keyword_only:
        return None
    line = index.lines[raise_node.lineno - 1] if raise_node.lineno <= len(index.lines) else ""
    if (raised_class(line) or "").rsplit(".", 1)[-1] != name.rsplit(".", 1)[-1]:
        return None
    passed = {a.id for a in call.args if isinstance(a, ast.Name)} | {
        kw.value.id for kw in call.keywords if isinstance(kw.value, ast.Name)
    }
    if not passed & set(params + keyword_only):
        return None  # no parameter reaches the exception
    reassigned = frozenset(p for p in passed & set(params + keyword_only) if _assigns(node, p))
    return HelperCandidate(node.name, index.path, function.method_of, raise_node.lineno, name, call, params, keyword_only, reassigned)


# ---------------------------------------------------------------------------- sites


def _templates(name: str, argument: ast.expr, resolve) -> list[Template]:
    try:
        templates = read_message(argument, resolve)
    except Unreadable as unreadable:
        raise _Skipped("message-not-literal", f"{name}: the message is {unreadable}") from None
    if not any(_LITERAL_WORD.search(literal_text(t)) for t in templates):
        raise _Skipped("no-literal-text", f"{name}({message_text(templates[0])})")
    try:
        for template in templates:
            message_text(template).encode("utf-8")
    except UnicodeEncodeError:
        raise _Skipped("not-utf8", f"{name}: the message holds a lone surrogate") from None
    return templates


def assert_site(index: ModuleIndex, node: ast.Assert, place: Place) -> Site:
    """The site of one ``assert condition, message``: an AssertionError with that message."""
    assert node.msg is not None
    templates = _templates("AssertionError", node.msg, index.resolver(place))
    return Site(index.path, node.lineno, place.qualname, "AssertionError", tuple(templates), order=(node.lineno, node.col_offset), conditions=conditions(place))


def _class_only(index: ModuleIndex, node: ast.Raise, place: Place, name: str, when: tuple[str, ...]) -> Site:
    """``raise NotImplementedError`` or ``raise ValueError()``: a builtin class raised without a
    message prints none, so its record's message and pattern are "" (matched on class and frames)."""
    line = index.lines[node.lineno - 1] if node.lineno <= len(index.lines) else ""
    if raised_class(line) != name:
        raise _Skipped("shares-line", f"the line starts {line.strip()[:40]!r}")
    return Site(index.path, node.lineno, place.qualname, name, (("",),), order=(node.lineno, node.col_offset), conditions=when)


def raise_site(tree: Tree, index: ModuleIndex, node: ast.Raise, place: Place, when: tuple[str, ...]) -> Site:
    """The site of one ``raise X(...)``, or :class:`_Skipped` saying why there is none; ``when``
    is what holds where it is raised (:func:`~errordb.harvest.scopes.conditions` of ``place``)."""
    exc = node.exc
    assert exc is not None
    held = index.resolver(place)(exc.id) if isinstance(exc, ast.Name) else None
    if isinstance(held, ast.Call) and (name := dotted(held.func)) and looks_like_class(name):
        # e = Exception("..."); ...; raise e from None: the line raises a variable, not a class.
        templates = _templates(name, message_argument(tree, name, held), index.resolver(place))
        return Site(index.path, node.lineno, place.qualname, name, tuple(templates), order=(node.lineno, node.col_offset), conditions=when)
    if not isinstance(exc, ast.Call):
        name = dotted(exc)
        if name and looks_like_class(name):
            if name in BUILTIN_EXCEPTIONS:
                return _class_only(index, node, place, name, when)
            raise _Skipped("no-message", f"raise {name}")
        raise _Skipped("not-a-class", f"raises {describe(exc)}")
    name = dotted(exc.func)
    if not name or not looks_like_class(name):
        raise _Skipped("not-a-class", f"raises the result of {describe(exc)}")
    if name in BUILTIN_EXCEPTIONS and not exc.args and not exc.keywords:
        return _class_only(index, node, place, name, when)
    templates = _templates(name, message_argument(tree, name, exc), index.resolver(place))
    line = index.lines[node.lineno - 1] if node.lineno <= len(index.lines) else ""
    raised = raised_class(line)
    if raised is None or raised.rsplit(".", 1)[-1] != name.rsplit(".", 1)[-1]:
        raise _Skipped("shares-line", f"the line starts {line.strip()[:40]!r}")
    return Site(index.path, node.lineno, place.qualname, name, tuple(templates), order=(node.lineno, node.col_offset), conditions=when)


class _Answer:
    """Stands for the tree where a raise asks it one thing: where its class takes the message."""

    def __init__(self, answer: tuple[int | None, str | None]):
        self.answer = answer

    def message_position(self, short: str) -> tuple[int | None, str | None]:
        return self.answer


@dataclass(frozen=True)
class PendingSite:
    """A raise read before the whole tree's classes are known: its site (or skip) for every
    answer the tree can give to where its class takes the message, so that its module is
    parsed once. ``outcomes`` are keyed by :func:`_answer_key`."""

    short: str  # the class's last name, as the tree knows it
    keywords: frozenset[str]  # the call's keyword arguments
    positional: int  # and how many positional ones it has
    outcomes: tuple[tuple[tuple, Site | Skip], ...]

    def resolve(self, tree: Tree) -> Site | Skip:
        key = _answer_key(tree.message_position(self.short), self.keywords, self.positional)
        return dict(self.outcomes)[key]


def _answer_key(answer: tuple[int | None, str | None], keywords: frozenset[str], positional: int) -> tuple:
    """Which of :func:`message_argument`'s ways an answer takes for a call (answers that take
    the same way give the same site)."""
    index, keyword = answer
    if keyword and keyword in keywords:
        return ("keyword", keyword)
    if index is None:
        return ("none",)
    if index == -1:
        return ("builds-own",)
    return ("index", min(index, positional))


def raise_outcomes(index: ModuleIndex, node: ast.Raise, place: Place) -> Site | PendingSite:
    """:func:`raise_site` without the tree: the site, when it does not depend on the tree's
    classes, else a :class:`PendingSite`; or :class:`_Skipped`."""
    exc = node.exc
    held = index.resolver(place)(exc.id) if isinstance(exc, ast.Name) else None
    call = held if isinstance(held, ast.Call) else exc if isinstance(exc, ast.Call) else None
    name = dotted(call.func) if call is not None else None
    when = conditions(place)  # read once: the site is read for every answer below
    if call is None or name is None:
        return raise_site(_Answer((None, None)), index, node, place, when)  # asks the tree nothing
    keywords = frozenset(kw.arg for kw in call.keywords if kw.arg)
    answers = [(None, None), (-1, None), *((i, None) for i in range(len(call.args) + 1)),
               *((None, kw) for kw in MESSAGE_PARAMETERS if kw in keywords)]  # fmt: skip
    outcomes: dict[tuple, Site | Skip] = {}
    for answer in answers:
        try:
            outcome: Site | Skip = raise_site(_Answer(answer), index, node, place, when)
        except _Skipped as skipped:
            outcome = Skip(index.path, node.lineno, skipped.reason, skipped.detail)
        outcomes[_answer_key(answer, keywords, len(call.args))] = outcome
    if len(set(outcomes.values())) == 1:  # the same whatever the tree says
        outcome = next(iter(outcomes.values()))
        if isinstance(outcome, Skip):
            raise _Skipped(outcome.reason, outcome.detail)
        return outcome
    return PendingSite(name.rsplit(".", 1)[-1], keywords, len(call.args), tuple(outcomes.items()))


def helper_for(tree: Tree, path: str, call: ast.Call, self_class: str | None) -> Helper | None:
    """The message helper a call calls, when the source alone tells which one."""
    func = call.func
    if isinstance(func, ast.Name):
        candidates = [h for h in tree.helpers.get(func.id, ()) if h.owner is None]
        chosen = [h for h in candidates if h.file == path] or candidates
        return chosen[0] if len(chosen) == 1 else None
    if not isinstance(func, ast.Attribute):
        return None
    candidates = [h for h in tree.helpers.get(func.attr, ()) if h.owner is not None]
    if not candidates:
        return None
    receiver = func.value
    is_super = isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super"
    if is_super or (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")):
        # self.fail(...): the nearest class of the method's lineage that defines it.
        if self_class is None:
            return None
        for name in tree.lineage(self_class)[1 if is_super else 0 :]:
            found = [h for h in candidates if h.owner == name]
            if found:
                return found[0] if len(found) == 1 else None
        return None
    # ctx.fail(...): the type of ctx is unknown; only a name unambiguous in the tree, or in the file.
    if len(candidates) == 1:
        return candidates[0]
    local = [h for h in candidates if h.file == path]
    return local[0] if len(local) == 1 else None


def helper_site(helper: Helper, index: ModuleIndex, call: ast.Call, place: Place) -> Site | None:
    """The site of a helper call with a readable message; ``None`` for any other call."""
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    argument = keywords.get(helper.parameter)
    if argument is None and helper.index is not None and helper.index < len(call.args):
        argument = call.args[helper.index]
    if argument is None:
        return None
    try:
        templates = _templates(helper.error_class, argument, index.resolver(place))
    except _Skipped:
        return None  # a call is not a raise: an unreadable one is not listed
    return Site(
        helper.file, helper.line, place.qualname, helper.error_class, tuple(templates),
        origin=index.path, via=helper.name, order=(call.lineno, call.col_offset), conditions=conditions(place),
    )  # fmt: skip


def number_occurrences(sites: list[Site]) -> list[Site]:
    """Each site with its occurrence index: how many identical ones precede it in its function."""
    seen: Counter[tuple[str, ...]] = Counter()
    numbered = []
    for site in sorted(sites, key=lambda s: (s.origin or s.file, s.order)):
        numbered.append(replace(site, occurrence=seen[site.identity]))
        seen[site.identity] += 1
    return numbered


def _parse(file: Path, path: str, wanted: Callable[[str], bool] | None = None) -> tuple[str, ast.Module | None] | Skip:
    """The file's text and syntax tree (no tree when ``wanted`` says the text needs none)."""
    try:
        text = read_source(file)
        if wanted is not None and not wanted(text):
            return text, None
        return text, ast.parse(text, filename=path)
    except SyntaxError as exc:
        return Skip(path, exc.lineno or 1, "unparsable", f"does not parse: {exc.msg}")
    except (UnicodeDecodeError, LookupError, ValueError) as exc:
        return Skip(path, 1, "unparsable", f"cannot be decoded: {exc}")
    except OSError as exc:
        raise HarvestError(f"{file}: cannot read: {exc.strerror}") from None


#: ``progress(stage, done, total)``: how far a stage of a harvest is (see :func:`scan_tree`).
ProgressCallback = Callable[[str, int, int], None]


def scan_tree(
    root: Path, prefix: str = "", progress: ProgressCallback | None = None, workers: int | None = None
) -> tuple[list[ScannedFile], list[Skip]]:
    """Parse every Python file under ``root``: the scanned files, and the files that did not parse.

    ``prefix`` is where ``root`` sits inside the repository (``src/click``): site paths are
    ``prefix/<path under root>``. A site reached through a helper belongs to the helper's file.

    Two passes, one file at a time, so that memory does not grow with the tree's syntax
    trees. The first parses every file: its classes, helper candidates and raises; a raise
    whose message depends on where another file's class takes it is read for every answer
    (:class:`PendingSite`). The second settles those from the whole tree's classes, and parses
    again only the files that call something named like a helper, for the helper calls. A tree
    of :data:`POOL_THRESHOLD` files or more is read by ``workers`` processes (default: one per
    core, at most :data:`MAX_WORKERS`); the result is the same. ``progress`` is called as
    ``progress("classes", done, files)`` before each file of the first pass and at its end, and
    ``progress("raises", done, files)`` likewise for the second.
    """
    return scan_files([(file, _site_path(root, prefix, file)) for file in python_files(root)], progress, workers)


def scan_files(
    sources: list[tuple[Path, str]], progress: ProgressCallback | None = None, workers: int | None = None
) -> tuple[list[ScannedFile], list[Skip]]:
    """:func:`scan_tree` of the files ``sources`` names: ``(file, its site path)`` pairs."""
    report = progress or (lambda stage, done, total: None)
    if workers is None:
        workers = min(MAX_WORKERS, os.cpu_count() or 1) if len(sources) >= POOL_THRESHOLD else 1
    with _without_cycle_collection():
        tree, files, unparsable = _learn_tree(sources, report, workers)
        changed = _find_sites(tree, files, sources, report, workers)
    for scanned in files.values():
        scanned.sites = number_occurrences(scanned.sites)
        scanned.skips.sort(key=lambda s: s.line)
    return list(files.values()), unparsable + changed


#: Files from which a tree is read by several processes (a pool costs about a second to start).
POOL_THRESHOLD = 400
MAX_WORKERS = 4


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    # Parsing makes millions of AST nodes, none in a reference cycle; each pass of the cyclic
    # collector walks every object still held (the tree's classes, each file's lines), which
    # doubled the time of a large harvest. Reference counting frees the garbage all the same.
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _site_path(root: Path, prefix: str, file: Path) -> str:
    relative = file.name if root.is_file() else file.relative_to(root).as_posix()
    return str(PurePosixPath(prefix, relative)) if prefix else relative


def _each(function: Callable[[tuple[Path, str]], Any], sources: list[tuple[Path, str]], workers: int, tree: Tree | None = None) -> Iterator[Any]:
    """``function`` of each source, in order: in this process, or in a pool of ``workers``."""
    if workers <= 1:
        _start_worker(tree)
        yield from map(function, sources)
        return
    # Spawned, never forked: a fork would copy whatever the calling program holds.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(tree,)) as pool:
        yield from pool.imap(function, sources, chunksize=8)


#: What the second pass needs in every process: the whole tree's classes and helpers.
_tree: Tree | None = None


def _start_worker(tree: Tree | None) -> None:
    """A process about to run a pass: the tree it needs, and no cyclic collection (in this
    process :func:`_without_cycle_collection` turns it back on after the scan)."""
    global _tree
    _tree = tree
    gc.disable()


def _learn_file(source: tuple[Path, str]) -> tuple[list[tuple[str, ClassInfo]], list[HelperCandidate], ScannedFile] | Skip:
    """One file's part of the first pass: its classes, helper candidates and raises (or why it
    has none)."""
    file, path = source
    parsed = _parse(file, path)
    if isinstance(parsed, Skip):
        return parsed
    index = index_module(path, *parsed)
    classes = [(node.name, class_info(node)) for node in index.classes]
    scanned = ScannedFile(path, [], [], [])
    _scan_raises(index, scanned)
    return classes, [c for c in (helper_candidate(index, f) for f in index.functions) if c], scanned


def _learn_tree(sources: list[tuple[Path, str]], report: ProgressCallback, workers: int) -> tuple[Tree, dict[str, ScannedFile], list[Skip]]:
    """The first pass: the tree's classes and message helpers, each file's raises; and the files
    that did not parse."""
    tree = Tree()
    candidates: list[HelperCandidate] = []
    files: dict[str, ScannedFile] = {}
    unparsable: list[Skip] = []
    report("classes", 0, len(sources))
    for number, learnt in enumerate(_each(_learn_file, sources, workers), start=1):
        if isinstance(learnt, Skip):
            unparsable.append(learnt)
        else:
            for name, info in learnt[0]:
                tree.classes.setdefault(name, []).append(info)
            candidates.extend(learnt[1])
            files[learnt[2].path] = learnt[2]
        report("classes", number, len(sources))
    # The whole tree's classes first: a helper in one file often raises another's class.
    for candidate in candidates:
        helper = candidate.helper(tree)
        if helper:
            tree.helpers.setdefault(helper.name, []).append(helper)
    return tree, files, unparsable


def _helper_calls(source: tuple[Path, str]) -> list[Site] | Skip:
    """One file's part of the second pass: the sites of its calls of message helpers (which
    belong to the helpers' files). Only a module that calls something named like a helper is
    parsed again."""
    file, path = source
    tree = _tree
    assert tree is not None
    parsed = _parse(file, path, tree.calls_a_helper)
    if isinstance(parsed, Skip):  # changed since the first pass
        return parsed
    if parsed[1] is None:
        return []
    index = index_module(path, parsed[0], parsed[1])
    called: list[Site] = []
    for call, place in module_calls(index):
        helper = helper_for(tree, path, call, place.frame.self_class)
        site = helper_site(helper, index, call, place) if helper else None
        if site is not None:
            called.append(site)
    return called


def _find_sites(tree: Tree, files: dict[str, ScannedFile], sources: list[tuple[Path, str]], report: ProgressCallback, workers: int) -> list[Skip]:
    """The second pass: each raise's site as the tree's classes decide it, and the sites of the
    calls of message helpers; the files that no longer parse."""
    for scanned in files.values():
        for pending in scanned.pending:
            outcome = pending.resolve(tree)
            (scanned.skips if isinstance(outcome, Skip) else scanned.sites).append(outcome)
        scanned.pending = []
    parsed = [source for source in sources if source[1] in files]
    unparsable: list[Skip] = []
    report("raises", 0, len(parsed))
    if tree.helpers:
        for number, called in enumerate(_each(_helper_calls, parsed, workers, tree), start=1):
            if isinstance(called, Skip):
                unparsable.append(called)
                del files[called.file]
            else:
                for site in called:
                    if site.file in files:
                        files[site.file].sites.append(site)
            report("raises", number, len(parsed))
    else:
        report("raises", len(parsed), len(parsed))
    return unparsable


def _scan_raises(index: ModuleIndex, scanned: ScannedFile) -> None:
    """Count a module's raises into ``scanned``, with the site (or the site pending the tree's
    classes) or the reason it has none."""
    if index.raises:  # the lines are kept for the records' source windows only
        scanned.lines = index.lines
    for node, place in index.raises:
        if isinstance(node, ast.Assert):
            scanned.raises += 1
            try:
                scanned.sites.append(assert_site(index, node, place))
            except _Skipped as skipped:
                scanned.skips.append(Skip(index.path, node.lineno, skipped.reason, skipped.detail))
            continue
        if node.exc is None:
            scanned.reraises += 1
            continue
        scanned.raises += 1
        try:
            outcome = raise_outcomes(index, node, place)
            (scanned.pending if isinstance(outcome, PendingSite) else scanned.sites).append(outcome)
        except _Skipped as skipped:
            scanned.skips.append(Skip(index.path, node.lineno, skipped.reason, skipped.detail))
