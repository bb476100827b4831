"""Progress for long work (build, export): one redrawn line on a terminal, nothing elsewhere.

The library reports progress through plain callbacks (``build_site(..., progress=callback)``);
this module turns such calls into a display on standard error. Nothing is drawn when standard
error is not a terminal (a pipe, a file, CI logs) or when the user asked for ``--quiet``:
there, a bar is noise that fills logs with carriage returns. The commands print their
one-line summary (counts and time) themselves, after the bar is gone.

Two displays:

- :class:`Progress`: a bar when the total is known, else a running count with its rate;
- :func:`activity`: a spinner with the elapsed time, for work that reports nothing while it runs
  (its library function has no progress callback). It is drawn by a background thread.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO

#: Redraw at most this often: drawing costs a write system call, and faster is unreadable.
REDRAW_SECONDS = 0.1
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_CLEAR = "\r\x1b[K"


def is_interactive(stream: IO[str] | None = None) -> bool:
    """True when ``stream`` (default: standard error) is a terminal worth drawing on."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def _line_width(stream: IO[str]) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = shutil.get_terminal_size((80, 24)).columns
    return columns if columns >= 20 else 80  # a pseudo-terminal may report 0 columns


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


class Progress:
    """A progress line on standard error, redrawn in place; a no-op when not enabled.

    Use it as a context manager and pass :meth:`update` as the library's ``progress`` callback::

        with Progress("export", total=count, unit="records", enabled=not quiet) as bar:
            report = export_api(db, out, progress=bar.update)

    ``enabled=None`` means "when standard error is a terminal"; ``False`` (``--quiet``) never
    draws, and ``True`` is ignored off a terminal too, so a pipe never sees a bar.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        unit: str = "items",
        enabled: bool | None = None,
        stream: IO[str] | None = None,
    ):
        self.label = label
        self.total = total if total else None
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled is not False and is_interactive(self.stream)
        self.done = 0
        self.started = time.monotonic()
        self._drawn_at = 0.0
        self._visible = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def update(self, done: int) -> None:
        """Record that ``done`` items are finished so far (an absolute count)."""
        self.done = done
        self._maybe_draw()

    def advance(self, step: int = 1) -> None:
        """Record ``step`` more finished items."""
        self.update(self.done + step)

    def close(self) -> None:
        """Erase the line, so that whatever is printed next (the summary) starts clean."""
        if self._visible:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._visible = False

    def render(self, width: int) -> str:
        """The line as it would be drawn at ``width`` columns (tested directly)."""
        elapsed = time.monotonic() - self.started
        count = f"{self.done:,}" + (f"/{self.total:,}" if self.total else "") + f" {self.unit}"
        if self.total:
            fraction = min(1.0, self.done / self.total)
            eta = f"  ETA {_duration(elapsed / fraction - elapsed)}" if 0 < fraction < 1 and elapsed > 1 else ""
            tail = f" {fraction:4.0%}  {count}  {_duration(elapsed)}{eta}"
            room = width - len(self.label) - len(tail) - 4  # " [", "]" and the last column
            if room >= 10:
                bar_width = min(room, 40)
                filled = int(bar_width * fraction)
                return f"{self.label} [{'█' * filled}{'░' * (bar_width - filled)}]{tail}"[:width - 1]
            return f"{self.label}{tail}"[:width - 1]
        rate = f"  {self.done / elapsed:,.0f}/s" if elapsed > 0.5 and self.done else ""
        return f"{self.label}  {count}  {_duration(elapsed)}{rate}"[:width - 1]

    def _maybe_draw(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn_at < REDRAW_SECONDS and not (self.total and self.done >= self.total):
            return
        self._drawn_at = now
        self.stream.write(_CLEAR + self.render(_line_width(self.stream)))
        self.stream.flush()
        self._visible = True


@contextlib.contextmanager
def activity(label: str, *, enabled: bool | None = None, stream: IO[str] | None = None) -> Iterator[None]:
    """A spinner with the elapsed time while the body runs, for work without a progress callback.

    Same rules as :class:`Progress`: drawn only on a terminal and never when ``enabled`` is False.
    The line is erased when the body ends, however it ends.
    """
    stream = stream if stream is not None else sys.stderr
    if enabled is False or not is_interactive(stream):
        yield
        return
    stop = threading.Event()
    started = time.monotonic()

    def spin() -> None:
        frame = 0
        while not stop.wait(REDRAW_SECONDS):
            text = f"{_SPINNER[frame % len(_SPINNER)]} {label}  {_duration(time.monotonic() - started)}"
            stream.write(_CLEAR + text[: _line_width(stream) - 1])
            stream.flush()
            frame += 1

    thread = threading.Thread(target=spin, name="errordb-activity", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        stream.write(_CLEAR)
        stream.flush()
