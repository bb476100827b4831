"""The bulk downloads: ``all.jsonl.gz`` and ``all.zip``, written in one pass and deterministically.

Both take the records one at a time and keep nothing per record in memory (the gzip writer
holds one segment of at most :data:`SEGMENT_MOST` records, and a small entry per segment), so
they scale to millions of records:

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

import functools
import io
import os
import shutil
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

#: Beyond these, the classic zip fields cannot hold the value and ZIP64 records take over.
ZIP64_COUNT_LIMIT = 0xFFFF
ZIP64_OFFSET_LIMIT = 0xFFFFFFFF
#: Bytes of a central directory read at a time.
DIRECTORY_CHUNK = 1 << 20

_DOS_TIME = 0  # 00:00:00
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01: years count from 1980
_DEFLATE = 8
_UNIX = 3  # "version made by" host: Unix, so the external attributes are Unix modes
_FILE_MODE = 0o100644 << 16  # a regular file, rw-r--r--
_LEVEL = 6


#: A gzip segment ends after a record whose id's CRC-32, masked by this, is 0 (1 in 256; see
#: :class:`JsonLinesGzip`).
SEGMENT_MASK = 0xFF
#: ... or after this many records, whatever the ids (bounds the memory one segment takes).
SEGMENT_MOST = 4096
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, MTIME 0, OS unknown
_FINAL_BLOCK = b"\x03\x00"  # an empty final block: what ends every segmented stream


@dataclass(frozen=True)
class Segment:
    """One run of records in ``all.jsonl.gz``: its ids, and where its deflate bytes are."""

    first: str
    last: str
    count: int
    offset: int
    length: int
    crc: int
    size: int


class EarlierDownloadError(ValueError):
    """An earlier bulk download is not what its directory or its segments say it is."""


class JsonLinesGzip:
    """Gzip-compressed JSON Lines: :meth:`add` one record's JSON text per line, in id order.

    The file is one gzip member, so every gzip reader reads all of it, but its deflate stream is
    made of *segments* compressed independently (each ends byte-aligned, as pigz does): a
    segment ends after a record whose id hashes to 0 under :data:`SEGMENT_MASK` (one record in
    256), or after :data:`SEGMENT_MOST` records. Where a segment ends depends only on the ids,
    not on the dataset's history or size, so when one record changes only its own segment
    changes, and a writer given the previous file and its :attr:`segments` (``previous``) copies
    every other segment's bytes as they are instead of compressing them again (or, knowing
    which records changed, whole segments at once: :mod:`errordb.publish.api_update`). Resetting the
    compressor every ~256 records costs little: deflate only looks 32 KB back anyway.
    """

    def __init__(self, file: IO[bytes], previous: tuple[IO[bytes], list[Segment]] | None = None, written: int = 0):
        """``written``: ``file`` holds the previous file's first ``written`` segments already, as
        they are, and is positioned after them (a spare's earlier copy, updated in place)."""
        self._out = file
        self._pending: list[tuple[str, bytes | Callable[[], bytes], bool]] = []
        self._old_file, old = previous if previous is not None else (None, [])
        self._old = {(s.first, s.last): s for s in old}
        #: The segments written so far (a small list: one per ~256 records).
        self.segments: list[Segment] = list(old[:written])
        self._offset = self.segments[-1].offset + self.segments[-1].length if self.segments else len(_GZIP_HEADER)
        self._crc, self._size = 0, 0
        for segment in self.segments:
            self._crc = crc32_combine(self._crc, segment.crc, segment.size)
            self._size += segment.size
        if not written:
            self._out.write(_GZIP_HEADER)
        #: How many bytes from the start are the previous file's, at the same offsets (the header
        #: and the segments copied before the first one that changed or moved).
        self.unchanged = self._offset if self._old_file is not None else 0

    def add(self, record_id: str, data: bytes | Callable[[], bytes], unchanged: bool = False) -> None:
        """Append one record's JSON (``data``, or a function that returns it when it is needed).

        ``unchanged``: the record is the one the previous file holds, so its segment may be copied.
        """
        self._pending.append((record_id, data, unchanged))
        if ends_segment(record_id, len(self._pending)):
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        first, last, count = self._pending[0][0], self._pending[-1][0], len(self._pending)
        old = self._old.get((first, last))
        packed = None
        if old is not None and old.count == count and all(unchanged for _, _, unchanged in self._pending):
            # Same first and last id, as many records, none changed: the same records, the same bytes.
            assert self._old_file is not None
            self._old_file.seek(old.offset)
            packed = self._old_file.read(old.length)
            crc, size = old.crc, old.size
            if len(packed) == old.length:
                self._count_unchanged(old)
        if packed is None or len(packed) != old.length:  # type: ignore[union-attr]
            text = b"".join((data if isinstance(data, bytes) else data()) + b"\n" for _, data, _ in self._pending)
            compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15)  # raw deflate, a fresh dictionary
            packed = compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH)  # ends byte-aligned
            crc, size = zlib.crc32(text), len(text)
        self._out.write(packed)
        self.segments.append(Segment(first, last, count, self._offset, len(packed), crc, size))
        self._offset += len(packed)
        self._crc = crc32_combine(self._crc, crc, size)
        self._size += size
        self._pending.clear()

    @property
    def between_segments(self) -> bool:
        """Whether the next record added starts a segment."""
        return not self._pending

    def copy_segments(self, run: list[Segment]) -> None:
        """Append the previous file's segments ``run``, one after the other there, as their bytes
        are (one copy for them all): the caller knows that the records it would add next are
        theirs, unchanged (see :attr:`between_segments`)."""
        assert self._old_file is not None and not self._pending
        if any(after.offset != before.offset + before.length for before, after in zip(run, run[1:])):
            raise EarlierDownloadError("the previous all.jsonl.gz's segments are not one after the other")
        if not run:
            return
        length = run[-1].offset + run[-1].length - run[0].offset
        if copy_range(self._old_file, run[0].offset, length, self._out) != length:
            raise EarlierDownloadError("the previous all.jsonl.gz is shorter than its segments say")
        for old in run:
            self._count_unchanged(old)
            self.segments.append(Segment(old.first, old.last, old.count, self._offset, old.length, old.crc, old.size))
            self._offset += old.length
            self._crc = crc32_combine(self._crc, old.crc, old.size)
            self._size += old.size

    def _count_unchanged(self, old: Segment) -> None:
        """``old`` is being copied: it extends :attr:`unchanged` when nothing before it differed."""
        if self.unchanged == self._offset == old.offset:
            self.unchanged += old.length

    def close(self) -> None:
        self._flush()
        self._out.write(_FINAL_BLOCK + struct.pack("<2I", self._crc, self._size & 0xFFFFFFFF))


