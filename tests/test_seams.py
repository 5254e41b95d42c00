"""No test seam in production: cm reads only documented environment variables, and the test seams
reach real drains (spawned ``-I``) only through the tests' overlay interpreter."""

from __future__ import annotations

import ast
import os
import re
import subprocess

from conftest import REAL_CM, Transcript, db_rows, event, hook_env, run_hook, wait_no_drain
from drain_support import TEMPLATES, write_script
from support import seams
from writer_support import admit, configure

import cmrunner
from cmrunner.core import drainlease

PACKAGE = os.path.dirname(os.path.abspath(cmrunner.__file__))  # the installed copy: what users run
ROOTS = [PACKAGE]  # writer_proc, hooks and bridge are installed inside it (see pyproject.toml)

# Documented user-facing variables (README, reference usage, hosts.md): the home, the explicit host
# instance, the hosts' own variables cm follows, and the proxy/CA family of the model route.
USER_VARIABLES = {
    "COMMON_MEMORY_HOME", "COMMON_MEMORY_HOST_INSTANCE", "CODEX_HOME", "CODEX_THREAD_ID", "PI_CODING_AGENT_DIR",
    "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "HOME", "WSL_DISTRO_NAME", "PATH", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
    "NO_PROXY", "no_proxy",
}
# What cm itself sets for an agent CLI it runs as the Memory Agent (README "No API key?",
# docs/architecture.md): the marker every hook entry checks first, and the relay's socket and
# per-attempt token. Production sets and reads them; no user or test sets them.
AGENT_CLI_VARIABLES = {"COMMON_MEMORY_AGENT_SESSION", "COMMON_MEMORY_AGENT_SOCKET", "COMMON_MEMORY_AGENT_TOKEN"}
# COMMON_MEMORY_* names production may mention: the user variables above, the default names a user
# gives the key, proxy and CA in config.json (read from the private .env), the Pi bridge's pin, and
# the agent CLI's variables.
COMMON_MEMORY_NAMES = {"COMMON_MEMORY_HOME", "COMMON_MEMORY_HOST_INSTANCE", "COMMON_MEMORY_API_KEY",
                       "COMMON_MEMORY_PROXY_URL", "COMMON_MEMORY_CA_FILE", "COMMON_MEMORY_CM", *AGENT_CLI_VARIABLES}
TEST_ONLY = {*seams.VARIABLES, "COMMON_MEMORY_FAULT", "COMMON_MEMORY_AGENT_SCRIPT", "COMMON_MEMORY_AGENT_CALLS",
             "COMMON_MEMORY_DRAIN_LINGER_MS"}
# Reads whose name is not a constant: the model route reads the proxy family and the variable names
# config.json's remote.proxy.urlEnv / remote.caFileEnv give (netclient.NetworkInputs.capture).
# Host discovery's "not found" message names the host's own folder variable (CODEX_HOME,
# PI_CODING_AGENT_DIR, CLAUDE_CONFIG_DIR or GEMINI_CLI_HOME, all user variables above) by a name it holds.
DYNAMIC_READERS = {"agentrt/netclient.py", "manage/integrations/discovery.py"}
HOLDERS = {"environ", "env", "process_env", "environment"}  # names production gives an environment mapping


