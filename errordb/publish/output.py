"""Writing the API's files: one output folder, deterministic JSON, and paged listings.

Every file of an export goes through :class:`OutputTree`, which keeps paths inside the folder,
refuses to write a file twice (two names that map to one file would otherwise silently
overwrite each other) and counts what it wrote. :class:`Pager` writes a listing a page at a
time as its items arrive, so no listing is ever held in memory whole.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from errordb.publish.api_layout import ExportError, Urls, page_path

__all__ = ["ExportError", "MemoryTree", "OutputTree", "Pager", "dump_json", "dump_pretty"]


def dump_json(value: Any) -> str:
    """Compact JSON with sorted keys: the form of every API data file (records excepted)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def dump_pretty(value: Any) -> str:
    """Indented JSON with sorted keys and a final newline, for the small documents people read."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


class OutputTree:
    """The folder an export writes into, with counts of the files and the bytes written (a hard
    link is a file but writes no bytes)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.files = 0
        self.bytes = 0
        self._root = os.fspath(self.root)
        self._made: set[str] = {self._root}

    def path(self, relative: str) -> Path:
        """The file at ``relative`` (``/``-separated), its folder created; never outside the root.

        Names come from the database (repositories, tags), which is not validated again on
        export: a hand-edited row such as ``../x`` must not write outside the folder.
        """
        return Path(self._place(relative))

    def _place(self, relative: str) -> str:
        # :meth:`path` as text: a Path per file cost more than writing a record's file.
        parts = _plain_parts(relative)
        path = os.path.join(self._root, *parts)
        parent = os.path.dirname(path)
        if parent not in self._made:
            os.makedirs(parent, exist_ok=True)
            self._made.add(parent)
        return path

    def write_bytes(self, relative: str, data: bytes) -> None:
        with self.open(relative) as handle:
            handle.write(data)

    def write_text(self, relative: str, text: str) -> None:
        self.write_bytes(relative, text.encode("utf-8"))

    def write_json(self, relative: str, value: Any, *, pretty: bool = False) -> None:
        self.write_text(relative, dump_pretty(value) if pretty else dump_json(value))

    @contextmanager
    def open(self, relative: str) -> Iterator[IO[bytes]]:
        """A new binary file at ``relative``, for writers that stream (gzip, zip)."""
        path = self._place(relative)
        try:
            handle = open(path, "xb")
        except FileExistsError:
            raise ExportError(f"{relative}: two API files map to this name (names that differ only in case?)") from None
        try:
            with handle:
                yield handle
                self.bytes += handle.tell()
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(path)  # a write's ENOSPC names no file: say which one it was
            raise
        self.files += 1

    def read(self, relative: str) -> IO[bytes]:
        return open(self._place(relative), "rb")

    def size(self, relative: str) -> int:
        return os.path.getsize(self._place(relative))

    def link(self, existing: str, relative: str) -> None:
        """Make ``relative`` a second name of the file ``existing`` (a copy where links fail):
        the extension-less record URLs cost no space."""
        source, target = self._place(existing), self._place(relative)
        try:
            os.link(source, target)
        except FileExistsError:
            raise ExportError(f"{relative}: two API files map to this name") from None
        except OSError:
            shutil.copyfile(source, target)
            self.bytes += os.stat(target).st_size
        self.files += 1


class MemoryTree:
    """An :class:`OutputTree` in memory, for answering one request of ``errordb serve``."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def write_bytes(self, relative: str, data: bytes) -> None:
        self.files["/".join(_plain_parts(relative))] = data

    def write_text(self, relative: str, text: str) -> None:
        self.write_bytes(relative, text.encode("utf-8"))

    def write_json(self, relative: str, value: Any, *, pretty: bool = False) -> None:
        self.write_text(relative, dump_pretty(value) if pretty else dump_json(value))

    @contextmanager
    def open(self, relative: str) -> Iterator[IO[bytes]]:
        buffer = io.BytesIO()
        yield buffer
        self.write_bytes(relative, buffer.getvalue())

    def read(self, relative: str) -> IO[bytes]:
        return io.BytesIO(self.files[relative])

    def size(self, relative: str) -> int:
        return len(self.files[relative])

    def link(self, existing: str, relative: str) -> None:
        self.write_bytes(relative, self.files[existing])


def _plain_parts(relative: str) -> list[str]:
    parts = relative.split("/")
    if any(p in ("", ".", "..") or "\\" in p or "\x00" in p for p in parts):
        raise ExportError(f"refusing to write {relative!r}: not a plain relative path")
    return parts


class Pager:
    """One listing, written a page at a time: items go in as they arrive, in their sort order.

    A page holds at most ``page_size`` items and, unless one item alone is larger, at most
    ``page_bytes`` bytes of item JSON. Pages are ``<listing stem>.pages/page-NNNN.json``, each
    ``{"items": [...], "page": N}``, and the listing file ``listing`` describes them:

    - ``inline_first=False`` (a *manifest*): the listing holds no items, and ``pages`` lists
      every page, the first included;
    - ``inline_first=True`` (a *listing*): the first page's items are in the listing itself, so a
      small listing is one request, and ``pages`` lists the further pages only.

    Each page entry is ``{"url", "count", "first", "last"}`` (the sort keys of its first and last
    item), so a client looking for one key fetches one page.
    """

    def __init__(
        self,
        tree: OutputTree | MemoryTree,
        urls: Urls,
        listing: str,
        *,
        page_size: int,
        page_bytes: int,
        inline_first: bool,
    ):
        if page_size < 1 or page_bytes < 1:
            raise ValueError("page_size and page_bytes must be at least 1")
        self.tree, self.urls, self.listing = tree, urls, listing
        self.page_size, self.page_bytes, self.inline_first = page_size, page_bytes, inline_first
        self.count = 0
        self._items: list[dict[str, Any]] = []  # the current page
        self._size = 0  # bytes of its items' JSON
        self._first: str | None = None  # sort keys of the current page's first item ...
        self._last: str | None = None  # ... and of the last item added
        self._inline: list[dict[str, Any]] = []
        self._pages: list[dict[str, Any]] = []
        self._numbers = 0

    def add(self, key: str, item: dict[str, Any]) -> None:
        """Append ``item``, whose sort key is ``key``; keys must arrive in ascending order."""
        if self._last is not None and key < self._last:
            raise ExportError(f"{self.listing}: items out of order ({key!r} after {self._last!r})")
        size = len(dump_json(item).encode("utf-8")) + 1  # and its comma
        if self._items and (len(self._items) >= self.page_size or self._size + size > self.page_bytes):
            self._flush()
        if not self._items:
            self._first = key
        self._items.append(item)
        self._size += size
        self._last = key
        self.count += 1

    def _flush(self) -> None:
        self._numbers += 1
        if self.inline_first and self._numbers == 1:
            self._inline = self._items
        else:
            path = page_path(self.listing, self._numbers)
            self.tree.write_text(path, dump_json({"items": self._items, "page": self._numbers}))
            self._pages.append(
                {"url": self.urls.api(path), "count": len(self._items), "first": self._first, "last": self._last}
            )
        self._items, self._size = [], 0

    def finish(self, fields: dict[str, Any] | None = None) -> None:
        """Write the last page and the listing file, with ``fields`` (the listing's header) added."""
        if self._items:
            self._flush()
        header = {**(fields or {}), "count": self.count, "pageSize": self.page_size, "pages": self._pages}
        if self.inline_first:
            header["items"] = self._inline
        self.tree.write_text(self.listing, dump_json(header))
