"""``errordb build``: the pages and their sections, the listings, determinism, what serve answers.

The site is built once per module from the bundled records (three records); the section tests
check each record's page against the record's own fields, section by section, in the order of
the reference page (seed ``001_…``). Hostile records are in ``test_site_hostile.py``, the real
browser in ``test_browser.py``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import ALL_IDS, BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, envelope
from test_site_dom import parse_html

pytest.importorskip("errordb.publish.api", reason="errordb.publish.api (issue 6) is missing: the site build calls its write_api")

from errordb.publish.site import MANIFEST, build_site  # noqa: E402
from errordb.store import ingest  # noqa: E402

SHORT_SHA = "0132848349"
#: The sections of the reference page (seed 001_…), by the id each has on our pages.
SEED_SECTIONS = {
    "message": "Error message",
    "meaning": "What it means",
    "source": "Source",
    "solutions": "Solutions",
    "example-fix": "Example fix",
    "when": "When it happens",
    "family": "Understand the failure class",
    "related": "Related errors",
}


def records_by_id() -> dict[str, dict]:
    return {record_id: envelope(record_id)["record"] for record_id in ALL_IDS}


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def squash(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def db_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("db") / "errordb.db"
    ingest(None, path)
    return path


@pytest.fixture(scope="module")
def site(db_path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build") / "site"
    build_site(db_path, out)
    return out


def page_of(site: Path, record: dict):
    return parse_html((site / "errors" / record["slug"] / "index.html").read_text(encoding="utf-8"))


# The error pages, section by section -------------------------------------------------------------


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_error_page_has_every_section_of_the_reference_page(site, record_id):
    record = records_by_id()[record_id]
    doc = page_of(site, record)
    assert len(doc.find_all("h1")) == 1
    for section_id, heading in SEED_SECTIONS.items():
        section = doc.by_id(section_id)
        assert section is not None, section_id
        assert section.find("h2").text() == heading
    # The order of the reference page.
    order = [n.attrs["id"] for n in doc.iter() if n.tag in ("section", "aside") and n.attrs.get("id")]
    expected = [s for s in ("message", "meaning", "source", "solutions", "example-fix", "when", "family", "related") if s in order]
    assert [s for s in order if s in expected] == expected


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_header_message_and_meaning(site, record_id):
    record = records_by_id()[record_id]
    doc = page_of(site, record)
    head = doc.find("header", class_="error-head")
    assert squash(head.find("p").text()) == f"{record['repo']} · {record['severity']} · {record['errorClass']}"
    assert head.find("a").attrs["href"] == "../../repos/sgl-project/sglang/index.html"
    assert doc.find("h1").text() == record["errorMessage"]
    assert doc.by_id("message").find("pre").text() == record["errorMessage"]
    assert squash(doc.by_id("meaning").find("p").text()) == squash(record["documentation"])
    assert doc.find("title").text().startswith(f"{record['errorClass']}: DSPARK")


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_source_is_numbered_highlighted_and_pinned(site, record_id):
    record = records_by_id()[record_id]
    source = page_of(site, record).by_id("source")
    assert f"Thrown at {record['filePath']}:{record['lineNumber']}, in set_dspark_layers_to_capture." in squash(source.text())
    lines = source.find("pre").find("code").find_all(None, class_="line")
    numbers = [int(line.attrs["data-n"]) for line in lines]
    assert numbers == list(range(record["sourceCodeStart"], record["sourceCodeEnd"] + 1))
    assert [line.text() for line in lines] == record["sourceCode"].split("\n")
    marked = [line for line in lines if "hl" in line.attrs["class"].split()]
    assert len(marked) == 1 and marked[0].tag == "mark"
    assert marked[0].attrs["data-n"] == str(record["lineNumber"]) and marked[0].text().strip().startswith("raise")
    assert marked[0].attrs["id"] == f"L{record['lineNumber']}"
    # Coloured at build time: keywords and strings carry Pygments' classes.
    assert marked[0].find("span", class_="k").text().strip() == "raise"
    assert source.find("span", class_="s2") is not None
    github = [a for a in source.find_all("a") if a.attrs["href"].startswith("https://")]
    assert len(github) == 1
    assert github[0].attrs["href"] == record["githubUrl"]
    assert github[0].text() == f"View on GitHub (pinned to {SHORT_SHA})"


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_solutions_example_fix_and_guards(site, record_id):
    record = records_by_id()[record_id]
    doc = page_of(site, record)
    solutions = [squash(li.text()) for li in doc.by_id("solutions").find("ol").find_all("li")]
    assert solutions == [squash(s) for s in record["solutions"]]
    fix = doc.by_id("example-fix")
    parts = {f.find("figcaption").text(): f.find("pre").text() for f in fix.find_all("figure")}
    before, after = re.split(r"\n*# after\n", record["exampleFix"].removeprefix("# before\n"))
    assert parts == {"Before": before, "After": after}
    headings = [h.text() for h in fix.find_all("h3")]
    expected = [title for field, title in (("validationCode", "Validation code"), ("typeGuard", "Type guard"), ("tryCatchPattern", "Try/except pattern")) if record[field]]
    assert headings == expected
    codes = [pre.text() for pre in fix.find_all("pre")][len(parts):]
    assert codes == [record[f] for f in ("validationCode", "typeGuard", "tryCatchPattern") if record[f]]


def test_shell_example_fix_is_coloured_as_shell(site):
    record = records_by_id()[KIMI_PP_ERROR]
    fix = page_of(site, record).by_id("example-fix")
    assert all("lang-shell" in pre.attrs["class"] for pre in fix.find_all("figure")[0].find_all("pre"))


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_when_it_happens_and_prevention_tips(site, record_id):
    record = records_by_id()[record_id]
    doc = page_of(site, record)
    when = doc.by_id("when")
    terms = [dt.text() for dt in when.find_all("dt")]
    details = [squash(dd.text()) for dd in when.find_all("dd")]
    assert dict(zip(terms, details)) == {"Trigger": squash(record["triggerScenarios"]), "Common situations": squash(record["commonSituations"])}
    tips = doc.by_id("prevention")
    if record["preventionTips"]:
        assert [squash(li.text()) for li in tips.find_all("li")] == record["preventionTips"]
    else:
        assert tips is None
    tags = doc.find("ul", class_="tags")
    assert (tags is None) == (not record["tags"])
    if record["tags"]:
        assert [a.text() for a in tags.find_all("a")] == record["tags"]
        assert tags.find("a").attrs["href"] == f"../../tags/{record['tags'][0]}/index.html"


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_family_section_links_the_family_with_its_counts(site, record_id):
    record = records_by_id()[record_id]
    family = page_of(site, record).by_id("family")
    link = next(a for a in family.find_all("a") if a.attrs.get("class") != "anchor")  # not the heading's own link
    assert link.attrs["href"] == f"../../families/{record['backgroundTag']}/index.html"
    counts = {"missing-required-argument": "2 records in 1 repository", "feature-parallelism-conflict": "1 record in 1 repository"}
    assert counts[record["backgroundTag"]] in squash(family.text())
    title = {"missing-required-argument": "Missing required argument", "feature-parallelism-conflict": "Feature and parallelism conflict"}
    assert link.text() == title[record["backgroundTag"]]
    assert (site / "families" / record["backgroundTag"] / "index.html").is_file()


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_related_errors_are_computed_ranked_and_never_the_record_itself(site, record_id):
    record = records_by_id()[record_id]
    related = page_of(site, record).by_id("related").find("ul")
    hrefs = [a.attrs["href"] for a in related.find_all("a")]
    assert 1 <= len(hrefs) <= 5
    assert f"../../errors/{record['slug']}/index.html" not in hrefs
    # Every other record, but one of the same message: it has its own box on the page.
    others = {r["slug"] for r in records_by_id().values() if r["id"] != record_id and r["errorMessage"] != record["errorMessage"]}
    assert {h.split("/")[3] for h in hrefs} == others
    if record_id == KIMI_VALUE_ERROR:
        assert hrefs[0].split("/")[3] == records_by_id()[KIMI_PP_ERROR]["slug"]
        assert "same function (set_dspark_layers_to_capture)" in related.find("li").text()


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_footer_names_the_analysis_the_json_and_the_dataset_version(site, record_id):
    record = records_by_id()[record_id]
    doc = page_of(site, record)
    footer = squash(doc.find("footer", class_="site-footer").text())
    assert f"AI-assisted analysis of sgl-project/sglang@{SHORT_SHA} ({record['analyzedAt'][:10]})" in footer
    assert f"Data as JSON: /api/errors/{record_id}." in footer
    assert "Dataset version 2026-08-28T06:17:29.519Z" in footer
    json_link = [a for a in doc.find("footer").find_all("a") if "api/errors" in a.attrs["href"]][0]
    assert json_link.attrs["href"] == f"../../api/errors/{record_id}.json"
    target = (site / "errors" / record["slug"] / json_link.attrs["href"]).resolve()
    assert json.loads(target.read_text(encoding="utf-8"))["record"]["id"] == record_id
    issues = [a for a in doc.find("footer").find_all("a") if a.text() == "GitHub"][0]
    assert issues.attrs["href"] == "https://github.com/sgl-project/sglang/issues"


def test_same_message_box_tells_the_kimi_and_bailing_records_apart(site):
    records = records_by_id()
    for mine, other in ((KIMI_VALUE_ERROR, BAILING_VALUE_ERROR), (BAILING_VALUE_ERROR, KIMI_VALUE_ERROR)):
        box = page_of(site, records[mine]).by_id("same-message")
        assert box is not None and box.tag == "aside"
        assert box.find("h2").text() == "Same message, other places"
        assert "they differ by file, line" in squash(box.text())
        rows = box.find("tbody").find_all("tr")
        assert [r.attrs.get("class") for r in rows] == ["mine", None]
        cells = [[squash(c.text()) for c in row.children if not isinstance(c, str)] for row in rows]
        files = {records[mine]["filePath"].rsplit("/", 1)[-1], records[other]["filePath"].rsplit("/", 1)[-1]}
        assert [row.find("th").find("code").text() for row in rows][0] == records[mine]["filePath"].rsplit("/", 1)[-1]
        assert {row.find("th").find("code").text() for row in rows} == files == {"kimi_k3.py", "bailing_moe_v3.py"}
        assert [c[-1] for c in cells] == [str(records[mine]["lineNumber"]), str(records[other]["lineNumber"])]
        assert all(c[1] == "set_dspark_layers_to_capture" and c[2] == "ValueError" for c in cells)
        link = rows[1].find("a")
        assert link.attrs["href"] == f"../../errors/{records[other]['slug']}/index.html"
    assert page_of(site, records[KIMI_PP_ERROR]).by_id("same-message") is None


@pytest.mark.parametrize("record_id", ALL_IDS)
def test_reproduction_section_shows_the_side_by_side_table_and_transcript(site, record_id):
    record = records_by_id()[record_id]
    repro = page_of(site, record).by_id("reproduction")
    assert repro is not None
    table = repro.find("table", class_="side-by-side")
    header = [squash(th.text()) for th in table.find("thead").find_all("th")]
    mine = "Bailing MoE v3" if record_id == BAILING_VALUE_ERROR else "Kimi K3"
    assert [h.replace(" this page", "") for h in header] == ["scenario", "Kimi K3", "Bailing MoE v3"]
    assert f"{mine} this page" in header
    rows = table.find("tbody").find_all("tr")
    first = [squash(c.text()) for c in rows[0].children if not isinstance(c, str)]
    assert first[0] == "layer_ids=None, PP=1 (last rank)"
    assert first[1] == "ValueError: DSPARK requires explicit layer_ids for aux hidden capture. (kimi_k3.py:2892)"
    assert first[2] == "ValueError: DSPARK requires explicit layer_ids for aux hidden capture. (bailing_moe_v3.py:1665)"
    transcripts = [pre.text() for pre in repro.find_all("pre", class_="transcript")]
    assert any('kimi_k3.py", line 2892, in set_dspark_layers_to_capture' in t for t in transcripts)
    # The guard of this record's model has the raising line marked.
    guards = repro.find_all("details", class_="guard")
    opened = [g for g in guards if "open" in g.attrs]
    assert len(guards) == 2 and len(opened) == 1 and mine in opened[0].find("summary").text()
    assert opened[0].find("mark", class_="hl").attrs["data-n"] == str(record["lineNumber"])


def test_stale_transcript_is_announced_not_shown(db_path, tmp_path):
    # A record whose executed fields changed no longer matches its transcript's digest.
    changed = tmp_path / "changed.db"
    changed.write_bytes(db_path.read_bytes())
    with sqlite3.connect(changed) as conn:
        conn.execute("UPDATE records SET lineNumber = lineNumber - 1 WHERE id = ?", [KIMI_PP_ERROR])
    build_site(changed, tmp_path / "site")
    record = records_by_id()[KIMI_PP_ERROR]
    repro = page_of(tmp_path / "site", record).by_id("reproduction")
    assert "captured from an earlier version of the record" in squash(repro.text())
    assert repro.find("table") is None


# The other pages ---------------------------------------------------------------------------


def test_index_groups_errors_by_repository_with_counts_and_has_the_explain_box(site):
    doc = parse_html((site / "index.html").read_text(encoding="utf-8"))
    assert len(doc.find_all("h1")) == 1
    repo = doc.find("section", class_="repo")
    assert squash(repo.find("h3").text()) == "sgl-project/sglang 3 errors"
    assert len(repo.find_all("li", class_="item")) == 3
    assert "3 errors from 1 repository" in squash(doc.find("p", class_="lead").text())
    form = doc.by_id("explain-form")
    assert form.attrs["data-patterns"] == "api/patterns.json" and "hidden" in form.attrs
    label = doc.find("label")
    assert label.attrs["for"] == "explain-input" and doc.by_id("explain-input").tag == "textarea"
    assert doc.find("noscript") is not None
    assert [s.attrs["src"] for s in doc.find_all("script")] == ["static/explain.js"]


def test_repo_tag_family_and_all_errors_pages(site):
    repo = parse_html((site / "repos/sgl-project/sglang/index.html").read_text(encoding="utf-8"))
    assert repo.find("h1").text() == "sgl-project/sglang"
    # Grouped by file, then line: bailing_moe_v3.py first, then kimi_k3.py 2888 before 2892.
    assert [li.find("a").attrs["href"].split("/")[4] for li in repo.find_all("li", class_="item")] == [
        records_by_id()[i]["slug"] for i in (BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR)
    ]
    tag = parse_html((site / "tags/pipeline-parallel/index.html").read_text(encoding="utf-8"))
    assert [li.find("a").text() for li in tag.find_all("li", class_="item")] == ["DSPARK aux hidden capture requires PP=1."]
    family = parse_html((site / "families/missing-required-argument/index.html").read_text(encoding="utf-8"))
    assert family.find("h1").text() == "Missing required argument"
    assert "A function, command or API needs a value that the caller did not give" in family.find("main").text()
    assert len(family.find_all("li", class_="item")) == 2
    tags = parse_html((site / "tags/index.html").read_text(encoding="utf-8"))
    assert [a.text() for a in tags.find("ul", class_="tag-list").find_all("a")] == ["argument-validation", "dspark", "kimi", "pipeline-parallel", "speculative-decoding"]
    families = parse_html((site / "families/index.html").read_text(encoding="utf-8"))
    assert len(families.find("ul", class_="families").find_all("li")) == 2
    everything = parse_html((site / "errors/index.html").read_text(encoding="utf-8"))
    assert len(everything.find_all("li", class_="item")) == 3


def test_search_page_index_404_api_docs_and_sitemap(site):
    search = parse_html((site / "search/index.html").read_text(encoding="utf-8"))
    assert search.find("form", role="search") is not None and search.find("label").attrs["for"] == "search-input"
    assert len(search.by_id("search-fallback").find_all("li", class_="item")) == 3
    meta = json.loads((site / "search/meta.json").read_text())
    assert meta["chunks"] == 1 and meta["count"] == 3
    rows = json.loads((site / "search/chunk-0.json").read_text())
    assert [row[5] for row in rows] == sorted(ALL_IDS)
    not_found = parse_html((site / "404.html").read_text(encoding="utf-8"))
    assert not_found.find("h1").text() == "Page not found"
    # Served for any missing path, so its links are absolute (from the base URL).
    assert not_found.find("link", rel="stylesheet").attrs["href"] == "/static/style.css"
    api = parse_html((site / "docs/api/index.html").read_text(encoding="utf-8"))
    text = squash(api.find("main").text())
    for endpoint in ("api/errors/<id>.json", "api/errors/<id>", "api/patterns.json", "api/version.json"):
        assert endpoint in text
    # Without the site's full URL no sitemap: the protocol takes full URLs only.
    assert not (site / "sitemap.xml").exists()


def test_every_page_is_one_h1_with_lang_landmarks_and_no_external_resources(site):
    for path in site.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        doc = parse_html(text)
        assert doc.find("html").attrs["lang"] == "en", path
        assert len(doc.find_all("h1")) == 1, path
        assert len(doc.find_all("main")) == 1 and doc.find("header") and doc.find("footer") and doc.find("nav"), path
        for node in doc.iter():
            for name in ("src", "href"):
                value = node.attrs.get(name)
                if value is None:
                    continue
                if node.tag in ("script", "link", "img"):
                    assert "://" not in value, (path, value)  # nothing is loaded from another host
                else:
                    assert "://" not in value or value.startswith("https://"), (path, value)
        for control in doc.find_all("textarea") + doc.find_all("input"):
            assert doc.find("label", **{"for": control.attrs["id"]}) is not None, path


def test_base_url_goes_into_the_sitemap_canonical_links_and_the_api(db_path, tmp_path):
    build_site(db_path, tmp_path / "site", base_url="https://errordb.example/docs")
    sitemap = (tmp_path / "site" / "sitemap.xml").read_text(encoding="utf-8")
    locs = re.findall(r"<loc>(.*?)</loc>", sitemap)
    assert "https://errordb.example/docs/errors/dspark-aux-hidden-capture-requires-pp-1/" in locs
    assert "https://errordb.example/docs/" in locs and "https://errordb.example/docs/docs/api/" in locs
    assert all(loc.startswith("https://errordb.example/docs/") for loc in locs) and len(locs) == len(set(locs))
    assert "https://errordb.example/docs/404.html" not in locs
    record = records_by_id()[KIMI_PP_ERROR]
    doc = page_of(tmp_path / "site", record)
    assert doc.find("link", rel="canonical").attrs["href"] == f"https://errordb.example/docs/errors/{record['slug']}/"
    # Links between pages stay relative, so the same build works from file:// too.
    assert doc.find("a", class_="brand").attrs["href"] == "../../index.html"
    version = json.loads((tmp_path / "site" / "api" / "version.json").read_text())
    assert version["downloads"]["all.zip"]["url"].startswith("https://errordb.example/docs/api/")


def test_cli_build(db_path, tmp_path):
    out = tmp_path / "cli-site"
    result = CliRunner().invoke(__import__("errordb.cli", fromlist=["cli"]).cli, ["build", "--db", str(db_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "18 pages" in result.stderr
    assert (out / "index.html").is_file() and (out / "api" / "patterns.json").is_file()
    bad = CliRunner().invoke(__import__("errordb.cli", fromlist=["cli"]).cli, ["build", "--db", str(db_path), "--out", str(out), "--base-url", "javascript:alert(1)"])
    assert bad.exit_code == 2 and "--base-url" in bad.stderr


# Determinism, parallel, atomic, one file at a time -----------------------------------------------------


def test_two_builds_are_byte_identical_and_the_process_pool_gives_the_same_bytes(db_path, site, tmp_path):
    again = tmp_path / "again"
    build_site(db_path, again)
    assert tree_bytes(again) == tree_bytes(site)
    pooled = tmp_path / "pooled"
    report = build_site(db_path, pooled, jobs=2)
    assert report.workers == 2
    assert tree_bytes(pooled) == tree_bytes(site)


def test_the_same_records_ingested_in_another_order_build_the_same_site(tmp_path):
    """Related errors, listings and the search index read the store in orders of its own (ids,
    slugs, files), never in the order records were ingested: rowids follow that order now."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from generate import generate
    from helpers import RECORDS, write_jsonl

    envelopes = list(generate(120))
    builds = []
    for name, ordered in (("forward", envelopes), ("backward", envelopes[::-1])):
        db = tmp_path / f"{name}.db"
        ingest([write_jsonl(tmp_path / f"{name}.jsonl", ordered)], db, families_path=RECORDS / "families.toml")
        build_site(db, tmp_path / name)
        builds.append(tree_bytes(tmp_path / name))
    assert builds[0] == builds[1]
    related = [name for name, data in builds[0].items() if name.startswith("errors/") and b'<ul class="related">' in data]
    assert len(related) > 100  # the generated records do relate to each other


