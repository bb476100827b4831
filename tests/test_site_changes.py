"""Incremental builds that read only what a change can reach (``errordb.publish.changes``).

Each step below changes the store in one way that can move a page's related errors, its
"same message" box or its family counts, builds incrementally over the previous site, and
compares the result byte for byte with a full build of the same store. The records are the
benchmark's generated ones (120 of them: families, tags and message words are shared widely
enough that every question of ``candidate_ids`` has a full window to fall into or out of).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import re
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest
from test_site import tree_bytes

from errordb.publish import changes as site_changes
from errordb.publish.site import build_site
from errordb.store import ingest

GENERATOR = Path(__file__).resolve().parents[1] / "bench" / "generate.py"
FAMILIES = Path(__file__).resolve().parents[1] / "records" / "families.toml"
COUNT = 120
#: Records a rendering task: twelve record tasks, so that a rebuild can leave most of them out.
BATCH = 10


def _generated() -> list[dict]:
    spec = importlib.util.spec_from_file_location("bench_generate", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    envelopes = list(module.generate(COUNT, seed=11))
    # A few files with several raises, so "same file" answers are shared and can be full.
    for index, envelope in enumerate(envelopes[:40]):
        envelope["record"]["filePath"] = f"src/shared/module_{index % 3}.py"
        record = envelope["record"]
        record["githubUrl"] = record["githubUrl"].split("/blob/")[0] + f"/blob/{record['analyzedSha']}/{record['filePath']}#L{record['sourceCodeStart']}-L{record['sourceCodeEnd']}"
    return envelopes


def _write(envelopes: list[dict], folder: Path, families: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "records.jsonl"
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in envelopes), encoding="utf-8")
    (folder / "families.toml").write_text(families if families is not None else FAMILIES.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def _record(envelopes: list[dict], index: int) -> dict:
    return envelopes[index]["record"]


def _edit_documentation(envelopes, families):
    _record(envelopes, 5)["documentation"] += " Edited."


def _edit_message(envelopes, families):
    # New words: the record moves into other records' "similar words" windows and out of others.
    record = _record(envelopes, 17)
    record["errorMessage"] = "Scheduler quantization refuses contiguous allocator for sampler."
    record["messagePattern"] = r"Scheduler quantization refuses contiguous allocator for sampler\."


def _same_message_as_another(envelopes, families):
    source, target = _record(envelopes, 30), _record(envelopes, 31)
    target["errorMessage"], target["messagePattern"] = source["errorMessage"], source["messagePattern"]


def _new_commit(envelopes, families):
    # Nothing a related-errors list shows or weighs: the change reaches its own page and, through
    # the "same message" box (which links each raise site at its commit), the one it shares with.
    record = _record(envelopes, 31)
    record["analyzedSha"] = "0123456789abcdef0123456789abcdef01234567"
    record["githubUrl"] = record["githubUrl"].split("/blob/")[0] + f"/blob/{record['analyzedSha']}/{record['filePath']}#L{record['sourceCodeStart']}-L{record['sourceCodeEnd']}"


def _move_family(envelopes, families):
    record = _record(envelopes, 44)
    others = sorted({e["record"]["backgroundTag"] for e in envelopes} - {record["backgroundTag"]})
    record["backgroundTag"] = others[0]


def _move_repository(envelopes, families):
    # Into a repository its family has no other record from: the family's repository count moves.
    record = _record(envelopes, 50)
    others = {e["record"]["repo"] for e in envelopes if e["record"]["backgroundTag"] == record["backgroundTag"]}
    record["repo"] = "someone-else/new-project"
    assert record["repo"] not in others
    record["githubUrl"] = f"https://github.com/{record['repo']}/blob/" + record["githubUrl"].split("/blob/")[1]


def _retag(envelopes, families):
    _record(envelopes, 60)["tags"] = ["cuda", "nccl", "triton"]


def _move_file(envelopes, families):
    record = _record(envelopes, 70)
    record["filePath"] = "src/shared/module_1.py"
    record["githubUrl"] = record["githubUrl"].split("/blob/")[0] + f"/blob/{record['analyzedSha']}/{record['filePath']}#L{record['sourceCodeStart']}-L{record['sourceCodeEnd']}"


def _change_class(envelopes, families):
    _record(envelopes, 80)["errorClass"] = "KeyError"


def _add_record(envelopes, families):
    new = copy.deepcopy(envelopes[90])
    new["record"]["id"] = "ffff000011112222"
    new["record"]["slug"] = new["record"]["slug"] + "-added"
    new["record"]["errorMessage"] = new["record"]["errorMessage"].replace("op", "op9", 1)
    new["record"]["messagePattern"] = new["record"]["messagePattern"].replace("op", "op9", 1)
    envelopes.append(new)


def _remove_record(envelopes, families):
    del envelopes[100]


def _family_text(envelopes, families):
    return families.replace('title = "Feature and parallelism conflict"', 'title = "When a feature and a parallel layout conflict"', 1)


STEPS = [_edit_documentation, _edit_message, _same_message_as_another, _new_commit, _move_family, _move_repository, _retag, _move_file,
         _change_class, _add_record, _remove_record, _family_text]  # fmt: skip


@pytest.fixture(autouse=True)
def targeted(monkeypatch):
    """Incremental builds here find the records that share a message through the cache however
    many pages they render (120 records: a change reaches more than the tenth of them that
    :data:`errordb.publish.site.TARGETED_SHARE` allows); full builds group the whole store. Every
    build renders :data:`BATCH` records a task."""
    from errordb.publish import site

    monkeypatch.setattr(site, "TARGETED_SHARE", 1.0)
    monkeypatch.setattr(site, "BATCH", BATCH)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[list[dict], Path, Path, Path]:
    """The generated records, their store, their site and that site's build cache."""
    folder = tmp_path_factory.mktemp("base")
    envelopes = _generated()
    db = folder / "errordb.db"
    ingest([_write(envelopes, folder / "records")], db)
    out = folder / "site"
    with pytest.MonkeyPatch.context() as patch:  # module scope: the per-test cache is not set yet
        patch.setenv("ERRORDB_CACHE", str(folder / "cache"))
        patch.setattr("errordb.publish.site.BATCH", BATCH)
        build_site(db, out, jobs=1)
        cache = site_changes.cache_path(out)
    return envelopes, db, out, cache


