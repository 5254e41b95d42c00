"""`cm import` run inside a project folder cm may not use yet offers to register it and allow its
memory in one step (issue 36): in a terminal it asks once, then plans and imports into the project;
"no", `--yes` or no terminal register nothing and name the one command; `--register`
does it without asking; a folder that is no project is never asked about. A folder whose
repository is a project known from another machine is offered that project's id.

Real `cm` processes (stdin and stderr on a pseudo-terminal for the question), real config and
project files in a temporary home, the loopback fake model as the Memory Agent's model.
"""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from agent_support import configure_remote, policy
from conftest import CM, hook_env, read_terminal

from cmrunner.core import config as config_mod, gitremote, projects
from cmrunner.core.home import DataPaths
from cmrunner.manage import memsources
from cmrunner.synthetic import fakemodel


def _answering(args: list[str], answer: bytes, cwd: str, env: dict[str, str]) -> tuple[int, str, str]:
    """``cm ARGS`` in ``cwd`` with stdin and stderr on a pseudo-terminal, ``answer`` typed ahead:
    (exit status, stdout, what the terminal showed)."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer)
        proc = subprocess.run([CM, *args], stdin=follower, stdout=subprocess.PIPE, stderr=follower, env=env,
                              cwd=cwd, timeout=120)
        os.close(follower)
        follower = -1
        return proc.returncode, proc.stdout.decode(), read_terminal(leader)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def _piped(args: list[str], cwd: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _registered(home: str) -> list[projects.Project]:
    return projects.load(DataPaths(config_mod.load(home).data_root))


def _allowed(home: str, scope: str) -> bool:
    data = config_mod.load(home).data
    return scope in data["disclosure"]["allowedScopes"] and scope in data["writableScopes"]


def _folder(tmp_path: Path, name: str, marker: str | None = ".git") -> str:
    folder = tmp_path / name
    folder.mkdir()
    if marker == ".git":
        (folder / ".git").mkdir()
    elif marker:
        (folder / marker).write_text("# Team rules\n\nUse tabs.\n", encoding="utf-8")
    return str(folder)


def _notes(tmp_path: Path) -> str:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\n## Deploys\n\nReleases go out on Thursdays marker-5521.\n", encoding="utf-8")
    return str(notes)


def test_yes_registers_allows_and_imports_into_the_project(home, tmp_path):
    folder, notes = _folder(tmp_path, "ferrous"), _notes(tmp_path)
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        configure_remote(home, fm.base_url)
        env = hook_env(COMMON_MEMORY_HOME=home)
        code, out, shown = _answering(["import", notes], b"y\n", folder, env)
    assert code == 0, out + shown
    [project] = _registered(home)
    assert project.path == folder and project.name == "ferrous"
    assert f"Register {folder} as project ferrous and allow its memory? [y/N]" in shown, shown
    assert _allowed(home, project.scope)
    lines = out.splitlines()
    assert lines[:2] == [f"registered {project.id} -> {folder}",
                         f"allowed: disclosure.allowedScopes and writableScopes +{project.scope} (saved in config.json)"]
    assert any(line.startswith("import md-") and f" into {project.scope}: queued" in line for line in lines), out
    assert out.endswith("complete: true\n") and "project folder:" not in out, out


def test_no_leaves_the_config_byte_identical_and_names_the_one_command(home, tmp_path):
    folder, notes = _folder(tmp_path, "my app", "AGENTS.md"), _notes(tmp_path)
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        configure_remote(home, fm.base_url)
        before = Path(home, "config.json").read_bytes()
        env = hook_env(COMMON_MEMORY_HOME=home)
        code, out, shown = _answering(["import", notes], b"n\n", folder, env)
    assert code == 0, out + shown
    assert f"Register {folder} as project my app and allow its memory? [y/N]" in shown, shown
    assert Path(home, "config.json").read_bytes() == before and _registered(home) == []
    assert (f"project folder: {folder} is a project cm may not use (it is not registered), so this goes to global; "
            f"to import into it, `cm project register '{folder}' 'my app' --allow` then add `--workspace '{folder}'`, "
            "or pass --register\n") in out, out
    assert any(line.startswith("import md-") and " into global: queued" in line for line in out.splitlines()), out


def test_without_a_terminal_or_with_yes_nothing_registers_unless_register_is_given(home, tmp_path):
    folder, notes = _folder(tmp_path, "infra"), _notes(tmp_path)
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        configure_remote(home, fm.base_url)
        before = Path(home, "config.json").read_bytes()
        env = hook_env(COMMON_MEMORY_HOME=home)
        piped = _piped(["import", notes, "--dry-run"], folder, env)
        code, out, shown = _answering(["import", notes, "--yes", "--dry-run"], b"y\n", folder, env)
        assert Path(home, "config.json").read_bytes() == before and _registered(home) == []
        registered = _piped(["import", notes, "--register"], folder, env)
    assert piped.returncode == 0 and code == 0, piped.stderr + shown
    command = f"`cm project register {folder} infra --allow`"
    assert command in piped.stdout and command in out and "allow its memory?" not in shown, out + shown
    assert registered.returncode == 0, registered.stderr
    [project] = _registered(home)
    assert project.path == folder and _allowed(home, project.scope)
    assert f" into {project.scope}: queued" in registered.stdout and "complete: true" in registered.stdout


def test_a_folder_that_is_no_project_gets_no_question(home, tmp_path):
    plain, notes = str(tmp_path / "plain"), _notes(tmp_path)
    os.makedirs(plain)
    configure_remote(home, "http://127.0.0.1:9/v1")
    before = Path(home, "config.json").read_bytes()
    env = hook_env(COMMON_MEMORY_HOME=home)
    code, out, shown = _answering(["import", notes, "--dry-run"], b"y\n", plain, env)
    assert code == 0, out + shown
    assert "Register" not in shown and "project folder:" not in out and _registered(home) == []
    refused = _piped(["import", notes, "--dry-run", "--register"], plain, env)
    assert refused.returncode == 1 and refused.stderr.startswith(f"cm: NOT_A_PROJECT_FOLDER: {plain} is no project "
                                                                 "folder"), refused.stderr
    assert Path(home, "config.json").read_bytes() == before


def test_from_claude_offers_the_folder_whose_memory_it_skipped_and_imports_it_there(home, tmp_path):
    folder = _folder(tmp_path, "ferrous", marker=None)  # known only from Claude Code's memory of it
    user = tmp_path / "user"
    memory = user / ".claude" / "projects" / memsources.claude_project_dir(folder) / "memory"
    memory.mkdir(parents=True)
    (memory / "project_deploy.md").write_text("---\nname: deploy\ntype: project\n---\nReleases go out on Thursdays.\n",
                                              encoding="utf-8")
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        configure_remote(home, fm.base_url)
        env = hook_env(COMMON_MEMORY_HOME=home, HOME=str(user), CODEX_HOME="")
        code, out, shown = _answering(["import", "--from", "claude"], b"y\ny\n", folder, env)
    assert code == 0, out + shown
    [project] = _registered(home)
    assert f"Register {folder} as project ferrous and allow its memory? [y/N]" in shown, shown
    assert f"claude:auto-memory/deploy [project fact] -> {project.scope}: new, 1 part" in out, out
    assert "skipped" not in out and out.endswith("complete: true\n"), out


def test_a_repository_known_from_another_machine_is_offered_its_id(home, tmp_path):
    folder = _folder(tmp_path, "app", marker=None)
    subprocess.run(["git", "init", "-q", folder], check=True, timeout=30)
    url = "https://git.example.com/team/app.git"
    subprocess.run(["git", "-C", folder, "remote", "add", "origin", url], check=True, timeout=30)
    known = projects.derive_id(gitremote.normalize(url) or "", "")
    paths, _ = configure_remote(home, "http://127.0.0.1:9/v1")
    os.makedirs(paths.projects_dir, exist_ok=True)
    Path(paths.projects_dir, f"{known}.md").write_text("# Project\n\n## Deploys\n\nThursdays.\n", encoding="utf-8")
    code, out, shown = _answering(["import", _notes(tmp_path), "--dry-run"], b"y\n", folder,
                                  hook_env(COMMON_MEMORY_HOME=home))
    assert code == 0, out + shown
    assert (f"Register {folder} as project app (id {known}: known from another machine, its memory is here) and "
            "allow its memory? [y/N]") in shown, shown
    [project] = _registered(home)
    assert project.id == known and out.startswith(f"registered {known} -> {folder}\n"), out
    assert _allowed(home, project.scope) and "dry run: nothing was queued" in out


def test_from_project_in_its_folder_imports_its_files_once_registered(home, tmp_path):
    folder = _folder(tmp_path, "billing", "AGENTS.md")
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        configure_remote(home, fm.base_url)
        env = hook_env(COMMON_MEMORY_HOME=home)
        refused = _piped(["import", "--from", "project", "--yes"], folder, env)
        assert _registered(home) == []
        code, out, shown = _answering(["import", "--from", "project"], b"y\ny\n", folder, env)
    assert refused.returncode == 1 and refused.stderr == (
        f"cm: WORKSPACE_REQUIRED: --from project imports a registered project's files; {folder} is not one cm may "
        f"use: `cm project register {folder} billing --allow` then add `--workspace {folder}`, or pass --register\n")
    assert code == 0, out + shown
    [project] = _registered(home)
    assert f"Register {folder} as project billing and allow its memory? [y/N]" in shown, shown
    assert f"project:AGENTS.md [team convention] -> {project.scope}: new, 1 part" in out, out
    assert out.endswith("complete: true\n"), out


def test_a_folder_removed_under_cm_is_no_project_and_no_traceback(home, tmp_path):
    configure_remote(home, "http://127.0.0.1:9/v1")
    gone = tmp_path / "gone"
    env = hook_env(COMMON_MEMORY_HOME=home, HOME=str(tmp_path / "user"), CODEX_HOME="")
    # The shell's folder is removed before cm starts in it (a process may keep a removed folder as its own).
    script = 'mkdir -p "$1" && cd "$1" && rmdir "$1" && shift && exec "$@"'
    runs = [subprocess.run(["sh", "-c", script, "sh", str(gone), CM, *args], env=env, capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
            for args in (["import", "--from", "claude", "--dry-run"], ["import", _notes(tmp_path), "--dry-run"],
                         ["import", _notes(tmp_path), "--dry-run", "--register"])]
    assert [r.returncode for r in runs] == [0, 0, 1], [r.stderr for r in runs]
    assert "Traceback" not in "".join(r.stderr for r in runs)
    assert runs[0].stdout == "nothing found: no claude memory files on this machine\n"
    assert runs[1].stdout.endswith("dry run: nothing was queued\n") and "project folder:" not in runs[1].stdout
    assert runs[2].stderr.startswith("cm: NOT_A_PROJECT_FOLDER: the folder cm runs in no longer exists")
