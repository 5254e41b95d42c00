"""Home offers to register the folder cm runs in (textual pilot, 80×24 and 110×40): offered in an
unregistered project root (a git repository, or a folder with an agent instructions file: the
detection `cm import` uses), naming a project known from another machine when the repository
matches one; not offered in a plain folder or in (or under) a registered project; Enter on its screen registers
the folder and adds its scope to both disclosure.allowedScopes and writableScopes in one step, after
showing exactly that; Esc (or Back) leaves config.json and the registry byte-identical."""

from __future__ import annotations

import os
import subprocess

import pytest
from tui_support import check_fits, configure_model, drive, flat, screen_text, temp_hosts, wait_for

from cmrunner.core import config as config_mod, projects
from cmrunner.core.home import DataPaths
from cmrunner.manage import projectaccess, setupstate
from cmrunner.tui.app import CmApp

pytestmark = pytest.mark.timeout(240)
SIZES = [(80, 24), (110, 40)]
REMOTE = "https://github.com/example/ferrous.git"


def _repo(path: str, remote: str | None = REMOTE) -> str:
    os.makedirs(path)
    subprocess.run(["git", "init", "-q", path], check=True, timeout=30)
    if remote:
        subprocess.run(["git", "-C", path, "remote", "add", "origin", remote], check=True, timeout=30)
    return os.path.realpath(path)


def _ready(home: str) -> DataPaths:
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    return DataPaths(config_mod.load(home).data_root)


def _state(home: str, paths: DataPaths) -> tuple[bytes, bytes | None]:
    registry = os.path.join(paths.runtime, "projects.json")
    with open(os.path.join(home, "config.json"), "rb") as handle:
        config = handle.read()
    if not os.path.exists(registry):
        return config, None
    with open(registry, "rb") as handle:
        return config, handle.read()


def _scopes(home: str) -> tuple[list[str], list[str]]:
    data = config_mod.load(home).data
    return data["disclosure"]["allowedScopes"], data["writableScopes"]


def _app(home: str, tmp_path, cwd: str) -> CmApp:
    return CmApp(home, discover=temp_hosts(str(tmp_path)), cwd=cwd)


@pytest.mark.parametrize("size", SIZES)
def test_an_unregistered_repository_is_offered_and_enter_registers_it_with_both_scopes(home, tmp_path, size):
    paths = _ready(home)
    repo = _repo(str(tmp_path / "src" / "ferrous"))
    derived = projects.derive_id("github.com/example/ferrous")
    before = _state(home, paths)
    seen = {}

    async def steps(pilot):
        await wait_for(pilot, "Register this folder (ferrous) as a project and allow its memory")
        shown = await check_fits(pilot)
        assert "r register" in shown
        await pilot.press("left")  # ←→ reach the offer from the first column
        assert pilot.app.focused.id == "offer"
        await pilot.press("enter")
        await wait_for(pilot, "Projects · Register this folder")
        shown = await check_fits(pilot)
        for line in (f"Folder: {repo}", f"Project id: {derived}", f"runtime/projects.json: {repo} → project:{derived}",
                     f"config.json: disclosure.allowedScopes +project:{derived}",
                     f"config.json: writableScopes +project:{derived}"):
            assert flat(line) in shown, (line, screen_text(pilot.app))
        assert _state(home, paths) == before  # shown, not saved
        await pilot.press("enter")  # "Register ferrous and allow its memory"
        seen["after"] = await wait_for(pilot, f"Registered ferrous as project:{derived}")
        assert "Register this folder" not in seen["after"]  # registered: no longer offered
        await check_fits(pilot)

    drive(_app(home, tmp_path, repo), steps, size)
    allowed, writable = _scopes(home)
    assert f"project:{derived}" in allowed and f"project:{derived}" in writable
    assert [(p.id, p.path) for p in projects.load(paths)] == [(derived, repo)]
    assert "added to disclosure.allowedScopes and writableScopes (config.json)" in seen["after"]


