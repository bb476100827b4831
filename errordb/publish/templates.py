"""The jinja2 environment of the site: autoescaping on, and the few helpers templates use.

Autoescape is on for every template (``.html`` and ``.xml`` in particular), undefined names are
errors rather than empty strings, and record text reaches markup only through the ``rich``
filter (:func:`errordb.publish.text.rich_text`) or :func:`errordb.publish.highlight.code_block`, both
of which escape it first.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2
from markupsafe import Markup

from errordb.text import reveal_invisible
from errordb.publish.highlight import code_block
from errordb.publish.text import rich_text, safe_https_url, shorten


@jinja2.pass_context
def _link(context: jinja2.runtime.Context, target: list[str] | tuple[str, ...]) -> str:
    """The relative link from the page being rendered to the site file ``target``."""
    return context["root"] + "/".join(target)


@jinja2.pass_context
def _asset(context: jinja2.runtime.Context, name: str) -> str:
    return context["root"] + "static/" + name


def _code(source: str | None, language: str = "python", first_line: int | None = None, highlight: int | None = None, anchors: bool = False, label: str | None = None) -> Markup:
    return code_block(source or "", language=language, first_line=first_line, highlight=highlight, anchors=anchors, label=label)


def _plural(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count:,} {singular if count == 1 else (plural or singular + 's')}"


@functools.lru_cache(maxsize=8)
def environment(templates: Path) -> jinja2.Environment:
    """The environment for the templates in ``templates`` (one per folder and process). jinja2
    reads a template again when its file has changed since (``errordb serve`` renders with the
    templates as they are now)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "xml"), default_for_string=True, default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    # visible: bidi controls and invisible characters as <U+XXXX>, for text shown as code.
    env.filters.update(rich=rich_text, shorten=shorten, https=safe_https_url, plural=_plural, visible=reveal_invisible)
    env.globals.update(link=_link, asset=_asset, code=_code)
    return env
