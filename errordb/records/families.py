"""Beside the records: failure families (the explanation of each ``backgroundTag``, in
``families.toml``) and the dataset's own settings (``dataset.toml``)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from errordb.errors import RecordError
from errordb.records.conventions import normal_site_url

FAMILIES_FILE = "families.toml"
DATASET_FILE = "dataset.toml"


@dataclass(frozen=True)
class Family:
    tag: str
    title: str
    summary: str
    explanation: str


def load_families(path: Path) -> dict[str, Family]:
    """Families from a TOML file; a missing file means no families."""
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecordError(str(path), None, None, f"malformed TOML: {exc}") from None
    families = {}
    for tag, entry in sorted(data.items()):
        if not isinstance(entry, dict):
            raise RecordError(str(path), None, tag, "must be a table with title, summary and explanation")
        for key in ("title", "summary", "explanation"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise RecordError(str(path), None, f"{tag}.{key}", "must be a non-empty string")
        unknown = set(entry) - {"title", "summary", "explanation"}
        if unknown:
            raise RecordError(str(path), None, f"{tag}.{sorted(unknown)[0]}", "unknown key")
        families[tag] = Family(tag, entry["title"].strip(), entry["summary"].strip(), " ".join(entry["explanation"].split()))
    return families


def families_for(paths: list[Path]) -> Path | None:
    """The families file that belongs to the records at ``paths``: next to the first folder given."""
    return _beside(paths, FAMILIES_FILE)


def _beside(paths: list[Path], name: str) -> Path | None:
    for path in paths:
        folder = path if path.is_dir() else path.parent
        for candidate in (folder, *folder.parents):
            if (candidate / name).exists():
                return candidate / name
    return None


def dataset_site_url(paths: list[Path]) -> str | None:
    """The dataset's own site URL: ``site_url`` in the ``dataset.toml`` beside the records at
    ``paths`` (where the dataset's site is published), or None."""
    path = _beside(paths, DATASET_FILE)
    if path is None:
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecordError(str(path), None, None, f"malformed TOML: {exc}") from None
    unknown = set(data) - {"site_url"}
    if unknown:
        raise RecordError(str(path), None, sorted(unknown)[0], "unknown key (dataset.toml knows site_url)")
    if "site_url" not in data:
        return None
    value = data["site_url"]
    site = normal_site_url(value) if isinstance(value, str) else None
    if site is None:
        raise RecordError(str(path), None, "site_url", "must be an http(s) URL such as https://errordb.example/")
    return site
