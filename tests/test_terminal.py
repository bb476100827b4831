"""explain and show in a real terminal (tmux) 80 and 200 columns wide: every line fits, prose is
wrapped at word boundaries, and a line of code is cut with a marker, never wrapped.

Each command runs in a tmux pane of the width under test; the test waits for tmux's
``wait-for`` signal the command sends when it is done (no sleeping), then reads the pane with
wrapped lines joined (``capture-pane -J``): a line the program printed wider than the pane comes
back as one line longer than the width.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import uuid

import pytest
from helpers import KIMI_VALUE_ERROR

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

MESSAGE = "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."
TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/serve_with_a_rather_long_module_name_for_this_test.py", line 12, in start_the_speculative_worker
    model.set_dspark_layers_to_capture(None)
  File "/venv/lib/python3.11/site-packages/sglang/srt/models/kimi_k3.py", line 2892, in set_dspark_layers_to_capture
    raise ValueError(
ValueError: DSPARK requires explicit layer_ids for aux hidden capture.
"""


def in_terminal(tmp_path, width: int, *args: str, stdin: str | None = None) -> list[str]:
    """The lines ``errordb ARGS`` shows in a tmux pane ``width`` columns wide."""
    socket = f"errordb-{uuid.uuid4().hex}"  # a server of its own: never one that is still shutting down
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "errordb", *args])
    if stdin is not None:
        (tmp_path / "input.txt").write_text(stdin)
        command += f" < {shlex.quote(str(tmp_path / 'input.txt'))}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", "50", "-s", "t", "sh"], check=True)
    try:
        subprocess.run([*tmux, "set-option", "-g", "history-limit", "10000"], check=True)
        # The pane's own size, not a COLUMNS inherited from the shell that started tmux.
        run = f"clear; env -u COLUMNS -u LINES NO_COLOR=1 {command}; tmux -L {socket} wait-for -S done"
        subprocess.run([*tmux, "send-keys", "-t", "t", run, "Enter"], check=True)
        subprocess.run([*tmux, "wait-for", "done"], check=True, timeout=300)
        shown = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-", "-t", "t"], check=True, capture_output=True, text=True).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    lines = shown.rstrip("\n").split("\n")
    while lines and lines[-1].strip() in ("#", "$", ""):  # the shell's prompt after the command
        lines.pop()
    return lines


def too_wide(lines: list[str], width: int) -> list[str]:
    # A URL or a path longer than the line is one word: it may not fit, but it is never cut.
    return [line for line in lines if len(line) > width and len(line.split()) > 1]


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("args, stdin", [(["explain", MESSAGE], None), (["explain", "-"], TRACEBACK), (["show", KIMI_VALUE_ERROR], None)])
def test_explain_and_show_fit_the_terminal(tmp_path, width, args, stdin):
    lines = in_terminal(tmp_path, width, *args, stdin=stdin)
    assert any("DSPARK requires explicit layer_ids for aux hidden capture." in line for line in lines), lines[:20]
    assert too_wide(lines, width) == []
    text = "\n".join(lines)
    # Words are whole: a wrapped sentence breaks only between words.
    for word in ("set_dspark_layers_to_capture", "python/sglang/srt/models/kimi_k3.py:2892", "explicit"):
        assert word in text
    # Code is cut, with a marker, never wrapped onto a second line: the raise's line is one line.
    numbered = [line for line in lines if " | " in line]
    assert all(len(line) <= width for line in numbered)
    raise_lines = [line for line in numbered if line.lstrip().startswith(">")]
    assert raise_lines and all(line.rstrip().endswith("raise ValueError(") for line in raise_lines)
    text_width = min(width, 120)  # prose is never set wider than 120 columns, for reading
    cut = [line for line in numbered if line.endswith("…")]
    assert all(len(line) == text_width for line in cut) and (width > 80 or cut != [])


@pytest.mark.parametrize("width", [80, 200])
def test_list_and_search_fit_the_terminal_and_keep_every_column(tmp_path, width):
    listed = in_terminal(tmp_path, width, "list")
    assert too_wide(listed, width) == []
    text = "\n".join(listed)
    for whole in ("dspark-requires-explicit-layer-ids-for-aux-hidden-b318b4", "NotImplementedError", "sgl-project/sglang",
                  "python/sglang/srt/models/kimi_k3.py:2892"):  # fmt: skip
        assert whole in text, whole  # no column is dropped to make the table fit
    found = in_terminal(tmp_path, width, "search", "layer", "capture")
    assert too_wide(found, width) == []
    assert "dspark-requires-explicit-layer-ids-for-aux-hidden-3083cb" in "\n".join(found)
    assert all(not line.endswith(("rej", "capt", "lay")) for line in found)  # words are whole


@pytest.mark.parametrize("width", [80, 200])
def test_repro_of_a_record_fits_the_terminal_and_shows_that_records_runs(tmp_path, width):
    lines = in_terminal(tmp_path, width, "repro", KIMI_VALUE_ERROR)
    assert too_wide(lines, width) == []
    assert lines[-1].startswith("(the runs of Kimi K3 only")
    runs = [line.strip() for line in lines if line.startswith("  ") and line.strip().endswith(":") and "MoE" in line]
    assert runs == []  # Bailing MoE v3's runs are left out ...
    assert any("Bailing MoE v3: " in line for line in lines)  # ... but not from the side-by-side comparison
