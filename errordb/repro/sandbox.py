"""Where record code runs: :func:`run_in_child` starts ``errordb/repro/child.py`` in isolation.

The isolation, all of it here: ``python -I -S -B`` in an empty temporary directory with a
minimal environment, lowered resource limits (applied by the child to itself), a wall-clock
timeout, and the whole process group killed when it runs out. This guards against accidents
(a hang, a crash, a stray write); it is not a security boundary -- only reviewed
reproductions, whose record fields are pinned by digest, are ever sent here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD_SCRIPT = Path(__file__).resolve().parent / "child.py"

_CHILD_ENV = {"PATH": os.defpath, "LC_ALL": "C.UTF-8"}
#: -I isolated mode (no PYTHON* variables, no user site, no script directory
#: on sys.path); -S no ``site`` at all, so no site-packages and none of their
#: ``.pth`` files (an editable install would otherwise put the project on the
#: child's path); -B no bytecode files.  The child needs only the stdlib.
CHILD_FLAGS = ("-I", "-S", "-B")
_ADDRESS_SPACE_BYTES = 2 << 30
#: How long a killed child's pipes are drained before they are closed.
_DRAIN_SECONDS = 5


def run_in_child(job: dict[str, Any], timeout: float) -> tuple[list[dict[str, Any]], str | None, str]:
    """Run one child on ``job``; returns (complete result lines, abnormal end, detail).

    The abnormal end is ``"hang"`` (killed after ``timeout`` s), ``"crash"`` (non-zero exit or
    signal, or exited before answering every scenario) or ``None``.
    """
    limits = {"cpu_seconds": int(timeout) + 1, "address_space_bytes": _ADDRESS_SPACE_BYTES}
    payload = json.dumps({**job, "limits": limits}).encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="errordb-repro-") as cwd:
        proc = subprocess.Popen(
            [sys.executable, *CHILD_FLAGS, str(CHILD_SCRIPT)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, env=_CHILD_ENV, start_new_session=True,
        )
        out, err, hung = _communicate(proc, payload, timeout)
    results = []
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a partial line from a killed child
    stderr_tail = err.decode("utf-8", "replace").replace(str(CHILD_SCRIPT), "<errordb.repro.child>")
    stderr_tail = stderr_tail.strip()[-600:]
    tail = f": {stderr_tail}" if stderr_tail else ""
    if hung:
        return results, "hang", f"killed after {timeout:g} s"
    if proc.returncode != 0:
        return results, "crash", _how_it_ended(proc.returncode) + tail
    if len(results) < len(job["scenarios"]):
        return results, "crash", "the child exited before finishing" + tail
    return results, None, ""


def _communicate(proc: subprocess.Popen, payload: bytes, timeout: float) -> tuple[bytes, bytes, bool]:
    """The child's stdout and stderr, and whether it had to be killed for running too long."""
    try:
        out, err = proc.communicate(payload, timeout=timeout)
        return out, err, False
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc)
    try:
        out, err = proc.communicate(timeout=_DRAIN_SECONDS)
    except subprocess.TimeoutExpired:  # a grandchild escaped and holds the pipe
        out, err = b"", b""
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
        proc.wait()
    return out, err, True


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it spawned
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()


def _how_it_ended(returncode: int) -> str:
    if returncode > 0:
        return f"exit status {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"
