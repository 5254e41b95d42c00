"""`cm project adopt-remote-id`: an id from before remotes moves, only when asked, with its file and scopes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from conftest import hook_env, reap_drains, run_cm
from writer_support import admit

from cmrunner.core import config as config_mod, gitremote, projects
from cmrunner.core.home import DataPaths


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def _cm(home: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = hook_env()
    env["COMMON_MEMORY_HOME"] = home
    return run_cm(list(args), env=env)


def _machine(home: str, clone: str, old_id: str, text: str) -> DataPaths:
    """A home as cm left it before ids came from remotes: a format 1 registry, granted scopes, a memory file."""
    paths = DataPaths(os.path.join(home, "data"))
    data = config_mod.default_config(home)
    data["disclosure"]["allowedScopes"] = ["global", f"project:{old_id}"]
    data["writableScopes"] = [f"project:{old_id}", "global"]
    config_mod.save(home, data)
    os.makedirs(paths.runtime, mode=0o700)
    with open(paths.registry, "w", encoding="utf-8") as handle:
        json.dump({"version": 1, "projects": [{"id": old_id, "path": clone, "name": "App",
                                               "registeredAt": 1700000000000}]}, handle, indent=2)
    os.makedirs(paths.projects_dir)
    with open(paths.document(f"project:{old_id}"), "w", encoding="utf-8") as handle:
        handle.write(text)
    return paths


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_two_machines_with_old_ids_end_on_one_id_without_losing_either_memory(tmp_path):
    try:
        _two_machines(tmp_path)
    finally:  # adopting ends by starting a drain of that home, as every user command under the lease does
        reap_drains(str(tmp_path / "laptop"))
        reap_drains(str(tmp_path / "desktop"))


def _two_machines(tmp_path) -> None:
    bare = str(tmp_path / "app.git")
    _git("init", "-q", "--bare", bare)
    laptop, desktop = str(tmp_path / "laptop"), str(tmp_path / "desktop")
    clone_l, clone_d = str(tmp_path / "l" / "app"), str(tmp_path / "d" / "src")
    _git("clone", "-q", bare, clone_l)
    _git("clone", "-q", bare, clone_d)
    pl = _machine(laptop, clone_l, "app-111111", "# Project\n\n## Laptop\n\nfrom the laptop\n")
    pd = _machine(desktop, clone_d, "app-222222", "# Project\n\n## Desktop\n\nfrom the desktop\n")
    new = projects.derive_id(gitremote.normalize(bare), "")

    done = _cm(laptop, "project", "adopt-remote-id", "app-111111")
    assert done.returncode == 0, done.stderr
    assert f"app-111111 is now {new}" in done.stdout.decode() and f"projects/{new}.md" in done.stdout.decode()
    assert not os.path.exists(pl.document("project:app-111111"))
    assert "from the laptop" in _read(pl.document(f"project:{new}"))
    cfg = config_mod.load(laptop)
    assert cfg.allowed_scopes == ["global", f"project:{new}"] and cfg.writable_scopes == [f"project:{new}", "global"]
    assert projects.scope_for(pl, clone_l) == f"project:{new}"

    # The laptop's file reaches the desktop (as sync would carry it) before the desktop adopts.
    with open(pd.document(f"project:{new}"), "w", encoding="utf-8") as handle:
        handle.write(_read(pl.document(f"project:{new}")))
    done = _cm(desktop, "project", "adopt-remote-id", "app-222222")
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "was already here" in out and "cm import" in out and "projects/app-222222.md" in out
    assert "from the desktop" in _read(pd.document("project:app-222222"))  # kept, never overwritten
    assert "from the laptop" in _read(pd.document(f"project:{new}"))
    assert projects.scope_for(pd, clone_d) == f"project:{new}"
    listed = json.loads(_cm(desktop, "project", "list", "--json").stdout)
    assert [(r["id"], r["registered"]) for r in listed] == [(new, True), ("app-222222", False)]

    again = _cm(desktop, "project", "adopt-remote-id", new)
    assert again.returncode == 0 and b"nothing changed" in again.stdout


def test_refusals_change_nothing(tmp_path, home):
    bare = str(tmp_path / "app.git")
    _git("init", "-q", "--bare", bare)
    clone = str(tmp_path / "app")
    _git("clone", "-q", bare, clone)
    paths = _machine(home, clone, "app-111111", "# Project\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    plain_id = projects.register(paths, str(plain), "plain").id
    before = {name: _read(os.path.join(home, name)) for name in ("config.json",)}

    unknown = _cm(home, "project", "adopt-remote-id", "nope-000000")
    assert unknown.returncode == 1 and unknown.stderr.decode().startswith("cm: UNKNOWN_PROJECT: ")
    no_remote = _cm(home, "project", "adopt-remote-id", plain_id)
    assert no_remote.returncode == 1 and no_remote.stderr.decode().startswith("cm: PROJECT_HAS_NO_REMOTE: ")

    admit(paths, "we deploy on fridays", "e1", scope="project:app-111111", batch=None)
    queued = _cm(home, "project", "adopt-remote-id", "app-111111")
    assert queued.returncode == 1 and queued.stderr.decode().startswith("cm: PROJECT_HAS_QUEUED_WORK: ")
    assert "cm flush" in queued.stderr.decode()
    assert os.path.exists(paths.document("project:app-111111"))
    assert [p.id for p in projects.load(paths)] == ["app-111111", plain_id]
    assert {name: _read(os.path.join(home, name)) for name in ("config.json",)} == before


def test_running_it_again_after_a_crash_at_any_step_finishes_the_move(tmp_path, home):
    bare = str(tmp_path / "app.git")
    _git("init", "-q", "--bare", bare)
    clone = str(tmp_path / "app")
    _git("clone", "-q", bare, clone)
    new = projects.derive_id(gitremote.normalize(bare), "")
    for crashed_after in ("scopes", "file"):
        if os.path.exists(home):
            reap_drains(home)  # the first round's command started one
            shutil.rmtree(home)
        paths = _machine(home, clone, "app-111111", "# Project\n\n## Keep\n\nkeep me\n")
        # The state a kill leaves after step 1 (scopes moved) or step 2 (file moved too).
        data = config_mod.load(home).data
        data["disclosure"]["allowedScopes"] = ["global", f"project:{new}"]
        data["writableScopes"] = [f"project:{new}", "global"]
        config_mod.save(home, data)
        if crashed_after == "file":
            os.rename(paths.document("project:app-111111"), paths.document(f"project:{new}"))
        done = run_cm(["project", "adopt-remote-id", "app-111111"])
        assert done.returncode == 0, done.stderr
        assert f"its memory is now projects/{new}.md" in done.stdout.decode()
        assert "keep me" in _read(paths.document(f"project:{new}"))
        assert not os.path.exists(paths.document("project:app-111111"))
        assert [p.id for p in projects.load(paths)] == [new]
        assert config_mod.load(home).writable_scopes == [f"project:{new}", "global"]
