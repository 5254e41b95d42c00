"""Capture real Codex 0.169.0 rollout transcripts as test fixtures (run by hand, not by pytest).

Usage (from the repository root; needs node + npm, installs Codex into the host cache on first use):

    python3 tests/support/capture_fixtures.py [--out tests/fixtures/codex] [--only NAME ...]

Contract:
- Each scenario runs real ``codex exec`` in a fresh scratch folder against the project's fake model
  server (``cmrunner.synthetic.fakemodel``, 127.0.0.1) with a recording hook for every Codex hook event, trusted
  for that one invocation with ``--dangerously-bypass-hook-trust`` (capture only). The ``app_server``
  scenario instead drives three turns on one ``codex app-server`` thread, with the hooks trusted
  through ``hooks/list`` + ``config/batchWrite`` (``hosts.trust_hooks``).
- The recording hook appends each hook payload (``payload``, exactly as received) and the size of
  the rollout when the hook ran (``transcript_bytes_at_hook``) to a log, and answers ``SessionStart`` and
  ``UserPromptSubmit`` with a fixed synthetic ``additionalContext`` (what cm's own injection looks like
  in a rollout); prompts containing ``BLOCKME`` are blocked with exit code 2.
- ``--codex-version`` captures with another release (files ``legacy-<version>-<name>.jsonl``).
- Outputs ``<name>.jsonl`` (the rollout, byte for byte apart from path scrubbing) and
  ``<name>.hooks.jsonl`` (the hook payloads, same scrubbing). The scratch root is replaced by
  ``/SCRATCH`` everywhere; every prompt and reply is synthetic.
- Every child (Codex, the fake server) is stopped by its PID; the scratch folder is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cmrunner.synthetic import fakemodel
from support import hosts

PLACEHOLDER = "/SCRATCH"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
RECORDER = '''import json, os, sys
event = json.load(sys.stdin)
path = event.get("transcript_path")
size = os.path.getsize(path) if path and os.path.exists(path) else None
with open(os.environ["CM_FIXTURE_HOOK_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({"payload": event, "transcript_bytes_at_hook": size}) + "\\n")
name = event.get("hook_event_name")
if name == "UserPromptSubmit" and "BLOCKME" in event.get("prompt", ""):
    sys.stderr.write("blocked by the fixture hook\\n")
    sys.exit(2)
if name == "Stop" and not event.get("stop_hook_active") and os.path.exists(os.environ["CM_FIXTURE_STOP_BLOCK"]):
    print(json.dumps({"decision": "block", "reason": "Fixture Stop hook: continue once more."}))
    sys.exit(0)
if name in ("SessionStart", "UserPromptSubmit"):
    text = "<<<cm-fixture-context>>> synthetic memory block for " + name
    print(json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}))
else:
    print("{}")
'''
# A minimal MCP stdio server (newline-delimited JSON-RPC) with one synthetic tool.
MCP_SERVER = '''import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fixture", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "lookup", "description": "Look up a synthetic fixture fact.",
                             "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}},
                                             "required": ["query"]}}]}
    elif method == "tools/call":
        query = msg["params"]["arguments"].get("query", "")
        result = {"content": [{"type": "text", "text": "fixture fact for " + query}], "isError": False}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}) + "\\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
    sys.stdout.flush()
'''


def tiny_png() -> bytes:
    """A valid 1x1 grey PNG, so an image attachment is real but synthetic."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
            + chunk(b"IEND", b""))