def copy_range(source: IO[bytes], start: int, length: int, out: IO[bytes]) -> int:
    """Append ``length`` bytes of ``source`` from ``start`` on to ``out``; returns how many there
    were (fewer when ``source`` ends first).

    Between two files the kernel copies them (``copy_file_range``), without bringing them into
    this process: a rebuild at a million records copies ~1.5 GB of its downloads' earlier bytes
    this way (2.5 s read and written a megabyte at a time).
    """
    copy = getattr(os, "copy_file_range", None)
    try:
        ends = (source.fileno(), out.fileno()) if copy is not None and out.seekable() else None
    except (OSError, ValueError, io.UnsupportedOperation):
        ends = None
    if ends is not None:
        out.flush()
        position = out.tell()
        copied = 0
        # A hash following ``out``'s writer is told of each piece as it is copied.
        published = getattr(out, "published", None)
        piece = length if published is None else _PUBLISHED_PIECE
        try:
            while copied < length:
                step = copy(ends[0], ends[1], min(length - copied, piece), start + copied, position + copied)
                if not step:
                    break  # the source ended
                copied += step
                if published is not None:
                    published(position + copied)
        except OSError:
            # Not between these two files (another file system, an old kernel): bytes by bytes
            # after what was copied (written at the explicit offsets, so the position is unmoved).
            out.seek(position + copied)
            return copied + _read_write(source, start + copied, length - copied, out)
        out.seek(position + copied)
        return copied
    return _read_write(source, start, length, out)


