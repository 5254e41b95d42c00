"""Request shaping: what one attempt may show the Memory Agent, decided before any network call.

Contract (inside the caller's transaction, with the job's lease held):
- Each current observation is scanned (``cmrunner.secrets.safety``) and measured against the disclosure
  byte cap (the smallest of ``maxExcerptBytes``, ``maxCandidateBytes``, ``maxTotalBytes``). A hit
  isolates only that observation (``SENSITIVE_INPUT`` / ``OVERSIZED_COMPLETE_SOURCE``): it leaves
  the job, keeps its text, and is quarantined. The rest of the batch goes on.
- Context is offered only with ``conversation_context`` in ``disclosure.allowedProvenance``: the
  current turns' assistant/tool replies (required reading) and up to
  ``sessionCache.contextTailTurns`` earlier settled turns of the same session and scope
  (optional). Context never carries an evidence handle. Sensitive context was already dropped at
  capture (``sessions.capture_context``).
- If everything together exceeds ``maxTotalBytes``, optional context is dropped first, then whole
  trailing turns go back to ``pending`` for a later job; a turn is never split.
- The request budget (``budget``) applies the same way in wire bytes, beside the snapshot's
  documents: past ``budget.job_limit`` optional context goes first, then trailing whole turns wait
  for a later job, so a job never holds more than one bulk page of sources unless it is one turn.
  A source, or the one turn left, that cannot fit any request (``budget.source_limit``) is
  isolated as ``SOURCE_TOO_LARGE``: its text is kept, nothing is sent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable

from cmrunner.agentrt import budget
from cmrunner.capture import observations, sessions
from cmrunner.core.config import Config
from cmrunner.secrets import safety
from cmrunner.writer_proc import jobs
from cmrunner.writer_proc.reads import Source

_ENVELOPE = 32  # bytes of JSON framing counted with every source, as the reference does


class Shaped:
    __slots__ = ("sources", "isolated", "deferred")

    def __init__(self, sources: list[Source], isolated: dict[int, str], deferred: list[int]) -> None:
        self.sources = sources      # evidence first, then context
        self.isolated = isolated    # observation id -> issue
        self.deferred = deferred    # observation ids sent back to pending


def _turn_of(conn: sqlite3.Connection, observation_id: int) -> tuple[int, str, str] | None:
    return sessions.turn_of_observation(conn, observation_id)


def _context(conn: sqlite3.Connection, cfg: Config, evidence: list[Source]) -> list[Source]:
    if "conversation_context" not in cfg.disclosure.allowed_provenance or not evidence:
        return []
    turns = {}
    for source in evidence:
        found = _turn_of(conn, source.observation_id)
        if found is not None:
            turns[found[0]] = found
    if not turns:
        return []
    blocks: list[Source] = []
    current = sorted(turns)
    session_id = turns[current[0]][1]
    scope = evidence[0].scope
    tail = cfg.session_cache["contextTailTurns"]
    earlier = sessions.earlier_turns(conn, session_id, current[0], scope, tail) if tail else []
    for turn_row in sorted(earlier) + current:
        required = turn_row in turns
        for _mid, role, text, observed, obs_text in sessions.turn_messages(conn, turn_row):
            body = text if role != "user" else (None if required else obs_text)
            if not body:
                continue  # current user turns are the evidence blocks themselves
            blocks.append(Source(0, body, scope, "conversation_context", "conversation_context", observed,
                                 context_key=f"{turn_row}_{len(blocks)}", role=role,
                                 turn=sessions.host_turn_id(conn, turn_row), required=required))
    return blocks


def _defer_trailing(conn: sqlite3.Connection, kept: list[Source], context: list[Source], deferred: list[int],
                    size: Callable[[list[Source]], int], limit: int) -> list[Source]:
    """Send whole trailing turns back to pending until ``kept + context`` fits ``limit`` or one
    turn is left (a turn is never split); returns the context still offered."""
    while len(kept) > 1 and size(kept + context) > limit:
        last_turn = _turn_of(conn, kept[-1].observation_id)
        moving = [s for s in kept if _turn_of(conn, s.observation_id) == last_turn] if last_turn else [kept[-1]]
        if len(moving) == len(kept):
            break  # the first turn itself: it stays whole
        for source in moving:
            kept.remove(source)
            deferred.append(source.observation_id)
            observations.defer(conn, source.observation_id)
        if last_turn:
            context = [c for c in context if c.turn != last_turn[2]]
    return context


def shape(conn: sqlite3.Connection, cfg: Config, job: jobs.Job, evidence: list[Source], now: int,
          documents: Iterable[str] = ()) -> Shaped:
    """What the attempt may show (module contract); ``documents`` are the snapshot's texts, which
    share every request with the sources (``budget``)."""
    cap = cfg.disclosure.source_cap
    texts = list(documents)
    max_request = cfg.max_request_bytes
    hard = budget.source_limit(max_request, texts)
    wire: dict[int, int] = {}

    def size_of(source: Source) -> int:
        if id(source) not in wire:
            wire[id(source)] = budget.wire_bytes(source.text)
        return wire[id(source)]

    isolated: dict[int, str] = {}
    kept: list[Source] = []
    for source in evidence:
        if safety.scan_text(source.text):
            isolated[source.observation_id] = "SENSITIVE_INPUT"
        elif cap is not None and len(source.data) + _ENVELOPE > cap:
            isolated[source.observation_id] = "OVERSIZED_COMPLETE_SOURCE"
        elif size_of(source) > hard:
            isolated[source.observation_id] = "SOURCE_TOO_LARGE"
        else:
            kept.append(source)
    context = _context(conn, cfg, kept)
    total_cap = cfg.disclosure.max_total_bytes
    deferred: list[int] = []
    if total_cap:
        def size(items: list[Source]) -> int:
            return sum(len(s.data) + _ENVELOPE for s in items)

        context = [c for c in context if c.required] if size(kept + context) > total_cap else context
        context = _defer_trailing(conn, kept, context, deferred, size, total_cap)

    def request_size(items: list[Source]) -> int:
        return sum(size_of(s) for s in items)

    limit = budget.job_limit(max_request, texts)
    context = [c for c in context if c.required] if request_size(kept + context) > limit else context
    context = _defer_trailing(conn, kept, context, deferred, request_size, limit)
    if kept and request_size(kept + context) > hard:  # one whole turn that no request can hold
        isolated.update({s.observation_id: "SOURCE_TOO_LARGE" for s in kept})
        kept, context = [], []
    for oid, issue in isolated.items():
        observations.isolate(conn, oid, issue)
    return Shaped(kept + context, isolated, deferred)
