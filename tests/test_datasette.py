"""The SQLite release: a deterministic, complete copy, and the real Datasette serving it.

The Datasette test starts ``python -m datasette`` on 127.0.0.1 at a free port, waits until it
answers, queries its JSON API (a record by id, full-text search, solutions and tags, the
metadata), and always stops it.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
from test_export_data import build_db, table_rows

from errordb.publish.api import ExportError, export_sqlite
from errordb.publish.release import RECORD_COLUMNS, TABLES
from errordb.store import connect

RECORD_ID = "b318b4f842689251"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder = tmp_path_factory.mktemp("release")
    store = build_db(folder, 12)
    db = connect(store)
    files = export_sqlite(db, folder / "dist" / "errordb.db")
    db.close()
    return store, files


def test_the_copy_holds_the_same_rows_and_is_deterministic(release, tmp_path):
    store, files = release
    assert table_rows(files.database) == table_rows(store)
    conn = sqlite3.connect(files.database)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0  # compact
    conn.close()
    db = connect(store)
    again = export_sqlite(db, tmp_path / "errordb.db")
    db.close()
    assert again.database.read_bytes() == files.database.read_bytes()
    assert again.metadata.read_bytes() == files.metadata.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["errordb.db", "errordb.metadata.json"]  # no partial files


def test_an_existing_release_is_replaced(release, tmp_path):
    store, _ = release
    target = tmp_path / "errordb.db"
    target.write_text("old")
    db = connect(store)
    export_sqlite(db, target)
    db.close()
    assert sqlite3.connect(target).execute("SELECT count(*) FROM records").fetchone()[0] == 15


def test_a_copy_inside_a_transaction_is_refused_and_leaves_nothing(release, tmp_path):
    store, _ = release
    db = connect(store)
    db.conn.execute("BEGIN")
    with pytest.raises(ExportError, match="cannot copy the database"):
        export_sqlite(db, tmp_path / "errordb.db")
    db.conn.rollback()
    db.close()
    assert list(tmp_path.iterdir()) == []


def test_the_metadata_describes_every_table_and_record_column(release):
    store, files = release
    metadata = json.loads(files.metadata.read_text())
    assert metadata["license"] and metadata["license_url"] and metadata["source"]
    database = metadata["databases"]["errordb"]
    tables = database["tables"]
    conn = sqlite3.connect(store)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(records)")]
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    # A column added to the store needs its description in errordb/publish/release.py.
    assert [c for c in columns if not RECORD_COLUMNS.get(c)] == []
    assert set(tables["records"]["columns"]) == set(columns)
    visible = {name for name in names if not name.startswith(("records_fts_", "solutions_fts_"))}
    assert visible <= set(TABLES) and set(tables) == visible


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def datasette(release, tmp_path_factory):
    """Datasette serving the release on 127.0.0.1; yields its base URL and stops it afterwards."""
    pytest.importorskip("datasette")
    _, files = release
    log = tmp_path_factory.mktemp("datasette") / "datasette.log"
    for _attempt in range(3):  # another process may take the free port between the check and the bind
        port = free_port()
        with open(log, "wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "datasette", "serve", str(files.database), "-m", str(files.metadata),
                 "--host", "127.0.0.1", "--port", str(port)],
                stdout=output, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            if _wait_until_up(process, f"{base}/-/versions.json"):
                yield base
                return
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    pytest.fail(f"datasette did not start:\n{log.read_text(errors='replace')}")


def _wait_until_up(process: subprocess.Popen, url: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status == 200
        except OSError:
            time.sleep(0.1)
    return False


def get_json(base: str, path: str, **params):
    url = f"{base}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_datasette_serves_a_record_by_id(datasette):
    row = get_json(datasette, f"/errordb/records/{RECORD_ID}.json", _shape="objects")["rows"][0]
    assert row["id"] == RECORD_ID
    assert row["errorMessage"] == "DSPARK requires explicit layer_ids for aux hidden capture."
    assert row["function"] == "set_dspark_layers_to_capture"


def test_datasette_full_text_search(datasette):
    found = get_json(datasette, "/errordb/records.json", _search="widget w7", _shape="array", _col="slug")
    assert [row["slug"] for row in found] == ["synthetic-failure-7-widget-w7-is-not-ready"]
    # The same through records_fts with SQL, and through the canned query in the metadata.
    sql = (
        "select records.slug from records_fts join records on records.rowid = records_fts.rowid "
        "where records_fts match :q"
    )
    rows = get_json(datasette, "/errordb.json", sql=sql, q="w7", _shape="array")
    assert rows == [{"slug": "synthetic-failure-7-widget-w7-is-not-ready"}]
    ranked = get_json(datasette, "/errordb/search.json", q="aux hidden capture", _shape="array")
    assert {row["id"] for row in ranked} >= {RECORD_ID}


def test_datasette_browses_solutions_and_tags(datasette):
    solutions = get_json(datasette, "/errordb/solutions.json", record_id=RECORD_ID, _shape="array", _sort="position")
    assert solutions[0]["position"] == 0 and solutions[0]["text"].startswith("Pass an explicit list")
    tagged = get_json(datasette, "/errordb/record_tags.json", tag="a+b", _shape="array", _labels="on")
    assert tagged and all(row["record_id"]["label"].startswith("synthetic-failure-") for row in tagged)
    tags = get_json(datasette, "/errordb/tags.json", _shape="array")
    assert {"synthetic", "v1.json", "index"} <= {row["name"] for row in tags}


def test_datasette_shows_the_metadata(datasette):
    metadata = get_json(datasette, "/-/metadata.json")
    assert metadata["title"] == "errordb" and metadata["license"] == "MIT"
    # MIT covers errordb's own text; the quoted source keeps its repository's licence, and says so.
    assert "under those repositories' own licences" in metadata["description"]
    assert metadata["databases"]["errordb"]["tables"]["records"]["columns"]["slug"].startswith("URL name")
    # The table page shows the table's description, the column descriptions and the licence.
    with urllib.request.urlopen(f"{datasette}/errordb/records", timeout=10) as response:
        page = response.read().decode()
    assert "One analysed error per row" in page
    assert "URL name of the record" in page
    assert 'href="https://opensource.org/license/mit"' in page
