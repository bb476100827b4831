"""The bulk downloads: all.jsonl.gz and all.zip hold every record file, deterministically."""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from helpers import RECORDS
from test_export_data import build_db, table_rows

from errordb.publish import downloads as export_bulk
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


def test_zip64_records_are_written_when_the_archive_needs_them(monkeypatch, tmp_path):
    # Lowered limits take the ZIP64 path that a real archive takes past 65,534 entries or 4 GiB.
    monkeypatch.setattr(export_bulk, "ZIP64_COUNT_LIMIT", 3)
    monkeypatch.setattr(export_bulk, "ZIP64_OFFSET_LIMIT", 200)
    entries = {f"{n:016x}.json": ("é" * n * 40).encode() for n in range(8)} | {"naïve.json": b"{}"}
    path = tmp_path / "all.zip"
    with open(path, "wb") as handle:
        archive = export_bulk.StreamingZip(handle)
        for name, data in entries.items():
            archive.add(name, data)
        archive.close()
    assert b"PK\x06\x06" in path.read_bytes()  # the ZIP64 end record
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        assert {info.filename: archive.read(info) for info in archive.infolist()} == entries
    if shutil.which("unzip"):
        result = subprocess.run(["unzip", "-tq", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_streaming_zip_needs_no_seekable_file():
    class AppendOnly(io.RawIOBase):
        def __init__(self):
            self.data = bytearray()

        def writable(self):
            return True

        def write(self, chunk):
            self.data += chunk
            return len(chunk)

    out = AppendOnly()
    archive = export_bulk.StreamingZip(out)
    archive.add("a.json", (RECORDS / "families.toml").read_bytes())
    archive.close()
    with zipfile.ZipFile(io.BytesIO(bytes(out.data))) as check:
        assert check.read("a.json") == (RECORDS / "families.toml").read_bytes()


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_an_archive_copied_entry_by_entry_is_the_same_archive(monkeypatch, tmp_path, chunk):
    # Its central directory read a piece at a time while its entries are read in between, as an
    # incremental build copies them; ZIP64 on, as past 65,534 entries.
    monkeypatch.setattr(export_bulk, "DIRECTORY_CHUNK", chunk)
    monkeypatch.setattr(export_bulk, "ZIP64_COUNT_LIMIT", 10)
    entries = {f"{n:016x}.json": f'{{"n": {n}, "text": "{"x" * n}"}}'.encode() for n in range(40)}
    first, second = tmp_path / "first.zip", tmp_path / "second.zip"
    with open(first, "wb") as handle:
        archive = export_bulk.StreamingZip(handle)
        for name, data in entries.items():
            archive.add(name, data)
        archive.close()
    with open(first, "rb") as old, open(second, "wb") as handle:
        archive = export_bulk.StreamingZip(handle)
        copied = [entry.name.decode() for entry in export_bulk.zip_entries(old) if archive.copy(entry, old)]
        archive.close()
    assert copied == list(entries)
    assert second.read_bytes() == first.read_bytes()


def test_an_archive_not_written_here_has_no_entries_to_copy(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.json", b"{}")
        archive.comment = b"a comment moves the end record"
    with open(path, "rb") as handle:
        assert list(export_bulk.zip_entries(handle)) == []


def test_jsonl_segments_depend_on_the_ids_only(monkeypatch):
    # The same records give the same segments whatever came before; one record more changes one segment.
    ids = [f"{n * 7919:016x}" for n in range(3000)]
    def segments(chosen):
        out = io.BytesIO()
        writer = export_bulk.JsonLinesGzip(out)
        for record_id in chosen:
            writer.add(record_id, record_id.encode())
        writer.close()
        assert gzip.decompress(out.getvalue()) == b"".join(i.encode() + b"\n" for i in chosen)
        return {(s.first, s.last, s.count, s.crc) for s in writer.segments}
    every = segments(ids)
    one_more = segments(sorted([*ids, "0000000000abcdef"]))
    assert len(every) > 5 and len(every - one_more) == 1


@pytest.mark.parametrize("how", ["kernel", "kernel fails halfway", "no kernel copy", "not a file"])
def test_copy_range_appends_the_bytes_whichever_way_it_copies(tmp_path, monkeypatch, how):
    import os

    from errordb.publish import downloads as export_bulk

    data = bytes(range(256)) * 20_000  # 5 MB: several steps of either way
    (tmp_path / "old").write_bytes(data)
    if how == "kernel fails halfway":
        real = os.copy_file_range
        calls = []

        def fails_second_time(*args):
            calls.append(args)
            if len(calls) > 1:
                raise OSError(18, "Invalid cross-device link")
            return real(args[0], args[1], min(args[2], 1_000_000), *args[3:])

        monkeypatch.setattr(os, "copy_file_range", fails_second_time)
    elif how == "no kernel copy":
        monkeypatch.delattr(os, "copy_file_range")
    with open(tmp_path / "old", "rb") as source:
        out = io.BytesIO() if how == "not a file" else open(tmp_path / "new", "wb")
        with out:
            out.write(b"head")
            assert export_bulk.copy_range(source, 1000, 3_000_000, out) == 3_000_000
            out.write(b"tail")
            assert export_bulk.copy_range(source, len(data) - 10, 100, out) == 10  # the source ends
            assert out.tell() == 4 + 3_000_000 + 4 + 10
            written = out.getvalue() if how == "not a file" else None
    written = written if written is not None else (tmp_path / "new").read_bytes()
    assert written == b"head" + data[1000:3_001_000] + b"tail" + data[-10:]
    if how == "kernel fails halfway":
        assert len(calls) == 3  # one step, then a failure in each copy


def test_crc32_combine_gives_the_crc_of_the_two_strings_end_to_end():
    import os
    import random
    import zlib

    rng = random.Random(7)
    lengths = [0, 1, 2, 3, 255, 256, 257, 65_535, 65_536, 1 << 20, (1 << 21) + 12_345] + [rng.randrange(1 << 22) for _ in range(20)]
    for length in lengths:
        first, second = os.urandom(rng.randrange(0, 3000)), os.urandom(length)
        assert export_bulk.crc32_combine(zlib.crc32(first), zlib.crc32(second), length) == zlib.crc32(first + second), length
