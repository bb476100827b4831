"""Hostile records: the site escapes everything and writes nowhere but its output folder.

The schema refuses most of this at ingest, so the records are edited directly in a copy of the
database, as a hand edit (or a compromised pipeline) could: script tags, event handlers,
``javascript:`` and ``http:`` URLs, jinja syntax, ``../`` in slugs, repositories and tags.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR
from test_site_dom import parse_html

pytest.importorskip("errordb.publish.api", reason="errordb.publish.api (issue 6) is missing: the site build calls its write_api")

from errordb.publish.site import build_site, output_path  # noqa: E402
from errordb.publish.paths import SiteError, family_dir, record_dir, repo_dir, segment, tag_dir  # noqa: E402
from errordb.publish.text import rich_text, safe_https_url  # noqa: E402
from errordb.store import ingest  # noqa: E402

SCRIPT = "<script>alert('x')</script>"
IMG = '<img src=x onerror="alert(1)">'
JINJA = "{{ 7 * 7 }} {% if true %}yes{% endif %} {# c #}"


@pytest.fixture(scope="module")
def clean_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("db") / "errordb.db"
    ingest(None, path)
    return path


def hostile_copy(clean_db: Path, folder: Path, **changes) -> Path:
    path = folder / "hostile.db"
    path.write_bytes(clean_db.read_bytes())
    conn = sqlite3.connect(path)
    with conn:
        for sql, params in changes.values():
            conn.execute(sql, params)
    conn.close()  # the store is in WAL mode: an open connection keeps its -wal and -shm files beside it
    return path


@pytest.fixture(scope="module")
def hostile_site(clean_db, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    db = hostile_copy(
        clean_db,
        folder,
        message=("UPDATE records SET errorMessage = ?, documentation = ?, filePath = ?, githubUrl = ? WHERE id = ?",
                 [f"{SCRIPT} {JINJA}", f"See {IMG} and javascript:alert(1) and https://ok.example/a?b=1&c=2.", f"x/{SCRIPT}.py", "javascript:alert(1)", KIMI_PP_ERROR]),
        source=("UPDATE records SET sourceCode = ?, exampleFix = ?, validationCode = ? WHERE id = ?",
                ["</code></pre>" + SCRIPT + "\n" * 36 + "raise X", f"# before\n{SCRIPT}\n# after\n{JINJA}", f"</pre>{IMG}", KIMI_PP_ERROR]),
        trigger=("UPDATE records SET triggerScenarios = ?, commonSituations = ? WHERE id = ?", [f"[x](javascript:alert(1)) {JINJA}", "http://plain.example/ is not linked", KIMI_PP_ERROR]),
        solution=("UPDATE solutions SET text = ? WHERE record_id = ? AND position = 0", ["javascript:alert(document.cookie)", KIMI_PP_ERROR]),
        solution2=("UPDATE solutions SET text = ? WHERE record_id = ? AND position = 1", ['https://evil.example/"onmouseover="alert(1) and `<b>code</b>`', KIMI_PP_ERROR]),
        family=("UPDATE families SET title = ?, summary = ?, explanation = ? WHERE tag = 'feature-parallelism-conflict'", [IMG, SCRIPT, JINJA]),
    )
    out = folder / "out" / "site"
    build_site(db, out)
    return out


DOT_DOT = {
    "tag": ("INSERT INTO record_tags (record_id, position, tag) VALUES (?, 9, ?)", [KIMI_PP_ERROR, "../../pwned"]),
    "tag_row": ("INSERT INTO tags (name) VALUES (?)", ["../../pwned"]),
    "repo": ("UPDATE records SET repo = ? WHERE id = ?", ["../..", BAILING_VALUE_ERROR]),
}


@pytest.fixture(scope="module")
def dot_dot_site(clean_db, tmp_path_factory) -> Path:
    """The site's own pages for ``../`` in a tag and a repository (the API export refuses such
    names by itself, see the next test, so it is left out here)."""
    folder = tmp_path_factory.mktemp("dotdot")
    db = hostile_copy(clean_db, folder, **DOT_DOT)
    out = folder / "out" / "site"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("errordb.publish.api.write_api", lambda *args, **kwargs: 0)
        build_site(db, out)
    return out


def test_with_the_api_export_dot_dot_names_refuse_the_whole_build(clean_db, tmp_path):
    from errordb.errors import ErrordbError

    db = hostile_copy(clean_db, tmp_path, **DOT_DOT)
    with pytest.raises(ErrordbError):
        build_site(db, tmp_path / "out" / "site")
    assert sorted(os.listdir(tmp_path)) == ["hostile.db", "out"] and os.listdir(tmp_path / "out") == []


def html_files(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_no_markup_from_records_reaches_any_page(hostile_site):
    for path in html_files(hostile_site):
        text = path.read_text(encoding="utf-8")
        assert "<script>alert" not in text and "<img" not in text, path
        doc = parse_html(text)
        for node in doc.iter():
            assert not any(name.startswith("on") for name in node.attrs), (path, node)
            if node.tag == "script":
                assert node.attrs.get("src", "").endswith(("static/explain.js", "static/search.js")) and not node.text(), path
            for name in ("href", "src"):
                value = node.attrs.get(name) or ""
                assert not value.lower().startswith(("javascript:", "data:", "http:", "vbscript:")), (path, value)


def test_record_text_is_shown_escaped_and_literally(hostile_site, clean_db):
    slug = "dspark-aux-hidden-capture-requires-pp-1"
    text = (hostile_site / "errors" / slug / "index.html").read_text(encoding="utf-8")
    doc = parse_html(text)
    assert doc.find("h1").text() == f"{SCRIPT} {JINJA}"  # escaped, and jinja syntax not evaluated
    assert "&lt;script&gt;" in text and "49" not in doc.find("h1").text()
    assert doc.by_id("source").find("pre").text().startswith("</code></pre>" + SCRIPT)
    # No GitHub link for a githubUrl that is not https://github.com/…
    assert not [a for a in doc.by_id("source").find_all("a") if "View on GitHub" in a.text()]


def text_links(section):
    """The links a section's text makes (not the link beside its heading)."""
    return [a for a in section.find_all("a") if a.attrs.get("class") != "anchor"]


