"""The freshness line every injected memory block ends with: when memory was last published and how
many of this scope's user turns are captured but not yet in memory, seen in the real hook's output
(subprocesses). The count reaches back to the inboxes: turns a hook admitted that no drain has read
yet (the fixture ``quiet_drain`` holds the lease with a live stand-in, as a busy drain would)."""

from __future__ import annotations

import json
import os
import time

from agent_support import configure_remote, policy
from conftest import Transcript, db_rows, event, run_cm, run_hook, settle

from cmrunner.capture import waiting as waiting_mod
from cmrunner.core import config as config_mod, migrations, projects, store
from cmrunner.core.home import DataPaths
from cmrunner.hooks import claude
from cmrunner.reading import reader
from cmrunner.synthetic import fakemodel

WAITING = "SELECT COUNT(*) FROM observations WHERE scope = ? AND state IN ('buffered', 'pending', 'claimed')"


def _block(proc) -> str:
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def _last_line(block: str) -> str:
    lines = block.rstrip("\n").split("\n")
    assert lines[-2].startswith("<<<end-common-memory-data "), "the state line follows the end marker"
    return lines[-1]


def test_fresh_home_says_nothing_saved_and_nothing_waiting(home, transcript, workdir):
    block = _block(run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m")))
    assert _last_line(block) == "Memory state: no memory saved yet; no turns waiting to be processed."


def test_turns_still_waiting_are_counted_in_the_next_session(home, transcript, workdir):
    paths = DataPaths(os.path.join(home, "data"))
    project = projects.register(paths, workdir, "Work")
    os.makedirs(paths.projects_dir, exist_ok=True)
    with open(paths.document("profile"), "w") as handle:
        handle.write("# Profile\n\n## Editor\nThe user edits in Helix.\n")
    three_min_ago = time.time() - 190
    os.utime(paths.document("profile"), (three_min_ago, three_min_ago))
    assert _block(run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m")))
    for turn, text in (("t1", "We deploy this service with Nomad, not Kubernetes."),
                       ("t2", "The staging database is Postgres 16.")):
        transcript.user_turn(turn, text)
        assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id=turn, prompt=text)).returncode == 0
        transcript.reply(turn, "Noted.")
        assert run_hook(home, event("Stop", transcript, workdir, turn_id=turn)).returncode == 0
    settle(home)  # the real drain consumes the inbox; no model is configured, so the turns wait
    waiting = db_rows(home, WAITING, (project.scope,))[0][0]
    assert waiting == 2, "one observation per user turn, admitted and not processed"

    other = Transcript(transcript.path + ".2", "sess-0002")
    block = _block(run_hook(home, event("SessionStart", other, workdir, source="startup", model="m")))
    assert _last_line(block) == f"Memory state: updated 3 min ago; {waiting} turns still being processed."
    # Another directory (global scope) has none of this project's turns waiting.
    elsewhere = os.path.join(os.path.dirname(workdir), "elsewhere")
    os.mkdir(elsewhere)
    third = Transcript(transcript.path + ".3", "sess-0003")
    block = _block(run_hook(home, event("SessionStart", third, elsewhere, source="startup", model="m")))
    assert _last_line(block) == "Memory state: updated 3 min ago; no turns waiting to be processed."


def test_freshness_wording():
    now = 1_000_000.0
    assert reader.freshness_line(None, None, now) == "Memory state: no memory saved yet."
    assert reader.freshness_line(now - 5, 1, now) == "Memory state: updated just now; 1 turn still being processed."
    assert reader.freshness_line(now - 7300, 0, now) == "Memory state: updated 2 h ago; no turns waiting to be processed."
    assert reader.freshness_line(now - 3 * 86400, 4, now) == ("Memory state: updated 3 days ago; "
                                                             "4 turns still being processed.")
    assert reader.freshness_line(now + 60, 0, now).startswith("Memory state: updated just now")


# -- turns still in the inboxes ---------------------------------------------------------------------

