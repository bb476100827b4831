"""Faults: kill -9 at random points, concurrent writers and readers, read-only and full disks,
damaged databases.

Each kill test runs the real command as a process on a dataset made by bench/generate.py,
kills it (SIGKILL, the whole process group) just before one of its writes, drawn with a fixed
seed among the writes a complete run makes (killpoint.py: files opened for writing, renames,
removals, SQL statements), and then checks what is left: a database that passes
``PRAGMA integrity_check`` and holds exactly the old or the new data (record count and
``meta.contentHash``), or a site / API folder that is byte for byte the old one or the new one.
No delay is involved: each run is killed while it runs, however busy the machine.
``ERRORDB_KILLS`` sets the number of kills per command (default 30).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, write_jsonl
from reliability_support import COMPANIONS, assert_one_line_error, db_state, popen, run_cli, run_process, tree_digest

sys.path.insert(0, str(REPO / "bench"))
from generate import generate  # noqa: E402

from errordb.cli import cli  # noqa: E402
from errordb.store import meta, open_connection  # noqa: E402

SEED = 20260901
KILLS = int(os.environ.get("ERRORDB_KILLS", "30"))


def changed(envelopes: list[dict]) -> list[dict]:
    """The dataset's next version: every other record's text edited."""
    out = json.loads(json.dumps(envelopes))
    for number, data in enumerate(out):
        if number % 2 == 0:
            data["record"]["documentation"] += " (revised)"
            data["record"]["solutions"].append("Upgrade to the fixed release.")
    return out


def remove_db(path: Path) -> None:
    for suffix in ("", *COMPANIONS):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def copy_db(source: Path, target: Path) -> None:
    remove_db(target)
    shutil.copy(source, target)


KILLPOINT = Path(__file__).with_name("killpoint.py")


def _killpoint(args: list, kill_at: int, writes_file: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "ERRORDB_KILL_AT": str(kill_at)}
    if writes_file is not None:
        env["ERRORDB_WRITES_FILE"] = str(writes_file)
    # Its own process group, which the kill takes whole: workers of a pooled build too.
    return subprocess.run([sys.executable, str(KILLPOINT), *map(str, args)], capture_output=True, text=True,
                          env=env, start_new_session=True, timeout=600)


def count_writes(args: list, folder: Path) -> int:
    """How many writes a complete run of errordb ``args`` makes (it must succeed)."""
    writes_file = folder / "writes.txt"
    done = _killpoint(args, 0, writes_file)
    assert done.returncode == 0, done.stderr
    return int(writes_file.read_text())


def kill_at_write(args: list, number: int) -> None:
    """Run errordb ``args`` and SIGKILL it just before its ``number``-th write."""
    done = _killpoint(args, number)
    assert done.returncode == -signal.SIGKILL, (number, done.returncode, done.stderr)


def kill_points(rng: random.Random, writes: int, kills: int) -> list[int]:
    """Where the kills fall: the first and the last write, and others drawn with ``rng``."""
    inner = range(2, writes)
    return sorted({1, writes, *rng.sample(inner, min(max(kills - 2, 0), len(inner)))})


def leftovers(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{name}."))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    old = list(generate(500))
    new = changed(old) + list(generate(700))[500:]
    files = {"old": write_jsonl(folder / "old.jsonl", old), "new": write_jsonl(folder / "new.jsonl", new)}
    small_old = write_jsonl(folder / "small-old.jsonl", old[:12])
    small_new = write_jsonl(folder / "small-new.jsonl", changed(old[:12]) + new[500:503])
    dbs = {}
    for name, records in (("old", [files["old"]]), ("new", [files["old"], files["new"]]),
                          ("small-old", [small_old]), ("small-new", [small_old, small_new])):  # fmt: skip
        dbs[name] = folder / f"{name}.db"
        for path in records:
            assert run_process("ingest", path, "--db", dbs[name], "-q").returncode == 0
    states = {name: db_state(dbs[name])[1:] for name in ("old", "new")}
    assert states["old"] != states["new"]
    return {"folder": folder, "files": files, "dbs": dbs, "states": states, "old": old, "sample": old[0]["record"]}


# kill -9 ----------------------------------------------------------------------------------------


def _kill_ingest_loop(data, work: Path, prepare, kills: int, rng: random.Random) -> Counter:
    args = ["ingest", data["files"]["new"], "--db", work, "-q"]
    copy_db(data["dbs"]["old"], work)
    prepare(work)
    outcomes: Counter = Counter(writes=count_writes(args, work.parent))
    for point in kill_points(rng, outcomes["writes"], kills):
        copy_db(data["dbs"]["old"], work)
        prepare(work)
        kill_at_write(args, point)
        interrupted = any(work.with_name(work.name + s).exists() for s in COMPANIONS)
        # A reader first, before anything that writes could recover the file: explain's connection.
        conn = open_connection(work)
        try:
            seen = (meta(conn).get("recordCount"), meta(conn).get("contentHash"))
        finally:
            conn.close()
        check, count, content = db_state(work)
        assert check == "ok", check
        state = next((name for name, s in data["states"].items() if s == (count, content)), None)
        assert state is not None, (point, count, content)
        assert seen == (count, content)
        outcomes[state] += 1
        outcomes["killed"] += 1
        outcomes["journal or WAL left (killed mid-write)"] += interrupted
    # After all that, a complete ingest reaches the new data.
    assert run_process(*args).returncode == 0
    assert db_state(work)[1:] == data["states"]["new"]
    return outcomes


def _describe(outcomes: Counter, old: str = "old", new: str = "new") -> str:
    return (f"all {outcomes['killed']} killed while running; "
            f"{outcomes[old]} left the old state, {outcomes[new]} the new one, none anything else")  # fmt: skip


def _where(outcomes: Counter) -> str:
    return (f"SIGKILL just before one of the {outcomes['writes']} writes of a complete run (files opened for "
            f"writing, renames, removals, SQL statements; the first, the last, and others drawn with a fixed seed)")


def test_kill_9_during_ingest_leaves_the_old_or_the_new_database(data, tmp_path, figures):
    outcomes = _kill_ingest_loop(data, tmp_path / "work.db", lambda path: None, KILLS, random.Random(SEED))
    figures.add(
        "kill -9 during ingest (WAL database)",
        f"ingest of 700 records (300 updated, 200 added) into a 500-record database, {_where(outcomes)}; "
        "then a read-only read, PRAGMA integrity_check, meta compared",
        outcomes["killed"],
        _describe(outcomes) + f"; integrity_check ok every time; {outcomes['journal or WAL left (killed mid-write)']} "
        "kills left a -wal file that the next reader used correctly",
    )


def test_kill_9_during_ingest_into_a_rollback_journal_database(data, tmp_path, figures):
    """A database from before WAL: the kill leaves a hot journal, which explain's read must survive."""

    def to_rollback_journal(path: Path) -> None:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.close()

    kills = max(5, KILLS // 3)
    outcomes = _kill_ingest_loop(data, tmp_path / "legacy.db", to_rollback_journal, kills, random.Random(SEED + 1))
    figures.add(
        "kill -9 during ingest (rollback-journal database)",
        "as above, into a database in the rollback journal (as errordb made them before WAL)",
        outcomes["killed"],
        _describe(outcomes) + f"; {outcomes['journal or WAL left (killed mid-write)']} kills left a hot journal, "
        "rolled back by the next reader (explain), which then read the old data",
    )


def _kill_folder_loop(args_for, out: Path, states: dict[str, str], rng: random.Random, kills: int,
                      restore=lambda: None, check=lambda outcomes: None) -> Counter:  # fmt: skip
    """Kill a command writing ``out``, each time starting from the old folder."""
    pristine = out.with_name(out.name + "-pristine-old")
    shutil.copytree(out, pristine, copy_function=shutil.copy)
    outcomes: Counter = Counter(writes=count_writes(args_for(0), out.parent))
    for point in kill_points(rng, outcomes["writes"], kills):
        shutil.rmtree(out)
        shutil.copytree(pristine, out, copy_function=shutil.copy)
        restore()
        kill_at_write(args_for(point), point)
        check(outcomes)
        digest = tree_digest(out)
        state = next((name for name, value in states.items() if value == digest), None)
        assert state is not None, f"{out} is neither the old nor the new folder after a kill at write {point}"
        outcomes[state] += 1
        outcomes["killed"] += 1
        outcomes["staging folders left"] += len(leftovers(out.parent, out.name))
    # The next complete run removes what the killed ones left beside the target.
    assert run_process(*args_for(0)).returncode == 0 and tree_digest(out) == states["new"]
    assert leftovers(out.parent, out.name) == [], leftovers(out.parent, out.name)
    shutil.rmtree(pristine)
    return outcomes


def test_kill_9_during_build_leaves_the_old_or_the_new_site(data, tmp_path, figures):
    site = tmp_path / "site"
    states = {}
    for name in ("new", "old"):  # old last: it is the folder each kill starts from
        assert run_process("build", "--db", data["dbs"][f"small-{name}"], "--out", site, "-q").returncode == 0
        states[name] = tree_digest(site)

    def args(number: int) -> list[str]:
        return ["build", "--db", data["dbs"]["small-new"], "--out", site, "-q"]

    outcomes = _kill_folder_loop(args, site, states, random.Random(SEED + 2), KILLS)
    figures.add(
        "kill -9 during build",
        f"`errordb build` of 15 records over the site of 12, {_where(outcomes)}; the folder's files hashed",
        outcomes["killed"],
        _describe(outcomes) + f"; {outcomes['staging folders left']} .site.new-* folders were left beside it by kills, "
        "all removed by the next run",
    )


def test_kill_9_during_export_leaves_the_old_or_the_new_api_and_release(data, tmp_path, figures):
    api, release = tmp_path / "api", tmp_path / "dist" / "errordb.db"
    states, releases = {}, {}
    for name in ("new", "old"):
        assert run_process("export", "--db", data["dbs"][name], "--out", api, "--sqlite", release, "-q").returncode == 0
        states[name], releases[name] = tree_digest(api), release.read_bytes()

    def restore() -> None:
        release.write_bytes(releases["old"])

    def check(outcomes: Counter) -> None:
        current = release.read_bytes()
        assert current in (releases["old"], releases["new"]), "the --sqlite release is neither old nor new"
        outcomes["release " + ("old" if current == releases["old"] else "new")] += 1
        outcomes["partial release files left"] += sum(p.name.endswith(".partial") for p in release.parent.iterdir())

    args = lambda number: ["export", "--db", data["dbs"]["new"], "--out", api, "--sqlite", release, "-q"]  # noqa: E731
    outcomes = _kill_folder_loop(args, api, states, random.Random(SEED + 3), KILLS, restore, check)
    assert sorted(p.name for p in release.parent.iterdir()) == ["errordb.db", "errordb.metadata.json"]  # partials removed
    figures.add(
        "kill -9 during export",
        f"`errordb export --sqlite` of 700 records over the export of 500, {_where(outcomes)}; the API folder "
        "hashed, the release file compared",
        outcomes["killed"],
        _describe(outcomes) + f"; {outcomes['staging folders left']} .api.new-* folders left by kills, removed by the "
        f"next run; release file old {outcomes['release old']} times, new {outcomes['release new']} times, never "
        f"anything else ({outcomes['partial release files left']} .partial files left by kills, removed by the next run)",
    )


# Two writers, a reader during a writer -------------------------------------------------------------


def test_two_ingests_at_once_both_succeed(data, tmp_path, figures):
    runs = 5
    extra = list(generate(1400))[700:]
    first = write_jsonl(tmp_path / "a.jsonl", extra[:350])
    second = write_jsonl(tmp_path / "b.jsonl", extra[350:])
    work = tmp_path / "work.db"
    waits = []
    for _ in range(runs):
        copy_db(data["dbs"]["new"], work)
        processes = [popen("ingest", path, "--db", work, "-q") for path in (first, second)]
        started = time.perf_counter()
        errors = [p.communicate(timeout=120)[1].decode() for p in processes]
        waits.append(time.perf_counter() - started)
        assert [p.returncode for p in processes] == [0, 0], errors
        check, count, _ = db_state(work)
        assert check == "ok" and int(count) == 700 + 700
    figures.add(
        "Two ingests at once",
        "two processes ingest 350 new records each into the same 700-record database, started together",
        runs,
        f"both exited 0 every time (the second waits for the first's write lock); integrity ok, all 1,400 records "
        f"there; both done in {min(waits):.2f}-{max(waits):.2f} s",
    )


def test_explain_during_an_ingest_reads_the_old_data_without_waiting(data, tmp_path, figures):
    """An ingest stopped in the middle of its write transaction (killpoint.py's SIGSTOP, just
    before its N-th write), and explain run meanwhile: a WAL reader neither waits for the writer's
    lock (it would fail with "locked" after the busy timeout) nor sees uncommitted rows."""
    from errordb.explainer.explanation import explain

    work = tmp_path / "work.db"
    copy_db(data["dbs"]["old"], work)
    big = write_jsonl(tmp_path / "big.jsonl", changed(data["old"]) + list(generate(1500))[500:])
    args = ["ingest", big, "--db", work, "-q"]
    writes = count_writes(args, tmp_path)
    sample = data["sample"]
    question = f"{sample['errorClass']}: {sample['errorMessage'].replace('{value}', '42')}"
    stops = kill_points(random.Random(SEED + 4), writes, 5)
    for point in stops:
        copy_db(data["dbs"]["old"], work)
        process = subprocess.Popen([sys.executable, str(KILLPOINT), *map(str, args)], stderr=subprocess.PIPE,
                                   env={**os.environ, "ERRORDB_STOP_AT": str(point)})
        try:
            _, status = os.waitpid(process.pid, os.WUNTRACED)  # the writer stopped: an observable event
            assert os.WIFSTOPPED(status), status
            for _ in range(3):
                conn = open_connection(work)
                try:
                    result = explain(question, conn)
                    seen = meta(conn).get("recordCount"), meta(conn).get("contentHash")
                finally:
                    conn.close()
                assert result.matches and result.matches[0][0].id == sample["id"]
                assert seen == data["states"]["old"]
        finally:
            process.send_signal(signal.SIGCONT)
        assert process.wait(timeout=600) == 0, process.stderr.read()
        assert db_state(work)[1:] != data["states"]["old"]  # it went on, and finished
    figures.add(
        "explain during an ingest",
        f"an ingest of 1,500 records into the 500-record WAL database, stopped (SIGSTOP) just before one of its "
        f"{writes} writes (the first, the last, and 3 drawn with a fixed seed), and explain run 3 times (library "
        "call, a fresh read-only connection each) while it was stopped",
        len(stops) * 3,
        "every explain answered at once from the old data (a reader never waits for the writer's lock), and the "
        "ingest then finished",
    )


# Read-only and full disks -------------------------------------------------------------------------


def _mount(*args: str) -> bool:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    return done.returncode == 0


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder writes fail in: a read-only bind mount (as root), else chmod 555."""
    source, view = tmp_path / "source", tmp_path / "readonly"
    source.mkdir()
    view.mkdir()
    state = {"source": source, "view": view, "mounted": False}

    def seal():
        if os.geteuid() == 0:
            if not (_mount("--bind", str(source), str(view)) and _mount("-o", "remount,bind,ro", str(view))):
                subprocess.run(["umount", str(view)], capture_output=True)
                pytest.skip("root, and no read-only bind mount possible here: permissions would not stop writes")
            state["mounted"] = True
        else:
            view.rmdir()
            source.rename(view)
            view.chmod(0o555)
        return view

    state["seal"] = seal
    yield state
    if state["mounted"]:
        subprocess.run(["umount", str(view)], capture_output=True)
    elif view.exists():
        view.chmod(0o755)


def test_a_read_only_folder_gives_one_line_and_reading_still_works(data, read_only_folder, tmp_path, figures):
    source = read_only_folder["source"]
    shutil.copy(data["dbs"]["small-old"], source / "wal.db")
    shutil.copy(data["dbs"]["small-old"], source / "rollback.db")
    conn = sqlite3.connect(source / "rollback.db")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    assert run_process("build", "--db", data["dbs"]["small-old"], "--out", source / "site", "-q").returncode == 0
    view = read_only_folder["seal"]()
    before = {p.name: p.read_bytes() for p in view.iterdir() if p.is_file()}
    site_before = tree_digest(view / "site")
    sample = data["sample"]
    checked = 0
    for name in ("wal.db", "rollback.db"):
        db = view / name
        ingest = run_process("ingest", data["files"]["new"], "--db", db)
        assert_one_line_error(ingest.stderr, ingest.returncode, str(db), "read-only")
        for args in (["explain", f"{sample['errorClass']}: {sample['errorMessage']}"], ["show", sample["id"]], ["stats"]):
            done = run_process(*args, "--db", db)
            assert done.returncode == 0, (name, args, done.stderr)
        export = run_process("export", "--db", db, "--out", tmp_path / f"api-{name}", "-q")
        assert export.returncode == 0, export.stderr  # build and export only read the database
        checked += 1
    build = run_process("build", "--db", data["dbs"]["small-new"], "--out", view / "site", "-q")
    assert_one_line_error(build.stderr, build.returncode, str(view), "Read-only file system" if read_only_folder["mounted"] else "Permission denied")
    export = run_process("export", "--db", data["dbs"]["small-new"], "--out", view / "api", "-q")
    assert_one_line_error(export.stderr, export.returncode, str(view))
    assert {p.name: p.read_bytes() for p in view.iterdir() if p.is_file()} == before
    assert tree_digest(view / "site") == site_before
    figures.add(
        "Read-only folder",
        "a WAL and a rollback-journal database and a site in a read-only "
        + ("bind mount" if read_only_folder["mounted"] else "folder (chmod 555)")
        + ": ingest into them; explain, show, stats and export from them; build and export into the folder",
        checked * 5 + 2,
        "ingest, build and export into it: exit 2, one line naming the file and 'read-only'; explain, show, stats "
        "and export read both databases; nothing in the folder changed",
    )


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MB tmpfs (root only); skipped where it cannot be mounted (the ENOSPC test below simulates)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)):
        pytest.skip("no tmpfs mount here (needs root); test_a_full_disk_simulated covers ENOSPC")
    yield disk
    subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_full_disk_gives_one_line_and_changes_nothing(data, tiny_disk, tmp_path, figures):
    db = tiny_disk / "errordb.db"
    shutil.copy(data["dbs"]["small-old"], db)
    before = db_state(db)
    files_before = sorted(p.name for p in tiny_disk.iterdir())
    ingest = run_process("ingest", data["files"]["new"], "--db", db)  # 700 records need ~4 MB
    assert_one_line_error(ingest.stderr, ingest.returncode, str(db), "disk is full")
    assert db_state(db) == before and sorted(p.name for p in tiny_disk.iterdir()) == files_before
    new_db = tiny_disk / "new.db"
    fresh = run_process("ingest", data["files"]["new"], "--db", new_db)
    assert_one_line_error(fresh.stderr, fresh.returncode, str(new_db), "disk is full")
    assert not new_db.exists()
    # 4,000 records need next to nothing in SQLite's temporary folder.
    tiny_tmp = dict(os.environ, SQLITE_TMPDIR=str(tiny_disk))
    elsewhere = tiny_disk.parent / "elsewhere.db"
    shutil.copy(data["dbs"]["small-old"], elsewhere)
    assert run_process("ingest", write_jsonl(tmp_path / "many.jsonl", list(generate(4000))), "--db", elsewhere, env=tiny_tmp).returncode == 0
    assert sorted(p.name for p in tiny_disk.iterdir()) == files_before
    site = tiny_disk / "site"
    assert run_process("build", "--db", data["dbs"]["small-old"], "--out", site, "-q").returncode in (0, 2)
    if not site.exists():
        pytest.skip("not even the small site fits this tmpfs")
    site_before = tree_digest(site)
    build = run_process("build", "--db", data["dbs"]["new"], "--out", site, "-q")
    assert_one_line_error(build.stderr, build.returncode, f"{site}: No space left on device (writing ", f"; {site} is as it was")
    export = run_process("export", "--db", data["dbs"]["new"], "--out", tiny_disk / "api", "-q")
    assert_one_line_error(export.stderr, export.returncode, f"{tiny_disk / 'api'}: No space left on device (writing ")
    # Which file meets the full disk depends on the bytes free to the last page; it is one of the export's.
    assert re.search(r"\(writing (errors/[0-9a-f]{16}(\.json)?|all\.zip|all\.jsonl\.gz)\); ", export.stderr), export.stderr
    assert tree_digest(site) == site_before and not (tiny_disk / "api").exists()
    assert leftovers(tiny_disk, "site") == [] and leftovers(tiny_disk, "api") == []
    figures.add(
        "Full disk",
        "a 2 MB tmpfs: ingest of 700 records into a database there and into a new one, and of 4,000 into a database "
        "elsewhere with SQLite's temporary folder there (fits); build and export of 700 records over a small site there",
        5,
        "exit 2, one line ('the disk is full (the database's, or that of SQLite's temporary files …); nothing was "
        "written', or '<the --out folder>: No space left on device (writing <its file>); <folder> is as it was'); "
        "database content unchanged, no new database left, "
        "site unchanged, no staging folder left",
    )


def test_a_full_disk_simulated(data, tmp_path, monkeypatch):
    """Where no tmpfs can be mounted: SQLite's own full-disk error (max_page_count) and ENOSPC on write."""
    from errordb.store import ingestion as store

    # ingest opens its database through store.connect: that connection gets a page limit.
    db = tmp_path / "errordb.db"
    shutil.copy(data["dbs"]["small-old"], db)
    before = db_state(db)
    real_connect = store.connect

    def full_connect(path):
        database = real_connect(path)
        pages = database.execute("PRAGMA page_count").fetchone()[0]
        database.execute(f"PRAGMA max_page_count = {pages + 5}")  # SQLITE_FULL a few pages on
        return database

    monkeypatch.setattr(store, "connect", full_connect)
    result = run_cli("ingest", data["files"]["new"], "--db", db)
    assert_one_line_error(result.stderr, result.exit_code, str(db), "disk is full")
    assert db_state(db) == before
    monkeypatch.undo()

    site = tmp_path / "site"
    assert run_cli("build", "--db", data["dbs"]["small-old"], "--out", site, "-q").exit_code == 0
    site_before = tree_digest(site)

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device", str(site))

    monkeypatch.setattr("errordb.publish.output.OutputTree.write_bytes", no_space)
    result = run_cli("build", "--db", data["dbs"]["small-new"], "--out", site, "-q")
    assert_one_line_error(result.stderr, result.exit_code, f"{site}: No space left on device; {site} is as it was")
    assert tree_digest(site) == site_before and leftovers(tmp_path, "site") == []


# Damaged databases --------------------------------------------------------------------------------


def _damage(path: Path, how: str, rng: random.Random) -> None:
    raw = bytearray(path.read_bytes())
    page = int.from_bytes(raw[16:18], "big")  # the header's page size...
    page = 65536 if page == 1 else page  # ... where 1 stands for 65536
    if how == "truncated":
        del raw[len(raw) // 2 :]
    elif how == "zeroed pages":
        for number in rng.sample(range(2, len(raw) // page), 3):
            raw[number * page : (number + 1) * page] = bytes(page)
    elif how == "random bytes":
        for _ in range(64):
            at = rng.randrange(100, len(raw))
            raw[at] = rng.randrange(256)
    elif how == "bad header":
        raw[16:24] = b"\xff" * 8
    path.write_bytes(bytes(raw))


DAMAGE = ["truncated", "zeroed pages", "random bytes", "bad header"]


def test_a_damaged_database_given_with_db_is_a_clear_one_line_error(data, tmp_path, figures):
    rng = random.Random(SEED + 4)
    sample = data["sample"]
    commands = {
        "explain": ["explain", f"{sample['errorClass']}: {sample['errorMessage']}"],
        "show": ["show", sample["id"]],
        "stats": ["stats"],
        "list": ["list"],
        "export": ["export", "--out", str(tmp_path / "api"), "-q"],
        "build": ["build", "--out", str(tmp_path / "site"), "-q"],
        "ingest": ["ingest", str(data["files"]["new"]), "-q"],
    }
    tally: Counter = Counter()
    for how in DAMAGE:
        for name, args in commands.items():
            db = tmp_path / "damaged.db"
            copy_db(data["dbs"]["old"], db)
            _damage(db, how, rng)
            done = run_cli(*args, "--db", db)  # in this process: 28 runs
            # Either the damage is not on the pages this command reads (it works), or one line says so.
            if done.exit_code in (0, 1) and "errordb:" not in done.stderr:
                tally["worked (damage not on the pages read)"] += 1
                continue
            assert_one_line_error(done.stderr, done.exit_code, str(db))
            tally["one-line error"] += 1
    assert tally["one-line error"] >= len(commands) * 2, tally
    figures.add(
        "Damaged database given with --db",
        f"{len(DAMAGE)} kinds of damage ({', '.join(DAMAGE)}) to a 500-record database, then each of "
        f"{', '.join(commands)}",
        len(DAMAGE) * len(commands),
        f"{tally['one-line error']} stopped with exit 2 and one line naming the file; "
        f"{tally['worked (damage not on the pages read)']} worked (the damage was on pages they do not read); "
        "no traceback, no internal error, no hang",
    )


def test_a_damaged_embedded_default_is_rebuilt(tmp_path, monkeypatch, figures):
    from errordb.store import default as store

    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    path = store.default_db_path()
    good = meta(store.open_connection(path))
    rng = random.Random(SEED + 5)
    rebuilt = 0
    for how in DAMAGE:
        _damage(path, how, rng)
        assert not store._is_healthy(path), how
        done = run_process("stats", env={**os.environ, "ERRORDB_CACHE": str(tmp_path / "cache")})
        assert done.returncode == 0, (how, done.stderr)
        assert store._is_healthy(path) and meta(store.open_connection(path)) == good
        rebuilt += 1
    # A default left half-built by a killed process is cleaned up by the next build.
    dead = tmp_path / "cache" / f".{path.name}.999999999.partial"
    dead_inside = dead.with_name(f".{dead.name}.999999999.partial")  # the new store ingest builds beside it
    for half_built in (dead, Path(str(dead) + "-journal"), dead_inside):
        half_built.write_bytes(b"half")
    _damage(path, "bad header", rng)
    store.default_db_path()
    assert not dead.exists() and not Path(str(dead) + "-journal").exists() and not dead_inside.exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [path.name, f"{path.name}.sha256"]
    with open(path, "rb") as handle:
        assert handle.read(20)[18:20] == b"\x01\x01"  # rollback journal: it is replaced by rename, never written
    figures.add(
        "Damaged embedded default",
        f"the cached default database damaged {len(DAMAGE)} ways ({', '.join(DAMAGE)}), then `errordb stats`; a "
        "half-built default of a dead process beside it",
        rebuilt + 1,
        "the file's SHA-256, kept beside it, found every damage (quick_check cannot see damage inside a record's text); the "
        "default was rebuilt each time and gave the same data; the dead partial was removed",
    )


def _invalid_utf8_copy(source: Path, target: Path, record_id: str) -> Path:
    copy_db(source, target)
    conn = sqlite3.connect(target)
    with conn:
        conn.execute("UPDATE records SET documentation = CAST(x'41ff0a1b5b324a42' AS TEXT) WHERE id = ?", [record_id])
    conn.close()
    return target


@pytest.mark.parametrize("command", ["export", "build"])
def test_damaged_text_in_the_database_is_one_line_without_the_text(data, tmp_path, command):
    db = _invalid_utf8_copy(data["dbs"]["small-old"], tmp_path / "damaged.db", data["sample"]["id"])
    done = run_process(command, "--db", db, "--out", tmp_path / "out", "-q")
    line = assert_one_line_error(done.stderr, done.returncode, str(db), "damaged")
    assert "\x1b" not in line and not (tmp_path / "out").exists()


def test_show_of_damaged_text_is_one_line(data, tmp_path, figures):
    """SQLite's message for undecodable text quotes it ('A\\xff\\n ESC[2J B' here): show says in one
    line that the file is damaged, with no control character in it, on a terminal too (click drops
    escape sequences only when stderr is not one: the in-process run forces colour on)."""
    db = _invalid_utf8_copy(data["dbs"]["small-old"], tmp_path / "damaged.db", data["sample"]["id"])
    done = run_process("show", data["sample"]["id"], "--db", db)
    assert_one_line_error(done.stderr, done.returncode, str(db), "damaged")
    forced = CliRunner().invoke(cli, ["show", data["sample"]["id"], "--db", str(db)], color=True)
    line = assert_one_line_error(forced.stderr, forced.exit_code, str(db), "damaged")
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", line[:-1]), repr(line)
    figures.add(
        "Damaged text in the database (show)",
        "a record's documentation set to invalid UTF-8 holding a newline and ESC [2J, then `errordb show` of it, "
        "as a process and with colour forced on",
        2,
        "exit 2 and one line without control characters, twice: " + line.strip().replace(str(db), "FILE"),
    )


def test_a_swap_cut_between_its_two_renames_is_put_back_by_the_next_run(tmp_path, monkeypatch):
    """Where renameat2(RENAME_EXCHANGE) is missing the swap is two renames; a kill between them
    leaves no target and the old folder at .<name>.old-<pid>-*: the next run restores it first."""
    from errordb import atomic

    target = tmp_path / "site"
    stranded = tmp_path / ".site.old-999999999-abcd"  # no process has that pid
    stranded.mkdir()
    (stranded / "index.html").write_text("old", encoding="utf-8")
    (tmp_path / ".site.new-999999999-efgh").mkdir()  # the killed run's half-written folder
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)

    class Fails(Exception):
        pass

    with pytest.raises(Fails), atomic.replaced_dir(target) as staging:
        (staging / "index.html").write_text("half", encoding="utf-8")
        raise Fails
    assert (target / "index.html").read_text(encoding="utf-8") == "old"  # put back, then left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    with atomic.replaced_dir(target) as staging:
        (staging / "index.html").write_text("new", encoding="utf-8")
    assert (target / "index.html").read_text(encoding="utf-8") == "new" and sorted(os.listdir(tmp_path)) == ["site"]