def test_only_https_urls_become_links(hostile_site):
    slug = "dspark-aux-hidden-capture-requires-pp-1"
    doc = parse_html((hostile_site / "errors" / slug / "index.html").read_text(encoding="utf-8"))
    meaning = doc.by_id("meaning")
    assert [a.attrs["href"] for a in text_links(meaning)] == ["https://ok.example/a?b=1&c=2"]  # the full stop stays out
    assert "javascript:alert(1)" in meaning.text()  # shown as text
    solutions = doc.by_id("solutions")
    links = text_links(solutions)
    assert [a.attrs["href"] for a in links] == ["https://evil.example/"]  # cut at the quote
    assert solutions.find("code").text() == "<b>code</b>"
    assert not text_links(doc.by_id("when"))  # [x](javascript:…) and http:// stay text


def test_family_text_is_escaped_on_family_and_record_pages(hostile_site):
    family = (hostile_site / "families" / "feature-parallelism-conflict" / "index.html").read_text(encoding="utf-8")
    assert parse_html(family).find("h1").text() == IMG
    record = parse_html((hostile_site / "errors" / "dspark-aux-hidden-capture-requires-pp-1" / "index.html").read_text(encoding="utf-8"))
    assert text_links(record.by_id("family"))[0].text() == IMG


def test_dot_dot_in_tags_and_repositories_stays_inside_the_output_folder(dot_dot_site):
    root = dot_dot_site.parent
    assert sorted(os.listdir(root)) == ["site"]  # nothing beside the site
    assert sorted(os.listdir(root.parent)) == ["hostile.db", "out"]
    for path in dot_dot_site.rglob("*"):
        assert path.resolve().is_relative_to(dot_dot_site.resolve())
        assert ".." not in path.relative_to(dot_dot_site).parts
    tag_page = dot_dot_site / Path(*tag_dir("../../pwned")) / "index.html"
    assert tag_page.is_file() and parse_html(tag_page.read_text(encoding="utf-8")).find("h1").text() == "../../pwned"
    assert tag_dir("../../pwned")[1].startswith("pwned-")
    assert (dot_dot_site / Path(*repo_dir("../..")) / "index.html").is_file()


