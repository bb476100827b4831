"""Rendering explanations and records for people: the terminal and Markdown.

Record text is untrusted: every piece of it passes :func:`clean` (no terminal escape sequences
or other control characters reach the user's terminal, and invisible formatting characters are
shown as ``<U+XXXX>``), and Markdown output puts record text in code spans or escapes it, so a
record cannot inject links or markup into a GitHub issue.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from collections.abc import Mapping
from typing import Any

from errordb.records.conventions import SOURCE_TREE
from errordb.records.snippet import snippet_language, snippet_lines
from errordb.text import clean

#: What can make Markdown of text anywhere in a line: emphasis, code, links, HTML and autolinks,
#: strikethrough, entities, table cells (GitHub's). Brackets escaped, "(" and "!" form nothing.
_MD_SPECIAL = re.compile(r"([\\`*\[\]<~&|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")  # "_" inside a word is plain
#: ... and at the start of a line: a heading, a quote, a list item, a setext underline.
_MD_LINE_START = re.compile(r"^(\s*)([#>+=-]|\d+(?=[.)]))", re.MULTILINE)


def site_url(given: str | None = None, dataset: str | None = None) -> str | None:
    """Where the site is published: ``given`` (``--site-url``), else ``$ERRORDB_SITE_URL``, else
    the dataset's own setting (``dataset``, from its ``dataset.toml``); an http(s) URL ending in
    ``/``, or None when none is set (links then say ``errordb show ID``)."""
    from errordb.records.conventions import normal_site_url

    value = (given or os.environ.get("ERRORDB_SITE_URL") or "").strip()
    if not value:
        return dataset or None
    site = normal_site_url(value)
    if site is None:
        from errordb.errors import ErrordbError

        raise ErrordbError(f"site URL {value!r}: give an http(s) URL such as https://errordb.example/ (--site-url or ERRORDB_SITE_URL)")
    return site


def site_urls(record: dict[str, Any], base: str | None) -> tuple[str, str] | None:
    """The record's page and JSON URLs on the site published at ``base`` (None: no site)."""
    if base is None:
        return None
    return f"{base}errors/{clean(record['slug'])}/", f"{base}api/errors/{record['id']}.json"


class Style:
    """ANSI styles, or nothing when colour is off."""

    def __init__(self, color: bool):
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def red(self, text: str) -> str:
        return self._wrap("31;1", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)

    def highlight(self, text: str) -> str:
        """Search matches: bold yellow."""
        return self._wrap("1;33", text)


def use_color(stream: Any, requested: bool | None) -> bool:
    """``--color``/``--no-color`` when given; else never with ``NO_COLOR`` set, always with
    ``FORCE_COLOR`` or ``CLICOLOR_FORCE`` set (not "0": the conventions of no-color.org and
    bixense.com/clicolors, for CI logs and pagers), and otherwise only on a terminal."""
    if requested is not None:
        return requested
    if os.environ.get("NO_COLOR"):
        return False
    if any(os.environ.get(name, "0") not in ("", "0") for name in ("FORCE_COLOR", "CLICOLOR_FORCE")):
        return True
    return bool(getattr(stream, "isatty", lambda: False)())


def terminal_width() -> int:
    return max(40, min(shutil.get_terminal_size((100, 24)).columns, 120))


def _para(text: str, width: int, indent: str = "  ") -> str:
    return "\n".join(
        textwrap.fill(line, width=width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False,
                      break_long_words=False) if line.strip() else ""  # a path or URL longer than the line stays whole
        for line in clean(text).split("\n")
    )


def cut_line(line: str, width: int | None) -> str:
    """A line as it fits ``width`` (None: as it is): cut with a marker, never wrapped (a wrapped
    line of code or a table's row reads as two)."""
    return line if width is None or len(line) <= width else line[: max(width - 1, 1)] + "…"


