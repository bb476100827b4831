"""The bulk downloads: ``all.jsonl.gz`` and ``all.zip``, written in one pass and deterministically.

Both take the records one at a time and keep nothing per record in memory, so they scale to
millions of records:

- :class:`JsonLinesGzip`: one envelope per line, gzip with a zero timestamp and no file name in
  the header (those are the only parts of a gzip stream that would differ between runs);
- :class:`StreamingZip`: one ``<id>.json`` per record, as OSV publishes its ``all.zip``. Python's
  ``zipfile`` keeps an object per entry until it closes (~370 bytes each, so ~370 MB at a million
  records); this writer spools the central directory to a temporary file instead. Every entry
  gets the same timestamp (1980-01-01, the earliest a zip can say) and the same permissions;
  the ZIP64 extensions are used when the archive needs them (more than 65,534 entries, or
  offsets past 4 GiB).
"""

from __future__ import annotations

import gzip
import shutil
import struct
import tempfile
import zlib
from typing import IO

#: Beyond these, the classic zip fields cannot hold the value and ZIP64 records take over.
ZIP64_COUNT_LIMIT = 0xFFFF
ZIP64_OFFSET_LIMIT = 0xFFFFFFFF

_DOS_TIME = 0  # 00:00:00
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01: years count from 1980
_DEFLATE = 8
_UNIX = 3  # "version made by" host: Unix, so the external attributes are Unix modes
_FILE_MODE = 0o100644 << 16  # a regular file, rw-r--r--
_LEVEL = 6


class JsonLinesGzip:
    """Gzip-compressed JSON Lines: :meth:`add` one JSON text per line."""

    def __init__(self, file: IO[bytes]):
        self._gzip = gzip.GzipFile(filename="", mode="wb", fileobj=file, mtime=0, compresslevel=_LEVEL)

    def add(self, text: str) -> None:
        self._gzip.write(text.encode("utf-8") + b"\n")

    def close(self) -> None:
        self._gzip.close()


class StreamingZip:
    """A zip archive written entry by entry to ``file`` (which need not be seekable)."""

    def __init__(self, file: IO[bytes]):
        self._out = file
        self._offset = 0
        self._count = 0
        self._directory = tempfile.TemporaryFile()
        self._directory_size = 0

    def add(self, name: str, data: bytes) -> None:
        """Append the file ``name`` holding ``data``, deflate-compressed."""
        encoded = name.encode("utf-8")
        flags = 0 if encoded.isascii() else 0x800  # bit 11: the name is UTF-8
        compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15)  # raw deflate, as zip stores it
        packed = compressor.compress(data) + compressor.flush()
        crc = zlib.crc32(data)
        if max(len(data), len(packed)) >= 0xFFFFFFFF:
            # A record is a few hundred kilobytes at most; no entry needs 64-bit sizes.
            raise ValueError(f"{name}: {len(data)} bytes is too large for a zip entry here")
        local = struct.pack(
            "<I5H3I2H", 0x04034B50, 20, flags, _DEFLATE, _DOS_TIME, _DOS_DATE, crc, len(packed), len(data), len(encoded), 0
        )
        self._out.write(local + encoded)
        self._out.write(packed)
        # The central directory entry; its offset field overflows first in a large archive.
        extra, offset = b"", self._offset
        if offset >= ZIP64_OFFSET_LIMIT:
            extra, offset = struct.pack("<2HQ", 0x0001, 8, self._offset), 0xFFFFFFFF
        version = 45 if extra else 20
        central = struct.pack(
            "<I6H3I5H2I",
            0x02014B50, (_UNIX << 8) | version, version, flags, _DEFLATE, _DOS_TIME, _DOS_DATE,
            crc, len(packed), len(data),
            len(encoded), len(extra), 0, 0, 0,
            _FILE_MODE, offset,
        )  # fmt: skip
        self._directory.write(central + encoded + extra)
        self._directory_size += len(central) + len(encoded) + len(extra)
        self._offset += len(local) + len(encoded) + len(packed)
        self._count += 1

    def close(self) -> None:
        """Write the central directory and the end records."""
        start, size, count = self._offset, self._directory_size, self._count
        self._directory.seek(0)
        shutil.copyfileobj(self._directory, self._out)
        self._directory.close()
        end_of_directory = start + size
        if count >= ZIP64_COUNT_LIMIT or start >= ZIP64_OFFSET_LIMIT or size >= ZIP64_OFFSET_LIMIT:
            # ZIP64 end of central directory record (56 bytes; its size field counts the 44 after
            # it), then the locator that points at it.
            self._out.write(struct.pack("<IQ2H2I4Q", 0x06064B50, 44, (_UNIX << 8) | 45, 45, 0, 0, count, count, size, start))
            self._out.write(struct.pack("<2IQI", 0x07064B50, 0, end_of_directory, 1))
            # The classic record then says "see ZIP64" with all ones in each field that overflowed.
            count = 0xFFFF if count >= ZIP64_COUNT_LIMIT else count
            size = 0xFFFFFFFF if size >= ZIP64_OFFSET_LIMIT else size
            start = 0xFFFFFFFF if start >= ZIP64_OFFSET_LIMIT else start
        self._out.write(struct.pack("<I4H2IH", 0x06054B50, 0, 0, count, count, size, start, 0))
