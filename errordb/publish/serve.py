"""``errordb serve``: the site served from the store, each page rendered when it is asked for.

A preview for people editing records or templates, not a production server:

- The store is either a database (``--db``; it is only read) or record files (``--records
  DIR``, default: the bundled records), ingested into a temporary database first.
- Each request is answered by :meth:`errordb.publish.site.Site.file` from a fresh read-only
  connection: nothing is built ahead, so the first page is there at once and every page shows
  the store as it is now. Responses carry ``Cache-Control: no-store``; a missing page gets the
  site's own 404 page.
- The main thread polls the modification times and sizes of the inputs (the record files and
  ``families.toml``, or the database file; and the templates). After a change, record files
  are ingested again (with prune, so deleted files disappear): unchanged records cost little
  (:func:`errordb.store.ingest`), so an edit shows on the next reload. An ingest that fails
  (a record with a typo) prints one line and keeps serving what was there.
- A burst of saves is coalesced by waiting until the inputs are quiet for
  :data:`SETTLE_SECONDS` (at most :data:`SETTLE_LIMIT`), so one edit is one ingest.
- Ctrl-C (or SIGTERM) stops the server, waits for its thread and removes the temporary folder.
"""

from __future__ import annotations

import errno
import http.server
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from errordb.errors import ErrordbError

#: After a change, wait until the inputs have been unchanged this long before ingesting ...
SETTLE_SECONDS = 0.3
#: ... but never longer than this (a file rewritten continuously must not block it).
SETTLE_LIMIT = 5.0
#: Pages kept made at once (a crawler asking for every page of a big site must not fill memory).
_MAX_PAGES = 2_000


class ServeError(ErrordbError):
    """The preview server cannot start."""


Fingerprint = dict[str, tuple[int, int]]


