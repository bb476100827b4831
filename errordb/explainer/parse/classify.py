"""What a cleaned line is: a traceback header, a frame, a chain separator, an exception line.

Bare lines (documented because no rule can be exact): a line ``Name: message`` outside a
traceback is an exception only if ``Name`` looks like an exception class (:func:`is_exception_class`):
its last dotted part (ignoring a ``(...)`` suffix) is a builtin exception name, or starts with an
upper-case letter and ends in Error, Exception, Warning, Exit, Interrupt or Iteration with
something before the suffix (``ValueError``, ``torch.OutOfMemoryError``; not ``Error``, ``INFO``,
``Note``, ``http``), or is a capitalised name in a module named ``errors``, ``exceptions`` or
``exc`` (``requests.exceptions.MissingSchema``, ``pydantic.errors.PydanticUndefinedAnnotation``),
or is a module's own ``Error`` or ``Exception`` (``_csv.Error``, ``binascii.Error``). Where the
position proves it is an exception line (after frames, inside group framing, after a chain
separator), any dotted name is accepted (``E: <exception str() failed>``) except log-level words.
"""

from __future__ import annotations

import ast
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
PDB_LOCATION_RE = re.compile(r"> \S.*\(\d{1,12}\)[\w<>]*\(\)$")  # pdb's "> /path/x.py(23)decode()"
SUMMARY_RE = re.compile(r"(?:FAILED|ERROR) (\S+)(?: - (.*))?$")  # pytest's short summary

BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
)
#: Modules that hold a package's exception classes, whatever their names.
EXCEPTION_MODULES = frozenset(("errors", "exceptions", "exc"))
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
    if any(head.endswith(sfx) and len(head) > len(sfx) for sfx in CLASS_SUFFIXES):
        return True
    modules = cls.split("(", 1)[0].split(".")[:-1]
    return bool(modules) and (head in ("Error", "Exception") or any(m in EXCEPTION_MODULES for m in modules))


#: A class as its repr, where a program printed ``type(e)`` before the message (Python 2's
#: ``<type 'exceptions.ImportError'>: No module named x``; ``<class 'KeyError'>: 'x'``).
_CLASS_REPR_RE = re.compile(r"<(?:type|class) '((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)'>: ?(.*)")


def parse_exc_line(s: str, strict: bool) -> tuple[str, str] | None:
    """Split ``Class: message`` (``s`` already stripped); None if it is not an exception line."""
    if s[:1] == "<" and (r := _CLASS_REPR_RE.fullmatch(s)) is not None:
        return (r.group(1), r.group(2).rstrip()) if not strict or is_exception_class(r.group(1)) else None
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
#: then anywhere in the line up to its end ("I get an error: `KeyError: 'x'`", "# raises KeyError: 'x'",
#: "遇到了错误ValueError: ..."). The backticks' message is cut by :func:`_code_span_end`.
_MENTION_RES = (
    re.compile(r"`\s*" + _NAME + r": ?(.*)"),
    re.compile(r"\*\*\s*[_*]?" + _NAME + r": ?(.+?)[_*]?\s*\*\*"),  # bold, italic inside it or not
    re.compile(r"[\"“]\s*" + _NAME + r": ?([^\"”]+?)\s*[\"”]"),
    re.compile(r"(?:^|(?<=\s))'" + _NAME + r": ?([^']+?)\s*'(?=$|[\s.,;:!?)])"),
    re.compile(r"(?<![A-Za-z0-9_.])" + _NAME + r": (.+?)\s*$"),
)
#: Where a sentence goes on after the message it names unmarked, which no message does itself: a
#: comma and words after its last quoted name ("... argument '_use_prebuilt', breaking all code"),
#: or words that end in a comma ("... no attribute 'debug' like this,").
_PROSE_AFTER_QUOTE = re.compile(r"'[^'\s]+'(?=,\s+[a-z][^']*$|\s[^']*,$)")
#: An exception as its repr, as tests and loggers print it: ``TypeError("missing 'ctx'")``.
_REPR_RE = re.compile(r"(?<![\w.])" + _NAME + r"\(((?:\"(?:[^\"\\]|\\.)*\")|(?:'(?:[^'\\]|\\.)*'))\)")
#: VS Code's debugger: ``Exception has occurred: TypeError unhashable type: 'list'``, or the class
#: alone with ``(note: full exception trace is shown ...)`` and the message on the next line.
_DEBUGGER_RE = re.compile(r"Exception has occurred: " + _NAME + r"(?:\s+\(note: [^)]*\))?(?:\s+(.*?))?[\s`]*$")


#: Words of a sentence that says what follows is an error ("This throws an error: `X('...')`").
SAYS_ERROR = re.compile(r"\b(?:error|exception|raises?|raised|throws?|thrown)\b", re.IGNORECASE)


def might_mention(s: str) -> bool:
    """A cheap test that :func:`find_mention` may find something in ``s``."""
    return (":" in s or "(" in s) and (
        any(sfx in s for sfx in CLASS_SUFFIXES) or any(f"{module}." in s for module in EXCEPTION_MODULES)
        or ("`" in s and "(" in s and SAYS_ERROR.search(s) is not None)  # _called_an_error
    )


