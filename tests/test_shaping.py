"""Request shaping: per-observation isolation, context turns, and the total byte cap."""

from __future__ import annotations

import pytest
from writer_support import all_evidence, configure, decision, rows, writer

from cmrunner.capture import sessions
from cmrunner.core import store

IGNORE = {"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": [], "reason": "r"}


def _session(paths, turns: list[tuple[str, str]], seal: bool = True) -> None:
    """A session whose turns each have a user message and an assistant reply."""
    conn = store.open_store(paths)
    with store.immediate(conn):
        conn.execute("INSERT INTO sessions VALUES ('s1', 'codex', 'h', 't', 0, 0)")
        for n, (user, reply) in enumerate(turns):
            turn = f"t{n}"
            sessions.open_turn(conn, "s1", turn)
            sessions.capture_user(conn, "s1", turn, f"u{n}", user, "global", "codex_user_delivery",
                                  "2026-11-30T00:00:00Z", 1 << 20)
            sessions.capture_context(conn, "s1", turn, f"a{n}", "assistant", reply, "global",
                                     "2026-11-30T00:00:01Z", 1 << 20)
            sessions.settle(conn, "s1", turn, "settled")
        if seal:
            sessions.end(conn, "s1")
    conn.close()


class Recorder:
    def __init__(self) -> None:
        self.seen: list[list[tuple[str, bool, bool]]] = []

    def __call__(self, task, reads):
        self.seen.append([(s.text, s.context_only, s.required) for s in reads.sources.values()])
        return decision(task, dict(IGNORE, evidence=all_evidence(reads)))


def test_context_needs_its_own_permission(home):
    paths, cfg = configure(home)
    _session(paths, [("I like tea", "noted: tea")])
    recorder = Recorder()
    w, _ = writer(paths, cfg, recorder)
    assert w.run_once().state == "ignored"
    assert recorder.seen == [[("I like tea", False, True)]]
    w.close()


def test_current_replies_are_required_context_and_earlier_turns_optional(home):
    paths, cfg = configure(home, allowedProvenance=["user_explicit", "conversation_context"])
    _session(paths, [("old one", "reply one"), ("old two", "reply two"), ("old three", "reply three")], seal=False)
    conn = store.open_store(paths)
    with store.immediate(conn):  # the first three turns were processed in an earlier batch
        (batch,) = sessions.seal(conn, "s1", "test")
        conn.execute("UPDATE observations SET state = 'processed' WHERE batch_id = ?", (batch,))
        sessions.open_turn(conn, "s1", "t9")
        sessions.capture_user(conn, "s1", "t9", "u9", "new fact", "global", "codex_user_delivery",
                              "2026-11-30T00:00:02Z", 1 << 20)
        sessions.capture_context(conn, "s1", "t9", "a9", "assistant", "new reply", "global",
                                 "2026-11-30T00:00:03Z", 1 << 20)
        sessions.settle(conn, "s1", "t9", "settled")
        sessions.end(conn, "s1")
    conn.close()
    recorder = Recorder()
    w, _ = writer(paths, cfg, recorder)
    assert w.run_once().state == "ignored"
    seen = recorder.seen[0]
    assert ("new fact", False, True) in seen and ("new reply", True, True) in seen
    assert ("old two", True, False) in seen and ("reply three", True, False) in seen
    assert not any(text in ("old one", "reply one") for text, _, _ in seen)  # only contextTailTurns = 2
    w.close()


def test_a_sensitive_turn_is_isolated_and_the_rest_goes_on(home):
    paths, cfg = configure(home)
    _session(paths, [("I like tea", "ok"), ("my password: hunter2-secret", "ok"), ("I live in Porto", "ok")])
    recorder = Recorder()
    w, port = writer(paths, cfg, recorder)
    assert w.run_once().state == "ignored"
    assert [t for t, _, _ in recorder.seen[0]] == ["I like tea", "I live in Porto"]
    assert rows(paths, "SELECT text, state, issue FROM observations ORDER BY id") == [
        ("I like tea", "processed", None),
        ("my password: hunter2-secret", "quarantined", "SENSITIVE_INPUT"),
        ("I live in Porto", "processed", None)]
    w.close()


def test_total_cap_defers_whole_trailing_turns(home):
    paths, cfg = configure(home, maxTotalBytes=200)
    _session(paths, [("a" * 60, "r"), ("b" * 60, "r"), ("c" * 60, "r")])
    recorder = Recorder()
    w, _ = writer(paths, cfg, recorder)
    while w.run_once() is not None:
        pass
    assert [[t[0][0] for t in seen] for seen in recorder.seen] == [["a", "b"], ["c"]]
    assert rows(paths, "SELECT COUNT(*) FROM observations WHERE state = 'processed'") == [(3,)]
    w.close()


@pytest.mark.parametrize("cap", [50])
def test_a_single_oversized_turn_is_quarantined_not_truncated(home, cap):
    paths, cfg = configure(home, maxExcerptBytes=cap)
    _session(paths, [("short", "r"), ("x" * 400, "r")])
    recorder = Recorder()
    w, _ = writer(paths, cfg, recorder)
    assert w.run_once().state == "ignored"
    assert [t for t, _, _ in recorder.seen[0]] == ["short"]
    assert rows(paths, "SELECT issue FROM observations WHERE state = 'quarantined'") == [("OVERSIZED_COMPLETE_SOURCE",)]
    assert rows(paths, "SELECT LENGTH(text) FROM observations WHERE state = 'quarantined'") == [(400,)]
    w.close()
