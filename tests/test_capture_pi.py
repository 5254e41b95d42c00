"""`cm capture`: durable, idempotent admission of Pi bridge events as real subprocesses."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import db_rows, hook_env, run_cm, table_counts

from cmrunner.core import projects
from cmrunner.core.errors import InputError
from cmrunner.core.home import DataPaths
from cmrunner.hooks import pi as pi_hook

pytestmark = pytest.mark.usefixtures("quiet_drain")  # inspect exactly what was admitted


def _capture(home: str, payload: dict | bytes, env: dict | None = None):
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return run_cm(["capture", "--home", home], raw, env)


def _event(workdir: str, event_id: str = "ev-1", **over: object) -> dict:
    body = {"version": 1, "sessionId": "pi-sess-1", "eventId": event_id, "event": "message_end",
            "cwd": workdir, "payload": {"role": "user", "text": "remember my editor is helix"}}
    body.update(over)
    return body


def test_event_is_admitted_with_frozen_scope(home, workdir):
    project = projects.register(DataPaths(os.path.join(home, "data")), workdir, "Pi work")
    proc = _capture(home, _event(workdir))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"ok": True, "admitted": True, "duplicate": False}
    rows = db_rows(home, "SELECT event_id, event, scope, body FROM pi_inbox")
    assert len(rows) == 1
    event_id, name, scope, body = rows[0]
    assert (event_id, name, scope) == ("ev-1", "message_end", project.scope)
    assert json.loads(body)["payload"]["text"] == "remember my editor is helix"


def test_same_event_twice_is_admitted_once(home, workdir):
    assert _capture(home, _event(workdir)).returncode == 0
    again = _capture(home, _event(workdir))
    assert json.loads(again.stdout)["duplicate"] is True
    assert table_counts(home)["pi_inbox"] == 1


def test_same_id_with_other_payload_conflicts(home, workdir):
    assert _capture(home, _event(workdir)).returncode == 0
    conflict = _capture(home, _event(workdir, payload={"role": "user", "text": "something else"}))
    assert conflict.returncode == 1
    assert conflict.stderr.decode().startswith("cm: CAPTURE_CONFLICT: ")
    assert "something else" not in conflict.stderr.decode()
    assert table_counts(home)["pi_inbox"] == 1


def test_duplicate_is_recognised_after_the_row_was_consumed(home, workdir):
    assert _capture(home, _event(workdir)).returncode == 0
    import sqlite3

    conn = sqlite3.connect(os.path.join(home, "data", "runtime.sqlite"))
    conn.execute("DELETE FROM pi_inbox")  # what a consumer does once the event is in the session cache
    conn.commit()
    conn.close()
    again = _capture(home, _event(workdir))
    assert json.loads(again.stdout)["duplicate"] is True
    assert table_counts(home)["pi_inbox"] == 0


def test_host_instance_separates_pi_processes(home, workdir):
    assert _capture(home, _event(workdir, hostInstance="pi:a")).returncode == 0
    assert _capture(home, _event(workdir, hostInstance="pi:b")).returncode == 0
    assert len(db_rows(home, "SELECT DISTINCT session_id FROM pi_inbox")) == 2


def test_parent_process_is_the_default_host_instance(home, workdir):
    env = hook_env()
    del env["COMMON_MEMORY_HOST_INSTANCE"]
    assert _capture(home, _event(workdir), env=env).returncode == 0
    assert table_counts(home)["pi_inbox"] == 1


@pytest.mark.parametrize(("mutate", "code"), [
    (lambda e: e.pop("sessionId"), "INVALID_CAPTURE_INPUT"),
    (lambda e: e.update(version=2), "INVALID_CAPTURE_INPUT"),
    (lambda e: e.update(eventId="has space"), "INVALID_CAPTURE_INPUT"),
    (lambda e: e.update(cwd="relative"), "INVALID_CAPTURE_INPUT"),
    (lambda e: e.update(payload=[1]), "INVALID_CAPTURE_INPUT"),
    (lambda e: e.update(extra=1), "INVALID_CAPTURE_INPUT"),
    (lambda e: e.update(event="teleport"), "UNKNOWN_CAPTURE_EVENT"),
    (lambda e: e.update(hostInstance=""), "INVALID_CAPTURE_INPUT"),
])
def test_bad_events_are_refused_and_write_nothing(home, workdir, mutate, code):
    body = _event(workdir)
    mutate(body)
    proc = _capture(home, body)
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith(f"cm: {code}: ")
    assert table_counts(home) == dict.fromkeys(table_counts(home), 0)


def test_invalid_utf8_and_oversize_are_refused(home, workdir):
    assert _capture(home, b"\xc3\x28").stderr.decode().startswith("cm: INVALID_ENCODING: ")
    big = json.dumps(_event(workdir, payload={"text": "x" * (1 << 20)})).encode()
    assert _capture(home, big).stderr.decode().startswith("cm: INPUT_TOO_LARGE: ")


def test_pi_ids_are_checked_as_whole_strings_held_equal_to_the_pattern():
    """Session, event and host-instance ids are checked with sets (no `re` on the pinned capture path,
    issue 35), as the pattern they replaced, except that a trailing newline is no longer accepted."""
    pattern = re.compile(r"[A-Za-z0-9][A-Za-z0-9:._-]{0,199}")
    cases = ["pi:1", "e-7.x_y", "a" * 200, "a" * 201, ":x", "-x", "é1", "x y", "", "x\n", "x٣", "X:9"]
    base = {"version": 1, "sessionId": "s", "eventId": "e", "event": "input", "cwd": "/w", "hostInstance": "pi:1",
            "payload": {"text": "x"}}
    for field in ("sessionId", "eventId", "hostInstance"):
        for case in cases:
            try:
                pi_hook.validate(dict(base, **{field: case}))
                accepted = True
            except InputError as exc:
                assert exc.code == "INVALID_CAPTURE_INPUT" and field in exc.message
                accepted = False
            assert accepted == (pattern.fullmatch(case) is not None), (field, case)
