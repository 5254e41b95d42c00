"""End to end with the real Claude Code (2.1.328, installed from npm into a cache outside the repo).

`claude -p` runs offline against the project's fake model on 127.0.0.1 speaking Anthropic
Messages (SSE), with cm's hooks installed by `cm agents install claude-code` into the scratch HOME's user
settings. If node or npm is missing these tests fail with what to install; never skipped.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import CM, db_rows, hook_env, settle
from support import agenthosts

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def claude() -> Path:
    return agenthosts.claude_binary()


class ClaudeSetup:
    def __init__(self, claude: Path, home: str, root: Path, fake: fakemodel.FakeModel) -> None:
        self.claude, self.home, self.fake = claude, home, fake
        self.work = root / "work"
        self.work.mkdir(exist_ok=True)
        scratch = root / "scratchhome"
        agenthosts.write_claude_settings(scratch, None)
        self.env = agenthosts.claude_env(scratch, home, fake.root_url)
        agenthosts.install_hooks(CM, home, "claude-code", self.env)

    def run(self, prompt: str, *flags: str) -> subprocess.CompletedProcess[str]:
        done = agenthosts.run(agenthosts.claude_argv(self.claude, prompt) + list(flags), str(self.work), self.env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done


def observed(home: str) -> list[tuple[str, str]]:
    return db_rows(home, "SELECT text, state FROM observations ORDER BY id")


def test_full_loop_what_one_claude_session_says_the_next_one_knows(claude, home, tmp_path):
    """claude -p → hooks → cm flush → Memory Agent (synthetic model) → Markdown → next SessionStart."""
    from agent_support import configure_remote

    with fakemodel.running(str(tmp_path / "agent-model"), {"policy": "remember_user_turns"}) as agent_model, \
            fakemodel.running(str(tmp_path / "claude-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        configure_remote(home, agent_model.base_url)
        setup = ClaudeSetup(claude, home, tmp_path, fake)
        assert "Noted." in setup.run("Please remember that my cat is called Miso-3357.").stdout
        flushed = subprocess.run([CM, "flush", "--home", home], env=hook_env(), capture_output=True, text=True,
                                 timeout=120)
        assert flushed.returncode == 0, flushed.stderr
        assert "Miso-3357" in (Path(home) / "data" / "memory" / "profile.md").read_text()
        assert observed(home) == [("Please remember that my cat is called Miso-3357.", "processed")]
        before = len(fake.model_requests())
        setup.run("What is my cat called?")
        second = json.dumps(fake.model_requests()[before]["body"])
        assert "Miso-3357" in second and "common-memory-data" in second
        settle(home)


def test_a_slash_command_and_a_tool_result_are_never_captured(claude, home, tmp_path):
    secret_file = tmp_path / "work" / "notes.txt"
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    secret_file.write_text("tool-result-5531 is only in a file\n")
    commands = tmp_path / "work" / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "note.md").write_text("Answer with one word. Topic: $ARGUMENTS\n")
    script = {"replies": [
        {"text": "Yes."},  # the slash command's expanded prompt
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": str(secret_file)}, "call_id": "toolu_1"}]},
        {"text": "The file is read."},
    ], "default": {"text": "Noted."}}
    with fakemodel.running(str(tmp_path / "claude-model"), script) as fake:
        setup = ClaudeSetup(claude, home, tmp_path, fake)
        setup.run("/note command-arg-7712")
        setup.run("Read notes.txt please, I keep my aliases in it.")
        requests = [json.dumps(r["body"]) for r in fake.model_requests()]
    assert "command-arg-7712" in requests[0]  # the command really expanded and reached the model
    assert any("tool_result" in r and "tool-result-5531" in r for r in requests)  # the tool really ran
    settle(home)
    store = json.dumps(db_rows(home, "SELECT * FROM observations")) + json.dumps(
        db_rows(home, "SELECT * FROM session_messages"))
    assert "command-arg-7712" not in store and "tool-result-5531" not in store
    assert observed(home) == [("Read notes.txt please, I keep my aliases in it.", "pending")]
    assert db_rows(home, "SELECT COUNT(*) FROM hook_rejections") == [(0,)]


def test_a_slash_word_that_is_no_command_and_a_bang_prompt_are_turns(claude, home, tmp_path):
    """Observed on 2.1.328: `claude -p` sends an unknown `/word` and a `!…` to the model as text, and
    runs a custom command; cm keeps what the model received as words and the command without them."""
    commands = tmp_path / "work" / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "note.md").write_text("Answer with one word. Topic: $ARGUMENTS\n")
    words = ["/home is full, clean it-4417", "!du -sh ~/cache-7781 says it is huge"]
    with fakemodel.running(str(tmp_path / "claude-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        setup = ClaudeSetup(claude, home, tmp_path, fake)
        for text in words:
            setup.run(text)
        setup.run("/note command-arg-7712")
        requests = [json.dumps(r["body"]) for r in fake.model_requests()]
    assert all(any(json.dumps(text)[1:-1] in r for r in requests) for text in words)  # sent as text
    assert any("Answer with one word. Topic: command-arg-7712" in r for r in requests)  # really expanded
    settle(home)
    assert observed(home) == [(text, "pending") for text in words]
    assert "command-arg-7712" not in json.dumps(db_rows(home, "SELECT * FROM observations"))
    assert db_rows(home, "SELECT COUNT(*) FROM hook_rejections") == [(0,)]
