"""Benchmark: what memory sync adds per commit (issue 34).

Two homes ("machines") on this machine share a bare repository in a temporary folder, real git.
The memory is a profile and five project files of 20 sections each (~30 KiB). Measured, as wall
time of a real ``cm sync`` subprocess (``--runs`` each, median / p95 / max):

- ``nothing new``: no change anywhere (ls-remote only; what a retry costs when all is in sync);
- ``commit + push``: one section edited here, the remote unchanged (the common case after a commit);
- the same as the drain starts it (``cm sync --auto``: every git step and wait under the overall
  deadline ``sync.autoDeadlineSeconds``);
- ``commit + merge + push``: one section edited here and another on the other machine, which pushed
  first (fetch, merge by section of every document, publish through the Writer's path, merge commit, push).

And what the drain itself pays: ``drain.start_sync`` (reading the sync state, spawning the detached
``cm sync --auto``), timed in this process with sync set up vs not set up. Without sync nothing
else changes: the Writer's commit path is the same code either way.
Usage: `python bench/sync.py [--runs N] [--write]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, summary, write_section

from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import drain

SECTIONS = 20


def _document(title: str, tag: str) -> str:
    body = "".join(f"## {title} {i}\nA line about {title.lower()} {i} ({tag}), long enough to be realistic.\n\n"
                   for i in range(SECTIONS))
    return f"# {title}\n\n{body}"


def _home(root: str, name: str, with_memory: bool) -> tuple[str, DataPaths]:
    home = os.path.join(root, name)
    config_mod.save(home, config_mod.default_config(home))
    paths = DataPaths(config_mod.load(home).data_root)
    if with_memory:
        os.makedirs(paths.projects_dir, mode=0o700)
        open(paths.document("profile"), "w").write(_document("Profile", "p"))
        for n in range(5):
            open(paths.document(f"project:p{n}"), "w").write(_document("Project", f"p{n}"))
    return home, paths


def _cm(home: str, *args: str) -> float:
    env = dict(os.environ, COMMON_MEMORY_HOME=home)
    started = time.perf_counter()
    proc = subprocess.run([CM, *args, "--home", home], env=env, capture_output=True, timeout=120)
    took = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"cm {' '.join(args)} failed: {proc.stderr.decode()[:300]}")
    return took


def _edit(paths: DataPaths, n: int, side: str) -> None:
    target = f"project:p{n % 5}"
    text = open(paths.document(target)).read()
    old = f"## Project {n % SECTIONS}\n" if side == "a" else f"## Project {(n + 10) % SECTIONS}\n"
    open(paths.document(target), "w").write(text.replace(old, f"{old}Edit {side}{n}.\n", 1))


def measure(runs: int) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-sync-")
    try:
        remote = os.path.join(root, "remote.git")
        subprocess.run(["git", "init", "--quiet", "--bare", remote], check=True)
        home_a, paths_a = _home(root, "a", True)
        home_b, paths_b = _home(root, "b", False)
        _cm(home_a, "sync", "init", remote)
        _cm(home_b, "sync", "init", remote)
        out: dict = {"`cm sync status` (CLI start and one git call, for scale)": [], "nothing new": [],
                     "commit + push": [], "commit + push, automatic (`--auto`, under its overall deadline)": [],
                     "commit + merge + push": []}
        for n in range(runs):
            out["`cm sync status` (CLI start and one git call, for scale)"].append(_cm(home_a, "sync", "status"))
            out["nothing new"].append(_cm(home_a, "sync"))
            _edit(paths_a, n, "a")
            out["commit + push"].append(_cm(home_a, "sync"))
            _edit(paths_a, n + 2, "a")
            out["commit + push, automatic (`--auto`, under its overall deadline)"].append(_cm(home_a, "sync", "--auto"))
            _cm(home_b, "sync")
            _edit(paths_b, n, "b")
            _cm(home_b, "sync")
            _edit(paths_a, n + 1, "a")
            out["commit + merge + push"].append(_cm(home_a, "sync"))
        spawn_on, spawn_off = [], []
        home_c, paths_c = _home(root, "c", True)
        for _ in range(runs):
            started = time.perf_counter()
            drain.start_sync(paths_c, home_c, ["bench"])  # not set up: reads nothing, spawns nothing
            spawn_off.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            drain.start_sync(paths_a, home_a, ["bench"])
            spawn_on.append((time.perf_counter() - started) * 1000)
            time.sleep(1.5)  # let the background sync finish before the next spawn
        out["drain.start_sync, sync set up"] = spawn_on
        out["drain.start_sync, not set up"] = spawn_off
        time.sleep(3)
        return {name: summary(values) for name, values in out.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    found = measure(args.runs)
    lines = [f"Machine: {machine()}. `python bench/sync.py --runs {args.runs}`; wall time in ms of a real `cm sync` "
             "subprocess (interpreter start included), bare repository on local disk, memory of 6 files × 20 sections.",
             "", "| case | n | median | p95 | max |", "|---|---|---|---|---|"]
    for name, s in found.items():
        lines.append(f"| {name} | {s['n']} | {s['median']:.1f} | {s['p95']:.1f} | {s['max']:.1f} |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section("sync", text)


if __name__ == "__main__":
    main()
