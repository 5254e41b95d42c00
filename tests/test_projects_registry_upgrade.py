"""The registry's format 1 -> 2 step (``r002_record_remotes``): remotes recorded, ids kept, nothing lost."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import run_cm

from cmrunner.core import config as config_mod, gitremote, projects
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths


def _git(*args: str, cwd: str | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _write_v1(paths: DataPaths, entries: list[dict]) -> bytes:
    """A registry exactly as cm wrote it before format 2."""
    body = json.dumps({"version": 1, "projects": entries}, indent=2, ensure_ascii=False)
    raw = (body + "\n").encode("utf-8")
    os.makedirs(paths.runtime, mode=0o700, exist_ok=True)
    with open(paths.registry, "wb") as handle:
        handle.write(raw)
    return raw


@pytest.fixture
def old_registry(home, tmp_path):
    bare = str(tmp_path / "app.git")
    _git("init", "-q", "--bare", bare)
    clone = str(tmp_path / "app")
    _git("clone", "-q", bare, clone)
    plain = tmp_path / "plain"
    plain.mkdir()
    paths = DataPaths(os.path.join(home, "data"))
    entries = [
        {"id": "app-1a2b3c", "path": clone, "name": "App", "registeredAt": 1700000000000},
        {"id": "plain-4d5e6f", "path": str(plain), "name": "Plain", "registeredAt": 1700000000001},
        {"id": "gone-777777", "path": str(tmp_path / "deleted"), "name": "Gone", "registeredAt": 1700000000002},
    ]
    raw = _write_v1(paths, entries)
    os.makedirs(paths.projects_dir)
    with open(paths.document("project:app-1a2b3c"), "w", encoding="utf-8") as handle:
        handle.write("# Project\n\n## Build\n\nmake\n")
    data = config_mod.default_config(home)
    data["disclosure"]["allowedScopes"] = ["global", "project:app-1a2b3c"]
    data["writableScopes"] = ["global", "project:app-1a2b3c"]
    config_mod.save(home, data)
    return paths, raw, clone, bare


def test_reading_a_format_1_registry_changes_nothing(old_registry):
    paths, raw, clone, _ = old_registry
    assert [p.id for p in projects.load(paths)] == ["app-1a2b3c", "plain-4d5e6f", "gone-777777"]
    assert projects.scope_for(paths, clone) == "project:app-1a2b3c"
    status = run_cm(["status", "--json"])
    assert json.loads(status.stdout)["projects"] == {"registered": 3, "knownNotRegistered": []}
    with open(paths.registry, "rb") as handle:
        assert handle.read() == raw  # status and hooks only read; the upgrade waits for `cm project`
    assert not os.path.exists(paths.registry + ".v1")


def test_the_next_project_command_upgrades_keeping_every_id_and_a_copy(old_registry, home):
    paths, raw, clone, bare = old_registry
    listed = run_cm(["project", "list", "--json"])
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert list(rows) == ["app-1a2b3c", "plain-4d5e6f", "gone-777777"]
    assert rows["app-1a2b3c"]["remote"] == gitremote.normalize(bare)
    assert rows["app-1a2b3c"]["remoteId"] == projects.derive_id(gitremote.normalize(bare), "")
    assert rows["app-1a2b3c"]["remoteId"] != "app-1a2b3c"  # the old id is kept, not rewritten
    assert rows["plain-4d5e6f"]["remote"] is None and rows["gone-777777"]["remote"] is None
    with open(paths.registry, encoding="utf-8") as handle:
        assert json.load(handle)["version"] == projects.REGISTRY_VERSION
    with open(paths.registry + ".v1", "rb") as handle:
        assert handle.read() == raw
    # The old id still resolves, is still granted, and its memory is where it was.
    assert projects.scope_for(paths, clone) == "project:app-1a2b3c"
    assert "project:app-1a2b3c" in config_mod.load(home).writable_scopes
    with open(paths.document("project:app-1a2b3c"), encoding="utf-8") as handle:
        assert "make" in handle.read()
    text = run_cm(["project", "list"]).stdout.decode()
    assert f"(its repository gives {rows['app-1a2b3c']['remoteId']}: `cm project adopt-remote-id app-1a2b3c`" in text
    assert "plain-4d5e6f\tPlain\t" in text and "adopt-remote-id plain" not in text
    # A second clone of the same repository joins the old id on this machine: one repository, one memory.
    second = os.path.join(os.path.dirname(clone), "app-2")
    _git("clone", "-q", bare, second)
    reg = run_cm(["project", "register", second, "App again"])
    assert reg.returncode == 0, reg.stderr
    assert reg.stdout.decode().startswith("registered app-1a2b3c -> ")
    # Upgrading again is a no-op and the copy of format 1 is never overwritten.
    assert projects.upgrade(paths)[0].remote == gitremote.normalize(bare)
    with open(paths.registry + ".v1", "rb") as handle:
        assert handle.read() == raw


def test_a_registry_from_a_newer_cm_is_refused_untouched(home):
    paths = DataPaths(os.path.join(home, "data"))
    os.makedirs(paths.runtime, mode=0o700)
    raw = b'{"version": 99, "projects": []}\n'
    with open(paths.registry, "wb") as handle:
        handle.write(raw)
    with pytest.raises(CmError) as caught:
        projects.load(paths)
    assert caught.value.code == "UNSUPPORTED_REGISTRY_VERSION"
    proc = run_cm(["project", "list"])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: UNSUPPORTED_REGISTRY_VERSION: ")
    with open(paths.registry, "rb") as handle:
        assert handle.read() == raw


@pytest.mark.parametrize(("body", "ids"), [
    ({"projects": [{"id": "a-000001", "path": "/srv/a", "name": "A", "registeredAt": 1}]}, ["a-000001"]),
    ({"version": "2", "projects": []}, None),
    ({"version": 1, "projects": {"id": "a"}}, None),
    ({"version": 2, "projects": [{"id": "a-1", "path": "/a", "name": "A", "registeredAt": 1, "remote": 5}]}, None),
])
def test_what_a_registry_may_hold(home, body, ids):
    paths = DataPaths(os.path.join(home, "data"))
    os.makedirs(paths.runtime, mode=0o700)
    with open(paths.registry, "w", encoding="utf-8") as handle:
        json.dump(body, handle)
    if ids is not None:  # a file without a version is format 1, as cm has always read it
        assert [p.id for p in projects.load(paths)] == ids
        return
    with pytest.raises(CmError) as caught:
        projects.load(paths)
    assert caught.value.code == "PROJECT_REGISTRY_INVALID"