class Run:
    """One scenario's scratch world: fake server, CODEX_HOME, work dir, environment."""

    def __init__(self, root: Path, codex: Path, model: fakemodel.FakeModel, extra_toml: str = "") -> None:
        self.root = root
        self.codex = codex
        self.model = model
        self.work = root / "work"
        self.work.mkdir()
        self.codex_home = root / "codexhome"
        self.hook_log = root / "hooks.jsonl"
        recorder = root / "recorder.py"
        recorder.write_text(RECORDER, encoding="utf-8")
        command = f"{sys.executable} {recorder}"
        hosts.write_codex_home(str(self.codex_home), model.base_url, hosts.codex_hooks(command, hosts.ALL_EVENTS),
                               extra_toml)
        self.stop_block = root / "stop-block"
        self.env = hosts.codex_env(str(self.codex_home), str(root / "home"), {
            "CM_FIXTURE_HOOK_LOG": str(self.hook_log), "CM_FIXTURE_STOP_BLOCK": str(self.stop_block)})

    def exec(self, args: list[str], timeout: float = 120.0) -> int:
        proc = hosts.run_codex_exec(self.codex, args, str(self.work), self.env, timeout, bypass_hook_trust=True)
        return proc.returncode

    def exec_interrupted(self, args: list[str], after: float) -> int:
        """Start exec, wait for the model request to be in flight, then SIGINT it like Ctrl-C.

        The SIGINT follows an event (the request reached the model), and ``after`` must stay well
        inside the reply's stall (1 s of the "interrupted" fixture's 8 s), so it lands mid-turn at
        any load."""
        process = hosts.start_codex_exec(self.codex, args, str(self.work), self.env, bypass_hook_trust=True)
        try:
            deadline = time.monotonic() + 30
            while not self.model.model_requests() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(after)
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=30)
            return process.returncode
        finally:
            hosts.stop(process)

    def app_server_turns(self, inputs: list[list[dict]]) -> None:
        """Several turns on one ``codex app-server`` thread (one process), hooks trusted the real way."""
        hosts.trust_hooks(self.codex, self.env, str(self.work))
        server = hosts.AppServer(self.codex, self.env, str(self.work))
        try:
            server.call("initialize", {"clientInfo": {"name": "cm-fixtures", "version": "0"}})
            server.notify("initialized")
            thread = server.call("thread/start", {"cwd": str(self.work)})["thread"]["id"]
            for items in inputs:
                server.call("turn/start", {"threadId": thread, "input": items})
                server.wait_for("turn/completed", 60)
                server.notifications.clear()
        finally:
            server.close()

    def rollouts(self) -> list[Path]:
        return sorted((self.codex_home / "sessions").rglob("rollout-*.jsonl"))


def scrub(data: bytes, root: Path) -> bytes:
    for variant in {str(root), os.path.realpath(root)}:
        data = data.replace(variant.encode(), PLACEHOLDER.encode())
    return data


def hook_log(path: Path, rollout: bytes, root: Path) -> bytes:
    """The hook log with each rollout size re-measured on the scrubbed rollout (paths change lengths)."""
    lines = []
    for line in path.read_bytes().splitlines() if path.exists() else []:
        entry = json.loads(line)
        size = entry["transcript_bytes_at_hook"]
        if size is not None:
            entry["transcript_bytes_at_hook"] = len(scrub(rollout[:size], root))
        lines.append(json.dumps(entry).encode() + b"\n")
    return b"".join(lines)


def _simple(run: Run) -> None:
    run.exec(["Say hello to the fixture."])


def _shell_tool(run: Run) -> None:
    run.exec(["Please run a harmless echo for the fixture."])


def _resume(run: Run) -> None:
    run.exec(["First fixture prompt: remember the colour teal."])
    run.exec(["resume", "--last", "Second fixture prompt: what colour was it?"])


def _interrupted(run: Run) -> None:
    run.exec_interrupted(["Start a slow answer that will be interrupted."], after=1.0)


def _compaction(run: Run) -> None:
    run.exec(["-c", "model_auto_compact_token_limit=12", "Run a tool, then keep going after compaction."])


def _blocked(run: Run) -> None:
    run.exec(["BLOCKME this prompt is blocked by the fixture hook."])


def _image(run: Run) -> None:
    image = run.work / "dot.png"
    image.write_bytes(tiny_png())
    run.exec([f"--image={image}", "Describe the attached fixture image."])


def _text_and_tool(run: Run) -> None:
    run.exec(["Explain, then run a harmless echo."])


def _mcp_tool(run: Run) -> None:
    run.exec(["Look up the fixture fact with the MCP tool."])


def _stop_block(run: Run) -> None:
    run.stop_block.write_text("1", encoding="utf-8")
    run.exec(["Answer; the fixture Stop hook asks for one more pass."])