def _codex_turns(home: str, transcript: Transcript, cwd: str, texts: list[str], end: bool = True) -> None:
    """A Codex session's turns through the real hook (the transcript grows as Codex writes it)."""
    assert run_hook(home, event("SessionStart", transcript, cwd, source="startup", model="m")).returncode == 0
    for n, text in enumerate(texts, 1):
        turn = f"t{n}"
        assert run_hook(home, event("UserPromptSubmit", transcript, cwd, turn_id=turn, prompt=text)).returncode == 0
        transcript.user_turn(turn, text)
        transcript.reply(turn, "Noted.")
        assert run_hook(home, event("Stop", transcript, cwd, turn_id=turn)).returncode == 0
    if end:
        assert run_hook(home, event("SessionEnd", transcript, cwd, reason="other")).returncode == 0


def _state_at_start(home: str, tmp_path, cwd: str, name: str) -> str:
    """The freshness line a new Codex session in ``cwd`` receives."""
    fresh = Transcript(str(tmp_path / f"{name}.jsonl"), name)
    return _last_line(_block(run_hook(home, event("SessionStart", fresh, cwd, source="startup", model="m"))))


def _project(home: str, tmp_path, name: str) -> tuple[str, str]:
    folder = tmp_path / name
    folder.mkdir()
    return str(folder), projects.register(DataPaths(os.path.join(home, "data")), str(folder), name).scope


def test_codex_turns_in_the_inbox_are_counted_for_their_project_only_until_flushed(home, tmp_path, quiet_drain):
    alpha, alpha_scope = _project(home, tmp_path, "alpha")
    beta, beta_scope = _project(home, tmp_path, "beta")
    elsewhere = str(tmp_path / "elsewhere")
    os.mkdir(elsewhere)
    with fakemodel.running(str(tmp_path / "fm"), policy()) as model:
        configure_remote(home, model.base_url, disclosure={"allowedScopes": ["global", alpha_scope, beta_scope]})
        data = config_mod.load(home).data
        data["writableScopes"] = ["global", alpha_scope, beta_scope]
        config_mod.save(home, data)
        _codex_turns(home, Transcript(str(tmp_path / "a.jsonl"), "sess-a"), alpha,
                     ["We deploy alpha with Nomad.", "Alpha's staging database is Postgres 16."])
        _codex_turns(home, Transcript(str(tmp_path / "b.jsonl"), "sess-b"), beta, ["Beta is written in Rust."])
        queued = db_rows(home, "SELECT COUNT(*) FROM codex_inbox")[0][0]
        assert queued > 0 and db_rows(home, "SELECT COUNT(*) FROM observations") == [(0,)], "no drain has read them"

        assert _state_at_start(home, tmp_path, alpha, "s-a2").endswith("; 2 turns still being processed.")
        assert _state_at_start(home, tmp_path, beta, "s-b2").endswith("; 1 turn still being processed.")
        assert _state_at_start(home, tmp_path, elsewhere, "s-g").endswith("; no turns waiting to be processed.")

        quiet_drain()  # the stand-in exits: cm flush takes the lease, consumes, seals and commits
        flushed = run_cm(["--home", home, "flush"], timeout=120)
        assert flushed.returncode == 0, flushed.stderr
        assert len(model.model_requests()) >= 1
        assert db_rows(home, "SELECT state, COUNT(*) FROM observations GROUP BY state") == [("processed", 3)]
        assert _state_at_start(home, tmp_path, alpha, "s-a3").endswith("; no turns waiting to be processed.")
        assert _state_at_start(home, tmp_path, beta, "s-b3").endswith("; no turns waiting to be processed.")


def test_a_turn_counts_once_as_it_moves_from_the_inbox_to_the_session_cache(home, tmp_path, workdir, quiet_drain):
    scope = projects.register(DataPaths(os.path.join(home, "data")), workdir, "Work").scope
    _codex_turns(home, Transcript(str(tmp_path / "a.jsonl"), "sess-a"), workdir,
                 ["We deploy with Nomad.", "Staging is Postgres 16."], end=False)
    assert _state_at_start(home, tmp_path, workdir, "s2").endswith("; 2 turns still being processed.")
    quiet_drain()
    settle(home)  # read into the session cache, not sealed (no end, fewer than ten turns)
    assert db_rows(home, "SELECT COUNT(*) FROM codex_inbox") == [(0,)]
    assert db_rows(home, "SELECT state, scope FROM observations") == [("buffered", scope)] * 2
    assert _state_at_start(home, tmp_path, workdir, "s3").endswith("; 2 turns still being processed.")


