"""The benchmark stages that run in a process of their own, so that their peak memory is theirs.

    python bench/child.py RESULT.json ingest RECORDS.jsonl DB FAMILIES.toml
    python bench/child.py RESULT.json reingest RECORDS.jsonl EDITED.jsonl DB
    python bench/child.py RESULT.json build DB OUT
    python bench/child.py RESULT.json serve-edit DB EDITED.jsonl FAMILIES.toml SLUG
    python bench/child.py RESULT.json export DB OUT
    python bench/child.py RESULT.json bare-site RECORDS.jsonl OUT
    python bench/child.py RESULT.json bare-export RECORDS.jsonl OUT
    python bench/child.py RESULT.json bare-ingest RECORDS.jsonl DB records|every

bench/run.py starts each through its small measuring wrapper (a process forked from the large
benchmark process would count the benchmark's pages as its own). Each stage writes a JSON object
to RESULT.json: its own timings and counts, and the peak memory of this process and of its
children (``ru_maxrss`` of ``RUSAGE_SELF`` and ``RUSAGE_CHILDREN``, in kilobytes; the latter is
the largest single child, e.g. one worker of the site build's process pool).

Only errordb's public functions are used (``errordb.store.ingest``, ``errordb.publish.site.build_site``
and ``Site``, ``errordb.publish.api.export_api``, as ``errordb export`` calls it); the *bare* stages are the
baselines and use no errordb code.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import sys
import time
from pathlib import Path

#: The baseline page: everything an error page shows, in one plain jinja2 template with
#: autoescaping, no includes, filters, highlighting, related records or hashing.
BARE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ r.errorClass }}: {{ r.errorMessage }}</title>
<link rel="stylesheet" href="../../static/style.css"></head>
<body><header><a href="../../index.html">errordb</a> <a href="../../search/index.html">search</a></header>
<main><h1><code>{{ r.errorClass }}</code> {{ r.errorMessage }}</h1>
<p>{{ r.severity }} in <a href="https://github.com/{{ r.repo }}">{{ r.repo }}</a>,
<a href="{{ r.githubUrl }}">{{ r.filePath }}:{{ r.lineNumber }}</a></p>
<p>Pattern: <code>{{ r.messagePattern }}</code></p>
<section><h2>What it means</h2><p>{{ r.documentation }}</p></section>
<section><h2>Where it is thrown</h2><pre><code>
{%- for line in r.sourceCode.splitlines() %}<span class="line{% if loop.index0 + r.sourceCodeStart == r.lineNumber %} hit{% endif %}">
<span class="no">{{ loop.index0 + r.sourceCodeStart }}</span> {{ line }}</span>
{% endfor %}</code></pre></section>
<section><h2>Solutions</h2><ol>{% for s in r.solutions %}<li>{{ s }}</li>{% endfor %}</ol></section>
<section><h2>Example fix</h2><pre><code>{{ r.exampleFix }}</code></pre></section>
<section><h2>Validation</h2><pre><code>{{ r.validationCode }}</code></pre></section>
<section><h2>When it happens</h2><p>{{ r.triggerScenarios }}</p><p>{{ r.commonSituations }}</p></section>
<section><h2>Prevention</h2><ul>{% for t in r.preventionTips %}<li>{{ t }}</li>{% endfor %}</ul></section>
<p>Tags: {% for t in r.tags %}<a href="../../tags/{{ t }}/index.html">{{ t }}</a> {% endfor %}
Family: <a href="../../families/{{ r.backgroundTag }}/index.html">{{ r.backgroundTag }}</a></p>
<p>Analyzed at {{ r.analyzedSha[:10] }} on {{ r.analyzedAt }}; <a href="../../api/errors/{{ r.id }}.json">JSON</a></p>
</main></body></html>
"""


def _records(jsonl: Path):
    """The records of a JSON Lines file of envelopes, one at a time."""
    with jsonl.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)["record"]


def ingest(jsonl: str, db: str, families: str) -> dict:
    """A first ingest of every record into a new store (validation and normalisation included)."""
    from errordb.store import ingest as ingest_records

    report = ingest_records([jsonl], db, families_path=families)
    return {"seconds": report.seconds, "records": report.added, "workers": os.cpu_count() or 1}


def reingest(jsonl: str, edited: str, db: str) -> dict:
    """Ingest again with ``prune``, as ``errordb serve`` does after each edit: the same records
    (no change), then ``edited`` (the same with one record changed), then the records again to
    leave the store as it was (not timed)."""
    from errordb.store import ingest

    same = ingest([jsonl], db, prune=True)
    changed = ingest([edited], db, prune=True)
    assert (same.added, same.updated, same.removed, changed.updated) == (0, 0, 0, 1), (same, changed)
    ingest([jsonl], db, prune=True)
    return {"same_s": same.seconds, "changed_s": changed.seconds}