def fingerprint(paths: list[Path]) -> Fingerprint:
    """``path -> (size, mtime_ns)`` of every file under ``paths`` (folders walked, hidden entries skipped).

    A missing path is left out: the next ingest reports it, the scan does not fail.
    """
    found: Fingerprint = {}
    for root in paths:
        files = [root] if root.is_file() else []
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            files += [Path(folder) / name for name in sorted(names) if not name.startswith(".")]
        for path in files:
            try:
                stat = path.stat()
            except OSError:
                continue  # removed while walking: the next scan sees it gone
            found[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return found


class Preview:
    """The inputs of one preview and the store it serves from.

    ``records`` (a folder or file of records) or ``db_path`` (an existing store) is the source;
    with neither, the bundled records, ingested into a database in a temporary folder.
    """

    def __init__(self, records: Path | None = None, db_path: Path | None = None):
        from errordb.publish.site import templates_dir
        from errordb.store import bundled_records_dir, open_connection

        if records is not None and db_path is not None:
            raise ServeError("give --records or --db, not both (serve never writes into your database)")
        if db_path is None and records is None:
            records = bundled_records_dir()
        if records is not None and not records.exists():
            raise ServeError(f"{records}: no such file or folder")
        if db_path is not None:
            from errordb.publish.api import refuse_learned_drafts

            conn = open_connection(db_path)  # not an errordb database: say so before serving
            try:
                refuse_learned_drafts(conn)
            finally:
                conn.close()
        self.records, self.templates = records, templates_dir()
        self.workdir = Path(tempfile.mkdtemp(prefix="errordb-serve-"))
        self.db_path = db_path or self.workdir / "errordb.db"
        # Pages made from the store as it is now (its files' sizes and times say when it changed)
        # and the templates as they are: a page is read far more often than it changes, and
        # making one takes milliseconds, which many requests at once must not each spend again.
        self._pages: dict[str, tuple[bytes, str]] = {}
        self._made_from: Fingerprint = {}
        self._lock = threading.Lock()

    def page(self, relative: str) -> tuple[int, tuple[bytes, str]]:
        """The status and the file (bytes, media type) at ``relative``; the site's 404 page for
        a path it does not have."""
        with self._lock:
            store = fingerprint([self.db_path, Path(f"{self.db_path}-wal")])
            if store != self._made_from:
                self._pages.clear()
                self._made_from = store
            found = self._made(relative)
            if found is not None:
                return 200, found
            return 404, self._made("404.html") or (b"not found\n", "text/plain; charset=utf-8")

    def _made(self, relative: str) -> tuple[bytes, str] | None:
        found = self._pages.get(relative)
        if found is None:
            found = self._make(relative)
            if found is not None:
                if len(self._pages) >= _MAX_PAGES:
                    self._pages.clear()
                self._pages[relative] = found
        return found

    def _make(self, relative: str) -> tuple[bytes, str] | None:
        from errordb.publish.site import Site
        from errordb.store import open_connection

        conn = open_connection(self.db_path)
        try:
            return Site(conn, "/", self.templates).file(relative)
        finally:
            conn.close()

    @property
    def watched(self) -> list[Path]:
        """The inputs whose changes are taken in."""
        from errordb.records.families import families_for

        if self.records is None:
            return [self.db_path, Path(f"{self.db_path}-wal"), self.templates]
        sources = [self.records]
        families = families_for([self.records])
        if families is not None and not families.is_relative_to(self.records if self.records.is_dir() else self.records.parent):
            sources.append(families)
        return [*sources, self.templates]

    def refresh(self) -> str:
        """Ingest the records again (nothing to do for a database); returns a one-line summary."""
        from errordb.store import ingest

        try:
            if self.records is None:
                return "the database changed"
            return f"records: {ingest([self.records], self.db_path, prune=True).summary()}"
        finally:
            with self._lock:
                self._pages.clear()

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


class PreviewHandler(http.server.BaseHTTPRequestHandler):
    """Answers GET and HEAD with the site's file at the path: no caching, the site's 404 page."""

    preview: Preview
    verbose = False

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        relative = site_path(self.path)
        if relative is None:
            self._send(400, b"bad request: not a path of this site\n", "text/plain; charset=utf-8", body)
            return
        try:
            status, (data, media_type) = self.preview.page(relative)
        except Exception as exc:  # a template typo, a damaged store: one line, and keep serving
            message = f"errordb serve: cannot make {relative or '/'}: {type(exc).__name__}: {exc}"
            self.log_error("%s", message)
            status, data, media_type = 500, (message + "\n").encode("utf-8", "replace"), "text/plain; charset=utf-8"
        self._send(status, data, media_type, body)

    def _send(self, status: int, data: bytes, media_type: str, body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        if self.verbose:
            super().log_message(format, *args)


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def site_path(target: str) -> str | None:
    """The site file a request target asks for (``errors/x/``), or None when the target is
    malformed: not printable ASCII, not a path (``*``) or an http URL, a ``%`` escape that is not
    one or does not decode as UTF-8, or a path no site file has (see :func:`_plain`)."""
    if not target.isascii() or not target.isprintable() or " " in target:
        return None
    parts = urllib.parse.urlsplit(target)
    if not parts.path.startswith("/") or ((parts.scheme or parts.netloc) and parts.scheme not in ("http", "https")):
        return None
    if _BAD_ESCAPE.search(parts.path):
        return None
    try:
        relative = urllib.parse.unquote(parts.path, errors="strict").lstrip("/")
    except UnicodeDecodeError:
        return None
    return relative if _plain(relative) else None


def _plain(relative: str) -> bool:
    """A path a site file can have: no empty, dot or dot-dot segment, no NUL or backslash."""
    parts = relative.split("/")
    return not any(part in (".", "..") or "\x00" in part or "\\" in part for part in parts) and "" not in parts[:-1]


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
    """Serve, and take in changes, until Ctrl-C, SIGTERM or ``stop`` is set; then clean up.

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
        server = _listen(host, port, verbose, preview)  # a busy port fails before the first ingest
        if preview.records is not None:
            started = time.perf_counter()
            log(f"ingesting {preview.records} into {preview.db_path} ...")
            log(f"{preview.refresh()} (first ingest: {time.perf_counter() - started:.2f}s)")
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="errordb-serve", daemon=True)
        thread.start()
        bound_host, bound_port = server.server_address[:2]
        shown_host = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        log(f"Serving http://{shown_host}:{bound_port}/ from {preview.records or preview.db_path} (Ctrl-C to stop)")
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
    log("stopped; temporary files removed")


def _listen(host: str, port: int, verbose: bool, preview: Preview) -> http.server.ThreadingHTTPServer:
    """A bound, listening server for ``preview`` (IPv4 or IPv6, as ``host`` resolves)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}: {exc.strerror}") from None
    # A queue of waiting connections as long as the system allows, not socketserver's 5: beyond
    # it a connection is dropped and retried a second or more later.
    server_class = type("PreviewServer", (http.server.ThreadingHTTPServer,),
                        {"address_family": family, "daemon_threads": True, "request_queue_size": socket.SOMAXCONN})
    handler = type("Handler", (PreviewHandler,), {"verbose": verbose, "preview": preview})
    try:
        return server_class((host, port), handler)
    except OSError as exc:
        hint = "; pick another --port (0 picks a free one)" if exc.errno == errno.EADDRINUSE else ""
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None


def _raise_stopped(signum: int, frame: Any) -> None:
    raise _Stopped()


def _watch(preview: Preview, interval: float, stop: threading.Event, log: Callable[[str], None]) -> None:
    """Poll the inputs; take them in after they change and settle. Returns when ``stop`` is set."""
    seen = fingerprint(preview.watched)
    while not stop.wait(interval):
        current = fingerprint(preview.watched)
        if current == seen:
            continue
        settle_started = time.monotonic()
        while time.monotonic() - settle_started < SETTLE_LIMIT and not stop.wait(SETTLE_SECONDS):
            again = fingerprint(preview.watched)
            if again == current:
                break
            current = again
        seen = current
        started = time.perf_counter()
        try:
            summary = preview.refresh()
        except ErrordbError as exc:
            log(f"errordb: ingest failed, still serving the records as they were: {exc}")
            continue
        log(f"updated in {time.perf_counter() - started:.2f}s: {summary}")
