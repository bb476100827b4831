"""errordb: identify Python errors from tracebacks and logs, explain them, show how to fix them.

The library is usable without the CLI: :func:`errordb.store.ingest`, :func:`errordb.check.check`,
and (from the explain module) ``errordb.explain`` and ``errordb.install``. Heavy modules are
imported lazily so that ``import errordb`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"