def bare_ingest(jsonl: str, db: str, rows: str) -> dict:
    """The ingest's baseline: plain ``sqlite3`` ``executemany`` of the records' rows, 2,000 records
    a call, in one transaction, in the file's order.

    ``records``: each record's scalar fields as one row of one table (primary key ``id``).
    ``every``: also every other row an ingest stores from a record, in tables keyed as the
    store's are: a row per solution, prevention tip and tag, and the repository's and the tags'
    own rows (``INSERT OR IGNORE``). Left out, because only errordb computes them: the derived
    columns (content hash, enclosing function, index word), the words' counts and the full-text
    indexes.
    """
    import sqlite3

    conn = sqlite3.connect(db)
    columns = [name for name, value in next(_records(Path(jsonl))).items() if not isinstance(value, list)]
    conn.execute(f"CREATE TABLE records ({', '.join(columns)}, PRIMARY KEY (id))")
    record_sql = f"INSERT INTO records VALUES ({', '.join('?' * len(columns))})"
    lists = {"solutions": "solutions", "prevention_tips": "preventionTips", "record_tags": "tags"} if rows == "every" else {}
    for table in lists:
        conn.execute(f"CREATE TABLE {table} (record_id, position, text, PRIMARY KEY (record_id, position))")
    if lists:
        conn.execute("CREATE TABLE repos (id PRIMARY KEY)")
        conn.execute("CREATE TABLE tags (name PRIMARY KEY)")

    def write(batch: list[dict]) -> None:
        conn.executemany(record_sql, [[record[c] for c in columns] for record in batch])
        for table, field in lists.items():
            conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", [(r["id"], i, text) for r in batch for i, text in enumerate(r[field])])
        if lists:
            conn.executemany("INSERT OR IGNORE INTO repos VALUES (?)", [(r["repo"],) for r in batch])
            conn.executemany("INSERT OR IGNORE INTO tags VALUES (?)", [(tag,) for r in batch for tag in r["tags"]])

    started = time.perf_counter()
    count = 0
    batch = []
    for record in _records(Path(jsonl)):
        batch.append(record)
        if len(batch) == 2000:
            write(batch)
            count += len(batch)
            batch = []
    write(batch)
    count += len(batch)
    conn.commit()
    conn.close()
    return {"seconds": time.perf_counter() - started, "records": count}


def build(db: str, out: str) -> dict:
    from errordb.publish.site import build_site

    report = build_site(db, out)
    return {"seconds": report.seconds, "pages": report.pages, "workers": report.workers}


def serve_edit(db: str, edited: str, families: str, slug: str) -> dict:
    """What ``errordb serve`` does after one record was edited: ingest the records again (with
    prune), then make the edited record's page for the next request."""
    from errordb.publish.site import Site
    from errordb.store import ingest, open_connection

    started = time.perf_counter()
    report = ingest([edited], db, prune=True, families_path=families)
    ingest_s = time.perf_counter() - started
    conn = open_connection(db)
    try:
        page = Site(conn).file(f"errors/{slug}/")
    finally:
        conn.close()
    assert page is not None and b"Edited while served." in page[0] and report.updated == 1, report.summary()
    return {"ingest_s": ingest_s, "seconds": time.perf_counter() - started}


def export(db: str, out: str) -> dict:
    from errordb.publish.api import export_api
    from errordb.store import open_db

    store = open_db(db)
    try:
        report = export_api(store, Path(out))
    finally:
        store.close()
    return {"seconds": report.seconds, "records": report.records, "files": report.files, "bytes": report.bytes}


def bare_site(jsonl: str, out: str) -> dict:
    """The build's baseline: one page per record rendered by a plain jinja2 loop, one process."""
    import jinja2

    template = jinja2.Environment(autoescape=True).from_string(BARE_PAGE)
    started = time.perf_counter()
    pages = 0
    for record in _records(Path(jsonl)):
        folder = Path(out, "errors", record["slug"])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "index.html").write_text(template.render(r=record), encoding="utf-8")
        pages += 1
    return {"seconds": time.perf_counter() - started, "pages": pages, "workers": 1}


def bare_export(jsonl: str, out: str) -> dict:
    """The export's baseline: json.dump of each record to its file, and a gzipped JSON Lines file."""
    started = time.perf_counter()
    errors = Path(out, "errors")
    errors.mkdir(parents=True, exist_ok=True)
    count = 0
    with gzip.open(Path(out, "all.jsonl.gz"), "wt", encoding="utf-8") as bulk:
        for record in _records(Path(jsonl)):
            with open(errors / f"{record['id']}.json", "w", encoding="utf-8") as handle:
                json.dump(record, handle, ensure_ascii=False, sort_keys=True)
            bulk.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    return {"seconds": time.perf_counter() - started, "records": count}


STAGES = {"ingest": ingest, "reingest": reingest, "bare-ingest": bare_ingest, "build": build, "serve-edit": serve_edit, "export": export, "bare-site": bare_site, "bare-export": bare_export}


def main(argv: list[str]) -> None:
    result_path, stage, *args = argv
    result = STAGES[stage](*args)
    # After the stage returns, the build's process pool has been shut down and its workers
    # waited for, so RUSAGE_CHILDREN covers them.
    result["self_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["children_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
