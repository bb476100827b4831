"""The bulk downloads: every record file in ``all.jsonl.gz`` and in ``all.zip``.

Both are written in one pass as the records stream by, with fixed metadata (gzip: no
timestamp, no file name; zip: every entry dated 1980-01-01 00:00, mode 0644, made on Unix),
so the same records give the same bytes. :mod:`zipfile` writes ZIP64 records where the
archive needs them (over 65,535 entries or 4 GiB).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import zipfile
from typing import Any

from errordb.publish import api_layout as layout

#: The date every zip entry carries (the earliest a zip file can say).
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
#: A regular file, rw-r--r--, in the upper half of a zip entry's external attributes.
ZIP_FILE_MODE = 0o100644 << 16
COMPRESS_LEVEL = 6


class Downloads:
    """The two bulk files of an API being written; :meth:`add` each record in id order."""

    def __init__(self, tree: Any):
        self._tree = tree
        self._stack = contextlib.ExitStack()
        jsonl = self._stack.enter_context(tree.open(layout.ALL_JSONL))
        # filename="" and mtime=0: nothing in the header depends on the file or the clock.
        self._jsonl = self._stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=jsonl, mtime=0, compresslevel=COMPRESS_LEVEL))
        self._zip = self._stack.enter_context(zipfile.ZipFile(self._stack.enter_context(tree.open(layout.ALL_ZIP)), "w"))

    def add(self, record_id: str, data: bytes) -> None:
        name = layout.ALL_JSONL
        try:
            self._jsonl.write(data + b"\n")
            name = layout.ALL_ZIP
            entry = zipfile.ZipInfo(f"{record_id}.json", date_time=ZIP_DATE)
            entry.create_system = 3
            entry.external_attr = ZIP_FILE_MODE
            entry.compress_type = zipfile.ZIP_DEFLATED
            self._zip.writestr(entry, data, compresslevel=COMPRESS_LEVEL)
        except OSError as exc:
            if exc.filename is None:  # a write's ENOSPC names no file: say which one it was
                exc.filename = str(self._tree.path(name))
            raise

    def close(self) -> dict[str, dict[str, Any]]:
        """Finish both files; returns each one's ``bytes`` and ``sha256`` (for ``version.json``)."""
        self._stack.close()
        facts = {}
        for name in (layout.ALL_JSONL, layout.ALL_ZIP):
            with self._tree.read(name) as handle:
                facts[name] = {"bytes": self._tree.size(name), "sha256": hashlib.file_digest(handle, "sha256").hexdigest()}
        return facts

    def discard(self) -> None:
        """Close the files after a failure (what was written is the caller's to remove)."""
        with contextlib.suppress(Exception):
            self._stack.close()
