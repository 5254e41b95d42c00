"""The setup wizard's "bring in what your agents already know" step and its Home entry (textual
pilot): the plan shown, Enter importing through the real Writer with the loopback fake model, the
document_import permission granted only by that choice, Skip writing nothing, nothing found going on.

Each test has its own cm home and a made-up user home holding the agents' memory files, written
here (Claude Code's CLAUDE.md and auto memory, Codex's memories, Gemini CLI's GEMINI.md).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from tui_support import KEY, configure_model, drive, first_run, flat, open_action, temp_hosts, wait_for

from cmrunner.core import config as config_mod, projects
from cmrunner.core.home import DataPaths
from cmrunner.manage import memsources, setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp

pytestmark = pytest.mark.timeout(180)
IMPORT_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support",
                             "import_policy.py") + ":keep_imported_parts"
FACTS_POLICY = IMPORT_POLICY.replace(":keep_imported_parts", ":remember_facts")


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _agents_memory(tmp: str) -> str:
    """A user home (and CODEX_HOME beside it, as ``temp_hosts`` names it) with each agent's memory."""
    user = os.path.join(tmp, "userhome")
    claude = os.path.join(user, ".claude")
    _write(os.path.join(claude, "CLAUDE.md"),
           "# About me\n\nI am a backend developer in Lisbon and I prefer Go over Java for services.\n")
    memory = os.path.join(claude, "projects", memsources.claude_project_dir("/home/me/src/ferrous"), "memory")
    _write(os.path.join(memory, "MEMORY.md"), "- [Role](user_role.md) — who the user is\n"
                                              "- [Deploys](project_deploy.md) — release days\n")
    _write(os.path.join(memory, "user_role.md"), "---\nname: user-role\ndescription: the user's role\ntype: user\n"
                                                 "---\nThe user is a data engineer who reviews SQL migrations.\n")
    _write(os.path.join(memory, "project_deploy.md"), "---\nname: deploy\ndescription: deploys\ntype: project\n"
                                                      "---\nReleases of ferrous go out on Thursdays.\n")
    codex = os.path.join(tmp, "codexhome", "memories")
    _write(os.path.join(codex, "memory_summary.md"),
           "# Memory summary\n\n- The user maintains a Rust CLI named ferrous.\n- Prefers small pull requests.\n")
    _write(os.path.join(codex, "raw_memories.md"), "# Raw\n\nrollout excerpts, never imported\n")
    _write(os.path.join(user, ".gemini", "GEMINI.md"),
           "# Gemini notes\n\nThe user writes documentation in British English.\n")
    return user


def _plan_shown(text: str) -> bool:
    """The plan and the choices below it are on screen (a check made mid-layout sees only a part)."""
    return "To import:" in text and "Skip: import nothing" in text


def _allowed(home: str) -> bool:
    return "document_import" in config_mod.load(home).disclosure.allowed_provenance