def _copy(base, tmp_path: Path) -> tuple[list[dict], Path, Path]:
    """A copy of the base store and site, with the site's build cache where it belongs."""
    envelopes, base_db, base_out, cache = base
    db = tmp_path / "errordb.db"
    shutil.copyfile(base_db, db)
    out = tmp_path / "site"
    shutil.copytree(base_out, out)
    site_changes.cache_path(out).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cache, site_changes.cache_path(out))
    return copy.deepcopy(envelopes), db, out


def test_each_kind_of_change_gives_the_full_build_exactly(base, tmp_path):
    envelopes, db, out = _copy(base, tmp_path)
    families = FAMILIES.read_text(encoding="utf-8")
    assert 'title = "Feature and parallelism conflict"' in families
    for number, step in enumerate(STEPS):
        families = step(envelopes, families) or families
        folder = tmp_path / f"step-{number}"
        ingest([_write(envelopes, folder, families)], db, prune=True)
        # Incremental in two worker processes, full in one: the same bytes either way.
        report = build_site(db, out, incremental=True, jobs=2 if number % 2 else 1)
        assert report.changed == (0 if step is _family_text else 1), step.__name__  # the cache was used
        assert 0 < report.rendered < report.pages, step.__name__
        if step is _new_commit:
            assert report.rendered == 2
        full = build_site(db, folder / "full", jobs=1)
        assert tree_bytes(out) == tree_bytes(folder / "full"), step.__name__
        assert full.pages == report.pages


def test_a_change_reaches_the_pages_it_can_touch_and_no_more(base, tmp_path):
    envelopes, db, out = _copy(base, tmp_path)
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    report = build_site(db, out, incremental=True, jobs=1)
    # Documentation shows on its own page only: one record changed, one error page rendered
    # (plus the listings, whose inputs are always read), every other error page linked as it was.
    assert report.changed == 1
    assert report.rendered == 1
    assert report.reused == report.pages - 1


def test_without_its_cache_an_incremental_build_reads_every_input(base, tmp_path):
    envelopes, db, out = _copy(base, tmp_path)
    site_changes.cache_path(out).unlink()
    _edit_message(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    report = build_site(db, out, incremental=True, jobs=1)
    assert report.changed is None
    assert 1 <= report.rendered < report.pages
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))
    # That build wrote a cache for this path: the next one uses it.
    assert build_site(db, out, incremental=True, jobs=1).changed == 0


def test_a_cache_update_killed_halfway_is_rolled_back_and_used(base, tmp_path):
    import subprocess
    import sys

    envelopes, db, out = _copy(base, tmp_path)
    cache = site_changes.cache_path(out)
    # A build that dies while it updates the cache in place: its changes are in the file, the
    # pages they replaced in the journal beside it.
    killed = f"""
import os, sqlite3
conn = sqlite3.connect({str(cache)!r})
conn.execute("PRAGMA cache_size = 1")
conn.execute("DELETE FROM records")
conn.execute("DELETE FROM windows")
os._exit(9)
"""
    assert subprocess.run([sys.executable, "-c", killed]).returncode == 9
    assert Path(f"{cache}-journal").stat().st_size > 0
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    report = build_site(db, out, incremental=True, jobs=1)
    assert (report.changed, report.rendered) == (1, 1)  # the cache as it was before the update
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def test_a_cache_of_another_build_is_not_used(base, tmp_path):
    _, db, out = _copy(base, tmp_path)
    assert build_site(db, out, incremental=True, jobs=1).changed == 0
    # The cache of another build (as a build killed between its two renames leaves them): the
    # manifest it names is not this one.
    (out / ".build-manifest.json").write_text((out / ".build-manifest.json").read_text(encoding="utf-8") + " ", encoding="utf-8")
    assert build_site(db, out, incremental=True, jobs=1).changed is None