def test_a_prompt_that_was_never_delivered_stops_counting_and_its_text_goes(home, tmp_path, workdir):
    """Another hook blocked the prompt: Codex settles the turn without a user message. Once the
    drain has read that, nothing can deliver it; it must not read as 'still being processed'."""
    projects.register(DataPaths(os.path.join(home, "data")), workdir, "Work")
    transcript = Transcript(str(tmp_path / "a.jsonl"), "sess-a")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m")).returncode == 0
    transcript.append({"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}})
    assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1",
                                prompt="BLOCKME do not keep this")).returncode == 0
    transcript.complete("t1")
    assert run_hook(home, event("Stop", transcript, workdir, turn_id="t1")).returncode == 0
    # A second prompt the session ends before delivering.
    assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t2",
                                prompt="a prompt the host never sent")).returncode == 0
    assert run_hook(home, event("SessionEnd", transcript, workdir, reason="other")).returncode == 0
    settle(home)
    assert db_rows(home, "SELECT COUNT(*) FROM codex_failures") == [(0,)]
    assert db_rows(home, "SELECT turn_id, text FROM codex_candidates ORDER BY turn_id") == [("t1", None), ("t2", None)]
    assert db_rows(home, "SELECT COUNT(*) FROM observations") == [(0,)]
    assert _state_at_start(home, tmp_path, workdir, "s2").endswith("; no turns waiting to be processed.")


def _claude(home: str, cwd: str, session: str, name: str, **fields: object) -> dict:
    payload = {"session_id": session, "transcript_path": os.path.join(cwd, f"{session}.jsonl"), "cwd": cwd,
               "hook_event_name": name, **fields}
    proc = run_cm(["hook", "claude", "--home", home], json.dumps(payload).encode())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_claude_prompts_in_the_hook_inbox_are_counted_and_commands_are_not(home, tmp_path, workdir, quiet_drain):
    projects.register(DataPaths(os.path.join(home, "data")), workdir, "Work")
    spec = claude.SPEC
    _claude(home, workdir, "c-1", spec.start, source="startup")
    for n, text in enumerate(["Our CI runs on Buildkite.", "/compact", "The API is versioned by date."], 1):
        _claude(home, workdir, "c-1", spec.prompt, **{spec.prompt_field: text, "prompt_id": f"p{n}"})
        _claude(home, workdir, "c-1", spec.stop, **{spec.reply_field: "Done.", "prompt_id": f"p{n}"})
    assert db_rows(home, "SELECT COUNT(*) FROM hook_inbox WHERE event = 'prompt'") == [(3,)]
    block = _claude(home, workdir, "c-2", spec.start, source="startup")["hookSpecificOutput"]["additionalContext"]
    assert _last_line(block).endswith("; 2 turns still being processed.")
    elsewhere = str(tmp_path / "elsewhere")
    os.mkdir(elsewhere)
    block = _claude(home, elsewhere, "c-3", spec.start, source="startup")["hookSpecificOutput"]["additionalContext"]
    assert _last_line(block).endswith("; no turns waiting to be processed.")


def _pi(home: str, cwd: str, name: str, payload: dict, event_id: str) -> dict:
    body = {"version": 1, "sessionId": "pi-s1", "eventId": event_id, "event": name, "cwd": cwd,
            "hostInstance": "pi:host:1", "payload": payload}
    proc = run_cm(["capture", "--home", home], json.dumps(body).encode())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_pi_deliveries_in_the_inbox_are_counted_at_a_memory_read(home, workdir, quiet_drain):
    projects.register(DataPaths(os.path.join(home, "data")), workdir, "Work")
    for n, text in enumerate(["I use helix as my editor.", "And fish as my shell."]):
        _pi(home, workdir, "input", {"text": text, "source": "interactive", "hasImages": False}, f"in-{n}")
        _pi(home, workdir, "message_end", {"role": "user", "text": text, "hasImages": False}, f"u-{n}")
        _pi(home, workdir, "message_end", {"role": "assistant", "text": "ok", "hasImages": False}, f"a-{n}")
        _pi(home, workdir, "agent_end", {"aborted": False}, f"e-{n}")
    assert db_rows(home, "SELECT COUNT(*) FROM pi_inbox") == [(8,)]
    answer = _pi(home, workdir, "memory_read", {}, "read-1")
    assert answer["context"].rstrip("\n").split("\n")[-1].endswith("; 2 turns still being processed.")


