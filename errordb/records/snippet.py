"""Reading a record's source window (``sourceCode``) without executing it."""

from __future__ import annotations

import re

_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_CLASS = re.compile(r"^(\s*)class\s+([A-Za-z_][A-Za-z0-9_]*)\b")
_RAISE = re.compile(r"^\s*raise\s+([A-Za-z_][A-Za-z0-9_.]*)")


def snippet_lines(source: str) -> list[str]:
    """The snippet's lines (a trailing newline does not make an extra line)."""
    return source.split("\n") if source else []


def line_at(source: str, start: int, line_number: int) -> str | None:
    """The text of file line ``line_number`` in a snippet that begins at file line ``start``."""
    lines = snippet_lines(source)
    index = line_number - start
    return lines[index] if 0 <= index < len(lines) else None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def enclosing_function(source: str, start: int, line_number: int) -> str | None:
    """Name of the innermost ``def`` in the snippet that contains file line ``line_number``.

    Works on indentation alone, since a window cut out of a file rarely parses as Python.
    """
    lines = snippet_lines(source)
    index = line_number - start
    if not 0 <= index < len(lines):
        return None
    target = lines[index]
    depth = _indent(target) if target.strip() else None
    for i in range(index - 1, -1, -1):
        line = lines[i]
        if not line.strip():
            continue
        indent = _indent(line)
        if depth is None:
            depth = indent + 1
        if indent >= depth:
            continue
        match = _DEF.match(line)
        if match:
            return match.group(2)
        if _CLASS.match(line) or indent == 0:
            return None
        depth = indent
    return None


def enclosing_class(source: str, start: int, line_number: int) -> str | None:
    """Name of the ``class`` around the function that contains ``line_number``, when visible."""
    lines = snippet_lines(source)
    index = line_number - start
    if not 0 <= index < len(lines):
        return None
    depth = _indent(lines[index])
    for i in range(index - 1, -1, -1):
        line = lines[i]
        if not line.strip() or _indent(line) >= depth:
            continue
        match = _CLASS.match(line)
        if match:
            return match.group(2)
        depth = _indent(line)
    return None


def raised_class(line: str) -> str | None:
    """The class a ``raise`` line raises (``raise ValueError(`` gives ``ValueError``)."""
    match = _RAISE.match(line)
    return match.group(1) if match else None
