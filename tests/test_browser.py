"""The built site in a real browser: Debian's Chromium, headless, driven by playwright.

The site is built from the bundled records with ``--base-url /errordb/`` and served by a real
``http.server`` on 127.0.0.1 under that sub-path (missing files get the site's 404 page). Checks:
pages load without console errors, every internal link resolves (the whole site is crawled),
search finds records, the explain box agrees with ``errordb explain``, pages work without
JavaScript, and screenshots of an error page go to ``test-artifacts/``.

Without chromium or playwright the tests skip, unless the environment variable CI is set:
then they fail, so CI cannot pass without having run them.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urldefrag, urlsplit

import pytest
from helpers import BAILING_VALUE_ERROR, KIMI_PP_ERROR, KIMI_VALUE_ERROR, REPO

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
PREFIX = "/errordb/"
ARTIFACTS = REPO / "test-artifacts"
EXAMPLES = REPO / "examples"
MESSAGE = "DSPARK requires explicit layer_ids for aux hidden capture."

KIMI_TRACEBACK = f"""\
[2026-08-28 05:10:05 TP0] Traceback (most recent call last):
[2026-08-28 05:10:05 TP0]   File "/usr/lib/python3.11/site-packages/sglang/srt/speculative/dspark_worker.py", line 88, in __init__
[2026-08-28 05:10:05 TP0]     self.target_worker.model_runner.model.set_dspark_layers_to_capture(layer_ids)
[2026-08-28 05:10:05 TP0]   File "/usr/lib/python3.11/site-packages/sglang/srt/models/kimi_k3.py", line 2892, in set_dspark_layers_to_capture
[2026-08-28 05:10:05 TP0]     raise ValueError(
[2026-08-28 05:10:05 TP0] \x1b[31mValueError: {MESSAGE}\x1b[0m
"""
BAILING_TRACEBACK = f"""\
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/speculative/dspark_worker.py", line 88, in __init__
    self.target_worker.model_runner.model.set_dspark_layers_to_capture(layer_ids)
  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/models/bailing_moe_v3.py", line 1665, in set_dspark_layers_to_capture
    raise ValueError(
ValueError: {MESSAGE}
"""


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"browser tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def playwright_api():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install playwright)")
    if not os.path.exists(CHROMIUM):
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        import errordb.publish.api  # noqa: F401
    except ImportError:
        _unavailable("errordb.publish.api (issue 6) is missing: the site build calls its write_api")
    with sync_playwright() as api:
        yield api


@pytest.fixture(scope="module")
def browser(playwright_api):
    browser = playwright_api.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def db_path(tmp_path_factory) -> Path:
    from errordb.store import ingest

    path = tmp_path_factory.mktemp("browser-db") / "errordb.db"
    ingest(None, path)
    return path


@pytest.fixture(scope="module")
def site(db_path, tmp_path_factory) -> Path:
    from errordb.publish.site import build_site

    out = tmp_path_factory.mktemp("browser-site") / "site"
    build_site(db_path, out, base_url=PREFIX)
    return out


class _SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site under PREFIX only; a missing file gets 404.html with status 404."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".json": "application/json", "": "application/json"}

    def translate_path(self, path):
        path = urlsplit(path).path
        if not path.startswith(PREFIX):
            return str(Path(self.directory) / "__outside_the_prefix__")
        return super().translate_path("/" + path[len(PREFIX):])

    def send_error(self, code, message=None, explain=None):
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.is_file():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_SiteHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}{PREFIX}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


class Watch:
    """Console errors, page errors, failed or foreign requests and error responses of a page."""

    def __init__(self, page, origin: str):
        self.problems: list[str] = []
        self.origin = origin
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text} at {m.location.get('url')}"))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        # ERR_ABORTED is a load cut short by the next navigation (a favicon, say), not a failure.
        page.on("requestfailed", lambda r: "ERR_ABORTED" in (r.failure or "") or self.problems.append(f"request failed: {r.url} ({r.failure})"))
        page.on("request", lambda r: r.url.startswith((origin, "data:")) or self.problems.append(f"request to another host: {r.url}"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))


@pytest.fixture
def new_page(browser, server):
    """Open pages in fresh browser contexts (closed after the test): ``page, watch = new_page()``."""
    contexts = []

    def open_page(origin: str | None = None, **options):
        context = browser.new_context(**options)
        contexts.append(context)
        page = context.new_page()
        return page, Watch(page, origin or server.split(PREFIX)[0])

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def explain_page(browser, server):
    """One search page (it has the explain box too) for all the agreement cases."""
    context = browser.new_context()
    page = context.new_page()
    watch = Watch(page, server.split(PREFIX)[0])
    page.goto(server + "search/index.html")
    yield page, watch
    context.close()


def fetch_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


# Crawling ---------------------------------------------------------------------------------------


def test_every_page_loads_cleanly_and_every_internal_link_resolves(new_page, server, site):
    page, watch = new_page()
    queue, seen_pages, seen_files = [server], set(), set()
    fragments: list[tuple[str, str, str]] = []
    ids: dict[str, set[str]] = {}
    external: set[str] = set()
    while queue:
        url = queue.pop(0)
        if url in seen_pages:
            continue
        seen_pages.add(url)
        response = page.goto(url, wait_until="load")
        assert response.status == 200, url
        assert page.locator("h1").count() == 1, url
        ids[url] = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
        links = page.eval_on_selector_all(
            "a[href], link[href], script[src], img[src]", "els => els.map(e => e.href || e.src)"
        )
        for link in links:
            target, fragment = urldefrag(link)
            if not target.startswith(server.split(PREFIX)[0]):
                assert link.startswith("https://"), (url, link)  # only https links leave the site
                external.add(link)
                continue
            assert target.startswith(server), (url, link)  # the sub-path is kept
            if fragment:
                fragments.append((url, target, fragment))
            if target.endswith((".html", "/")):
                queue.append(target)
            elif target not in seen_files:
                seen_files.add(target)
                assert fetch_status(target) == 200, (url, target)
    assert watch.problems == []
    assert len(seen_pages) >= 18
    expected = {f"{server}errors/{slug}/index.html" for slug in ("dspark-aux-hidden-capture-requires-pp-1",)}
    assert expected <= seen_pages
    assert any(f.endswith("/api/patterns.json") for f in seen_files)
    for source, target, fragment in fragments:
        assert fragment in ids.get(target, set()), (source, target, fragment)
    assert {urlsplit(link).netloc for link in external} == {"github.com"}
    # Every HTML file of the build was reached by links.
    built = {f"{server}{p.relative_to(site).as_posix()}" for p in site.rglob("*.html") if p.name != "404.html"}
    reached = {u if not u.endswith("/") else u + "index.html" for u in seen_pages}
    assert built <= reached, built - reached


def test_a_missing_page_gets_the_404_page_with_working_styles(new_page, server):
    page, watch = new_page()
    response = page.goto(server + "no/such/page/", wait_until="load")
    assert response.status == 404
    assert page.locator("h1").inner_text() == "Page not found"
    # The stylesheet loaded from the base URL even at this depth.
    assert page.evaluate("getComputedStyle(document.querySelector('.site-header')).display") == "flex"
    assert [p for p in watch.problems if "no/such/page" not in p] == []


# Search -----------------------------------------------------------------------------------------


def search(page, query: str) -> list[str]:
    page.fill("#search-input", query)
    page.press("#search-input", "Enter")
    page.wait_for_selector('#search-status[data-done="true"]')
    return page.eval_on_selector_all("#search-results li", "els => els.map(e => e.dataset.recordId)")


def test_search_finds_records(new_page, server):
    page, watch = new_page()
    page.goto(server + "search/index.html")
    assert sorted(search(page, "layer_ids")) == sorted([KIMI_VALUE_ERROR, BAILING_VALUE_ERROR])
    assert search(page, "PP=1 NotImplementedError") == [KIMI_PP_ERROR]
    assert search(page, "bailing") == [BAILING_VALUE_ERROR]
    assert search(page, "no such words anywhere") == []
    assert "No error matches" in page.inner_text("#search-status")
    assert "q=no+such+words" in page.url
    # A link from the results opens the error page.
    search(page, "kimi_k3 ValueError")
    page.click("#search-results a")
    page.wait_for_load_state("load")
    assert page.url.endswith("/errors/dspark-requires-explicit-layer-ids-for-aux-hidden-b318b4/index.html")
    # A search URL can be shared.
    page.goto(server + "search/index.html?q=aux+hidden")
    page.wait_for_selector('#search-status[data-done="true"]')
    assert len(page.eval_on_selector_all("#search-results li", "els => els")) == 3
    assert watch.problems == []


# The explain box ---------------------------------------------------------------------------------


def explain_in_box(page, text: str) -> list[dict]:
    page.evaluate("document.getElementById('explain-result').removeAttribute('data-done')")
    page.fill("#explain-input", text)
    page.click("#explain-form button[type=submit]")
    page.wait_for_selector('#explain-result[data-done="true"]')
    return page.eval_on_selector_all(
        "#explain-result li.match",
        """els => els.map(e => ({id: e.dataset.recordId, score: Number(e.dataset.score),
            evidence: Array.from(e.querySelectorAll('.evidence li')).map(li => [li.dataset.kind, Number(li.dataset.points)])}))""",
    )


def explain_in_js(page, text: str) -> list[dict]:
    return page.evaluate(
        """text => errordbExplain.explainText(text).then(a => a.matches.map(m => ({
            id: m.record.id, score: m.score, evidence: m.evidence.map(e => [e.kind, e.points])})))""",
        text,
    )


def explain_in_python(db_path: Path, text: str) -> list[dict] | None:
    """``errordb explain``'s matches, or None while the Python traceback parser is missing."""
    try:
        import errordb.explainer.parse  # noqa: F401
    except ImportError:
        return None
    from errordb import explain

    result = explain(text, str(db_path))
    return [{"id": m.id, "score": m.score, "evidence": [[e.kind, e.points] for e in m.evidence]} for m, _ in result.matches]


#: Inputs, and the records that docs/matching.md says come first (all of them when tied).
CASES = {
    "kimi traceback": (KIMI_TRACEBACK, [KIMI_VALUE_ERROR]),
    "bailing traceback": (BAILING_TRACEBACK, [BAILING_VALUE_ERROR]),
    "bare message": (MESSAGE, [BAILING_VALUE_ERROR, KIMI_VALUE_ERROR]),
    "class and message": (f"ValueError: {MESSAGE}", [BAILING_VALUE_ERROR, KIMI_VALUE_ERROR]),
    "pp message": ("NotImplementedError: DSPARK aux hidden capture requires PP=1.", [KIMI_PP_ERROR]),
    **{f"examples/{p.name}": (p.read_text(encoding="utf-8"), None) for p in sorted(EXAMPLES.glob("*.log"))},
}
EXAMPLE_TOPS = {
    "examples/kimi_k3_layer_ids.log": [KIMI_VALUE_ERROR],
    "examples/kimi_k3_eight_ranks.log": [KIMI_VALUE_ERROR],
    "examples/bailing_layer_ids.log": [BAILING_VALUE_ERROR],
    "examples/kimi_k3_pp.log": [KIMI_PP_ERROR],
}


def top(matches: list[dict]) -> list[str]:
    return sorted(m["id"] for m in matches if m["score"] == matches[0]["score"]) if matches else []


def test_explain_box_identifies_kimi_and_bailing_and_shows_both_for_a_bare_message(new_page, server):
    page, watch = new_page()
    page.goto(server)
    kimi = explain_in_box(page, KIMI_TRACEBACK)
    assert kimi[0]["id"] == KIMI_VALUE_ERROR and kimi[0]["score"] > kimi[1]["score"]
    assert [k for k, _ in kimi[0]["evidence"]] == ["message-full", "message-specific", "class-agrees", "frame-file", "frame-function", "frame-line"]
    assert page.locator("[data-tie]").count() == 0
    page.screenshot(path=str(_artifact("index-explain.png")), full_page=True)
    assert page.locator("#explain-result li.match.top a").get_attribute("href") == "errors/dspark-requires-explicit-layer-ids-for-aux-hidden-b318b4/index.html"
    bailing = explain_in_box(page, BAILING_TRACEBACK)
    assert bailing[0]["id"] == BAILING_VALUE_ERROR and bailing[0]["score"] > bailing[1]["score"]
    bare = explain_in_box(page, MESSAGE)
    assert top(bare) == sorted([KIMI_VALUE_ERROR, BAILING_VALUE_ERROR])
    tie = page.inner_text("[data-tie]")
    assert tie.startswith("Equally likely: 2 records share this message")
    assert "kimi_k3.py:2892" in tie and "bailing_moe_v3.py:1665" in tie and "paste the whole traceback" in tie
    nothing = explain_in_box(page, "KeyError: 'completely unrelated'")
    assert nothing == [] and "No known error matches this message." in page.inner_text("#explain-result")
    assert watch.problems == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_explain_box_agrees_with_errordb_explain(explain_page, db_path, case):
    text, expected_top = CASES[case]
    page, watch = explain_page
    in_js = explain_in_js(page, text)
    python = explain_in_python(db_path, text)
    if python is not None:
        assert in_js == python
    assert top(in_js) == sorted(expected_top or EXAMPLE_TOPS[case])
    assert watch.problems == []


def test_scoring_helpers_agree_with_python(new_page, server):
    from errordb.explainer.match import FRAME_LINE, LINE_HORIZON

    page, _ = new_page()
    page.goto(server)
    distances = list(range(0, 260))
    js = page.evaluate(f"ds => ds.map(d => errordbExplain.round1({FRAME_LINE} * Math.max(0, 1 - d / {LINE_HORIZON})))", distances)
    assert js == [round(FRAME_LINE * max(0.0, 1 - d / LINE_HORIZON), 1) for d in distances]
    sums = [100 + 30 + 20 + 10 + round(FRAME_LINE * max(0.0, 1 - d / LINE_HORIZON), 1) for d in range(0, 200, 7)]
    assert page.evaluate("xs => xs.map(errordbExplain.round1)", sums) == [round(x, 1) for x in sums]
    checks = page.evaluate(
        r"""() => {
          const t = (p, s) => { const r = errordbExplain.translate(p); return new RegExp('^(?:' + r.source + ')$', r.flags).exec(s); };
          return [t('(?P<n>\\d+) items', '12 items').groups.n, !!t('(?i)HELLO', 'hello'), !!t('\\Afoo\\z', 'foo'),
                  !!t('[]a]+', ']a'), errordbExplain.sameFile('C:\\venv\\Lib\\site-packages\\pkg\\m.py', 'src/pkg/m.py'),
                  errordbExplain.sameFile('/x/other/m.py', 'src/pkg/m.py'),
                  errordbExplain.sameFile('/usr/lib/python3.11/argparse.py', 'Lib/argparse.py'),
                  errordbExplain.sameFile('/srv/app/argparse.py', 'Lib/argparse.py')];
        }"""
    )
    assert checks == ["12", True, True, True, True, False, True, False]
    from errordb.explainer.match import same_file

    assert same_file("C:\\venv\\Lib\\site-packages\\pkg\\m.py", "src/pkg/m.py") and not same_file("/x/other/m.py", "src/pkg/m.py")
    assert same_file("/usr/lib/python3.11/argparse.py", "Lib/argparse.py") and not same_file("/srv/app/argparse.py", "Lib/argparse.py")


def test_the_rules_for_matches_without_frames_agree_with_python(new_page, server):
    from errordb.explainer.match import BUILTIN_EXCEPTIONS, _own_class, moved_file, raised_in_another_package, same_file
    from errordb.explainer.parse import Frame
    from errordb.records.patterns import literal_weight

    page, _ = new_page()
    page.goto(server)
    patterns = ["'.*' object has no attribute '.*'", "No module named .+", "(?s).*", r"CUDA error: .*", r"Exceeded \d+ redirects\.",
                r"shape \(\d+, [^)]+\) must match (?:[a-z_]+) here", r"(?i)Model architectures .* are not supported for now",
                r"\[IpcModelLoader\] After IPC mapping, .* remain", r"a\\[b]c"]  # fmt: skip
    assert page.evaluate("ps => ps.map(errordbExplain.literalWeight)", patterns) == [literal_weight(p) for p in patterns]
    paths = [("/venv/lib/python3.11/site-packages/vllm/model_executor/models/registry.py", "python/sglang/srt/models/registry.py"),
             ("/venv/lib/python3.11/site-packages/sglang/srt/models/registry.py", "python/sglang/srt/models/registry.py"),
             ("/venv/lib/python3.11/site-packages/click/core.py", "src/click/core.py"), ("/x/other/core.py", "src/click/core.py"),
             ("/srv/main.py", "main.py"), ("/srv/app/routing.py", "fastapi/routing.py"),
             ("/venv/site-packages/vllm/distributed/pynccl_wrapper.py", "python/sglang/srt/distributed/pynccl_wrapper.py"),
             ("/venv/site-packages/vllm/distributed/pynccl_wrapper.py", "vllm/distributed/pynccl_wrapper.py"),
             ("/usr/lib/python3.11/argparse.py", "src/argparse.py")]  # fmt: skip
    assert page.evaluate("ps => ps.map(p => errordbExplain.sameFile(p[0], p[1]))", paths) == [same_file(*p) for p in paths]
    records = [{"errorClass": name, "filePath": path} for name, path in [
        *((builtin, "pkg/m.py") for builtin in sorted(BUILTIN_EXCEPTIONS)),
        ("torch.OutOfMemoryError", "python/sglang/x.py"), ("sglang.srt.errors.SchedulerError", "python/sglang/x.py"),
        ("TooManyRedirects", "src/requests/sessions.py"), ("requests.exceptions.TooManyRedirects", "src/requests/sessions.py")]]  # fmt: skip
    assert page.evaluate("rs => rs.map(errordbExplain.ownClass)", records) == [_own_class(r) for r in records]
    moved = [("/app/src/pydantic/pydantic/fields.py", "pydantic/v1/fields.py"), ("/venv/lib/python3.11/site-packages/other/pydantic/fields.py", "pydantic/v1/fields.py"),
             ("/venv/site-packages/sglang/srt/kimi_k3.py", "python/sglang/srt/models/bailing_moe_v3.py"), ("/x/fields.py", "fields.py"),
             ("C:\\venv\\Lib\\site-packages\\click\\core.py", "src/click/core.py")]  # fmt: skip
    assert page.evaluate("ps => ps.map(p => errordbExplain.movedFile(p[0], p[1]))", moved) == [moved_file(*p) for p in moved]
    # The innermost frame in another installed package than the record's: a quote, under another class.
    inner = [("/venv/lib/python3.10/site-packages/openai/_base_client.py", "vllm/sampling_params.py"),
             ("/usr/local/lib/python3.11/dist-packages/pydantic/main.py", "vllm/config.py"),
             ("/venv/site-packages/vllm/config.py", "vllm/config.py"), ("/srv/app/main.py", "vllm/config.py"),
             ("/venv/site-packages/six.py", "vllm/config.py"), ("/venv/site-packages/sglang/x.py", "python/sglang/y.py")]  # fmt: skip
    frames = [{"file": frame, "line": 1, "function": "f"} for frame, _ in inner]
    assert page.evaluate("ps => ps.map(p => errordbExplain.raisedInAnotherPackage({filePath: p[1]}, [p[0]]))",
                         [(f, r) for f, (_, r) in zip(frames, inner)]) == [
        raised_in_another_package({"filePath": r}, [Frame(f, 1, "f", None)]) for f, r in inner] == [True, True, False, False, False, False]


def test_reworded_messages_are_read_alike_by_python_and_the_browser(new_page, server):
    from errordb.explainer.match import near_match, reworded

    page, _ = new_page()
    page.goto(server)
    pairs = [("a b c d", "a b c d"), ("Free memory on device ({free}/{total} GiB)", "Free memory on device cuda:0 (3.1/79 GiB)"),
             ("", "x"), ("Run `huggingface-cli login` first.", "Run `hf auth login` first."), ("x " * 300, "x y " * 150),
             ("DSPARK requires explicit layer_ids", "dspark NEEDS explicit layer ids"), ("é ü", "é"),
             ("cannot save {n} rows: the table is read-only", "cannot save 3 rows: table is read only"), ("{a} {b}", "x")]  # fmt: skip
    assert page.evaluate("ps => ps.map(p => errordbExplain.reworded(p[0], p[1]))", pairs) == [list(reworded(a, b)) for a, b in pairs]
    record = {"id": "1" * 16, "slug": "s", "repo": "o/p", "errorClass": "OSError", "messagePattern": "Run `hf auth login` first\\.",
              "errorMessage": "Run `hf auth login` first.", "filePath": "src/transformers/utils/hub.py", "function": "Hub.cached_files", "lineNumber": 543}  # fmt: skip
    frames = [{"file": "/venv/lib/python3.12/site-packages/transformers/utils/hub.py", "line": 560, "function": "cached_files"}]
    exc = {"type": "OSError", "message": "Run `huggingface-cli login` first.", "frames": frames}
    (js,) = page.evaluate("([r, e]) => errordbExplain.rank([r], e)", [record, exc])
    python = near_match(record, "OSError", exc["message"], [SimpleNamespace(**f) for f in frames])
    assert (js["score"], [(e["kind"], e["points"], e["detail"]) for e in js["evidence"]]) == (
        python.score, [(e.kind, e.points, e.detail) for e in python.evidence])


def test_a_raise_moved_to_another_file_is_found_by_its_printed_line_alike(new_page, server):
    from errordb.explainer.match import score_candidate
    from errordb.explainer.parse import parse_text

    page, _ = new_page()
    page.goto(server)
    line = 'assert res.status_code == 200, f"{res=}, {res.text=}"'
    record = {"id": "1" * 16, "slug": "s", "repo": "sgl-project/sglang", "errorClass": "AssertionError", "errorMessage": "m",
              "messagePattern": r"res=.+, res\.text=.+", "filePath": "python/sglang/srt/entrypoints/http_server.py",
              "function": "_execute_server_warmup", "lineNumber": 2376, "sourceCode": "        " + line, "sourceCodeStart": 2376}  # fmt: skip
    in_js = {**record, "raiseLine": line}
    traceback = (f'Traceback (most recent call last):\n  File "{{path}}", line 621, in _wait_and_warmup\n    {line}\n'
                 "AssertionError: res=<Response [502]>, res.text=''\n")  # fmt: skip
    paths = ["/home/sglang/python/sglang/srt/server.py", "/venv/lib/python3.11/site-packages/vllm/server.py"]
    for path, printed in [(path, printed) for path in paths for printed in (line, "assert res.ok")]:
        text = traceback.replace("{path}", path).replace(line, printed)
        (exc,) = page.evaluate("t => errordbExplain.parse(t)", text)
        assert [f["source"] for f in exc["frames"]] == [printed]
        js = page.evaluate("([r, e]) => errordbExplain.rank([r], e)", [in_js, exc])
        (parsed,) = parse_text(text)
        python = score_candidate(record, parsed.exc_type, parsed.message, parsed.frames)
        assert [(m["score"], [(e["kind"], e["detail"]) for e in m["evidence"]]) for m in js] == (
            [(python.score, [(e.kind, e.detail) for e in python.evidence])] if python else [])
        assert (python is not None) == (path == paths[0] and printed == line)


def test_bare_classes_generic_messages_under_another_class_and_wrapped_lines_are_judged_alike(new_page, server):
    from errordb.explainer.match import score_candidate

    page, _ = new_page()
    page.goto(server)
    frames = [{"file": "/venv/lib/python3.11/site-packages/pkg/m.py", "line": 3, "function": "f"}]
    base = {"id": "1" * 16, "slug": "s", "repo": "o/pkg", "filePath": "src/pkg/m.py", "function": "A.f", "lineNumber": 3}
    cases = [
        ({**base, "errorClass": "NotImplementedError", "errorMessage": "", "messagePattern": ""}, "NotImplementedError", ""),
        ({**base, "errorClass": "NotImplementedError", "errorMessage": "", "messagePattern": ""}, "NotImplementedError", "some message"),
        ({**base, "errorClass": "NotImplementedError", "errorMessage": "", "messagePattern": ""}, "ValueError", ""),
        ({**base, "errorClass": "KeyError", "errorMessage": "'x'", "messagePattern": "'.+'"}, "ValueError", "'x'"),
        ({**base, "errorClass": "KeyError", "errorMessage": "'x'", "messagePattern": "'.+'"}, "KeyError", "'x'"),
        ({**base, "errorClass": "FastAPIError", "errorMessage": "m", "messagePattern": r"If you are using a return type annotation that is not valid\."},
         "FastAPIError", "If you are using a return type \nannotation that is not valid."),  # wrapped by a terminal
    ]  # fmt: skip
    js = page.evaluate("cs => cs.map(c => errordbExplain.rank([c[0]], {type: c[1], message: c[2], frames: c[3]}))",
                       [[record, exc_type, message, frames] for record, exc_type, message in cases])  # fmt: skip
    python = [score_candidate(record, exc_type, message, [SimpleNamespace(**f) for f in frames]) for record, exc_type, message in cases]
    assert [[(m["score"], [e["kind"] for e in m["evidence"]]) for m in found] for found in js] == [
        [(m.score, [e.kind for e in m.evidence])] if m else [] for m in python]
    assert [bool(m) for m in python] == [True, False, False, False, True, True]


def test_messages_cut_short_are_read_alike_by_python_and_the_browser(new_page, server):
    from errordb.records.patterns import cut_match

    page, _ = new_page()
    page.goto(server)
    message = "The checkpoint you are trying to load has model type `internvl` but Transformers does not recognize this architecture."
    patterns = [r"The checkpoint you are trying to load has model type `.*` but Transformers does not recognize this architecture\.(?:\n\nYou can update .*)?",
                r"Model architectures .* are not supported for now\. Supported architectures: .*", r"x-?\d+y(\S+)(?:a|b)?", r"a[)(](?:b)?",
                r"Exceeded \d+ redirects\.", r"\(\.\*\) (.+)(.*?)z", "abc", "(?s).*", r"[^/]+ is not (?:a|b)"]  # fmt: skip
    cases = [(p, m[:cut]) for p in patterns for m in (message, "Model architectures ['X'] are not supported for now.", "x-12yq", "a(b",
             "Exceeded 30 redirects.", "(.*) zz", "abcd") for cut in range(0, len(m) + 1, 7)]  # fmt: skip
    expected = [cut_match(p, m) for p, m in cases]
    assert page.evaluate("cs => cs.map(c => errordbExplain.cutMatch(c[0], c[1]))", cases) == expected
    assert sum(e is not None for e in expected) > 20 and sum(e is None for e in expected) > 20


# Without JavaScript, on a phone, in the dark ------------------------------------------------------


def test_pages_work_without_javascript(new_page, server):
    page, watch = new_page(java_script_enabled=False)
    page.goto(server + "errors/dspark-requires-explicit-layer-ids-for-aux-hidden-3083cb/index.html")
    assert page.locator("#source mark.hl").inner_text().strip() == "raise ValueError("
    assert page.locator("#reproduction table.side-by-side").is_visible()
    page.goto(server)
    assert not page.locator("#explain-form").is_visible()
    assert "needs JavaScript" in page.inner_text(".explain")
    page.goto(server + "search/index.html")
    assert page.locator("#search-fallback li.item").count() == 3 and page.locator("#search-fallback").is_visible()
    assert watch.problems == []


def test_the_site_works_from_file_urls(new_page, site):
    page, watch = new_page(origin=site.as_uri())
    page.goto((site / "errors" / "dspark-aux-hidden-capture-requires-pp-1" / "index.html").as_uri())
    assert page.evaluate("getComputedStyle(document.querySelector('.site-header')).display") == "flex"
    page.click("a.brand")
    page.wait_for_load_state("load")
    assert page.url == (site / "index.html").as_uri()
    page.click("text=sgl-project/sglang")
    page.wait_for_load_state("load")
    assert page.url.endswith("/repos/sgl-project/sglang/index.html") and page.locator("li.item").count() == 3
    # The explain box and search need HTTP (browsers refuse fetch on file://) and say so.
    page.goto((site / "index.html").as_uri())
    page.fill("#explain-input", MESSAGE)
    page.click("#explain-form button[type=submit]")
    page.wait_for_selector('#explain-result[data-done="true"]')
    assert "needs the site served over HTTP" in page.inner_text("#explain-result")
    page.goto((site / "search" / "index.html").as_uri() + "?q=layer_ids")
    page.wait_for_function("document.getElementById('search-status').textContent.length > 0")
    assert "needs the site served over HTTP" in page.inner_text("#search-status")
    assert page.locator("#search-fallback").is_visible()
    assert watch.problems == []


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("error-page.png", {"viewport": {"width": 1280, "height": 900}}),
        ("error-page-phone.png", {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True, "has_touch": True}),
        ("error-page-dark.png", {"viewport": {"width": 1280, "height": 900}, "color_scheme": "dark"}),
    ],
)
def test_error_page_screenshots_fit_the_screen(new_page, server, name, options):
    page, watch = new_page(**options)
    page.goto(server + "errors/dspark-requires-explicit-layer-ids-for-aux-hidden-3083cb/index.html")
    # Nothing wider than the screen: long code scrolls inside its own box.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    if options.get("color_scheme") == "dark":
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    page.screenshot(path=str(_artifact(name)), full_page=True)
    assert _artifact(name).stat().st_size > 10_000
    assert watch.problems == []


def test_every_cell_of_every_table_is_on_a_phones_screen(new_page, server):
    """At 390 px the side-by-side comparison and "Same message, other places" are stacked: every
    cell is inside the screen, with its column's name, and none needs a sideways scroll."""
    page, watch = new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True)
    page.goto(server + "errors/dspark-requires-explicit-layer-ids-for-aux-hidden-3083cb/index.html")
    cells = page.evaluate("""() => [...document.querySelectorAll('table td, table tbody th')].map(c => {
        const box = c.getBoundingClientRect();
        return {right: box.right, width: box.width, label: getComputedStyle(c, '::before').content, text: c.textContent.trim()};
    })""")
    assert len(cells) > 10
    assert all(cell["right"] <= 390 + 0.5 and cell["width"] > 0 for cell in cells), [c for c in cells if c["right"] > 390.5][:3]
    assert any(c["label"] == '"Bailing MoE v3: "' and "DSPARK requires explicit layer_ids" in c["text"] for c in cells)
    assert any(c["label"] == '"Exception: "' and c["text"] == "ValueError" for c in cells)
    wide, _ = new_page(viewport={"width": 1280, "height": 900})
    wide.goto(server + "errors/dspark-requires-explicit-layer-ids-for-aux-hidden-3083cb/index.html")
    assert wide.evaluate("getComputedStyle(document.querySelector('table.side-by-side tr')).display") == "table-row"
    assert watch.problems == []