def _code(text: str, indent: str = "    ", width: int | None = None) -> str:
    return "\n".join(cut_line(indent + line, width) for line in clean(text).split("\n"))


def _labelled(label: str, text: str, style: Style, width: int, indent: str = "  ") -> str:
    """``label text`` wrapped at word boundaries to ``width``, the label styled as a heading."""
    wrapped = textwrap.fill(f"{label} {text}", width=width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)
    return style.cyan(label) + wrapped[len(label):]


def snippet_view(record: dict[str, Any], style: Style, context: int = 6, width: int | None = None) -> str:
    """The snippet around the throwing line, with real line numbers and the raise marked (lines
    longer than ``width`` are cut, never wrapped)."""
    lines = snippet_lines(clean(record["sourceCode"]))
    index = record["lineNumber"] - record["sourceCodeStart"]
    low, high = max(0, index - context), min(len(lines), index + context + 1)
    digits = len(str(record["sourceCodeStart"] + high))
    out = []
    for i in range(low, high):
        number = record["sourceCodeStart"] + i
        marker = ">" if i == index else " "
        text = cut_line(f"  {marker} {number:>{digits}} | {lines[i]}", width)
        out.append(style.red(text) if i == index else style.dim(text) if not lines[i].strip() else text)
    return "\n".join(out)


def record_sections(record: dict[str, Any], style: Style, width: int, transcript: str | None = None,
                    site: str | None = None) -> list[str]:
    """The record's sections for the terminal, in the order of its web page (links on the site
    published at ``site``, else the command that shows the record)."""
    learned = record.get("distribution")
    if record.get("readFrom"):
        origin = f"draft read just now from {clean(record['readFrom'])}"
    elif learned and record["distributionVersion"] == SOURCE_TREE:
        origin = f"draft learned from your source tree {clean(learned)}"
    elif learned:
        origin = f"draft learned from your installed {clean(learned)} {clean(record['distributionVersion'])}"
    else:
        origin = clean(record["repo"])
    learned = learned or record.get("readFrom")
    header = f"{origin} · {clean(record['severity'])} · {clean(record['errorClass'])}"
    sections = [style.dim(header), style.bold(clean(record["errorMessage"] or f"{record['errorClass']} (raised without a message)"))]
    if learned:
        sections.append(_para("Not documented yet: errordb read this from the source on this machine. "
                              "The raise site and when it is raised are exact; what it means is for you to judge.", width))
    if record.get("documentation"):
        sections.append(style.cyan("What it means") + "\n" + _para(record["documentation"], width))
    if record.get("family"):
        family = record["family"]
        explanation = family.get("explanation") or family["summary"] or ""
        sections.append(_labelled("Failure family", clean(family["title"]), style, width) + "\n" + _para(explanation, width))
    place = f"{clean(record['filePath'])}:{record['lineNumber']}" + (f" in {clean(record['function'])}" if record.get("function") else "")
    if learned and not record.get("readFrom"):
        place += f" (module {clean(module_name(record['filePath']))})"
    sections.append(_labelled("Thrown at", place, style, width) + "\n" + snippet_view(record, style, width=width))
    if learned and record.get("triggerScenarios"):
        sections.append(style.cyan("When it is raised") + "\n" + _para(record["triggerScenarios"], width))
    if record.get("alsoRaisedAt"):
        others = "\n".join(cut_line(f"  - {clean(o['filePath'])}:{o['lineNumber']}" + (f" in {clean(o['function'])}" if o["function"] else ""), width)
                           for o in record["alsoRaisedAt"])
        sections.append(style.cyan("Also raised with this message at") + "\n" + others)
    if record.get("solutions"):
        items = "\n".join(
            textwrap.fill(clean(s), width=width, initial_indent=f"  {n}. ", subsequent_indent="     ")
            for n, s in enumerate(record["solutions"], start=1)
        )
        sections.append(style.cyan("Solutions") + "\n" + items)
    for key, title in (("exampleFix", "Example fix"), ("validationCode", "Validation"), ("typeGuard", "Type guard"), ("tryCatchPattern", "Try/except pattern")):
        if record.get(key):
            sections.append(style.cyan(title) + "\n" + _code(record[key], width=width))
    when = [f"Trigger: {record['triggerScenarios']}" if record.get("triggerScenarios") and not learned else "",
            f"Common situations: {record['commonSituations']}" if record.get("commonSituations") else ""]  # fmt: skip
    if any(when):
        sections.append(style.cyan("When it happens") + "\n" + "\n".join(_para(w, width) for w in when if w))
    if record.get("preventionTips"):
        sections.append(style.cyan("Prevention") + "\n" + "\n".join(_para(f"- {t}", width) for t in record["preventionTips"]))
    if transcript:
        sections.append(style.cyan("Reproduction") + "\n" + _code(transcript, "  ", width))
    urls = site_urls(record, site) if not record.get("readFrom") else None
    links = [("Page", urls[0]), ("JSON", urls[1])] if urls else [] if record.get("readFrom") else [("Show it", f"errordb show {record['id']}")]
    if record.get("githubUrl"):
        links.append(("Source", clean(record["githubUrl"])))
    # A link wider than the line goes on a line of its own, whole: a terminal can still open it.
    if links:
        sections.append(style.dim("\n".join(f"{name}: {url}" if len(name) + 2 + len(url) <= width else f"{name}:\n{url}" for name, url in links)))
    return sections


