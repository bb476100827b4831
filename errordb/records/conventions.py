"""Naming conventions the dataset follows: slugs and pinned GitHub URLs.

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

SLUG_BASE_MAX = 50
SLUG_SUFFIX_LEN = 6


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
