"""Agent Integration against real Codex 0.169.0 and Pi 0.73.1 configuration folders in temp dirs.

Install and removal are transactions over the host files, the manifest and (for the import
server's disclosure) config.json; cm never takes over or discards what it did not write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest
from support import hosts
from tui_support import configure_model, temp_hosts

from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError
from cmrunner.manage.integrations import checks, manager, manifest, txn
from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(180)
USER_CONFIG = '# my own settings\nmodel = "fake-model"\n\n[mcp_servers.mine]\ncommand = "true"\n'


@pytest.fixture(scope="module")
def codex():
    return hosts.codex_binary()


@pytest.fixture(scope="module")
def pi():
    return hosts.pi_binary()


def codex_home(tmp_path, text: str | None = USER_CONFIG) -> str:
    root = str(tmp_path / "codexhome")
    os.makedirs(root, exist_ok=True)
    if text is not None:
        with open(os.path.join(root, "config.toml"), "w") as handle:
            handle.write(text)
    return root


def codex_mcp_list(codex, root: str, tmp_path) -> str:
    env = hosts.codex_env(root, str(tmp_path / "scratchhome"))
    proc = subprocess.run([str(codex), "--profile", "common-memory", "mcp", "list"], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-1000:]
    return proc.stdout


def mcp_rows(listing: str) -> dict[str, str]:
    rows = {}
    for line in listing.splitlines()[1:]:
        parts = line.split()
        if parts:
            rows[parts[0]] = "enabled" if " enabled " in f" {line} " else "disabled"
    return rows


def test_codex_profile_install_is_read_by_real_codex_and_removal_restores_the_folder(home, tmp_path, codex):
    configure_model(home, "http://127.0.0.1:9/v1")
    root = codex_home(tmp_path)
    discover = temp_hosts(str(tmp_path), pi=False)
    manager.apply(home, manager.plan(home, ["codex"], hosts=discover()))
    assert open(os.path.join(root, "config.toml")).read() == USER_CONFIG  # the base layer is not touched
    assert os.path.isfile(os.path.join(root, "skills", "memory-refresh", "SKILL.md"))
    assert mcp_rows(codex_mcp_list(codex, root, tmp_path)) == {"common_memory": "enabled", "mine": "enabled"}
    report = checks.run(home)
    states = {c.name: c.state for c in report.checks}
    assert states["Codex CLI files"] == "ok" and states["Codex CLI read MCP"] == "ok"
    assert states["Codex CLI hook trust"] == "warn"  # nobody trusted them yet; cm does not bypass trust
    assert any("cannot prove" in line for line in report.cannot)

    manager.apply(home, manager.plan(home, [], hosts=discover()))
    assert sorted(os.listdir(root)) == ["config.toml"]
    assert open(os.path.join(root, "config.toml")).read() == USER_CONFIG
    assert not os.path.exists(manifest.path_of(home))


def test_codex_and_chatgpt_share_one_hook_set_kept_while_either_needs_it(home, tmp_path, codex):
    configure_model(home, "http://127.0.0.1:9/v1")
    root = codex_home(tmp_path)
    discover = temp_hosts(str(tmp_path), pi=False, chatgpt=True)
    with pytest.raises(CmError) as refused:
        manager.plan(home, ["codex", "chatgpt"], init=True, hosts=discover())
    assert refused.value.code == "DISCLOSURE_CONFIRMATION_REQUIRED"
    manager.apply(home, manager.plan(home, ["codex", "chatgpt"], init=True, grant=True, hosts=discover()))
    assert "agent_observation" in config_mod.load(home).data["disclosure"]["allowedProvenance"]
    assert mcp_rows(codex_mcp_list(codex, root, tmp_path)) == {
        "common_memory": "enabled", "common_memory_init": "disabled", "mine": "enabled"}

    env = hosts.codex_env(root, str(tmp_path / "scratchhome"))
    work = tmp_path / "work"
    work.mkdir()
    listed = hosts.trust_hooks(codex, env, str(work))  # the user trusts them, as in /hooks
    assert sorted(h["key"].split(":")[-3] for h in listed) == sorted(
        ["session_start", "user_prompt_submit", "post_tool_use", "stop", "interrupt", "session_end"])
    trust = {c.name: c for c in checks.run(home).checks}["Codex CLI/ChatGPT Desktop (Work) hook trust"]
    assert trust.state == "ok", trust.detail  # cm's computation agrees with Codex's own hashes

    plan = manager.plan(home, ["chatgpt"], init=True, hosts=discover())
    assert plan.remove == ["codex"] and any("still uses them" in note for note in plan.notes)
    manager.apply(home, plan)
    assert not os.path.exists(os.path.join(root, "common-memory.config.toml"))
    assert os.path.isfile(os.path.join(root, "skills", "memory-refresh", "SKILL.md"))
    base = tomllib.load(open(os.path.join(root, "config.toml"), "rb"))
    assert "common_memory" in base["mcp_servers"] and len(base["hooks"]["Stop"]) == 1

    manager.apply(home, manager.plan(home, [], hosts=discover()))
    base = tomllib.load(open(os.path.join(root, "config.toml"), "rb"))
    assert set(base["mcp_servers"]) == {"mine"} and base["model"] == "fake-model"
    assert not [k for k in base.get("hooks", {}) if k != "state"]  # only Codex's own trust records remain
    assert "# my own settings" in open(os.path.join(root, "config.toml")).read()
    assert not os.path.exists(os.path.join(root, "skills", "memory-refresh"))
    assert not os.path.exists(manifest.path_of(home))
    # Revoking the host does not revoke the disclosure the user granted.
    assert "agent_observation" in config_mod.load(home).data["disclosure"]["allowedProvenance"]


def test_unmanaged_files_and_entries_are_never_taken_over(home, tmp_path):
    configure_model(home, "http://127.0.0.1:9/v1")
    own = USER_CONFIG + '\n[mcp_servers.common_memory]\ncommand = "/usr/bin/cm"\n'
    root = codex_home(tmp_path, own)
    discover = temp_hosts(str(tmp_path), pi=False, chatgpt=True)
    with pytest.raises(CmError) as refused:
        manager.plan(home, ["chatgpt"], hosts=discover())
    assert refused.value.code == "UNMANAGED_ENTRY"
    with open(os.path.join(root, "common-memory.config.toml"), "w") as handle:
        handle.write("# pasted from cm codex-config by hand\n")
    with pytest.raises(CmError) as refused:
        manager.plan(home, ["codex"], hosts=discover())
    assert refused.value.code == "UNMANAGED_FILE"
    assert open(os.path.join(root, "config.toml")).read() == own
    assert not os.path.exists(manifest.path_of(home))


def test_a_file_changed_since_cm_wrote_it_fails_closed(home, tmp_path):
    configure_model(home, "http://127.0.0.1:9/v1")
    root = codex_home(tmp_path)
    discover = temp_hosts(str(tmp_path), pi=False)
    manager.apply(home, manager.plan(home, ["codex"], hosts=discover()))
    profile = os.path.join(root, "common-memory.config.toml")
    with open(profile, "a") as handle:
        handle.write("# my note\n")
    before = {p: open(p, "rb").read() for p in (profile, manifest.path_of(home))}
    with pytest.raises(CmError) as refused:
        manager.plan(home, [], hosts=discover())
    assert refused.value.code == "HOST_FILE_MODIFIED"
    assert {p: open(p, "rb").read() for p in before} == before
    assert {c.name: c.state for c in checks.run(home, start_servers=False).checks}["Codex CLI files"] == "fail"


def test_a_failing_install_leaves_the_previous_state_and_a_crash_is_rolled_back(home, tmp_path, monkeypatch):
    configure_model(home, "http://127.0.0.1:9/v1")
    root = codex_home(tmp_path)
    discover = temp_hosts(str(tmp_path), chatgpt=True)
    config_before = open(os.path.join(home, "config.json"), "rb").read()
    original = txn._write
    calls = []

    def failing(path: str, data: bytes, mode: int) -> None:
        calls.append(path)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        original(path, data, mode)

    monkeypatch.setattr(txn, "_write", failing)
    with pytest.raises(CmError) as failed:
        manager.apply(home, manager.plan(home, ["codex", "chatgpt", "pi"], init=True, grant=True, hosts=discover()))
    monkeypatch.setattr(txn, "_write", original)
    assert failed.value.code == "INTEGRATION_WRITE_FAILED" and calls[3] in failed.value.message
    assert len(calls) > 4  # files were written, then restored
    assert sorted(os.listdir(root)) == ["config.toml"] and open(os.path.join(root, "config.toml")).read() == USER_CONFIG
    assert open(os.path.join(home, "config.json"), "rb").read() == config_before
    assert not os.path.exists(tmp_path / "piagent" / "extensions")
    assert not os.path.exists(os.path.join(home, txn.JOURNAL_DIR))

    # A crash (the process dies mid-way, no rollback runs): the next transaction restores first.
    script = f"""
