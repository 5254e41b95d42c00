"""Project registry: generated ids, real paths, longest-ancestor matching, safe concurrent edits."""

from __future__ import annotations

import os
import re
import threading

import pytest
from conftest import run_cm

from cmrunner.core import projects
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths


@pytest.fixture
def paths(home) -> DataPaths:
    return DataPaths(os.path.join(home, "data"))


def test_register_generates_an_id_and_stores_the_real_path(paths, tmp_path):
    real = tmp_path / "repo"
    real.mkdir()
    link = tmp_path / "repo-link"
    os.symlink(real, link)
    project = projects.register(paths, str(link), "My Repo!")
    assert re.match(r"^my-repo-[0-9a-f]{6}$", project.id)
    assert project.path == str(real)
    assert [p.id for p in projects.load(paths)] == [project.id]


def test_longest_ancestor_wins(paths, tmp_path):
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    (tmp_path / "outer-sibling").mkdir()
    a = projects.register(paths, str(outer), "outer")
    b = projects.register(paths, str(inner), "inner")
    assert projects.scope_for(paths, str(inner / ".")) == b.scope
    assert projects.scope_for(paths, str(outer)) == a.scope
    assert projects.scope_for(paths, str(tmp_path / "outer-sibling")) == "global"  # prefix is not ancestry
    assert projects.scope_for(paths, "/") == "global"


def test_register_rejects_bad_input(paths, tmp_path):
    for path, code in (("relative/path", "PATH_NOT_ABSOLUTE"), (str(tmp_path / "missing"), "PROJECT_PATH_NOT_FOUND")):
        with pytest.raises(CmError) as caught:
            projects.register(paths, path, "x")
        assert caught.value.code == code
    with pytest.raises(CmError) as caught:
        projects.register(paths, str(tmp_path), "  ")
    assert caught.value.code == "INVALID_PROJECT_NAME"
    projects.register(paths, str(tmp_path), "once")
    with pytest.raises(CmError) as caught:
        projects.register(paths, str(tmp_path), "twice")
    assert caught.value.code == "PROJECT_ALREADY_REGISTERED"


def test_remove_unknown_id(paths):
    with pytest.raises(CmError) as caught:
        projects.remove(paths, "nope")
    assert caught.value.code == "UNKNOWN_PROJECT"


def test_concurrent_registrations_are_all_kept(paths, tmp_path):
    dirs = []
    for i in range(12):
        d = tmp_path / f"p{i}"
        d.mkdir()
        dirs.append(str(d))
    threads = [threading.Thread(target=projects.register, args=(paths, d, f"p{i}")) for i, d in enumerate(dirs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.path for p in projects.load(paths)) == sorted(dirs)


def test_damaged_registry_is_reported(paths):
    os.makedirs(paths.runtime)
    with open(paths.registry, "w") as handle:
        handle.write("{}")
    with pytest.raises(CmError) as caught:
        projects.load(paths)
    assert caught.value.code == "PROJECT_REGISTRY_INVALID"


def test_cli_register_list_remove(home, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    reg = run_cm(["project", "register", str(repo), "Repo"])
    assert reg.returncode == 0, reg.stderr
    assert b"grants nothing" in reg.stdout
    listed = run_cm(["project", "list"]).stdout.decode()
    project_id = listed.split("\t")[0]
    assert str(repo) in listed
    assert run_cm(["project", "remove", project_id]).returncode == 0
    assert run_cm(["project", "list"]).stdout == b"no projects registered\n"
    bad = run_cm(["project", "remove", project_id])
    assert bad.returncode == 1 and bad.stderr.decode().startswith("cm: UNKNOWN_PROJECT: ")
