"""`cm codex-config`, `cm work-config`, `cm mcp-config`: reviewable, pinned, never overwriting."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib

import anyio
import pytest
from conftest import REAL_CM, hook_env, run_cm
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_support import allow, configure, register, write_doc
from support import hosts

import cmrunner
from cmrunner.core.errors import CmError
from cmrunner.manage import hostconfig, winbridge

EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "Interrupt", "SessionEnd")
PYTHON = os.path.abspath(sys.executable)
# The pinned hook form (hostconfig.Pins.hook_argv): the installed package's own __main__.py, no site.
HOOK = [PYTHON, "-I", "-S", os.path.join(os.path.dirname(os.path.abspath(cmrunner.__file__)), "__main__.py")]


def _ok(args: list[str], env: dict[str, str] | None = None) -> str:
    # The real installation: generated files pin the interpreter that ran cm, which must be the user's.
    proc = run_cm(args, env=env, cm=REAL_CM)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def _fails(args: list[str], code: str) -> None:
    proc = run_cm(args, cm=REAL_CM)
    assert proc.returncode == 1 and proc.stderr.decode().startswith(f"cm: {code}: "), (code, proc.stderr)


def _hooks(doc: dict) -> dict[str, str]:
    commands = {}
    for event in EVENTS:
        (group,) = doc["hooks"][event]
        (handler,) = group["hooks"]
        assert handler["type"] == "command" and handler["timeout"] == 3
        assert group.get("matcher") == ("startup|resume|compact|clear" if event == "SessionStart" else None)
        commands[event] = handler["command"]
    return commands


def test_codex_profile_pins_paths_and_really_runs(tmp_path, monkeypatch):
    weird_home = str(tmp_path / "my home's dir")
    write_doc(configure(weird_home), "profile", "# Profile\n\n## Name\nAda.\n")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    text = _ok(["--home", weird_home, "codex-config"])
    assert f"#   interpreter:  {PYTHON}" in text and f"#   config home:  {weird_home}" in text
    doc = tomllib.loads(text)
    commands = set(_hooks(doc).values())
    assert commands == {shlex.join([*HOOK, "hook", "codex", "--home", weird_home])}
    server = doc["mcp_servers"]["common_memory"]
    assert "common_memory_init" not in doc["mcp_servers"]
    assert server["command"] == PYTHON and server["env"] == {"COMMON_MEMORY_HOME": weird_home}
    assert server["args"] == ["-I", "-m", "cmrunner", "mcp", "--client-id", "codex-cli", "--capability", "read",
                              "--global"]
    assert server["enabled_tools"] == ["memory_read", "memory_status"]
    assert server["default_tools_approval_mode"] == "auto"

    # The hook command survives the shell (quoted home) and injects memory at SessionStart.
    event = {"session_id": "s-1", "transcript_path": None, "cwd": str(tmp_path), "hook_event_name": "SessionStart",
             "source": "startup"}
    hook = subprocess.run(["/bin/sh", "-c", commands.pop()], input=json.dumps(event).encode(), capture_output=True,
                          env=hook_env(), cwd=str(tmp_path), timeout=30)
    assert hook.returncode == 0, hook.stderr
    assert "Ada." in hook.stdout.decode()

    async def list_tools() -> set[str]:
        env = {"PATH": os.environ["PATH"], **server["env"]}
        async with Client(StdioServerParameters(command=server["command"], args=server["args"], env=env),
                          mode="legacy") as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert anyio.run(list_tools) == {"memory_read", "memory_status"}


def test_codex_profile_disables_an_init_server_the_base_config_defines(home, tmp_path, monkeypatch):
    configure(home)
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('[mcp_servers.common_memory_init]\ncommand = "wsl.exe"\n')
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    doc = tomllib.loads(_ok(["codex-config"]))
    assert doc["mcp_servers"]["common_memory_init"] == {"enabled": False}


def test_codex_loads_the_generated_profile(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    allow(home, project.scope)
    codex_home = str(tmp_path / "codex")
    hosts.write_codex_home(codex_home, "http://127.0.0.1:9/v1",
                           extra_toml='\n[mcp_servers.common_memory_init]\ncommand = "/bin/true"\n')
    env = hosts.codex_env(codex_home, str(tmp_path / "scratch"))
    profile = _ok(["codex-config", "--workspace", project.path], env=dict(hook_env(), CODEX_HOME=codex_home))
    with open(os.path.join(codex_home, "common-memory.config.toml"), "w") as handle:
        handle.write(profile)
    listed = subprocess.run([str(hosts.codex_binary()), "--profile", "common-memory", "mcp", "list", "--json"],
                            capture_output=True, env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr.decode()[-2000:]
    servers = {s["name"]: s for s in json.loads(listed.stdout)}
    assert servers["common_memory"]["enabled"] is True and servers["common_memory_init"]["enabled"] is False
    assert servers["common_memory"]["transport"]["args"][-2:] == ["--workspace", project.path]


def test_workspace_rules(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    _fails(["codex-config", "--workspace", project.path], "UNAUTHORIZED_SCOPE")
    _fails(["mcp-config", "--workspace", "C:\\Users\\me\\proj"], "INVALID_WORKSPACE_PATH")
    _fails(["mcp-config", "--workspace", str(tmp_path)], "UNREGISTERED_WORKSPACE")


def test_codex_bundle_holds_profile_skill_and_readme(home, tmp_path):
    configure(home)
    out = tmp_path / "bundle"
    printed = _ok(["codex-config", "--mode", "posix", "--output", str(out)])
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["README.md", "common-memory.config.toml", "skills/memory-refresh/SKILL.md",
                     "skills/memory-refresh/agents/openai.yaml"]
    assert printed.count("wrote ") == 4
    skill = (out / "skills/memory-refresh/SKILL.md").read_text()
    assert skill.startswith("---\nname: memory-refresh\ndescription: ")
    refresh = shlex.join([*HOOK, "session-refresh", "--home", home, "--client", "codex"])
    assert refresh in skill
    assert (out / "skills/memory-refresh/agents/openai.yaml").read_text() == \
        "policy:\n  allow_implicit_invocation: false\n"
    assert tomllib.loads((out / "common-memory.config.toml").read_text())["mcp_servers"]["common_memory"]
    assert "codex --profile common-memory" in (out / "README.md").read_text()


def test_bundles_never_overwrite(home, tmp_path):
    configure(home)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    _fails(["codex-config", "--mode", "posix", "--output", str(taken)], "OUTPUT_NOT_EMPTY")
    _fails(["work-config", "--mode", "posix", "--output", str(taken)], "OUTPUT_NOT_EMPTY")
    assert os.listdir(taken) == ["keep.txt"] and (taken / "keep.txt").read_text() == "mine"
    _fails(["work-config", "--mode", "posix", "--output", "relative/bundle"], "PATH_NOT_ABSOLUTE")
    _fails(["codex-config", "--mode", "windows-wsl"], "OUTPUT_REQUIRED")
    with pytest.raises(FileExistsError):  # a failure part-way leaves nothing behind
        hostconfig.write_bundle(str(tmp_path / "new"), {"a.txt": b"1", "sub/../a.txt": b"2"})
    assert sorted(os.listdir(tmp_path)) == ["cmhome", "taken"]


def test_work_bundle_posix(home, tmp_path):
    configure(home)
    out = tmp_path / "work"
    _ok(["work-config", "--mode", "posix", "--output", str(out)])
    doc = tomllib.loads((out / "common-memory.config.toml").read_text())
    assert set(_hooks(doc).values()) == {shlex.join([*HOOK, "hook", "work", "--home", home])}
    read, init = doc["mcp_servers"]["common_memory"], doc["mcp_servers"]["common_memory_init"]
    assert read["args"][3:] == ["mcp", "--client-id", "chatgpt-work", "--capability", "read", "--global"]
    assert init["args"][3:] == ["mcp", "--client-id", "chatgpt-desktop", "--capability", "init", "--global"]
    assert init["enabled_tools"] == ["memory_init", "memory_status"]
    assert init["default_tools_approval_mode"] == "approve"
    assert "--client chatgpt-work" in (out / "skills/memory-refresh/SKILL.md").read_text()


def test_work_bundle_windows_wsl_pins_the_bridge(home, tmp_path):
    configure(home)
    out = tmp_path / "win"
    bridge = r"C:\Users\you\common-memory-bundle\common-memory-bridge.ps1"
    _ok(["work-config", "--mode", "windows-wsl", "--distro", "Ubuntu-24.04", "--user", "ada", "--output", str(out),
         "--bridge-path", bridge])
    script = (out / "common-memory-bridge.ps1").read_bytes()
    assert script.startswith(b"\xef\xbb\xbf") and b"\r\n" in script and b"\n" not in script.replace(b"\r\n", b"")
    text = script.decode("utf-8-sig")
    for line in (r"$WslExe = 'C:\Windows\System32\wsl.exe'", "$Distro = 'Ubuntu-24.04'", "$LinuxUser = 'ada'",
                 f"$Python = '{PYTHON}'", f"$CmHome = '{home}'"):
        assert line in text
    assert "ExecutionPolicy" not in text.split("#>", 1)[1]
    doc = tomllib.loads((out / "common-memory.config.toml").read_text())
    powershell = r"C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe"
    assert set(_hooks(doc).values()) == {f'{powershell} -NoLogo -NoProfile -NonInteractive -File "{bridge}" hook work'}
    read = doc["mcp_servers"]["common_memory"]
    assert read["command"] == r"C:\Windows\System32\wsl.exe" and "env" not in read
    assert read["args"][:8] == ["-d", "Ubuntu-24.04", "-u", "ada", "-e", "/usr/bin/env",
                                f"COMMON_MEMORY_HOME={home}", PYTHON]
    assert read["args"][8:] == ["-I", "-m", "cmrunner", "mcp", "--client-id", "chatgpt-work", "--capability", "read",
                                "--global"]
    skill = (out / "skills/memory-refresh/SKILL.md").read_text()
    assert f'-File "{bridge}" refresh work' in skill


def test_windows_wsl_refusals(home, tmp_path, monkeypatch):
    configure(home)
    monkeypatch.delenv("WSL_DISTRO_NAME", raising=False)
    base = ["work-config", "--mode", "windows-wsl"]
    _fails(base + ["--output", str(tmp_path / "a"), "--user", "ada"], "WSL_IDENTITY_REQUIRED")
    _fails(base + ["--output", str(tmp_path / "b"), "--distro", "Ubuntu"], "BRIDGE_PATH_REQUIRED")
    _fails(base + ["--output", str(tmp_path / "c"), "--distro", "Ubuntu", "--bridge-path", r"C:\$x\b.ps1"],
           "INVALID_BRIDGE_PATH")
    _fails(base + ["--output", str(tmp_path / "d"), "--distro", "Ubuntu; rm", "--bridge-path", r"C:\b\b.ps1"],
           "INVALID_WSL_IDENTITY")
    assert not any((tmp_path / n).exists() for n in "abcd")
    assert hostconfig.windows_path_of("/mnt/c/Users/you/bundle") == r"C:\Users\you\bundle"
    assert hostconfig.windows_path_of("/home/you/bundle") is None


def test_mcp_config_direct_and_wsl(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    allow(home, project.scope)
    direct = tomllib.loads(_ok(["mcp-config", "--workspace", project.path]))["mcp_servers"]
    assert direct["common_memory_init"]["args"][3:] == ["mcp", "--client-id", "chatgpt-desktop", "--capability",
                                                        "init", "--global"]
    assert direct["common_memory_init"]["default_tools_approval_mode"] == "approve"
    assert direct["common_memory"]["args"][-2:] == ["--workspace", project.path]
    text = _ok(["mcp-config", "--wsl", "--distro", "Ubuntu", "--user", "ada"])
    assert "#   distribution: Ubuntu (WSL_DISTRO_NAME)" in text and "#   Linux user:   ada" in text
    assert f"#   data root:    {paths.root}" in text
    wsl = tomllib.loads(text)["mcp_servers"]["common_memory_init"]
    assert wsl["command"] == "wsl.exe" and "env" not in wsl
    assert wsl["args"][:8] == ["-d", "Ubuntu", "-u", "ada", "-e", "/usr/bin/env", f"COMMON_MEMORY_HOME={home}", PYTHON]
    _fails(["mcp-config", "--distro", "Ubuntu"], "WSL_OPTIONS_WITHOUT_WSL")


def test_merge_keeps_comments_and_order_and_never_overwrites(home):
    configure(home)
    existing = '# my settings\nmodel = "gpt-x"  # keep me\n\n[mcp_servers.other]\ncommand = "x"\n'
    generated = run_cm(["codex-config"], cm=REAL_CM).stdout.decode()
    merged = hostconfig.merge_toml(existing, generated)
    # The existing text stays as it was; the profile's one top-level setting joins the top-level keys.
    assert merged.startswith('# my settings\nmodel = "gpt-x"  # keep me\nmcp_optional_startup_grace_ms = 5000\n\n'
                             '[mcp_servers.other]\ncommand = "x"\n')
    doc = tomllib.loads(merged)
    assert set(doc["mcp_servers"]) == {"other", "common_memory"} and len(doc["hooks"]["Stop"]) == 1
    assert doc["model"] == "gpt-x" and doc["mcp_optional_startup_grace_ms"] == hostconfig.MCP_STARTUP_GRACE_MS
    assert hostconfig.merge_toml(merged, generated) == merged  # idempotent: nothing is duplicated
    changed = generated.replace('default_tools_approval_mode = "auto"', 'default_tools_approval_mode = "approve"')
    with pytest.raises(CmError) as caught:
        hostconfig.merge_toml(merged, changed)
    assert caught.value.code == "CONFIG_ENTRY_EXISTS"


def test_powershell_literals_cannot_be_broken_out_of():
    assert winbridge.ps_literal("C:\\it's") == "'C:\\it''s'"
    assert winbridge.ps_literal("a\u2019b$c") == "'a\u2019\u2019b$c'"
