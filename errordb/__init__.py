"""errordb: identify Python errors from tracebacks and logs, explain them, show how to fix them.

The library is usable without the CLI: :func:`errordb.store.ingest`, :func:`errordb.records.check.check`,
and (from :mod:`errordb.explainer.explanation` and :mod:`errordb.excepthook`) ``errordb.explain`` and ``errordb.install``. Heavy modules are
imported lazily so that ``import errordb`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "explain", "install"]


def __getattr__(name: str):
    # `errordb.explain(...)` and `errordb.install()` without importing the matcher at import time.
    if name in ("explain", "install"):
        import importlib

        module = "errordb.explainer.explanation" if name == "explain" else "errordb.excepthook"
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'errordb' has no attribute {name!r}")
