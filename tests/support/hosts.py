"""The real hosts for tests: Codex CLI 0.169.0 and Pi 0.73.1, installed with npm into a cache folder.

Contract:
- ``cache_dir()`` is ``$CM_HOST_CACHE`` or ``~/.cache/cm-test-hosts``; it must lie outside the
  repository. Each host lives in ``<cache>/<name>-<version>/`` and is reused when its marker file
  names the exact package spec; a fresh install goes to a temporary sibling folder that is renamed
  into place only after npm succeeded and the binary reported the expected version, so a failed or
  interrupted install never leaves a half-filled cache behind.
- Missing ``node``/``npm`` or a failing npm raises ``HostSetupError`` whose message says what to
  install. Tests that need a host fail loudly with it; nothing here skips.
- ``write_codex_home`` writes a ``CODEX_HOME`` whose only model provider is the fake server
  (``wire_api = "responses"``), with the offline knobs of hosts.md §1.11, plus an optional
  ``hooks.json``. ``codex_env`` gives Codex a scratch ``HOME`` so nothing reads or writes ``~/.codex``.
- Hook trust (hosts.md §1.6): ``trust_hooks`` uses the ``codex app-server`` route (``hooks/list`` then
  ``config/batchWrite``) and verifies every hook reads back as trusted; the flag
  ``--dangerously-bypass-hook-trust`` is offered by ``codex_exec_argv`` for fixture capture only.
- ``write_pi_agent`` writes a ``PI_CODING_AGENT_DIR`` whose only provider is the fake server (Chat
  Completions); ``pi_env`` gives Pi that folder, the offline knobs of hosts.md §2.4, a scratch ``HOME``
  and cm's bridge configuration, with no real keys and no pinned host instance.
- Every child process started here is stopped by its PID (SIGTERM, then SIGKILL) before returning.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path

from cmrunner.synthetic.fakemodel import stop_process

CODEX_PACKAGE = "@openai/codex"
CODEX_VERSION = "0.169.0"
PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
MIN_NODE = (20, 6)
REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 600.0
FAKE_KEY_ENV = "FAKE_API_KEY"
# The six events cm wires (reference-facts §6.2) and every event Codex 0.169 documents (hosts.md §1.3).
CM_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "Interrupt", "SessionEnd")
ALL_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact",
              "PostCompact", "Stop", "Interrupt", "SessionEnd", "SubagentStart", "SubagentStop")
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")


class HostSetupError(RuntimeError):
    """A real host could not be installed or driven; the message says what to install or fix."""


def cache_dir() -> Path:
    """The host cache folder; refuses a folder inside the repository."""
    raw = os.environ.get("CM_HOST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cm-test-hosts")
    path = Path(raw).expanduser().resolve()
    if path == REPO_ROOT or REPO_ROOT in path.parents:
        raise HostSetupError(f"CM_HOST_CACHE must be outside the repository ({REPO_ROOT}); set it to another folder")
    return path


def _node_version(node: str) -> tuple[int, int]:
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+.*", out)
    if not match:
        raise HostSetupError(f"`node --version` printed {out[:40]!r}; install Node.js {MIN_NODE[0]}.{MIN_NODE[1]} or newer")
    return int(match.group(1)), int(match.group(2))


def require_node() -> tuple[str, str]:
    """Paths of ``node`` and ``npm``, checked; raises with what to install."""
    node, npm = shutil.which("node"), shutil.which("npm")
    want = f"Node.js {MIN_NODE[0]}.{MIN_NODE[1]} or newer with npm"
    if node is None or npm is None:
        missing = " and ".join(n for n, p in (("node", node), ("npm", npm)) if p is None)
        raise HostSetupError(f"{missing} not found on PATH: the real-host tests need {want} "
                             "(Debian: `apt-get install nodejs npm`)")
    if _node_version(node) < MIN_NODE:
        raise HostSetupError(f"the real-host tests need {want}; `node` on PATH is older")
    return node, npm


def _installed_version(binary: Path) -> str:
    proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return (proc.stdout + proc.stderr).strip()


def install_host(package: str, version: str, binary: str, expect: str) -> Path:
    """Install ``package@version`` into the cache (or reuse it); returns the path of ``binary``.

    ``expect`` is a substring the binary's ``--version`` output must contain.
    """
    spec = f"{package}@{version}"
    root = cache_dir()
    final = root / f"{binary}-{version}"
    marker = final / ".cm-installed"
    bin_path = final / "node_modules" / ".bin" / binary
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == spec and bin_path.exists():
        return bin_path
    _, npm = require_node()
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{binary}-{version}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    argv = [npm, "install", "--prefix", str(staging), "--no-audit", "--no-fund", "--no-save",
            "--loglevel=error", spec]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise HostSetupError(f"`npm install {spec}` did not finish in {INSTALL_TIMEOUT:.0f} s") from exc
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise HostSetupError(f"`npm install {spec}` failed (exit {proc.returncode}); the real-host tests need the npm "
                             f"registry reachable and {spec} installable: {proc.stderr.strip()[-800:]}")
    staged_bin = staging / "node_modules" / ".bin" / binary
    found = _installed_version(staged_bin) if staged_bin.exists() else "(no binary)"
    if expect not in found:
        shutil.rmtree(staging, ignore_errors=True)
        raise HostSetupError(f"{spec} installed but `{binary} --version` printed {found[:80]!r}")
    (staging / ".cm-installed").write_text(spec + "\n", encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staging, final)
    return bin_path


def codex_binary() -> Path:
    """Codex CLI 0.169.0 (installed on first use; about 400 MB, a static binary inside the package)."""
    return install_host(CODEX_PACKAGE, CODEX_VERSION, "codex", f"codex-cli {CODEX_VERSION}")


def pi_binary() -> Path:
    """Pi coding agent 0.73.1 (installed on first use)."""
    return install_host(PI_PACKAGE, PI_VERSION, "pi", PI_VERSION)


def write_pi_agent(agent_dir: Path, base_url: str) -> Path:
    """A Pi agent folder whose ``models.json`` offers only ``fake/fake-model`` at ``base_url``."""
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"fake": {
        "baseUrl": base_url, "api": "openai-completions", "apiKey": "fake-key-not-secret",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "fake-model", "contextWindow": 32000, "maxTokens": 1024}]}}}))
    return agent_dir


def pi_env(agent_dir: Path, scratch_home: Path, cm: str, home: str) -> dict[str, str]:
    """Environment for Pi running cm's bridge: offline, a scratch ``HOME``, cm pinned by argv and home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PI_"))}
    env.update({"PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_TELEMETRY": "0",
                "HOME": str(scratch_home), "COMMON_MEMORY_CM": json.dumps([cm]),
                "COMMON_MEMORY_HOME": home, "CM_TEST_DRAIN_LINGER_MS": "0"})
    env.pop("COMMON_MEMORY_HOST_INSTANCE", None)  # the capture must find the Pi process itself
    os.makedirs(scratch_home, exist_ok=True)
    return env


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_hooks(command: str, events: tuple[str, ...] = CM_EVENTS, timeout: int = 3,
                context_limit_zero: bool = True) -> dict:
    """A ``hooks.json`` document running ``command`` for each event (one group, one handler)."""
    table: dict = {}
    for event in events:
        handler: dict = {"type": "command", "command": command, "timeout": timeout}
        if context_limit_zero and event in CONTEXT_EVENTS:
            handler["additionalContextLimit"] = 0
        group: dict = {"hooks": [handler]}
        if event == "SessionStart":
            group["matcher"] = "startup|resume|compact|clear"
        table[event] = [group]
    return {"hooks": table}


