"""Record text to the rows ingest writes: parsing, validation and derived columns, off the writer.

This is most of an ingest's Python work (pydantic, RE2 compiling each pattern, the pattern's
words, the canonical JSON's hash), so it runs in worker processes (:mod:`errordb.workers`)
while the main process writes SQLite. What crosses between the processes is plain tuples, not
models: they pickle several times faster.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from errordb.errors import RecordError
from errordb.id_order import Place, read_places
from errordb.workers import OrderedMap, chunked

#: Records per task sent to a worker: large enough that pickling is a small share of it.
CHUNK_SIZE = 250


class Prepared(NamedTuple):
    """One validated record as the store writes it."""

    id: str
    source: str  # the file, or file:line, it came from
    row: dict[str, Any]  # the ``records`` row (errordb.store.record_row)
    words: tuple[str, ...]  # errordb.records.patterns.pattern_words of its messagePattern
    tags: list[str]
    lists: str  # its child rows' text: JSON [solutions, preventionTips, tags] (errordb.store)


def prepare(source: str, text: str) -> Prepared:
    """Parse, validate and derive the rows of one record's JSON text; raises RecordError."""
    from errordb.records.loader import parse_envelope
    from errordb.records.patterns import pattern_words
    from errordb.store import record_row

    envelope = parse_envelope(source, text)
    record = envelope.record
    row = record_row(envelope)
    lists = json.dumps([record.solutions, record.preventionTips, record.tags], ensure_ascii=False, separators=(",", ":"))
    return Prepared(record.id, source, row, pattern_words(record.messagePattern), record.tags, lists)


def prepare_chunk(units: list[tuple[str, str | Place]]) -> tuple[list[Prepared], tuple[Any, ...] | None]:
    """:func:`prepare` for each ``(source, text)``, up to the first bad record; a text may be
    given by its place in a file (:class:`errordb.id_order.Place`), read here.

    The error comes back as the RecordError's fields: it is re-raised by the consumer, in its
    place, after the records before it.
    """
    done = []
    # Validation makes many short-lived objects and no cycles worth finding: the cyclic
    # collector's passes cost ~15% of it. Garbage is freed by reference counting as before.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for source, text in read_places(units):
            done.append(prepare(source, text))
    except RecordError as exc:
        return done, (exc.source, exc.record_id, exc.field, exc.problem)
    finally:
        if collecting:
            gc.enable()
    return done, None


class PreparedRecords:
    """Each ``(source, text)`` of ``texts`` (or ``(source, place)``), prepared, in their order; a
    context manager.

    Entering it reads ahead and starts the workers (so call it before opening the database);
    iterating yields :class:`Prepared` records and raises the first bad record's RecordError in
    its place.
    """

    def __init__(self, texts: Iterable[tuple[str, str | Place]], processes: int | None = None):
        self._map = OrderedMap(prepare_chunk, chunked(texts, CHUNK_SIZE), processes)

    def __enter__(self) -> PreparedRecords:
        # Imported before the workers fork, so that each inherits them instead of importing.
        import errordb.records.loader
        import errordb.records.schema
        import errordb.store  # noqa: F401

        self._map.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._map.close()

    def __iter__(self) -> Iterator[Prepared]:
        for done, error in self._map:
            yield from done
            if error is not None:
                raise RecordError(*error)
