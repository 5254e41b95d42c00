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
    assert f"  claude:auto-memory/user-role [about the user] -> {project.scope}" in out
    assert f"  claude:auto-memory/run-tests [feedback] -> {project.scope}" in out
    assert f"  claude:auto-memory/deploy [project fact] -> {project.scope}" in out
    lines = out.splitlines()

    def may_become(label: str) -> str:
        """The plan's "may become" line under the file ``label``."""
        at = next(i for i, line in enumerate(lines) if line.startswith(f"  {label} ["))
        assert lines[at + 1].startswith("    may become: "), lines[at + 1]
        return lines[at + 1][len("    may become: "):]

    assert may_become("claude:CLAUDE.md") == "profile (facts about you, never instructions to an agent), preferences"
    assert may_become("claude:auto-memory/run-tests") == "preferences, the project's memory"
    assert may_become("claude:auto-memory/user-role") == \
        "profile (facts about you, never instructions to an agent), preferences, the project's memory"
    assert may_become("claude:auto-memory/deploy") == "the project's memory only"
    for code, name in (("INDEX_ONLY", "MEMORY.md"), ("BINARY", "blob.md"), ("SENSITIVE_CONTENT_REJECTED", "keys.md"),
                       ("SYMLINK_LEAVES_ROOT", "linked.md"), ("IMPORT_LEAVES_ROOT", "notes.md"),
                       ("IMPORT_CYCLE", "CLAUDE.md")):
        assert any(line.startswith(f"  skipped {code}: ") and name in line for line in out.splitlines()), (code, out)
    assert "not/an/import.md" not in out and "hunter2" not in out
    assert "permission: imports are off" in out and out.endswith("dry run: nothing was queued\n")
    assert _imports(paths) == []
    assert "document_import" not in config_mod.load(home).disclosure.allowed_provenance


