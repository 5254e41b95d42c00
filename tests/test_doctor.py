"""`cm doctor`: files, hooks, computed trust (checked against real Codex) and the read MCP server."""

from __future__ import annotations

import json
import os
import sys
import tomllib

import pytest
from conftest import hook_env, run_cm
from mcp_support import configure
from support import hosts

from cmrunner.core import config as config_mod, envfile
from cmrunner.manage import doctor

KEY = "sk-doctor-test-0123456789abcdef"


def _with_model(home: str, key: str | None = KEY) -> None:
    cfg = config_mod.load(home)
    cfg.data["remote"] = {"provider": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1", "model": "fake-model",
                          "apiKeyEnv": "COMMON_MEMORY_API_KEY", "apiKeySource": "private-env"}
    config_mod.save(home, cfg.data)
    if key is not None:
        envfile.update(home, {"COMMON_MEMORY_API_KEY": key})


def _profile(home: str, codex_home: str) -> str:
    text = run_cm(["codex-config"], env=dict(hook_env(), CODEX_HOME=codex_home)).stdout.decode()
    path = os.path.join(codex_home, "common-memory.config.toml")
    with open(path, "w") as handle:
        handle.write(text)
    return path


def _doctor(codex_home: str) -> tuple[int, dict[str, dict]]:
    proc = run_cm(["doctor", "--codex-home", codex_home, "--json"])
    return proc.returncode, {c["name"]: c for c in json.loads(proc.stdout)}


def test_trust_hash_matches_what_codex_reports(home, tmp_path):
    configure(home)
    codex_home = str(tmp_path / "codex")
    generated = run_cm(["codex-config"], env=dict(hook_env(), CODEX_HOME=codex_home)).stdout.decode()
    hooks_only = generated.split("[mcp_servers", 1)[0]  # base-layer hooks: the layer hooks/list can see
    hosts.write_codex_home(codex_home, "http://127.0.0.1:9/v1", extra_toml="\n" + hooks_only)
    server = hosts.AppServer(hosts.codex_binary(), hosts.codex_env(codex_home, str(tmp_path / "scratch")),
                             str(tmp_path))
    try:
        server.call("initialize", {"clientInfo": {"name": "cm-tests", "version": "0"}})
        server.notify("initialized")
        listed = hosts.list_hooks(server, str(tmp_path))
    finally:
        server.close()
    doc = tomllib.loads(hooks_only)
    reported = {h["key"].rsplit(":", 3)[1]: h["currentHash"] for h in listed}
    computed = {doctor.event_snake(event): doctor.trust_hash(event, groups[0], groups[0]["hooks"][0])
                for event, groups in doc["hooks"].items()}
    assert len(computed) == 6 and computed == reported


def test_doctor_reports_files_trust_and_mcp(home, tmp_path):
    configure(home)
    _with_model(home)
    codex_home = str(tmp_path / "codex")
    os.makedirs(codex_home)
    code, checks = _doctor(codex_home)
    assert code == 1 and checks["codex profile"]["state"] == "fail"

    path = _profile(home, codex_home)
    code, checks = _doctor(codex_home)
    assert code == 0
    assert [checks[n]["state"] for n in ("configuration", "model", "data root", "codex profile", "hooks", "hook trust",
                                         "read MCP")] == ["ok", "ok", "ok", "ok", "ok", "warn", "ok"]
    assert "SessionStart untrusted" in checks["hook trust"]["detail"]

    doc = tomllib.loads(open(path).read())
    state = "".join(f'[hooks.state."{path}:{doctor.event_snake(e)}:0:0"]\n'
                    f'trusted_hash = "{doctor.trust_hash(e, g[0], g[0]["hooks"][0])}"\n'
                    for e, g in doc["hooks"].items())
    with open(os.path.join(codex_home, "config.toml"), "w") as handle:
        handle.write(state)
    assert _doctor(codex_home)[1]["hook trust"]["state"] == "ok"

    text = open(path).read().replace("timeout = 3", "timeout = 5", 1)
    with open(path, "w") as handle:
        handle.write(text)
    code, checks = _doctor(codex_home)
    assert code == 1 and "SessionStart timeout is not 3" in checks["hooks"]["detail"]
    assert "SessionStart modified" in checks["hook trust"]["detail"]


