"""Find Python exceptions in pasted tracebacks and log excerpts.

This package turns text -- a traceback copied from a terminal, a chunk of a server log, pytest
output -- into :class:`ParsedException` records that the matcher compares with known errors.
It is pure standard library and imports nothing heavy, because it runs on the CLI's cold path.

Entry points
------------
:func:`parse_text` parses a whole string and returns a list in input order.
:func:`iter_exceptions` does the same work line by line, in bounded memory. While no traceback
is open it skips ordinary log lines in blocks, after one cheap test for anything the parser
reacts to, which makes a big log about ten times faster to read.

What is understood, and where
-----------------------------
* ``lines``: terminal escapes, control characters and carriage returns; log prefixes (sglang,
  vLLM, Ray, logging, loguru, docker-compose, glog, syslog) and the source ids (ranks) in them.
* ``driver``: which source each line belongs to (interleaved ranks), the blocks skipped by
  ``fastpath``, the bare-message fallback, the order exceptions come out in.
* ``chain``: CPython tracebacks, 3.8 to 3.13: frames (``File "x", line N, in f``) with or
  without a source line, ``[Previous line repeated N more times]``, the caret and tilde lines of
  3.11+ (never kept as source or message), 3.13's ``...<N lines>...`` (only the first source
  line of a frame is kept), SyntaxError/IndentationError blocks with or without a ``Traceback``
  header, warnings (``path:N: UserWarning: msg``), ``multiprocessing``/``concurrent.futures``
  RemoteTraceback. Chains: "The above exception was the direct cause..." (role ``cause``),
  "During handling of the above exception..." (role ``context``); the first printed exception
  is ``root``.
* ``source``: exception groups (margins, member separators, nesting, ``group_path``).
* ``pytest_output``, ``rich_output``, ``faulthandler_output``, ``sentry_output``: pytest's long
  and short failure formats and summaries, rich's boxed tracebacks, faulthandler dumps
  (``exc_type`` None, message "Fatal Python error: ...", frames reversed to outermost first),
  Sentry's raw stack traces (the exception first; the driver knows it by the line after it).
* ``classify``: what a line is (headers, frames, separators, which names count as exception
  classes), exceptions named in a sentence (without the writer's words after them; a repr set
  off as code in a sentence that calls it an error); ``sink``: duplicates (the same exception
  from several ranks) reported once.
* Where a message ends besides: an HTTP error's (``Error code: 400 - {...}``) where its body
  closes (``parsed``); a bare exception's one-sentence message at the writer's next numbered
  item, any message at a shell's prompt; a message whose line ends with a colon goes on across
  blank lines while bullets follow (``chain``).

``parse_text`` (a paste, whole in memory) first takes off a pair of double quotes the writer put
around the whole paste. Each module documents the heuristics it applies where no rule can be exact.
"""

from errordb.explainer.parse.driver import iter_exceptions, parse_text
from errordb.explainer.parse.lines import MAX_LINE_CHARS
from errordb.explainer.parse.parsed import Frame, ParsedException

__all__ = ["Frame", "ParsedException", "parse_text", "iter_exceptions", "MAX_LINE_CHARS"]
