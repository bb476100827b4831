"""Naming conventions the dataset follows: slugs, pinned GitHub URLs, a source tree's version.

Slugs follow the seed records: the message lower-cased, every run of other characters turned
into one hyphen, cut at a word boundary to at most :data:`SLUG_BASE_MAX` characters (the class,
for a record of an exception raised without a message), alone or
with the first six hex digits of the record's id as a suffix
(``dspark-requires-explicit-layer-ids-for-aux-hidden-b318b4``). Records that share a message take
the suffix; harvested drafts always do, so their slugs are unique across repositories whatever
else is harvested.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SLUG_BASE_MAX = 50
SLUG_SUFFIX_LEN = 6

def distribution_name_key(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503): ``Jinja2``, ``jinja2`` and
    ``JINJA-2`` alike."""
    return re.sub(r"[-_.]+", "-", name).lower()


#: The ``distributionVersion`` of a draft learned from a source tree (``errordb learn --path``),
#: which has no version: its ``distribution`` is the tree's folder name.
SOURCE_TREE = "tree"


def slug_base(message: str) -> str:
    """The slug of ``message`` before any collision suffix."""
    words = [w for w in re.split(r"[^a-z0-9]+", message.lower()) if w]
    base = ""
    for word in words:
        candidate = f"{base}-{word}" if base else word
        if len(candidate) > SLUG_BASE_MAX:
            break
        base = candidate
    return base or (words[0][:SLUG_BASE_MAX] if words else "error")


def slug_with_suffix(message: str, record_id: str) -> str:
    """The slug of a record with its id's suffix (a draft's, or one whose base slug is shared)."""
    return f"{slug_base(message)}-{record_id[:SLUG_SUFFIX_LEN]}"


def allowed_slugs(message: str, record_id: str) -> tuple[str, str]:
    """The two slugs the convention allows for a record: the base, or base plus id suffix."""
    return slug_base(message), slug_with_suffix(message, record_id)


def github_url(repo: str, sha: str, file_path: str, start: int, end: int) -> str:
    """The github.com URL of lines ``start``..``end`` of a file, pinned to a commit."""
    return f"https://github.com/{repo}/blob/{sha}/{file_path}#L{start}-L{end}"


#: Names Windows keeps for devices, whatever follows a dot (``con.json`` is CON too): no file or
#: folder can be named so there.
RESERVED_DEVICE_NAMES = frozenset({"con", "prn", "aux", "nul", *(f"com{n}" for n in range(1, 10)),
                                   *(f"lpt{n}" for n in range(1, 10))})


def reserved_name(name: str) -> bool:
    """Whether a file or folder name is a device name on Windows (``con``, ``aux.json``, ``LPT1``)."""
    return name.split(".", 1)[0].lower() in RESERVED_DEVICE_NAMES


def path_name_problems(rows: Iterable[tuple[str, str, str, Iterable[str], str | None]]) -> list[tuple[str, str, str]]:
    """``(record id, field, problem)`` for each name that would name a file or folder of the site or
    the API that not every common host can hold. ``rows`` are ``(id, repo, slug, tags,
    backgroundTag)``: a slug names a page's folder, a repository's owner and name, a tag and a
    family name listing files. Problems: a device name Windows reserves, and a repository that
    differs from another only in case (on macOS and Windows the two listings are one file)."""
    problems = []
    spelled: dict[str, tuple[str, str]] = {}
    for record_id, repo, slug, tags, family in rows:
        repo = repo or ""  # a learned draft may name no repository
        owner, _, name = repo.partition("/")
        for field, value in (("slug", slug), ("repo", owner), ("repo", name), *(("tags", t) for t in tags), ("backgroundTag", family)):
            if value and reserved_name(value):
                problems.append((record_id, field, f"{value!r} is a device name on Windows ({value.split('.', 1)[0].upper()}): "
                                                   "no file or folder can be named so there"))
        first_repo, first_id = spelled.setdefault(repo.casefold(), (repo, record_id))
        if first_repo != repo:
            problems.append((record_id, "repo", f"{repo!r} differs from {first_repo!r} (record {first_id}) only in case: "
                                                "on macOS and Windows their files would be one"))
    return problems


#: A site's URL as errordb takes it: http(s), a plain host, a path of URL-safe characters.
_SITE_PATH = r"/[A-Za-z0-9._~/%-]*"
_SITE_URL = re.compile(rf"https?://[A-Za-z0-9.-]+(?::\d+)?(?:{_SITE_PATH})?")


def normal_site_url(value: str, *, path: bool = False) -> str | None:
    """``value`` as a site URL ending in ``/``, or None when it is not an http(s) URL errordb
    takes. With ``path``, a path on the site's host (``/``, ``/errordb/``) is taken too: what
    build and export, whose links are relative, are given as ``--base-url``."""
    value = value.strip()
    if not (_SITE_URL.fullmatch(value) or path and re.fullmatch(_SITE_PATH, value)):
        return None
    return value if value.endswith("/") else value + "/"
