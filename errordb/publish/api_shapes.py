"""The documented shapes of the API's files (other than the record files), as pydantic models.

These models are the contract of ``docs/api.md``: the OpenAPI document publishes their JSON
Schemas under ``components/schemas``, and the tests validate every exported file against them.
The export itself writes plain dicts (one per record, a million times), not model instances.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

#: Version of the API's layout and listing shapes; bumped on any incompatible change.
API_VERSION = 1


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorSummary(_Shape):
    """One record in the errors index and in the repository, tag and family listings."""

    id: str = Field(description="16 hex digits.")
    slug: str
    repo: str = Field(description="owner/name on GitHub.")
    errorClass: str
    errorMessage: str
    messagePattern: str = Field(description="RE2 regular expression matching the runtime message.")
    filePath: str
    lineNumber: int
    pageUrl: str = Field(description="The record's HTML page: <base>errors/<slug>/.")
    jsonUrl: str = Field(description="The record file: <base>api/errors/<id>.json.")


class PatternEntry(_Shape):
    """What the site's in-browser matcher needs of one record (see docs/matching.md)."""

    id: str
    slug: str
    repo: str
    errorClass: str
    messagePattern: str
    filePath: str
    function: str | None = Field(description="The def enclosing lineNumber in the snippet, if any.")
    lineNumber: int
    errorMessage: str
    raiseLine: str | None = Field(description="The source line at lineNumber, stripped: a traceback that prints it raised here, though the file moved.")


class RepoEntry(_Shape):
    repo: str
    owner: str
    name: str
    url: str = Field(description="The repository on GitHub.")
    count: int
    listingUrl: str


class TagEntry(_Shape):
    tag: str
    count: int
    listingUrl: str


class FamilyEntry(_Shape):
    tag: str
    title: str | None
    summary: str | None
    count: int
    listingUrl: str


class PageRef(_Shape):
    """One page of a paged listing: where it is, and the sort keys it spans."""

    url: str
    count: int = Field(ge=1)
    first: str = Field(description="Sort key (id, repository, tag) of the page's first item.")
    last: str = Field(description="Sort key of the page's last item.")


Item = TypeVar("Item", bound=BaseModel)


class Page(_Shape, Generic[Item]):
    """A page file, ``<listing stem>.pages/page-NNNN.json``."""

    page: int = Field(ge=1)
    items: list[Item]


class Manifest(_Shape):
    """``errors/index.json``: the pages of the errors index, the first included; no items."""

    count: int = Field(description="Records in all pages.")
    pageSize: int = Field(description="Most items a page holds (pages may hold fewer: they are also bounded in bytes).")
    pages: list[PageRef]


class Listing(_Shape, Generic[Item]):
    """A listing: the first page's items inline, and the further pages."""

    count: int = Field(description="Items in this file and all further pages.")
    pageSize: int
    items: list[Item] = Field(description="The first page.")
    pages: list[PageRef] = Field(description="Pages 2, 3, ...; empty when all items are inline.")


class RepoListing(Listing[ErrorSummary]):
    """``repos/<owner>/<name>.json``."""

    repo: str
    owner: str
    name: str
    url: str


class TagListing(Listing[ErrorSummary]):
    """``tags/<tag>.json``."""

    tag: str


class FamilyListing(Listing[ErrorSummary]):
    """``families/<tag>.json``: a failure family (``backgroundTag``) and its records."""

    tag: str
    title: str | None = Field(description="None for a tag without an entry in families.toml.")
    summary: str | None
    explanation: str | None


class Download(_Shape):
    url: str
    bytes: int
    sha256: str


class VersionInfo(_Shape):
    """``version.json``: which data this export holds."""

    apiVersion: int
    datasetVersion: str | None = Field(description="Newest datasetVersion of the records; None when empty.")
    recordCount: int
    contentHash: str | None = Field(description="SHA-256 over every record's id and content hash (the store's meta table).")
    schemaVersion: int = Field(description="schemaVersion of the record files.")
    errordbVersion: str
    downloads: dict[str, Download] = Field(description="The bulk files, by name.")
    schemas: dict[str, str] = Field(description="URLs of the published JSON Schemas, by name.")


# Concrete classes rather than ``Page[ErrorSummary]`` so that the schemas get plain names.


class ErrorSummaryPage(Page[ErrorSummary]):
    """A page of the errors index or of a repository, tag or family listing."""


class PatternListing(Listing[PatternEntry]):
    """``patterns.json``."""


class PatternPage(Page[PatternEntry]):
    """A further page of ``patterns.json``."""


class RepoIndex(Listing[RepoEntry]):
    """``repos/index.json``: every repository, by name."""


class RepoIndexPage(Page[RepoEntry]):
    pass


class TagIndex(Listing[TagEntry]):
    """``tags/index.json``: every tag in use."""


class TagIndexPage(Page[TagEntry]):
    pass


class FamilyIndex(Listing[FamilyEntry]):
    """``families/index.json``: every failure family."""


class FamilyIndexPage(Page[FamilyEntry]):
    pass


#: Every shape published in the OpenAPI document, by its component name.
SHAPES: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (
        Manifest, ErrorSummaryPage, PatternListing, PatternPage, RepoListing, TagListing, FamilyListing,
        RepoIndex, RepoIndexPage, TagIndex, TagIndexPage, FamilyIndex, FamilyIndexPage, VersionInfo,
    )
}  # fmt: skip
