"""A record's committed reproduction as text, for ``errordb explain`` and ``errordb show``.

The explainer's only call into :mod:`errordb.repro`: it reads the transcript file a reviewed
reproduction left (nothing runs; ``errordb repro`` runs it). Callers of the renderer read it
here and pass the text to :mod:`errordb.explainer.render`, which reads no files.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def reproduction_text(record_id: str) -> str | None:
    """The committed reproduction of a record as a side-by-side list, when one exists."""
    from errordb.repro.reproduction import load_transcript, side_by_side

    transcript = load_transcript(record_id)
    if transcript is None:
        return None
    header, *body = side_by_side(transcript)
    lines = [f"{transcript.get('title', '')}".strip(), ""]
    for row in body:
        lines.append(f"- {row[0]}")
        lines.extend(f"    {name}: {cell}" for name, cell in zip(header[1:], row[1:]))
    lines.append("")
    lines.append(f"Run it: errordb repro {record_id}")
    return "\n".join(lines)


def best_reproductions(explanation: Any) -> dict[str, str]:
    """The reproduction text of each record an explanation shows in full (its best matches)."""
    ids: Iterable[str] = dict.fromkeys(match.id for finding in explanation.findings for match in finding.best)
    texts = {record_id: reproduction_text(record_id) for record_id in ids}
    return {record_id: text for record_id, text in texts.items() if text is not None}