def module_name(file_path: str) -> str:
    """The module a record's file is: ``requests/models.py`` is ``requests.models``, so is
    ``src/requests/models.py`` (:func:`~errordb.explainer.match.package_path`); CPython's
    ``Lib/json/decoder.py`` is ``json.decoder``; a package's ``__init__.py`` is the package."""
    from errordb.explainer.match import package_path

    parts = package_path(file_path.removeprefix("Lib/").removesuffix(".py"))
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def render_record(record: dict[str, Any], color: bool = False, width: int | None = None, transcript: str | None = None,
                  site: str | None = None) -> str:
    """One record in full for the terminal: explain's block for its best match, and ``errordb show``.

    ``transcript`` is the committed reproduction
    (:func:`errordb.repro.reproduction_text`), shown when given; ``site`` is where the site is
    published (:func:`site_url`), for the record's links.
    """
    return "\n\n".join(record_sections(record, Style(color), width or terminal_width(), transcript, site))


def _evidence_line(match: Any) -> str:
    return ", ".join(f"{e.detail} ({e.points:+g})" for e in match.evidence)


def render_terminal(
    explanation: Any, *, reproductions: Mapping[str, str] | None = None, color: bool = False, width: int | None = None,
    site: str | None = None,
) -> str:
    """The explanation as text for a terminal: each finding, its best record in full, the rest listed.

    ``reproductions`` maps record ids to their reproduction's text
    (:func:`errordb.repro.best_reproductions`), shown under those records.
    """
    reproductions = reproductions or {}
    style = Style(color)
    width = width or terminal_width()
    if not explanation.findings:
        return "No exception found in the input (no traceback, no `Class: message` line)."
    blocks: list[str] = []
    shown: set[str] = set()
    for finding in explanation.findings:
        exc = finding.exception
        title = f"{clean(exc.exc_type) + ': ' if exc.exc_type else ''}{clean(exc.message)}".strip()
        where = f" (from {', '.join(clean(r) for r in exc.ranks)})" if exc.ranks else ""
        role = " — root cause" if finding.root_cause else ""
        blocks.append(style.bold(textwrap.fill(f"● {title[:500]}{where}{role}", width=width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)))
        if not finding.matches:
            blocks.append(_para(no_match_line(explanation), width, "  "))
            frame = _own_frame(exc)
            if frame is not None:
                blocks.append(_para(f"In your code: {clean(_frame_place(frame))}", width, "  ")
                              + (f"\n{cut_line('      ' + clean(frame.source), width)}" if frame.source else ""))
            continue
        best = finding.best
        if len(best) > 1:
            blocks.append(style.yellow(_para(f"Equally likely: {len(best)} records. {finding.tell_apart or ''}", width, "  ")))
        for rank_number, match in enumerate(finding.matches[:5], start=1):
            record = match.record
            label = f"  {rank_number}. {clean(record['slug'])}  score {match.score:g}"
            if match not in best and match.evidence[0].kind == "message-full":
                label += f"  (same message, raised elsewhere: {clean(record['filePath'])}:{record['lineNumber']})"
            label = textwrap.fill(label, width=width, subsequent_indent="     ", break_on_hyphens=False, break_long_words=False)
            blocks.append(style.green(label) if match in best else label)
            blocks.append(_para(f"why: {_evidence_line(match)}", width, "     "))
        for match in best:
            if match.id in shown:
                continue
            shown.add(match.id)
            record = explanation.records.get(match.id)
            if record is None:
                continue
            blocks.append(render_record(record, color, width, reproductions.get(match.id), site))
    if explanation.omitted:
        blocks.append(style.yellow(omitted_note(explanation)))
    if explanation.similar:
        # One line each: a message of several lines shows its first, marked as cut.
        items = [cut_line(f"  - {clean(s['slug'])}: {_first_line(clean(s['errorMessage']))}", width) for s in explanation.similar]
        blocks.append("\n".join([style.cyan("Similar, not the same:"), *items]))
    return "\n\n".join(blocks)


