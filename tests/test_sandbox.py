"""The sandbox reproductions run in (errordb/repro/sandbox.py): each escape a hostile definition
tried before is closed, and the same code, run without the sandbox, shows that the test sees
each escape when it happens.

The hostile code is a definition's ``prelude`` (the code a definition runs before the record's
function), sent to the child as ``errordb repro`` sends it. It reports each attempt on its
standard error, which the parent returns; what it did outside is checked outside: the files,
a listening socket, the processes left.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from errordb import repro as R
from errordb.repro.definitions import REVIEWED_DEFINITIONS
from errordb.repro.sandbox import run_in_child, sandbox_problem

REPO = Path(__file__).resolve().parent.parent

HOSTILE = textwrap.dedent('''\
    import os, socket, subprocess, sys

    def attempt(name, action):
        try:
            print(name, "ESCAPED", action(), file=sys.stderr)
        except BaseException as exc:
            print(name, "blocked", type(exc).__name__, file=sys.stderr)

    def write_outside():
        open(OUTSIDE, "w").close()
        return "created"

    def delete_user_file():
        os.remove(VICTIM)
        return "deleted"

    def read_file(path):
        with open(path) as handle:
            return handle.read()[:40]

    def send_to_localhost():
        with socket.create_connection(("127.0.0.1", PORT), timeout=30) as connection:
            connection.sendall(b"exfiltrated")
        return "sent"

    def start_shell():
        return subprocess.run(["/bin/sh", "-c", "echo shell-ran"], capture_output=True).stdout.decode().strip()

    def leave_a_process():
        if os.fork() == 0:
            os.setsid()
            os.closerange(0, 3)  # holds no pipe of the parent's: it just stays
            while True:
                os.pause()
        return "forked"

    attempt("write", write_outside)
    attempt("delete", delete_user_file)
    attempt("ssh", lambda: read_file(SECRET))
    attempt("passwd", lambda: read_file("/etc/passwd"))
    attempt("socket", send_to_localhost)
    attempt("shell", start_shell)
    attempt("process", leave_a_process)
    sys.stderr.flush()
    os._exit(3)
''')

ATTEMPTS = ("write", "delete", "ssh", "passwd", "socket", "shell", "process")

needs_sandbox = pytest.mark.skipif(
    sandbox_problem() is not None and not os.environ.get("ERRORDB_REQUIRE_SANDBOX"),
    reason=f"no sandbox here: {sandbox_problem()}",
)


def _job(prelude: str) -> dict:
    guard = {"filename": "/opt/x/guard.py", "source": "def guard():\n    return 1\n", "function": "guard",
             "first_line": 1, "prelude": prelude}
    scenario = {"key": "s", "guard": "g", "call": "guard()", "caller_filename": "<hostile>", "pp": 1,
                "config": {}, "state": {}, "model_state": {}}
    return {"protocol": 1, "guards": {"g": guard}, "stand_in_modules": {}, "advice": [],
            "scenarios": [scenario]}


def _repro_processes() -> set[int]:
    """Processes running a child of errordb repro (its script lies in an errordb-repro-* folder)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                continue
            if b"/errordb-repro-" in cmdline and b"child.py" in cmdline:
                found.add(int(entry))
    return found


def _attack(tmp_path: Path, *, sandbox: bool) -> dict:
    """Run the hostile prelude; what it said of each attempt, and what happened outside."""
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("PRIVATE-KEY-OF-THE-USER\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    outside = tmp_path / "outside.txt"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        prelude = (f"OUTSIDE = {str(outside)!r}\nVICTIM = {str(victim)!r}\nSECRET = {str(secret)!r}\n"
                   f"PORT = {listener.getsockname()[1]}\n" + HOSTILE)
        before = _repro_processes()
        lines, abnormal, detail = run_in_child(_job(prelude), 60, sandbox=sandbox)
        left = _repro_processes() - before
        listener.setblocking(False)
        try:
            connection, _ = listener.accept()  # the run is over: a connection would be queued by now
            with connection:
                connection.setblocking(True)
                received = connection.recv(100)
        except BlockingIOError:
            received = None
    for pid in left:  # the escape the control run makes: end it here
        os.kill(pid, signal.SIGKILL)
    said = {line.split(" ", 1)[0]: line for line in detail.split(": ", 1)[-1].splitlines() if line.split(" ", 1)[0] in ATTEMPTS}
    return {"abnormal": abnormal, "detail": detail, "said": said, "created": outside.exists(),
            "victim": victim.exists(), "received": received, "left": left}


