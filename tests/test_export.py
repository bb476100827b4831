"""The JSON API export: record files byte for byte, the round trip, determinism, atomicity, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import ALL_IDS, RECORDS, record_file
from test_export_data import build_db, table_rows, tree_bytes

from errordb.publish import output as export_output
from errordb.cli import cli
from errordb.publish.api import ExportError, export_api, write_api
from errordb.store import connect, ingest, meta


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return build_db(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def api(store, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "api"
    db = connect(store)
    export_api(db, out, page_size=4)
    db.close()
    return out


def record_ids(store: Path) -> list[str]:
    db = connect(store)
    try:
        return [row[0] for row in db.execute("SELECT id FROM records ORDER BY id")]
    finally:
        db.close()


def test_record_files_are_the_bundled_files_byte_for_byte(api):
    for record_id in ALL_IDS:
        original = record_file(record_id).read_bytes()
        assert (api / "errors" / f"{record_id}.json").read_bytes() == original
        assert (api / "errors" / record_id).read_bytes() == original  # the extension-less URL


def test_record_files_made_from_rows_are_the_canonical_json_of_their_envelopes(tmp_path):
    # iter_record_files must give canonical_json's bytes (what contentHash is the hash of) for any text.
    import hashlib

    from helpers import KIMI_PP_ERROR, copy_records, envelope, write_envelope

    from errordb.records.schema import canonical_json
    from errordb.store import iter_envelopes, iter_record_files

    records = copy_records(tmp_path / "records")
    awkward = ['quote " backslash \\ slash /', "tab\tnew\nline \x01\x1f\x7f", "é\u212a\u2028\u2029\ufeff 😀 \U0010ffff", "</script>&amp;"]
    for i, text in enumerate(awkward):
        data = envelope(KIMI_PP_ERROR)
        data["record"].update(id=f"{i + 1:016x}", slug=f"awkward-{i}", documentation=text, solutions=[text, "plain"], backgroundTag=None, httpStatus=None)
        write_envelope(records, data)
    path = tmp_path / "db.db"
    ingest([records], path)
    db = connect(path)
    hashes = dict(db.execute("SELECT id, contentHash FROM records").fetchall())
    made = list(iter_record_files(db))
    assert [record_id for record_id, _ in made] == sorted(hashes)
    for (record_id, data), envelope_ in zip(made, iter_envelopes(db)):
        assert data == canonical_json(envelope_).encode("utf-8"), record_id
        assert hashlib.sha256(data).hexdigest() == hashes[record_id], record_id
    db.close()


def test_every_record_is_exported_with_both_names(api, store):
    # The synthetic record files are compact JSON in schema order too: canonical, like the bundled ones.
    for record_id in record_ids(store):
        data = (api / "errors" / f"{record_id}.json").read_bytes()
        assert (api / "errors" / record_id).read_bytes() == data
        assert data.startswith(b'{"record":{"id":"' + record_id.encode())
        assert not data.endswith(b"\n")


def test_round_trip_is_a_fixed_point(api, store, tmp_path):
    """export → ingest the exported record files into a new store → same rows → same API bytes."""
    files = sorted(path for path in (api / "errors").glob("*.json") if path.name != "index.json")
    copy = tmp_path / "copy.db"
    families = store.parent / "records" / "families.toml"
    ingest(files, copy, families_path=families)
    assert table_rows(copy) == table_rows(store)
    db = connect(copy)
    export_api(db, tmp_path / "again" / "api", page_size=4)
    db.close()
    assert tree_bytes(tmp_path / "again" / "api") == tree_bytes(api)


def test_two_exports_are_byte_identical_whatever_the_ingest_order(api, store, tmp_path):
    # The same records ingested in another order get other rowids; the export must not care.
    records = store.parent / "records"
    shuffled = tmp_path / "shuffled.db"
    ingest(sorted((records / "acme").rglob("*.json"), reverse=True), shuffled, families_path=records / "families.toml")
    ingest([records], shuffled)
    assert table_rows(shuffled) == table_rows(store)
    db = connect(shuffled)
    export_api(db, tmp_path / "api", page_size=4)
    db.close()
    assert tree_bytes(tmp_path / "api") == tree_bytes(api)


def test_write_api_fills_the_given_folder(store, tmp_path):
    (tmp_path / "api").mkdir()
    db = connect(store)
    written = write_api(db, tmp_path / "api", base_url="https://errordb.example/docs")
    records = db.execute("SELECT count(*) FROM records").fetchone()[0]
    db.close()
    assert written == records == len(list((tmp_path / "api" / "errors").glob("*.json"))) - 1  # and index.json
    manifest = json.loads((tmp_path / "api" / "errors" / "index.json").read_text())
    page = json.loads((tmp_path / "api" / "errors" / "index.pages" / "page-0001.json").read_text())
    assert manifest["pages"][0]["url"] == "https://errordb.example/docs/api/errors/index.pages/page-0001.json"
    entry = page["items"][0]
    assert entry["jsonUrl"] == f"https://errordb.example/docs/api/errors/{entry['id']}.json"
    assert entry["pageUrl"] == f"https://errordb.example/docs/errors/{entry['slug']}/"


def test_version_json_states_the_store_facts(api, store):
    version = json.loads((api / "version.json").read_text())
    db = connect(store)
    facts = meta(db)
    db.close()
    assert version["recordCount"] == int(facts["recordCount"]) == len(record_ids(store))
    assert version["contentHash"] == facts["contentHash"]
    assert version["datasetVersion"] == facts["datasetVersion"]
    assert version["schemaVersion"] == 2
    for name, download in version["downloads"].items():
        assert download["bytes"] == (api / name).stat().st_size
        assert download["url"] == f"/api/{name}"


def test_the_record_schema_is_the_published_one(api):
    from errordb.records.schema import record_json_schema

    assert json.loads((api / "schema" / "record-v2.json").read_text()) == record_json_schema()


@pytest.mark.parametrize("failing", ["write_bytes", "finish"])
def test_a_failure_mid_export_leaves_the_previous_api_as_it_was(api, store, tmp_path, monkeypatch, failing):
    out = tmp_path / "site" / "api"
    db = connect(store)
    export_api(db, out, page_size=4)
    before = tree_bytes(out)
    # Fail after a few writes: of record files (first pass) or of listings (a later pass).
    target = export_output.OutputTree if failing == "write_bytes" else export_output.Pager
    original = getattr(target, failing)
    calls = []

    def fail_later(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 5:
            raise OSError("disk full (injected)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(target, failing, fail_later)
    with pytest.raises(OSError, match="injected"):
        export_api(db, out, page_size=2, base_url="https://elsewhere.example/")
    db.close()
    assert len(calls) > 5
    assert tree_bytes(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["api"]  # no staging folder left behind


def test_a_failed_first_export_leaves_nothing(store, tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("injected")

    monkeypatch.setattr(export_output.Pager, "finish", fail)
    db = connect(store)
    with pytest.raises(OSError):
        export_api(db, tmp_path / "api")
    db.close()
    assert list(tmp_path.iterdir()) == []


def test_a_write_committed_mid_export_does_not_reach_it(store, tmp_path, monkeypatch):
    # In WAL mode a writer can commit while the export reads; the export's read transaction
    # must keep seeing the data as it was when it started.
    import shutil
    import sqlite3

    copy = tmp_path / "wal.db"
    shutil.copy(store, copy)
    sqlite3.connect(copy).execute("PRAGMA journal_mode = WAL").fetchone()
    db = connect(copy)
    before = len(record_ids(copy))
    original, done = export_output.Pager.finish, []

    def finish_after_a_concurrent_delete(self, *args, **kwargs):
        if not done:
            writer = sqlite3.connect(copy)
            with writer:
                for table in ("solutions", "prevention_tips", "record_tags"):
                    writer.execute(f"DELETE FROM {table} WHERE record_id = 'b318b4f842689251'")
                writer.execute("DELETE FROM records WHERE id = 'b318b4f842689251'")
            writer.close()
            done.append(True)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(export_output.Pager, "finish", finish_after_a_concurrent_delete)
    export_api(db, tmp_path / "api")
    db.close()
    assert done and len(record_ids(copy)) == before - 1
    version = json.loads((tmp_path / "api" / "version.json").read_text())
    repo = json.loads((tmp_path / "api" / "repos" / "sgl-project" / "sglang.json").read_text())
    assert version["recordCount"] == before
    assert "b318b4f842689251" in [item["id"] for item in repo["items"]]


def test_names_are_kept_inside_the_folder(tmp_path):
    tree = export_output.OutputTree(tmp_path)
    for bad in ("../outside.json", "repos/a/../../x.json", "/etc/passwd", "tags/a\\b.json"):
        with pytest.raises(ExportError, match="not a plain relative path"):
            tree.write_text(bad, "{}")
    tree.write_text("tags/x.json", "{}")
    with pytest.raises(ExportError, match="two API files map to this name"):
        tree.write_text("tags/x.json", "{}")


def test_a_pager_refuses_items_out_of_order(tmp_path):
    from errordb.publish.api_layout import Urls

    pager = export_output.Pager(
        export_output.OutputTree(tmp_path), Urls.for_site("/"), "x.json", page_size=2, page_bytes=100, inline_first=True
    )
    pager.add("b", {})
    with pytest.raises(ExportError, match="out of order"):
        pager.add("a", {})


def test_empty_store_exports_an_empty_api(tmp_path):
    db = connect(tmp_path / "empty.db")
    from errordb.store import ensure_schema

    ensure_schema(db)
    report = export_api(db, tmp_path / "api")
    db.close()
    assert report.records == 0
    assert json.loads((tmp_path / "api" / "errors" / "index.json").read_text()) == {"count": 0, "pageSize": 1000, "pages": []}
    assert json.loads((tmp_path / "api" / "patterns.json").read_text())["items"] == []


def test_cli_export_writes_the_api_and_the_sqlite_release(tmp_path):
    db_path = tmp_path / "errordb.db"
    ingest([RECORDS], db_path)
    out, release = tmp_path / "site" / "api", tmp_path / "dist" / "errordb.db"
    result = CliRunner().invoke(
        cli, ["export", "--db", str(db_path), "--out", str(out), "--base-url", "https://x.example/", "--sqlite", str(release)]
    )
    assert result.exit_code == 0, result.output
    assert "3 records" in result.output
    assert (out / "errors" / f"{ALL_IDS[0]}.json").read_bytes() == record_file(ALL_IDS[0]).read_bytes()
    assert json.loads((out / "openapi.json").read_text())["servers"] == [{"url": "https://x.example/api"}]
    assert release.exists() and (tmp_path / "dist" / "errordb.metadata.json").exists()


def test_a_killed_releases_partial_files_are_removed_by_the_next_one(tmp_path):
    import os

    db_path = tmp_path / "errordb.db"
    ingest([RECORDS], db_path)
    dist = tmp_path / "dist"
    dist.mkdir()
    dead = [".errordb.db.999999999.partial", ".errordb.db.999999999.partial-journal", ".errordb.metadata.json.999999999.partial"]
    kept = [f".errordb.db.{os.getppid()}.partial", ".errordb.db.x.partial", ".other.db.999999999.partial"]  # alive, no pid, not ours
    for name in dead + kept:
        (dist / name).write_bytes(b"half")
    result = CliRunner().invoke(cli, ["export", "--db", str(db_path), "--out", str(tmp_path / "api"), "--sqlite", str(dist / "errordb.db")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in dist.iterdir()) == sorted([*kept, "errordb.db", "errordb.metadata.json"])


@pytest.mark.parametrize("base_url", ["/a b/", "ftp://evil/", "javascript:alert(1)", 'https://x.example/"><script>'])
def test_cli_export_refuses_a_base_url_that_cannot_be_linked(tmp_path, base_url):
    # The rule build has (errordb.publish.paths.normal_base_url): a path, or an http(s) URL.
    db_path = tmp_path / "errordb.db"
    ingest([RECORDS], db_path)
    result = CliRunner().invoke(cli, ["export", "--db", str(db_path), "--out", str(tmp_path / "api"), "--base-url", base_url])
    assert result.exit_code == 2
    assert result.stderr == f"errordb: --base-url {base_url!r}: give a path such as /errordb/ or an http(s) URL\n"
    assert not (tmp_path / "api").exists()


def test_cli_export_reports_a_missing_database(tmp_path):
    result = CliRunner().invoke(cli, ["export", "--db", str(tmp_path / "nope.db"), "--out", str(tmp_path / "api")])
    assert result.exit_code == 2
    assert "no such database" in result.output
    assert not (tmp_path / "api").exists()


def test_export_refuses_names_not_every_host_can_hold_and_leaves_the_old_api(tmp_path):
    from helpers import KIMI_PP_ERROR, copy_records, envelope, write_envelope

    records = copy_records(tmp_path / "records")
    db = tmp_path / "e.db"
    ingest([records], db)
    out = tmp_path / "api"
    assert CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(out), "-q"]).exit_code == 0
    before = tree_bytes(out)
    data = envelope(KIMI_PP_ERROR)
    data["record"]["tags"] = [*data["record"]["tags"], "aux"]  # api/tags/aux.json: AUX on Windows
    write_envelope(records, data)
    ingest([records], db)
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(out), "-q"])
    assert result.exit_code == 2
    assert result.stderr == f"errordb: record {KIMI_PP_ERROR}: tags: 'aux' is a device name on Windows (AUX): no file or folder can be named so there\n"
    assert tree_bytes(out) == before