def test_the_manifests_are_known_by_their_stamps_and_else_by_their_bytes(base, tmp_path, monkeypatch):
    import os

    envelopes, db, out = _copy(base, tmp_path)
    hashed = []
    real = site_changes.file_sha256
    monkeypatch.setattr(site_changes, "file_sha256", lambda path: hashed.append(Path(path).name) or real(path))
    # The copy's manifest is another file (another inode) than the one the cache's stamp names:
    # its bytes say it is the same, and the cache is used.
    assert build_site(db, out, incremental=True, jobs=1).changed == 0
    assert hashed == [".build-manifest.json"]
    # From then on the cache names the live manifest by stamp, and its spare too once that is a
    # manifest a build of this cache's wrote (not the copy's, kept by the build above): neither is read.
    for step in range(3):
        hashed.clear()
        _record(envelopes, 5)["documentation"] += f" Edited {step}."
        ingest([_write(envelopes, tmp_path / f"records-{step}")], db)
        assert build_site(db, out, incremental=True, jobs=1).changed == 1
        assert hashed == ([".build-manifest.json"] if step == 0 else []), step
    # Touched, the same bytes: read, and still used (its spare too, read by its stamp).
    manifest = out / ".build-manifest.json"
    os.utime(manifest, ns=(manifest.stat().st_atime_ns, manifest.stat().st_mtime_ns + 1_000_000_000))
    hashed.clear()
    _record(envelopes, 5)["documentation"] += " Edited again."
    ingest([_write(envelopes, tmp_path / "records-last")], db)
    report = build_site(db, out, incremental=True, jobs=1)
    assert (report.changed, report.rendered) == (1, 1) and hashed == [".build-manifest.json"]
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def test_the_change_log_names_what_comparing_every_record_finds(base, tmp_path):
    envelopes, db, out = _copy(base, tmp_path)
    families = FAMILIES.read_text(encoding="utf-8")
    for number, step in enumerate(STEPS):
        families = step(envelopes, families) or families
        ingest([_write(envelopes, tmp_path / f"step-{number}", families)], db, prune=True)
        store = sqlite3.connect(db)
        cache = site_changes.open_cache(out, out / ".build-manifest.json")
        try:
            changed_old, changed_new, logged = site_changes._changed(store, cache)
            assert logged, step.__name__
            assert (changed_old, changed_new) == site_changes._compare_all(store, cache), step.__name__
            assert len(set(changed_old) | set(changed_new)) == (0 if step is _family_text else 1), step.__name__
            # Only the families a changed record was or is in are counted again: the same fingerprints.
            changes = site_changes.affected_records(store, cache, [])
            assert changes.families == site_changes.family_fingerprints(store), step.__name__
        finally:
            store.close()
            cache.close()
        build_site(db, out, incremental=True, jobs=1)


def _count_full_comparisons(monkeypatch) -> list[int]:
    """A list that grows by one each time a build compares every record with its cache."""
    calls: list[int] = []
    compare_all = site_changes._compare_all
    monkeypatch.setattr(site_changes, "_compare_all", lambda *args: calls.append(1) or compare_all(*args))
    return calls


def test_a_store_changed_while_the_site_was_built_is_compared_whole_next_time(base, tmp_path, monkeypatch):
    from errordb.publish import site

    envelopes, db, out = _copy(base, tmp_path)
    settle = site._settle

    def settle_after_an_ingest(*args):
        _edit_message(envelopes, None)  # a change the pages read before it do not show
        ingest([_write(envelopes, tmp_path / "during")], db)
        return settle(*args)

    monkeypatch.setattr(site, "_settle", settle_after_an_ingest)
    build_site(db, out, incremental=True, jobs=1)
    monkeypatch.setattr(site, "_settle", settle)
    cache = site_changes.open_cache(out, out / ".build-manifest.json")
    assert site_changes.cache_info(cache, "storeSequence") == ""
    cache.close()
    calls = _count_full_comparisons(monkeypatch)
    report = build_site(db, out, incremental=True, jobs=1)
    assert calls and report.changed == 1
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def test_a_copy_of_the_store_that_went_its_own_way_is_compared_whole(base, tmp_path, monkeypatch):
    envelopes, db, out = _copy(base, tmp_path)
    other = tmp_path / "other.db"
    shutil.copyfile(db, other)
    mine, theirs = copy.deepcopy(envelopes), copy.deepcopy(envelopes)
    _edit_documentation(mine, None)
    _edit_message(theirs, None)
    ingest([_write(mine, tmp_path / "mine")], db)
    ingest([_write(theirs, tmp_path / "theirs")], other)
    build_site(db, out, incremental=True, jobs=1)
    # The site's cache knows the first copy after its ingest; the other is at the same sequence number.
    calls = _count_full_comparisons(monkeypatch)
    report = build_site(other, out, incremental=True, jobs=1)
    assert calls and report.changed == 2
    assert tree_bytes(out) == tree_bytes(_full(other, tmp_path / "full"))


