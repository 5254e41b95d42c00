"""What deriving project ids from git remotes costs (issue 34): registration and the hook's scope lookup.

Method: in-process, on real files in a temporary data root. ``origin`` is the whole added cost of a
registration (``core/gitremote.py:origin``: three ``git`` subprocesses) for a clone with a remote and
for a plain folder (one ``git`` call that finds no work tree). ``register`` is one full
``projects.register_here`` into a registry already holding 20 projects. ``scope_for`` is what every
hook pays (read and parse the registry, longest-ancestor match), on the same 20 projects written in
format 1 (before this change) and format 2 (remote and sub-path recorded). Results go to
docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from _util import machine, summary, write_section

from cmrunner.core import gitremote, projects
from cmrunner.core.home import DataPaths

RUNS = 30
LOOKUPS = 500
PROJECTS = 20


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def _timed(fn, runs: int) -> list[float]:
    found = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        found.append((time.perf_counter() - start) * 1000)
    return found


def main() -> None:
    root = tempfile.mkdtemp(prefix="cm-bench-projids-")
    bare = os.path.join(root, "app.git")
    _git("init", "-q", "--bare", bare)
    clone = os.path.join(root, "app")
    _git("clone", "-q", bare, clone)
    plain = os.path.join(root, "plain")
    os.makedirs(plain)
    rows = []
    rows.append(("`origin`: a clone with a remote", summary(_timed(lambda: gitremote.origin(clone), RUNS))))
    rows.append(("`origin`: a folder outside git", summary(_timed(lambda: gitremote.origin(plain), RUNS))))

    folders = []
    for n in range(PROJECTS):
        folder = os.path.join(root, "p", f"f{n}")
        os.makedirs(folder)
        folders.append(folder)
    paths = DataPaths(os.path.join(root, "data"))
    for folder in folders:
        projects.register_here(paths, folder, os.path.basename(folder))
    count = [0]

    def register_one() -> None:
        count[0] += 1
        target = os.path.join(root, "clones", f"c{count[0]}")
        _git("clone", "-q", "--no-checkout", bare, target)
        start = time.perf_counter()
        projects.register_here(paths, target, "app")
        register_ms.append((time.perf_counter() - start) * 1000)

    register_ms: list[float] = []
    for _ in range(RUNS):
        register_one()
    rows.append(("`register`: a clone, 20 projects registered", summary(register_ms)))

    with open(paths.registry, encoding="utf-8") as handle:
        current = json.load(handle)["projects"][:PROJECTS]
    cwd = os.path.join(folders[-1], "src")
    for version in (1, 2):
        entries = [{k: p[k] for k in ("id", "path", "name", "registeredAt")} for p in current]
        if version == 2:
            for n, entry in enumerate(entries):
                entry.update(remote=f"github.com/owner/repo-{n}", subpath="")
        with open(paths.registry, "w", encoding="utf-8") as handle:
            json.dump({"version": version, "projects": entries}, handle, indent=2)
        timed = summary(_timed(lambda: projects.scope_for(paths, cwd), LOOKUPS))
        rows.append((f"`scope_for` (hook path), format {version} registry, {PROJECTS} projects", timed))

    lines = [f"Measured on {machine()}; load average at the end {os.getloadavg()[0]:.2f}.", "",
             "| what | runs | median ms | p95 ms | max ms |", "|---|---|---|---|---|"]
    for name, s in rows:
        lines.append(f"| {name} | {s['n']} | {s['median']:.2f} | {s['p95']:.2f} | {s['max']:.2f} |")
    body = "\n".join(lines)
    print(body)
    if "--no-write" not in sys.argv:
        write_section("project-ids", body)


if __name__ == "__main__":
    main()