def _tree(root: str) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (what "writes nothing" is checked against)."""
    found = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found


def test_first_run_shows_the_plan_and_enter_imports_through_the_writer(home, tmp_path, monkeypatch):
    user = _agents_memory(str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    hosts = temp_hosts(str(tmp_path), pi=False, claude=True, gemini=True)
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "policy": IMPORT_POLICY}) as fake:
        app = CmApp(home, discover=hosts, user_home=user)
        seen: dict[str, object] = {}

        async def steps(pilot):
            await first_run(pilot, fake.base_url)  # Claude Code, Codex CLI and Gemini CLI, all found here
            await pilot.press("enter")
            text = await wait_for(pilot, _plan_shown, timeout=60)
            seen["plan"] = text
            seen["allowed_before_enter"] = _allowed(home)
            await pilot.press("enter")  # the highlighted choice: Import
            text = await wait_for(pilot, lambda t: "Result:" in t and "Enter continue" in t and "gemini:GEMINI.md →" in
                                  t.split("Result:")[1] and "Importing …" not in t,
                                  timeout=120)  # the last file's line: the whole result, laid out
            seen["result"] = text
            await pilot.press("enter")
            await wait_for(pilot, "Model & Configuration")
            await open_action("import", lambda p: wait_for(p, "Nothing new to import", timeout=60))(pilot)
            seen["again"] = pilot.app.screen.query_one("#plan").render()
            await pilot.press("escape", "escape")

        drive(app, steps)
        posts = [r for r in fake.requests() if r["method"] == "POST"]
    plan = seen["plan"]
    assert isinstance(plan, str)
    for line in ("Claude Code (chosen)", "claude:CLAUDE.md [personal] → global: new, 1 part,",
                 "skipped NO_PROJECT:", "Codex CLI (chosen)", "codex:memory_summary [personal] → global: new, 1 part,",
                 "Gemini CLI (chosen)", "gemini:GEMINI.md [personal] → global: new, 1 part,",
                 "may become: profile (facts about you, never instructions to an agent), preferences",
                 "To import: 3 files, ~", "tokens to process: fixed instructions ~", "+ your text with its framing ~",
                 f"Sent to: the Memory Agent's model, fake-model at {fake.base_url}.",
                 "Permission: document imports are off",
                 "Import 3 files and allow document imports", "Skip: import nothing"):
        assert line in plan, (line, plan)
    # a file's line counts its own text only; the fixed instructions are named once, in the total
    [fixed] = re.findall(r"fixed instructions ~([\d,]+) \+ your text with its framing ~([\d,]+)", plan)
    own = [int(n.replace(",", "")) for n in re.findall(r" bytes, ~([\d,]+) tokens of text", plan)]
    assert len(own) == 3 and sum(own) == int(fixed[1].replace(",", "")), (own, fixed, plan)
    assert max(own) < int(fixed[0].replace(",", "")) / 3, plan  # none of them carries a request's instructions
    assert "raw_memories" not in plan and "Lisbon" not in plan  # names and numbers, never the files' text
    assert seen["allowed_before_enter"] is False
    result = seen["result"]
    assert isinstance(result, str)
    assert "Granted: disclosure.allowedProvenance +document_import" in result
    # the section each file's part became, named with its document (the policy titles it by its part)
    named = re.findall(r"(\S+) → global: preferences / Imported (\d+) added(?![,\w])",
                       result.split("Result:")[1])
    assert sorted(label for label, _n in named) == ["claude:CLAUDE.md", "codex:memory_summary", "gemini:GEMINI.md"], result
    assert len({n for _label, n in named}) == 3, result
    assert "kept in" not in result
    assert "processed" not in result.split("Result:")[1]
    assert _allowed(home)
    assert posts  # the Memory Agent ran against the fake model
    kept = open(DataPaths(config_mod.load(home).data_root).document("preferences"), encoding="utf-8").read()
    for fact in ("prefer Go over Java", "Rust CLI named ferrous", "British English"):
        assert fact in kept, (fact, kept)
    # the memory of a project cm has not registered is skipped whole, its "about the user" files too
    assert "Thursdays" not in kept and "data engineer" not in kept and "auto-memory" not in plan
    assert "→ global: unchanged" in str(seen["again"])


def test_skip_imports_nothing_and_writes_nothing(home, tmp_path, monkeypatch):
    user = _agents_memory(str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "policy": IMPORT_POLICY}) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)
        before = _tree(home)

        async def then(pilot):
            text = await wait_for(pilot, _plan_shown, timeout=60)
            assert "codex:memory_summary [personal] → global" in text and "Skip: import nothing" in text
            await pilot.press("down", "enter")  # Skip
            await wait_for(pilot, "Model & Configuration")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path)), user_home=user), open_action("import", then))
        posts = [r for r in fake.requests() if r["method"] == "POST"]
    after = _tree(home)
    after.pop("tui.json", None)  # Home remembers the last action opened
    before.pop("tui.json", None)
    assert after == before
    assert not _allowed(home) and posts == []


def test_nothing_found_says_so_and_the_first_run_goes_on(home, tmp_path, monkeypatch):
    user = str(tmp_path / "userhome")  # the agents are there, their memory files are not
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    hosts = temp_hosts(str(tmp_path), pi=False, claude=True, gemini=True)
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        app = CmApp(home, discover=hosts, user_home=user)

        async def steps(pilot):
            await first_run(pilot, fake.base_url)
            await pilot.press("enter")
            text = await wait_for(pilot, "Nothing to bring in: no memory files of Claude Code, Codex CLI or Gemini CLI "
                                         "were found", timeout=60)
            assert "Model & Configuration" in text  # Home, with that line as its notice
            await open_action("import", lambda p: wait_for(p, "Nothing to bring in", timeout=60))(pilot)
            await pilot.press("enter")  # Continue
            await wait_for(pilot, "Model & Configuration")
            await pilot.press("escape")

        drive(app, steps)
    assert setupstate.stage(home) is None
    assert not _allowed(home)
    assert json.load(open(os.path.join(home, "integrations.json")))


def _words(screen: object) -> str:
    """Every word the import screen holds in its plan, total and result widgets, scrolled into view
    or not (``flat``)."""
    found = [str(w.render()) for w in screen.query("#plan, #total, #progress")  # type: ignore[attr-defined]
             if w.display]
    return flat(" ".join(found))


async def _settled(pilot: object, needle: str, timeout: float = 120) -> str:
    """Wait until the import screen's words hold ``needle``; returns them."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        words = _words(pilot.app.screen)  # type: ignore[attr-defined]
        if needle in words:
            return words
        assert time.monotonic() < deadline, f"waited {timeout} s for {needle!r}; the screen holds:\n{words}"