def mcp_config(root: Path) -> str:
    server = root / "mcp_server.py"
    server.write_text(MCP_SERVER, encoding="utf-8")
    return (f"\n[mcp_servers.fixture]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(server))}]\n"
            'default_tools_approval_mode = "approve"\n')


def _app_server(run: Run) -> None:
    run.app_server_turns([
        [{"type": "text", "text": "First app-server turn, "}, {"type": "text", "text": "typed in two parts."}],
        [{"type": "text", "text": "Second app-server turn."}],
        [{"type": "text", "text": "Third app-server turn."}],
    ])


ECHO = {"name": "exec_command", "arguments": {"cmd": "echo fixture-tool-ok"}}
# name -> (scenario, fake-model script, extra config.toml text)
SCENARIOS: dict[str, tuple[Callable[[Run], None], object, str]] = {
    "simple": (_simple, [{"text": "Hello from the fake model."}], ""),
    "shell_tool": (_shell_tool, [{"tool_calls": [ECHO]}, {"text": "The echo printed fixture-tool-ok."}], ""),
    "resume": (_resume, [{"text": "Noted: teal."}, {"text": "It was teal."}], ""),
    "interrupted": (_interrupted, [{"text": "This answer never finishes.", "delay_seconds": 8}], ""),
    "compaction": (_compaction, {"replies": [{"tool_calls": [ECHO]}, {"text": "Summary: the user ran an echo."},
                                             {"text": "Continuing after compaction."}],
                                 "default": {"text": "Fixture default reply."}}, ""),
    "text_and_tool": (_text_and_tool, [{"text": "I will run an echo first.", "tool_calls": [ECHO]},
                                       {"text": "Done: fixture-tool-ok."}], ""),
    "mcp_tool": (_mcp_tool, [{"tool_calls": [{"name": "lookup", "namespace": "mcp__fixture",
                                              "arguments": {"query": "teal"}}]},
                             {"text": "The fixture fact is about teal."}], "mcp"),
    "stop_block": (_stop_block, [{"text": "First answer."}, {"text": "Second answer after the Stop hook."}], ""),
    "app_server": (_app_server, [{"text": "First reply."}, {"text": "Second reply."}, {"text": "Third reply."}], ""),
    "blocked": (_blocked, [{"text": "This reply must never be requested."}], ""),
    "image": (_image, [{"text": "A single fixture pixel."}], ""),
}


def capture(name: str, out: Path, codex: Path, prefix: str = "") -> list[str]:
    scenario, script, extra = SCENARIOS[name]
    root = Path(tempfile.mkdtemp(prefix=f"cm-fixture-{name}-"))
    notes = []
    try:
        with fakemodel.running(str(root / "fakemodel"), script, lifetime_seconds=180) as model:
            run = Run(root, codex, model, mcp_config(root) if extra == "mcp" else extra)
            started = time.monotonic()
            scenario(run)
            notes.append(f"{name}: {time.monotonic() - started:.1f} s, {len(model.model_requests())} model requests")
            rollouts = run.rollouts()
            if len(rollouts) != 1:
                raise hosts.HostSetupError(f"{name}: expected one rollout file, found {len(rollouts)}")
            raw = rollouts[0].read_bytes()
            (out / f"{prefix}{name}.jsonl").write_bytes(scrub(raw, root))
            (out / f"{prefix}{name}.hooks.jsonl").write_bytes(scrub(hook_log(run.hook_log, raw, root), root))
            requests = [{"path": r["path"], "reply": r["reply"], "input_types": [
                (i.get("type"), i.get("role")) for i in (r.get("body") or {}).get("input", [])]}
                for r in model.requests()]
            notes.append(json.dumps(requests))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    parser.add_argument("--codex-version", default=hosts.CODEX_VERSION,
                        help="another Codex release; its files are named legacy-<version>-<scenario>.jsonl")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    version = args.codex_version
    codex = hosts.install_host(hosts.CODEX_PACKAGE, version, "codex", f"codex-cli {version}")
    prefix = "" if version == hosts.CODEX_VERSION else f"legacy-{version}-"
    for name in args.only or list(SCENARIOS):
        for note in capture(name, args.out, codex, prefix):
            print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
