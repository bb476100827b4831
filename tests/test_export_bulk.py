"""The bulk downloads: all.jsonl.gz and all.zip hold every record file, deterministically."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import pytest
from test_export_data import build_db, table_rows

from errordb.publish.api import export_api
from errordb.store import connect, ingest


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("bulk")
    store = build_db(folder, 12)
    db = connect(store)
    export_api(db, folder / "api")
    db.close()
    return store, folder / "api"


def record_files(api: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((api / "errors").glob("*.json")) if p.name != "index.json"}


def test_jsonl_gz_is_every_record_file_one_per_line(exported):
    _, api = exported
    raw = (api / "all.jsonl.gz").read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip header MTIME: zero, so the bytes do not depend on the clock
    assert raw[3] & 0x08 == 0  # no file name in the header
    lines = gzip.decompress(raw).split(b"\n")
    assert lines[-1] == b""  # every line ends with a newline
    assert lines[:-1] == list(record_files(api).values())


def test_zip_is_every_record_file_with_fixed_dates(exported):
    _, api = exported
    with zipfile.ZipFile(api / "all.zip") as archive:
        assert archive.testzip() is None
        assert {info.filename: archive.read(info) for info in archive.infolist()} == record_files(api)
        for info in archive.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o100644
            assert info.compress_type == zipfile.ZIP_DEFLATED


def test_bulk_files_ingest_back_to_the_same_store(exported, tmp_path):
    store, api = exported
    families = store.parent / "records" / "families.toml"
    jsonl = tmp_path / "all.jsonl"
    jsonl.write_bytes(gzip.decompress((api / "all.jsonl.gz").read_bytes()))
    ingest([jsonl], tmp_path / "from-jsonl.db", families_path=families)
    assert table_rows(tmp_path / "from-jsonl.db") == table_rows(store)
    with zipfile.ZipFile(api / "all.zip") as archive:
        archive.extractall(tmp_path / "unzipped")
    ingest([tmp_path / "unzipped"], tmp_path / "from-zip.db", families_path=families)
    assert table_rows(tmp_path / "from-zip.db") == table_rows(store)