#: Bytes copied between two reports to a hash that follows the writer
#: (:class:`errordb.publish.digest.PublishedFile`).
_PUBLISHED_PIECE = 32 << 20


def _read_write(source: IO[bytes], start: int, length: int, out: IO[bytes]) -> int:
    source.seek(start)
    copied = 0
    while copied < length:
        chunk = source.read(min(length - copied, DIRECTORY_CHUNK))
        if not chunk:
            break
        out.write(chunk)
        copied += len(chunk)
    return copied


def ends_segment(record_id: str, count: int) -> bool:
    """Whether a segment ends after the record ``record_id``, its ``count``-th."""
    return zlib.crc32(record_id.encode("utf-8")) & SEGMENT_MASK == 0 or count >= SEGMENT_MOST


def crc32_combine(first: int, second: int, second_length: int) -> int:
    """The CRC-32 of two byte strings end to end, from their CRCs and the second one's length.

    A CRC register is linear over GF(2): feeding ``n`` zero bytes maps it by a fixed 32x32 bit
    matrix, so CRC(A + B) is that map of CRC(A) for ``n = len(B)``, XOR CRC(B) (the initial and
    final inversions cancel). The maps for 1, 2, 4, ... zero bytes are squared once and kept,
    each as four tables of the images of a byte's 256 values (a rebuild at a million records
    combines ~4,000 segments' CRCs: 0.1 s bit by bit, a tenth of that by bytes).
    """
    register, step = first, 0
    while second_length:
        if second_length & 1:
            register = _apply(_zero_bytes_tables(step), register)
        second_length >>= 1
        step += 1
    return register ^ second


@functools.cache
def _zero_bytes_tables(power: int) -> tuple[tuple[int, ...], ...]:
    """The map of the register by 2**power zero bytes, as the images of each of its four bytes'
    256 values (the map is linear: a register's image is the XOR of its bytes' images)."""
    if power == 0:
        columns = []
        for bit in range(32):
            register = 1 << bit
            for _ in range(8):  # one zero byte is eight zero bits of the reflected polynomial
                register = (register >> 1) ^ 0xEDB88320 if register & 1 else register >> 1
            columns.append(register)
    else:  # the map for 2**power bytes is the map for half as many, twice
        half = _zero_bytes_tables(power - 1)
        columns = [_apply(half, _apply(half, 1 << bit)) for bit in range(32)]
    tables = []
    for byte in range(4):
        table = [0] * 256
        for value in range(1, 256):
            lowest = value & -value  # a value's image: its lowest bit's image XOR the rest's
            table[value] = table[value ^ lowest] ^ columns[8 * byte + lowest.bit_length() - 1]
        tables.append(tuple(table))
    return tuple(tables)


def _apply(tables: tuple[tuple[int, ...], ...], register: int) -> int:
    low, second_byte, third, high = tables
    return low[register & 0xFF] ^ second_byte[register >> 8 & 0xFF] ^ third[register >> 16 & 0xFF] ^ high[register >> 24]


