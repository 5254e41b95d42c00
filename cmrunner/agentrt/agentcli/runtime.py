"""``AgentCliRuntime``: one Memory Agent attempt run by an agent CLI the user already has.

Contract (``interface.MemoryAgentPort``; the Writer's commit path is the HTTP runtime's, unchanged):
- ``decide(task, tools, meter)`` first applies the HTTP runtime's pre-send checks: every source and
  snapshot document passes the scanner (``SENSITIVE_CONTENT_REJECTED``, nothing started), the spend
  caps (``SPEND_CAP_REACHED``). Then it makes a private directory (0700) holding an empty working
  directory for the CLI, the CLI's config files and a Unix socket, and starts the CLI
  (``hosts.spec``) in a new process group with the task (without its decision schema) on stdin,
  cm's system prompt, the user's environment plus ``COMMON_MEMORY_AGENT_SESSION=1`` (every cm hook
  checks it first and does nothing) and the CLI's host switches; cm's private ``.env`` is never
  read or passed, nor are the CLI's credentials touched.
- The CLI starts ``cm memory-agent-mcp`` (``relay``), which forwards every ``tools/list`` and
  ``tools/call`` here after presenting the attempt's random token; this loop answers with the job's
  tools the Writer handed in (``interface.JobTools``: the same handlers, schemas, validation,
  coverage, fencing and rejections as the HTTP runtime's), and each result passes the scanner before it leaves
  (``SENSITIVE_CONTENT_REJECTED``, the CLI is killed). The lease is checked at every call and
  every ``LEASE_POLL`` seconds; a lost lease kills the CLI (``STALE_LEASE``).
- Once the submission is accepted, and before the CLI hears so, the attempt creates the file
  ``hosts.Attempt.accepted`` in its private directory: a CLI that can end its run after a tool
  call (Claude Code's stop hook) ends there instead of spending a closing model turn. A CLI that
  goes on anyway gets ``AFTER_SUBMIT`` seconds for it.
- The verdict is the submission the tool service received, never the CLI's exit status or prose:
  an accepted submission is success; otherwise a CLI not found is ``AGENT_CLI_NOT_FOUND``, output
  naming a login problem ``AGENT_CLI_AUTH``, a usage limit ``AGENT_CLI_QUOTA`` and an unreachable
  model ``UNAVAILABLE`` (``hosts.classify``; the text is never kept), anything else ``MISSING_SUBMISSION``. The rejection limits are the HTTP
  runtime's (``MAX_REJECTED_SUBMISSIONS``, ``MAX_REJECTIONS``), and more tool calls than
  ``maxAgentTurns`` × ``CALLS_PER_TURN`` is ``AGENT_TURN_LIMIT``.
- Bounds: the whole attempt's deadline (``remote.deadlineMs``, default ``DEFAULT_DEADLINE_MS``:
  ``TIMEOUT``); the bytes served per attempt (``budget.attempt_bytes``: ``ATTEMPT_BUDGET_EXHAUSTED``);
  the CLI's output (``OUTPUT_LIMIT`` on stdout, stderr kept to ``ERROR_KEPT`` and counted):
  excess is ``INVALID_RESPONSE``/``body_too_large``. On every way out the CLI's whole process
  group gets SIGTERM, then SIGKILL after ``KILL_GRACE`` seconds, and the private directory is
  removed; if the drain itself dies, the kernel kills the CLI (``PR_SET_PDEATHSIG``). A running
  job cannot be cancelled (``cm cancel`` says ``JOB_COMMITTING``); what ends it early is its lease.
- Ledger: one row per attempt (``Meter.record_run``) with the tokens the CLI's JSON output reports
  (source ``provider``), else an estimate from the bytes exchanged, marked as one.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from cmrunner.agentrt import agent as http_agent, budget as budget_mod, errors_map, limits
from cmrunner.agentrt.agentcli import hosts, relay
from cmrunner.agentrt.interface import SUBMIT, TOOL_NAMES, AgentError, AgentResult, JobTools
from cmrunner.agentrt.meter import Meter
from cmrunner.core import config as config_mod, configdefs, spend
from cmrunner.core.errors import CmError
from cmrunner.secrets import safety

DEFAULT_DEADLINE_MS = 300_000  # a CLI spends seconds starting before its first request
DEFAULT_MAX_TURNS = 64
CALLS_PER_TURN = 4
LEASE_POLL = 2.0
KILL_GRACE = 2.0
AFTER_SUBMIT = 30.0  # the CLI's closing turn after an accepted submission (its usage comes with it)
OUTPUT_LIMIT = 4 << 20
ERROR_KEPT = 64 << 10
ERROR_LIMIT = 16 << 20
LINE_LIMIT = limits.TOOL_ARGUMENTS_LIMIT + (64 << 10)


def _failure(code: str, reason: str, retryable: bool) -> AgentError:
    return errors_map.failure(code, "agent_cli", reason, retryable)


class _Fatal(Exception):
    """Ends the attempt's loop with ``error`` after the CLI is stopped."""

    def __init__(self, error: CmError) -> None:
        super().__init__(error.code)
        self.error = error


