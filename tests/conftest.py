from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own embedded-default cache, so none sees another's database."""
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("ERRORDB_DB", raising=False)
