"""Record texts in the order of their ids, so that ingest can append them to the store as it goes.

A record's rowid is its id read as a number (:func:`errordb.store.record_rowid`): records read
in file order land all over the table, so ingest used to stage them and copy them in id order
once every record was read, while one core stood idle. Read in id order, each validated batch
is appended at once (bench/RESULTS.md, "2026-12-05, night").

The order is a plan made by one pass over the files before any record is parsed: each record's
place (file, byte offset, length, line) and the id its text seems to hold (the first
``"id": "…"`` in it). The seeming id only orders the reading; the id the record is validated
with is the one stored, so a wrong guess costs speed, never correctness (records appended out
of order are still stored right, only not at the end of the table). The places are sorted
by SQLite's sorter in a temporary file (bounded memory) and written, packed, to another
temporary file that the reading walks: nothing grows with the record count in memory.
"""

from __future__ import annotations

import os
import re
import sqlite3
import struct
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, NamedTuple

from errordb.errors import RecordError
from errordb.records.loader import _PEEK_BYTES, MAX_FILE_BYTES, READ_BUFFER_BYTES, _decode, _name, record_files
from errordb.store import record_rowid

# The same pattern as errordb.records.loader's, on bytes: the first id-like value is the record's own in
# every file errordb writes or generates ("id" is the record's first field).
_ID = re.compile(rb'"id"\s*:\s*"([0-9a-f]{16})"')
#: A record's place: file number, byte offset, length (-1: the whole file), line (0: no lines).
_PLACE = struct.Struct("<IqqI")


class IdOrder:
    """The records under some paths, to be read in the order of their ids; see the module."""

    def __init__(self, files: list[Path], places: IO[bytes]):
        self._files = files
        self._places = places

    @classmethod
    def plan(cls, paths: Iterable[str | os.PathLike[str]]) -> IdOrder | None:
        """The reading order of the records under ``paths``, or None where it cannot be planned.

        None for anything a reader in file order reports as an error (a missing file, a line
        too long, a text with no id): that reader then meets it in its place, as it always did.
        """
        files: list[Path] = []
        places = tempfile.TemporaryFile()
        sorter = sqlite3.connect("")  # a private temporary file, deleted on close
        try:
            sorter.execute("CREATE TABLE places (rid INTEGER, file INTEGER, offset INTEGER, length INTEGER, line INTEGER)")
            for path in record_files(paths):
                files.append(path)
                sorter.executemany("INSERT INTO places VALUES (?, ?, ?, ?, ?)", _places_in(path, len(files) - 1))
            # Equal ids keep their file order (rowid), so a duplicate is met after its original.
            cursor = sorter.execute("SELECT file, offset, length, line FROM places ORDER BY rid, rowid")
            while rows := cursor.fetchmany(10_000):
                places.write(b"".join([_PLACE.pack(*row) for row in rows]))
            places.seek(0)
        # A full temporary folder too: the reading in file order says what it cannot do.
        except (_Unplannable, RecordError, OSError, sqlite3.Error):
            places.close()
            return None
        finally:
            sorter.close()
        return cls(files, places)

    def units(self) -> Iterator[tuple[str, Place]]:
        """``(source, place)`` of each record in id order, the sources as
        :func:`errordb.records.loader.record_texts` names them. The worker that validates a record reads
        its text (:func:`read_places`): the writing process only hands out places."""
        names = [_name(path) for path in self._files]
        paths = [str(path) for path in self._files]
        try:
            while chunk := self._places.read(_PLACE.size * 4096):
                for number, offset, length, line in _PLACE.iter_unpack(chunk):
                    if length < 0:
                        yield names[number], Place(paths[number], 0, -1)
                    else:
                        yield f"{names[number]}:{line}", Place(paths[number], offset, length)
        finally:
            self._places.close()


class Place(NamedTuple):
    """Where a record's text is: ``length`` bytes at ``offset`` of ``path``; -1: the whole file."""

    path: str
    offset: int
    length: int


def read_places(units: Iterable[tuple[str, str | Place]]) -> Iterator[tuple[str, str]]:
    """``(source, text)`` of each unit, its place read and decoded; a blank line is skipped, as
    the reader in file order skips it. Each file is opened once for all the units."""
    handles: dict[str, IO[bytes]] = {}
    try:
        for source, where in units:
            if isinstance(where, str):
                yield source, where
                continue
            handle = handles.get(where.path)
            if handle is None:
                try:
                    # Unbuffered: a record costs a seek and one read of its own bytes, nothing around it.
                    handle = handles[where.path] = open(where.path, "rb", buffering=0)
                except OSError as exc:
                    raise RecordError(source, None, None, f"cannot read: {exc.strerror}") from None
            handle.seek(where.offset)
            raw = handle.read(where.length)  # -1: to the end
            text = _decode(source, raw)
            if text.strip():
                yield source, text
    finally:
        for handle in handles.values():
            handle.close()


class _Unplannable(Exception):
    """A file the plan cannot place records in; the reader in file order reports why."""


def _places_in(path: Path, number: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each record's (rid, file number, offset, length, line) in one file, streamed."""
    if path.suffix != ".jsonl":
        if path.stat().st_size > MAX_FILE_BYTES:
            raise _Unplannable
        with open(path, "rb") as handle:
            yield _rid(handle.read(_PEEK_BYTES)), number, 0, -1, 0
        return
    with open(path, "rb", buffering=READ_BUFFER_BYTES) as handle:
        offset = line = 0
        while raw := handle.readline(MAX_FILE_BYTES + 1):
            line += 1
            if len(raw) > MAX_FILE_BYTES:
                raise _Unplannable
            if raw.strip():
                yield _rid(raw), number, offset, len(raw), line
            offset += len(raw)


def _rid(text: bytes) -> int:
    found = _ID.search(text)
    if found is None:
        raise _Unplannable
    return record_rowid(found.group(1).decode("ascii"))
