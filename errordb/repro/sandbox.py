"""Where record code runs: :func:`run_in_child` starts ``errordb/repro/child.py`` in isolation.

The isolation, all of it here. On Linux with bubblewrap (``bwrap``, the sandbox Flatpak is built
on), the child runs in new namespaces of every kind: no network, no view of the file system but
a read-only interpreter (its binary, standard library and the system's shared libraries; no
shell, no home, no ``/etc``) and its own temporary folder, no capabilities and no new
privileges; when it ends or is killed, so is everything it started. Inside that, and alone
where there is no sandbox: ``python -I -S -B`` in an empty temporary folder with a minimal
environment, lowered resource limits (applied by the child to itself), a wall-clock timeout,
and the whole process group killed when it runs out. Those limits guard against accidents only,
which is why code that no reviewer read runs only in the sandbox (:mod:`errordb.repro.run`).
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
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
#: The system's shared libraries, which the interpreter loads (merged-/usr systems make the
#: top-level ones links into /usr).
_LIBRARY_DIRS = ("/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32")


def interpreter() -> str:
    """The interpreter the child runs on: this one's real binary (a virtual environment's
    ``python`` is a link to it, and the child needs nothing of the environment)."""
    return os.path.realpath(sys.executable)


def _bwrap_argv(bwrap: str, folder: str, cwd: str, status_fd: int | None = None) -> list[str]:
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev"]
    for path in _LIBRARY_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    binary = interpreter()
    argv += ["--ro-bind", binary, binary]
    # The standard library and its extension modules (never a virtual environment's folders).
    for path in sorted({os.path.dirname(os.path.realpath(os.__file__)), sysconfig.get_config_var("DESTSHARED") or ""}):
        if path and os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    # An interpreter built with a shared libpython keeps it beside its standard library.
    libdir = sysconfig.get_config_var("LIBDIR")
    library = sysconfig.get_config_var("LDLIBRARY")
    if libdir and library and os.path.exists(os.path.join(libdir, library)):
        argv += ["--ro-bind", os.path.join(libdir, library), os.path.join(libdir, library)]
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    return [*argv, "--bind", folder, folder, "--chdir", cwd, "--"]


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why reproductions cannot run in the sandbox here, or None when they can (checked once
    per process, by starting the interpreter in it)."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox (bubblewrap) needs Linux, not {sys.platform}"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (`bwrap`) is not installed; on Debian or Ubuntu: apt-get install bubblewrap"
    with tempfile.TemporaryDirectory(prefix="errordb-repro-") as folder:
        try:
            probe = subprocess.run([*_bwrap_argv(bwrap, folder, folder), interpreter(), *CHILD_FLAGS, "-c", "pass"],
                                   capture_output=True, env=_CHILD_ENV, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap did not start: {exc}"
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap cannot make a sandbox here: {said[-1] if said else f'exit status {probe.returncode}'}"
    return None


def run_in_child(job: dict[str, Any], timeout: float, *, sandbox: bool = True) -> tuple[list[dict[str, Any]], str | None, str]:
    """Run one child on ``job``; returns (complete result lines, abnormal end, detail).

    With ``sandbox`` the child runs in bubblewrap (:func:`sandbox_problem` must be None); without,
    under the resource limits alone. The abnormal end is ``"hang"`` (killed after ``timeout``
    s), ``"crash"`` (non-zero exit or signal, or exited before answering every scenario) or
    ``None``.
    """
    limits = {"cpu_seconds": int(timeout) + 1, "address_space_bytes": _ADDRESS_SPACE_BYTES}
    payload = json.dumps({**job, "limits": limits}).encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="errordb-repro-") as folder:
        # The script is copied beside the child's empty working folder: the sandbox shows it
        # nothing of this installation.
        script = Path(folder) / CHILD_SCRIPT.name
        shutil.copyfile(CHILD_SCRIPT, script)
        cwd = os.path.join(folder, "work")
        os.mkdir(cwd)
        command = [interpreter(), *CHILD_FLAGS, str(script)]
        if not sandbox:
            proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=cwd, env=_CHILD_ENV, start_new_session=True,
            )
            out, err, hung = _communicate(proc, payload, timeout)
        else:
            problem = sandbox_problem()
            if problem is not None:
                raise RuntimeError(f"no sandbox: {problem}")
            status_read, status_write = os.pipe()
            try:
                proc = subprocess.Popen(
                    [*_bwrap_argv(shutil.which("bwrap") or "bwrap", folder, cwd, status_write), *command],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    cwd=cwd, env=_CHILD_ENV, start_new_session=True, pass_fds=(status_write,),
                )
                os.close(status_write)
                status_write = -1
                # Before the job is sent: the child waits for it, so its pid cannot be reused yet.
                sandbox_init = _open_sandbox_init(status_read)
                out, err, hung = _communicate(proc, payload, timeout)
                _wait_for_exit(sandbox_init)
            finally:
                for fd in (status_read, status_write):
                    if fd >= 0:
                        os.close(fd)
    results = []
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a partial line from a killed child
    stderr_tail = err.decode("utf-8", "replace").replace(str(script), "<errordb.repro.child>")
    stderr_tail = stderr_tail.strip()[-600:]
    tail = f": {stderr_tail}" if stderr_tail else ""
    if hung:
        return results, "hang", f"killed after {timeout:g} s"
    returncode = proc.returncode
    if sandbox and returncode > 128:
        returncode = 128 - returncode  # bubblewrap exits 128 + N when its child died of signal N
    if returncode != 0:
        return results, "crash", _how_it_ended(returncode) + tail
    if len(results) < len(job["scenarios"]):
        return results, "crash", "the child exited before finishing" + tail
    return results, None, ""


def _open_sandbox_init(status_fd: int) -> int | None:
    """A pidfd of the sandbox's first process (bubblewrap reports its pid first on its status
    pipe), or None when it is already gone. Its end is the end of everything in the sandbox: as
    it exits, the kernel kills every process left in the sandbox's PID namespace."""
    data = b""
    while not data.endswith(b"\n") and (chunk := os.read(status_fd, 4096)):
        data += chunk
    try:
        return os.pidfd_open(int(json.loads(data.split(b"\n", 1)[0])["child-pid"]))
    except (ValueError, KeyError, TypeError, OSError):
        return None


def _wait_for_exit(pidfd: int | None) -> None:
    """Block until the process ``pidfd`` refers to has ended (bubblewrap itself may end first)."""
    if pidfd is None:
        return
    try:
        select.select([pidfd], [], [])
    finally:
        os.close(pidfd)


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