# -- cheap: one statement, every share from its partial index ---------------------------------------

def test_the_count_is_one_statement_and_every_share_reads_its_partial_index(home):
    conn = store.open_store(DataPaths(os.path.join(home, "data")))
    try:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + waiting_mod.STATEMENT, {"scope": "global"})]
    finally:
        conn.close()
    reads = [step for step in plan if step.startswith(("SCAN", "SEARCH")) and step != "SCAN CONSTANT ROW"]
    assert len(reads) == len(waiting_mod.SHARES) == 4, plan
    # Never a scan: each share searches its partial index by scope. The inboxes' and observations'
    # indexes cover the count; the candidates' leaves the prompt's text out, so it reads one row
    # per prompt still waiting.
    assert all(step.startswith("SEARCH") and " INDEX " in step for step in reads), plan
    used = {step.split(" INDEX ")[1].split(" ")[0] for step in reads}
    assert used == {"observations_waiting_scope", "codex_candidates_waiting_scope", "pi_inbox_waiting_scope",
                    "hook_inbox_waiting_scope"}, plan


def test_rows_queued_before_m013_are_counted_after_the_upgrade(home, monkeypatch):
    paths = DataPaths(os.path.join(home, "data"))
    before = [m.__name__ for m in migrations.MIGRATIONS].index("m013_waiting_turns")
    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:before])
        m.setattr(migrations, "LATEST", before)
        conn = store.open_store(paths)
        rows = [("message_end", {"role": "user", "text": "I use helix."}),
                ("message_end", {"role": "user", "text": "   "}),
                ("message_end", {"role": "assistant", "text": "ok"}),
                ("input", {"text": "I use helix.", "source": "interactive"}),
                ("message_end", None)]  # what an older cm once admitted: not JSON (see test_poison)
        with store.immediate(conn):
            for n, (name, payload) in enumerate(rows):
                conn.execute("INSERT INTO pi_inbox(session_id, event_id, event, digest, body, scope, received_at)"
                             " VALUES ('s', ?, ?, '', ?, 'global', 0)",
                             (f"e{n}", name, json.dumps({"event": name, "payload": payload}) if payload else
                              '{"event":"message_end","payload":{"role":"user","text":"hi","timestamp":Infinity}}'))
            # Codex: a prompt blocked before the upgrade (its turn settled undelivered), and one still live.
            conn.execute("INSERT INTO sessions(id, client, host_instance, thread, created_at) VALUES ('c', 'codex', 'h', 'c', 0)")
            conn.execute("INSERT INTO session_turns(session_id, turn_id, state) VALUES ('c', 't1', 'settled'), ('c', 't2', 'open')")
            conn.execute("INSERT INTO codex_candidates(session_id, turn_id, digest, text, scope, created_at)"
                         " VALUES ('c', 't1', 'd1', 'BLOCKME', 'global', 0), ('c', 't2', 'd2', 'live', 'global', 0)")
            for name, body in (("prompt", {"text": "We use Nomad."}), ("prompt", {"text": None, "command": True}),
                               ("stop", {"text": "Done."})):
                conn.execute("INSERT INTO hook_inbox(session_id, event, body, scope, received_at)"
                             " VALUES ('h', ?, ?, 'global', 0)", (name, json.dumps(body)))
        conn.close()
    conn = store.open_store(paths)
    try:
        assert waiting_mod.turns(conn, "global") == 3  # one Pi delivery, one Claude prompt, the live Codex prompt
        assert waiting_mod.turns(conn, "project:other") == 0
        assert conn.execute("SELECT turn_id, text FROM codex_candidates ORDER BY turn_id").fetchall() == [
            ("t1", None), ("t2", "live")]
    finally:
        conn.close()
