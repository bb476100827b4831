"""Publishing the store: the static site, the JSON API, the SQLite release, the preview server."""