def test_a_page_no_change_reaches_but_missing_from_the_site_shows_its_whole_message_group(base, tmp_path):
    from errordb.publish.site import spare_path

    envelopes, db, out = _copy(base, tmp_path)
    _same_message_as_another(envelopes, None)
    ingest([_write(envelopes, tmp_path / "shared")], db)
    build_site(db, out, incremental=True, jobs=1)
    shutil.rmtree(spare_path(out))  # so the next build links pages from the site, and finds one missing
    # A record whose edit reaches neither of the two that share a message.
    sharing = {_record(envelopes, i)["id"] for i in (30, 31)}
    store, cache, stemmer = sqlite3.connect(db), site_changes.open_cache(out, out / ".build-manifest.json"), site_changes.Stemmer()
    facts = {fact["id"]: fact for fact in site_changes.record_facts(store, sorted(r["record"]["id"] for r in envelopes), stemmer)}
    edited = next(i for i, e in enumerate(envelopes) if e["record"]["id"] not in sharing and not sharing & site_changes._reached(cache, facts[e["record"]["id"]]))
    for conn in (store, cache, stemmer):
        conn.close()
    _record(envelopes, edited)["documentation"] += " Edited."
    ingest([_write(envelopes, tmp_path / "edited")], db)
    missing = out / "errors" / _record(envelopes, 30)["slug"] / "index.html"
    assert "same message" in missing.read_text(encoding="utf-8").lower()
    missing.unlink()
    report = build_site(db, out, incremental=True, jobs=1)
    assert report.changed == 1 and report.rendered == 2
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def _full(db: Path, out: Path) -> Path:
    build_site(db, out, jobs=1)
    return out


def test_the_api_links_unchanged_record_files_without_reading_them(base, tmp_path):
    envelopes, db, out = _copy(base, tmp_path)
    kept, edited = (_record(envelopes, i)["id"] for i in (1, 5))
    inode = (out / "api" / "errors" / f"{kept}.json").stat().st_ino
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    report = build_site(db, out, incremental=True, jobs=1)
    assert report.changed == 1  # the cache said which record changed: the others' files are trusted
    assert (out / "api" / "errors" / f"{kept}.json").stat().st_ino == inode
    assert (out / "api" / "errors" / f"{edited}.json").stat().st_ino != inode
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def test_without_the_cache_record_files_are_checked_before_they_are_linked(base, tmp_path):
    envelopes, db, out = _copy(base, tmp_path)
    site_changes.cache_path(out).unlink()
    kept, tampered = (_record(envelopes, i)["id"] for i in (1, 9))
    inode = (out / "api" / "errors" / f"{kept}.json").stat().st_ino
    # A file of the old API that does not hold its record any more (edited by hand): not reused.
    (out / "api" / "errors" / f"{tampered}.json").write_bytes(b'{"record": {}}')
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    assert build_site(db, out, incremental=True, jobs=1).changed is None
    assert (out / "api" / "errors" / f"{kept}.json").stat().st_ino == inode
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def test_a_link_in_the_old_api_is_not_followed(base, tmp_path):
    envelopes, db, out = _copy(base, tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the site")
    planted = out / "api" / "errors" / f"{_record(envelopes, 3)['id']}.json"
    planted.unlink()
    planted.symlink_to(secret)
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    assert build_site(db, out, incremental=True, jobs=1).changed == 1
    assert not planted.is_symlink()
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


@contextlib.contextmanager
def _compressions(monkeypatch):
    """The zlib compressors made inside the block: one per gzip segment or zip entry compressed."""
    made = []
    real = zlib.compressobj
    with monkeypatch.context() as patch:
        patch.setattr(zlib, "compressobj", lambda *args: made.append(args) or real(*args))
        yield made


def test_the_bulk_downloads_copy_what_did_not_change(base, tmp_path, monkeypatch):
    import gzip
    import zipfile

    from errordb.publish import downloads as export_bulk

    envelopes, db, _ = _copy(base, tmp_path)
    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 8)  # 120 records: 15 segments or more
    out = _full(db, tmp_path / "site-2")
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    with _compressions(monkeypatch) as compressed:
        build_site(db, out, incremental=True, jobs=1)
    # One segment of all.jsonl.gz and one entry of all.zip compressed again; the rest copied.
    assert len(compressed) == 2
    # The same bytes as a full build's (so, whichever writer made them, the same downloads).
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))
    lines = gzip.decompress((out / "api" / "all.jsonl.gz").read_bytes()).splitlines()
    assert len(lines) == len(envelopes) and b" Edited." in b"".join(lines)
    with zipfile.ZipFile(out / "api" / "all.zip") as archive:
        assert archive.testzip() is None


