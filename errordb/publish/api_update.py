"""An earlier API's record files and bulk downloads brought up to date in runs, not per record.

A rebuild from a spare (``errordb build --incremental``) knows which records changed since the
API it replaces was written (:attr:`errordb.publish.api.PreviousApi.changed`), and that the spare
holds every other record's two files. Then nothing is done per unchanged record: between two
changes, ``all.jsonl.gz`` is copied a whole segment at a time and ``all.zip`` as one byte range
(its directory entries with their offsets moved), and only the segments and entries that hold
a change are made again, the way a full export makes them, so the bytes are a full export's
(``tests/test_export_update.py``). At 100,000 records this pass took ~2.5 s entry by entry.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Collection
from typing import Any

from errordb.publish import api_layout as layout
from errordb.publish.downloads import JsonLinesGzip, RecordDirectory, Segment, StreamingZip, ends_segment
from errordb.publish.output import OutputTree

def update_records(
    conn: Any, tree: OutputTree, folder: os.PathLike[str], changed: Collection[str], stale: Collection[str],
    jsonl: JsonLinesGzip, segments: list[Segment], archive: StreamingZip, directory: RecordDirectory,
    progress: Callable[[int], None] | None = None, done: int = 0,
) -> int:
    """Write what differs from the earlier API in ``folder`` (whose ``all.jsonl.gz`` has
    ``segments``, and whose ``all.zip`` has ``directory``); returns the number of records.

    ``changed``: the ids of the records added, changed or removed since it was written;
    ``stale``: the records whose two files ``tree`` lacks (``changed`` among them); ``done``:
    ``jsonl`` and ``archive`` hold the first ``done`` segments and their records' entries
    already (see :func:`kept_segments`). Raises
    :class:`~errordb.publish.downloads.EarlierDownloadError` when the earlier downloads do not hold
    what their directory and segments say, having written only to ``jsonl`` and ``archive``.
    """
    changed_ids = sorted(record_id for record_id in changed if isinstance(record_id, str))
    changed_set = set(changed_ids)
    walk = _Walk(conn, jsonl, archive, directory, changed_set)
    walk.count = walk.entry = sum(segment.count for segment in segments[:done])
    low: str | None = segments[done - 1].last if done else None
    for number, segment in enumerate(segments[done:], done + 1):
        # The last segment may have ended with the file rather than by the rule: then records
        # added after it would have joined it.
        high = segment.last if number < len(segments) or ends_segment(segment.last, segment.count) else None
        if jsonl.between_segments and not _changes_between(changed_ids, low, high) and walk.holds(segment):
            walk.copy(segment)
        else:
            walk.remake(low, segment.last)
        low = segment.last
        if progress:
            progress(walk.count)
    walk.remake(low, None)  # records after the last segment's: added since
    # Last: an EarlierDownloadError above has written only the two downloads, which the caller
    # then writes again record by record.
    _write_stale_files(conn, tree, folder, changed_set, stale)
    return walk.count


def kept_segments(segments: list[Segment], directory: RecordDirectory, stale: Collection[str]) -> int:
    """How many of an earlier ``all.jsonl.gz``'s first ``segments`` hold no record in ``stale``
    and end where they would end now: in a copy of that file (and of its ``all.zip``, whose
    ``directory`` this is) that is right but for the records in ``stale``, those segments and
    their records' entries are right as they are, and at the right offsets."""
    first = min((record_id for record_id in stale if isinstance(record_id, str)), default=None)
    done = 0
    for number, segment in enumerate(segments, 1):
        # A segment before the first stale record is the same now, unless the file ended it:
        # then records added after it (the stale one among them) would have joined it.
        ended = number < len(segments) or ends_segment(segment.last, segment.count)
        if (first is not None and segment.last >= first) or not (ended or first is None):
            break
        done = number
    entries = sum(segment.count for segment in segments[:done])
    if entries > directory.count or (done and directory.name(entries - 1) != f"{segments[done - 1].last}.json".encode()):
        return 0  # the archive does not hold these records where the segments say
    return done


