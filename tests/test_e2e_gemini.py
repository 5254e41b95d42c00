"""End to end with the real Gemini CLI (0.61.0, installed from npm into a cache outside the repo).

`gemini -p` runs offline against the project's fake model on 127.0.0.1 speaking Gemini
streamGenerateContent (SSE), with cm's hooks installed by `cm agents install gemini` into the scratch HOME's user
settings. If node or npm is missing these tests fail with what to
install; they are never skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CM, db_rows, hook_env, run_cm, settle
from mcp_support import allow, configure, register
from support import agenthosts

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def gemini() -> Path:
    return agenthosts.gemini_binary()


class GeminiSetup:
    def __init__(self, gemini: Path, home: str, root: Path, fake: fakemodel.FakeModel) -> None:
        self.gemini, self.home, self.fake = gemini, home, fake
        self.work = root / "work"
        self.work.mkdir(exist_ok=True)
        scratch = root / "scratchhome"
        agenthosts.write_gemini_settings(scratch, None)
        self.env = agenthosts.gemini_env(scratch, home, fake.root_url)
        agenthosts.install_hooks(CM, home, "gemini", self.env)

    def run(self, prompt: str) -> subprocess.CompletedProcess[str]:
        done = agenthosts.run(agenthosts.gemini_argv(self.gemini, prompt), str(self.work), self.env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done


def observed(home: str) -> list[tuple]:
    return db_rows(home, "SELECT text, state, issue FROM observations ORDER BY id")


def test_full_loop_what_one_gemini_session_says_the_next_one_knows(gemini, home, tmp_path):
    """gemini -p → hooks → cm flush → Memory Agent (synthetic model) → Markdown → next SessionStart."""
    from agent_support import configure_remote

    with fakemodel.running(str(tmp_path / "agent-model"), {"policy": "remember_user_turns"}) as agent_model, \
            fakemodel.running(str(tmp_path / "gemini-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        configure_remote(home, agent_model.base_url)
        setup = GeminiSetup(gemini, home, tmp_path, fake)
        assert "Noted." in setup.run("Please remember that my cat is called Miso-3357.").stdout
        flushed = subprocess.run([CM, "flush", "--home", home], env=hook_env(), capture_output=True, text=True,
                                 timeout=120)
        assert flushed.returncode == 0, flushed.stderr
        assert "Miso-3357" in (Path(home) / "data" / "memory" / "profile.md").read_text()
        # Only the typed words: not the memory block gemini -p prepends to the prompt it reports.
        assert observed(home) == [("Please remember that my cat is called Miso-3357.", "processed", None)]
        before = len(fake.model_requests())
        setup.run("What is my cat called?")
        second = json.dumps(fake.model_requests()[before]["body"])
        assert "Miso-3357" in second and "common-memory-data" in second
        settle(home)


def test_a_slash_command_and_a_tool_result_are_never_captured(gemini, home, tmp_path):
    work = tmp_path / "work"
    (work / ".gemini" / "commands").mkdir(parents=True)
    (work / ".gemini" / "commands" / "note.toml").write_text('prompt = "Answer with one word. Topic: {{args}}"\n')
    notes = work / "notes.txt"
    notes.write_text("tool-result-5531 is only in a file\n")
    script = {"replies": [
        {"text": "Yes."},  # the custom command's expansion
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": str(notes)}}]},
        {"text": "The file is read."},
    ], "default": {"text": "Noted."}}
    with fakemodel.running(str(tmp_path / "gemini-model"), script) as fake:
        setup = GeminiSetup(gemini, home, tmp_path, fake)
        setup.run("/note command-arg-7712")
        setup.run("Read notes.txt please, I keep my aliases in it.")
        requests = [json.dumps(r["body"]) for r in fake.model_requests()]
    # Observed on 0.61.0: in -p, Gemini prepends cm's SessionStart context to the prompt before it
    # parses slash commands, so `/note …` reaches the model unexpanded; BeforeAgent reports it as typed.
    # (Without prepended context it reports the expansion instead: test_hook_claude covers that record.)
    assert "command-arg-7712" in requests[0]
    assert any("functionResponse" in r and "tool-result-5531" in r for r in requests)  # the tool really ran
    settle(home)
    store = json.dumps(db_rows(home, "SELECT * FROM observations")) + json.dumps(
        db_rows(home, "SELECT * FROM session_messages"))
    assert "tool-result-5531" not in store and "command-arg-7712" not in store
    assert observed(home) == [("Read notes.txt please, I keep my aliases in it.", "pending", None)]
    assert db_rows(home, "SELECT COUNT(*) FROM hook_rejections") == [(0,)]


def test_cm_import_finds_the_project_memory_gemini_itself_names(gemini, home, tmp_path):
    """Two registered projects with one base name: the real Gemini gives them two ids and tells its
    model where each one's private memory index is; cm import --from gemini reads back Gemini's own
    record of those ids and plans each index into its own project's scope."""
    paths = configure(home)
    projects = [register(paths, str(tmp_path / "work" / "app"), "App"),
                register(paths, str(tmp_path / "clients" / "app"), "Client app")]
    allow(home, *(p.scope for p in projects))
    scratch = tmp_path / "scratchhome"
    agenthosts.write_gemini_settings(scratch, None)
    indexes = []
    with fakemodel.running(str(tmp_path / "gemini-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        env = agenthosts.gemini_env(scratch, home, fake.root_url)
        for project in projects:
            before = len(fake.model_requests())
            done = agenthosts.run(agenthosts.gemini_argv(gemini, "Hello."), project.path, env)
            assert done.returncode == 0, done.stderr[-2000:]
            said = " ".join(json.dumps(r["body"]) for r in fake.model_requests()[before:])
            found = re.search(r"Private Project Memory\*\* \(`([^`]+)`\)", said)
            assert found, "gemini 0.61 names its private project memory index in the system prompt"
            indexes.append(found.group(1))
    # Observed on 0.61.0: ids are slugs of the base name, the second one numbered.
    assert [Path(i).parent.parent.name for i in indexes] == ["app", "app-1"]
    for project, index in zip(projects, indexes, strict=True):
        Path(index).parent.mkdir(parents=True, exist_ok=True)
        Path(index).write_text(f"# Project memory\n\n- The {project.name} deploys from the main branch.\n")
    proc = run_cm(["import", "--from", "gemini", "--dry-run"], env=hook_env(HOME=str(scratch)))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    for project, index in zip(projects, indexes, strict=True):
        assert f"  gemini:project-memory/MEMORY [project fact] -> {project.scope}: new, 1 part," in out
        assert any(project.scope in line and line.endswith(f"({index})") for line in out.splitlines()), out
    assert "skipped" not in out, out


def test_a_slash_word_that_is_no_command_and_a_bang_prompt_are_turns(gemini, home, tmp_path):
    """Observed on 0.61.0: `gemini -p` sends an unknown `/word` and a `!…` to the model as text."""
    words = ["/home is full, clean it-4417", "!du -sh ~/cache-7781 says it is huge"]
    with fakemodel.running(str(tmp_path / "gemini-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        setup = GeminiSetup(gemini, home, tmp_path, fake)
        for text in words:
            setup.run(text)
        requests = [json.dumps(r["body"]) for r in fake.model_requests()]
    assert all(any(json.dumps(text)[1:-1] in r for r in requests) for text in words)  # sent as text
    settle(home)
    assert observed(home) == [(text, "pending", None) for text in words]


def test_only_the_typed_words_count_when_another_hook_adds_context_too(gemini, home, tmp_path):
    """A second hook (another extension's) adds context at SessionStart and BeforeAgent: Gemini 0.61
    joins the SessionStart blocks in front of the prompt and records the BeforeAgent block as a part of
    its own; only the typed words become evidence, and the turn is confirmed by the chat record."""
    other = tmp_path / "other_hook.py"
    other.write_text(
        "import json, sys\n"
        "event = json.load(sys.stdin)['hook_event_name']\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': event,\n"
        "                  'additionalContext': f'<other-ext> {event} deploy host is build-7 (ctx-5531)'}}))\n")
    command = f"{sys.executable} {other}"
    hooks = {event: [{"hooks": [{"type": "command", "command": command, "name": "other-ext", "timeout": 5000}]}]
             for event in ("SessionStart", "BeforeAgent")}
    with fakemodel.running(str(tmp_path / "gemini-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        work = tmp_path / "work"
        work.mkdir()
        scratch = tmp_path / "scratchhome"
        agenthosts.write_gemini_settings(scratch, {"hooks": hooks})
        env = agenthosts.gemini_env(scratch, home, fake.root_url)
        agenthosts.install_hooks(CM, home, "gemini", env)
        done = agenthosts.run(agenthosts.gemini_argv(gemini, "My editor is helix-6612."), str(work), env)
        assert done.returncode == 0, done.stderr[-2000:]
        sent = json.dumps(fake.model_requests()[-1]["body"])
    assert "SessionStart deploy host is build-7" in sent and "BeforeAgent deploy host is build-7" in sent
    settle(home)
    assert observed(home) == [("My editor is helix-6612.", "pending", None)]
    assert "ctx-5531" not in json.dumps(db_rows(home, "SELECT * FROM observations"))