def _first_line(text: str) -> str:
    first, _, rest = text.strip().partition("\n")
    return f"{first} …" if rest.strip() else first


def no_match_line(explanation: Any) -> str:
    """What explain says of an exception no record matches, and what it searched."""
    from errordb.explainer.explanation import searched

    return f"No known error matches this message: searched {searched(explanation)}."


def _own_frame(exception: Any) -> Any | None:
    from errordb.explainer.explanation import own_frame

    return own_frame(exception)


def _frame_place(frame: Any) -> str:
    line = f", line {frame.line}" if frame.line is not None else ""
    function = f", in {frame.function}" if frame.function else ""
    return f"{frame.file}{line}{function}"


def omitted_note(explanation: Any) -> str:
    """What explain leaves out of a long input (beyond :data:`errordb.explainer.explanation.MAX_FINDINGS`)."""
    count = explanation.omitted
    return (
        f"… and {count:,} more exception{'s' if count != 1 else ''} not shown: explain reports the first "
        f"{len(explanation.findings):,} exceptions of an input (explain a part of the log to see the others)."
    )


def md_escape(text: str) -> str:
    """Markdown-escape untrusted text so that it reads as itself: no link, image, HTML, emphasis,
    heading, quote or list item of its own; what forms nothing stays unescaped (``(+100)``)."""
    return _MD_LINE_START.sub(_escape_line_start, _MD_SPECIAL.sub(r"\\\1", clean(text)))


def _escape_line_start(m: re.Match[str]) -> str:
    lead, mark = m.group(1), m.group(2)
    return f"{lead}{mark}\\" if mark[0].isdigit() else f"{lead}\\{mark}"  # "1\." and "\#"


def md_code_span(text: str) -> str:
    """Untrusted text as a Markdown code span (inside which nothing is markup)."""
    return "`" + clean(text).replace("`", "'").replace("\n", " ") + "`"


def md_code_block(text: str, lang: str = "") -> str:
    body = clean(text)
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}{lang}\n{body}\n{fence}"