def test_manifest_lists_every_rendered_file(site):
    manifest = json.loads((site / MANIFEST).read_text(encoding="utf-8"))
    rendered = {str(p.relative_to(site)) for p in site.rglob("*") if p.is_file() and not str(p.relative_to(site)).startswith("api/")} - {MANIFEST}
    assert manifest["files"] == sorted(rendered)


def test_every_file_of_a_build_is_what_the_site_gives_for_its_path(db_path, site):
    """errordb serve answers each request with Site.file: the same bytes the build wrote."""
    from errordb.publish.site import Site

    conn = sqlite3.connect(db_path)
    try:
        served = Site(conn)
        for name, data in tree_bytes(site).items():
            if name == MANIFEST:
                continue
            found = served.file(name.removesuffix("index.html") if name.endswith("/index.html") else name)
            assert found is not None and found[0] == data, name
        assert served.file("errors/no-such-error/") is None and served.file("api/errors/0000000000000000.json") is None
        assert served.file("tags/no-such-tag/index.html") is None and served.file("page-99.html") is None
    finally:
        conn.close()


def test_a_template_edited_between_two_builds_of_one_process_is_read_again(db_path, tmp_path, monkeypatch):
    # errordb serve renders again in its own process after a template edit: the edit must reach
    # the next render, though the process keeps one jinja2 environment per templates folder.
    import shutil

    import errordb.publish.site

    templates = tmp_path / "templates"
    shutil.copytree(errordb.publish.site.templates_dir(), templates)
    monkeypatch.setattr(errordb.publish.site, "templates_dir", lambda: templates)
    out = tmp_path / "site"
    build_site(db_path, out)
    pages = sorted(out.glob("errors/*/index.html"))
    assert pages and not any("edited-template-marker" in p.read_text(encoding="utf-8") for p in pages)
    error_html = templates / "error.html"
    error_html.write_text(error_html.read_text(encoding="utf-8").replace("{% block main %}", "{% block main %}<p>edited-template-marker</p>", 1), encoding="utf-8")
    build_site(db_path, out, incremental=True)  # accepted, and a full build
    assert all("edited-template-marker" in p.read_text(encoding="utf-8") for p in pages)


