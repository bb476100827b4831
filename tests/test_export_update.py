"""An earlier API brought up to date in runs (``errordb.publish.api_update``) gives a full export's bytes.

Each case writes the API of a few hundred generated records, changes the store, brings a copy
of that API up to date the way a rebuild from a spare does (:func:`errordb.publish.api.clear_for_update`
then :func:`errordb.publish.api.write_api` with the ids that changed) and compares every file with a
full export of the changed store. Segments are made short so that a few hundred records give
dozens of them, ended by the id rule or by the count, as at a million records.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest
from helpers import write_jsonl
from test_site import tree_bytes

from errordb.publish import api as export

from errordb.publish import downloads as export_bulk
from errordb.publish.api import PreviousApi, clear_for_update, write_api
from errordb.store import ingest

GENERATOR = Path(__file__).resolve().parents[1] / "bench" / "generate.py"
FAMILIES = Path(__file__).resolve().parents[1] / "records" / "families.toml"
COUNT = 300


@pytest.fixture(scope="module")
def generated() -> list[dict]:
    spec = importlib.util.spec_from_file_location("bench_generate", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.generate(COUNT, seed=5))


#: (records a segment at most, mask of the id rule): cut mostly by the count, or by the ids.
RULES = {"by-count": (16, 0xFF), "by-id": (4096, 0x0F)}


def _store(envelopes: list[dict], folder: Path, db: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    ingest([write_jsonl(folder / "records.jsonl", envelopes)], db, prune=True, families_path=FAMILIES)
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT id, contentHash FROM records"))
    finally:
        conn.close()


def _export(db: Path, out: Path, **options) -> list[export_bulk.Segment]:
    out.mkdir(parents=True)
    conn = sqlite3.connect(db)
    try:
        return write_api(conn, out, **options).segments
    finally:
        conn.close()


def _edit(envelopes: list[dict], index: int) -> None:
    envelopes[index]["record"]["documentation"] += " Edited."


def _added(envelopes: list[dict], index: int, record_id: str) -> dict:
    new = copy.deepcopy(envelopes[index])
    new["record"]["id"] = record_id
    new["record"]["slug"] = f"{new['record']['slug'][:40].rstrip('-')}-added-{record_id[:4]}"
    return new


def _case(name: str, envelopes: list[dict], segments: list[export_bulk.Segment]) -> None:
    by_id = sorted(range(len(envelopes)), key=lambda i: envelopes[i]["record"]["id"])
    if name == "edit-one":
        _edit(envelopes, by_id[len(by_id) // 2])
    elif name == "edit-ends":
        _edit(envelopes, by_id[0])
        _edit(envelopes, by_id[-1])
    elif name == "add-around":  # before the first id, right after a segment's last, after the last
        between = f"{int(segments[len(segments) // 2].last, 16) + 1:016x}"
        assert between < segments[len(segments) // 2 + 1].first
        envelopes.extend(_added(envelopes, i, rid) for i, rid in ((3, "0000000000000001"), (4, between), (5, "fffffffffffffffe")))
    elif name == "remove-segment-ends":  # the last record of a middle segment, and the very last record
        gone = {segments[len(segments) // 3].last, segments[-1].last}
        envelopes[:] = [e for e in envelopes if e["record"]["id"] not in gone]
    elif name == "many":
        for i in by_id[::7]:
            _edit(envelopes, i)
        del envelopes[by_id[11]]


CASES = ["edit-one", "edit-ends", "add-around", "remove-segment-ends", "many"]


def _update(tmp_path: Path, generated: list[dict], case: str, monkeypatch, damage=None, also_stale=0) -> tuple[Path, Path, list, list]:
    """(the API brought up to date, a full export of the same store, the compressors made and
    zip entries copied one by one, and the record-by-record passes, while bringing it up to date).
    ``also_stale``: that many unchanged records also lack their files in the copy, as in a spare
    two builds behind."""
    envelopes = copy.deepcopy(generated)
    db = tmp_path / "errordb.db"
    before = _store(envelopes, tmp_path / "records-1", db)
    first = tmp_path / "first"
    segments = _export(db, first)
    assert len(segments) > 12
    _case(case, envelopes, segments)
    after = _store(envelopes, tmp_path / "records-2", db)
    changed = {i for i in before.keys() | after.keys() if before.get(i) != after.get(i)}
    assert changed
    stale = changed | set(sorted(after.keys() - changed)[:also_stale])
    spare = tmp_path / "spare"
    shutil.copytree(first, spare)
    if damage:
        damage(first)
    clear_for_update(spare, stale)
    made, one_by_one = [], []
    compressor, each_record, copy_entry = zlib.compressobj, export._write_each_record, export_bulk.StreamingZip.copy
    copy_range = export_bulk.copy_range
    with monkeypatch.context() as patch:
        patch.setattr(zlib, "compressobj", lambda *args: made.append(args) or compressor(*args))
        patch.setattr(export_bulk, "copy_range", lambda *args: made.append("range") or copy_range(*args))
        patch.setattr(export_bulk.StreamingZip, "copy", lambda *args: made.append("entry") or copy_entry(*args))
        patch.setattr(export, "_write_each_record", lambda *args: one_by_one.append(1) or each_record(*args))
        _export_into(db, spare, PreviousApi(first, changed, segments), stale)
    full = tmp_path / "full"
    _export(db, full)
    return spare, full, made, one_by_one


def _segments(api: Path) -> list[export_bulk.Segment]:
    """The segments of ``api``'s all.jsonl.gz (written again, with the same records, to learn them)."""
    import gzip
    import io

    writer = export_bulk.JsonLinesGzip(io.BytesIO())
    for line in gzip.decompress((api / "all.jsonl.gz").read_bytes()).splitlines():
        writer.add(json.loads(line)["record"]["id"], line)
    writer.close()
    return writer.segments