def test_doctor_fails_when_the_mcp_server_cannot_start(home, tmp_path):
    configure(home)
    codex_home = str(tmp_path / "codex")
    os.makedirs(codex_home)
    path = _profile(home, codex_home)
    doc = open(path).read().replace('"--capability",', '"--capability-typo",', 1)
    with open(path, "w") as handle:
        handle.write(doc)
    code, checks = _doctor(codex_home)
    assert code == 1 and checks["read MCP"]["state"] == "fail"


# --- the model and the data root ----------------------------------------------------------------


def _doctor_text(tmp_path) -> tuple[int, str, dict[str, dict]]:
    codex_home = str(tmp_path / "codex")
    os.makedirs(codex_home, exist_ok=True)
    text = run_cm(["doctor", "--codex-home", codex_home])
    code, checks = _doctor(codex_home)
    assert text.returncode == code
    return code, text.stdout.decode(), checks


def test_doctor_fails_without_a_model_or_its_key_and_never_prints_the_key(home, tmp_path):
    configure(home)
    code, out, checks = _doctor_text(tmp_path)
    assert code == 1
    assert checks["model"]["state"] == "fail" and checks["model"]["detail"].startswith("UNCONFIGURED: ")
    assert "fail  model: UNCONFIGURED: " in out and "cm config" in out
    _with_model(home, key=None)
    code, out, checks = _doctor_text(tmp_path)
    assert code == 1 and checks["model"]["detail"].startswith("API_KEY_MISSING: COMMON_MEMORY_API_KEY ")
    envfile.update(home, {"COMMON_MEMORY_API_KEY": KEY})
    code, out, checks = _doctor_text(tmp_path)
    assert checks["model"]["state"] == "ok" and "fake-model" in checks["model"]["detail"]
    # the model's URL here answers nothing: "ok" must not read as "it answers"
    assert "the endpoint was not contacted (`cm doctor --probe-model` or `cm network-test` sends one small request)" \
        in checks["model"]["detail"]
    assert KEY not in out and KEY not in json.dumps(checks) and KEY[:8] not in out


def _root_check(home: str, tmp_path, root: str) -> tuple[int, dict]:
    configure(home)
    _with_model(home)
    cfg = config_mod.load(home)
    cfg.data["dataRoot"] = root
    config_mod.save(home, cfg.data)
    code, _out, checks = _doctor_text(tmp_path)
    return code, checks["data root"]


def test_doctor_accepts_a_private_data_root_or_one_it_can_create(home, tmp_path):
    code, check = _root_check(home, tmp_path, str(tmp_path / "later" / "data"))
    assert check["state"] == "ok" and "not created yet" in check["detail"]
    assert not os.path.exists(tmp_path / "later"), "doctor created something"
    root = tmp_path / "data"
    root.mkdir(mode=0o700)
    code, check = _root_check(home, tmp_path, str(root))
    assert check == {"name": "data root", "state": "ok", "detail": f"{root} (0700, writable)"}


