"""Benchmark-style fuzz run (issue 22): hostile input on every entry, then the poisoned-queue check.

Method: a fresh temporary home (document import and relay allowed, the global context), then one
seeded run of ``tests/support/hostile.py`` against the chosen ``cm``: ``cm hook codex`` and
``cm hook work`` (one real process per event, sessions opened by a valid SessionStart, their
transcripts growing hostile lines too), ``cm capture`` (one process per Pi event), ``cm mcp`` (every
call over one stdio session) and ``cm import --no-wait`` (hostile files and paths). MCP has its own home (what it accepts are relayed
turns for the Writer, not inbox rows; the health check is about the inboxes). Drains the hooks
start run as they would. Then: a foreground ``cm session-drain``; a valid Pi session is admitted
and ``cm flush`` runs against the loopback synthetic model ("poisoned-queue health": did it exit 0
and commit that session?). Counted: inputs tried, tracebacks, INTERNAL_ERROR (and MCP
"failed unexpectedly"), MCP lines that got no answer at all, refused inputs that were admitted anyway, markers of refused inputs found
in the store's files, sessions a drain set aside as UNEXPECTED_FAILURE, the last drain failure.

Usage: ``python bench/fuzz.py [--cm PATH] [--seed 22] [--hooks 2000] [--captures 1500] [--mcp 4000]
[--imports 120] [--label after] [--write]``. ``--cm`` picks another installed cm (e.g. a venv of
main's code for the "before" figures); ``--write`` adds the run to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, ROOT, machine, wait_no_drain, write_section

sys.path.insert(0, os.path.join(ROOT, "tests"))
from support import hostile

RESULTS = os.path.join(tempfile.gettempdir(), "cm-fuzz-results.json")  # both runs, for the table


def _configure(cm: str, home: str, env: dict[str, str]) -> None:
    subprocess.run([cm, "config", "init"], env=env, check=True, capture_output=True)
    path = os.path.join(home, "config.json")
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data["disclosure"]["allowedProvenance"] = ["user_explicit", "agent_observation", "document_import"]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)


def _health(cm: str, home: str, env: dict[str, str], root: str) -> dict:
    """A valid Pi session after the fuzz: is it committed by the next ``cm flush``?"""
    from cmrunner.synthetic import fakemodel

    def send(event_id: str, name: str, payload: dict) -> int:
        event = {"version": 1, "sessionId": "health", "eventId": event_id, "event": name, "cwd": root,
                 "hostInstance": "pi:health:1", "payload": payload}
        return subprocess.run([cm, "capture", "--home", home], input=json.dumps(event).encode(), env=env,
                              capture_output=True, timeout=60).returncode

    text = "After the fuzz, I still use helix as my editor"
    codes = [send("h1", "input", {"text": text, "source": "interactive", "hasImages": False}),
             send("h2", "message_end", {"role": "user", "text": text, "hasImages": False, "timestamp": 1795995559356}),
             send("h3", "agent_end", {"aborted": False}), send("h4", "session_shutdown", {"reason": "quit"})]
    with fakemodel.running(os.path.join(root, "fm"), {"policy": "remember_user_turns"}) as fm:
        path = os.path.join(home, "config.json")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        data["remote"] = {"provider": "openai-compatible", "baseUrl": fm.base_url, "model": "fake-model",
                          "apiKeyEnv": "CM_FUZZ_KEY", "api": "responses", "proxy": {"mode": "direct"}}
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
        with open(os.path.join(home, ".env"), "a", encoding="utf-8") as handle:
            handle.write("CM_FUZZ_KEY=sk-fuzz-not-a-real-key\n")
        os.chmod(os.path.join(home, ".env"), 0o600)
        started = time.monotonic()
        flush = subprocess.run([cm, "flush"], env=env, capture_output=True, timeout=600)
        seconds = time.monotonic() - started
    import sqlite3

    conn = sqlite3.connect(f"file:{os.path.join(home, 'data', 'runtime.sqlite')}?mode=ro", uri=True)
    try:
        state = conn.execute("SELECT state FROM observations WHERE text = ?", (text,)).fetchall()
    finally:
        conn.close()
    status = json.loads(subprocess.run([cm, "status", "--json"], env=env, capture_output=True).stdout or b"{}")
    failure = status.get("lastDrainFailure") or {}
    return {"admitted": codes == [0, 0, 0, 0], "flushExit": flush.returncode,
            "flushLine": flush.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] if flush.returncode else [],
            "committed": state == [("processed",)], "flushSeconds": round(seconds, 1),
            "lastDrainFailure": failure.get("code"), "isolatedGroups": [(g["issue"], g["count"])
                                                                        for g in status.get("problems", {}).get("isolated", [])],
            "isolated": len(status.get("isolatedSessions", []))}


def run(cm: str, seed: int, hooks: int, captures: int, mcp: int, imports: int) -> dict:
    root = tempfile.mkdtemp(prefix="cm-fuzz-")
    home = os.path.join(root, "home")
    env = dict(os.environ, COMMON_MEMORY_HOME=home, COMMON_MEMORY_HOST_INSTANCE="codex:fuzz:1")
    _configure(cm, home, env)
    mcp_home = os.path.join(root, "mcp-home")
    mcp_env = dict(env, COMMON_MEMORY_HOME=mcp_home)
    _configure(cm, mcp_home, mcp_env)
    tally, markers = hostile.run_all(cm, home, root, env, seed, hooks, captures, mcp, imports, mcp_env)
    wait_no_drain(home, timeout=120)
    drained = subprocess.run([cm, "session-drain", "--home", home], env=env, capture_output=True, timeout=300)
    result = tally.as_dict()
    result["drainExit"] = drained.returncode
    result["drainLine"] = drained.stderr.decode("utf-8", "replace").strip()[:200]
    result["markersInStore"] = len(hostile.markers_in_store(home, markers) + hostile.markers_in_store(mcp_home, markers))
    result["unexpectedIsolations"] = hostile.isolated_unexpected(home)
    result["health"] = _health(cm, home, env, root)
    result["examples"] = tally.problems()[:12]
    return result


def _row(label: str, r: dict) -> str:
    health = r["health"]
    healthy = f"{'yes' if health['committed'] else 'no'} (flush exit {health['flushExit']}" + (
        f": {health['flushLine'][0][:60]})" if health["flushLine"] else ")")
    return (f"| {label} | {r['total']} ({', '.join(f'{k} {v}' for k, v in r['cases'].items())}) | {r['tracebacks']} | "
            f"{r['internal']} | {r.get('mcpUnanswered', '-')} | {r['admittedBad']} / {r['markersInStore']} | {len(r['unexpectedIsolations'])} | "
            f"{r['drainExit']} | {healthy} | {r['seconds']} s |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cm", default=CM)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--hooks", type=int, default=2000)
    parser.add_argument("--captures", type=int, default=1500)
    parser.add_argument("--mcp", type=int, default=4000)
    parser.add_argument("--imports", type=int, default=120)
    parser.add_argument("--label", default="after")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--table-only", action="store_true", help="rewrite the table from the saved runs")
    args = parser.parse_args()
    runs = {}
    if os.path.exists(RESULTS):
        with open(RESULTS, encoding="utf-8") as handle:
            runs = json.load(handle)
    if not args.table_only:
        result = run(args.cm, args.seed, args.hooks, args.captures, args.mcp, args.imports)
        print(json.dumps(result, indent=2))
        runs[args.label] = result
        with open(RESULTS, "w", encoding="utf-8") as handle:
            json.dump(runs, handle, indent=2)
    if args.write:
        lines = ["| code | inputs tried | tracebacks | INTERNAL_ERROR | MCP lines unanswered | refused input admitted / its "
                 "marker in the store | sessions set aside as UNEXPECTED_FAILURE | final drain exit | valid session "
                 "committed by the next `cm flush` | time |", "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [_row(label, r) for label, r in runs.items()]
        write_section("fuzz", f"Seed {args.seed}; {machine()}.\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
