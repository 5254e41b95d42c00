"""Projects in one step: `cm project register PATH NAME` offers (in a terminal) or, with --allow,
grants its memory in the same step (its scope in disclosure.allowedScopes and writableScopes, one
save); the import plan's remedy for an unregistered or not allowed project is that one command.

Through the real CLI (a pseudo-terminal for the question), real config and project files in a
temporary home; the folders and memory files are written here."""

from __future__ import annotations

import os
import pty
import subprocess

from conftest import CM, hook_env, read_terminal, run_cm
from mcp_support import configure

from cmrunner.core import config as config_mod, projects
from cmrunner.core.home import DataPaths
from cmrunner.manage import memsources


def _scopes(home: str) -> tuple[list[str], list[str]]:
    data = config_mod.load(home).data
    return data["disclosure"]["allowedScopes"], data["writableScopes"]


def _project(home: str, path: str) -> projects.Project:
    found = [p for p in projects.load(DataPaths(config_mod.load(home).data_root)) if p.path == os.path.realpath(path)]
    assert len(found) == 1, found
    return found[0]


def _answering(args: list[str], answer: bytes, env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``cm`` with stdin and stderr on a pseudo-terminal that has ``answer`` typed ahead."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer)
        proc = subprocess.run([CM, *args], stdin=follower, stdout=subprocess.PIPE, stderr=follower, env=env,
                              timeout=30)
        os.close(follower)
        follower = -1
        return proc.returncode, proc.stdout.decode(), read_terminal(leader)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_register_with_allow_grants_both_scopes_in_one_step(home, tmp_path):
    configure(home)
    folder = str(tmp_path / "app")
    os.makedirs(folder)
    proc = run_cm(["project", "register", folder, "App", "--allow"])
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    project = _project(home, folder)
    lines = out.splitlines()
    assert lines[0] == f"registered {project.id} -> {project.path}" and len(lines) == 3, out
    assert lines[2] == f"allowed: disclosure.allowedScopes and writableScopes +{project.scope} (saved in config.json)"
    allowed, writable = _scopes(home)
    assert project.scope in allowed and project.scope in writable


def test_without_a_terminal_it_grants_nothing_and_names_the_one_command_that_does(home, tmp_path):
    configure(home)
    folder = str(tmp_path / "my app")
    os.makedirs(folder)
    proc = run_cm(["project", "register", folder, "App"])
    assert proc.returncode == 0, proc.stderr
    project = _project(home, folder)
    command = f"cm project register '{project.path}' App --allow"
    assert proc.stdout.decode().endswith(f"it grants nothing yet: to use it, `{command}`\n")
    assert project.scope not in _scopes(home)[0] + _scopes(home)[1]
    # the remedy itself, on the folder now registered: allowed, nothing registered twice
    again = run_cm(["project", "register", folder, "App", "--allow"])
    assert again.returncode == 0, again.stderr
    assert again.stdout.decode().startswith(f"{project.path} is registered already as {project.id}\nallowed: ")
    assert _project(home, folder).id == project.id
    allowed, writable = _scopes(home)
    assert project.scope in allowed and project.scope in writable
    # already registered and no --allow: still the refusal it was
    refused = run_cm(["project", "register", folder, "App"])
    assert refused.returncode != 0 and b"PROJECT_ALREADY_REGISTERED" in refused.stderr


def test_in_a_terminal_it_asks_once_and_yes_grants_no_does_not(home, tmp_path):
    configure(home)
    env = hook_env(COMMON_MEMORY_HOME=home)
    yes_folder, no_folder = str(tmp_path / "yes"), str(tmp_path / "no")
    os.makedirs(yes_folder)
    os.makedirs(no_folder)
    code, out, asked = _answering(["project", "register", yes_folder, "Yes"], b"y\n", env)
    assert code == 0, asked
    project = _project(home, yes_folder)
    assert f"Allow cm to read and write this project's memory (disclosure.allowedScopes and writableScopes " \
           f"+{project.scope})?" in asked
    assert f"allowed: disclosure.allowedScopes and writableScopes +{project.scope}" in out
    assert project.scope in _scopes(home)[0] and project.scope in _scopes(home)[1]
    code, out, asked = _answering(["project", "register", no_folder, "No"], b"n\n", env)
    assert code == 0, asked
    other = _project(home, no_folder)
    assert "it grants nothing yet: to use it, `cm project register " in out
    assert other.scope not in _scopes(home)[0] + _scopes(home)[1]


def test_the_import_plan_inside_an_unregistered_folder_names_it_in_one_command(home, tmp_path):
    configure(home)
    folder = str(tmp_path / "ferrous")
    os.makedirs(folder)
    user = str(tmp_path / "user")
    memory = os.path.join(user, ".claude", "projects", memsources.claude_project_dir(folder), "memory")
    os.makedirs(memory)
    with open(os.path.join(memory, "project_deploy.md"), "w", encoding="utf-8") as handle:
        handle.write("---\nname: deploy\ntype: project\n---\nReleases go out on Thursdays.\n")
    env = hook_env(COMMON_MEMORY_HOME=home, HOME=user)
    plan = subprocess.run([CM, "import", "--from", "claude", "--dry-run"], cwd=folder, env=env, capture_output=True,
                          timeout=60)
    out = plan.stdout.decode()
    assert plan.returncode == 0, plan.stderr
    remedy = f"cm project register {folder} ferrous --allow"
    assert "skipped NO_PROJECT: " in out and f"`{remedy}`, then import again" in out, out
    done = subprocess.run([CM, *remedy.split()[1:]], cwd=folder, env=env, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    project = _project(home, folder)
    again = subprocess.run([CM, "import", "--from", "claude", "--dry-run"], cwd=folder, env=env, capture_output=True,
                           timeout=60).stdout.decode()
    assert f"claude:auto-memory/deploy [project fact] -> {project.scope}: new, 1 part" in again, again
    assert "skipped" not in again


def test_a_registered_project_not_allowed_gets_the_same_one_command(home, tmp_path):
    configure(home)
    folder = str(tmp_path / "infra")
    os.makedirs(folder)
    assert run_cm(["project", "register", folder, "Infra"]).returncode == 0
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nsomething\n", encoding="utf-8")
    proc = run_cm(["import", str(notes), "--workspace", folder, "--dry-run"])
    project = _project(home, folder)
    assert proc.returncode != 0
    assert proc.stderr.decode() == (f"cm: UNAUTHORIZED_SCOPE: {project.scope} is not in disclosure.allowedScopes; to "
                                    f"import into it, `cm project register {folder} Infra --allow`\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_cm(["import", str(notes), "--workspace", str(elsewhere), "--dry-run"])
    assert proc.stderr.decode() == (f"cm: UNREGISTERED_WORKSPACE: {elsewhere} is not inside a registered project; "
                                    f"register it and allow its memory with `cm project register {elsewhere} "
                                    "elsewhere --allow`, then import again\n")
