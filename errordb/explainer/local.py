"""Drafts of a traceback's own files, read on the fly: the raise site of an error no record
knows, when the file that raised it is on this machine (the user's own project, most often).

The innermost frame's file is read with :mod:`ast` (never imported or run), as ``errordb
harvest`` reads a tree, and its drafts are scored like stored records. The path comes from
pasted text, so a file is used only when it is a regular ``.py`` file of at most
:data:`MAX_BYTES` whose line at the frame's line is the source line the traceback printed:
the file that ran, not another file that happens to have that name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from errordb.explainer.match import Match, rank, score_candidate

#: Largest file read on the fly.
MAX_BYTES = 2 << 20


def readable_file(frame: Any) -> Path | None:
    """The frame's file, when it is safe and right to read (see the module's docstring)."""
    if not frame.file or not frame.line or not frame.source or not frame.file.endswith(".py") or not os.path.isabs(frame.file):
        return None
    path = Path(frame.file)
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if number == frame.line:
                    return path if line.strip() == frame.source.strip() else None
    except OSError:
        return None
    return None


def local_matches(exception: Any) -> list[Match]:
    """Drafts of the file the exception was raised in that match it, ranked; [] when the file
    cannot be read here. Each match's record is a whole draft (with ``readFrom``, its file)."""
    from errordb.harvest.drafts import default_analyzed_at, draft_record, raised_when
    from errordb.harvest.scan import scan_files

    frames = list(exception.frames)
    path = readable_file(frames[-1]) if frames else None
    if path is None:
        return []
    files, _ = scan_files([(path, path.name)], workers=1)
    matches = []
    for scanned in files:
        for site in scanned.sites:
            record = draft_record(site, scanned.lines, repo=None, sha=None, analyzed_at=default_analyzed_at())
            record.update(filePath=str(path), readFrom=str(path), function=record["functionName"] or site.qualname or None,
                          family=None, triggerScenarios=raised_when(site.conditions))
            found = score_candidate(record, exception.exc_type, exception.message, frames)
            if found:
                matches.append(found)
    return rank(matches)