def _code_span_end(message: str) -> str:
    """A message that followed an opening backtick, cut where its code span closes: at the first
    backtick that does not open a pair of its own (a backtick after a space opens one, as in
    ``except `step` tensors``), else at the end of the line (the span goes on)."""
    pos = message.find("`")
    while pos >= 0:
        if pos and message[pos - 1].isspace() and message[pos + 1 : pos + 2].strip():
            pos = message.find("`", message.find("`", pos + 1) + 1) if "`" in message[pos + 1 :] else -1
            continue
        return message[:pos].strip()
    return message.strip()


def _called_an_error(s: str, m: re.Match[str]) -> bool:
    """Whether a repr of a class not named like an exception (``PrimaryKeyRequired('...')``) is
    one all the same: set off as code, in a sentence that calls it an error."""
    start, end = m.start(), m.end()
    return (
        s[start - 1 : start] == "`" and s[end : end + 1] == "`"
        and SAYS_ERROR.search(s[:start]) is not None and short_name(m.group(1))[:1].isupper()
    )


def find_mention(s: str, *, unmarked: bool = True) -> tuple[str, str] | None:
    """The exception a line of prose names, as (class, message), or None.

    Used only when the input holds no traceback and no exception line: then the best guess at
    what the user hit is the exception they quoted in a sentence. The class must look like an
    exception class out of context (:func:`is_exception_class`). ``unmarked`` False looks only
    for names set off by backticks, bold or quotes, a repr or a debugger's report (a log line
    that says "retrying after ConnectionError: timeout" reports no exception). A debugger's
    report without a message has the message ""; the next line holds it.
    """
    m = _DEBUGGER_RE.search(s)
    if m is not None and is_exception_class(m.group(1)):
        return m.group(1), m.group(2) or ""
    for index, pattern in enumerate(_MENTION_RES if unmarked else _MENTION_RES[:-1]):
        pos = 0
        while (m := pattern.search(s, pos)) is not None:
            if is_exception_class(m.group(1)):
                if index == 0:
                    return m.group(1), _code_span_end(m.group(2))
                tail = _PROSE_AFTER_QUOTE.search(m.group(2)) if index == len(_MENTION_RES) - 1 else None
                return m.group(1), m.group(2)[: tail.end()] if tail else m.group(2)
            pos = m.start() + 1
    for m in _REPR_RE.finditer(s):
        if is_exception_class(m.group(1)) or _called_an_error(s, m):
            try:
                message = ast.literal_eval(m.group(2))
            except (ValueError, SyntaxError):
                continue
            return m.group(1), message
    return None


#: A traceback inside a string of a JSON (or repr) log line: ``"exc_info": "Traceback (most recent
#: call last):\\n  File \\"x.py\\", ..."``.
ESCAPED_HEADER = TB_HEADER + "\\n"
_STRING_RE = re.compile(r"""(["'])((?:(?!\1)[^\\]|\\.)*?Traceback \(most recent call last\):\\n(?:(?!\1)[^\\]|\\.)*)\1?""")
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def unescape(text: str) -> str:
    """A JSON or Python string literal's escapes replaced by what they stand for."""

    def replace(m: re.Match[str]) -> str:
        code = m.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return _ESCAPE_RE.sub(replace, text)


def escaped_traceback(line: str) -> list[str]:
    """The lines of ``line`` with the string that holds an escaped traceback decoded in place:
    what comes before the string, the traceback's lines, a blank line, what comes after it."""
    m = _STRING_RE.search(line)
    if m is None:
        return [line]
    # A blank line after the traceback: the rest of the log line is not its message.
    return [line[: m.start()], *unescape(m.group(2)).split("\n"), "", line[m.end():]]


#: Fields of JSON error bodies that hold a message ("message" too, but it is common in ordinary
#: JSON logs: the fast path does not wake up for it, and it is paired only once a class is seen).
JSON_MESSAGE_KEYS = ("errorMessage", "exc_value")
_JSON_FIELD_RE = re.compile(r'"(exc_type|errorType|type|exc_value|errorMessage|message)"\s*:\s*"((?:[^"\\]|\\.)*)"')
#: Django's debug page: "Exception Type: TooManyRedirects at /path", "Exception Value: Exceeded ...".
_REPORT_FIELD_RE = re.compile(r"Exception (Type|Value):\s*(.*?)\s*$")
#: Fields that name an exception's class whatever it looks like; a "type" field must look like one.
_CLASS_FIELDS = {"exc_type", "errorType", "Type"}


def error_fields(s: str) -> list[tuple[str, str]]:
    """``("class", name)`` or ``("message", text)`` for each field of an error report in ``s``: a
    JSON error body's (AWS Lambda's ``errorType``/``errorMessage``, structlog's
    ``exc_type``/``exc_value``, an HTTP error's ``type``/``message``) or Django's debug page's
    ``Exception Type:``/``Exception Value:`` (whose value may be on the next line: "")."""
    fields = []
    m = _REPORT_FIELD_RE.match(s)
    found = [(m.group(1), m.group(2))] if m is not None else [(k, unescape(v)) for k, v in _JSON_FIELD_RE.findall(s)]
    for key, value in found:
        if key in _CLASS_FIELDS or key == "type":
            name = value.split(" at ", 1)[0] if key == "Type" else value
            if is_exception_class(name) or (key in _CLASS_FIELDS and CLASS_FULL_RE.match(name)):
                fields.append(("class", name))
        elif value or key == "Value":
            fields.append(("message", value))
    return fields
