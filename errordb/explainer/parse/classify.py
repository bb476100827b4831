"""What a cleaned line is: a traceback header, a frame, a chain separator, an exception line.

Bare lines (documented because no rule can be exact): a line ``Name: message`` outside a
traceback is an exception only if ``Name`` looks like an exception class (:func:`is_exception_class`):
its last dotted part (ignoring a ``(...)`` suffix) is a builtin exception name, or starts with an
upper-case letter and ends in Error, Exception, Warning, Exit, Interrupt or Iteration with
something before the suffix (``ValueError``, ``torch.OutOfMemoryError``; not ``Error``, ``INFO``,
``Note``, ``http``). Where the position proves it is an exception line (after frames, inside
group framing, after a chain separator), any dotted name is accepted (``E: <exception str()
failed>``) except log-level words.
"""

from __future__ import annotations

import builtins
import re

TB_HEADER = "Traceback (most recent call last):"
GROUP_TB_HEADER = "Exception Group Traceback (most recent call last):"
CAUSE_LINE = "The above exception was the direct cause of the following exception:"
CONTEXT_LINE = "During handling of the above exception, another exception occurred:"

# `File "x", line N, in f`; also faulthandler's `File "x", line N in f` and SyntaxError's
# `File "x", line N`. Line numbers are capped at 12 digits so int() never sees a huge string.
FRAME_RE = re.compile(r'File "(.*?)", line (\d{1,12}|\?\?\?)(?:,? in (.*))?$')
_IDENT = r"(?:[^\W\d]\w*|<\w+>)"
_CLASS = _IDENT + r"(?:\." + _IDENT + r")*(?:\([\w.]{1,200}\))?"
_EXC_RE = re.compile("(" + _CLASS + r")(?:: ?(.*))?$")
CLASS_FULL_RE = re.compile(_CLASS + "$")
GROUP_SUFFIX_RE = re.compile(r"\(\d{1,12} sub-exceptions?\)$")
LOC_RE = re.compile(r"(\S+?):(\d{1,12}):(?: (.*))?$")  # "path:N: rest" (pytest, warnings)
SUMMARY_RE = re.compile(r"(?:FAILED|ERROR) (\S+)(?: - (.*))?$")  # pytest's short summary

BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
)
CLASS_SUFFIXES = ("Error", "Exception", "Warning", "Exit", "Interrupt", "Iteration")
# Words that head ordinary log lines ("INFO: ...", "Note: ...", "https://...") and are never
# taken as an exception class, even where an exception line is expected.
_NOT_CLASSES = frozenset(
    "debug info notice note warn warning error critical fatal trace hint tip http https ftp file "
    "usage see".split()
)


def short_name(cls: str) -> str:
    """``torch.cuda.OutOfMemoryError`` -> ``OutOfMemoryError`` (a ``(...)`` suffix dropped)."""
    return cls.split("(", 1)[0].rsplit(".", 1)[-1]


def is_exception_class(cls: str) -> bool:
    """Whether ``cls`` looks like an exception class out of context (see "Bare lines")."""
    short = short_name(cls)
    if short in BUILTIN_EXCEPTIONS:
        return True
    head = short.lstrip("_")
    if not head or not head[0].isupper():
        return False
    if head.endswith("RemoteTraceback"):
        return True
    return any(head.endswith(sfx) and len(head) > len(sfx) for sfx in CLASS_SUFFIXES)


def parse_exc_line(s: str, strict: bool) -> tuple[str, str] | None:
    """Split ``Class: message`` (``s`` already stripped); None if it is not an exception line."""
    m = _EXC_RE.match(s)
    if m is None:
        return None
    cls = m.group(1)
    if strict:
        if not is_exception_class(cls):
            return None
    elif cls.lower() in _NOT_CLASSES and cls not in BUILTIN_EXCEPTIONS:
        return None
    return cls, (m.group(2) or "").rstrip()


def separator_kind(s: str) -> str | None:
    """``cause`` or ``context`` for the two lines CPython prints between chained exceptions."""
    if s == CAUSE_LINE:
        return "cause"
    if s == CONTEXT_LINE:
        return "context"
    return None


def is_caret_line(s: str) -> bool:
    """3.11+ position markers (``^^^^``, ``~~~^^^``) and SyntaxError's ``^``."""
    return not s.strip("^~ ")


def line_number(s: str) -> int | None:
    """A frame's line number as printed (``???`` when unknown)."""
    return None if s == "???" else int(s)


def mentions_traceback(s: str) -> bool:
    """Whether ``s`` holds a traceback header or is a frame line."""
    return "Traceback (most recent call last)" in s or (
        s.lstrip().startswith("File ") and FRAME_RE.match(s.lstrip()) is not None
    )


_NAME = r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)"
#: An exception named inside prose, most telling first: in backticks, in bold, in double or single quotes,
#: then anywhere in the line up to its end ("I get an error: `KeyError: 'x'`", "# raises KeyError: 'x'").
_MENTION_RES = (
    re.compile(r"`\s*" + _NAME + r": ?([^`]*?)\s*`"),
    re.compile(r"\*\*\s*" + _NAME + r": ?(.+?)\s*\*\*"),
    re.compile(r"[\"“]\s*" + _NAME + r": ?([^\"”]+?)\s*[\"”]"),
    re.compile(r"(?:^|(?<=\s))'" + _NAME + r": ?([^']+?)\s*'(?=$|[\s.,;:!?)])"),
    re.compile(r"(?:^|[\s(])" + _NAME + r": (.+?)\s*$"),
)


def find_mention(s: str, *, unmarked: bool = True) -> tuple[str, str] | None:
    """The exception a line of prose names, as (class, message), or None.

    Used only when the input holds no traceback and no exception line: then the best guess at
    what the user hit is the exception they quoted in a sentence. The class must look like an
    exception class out of context (:func:`is_exception_class`). ``unmarked`` False looks only
    for names set off by backticks, bold or quotes (a log line that says "retrying after
    ConnectionError: timeout" reports no exception).
    """
    for pattern in _MENTION_RES if unmarked else _MENTION_RES[:-1]:
        for m in pattern.finditer(s):
            if is_exception_class(m.group(1)):
                return m.group(1), m.group(2)
    return None
