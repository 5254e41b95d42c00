"""The agent-CLI runtime's configuration and its hook marker (issue 33), through real `cm` processes.

`cm config init --agent` writes `remote.provider: agent-cli` and asks for no key; the typed model
refuses mixing an agent with the HTTP runtime's fields. Every hook entry does nothing when
`COMMON_MEMORY_AGENT_SESSION` is set: the Memory Agent's own CLI session is never captured and
never given memory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import db_rows, hook_env, run_cm

from cmrunner import entry
from cmrunner.core import config as config_mod, configdefs
from cmrunner.core.errors import ConfigError


def _init(home: str, *args: str) -> object:
    return run_cm(["config", "init", "--home", home, *args], env=hook_env())


def test_config_init_agent_writes_an_agent_cli_remote_and_no_key(home):
    done = _init(home, "--agent", "codex", "--model", "gpt-5.5-codex", "--skip-check")
    assert done.returncode == 0, done.stderr
    remote = json.loads((Path(home) / "config.json").read_text())["remote"]
    assert remote == {"provider": "agent-cli", "agent": "codex", "model": "gpt-5.5-codex"}
    assert not (Path(home) / ".env").exists()
    status = run_cm(["status", "--home", home], env=hook_env())
    assert status.returncode == 0 and "agent CLI codex, model gpt-5.5-codex" in status.stdout.decode()


@pytest.mark.parametrize(("args", "says"), [
    (("--agent", "claude-code", "--base-url", "http://127.0.0.1:9/v1"), "drop --base-url"),
    (("--agent-path", "/usr/bin/true"), "--agent-path goes with --agent"),
    (("--agent", "gemini", "--agent-path", "relative/gemini"), "remote.agentPath' must be an absolute path"),
])
def test_config_init_refuses_an_agent_mixed_with_the_http_runtime(home, args, says):
    done = _init(home, *args)
    assert done.returncode != 0 and says in done.stderr.decode(), done.stderr
    assert not (Path(home) / "config.json").exists()


@pytest.mark.parametrize(("remote", "field"), [
    ({"provider": "agent-cli"}, "remote.agent"),
    ({"provider": "agent-cli", "agent": "claude-code", "apiKeyEnv": "K"}, "remote.apiKeyEnv"),
    ({"provider": "agent-cli", "agent": "vim"}, "remote.agent"),
    ({"provider": "openai-compatible", "baseUrl": "https://x/v1", "model": "m", "apiKeyEnv": "K",
      "agent": "codex"}, "remote.agent"),
    ({"provider": "openai-compatible", "model": "m", "apiKeyEnv": "K"}, "remote.baseUrl"),
])
def test_the_model_names_the_field_that_does_not_belong(home, remote, field):
    data = {**config_mod.default_config(home), "remote": remote}
    with pytest.raises(ConfigError) as caught:
        config_mod.validate(data)
    assert caught.value.code == "CONFIG_INVALID" and f"'{field}'" in caught.value.message


def test_the_entry_checks_the_same_marker_the_runtime_sets():
    assert entry._MEMORY_AGENT_MARKER == configdefs.MEMORY_AGENT_MARKER


def _send(home: str, cwd: str, name: str, env: dict, **fields: object) -> bytes:
    payload = {"session_id": "agent-sess", "transcript_path": os.path.join(cwd, "t.jsonl"), "cwd": cwd,
               "hook_event_name": name, **fields}
    proc = run_cm(["hook", "claude", "--home", home], json.dumps(payload).encode(), env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("marked", [True, False])
def test_a_hook_under_the_marker_captures_nothing_and_injects_nothing(home, workdir, marked):
    """The same session with and without the marker: with it, no memory is injected and no turn
    is stored; without it (the control) both happen, so the check can fail."""
    assert _init(home).returncode == 0
    memory = Path(home) / "data" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "profile.md").write_text("# Profile\n\n## Editor\nThe user edits with helix-6620.\n")
    env = hook_env(**({configdefs.MEMORY_AGENT_MARKER: "1"} if marked else {}))
    started = _send(home, workdir, "SessionStart", env, source="startup")
    _send(home, workdir, "UserPromptSubmit", env, prompt="remember the marker-7781 run", prompt_id="p1")
    _send(home, workdir, "Stop", env, last_assistant_message="Done.", prompt_id="p1")
    stored = json.dumps(db_rows(home, "SELECT * FROM hook_inbox")) if (Path(home) / "data" /
                                                                        "runtime.sqlite").exists() else ""
    if marked:
        assert started == b"" and "marker-7781" not in stored
    else:
        assert b"helix-6620" in started and "marker-7781" in stored
