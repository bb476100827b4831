"""``python killpoint.py ARGS...`` runs ``errordb ARGS...`` and SIGKILLs it, with its process
group, just before its N-th write ($ERRORDB_KILL_AT = N): a file opened for writing, a rename, a
removal, a folder made, or an SQL statement other than a SELECT. With N = 0 it runs to the end
and writes how many writes it made to $ERRORDB_WRITES_FILE. $ERRORDB_STOP_AT = N stops it
(SIGSTOP) just before its N-th write instead, until it is sent SIGCONT: its parent sees the stop
with ``waitpid(WUNTRACED)``.

So the kill tests choose the point of each kill among the writes the command really makes,
instead of a delay that a busy machine stretches: a run killed at its N-th write of T is killed
while it runs, every time. Files are watched with Python's audit hooks (PEP 578) and SQL with
sqlite3's trace callback; only this process's own writes count (a pooled build's workers die
with the group).
"""

import atexit
import os
import runpy
import signal
import sqlite3
import sys

KILL_AT = int(os.environ.get("ERRORDB_KILL_AT", "0"))
STOP_AT = int(os.environ.get("ERRORDB_STOP_AT", "0"))
MAIN = os.getpid()
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_WRITE_EVENTS = {"os.rename", "os.replace", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.link",
                 "os.symlink", "shutil.rmtree", "shutil.move", "shutil.copyfile"}
writes = 0


def _write() -> None:
    global writes
    if os.getpid() != MAIN:
        return
    writes += 1
    if writes == KILL_AT:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    if writes == STOP_AT:
        os.kill(MAIN, signal.SIGSTOP)


def _audit(event: str, args: tuple) -> None:
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int):
            return
        if (mode and any(c in mode for c in "wax+")) or (not mode and flags & _WRITE_FLAGS):
            _write()
    elif event in _WRITE_EVENTS:
        _write()


def _statement(sql: str) -> None:
    if not sql.lstrip()[:6].upper().startswith("SELECT"):
        _write()


_connect = sqlite3.connect


def _traced_connect(*args, **kwargs):
    connection = _connect(*args, **kwargs)
    connection.set_trace_callback(_statement)
    return connection


def _report() -> None:
    if KILL_AT == 0 and os.getpid() == MAIN and os.environ.get("ERRORDB_WRITES_FILE"):
        made = writes  # before this file's own open counts
        with open(os.environ["ERRORDB_WRITES_FILE"], "w") as handle:
            handle.write(f"{made}\n")


if __name__ == "__main__":
    sqlite3.connect = _traced_connect
    atexit.register(_report)
    sys.addaudithook(_audit)
    sys.argv = ["errordb", *sys.argv[1:]]
    runpy.run_module("errordb", run_name="__main__", alter_sys=True)
