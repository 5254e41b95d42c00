"""End to end: the real Claude Code (2.1.328) as the Memory Agent's runtime, offline (issue 33).

One loopback fake model (policy mode) serves both the user's own `claude -p` sessions (plain text)
and the Memory Agent's run (cm's tools as `mcp__cm__*`, the diligent policy). cm is configured
with `cm config init --agent claude-code` (no key), its hooks installed into the scratch HOME's user
settings by `cm agents install claude-code`, as a user would. Never skipped: without node/npm
these tests fail saying what to install.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import CM, db_rows, settle
from support import agentcli_world, agenthosts

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)
CM_TOOLS = {f"mcp__cm__{t}" for t in ("inspect_ingest", "read_ingest", "inspect_memory", "processing_state",
                                      "record_working_notes", "submit_memory_decision")}


@pytest.fixture(scope="module")
def claude() -> Path:
    return agenthosts.claude_binary()


class Setup(agentcli_world.World):
    """A scratch HOME with cm's hooks in Claude Code's user settings, and cm's Memory Agent set to
    that same Claude Code."""

    def __init__(self, claude: Path, home: str, root: Path, fake: fakemodel.FakeModel, *init: str) -> None:
        super().__init__("claude-code", claude, home, root, fake, *init)
        agenthosts.install_hooks(CM, home, "claude-code", self.env)

    def session(self, prompt: str) -> str:
        done = agenthosts.run(agenthosts.claude_argv(self.cli, prompt), str(self.work), self.env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout


def _tools(request: dict) -> set[str]:
    """The tools the model could call: Claude Code also lists a ``defer_loading`` placeholder that
    is never callable (it keeps its deferred-tool machinery on; its description says so)."""
    return {t.get("name") for t in request["body"].get("tools") or [] if not t.get("defer_loading")}


def test_claude_code_runs_the_memory_agent_and_the_next_session_knows(claude, home, tmp_path):
    """claude -p → cm's hooks → cm flush → Memory Agent run by claude -p (cm's MCP tools only) →
    decision committed → the next Claude Code session receives it."""
    with fakemodel.running(str(tmp_path / "model"), {"policy": "remember_user_turns"}) as fake:
        setup = Setup(claude, home, tmp_path, fake)
        setup.session("Please remember that my cat is called Miso-3357.")
        flushed = setup.flush()
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        assert "Miso-3357" in (Path(home) / "data" / "memory" / "profile.md").read_text()
        agent = setup.agent_requests()
        assert agent, "the Memory Agent's run never reached the model"
        # Only cm's tools were offered to the model: no built-in tool, no other server.
        assert all(_tools(r) == CM_TOOLS for r in agent), [sorted(_tools(r)) for r in agent]
        # The decision came through the submit tool, and the job is committed.
        assert any("mcp__cm__submit_memory_decision" in json.dumps(r["body"]) for r in agent)
        assert db_rows(home, "SELECT state FROM jobs") == [("done",)]
        # The run ended at the accepted submission: no closing request carried the submit call back
        # to the model (cm's stop hook), which would re-send the whole conversation.
        calls = [b.get("name") for r in agent for m in r["body"]["messages"] if m.get("role") == "assistant"
                 and isinstance(m.get("content"), list) for b in m["content"] if b.get("type") == "tool_use"]
        assert calls and "mcp__cm__submit_memory_decision" not in calls, calls
        # The Memory Agent's own session left no observation and got no memory injected.
        assert db_rows(home, "SELECT text FROM observations ORDER BY id") == [
            ("Please remember that my cat is called Miso-3357.",)]
        assert not any("common-memory-data" in json.dumps(r["body"]) for r in agent)
        assert db_rows(home, "SELECT COUNT(*) FROM hook_rejections") == [(0,)]
        # The ledger holds the run, named by its runtime, with the tokens the CLI reported.
        rows = db_rows(home, "SELECT host, model, api, token_source, input_tokens, output_tokens, outcome "
                             "FROM ledger")
        assert len(rows) == 1 and rows[0][:4] == ("claude-code", "default", "agent-cli", "provider"), rows
        assert rows[0][4] > 0 and rows[0][5] > 0 and rows[0][6] == "ok"
        usage = subprocess.run([CM, "usage", "--home", home], env=setup.env, capture_output=True, text=True,
                               timeout=60)
        assert "agent-cli" in usage.stdout and "claude-code" in usage.stdout, usage.stdout
        # Next session: the memory is injected.
        before = len(fake.model_requests())
        setup.session("What is my cat called?")
        assert "Miso-3357" in json.dumps(fake.model_requests()[before]["body"])
        settle(home)


def test_a_built_in_tool_the_model_asks_for_executes_nothing(claude, home, tmp_path):
    """The model's first answer calls Bash, Write and a tool cm never offered: Claude Code runs none
    of them (none exists in this run), the Memory Agent goes on and commits through cm's tools."""
    proof = tmp_path / "bash-ran"
    written = tmp_path / "write-ran"
    script = {"policy": "remember_user_turns", "inject": {"first": {"tool_calls": [
        {"name": "Bash", "arguments": {"command": f"touch {proof}"}, "call_id": "toolu_b1"},
        {"name": "Write", "arguments": {"file_path": str(written), "content": "x"}, "call_id": "toolu_w1"},
        {"name": "mcp__cm__delete_all_memory", "arguments": {}, "call_id": "toolu_u1"}]}}}
    with fakemodel.running(str(tmp_path / "model"), script) as fake:
        setup = Setup(claude, home, tmp_path, fake)
        setup.session("Please remember that my editor is Helix-4410.")
        flushed = setup.flush()
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        agent = setup.agent_requests()
    assert not proof.exists() and not written.exists()
    results = [b for r in agent for m in r["body"]["messages"] if m.get("role") == "user"
               and isinstance(m.get("content"), list) for b in m["content"] if b.get("type") == "tool_result"]
    refused = {b["tool_use_id"]: b.get("is_error") for b in results if b["tool_use_id"] in ("toolu_b1", "toolu_w1", "toolu_u1")}
    assert refused == {"toolu_b1": True, "toolu_w1": True, "toolu_u1": True}, refused
    assert "Helix-4410" in (Path(home) / "data" / "memory" / "profile.md").read_text()
    settle(home)


