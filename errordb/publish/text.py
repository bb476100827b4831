"""Record text to HTML for the site: everything escaped, only ``https://`` links made links.

Record fields are untrusted (a hand-edited database can hold anything). The templates escape
every value (jinja2 autoescape); the one place markup is *made* from record text is
:func:`rich_text`, which escapes the text itself and adds only two things: ``<code>`` for
`backtick` spans, and ``<a>`` for ``https://`` URLs. A ``javascript:``, ``data:`` or ``http:``
URL stays plain text.
"""

from __future__ import annotations

import re
from html import escape

from markupsafe import Markup

# An https URL up to white space or a character that cannot be part of one in prose.
_URL = re.compile(r"https://[^\s<>\"'`]+")
_CODE = re.compile(r"`([^`\n]{1,500})`")
_TOKEN = re.compile(f"{_CODE.pattern}|{_URL.pattern}")
# Prose punctuation that ends a sentence rather than the URL it follows.
_TRAILING = ".,;:!?)]}"
_SAFE_HOST = re.compile(r"https://[A-Za-z0-9.-]+(?::\d+)?(?:[/?#]|\Z)")
# White space (``\s`` is str.isspace()), control characters, and what could end an attribute.
_UNSAFE_URL_CHARACTER = re.compile(r"[\s\x00-\x1f<>\"'`\\]")


def safe_https_url(value: object) -> str | None:
    """``value`` when it is an ``https://`` URL with a plain host name, else ``None``."""
    if not isinstance(value, str) or len(value) > 4000:
        return None
    if _UNSAFE_URL_CHARACTER.search(value):
        return None
    return value if _SAFE_HOST.match(value) else None


def _link(url: str) -> str:
    trail = ""
    while url and url[-1] in _TRAILING:
        # Keep a closing bracket that closes one opened inside the URL (wiki-style links).
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break
        trail = url[-1] + trail
        url = url[:-1]
    safe = safe_https_url(url)
    if safe is None:
        return escape(url + trail)
    return f'<a href="{escape(safe)}" rel="nofollow noopener">{escape(safe)}</a>{escape(trail)}'


def rich_text(text: str | None) -> Markup:
    """``text`` as HTML: escaped, with `code` spans and ``https://`` links."""
    if not text:
        return Markup("")
    out: list[str] = []
    position = 0
    for match in _TOKEN.finditer(text):
        out.append(escape(text[position : match.start()]))
        if match.group(1) is not None:
            out.append(f"<code>{escape(match.group(1))}</code>")
        else:
            out.append(_link(match.group(0)))
        position = match.end()
    out.append(escape(text[position:]))
    return Markup("".join(out))


def shorten(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" .,;:") + "…"
