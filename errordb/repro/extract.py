"""Finding the function of a record's snippet that encloses its ``lineNumber``.

Only :func:`ast.parse` is used: record text is untrusted, and nothing here executes it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from errordb.records.snippet import MAX_SNIPPET_CHARS
from errordb.repro.definitions import ReproError


class ExtractionError(ReproError):
    """No enclosing function can be found for a record's ``lineNumber``."""


@dataclass(frozen=True)
class ExtractedFunction:
    """The function of a record's snippet that encloses ``lineNumber``.

    ``text`` is the function's lines exactly as stored (original indentation,
    decorators included); line numbers are the real ones of the file.
    """

    name: str
    first_line: int  # first decorator, or the ``def`` line
    def_line: int
    last_line: int
    text: str

    @property
    def indent(self) -> str:
        return _indent_of(self.text.splitlines()[0])

    def padded_source(self) -> str:
        """Source whose code objects carry the real line numbers.

        Blank lines stand in for the lines above the function.  An indented
        method gets an ``if True:`` header on the line just above it, so the
        stored text is compiled byte for byte as it is (no dedent, which
        would change multi-line strings and column offsets).
        """
        if not self.indent:
            return "\n" * (self.first_line - 1) + self.text + "\n"
        if self.first_line < 2:
            raise ExtractionError("an indented function cannot start on line 1")
        return "\n" * (self.first_line - 2) + "if True:\n" + self.text + "\n"


_DEF_LINE = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(")


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _is_noise(line: str) -> bool:
    """Blank and comment-only lines: Python ignores their indentation."""
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def extract_enclosing_function(source: str, start_line: int, line: int) -> ExtractedFunction:
    """Find the innermost ``def`` in ``source`` (a file window starting at
    real line ``start_line``) whose body contains real line ``line``.

    The window usually begins and ends mid-statement, so it is never parsed
    as a whole.  For each ``def`` above the line (nearest first), the longest
    run of lines from it that parses gives the function; it must be
    *provably complete* -- followed, inside the window, by a line at or left
    of its ``def`` (a prefix of a cut-off body parses too, and running half
    a function would be a rewrite) -- and must reach ``line``.  Decorators
    are included, and the function must not start at the window's top edge
    (decorators could be cut off).  Only :func:`ast.parse` is used.
    """
    if len(source) > MAX_SNIPPET_CHARS:
        raise ExtractionError("snippet too large")
    lines = source.splitlines()
    target = line - start_line
    if not 0 <= target < len(lines):
        raise ExtractionError(
            f"line {line} is outside the snippet (lines {start_line}..{start_line + len(lines) - 1})")
    for index in range(target, -1, -1):
        match = _DEF_LINE.match(lines[index])
        if not match:
            continue
        indent, name = match.group(1), match.group(2)
        last = _parse_function_at(lines, index, indent, name)
        if last is None or last < target:
            continue  # incomplete, or it ends above the line: look further up
        following = next((text for text in lines[last + 1:] if not _is_noise(text)), None)
        if following is None or len(_indent_of(following)) > len(indent):
            raise ExtractionError(
                f"{name}() may continue past the end of the snippet (line {start_line + len(lines) - 1})")
        first = _decorators_start(lines, index, last, indent, name)
        if all(_is_noise(text) for text in lines[:first]):
            raise ExtractionError(f"{name}() starts at the top of the snippet; decorators may be cut off")
        return ExtractedFunction(
            name=name,
            first_line=start_line + first,
            def_line=start_line + index,
            last_line=start_line + last,
            text="\n".join(lines[first:last + 1]),
        )
    raise ExtractionError(f"no complete function in the snippet encloses line {line}")


def _parse_block(lines: list[str], indent: str) -> ast.Module | None:
    header = "if True:\n" if indent else ""
    try:
        return ast.parse(header + "\n".join(lines))
    except (SyntaxError, ValueError):
        return None


def _first_function(tree: ast.Module, indent: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body = tree.body[0].body if indent and tree.body else tree.body
    node = body[0] if body else None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
        return node
    return None


def _parse_function_at(lines: list[str], index: int, indent: str, name: str) -> int | None:
    """Index of the last line of the function whose ``def`` is ``lines[index]``
    (the longest parseable run of lines from it), or None."""
    offset = 1 if indent else 0
    for end in range(len(lines), index, -1):
        tree = _parse_block(lines[index:end], indent)
        if tree is None:
            continue
        node = _first_function(tree, indent, name)
        return None if node is None else index + node.end_lineno - 1 - offset
    return None


def _decorators_start(lines: list[str], index: int, last: int, indent: str, name: str) -> int:
    """Index of the function's first decorator line (``index`` if none).

    Walks up over ``@`` lines at the def's indentation and deeper lines (a
    multi-line decorator, or the body of the previous function); each ``@``
    candidate is confirmed by parsing.  A statement at the def's level or
    left of it ends the search.
    """
    offset = 1 if indent else 0
    first = index
    for s in range(index - 1, -1, -1):
        text = lines[s]
        if _is_noise(text):
            continue
        here = _indent_of(text)
        if here == indent and text.lstrip().startswith("@"):
            tree = _parse_block(lines[s:last + 1], indent)
            node = tree and _first_function(tree, indent, name)
            # Confirmed when the parsed function's first decorator starts here.
            if node and node.decorator_list and min(d.lineno for d in node.decorator_list) - offset == 1:
                first = s
            continue
        if len(here) <= len(indent):
            break
    return first
