"""``openapi.json``: an OpenAPI 3.1 description of the static API (every endpoint is a GET of a file).

The listing shapes come from :mod:`errordb.publish.api_shapes`; record files are described by
referring to the published ``schema/record-v2.json`` (a relative reference, resolved against
``openapi.json``'s own URL), so the record schema exists in one place only.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from errordb import __version__
from errordb.publish import api_layout as layout
from errordb.publish.api_layout import Urls
from errordb.publish.api_shapes import API_VERSION, SHAPES

_ID = {"type": "string", "pattern": "^[0-9a-f]{16}$"}
_PAGE = {"type": "string", "pattern": "^[0-9]{4,}$", "description": "Page number, at least four digits: 0002."}
_OWNER = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9-]{0,38}$"}
_NAME = {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,100}$"}
_TAG = {"type": "string", "pattern": "^[a-z0-9]+(?:[-.+][a-z0-9]+)*$", "description": "Percent-encode '+' as %2B."}


def openapi_document(urls: Urls, *, explain_version: int | None) -> dict[str, Any]:
    """The OpenAPI document of an export published under ``urls``; ``explain_version`` is the
    version of the published explain schema (None when there is none)."""
    _, definitions = models_json_schema(
        [(model, "validation") for model in SHAPES.values()], ref_template="#/components/schemas/{model}"
    )
    schemas = dict(definitions["$defs"])
    schemas["RecordFile"] = {"$ref": layout.RECORD_SCHEMA, "description": "A record file (schemaVersion 2)."}
    paths: dict[str, Any] = {}

    def get(path: str, summary: str, schema: str | None, *, params: dict[str, dict] | None = None,
            media: str = "application/json", description: str | None = None) -> None:  # fmt: skip
        content = {"schema": {"$ref": f"#/components/schemas/{schema}"}} if schema else {}
        operation: dict[str, Any] = {
            "operationId": _operation_id(path),
            "summary": summary,
            "responses": {"200": {"description": summary, "content": {media: content}}},
        }
        if description:
            operation["description"] = description
        if params:
            operation["parameters"] = [
                {"name": name, "in": "path", "required": True, "schema": value} for name, value in params.items()
            ]
        paths[path] = {"get": operation}

    def paged(listing: str, summary: str, listing_schema: str, page_schema: str, params: dict | None = None) -> None:
        get(f"/{listing}", summary, listing_schema, params=params)
        page = layout.page_path(listing, 1).replace("page-0001", "page-{page}")
        get(f"/{page}", f"{summary}: a further page", page_schema, params={**(params or {}), "page": _PAGE})

    get(f"/{layout.VERSION}", "Dataset version, record count and content hash", "VersionInfo")
    get(f"/{layout.ERRORS_INDEX}", "Manifest of the errors index: its pages, by id range", "Manifest")
    get(f"/{layout.page_path(layout.ERRORS_INDEX, 1).replace('page-0001', 'page-{page}')}",
        "A page of the errors index", "ErrorSummaryPage", params={"page": _PAGE})  # fmt: skip
    get("/errors/{id}.json", "A record file, byte for byte as in records/", "RecordFile", params={"id": _ID})
    get("/errors/{id}", "The same record file without the extension", "RecordFile", params={"id": _ID},
        description="Static hosts serve it as application/octet-stream unless configured (see docs/api.md); "
        "the body is the same JSON.")  # fmt: skip
    paged(layout.PATTERNS, "What the in-browser matcher needs of every record", "PatternListing", "PatternPage")
    paged(layout.REPOS_INDEX, "Every repository", "RepoIndex", "RepoIndexPage")
    paged(layout.repo_listing("{owner}/{name}"), "The records of one repository", "RepoListing", "ErrorSummaryPage",
          params={"owner": _OWNER, "name": _NAME})  # fmt: skip
    paged(layout.TAGS_INDEX, "Every tag in use", "TagIndex", "TagIndexPage")
    paged(layout.tag_listing("{tag}"), "The records with one tag", "TagListing", "ErrorSummaryPage", params={"tag": _TAG})
    paged(layout.FAMILIES_INDEX, "Every failure family", "FamilyIndex", "FamilyIndexPage")
    paged(layout.family_listing("{tag}"), "A failure family and its records", "FamilyListing", "ErrorSummaryPage",
          params={"tag": _TAG})  # fmt: skip
    get(f"/{layout.RECORD_SCHEMA}", "JSON Schema of a record file", None, media="application/schema+json")
    if explain_version is not None:
        get(f"/{layout.explain_schema_path(explain_version)}",
            f"JSON Schema of `errordb explain --format json`, version {explain_version}", None,
            media="application/schema+json")  # fmt: skip
    get(f"/{layout.ALL_JSONL}", "Every record file, one per line, gzip-compressed", None, media="application/gzip")
    get(f"/{layout.ALL_ZIP}", "Every record file as <id>.json in one zip archive", None, media="application/zip")
    get(f"/{layout.OPENAPI}", "This document", None)
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "errordb static JSON API",
            "version": f"{API_VERSION}.0 (errordb {__version__})",
            "description": "Analysed Python errors as static JSON files. Every endpoint is a file: "
            "GET only, no query parameters. Shapes and paging: docs/api.md.",
        },
        "servers": [{"url": urls.api_root}],
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def _operation_id(path: str) -> str:
    """A stable operation name from a path: ``/tags/{tag}.json`` → ``get_tags_tag_json``."""
    cleaned = "".join(c if c.isalnum() else "_" for c in path)
    return "get_" + "_".join(part for part in cleaned.split("_") if part)
