"""Reading a record's code fields (``sourceCode``, ``exampleFix``, snippets) without executing them."""

from __future__ import annotations

import ast
import re
import textwrap

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
    """The class a ``raise`` line raises (``raise ValueError(`` gives ``ValueError``); an
    ``assert`` line raises ``AssertionError``."""
    match = _RAISE.match(line)
    if match is None:
        return "AssertionError" if line.lstrip().startswith("assert ") else None
    return match.group(1)


# Snippets longer than this are not even parsed (records hold short excerpts).
MAX_SNIPPET_CHARS = 100_000
_FIX_MARKER = re.compile(r"^\s*#\s*(before|after)\b.*$", re.IGNORECASE)


def split_example_fix(text: str | None) -> dict[str, str]:
    """Split an ``exampleFix`` into its ``# before`` / ``# after`` parts.

    Returns e.g. ``{"before": "model.f(None)", "after": "model.f([0, 1, 2])"}``.
    Text before the first marker (or all of it, without markers) is under
    ``""``.  Surrounding blank lines of each part are dropped.
    """
    parts: dict[str, list[str]] = {}
    current = ""
    for line in (text or "").splitlines():
        marker = _FIX_MARKER.match(line)
        if marker:
            current = marker.group(1).lower()
            parts.setdefault(current, [])
            continue
        parts.setdefault(current, []).append(line)
    cleaned = {key: "\n".join(lines).strip("\n") for key, lines in parts.items()}
    return {key: value for key, value in cleaned.items() if value.strip() or key}


# Commands whose first word alone identifies a shell line.
_SHELL_COMMANDS = frozenset("""
    python python3 pip pip3 uv uvx conda mamba poetry pipx export cd bash sh zsh
    sudo docker podman kubectl torchrun accelerate deepspeed git curl wget apt
    apt-get yum brew source env make cmake nvidia-smi srun sbatch mpirun ray
    huggingface-cli sglang vllm ls cat echo rm mkdir cp mv chmod
""".split())
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+")
_COMMAND_WORD = re.compile(r"^[A-Za-z0-9_./~-]+$")


def _looks_like_shell_line(line: str) -> bool:
    line = line.strip()
    if line.startswith("$ "):
        return True
    while _ENV_ASSIGNMENT.match(line):  # CUDA_VISIBLE_DEVICES=0 python ...
        line = _ENV_ASSIGNMENT.sub("", line, count=1)
    words = line.split()
    if not words or not _COMMAND_WORD.match(words[0]):
        return False
    if words[0] in _SHELL_COMMANDS or words[0].startswith(("./", "/", "~/")):
        return True
    # ``tool sub --flag value``: an option word after a bare command word.
    return any(word.startswith("-") and len(word) > 1 and word[1:2] != " " for word in words[1:])


def snippet_language(text: str | None) -> str:
    """Classify a record snippet without running it.

    ``"python"``  -- parses as Python;
    ``"shell"``   -- does not parse, and every command line looks like a shell
                     command (``python -m sglang.launch_server --pp 2 ...``);
    ``"empty"``   -- missing, or only comments / blank lines;
    ``"invalid"`` -- neither (e.g. broken Python).
    """
    if text is None:
        return "empty"
    if len(text) > MAX_SNIPPET_CHARS:
        return "invalid"
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):  # shell line continuation
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    if pending:
        logical.append(pending)
    if not logical:
        return "empty"
    try:
        ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        if all(_looks_like_shell_line(line) for line in logical):
            return "shell"
        return "invalid"
    return "python"
