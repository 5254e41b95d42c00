"""`cm import --from claude|codex|gemini|project`: discovery, the plan with its skip codes, the
confirmation that grants document imports, idempotence and scopes, through the real CLI, the real
drain and the scripted fake model. The fixtures are written here, in a temporary HOME."""

from __future__ import annotations

import json
import os

import pytest
from conftest import hook_env, run_cm
from mcp_support import allow, configure, register, retain_template, rows, script_file
from writer_support import check_import_guard, user_said_diet

from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.manage import memsources


def _write(path: str, text: str | bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)
    return path


def _paths(home: str) -> DataPaths:
    return DataPaths(config_mod.load(home).data_root)


def _setup(home: str) -> None:
    data = config_mod.default_config(home)  # defaults: document imports are off
    config_mod.save(home, data)


def _imports(paths: DataPaths) -> list[tuple[str, str, str]]:
    """(source label, scope, state) of every admitted import part."""
    return [(json.loads(text)["sourceLabel"], scope, state) for text, scope, state in rows(
        paths, "SELECT text, scope, state FROM observations WHERE source = 'document_import' ORDER BY id")]


def _claude_fixture(user: str, project_path: str) -> None:
    claude = os.path.join(user, ".claude")
    _write(os.path.join(claude, "CLAUDE.md"),
           "# My rules\n\nI am a backend developer; I prefer Go over Java.\n\n@rules/style.md\n"
           "@~/private/notes.md\n\n```\n@not/an/import.md\n```\n")
    _write(os.path.join(claude, "rules", "style.md"), "# Style\n\nShort functions, early returns.\n\n@../CLAUDE.md\n")
    _write(os.path.join(user, "private", "notes.md"), "# Notes outside .claude\n\nnot to be read\n")
    memory = os.path.join(claude, "projects", memsources.claude_project_dir(project_path), "memory")
    _write(os.path.join(memory, "MEMORY.md"), "- [Role](user_role.md) — who the user is\n")
    _write(os.path.join(memory, "user_role.md"),
           "---\nname: user-role\ndescription: the user's role\ntype: user\n---\nThe user is a data engineer.\n")
    _write(os.path.join(memory, "feedback_tests.md"),
           "---\nname: run-tests\ndescription: testing\ntype: feedback\n---\nRun the integration tests before "
           "committing.\n**Why:** a broken build cost a day.\n**How to apply:** `make it` before `git commit`.\n")
    _write(os.path.join(memory, "project_deploy.md"),
           "---\nname: deploy\ndescription: deploy\ntype: project\n---\nReleases go out on Thursdays (2026-11).\n")
    _write(os.path.join(memory, "blob.md"), b"\x00\x01binary")
    _write(os.path.join(memory, "keys.md"), "---\nname: keys\ntype: user\n---\nmy password: hunter2xyzzy\n")
    outside = _write(os.path.join(os.path.dirname(user), "outside.md"), "# outside\n\nnot the user's home\n")
    os.symlink(outside, os.path.join(memory, "linked.md"))