def test_doctor_fails_a_shared_or_linked_or_uncreatable_data_root(home, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    code, check = _root_check(home, tmp_path, str(shared))
    assert code == 1 and check["detail"].startswith("DATA_ROOT_NOT_PRIVATE: ") and "chmod 700" in check["detail"]
    os.chmod(shared, 0o500)
    code, check = _root_check(home, tmp_path, str(shared))
    assert code == 1 and check["detail"].startswith("DATA_ROOT_UNWRITABLE: ")
    os.chmod(shared, 0o700)
    link = tmp_path / "link"
    link.symlink_to(shared)
    code, check = _root_check(home, tmp_path, str(link))
    assert code == 1 and check["detail"].startswith("UNSAFE_PATH: ") and "symbolic link" in check["detail"]
    code, check = _root_check(home, tmp_path, str(link / "inner"))
    assert code == 1 and check["detail"].startswith("UNSAFE_PATH: ")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, check = _root_check(home, tmp_path, str(blocker / "data"))
    assert code == 1 and check["detail"].startswith("DATA_ROOT_UNWRITABLE: ") and "not a directory" in check["detail"]
    code, check = _root_check(home, tmp_path, str(blocker))
    assert code == 1 and check["detail"].startswith("UNSAFE_PATH: ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc/1, which no user may write into")
def test_doctor_fails_a_data_root_it_cannot_create(home, tmp_path):
    code, check = _root_check(home, tmp_path, "/proc/1/cm-data")
    assert code == 1 and check["detail"].startswith("DATA_ROOT_UNWRITABLE: ") and "/proc/1 is not writable" in check["detail"]


# --- one group per agent ------------------------------------------------------------------------


def _user_env(user) -> dict[str, str]:
    env = hook_env(HOME=str(user), PATH="/usr/bin:/bin")
    for name in ("CODEX_HOME", "PI_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"):
        env.pop(name, None)
    return env


def _groups(user) -> tuple[int, dict[tuple[str, str], dict]]:
    proc = run_cm(["doctor", "--json"], env=_user_env(user), timeout=120)
    return proc.returncode, {(c.get("group", ""), c["name"]): c for c in json.loads(proc.stdout)}


def test_doctor_without_codex_or_any_agent_passes_and_skips_each_host(home, tmp_path):
    configure(home)
    _with_model(home)
    user = tmp_path / "user"
    user.mkdir()
    code, checks = _groups(user)
    assert code == 0, checks
    hosts_seen = {g for g, _n in checks if g}
    assert hosts_seen == {"Codex CLI", "Claude Code", "Gemini CLI", "Pi", "ChatGPT Desktop (Work)"}
    assert all(checks[(g, "integration")]["state"] == "skip" for g in hosts_seen)
    text = run_cm(["doctor"], env=_user_env(user)).stdout.decode()
    assert "skip  Codex CLI · integration: not on this machine; nothing to check" in text


def test_doctor_checks_each_installed_agent_in_its_own_group(home, tmp_path):
    configure(home)
    _with_model(home)
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / ".gemini").mkdir()
    (user / ".codex").mkdir()
    assert run_cm(["agents", "install", "claude-code"], env=_user_env(user)).returncode == 0
    code, checks = _groups(user)
    assert code == 0, checks
    assert {n: checks[("Claude Code", n)]["state"] for n in ("settings", "hooks", "read MCP")} == {
        "settings": "ok", "hooks": "ok", "read MCP": "ok"}
    assert checks[("Gemini CLI", "integration")]["state"] == "warn"  # here, not connected: says how
    assert "cm agents install gemini" in checks[("Gemini CLI", "integration")]["detail"]
    assert checks[("Codex CLI", "integration")]["state"] == "warn"
    assert checks[("Pi", "integration")]["state"] == "skip"

    settings = user / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 30  # the user edits cm's hook
    settings.write_text(json.dumps(data, indent=2))
    code, checks = _groups(user)
    assert code == 1
    assert checks[("Claude Code", "settings")]["state"] == "fail"
    assert checks[("Claude Code", "settings")]["detail"].startswith("HOST_FILE_MODIFIED: hooks.Stop missing or changed")


def test_probe_model_sends_one_request_and_fails_a_dead_endpoint(home, tmp_path):
    from cmrunner.synthetic import fakemodel

    configure(home)
    _with_model(home)  # 127.0.0.1:9: nothing answers there
    proc = run_cm(["doctor", "--probe-model", "--json", "--codex-home", str(tmp_path / "no-codex")])
    model = {c["name"]: c for c in json.loads(proc.stdout)}["model"]
    assert proc.returncode == 1 and model["state"] == "fail" and model["detail"].startswith("MODEL_UNREACHABLE: ")
    assert "one small request failed at network" in model["detail"] and KEY not in proc.stdout.decode()
    with fakemodel.running(str(tmp_path / "fm"), {"replies": [{"text": "OK"}]}) as fm:
        cfg = config_mod.load(home)
        cfg.data["remote"]["baseUrl"] = fm.base_url
        config_mod.save(home, cfg.data)
        proc = run_cm(["doctor", "--probe-model", "--json", "--codex-home", str(tmp_path / "no-codex")])
        assert len(fm.model_requests()) == 1
    model = {c["name"]: c for c in json.loads(proc.stdout)}["model"]
    assert model["state"] == "ok" and "it answered one small request in" in model["detail"]