class _Service:
    """The tool service of one attempt: the Toolbox, the rejection limits, the byte budget."""

    def __init__(self, box: JobTools, max_calls: int, byte_budget: int) -> None:
        self.box = box
        self.tools = [{"name": d["name"], "description": d["description"], "inputSchema": d["parameters"]}
                      for d in box.definitions()]
        self.max_calls, self.byte_budget = max_calls, byte_budget
        self.calls = self.rejections = self.rejected_submissions = 0
        self.served = 0
        self.received = 0
        self.last_rejection: dict | None = None
        self.accepted_marker = ""  # created once the submission is accepted (hosts.Attempt.accepted)

    def answer(self, request: dict) -> dict:
        if request.get("op") == "list":
            return {"tools": self.tools}
        name, raw = request.get("name"), request.get("arguments")
        name = name if isinstance(name, str) else ""
        raw = raw if isinstance(raw, str) else "{}"
        self.received += len(raw.encode("utf-8")) + len(name)
        self.calls += 1
        if self.calls > self.max_calls:
            raise _Fatal(errors_map.failure("AGENT_TURN_LIMIT", "model_output", "agent_turn_limit", False))
        if name.startswith(f"mcp__{hosts.SERVER}__"):
            name = name[len(f"mcp__{hosts.SERVER}__"):]
        try:
            outcome = self.box.call(name, raw)
        except CmError as exc:
            if exc.code == "SENSITIVE_CONTENT_REJECTED":
                raise _Fatal(errors_map.failure(exc.code, "core_validation", "core_rejected", False)) from None
            raise _Fatal(exc) from None
        if outcome.rejected:
            self.rejections += 1
            self.rejected_submissions += name == SUBMIT
            self.last_rejection = outcome.record
        if safety.scan_value(outcome.result):
            raise _Fatal(errors_map.failure("SENSITIVE_CONTENT_REJECTED", "request", "sensitive_content", False))
        if outcome.submitted and self.accepted_marker:
            hosts._write_private(self.accepted_marker, "")  # before the CLI hears of it (its stop hook reads it)
        text = json.dumps(outcome.result, ensure_ascii=False, separators=(",", ":"))
        self.served += len(text.encode("utf-8"))
        if self.served > self.byte_budget:
            raise _Fatal(errors_map.failure("ATTEMPT_BUDGET_EXHAUSTED", "request", "attempt_budget", False))
        if not self.box.submitted and (self.rejected_submissions >= http_agent.MAX_REJECTED_SUBMISSIONS
                                       or self.rejections > http_agent.MAX_REJECTIONS):
            code = (self.last_rejection or {}).get("code") or "INVALID_RESPONSE"
            reason = "tool_call" if code in ("UNKNOWN_TOOL", "TOOL_ARGUMENTS_INVALID") else "core_rejected"
            raise _Fatal(errors_map.failure(code, "core_validation", reason, True))
        return {"text": text, "isError": outcome.rejected}


class _Output:
    """A CLI output stream read with a cap: ``keep`` bytes kept, ``limit`` bytes allowed in all."""

    def __init__(self, keep: int, limit: int) -> None:
        self.keep, self.limit = keep, limit
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.total > self.limit:
            raise _Fatal(errors_map.failure("INVALID_RESPONSE", "response_body", "body_too_large", True))
        room = self.keep - len(self.data)
        if room > 0:
            self.data += chunk[:room]


def relay_command() -> list[str]:
    """How the CLI starts ``cm memory-agent-mcp``: this interpreter and cm's own entry, so the
    relay is the installed cm even when ``cm`` is not on the CLI's PATH."""
    return [sys.executable, "-I", "-c", "import sys; from cmrunner.entry import main; "
            "sys.argv[0] = 'cm'; main()", "memory-agent-mcp"]