import os, sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
from tui_support import temp_hosts
from cmrunner.manage.integrations import manager, txn
original, count = txn._write, []
def dying(path, data, mode):
    count.append(path)
    if len(count) == 3:
        os._exit(9)
    original(path, data, mode)
txn._write = dying
home = {home!r}
manager.apply(home, manager.plan(home, ["codex", "chatgpt"], hosts=temp_hosts({str(tmp_path)!r}, chatgpt=True)()))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]
    assert os.path.isdir(os.path.join(home, txn.JOURNAL_DIR))
    assert os.path.exists(os.path.join(root, "skills"))  # half-written
    assert txn.recover(home)
    assert sorted(os.listdir(root)) == ["config.toml"] and open(os.path.join(root, "config.toml")).read() == USER_CONFIG
    assert not os.path.exists(manifest.path_of(home))

    # Entries cm adds to the user's own config.toml come out again byte for byte.
    manager.apply(home, manager.plan(home, ["chatgpt"], hosts=discover()))
    assert open(os.path.join(root, "config.toml")).read().startswith(USER_CONFIG)
    manager.apply(home, manager.plan(home, [], hosts=discover()))
    assert open(os.path.join(root, "config.toml")).read() == USER_CONFIG


def test_pi_install_is_loaded_once_by_real_pi_and_a_second_copy_is_refused(home, tmp_path, pi):
    agent = tmp_path / "piagent"
    agent.mkdir()
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        configure_model(home, fake.base_url)
        (agent / "models.json").write_text(json.dumps({"providers": {"fake": {
            "baseUrl": fake.base_url, "api": "openai-completions", "apiKey": "fake-key-not-secret",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": "fake-model", "contextWindow": 32000, "maxTokens": 1024}]}}}))
        discover = temp_hosts(str(tmp_path), codex=False)
        manager.apply(home, manager.plan(home, ["pi"], hosts=discover()))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PI_", "COMMON_MEMORY_"))}
        env.update({"PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1", "PI_TELEMETRY": "0",
                    "HOME": str(tmp_path / "scratchhome"), "CM_TEST_DRAIN_LINGER_MS": "0"})
        os.makedirs(env["HOME"])
        work = tmp_path / "work"
        work.mkdir()
        proc = subprocess.run([str(pi), "-p", "I prefer tabs over spaces", "--provider", "fake", "--model",
                               "fake-model", "--session-dir", str(tmp_path / "sessions")], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-2000:]
        first = fake.model_requests()[0]["body"]["messages"]
    system = next(m["content"] for m in first if m["role"] == "system")
    assert str(system).count("## Common Memory") == 1  # the bridge was loaded exactly once
    assert os.path.isfile(os.path.join(home, "data", "runtime.sqlite"))  # it ran `cm capture` in this home

    (agent / "extensions" / "legacy.ts").write_text("// old manual copy\nconst s = globalThis.__commonMemoryBridge;\n")
    manager.apply(home, manager.plan(home, [], hosts=discover()))
    with pytest.raises(CmError) as refused:
        manager.plan(home, ["pi"], hosts=discover())
    assert refused.value.code == "PI_BRIDGE_DUPLICATE"
    assert sorted(os.listdir(agent / "extensions")) == ["legacy.ts"]
