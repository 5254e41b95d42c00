"""The network Memory Agent: one fresh tool loop per attempt over Responses or Chat Completions.

Contract (``interface.MemoryAgentPort``):
- ``decide(task, tools, meter)`` starts a new conversation every attempt: the system prompt
  (``memory_agent.md``) and the task as the first user message, without its decision schema
  (that travels once, as the ``submit_memory_decision`` parameters) and never with source text
  or Markdown. The model reads through the job's tools (``interface.JobTools``, the Writer's
  ``Toolbox``); the first accepted
  submission ends the loop and returns ``AgentResult`` with summed token usage, turns, tool calls
  and the prompt digest (sha256 of the system prompt).
- Every request passes ``meter.blocked()`` (the spend caps: ``SPEND_CAP_REACHED``, nothing sent)
  after its own checks, and ``meter.record`` writes its ledger row when it ends, answered or
  failed; the usage summed for the receipt is what the meter recorded (the provider's counts, or
  an estimate when those are missing or impossible).
- Limits: ``remote.maxAgentTurns`` model requests (default 64, ``AGENT_TURN_LIMIT``); per request
  ``remote.maxRequestBytes`` serialized bytes (``REQUEST_TOO_LARGE``) and per attempt
  ``budget.attempt_bytes`` of them (``ATTEMPT_BUDGET_EXHAUSTED``), both checked before sending and
  not retryable (the same job would cost the same again; the Writer sized it to fit); the
  whole-attempt deadline ``remote.deadlineMs`` (default 60 s, ``TIMEOUT``/``timeout``); per request
  the client's 30 s header and 120 s no-progress timeouts; at most ``MAX_REJECTED_SUBMISSIONS``
  rejected submissions and ``MAX_REJECTIONS`` rejected tool calls of any kind per attempt (then the
  attempt fails, retryably, with the last rejection's code, stage ``core_validation``);
  what the provider sends is held to ``limits`` (per event, response, turn and attempt).
- Before the first request every source and every snapshot document passes the sensitive-content
  scanner (a hand-edited document holding a secret is never sent); before every request the
  serialized body is checked against ``disclosure.maxTotalBytes`` and every part of it passes the
  scanner (static parts once per attempt, history items as they are appended). Any failure sends
  nothing (``SENSITIVE_CONTENT_REJECTED``, stage ``request``, not retryable).
- Outcomes without a submission: a refusal is ``MODEL_REFUSAL``; output cut by the token limit is
  ``INVALID_RESPONSE``/``output_truncated``; a prose-only reply gets one recovery prompt, then
  ``MISSING_SUBMISSION``. A submission whose result fails the sensitive-content check ends the
  attempt (not recoverable in-agent). A lost lease propagates as ``STALE_LEASE``.
- A failed attempt's ``AgentError`` carries ``rejection``: the record of the last tool rejection
  the model received in it (``ToolOutcome.record``: codes, rule, document, section, no text),
  or ``None``; the job keeps it as the real cause (``jobs.fail``).
- The network client is built at the first request and reused by later attempts of this agent.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from importlib import resources

from cmrunner.agentrt import budget as budget_mod, errors_map, wire
from cmrunner.agentrt.interface import SUBMIT, AgentError, AgentResult, JobTools, ToolOutcome
from cmrunner.agentrt.meter import INTERNAL_OUTCOME, Meter
from cmrunner.agentrt.netclient import (
    HEADER_TIMEOUT,
    IDLE_TIMEOUT,
    ByteBudget,
    Exchange,
    ModelClient,
    NetworkInputs,
    deadline_failure,
)
from cmrunner.core import config as config_mod, envfile, spend
from cmrunner.core.configdefs import DEFAULT_MAX_REQUEST_BYTES
from cmrunner.core.errors import CmError
from cmrunner.secrets import safety

DEFAULT_MAX_TURNS = 64
DEFAULT_DEADLINE_MS = 60_000
MAX_REJECTIONS = 16
# A model told three times, by code and JSON path, why its decision was refused and still failing
# is not converging: the third rejected submission ends the attempt. Two leave room for the usual
# corrections (a read it skipped, then one schema slip); measured: a model that kept submitting
# invalid decisions made about 14 rejected submissions per attempt before this limit (issue 24).
MAX_REJECTED_SUBMISSIONS = 3
MAX_NUDGES = 1
NUDGE = json.dumps({
    "memory_recovery": {"code": "MISSING_SUBMISSION", "stage": "model_output", "reason": "incomplete_output"},
    "instruction": "A text reply is not a decision. Read whatever is still unread with the tools, then call "
                   "submit_memory_decision.",
})


def system_prompt() -> str:
    return resources.files("cmrunner.agentrt").joinpath("memory_agent.md").read_text(encoding="utf-8")


def serialize(body: dict) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def send(client: ModelClient, conv: wire.Conversation, body: bytes, deadline: float, meter: Meter, turn: int,
         budget: ByteBudget | None = None, tally: Callable[[dict[str, int]], None] = lambda _tokens: None) -> wire.Turn:
    """Send one serialized request and decode its answer; whatever happens, ``meter`` records it
    (one ledger row) and ``tally`` receives the tokens recorded. Failures propagate unchanged."""
    exchange = Exchange()
    started = meter.start()
    try:
        with client.stream(conv.path, body, deadline, budget, exchange) as events:
            answer = conv.decode(events)
    except BaseException as exc:
        tally(meter.record(turn, started, body, exchange, None, b"", exc.code if isinstance(exc, CmError)
                           else INTERNAL_OUTCOME))
        raise
    tally(meter.record(turn, started, body, exchange, answer.usage, answer.output_bytes(), "ok"))
    return answer


class _Attempt:
    """Per-attempt counters and the scanner's progress through the history."""

    def __init__(self) -> None:
        self.usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "cached_input_tokens": 0,
                      "reasoning_tokens": 0}
        self.turns = 0
        self.tool_calls = 0
        self.rejections = 0
        self.rejected_submissions = 0
        self.nudges = 0
        self.last_rejection: dict | None = None  # ``ToolOutcome.record`` of the last rejection
        self.static_clean = False
        self.scanned = 0
        self.sent = 0  # request bytes of this attempt so far (budget.attempt_bytes)

    def add_usage(self, usage: dict[str, int]) -> None:
        for key, value in usage.items():
            self.usage[key] = self.usage.get(key, 0) + value
        self.usage["total_tokens"] = self.usage["input_tokens"] + self.usage["output_tokens"]