def test_bulk_segments_are_not_copied_from_a_file_that_was_replaced(base, tmp_path, monkeypatch):
    envelopes, db, out = _copy(base, tmp_path)  # a copy: the cache describes another file
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    with _compressions(monkeypatch) as compressed:
        build_site(db, out, incremental=True, jobs=1)
    segments = sqlite3.connect(site_changes.cache_path(out)).execute("SELECT count(*) FROM segments").fetchone()[0]
    assert len(compressed) == segments + 1  # every segment, and the changed zip entry
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def _inodes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_ino for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_build_before_is_kept_and_brought_up_to_date_in_place(base, tmp_path):
    from errordb.publish.site import spare_path

    envelopes, db, out = _copy(base, tmp_path)
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "one")], db)
    build_site(db, out, incremental=True, jobs=1)  # keeps the copied site as its spare
    spare = spare_path(out)
    assert spare.is_dir()
    live, live_inodes, spare_bytes, spare_inodes = tree_bytes(out), _inodes(out), tree_bytes(spare), _inodes(spare)
    _move_family(envelopes, None)
    _remove_record(envelopes, None)
    ingest([_write(envelopes, tmp_path / "two")], db, prune=True)
    report = build_site(db, out, incremental=True, jobs=2)
    assert report.changed == 2
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))
    # The live site was never written into: it is the spare now, byte for byte, same files.
    assert tree_bytes(spare) == live and _inodes(spare) == live_inodes
    # The new site is the old spare updated: the pages neither build changed are the spare's files.
    new_bytes, new_inodes = tree_bytes(out), _inodes(out)
    untouched = [name for name in new_bytes if name.startswith("errors/") and new_bytes[name] == live.get(name) == spare_bytes.get(name)]
    assert len(untouched) > COUNT // 2
    assert all(new_inodes[name] == spare_inodes[name] for name in untouched)
    assert not any(name.endswith(".new") for name in new_inodes)


DOWNLOADS = ("all.jsonl.gz", "all.zip")


@pytest.mark.parametrize("touched", [False, True])
def test_the_spares_bulk_downloads_are_updated_in_place(base, tmp_path, monkeypatch, touched):
    import os

    from errordb.publish import api as export

    from errordb.publish import downloads as export_bulk
    from errordb.publish.site import spare_path

    monkeypatch.setattr(export_bulk, "SEGMENT_MOST", 8)  # 120 records: 15 segments or more
    updated = []  # per build: whether the spare's downloads were opened to be updated in place
    in_place = export._spare_downloads
    monkeypatch.setattr(export, "_spare_downloads", lambda *args: (found := in_place(*args), updated.append(found is not None))[0])
    envelopes, db, out = _copy(base, tmp_path)
    late = sorted(envelopes, key=lambda envelope: envelope["record"]["id"])[-10]["record"]  # most segments before it
    for step in (1, 2, 3):
        late["documentation"] += f" Edited in build {step}."
        ingest([_write(envelopes, tmp_path / f"build-{step}")], db)
        spare = spare_path(out) / "api"
        if step == 3:
            if touched:  # the spare's zip is not the file its build left
                status = (spare / "all.zip").stat()
                os.utime(spare / "all.zip", ns=(status.st_atime_ns, status.st_mtime_ns + 1))
            kept = {name: (spare / name).stat().st_ino for name in DOWNLOADS}
        build_site(db, out, incremental=True, jobs=2 if step == 3 else 1)
        assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / f"full-{step}"))
    # Build 1 had no spare; build 2's was the copied site, whose downloads are not the files the
    # cache knows of; build 3 brought build 1's, kept as its spare, up to date in place (both or
    # neither: with one of them touched, both are written anew).
    assert updated == ([] if touched else [True])
    if not touched:
        assert {name: (out / "api" / name).stat().st_ino for name in DOWNLOADS} == kept