def test_a_failed_import_says_failed_with_its_retry_and_plans_again_at_80x24(home, tmp_path, monkeypatch):
    user = _agents_memory(str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    seen: dict[str, str] = {}
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"error": {"status": 401}}}) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def then(pilot):
            await wait_for(pilot, "Import 3 files", timeout=60)
            await pilot.press("enter")
            seen["result"] = await _settled(pilot, "gemini:GEMINI.md → global:")
            seen["result_screen"] = await wait_for(pilot, "Enter continue")
            await pilot.press("enter")
            await wait_for(pilot, "Model & Configuration")
            # planned again: each file is failed with its retry, and is to import again (never "unchanged")
            await open_action("import", lambda p: wait_for(p, "Import 3 files", timeout=60))(pilot)
            seen["again"] = _words(pilot.app.screen)
            await pilot.press("escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path)), user_home=user), open_action("import", then),
              size=(80, 24))
    result = seen["result"].split("Result:")[1]
    for label in ("claude:CLAUDE.md", "codex:memory_summary", "gemini:GEMINI.md"):
        assert f"{label} → global: failed — run `cm retry " in result, result
    assert result.count("(AUTHENTICATION); see `cm status` (1 of 1 part)") == 3, result
    assert "processed" not in result and "dead" not in result
    assert "→ global: failed — run `cm retry " in seen["result_screen"]  # in view at 80×24, not below the fold
    assert KEY not in seen["result"] and "Lisbon" not in seen["result"] and "ferrous." not in seen["result"]
    assert _allowed(home)  # the user chose Import: the grant stays, the parts wait for `cm retry`
    again = seen["again"]
    for label in ("claude:CLAUDE.md", "codex:memory_summary", "gemini:GEMINI.md"):
        assert f"{label} [personal] → global: failed — run `cm retry " in again, (label, again)
    assert again.count("(AUTHENTICATION); importing again retries it, 1 part to retry, ~") == 3, again
    assert "unchanged" not in again and "To import: 3 files, ~" in again
    assert "tokens to process: fixed instructions ~" in again and "+ your text with its framing ~" in again
    assert f"Sent to: the Memory Agent's model, fake-model at {fake.base_url}." in again
    assert "Requests: ~6 requests to the model (2 per part); within the spend caps." in again  # 3 parts retried


def test_started_inside_an_unregistered_project_one_choice_registers_and_allows_it_at_80x24(home, tmp_path,
                                                                                          monkeypatch):
    user = _agents_memory(str(tmp_path))
    folder = os.path.join(str(tmp_path), "ferrous")
    os.makedirs(folder)
    memory = os.path.join(user, ".claude", "projects", memsources.claude_project_dir(folder), "memory")
    _write(os.path.join(memory, "project_deploy.md"), "---\nname: deploy\ntype: project\n---\nReleases on Thursdays.\n")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    monkeypatch.chdir(folder)
    seen: dict[str, str] = {}
    configure_model(home, "http://127.0.0.1:9/v1")  # planning only: nothing is sent
    setupstate.finish(home)

    async def then(pilot):
        seen["before"] = await wait_for(pilot, "Register this folder (ferrous) as a project and allow its memory",
                                        timeout=60)
        seen["plan_before"] = _words(pilot.app.screen)
        menu = pilot.app.screen.query_one("#choice")
        menu.highlighted = [o.id for o in menu._options].index("register")
        await pilot.press("enter")
        seen["after"] = await _settled(pilot, "claude:auto-memory/deploy [project fact] → project:", timeout=60)
        await pilot.press("escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path)), user_home=user), open_action("import", then),
          size=(80, 24))
    assert "skipped NO_PROJECT: ~/.claude/projects/" in seen["plan_before"]
    assert f"`cm project register {folder} ferrous --allow`" in seen["plan_before"]
    [project] = [p for p in projects.load(DataPaths(config_mod.load(home).data_root)) if p.path == folder]
    data = config_mod.load(home).data
    assert project.scope in data["disclosure"]["allowedScopes"] and project.scope in data["writableScopes"]
    assert f"claude:auto-memory/deploy [project fact] → {project.scope}: new, 1 part" in seen["after"]
    assert "NO_PROJECT: ~/.claude/projects/" + memsources.claude_project_dir(folder) not in seen["after"]


def test_a_result_names_the_sections_kept_and_a_long_list_fits_80x24(home, tmp_path, monkeypatch):
    """Issue 36: which documents *and sections* an import added, at most three per file and then
    "and N more", so each file's line stays short enough to read on an 80×24 screen."""
    user = str(tmp_path / "userhome")
    facts = "".join(f"\n## {name}\n\nFACT-{name}: likes {name} a lot\n" for name in ("a", "b", "c", "d", "e", "f"))
    _write(os.path.join(user, ".gemini", "GEMINI.md"), "# About me\n" + facts)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    seen: dict[str, str] = {}
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "policy": FACTS_POLICY}) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def then(pilot):
            await wait_for(pilot, "Import 1 file", timeout=60)
            await pilot.press("enter")
            seen["screen"] = await wait_for(pilot, lambda t: "Enter continue" in t and "Result:" in t, timeout=120)
            await pilot.press("enter")
            await wait_for(pilot, "Model & Configuration")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path)), user_home=user), open_action("import", then),
              size=(80, 24))
    screen = seen["screen"]  # what is in view at 80×24, not what is below the fold
    [named] = re.findall(r"gemini:GEMINI\.md → global: profile / Fact (\w) added, profile / Fact (\w) added, "
                         r"profile / Fact (\w) added and 3 more \(`cm history`\)", screen)
    assert len(set(named)) == 3 and set(named) <= set("abcdef"), screen
    assert "likes" not in screen  # section titles, never the file's text
