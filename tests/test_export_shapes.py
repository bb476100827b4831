"""Every exported file validates against its published shape; paging; the OpenAPI document."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_export_data import SYNTHETIC, build_db

from errordb.publish.api import export_api
from errordb.records.loader import parse_envelope
from errordb.store import connect

jsonschema = pytest.importorskip("jsonschema")

PAGE_SIZE = 2  # small enough that even the 3 families and 4 repositories take two pages
RECORDS = SYNTHETIC + 3

# Which published shape (an OpenAPI component) each file of the API has, by path.
SHAPE_RULES = [
    (r"errors/[0-9a-f]{16}(\.json)?", "record"),
    (r"errors/index\.json", "Manifest"),
    (r"errors/index\.pages/page-\d{4,}\.json", "ErrorSummaryPage"),
    (r"patterns\.json", "PatternListing"),
    (r"patterns\.pages/page-\d{4,}\.json", "PatternPage"),
    (r"repos\.json", "RepoIndex"),
    (r"repos\.pages/page-\d{4,}\.json", "RepoIndexPage"),
    (r"repos/[^/]+/[^/]+\.json", "RepoListing"),
    (r"repos/[^/]+/[^/]+\.pages/page-\d{4,}\.json", "ErrorSummaryPage"),
    (r"tags\.json", "TagIndex"),
    (r"tags\.pages/page-\d{4,}\.json", "TagIndexPage"),
    (r"tags/[^/]+\.json", "TagListing"),
    (r"tags/[^/]+\.pages/page-\d{4,}\.json", "ErrorSummaryPage"),
    (r"families\.json", "FamilyIndex"),
    (r"families\.pages/page-\d{4,}\.json", "FamilyIndexPage"),
    (r"families/[^/]+\.json", "FamilyListing"),
    (r"families/[^/]+\.pages/page-\d{4,}\.json", "ErrorSummaryPage"),
    (r"version\.json", "VersionInfo"),
    (r"schema/[a-z]+-v\d+\.json", "json-schema"),
    (r"openapi\.json", "openapi"),
    (r"all\.jsonl\.gz|all\.zip", "bulk"),  # tests/test_export_bulk.py
]


def shape_of(relative: str) -> str:
    for pattern, shape in SHAPE_RULES:
        if re.fullmatch(pattern, relative):
            return shape
    raise AssertionError(f"{relative}: a file of no documented shape")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return build_db(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def api(store, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "api"
    db = connect(store)
    export_api(db, out, page_size=PAGE_SIZE)
    db.close()
    return out


def load(api: Path, relative: str):
    return json.loads((api / relative).read_text(encoding="utf-8"))


def local(url: str) -> str:
    """The API path of an exported URL (exports here use base URL ``/``)."""
    assert url.startswith("/api/"), url
    return unquote(url.removeprefix("/api/"))


def validator(api: Path, component: str):
    """A validator for one of the shapes as the exported openapi.json publishes them."""
    document = {"components": load(api, "openapi.json")["components"], "$ref": f"#/components/schemas/{component}"}
    return jsonschema.Draft202012Validator(document)


def sort_key(item: dict) -> str:
    """What a listing is sorted by: record id, repository or tag."""
    return item.get("id") or item.get("repo") or item["tag"]


def all_items(api: Path, listing: str) -> list[dict]:
    """A listing's items, following its pages (a manifest has none inline)."""
    head = load(api, listing)
    items = list(head.get("items", []))
    for ref in head["pages"]:
        page = load(api, local(ref["url"]))
        assert ref["count"] == len(page["items"])
        assert (ref["first"], ref["last"]) == (sort_key(page["items"][0]), sort_key(page["items"][-1]))
        items += page["items"]
    assert head["count"] == len(items)
    return items


def test_every_file_validates_against_its_documented_shape(api):
    record_schema = jsonschema.Draft202012Validator(load(api, "schema/record-v2.json"))
    seen = set()
    for path in sorted(p for p in api.rglob("*") if p.is_file()):
        relative = path.relative_to(api).as_posix()
        shape = shape_of(relative)
        seen.add(shape)
        if shape == "record":
            data = json.loads(path.read_bytes())
            record_schema.validate(data)
            parse_envelope(relative, path.read_text(encoding="utf-8"))  # and the models accept it
        elif shape == "json-schema":
            jsonschema.Draft202012Validator.check_schema(load(api, relative))
        elif shape not in ("openapi", "bulk"):
            validator(api, shape).validate(load(api, relative))
    documented = {shape for _, shape in SHAPE_RULES}
    assert seen == documented, f"shapes the test data never produced: {documented - seen}"