class StreamingZip:
    """A zip archive written entry by entry to ``file`` (which need not be seekable)."""

    def __init__(self, file: IO[bytes], earlier: tuple[RecordDirectory, int] | None = None):
        """``earlier``: (the directory of an earlier record archive, ``n``): ``file`` holds that
        archive's first ``n`` entries already, as they are, and is positioned after them (a
        spare's earlier copy, updated in place)."""
        self._out = file
        self._offset = 0
        self._count = 0
        self._directory = tempfile.TemporaryFile()
        self._directory_size = 0
        if earlier is not None and earlier[1]:
            directory, count = earlier
            self._offset, self._count = directory.offset(count), count
            self._directory_size = count * _RECORD_ENTRY
            if copy_range(directory.archive, directory.start, self._directory_size, self._directory) != self._directory_size:
                raise EarlierDownloadError("the earlier all.zip is shorter than its directory says")
        #: How many bytes from the start are the earlier archive's, at the same offsets.
        self.unchanged = self._offset

    def add(self, name: str, data: bytes) -> None:
        """Append the file ``name`` holding ``data``, deflate-compressed."""
        encoded = name.encode("utf-8")
        compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15)  # raw deflate, as zip stores it
        packed = compressor.compress(data) + compressor.flush()
        if max(len(data), len(packed)) >= 0xFFFFFFFF:
            # A record is a few hundred kilobytes at most; no entry needs 64-bit sizes.
            raise ValueError(f"{name}: {len(data)} bytes is too large for a zip entry here")
        self._append(encoded, zlib.crc32(data), len(data), packed)

    def copy(self, entry: ZipEntry, archive: IO[bytes]) -> bool:
        """Append ``entry`` of the earlier ``archive`` (one of these writers' own) as its bytes
        are, without compressing it again; False (nothing written) when the entry is not there."""
        archive.seek(entry.offset)
        start = 30 + len(entry.name)  # ours have no extra field: the data follows the name
        whole = archive.read(start + entry.packed)
        if len(whole) != start + entry.packed or whole[:4] != b"PK\x03\x04":
            return False
        if struct.unpack_from("<2H", whole, 26) != (len(entry.name), 0) or whole[30:start] != entry.name:
            return False
        if self.unchanged == self._offset == entry.offset:
            self.unchanged += len(whole)
        self._append(entry.name, entry.crc, entry.size, whole[start:])
        return True

    def copy_run(self, directory: RecordDirectory, first: int, stop: int) -> None:
        """Append the entries ``first`` to ``stop - 1`` of an earlier record archive as they are:
        their headers and data as one byte range, their directory entries with the offsets
        moved by where the range now starts. Raises :class:`EarlierDownloadError` when the
        archive does not hold them as its directory says. Only the run's two ends are read
        back: the entries between are trusted as the spare's pages are (both are this site's
        own earlier output), where :meth:`copy` checks each entry it copies."""
        if first >= stop:
            return
        begin, end = directory.offset(first), directory.offset(stop)
        delta = self._offset - begin
        entries = [directory.entry(first), directory.entry(stop - 1)]
        archive = directory.archive
        for entry in entries:  # the run's two ends, as :meth:`copy` checks each entry
            archive.seek(entry.offset)
            head = archive.read(30 + len(entry.name))
            whole = len(head) == 30 + len(entry.name) and head[:4] == b"PK\x03\x04"
            if not whole or struct.unpack_from("<2H", head, 26) != (len(entry.name), 0) or head[30:] != entry.name:
                raise EarlierDownloadError("the earlier all.zip does not hold the entries its directory lists")
        if entries[1].offset + delta >= ZIP64_OFFSET_LIMIT:  # offsets that need ZIP64 fields: one by one
            for index in range(first, stop):
                if not self.copy(directory.entry(index), archive):
                    raise EarlierDownloadError("the earlier all.zip does not hold the entries its directory lists")
            return
        if copy_range(archive, begin, end - begin, self._out) != end - begin:
            raise EarlierDownloadError("the earlier all.zip is shorter than its directory says")
        if self.unchanged == self._offset == begin:
            self.unchanged += end - begin
        for piece in directory.shifted(first, stop, delta):
            self._directory.write(piece)
            self._directory_size += len(piece)
        self._offset += end - begin
        self._count += stop - first

    def _append(self, encoded: bytes, crc: int, size: int, packed: bytes) -> None:
        flags = 0 if encoded.isascii() else 0x800  # bit 11: the name is UTF-8
        local = struct.pack(
            "<I5H3I2H", 0x04034B50, 20, flags, _DEFLATE, _DOS_TIME, _DOS_DATE, crc, len(packed), size, len(encoded), 0
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
            crc, len(packed), size,
            len(encoded), len(extra), 0, 0, 0,
            _FILE_MODE, offset,
        )  # fmt: skip
        self._directory.write(central + encoded + extra)
        self._directory_size += len(central) + len(encoded) + len(extra)
        self._offset += len(local) + len(encoded) + len(packed)
        self._count += 1

    def discard(self) -> None:
        """Forget what was added (the file is the caller's to truncate)."""
        self._directory.close()

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


