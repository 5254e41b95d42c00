"""Benchmark: the reading SessionStart, whose injected block ends with the freshness line, on a data
root whose inboxes hold a backlog of user turns that no drain has read yet.

Method: a fresh temporary home (capture-only configuration) with two registered projects and a
published profile and preferences (2 KiB each). A live stand-in process holds the drain lease (the
real lease rule, as a busy drain would), so what the hooks admit stays queued. Through the real
entries of the installation under test (``PYTHON -I -m cmrunner``): three Codex sessions of ten
turns each (UserPromptSubmit and Stop, the transcript growing as Codex writes it) in project P, one
in project Q, ten Pi turns (``cm capture``: input, user and assistant message_end, agent_end) and
ten Claude Code turns in P. Then ``--pairs`` rounds, each timing back to back (A) a SessionStart of
a new Codex session in P (memory read, the waiting count, the block frozen; no drain spawned: the
lease is held) and (B) a bare interpreter start, ``PYTHON -I -c pass``, both spawned the same way
(wall time from spawn until exit with stdout at EOF). Reported: median A, median B, and the median
of the per-round ratios A/B, which holds when the shared machine's speed drifts; the load average
before and after. Last, inside one process of the installation, the count itself on that store:
median of 2,000 calls (the one statement, or before issue 26's inbox change the observations-only
query). Run it once per installation to compare (``--python`` of each venv).

Usage: ``python bench/freshness.py [--python PATH] [--pairs 40] [--label NAME] [--write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import machine, rollout_line, session_meta, timed_run, wait_no_drain, write_section

COUNT = """
import sqlite3, statistics, sys, time
from cmrunner.core import config, store
from cmrunner.core.home import DataPaths
try:
    from cmrunner.capture import waiting
    count, name = waiting.turns, "capture.waiting.turns (one statement, inboxes included)"
except ImportError:
    from cmrunner.capture import observations
    count, name = observations.waiting, "capture.observations.waiting (observations only)"
conn = store.open_store(DataPaths(config.load(sys.argv[1]).data_root))
found = count(conn, sys.argv[2])
times = []
for _ in range(2000):
    started = time.perf_counter()
    count(conn, sys.argv[2])
    times.append(time.perf_counter() - started)
