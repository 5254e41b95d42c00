"""Pi bridge events through the real `cm capture` and drain: origins, deliveries, turns, batches."""

from __future__ import annotations

import json
import subprocess

from conftest import CM, db_rows, hook_env, run_cm, wait_no_drain


class PiSession:
    """Sends bridge-shaped events for one Pi session, as the TypeScript bridge does."""

    def __init__(self, home: str, cwd: str, session: str = "pi-s1", instance: str = "pi:host:1") -> None:
        self.home, self.cwd, self.session, self.instance, self.seq = home, cwd, session, instance, 0

    def send(self, name: str, payload: dict, event_id: str | None = None) -> dict:
        self.seq += 1
        event = {"version": 1, "sessionId": self.session, "eventId": event_id or f"ev-{self.seq}", "event": name,
                 "cwd": self.cwd, "hostInstance": self.instance, "payload": payload}
        proc = run_cm(["capture", "--home", self.home], json.dumps(event).encode())
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def turn(self, text: str, typed: str | None = None, source: str = "interactive", aborted: bool = False) -> None:
        self.send("input", {"text": typed if typed is not None else text, "source": source, "hasImages": False})
        self.send("message_end", {"role": "user", "text": text, "hasImages": False, "timestamp": 1795995559356})
        self.send("message_end", {"role": "assistant", "text": "ok", "hasImages": False, "timestamp": 1795995559999,
                                  "stopReason": "stop"})
        self.send("agent_end", {"aborted": aborted})


def drain(home: str) -> None:
    proc = subprocess.run([CM, "session-drain", "--home", home], env=hook_env(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    wait_no_drain(home)


def test_first_session_start_returns_memory_and_reads_admit_nothing(home, workdir, quiet_drain):
    pi = PiSession(home, workdir)
    answer = pi.send("session_start", {"reason": "startup", "readMemory": True}, event_id="pi-s1:session_start")
    assert "no memory is stored yet" in answer["context"]
    again = pi.send("session_start", {"reason": "startup", "readMemory": True}, event_id="pi-s1:session_start")
    assert again["duplicate"] is True  # Pi's duplicate session_start after fork/new is harmless
    read = pi.send("memory_read", {})
    assert "context" in read and "admitted" not in read
    assert db_rows(home, "SELECT COUNT(*) FROM pi_inbox") == [(1,)], "the session start once; reads admit nothing"


def test_delivered_turns_become_evidence_and_quit_seals_the_tail(home, workdir):
    pi = PiSession(home, workdir)
    pi.send("session_start", {"reason": "startup", "readMemory": False})
    pi.turn("I use helix as my editor")
    pi.turn("and fish as my shell", source="rpc")
    pi.send("session_shutdown", {"reason": "quit"})
    drain(home)
    rows = db_rows(home, "SELECT text, source, state, batch_id IS NOT NULL FROM observations ORDER BY id")
    assert rows == [("I use helix as my editor", "interactive", "pending", 1), ("and fish as my shell", "rpc", "pending", 1)]
    assert db_rows(home, "SELECT COUNT(*) FROM session_messages WHERE role = 'assistant'") == [(2,)]


def test_transformed_extension_and_aborted_inputs_are_not_evidence(home, workdir):
    pi = PiSession(home, workdir)
    pi.turn("what the model saw", typed="what the user typed")
    pi.turn("injected by another extension", source="extension")
    pi.turn("stopped halfway", aborted=True)
    pi.send("session_shutdown", {"reason": "quit"})
    drain(home)
    rows = db_rows(home, "SELECT source, state, issue FROM observations ORDER BY id")
    assert rows == [("ambiguous", "quarantined", "UNSUPPORTED_SOURCE"),
                    ("extension", "quarantined", "UNSUPPORTED_SOURCE"),
                    ("interactive", "quarantined", "INTERRUPTED_TURN")]


def test_reload_new_and_fork_keep_the_cache_and_sessions_stay_apart(home, workdir):
    first = PiSession(home, workdir, session="pi-a")
    first.turn("fact one")
    first.send("session_shutdown", {"reason": "fork"})  # not a real exit: nothing is sealed
    second = PiSession(home, workdir, session="pi-b")
    second.turn("fact two")
    drain(home)
    assert db_rows(home, "SELECT COUNT(*) FROM session_batches") == [(0,)]
    assert len(db_rows(home, "SELECT DISTINCT namespace FROM observations")) == 2
    first.send("session_shutdown", {"reason": "quit"})
    drain(home)
    assert db_rows(home, "SELECT COUNT(*) FROM session_batches") == [(1,)]
    assert db_rows(home, "SELECT state FROM observations ORDER BY id") == [("pending",), ("buffered",)]


def test_memory_flush_requests_a_flush_without_sealing(home, workdir):
    pi = PiSession(home, workdir)
    pi.turn("pending thought")
    pi.send("memory_flush", {})
    drain(home)
    assert db_rows(home, "SELECT value FROM settings WHERE key = 'flush_requested'") == [("1",)]
    assert db_rows(home, "SELECT state FROM observations") == [("buffered",)]


def test_ten_pi_interactions_seal_a_batch(home, workdir):
    pi = PiSession(home, workdir)
    for n in range(11):
        pi.turn(f"turn {n}")
    drain(home)
    assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state = 'pending'") == [(10,)]
    assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state = 'buffered'") == [(1,)]


def test_a_turn_whose_events_reach_cm_after_the_quit_is_sealed_as_tail(home, workdir):
    """The bridge's bounded wait for agent_end ran out: the quit came before the run's events."""
    pi = PiSession(home, workdir)
    pi.turn("settled before the quit")
    pi.send("input", {"text": "typed before the quit", "source": "interactive", "hasImages": False})
    pi.send("session_shutdown", {"reason": "quit"})
    pi.send("message_end", {"role": "user", "text": "typed before the quit", "hasImages": False,
                            "timestamp": 1795995560000})
    pi.send("agent_end", {"aborted": False})
    drain(home)
    rows = db_rows(home, "SELECT o.text, o.state, b.reason FROM observations o JOIN session_batches b"
                         " ON b.id = o.batch_id ORDER BY o.id")
    assert rows == [("settled before the quit", "pending", "session_end"),
                    ("typed before the quit", "pending", "session_end")]
    assert db_rows(home, "SELECT state FROM session_turns ORDER BY id") == [("settled",), ("settled",)]


def test_a_turn_still_open_at_the_quit_stays_incomplete_when_its_end_comes_late(home, workdir):
    pi = PiSession(home, workdir)
    pi.send("input", {"text": "cut off", "source": "interactive", "hasImages": False})
    pi.send("message_end", {"role": "user", "text": "cut off", "hasImages": False, "timestamp": 1795995560000})
    pi.send("session_shutdown", {"reason": "quit"})
    pi.send("message_end", {"role": "assistant", "text": "late", "hasImages": False, "timestamp": 1795995560001,
                            "stopReason": "stop"})
    pi.send("agent_end", {"aborted": False})
    drain(home)
    assert db_rows(home, "SELECT state, issue FROM observations") == [("quarantined", "INCOMPLETE_TURN")]
    assert db_rows(home, "SELECT state FROM session_turns") == [("incomplete",)]
