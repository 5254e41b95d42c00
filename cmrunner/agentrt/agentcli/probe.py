"""``cm network-test`` / ``cm doctor --probe-model`` on an agent-CLI runtime: one confined run.

Contract:
- ``run(cfg)`` runs the configured CLI once, headless, through exactly the Memory Agent's
  confinement (``AgentCliRuntime._run``: the same command line, private directory, empty working
  directory, environment marker, relay and process-group handling), with a fixed one-line
  synthetic task and system prompt: no memory, no user text, no tool offered by the relay. It
  returns ``{runtime, agent, model, binary, version, outcome}``: ``binary`` is the executable's
  path, ``version`` the version the CLI reports (``--version``, only its version number is kept),
  ``outcome`` is ``{ok: true, elapsedMs, usage}`` or ``{ok: false, code, stage, reason,
  retryable, remedy}``.
- The verdict: ``AGENT_CLI_NOT_FOUND`` (no executable, or it cannot start); ``ok`` when the CLI
  ended with status 0 and its JSON output reports a model answer (usage) without an error
  flag; otherwise the output is matched (``hosts.classify``: ``AGENT_CLI_AUTH``,
  ``AGENT_CLI_QUOTA``, ``UNAVAILABLE``), else ``INVALID_RESPONSE`` (the CLI answered nothing cm
  recognises); a run past ``PROBE_DEADLINE_MS`` is ``TIMEOUT``. The CLI's output is matched and
  counted, never returned, printed or logged.
- The run goes into the usage ledger (``Meter.record_run``, process ``network_test``) with the
  tokens the CLI reported, like every model request; the spend caps do not apply to the probe.
  ``record=False`` (`cm config init --agent`'s check, which runs before any configuration or store
  exists, as the HTTP endpoint check does) opens no store and records nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from cmrunner.agentrt import errors_map
from cmrunner.agentrt.agentcli import hosts, runtime as runtime_mod
from cmrunner.agentrt.meter import Grant, Meter
from cmrunner.core import config as config_mod, configdefs, ledger, reasons, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

PROBE_SYSTEM = "This is a connectivity test from cm. Answer with one word. Call no tool."
PROBE_TASK = "Reply with the word OK."
PROBE_DEADLINE_MS = 120_000
VERSION_SECONDS = 20.0
PROBE_GRANT = Grant((), ())  # the probe carries no memory and no user text
_VERSION = re.compile(rb"\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.]{1,24})?")


class _NoTools:
    """The probe holds no job: nothing is ever submitted, and no lease can be taken away from it."""

    submitted = False

    def check_lease(self) -> None:
        return None


class _ProbeService:
    """The relay's answers during a probe: no tool at all; any call is refused, nothing runs."""

    def __init__(self) -> None:
        self.box = _NoTools()
        self.calls = self.served = self.received = 0
        self.last_rejection = None

    def answer(self, request: dict) -> dict:
        if request.get("op") == "list":
            return {"tools": []}
        self.calls += 1
        text = json.dumps({"error": {"code": "UNKNOWN_TOOL", "message": "the connectivity test offers no tool"}})
        return {"text": text, "isError": True}