def _export_into(db: Path, folder: Path, previous: PreviousApi, stale: set[str], **options) -> None:
    conn = sqlite3.connect(db)
    try:
        write_api(conn, folder, previous=previous, stale=stale, **options)
    finally:
        conn.close()


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("case", CASES)
def test_an_api_updated_in_runs_is_the_full_export(tmp_path, generated, monkeypatch, case, rule):
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", RULES[rule][0])
    monkeypatch.setattr(export_bulk, "SEGMENT_MASK", RULES[rule][1])
    updated, full, made, one_by_one = _update(tmp_path, generated, case, monkeypatch)
    assert tree_bytes(updated) == tree_bytes(full)
    assert not one_by_one  # in runs, not record by record
    if case.startswith("edit"):
        # Each edit: its segment and its zip entry compressed again, and its segment's other
        # records' entries copied one by one; every other entry in runs.
        edits = 1 + (case == "edit-ends")
        assert made.count((6, 8, -15)) == 2 * edits
        longest = max(segment.count for segment in _segments(full))
        assert made.count("entry") <= edits * longest
        # The segments and entries between two edits are copied in one piece each.
        assert made.count("range") <= 2 * (edits + 1)


def test_records_stale_in_the_spare_but_unchanged_are_linked_from_the_earlier_api(tmp_path, generated, monkeypatch):
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 16)
    updated, full, made, one_by_one = _update(tmp_path, generated, "edit-one", monkeypatch, also_stale=3)
    assert tree_bytes(updated) == tree_bytes(full) and not one_by_one
    assert made.count((6, 8, -15)) == 2  # the stale records' downloads are copied: they did not change
    first = tmp_path / "first" / "errors"
    linked = [p for p in (updated / "errors").glob("*.json") if p.stat().st_ino == (first / p.name).stat().st_ino]
    assert len(linked) == 3  # the three made stale; the copy's other files are its own


def test_zip_offsets_that_need_zip64_fields_are_copied_entry_by_entry(tmp_path, generated, monkeypatch):
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 16)
    envelopes = copy.deepcopy(generated)
    db = tmp_path / "errordb.db"
    _store(envelopes, tmp_path / "records-1", db)
    first = tmp_path / "first"
    segments = _export(db, first)  # offsets within 32 bits: a directory of fixed-size entries
    _edit(envelopes, 0)
    changed = {envelopes[0]["record"]["id"]}
    _store(envelopes, tmp_path / "records-2", db)
    # From here on, offsets past 100,000 bytes take ZIP64 fields (as offsets past 4 GiB do).
    monkeypatch.setattr(export_bulk, "ZIP64_OFFSET_LIMIT", 100_000)
    spare = tmp_path / "spare"
    shutil.copytree(first, spare)
    clear_for_update(spare, changed)
    one_by_one = []
    each_record = export._write_each_record
    monkeypatch.setattr(export, "_write_each_record", lambda *args: one_by_one.append(1) or each_record(*args))
    _export_into(db, spare, PreviousApi(first, changed, segments), changed)
    assert not one_by_one  # in runs; only the entries moved past the limit are copied one by one
    full = tmp_path / "full"
    _export(db, full)
    assert tree_bytes(spare) == tree_bytes(full)