def test_a_rejected_submission_does_not_end_the_run(claude, home, tmp_path):
    """cm's stop hook ends the run only after an accepted submission: a first submission cm rejects
    goes back to the model as an error, and the run goes on to a valid one, which is committed."""
    script = {"policy": "remember_user_turns", "inject": {"first": {"tool_calls": [
        {"name": "mcp__cm__submit_memory_decision", "arguments": {"request_id": "not-this-job"},
         "call_id": "toolu_s1"}]}}}
    with fakemodel.running(str(tmp_path / "model"), script) as fake:
        setup = Setup(claude, home, tmp_path, fake)
        setup.session("Please remember that my terminal is Ghostty-5120.")
        flushed = setup.flush()
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        agent = setup.agent_requests()
    results = [b for r in agent for m in r["body"]["messages"] if m.get("role") == "user"
               and isinstance(m.get("content"), list) for b in m["content"] if b.get("type") == "tool_result"]
    assert [b.get("is_error") for b in results if b["tool_use_id"] == "toolu_s1"][:1] == [True], results
    assert "Ghostty-5120" in (Path(home) / "data" / "memory" / "profile.md").read_text()
    assert db_rows(home, "SELECT state FROM jobs") == [("done",)]
    settle(home)


def test_a_run_without_a_submission_is_missing_submission_whatever_the_cli_exit(claude, home, tmp_path):
    """The model only talks: claude -p exits 0, but no decision reached cm's submit tool, so the
    attempt fails MISSING_SUBMISSION (retryable) and nothing is committed."""
    with fakemodel.running(str(tmp_path / "model"), {"replies": [], "default": {"text": "All done, nothing to do."}}) \
            as fake:
        setup = Setup(claude, home, tmp_path, fake)
        setup.session("Please remember that my shell is fish-2291.")
        setup.flush()
    (state, issue), = db_rows(home, "SELECT state, issue FROM jobs")
    assert issue == "MISSING_SUBMISSION" and state in ("retry", "dead"), (state, issue)  # flush retries at once
    assert not list((Path(home) / "data" / "memory").glob("*.md"))  # nothing was committed
    rows = db_rows(home, "SELECT api, outcome FROM ledger")
    assert rows and all(r == ("agent-cli", "MISSING_SUBMISSION") for r in rows), rows
    settle(home)


def test_a_refused_login_is_agent_cli_auth_and_nothing_leaks(claude, home, tmp_path):
    """The provider refuses the CLI's credentials (401): AGENT_CLI_AUTH with its remedy, not
    retried; cm status shows the code, never the CLI's output."""
    # The user's session gets its one answer; every later request (the Memory Agent's) is refused.
    script = {"replies": [{"text": "Noted."}], "default": {"error": {"status": 401}}}
    with fakemodel.running(str(tmp_path / "model"), script) as fake:
        setup = Setup(claude, home, tmp_path, fake)
        setup.session("Please remember that my terminal is kitty-8812.")
        setup.flush()
    state = db_rows(home, "SELECT state, issue FROM jobs")
    assert state == [("dead", "AGENT_CLI_AUTH")], state
    status = subprocess.run([CM, "status", "--home", home], env=setup.env, capture_output=True, text=True, timeout=60)
    assert "AGENT_CLI_AUTH" in status.stdout + status.stderr
    assert "kitty-8812" not in status.stdout + status.stderr
    settle(home)


def test_a_cli_past_the_deadline_is_killed_with_its_whole_process_group(claude, home, tmp_path):
    """The model stalls mid-answer: at remote.deadlineMs the attempt ends TIMEOUT (retryable) and
    no process of the CLI's group (the CLI, cm's relay) is left running."""
    # Every Memory Agent answer stalls after its first event (the user's own session is answered at once).
    script = {"policy": "remember_user_turns", "default": {"policy": True, "delay_seconds": 60}}
    with fakemodel.running(str(tmp_path / "model"), script) as fake:
        setup = Setup(claude, home, tmp_path, fake)
        subprocess.run([CM, "config", "set", "--home", home, "remote.deadlineMs", "8000"], env=setup.env,
                       capture_output=True, timeout=60, check=True)
        setup.session("Please remember that my pager is less-9120.")
        setup.flush()
        agent = setup.agent_requests()
    assert agent  # the run really started and reached the model
    (state, issue), = db_rows(home, "SELECT state, issue FROM jobs")
    assert issue == "TIMEOUT" and state in ("retry", "dead"), (state, issue)
    assert setup.leftover_processes() == []
    settle(home)
