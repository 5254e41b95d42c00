"""The hook, capture and read paths import only the light side (python -X importtime of the real entry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import CM, Transcript, event, hook_env, run_cm

import cmrunner

FORBIDDEN = ("cmrunner.writer_proc", "cmrunner.agentrt", "cmrunner.sync", "cmrunner.core.syncstate", "pydantic", "httpx", "httpx2", "openai", "mcp", "click", "asyncio",
             # not named by the issue, but each costs 20-50 ms (python-notes.md §1.3): keep them off too
             "psutil", "filelock", "dotenv", "orjson", "logging", "subprocess", "argparse",
             # the deep secret scan (detect-secrets and what it imports) runs off the hook path
             "detect_secrets", "cmrunner.secrets._deepscan", "yaml", "requests",
             # SOCKS5 (httpx2[socks]) is the drain's only, imported when a SOCKS proxy is used
             "socksio",
             # cheap alone, but paid by every event: a codec module that a text-mode open with an
             # encoding loads (signal is off the uncontended path too, but a drain running beside
             # the hook may contend the write gate, so it cannot be forbidden here)
             "encodings.ascii")
# Per-turn events (not SessionStart, which renders memory) take sha256 from the builtin module
# (cmrunner.core.sha): hashlib loads OpenSSL, ~2-3 ms a run.
PER_TURN_FORBIDDEN = ("hashlib", "_hashlib",
                      # json loads re and compiles its patterns; cmrunner.core.jsonfast drives _json
                      # directly (SessionStart's transcript check still parses with json)
                      "json",
                      # the drain's side of capture: the transcript parser, the Codex consumer and the
                      # sensitive-content scanner load only where the drain consumes the inbox
                      "cmrunner.capture.rollout", "cmrunner.capture.codex_consumer", "cmrunner.secrets.safety",
                      # the session cache is the consumers' and the memory reader SessionStart's (issue 35)
                      "cmrunner.capture.sessions", "cmrunner.reading.reader")


# The form hosts are pinned to (`<python> -I -S <installed cmrunner>/__main__.py hook …`,
# hostconfig.Pins.hook_argv) loads neither `re` nor `enum` on a per-turn event (with them a hook imported
# about a tenth more than a bare interpreter; the pip-generated `cm` script imports `re` itself), nor
# the interpreter's `site` start, the `-m` machinery or contextlib, which the floor skips (issue 35).
PINNED_PER_TURN_FORBIDDEN = ("re", "enum", "sre_compile", "_sre", "site", "_distutils_hack", "sitecustomize",
                             "runpy", "importlib.util", "importlib.machinery", "contextlib")
HOOK_ENTRY = os.path.join(os.path.dirname(os.path.abspath(cmrunner.__file__)), "__main__.py")  # the installed copy


def _imported(args: list[str], payload: bytes, pinned: bool = False) -> set[str]:
    entry = ["-I", "-S", HOOK_ENTRY] if pinned else [CM]
    proc = subprocess.run([sys.executable, "-X", "importtime", *entry, *args], input=payload,
                          capture_output=True, env=hook_env(), timeout=30)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    modules = set()
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            modules.add(line.rsplit("|", 1)[1].strip())
    assert "cmrunner.entry" in modules  # the measurement really covered our entry
    return modules


def _assert_light(modules: set[str], extra: tuple[str, ...] = ()) -> None:
    bad = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN + extra))
    assert bad == [], f"heavy modules on a hook path: {bad}"


@pytest.mark.parametrize("name", ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"])
def test_codex_hook_path_is_light(home, tmp_path, workdir, name):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    start = event("SessionStart", transcript, workdir, source="startup")
    if name != "SessionStart":
        subprocess.run([CM, "hook", "codex", "--home", home], input=json.dumps(start).encode(),
                       env=hook_env(), check=True, capture_output=True)
        transcript.user_turn("t1", "hello")
        start = event(name, transcript, workdir, turn_id="t1", prompt="hello")
    modules = _imported(["hook", "codex", "--home", home], json.dumps(start).encode())
    _assert_light(modules, PER_TURN_FORBIDDEN if name != "SessionStart" else ())
    assert "cmrunner.hooks.codex" in modules


AGENT_EVENTS = {"claude": ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"),
                "gemini": ("SessionStart", "BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd")}


def _agent_payload(home: str, workdir: str, host: str, index: int) -> bytes:
    name = AGENT_EVENTS[host][index]
    base = {"session_id": "s-1", "cwd": workdir, "transcript_path": "/t.jsonl"}
    if index:
        start = dict(base, hook_event_name=AGENT_EVENTS[host][0], source="startup")
        run_cm(["hook", host, "--home", home], json.dumps(start).encode())
    payload = dict(base, hook_event_name=name, source="startup", prompt="hello", prompt_response="hi",
                   last_assistant_message="hi", trigger="auto", reason="other")
    return json.dumps(payload).encode()


@pytest.mark.parametrize("host,index", [(h, i) for h in AGENT_EVENTS for i in range(5)])
def test_claude_and_gemini_hook_paths_are_light(home, workdir, host, index):
    modules = _imported(["hook", host, "--home", home], _agent_payload(home, workdir, host, index))
    _assert_light(modules, PER_TURN_FORBIDDEN if index else ())
    assert f"cmrunner.hooks.{host}" in modules and "cmrunner.hooks.codex" not in modules


@pytest.mark.parametrize("host", ["claude", "gemini"])
def test_the_pinned_form_loads_no_pattern_engine_nor_site_per_turn(home, workdir, host):
    modules = _imported(["hook", host, "--home", home], _agent_payload(home, workdir, host, 1), pinned=True)
    _assert_light(modules, PER_TURN_FORBIDDEN + PINNED_PER_TURN_FORBIDDEN)
    assert f"cmrunner.hooks.{host}" in modules


def test_the_pinned_codex_form_loads_no_pattern_engine_nor_site_per_turn(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    start = event("SessionStart", transcript, workdir, source="startup")
    subprocess.run([CM, "hook", "codex", "--home", home], input=json.dumps(start).encode(),
                   env=hook_env(), check=True, capture_output=True)
    transcript.user_turn("t1", "hello")
    prompt = event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="hello")
    modules = _imported(["hook", "codex", "--home", home], json.dumps(prompt).encode(), pinned=True)
    _assert_light(modules, PER_TURN_FORBIDDEN + PINNED_PER_TURN_FORBIDDEN)
    assert "cmrunner.hooks.codex" in modules


def test_claude_rejected_input_path_is_light(home):
    proc = subprocess.run([sys.executable, "-X", "importtime", CM, "hook", "claude", "--home", home],
                          input=b"{bad", capture_output=True, env=hook_env(), timeout=30)
    assert proc.returncode == 0 and proc.stdout == b"{}\n"
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:")}
    assert "cmrunner.hooks.claude" in modules
    _assert_light(modules)


@pytest.mark.parametrize("pinned", [False, True])
def test_capture_path_is_light(home, workdir, pinned):
    payload = {"version": 1, "sessionId": "p", "eventId": "e", "event": "input", "cwd": workdir,
               "hostInstance": "pi:1", "payload": {"text": "x"}}
    modules = _imported(["capture", "--home", home], json.dumps(payload).encode(), pinned=pinned)
    _assert_light(modules, PER_TURN_FORBIDDEN + (PINNED_PER_TURN_FORBIDDEN if pinned else ()))
    assert "cmrunner.hooks.pi" in modules


def test_rejected_input_path_is_light(home):
    proc = subprocess.run([sys.executable, "-X", "importtime", CM, "hook", "codex", "--home", home],
                          input=b"{bad", capture_output=True, env=hook_env(), timeout=30)
    assert proc.returncode == 1
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:")}
    _assert_light(modules)


def test_cmrunner_package_init_is_empty():
    import ast

    with open(cmrunner.__file__) as handle:
        tree = ast.parse(handle.read())
    assert ast.get_docstring(tree)
    assert len(tree.body) == 1, "cmrunner/__init__.py must hold only its docstring"


def test_a_configured_home_stays_light_and_a_hand_edit_is_validated_once(home, tmp_path, workdir):
    """A home set up by `cm config init` is read through the pre-validated cache: no pydantic per turn.
    A hand edit of config.json is validated (pydantic) by the next hook, which refreshes the cache."""
    assert run_cm(["config", "init"]).returncode == 0
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    start = event("SessionStart", transcript, workdir, source="startup")
    subprocess.run([CM, "hook", "codex", "--home", home], input=json.dumps(start).encode(),
                   env=hook_env(), check=True, capture_output=True)

    def prompt(n: int) -> set[str]:
        transcript.user_turn(f"t{n}", f"hello {n}")
        payload = event("UserPromptSubmit", transcript, workdir, turn_id=f"t{n}", prompt=f"hello {n}")
        return _imported(["hook", "codex", "--home", home], json.dumps(payload).encode())

    first = prompt(1)
    _assert_light(first, PER_TURN_FORBIDDEN)
    assert "cmrunner.core.configmodel" not in first
    path = os.path.join(home, "config.json")
    with open(path) as handle:
        data = json.load(handle)
    data["disclosure"]["allowedProvenance"].append("agent_observation")
    with open(path, "w") as handle:
        json.dump(data, handle, indent=4)  # a hand edit: other bytes, other layout
    edited = prompt(2)
    assert "pydantic" in edited and "cmrunner.core.configmodel" in edited
    again = prompt(3)
    _assert_light(again, PER_TURN_FORBIDDEN)
    assert "cmrunner.core.configmodel" not in again


# Runs the real entry with os._exit wrapped to report, at the process's very end, whether the cyclic
# collector was on; then exits as the entry would.
_GC_PROBE = ("import gc, os, sys\n"
             "real_exit = os._exit\n"
             "def report(code):\n"
             "    os.write(2, b'gc-enabled=%d\\n' % gc.isenabled())\n"
             "    real_exit(code)\n"
             "os._exit = report\n"
             "sys.argv = ['cm', *sys.argv[1:]]\n"
             "from cmrunner.entry import main\n"
             "try:\n"
             "    main()\n"
             "finally:\n"
             "    report(0)\n")


@pytest.mark.parametrize("host", ["claude", "gemini"])
def test_a_hook_process_runs_its_one_event_without_the_cyclic_collector(home, workdir, host):
    """A hook lives for one event and ends with os._exit: the collector's passes over the freshly
    imported modules free nothing and cost about a millisecond a turn (docs/benchmarks.md)."""
    proc = subprocess.run([sys.executable, "-I", "-c", _GC_PROBE, "hook", host, "--home", home],
                          input=_agent_payload(home, workdir, host, 1), env=hook_env(), capture_output=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert b"gc-enabled=0" in proc.stderr.splitlines(), proc.stderr
    other = subprocess.run([sys.executable, "-I", "-c", _GC_PROBE, "--version"], env=hook_env(), capture_output=True,
                           timeout=60)
    assert b"gc-enabled=1" in other.stderr.splitlines(), "only hook processes turn it off"
