"""Where each part of the static JSON API lives: file paths inside the API folder, and URLs.

One place names every file, so the writers, the OpenAPI document and the tests agree. Paths are
relative to the API folder (``site/api``) and always use ``/``. The API is published at
``<base URL>api/``; record pages (written by the site) are at ``<base URL>errors/<slug>/``.

Naming rules that keep every name collision-free on a plain file system:

- a record is ``errors/<id>.json`` plus the extension-less ``errors/<id>``; ids are 16 hex
  digits, so neither can meet ``errors/index.json``;
- the indexes of repositories, tags and families sit beside their folders (``tags.json``, not
  ``tags/index.json``, which a tag named ``index`` would claim);
- a listing ``X.json`` that needs more than one page keeps its further pages in the folder
  ``X.pages/``. A listing's own name always ends in ``.json`` and a pages folder's in
  ``.pages``, so no tag or repository name (which may contain dots, e.g. the tag ``v1.json``)
  can make one listing's pages folder the file of another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from errordb.errors import ErrordbError
from errordb.publish.paths import normal_base_url


class ExportError(ErrordbError):
    """An export that cannot be written; the previous API folder is left as it was.

    Defined here, in the export module every other one imports, so that each can raise it.
    """

#: A record id a file name may be built from (ids are checked on ingest, but a store may be
#: edited by hand: a path is never built from any other).
PLAIN_RECORD_ID = re.compile(r"[0-9a-f]{16}")

#: The folder under the site's base URL that holds the API.
API_FOLDER = "api"

ERRORS_INDEX = "errors/index.json"
PATTERNS = "patterns.json"
REPOS_INDEX = "repos.json"
TAGS_INDEX = "tags.json"
FAMILIES_INDEX = "families.json"
RECORD_SCHEMA = "schema/record-v2.json"
ALL_JSONL = "all.jsonl.gz"
ALL_ZIP = "all.zip"
OPENAPI = "openapi.json"
VERSION = "version.json"


def record_path(record_id: str) -> str:
    """The record file, byte for byte as in ``records/``."""
    return f"errors/{record_id}.json"


def record_alias_path(record_id: str) -> str:
    """The same record without an extension, so that ``/api/errors/<id>`` works on any static host."""
    return f"errors/{record_id}"


def repo_listing(repo: str) -> str:
    """The listing of one repository's records; ``repo`` is ``owner/name``."""
    return f"repos/{repo}.json"


def tag_listing(tag: str) -> str:
    return f"tags/{tag}.json"


def family_listing(tag: str) -> str:
    return f"families/{tag}.json"


def explain_schema_path(version: int) -> str:
    """The JSON Schema of ``errordb explain --format json`` output of ``version``."""
    return f"schema/explain-v{version}.json"


def page_path(listing: str, number: int) -> str:
    """Page ``number`` (1-based) of a paged listing, in the listing's ``.pages`` folder."""
    return f"{listing.removesuffix('.json')}.pages/page-{number:04d}.json"


@dataclass(frozen=True)
class Urls:
    """The URLs that API documents link to, for a site published at ``base``."""

    base: str

    @classmethod
    def for_site(cls, base_url: str) -> Urls:
        """``base_url`` is where the site is served (``/``, ``https://host/errordb/``), as build
        takes it (:func:`~errordb.publish.paths.normal_base_url`)."""
        return cls(normal_base_url(base_url))

    @property
    def api_root(self) -> str:
        """The API folder's URL without the trailing slash (OpenAPI's ``servers`` entry)."""
        return f"{self.base}{API_FOLDER}"

    def api(self, path: str) -> str:
        """The URL of an API file. Names are percent-encoded: a tag such as ``a+b`` becomes
        ``a%2Bb``, which every host decodes back, while a raw ``+`` is read as a space by some
        (S3's website endpoints)."""
        return f"{self.api_root}/{quote(path, safe='/')}"

    def record_json(self, record_id: str) -> str:
        return self.api(record_path(record_id))

    def record_page(self, slug: str) -> str:
        """The record's HTML page on the site (written by ``errordb build``)."""
        return f"{self.base}errors/{quote(slug, safe='')}/"
