"""The store of the real-world corpus: the releases of projects.toml, from PyPI, harvested.

    python bench/realworld/dataset.py        # fetch and harvest (cached); print the records trees

Each release is fetched the ordinary way, ``pip download NAME==VERSION --no-deps
--only-binary :all:`` (a wheel holds the same Python source as the sdist, and needs no build),
its package's ``.py`` files are unpacked, and :func:`errordb.harvest.drafts.harvest` turns
them into draft records, one records tree per project, with a fixed stand-in commit (wheels name none) and ``analyzedAt``,
so the records are the same on every machine. Everything is kept in the cache folder
(``bench/.cache/realworld``, or ``$ERRORDB_BENCH_CACHE/realworld``): a harvest is made again
only when its wheel or errordb's harvest code changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from errordb.harvest.drafts import harvest  # noqa: E402

SHA = "0" * 40
ANALYZED_AT = "2026-12-06"


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    repo: str
    package: str
    prefix: str

    def module_of(self, file_path: str) -> str | None:
        """The dotted module of a record's repository path (None: not this project's package)."""
        if not file_path.startswith(self.prefix + "/") or not file_path.endswith(".py"):
            return None
        inside = file_path[len(self.prefix) + 1 : -len(".py")].split("/")
        parts = [self.package, *inside]
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def projects() -> list[Project]:
    with open(HERE / "projects.toml", "rb") as handle:
        return [Project(**entry) for entry in tomllib.load(handle)["project"]]


def bench_cache() -> Path:
    """The benchmarks' cache folder: ``bench/.cache``, or ``$ERRORDB_BENCH_CACHE``."""
    base = os.environ.get("ERRORDB_BENCH_CACHE")
    return Path(base) if base else ROOT / "bench" / ".cache"


def cache_dir() -> Path:
    return bench_cache() / "realworld"


def project(name: str) -> Project:
    return next(p for p in projects() if p.name == name)


def fetch(project: Project, cache: Path) -> Path:
    """The project's wheel, downloaded by pip once into ``cache/wheels``."""
    folder = cache / "wheels"
    wheel_name = project.name.replace("-", "_")
    found = sorted(folder.glob(f"{wheel_name}-{project.version}-*.whl"))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", f"{project.name}=={project.version}",
                   "--no-deps", "--only-binary", ":all:", "-d", str(folder)]  # fmt: skip
        print("$", " ".join(command[2:]), file=sys.stderr)
        subprocess.run(command, check=True, stdout=sys.stderr)
        found = sorted(folder.glob(f"{wheel_name}-{project.version}-*.whl"))
    if not found:
        sys.exit(f"{folder}: pip downloaded no wheel of {project.name} {project.version}")
    return found[0]


def harvested(cache: Path, wheels: dict[Project, Path]) -> list[Path]:
    """A records tree of each project's wheel, harvested separately (as different people would,
    into one store: draft slugs are unique across repositories), made once per set of wheels
    and harvest code; trees made of others in ``cache`` are removed."""
    digest = hashlib.sha256("\0".join(wheel.name for wheel in wheels.values()).encode())
    for source in sorted((ROOT / "errordb" / "harvest").glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    records = cache / f"harvest-{digest.hexdigest()[:12]}"
    trees = [records / one.name for one in wheels]
    done = records / ".harvested"
    if not done.exists():
        for old in cache.glob("harvest-*"):  # made by other wheels or harvest code
            shutil.rmtree(old, ignore_errors=True)
        summaries = []
        for (one, wheel), tree in zip(wheels.items(), trees):
            source = cache / "source" / wheel.stem
            shutil.rmtree(source, ignore_errors=True)
            with zipfile.ZipFile(wheel) as archive:
                names = [n for n in archive.namelist() if n.startswith(f"{one.package}/") and n.endswith(".py")]
                archive.extractall(source, members=names)
            print(f"harvesting {one.name} {one.version} ...", file=sys.stderr)
            report = harvest(source / one.package, repo=one.repo, sha=SHA, out=tree,
                             prefix=one.prefix, analyzed_at=ANALYZED_AT)  # fmt: skip
            summaries.append(f"{one.name} {one.version}: {report.summary()}")
        done.write_text("\n".join(summaries) + "\n")
    return trees


if __name__ == "__main__":
    cache = cache_dir()
    print("\n".join(str(tree) for tree in harvested(cache, {one: fetch(one, cache) for one in projects()})))
