"""What an interpreter has installed: run *by that interpreter* (``python -I environment.py``),
it prints one JSON object and imports nothing but the standard library.

``{"python": "3.11.7", "stdlib": folder, "distributions": [{"name", "version", "location",
"files", "urls"}, ...]}``: ``files`` are the distribution's ``.py`` files as its installer
recorded them (RECORD), relative to ``location``; ``urls`` its project and home-page URLs.
"""

import importlib.metadata
import json
import os
import sys
import sysconfig


def distributions():
    seen = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name or name.lower() in seen:  # an earlier path entry shadows a later copy
            continue
        seen.add(name.lower())
        files = [str(f) for f in dist.files or () if str(f).endswith(".py") and not str(f).startswith("..")]
        urls = [u.split(",", 1)[-1].strip() for u in dist.metadata.get_all("Project-URL") or ()]
        if dist.metadata["Home-page"]:
            urls.append(dist.metadata["Home-page"])
        location = dist.locate_file("")
        yield {"name": name, "version": dist.version, "location": os.fspath(location), "files": sorted(files), "urls": urls}


def main():
    print(json.dumps({
        "python": "%d.%d.%d" % sys.version_info[:3],
        "stdlib": sysconfig.get_paths()["stdlib"],
        "distributions": sorted(distributions(), key=lambda d: d["name"].lower()),
    }))


if __name__ == "__main__":
    main()
