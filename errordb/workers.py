"""A function mapped over a stream of chunks in worker processes: in order, in bounded memory.

Ingest uses it to validate records on the other cores while the main process writes SQLite.
Small inputs (at most one chunk) never start a process. Workers are started by :meth:`start`,
before the caller opens any database: a forked child then holds no SQLite handle.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Chunks handed to each worker ahead of the consumer: enough to keep the workers busy while
#: the consumer writes a batch (or an ingest catches up on full-text rows), few enough that
#: memory stays a few MB per worker.
AHEAD_PER_WORKER = 16


def worker_count() -> int:
    """Worker processes to use: one per core this process may run on (the writer shares them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size``; when ``items`` raises, the items before it come first."""
    chunk: list[T] = []
    try:
        for item in items:
            chunk.append(item)
            if len(chunk) == size:
                yield chunk
                chunk = []
    except Exception:
        if chunk:
            yield chunk
        raise
    if chunk:
        yield chunk


class OrderedMap(Generic[T, R]):
    """``fn(chunk)`` for every chunk of ``chunks``, yielded in the order of the chunks.

    An exception raised by ``chunks`` itself is raised after the results of every chunk before
    it, as a plain loop would. Use as a context manager: leaving it stops the workers.
    """

    def __init__(self, fn: Callable[[list[T]], R], chunks: Iterable[list[T]], processes: int | None = None):
        self._fn = fn
        self._chunks = iter(chunks)
        self._processes = worker_count() if processes is None else processes
        self._head: list[list[T]] = []
        self._error: Exception | None = None
        self._done = False
        self._pool = None

    def __enter__(self) -> OrderedMap[T, R]:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Read the first two chunks; start the workers only if there are that many."""
        while len(self._head) < 2 and (chunk := self._next_chunk()) is not None:
            self._head.append(chunk)
        if len(self._head) == 2 and self._processes > 1:
            # The platform's default start method (fork on Linux: milliseconds, not an import).
            self._pool = multiprocessing.get_context().Pool(self._processes)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def __iter__(self) -> Iterator[R]:
        if self._pool is None:
            for chunk in self._head:
                yield self._fn(chunk)
            while (chunk := self._next_chunk()) is not None:
                yield self._fn(chunk)
        else:
            limit = AHEAD_PER_WORKER * self._processes
            pending = deque(self._pool.apply_async(self._fn, (chunk,)) for chunk in self._head)
            while pending:
                while len(pending) < limit and (chunk := self._next_chunk()) is not None:
                    pending.append(self._pool.apply_async(self._fn, (chunk,)))
                yield pending.popleft().get()
        self._head = []
        if self._error is not None:
            raise self._error

    def _next_chunk(self) -> list[T] | None:
        if self._done:
            return None
        try:
            return next(self._chunks)
        except StopIteration:
            pass
        except Exception as exc:  # raised in its place, after the results before it
            self._error = exc
        self._done = True
        return None