print(name, found, statistics.median(times) * 1e6)
"""

HOLDER = """
import sys
from cmrunner.core import identity
i = identity.of(int(sys.argv[1]))
print(i.boot_id, i.pid, i.starttime)
"""


def _cm(python: str, args: list[str], stdin: dict | None, env: dict[str, str]) -> dict:
    proc = subprocess.run([python, "-I", "-m", "cmrunner", *args], input=json.dumps(stdin).encode() if stdin else b"",
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[:300]
    out = proc.stdout.decode().strip()
    return json.loads(out) if out.startswith("{") else {"stdout": out}


def _hold_lease(python: str, home: str, db: str) -> subprocess.Popen:
    sleeper = subprocess.Popen(["sleep", "3600"])
    holder = subprocess.run([python, "-I", "-c", HOLDER, str(sleeper.pid)], capture_output=True, check=True)
    boot_id, pid, start = holder.stdout.decode().split()
    wait_no_drain(home)
    conn = sqlite3.connect(db, isolation_level=None, timeout=10)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT OR REPLACE INTO drain_lease VALUES (1, ?, ?, ?, 'held', 0)", (boot_id, int(pid), int(start)))
    conn.execute("COMMIT")
    conn.close()
    return sleeper


def _codex_session(python: str, home: str, root: str, cwd: str, name: str, turns: int, env: dict[str, str]) -> None:
    transcript = os.path.join(root, f"{name}.jsonl")
    with open(transcript, "w") as handle:
        handle.write(session_meta(name) + "\n")
    common = {"session_id": name, "transcript_path": transcript, "cwd": cwd}
    hook = ["hook", "codex", "--home", home]
    _cm(python, hook, dict(common, hook_event_name="SessionStart", source="startup"), env)
    for n in range(turns):
        turn, text = f"{name}-t{n}", f"Fact {n} of {name}: we deploy with Nomad and keep staging on Postgres 16."
        _cm(python, hook, dict(common, hook_event_name="UserPromptSubmit", turn_id=turn, prompt=text), env)
        with open(transcript, "a") as handle:
            for record in ({"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}},
                           {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                               "type": "UserMessage", "id": f"u-{turn}", "content": [{"type": "text", "text": text}]}}},
                           {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                               "type": "AgentMessage", "id": f"a-{turn}", "content": [{"type": "Text", "text": "Noted."}]}}},
                           {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}}):
                handle.write(rollout_line(record) + "\n")
        _cm(python, hook, dict(common, hook_event_name="Stop", turn_id=turn), env)


def _pi_turns(python: str, home: str, cwd: str, turns: int, env: dict[str, str]) -> None:
    def send(event: str, payload: dict, event_id: str) -> None:
        _cm(python, ["capture", "--home", home], {"version": 1, "sessionId": "pi-bench", "eventId": event_id,
                                                        "event": event, "cwd": cwd, "hostInstance": "pi:bench:1",
                                                        "payload": payload}, env)
    for n in range(turns):
        text = f"Pi fact {n}: I use helix as my editor."
        send("input", {"text": text, "source": "interactive", "hasImages": False}, f"in-{n}")
        send("message_end", {"role": "user", "text": text, "hasImages": False}, f"u-{n}")
        send("message_end", {"role": "assistant", "text": "ok", "hasImages": False}, f"a-{n}")
        send("agent_end", {"aborted": False}, f"e-{n}")


def _claude_turns(python: str, home: str, cwd: str, turns: int, env: dict[str, str]) -> None:
    common = {"session_id": "claude-bench", "transcript_path": os.path.join(cwd, "claude.jsonl"), "cwd": cwd}
    hook = ["hook", "claude", "--home", home]
    _cm(python, hook, dict(common, hook_event_name="SessionStart", source="startup"), env)
    for n in range(turns):
        _cm(python, hook, dict(common, hook_event_name="UserPromptSubmit", prompt_id=f"p{n}",
                                     prompt=f"Claude fact {n}: our CI runs on Buildkite."), env)
        _cm(python, hook, dict(common, hook_event_name="Stop", prompt_id=f"p{n}",
                                     last_assistant_message="Done."), env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the installation to time")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--label", default="this installation")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="cm-bench-fresh-")
    sleeper = None
    try:
        home = os.path.join(root, "home")
        env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE="bench:1")
        folders = {}
        for name in ("P", "Q"):
            folders[name] = os.path.join(root, name)
            os.mkdir(folders[name])
        _cm(args.python, ["config", "init", "--home", home], None, env)
        scope_p = _cm(args.python, ["--home", home, "project", "register", folders["P"], "P"], None, env)["stdout"]
        _cm(args.python, ["--home", home, "project", "register", folders["Q"], "Q"], None, env)
        scope = "project:" + scope_p.split()[1]
        memory = os.path.join(home, "data", "memory")
        os.makedirs(memory, exist_ok=True)
        for target, title in (("profile", "Profile"), ("preferences", "Preferences")):
            with open(os.path.join(memory, f"{target}.md"), "w") as handle:
                handle.write(f"# {title}\n\n" + "".join(f"## Item {n}\nThe user keeps fact {n} in mind.\n\n"
                                                       for n in range(40))[:2048])
        _codex_session(args.python, home, root, folders["P"], "warm", 0, env)  # creates the store
        sleeper = _hold_lease(args.python, home, os.path.join(home, "data", "runtime.sqlite"))
        for n in range(3):
            _codex_session(args.python, home, root, folders["P"], f"codex-p{n}", 10, env)
        _codex_session(args.python, home, root, folders["Q"], "codex-q", 10, env)
        _pi_turns(args.python, home, folders["P"], 10, env)
        _claude_turns(args.python, home, folders["P"], 10, env)

        start = [args.python, "-I", "-m", "cmrunner", "hook", "codex", "--home", home]
        bare = [args.python, "-I", "-c", "pass"]
        shown = _cm(args.python, start[4:], {"session_id": "shown", "transcript_path": None, "cwd": folders["P"],
                                                   "hook_event_name": "SessionStart", "source": "startup"}, env)
        line = shown["hookSpecificOutput"]["additionalContext"].rstrip("\n").split("\n")[-1]
        load_before = os.getloadavg()
        a_ms: list[float] = []
        b_ms: list[float] = []
        for n in range(args.pairs):
            event = {"session_id": f"fresh-{n}", "transcript_path": None, "cwd": folders["P"],
                     "hook_event_name": "SessionStart", "source": "startup"}
            ms, code = timed_run(start, json.dumps(event).encode(), env)
            assert code == 0, "SessionStart failed"
            a_ms.append(ms)
            ms, code = timed_run(bare, b"", env)
            assert code == 0
            b_ms.append(ms)
        load_after = os.getloadavg()
        counted = subprocess.run([args.python, "-I", "-c", COUNT, home, scope], capture_output=True, env=env, check=True)
        name, found, micros = counted.stdout.decode().rsplit(" ", 2)
        ratios = sorted(a / b for a, b in zip(a_ms, b_ms))
        body = "\n".join([
            f"{args.label}. Machine: {machine()}; load average (1/5/15 min) {load_before[0]:.1f}/{load_before[1]:.1f}/"
            f"{load_before[2]:.1f} before, {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f} after; "
            f"{args.pairs} pairs.",
            f"- the injected block's last line: `{line}`",
            f"- SessionStart median {statistics.median(a_ms):.1f} ms, bare `python -I -c pass` median "
            f"{statistics.median(b_ms):.1f} ms; per-pair ratio median **{statistics.median(ratios):.2f}×** "
            f"(quartiles {ratios[len(ratios) // 4]:.2f}–{ratios[3 * len(ratios) // 4]:.2f})",
            f"- the count in-process: `{name}` = {found}, median {float(micros):.1f} µs a call",
        ])
        print(body)
        if args.write:
            write_section(f"freshness-{args.label.split()[0].lower()}", body)
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