def cm_hook_command(cm: str, home: str, client: str = "codex") -> str:
    """The shell command a host runs for cm's hook (absolute paths, shell-quoted)."""
    return " ".join(shlex.quote(p) for p in (cm, "hook", client, "--home", home))


def write_codex_home(codex_home: str, base_url: str, hooks: dict | None = None,
                     extra_toml: str = "") -> Path:
    """Write ``config.toml`` (fake provider, offline) and optionally ``hooks.json``; returns the config path.

    ``extra_toml`` is appended after the provider table, so it must open its own table (for example
    ``[mcp_servers.x]``); top-level keys go on the command line as ``-c key=value``.
    """
    home = Path(codex_home)
    home.mkdir(parents=True, exist_ok=True)
    lines = [
        'model = "fake-model"',
        'model_provider = "fake"',
        'approval_policy = "never"',
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[model_providers.fake]",
        'name = "cm fake model"',
        f"base_url = {_toml_str(base_url)}",
        f"env_key = {_toml_str(FAKE_KEY_ENV)}",
        'wire_api = "responses"',
        # One try per request: a scripted failure must not be retried into the next scripted reply.
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
    ]
    config = home / "config.toml"
    config.write_text("\n".join(lines) + extra_toml, encoding="utf-8")
    if hooks is not None:
        (home / "hooks.json").write_text(json.dumps(hooks, indent=2), encoding="utf-8")
    return config