def test_the_openapi_document_is_valid_and_its_references_resolve(api):
    validate = pytest.importorskip("openapi_spec_validator").validate
    document = load(api, "openapi.json")
    validate(document, base_uri=(api / "openapi.json").as_uri())
    text = json.dumps(document)
    for ref in set(re.findall(r'"\$ref": "([^"]+)"', text)):
        if ref.startswith("#/components/schemas/"):
            assert ref.rsplit("/", 1)[1] in document["components"]["schemas"]
        else:
            assert (api / ref).is_file(), ref
    # Every concrete file of the API matches one of the documented paths.
    templates = [re.escape(path).replace(r"\{", "{").replace(r"\}", "}") for path in document["paths"]]
    patterns = [re.sub(r"\{[a-z]+\}", "[^/]+", template) for template in templates]
    for path in api.rglob("*"):
        if path.is_file():
            relative = "/" + path.relative_to(api).as_posix()
            assert any(re.fullmatch(pattern, relative) for pattern in patterns), relative


def test_the_errors_index_is_paged_in_id_order(api, store):
    manifest = load(api, "errors/index.json")
    assert manifest["count"] == RECORDS and manifest["pageSize"] == PAGE_SIZE
    assert len(manifest["pages"]) == math.ceil(RECORDS / PAGE_SIZE) > 2
    ids = []
    for number, ref in enumerate(manifest["pages"], start=1):
        assert ref["url"] == f"/api/errors/index.pages/page-{number:04d}.json"
        page = load(api, local(ref["url"]))
        assert page["page"] == number and 1 <= len(page["items"]) <= PAGE_SIZE
        assert (ref["first"], ref["last"]) == (page["items"][0]["id"], page["items"][-1]["id"])
        ids += [item["id"] for item in page["items"]]
    db = connect(store)
    assert ids == [row[0] for row in db.execute("SELECT id FROM records ORDER BY id")]
    db.close()


def test_patterns_carry_what_the_matcher_needs(api, store):
    head = load(api, "patterns.json")
    assert len(head["items"]) == PAGE_SIZE and len(head["pages"]) == math.ceil(RECORDS / PAGE_SIZE) - 1
    entries = all_items(api, "patterns.json")
    assert set(entries[0]) == {"id", "slug", "repo", "errorClass", "messagePattern", "filePath", "function", "lineNumber", "errorMessage", "raiseLine"}
    db = connect(store)
    functions = dict(db.execute("SELECT id, function FROM records").fetchall())
    raise_lines = {rid: source.split("\n")[line - start].strip() for rid, source, start, line in db.execute(
        "SELECT id, sourceCode, sourceCodeStart, lineNumber FROM records")}  # fmt: skip
    db.close()
    assert {entry["id"]: entry["function"] for entry in entries} == functions
    assert functions["b318b4f842689251"] == "set_dspark_layers_to_capture"
    assert {entry["id"]: entry["raiseLine"] for entry in entries} == raise_lines
    assert raise_lines["b318b4f842689251"] == "raise ValueError("


@pytest.mark.parametrize(
    ("index", "key", "sql"),
    [
        ("repos.json", "repo", "SELECT repo, count(*) FROM records GROUP BY repo"),
        ("tags.json", "tag", "SELECT tag, count(DISTINCT record_id) FROM record_tags GROUP BY tag"),
        ("families.json", "tag", "SELECT f.tag, count(r.id) FROM families f LEFT JOIN records r ON r.backgroundTag = f.tag GROUP BY f.tag"),
    ],
)
def test_grouped_listings_hold_each_groups_records(api, store, index, key, sql):
    db = connect(store)
    expected = dict(db.execute(sql).fetchall())
    entries = all_items(api, index)
    assert [entry[key] for entry in entries] == sorted(expected)
    for entry in entries:
        assert entry["count"] == expected[entry[key]]
        items = all_items(api, local(entry["listingUrl"]))
        ids = [item["id"] for item in items]
        assert ids == sorted(set(ids)) and len(ids) == entry["count"]
    db.close()


def test_awkward_tag_names_get_their_own_files(api):
    # "v1" and "v1.json" must not share a file or a pages folder; "index" is a tag like any other;
    # "a+b" is percent-encoded in URLs.
    tags = {entry["tag"]: entry for entry in all_items(api, "tags.json")}
    assert (api / "tags" / "v1.json").is_file() and (api / "tags" / "v1.json.json").is_file()
    assert (api / "tags" / "v1.json.pages").is_dir() and (api / "tags" / "index.json").is_file()
    assert tags["a+b"]["listingUrl"] == "/api/tags/a%2Bb.json"
    assert load(api, "tags/a+b.json")["tag"] == "a+b"
    assert tags["synthetic"]["count"] == SYNTHETIC  # record 1 lists it twice, and is counted once


def test_a_family_without_records_is_listed_empty(api):
    family = load(api, "families/unused-family.json")
    assert family["count"] == 0 and family["items"] == [] and family["pages"] == []
    assert family["title"] == "A family no record uses"
    assert load(api, "families/missing-required-argument.json")["explanation"].startswith("A function, command or API")


def test_pages_are_bounded_in_bytes_too(store, tmp_path):
    db = connect(store)
    export_api(db, tmp_path / "api", page_size=1000, page_bytes=1)
    db.close()
    manifest = load(tmp_path / "api", "errors/index.json")
    assert len(manifest["pages"]) == RECORDS  # one item per page: no item fits beside another
    assert all(ref["count"] == 1 for ref in manifest["pages"])