def test_a_failed_build_leaves_the_previous_site_untouched(db_path, site, tmp_path):
    out = tmp_path / "site"
    build_site(db_path, out)
    before = tree_bytes(out)
    broken = tmp_path / "broken.db"
    broken.write_bytes(db_path.read_bytes())
    conn = sqlite3.connect(broken)
    with conn:
        conn.execute("UPDATE records SET slug = '../../escaped' WHERE id = ?", [KIMI_PP_ERROR])
    conn.close()  # the store is in WAL mode: an open connection keeps its -wal and -shm files beside it
    from errordb.publish.paths import SiteError

    with pytest.raises(SiteError, match="escaped"):
        build_site(broken, out)
    assert tree_bytes(out) == before
    assert sorted(os.listdir(tmp_path)) == ["broken.db", "site"]  # no half-built folder left behind


def test_a_folder_that_is_not_a_previous_build_is_never_replaced(db_path, tmp_path):
    from errordb.publish.paths import SiteError

    precious = tmp_path / "documents"
    precious.mkdir()
    (precious / "thesis.txt").write_text("years of work")
    with pytest.raises(SiteError, match="not a site built by errordb"):
        build_site(db_path, precious)
    assert (precious / "thesis.txt").read_text() == "years of work"
    (tmp_path / "file").write_text("x")
    with pytest.raises(SiteError, match="not a folder"):
        build_site(db_path, tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    build_site(db_path, empty)  # an empty folder (like a fresh checkout's site/) is fine
    assert (empty / "index.html").is_file()


def test_committed_site_is_the_build_of_the_bundled_records(tmp_path):
    """``site/`` in the repository is what ``errordb build`` makes of the bundled records, byte for byte."""
    from helpers import REPO

    committed = REPO / "site"
    fresh = tmp_path / "site"
    build_site(None, fresh)
    want, have = tree_bytes(fresh), tree_bytes(committed) if committed.is_dir() else {}
    stale = sorted(name for name in set(want) | set(have) if want.get(name) != have.get(name))
    assert not stale, (
        f"site/ is stale ({len(stale)} files differ, e.g. {stale[:3]}): rebuild it with `errordb build --out site/`"
    )


def test_the_environment_reads_dict_fields_as_jinja2_does():
    # site_templates reads ``d.name`` of a dict by its key first (one lookup instead of a caught
    # AttributeError); what it finds must be what jinja2's own rule finds, missing names included.
    import jinja2

    from errordb.publish.templates import environment

    from errordb.publish.site import templates_dir

    ours, theirs = environment(templates_dir()), jinja2.Environment(undefined=jinja2.StrictUndefined)

    class Thing:
        name = "attribute"

    values = [{"name": "key", "items": "a key named items", "none": None}, {}, Thing(), ["a list"], "text"]
    for value in values:
        for attribute in ("name", "items", "keys", "none", "missing", "__class__", "upper", "append"):
            found, expected = ours.getattr(value, attribute), theirs.getattr(value, attribute)
            if isinstance(expected, jinja2.Undefined):
                assert isinstance(found, jinja2.StrictUndefined) and found._undefined_name == attribute
            else:
                assert found == expected, (value, attribute)
    template = ours.from_string("{{ d.name }} {{ d.items() | list | length }} {{ d.get('name') }}")
    assert template.render(d={"name": "x", "other": 1}) == "x 2 x"
    with pytest.raises(jinja2.UndefinedError):
        ours.from_string("{{ d.missing }}").render(d={})


def test_error_pages_list_their_sections_and_link_each_heading(site):
    for record in records_by_id().values():
        doc = page_of(site, record)
        toc = doc.find("nav", **{"aria-label": "On this page"})
        targets = [a.attrs["href"] for a in toc.find_all("a")]
        sections = [node.attrs["id"] for node in doc.find("article").iter()
                    if node.tag in ("section", "aside") and node.attrs.get("id") not in (None, "draft")]  # fmt: skip
        assert targets == [f"#{section}" for section in sections], record["id"]  # every section, in page order
        for section in sections:
            heading = doc.by_id(section).find("h2")
            anchor = heading.find("a", class_="anchor")
            assert anchor is not None and anchor.attrs["href"] == f"#{section}", (record["id"], section)