@dataclass(frozen=True)
class ZipEntry:
    """One file of an archive, as its central directory describes it."""

    name: bytes
    crc: int
    packed: int
    size: int
    offset: int


def _directory_bounds(archive: IO[bytes]) -> tuple[int, int, int] | None:
    """(entries, size, offset) of the central directory of an archive :class:`StreamingZip`
    wrote, from its end records; None when it is not one."""
    archive.seek(0, 2)
    end = archive.tell()
    if end < 22:
        return None
    archive.seek(end - 22)
    record = archive.read(22)
    if record[:4] != b"PK\x05\x06":
        return None  # not ours: ours never has a comment, so the end record is the last 22 bytes
    count, size, start = struct.unpack("<2x2x2xH2I2x", record[4:])
    if count == 0xFFFF or 0xFFFFFFFF in (size, start):
        if end < 22 + 20:
            return None
        archive.seek(end - 22 - 20)
        locator = archive.read(20)
        if len(locator) != 20 or locator[:4] != b"PK\x06\x07":
            return None
        (zip64_end,) = struct.unpack("<4xQ4x", locator[4:])
        archive.seek(zip64_end)
        record64 = archive.read(56)
        if len(record64) != 56 or record64[:4] != b"PK\x06\x06":
            return None
        count, size, start = struct.unpack("<3Q", record64[32:56])
    return count, size, start


def zip_entries(archive: IO[bytes]) -> Iterator[ZipEntry]:
    """The entries of an archive :class:`StreamingZip` wrote, in their order, read from its
    central directory a piece at a time; nothing (an empty iterator) when it is not one."""
    bounds = _directory_bounds(archive)
    if bounds is None:
        return
    count, size, start = bounds
    buffer, at, position, remaining = b"", 0, start, size

    def have(length: int) -> bool:
        nonlocal buffer, at, position, remaining
        while len(buffer) - at < length and remaining:
            archive.seek(position)  # the caller may read the archive between entries (StreamingZip.copy)
            chunk = archive.read(min(remaining, DIRECTORY_CHUNK))
            if not chunk:
                return False
            position += len(chunk)
            remaining -= len(chunk)
            buffer, at = buffer[at:] + chunk, 0
        return len(buffer) - at >= length

    for _ in range(count):
        if not have(46) or buffer[at : at + 4] != b"PK\x01\x02":
            return
        crc, packed, length, name_length, extra_length, comment_length = struct.unpack_from("<3I3H", buffer, at + 16)
        (offset,) = struct.unpack_from("<I", buffer, at + 42)
        whole = 46 + name_length + extra_length + comment_length
        if not have(whole):
            return
        name = buffer[at + 46 : at + 46 + name_length]
        if offset == 0xFFFFFFFF:
            extra = buffer[at + 46 + name_length : at + 46 + name_length + extra_length]
            if len(extra) < 12 or extra[:2] != b"\x01\x00":
                return
            (offset,) = struct.unpack_from("<Q", extra, 4)
        yield ZipEntry(name, crc, packed, length, offset)
        at += whole


#: A record's central directory entry: 46 bytes, then its name ``<16 hex digits>.json``, with no
#: extra field (its offset fits in 32 bits) and no comment.
_RECORD_NAME = 21
_RECORD_ENTRY = 46 + _RECORD_NAME
#: Directory entries read (and their offsets moved) at a time.
ENTRIES_CHUNK = 4096