class AgentCliRuntime:
    """The Memory Agent run by ``remote.agent`` (see module contract)."""

    def __init__(self, remote: dict) -> None:
        self.remote = dict(remote)
        self.spec = hosts.spec(remote["agent"])
        self.prompt = http_agent.system_prompt()
        self.prompt_digest = hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()
        self.max_turns = int(remote.get("maxAgentTurns") or DEFAULT_MAX_TURNS)
        self.deadline_ms = int(remote.get("deadlineMs") or DEFAULT_DEADLINE_MS)
        self.max_request_bytes = int(remote.get("maxRequestBytes") or configdefs.DEFAULT_MAX_REQUEST_BYTES)

    @classmethod
    def from_config(cls, cfg: config_mod.Config) -> AgentCliRuntime | None:
        remote = cfg.remote
        if not remote or remote.get("provider") != "agent-cli":
            return None
        return cls(remote)

    def close(self) -> None:
        """Nothing outlives an attempt."""

    def binary(self) -> str | None:
        """The CLI's executable: ``remote.agentPath``, else found on PATH; ``None`` when missing."""
        path = self.remote.get("agentPath")
        if path:
            return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
        return shutil.which(self.spec.executable)

    def decide(self, task: dict, tools: JobTools, meter: Meter) -> AgentResult:
        http_agent.NetworkAgent._preflight(tools)
        if meter.blocked() is not None:
            raise errors_map.failure(spend.CODE, "request", "spend_cap_reached", True)
        binary = self.binary()
        if binary is None:
            raise _failure("AGENT_CLI_NOT_FOUND", "agent_cli_not_found", False)
        visible = {k: v for k, v in task.items() if k != "decision_schema"}
        prompt = json.dumps(visible, ensure_ascii=False, separators=(",", ":"))
        if safety.scan_text(prompt):
            raise errors_map.failure("SENSITIVE_CONTENT_REJECTED", "request", "sensitive_content", False)
        service = _Service(tools, self.max_turns * CALLS_PER_TURN,
                           budget_mod.attempt_bytes(self.max_request_bytes))
        private = tempfile.mkdtemp(prefix="cm-agent-")  # 0700
        started = meter.start()
        stdout = _Output(OUTPUT_LIMIT, OUTPUT_LIMIT)
        stderr = _Output(ERROR_KEPT, ERROR_LIMIT)
        outcome = "ok"
        try:
            try:
                self._run(binary, private, prompt, service, stdout, stderr)
            except _Fatal as fatal:
                outcome = fatal.error.code
                raise self._with_cause(fatal.error, service) from None
            if service.box.submitted:
                return AgentResult(self._record(meter, started, prompt, service, stdout, "ok"), self.prompt_digest,
                                   max(1, self._turns(stdout)), service.calls)
            code = hosts.classify((bytes(stdout.data) + b"\n" + bytes(stderr.data)).decode("utf-8", "replace"))
            if code == "AGENT_CLI_AUTH":
                error = _failure(code, "agent_cli_auth", False)
            elif code == "AGENT_CLI_QUOTA":
                error = _failure(code, "agent_cli_quota", True)
            elif code == "UNAVAILABLE":
                error = _failure(code, "agent_cli_unreachable", True)
            else:
                error = errors_map.failure("MISSING_SUBMISSION", "model_output", "incomplete_output", True)
            outcome = error.code
            raise self._with_cause(error, service)
        finally:
            if outcome != "ok":
                self._record(meter, started, prompt, service, stdout, outcome)
            shutil.rmtree(private, ignore_errors=True)

    @staticmethod
    def _with_cause(error: CmError, service: _Service) -> CmError:
        if isinstance(error, AgentError) and error.rejection is None:
            error.rejection = service.last_rejection
        return error

    def _turns(self, stdout: _Output) -> int:
        return self.spec.turns(bytes(stdout.data))

    def _record(self, meter: Meter, started: tuple[int, float], prompt: str, service: _Service, stdout: _Output,
                outcome: str) -> dict[str, int]:
        usage, _cost = self.spec.usage(bytes(stdout.data))
        sent = len(prompt.encode("utf-8")) + len(self.prompt.encode("utf-8")) + service.served
        return meter.record_run(max(1, self._turns(stdout)), started, sent, service.received + stdout.total, usage,
                                outcome)

    # -- the process and its tool service ------------------------------------------------------------
    def _run(self, binary: str, private: str, prompt: str, service: _Service, stdout: _Output,
             stderr: _Output) -> int | None:
        """Run the confined CLI to its end (or a ``_Fatal``); its exit status, ``None`` if killed."""
        workdir = os.path.join(private, "work")
        os.mkdir(workdir, 0o700)
        sock_path = os.path.join(private, "s")
        token = secrets.token_hex(16)
        attempt = hosts.Attempt(binary, private, workdir, relay_command(),
                                {relay.SOCKET_ENV: sock_path, relay.TOKEN_ENV: token}, self.prompt, prompt,
                                self.remote.get("model"), self.max_turns, TOOL_NAMES, os.path.join(private, "accepted"))
        service.accepted_marker = attempt.accepted
        self.spec.prepare(attempt)
        task_path = os.path.join(private, "task.json")
        hosts._write_private(task_path, prompt)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(sock_path)
        listener.listen(4)
        env = dict(os.environ)
        env.pop("COMMON_MEMORY_HOST_INSTANCE", None)
        env.update(self.spec.env)
        env.update(self.spec.environment(attempt))
        env[configdefs.MEMORY_AGENT_MARKER] = "1"
        with open(task_path if self.spec.prompt_on_stdin else os.devnull, "rb") as task_in:
            try:
                process = subprocess.Popen(self.spec.argv(attempt), cwd=workdir, env=env, stdin=task_in,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                           preexec_fn=_die_with_parent)
            except OSError:
                listener.close()
                raise _Fatal(_failure("AGENT_CLI_NOT_FOUND", "agent_cli_not_found", False)) from None
        try:
            self._serve(process, listener, token, service, stdout, stderr)
            status = process.returncode
        finally:
            _kill_group(process)
            listener.close()
        return status

    def _serve(self, process: subprocess.Popen, listener: socket.socket, token: str, service: _Service,
               stdout: _Output, stderr: _Output) -> None:
        deadline = time.monotonic() + self.deadline_ms / 1000
        selector = selectors.DefaultSelector()
        assert process.stdout is not None and process.stderr is not None
        selector.register(process.stdout, selectors.EVENT_READ, ("out", stdout))
        selector.register(process.stderr, selectors.EVENT_READ, ("out", stderr))
        selector.register(listener, selectors.EVENT_READ, ("listen", None))
        open_pipes = 2
        conns: dict[socket.socket, dict] = {}
        next_poll = time.monotonic() + LEASE_POLL
        submitted_at: float | None = None
        try:
            while open_pipes or process.poll() is None:
                now = time.monotonic()
                if now >= deadline:
                    raise _Fatal(errors_map.failure("TIMEOUT", "agent_cli", "timeout", True))
                if submitted_at is not None and now - submitted_at > AFTER_SUBMIT:
                    return  # the decision is in; the CLI's closing turn is not worth waiting for
                if now >= next_poll and submitted_at is None:
                    self._lease(service.box)
                    next_poll = now + LEASE_POLL
                for key, _mask in selector.select(timeout=min(LEASE_POLL, max(0.01, deadline - now))):
                    kind, state = key.data
                    if kind == "out":
                        chunk = os.read(key.fd, 1 << 16)
                        if not chunk:
                            selector.unregister(key.fileobj)
                            open_pipes -= 1
                        else:
                            state.add(chunk)
                    elif kind == "listen":
                        conn, _ = listener.accept()
                        conn.setblocking(False)
                        conns[conn] = {"buffer": b"", "trusted": False}
                        selector.register(conn, selectors.EVENT_READ, ("conn", conn))
                    else:
                        if not self._read_conn(state, conns, selector, token, service):
                            continue
                        if service.box.submitted and submitted_at is None:
                            submitted_at = time.monotonic()
                if open_pipes == 0 and process.poll() is None:
                    try:
                        process.wait(timeout=max(0.01, min(0.2, deadline - time.monotonic())))
                    except subprocess.TimeoutExpired:
                        pass
        finally:
            for conn in conns:
                conn.close()
            selector.close()

    @staticmethod
    def _lease(box: JobTools) -> None:
        try:
            box.check_lease()
        except CmError as exc:
            raise _Fatal(exc) from None

    @staticmethod
    def _read_conn(conn: socket.socket, conns: dict, selector: selectors.BaseSelector, token: str,
                   service: _Service) -> bool:
        state = conns[conn]
        try:
            chunk = conn.recv(1 << 16)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            selector.unregister(conn)
            conn.close()
            del conns[conn]
            return False
        state["buffer"] += chunk
        if len(state["buffer"]) > LINE_LIMIT and b"\n" not in state["buffer"]:
            raise _Fatal(errors_map.failure("INVALID_RESPONSE", "response_body", "body_too_large", True))
        while b"\n" in state["buffer"]:
            line, _, state["buffer"] = state["buffer"].partition(b"\n")
            try:
                request = json.loads(line)
            except ValueError:
                request = None
            if not isinstance(request, dict):
                raise _Fatal(errors_map.failure("INVALID_RESPONSE", "response_envelope", "invalid_envelope", True))
            if not state["trusted"]:
                if not secrets.compare_digest(str(request.get("token", "")), token):
                    selector.unregister(conn)
                    conn.close()
                    del conns[conn]
                    return False
                state["trusted"] = True
                continue
            answer = service.answer(request)
            conn.setblocking(True)
            try:
                conn.sendall(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
            except OSError:
                pass
            finally:
                conn.setblocking(False)
        return True


def _die_with_parent() -> None:
    """In the CLI's child before exec (Linux): SIGKILL it if the drain dies first, so a drain killed
    mid-attempt leaves no CLI calling its model (the relay then ends with its stdin)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_group(process: subprocess.Popen) -> None:
    """SIGTERM to the CLI's whole process group, SIGKILL after the grace; always reaped."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=wait)
            # The group may still hold the relay or other children after the leader exits.
            if sig == signal.SIGTERM:
                continue
            return
        except subprocess.TimeoutExpired:
            continue
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