@pytest.mark.parametrize("slug", ["../../escaped", "a/b", "UPPER", "dot.dot", "", "x" * 200, "a\\b", "ok\x00"])
def test_a_slug_that_is_not_a_plain_name_refuses_the_build(clean_db, tmp_path, slug):
    db = hostile_copy(clean_db, tmp_path, slug=("UPDATE records SET slug = ? WHERE id = ?", [slug, KIMI_VALUE_ERROR]))
    with pytest.raises(SiteError, match="slug"):
        build_site(db, tmp_path / "site")
    assert not (tmp_path / "site").exists()
    assert sorted(os.listdir(tmp_path)) == ["hostile.db"]


def test_a_record_id_that_is_not_hex_refuses_the_build(clean_db, tmp_path):
    db = hostile_copy(clean_db, tmp_path, id=("UPDATE records SET id = ? WHERE id = ?", ["../../../etc/x", KIMI_VALUE_ERROR]))
    with pytest.raises(SiteError, match="record id"):
        build_site(db, tmp_path / "site")


def test_the_writer_refuses_names_that_could_leave_the_folder(tmp_path):
    for bad in (("..", "x.html"), ("a", "../b.html"), ("/etc", "passwd"), ("A.html",), ("x.exe",), ()):
        with pytest.raises(SiteError):
            output_path(tmp_path, bad)
    assert output_path(tmp_path, ("errors", "ok-1", "index.html")) == tmp_path / "errors" / "ok-1" / "index.html"
    with pytest.raises(SiteError):
        segment("../x", "slug")


def test_text_helpers_escape_and_link_only_https():
    assert str(rich_text("<b>&")) == "&lt;b&gt;&amp;"
    assert str(rich_text("go https://a.example/x.")) == 'go <a href="https://a.example/x" rel="nofollow noopener">https://a.example/x</a>.'
    assert str(rich_text("(see https://a.example/wiki/A_(b))")) .count('href="https://a.example/wiki/A_(b)"') == 1
    assert "<a" not in str(rich_text("javascript:alert(1) http://x.example data:text/html,<b>"))
    assert str(rich_text("use `x<y`")) == "use <code>x&lt;y</code>"
    assert safe_https_url("https://github.com/a/b") == "https://github.com/a/b"
    for bad in ("http://github.com", "javascript:alert(1)", "https://a b", 'https://a"b', "https://", "//x.example", None, 5):
        assert safe_https_url(bad) is None
    # Any white space (Unicode's too), control character, or character that ends an attribute.
    for character in "\u00a0\u2028\u3000\x1c\x00\x1f\t<>'`\\":
        assert safe_https_url(f"https://a.example/{character}x") is None, repr(character)
    assert safe_https_url("https://a.example/\x7f~é") == "https://a.example/\x7f~é"  # DEL and letters are not refused


def test_windows_device_names_never_name_a_folder_of_the_site():
    for folder in (record_dir("con")[1], tag_dir("aux")[1], family_dir("nul.x")[1], *repo_dir("com1/lpt1")[1:]):
        assert not folder.split("-")[0] == folder and len(folder.split("-")[-1]) == 10, folder  # a readable name and a hash
    assert record_dir("console") == ("errors", "console") and repo_dir("aux-team/con-fig") == ("repos", "aux-team", "con-fig")
