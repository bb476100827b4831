"""Syntax colouring for the static site, done once at build time by Pygments.

The output is our own markup, not Pygments' ``HtmlFormatter``: one ``<span class="line">`` per
source line, so that every line can carry its real file line number (``data-n``, shown by CSS and
left out of copied text), an anchor (``#L2892``) and, for the throwing line, a highlight. Tokens
that span lines (docstrings) are cut at each newline so the spans always nest.

Token classes are Pygments' short names (``k`` keyword, ``s2`` string, ``c1`` comment…);
``templates/static/style.css`` colours them for the light and the dark scheme. Nothing here
executes the code it colours: Pygments only lexes text.
"""

from __future__ import annotations

import functools
import re
from html import escape

from markupsafe import Markup
from pygments.lexer import Lexer
from pygments.lexers import BashLexer, PythonLexer, TextLexer
from pygments.token import STANDARD_TYPES, _TokenType

from errordb.text import reveal_invisible

#: A line after which Pygments' Python lexer may not be back in its first state: a triple
#: quote, a backslash at the end, or a keyword at the end whose rule reads on into the next line
#: (prose lexed as code, in a window that starts inside a docstring).
_SPANNING = re.compile(r'"""|\'\'\'|\\$|\b(?:class|def|from|import|as)\s*$')

#: Languages the site colours; anything else is shown as plain text.
LANGUAGES = ("python", "shell", "text")


@functools.cache
def _lexer(language: str) -> Lexer:
    # stripnl=False keeps leading blank lines, which would otherwise shift every line number.
    options = {"stripnl": False, "stripall": False, "ensurenl": False}
    lexers = {"python": PythonLexer, "shell": BashLexer}
    return lexers.get(language, TextLexer)(**options)


@functools.cache
def _css_class(token_type: _TokenType) -> str:
    # Walk up to the nearest type with a short name (Token.Name.Function.Magic -> "fm" or "nf").
    while token_type not in STANDARD_TYPES and token_type.parent is not None:
        token_type = token_type.parent
    return STANDARD_TYPES.get(token_type, "")


@functools.lru_cache(maxsize=4096)
def _highlighted(source: str, language: str) -> tuple[str, ...]:
    # Records of one file or one template share snippets (example fixes, validation code).
    text = _lexer_input(source)
    if not text:
        return ()
    lines = text.split("\n")
    if text.endswith("\n") and len(lines) > 1:
        lines.pop()  # a source ending in "\n" does not have an extra, empty last line
    if language != "python":
        return tuple(_lexed("\n".join(lines), language))
    # Pygments lexes ~40 lines of Python in ~2 ms, most of a page's time; but lines recur (the
    # windows of one file overlap, code repeats across files), so they are lexed one at a time
    # and remembered. That gives Pygments' own colours as long as no construct spans lines: from
    # the first line that could start one (:data:`_SPANNING`) on, the rest of the snippet is
    # lexed as one text. tests/test_site_highlight.py compares the two ways over windows of real
    # source files.
    spanning = next((i for i, line in enumerate(lines) if _SPANNING.search(line)), len(lines))
    head = [_python_line(line) for line in lines[:spanning]]
    return tuple(head + (_lexed("\n".join(lines[spanning:]), "python") if spanning < len(lines) else []))


# Room for the distinct lines of one large project's harvest (sglang: 131k, about 45 MB), so that
# a line common to far-apart files is not lexed again.
@functools.lru_cache(maxsize=1 << 17)
def _python_line(line: str) -> str:
    return _lexed(line + "\n", "python")[0]


def _lexed(text: str, language: str) -> list[str]:
    """The HTML of each line of ``text`` (already escaped: plain strings, as a page has ~40 of them)."""
    # Tokens become runs of one class; neighbours of one class are merged so pages stay small.
    lines: list[str] = []
    line: list[str] = []  # the current line's finished runs, as HTML
    run_css: str | None = None  # the open run's class (None: the line has no run yet)
    run: list[str] = []  # the open run's text
    lexer = _lexer(language if language in LANGUAGES else "text")
    for _, token_type, value in lexer.get_tokens_unprocessed(text):
        css = _css_class(token_type)
        for index, piece in enumerate(value.split("\n")) if "\n" in value else ((0, value),):
            if index:  # a new line: close the open run and the line
                if run_css is not None:
                    line.append(_run_html(run_css, "".join(run)))
                lines.append("".join(line))
                line, run_css, run = [], None, []
            if not piece:
                continue
            if piece.isspace():
                css = ""  # white space is never coloured: it joins only an uncoloured run
            if run_css is not None and run_css == css:
                run.append(piece)
            else:
                if run_css is not None:
                    line.append(_run_html(run_css, "".join(run)))
                run_css, run = css, [piece]
    if run_css is not None:
        line.append(_run_html(run_css, "".join(run)))
    lines.append("".join(line))
    return lines


def _lexer_input(source: str) -> str:
    """``source`` as Pygments' ``get_tokens`` hands it to the lexer with our options (no
    stripping, no tab expansion, no added newline): without a BOM, newlines made ``\n``."""
    return source.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def _run_html(css: str, text: str) -> str:
    # Invisible characters written <U+XXXX>: bidi controls would make the browser draw code in
    # another order than it runs ("Trojan Source").
    escaped = escape(reveal_invisible(text), quote=False)
    return f'<span class="{css}">{escaped}</span>' if css and css != "w" else escaped


def code_block(
    source: str,
    *,
    language: str = "python",
    first_line: int | None = None,
    highlight: int | None = None,
    anchors: bool = False,
    label: str | None = None,
) -> Markup:
    """A ``<pre>`` block of ``source``, coloured.

    ``first_line`` numbers the lines from that file line on (``None``: no numbers);
    ``highlight`` is the file line to mark; ``anchors`` gives each line an ``id="L<n>"``;
    ``label`` names the block for screen readers.
    """
    out = []
    for offset, html in enumerate(_highlighted(source, language)):
        number = first_line + offset if first_line is not None else None
        classes = "line"
        attributes = ""
        if number is not None:
            attributes += f' data-n="{number}"'
            if anchors:
                attributes += f' id="L{number}"'
            if number == highlight:
                classes += " hl"
        # <mark> says "highlighted" to assistive technology too, not only by colour.
        tag = "mark" if number is not None and number == highlight else "span"
        out.append(f'<{tag} class="{classes}"{attributes}>{html}</{tag}>')
    numbered = " numbered" if first_line is not None else ""
    # A scrollable, focusable block is a labelled region for assistive technology.
    aria = f' role="region" aria-label="{escape(label)}"' if label else ""
    body = "\n".join(out)
    return Markup(f'<pre class="code lang-{escape(language)}{numbered}" tabindex="0"{aria}><code>{body}</code></pre>')
