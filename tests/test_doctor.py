"""`cm doctor`: files, hooks, computed trust (checked against real Codex) and the read MCP server."""

from __future__ import annotations

import json
import os
import tomllib

from conftest import hook_env, run_cm
from mcp_support import configure
from support import hosts

from cmrunner import doctor


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
    codex_home = str(tmp_path / "codex")
    os.makedirs(codex_home)
    code, checks = _doctor(codex_home)
    assert code == 1 and checks["codex profile"]["state"] == "fail"

    path = _profile(home, codex_home)
    code, checks = _doctor(codex_home)
    assert code == 0
    assert [checks[n]["state"] for n in ("configuration", "codex profile", "hooks", "hook trust", "read MCP")] == \
        ["ok", "ok", "ok", "warn", "ok"]
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
