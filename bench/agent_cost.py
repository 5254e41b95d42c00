"""What the Memory Agent sends per user turn, measured through the real hooks and the real drain.

Method: a fresh temporary home points at the project's fake model (``cmrunner.synthetic.fakemodel``,
127.0.0.1) in its diligent-model mode (policy ``remember_user_turns``: it reads every page it is
offered, the snapshot manifest and every non-empty document to the end, then submits). A Codex
session is played through ``cm hook codex`` subprocesses with a Codex-shaped transcript, exactly
by ``cmrunner.synthetic.codexplay`` (as ``cm demo`` and ``cm eval`` do): SessionStart, for each turn
UserPromptSubmit and Stop, then SessionEnd. The
hooks spawn the real detached drain, which seals the batches and runs the real Memory Agent over
the Responses protocol. Once the home is idle, the fake model's request log is the ground truth:
requests, bytes (each body serialized compactly, as the agent sends it) and tokens.

Tokens: the fake model reports none of its own worth trusting, so tokens are estimated from bytes,
``ceil(bytes / 4)`` (roughly right for English and JSON with GPT-family tokenizers), the rule every
recorded run of this benchmark used, so its before and after rows compare; the ledger's own
estimate (``cmrunner/agentrt/tokencount.py``) counts ``o200k_base`` tokens instead.

Sessions: the 21-turn session (short prompts and replies, three of them "remember that ...",
sealed 10 + 10 + 1) in two model styles: one tool call per response (as ``cm demo`` runs) and
every independent call at once (``batch``); and the demo's two turns.
Usage: `python bench/agent_cost.py [--write] [--label before|after]`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import compact_size, machine, play_codex_session, write_section

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel

KEY = "COMMON_MEMORY_API_KEY"
REMEMBER = {4: "Remember that I deploy with Nix flakes.", 11: "Remember that I review code in the morning.",
            18: "Remember that this repo targets Python 3.12."}
PROMPTS_21 = tuple(REMEMBER.get(n, f"Small step {n}: rename the helper in module {n}.") for n in range(1, 22))
REPLY = "Done."
# The two turns `cm demo` played when the targets below were set (the demo now plays more).
DEMO_PROMPTS = ("I prefer tabs over spaces in Go code.", "My main project is a small Rust CLI called tidewatch.")


def _home(root: str, base_url: str) -> str:
    home = os.path.join(root, "home")
    data = config_mod.default_config(home)
    data["remote"] = {"provider": "openai-compatible", "baseUrl": base_url, "model": "synthetic-bench",
                      "apiKeyEnv": KEY, "apiKeySource": "private-env", "api": "responses",
                      "proxy": {"mode": "direct"}}
    config_mod.save(home, data)
    envfile.update(home, {KEY: "bench-key-not-a-secret"})
    return home


def play(prompts: tuple[str, ...], batch: bool) -> dict:
    """One Codex session through the real hooks; what the Memory Agent sent for it."""
    root = tempfile.mkdtemp(prefix="cm-bench-cost-")
    try:
        script = {"policy": "remember_user_turns", "batch": batch}
        with fakemodel.running(os.path.join(root, "model"), script, lifetime_seconds=900) as model:
            home = _home(root, model.base_url)
            play_codex_session(root, home, prompts, REPLY, "bench-session")
            requests = model.model_requests()
            receipts = DataPaths(config_mod.load(home).data_root).receipts
            committed = len(os.listdir(receipts)) if os.path.isdir(receipts) else 0
        sizes = [compact_size(r["body"]) for r in requests]
        largest = max(requests, key=lambda r: len(json.dumps(r["body"])))["body"] if requests else {}
        fixed = {"instructions": len(str(largest.get("instructions", "")).encode("utf-8")),
                 "tools": compact_size(largest.get("tools", [])),
                 "task": len(str((largest.get("input") or [{}])[0].get("content", "")).encode("utf-8"))}
        total = sum(sizes)
        usages = [r.get("usage") or {} for r in requests]
        cached = {"cached": sum(u.get("cached_tokens", 0) for u in usages),
                  "input": sum(u.get("input_tokens", 0) for u in usages)}
        return {"turns": len(prompts), "requests": len(requests), "bytes": total, "cache": cached,
                "tokens": sum(math.ceil(s / 4) for s in sizes), "jobs": committed, "fixed": fixed,
                "per_turn_bytes": total / len(prompts), "per_turn_tokens": sum(math.ceil(s / 4) for s in sizes) / len(prompts),
                "per_turn_requests": len(requests) / len(prompts)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _row(name: str, r: dict) -> str:
    return (f"| {name} | {r['turns']} | {r['jobs']} | {r['requests']} | {r['bytes']:,} | {r['tokens']:,} | "
            f"{r['per_turn_bytes']:,.0f} | {r['per_turn_tokens']:,.0f} | {r['per_turn_requests']:.2f} | "
            f"{r['fixed']['instructions']:,} / {r['fixed']['tools']:,} / {r['fixed']['task']:,} |")


# The issues' targets: a 21-turn session in at most 2.5 KB (2,500 bytes) per user turn (issue 35; 5 KB
# before) and 12 requests (the conservative one-call-per-response model), the demo's two turns in at
# most 4 requests; the fixed text of a request (instructions and tools) in at most 5 KB.
TARGETS = {"session": (2500, 12), "demo": (None, 4), "fixed": 5000}


def measure() -> tuple[list[str], list[str]]:
    session, parallel, demo = play(PROMPTS_21, False), play(PROMPTS_21, True), play(DEMO_PROMPTS, False)
    rows = ["| session | user turns | jobs committed | requests | bytes sent | tokens (est.) | bytes / user turn | "
            "tokens / user turn | requests / user turn | fixed text of one request: instructions / tools / task "
            "(bytes) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
            _row("21-turn Codex session, one call per response", session),
            _row("21-turn Codex session, parallel calls", parallel),
            _row("the first `cm demo`'s two turns, one call per response", demo)]
    per_turn, requests = TARGETS["session"]
    fixed = session["fixed"]["instructions"] + session["fixed"]["tools"]
    verdict = [f"Targets: 21-turn session ≤ {per_turn:,} bytes per user turn "
               f"({'met' if session['per_turn_bytes'] <= per_turn else 'NOT met'}: {session['per_turn_bytes']:,.0f}) "
               f"and ≤ {requests} requests ({'met' if session['requests'] <= requests else 'NOT met'}: "
               f"{session['requests']}); demo ≤ {TARGETS['demo'][1]} requests "
               f"({'met' if demo['requests'] <= TARGETS['demo'][1] else 'NOT met'}: {demo['requests']}); "
               f"fixed text of a request ≤ {TARGETS['fixed']:,} bytes ({'met' if fixed <= TARGETS['fixed'] else 'NOT met'}: "
               f"{fixed:,}).",
               f"Prompt cache (the fake model's count of the longest prefix each request shares with an earlier "
               f"one, bytes / 4): 21-turn session {session['cache']['cached']:,} of {session['cache']['input']:,} "
               f"input tokens cached ({100 * session['cache']['cached'] / max(1, session['cache']['input']):.0f}%)."]
    return rows, verdict


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--label", choices=("before", "after"), default="after")
    args = parser.parse_args()
    rows, verdict = measure()
    body = "\n".join([f"Machine: {machine()}. Fake model on 127.0.0.1 (diligent policy), real hooks and drain, "
                      "Responses protocol; tokens estimated as ceil(bytes / 4) per request.", "", *rows, "", *verdict])
    print(body)
    if args.write:
        write_section(f"agent-cost-{args.label}", body)


if __name__ == "__main__":
    main()
