"""The bounds on what a provider may send to one Memory Agent attempt, in one place.

Every byte a provider sends is counted against these caps while it arrives, so the Writer's
memory stays bounded whatever the provider does before the attempt's deadline. Exceeding one
ends the attempt with ``INVALID_RESPONSE`` (stage ``response_body``, reason ``body_too_large``,
retryable): the job goes to ``retry`` with its backoff, or ``dead`` once its recovery budget is
spent, like every other retryable provider failure.

- ``EVENT_BYTE_LIMIT`` (1 MiB): one SSE event as received, including an unfinished line.
- ``RESPONSE_BYTE_LIMIT`` (16 MiB): one response stream's decoded body.
- ``ATTEMPT_BYTE_LIMIT`` (64 MiB): all response streams of one attempt together.
- ``TURN_KEPT_CHARS`` (1 Mi characters): what one response leaves in memory after decoding:
  assistant text, refusal text, tool-call ids, names and arguments together.
- ``TOOL_ARGUMENTS_LIMIT`` (4 MiB): one tool call's arguments in UTF-8 bytes (the turn already
  capped the characters); the Writer's tool handlers refuse more, an agent CLI's relay line holds it.
- ``MAX_CALLS_PER_TURN`` (64): tool calls one response may open.
- ``ERROR_BODY_LIMIT`` (16 KiB, read for at most 2 s): an HTTP error body; it is only a hint
  and is dropped after its ``error.code`` was looked at.
- ``JSON_MAX_DEPTH`` (64): nesting of every JSON text parsed from a provider (SSE events, tool
  arguments, error bodies, the model list; see ``boundedjson``). Deeper is ``INVALID_RESPONSE`` /
  ``json_too_deep`` for an event, a rejected tool call (``TOOL_ARGUMENTS_INVALID``, rule
  ``maxDepth``) for arguments, no hint for an error body (its status decides) and
  ``MODEL_LIST_INVALID`` for a model list.
- ``RETRY_AFTER_CAP_MS`` (600 s, the backoff ceiling): the longest ``Retry-After`` of a 429 or
  503 answer that is honoured; a longer one waits this long.
"""

from __future__ import annotations

from cmrunner.agentrt.boundedjson import MAX_DEPTH as JSON_MAX_DEPTH

EVENT_BYTE_LIMIT = 1 << 20
RESPONSE_BYTE_LIMIT = 16 << 20
ATTEMPT_BYTE_LIMIT = 64 << 20
TURN_KEPT_CHARS = 1 << 20
TOOL_ARGUMENTS_LIMIT = 4 * TURN_KEPT_CHARS
MAX_CALLS_PER_TURN = 64
ERROR_BODY_LIMIT = 16 * 1024
ERROR_BODY_SECONDS = 2.0
RETRY_AFTER_CAP_MS = 600_000

__all__ = ["ATTEMPT_BYTE_LIMIT", "ERROR_BODY_LIMIT", "ERROR_BODY_SECONDS", "EVENT_BYTE_LIMIT", "JSON_MAX_DEPTH",
           "MAX_CALLS_PER_TURN", "RESPONSE_BYTE_LIMIT", "RETRY_AFTER_CAP_MS", "TOOL_ARGUMENTS_LIMIT", "TURN_KEPT_CHARS"]
