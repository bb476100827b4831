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


def compile_pattern(pattern: str) -> Any:
    """Compile ``pattern`` with RE2 after checking it is valid Python ``re`` syntax too.

    Raises :class:`PatternError` with a message that says what is wrong.
    """
    if "\x00" in pattern:
        raise PatternError("must not contain NUL")
    try:
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