def _damage_first_entry(api: Path) -> None:
    with open(api / "all.zip", "r+b") as handle:
        handle.write(b"XX")  # the first local header's signature


def test_earlier_downloads_that_are_not_what_they_say_are_written_again_record_by_record(tmp_path, generated, monkeypatch):
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 16)
    updated, full, _, one_by_one = _update(tmp_path, generated, "edit-one", monkeypatch, damage=_damage_first_entry)
    assert one_by_one == [1]
    assert tree_bytes(updated) == tree_bytes(full)


def test_a_directory_is_read_by_position_and_searched_by_name(tmp_path):
    names = [f"{n * 7919:016x}.json" for n in range(50)]
    path = tmp_path / "a.zip"
    with open(path, "wb") as handle:
        archive = export_bulk.StreamingZip(handle)
        for name in names:
            archive.add(name, name.encode() * 3)
        archive.close()
    with open(path, "rb") as handle:
        directory = export_bulk.RecordDirectory.read(handle)
        assert directory is not None and directory.count == 50
        listed = list(export_bulk.zip_entries(handle))
        assert [directory.entry(i) for i in range(50)] == listed
        assert directory.after(b"") == 0 and directory.after(names[10].encode()) == 11 and directory.after(b"g") == 50
        moved = b"".join(directory.shifted(5, 40, 1000))
        offsets = [int.from_bytes(moved[i * 67 + 42 : i * 67 + 46], "little") for i in range(35)]
        assert offsets == [entry.offset + 1000 for entry in listed[5:40]]
    other = tmp_path / "b.zip"
    with open(other, "wb") as handle:  # a name that is not a record's: not a directory of that shape
        archive = export_bulk.StreamingZip(handle)
        archive.add("readme.txt", b"x")
        archive.close()
    with open(other, "rb") as handle:
        assert export_bulk.RecordDirectory.read(handle) is None


def _api_of(db: Path, out: Path) -> export.Downloads:
    out.mkdir(parents=True)
    conn = sqlite3.connect(db)
    try:
        return write_api(conn, out)
    finally:
        conn.close()


def _three_versions(tmp_path: Path, generated: list[dict], edits: tuple[int, int]) -> tuple[Path, Path, export.Downloads, set[str], set[str]]:
    """A spare's API two versions behind, the previous API (one behind) and what it knows, and
    the store's third version: (spare, previous, its downloads, changed since the previous,
    stale in the spare). ``edits``: the positions, in id order, of the record edited in the
    second version and of the one edited in the third."""
    envelopes = copy.deepcopy(generated)
    by_id = sorted(range(len(envelopes)), key=lambda i: envelopes[i]["record"]["id"])
    db = tmp_path / "errordb.db"
    versions = [_store(envelopes, tmp_path / "records-1", db)]
    spare = tmp_path / "spare"
    _api_of(db, spare)
    for number, position in enumerate(edits, 2):
        _edit(envelopes, by_id[position])
        versions.append(_store(envelopes, tmp_path / f"records-{number}", db))
        if number == 2:
            previous, downloads = tmp_path / "previous", _api_of(db, tmp_path / "previous")
    changed = {i for i in versions[1].keys() | versions[2].keys() if versions[1].get(i) != versions[2].get(i)}
    stale = {i for i in versions[0].keys() | versions[2].keys() if versions[0].get(i) != versions[2].get(i)}
    return spare, previous, downloads, changed, stale


