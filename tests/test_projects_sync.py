"""A project registered under different paths on two machines shares one memory through `cm sync`.

Two homes stand for two machines; one bare repository on disk is the memory's sync remote, another
is the project's own remote, cloned to a different path on each machine. Real git, real `cm`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

from sync_support import bare, cm, machine, ok

PROJECT_A = "# Project\n\n## Build\n\nRun make before committing.\n"


def _clone(remote: str, where: str) -> str:
    subprocess.run(["git", "clone", "-q", remote, where], check=True, capture_output=True)
    return where


def _registered(said: str) -> str:
    found = re.match(r"registered (\S+) -> ", said)
    assert found, said
    return found.group(1)


def test_a_project_registered_on_two_machines_under_different_paths_shares_one_memory(tmp_path):
    memory_remote = bare(tmp_path, "memory.git")
    app = bare(tmp_path, "app.git")
    home_a, paths_a = machine(tmp_path, "laptop")
    home_b, paths_b = machine(tmp_path, "desktop")
    clone_a = _clone(app, str(tmp_path / "laptop-src" / "app"))
    clone_b = _clone(app, str(tmp_path / "desktop-work" / "checkout"))

    pid = _registered(ok(home_a, "project", "register", clone_a, "App"))
    os.makedirs(paths_a.projects_dir, mode=0o700, exist_ok=True)
    with open(paths_a.document(f"project:{pid}"), "w", encoding="utf-8") as handle:
        handle.write(PROJECT_A)  # a hand edit: memory like any other
    ok(home_a, "sync", "init", memory_remote)
    ok(home_a, "sync")

    ok(home_b, "sync", "init", memory_remote)
    assert f"{pid}\t(known, not registered here)" in ok(home_b, "project", "list")
    assert json.loads(ok(home_b, "status", "--json"))["projects"]["knownNotRegistered"] == [pid]

    said = ok(home_b, "project", "register", clone_b, "my checkout")
    assert _registered(said) == pid and "the same repository as the known project" in said
    assert json.loads(ok(home_b, "status", "--json"))["projects"] == {"registered": 1, "knownNotRegistered": []}

    # An edit on the desktop reaches the laptop's one file of that project.
    with open(paths_b.document(f"project:{pid}"), "a", encoding="utf-8") as handle:
        handle.write("\n## Deploy\n\nFridays are frozen.\n")
    ok(home_b, "sync")
    ok(home_a, "sync")
    with open(paths_a.document(f"project:{pid}"), encoding="utf-8") as handle:
        text = handle.read()
    assert "Run make before committing." in text and "Fridays are frozen." in text
    assert sorted(os.listdir(paths_a.projects_dir)) == [f"{pid}.md"]
    assert sorted(os.listdir(paths_b.projects_dir)) == [f"{pid}.md"]


def test_another_repository_on_the_other_machine_stays_apart(tmp_path):
    memory_remote = bare(tmp_path, "memory.git")
    home_a, paths_a = machine(tmp_path, "laptop")
    home_b, _paths_b = machine(tmp_path, "desktop")
    pid = _registered(ok(home_a, "project", "register", _clone(bare(tmp_path, "app.git"), str(tmp_path / "a")), "App"))
    os.makedirs(paths_a.projects_dir, mode=0o700, exist_ok=True)
    with open(paths_a.document(f"project:{pid}"), "w", encoding="utf-8") as handle:
        handle.write(PROJECT_A)
    ok(home_a, "sync", "init", memory_remote)
    ok(home_a, "sync")
    ok(home_b, "sync", "init", memory_remote)
    # The same folder name, another repository: its own id, and the synced project stays "known".
    other = _registered(ok(home_b, "project", "register",
                           _clone(bare(tmp_path, "other.git"), str(tmp_path / "b" / "app")), "App"))
    assert other != pid
    assert json.loads(ok(home_b, "status", "--json"))["projects"] == {"registered": 1, "knownNotRegistered": [pid]}
    assert cm(home_b, "project", "list").returncode == 0
