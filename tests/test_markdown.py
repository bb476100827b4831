"""explain and show as Markdown, read by a CommonMark renderer (markdown-it-py, GitHub's flavour
aside): untrusted text renders as itself, nothing of it becomes markup, and links and code
blocks are real ones."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import KIMI_PP_ERROR, KIMI_VALUE_ERROR
from markdown_it import MarkdownIt

from errordb.cli import cli
from errordb.explainer.render import md_escape

PP_ERROR = "NotImplementedError: DSPARK aux hidden capture requires PP=1."

RENDER = MarkdownIt("commonmark").enable("table").enable("strikethrough")

HOSTILE = [
    "**bold** and _em_ and *em*", "[link](javascript:alert(1)) ![img](x.png)", "<script>alert(1)</script> <b>b</b>",
    "<https://autolink.example>", "`code` ~~strike~~ &amp; &lt;", "a | b | c", "scores (+100) and PP>1",
    "set_dspark_layers_to_capture and _private_ and __dunder__", "# not a heading", "> not a quote",
    "1. not a list", "2) nor this", "- nor this", "+ nor this", "=== nor a setext heading", "back\\slash",
    "line one\n# line two\n> line three\n10. line four",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_renders_as_itself_and_nothing_else(text):
    rendered = RENDER.render(md_escape(text)).strip()
    tags = set(re.findall(r"</?([a-z0-9]+)", rendered))
    assert tags <= {"p", "br"}, rendered  # no link, image, emphasis, code, heading, quote, list, table
    body = html.unescape(re.sub(r"</?(?:p|br ?/?)>", "", rendered))
    assert body.split() == text.split(), (text, body)


def test_escaping_leaves_alone_what_forms_no_markup():
    assert md_escape("scores (+100) and PP>1 in set_dspark_layers") == "scores (+100) and PP>1 in set_dspark_layers"


def _markdown(*args: str, env=None) -> str:
    result = CliRunner().invoke(cli, [*args, "--format", "markdown"], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_explain_as_markdown_renders_its_fences_with_their_languages_and_links():
    text = _markdown("explain", "NotImplementedError: DSPARK aux hidden capture requires PP=1.", env={"ERRORDB_SITE_URL": None})
    rendered = RENDER.render(text)
    assert '<code class="language-sh">' in rendered  # the fix is a shell command, not Python
    assert "errordb show " + KIMI_PP_ERROR in html.unescape(rendered)  # no site: the command that shows it
    assert '<a href="https://github.com/sgl-project/sglang/blob/' in rendered
    assert "\\(" not in text and "PP\\>1" not in text


def test_a_site_url_makes_page_and_json_links_everywhere():
    site = "https://errordb.example/docs/"
    for args in (["show", KIMI_VALUE_ERROR], ["explain", "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."]):
        rendered = RENDER.render(_markdown(*args, "--site-url", site))
        assert f'<a href="{site}api/errors/{KIMI_VALUE_ERROR}.json">JSON</a>' in rendered
        assert re.search(rf'<a href="{re.escape(site)}errors/[a-z0-9-]+/">Page</a>', rendered)
        via_env = RENDER.render(_markdown(*args, env={"ERRORDB_SITE_URL": site}))
        assert via_env == rendered
    text = CliRunner().invoke(cli, ["show", KIMI_VALUE_ERROR, "--site-url", site, "--no-color"]).stdout
    assert f"JSON: {site}api/errors/{KIMI_VALUE_ERROR}.json" in text
    bad = CliRunner().invoke(cli, ["show", KIMI_VALUE_ERROR, "--site-url", "javascript:alert(1)"])
    assert bad.exit_code == 2 and "give an http(s) URL" in bad.stderr


def test_the_datasets_own_site_url_is_used_when_none_is_given(tmp_path):
    from helpers import copy_records

    records = copy_records(tmp_path / "records")
    (records / "dataset.toml").write_text('site_url = "https://docs.example/errors-db"\n', encoding="utf-8")
    db = tmp_path / "e.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", str(records), "--db", str(db), "-q"]).exit_code == 0
    env = {"ERRORDB_SITE_URL": None}
    shown = RENDER.render(_markdown("show", KIMI_VALUE_ERROR, "--db", str(db), env=env))
    assert f'<a href="https://docs.example/errors-db/api/errors/{KIMI_VALUE_ERROR}.json">JSON</a>' in shown
    given = RENDER.render(_markdown("show", KIMI_VALUE_ERROR, "--db", str(db), "--site-url", "https://other.example/", env=env))
    assert 'href="https://other.example/api/errors/' in given  # what the user says wins
    explained = RENDER.render(_markdown("explain", PP_ERROR, "--db", str(db), env=env))
    assert f'<a href="https://docs.example/errors-db/api/errors/{KIMI_PP_ERROR}.json">JSON</a>' in explained
    # errordb.install()'s hook links to it as well.
    program = f"import errordb\nerrordb.install(db={str(db)!r})\nraise NotImplementedError({PP_ERROR.split(': ', 1)[1]!r})\n"
    hooked = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items() if k != "ERRORDB_SITE_URL"} | {"NO_COLOR": "1"})  # fmt: skip
    assert f"https://docs.example/errors-db/api/errors/{KIMI_PP_ERROR}.json" in hooked.stderr
    assert runner.invoke(cli, ["build", "--db", str(db), "--out", str(tmp_path / "site"), "-q"], env=env).exit_code == 0
    assert "<loc>https://docs.example/errors-db/errors/" in (tmp_path / "site" / "sitemap.xml").read_text(encoding="utf-8")
    # A bad setting is refused, naming the file and the key; a removed one is forgotten.
    (records / "dataset.toml").write_text('site_url = "javascript:alert(1)"\n', encoding="utf-8")
    bad = runner.invoke(cli, ["ingest", str(records), "--db", str(db), "-q"])
    assert bad.exit_code == 2 and f"{records / 'dataset.toml'}: site_url: must be an http(s) URL" in bad.stderr
    (records / "dataset.toml").unlink()
    assert runner.invoke(cli, ["ingest", str(records), "--db", str(db), "-q"]).exit_code == 0
    assert "Show it: `errordb show" in _markdown("show", KIMI_VALUE_ERROR, "--db", str(db), env=env)