@pytest.mark.parametrize("edits", [(200, 100), (100, 200), (150, 150), (0, 299)])
def test_a_spares_downloads_are_updated_in_place_from_the_first_stale_record(tmp_path, generated, monkeypatch, edits):
    from errordb.publish import digest

    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 16)
    monkeypatch.setattr(digest, "CHECKPOINT", 4096)  # so that the small downloads have several
    spare, previous, downloads, changed, stale = _three_versions(tmp_path, generated, edits)
    api = spare
    before = {name: (api / name).stat() for name in ("all.jsonl.gz", "all.zip")}
    clear_for_update(api, stale, keep_downloads=True)
    made, starts, in_place, followed = [], [], [], []
    compressor, hasher, spare_downloads = zlib.compressobj, digest._Sha256, export._spare_downloads
    follow = export._Hashes.follow
    with monkeypatch.context() as patch:
        patch.setattr(export._Hashes, "follow", lambda self, name, file: followed.append(name) or follow(self, name, file))
        patch.setattr(zlib, "compressobj", lambda *args: made.append(args) or compressor(*args))
        patch.setattr(digest, "_Sha256", lambda functions, state=None: starts.append(state) or hasher(functions, state))
        patch.setattr(export, "_spare_downloads", lambda *args: (found := spare_downloads(*args), in_place.append(found is not None))[0])
        conn = sqlite3.connect(tmp_path / "errordb.db")
        try:
            written = write_api(conn, api, previous=PreviousApi(previous, changed, downloads.segments, downloads.checkpoints), stale=stale, update_downloads=True)
        finally:
            conn.close()
    full = tmp_path / "full"
    expected = _api_of(tmp_path / "errordb.db", full)
    assert tree_bytes(api) == tree_bytes(full)  # version.json's SHA-256s among them
    assert written == expected  # the segments, and the states saved while hashing
    # The same files, written into (from the start when the first record changed).
    assert in_place == [True]
    assert all((api / name).stat().st_ino == status.st_ino for name, status in before.items())
    # Only the record edited since the previous API has its segment and entry compressed
    # again; the one edited before it is copied from the previous API's downloads.
    assert made.count((6, 8, -15)) == 2
    # Each download hashed from a saved state when the first change is past the first checkpoint,
    # following its writer.
    assert len(starts) == 2 and (all(starts) or edits[0] == 0 or edits[1] == 0)
    assert sorted(followed) == sorted(written.checkpoints)


def test_a_spares_update_that_finds_the_previous_downloads_damaged_hashes_them_anew(tmp_path, generated, monkeypatch):
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 16)
    spare, previous, downloads, changed, stale = _three_versions(tmp_path, generated, (100, 110))
    with open(previous / "all.zip", "r+b") as handle:  # the end of the run copied after the change
        directory = export_bulk.RecordDirectory.read(handle)
        handle.seek(directory.entry(directory.count - 1).offset)
        handle.write(b"XX")
    clear_for_update(spare, stale, keep_downloads=True)
    each, hashed, one_by_one, hashes = export._write_each_record, export.checkpointed_sha256, [], []
    monkeypatch.setattr(export, "_write_each_record", lambda *args: one_by_one.append(1) or each(*args))
    monkeypatch.setattr(export, "checkpointed_sha256", lambda path, earlier, unchanged, written: hashes.append(written is not None) or hashed(path, earlier, unchanged, written))
    _export_into(tmp_path / "errordb.db", spare, PreviousApi(previous, changed, downloads.segments, downloads.checkpoints), stale, update_downloads=True)
    # The two hashes that followed the update in place gave up; both files were hashed once written again.
    assert one_by_one == [1] and hashes == [True, True, False, False]
    full = tmp_path / "full"
    _api_of(tmp_path / "errordb.db", full)
    assert tree_bytes(spare) == tree_bytes(full)  # version.json's SHA-256s among them


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_a_spares_download_with_another_name_is_not_written_into(tmp_path, generated, monkeypatch, link):
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 16)
    spare, previous, downloads, changed, stale = _three_versions(tmp_path, generated, (250, 260))
    elsewhere = tmp_path / "elsewhere.zip"
    if link == "hard":
        os.link(spare / "all.zip", elsewhere)  # as if a live site served it
    else:
        (spare / "all.zip").rename(elsewhere)
        (spare / "all.zip").symlink_to(elsewhere)
    kept = elsewhere.read_bytes()
    clear_for_update(spare, stale, keep_downloads=True)
    _export_into(tmp_path / "errordb.db", spare, PreviousApi(previous, changed, downloads.segments, downloads.checkpoints), stale, update_downloads=True)
    assert elsewhere.read_bytes() == kept
    full = tmp_path / "full"
    _api_of(tmp_path / "errordb.db", full)
    assert tree_bytes(spare) == tree_bytes(full)


@pytest.mark.parametrize("name", ["all.jsonl.gz", "all.zip"])
@pytest.mark.parametrize("damage", ["reversed", "short"])
def test_a_spares_download_that_is_not_the_earlier_copy_is_written_again(tmp_path, generated, monkeypatch, name, damage):
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 16)
    spare, previous, downloads, changed, stale = _three_versions(tmp_path, generated, (250, 260))
    data = (spare / name).read_bytes()
    (spare / name).write_bytes(data[::-1] if damage == "reversed" else data[:100])
    clear_for_update(spare, stale, keep_downloads=True)
    _export_into(tmp_path / "errordb.db", spare, PreviousApi(previous, changed, downloads.segments, downloads.checkpoints), stale, update_downloads=True)
    full = tmp_path / "full"
    _api_of(tmp_path / "errordb.db", full)
    assert tree_bytes(spare) == tree_bytes(full)
