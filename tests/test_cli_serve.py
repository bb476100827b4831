"""errordb serve as a real process: serve the site on a free port, show an edit, stop cleanly.

Each test starts ``python -m errordb serve --port 0`` (the OS picks a free port; serve prints
the address), talks to it over HTTP on 127.0.0.1 and always stops it, even when an assertion
fails.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import KIMI_PP_ERROR, copy_records

from errordb.store import ingest

PAGE = "errors/dspark-aux-hidden-capture-requires-pp-1/"
TIMEOUT = 30


def _ctrl_c_as_at_a_terminal() -> None:
    # A test run started in the background by a non-interactive shell inherits SIGINT ignored,
    # and so would serve, which then never sees the Ctrl-C this test sends.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Server:
    """A running ``errordb serve`` and the lines it printed on stderr."""

    def __init__(self, tmp_path: Path, *args: str):
        env = {**os.environ, "ERRORDB_CACHE": str(tmp_path / "cache"), "NO_COLOR": "1"}
        env.pop("ERRORDB_DB", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "errordb", "serve", "--port", "0", "--interval", "0.1", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_ctrl_c_as_at_a_terminal,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.workdir = None
        if "--db" not in args:
            self.workdir = Path(self.wait_for(r"^ingesting \S+ into (\S+) \.\.\.$").group(1)).parent
        self.url = self.wait_for(r"^Serving (http://127\.0\.0\.1:\d+/) from \S+ ").group(1)

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, pattern: str) -> re.Match:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            self.log.append(line)
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"serve never printed {pattern!r}; it printed: {self.log}")

    def get(self, path: str = "") -> tuple[int, str, dict]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return response.status, response.read().decode("utf-8"), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8"), dict(error.headers)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the server (it is killed if it does not stop in time); returns its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@pytest.fixture
def start(tmp_path):
    servers: list[Server] = []

    def starter(*args: str) -> Server:
        server = Server(tmp_path, *args)
        servers.append(server)
        return server

    yield starter
    for server in servers:
        server.stop()  # always, even when the test failed


def edit_documentation(path: Path, text: str) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["record"]["documentation"] = text
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


def test_serve_records_shows_an_edit_and_stops_on_ctrl_c(tmp_path, start):
    records = copy_records(tmp_path / "records")
    server = start("--records", str(records))
    status, page, headers = server.get(PAGE)
    assert status == 200 and "DSPARK aux hidden capture requires PP=1." in page
    assert headers["Cache-Control"] == "no-store"
    status, home, _ = server.get()
    assert status == 200 and "<html" in home.lower()
    status, missing, _ = server.get("no/such/page/")
    assert status == 404 and "<h1>Page not found</h1>" in missing
    assert server.get("errors/%00/")[0] == 400 and server.get("a/../b")[0] == 400

    record = records / "sgl-project" / "sglang" / f"{KIMI_PP_ERROR}.json"
    edit_documentation(record, "Edited while serving: the preview picks this up.")
    server.wait_for(r"^updated in .*records: 0 added, 1 updated, 2 unchanged")
    assert "Edited while serving: the preview picks this up." in server.get(PAGE)[1]

    (record.parent / "broken.json").write_text("{not json", encoding="utf-8")
    server.wait_for(r"^errordb: ingest failed, still serving the records as they were: .*broken\.json")
    assert server.get(PAGE)[0] == 200  # the records as they were stay up

    assert server.stop(signal.SIGINT) == 0  # Ctrl-C
    server.wait_for(r"^stopped; temporary files removed$")
    assert server.workdir is not None and not server.workdir.exists()
    assert not any("Traceback" in line for line in server.log)


def test_serve_db_shows_what_the_database_holds_now_and_stops_on_sigterm(tmp_path, start):
    records = copy_records(tmp_path / "records")
    db = tmp_path / "e.db"
    ingest([records], db)
    server = start("--db", str(db))
    assert server.get(PAGE)[0] == 200
    edit_documentation(records / "sgl-project" / "sglang" / f"{KIMI_PP_ERROR}.json", "Changed in the database.")
    ingest([records], db)
    assert "Changed in the database." in server.get(PAGE)[1]  # each request reads the store as it is
    assert server.stop(signal.SIGTERM) == 0
    server.wait_for(r"^stopped; temporary files removed$")
    assert db.exists()  # serve only reads the database it is given


def test_serve_is_a_function_too(tmp_path):
    from errordb.publish.serve import Preview, fingerprint, serve
    from errordb.publish.site import templates_dir

    records = copy_records(tmp_path / "records")
    preview = Preview(records=records)
    assert templates_dir() in preview.watched and records in preview.watched
    preview.close()
    assert not preview.workdir.exists()
    before = fingerprint([records])
    (records / ".hidden.json").write_text("{}", encoding="utf-8")
    assert fingerprint([records]) == before  # editors' hidden files do not trigger rebuilds
    edit_documentation(records / "sgl-project" / "sglang" / f"{KIMI_PP_ERROR}.json", "x")
    assert fingerprint([records]) != before

    lines: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(records,), kwargs={"port": 0, "interval": 0.05, "log": lines.append, "stop": stop})
    thread.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while not any(line.startswith("Serving http://") for line in lines) and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.05)
        url = next(line.split()[1] for line in lines if line.startswith("Serving http://"))
        with urllib.request.urlopen(url + PAGE, timeout=10) as response:
            assert response.status == 200
    finally:
        stop.set()
        thread.join(timeout=TIMEOUT)
    assert not thread.is_alive() and lines[-1] == "stopped; temporary files removed"


def _raw(url: str, request_line: bytes) -> bytes:
    """The status line a request line gets (over a raw socket: urllib would tidy the target)."""
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as connection:
        connection.sendall(request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("target", [
    b"/a%00b", b"/errors/%00/", b"/%zz", b"/a%2", b"/%ff%fe", b"/\xff\xfe", b"*", b"errors/",
    b"/errors/../../etc/passwd", b"/errors%2F..%2F..%2F", b"/\\..\\x", b"ftp://host/errors/",
])
def test_serve_answers_a_malformed_path_with_400_and_goes_on(tmp_path, start, target):
    server = start()
    assert _raw(server.url, b"GET " + target + b" HTTP/1.1") == b"HTTP/1.0 400 Bad Request"
    assert _raw(server.url, b"GET /" + PAGE.encode() + b" HTTP/1.1") == b"HTTP/1.0 200 OK"
    assert _raw(server.url, b"GET /no/such/page/?q=%00 HTTP/1.1") == b"HTTP/1.0 404 Not Found"
    assert server.stop() == 0
    server.wait_for(r"^stopped; temporary files removed$")
    assert not any("Traceback" in line or "Exception" in line for line in server.log)


def test_serve_answers_500_connections_at_once(tmp_path, start):
    """500 clients connect at the same moment (a barrier) and each asks for a page: every one is
    answered, none refused or reset. (How long the slowest waited is bench/serve_load.py's.)"""
    server = start()
    clients = 500
    barrier = threading.Barrier(clients)
    answers: list[bytes] = []

    def client() -> None:
        barrier.wait()
        try:
            answers.append(_raw(server.url, b"GET /" + PAGE.encode() + b" HTTP/1.1"))
        except OSError as exc:
            answers.append(repr(exc).encode())

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [b"HTTP/1.0 200 OK"] * clients, sorted(set(answers))