def test_the_manifests_hash_is_resumed_from_the_states_saved_by_the_build_before(base, tmp_path, monkeypatch):
    import hashlib

    from errordb.publish import digest
    from errordb.publish.site import MANIFEST

    monkeypatch.setattr(digest, "CHECKPOINT", 1024)  # a small site's manifest: several states
    hashed = []
    checkpointed = digest.checkpointed_sha256
    monkeypatch.setattr(digest, "checkpointed_sha256", lambda path, earlier=(), unchanged=0, written=None: hashed.append((Path(path).name, list(earlier), unchanged)) or checkpointed(path, earlier, unchanged, written))
    from errordb.publish import downloads as export_bulk

    copies = []  # the copies into the manifest
    copy_range = export_bulk.copy_range
    monkeypatch.setattr(export_bulk, "copy_range", lambda source, start, length, out: (copies.append(out.name) if out.name.endswith(".new") else None) or copy_range(source, start, length, out))
    envelopes, db, out = _copy(base, tmp_path)
    middle = sorted(envelopes, key=lambda envelope: envelope["record"]["id"])[len(envelopes) // 2]["record"]  # tasks around it untouched
    for step in (1, 2, 3):
        hashed.clear()
        copies.clear()
        middle["documentation"] += f" Edited in build {step}."
        ingest([_write(envelopes, tmp_path / f"build-{step}")], db)
        build_site(db, out, incremental=True, jobs=1)
        cache = sqlite3.connect(site_changes.cache_path(out))
        try:  # what the next build looks the manifest up by
            assert site_changes.cache_info(cache, "manifest") == hashlib.sha256((out / MANIFEST).read_bytes()).hexdigest()
        finally:
            cache.close()
    ((_, earlier, unchanged),) = [call for call in hashed if call[0] == f"{MANIFEST}.new"]
    assert earlier and unchanged > 2 * 1024  # resumed past the first states
    assert len(copies) == 2  # the untouched tasks' lines before the middle one's, and after it


def test_a_rebuild_that_fails_while_its_hashes_follow_the_writing_ends_and_changes_nothing(base, tmp_path, monkeypatch):
    import threading

    from errordb.publish import site

    envelopes, db, out = _copy(base, tmp_path)
    middle = sorted(envelopes, key=lambda envelope: envelope["record"]["id"])[len(envelopes) // 2]["record"]
    for step in (1, 2):  # then the site has a spare, whose downloads and manifest are updated in place
        middle["documentation"] += f" Edited in build {step}."
        ingest([_write(envelopes, tmp_path / f"build-{step}")], db)
        build_site(db, out, incremental=True, jobs=1)
    before = tree_bytes(out)
    middle["documentation"] += " Edited in build 3."
    ingest([_write(envelopes, tmp_path / "build-3")], db)
    line = site._manifest_line
    lines: list[str] = []

    def failing(entry):  # the manifest's second line written, once its hash follows the writing
        lines.append(line(entry))
        if len(lines) == 2:
            raise RuntimeError("disk on fire")
        return lines[-1]

    monkeypatch.setattr(site, "_manifest_line", failing)
    outcome: list[BaseException | None] = []

    def build():
        try:
            build_site(db, out, incremental=True, jobs=1)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=build, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the build hung"
    assert isinstance(outcome[0], RuntimeError)
    assert tree_bytes(out) == before


def _record_task(db: Path, record_id: str) -> tuple:
    """The plan's task that renders ``record_id``'s page."""
    import sqlite_utils

    from errordb.publish import site

    store = sqlite_utils.Database(db)
    try:
        return next(task for task in site._plan(store) if task[0] == "records" and task[2] <= record_id <= task[3])
    finally:
        store.close()


def test_a_rebuild_from_the_spare_runs_only_the_tasks_a_change_reaches(base, tmp_path, monkeypatch):
    from errordb.publish import site

    envelopes, db, out = _copy(base, tmp_path)
    run, read, api_listings = [], [], []
    run_task, manifest_entries, link_api_listings = site._run_task, site._manifest_entries, site._api_listings
    monkeypatch.setattr(site, "_run_task", lambda index, task: run.append(task) or run_task(index, task))
    monkeypatch.setattr(site, "_api_listings", lambda *args: api_listings.append(args) or link_api_listings(*args))
    monkeypatch.setattr(site, "_manifest_entries", lambda *args: (read.append(entry) or entry for entry in manifest_entries(*args)))
    first, second = _record(envelopes, 5), _record(envelopes, 60)
    last = max(envelopes, key=lambda envelope: envelope["record"]["id"])
    assert last["record"] not in (first, second)

    # Build 1 removes the last record and edits another, and keeps the copied site as its spare.
    envelopes.remove(last)
    first["documentation"] += " Edited."
    ingest([_write(envelopes, tmp_path / "build-1")], db, prune=True)
    build_site(db, out, incremental=True, jobs=1)
    tasks = len(run)
    record_tasks = {task for task in run if task[0] == "records"}
    assert len(record_tasks) == 12 and _record_task(db, first["id"]) != _record_task(db, second["id"])

    for step, edited, expected in [(2, second, None), (3, second, {second["id"]}), (4, first, {first["id"], second["id"]})]:
        run.clear()
        read.clear()
        api_listings.clear()
        edited["documentation"] += f" Edited in build {step}."
        ingest([_write(envelopes, tmp_path / f"build-{step}")], db)
        report = build_site(db, out, incremental=True, jobs=1)
        ran, lines_read, linked = list(run), len(read), bool(api_listings)
        full = build_site(db, tmp_path / f"full-{step}", jobs=1)
        assert tree_bytes(out) == tree_bytes(tmp_path / f"full-{step}"), step
        assert (report.pages, report.rendered, report.reused) == (full.pages, 1, full.pages - 1)
        # What the cache keeps of each listing task's files, for the next build: a full build's.
        listed = "SELECT task, path, key, sha FROM listing_entries ORDER BY task, rowid"
        with contextlib.closing(sqlite3.connect(site_changes.cache_path(out))) as mine, contextlib.closing(sqlite3.connect(site_changes.cache_path(tmp_path / f"full-{step}"))) as theirs:
            assert mine.execute(listed).fetchall() == theirs.execute(listed).fetchall()
        lines = (out / site.MANIFEST).read_text(encoding="utf-8").count("\n") - 2
        if expected is None:
            # Build 2 brings build 1's spare (the copied site) up to date: the tasks whose files
            # build 1 changed run (its edit; the removed record's listings, its family's pages),
            # not all of them; the removed record's page, which no task writes now, goes.
            assert {_record_task(db, first["id"]), _record_task(db, second["id"])} <= set(ran)
            assert len(ran) < tasks
            assert linked  # the spare's API listings are not build 1's: linked from it
            continue
        # From then on, the task of the record changed and that of the page the previous build
        # changed run, and only their lines are read of the old manifest (and those of the files
        # written beside the tasks).
        assert sorted(ran) == sorted({_record_task(db, record_id) for record_id in expected}), step
        assert lines_read < lines / 4
        assert not linked  # the spare's API listings are the previous build's: left as they are


def test_a_failed_build_over_a_spare_leaves_the_site_and_a_full_build_next(base, tmp_path, monkeypatch):
    from errordb.publish import site
    from errordb.publish.site import spare_path

    envelopes, db, out = _copy(base, tmp_path)
    build_site(db, out, incremental=True, jobs=1)
    assert spare_path(out).is_dir()
    _edit_message(envelopes, None)
    ingest([_write(envelopes, tmp_path / "records")], db)
    before = tree_bytes(out)

    def fail(*args, **kwargs):
        raise OSError("disk on fire")

    with monkeypatch.context() as patch, pytest.raises(OSError, match="disk on fire"):
        patch.setattr(site, "_write_sitemaps", fail)  # late: the spare is half brought up to date
        build_site(db, out, incremental=True, jobs=1)
    assert tree_bytes(out) == before
    assert not spare_path(out).exists()  # half-updated: removed, never trusted
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".site.new")]
    report = build_site(db, out, incremental=True, jobs=1)
    assert report.changed == 1
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full"))