def render_markdown(explanation: Any, site: str | None = None) -> str:
    """The explanation as Markdown, for pasting into a GitHub issue (links on the site published
    at ``site``, else the command that shows each record)."""
    if not explanation.findings:
        return "_errordb: no exception found in the input._"
    out = []
    for finding in explanation.findings:
        exc = finding.exception
        out.append(f"### {md_escape((exc.exc_type + ': ') if exc.exc_type else '')}{md_escape(exc.message[:300])}")
        if not finding.matches:
            out.append(md_escape(no_match_line(explanation)))
            frame = _own_frame(exc)
            if frame is not None:
                out.append(f"In your code: {md_code_span(_frame_place(frame))}"
                           + (f" {md_code_span(frame.source)}" if frame.source else ""))
            continue
        if finding.tell_apart:
            out.append(f"> {md_escape(finding.tell_apart)}")
        for match in finding.best:
            record = explanation.records.get(match.id)
            if record is not None:
                out.extend(record_markdown_sections(record, match, site))
    if explanation.omitted:
        out.append(f"_{omitted_note(explanation)}_")
    if explanation.similar:
        out.append("Similar, not the same: " + ", ".join(md_code_span(s["slug"]) for s in explanation.similar))
    return "\n\n".join(out) + "\n"


def record_markdown_sections(record: dict[str, Any], match: Any = None, site: str | None = None) -> list[str]:
    """A record's Markdown paragraphs: explain's block for a match (with its score and evidence)
    and, without ``match``, the body of ``errordb show --format markdown``."""
    score = f" (score {match.score:g})" if match is not None else ""
    if record.get("readFrom"):
        origin = f"{md_code_span(record['readFrom'])} (a draft read just now)"
    elif record.get("distribution") and record["distributionVersion"] == SOURCE_TREE:
        origin = f"your source tree {md_code_span(record['distribution'])} (a learned draft)"
    elif record.get("distribution"):
        origin = f"your installed {md_code_span(record['distribution'] + ' ' + record['distributionVersion'])} (a learned draft)"
    else:
        origin = md_code_span(record["repo"])
    out = [f"**{md_escape(record['errorClass'])}** in {origin} "
           f"at {md_code_span(record['filePath'] + ':' + str(record['lineNumber']))}{score}"]  # fmt: skip
    if match is not None:
        out.append(f"Why: {md_escape(_evidence_line(match))}")
    if record.get("documentation"):
        out.append(md_escape(record["documentation"]))
    if record.get("family"):
        family = record["family"]
        out.append(f"Failure family: **{md_escape(family['title'])}**. {md_escape(family.get('explanation') or family['summary'] or '')}".rstrip())
    if (record.get("distribution") or record.get("readFrom")) and record.get("triggerScenarios"):
        out.append(md_escape(record["triggerScenarios"]))
    if record.get("solutions"):
        out.append("\n".join(f"{n}. {md_escape(s)}" for n, s in enumerate(record["solutions"], start=1)))
    if record.get("exampleFix"):
        language = snippet_language(record["exampleFix"])
        out.append(md_code_block(record["exampleFix"], {"python": "python", "shell": "sh"}.get(language, "")))
    urls = site_urls(record, site) if not record.get("readFrom") else None
    links = [f"[Page](<{urls[0]}>)", f"[JSON](<{urls[1]}>)"] if urls else [] if record.get("readFrom") else [f"Show it: {md_code_span('errordb show ' + record['id'])}"]
    source = clean(record["githubUrl"])
    if source.startswith("https://github.com/") and not any(c in source for c in "<>\\ \n"):  # as the schema requires
        links.append(f"[Source](<{source}>)")
    if links:
        out.append(" · ".join(links))
    return out


def render_record_markdown(record: dict[str, Any], site: str | None = None) -> str:
    """One record as Markdown (``errordb show --format markdown``), headed like an explain finding."""
    title = f"### {md_escape(record['errorClass'] + (': ' if record['errorMessage'] else ''))}{md_escape(record['errorMessage'][:300])}"
    return "\n\n".join([title, *record_markdown_sections(record, site=site)]) + "\n"
