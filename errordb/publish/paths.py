"""Where each page of the site lives, and the links between pages.

Output file names come only from checked names: every path segment must match
``^[a-z0-9-]+$`` (:func:`segment`), whatever the database holds, so a hand-edited record with
``../`` in its slug cannot name a file outside the output folder (the writer checks the
resolved path as well). Names that the record schema allows but a file name here does not
(``Owner/Repo.js``, tag ``python3.11``, a Windows device name such as ``con``) get a readable
form plus a hash of the real name, so two names never share a folder.

Links are relative (``../../errors/<slug>/index.html``), so the site works from ``file://``, at
a domain's root and under any sub-path. Only ``sitemap.xml`` and ``<link rel=canonical>`` use the
``--base-url``.
"""

from __future__ import annotations

import hashlib
import re

from errordb.errors import ErrordbError
from errordb.records.conventions import normal_site_url, reserved_name

_SEGMENT = re.compile(r"^[a-z0-9-]+$")
_ID = re.compile(r"^[0-9a-f]{16}$")
HASH_LEN = 10


class SiteError(ErrordbError):
    """A database or option the site cannot be built from."""


def segment(value: object, what: str) -> str:
    """``value`` as one path segment, or :class:`SiteError` when it is not ``^[a-z0-9-]+$``."""
    if not isinstance(value, str) or not _SEGMENT.fullmatch(value) or len(value) > 120:
        raise SiteError(f"{what} {value!r} cannot name a page (only a-z, 0-9 and '-' are allowed)")
    return value


def record_id(value: object) -> str:
    """A record id as used in page data and API links (16 lowercase hex digits)."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise SiteError(f"record id {value!r} is not 16 lowercase hex digits")
    return value


def _readable(value: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")[:60] or "x"


def _hashed(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:HASH_LEN]


def _clean(value: str) -> bool:
    """A segment every common host can hold: plain, and no Windows device name (``con``, ``aux``)."""
    return _SEGMENT.fullmatch(value) is not None and not reserved_name(value)


def _named(value: str) -> str:
    """``value`` itself when it is a clean segment, else a readable form plus a hash of it."""
    if _clean(value):
        return value
    return f"{_readable(value)}-{_hashed(value)}"


def record_dir(slug: str) -> tuple[str, ...]:
    segment(slug, "slug")
    return ("errors", _named(slug))


def repo_dir(repo: str) -> tuple[str, ...]:
    """``repos/<owner>/<name>``; a repo that is not already lower-case and plain gets a hash."""
    owner, _, name = repo.partition("/")
    if _clean(owner) and _clean(name):
        return ("repos", owner, name)
    # The hash is of the whole name, so Foo/bar and foo/bar (or a.b and a-b) never share a folder.
    readable_owner = _readable(owner)
    if reserved_name(readable_owner):
        readable_owner = f"{readable_owner}-{_hashed(owner)}"
    return ("repos", segment(readable_owner, "repository owner"), segment(f"{_readable(name)}-{_hashed(repo)}", "repository name"))


def tag_dir(tag: str) -> tuple[str, ...]:
    return ("tags", segment(_named(tag), "tag"))


def family_dir(tag: str) -> tuple[str, ...]:
    return ("families", segment(_named(tag), "family"))


def listing_file(directory: tuple[str, ...], page: int) -> tuple[str, ...]:
    """Page 1 of a listing is ``index.html``; page n is ``page-<n>.html`` beside it."""
    return (*directory, "index.html" if page == 1 else f"page-{page}.html")


def relative_root(path: tuple[str, ...]) -> str:
    """The relative link from the page at ``path`` to the site root ("" at the root)."""
    return "../" * (len(path) - 1)


def public_path(path: tuple[str, ...]) -> str:
    """The URL path of a page, with ``index.html`` left off (``errors/<slug>/``)."""
    if path[-1] == "index.html":
        return "/".join(path[:-1]) + ("/" if len(path) > 1 else "")
    return "/".join(path)


def normal_base_url(base_url: str) -> str:
    """``--base-url`` of build and export, checked and ending in ``/``: a path (``/``, ``/docs/``)
    or an http(s) URL (:func:`~errordb.records.conventions.normal_site_url`)."""
    value = normal_site_url(base_url or "/", path=True)
    if value is None:
        raise SiteError(f"--base-url {base_url!r}: give a path such as /errordb/ or an http(s) URL")
    return value
