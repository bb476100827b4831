"""errordb learn: a real fresh virtual environment with real distributions installed, learned,
and real tracebacks raised there explained down to the module, function and line."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from errordb.cli import cli
from errordb.explainer.explanation import explain
from errordb.explainer.match import Match, without_shadowed_drafts
from errordb.explainer.render import render_markdown, render_terminal
from errordb.explainer.result import explain_json_schema
from errordb.harvest.drafts import raised_when
from errordb.harvest.installed import default_python, learn, repository
from errordb.harvest.scan import scan_tree
from errordb.store.default import layer_db_path

#: What the fresh environment gets: three distributions a user has, and what requests needs.
INSTALLED = ("requests", "urllib3", "idna", "charset-normalizer", "certifi", "click", "jinja2", "markupsafe")


def _install_copy(name: str, site_packages: Path) -> None:
    """Install distribution ``name`` into ``site_packages`` as pip left it here: every file its
    RECORD lists (code and .dist-info), at the same place."""
    dist = importlib.metadata.distribution(name)
    for entry in dist.files:
        if ".." in entry.parts:
            continue  # scripts in bin/
        source = Path(dist.locate_file(entry))
        if source.is_file():
            target = site_packages / entry
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory):
    """A new virtual environment (no pip) with :data:`INSTALLED` in its site-packages."""
    root = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(root, with_pip=False, symlinks=True)
    python = root / "bin" / "python"
    site_packages = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        capture_output=True, text=True, check=True).stdout.strip())
    for name in INSTALLED:
        _install_copy(name, site_packages)
    return python, site_packages


@pytest.fixture(scope="module")
def learned(fresh_env, tmp_path_factory):
    """The fresh environment learned in full (standard library and its distributions) into a cache of its own."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ERRORDB_CACHE", str(cache))
        report = learn(python=str(fresh_env[0]))
    return cache, report


def _write_loader(tree: Path, name: str = "app.py") -> None:
    """A source tree with one raise, in ``load`` at line 3 of ``name``, under a condition."""
    tree.mkdir(parents=True, exist_ok=True)
    (tree / name).write_text("def load(path):\n    if path is None:\n        raise ValueError('no path given to load')\n")


