from __future__ import annotations

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (derandomize: a seed from each test's name)
# and keep no database of past failures: the suite's verdict depends on the code only, never on
# luck or on an earlier run. A failure found once is kept as a test of its own.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own embedded-default cache, so none sees another's database."""
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("ERRORDB_DB", raising=False)
