"""Request budgets: what one Memory Agent request and one attempt may send, and how much source
text one job may carry, so that the cost of work grows linearly with its size.

Why: the agent re-sends its whole conversation with every request (the providers keep no state:
``store: false``), so a job's cost grows with the square of what it reads. Bounding what one job
reads bounds every request and every attempt; larger input becomes more jobs, never larger ones.

Contract:
- ``Config.max_request_bytes`` (``remote.maxRequestBytes``, default
  ``configdefs.DEFAULT_MAX_REQUEST_BYTES``): no serialized request is larger; the agent checks
  each before sending (``REQUEST_TOO_LARGE``, nothing sent, not retryable).
- Per attempt: at most ``remote.maxAgentTurns`` requests (``AGENT_TURN_LIMIT``) and at most
  ``attempt_bytes(max_request)`` = ``ATTEMPT_REQUESTS_OF_MAX`` full-size requests' worth of bytes
  (``ATTEMPT_BUDGET_EXHAUSTED``, checked before the request that would pass it; not retryable).
- ``wire_bytes(text)`` is what a text costs once read into a request: JSON-escaped twice (a tool
  result is a JSON string inside the JSON body) plus ``BLOCK_FRAMING`` for its descriptor.
- ``source_limit(max_request, snapshot)``: what the sources of one request may take at most: the
  request budget minus ``REQUEST_RESERVE`` (instructions, tools, task and a submission's framing,
  measured at about 10 KB) minus the memory documents twice (read, and written back by a decision),
  but never less than ``SOURCE_SHARE_MIN`` of what ``REQUEST_RESERVE`` leaves (a quarter: 4 KiB
  at the smallest ``maxRequestBytes``, 61 KiB at the default). Why the floor: the documents are
  not the source's doing, and a limit they pushed to zero or below would set every new turn aside
  as too large, forever (no job could commit to shrink them). Past the floor the agent's own check
  still holds each request to ``maxRequestBytes`` (``REQUEST_TOO_LARGE``, nothing sent, its cause
  in ``cm status``). A single source or turn above the limit can never be sent: ``SOURCE_TOO_LARGE``.
- ``job_limit(...)``: a job holds more than one source or turn only while all of them fit
  ``min(JOB_SOURCE_BYTES, source_limit)``: one bulk read page, so no read text is re-sent by more
  than the few requests that follow it.
Stdlib only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

REQUEST_RESERVE = 16_384
JOB_SOURCE_BYTES = 65_536
ATTEMPT_REQUESTS_OF_MAX = 16
BLOCK_FRAMING = 256
SOURCE_SHARE_MIN = 4  # sources keep at least 1/SOURCE_SHARE_MIN of the budget past the reserve


def escaped_bytes(text: str) -> int:
    """Bytes ``text`` takes inside a request body once read through a tool, without framing."""
    inner = json.dumps(text, ensure_ascii=False)
    return len(json.dumps(inner, ensure_ascii=False).encode("utf-8")) - 4  # less the two pairs of quotes


def wire_bytes(text: str) -> int:
    """Bytes ``text`` takes inside a request body once read through a tool (see contract)."""
    return escaped_bytes(text) + BLOCK_FRAMING


def attempt_bytes(max_request: int) -> int:
    return ATTEMPT_REQUESTS_OF_MAX * max_request


def source_limit(max_request: int, snapshot_texts: Iterable[str]) -> int:
    """The most source wire bytes one request can carry beside its fixed text and the documents."""
    documents = sum(wire_bytes(text) for text in snapshot_texts)
    room = max_request - REQUEST_RESERVE
    return max(room - 2 * documents, room // SOURCE_SHARE_MIN)


def job_limit(max_request: int, snapshot_texts: Iterable[str]) -> int:
    """Source wire bytes above which a job takes no further source or turn."""
    return min(JOB_SOURCE_BYTES, source_limit(max_request, snapshot_texts))