def _sources(suffixes: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for root in ROOTS:
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__" and d != "node_modules"]
            for name in names:
                if name.endswith(suffixes):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as handle:
                        found[os.path.relpath(path, PACKAGE)] = handle.read()
    return found


def _is_env(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id in HOLDERS)


def _env_keys(tree: ast.Module) -> list[tuple[int, ast.expr]]:
    """Every ``os.getenv(k)``, ``<env>.get/pop/setdefault(k)``, ``<env>[k]`` and ``k in <env>``."""
    keys = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and (
                node.func.attr in ("getenv", "putenv", "unsetenv")
                or (node.func.attr in ("get", "pop", "setdefault") and _is_env(node.func.value))):
            keys.append((node.lineno, node.args[0]))
        elif isinstance(node, ast.Subscript) and _is_env(node.value):
            keys.append((node.lineno, node.slice))
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_env(node.comparators[0]):
            keys.append((node.lineno, node.left))
    return keys


def test_production_reads_only_documented_environment_variables():
    sources = _sources((".py",))
    assert "writer_proc/drain.py" in sources and "hooks/codex.py" in sources, "the scan covers the installed code"
    trees = {path: ast.parse(text) for path, text in sources.items()}
    constants: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        constants.setdefault(target.id, set()).add(node.value.value)
    read: dict[str, set[str]] = {}
    dynamic = set()
    for path, tree in trees.items():
        for line, key in _env_keys(tree):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names = {key.value}
            elif isinstance(key, (ast.Name, ast.Attribute)) and (key.id if isinstance(key, ast.Name) else key.attr) in constants:
                names = constants[key.id if isinstance(key, ast.Name) else key.attr]
            else:
                dynamic.add(path)
                continue
            for name in names:
                read.setdefault(name, set()).add(f"{path}:{line}")
    assert {"COMMON_MEMORY_HOME", "COMMON_MEMORY_HOST_INSTANCE", "CODEX_HOME"} <= set(read), "the scan finds reads"
    assert {n: w for n, w in read.items() if n not in USER_VARIABLES | AGENT_CLI_VARIABLES} == {}
    assert dynamic <= DYNAMIC_READERS, dynamic


def test_no_production_file_names_a_test_only_variable():
    for path, text in _sources((".py", ".ts", ".js", ".md", ".json", ".toml")).items():
        assert "CM_TEST_" not in text and not any(name in text for name in TEST_ONLY), path
        assert set(re.findall(r"COMMON_MEMORY_[A-Z0-9_]+", text)) <= COMMON_MEMORY_NAMES, path


def test_a_users_environment_cannot_script_crash_or_hold_the_real_drain(home, tmp_path):
    paths, _cfg = configure(home)
    admit(paths, "a fact worth keeping", "e1", batch="b1")
    script = write_script(str(tmp_path), TEMPLATES)
    calls = tmp_path / "calls.log"
    hostile = {seams.SCRIPT_ENV: script, "COMMON_MEMORY_AGENT_SCRIPT": script, seams.CALLS_ENV: str(calls),
               "COMMON_MEMORY_AGENT_CALLS": str(calls), seams.FAULT_ENV: "before_stage",
               "COMMON_MEMORY_FAULT": "before_stage", seams.LINGER_ENV: "60000",
               "COMMON_MEMORY_DRAIN_LINGER_MS": "60000", seams.TXN_FAIL_ENV: "1"}
    assert set(hostile) == TEST_ONLY
    proc = subprocess.run([REAL_CM, "session-drain", "--home", home], env=hook_env(**hostile), timeout=30,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr  # not killed, and it did not linger for a minute either
    assert not calls.exists(), "no scripted agent ran"
    assert db_rows(home, "SELECT state FROM observations") == [("pending",)], "no model configured: work stays queued"


def test_the_overlay_seams_a_drain_a_hook_spawns_with_dash_capital_i(home, tmp_path, workdir):
    paths, _cfg = configure(home)
    script = write_script(str(tmp_path), TEMPLATES)
    calls = tmp_path / "calls.log"
    env = hook_env(**{seams.SCRIPT_ENV: script, seams.CALLS_ENV: str(calls)})
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-seam")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup"), env=env).returncode == 0
    transcript.user_turn("t1", "remember that I like tea")
    transcript.reply("t1", "noted")
    assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1",
                                prompt="remember that I like tea"), env=env).returncode == 0
    assert run_hook(home, event("Stop", transcript, workdir, turn_id="t1"), env=env).returncode == 0
    assert run_hook(home, event("SessionEnd", transcript, workdir, reason="exit"), env=env).returncode == 0
    wait_no_drain(home)
    assert calls.read_text().split(), "the drain the hook spawned ran the scripted agent"
    assert db_rows(home, "SELECT state FROM observations") == [("processed",)]
    assert "## Fact " in open(paths.document("profile")).read()
    # What made it through: hooks spawn the drain isolated, so PYTHONPATH could not have carried it.
    assert drainlease.drain_command(home)[1:3] == ["-I", "-m"]