class NetworkAgent:
    """The Memory Agent of one configured model (see module contract)."""

    def __init__(self, remote: dict, api_key: str, disclosure: dict, inputs: NetworkInputs,
                 header_timeout: float = HEADER_TIMEOUT, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.remote = dict(remote)
        self.disclosure = dict(disclosure)
        self.client = ModelClient(inputs, api_key, header_timeout, idle_timeout)
        self.prompt = system_prompt()
        self.prompt_digest = hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()
        self.max_turns = int(remote.get("maxAgentTurns") or DEFAULT_MAX_TURNS)
        self.deadline_ms = int(remote.get("deadlineMs") or DEFAULT_DEADLINE_MS)
        self.max_request_bytes = int(remote.get("maxRequestBytes") or DEFAULT_MAX_REQUEST_BYTES)

    @classmethod
    def from_config(cls, cfg: config_mod.Config, **timeouts: float) -> NetworkAgent | None:
        """The agent for ``cfg``, or ``None`` without a model or without its key in the private .env."""
        remote = cfg.remote
        if not remote:
            return None
        private = envfile.read(cfg.home)
        key = private.get(remote["apiKeyEnv"]) or None
        if key is None:
            return None
        return cls(remote, key, cfg.data["disclosure"], NetworkInputs.capture(remote, private, os.environ), **timeouts)

    def close(self) -> None:
        self.client.close()

    # -- one attempt ---------------------------------------------------------------------------
    def decide(self, task: dict, tools: JobTools, meter: Meter) -> AgentResult:
        attempt = _Attempt()
        try:
            return self._loop(task, tools, attempt, meter)
        except AgentError as exc:
            exc.usage = attempt.usage  # type: ignore[attr-defined]
            exc.rejection = attempt.last_rejection
            raise

    @staticmethod
    def _preflight(tools: JobTools) -> None:
        """Every source and snapshot document passes the scanner before anything is sent."""
        if any(safety.scan_text(text) for text in tools.outbound_texts()):
            raise errors_map.failure("SENSITIVE_CONTENT_REJECTED", "request", "sensitive_content", False)

    def _loop(self, task: dict, box: JobTools, attempt: _Attempt, meter: Meter) -> AgentResult:
        deadline = time.monotonic() + self.deadline_ms / 1000
        self._preflight(box)
        visible = {k: v for k, v in task.items() if k != "decision_schema"}
        conv = wire.conversation(self.remote, self.prompt, box.definitions(),
                                 json.dumps(visible, ensure_ascii=False, separators=(",", ":")))
        budget = ByteBudget()  # every response of this attempt draws on it (limits.ATTEMPT_BYTE_LIMIT)
        while True:
            if attempt.turns >= self.max_turns:
                raise errors_map.failure("AGENT_TURN_LIMIT", "model_output", "agent_turn_limit", False)
            if time.monotonic() >= deadline:
                raise deadline_failure()
            body = self._checked(conv, attempt)
            if meter.blocked() is not None:
                raise errors_map.failure(spend.CODE, "request", "spend_cap_reached", True)
            attempt.turns += 1
            turn = send(self.client, conv, body, deadline, meter, attempt.turns, budget, attempt.add_usage)
            if not turn.calls:
                if turn.refused:
                    raise errors_map.failure("MODEL_REFUSAL", "model_output", "refusal", False)
                if turn.truncated:
                    raise errors_map.failure("INVALID_RESPONSE", "model_output", "output_truncated", True)
                if attempt.nudges >= MAX_NUDGES:
                    raise errors_map.failure("MISSING_SUBMISSION", "model_output", "incomplete_output", True)
                attempt.nudges += 1
                conv.nudge(NUDGE)
                continue
            results = []
            for call in turn.calls:
                attempt.tool_calls += 1
                outcome = self._run_tool(box, call)
                if outcome.submitted:
                    return AgentResult(dict(attempt.usage), self.prompt_digest, attempt.turns, attempt.tool_calls)
                if outcome.rejected:
                    attempt.rejections += 1
                    attempt.rejected_submissions += call.name == SUBMIT
                    attempt.last_rejection = outcome.record
                results.append((call, outcome.result, outcome.rejected))
            conv.record(results)
            if attempt.rejected_submissions >= MAX_REJECTED_SUBMISSIONS or attempt.rejections > MAX_REJECTIONS:
                # The job's issue names the last rejection, which tells the user what kept failing.
                code = (attempt.last_rejection or {}).get("code") or "INVALID_RESPONSE"
                reason = "tool_call" if code in ("UNKNOWN_TOOL", "TOOL_ARGUMENTS_INVALID") else "core_rejected"
                raise errors_map.failure(code, "core_validation", reason, True)

    @staticmethod
    def _run_tool(box: JobTools, call: wire.ToolCall) -> ToolOutcome:
        try:
            return box.call(call.name, call.arguments)
        except CmError as exc:
            if exc.code == "SENSITIVE_CONTENT_REJECTED":
                raise errors_map.failure("SENSITIVE_CONTENT_REJECTED", "core_validation", "core_rejected",
                                         False) from None
            raise  # STALE_LEASE and other Writer-side failures keep their own meaning

    def _checked(self, conv: wire.Conversation, attempt: _Attempt) -> bytes:
        """Serialize the next request after the byte cap and the sensitive-content scan."""
        body = conv.body()
        data = serialize(body)
        cap = self.disclosure.get("maxTotalBytes")
        if cap is not None and len(data) > cap:
            raise errors_map.failure("SENSITIVE_CONTENT_REJECTED", "request", "body_too_large", False)
        if len(data) > self.max_request_bytes:
            raise errors_map.failure("REQUEST_TOO_LARGE", "request", "request_budget", False)
        if attempt.sent + len(data) > budget_mod.attempt_bytes(self.max_request_bytes):
            raise errors_map.failure("ATTEMPT_BUDGET_EXHAUSTED", "request", "attempt_budget", False)
        history = conv.history()
        if not attempt.static_clean:
            static = {k: v for k, v in body.items() if k not in ("input", "messages")}
            if safety.scan_value(static):
                raise errors_map.failure("SENSITIVE_CONTENT_REJECTED", "request", "sensitive_content", False)
            attempt.static_clean = True
        if safety.scan_value(history[attempt.scanned:]):
            raise errors_map.failure("SENSITIVE_CONTENT_REJECTED", "request", "sensitive_content", False)
        attempt.scanned = len(history)
        attempt.sent += len(data)
        return data
