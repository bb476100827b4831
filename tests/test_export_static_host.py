"""The API on a plain static host: Python's http.server serving the exported folder as it is.

``/api/errors/<id>`` (the URL the record pages link) must answer with the record's JSON with no
server configuration; the links inside the API (page URLs, percent-encoded tags) must resolve.
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import ALL_IDS, record_file
from test_export_data import build_db

from errordb.publish.api import export_api
from errordb.store import connect


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the name http.server uses
        pass


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """The exported site folder served on 127.0.0.1 at a free port; yields the base URL."""
    site = tmp_path_factory.mktemp("site")
    db = connect(build_db(tmp_path_factory.mktemp("store"), 12))
    export_api(db, site / "api", page_size=3)
    db.close()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def get(url: str) -> tuple[bytes, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return response.read(), response.headers["Content-Type"]


def test_errors_id_without_extension_serves_the_record_json(host):
    for record_id in ALL_IDS:
        body, content_type = get(f"{host}/api/errors/{record_id}")
        assert body == record_file(record_id).read_bytes()
        assert json.loads(body)["record"]["id"] == record_id
        # No extension, so no type is known: documented in docs/api.md with the host settings that fix it.
        assert content_type == "application/octet-stream"


def test_errors_id_json_is_served_as_json(host):
    body, content_type = get(f"{host}/api/errors/{ALL_IDS[0]}.json")
    assert body == record_file(ALL_IDS[0]).read_bytes()
    assert content_type == "application/json"


def test_links_inside_the_api_resolve_on_the_host(host):
    manifest = json.loads(get(f"{host}/api/errors/index.json")[0])
    page = json.loads(get(host + manifest["pages"][1]["url"])[0])
    for item in page["items"]:
        assert json.loads(get(host + item["jsonUrl"])[0])["record"]["slug"] == item["slug"]
    tags = json.loads(get(f"{host}/api/tags.json")[0])
    entries = tags["items"] + [item for ref in tags["pages"] for item in json.loads(get(host + ref["url"])[0])["items"]]
    plus = next(entry for entry in entries if entry["tag"] == "a+b")
    assert plus["listingUrl"] == "/api/tags/a%2Bb.json"
    assert json.loads(get(host + plus["listingUrl"])[0])["tag"] == "a+b"


def test_bulk_files_download(host):
    version = json.loads(get(f"{host}/api/version.json")[0])
    for download in version["downloads"].values():
        body, _ = get(host + download["url"])
        assert len(body) == download["bytes"]
        assert hashlib.sha256(body).hexdigest() == download["sha256"]
