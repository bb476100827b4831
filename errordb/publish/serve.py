"""``errordb serve``: build the site into a temporary folder, serve it locally, rebuild on change.

A preview for people editing records or templates, not a production server:

- The site is built with :func:`errordb.publish.site.build_site` into a temporary folder, from either
  a database (``--db``; it is only read) or record files (``--records DIR``, default: the
  bundled records), which are ingested into a temporary database first.
- It is served by :mod:`http.server` in a background thread, on 127.0.0.1 unless told
  otherwise, with ``Cache-Control: no-store`` so a reload always shows the latest build, and
  the site's own ``404.html`` for missing pages.
- The main thread polls the modification times and sizes of the inputs (the record files and
  ``families.toml``, or the database file; and the templates) and rebuilds when they change:
  records are ingested again (with prune, so deleted files disappear) and the site is rebuilt
  incrementally. A rebuild that fails (say, a record with a typo) prints one line and keeps
  serving the previous build.
- Polling is bounded: a scan that takes long (a huge records folder) stretches the interval
  so that scanning uses at most about :data:`SCAN_SHARE` of one CPU; a burst of saves is
  coalesced by waiting until the inputs are quiet for :data:`SETTLE_SECONDS` (at most
  :data:`SETTLE_LIMIT`), so one edit is one rebuild.
- Ctrl-C (or SIGTERM) stops the server, waits for the thread and removes the temporary folder.
"""

from __future__ import annotations

import errno
import functools
import http.server
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from errordb.errors import ErrordbError

#: Scanning the inputs may use at most this share of the time between scans.
SCAN_SHARE = 0.1
#: After a change, wait until the inputs have been unchanged this long before rebuilding ...
SETTLE_SECONDS = 0.3
#: ... but never longer than this (a file rewritten continuously must not block rebuilding).
SETTLE_LIMIT = 5.0


class ServeError(ErrordbError):
    """The preview server cannot start."""


Fingerprint = dict[str, tuple[int, int]]


def fingerprint(paths: list[Path]) -> Fingerprint:
    """``path -> (size, mtime_ns)`` of every file under ``paths`` (folders walked, hidden entries skipped).

    A missing path is left out: the next rebuild reports it, the scan does not fail.
    """
    found: Fingerprint = {}
    for root in paths:
        if root.is_file():
            _add(found, root)
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.startswith("."):
                    _add(found, Path(folder) / name)
    return found


def _add(found: Fingerprint, path: Path) -> None:
    try:
        stat = path.stat()
    except OSError:
        return  # removed while walking: the next scan sees it gone
    found[str(path)] = (stat.st_size, stat.st_mtime_ns)


@dataclass
class Preview:
    """The state of one preview: where its inputs are, and the last build.

    ``records`` (a folder or file of records) or ``db_path`` (an existing store) is the source;
    with neither, the bundled records. :meth:`rebuild` ingests (records only) and builds the
    site into ``workdir/site``.
    """

    records: Path | None = None
    db_path: Path | None = None
    workdir: Path | None = None  # default: a new temporary folder, made once the inputs are known good

    def __post_init__(self) -> None:
        from errordb.publish.site import templates_dir
        from errordb.store import bundled_records_dir

        if self.records is not None and self.db_path is not None:
            raise ServeError("give --records or --db, not both (serve never writes into your database)")
        if self.db_path is None and self.records is None:
            self.records = bundled_records_dir()
        if self.records is not None and not self.records.exists():
            raise ServeError(f"{self.records}: no such file or folder")
        if self.db_path is not None:
            from errordb.store import open_connection

            open_connection(self.db_path).close()  # not an errordb database: say so before building
        self.templates = templates_dir()
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="errordb-serve-"))
        self.site = self.workdir / "site"

    @property
    def watched(self) -> list[Path]:
        """The inputs whose changes trigger a rebuild."""
        from errordb.records.families import families_for

        if self.records is not None:
            sources = [self.records]
            families = families_for([self.records])
            if families is not None and not families.is_relative_to(self.records if self.records.is_dir() else self.records.parent):
                sources.append(families)
        else:
            assert self.db_path is not None
            sources = [self.db_path, Path(f"{self.db_path}-wal")]
        return [*sources, self.templates]

    def rebuild(self) -> str:
        """Ingest (from records) and build the site; returns the one-line summary. Raises on failure."""
        from errordb.publish.site import build_site
        from errordb.store import ingest

        parts = []
        if self.records is not None:
            database = self.workdir / "errordb.db"
            report = ingest([self.records], database, prune=True)
            parts.append(f"records: {report.summary()}")
        else:
            database = self.db_path
        build = build_site(database, self.site, base_url="/", incremental=True)
        parts.append(f"site: {build.pages} pages, {build.rendered} rendered, {build.reused} unchanged in {build.seconds:.2f}s")
        return "; ".join(parts)

    def close(self) -> None:
        from errordb.publish.changes import forget

        forget(self.site)
        shutil.rmtree(self.workdir, ignore_errors=True)


class PreviewHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site folder: no caching, the site's 404 page, quiet unless asked."""

    verbose = False

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def translate_path(self, path: str) -> str:
        # A rebuild swaps the site folder with two renames: for an instant it is absent. Wait
        # that instant out rather than answer 404 (a few milliseconds in practice).
        for _ in range(100):
            if os.path.isdir(self.directory):
                break
            time.sleep(0.02)
        return super().translate_path(path)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = Path(self.directory) / "404.html"
        if code == 404 and self.command == "GET" and page.is_file():
            body = page.read_bytes()
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().send_error(code, message, explain)

    def log_message(self, format: str, *args: Any) -> None:
        if self.verbose:
            super().log_message(format, *args)


class _Stopped(Exception):
    """Raised in the main thread by SIGTERM, so that it cleans up like Ctrl-C."""


def serve(
    records: Path | None = None,
    db_path: Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    interval: float = 1.0,
    verbose: bool = False,
    log: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Build, serve and rebuild until Ctrl-C, SIGTERM or ``stop`` is set; then clean up.

    ``port=0`` picks a free port; the address is in the first line logged
    (``Serving http://HOST:PORT/ ...``). ``log`` receives each status line (default: stderr).
    """
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    stop = stop or threading.Event()
    server = thread = preview = None
    previous_handler = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a test harness, a process manager) must clean up exactly as Ctrl-C does.
        previous_handler = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        preview = Preview(records, db_path)
        # Listen before building: a busy port fails at once, not after the first build; requests
        # arriving meanwhile wait in the listen queue.
        server = _listen(host, port, verbose, preview.site)
        started = time.perf_counter()
        log(f"building the site from {preview.records or preview.db_path} ...")
        summary = preview.rebuild()
        log(f"{summary} (first build: {time.perf_counter() - started:.2f}s)")
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="errordb-serve", daemon=True)
        thread.start()
        bound_host, bound_port = server.server_address[:2]
        shown_host = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        log(f"Serving http://{shown_host}:{bound_port}/ from {preview.site} (Ctrl-C to stop)")
        if host not in ("127.0.0.1", "localhost", "::1"):
            log(f"warning: listening on {host}: other machines can reach this preview")
        _watch(preview, interval, stop, log)
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        if server is not None:
            if thread is not None:
                server.shutdown()  # waits for serve_forever to return
                thread.join(timeout=5)
            server.server_close()
        if preview is not None:
            preview.close()
    log("stopped; temporary site removed")


def _listen(host: str, port: int, verbose: bool, site: Path) -> http.server.ThreadingHTTPServer:
    """A bound, listening server for ``site`` (IPv4 or IPv6, as ``host`` resolves)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}: {exc.strerror}") from None
    server_class = type("PreviewServer", (http.server.ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    handler = functools.partial(type("Handler", (PreviewHandler,), {"verbose": verbose}), directory=str(site))
    try:
        return server_class((host, port), handler)
    except OSError as exc:
        hint = "; pick another --port (0 picks a free one)" if exc.errno == errno.EADDRINUSE else ""
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None


def _raise_stopped(signum: int, frame: Any) -> None:
    raise _Stopped()


def _watch(preview: Preview, interval: float, stop: threading.Event, log: Callable[[str], None]) -> None:
    """Poll the inputs; rebuild after they change and settle. Returns when ``stop`` is set."""
    seen, cost = _scan(preview)
    while not stop.wait(max(interval, cost / SCAN_SHARE)):
        current, cost = _scan(preview)
        if current == seen:
            continue
        settle_started = time.monotonic()
        while time.monotonic() - settle_started < SETTLE_LIMIT and not stop.wait(SETTLE_SECONDS):
            again, cost = _scan(preview)
            if again == current:
                break
            current = again
        seen = current
        started = time.perf_counter()
        try:
            summary = preview.rebuild()
        except ErrordbError as exc:
            log(f"errordb: rebuild failed, still serving the previous build: {exc}")
            continue
        except Exception as exc:  # a template typo (jinja2), a file vanishing: report, keep serving
            log(f"errordb: rebuild failed, still serving the previous build: {type(exc).__name__}: {exc}")
            continue
        log(f"rebuilt in {time.perf_counter() - started:.2f}s: {summary}")


def _scan(preview: Preview) -> tuple[Fingerprint, float]:
    started = time.perf_counter()
    found = fingerprint(preview.watched)
    return found, time.perf_counter() - started