def _raise_in(python: Path, program: str) -> str:
    """The traceback ``program`` prints when run by ``python`` (it must fail)."""
    done = subprocess.run([python, "-c", program], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stderr


#: Real errors of each learned distribution and of the standard library.
PROGRAMS = {
    "requests": 'import requests; requests.get("nope")',
    "jinja2": 'import jinja2; jinja2.Environment().get_template("x")',
    "click": 'import click; click.Option(["--x"], count=True, multiple=True)',
    "stdlib": 'import argparse; argparse.ArgumentParser().add_argument("x", nargs=0)',
}


def test_learn_reads_the_standard_library_and_every_distribution(learned, fresh_env):
    cache, report = learned
    names = {entry.split()[0] for entry in report.learned}
    assert names == {"python", *(importlib.metadata.distribution(n).metadata["Name"] for n in INSTALLED)}
    manifest = json.loads((cache / "learned" / "learned.json").read_text())
    versions = {entry["name"]: entry["version"] for entry in manifest["sources"].values()}
    assert versions["requests"] == importlib.metadata.version("requests")
    assert versions["python"] == "%d.%d.%d" % sys.version_info[:3]
    assert report.records > 1000 and report.files > 500
    assert report.total_records == report.records


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_a_real_traceback_finds_its_learned_raise_site(learned, fresh_env, program, monkeypatch):
    cache, _ = learned
    monkeypatch.setenv("ERRORDB_CACHE", str(cache))
    text = _raise_in(fresh_env[0], PROGRAMS[program])
    innermost = text.strip().splitlines()[-3]  # '  File ".../requests/models.py", line 514, in prepare_url'
    path, line, function = innermost.split('"')[1], int(innermost.split("line ")[1].split(",")[0]), innermost.rsplit(" in ", 1)[1]
    result = explain(text)
    best = result.findings[-1].best
    assert len(best) == 1, [m.record["filePath"] for m in best]
    record = result.records[best[0].id]
    assert path.endswith(record["filePath"].removeprefix("Lib/"))
    assert record["lineNumber"] == line
    assert record["functionName"].rsplit(".", 1)[-1] == function
    assert record["distribution"] is not None and record["githubUrl"] is None
    document = result.to_dict()
    assert document["matches"][0]["distributionVersion"] == record["distributionVersion"]
    jsonschema.validate(document, explain_json_schema())


def test_a_draft_answer_says_where_it_comes_from_and_when_it_is_raised(learned, fresh_env, monkeypatch):
    cache, _ = learned
    monkeypatch.setenv("ERRORDB_CACHE", str(cache))
    text = _raise_in(fresh_env[0], PROGRAMS["stdlib"])
    result = CliRunner().invoke(cli, ["explain", text])
    assert result.exit_code == 0, result.output
    version = "%d.%d.%d" % sys.version_info[:3]
    assert f"draft learned from your installed python {version}" in result.output
    assert "(module argparse)" in result.output
    assert "When it is raised" in result.output and "Raised when `nargs == 0`" in result.output


def test_list_and_search_keep_the_drafts_of_a_distribution(learned, monkeypatch):
    cache, _ = learned
    monkeypatch.setenv("ERRORDB_CACHE", str(cache))
    runner = CliRunner()
    listed = runner.invoke(cli, ["list", "--distribution", "JINJA2", "--format", "json"])  # as pip names it, or not
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert rows and {row["distribution"] for row in rows} == {importlib.metadata.distribution("jinja2").metadata["Name"]}
    both = json.loads(runner.invoke(cli, ["list", "--distribution", "jinja2", "--distribution", "requests", "--format", "json"]).stdout)
    assert len(both) > len(rows) and {row["distribution"].lower() for row in both} == {"jinja2", "requests"}
    found = runner.invoke(cli, ["search", "template", "--distribution", "jinja2", "--format", "json"])
    hits = json.loads(found.stdout)["hits"]
    assert found.exit_code == 0 and hits and all(hit["id"] in {row["id"] for row in rows} for hit in hits)
    assert runner.invoke(cli, ["list", "--distribution", "not-installed-here"]).exit_code == 1
    from errordb.browse import completions

    assert "requests" in completions(None, "distribution", "req")


def test_nothing_matched_says_what_was_searched(learned, monkeypatch, tmp_path):
    cache, report = learned
    text = "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n    go()\nZzError: zz qq xx\n"
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "empty"))
    before = CliRunner().invoke(cli, ["explain", text])
    assert before.exit_code == 1
    assert "nothing learned yet" in " ".join(before.output.split())
    monkeypatch.setenv("ERRORDB_CACHE", str(cache))
    after = CliRunner().invoke(cli, ["explain", text])
    assert after.exit_code == 1
    said = " ".join(after.output.split())
    sources = json.loads((cache / "learned" / "learned.json").read_text())["sources"].values()
    with_drafts = sum(1 for source in sources if source["records"])  # certifi raises nothing readable
    assert f"3 documented records and {report.total_records:,} drafts learned from {with_drafts} installed distributions" in said
    assert "In your code: app.py, line 3" in said