def version(binary: str) -> str | None:
    """The version number ``binary --version`` prints (nothing else of its output), or ``None``."""
    env = dict(os.environ, **{configdefs.MEMORY_AGENT_MARKER: "1"})
    with tempfile.TemporaryDirectory(prefix="cm-agent-") as cwd:
        try:
            process = subprocess.Popen([binary, "--version"], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            return None
        try:
            out, _ = process.communicate(timeout=VERSION_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # nothing the CLI started outlives the question
            except (ProcessLookupError, PermissionError):
                pass
    found = _VERSION.search(out[:4096])
    return found.group(0).decode("ascii") if found and process.returncode == 0 else None


def _answered(spec: hosts.CliSpec, stdout: bytes) -> dict | None:
    """The usage of a model answer the CLI's JSON output reports, unless it flags an error."""
    whole = hosts._whole_json(stdout)
    if any(d.get("is_error") is True or d.get("type") in ("error", "turn.failed") or d.get("error")
           for d in hosts._json_lines(whole)):
        return None
    usage, _cost = spec.usage(stdout)
    return usage


def _verdict(spec: hosts.CliSpec, status: int | None, stdout: bytes, stderr: bytes) -> CmError | dict:
    usage = _answered(spec, stdout)
    if status == 0 and usage is not None:
        return usage
    code = hosts.classify((stdout + b"\n" + stderr).decode("utf-8", "replace"))
    if code == "AGENT_CLI_AUTH":
        return errors_map.failure(code, "agent_cli", "agent_cli_auth", False)
    if code == "AGENT_CLI_QUOTA":
        return errors_map.failure(code, "agent_cli", "agent_cli_quota", True)
    if code == "UNAVAILABLE":
        return errors_map.failure(code, "agent_cli", "agent_cli_unreachable", True)
    return errors_map.failure("INVALID_RESPONSE", "model_output", "incomplete_output", True)


def _remedy(code: str) -> str:
    entry = reasons.explain(code)
    return "" if entry.action == reasons.AUTO else entry.fix


def run(cfg: config_mod.Config, record: bool = True) -> dict:
    remote = cfg.remote
    assert remote is not None and config_mod.is_agent_cli(remote)
    runtime = runtime_mod.AgentCliRuntime(remote)
    runtime.prompt = PROBE_SYSTEM
    runtime.deadline_ms = PROBE_DEADLINE_MS
    runtime.max_turns = 2
    binary = runtime.binary()
    report: dict = {"runtime": "agent-cli", "agent": remote["agent"], "model": remote.get("model") or "default",
                    "binary": binary or remote.get("agentPath") or runtime.spec.executable, "version": None}
    if binary is None:
        error = errors_map.failure("AGENT_CLI_NOT_FOUND", "agent_cli", "agent_cli_not_found", False)
        report["outcome"] = {"ok": False, "code": error.code, **error.diagnostic, "remedy": _remedy(error.code)}
        return report
    report["version"] = version(binary)
    conn = store.open_store(DataPaths(cfg.data_root)) if record else None
    meter = Meter.unmetered(conn, ledger.NETWORK_TEST, remote, PROBE_GRANT) if conn is not None else None
    service = _ProbeService()
    stdout = runtime_mod._Output(runtime_mod.OUTPUT_LIMIT, runtime_mod.OUTPUT_LIMIT)
    stderr = runtime_mod._Output(runtime_mod.ERROR_KEPT, runtime_mod.ERROR_LIMIT)
    private = tempfile.mkdtemp(prefix="cm-agent-")  # 0700
    started = meter.start() if meter is not None else (0, time.monotonic())
    outcome_code = "ok"
    try:
        try:
            status = runtime._run(binary, private, PROBE_TASK, service, stdout, stderr)  # type: ignore[arg-type]
            verdict = _verdict(runtime.spec, status, bytes(stdout.data), bytes(stderr.data))
        except runtime_mod._Fatal as fatal:
            verdict = fatal.error
        if isinstance(verdict, CmError):
            outcome_code = verdict.code
            diagnostic = getattr(verdict, "diagnostic", None) or {}
            report["outcome"] = {"ok": False, "code": verdict.code, **diagnostic, "remedy": _remedy(verdict.code)}
        else:
            report["outcome"] = {"ok": True, "elapsedMs": int((time.monotonic() - started[1]) * 1000),
                                 "usage": verdict}
    finally:
        shutil.rmtree(private, ignore_errors=True)
        if meter is not None and conn is not None:
            sent = len(PROBE_TASK) + len(PROBE_SYSTEM)
            meter.record_run(max(1, runtime.spec.turns(bytes(stdout.data))), started, sent, stdout.total,
                             runtime.spec.usage(bytes(stdout.data))[0], outcome_code)
            conn.close()
    return report