@needs_sandbox
def test_the_sandbox_closes_every_escape(tmp_path):
    seen = _attack(tmp_path, sandbox=True)
    assert seen["abnormal"] == "crash" and "exit status 3" in seen["detail"]  # the code did run, to its end
    assert set(seen["said"]) == set(ATTEMPTS), seen["detail"]
    for name in ("write", "delete", "ssh", "passwd", "socket", "shell"):
        assert " blocked " in seen["said"][name], seen["said"][name]
    assert not seen["created"] and seen["victim"]  # nothing written or deleted outside its folder
    assert "PRIVATE-KEY" not in seen["detail"] and "root:" not in seen["detail"]
    assert seen["received"] is None  # no connection reached a socket of this machine
    assert seen["left"] == set()  # its process was forked, and ended with the sandbox


def test_without_the_sandbox_the_same_code_escapes(tmp_path):
    """The control: under the resource limits alone each escape happens, and the test sees it."""
    seen = _attack(tmp_path, sandbox=False)
    assert set(seen["said"]) == set(ATTEMPTS), seen["detail"]
    assert seen["created"] and not seen["victim"]
    assert "PRIVATE-KEY-OF-THE-USER" in seen["said"]["ssh"]
    assert seen["received"] == b"exfiltrated"
    assert "shell-ran" in seen["said"]["shell"]
    assert seen["left"], "the forked process should have outlived the run"


def _definition(folder: Path, name: str, definition_id: str, record_id: str = "feedfacefeedface") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(textwrap.dedent(f'''\
        id = "{definition_id}"
        title = "t"
        [reviewed]
        {record_id} = "sha256:0"
        [[subjects]]
        id = "s"
        label = "S"
        records = ["{record_id}"]
        [[scenarios]]
        id = "x"
        title = "x"
        call = "f()"
        [scenarios.s]
        expect = {{ raises = "{record_id}" }}
        '''))
    return path


def test_two_definitions_claiming_one_record_are_an_error_and_neither_runs(tmp_path):
    _definition(tmp_path, "a", "first")
    assert [r.id for r in R.load_reproductions(tmp_path)] == ["first"]
    _definition(tmp_path, "b", "second")
    with pytest.raises(R.DefinitionError, match="a.toml and b.toml both claim record feedfacefeedface"):
        R.load_reproductions(tmp_path)


def test_a_reviewed_definition_that_changed_never_runs(tmp_path):
    bundled = REPO / "records" / "repros" / "dspark_capture_guard.toml"
    copy = tmp_path / bundled.name
    copy.write_bytes(bundled.read_bytes())
    (repro,) = R.load_reproductions(tmp_path)
    assert repro.definition_reviewed and REVIEWED_DEFINITIONS[repro.id] == repro.digest
    copy.write_bytes(bundled.read_bytes() + b"\n# one byte more is another definition\n")
    with pytest.raises(R.DefinitionError, match="changed since it was reviewed"):
        R.load_reproductions(tmp_path)


def test_without_a_sandbox_only_reviewed_definitions_run_unless_unsafe(tmp_path):
    """Run where bubblewrap cannot be found (PATH without it): an unreviewed definition is
    refused and says why; --unsafe runs it and says so; a reviewed one runs under the limits."""
    _definition(tmp_path, "probe", "probe")
    script = textwrap.dedent(f'''\
        import sys
        from errordb import repro as R
        from errordb.repro.run import isolation_for
        (probe,) = R.load_reproductions({str(tmp_path)!r})
        (reviewed,) = R.load_reproductions()
        try:
            isolation_for(probe)
        except R.ReproError as exc:
            print("refused:", exc)
        print("unsafe:", isolation_for(probe, unsafe=True))
        print("reviewed:", isolation_for(reviewed))
        ''')
    env = {**os.environ, "PATH": str(tmp_path / "no-such-folder")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO, check=True).stdout
    refused, unsafe, reviewed = out.splitlines()
    assert refused.startswith("refused: probe.toml is not a reviewed definition, and there is no sandbox")
    assert "bubblewrap (`bwrap`) is not installed" in refused and "--unsafe" in refused
    assert unsafe.startswith("unsafe: (False, 'NO SANDBOX (--unsafe")
    assert reviewed.startswith("reviewed: (False, 'no sandbox (") and "a reviewed definition" in reviewed