def test_listings_are_reused_when_no_listed_column_changed(base, tmp_path, monkeypatch):
    from errordb.publish import api as export
    from errordb.publish import site
    from errordb.publish import pages as site_pages

    envelopes, db, _ = _copy(base, tmp_path)
    monkeypatch.setattr(site, "SITEMAP_LIMIT", 50)  # an index and three sitemaps, reused in their order
    out = _full(db, tmp_path / "site-2")
    assert len(list((out / "sitemaps").iterdir())) == 3
    made = []
    for module, name in ((site_pages, "repo_pages"), (site_pages, "all_errors_pages"), (site_pages, "search_chunk"), (export, "write_listings"), (export, "write_api_listings")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, _real=real, _name=name, **kwargs: made.append(_name) or _real(*args, **kwargs))
    # Documentation shows on the record's own page only: no listing is made again ...
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "one")], db)
    assert build_site(db, out, incremental=True, jobs=1).rendered == 1
    assert made == []
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full-one"))
    # ... a new message shows in listings: every listing is made again.
    made.clear()
    _edit_message(envelopes, None)
    ingest([_write(envelopes, tmp_path / "two")], db)
    build_site(db, out, incremental=True, jobs=1)
    assert {"repo_pages", "all_errors_pages", "search_chunk", "write_listings"} <= set(made)
    made.clear()
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full-two"))


def test_the_cache_of_a_removed_site_is_removed_by_the_next_build(base, tmp_path):
    _, db, out = _copy(base, tmp_path)
    other = tmp_path / "other"
    build_site(db, other, jobs=1)
    assert site_changes.cache_path(other).is_file()
    shutil.rmtree(other)
    build_site(db, out, incremental=True, jobs=1)
    assert not site_changes.cache_path(other).exists()
    assert site_changes.cache_path(out).is_file()
    site_changes.forget(out)
    assert not site_changes.cache_path(out).exists()


# Random changes ---------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FAMILY_CHOICES = ["missing-required-argument", "feature-parallelism-conflict", "shape-mismatch", "unknown-key", None]
TAG_CHOICES = ["cuda", "moe", "lora", "dspark", "nccl", "triton", "config", "io", "new-tag"]


