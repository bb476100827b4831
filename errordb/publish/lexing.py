"""Python source coloured for the site: one regex pass over a snippet, then each line's HTML.

Pygments' Python lexer (a state machine of dozens of rules, a regex match for each token tried
rule by rule, ~1.5 µs a token here even with its rules joined) was a quarter of a full site
build's CPU: a page is one 37-line snippet, ~370 tokens. The pages only tell apart what
``templates/static/style.css`` colours: keywords, ``True``/``False``/``None``, names being
defined, builtins, strings (with the fields of f-strings), numbers, comments, operators and
decorators. One ``finditer`` over one pattern of those, a dictionary for the names and a few
flags find them ~3x faster. Names, punctuation and white space, which nothing colours, are
written without a span.

The classes are Pygments' short names (``k``, ``kc``, ``nf``, ``s2``, ``si``, ``c1``...), so
the page markup and the CSS are those of the rest of the site (shell snippets are still
coloured by Pygments). ``tests/test_site_lexing.py`` checks, over real source files, that
almost every character gets the colour Pygments would give it; where they differ this module
decided on purpose (a builtin Pygments' list lacks, such as ``exec``; a format spec's text).
The word lists are written out here, not read from the running Python, so that every machine
builds the same pages.

The pattern is linear: no two alternatives can match the same text in overlapping ways, so
nothing backtracks far. A string left open runs to the end of its line (one quote) or of the
text (three quotes), as Python would report it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape

from errordb.text import reveal_invisible

_TOKEN = re.compile(
    r"""
    (?P<nl>\n)
    |(?P<ws>[^\S\n]+)
    |(?P<comment>\#[^\n]*)
    |(?P<string>
        (?P<prefix>[rRbBuUfFtT]{1,2})?
        (?:\"\"\"(?:\\[\s\S]|[^\\])*?(?:\"\"\"|\Z)
          |'''(?:\\[\s\S]|[^\\])*?(?:'''|\Z)
          |"(?:\\[\s\S]|[^"\\\n])*(?:"|(?=\n)|\Z)
          |'(?:\\[\s\S]|[^'\\\n])*(?:'|(?=\n)|\Z)))
    |(?P<number>
        0[xXoObB][0-9a-fA-F_]*
        |(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9][0-9_]*)?[jJ]?)
    |(?P<name>[^\W\d]\w*)
    |(?P<decorator>(?<![\w)\]}.])@[^\W\d]\w*)
    |(?P<op>\*\*=?|//=?|>>=?|<<=?|->|:=|!=|[-+*/%&|^~<>=@]=?|\.)
    |(?P<other>.)
    """,
    re.VERBOSE,
)

_KEYWORDS = ("assert async await break class continue def del elif else except finally for global if lambda "
             "nonlocal pass raise return try while with yield as").split()  # fmt: skip
_BUILTINS = ("__import__ abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod "
             "compile complex delattr dict dir divmod enumerate eval exec filter float format frozenset getattr "
             "globals hasattr hash hex id input int isinstance issubclass iter len list locals map max memoryview "
             "min next object oct open ord pow print property range repr reversed round set setattr slice sorted "
             "staticmethod str sum super tuple type vars zip").split()  # fmt: skip
_EXCEPTIONS = ("ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup BlockingIOError "
               "BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError ConnectionError "
               "ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError EncodingWarning "
               "EnvironmentError Exception ExceptionGroup FileExistsError FileNotFoundError FloatingPointError "
               "FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError IndexError "
               "InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError "
               "ModuleNotFoundError NameError NotADirectoryError NotImplementedError OSError OverflowError "
               "PendingDeprecationWarning PermissionError ProcessLookupError PythonFinalizationError "
               "RecursionError ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration "
               "StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError TypeError "
               "UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError "
               "UnicodeWarning UserWarning ValueError Warning WindowsError ZeroDivisionError").split()  # fmt: skip
#: Special methods (the data model's), coloured like a name being defined wherever they appear.
_MAGIC_METHODS = frozenset(
    f"__{name}__"
    for name in (
        "abs add aenter aexit aiter and anext await bool buffer bytes call ceil class_getitem complex contains "
        "copy deepcopy del delattr delete delitem dir divmod enter eq exit float floor floordiv format fspath ge "
        "get getattr getattribute getitem getnewargs getstate gt hash iadd iand ifloordiv ilshift imatmul imod "
        "imul index init init_subclass instancecheck int invert ior ipow irshift isub iter itruediv ixor le len "
        "length_hint lshift lt matmul missing mod mul ne neg new next or pos pow prepare radd rand rdivmod reduce "
        "reduce_ex release_buffer repr reversed rfloordiv rlshift rmatmul rmod rmul ror round rpow rrshift "
        "rshift rsub rtruediv rxor set set_name setattr setitem setstate sizeof str sub subclasscheck "
        "subclasshook truediv trunc xor"
    ).split()
)

#: Name -> class, for the names coloured wherever they stand (but after a dot).
_NAMES = {
    **dict.fromkeys(_BUILTINS, "nb"),
    **dict.fromkeys(_EXCEPTIONS, "ne"),
    **dict.fromkeys(("self", "cls", "Ellipsis", "NotImplemented"), "bp"),
    **dict.fromkeys(_KEYWORDS, "k"),
    **dict.fromkeys(("and", "or", "not", "in", "is"), "ow"),
    **dict.fromkeys(("True", "False", "None"), "kc"),
    **dict.fromkeys(("import", "from"), "kn"),
    **dict.fromkeys(_MAGIC_METHODS, "fm"),
}
#: The class of the tokens that are one class whatever their text.
_CLASS = {"comment": "c1", "number": "m", "decorator": "nd"}
#: After ``def``/``class``, the next name is the one being defined.
_DEFINES = {"def": "nf", "class": "nc"}
#: Classes of the names that stay coloured after a dot (``x.__init__``, ``x.if`` is no Python).
_AFTER_DOT = {"fm", "k", "ow", "kc", "kn"}
#: ``match`` and ``case`` are keywords at the head of a statement, followed by their subject.
_SOFT_KEYWORDS = {"match", "case"}
_NO_SUBJECT = re.compile(r"[ \t]*(?:[:,;=^&|@~)\]}.]|(?:" + "|".join(_KEYWORDS + ["and", "or", "not", "in", "is"]) + r")\b|\n|\Z)")
#: In an f-string, a field's expression ends at one of these (outside brackets and strings).
_FIELD_END = re.compile(r"""[{}()\[\]'"!:=]""")
_BRACES = re.compile(r"\{\{|\}\}|[{}]")
#: The HTML of each operator the pattern can match.
_OPERATORS = {
    op: f'<span class="o">{escape(op, quote=False)}</span>'
    for op in ["**", "//", ">>", "<<", "->", ":=", "!=", "."] + [c + eq for c in "-+*/%&|^~<>=@" for eq in ("", "=")] + ["**=", "//=", ">>=", "<<="]
}


#: Lines coloured before, by their text (see :func:`python_lines`); forgotten all at once when
#: full. Only lines of code's usual length are kept, so the memory stays bounded (~10 MB for
#: real code's lines).
_LINES: dict[str, str] = {}
LINES_MOST = 20_000
LINE_LONGEST = 200


def python_lines(source: str) -> list[str]:
    """The HTML of each line of Python ``source`` (``\\n`` line ends), escaped and coloured.

    Every state of the lexer ends with a line (a string over several lines is one token, so its
    lines never end one), so a line that starts at a line end and ends at the next is coloured
    the same wherever it is: such lines are remembered by their text. Snippets are windows of
    source files, and a line is often in many (blank lines, ``else:``, ``return None``, a
    file's lines in the windows of its other errors).
    """
    plain = source.isascii()  # invisible characters (shown as <U+XXXX>) are never ASCII
    lines: list[str] = []
    known = _LINES
    position, end = 0, len(source)
    while position <= end:
        line_end = source.find("\n", position)
        if line_end >= 0:
            html = known.get(source[position:line_end])
            if html is not None:
                lines.append(html)
                position = line_end + 1
                continue
        position = _lex_line(source, position, plain, lines)
    return lines


def _lex_line(source: str, start: int, plain: bool, lines: list[str]) -> int:
    """Lex ``source`` from ``start`` (a line's start) to the end of its line, or of the string
    that continues on the next lines; append the HTML of the lines to ``lines``. Returns where
    the next line starts (past the end when this was the last)."""
    # One loop over the tokens, each turned into HTML where it is found: this runs for every
    # token of every page. Text that nothing colours is written as it is (names and white space
    # need no escaping in an ASCII snippet).
    show = _escape if plain else escape_visible
    first = len(lines)
    line: list[str] = []  # the current line's HTML so far
    defining = None  # "nf"/"nc" right after def/class
    after_dot = False  # a name right after "." is an attribute: not a builtin
    importing = False  # module paths after import/from: uncoloured, their dots too
    head = True  # nothing but white space on this line so far (for match/case)
    for token in _TOKEN.finditer(source, start):
        kind = token.lastgroup
        text = token.group()
        if kind == "ws":
            line.append(text if plain else show(text))  # U+2028 is white space, and invisible
            continue
        if kind == "name":
            css = _NAMES.get(text)
            if defining is not None:
                css = css if css == "fm" else defining
            elif importing:
                css = css if css in ("kn", "k", "fm") else None
            elif after_dot:
                css = css if css in _AFTER_DOT else None
            elif css is None and text in _SOFT_KEYWORDS and head and not _NO_SUBJECT.match(source, token.end()):
                css = "k"
            defining = _DEFINES.get(text) if css == "k" and not after_dot else None
            importing = importing or (css == "kn" and head)  # not "raise ... from None"
            after_dot = head = False
            line.append(text if css is None else f'<span class="{css}">{text}</span>')  # \w only: nothing to escape
            continue
        defining = None
        after_dot = text == "."
        head = kind == "nl"
        if kind == "nl":
            html = "".join(line)
            lines.append(html)
            # One line, from a line end to the next: the same anywhere.
            if len(lines) == first + 1 and token.start() - start <= LINE_LONGEST:
                if len(_LINES) >= LINES_MOST:
                    _LINES.clear()
                _LINES[source[start : token.start()]] = html
            return token.end()
        elif kind == "op":
            line.append(_OPERATORS[text] if not (importing and after_dot) else text)
        elif kind == "other":
            line.append(show(text))
        elif kind != "string":
            line.append(f'<span class="{_CLASS[kind]}">{show(text)}</span>')
        else:
            prefix = token.group("prefix") or ""
            if not ("f" in prefix or "F" in prefix or "t" in prefix or "T" in prefix):
                parts = _spans(_string_class(text, len(prefix)), text, show)
            else:
                parts = _fstring(text, len(prefix), show)
            line.append(parts[0])
            for part in parts[1:]:  # a string over several lines: its spans end with each line
                lines.append("".join(line))
                line.clear()
                line.append(part)
    lines.append("".join(line))  # the last line (not remembered: an open string ends with the text)
    return len(source) + 1


def _spans(css: str, text: str, show: Callable[[str], str]) -> list[str]:
    """``text`` in spans of class ``css``, as the HTML of each of its lines."""
    return [f'<span class="{css}">{show(part)}</span>' if part else "" for part in text.split("\n")]


def _string_class(text: str, prefix: int) -> str:
    return "s2" if text[prefix : prefix + 1] == '"' else "s1"


class _Html:
    """HTML lines made piece by piece (for f-strings, whose fields are Python again)."""

    def __init__(self, show: Callable[[str], str]):
        self.show = show
        self.lines: list[list[str]] = [[]]

    def add(self, css: str, text: str) -> None:
        self._extend(_spans(css, text, self.show))

    def python(self, source: str) -> None:
        self._extend(python_lines(source))

    def _extend(self, html_lines: list[str]) -> None:
        """The first line goes on the current one; each next one starts a line."""
        self.lines[-1].append(html_lines[0])
        self.lines.extend([part] for part in html_lines[1:])

    def joined(self) -> list[str]:
        return ["".join(parts) for parts in self.lines]


def _fstring(text: str, prefix: int, show: Callable[[str], str]) -> list[str]:
    """An f-string's HTML lines: its text as a string, each ``{field}`` as Python."""
    out = _Html(show)
    css = _string_class(text, prefix)
    quote = text[prefix : prefix + 3] if text[prefix : prefix + 3] in ('"""', "'''") else text[prefix]
    closed = len(text) >= prefix + 2 * len(quote) and text.endswith(quote)
    body_end = len(text) - len(quote) if closed else len(text)
    out.add("sa", text[:prefix])
    out.add(css, text[prefix : prefix + len(quote)])
    position = prefix + len(quote)
    body = text[:body_end]
    for brace in _BRACES.finditer(body, position):
        if brace.start() < position:
            continue  # inside a field already read
        if brace.start() > position:
            out.add(css, body[position : brace.start()])
        if len(brace.group()) == 2:
            out.add("se", brace.group())
            position = brace.end()
        elif brace.group() == "}":  # a lone "}": not Python, shown as it is
            out.add(css, "}")
            position = brace.end()
        else:
            position = _field(out, body, brace.end())
    if position < len(body):
        out.add(css, body[position:])
    if closed:
        out.add(css, quote)
    return out.joined()


def _field(out: _Html, body: str, start: int, nested: bool = False) -> int:
    """The field that opens at ``body[start - 1]``, into ``out``: ``{``, its expression as
    Python, then ``=``, ``!r`` and ``:spec`` as interpolation (a spec's own fields too, one
    level deep, as Python allows), ``}``. Returns where the field ends."""
    out.add("si", "{")
    depth, position = 0, start
    while True:
        found = _FIELD_END.search(body, position)
        if found is None:  # open to the end: all of it is expression
            out.python(body[start:])
            return len(body)
        char, position = found.group(), found.end()
        if char in "([{":
            depth += 1
        elif char in ")]" or (char == "}" and depth):
            depth = max(depth - 1, 0)
        elif char in "'\"":
            string = _TOKEN.match(body, found.start())  # a string inside the expression: skip it
            position = string.end() if string is not None else position
        elif depth == 0 and (char == "}" or (char in "!:" and body[position : position + 1] != "=") or (char == "=" and _is_debug(body, found.start()))):
            break
    out.python(body[start : found.start()])
    if char == "}":
        out.add("si", "}")
        return position
    spec = position = found.start()
    while position < len(body) and body[position] != "}":
        if body[position] == "{" and not nested:
            if position > spec:
                out.add("si", body[spec:position])
            position = spec = _field(out, body, position + 1, nested=True)
        else:
            position += 1
    if position > spec:
        out.add("si", body[spec:position])
    if position < len(body):
        out.add("si", "}")
        position += 1
    return position


def _is_debug(body: str, equals: int) -> bool:
    """Whether the ``=`` at ``equals`` ends a self-documenting field (``{x=}``, ``{x = !r}``)
    rather than being part of ``==``, ``<=``, ``>=`` or ``!=``."""
    after = body[equals + 1 :].lstrip(" ")[:1]
    return body[equals - 1 : equals] not in ("=", "!", "<", ">") and after in ("}", "!", ":")


def _escape(text: str) -> str:
    return escape(text, quote=False)


def escape_visible(text: str) -> str:
    """``text`` as HTML, with invisible characters written ``<U+XXXX>``: bidi controls would
    make the browser draw code in another order than it runs ("Trojan Source")."""
    return escape(reveal_invisible(text), quote=False)
