"""``errordb.install()``: uncaught exceptions get errordb's explanation after the traceback."""

from __future__ import annotations

import sys
from typing import Any

from errordb.explainer.explanation import explain


def install(db: Any = None, stream: Any = None) -> None:
    """Make uncaught exceptions print errordb's explanation after the normal traceback."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        try:
            from errordb.explainer.render import render_terminal, site_url
            from errordb.repro import best_reproductions

            result = explain(value, db)
            out = stream or sys.stderr
            text = render_terminal(result, reproductions=best_reproductions(result), color=out.isatty(), site=site_url(dataset=result.site_url))
            out.write(text + "\n")
        except Exception as exc:  # the user's own error matters more than ours
            (stream or sys.stderr).write(f"errordb: could not explain this error ({exc})\n")

    sys.excepthook = hook