class RecordDirectory:
    """The central directory of an earlier record archive (``all.zip``) read by position.

    Every entry of a record archive below 4 GiB has the same size (:data:`_RECORD_ENTRY`), so
    entry ``i`` is at ``i * 67``: an entry is found by name by bisection, and a run of entries
    is copied as one piece, without reading the directory entry by entry.
    """

    def __init__(self, archive: IO[bytes], count: int, start: int):
        self.archive, self.count, self.start = archive, count, start
        # The last :data:`ENTRIES_CHUNK` entries read for one entry's sake: a rebuild asks for
        # the names at both ends of each of ~4,000 segments, mostly in order.
        self._chunk: tuple[int, bytes] = (0, b"")

    @classmethod
    def read(cls, archive: IO[bytes]) -> RecordDirectory | None:
        """The directory of ``archive``, or None when it is not a record archive of that shape."""
        bounds = _directory_bounds(archive)
        if bounds is None:
            return None
        count, size, start = bounds
        return cls(archive, count, start) if size == count * _RECORD_ENTRY else None

    def _entries(self, first: int, stop: int) -> bytes:
        if not 0 <= first < stop <= self.count:
            raise EarlierDownloadError(f"entries {first} to {stop} of an archive of {self.count}")
        self.archive.seek(self.start + first * _RECORD_ENTRY)
        data = self.archive.read((stop - first) * _RECORD_ENTRY)
        if not _are_record_entries(data, stop - first):
            raise EarlierDownloadError("the earlier all.zip's directory is not a record archive's")
        return data

    def _entry(self, index: int) -> bytes:
        first, data = self._chunk
        if not first <= index < first + len(data) // _RECORD_ENTRY:
            if not 0 <= index < self.count:
                raise EarlierDownloadError(f"entry {index} of an archive of {self.count}")
            first = index - index % ENTRIES_CHUNK
            data = self._entries(first, min(self.count, first + ENTRIES_CHUNK))
            self._chunk = (first, data)
        return data[(index - first) * _RECORD_ENTRY : (index - first + 1) * _RECORD_ENTRY]

    def name(self, index: int) -> bytes:
        return self._entry(index)[46:]

    def entry(self, index: int) -> ZipEntry:
        data = self._entry(index)
        crc, packed, size = struct.unpack_from("<3I", data, 16)
        (offset,) = struct.unpack_from("<I", data, 42)
        return ZipEntry(data[46:], crc, packed, size, offset)

    def offset(self, index: int) -> int:
        """Where entry ``index`` begins in the archive (``count``: where the directory begins)."""
        return self.start if index == self.count else self.entry(index).offset

    def after(self, name: bytes) -> int:
        """The index of the first entry whose name sorts after ``name``."""
        low, high = 0, self.count
        while low < high:
            middle = (low + high) // 2
            if self.name(middle) <= name:
                low = middle + 1
            else:
                high = middle
        return low

    def shifted(self, first: int, stop: int, delta: int) -> Iterator[bytes]:
        """The directory entries ``first`` to ``stop - 1`` with ``delta`` added to their offsets,
        :data:`ENTRIES_CHUNK` at a time (one ``struct`` call a chunk, not one an entry)."""
        for start in range(first, stop, ENTRIES_CHUNK):
            end = min(stop, start + ENTRIES_CHUNK)
            data = self._entries(start, end)
            if delta:
                layout = _shift_layout(end - start)
                fields = list(layout.unpack(data))
                fields[1::3] = [offset + delta for offset in fields[1::3]]
                data = layout.pack(*fields)
            yield data


@functools.lru_cache(maxsize=8)
def _shift_layout(count: int) -> struct.Struct:
    """``count`` record entries as (the 42 bytes before the offset, the offset, the name)."""
    return struct.Struct("<" + "42sI21s" * count)


#: Per byte position of a record entry that is the same in all of them: its value (the
#: signature, the name's length, no extra field, no comment).
_RECORD_ENTRY_CONSTANTS = dict(enumerate(b"PK\x01\x02")) | {28: _RECORD_NAME, 29: 0, 30: 0, 31: 0, 32: 0, 33: 0}


def _are_record_entries(data: bytes, count: int) -> bool:
    """Whether ``data`` is ``count`` record entries, checked a byte column at a time."""
    if len(data) != count * _RECORD_ENTRY:
        return False
    return all(data[column::_RECORD_ENTRY] == bytes([value]) * count for column, value in _RECORD_ENTRY_CONSTANTS.items())
