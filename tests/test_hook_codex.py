"""`cm hook codex|work`: durable admission, injection and every rejection, as real subprocesses."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from conftest import Transcript, db_rows, event, hook_env, run_cm, run_hook, table_counts

from cmrunner.core import config as config_mod, projects
from cmrunner.core.home import DataPaths

pytestmark = pytest.mark.usefixtures("quiet_drain")  # inspect exactly what was admitted


def _out(proc) -> dict:
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, "a hook prints exactly one JSON line"
    return json.loads(lines[0])


def _fail(proc, code: str) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and err.startswith(f"cm: {code}: "), err
    assert proc.stdout == b""
    return err


def _start(home: str, transcript: Transcript, cwd: str, source: str = "startup") -> dict:
    return _out(run_hook(home, event("SessionStart", transcript, cwd, source=source, model="m")))


def test_session_start_injects_explicit_empty_memory_block(home, transcript, workdir):
    out = _start(home, transcript, workdir)
    ctx = out["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart"
    block = ctx["additionalContext"]
    assert "no memory is stored yet" in block
    assert "not" in block and "instructions" in block
    assert "refresh it with /memory-refresh" in block  # Codex's profile installs that skill
    token = block.split("<<<common-memory-data ")[1].split(">>>")[0]
    assert f"<<<end-common-memory-data {token}>>>" in block
    assert table_counts(home)["host_snapshots"] == 1


def test_session_start_reads_authorized_documents_only(home, transcript, workdir):
    paths = DataPaths(os.path.join(home, "data"))
    project = projects.register(paths, workdir, "Work")
    os.makedirs(paths.projects_dir)
    with open(paths.document("profile"), "w") as handle:
        handle.write("# Profile\n\n## Name\nAda\n")
    with open(paths.document(project.scope), "w") as handle:
        handle.write("# Project\n\n## Build\nmake\n")
    block = _start(home, transcript, workdir)["hookSpecificOutput"]["additionalContext"]
    assert "Ada" in block and "make" not in block  # project scope not authorized yet

    cfg = config_mod.default_config(home)
    cfg["disclosure"]["allowedScopes"] = ["global", project.scope]
    config_mod.save(home, cfg)
    other = Transcript(transcript.path + ".2", "sess-0002")
    block = _start(home, other, workdir)["hookSpecificOutput"]["additionalContext"]
    assert "Ada" in block and "make" in block


def test_oversized_memory_is_not_injected_and_says_so(home, transcript, workdir):
    paths = DataPaths(os.path.join(home, "data"))
    os.makedirs(paths.memory)
    with open(paths.document("profile"), "w") as handle:
        handle.write("# Profile\n\n## Big\n" + "x" * (70 * 1024) + "\n")
    out = _start(home, transcript, workdir)
    assert "unavailable" in out["hookSpecificOutput"]["additionalContext"]
    assert "64 KiB" in out["systemMessage"]
    assert len(out["hookSpecificOutput"]["additionalContext"]) < 1024


def test_snapshot_is_frozen_and_reattached_on_compact(home, transcript, workdir):
    first = _start(home, transcript, workdir)["hookSpecificOutput"]["additionalContext"]
    paths = DataPaths(os.path.join(home, "data"))
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("profile"), "w") as handle:
        handle.write("# Profile\n\n## Late\nwritten after start\n")
    again = _start(home, transcript, workdir, source="compact")["hookSpecificOutput"]["additionalContext"]
    assert again == first  # re-attached, not re-read
    # an ordinary turn does not repeat it
    transcript.user_turn("t1", "hello")
    assert _out(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="hello"))) == {}


def test_prompt_and_transcript_tail_are_admitted_in_one_row(home, transcript, workdir):
    _start(home, transcript, workdir)
    transcript.user_turn("t1", "remember: I use tabs")
    size_before = os.path.getsize(transcript.path)
    _out(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="remember: I use tabs")))
    rows = db_rows(home, 'SELECT event, turn_id, start, "end", body, envelope, scope FROM codex_inbox ORDER BY id')
    assert [r[0] for r in rows] == ["SessionStart", "UserPromptSubmit"]
    name, turn, start, end, body, envelope, scope = rows[1]
    assert turn == "t1" and end == size_before and scope == "global"
    with open(transcript.path, "rb") as handle:
        assert body == handle.read()[start:end]
    assert "remember" not in envelope  # the prompt lives only in the candidate
    cand = db_rows(home, "SELECT turn_id, text, scope FROM codex_candidates")
    assert cand == [("t1", "remember: I use tabs", "global")]
    assert db_rows(home, "SELECT offset FROM codex_cursors") == [(end,)]


def test_history_before_activation_is_not_admitted(home, transcript, workdir):
    transcript.user_turn("t0", "said before cm was installed")
    _start(home, transcript, workdir)
    rows = db_rows(home, 'SELECT start, "end", LENGTH(body) FROM codex_inbox')
    assert rows == [(os.path.getsize(transcript.path), os.path.getsize(transcript.path), 0)]


def test_partial_last_line_waits_for_the_next_event(home, transcript, workdir):
    _start(home, transcript, workdir)
    transcript.append({"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}}, raw=b'{"type":"ev')
    _out(run_hook(home, event("PostToolUse", transcript, workdir, turn_id="t1", tool_name="Bash")))
    body = db_rows(home, "SELECT body FROM codex_inbox ORDER BY id DESC LIMIT 1")[0][0]
    assert body.endswith(b"\n") and b'{"type":"ev' not in body
    transcript.append(raw=b'ent_msg","payload":{"type":"task_complete","turn_id":"t1"}}\n')
    _out(run_hook(home, event("Stop", transcript, workdir, turn_id="t1")))
    body = db_rows(home, "SELECT body FROM codex_inbox ORDER BY id DESC LIMIT 1")[0][0]
    assert body.startswith(b'{"type":"event_msg","payload":{"type":"task_complete"')


def test_session_end_with_partial_line_is_refused_and_loses_nothing(home, transcript, workdir):
    _start(home, transcript, workdir)
    transcript.append(raw=b'{"partial":')
    before = table_counts(home)
    _fail(run_hook(home, event("SessionEnd", transcript, workdir, reason="other")), "CODEX_PARTIAL_TRANSCRIPT")
    assert table_counts(home) == before


def test_duplicate_delivery_is_admitted_once(home, transcript, workdir):
    _start(home, transcript, workdir)
    transcript.user_turn("t1", "x")
    ev = event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="x")
    _out(run_hook(home, ev))
    before = table_counts(home)
    _out(run_hook(home, ev))
    assert table_counts(home) == before


def test_ignored_events_touch_nothing(home, transcript, workdir):
    before = os.stat(os.path.join(home, "data", "runtime.sqlite")).st_mtime_ns
    out = _out(run_hook(home, event("PreToolUse", transcript, workdir, turn_id="t", tool_name="Bash")))
    assert out == {}
    assert table_counts(home) == dict.fromkeys(table_counts(home), 0)
    assert os.stat(os.path.join(home, "data", "runtime.sqlite")).st_mtime_ns == before


def test_event_before_session_start_is_refused(home, transcript, workdir):
    _fail(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="x")),
          "CODEX_SESSION_START_REQUIRED")
    assert table_counts(home)["codex_inbox"] == 0


def test_ephemeral_session_captures_nothing_and_says_so(home, workdir):
    out = _out(run_hook(home, event("SessionStart", None, workdir, source="startup")))
    assert "ephemeral" in out["systemMessage"]
    _out(run_hook(home, event("UserPromptSubmit", None, workdir, turn_id="t1", prompt="secret plans")))
    assert table_counts(home)["codex_inbox"] == 0
    assert table_counts(home)["codex_candidates"] == 0


def test_session_end_closes_activation_and_next_start_is_a_new_session(home, transcript, workdir):
    _start(home, transcript, workdir)
    _out(run_hook(home, event("SessionEnd", transcript, workdir, reason="other")))
    assert db_rows(home, "SELECT active FROM host_activations") == [(0,)]
    assert table_counts(home)["host_snapshots"] == 0
    out = _start(home, transcript, workdir)
    assert "additionalContext" in out["hookSpecificOutput"]
    sessions = db_rows(home, "SELECT DISTINCT session_id FROM codex_inbox")
    assert len(sessions) == 2


def test_other_host_process_is_another_session(home, transcript, workdir):
    _start(home, transcript, workdir)
    run_hook(home, event("SessionStart", transcript, workdir, source="startup"),
             env=hook_env(COMMON_MEMORY_HOST_INSTANCE="test:host:2"))
    assert len(db_rows(home, "SELECT id FROM sessions")) == 2


def test_work_client_is_a_separate_session_namespace(home, transcript, workdir):
    _start(home, transcript, workdir)
    _out(run_hook(home, event("SessionStart", transcript, workdir, source="startup"), client="work"))
    clients = sorted(r[0] for r in db_rows(home, "SELECT client FROM sessions"))
    assert clients == ["chatgpt-work", "codex"]


def test_project_scope_is_frozen_at_capture(home, transcript, workdir):
    paths = DataPaths(os.path.join(home, "data"))
    project = projects.register(paths, workdir, "Work")
    sub = os.path.join(workdir, "src")
    os.mkdir(sub)
    _start(home, transcript, sub)
    transcript.user_turn("t1", "x")
    _out(run_hook(home, event("UserPromptSubmit", transcript, sub, turn_id="t1", prompt="x")))
    projects.remove(paths, project.id)
    assert db_rows(home, "SELECT scope FROM codex_candidates") == [(project.scope,)]


# --- bad input: each gets a stable code, one line, and writes nothing ------------------------

BAD_EVENTS = [
    (b"{not json", "INVALID_HOOK_INPUT"),
    (b"[]", "INVALID_HOOK_INPUT"),
    (b"\xff\xfe{}", "INVALID_ENCODING"),
    (b'{"hook_event_name": "SessionStart\x00"}', "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "Teleport", "session_id": "s", "cwd": "/", "transcript_path": None}).encode(),
     "UNKNOWN_HOOK_EVENT"),
    (json.dumps({"hook_event_name": 3}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "SessionStart", "session_id": "s", "cwd": "relative/dir",
                 "transcript_path": None, "source": "startup"}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "SessionStart", "session_id": "s", "cwd": "/tmp",
                 "transcript_path": "rel.jsonl", "source": "startup"}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "SessionStart", "session_id": "s", "cwd": "/tmp",
                 "source": "startup"}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "SessionStart", "session_id": "", "cwd": "/tmp",
                 "transcript_path": None, "source": "startup"}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "SessionStart", "session_id": "s", "cwd": "/tmp",
                 "transcript_path": None, "source": "sideways"}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": "/tmp",
                 "transcript_path": None, "turn_id": "t", "prompt": 5}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "Stop", "session_id": "s", "cwd": "/tmp",
                 "transcript_path": None}).encode(), "INVALID_HOOK_INPUT"),
    (json.dumps({"hook_event_name": "SessionStart", "session_id": "s\u0000", "cwd": "/tmp",
                 "transcript_path": None, "source": "startup"}).encode(), "INVALID_HOOK_INPUT"),
]


@pytest.mark.parametrize(("payload", "code"), BAD_EVENTS)
def test_bad_input_is_refused_with_a_code_and_writes_nothing(home, payload, code):
    _fail(run_hook(home, payload), code)
    assert table_counts(home) == dict.fromkeys(table_counts(home), 0)


def test_input_over_one_mib_is_refused(home, workdir):
    big = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "x" * (1 << 20)}).encode()
    _fail(run_hook(home, big), "INPUT_TOO_LARGE")


def test_symlinked_transcript_is_refused(home, transcript, workdir, tmp_path):
    link = str(tmp_path / "link.jsonl")
    os.symlink(transcript.path, link)
    linked = Transcript.__new__(Transcript)
    linked.path, linked.session = link, transcript.session
    _fail(run_hook(home, event("SessionStart", linked, workdir, source="startup")), "CODEX_UNSAFE_TRANSCRIPT")
    assert table_counts(home)["host_activations"] == 0


def test_transcript_that_is_not_a_regular_file_is_refused(home, workdir, tmp_path):
    fifo = str(tmp_path / "fifo.jsonl")
    os.mkfifo(fifo)
    fake = Transcript.__new__(Transcript)
    fake.path, fake.session = fifo, "s"
    _fail(run_hook(home, event("SessionStart", fake, workdir, source="startup")), "CODEX_UNSAFE_TRANSCRIPT")


@pytest.mark.parametrize("change", ["shrink", "replace", "rewrite"])
def test_transcript_that_shrank_or_was_replaced_is_refused(home, transcript, workdir, change):
    _start(home, transcript, workdir)
    transcript.user_turn("t1", "first")
    _out(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="first")))
    data = open(transcript.path, "rb").read()
    if change == "shrink":
        open(transcript.path, "wb").write(data[:10])
    elif change == "replace":  # a new file whose history differs from what was read
        os.unlink(transcript.path)
        open(transcript.path, "wb").write(data.replace(b"sess-0001", b"sess-9999") + b'{"more":1}\n')
    else:  # same file, same size, rewritten history just before the cursor
        with open(transcript.path, "r+b") as handle:
            handle.seek(len(data) - 5)
            handle.write(b"X")
    before = table_counts(home)
    _fail(run_hook(home, event("Stop", transcript, workdir, turn_id="t1")), "CODEX_TRANSCRIPT_REPLACED")
    assert table_counts(home) == before


def test_unwritable_data_root_is_refused(home, transcript, workdir):
    cfg = config_mod.default_config(home)
    cfg["dataRoot"] = "/proc/cm-cannot-write-here"
    config_mod.save(home, cfg)
    _fail(run_hook(home, event("SessionStart", transcript, workdir, source="startup")), "DATA_ROOT_UNWRITABLE")


def test_locked_database_past_busy_timeout_is_refused_without_a_row(home, transcript, workdir):
    _start(home, transcript, workdir)
    conn = sqlite3.connect(os.path.join(home, "data", "runtime.sqlite"), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        transcript.user_turn("t1", "x")
        before = table_counts(home)
        _fail(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="x")), "STORE_BUSY")
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    assert table_counts(home) == before


def test_capacity_overflow_keeps_existing_content(home, transcript, workdir):
    cfg = config_mod.default_config(home)
    cfg["sessionCache"] = {"maxSessionBytes": 600}
    config_mod.save(home, cfg)
    _start(home, transcript, workdir)
    transcript.user_turn("t1", "small")
    _out(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="small")))
    before = table_counts(home)
    transcript.user_turn("t2", "y" * 700)
    _fail(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t2", prompt="y" * 700)),
          "SESSION_CAPACITY_EXCEEDED")
    assert table_counts(home) == before


def test_invalid_config_names_the_field(home, transcript, workdir):
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.json"), "w") as handle:
        json.dump({**config_mod.default_config(home), "writableScopes": ["everywhere"]}, handle)
    err = _fail(run_hook(home, event("SessionStart", transcript, workdir, source="startup")), "CONFIG_INVALID")
    assert "writableScopes" in err


def test_hook_without_host_identity_outside_codex_is_refused(home, transcript, workdir):
    env = hook_env()
    del env["COMMON_MEMORY_HOST_INSTANCE"]
    _fail(run_hook(home, event("SessionStart", transcript, workdir, source="startup"), env=env),
          "CODEX_HOST_PROCESS_UNCONFIRMED")


def test_duplicate_session_end_is_answered_and_admitted_once(home, transcript, workdir):
    _start(home, transcript, workdir)
    end = event("SessionEnd", transcript, workdir, reason="other")
    _out(run_hook(home, end))
    before = table_counts(home)
    assert _out(run_hook(home, end)) == {}
    assert table_counts(home) == before


def test_memory_refresh_is_delivered_once_by_the_next_prompt(home, transcript, workdir):
    first = _start(home, transcript, workdir)["hookSpecificOutput"]["additionalContext"]
    assert "Renamed" not in first
    paths = DataPaths(os.path.join(home, "data"))
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("profile"), "w") as handle:
        handle.write("# Profile\n\n## Name\nRenamed\n")
    proc = run_cm(["session-refresh", "--home", home, "--client", "codex"])
    assert proc.returncode == 0, proc.stderr
    transcript.user_turn("t1", "x")
    out = _out(run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="x")))
    assert "Renamed" in out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    again = _out(run_hook(home, event("PostToolUse", transcript, workdir, turn_id="t1", tool_name="Bash")))
    assert again == {}
    compact = _start(home, transcript, workdir, source="compact")["hookSpecificOutput"]["additionalContext"]
    assert "Renamed" in compact  # the refreshed snapshot is the frozen one now


def test_memory_refresh_needs_one_identified_activation(home, transcript, workdir):
    proc = run_cm(["session-refresh", "--home", home, "--client", "codex"])
    assert proc.stderr.decode().startswith("cm: SESSION_REFRESH_ACTIVATION_REQUIRED: ")
    _start(home, transcript, workdir)
    other = Transcript(transcript.path + ".2", "sess-0002")
    _start(home, other, workdir)
    proc = run_cm(["session-refresh", "--home", home, "--client", "codex"])
    assert proc.stderr.decode().startswith("cm: SESSION_REFRESH_IDENTITY_REQUIRED: ")
    assert run_cm(["session-refresh", "--home", home, "--client", "codex", "--thread", "sess-0002"]).returncode == 0
    bad = run_cm(["session-refresh", "--home", home, "--client", "pi"])
    assert bad.stderr.decode().startswith("cm: INVALID_ARGUMENTS: ")


@pytest.mark.parametrize(("meta", "code"), [
    ({"type": "session_meta", "payload": {"id": "s", "cli_version": "0.170.0-beta"}}, "CODEX_UNSUPPORTED_VERSION"),
    ({"type": "session_meta", "payload": {"id": "s", "cli_version": "0.150.0"}}, "CODEX_UNSUPPORTED_VERSION"),
    ({"type": "something_else", "payload": {}}, "CODEX_UNKNOWN_TRANSCRIPT"),
])
def test_activation_refuses_a_transcript_format_cm_does_not_know(home, workdir, tmp_path, meta, code):
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"timestamp": "2026-11-30T00:00:00.000Z", **meta}) + "\n")
    fake = Transcript.__new__(Transcript)
    fake.path, fake.session = str(path), "s"
    _fail(run_hook(home, event("SessionStart", fake, workdir, source="startup")), code)
    assert table_counts(home)["host_activations"] == 0


def test_moved_transcript_is_refused(home, transcript, workdir):
    _start(home, transcript, workdir)
    moved = Transcript.__new__(Transcript)
    moved.path, moved.session = transcript.path + ".moved", transcript.session
    os.rename(transcript.path, moved.path)
    _fail(run_hook(home, event("Stop", moved, workdir, turn_id="t1")), "CODEX_TRANSCRIPT_REPLACED")
