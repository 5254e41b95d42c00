"""Projects across machines: one repository has one id on every machine and under every local path.

Two homes on one machine stand for two machines; a bare repository in tmp is the shared remote and
real ``git`` clones it to different paths. Every ``cm`` call is a real subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

from conftest import hook_env, run_cm

from cmrunner.core import gitremote, projects
from cmrunner.core.home import DataPaths


def _git(*args: str, cwd: str | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _remote(tmp_path, name: str = "app") -> str:
    bare = str(tmp_path / "remotes" / f"{name}.git")
    _git("init", "-q", "--bare", bare)
    return bare


def _clone(url: str, where: str) -> str:
    _git("clone", "-q", url, where)
    return where


def _cm(home: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = hook_env()
    env["COMMON_MEMORY_HOME"] = home
    return run_cm(list(args), env=env)


def _register(home: str, path: str, name: str, *extra: str) -> tuple[str, str]:
    proc = _cm(home, "project", "register", path, name, *extra)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    found = re.match(r"registered (\S+) -> ", out)
    assert found, out
    return found.group(1), out


def _memory(home: str, pid: str) -> str:
    return os.path.join(home, "data", "memory", "projects", f"{pid}.md")


def test_one_repository_cloned_at_two_paths_on_two_machines_shares_one_id_and_memory(tmp_path):
    bare = _remote(tmp_path)
    laptop, desktop = str(tmp_path / "laptop-home"), str(tmp_path / "desktop-home")
    a = _clone(bare, str(tmp_path / "laptop" / "src" / "app"))
    b = _clone(bare, str(tmp_path / "desktop" / "work" / "my-checkout"))

    id_a, said_a = _register(laptop, a, "App on the laptop")
    assert re.fullmatch(r"app-[0-9a-f]{6}", id_a)  # the repository's name, not the display name
    assert id_a == projects.derive_id(gitremote.normalize(bare), "")
    assert "another machine gives" in said_a

    # The laptop's memory of the project reaches the desktop (as `cm sync` carries memory/projects/).
    os.makedirs(os.path.dirname(_memory(laptop, id_a)))
    with open(_memory(laptop, id_a), "w", encoding="utf-8") as handle:
        handle.write("# Project\n\n## Build\n\nRun make before committing.\n")
    os.makedirs(os.path.dirname(_memory(desktop, id_a)))
    shutil.copyfile(_memory(laptop, id_a), _memory(desktop, id_a))

    listed = _cm(desktop, "project", "list").stdout.decode()
    assert f"{id_a}\t(known, not registered here)" in listed
    rows = json.loads(_cm(desktop, "project", "list", "--json").stdout)
    assert rows == [{"id": id_a, "name": None, "path": None, "registered": False}]
    status = json.loads(_cm(desktop, "status", "--json").stdout)
    assert status["projects"] == {"registered": 0, "knownNotRegistered": [id_a]}
    assert f"registered:  0 project(s), 1 known but not registered here ({id_a}" in _cm(desktop, "status").stdout.decode()

    id_b, said_b = _register(desktop, b, "my checkout")
    assert id_b == id_a
    assert "the same repository as the known project" in said_b
    status = json.loads(_cm(desktop, "status", "--json").stdout)
    assert status["projects"] == {"registered": 1, "knownNotRegistered": []}
    # The desktop's captures in its clone carry the shared scope, so they feed the one memory file.
    assert projects.scope_for(DataPaths(os.path.join(desktop, "data")), os.path.join(b, ".")) == f"project:{id_a}"
    assert sorted(os.listdir(os.path.dirname(_memory(desktop, id_a)))) == [f"{id_a}.md"]


def test_a_second_clone_on_the_same_machine_shares_the_project(tmp_path, home):
    bare = _remote(tmp_path)
    first = _clone(bare, str(tmp_path / "one"))
    second = _clone(bare, str(tmp_path / "two"))
    pid, _ = _register(home, first, "one")
    again, said = _register(home, second, "two")
    assert again == pid and "they share the project" in said
    paths = DataPaths(os.path.join(home, "data"))
    assert {projects.scope_for(paths, first), projects.scope_for(paths, second)} == {f"project:{pid}"}
    removed = _cm(home, "project", "remove", pid)
    assert removed.returncode == 0 and first in removed.stdout.decode() and second in removed.stdout.decode()
    assert projects.load(paths) == []


def test_different_repositories_folders_and_remote_less_repositories_do_not_match(tmp_path):
    laptop, desktop = str(tmp_path / "laptop-home"), str(tmp_path / "desktop-home")
    bare = _remote(tmp_path, "app")
    other = _remote(tmp_path, "other")
    main_id, _ = _register(laptop, _clone(bare, str(tmp_path / "l" / "app")), "app")

    # Another repository, even with the same folder name, gets another id.
    other_id, _ = _register(desktop, _clone(other, str(tmp_path / "d" / "app")), "app")
    assert other_id != main_id
    # A folder inside the same repository is its own project.
    clone = _clone(bare, str(tmp_path / "d2" / "app"))
    os.makedirs(os.path.join(clone, "docs"))
    sub_id, _ = _register(desktop, os.path.join(clone, "docs"), "docs")
    assert sub_id != main_id and sub_id.startswith("docs-")
    # A repository without a remote says why its id is generated; two such never match.
    plain = str(tmp_path / "plain")
    _git("init", "-q", plain)
    gen_a, said = _register(laptop, plain, "plain")
    gen_b, _ = _register(desktop, plain, "plain")
    assert gen_a != gen_b and "the repository has no remote: the id is generated" in said
    assert "--id" in said


def test_a_remote_less_project_joins_a_known_id_only_when_asked(tmp_path):
    laptop, desktop = str(tmp_path / "laptop-home"), str(tmp_path / "desktop-home")
    folder = tmp_path / "notes"
    folder.mkdir()
    pid, _ = _register(laptop, str(folder), "notes")
    unknown = _cm(desktop, "project", "register", str(folder), "notes", "--id", pid)
    assert unknown.returncode == 1 and unknown.stderr.decode().startswith("cm: UNKNOWN_PROJECT: ")
    assert not os.path.exists(os.path.join(desktop, "data", "runtime", "projects.json")) or \
        projects.load(DataPaths(os.path.join(desktop, "data"))) == []
    os.makedirs(os.path.dirname(_memory(desktop, pid)))
    with open(_memory(desktop, pid), "w", encoding="utf-8") as handle:
        handle.write("# Project\n")
    joined, said = _register(desktop, str(folder), "notes", "--id", pid)
    assert joined == pid and "joined to the existing project" in said