def test_nothing_found_is_exit_0(home, tmp_path):
    _setup(home)
    env = hook_env(HOME=str(tmp_path / "empty-user"), CODEX_HOME="")
    for source in ("claude", "codex", "gemini"):
        proc = run_cm(["import", "--from", source, "--dry-run"], env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.decode() == f"nothing found: no {source} memory files on this machine\n"


def test_claude_plan_kinds_scopes_and_skip_codes(home, tmp_path):
    _setup(home)
    paths = _paths(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    allow(home, project.scope)
    user = str(tmp_path / "user")
    _claude_fixture(user, project.path)
    proc = run_cm(["import", "--from", "claude", "--workspace", project.path, "--dry-run"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert "plan for claude: 5 files to import" in out
    assert "  claude:CLAUDE.md [personal] -> global: new, 1 part," in out
    assert "  claude:import/style.md [personal] -> global: new, 1 part," in out
    assert "  claude:auto-memory/user-role [personal] -> global" in out
    assert "  claude:auto-memory/run-tests [personal] -> global" in out
    assert f"  claude:auto-memory/deploy [project fact] -> {project.scope}" in out
    for code, name in (("INDEX_ONLY", "MEMORY.md"), ("BINARY", "blob.md"), ("SENSITIVE_CONTENT_REJECTED", "keys.md"),
                       ("SYMLINK_LEAVES_ROOT", "linked.md"), ("IMPORT_LEAVES_ROOT", "notes.md"),
                       ("IMPORT_CYCLE", "CLAUDE.md")):
        assert any(line.startswith(f"  skipped {code}: ") and name in line for line in out.splitlines()), (code, out)
    assert "not/an/import.md" not in out and "hunter2" not in out
    assert "permission: imports are off" in out and out.endswith("dry run: nothing was queued\n")
    assert _imports(paths) == []
    assert "document_import" not in config_mod.load(home).disclosure.allowed_provenance


def test_confirmation_grants_permission_then_imports_once(home, tmp_path):
    _setup(home)
    paths = _paths(home)
    user = str(tmp_path / "user")
    codex = os.path.join(user, ".codex", "memories")
    _write(os.path.join(codex, "memory_summary.md"), "# Summary\n\nThe user works on a Rust CLI named ferrous.\n")
    _write(os.path.join(codex, "MEMORY.md"), "# Memory\n\n- prefers small pull requests\n")
    _write(os.path.join(codex, "raw_memories.md"), "# Raw\n\ntranscript excerpts, never imported\n")
    _write(os.path.join(codex, "rollout_summaries", "r1.md"), "# r1\n\nnever imported\n")
    env = hook_env(HOME=user, CODEX_HOME="",  # an empty CODEX_HOME means the default, ~/.codex
                   CM_TEST_AGENT_SCRIPT=script_file(str(tmp_path), [retain_template("Kept {first}")]))
    refused = run_cm(["import", "--from", "codex"], env=env)  # no terminal, no --yes
    assert refused.returncode == 1 and refused.stderr.decode().startswith("cm: CONFIRMATION_REQUIRED: ")
    assert _imports(paths) == [] and "document_import" not in config_mod.load(home).disclosure.allowed_provenance

    proc = run_cm(["import", "--from", "codex", "--yes"], env=env)
    out = proc.stdout.decode()
    assert proc.returncode == 0, (out, proc.stderr)
    assert "granted: disclosure.allowedProvenance +document_import" in out and out.endswith("complete: true\n")
    assert "document_import" in config_mod.load(home).disclosure.allowed_provenance
    assert _imports(paths) == [("codex:memory_summary", "global", "processed"), ("codex:MEMORY", "global", "processed")]
    assert "Kept" in open(paths.document("profile")).read()

    again = run_cm(["import", "--from", "codex", "--yes"], env=env)
    out = again.stdout.decode()
    assert again.returncode == 0 and "0 files to import" in out and out.count(": unchanged, 0 of ") == 2
    assert out.endswith("nothing new to import\n") and len(_imports(paths)) == 2

    _write(os.path.join(codex, "MEMORY.md"), "# Memory\n\n- prefers small pull requests\n- uses nushell\n")
    changed = run_cm(["import", "--from", "codex", "--yes"], env=env)
    assert changed.returncode == 0 and "1 file to import" in changed.stdout.decode()
    assert [label for label, _scope, _state in _imports(paths)] == ["codex:memory_summary", "codex:MEMORY",
                                                                    "codex:MEMORY"]


def test_project_files_land_in_the_project_only(home, tmp_path):
    _setup(home)
    paths = _paths(home)
    project = register(paths, str(tmp_path / "repo"), "Repo")
    allow(home, project.scope)
    root = project.path
    _write(os.path.join(root, "AGENTS.md"), "# Agents\n\nRun `make check` before every commit. Use pnpm, not npm.\n")
    _write(os.path.join(root, ".cursor", "rules", "style.mdc"),
           "---\ndescription: style\nglobs: src/**/*.ts\nalwaysApply: false\n---\nPrefer named exports.\n")
    _write(os.path.join(root, ".cursor", "rules", "manual.mdc"),
           "---\ndescription: only when asked\nalwaysApply: false\n---\nExplain like a pirate.\n")
    _write(os.path.join(root, ".github", "copilot-instructions.md"), "# Copilot\n\nThe API lives in services/api.\n")
    user = str(tmp_path / "user")
    assert run_cm(["import", "--from", "project"], env=hook_env(HOME=user)).stderr.decode().startswith(
        "cm: WORKSPACE_REQUIRED: ")
    proc = run_cm(["import", "--from", "project", "--workspace", root, "--yes", "--no-wait"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert f"project:AGENTS.md [team convention] -> {project.scope}" in out
    assert f"project:.cursor/rules/style.mdc [instructions] -> {project.scope}" in out
    assert "skipped RULE_NOT_ALWAYS_APPLIED: " in out and "pirate" not in out
    imported = _imports(paths)
    assert sorted(label for label, _s, _st in imported) == ["project:.cursor/rules/style.mdc",
                                                            "project:.github/copilot-instructions.md",
                                                            "project:AGENTS.md"]
    assert {scope for _label, scope, _state in imported} == {project.scope}


@pytest.mark.parametrize("overwrite", [True, False])
def test_import_guard_holds_for_an_agent_memory_file(home, tmp_path, overwrite):
    """A Gemini memory imported with --from may add to the Profile but never replace what the user said."""
    paths = configure(home)
    cfg = config_mod.load(home)
    before = user_said_diet(paths, cfg)
    user = str(tmp_path / "user")
    _write(os.path.join(user, ".gemini", "GEMINI.md"), "## Gemini Added Memories\n- The user eats fish.\n")
    proc = run_cm(["import", "--from", "gemini", "--yes", "--no-wait"], env=hook_env(HOME=user))
    assert proc.returncode == 0, proc.stderr
    assert _imports(paths) == [("gemini:GEMINI.md", "global", "pending")]

    check_import_guard(paths, cfg, before, "Imported from GEMINI.md", overwrite)