def _apply(envelopes: list[dict], edit: tuple) -> None:
    kind, index, choice = edit
    index %= len(envelopes)
    record = _record(envelopes, index)
    other = _record(envelopes, (index + 1 + choice) % len(envelopes))
    if kind == "message":  # another record's message: same-message boxes and word windows
        record["errorMessage"], record["messagePattern"] = other["errorMessage"], other["messagePattern"]
    elif kind == "words":
        record["errorMessage"] = f"{other['errorMessage'].rstrip('.')} extra words {choice}."
        record["messagePattern"] = re.escape(record["errorMessage"])
    elif kind == "family":
        record["backgroundTag"] = FAMILY_CHOICES[choice % len(FAMILY_CHOICES)]
    elif kind == "tags":
        record["tags"] = sorted({TAG_CHOICES[choice % len(TAG_CHOICES)], TAG_CHOICES[(choice * 7 + 3) % len(TAG_CHOICES)]})
    elif kind == "file":
        record["filePath"] = other["filePath"]
        record["githubUrl"] = record["githubUrl"].split("/blob/")[0] + f"/blob/{record['analyzedSha']}/{record['filePath']}#L{record['sourceCodeStart']}-L{record['sourceCodeEnd']}"
    elif kind == "remove":
        del envelopes[index]
    elif kind == "add":
        new = copy.deepcopy(envelopes[index])
        new["record"]["id"] = f"{0xABC0000000000000 + choice:016x}"
        new["record"]["slug"] = f"{new['record']['slug'][:40].rstrip('-')}-added-{choice}"
        if not any(e["record"]["id"] == new["record"]["id"] for e in envelopes):
            envelopes.append(new)


EDITS = st.tuples(st.sampled_from(["message", "words", "family", "tags", "file", "remove", "add"]), st.integers(0, COUNT - 1), st.integers(0, 50))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=st.lists(EDITS, min_size=1, max_size=3))
def test_any_few_random_changes_give_the_full_build_exactly(base, tmp_path_factory, edits):
    tmp_path = tmp_path_factory.mktemp("random")
    envelopes, db, out = _copy(base, tmp_path)
    for edit in edits:
        _apply(envelopes, edit)
    ingest([_write(envelopes, tmp_path / "records")], db, prune=True)
    report = build_site(db, out, incremental=True, jobs=1)
    assert report.changed is not None
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full")), edits
    # Once more: this build starts from the spare (the copied site), two changes behind.
    _edit_documentation(envelopes, None)
    ingest([_write(envelopes, tmp_path / "again")], db, prune=True)
    build_site(db, out, incremental=True, jobs=1)
    assert tree_bytes(out) == tree_bytes(_full(db, tmp_path / "full-again")), edits
    shutil.rmtree(tmp_path)


def test_tag_windows_keep_all_digit_ids_as_text():
    # An id of 16 decimal digits is valid hex; stored with a numeric affinity it would become a
    # number and compare below every text id, and the window would no longer cover its range.
    conn = sqlite3.connect(":memory:")
    conn.executescript(site_changes._SCHEMA)
    stemmer = site_changes.Stemmer()
    site_changes._write_windows(conn, [("abcdefabcdefabcd", "tag", "cuda", "1234567890123456", "1e10000000000000")], stemmer, {})
    stemmer.close()
    assert conn.execute("SELECT typeof(lo), typeof(hi) FROM windows").fetchone() == ("text", "text")
    inside = f"SELECT count(*) FROM windows WHERE {site_changes._INSIDE}"
    assert conn.execute(inside, ["1300000000000000"] * 2).fetchone()[0] == 1
    assert conn.execute(inside, ["1e20000000000000"] * 2).fetchone()[0] == 0


def test_words_are_stemmed_once_and_give_the_terms_of_the_whole_text(monkeypatch):
    """The stemmer remembers each white-space-separated word's terms: a text's terms must be
    what SQLite's tokenizer makes of the whole text, whatever separates its words, and again
    after the memory is forgotten."""
    texts = ["Configs don't match: got x_y-z", "connections\tCONNECTED  connecting", "ünïcödé Straße\u00a0naïve", "", "  ", "a\u2028b c\x1fd", "op7937 requires layer_ids."]
    stemmer = site_changes.Stemmer()
    whole = [set(terms) for terms in stemmer._tokenize(texts)]
    assert whole[1] == {"connect"} and "layer" in whole[-1] and "id" in whole[-1]  # the porter tokenizer, not split()
    asked: list[list[str]] = []
    tokenize = stemmer._tokenize
    monkeypatch.setattr(stemmer, "_tokenize", lambda words: asked.append(words) or tokenize(words))
    assert stemmer.stems(texts) == whole
    assert stemmer.stems(list(reversed(texts))) == list(reversed(whole))
    assert len(asked) == 1 and len(asked[0]) == len(set(asked[0]))  # each word once
    monkeypatch.setattr(site_changes.Stemmer, "MOST", 3)  # over the bound: forgotten, asked again
    assert stemmer.stems(texts) == whole and len(asked) == 2
    stemmer.close()
