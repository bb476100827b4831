"""Reviewed reproductions of records: a record's stored code, run in a sandboxed child process
on stand-in objects, and judged against the outcome a reviewer pinned.

Safety model (record code is data, and untrusted):

* Only reproductions **defined in reviewed files** of this repository (``records/repros/*.toml``,
  :mod:`~errordb.repro.definitions`) run anything.  A definition pins a digest of every record
  field that gets executed or checked (:func:`record_digest`); when a record changes its digest
  no longer matches and the reproduction refuses to run (:class:`ReviewMismatch`) until someone
  has read the new code and updated the pin.
* This process never executes record text: it only parses it with :mod:`ast`
  (:mod:`~errordb.repro.extract`).  ``exec``/``eval``/``compile`` of snippet text happen only in
  ``errordb/repro/child.py``, which :mod:`~errordb.repro.sandbox` starts in isolation.
* Ingesting, rendering and exporting never execute anything: renderers read the committed
  transcripts (:func:`load_transcript`), which ``errordb repro --write-transcripts`` produces
  and a test keeps current.

Modules, in the order a run goes through them: ``definitions`` (the reviewed files and pins),
``extract`` (the function to run), ``run`` (jobs for the child, the report), ``sandbox`` (the
child process), ``child`` (the script that executes), ``report`` (judging outcomes),
``transcripts`` (the committed files and their views).  ``commands`` is what ``errordb repro``
calls: it joins reproductions with the store and the matcher (:mod:`errordb.explainer`).
Imports point from here down to the explainer, never back: ``errordb explain`` gets a record's
reproduction text from :func:`reproduction_text` and hands it to the renderer.
"""

from errordb.repro.definitions import (
    DIGEST_FIELDS, DefinitionError, ReproError, Reproduction, ReviewMismatch, load_reproductions, record_digest,
    reproduction_for,
)
from errordb.repro.extract import ExtractedFunction, ExtractionError, extract_enclosing_function
from errordb.repro.report import Matcher, ReproReport
from errordb.repro.run import run_reproduction, traceback_path
from errordb.repro.transcripts import (
    best_reproductions, load_transcript, render_text, reproduction_text, side_by_side, transcript_is_current,
    transcript_path, transcript_text,
)

__all__ = [
    "DIGEST_FIELDS", "DefinitionError", "best_reproductions", "ExtractedFunction", "ExtractionError", "Matcher", "ReproError",
    "ReproReport", "Reproduction", "ReviewMismatch", "extract_enclosing_function", "load_reproductions",
    "load_transcript", "record_digest", "render_text", "reproduction_for", "reproduction_text", "run_reproduction", "side_by_side",
    "traceback_path", "transcript_is_current", "transcript_path", "transcript_text",
]