def codex_env(codex_home: str, scratch_home: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for Codex: no real keys, a scratch ``HOME``, the fake provider's key variable set."""
    os.makedirs(scratch_home, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_", "ANTHROPIC_"))}
    env.update({"CODEX_HOME": codex_home, "HOME": scratch_home, FAKE_KEY_ENV: "fake-key-not-secret",
                "NO_COLOR": "1", "TERM": "dumb"})
    env.update(extra or {})
    return env


def codex_exec_argv(codex: Path, args: list[str], bypass_hook_trust: bool = False) -> list[str]:
    """``codex exec`` argv; ``args`` may start with ``resume`` (e.g. ``["resume", "--last", "…"]``)."""
    flags = ["--skip-git-repo-check"]
    if bypass_hook_trust:
        # Fixture capture only: the e2e tests must trust hooks the way a user would (trust_hooks).
        flags.append("--dangerously-bypass-hook-trust")
    if args and args[0] == "resume":
        return [str(codex), "exec", "resume", *flags, *args[1:]]
    return [str(codex), "exec", *flags, *args]


def start_codex_exec(codex: Path, args: list[str], cwd: str, env: dict[str, str],
                     bypass_hook_trust: bool = False) -> subprocess.Popen:
    """Start ``codex exec`` (stdin /dev/null: exec appends piped stdin to the prompt)."""
    return subprocess.Popen(codex_exec_argv(codex, args, bypass_hook_trust), cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


stop = stop_process  # one way to stop a child by its PID (SIGTERM, then SIGKILL; always reaped)


def run_codex_exec(codex: Path, args: list[str], cwd: str, env: dict[str, str], timeout: float = 120.0,
                   bypass_hook_trust: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``codex exec`` to completion (bounded); the child is stopped by PID on timeout."""
    process = start_codex_exec(codex, args, cwd, env, bypass_hook_trust)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        stop(process)
        raise HostSetupError(f"codex exec did not finish in {timeout:.0f} s") from exc
    finally:
        stop(process)
    return subprocess.CompletedProcess(process.args, process.returncode, out.decode("utf-8", "replace"),
                                       err.decode("utf-8", "replace"))


class AppServer:
    """A ``codex app-server`` child speaking newline-delimited JSON-RPC over stdio (bounded waits)."""

    def __init__(self, codex: Path, env: dict[str, str], cwd: str) -> None:
        self.process = subprocess.Popen([str(codex), "app-server"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._lines: queue.Queue[bytes] = queue.Queue()
        # A reader thread, because select() on the pipe cannot see lines already in Python's buffer.
        threading.Thread(target=self._pump, daemon=True).start()
        self._next_id = 0
        self.notifications: list[dict] = []

    def wait_for(self, method: str, timeout: float = 60.0) -> dict:
        """The first notification named ``method`` (earlier ones are kept in ``notifications``)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for message in self.notifications[seen:]:
                seen += 1
                if message.get("method") == method:
                    return message
            self._read(deadline, f"sent no {method} in {timeout:.0f} s", f"before {method}")

    def _read(self, deadline: float, late: str, during: str) -> dict:
        """One message; notifications are also kept in ``notifications`` (server requests go unanswered)."""
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise HostSetupError(f"codex app-server {late}") from None
        if not line:
            raise HostSetupError(f"codex app-server exited (status {self.process.poll()}) {during}")
        message = json.loads(line)
        if "method" in message:
            self.notifications.append(message)
        return message

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def notify(self, method: str, params: dict | None = None) -> None:
        message: dict = {"method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def call(self, method: str, params: dict, timeout: float = 30.0) -> dict:
        self._next_id += 1
        wanted = self._next_id
        self._send({"id": wanted, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline, f"did not answer {method} in {timeout:.0f} s", f"during {method}")
            if "method" in message or message.get("id") != wanted:
                continue
            if "error" in message:
                raise HostSetupError(f"codex app-server {method} failed: {json.dumps(message['error'])[:400]}")
            return message.get("result", {})

    def _send(self, message: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def close(self, grace: float = 5.0) -> None:
        """Close stdin (a clean end: the session ends and SessionEnd fires), then stop by PID if needed."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        stop(self.process)


def list_hooks(server: AppServer, cwd: str) -> list[dict]:
    result = server.call("hooks/list", {"cwds": [cwd]})
    return [hook for entry in result.get("data", []) for hook in entry.get("hooks", [])]


def trust_hooks(codex: Path, env: dict[str, str], cwd: str) -> list[dict]:
    """Trust every hook Codex discovers for ``cwd`` through ``codex app-server`` (hosts.md §1.6).

    Writes ``hooks.state."<key>".trusted_hash`` with ``config/batchWrite`` and checks that a second
    ``hooks/list`` reports every hook as trusted; returns that final listing.
    """
    server = AppServer(codex, env, cwd)
    try:
        server.call("initialize", {"clientInfo": {"name": "cm-tests", "version": "0"}})
        server.notify("initialized")
        hooks = list_hooks(server, cwd)
        if not hooks:
            raise HostSetupError("codex app-server hooks/list found no hooks to trust")
        edits = [{"keyPath": f'hooks.state."{h["key"]}".trusted_hash', "mergeStrategy": "upsert",
                  "value": h["currentHash"]} for h in hooks if h.get("trustStatus") != "trusted"]
        if edits:
            server.call("config/batchWrite", {"edits": edits})
        listed = list_hooks(server, cwd)
        untrusted = [h["key"] for h in listed if h.get("trustStatus") != "trusted"]
        if untrusted:
            raise HostSetupError(f"hooks still untrusted after config/batchWrite: {untrusted}")
        return listed
    finally:
        server.close()