def _changes_between(ids: list[str], low: str | None, high: str | None) -> bool:
    """Whether a changed id lies in (``low``, ``high``] (``ids`` sorted; None: no bound)."""
    start = 0 if low is None else bisect.bisect_right(ids, low)
    return start < len(ids) and (high is None or ids[start] <= high)


class _Walk:
    """The two bulk downloads written side by side, from the start, segment by segment."""

    def __init__(self, conn: Any, jsonl: JsonLinesGzip, archive: StreamingZip, directory: RecordDirectory, changed: set[str]):
        self.conn, self.jsonl, self.archive, self.directory, self.changed = conn, jsonl, archive, directory, changed
        self.count = 0
        self.entry = 0  # the earlier archive's next entry not yet copied or passed
        self.run: int | None = None  # the first entry of the run of entries to copy as one piece
        self.segments: list[Segment] = []  # the run of segments to copy as one piece

    def holds(self, segment: Segment) -> bool:
        """Whether the earlier archive's next entries are this segment's records (so, when none
        of them changed, they are copied): the two ends are checked, not every entry."""
        first, last = self.entry, self.entry + segment.count - 1
        return last < self.directory.count and (
            self.directory.name(first) == f"{segment.first}.json".encode() and self.directory.name(last) == f"{segment.last}.json".encode()
        )

    def copy(self, segment: Segment) -> None:
        self.segments.append(segment)
        if self.run is None:
            self.run = self.entry
        self.entry += segment.count
        self.count += segment.count

    def end_run(self) -> None:
        """Copy the runs of segments and entries passed so far (the archive's first: its hash,
        the longer, may follow the copy, see :class:`errordb.publish.api._Hashes`)."""
        if self.run is not None:
            self.archive.copy_run(self.directory, self.run, self.entry)
            self.run = None
        if self.segments:
            self.jsonl.copy_segments(self.segments)
            self.segments = []

    def remake(self, low: str | None, high: str | None) -> None:
        """The records in (``low``, ``high``], one by one, as a full export adds them (the
        unchanged ones' segments and entries still copied where they can be)."""
        from errordb.store import iter_record_files, range_condition

        self.end_run()
        where, params = range_condition("id", low, high)
        directory = self.directory
        for record_id, data in iter_record_files(self.conn, where=where, params=params):
            unchanged = record_id not in self.changed
            self.jsonl.add(record_id, data, unchanged)
            name = f"{record_id}.json".encode()
            while self.entry < directory.count and directory.name(self.entry) < name:
                self.entry += 1
            copied = False
            if unchanged and self.entry < directory.count and directory.name(self.entry) == name:
                copied = self.archive.copy(directory.entry(self.entry), directory.archive)
            if not copied:
                self.archive.add(name.decode(), data)
            self.count += 1
        if high is not None:  # past this range's earlier entries (removed records' among them)
            self.entry = max(self.entry, directory.after(f"{high}.json".encode()))


def _write_stale_files(conn: Any, tree: OutputTree, folder: os.PathLike[str], changed: set[str], stale: Collection[str]) -> None:
    """The two files of each record in ``stale`` that the store holds: linked from the earlier
    API when the record did not change since, else written (as :func:`errordb.publish.api._write_records` does)."""
    from errordb.store import iter_record_files

    wanted = sorted(record_id for record_id in stale if isinstance(record_id, str))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for record_id, data in iter_record_files(conn, where=f"id IN ({marks})", params=chunk):
            # Ids are checked on ingest, but a path is built from this one: never from a hand-edited id.
            linked = record_id not in changed and layout.PLAIN_RECORD_ID.fullmatch(record_id) is not None and tree.adopt(
                os.path.join(folder, layout.record_path(record_id)), layout.record_path(record_id), missing_ok=True
            )
            if not linked:
                tree.write_bytes(layout.record_path(record_id), data)
            tree.link(layout.record_path(record_id), layout.record_alias_path(record_id))
