"""`errordb serve` under many connections at once: how long the slowest client waits.

    python bench/serve_load.py                  # 500 clients, on the bundled records
    python bench/serve_load.py --clients 1000

Starts ``python -m errordb serve --port 0`` as a process, then, on loopback, the baseline: one
client asking for a page 50 times in a row (the median answer). Then N clients, started
together behind a barrier, each opening a connection and asking for the same page once: the
median and slowest wait, and the slowest as a multiple of the baseline. A client that gets no
answer, or a connection refused or reset, is counted as failed.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PAGE = "/errors/dspark-aux-hidden-capture-requires-pp-1/"


def ask(host: str, port: int) -> tuple[float, bool]:
    started = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=60) as connection:
            connection.sendall(f"GET {PAGE} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        return time.perf_counter() - started, answer.startswith(b"HTTP/1.0 200")
    except OSError:
        return time.perf_counter() - started, False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "ERRORDB_CACHE": cache}
        env.pop("ERRORDB_DB", None)
        server = subprocess.Popen([sys.executable, "-m", "errordb", "serve", "--port", "0"], stderr=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, text=True, env=env)
        try:
            for line in server.stderr:
                if found := re.search(r"^Serving http://(127\.0\.0\.1):(\d+)/", line):
                    host, port = found.group(1), int(found.group(2))
                    break
            else:
                print("serve did not start", file=sys.stderr)
                return 1
            ask(host, port)  # the first request makes the page
            baseline = statistics.median(ask(host, port)[0] for _ in range(50))
            barrier = threading.Barrier(args.clients)
            results: list[tuple[float, bool]] = []

            def client() -> None:
                barrier.wait()
                results.append(ask(host, port))

            threads = [threading.Thread(target=client) for _ in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            server.terminate()
            server.wait()
    waits = sorted(seconds for seconds, _ in results)
    failed = sum(not ok for _, ok in results)
    print(f"one client, in a row: {baseline * 1000:.1f} ms per page (median of 50)")
    print(f"{args.clients} clients at once: median {statistics.median(waits) * 1000:.0f} ms, slowest "
          f"{waits[-1] * 1000:.0f} ms ({waits[-1] / baseline:.0f}x one client), {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