def test_claude_project_memory_finds_its_registered_project_without_workspace(home, tmp_path):
    _setup(home)
    paths = _paths(home)
    project = register(paths, str(tmp_path / "app"), "App")
    allow(home, project.scope)
    user = str(tmp_path / "user")
    _claude_fixture(user, project.path)
    # A sibling whose folded name starts with the project's: never matched by prefix.
    sibling = os.path.join(user, ".claude", "projects", memsources.claude_project_dir(project.path + "-old"), "memory")
    _write(os.path.join(sibling, "project_old.md"),
           "---\nname: old-deploy\ntype: project\n---\nThe old app deployed on Mondays.\n")
    proc = run_cm(["import", "--from", "claude", "--dry-run"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert f"  claude:auto-memory/deploy [project fact] -> {project.scope}" in out
    assert "claude:auto-memory/old-deploy" not in out
    assert any(line.startswith(f"  skipped NO_PROJECT: {sibling}: ")
               for line in out.splitlines()), out


def _topic(memory: str, name: str, body: str, kind: str | None) -> str:
    head = "" if kind is None else f"---\nname: {name}\ndescription: {name}\ntype: {kind}\n---\n"
    return _write(os.path.join(memory, f"{name}.md"), head + body)


def test_everything_in_a_project_memory_folder_is_that_projects_or_skipped_never_global(home, tmp_path):
    _setup(home)
    paths = _paths(home)
    project = register(paths, str(tmp_path / "app"), "App")
    allow(home, project.scope)
    user = str(tmp_path / "user")
    base = os.path.join(user, ".claude", "projects")
    _write(os.path.join(user, ".claude", "CLAUDE.md"), "# Me\n\nI prefer Go over Java.\n")
    # An unregistered project: whatever its files say, none of them is read or planned.
    elsewhere = os.path.join(base, memsources.claude_project_dir(str(tmp_path / "infra")), "memory")
    _topic(elsewhere, "deploy", "Deploys go to /srv/infra-7001 on host bastion-7001.\n", None)
    _topic(elsewhere, "role", "The user is on call for infra-7002.\n", "user")
    _topic(elsewhere, "style", "Use tabs in infra-7003.\n", "feedback")
    index_only = os.path.join(base, memsources.claude_project_dir(str(tmp_path / "blog")), "memory")
    _write(os.path.join(index_only, "MEMORY.md"), "- the blog-7004 builds with hugo\n")
    # The registered project: every file in its scope; a kind Claude Code does not write is not guessed.
    mine = os.path.join(base, memsources.claude_project_dir(project.path), "memory")
    _topic(mine, "hosts", "The app deploys to app-7005.internal.\n", None)
    _topic(mine, "role", "The user reviews the app's SQL migrations.\n", "user")
    _topic(mine, "odd", "A note of an unknown kind, odd-7006.\n", "secretsauce")
    proc = run_cm(["import", "--from", "claude", "--yes", "--no-wait"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    lines = out.splitlines()
    assert "  claude:CLAUDE.md [personal] -> global: new, 1 part," in out
    assert [line for line in lines if " -> global" in line] == [line for line in lines if "claude:CLAUDE.md" in line]
    assert f"  claude:auto-memory/hosts [project fact] -> {project.scope}: new" in out
    assert f"  claude:auto-memory/role [about the user] -> {project.scope}: new" in out
    for code, where in (("NO_PROJECT", elsewhere), ("NO_PROJECT", index_only),
                        ("UNKNOWN_KIND", os.path.join(mine, "odd.md"))):
        assert any(line.startswith(f"  skipped {code}: {where}: ") for line in lines), (code, out)
    assert "secretsauce" not in out and not any(f"-700{n}" in out for n in range(1, 8))
    assert sorted(_imports(paths)) == [("claude:CLAUDE.md", "global", "pending"),
                                       ("claude:auto-memory/hosts", project.scope, "pending"),
                                       ("claude:auto-memory/role", project.scope, "pending")]


def test_a_folder_two_registered_projects_share_is_ambiguous_until_workspace_names_one(home, tmp_path):
    """Claude Code folds every character but letters and digits into '-': ``my_app`` and ``my-app``
    share one memory folder, so neither registration order nor a guess may decide whose it is."""
    _setup(home)
    paths = _paths(home)
    underscore = register(paths, str(tmp_path / "src" / "my_app"), "Underscore")
    dash = register(paths, str(tmp_path / "src" / "my-app"), "Dash")
    allow(home, underscore.scope, dash.scope)
    user = str(tmp_path / "user")
    name = memsources.claude_project_dir(dash.path)
    assert name == memsources.claude_project_dir(underscore.path)
    memory = os.path.join(user, ".claude", "projects", name, "memory")
    _topic(memory, "deploy", "Deploys go to the host kiwi-7101.\n", "project")
    _topic(memory, "role", "The user owns the billing code.\n", "user")
    proc = run_cm(["import", "--from", "claude", "--dry-run"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    [skip] = [line for line in out.splitlines() if line.startswith("  skipped ")]
    assert skip.startswith(f"  skipped PROJECT_AMBIGUOUS: {memory}: ") and "(2 files)" in skip, out
    assert f"{dash.path} and {underscore.path}" in skip and "--workspace" in skip
    assert "claude:auto-memory/" not in out and "nothing found" not in out

    for chosen, other in ((underscore, dash), (dash, underscore)):
        picked = run_cm(["import", "--from", "claude", "--workspace", chosen.path, "--dry-run"], env=hook_env(HOME=user))
        out = picked.stdout.decode()
        assert picked.returncode == 0, picked.stderr
        assert f"  claude:auto-memory/deploy [project fact] -> {chosen.scope}: new" in out, out
        assert f"  claude:auto-memory/role [about the user] -> {chosen.scope}: new" in out, out
        assert other.scope not in out and "PROJECT_AMBIGUOUS" not in out


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
    assert again.returncode == 0 and "0 files to import" in out and out.count(": unchanged, nothing to send (") == 2
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
    _write(os.path.join(root, "GEMINI.md"), "# Project context\n\nMigrations live in db/migrations; never edit one "
                                            "that has shipped.\n")
    user = str(tmp_path / "user")
    assert run_cm(["import", "--from", "project"], env=hook_env(HOME=user)).stderr.decode().startswith(
        "cm: WORKSPACE_REQUIRED: ")
    proc = run_cm(["import", "--from", "project", "--workspace", root, "--yes", "--no-wait"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert f"project:AGENTS.md [team convention] -> {project.scope}" in out
    assert f"project:.cursor/rules/style.mdc [instructions] -> {project.scope}" in out
    assert f"project:GEMINI.md [team convention] -> {project.scope}" in out
    assert out.count("    may become: the project's memory only\n") == 4
    assert "skipped RULE_NOT_ALWAYS_APPLIED: " in out and "pirate" not in out
    imported = _imports(paths)
    assert sorted(label for label, _s, _st in imported) == ["project:.cursor/rules/style.mdc",
                                                            "project:.github/copilot-instructions.md",
                                                            "project:AGENTS.md", "project:GEMINI.md"]
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


def _gemini_project(gemini: str, project_id: str, root: str, notes: dict[str, str], *, marker: bool = True) -> str:
    """What Gemini CLI 0.61 leaves for a project it ran in: ``projects.json`` maps the root to its id,
    ``tmp/<id>/.project_root`` (and ``history/<id>/.project_root``) name the root, chats beside the
    private notes in ``tmp/<id>/memory/``. Returns that memory folder."""
    registry_path = os.path.join(gemini, "projects.json")
    registry = json.load(open(registry_path)) if os.path.exists(registry_path) else {"projects": {}}
    registry["projects"][root] = project_id
    _write(registry_path, json.dumps(registry, indent=2))
    if marker:
        _write(os.path.join(gemini, "tmp", project_id, ".project_root"), root)
        _write(os.path.join(gemini, "history", project_id, ".project_root"), root)
    _write(os.path.join(gemini, "tmp", project_id, "chats", "session-2026-12-01T10-00-abc.json"), '{"messages": []}')
    memory = os.path.join(gemini, "tmp", project_id, "memory")
    for name, text in notes.items():
        _write(os.path.join(memory, name), text)
    return memory


def _gemini_fixture(user: str, app: str, other_app: str, outside: str) -> dict[str, str]:
    """Two registered projects both called ``app`` (Gemini ids ``app`` and ``app-1``: the second one
    only in projects.json), a run in ``app/src`` (id ``src``), an unregistered project, a folder no
    project claims, the drafts Gemini keeps unapproved, and a memory folder linked out of ~/.gemini."""
    gemini = os.path.join(user, ".gemini")
    _write(os.path.join(gemini, "GEMINI.md"), "# My preferences\n\n- I write commit messages in the imperative.\n")
    memory = _gemini_project(gemini, "app", app, {
        "MEMORY.md": "# Project memory\n\n- Local Postgres runs on port 5433 on my machine.\n"
                     "- [Release checklist](release.md): how I cut a release here\n",
        "release.md": "# Release checklist\n\n1. Bump the version in pyproject.toml.\n2. Tag `vX.Y.Z`.\n",
    })
    _write(os.path.join(memory, ".inbox", "private", "extraction.patch"),
           "--- a/MEMORY.md\n+++ b/MEMORY.md\n@@\n+- unapproved-draft-7731\n")
    _write(os.path.join(memory, "skills", "cut-release", "SKILL.md"), "---\nname: cut-release\n---\nunapproved-skill-7732\n")
    _write(os.path.join(memory, ".extraction.lock"), "")
    _gemini_project(gemini, "app-1", other_app, {"MEMORY.md": "# Project memory\n\n- The staging VM is called kiwi.\n"},
                    marker=False)
    _gemini_project(gemini, "src", os.path.join(app, "src"),
                    {"MEMORY.md": "# Project memory\n\n- In src/ I keep the generated client untouched.\n"})
    _gemini_project(gemini, "scratch", os.path.join(os.path.dirname(app), "scratch"),
                    {"MEMORY.md": "# Project memory\n\n- unregistered-note-7733\n"})
    _write(os.path.join(gemini, "tmp", "0f" * 32, "memory", "MEMORY.md"), "# Orphan\n\n- orphan-note-7734\n")
    _write(os.path.join(outside, "MEMORY.md"), "# Elsewhere\n\n- outside-note-7735\n")
    os.makedirs(os.path.join(gemini, "tmp", "linked"))
    _write(os.path.join(gemini, "tmp", "linked", ".project_root"), app)
    os.symlink(outside, os.path.join(gemini, "tmp", "linked", "memory"))
    return {"memory": memory}


def test_gemini_project_memory_lands_in_its_registered_project_only(home, tmp_path):
    _setup(home)
    paths = _paths(home)
    app = register(paths, str(tmp_path / "work" / "app"), "App")
    other = register(paths, str(tmp_path / "clients" / "app"), "Client app")
    allow(home, app.scope, other.scope)
    user = str(tmp_path / "user")
    fixture = _gemini_fixture(user, app.path, other.path, str(tmp_path / "outside"))
    proc = run_cm(["import", "--from", "gemini", "--dry-run"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    lines = out.splitlines()
    assert lines[0].startswith("plan for gemini: 5 files to import"), out
    memory = fixture["memory"]
    assert "  gemini:GEMINI.md [personal] -> global: new, 1 part," in out
    assert f"  gemini:project-memory/MEMORY [project fact] -> {app.scope}: new, 1 part," in out
    assert f"({os.path.join(memory, 'MEMORY.md')})" in out
    assert f"  gemini:project-memory/release [project fact] -> {app.scope}: new, 1 part," in out
    assert f"-> {other.scope}: new, 1 part," in out and "app-1/memory/MEMORY.md" in out
    assert "src/memory/MEMORY.md" in out  # gemini run in app/src: the project that holds src
    for code, where in (("NOT_APPROVED", os.path.join(memory, ".inbox")),
                        ("NOT_APPROVED", os.path.join(memory, "skills")),
                        ("NO_PROJECT", os.path.join("tmp", "scratch", "memory")),
                        ("NO_PROJECT", os.path.join("tmp", "0f" * 32, "memory")),
                        ("SYMLINK_LEAVES_ROOT", os.path.join("tmp", "linked", "memory", "MEMORY.md"))):
        assert any(line.startswith(f"  skipped {code}: ") and where in line for line in lines), (code, out)
    assert "cm project register " + os.path.join(os.path.dirname(app.path), "scratch") in out
    assert not any(marker in out for marker in ("7731", "7732", "7733", "7734", "7735"))
    assert out.endswith("dry run: nothing was queued\n") and _imports(paths) == []

    only = run_cm(["import", "--from", "gemini", "--workspace", other.path, "--dry-run"], env=hook_env(HOME=user))
    out = only.stdout.decode()
    assert only.returncode == 0 and "plan for gemini: 2 files to import" in out, out
    assert f"-> {other.scope}: new, 1 part," in out and app.scope not in out and "NO_PROJECT" not in out


def test_gemini_project_memory_imports_into_the_project(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "work" / "api"), "API")
    allow(home, project.scope)
    user = str(tmp_path / "user")
    gemini = os.path.join(user, ".gemini")
    _gemini_project(gemini, "api", project.path, {
        "MEMORY.md": "# Project memory\n\n- My local API talks to the dev database on port 5433.\n"
                     "- [Fixtures](fixtures.md)\n",
        "fixtures.md": "# Fixtures\n\nI regenerate the fixtures with `make fixtures` after a schema change.\n"})
    _gemini_project(gemini, "notes", str(tmp_path / "notes"), {"MEMORY.md": "# Project memory\n\n- unregistered-8841\n"})
    env = hook_env(HOME=user, CM_TEST_AGENT_SCRIPT=script_file(
        str(tmp_path), [retain_template("Kept {first}", target=project.scope, applicability="project")]))
    proc = run_cm(["import", "--from", "gemini", "--yes"], env=env)
    out = proc.stdout.decode()
    assert proc.returncode == 0, (out, proc.stderr)
    assert out.endswith("complete: true\n")
    assert _imports(paths) == [("gemini:project-memory/MEMORY", project.scope, "processed"),
                               ("gemini:project-memory/fixtures", project.scope, "processed")]
    assert "Kept" in open(paths.document(project.scope)).read()
    assert not os.path.exists(paths.document("profile")) or "Kept" not in open(paths.document("profile")).read()
    assert not rows(paths, "SELECT id FROM observations WHERE text LIKE '%unregistered-8841%'")

    again = run_cm(["import", "--from", "gemini", "--yes"], env=env)
    assert again.returncode == 0 and again.stdout.decode().endswith("nothing new to import\n")
    assert len(_imports(paths)) == 2


def test_a_folder_claude_code_also_keeps_for_an_unregistered_path_is_not_guessed(home, tmp_path):
    """Only ``/src/my_app`` is registered, but Claude Code also ran in ``/src/my-app`` (its
    ``~/.claude.json`` says so): their shared folder may hold either project's notes."""
    _setup(home)
    paths = _paths(home)
    mine = register(paths, str(tmp_path / "src" / "my_app"), "Mine")
    allow(home, mine.scope)
    other, infra = str(tmp_path / "src" / "my-app"), str(tmp_path / "ops" / "infra")
    user = str(tmp_path / "user")
    state = {"numStartups": 40, "projects": {mine.path: {"allowedTools": []}, other: {"allowedTools": []},
                                             infra: {"hasTrustDialogAccepted": True}}}
    _write(os.path.join(user, ".claude.json"), json.dumps(state))
    base = os.path.join(user, ".claude", "projects")
    shared = os.path.join(base, memsources.claude_project_dir(mine.path), "memory")
    _topic(shared, "deploy", "Deploys go to the host kiwi-7201.\n", "project")
    lone = os.path.join(base, memsources.claude_project_dir(infra), "memory")
    _topic(lone, "hosts", "The bastion is bastion-7202.\n", "project")
    proc = run_cm(["import", "--from", "claude", "--dry-run"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    lines = out.splitlines()
    [ambiguous] = [line for line in lines if line.startswith(f"  skipped PROJECT_AMBIGUOUS: {shared}: ")]
    assert f"{other} and {mine.path}" in ambiguous and "--workspace" in ambiguous, out
    [unregistered] = [line for line in lines if line.startswith(f"  skipped NO_PROJECT: {lone}: ")]
    assert f"`cm project register {infra} {os.path.basename(infra)} --allow`" in unregistered, out
    assert "claude:auto-memory/" not in out and "-720" not in out

    picked = run_cm(["import", "--from", "claude", "--workspace", mine.path, "--dry-run"], env=hook_env(HOME=user))
    assert f"  claude:auto-memory/deploy [project fact] -> {mine.scope}: new" in picked.stdout.decode()

    _write(os.path.join(user, ".claude.json"), "{damaged")  # unreadable: the registered projects alone decide
    proc = run_cm(["import", "--from", "claude", "--dry-run"], env=hook_env(HOME=user))
    assert f"  claude:auto-memory/deploy [project fact] -> {mine.scope}: new" in proc.stdout.decode(), proc.stdout


def test_a_gemini_id_the_registry_gives_to_two_roots_is_not_guessed(home, tmp_path):
    """Without ``.project_root``, a ``projects.json`` naming one id for two roots (edited or merged
    by hand) leaves the folder's owner unknown: the last root read must not take it."""
    _setup(home)
    paths = _paths(home)
    app = register(paths, str(tmp_path / "work" / "app"), "App")
    allow(home, app.scope)
    user = str(tmp_path / "user")
    gemini = os.path.join(user, ".gemini")
    stranger = str(tmp_path / "zzz" / "app")  # sorts after the registered root
    memory = _gemini_project(gemini, "app", app.path, {"MEMORY.md": "# Project memory\n\n- port 7301\n"}, marker=False)
    _gemini_project(gemini, "app", stranger, {}, marker=False)
    proc = run_cm(["import", "--from", "gemini", "--dry-run"], env=hook_env(HOME=user))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    [skip] = [line for line in out.splitlines() if line.startswith(f"  skipped PROJECT_AMBIGUOUS: {memory}: ")]
    assert f"{app.path} and {stranger}" in skip and "--workspace" in skip, out
    assert "gemini:project-memory/" not in out and "7301" not in out

    picked = run_cm(["import", "--from", "gemini", "--workspace", app.path, "--dry-run"], env=hook_env(HOME=user))
    assert f"  gemini:project-memory/MEMORY [project fact] -> {app.scope}: new" in picked.stdout.decode(), picked.stdout


def test_the_folders_the_hosts_were_moved_to_are_where_their_memory_is_read(home, tmp_path):
    """``CLAUDE_CONFIG_DIR`` moves all of Claude Code's files (``.claude.json`` too), and
    ``GEMINI_CLI_HOME`` replaces the home Gemini CLI keeps ``.gemini`` in: cm reads them there."""
    _setup(home)
    paths = _paths(home)
    project = register(paths, str(tmp_path / "app"), "App")
    allow(home, project.scope)
    user, claude, gemini_home = str(tmp_path / "user"), str(tmp_path / "cfg" / "claude"), str(tmp_path / "cfg" / "g")
    _write(os.path.join(user, ".claude", "CLAUDE.md"), "# stale\n\nnot the folder in use\n")
    _write(os.path.join(claude, "CLAUDE.md"), "# Me\n\nI prefer Go over Java.\n")
    _topic(os.path.join(claude, "projects", memsources.claude_project_dir(project.path), "memory"), "deploy",
           "Deploys go out on Thursdays.\n", "project")
    twin = str(tmp_path / "app_")  # Claude Code ran here too: only the moved .claude.json names it
    _write(os.path.join(claude, ".claude.json"), json.dumps({"projects": {twin: {}}}))
    _topic(os.path.join(claude, "projects", memsources.claude_project_dir(twin), "memory"), "twin", "x\n", "project")
    _write(os.path.join(gemini_home, ".gemini", "GEMINI.md"), "# Gemini\n\nBritish English.\n")
    env = hook_env(HOME=user, CLAUDE_CONFIG_DIR=claude, GEMINI_CLI_HOME=gemini_home)
    out = run_cm(["import", "--from", "claude", "--dry-run"], env=env).stdout.decode()
    assert "  claude:CLAUDE.md [personal] -> global: new, 1 part," in out, out
    assert f"({os.path.join(claude, 'CLAUDE.md')})" in out
    assert f"  claude:auto-memory/deploy [project fact] -> {project.scope}: new" in out
    assert f"`cm project register {twin} {os.path.basename(twin)} --allow`" in out
    out = run_cm(["import", "--from", "gemini", "--dry-run"], env=env).stdout.decode()
    assert "  gemini:GEMINI.md [personal] -> global: new" in out and gemini_home in out, out


def test_a_project_claude_code_ran_through_a_link_finds_its_memory(home, tmp_path):
    """Claude Code names the folder after the path it was started in, which may lead through a link
    to the root cm registered (its real path); ``~/.claude.json`` names that path."""
    _setup(home)
    paths = _paths(home)
    project = register(paths, str(tmp_path / "real" / "app"), "App")
    allow(home, project.scope)
    link = str(tmp_path / "work")
    os.symlink(str(tmp_path / "real"), link)
    started = os.path.join(link, "app")
    user = str(tmp_path / "user")
    _write(os.path.join(user, ".claude.json"), json.dumps({"projects": {started: {}}}))
    _topic(os.path.join(user, ".claude", "projects", memsources.claude_project_dir(started), "memory"), "deploy",
           "Deploys go out on Thursdays.\n", "project")
    for extra in ([], ["--workspace", started], ["--workspace", project.path]):
        proc = run_cm(["import", "--from", "claude", *extra, "--dry-run"], env=hook_env(HOME=user))
        out = proc.stdout.decode()
        assert f"  claude:auto-memory/deploy [project fact] -> {project.scope}: new" in out, (extra, out, proc.stderr)