@pytest.mark.parametrize("size", SIZES)
def test_esc_or_back_on_the_register_screen_writes_nothing(home, tmp_path, size):
    paths = _ready(home)
    repo = _repo(str(tmp_path / "ferrous"))
    before = _state(home, paths)

    async def steps(pilot):
        await wait_for(pilot, "Register this folder (ferrous)")
        await pilot.press("r")
        await wait_for(pilot, "Enter saves, in one step:")
        await pilot.press("escape")
        await wait_for(pilot, "cm · Common Memory")
        assert "Register this folder (ferrous)" in flat(screen_text(pilot.app))  # still offered
        await pilot.press("r")
        await wait_for(pilot, "Back: register nothing")
        await pilot.press("down", "enter")
        await wait_for(pilot, "cm · Common Memory")
        assert "Register this folder (ferrous)" in flat(screen_text(pilot.app))

    drive(_app(home, tmp_path, repo), steps, size)
    assert _state(home, paths) == before
    assert projects.load(paths) == []


@pytest.mark.parametrize("size", SIZES)
def test_nothing_is_offered_outside_a_repository_or_in_a_registered_one(home, tmp_path, size):
    paths = _ready(home)
    plain = str(tmp_path / "notes")
    os.makedirs(plain)
    repo = _repo(str(tmp_path / "ferrous"))
    projectaccess.register(home, repo, "ferrous", False)  # registered, even though not allowed
    sub = os.path.join(repo, "docs")
    os.makedirs(sub)
    for cwd in (plain, repo, sub):
        before = _state(home, paths)

        async def steps(pilot):
            shown = await wait_for(pilot, "Model & Configuration")
            await check_fits(pilot)
            assert "Register this folder" not in shown and "r register" not in shown
            assert not pilot.app.screen.query_one("#offer").display
            await pilot.press("r")  # the key does nothing without an offer
            await pilot.pause(0.2)
            assert pilot.app.screen.TITLE_TEXT == "cm · Common Memory"

        drive(_app(home, tmp_path, cwd), steps, size)
        assert _state(home, paths) == before


@pytest.mark.parametrize("size", SIZES)
def test_a_repository_known_from_another_machine_is_offered_as_that_project(home, tmp_path, size):
    paths = _ready(home)
    derived = projects.derive_id("github.com/example/ferrous")
    os.makedirs(paths.projects_dir, exist_ok=True)
    with open(os.path.join(paths.projects_dir, derived + ".md"), "w", encoding="utf-8") as handle:
        handle.write("# Project\n\n## Build\nUse cargo nextest.\n")  # arrived by sync
    repo = _repo(str(tmp_path / "checkouts" / "ferrous-local"))

    async def steps(pilot):
        await wait_for(pilot, f"Register this folder (ferrous-local): it is project {derived}, known from another "
                              "machine")
        await check_fits(pilot)
        await pilot.press("r")
        shown = await wait_for(pilot, "known from another machine (its memory is here already)")
        await check_fits(pilot)
        assert f"Project id: {derived}" in shown
        await pilot.press("enter")
        await wait_for(pilot, f"Registered ferrous-local as project:{derived}")

    drive(_app(home, tmp_path, repo), steps, size)
    assert [(p.id, p.path) for p in projects.load(paths)] == [(derived, repo)]
    assert all(f"project:{derived}" in keys for keys in _scopes(home))


def test_a_project_without_git_keeps_the_generated_id_it_showed(home, tmp_path):
    paths = _ready(home)
    repo = str(tmp_path / "scratch")
    os.makedirs(repo)
    with open(os.path.join(repo, "AGENTS.md"), "w", encoding="utf-8") as handle:
        handle.write("# Agents\n\nRun the tests first.\n")  # a project root to cm, as to `cm import`
    seen = {}

    async def steps(pilot):
        await wait_for(pilot, "Register this folder (scratch)")
        await pilot.press("r")
        shown = await wait_for(pilot, "generated (not inside a git work tree)")
        seen["id"] = pilot.app.screen.found.project.id
        assert f"Project id: {seen['id']}" in shown and seen["id"].startswith("scratch-")
        await pilot.press("enter")
        await wait_for(pilot, f"as project:{seen['id']}")

    drive(_app(home, tmp_path, repo), steps, (80, 24))
    assert [p.id for p in projects.load(paths)] == [seen["id"]]
    assert all(f"project:{seen['id']}" in keys for keys in _scopes(home))