def test_learning_again_skips_what_did_not_change_and_drops_what_is_gone(fresh_env, tmp_path, monkeypatch):
    python, site_packages = fresh_env
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    first = learn(("click", "jinja2"), python=str(python))
    assert sorted(e.split()[0] for e in first.learned) == ["Jinja2", "click"]
    again = learn(("click", "jinja2"), python=str(python))
    assert again.learned == [] and again.unchanged == 2
    # A new version of click is learned again; an uninstalled distribution is dropped by a full learn.
    copy = tmp_path / "env"
    shutil.copytree(python.parent.parent, copy, symlinks=True)
    copy_site = copy / site_packages.relative_to(python.parent.parent)
    metadata = next(copy_site.glob("click-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text().replace(f"Version: {importlib.metadata.version('click')}", "Version: 99.0"))
    for folder in [*copy_site.glob("jinja2*"), *copy_site.glob("Jinja2*")]:
        shutil.rmtree(folder)
    full = learn(python=str(copy / "bin" / "python"))
    assert "click 99.0" in full.learned
    assert any(entry.startswith("Jinja2 ") for entry in full.dropped)
    text = _raise_in(python, PROGRAMS["jinja2"])
    matches = explain(text).findings[-1].matches
    # Its drafts are gone from the store: only the traceback's own file, read on the fly, answers.
    assert matches and all(m.record.get("readFrom") and not m.record.get("distribution") for m in matches)
    assert not (tmp_path / "cache" / "learned" / "records" / "dist-jinja2.jsonl").exists()


def test_an_unparsable_file_is_counted_not_fatal(tmp_path, monkeypatch):
    tree = tmp_path / "myproject"
    _write_loader(tree, "good.py")
    (tree / "bad.py").write_text("def broken(:\n")
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    report = learn(paths=(tree,))
    assert report.unreadable == 1 and report.records == 1
    result = explain('Traceback (most recent call last):\n  File "/home/u/myproject/good.py", line 3, in load\n'
                     "    raise ValueError('no path given to load')\nValueError: no path given to load\n")
    record = result.records[result.findings[0].best[0].id]
    assert (record["filePath"], record["lineNumber"], record["triggerScenarios"]) == ("myproject/good.py", 3, "Raised when `path is None`.")


def test_source_trees_of_one_name_are_learned_apart_and_said_to_be_trees(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    trees = [tmp_path / checkout / "src" for checkout in ("one", "two")]
    for tree in trees:
        _write_loader(tree)
    report = learn(paths=tuple(trees))
    assert report.records == 2  # the same raise in two checkouts: two drafts, not one refused as a duplicate
    text = ('Traceback (most recent call last):\n  File "/home/u/one/src/app.py", line 3, in load\n'
            "    raise ValueError('no path given to load')\nValueError: no path given to load\n")  # fmt: skip
    result = explain(text)
    records = [result.records.get(m.id) or m.record for m in result.findings[0].matches]
    assert len(records) == 2 and {(r["distribution"], r["distributionVersion"]) for r in records} == {("src", "tree")}
    rendered = render_terminal(result, color=False)
    assert "draft learned from your source tree src" in rendered and "installed src" not in rendered
    assert "your source tree `src` (a learned draft)" in render_markdown(result)


def test_a_distribution_is_found_by_its_name_as_pip_normalises_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    # A folder named like no distribution: its drafts get a name that is one (they were all
    # refused before, silently), and that name is found however pip would write it.
    tree = tmp_path / "Über__Proj.x v2"
    _write_loader(tree)
    assert learn(paths=(tree,)).records == 1
    for name in ("uber-proj-x-v2", "UBER_PROJ.X-V2", "uber--proj__x.v2"):
        listed = CliRunner().invoke(cli, ["list", "--distribution", name, "--format", "json"])
        assert listed.exit_code == 0, name
        rows = json.loads(listed.stdout)
        assert [(row["distribution"], row["filePath"]) for row in rows] == [("Uber__Proj.x-v2", "Über__Proj.x v2/app.py")], name
    assert CliRunner().invoke(cli, ["list", "--distribution", "uber-proj"]).exit_code == 1


def test_a_layer_made_by_another_version_is_learned_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "myproject"
    _write_loader(tree)
    assert learn(paths=(tree,)).records == 1
    assert learn(paths=(tree,)).unchanged == 1  # the same version: nothing read again
    manifest_path = tmp_path / "cache" / "learned" / "learned.json"
    manifest = json.loads(manifest_path.read_text())
    stale = manifest_path.parent / "records" / "dist-gone.jsonl"
    stale.write_text("")
    manifest_path.write_text(json.dumps({**manifest, "version": manifest["version"] - 1}))
    again = learn(paths=(tree,))
    assert again.outdated and again.records == 1 and again.unchanged == 0 and not stale.exists()
    assert "made by another version of errordb" in again.summary()
    assert json.loads(manifest_path.read_text())["version"] == manifest["version"]


def test_conditions_are_read_from_the_branches_around_the_raise(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "def f(a, b, items):\n"
        "    if a is None:\n"
        "        return\n"
        "    elif b in items:\n"
        "        try:\n"
        "            items[b]\n"
        "        except KeyError:\n"
        "            raise ValueError('missing key in items')\n"
        "    else:\n"
        "        while not a.ready:\n"
        "            raise RuntimeError('the value is never ready')\n"
    )
    files, _ = scan_tree(source)
    conditions = {site.message: site.conditions for site in files[0].sites}
    assert conditions["missing key in items"] == ("except KeyError", "b in items", "a is not None")
    assert conditions["the value is never ready"] == ("not a.ready", "b not in items", "a is not None")
    assert raised_when(conditions["missing key in items"]) == "Raised while handling `KeyError`, after `b in items`, `a is not None`."


def test_a_documented_record_hides_a_draft_of_the_same_raise_site():
    documented = {"filePath": "python/sglang/srt/x.py", "function": "Runner.run", "errorClass": "ValueError", "distribution": None, "id": "a"}
    draft = {"filePath": "sglang/srt/x.py", "function": "Runner.run", "errorClass": "ValueError", "distribution": "sglang", "id": "b"}
    elsewhere = {**draft, "function": "Runner.stop", "id": "c"}
    kept = without_shadowed_drafts([Match(documented, 150), Match(draft, 160), Match(elsewhere, 120)])
    assert [m.record["id"] for m in kept] == ["a", "c"]


def test_the_repository_is_the_one_the_project_urls_name():
    assert repository(["https://palletsprojects.com/donate", "https://github.com/pallets/click/", "https://github.com/pallets/click/issues"]) == "pallets/click"
    assert repository(["https://github.com/sponsors/someone", "https://gitlab.com/a/b"]) is None


def test_learn_refuses_a_distribution_that_is_not_installed(fresh_env, tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(cli, ["learn", "--python", str(fresh_env[0]), "no-such-distribution"])
    assert result.exit_code == 2
    assert "no-such-distribution: not installed" in result.output
    assert not layer_db_path().exists()


def test_learned_drafts_are_not_published(learned, tmp_path):
    cache, _ = learned
    store = cache / "learned" / layer_db_path().name
    for command in (["build", "--out", str(tmp_path / "site")], ["export", "--out", str(tmp_path / "api")], ["serve", "--port", "0"]):
        result = CliRunner().invoke(cli, [*command, "--db", str(store)])
        assert result.exit_code == 2, (command, result.output)
        assert "drafts learned from installed distributions" in result.output and "not published" in result.output
    assert not (tmp_path / "site").exists() and not (tmp_path / "api").exists()


def test_the_traceback_s_own_file_is_read_on_the_fly(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))  # nothing learned: only the file itself can tell
    app = tmp_path / "app.py"
    app.write_text(
        "def load(config, name):\n"
        "    if name not in config:\n"
        "        if config.get('strict'):\n"
        "            raise KeyError(f'no setting named {name} in the config')\n"
        "    return config.get(name)\n\n\n"
        "load({'strict': True}, 'port')\n"
    )
    text = subprocess.run([sys.executable, str(app)], capture_output=True, text=True).stderr
    result = explain(text)
    record = result.records[result.findings[0].best[0].id]
    assert (record["readFrom"], record["lineNumber"], record["function"]) == (str(app), 4, "load")
    assert record["triggerScenarios"] == "Raised when `config.get('strict')`, after `name not in config`."
    shown = CliRunner().invoke(cli, ["explain", text]).output
    assert f"draft read just now from {app}" in shown
    document = result.to_dict()
    jsonschema.validate(document, explain_json_schema())
    assert document["matches"][0]["readFrom"] == str(app) and document["matches"][0]["repo"] is None
    # The same path holding other code (the paste came from another machine) is not read.
    app.write_text(app.read_text().replace("            raise KeyError", "            raise  KeyError"))
    assert not explain(text).findings[0].matches


def test_the_layer_follows_the_bundled_records_when_they_change(fresh_env, tmp_path, monkeypatch):
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    learn(("click",), python=str(fresh_env[0]))
    manifest_file = tmp_path / "cache" / "learned" / "learned.json"
    manifest = json.loads(manifest_file.read_text())
    right = manifest["bundled"]
    manifest["bundled"] = "0" * 16  # as after an upgrade of errordb that changed the bundled records
    manifest_file.write_text(json.dumps(manifest))
    result = CliRunner().invoke(cli, ["explain", "ValueError: DSPARK requires explicit layer_ids for aux hidden capture."])
    assert result.exit_code == 0 and "dspark-requires-explicit-layer-ids" in result.output
    assert json.loads(manifest_file.read_text())["bundled"] == right


def test_the_active_virtual_environment_is_learned_by_default(fresh_env, tmp_path, monkeypatch):
    python, site_packages = fresh_env
    monkeypatch.setenv("ERRORDB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("VIRTUAL_ENV", str(python.parent.parent))  # as `source .venv/bin/activate` sets it
    report = learn(("requests",))
    assert [entry.split()[0] for entry in report.learned] == ["requests"]
    manifest = json.loads((tmp_path / "cache" / "learned" / "learned.json").read_text())
    assert manifest["sources"]["dist-requests"]["location"] == str(site_packages)  # the active environment's copy
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "no-such-env"))
    assert default_python() == sys.executable
