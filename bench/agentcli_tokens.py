"""What one Memory Agent job costs on each runtime: the HTTP one, and Claude Code, Codex and Gemini
CLI as agent-CLI runtimes (issue 33).

Method: per runtime, a fresh temporary home and the project's fake model
(``cmrunner.synthetic.fakemodel``, 127.0.0.1, diligent policy ``remember_user_turns``: it reads
every page, the manifest and every non-empty document, then submits, one call per response). The
same two-turn Codex session (``cmrunner.synthetic.codexplay``: real ``cm hook codex`` subprocesses)
makes one job; the hooks' detached drain runs the Memory Agent, over the Responses protocol for
the HTTP runtime, or through the real CLI (installed in ``~/.cache/cm-test-hosts`` by the tests)
pointed at the same fake as its provider (Anthropic Messages, Responses, Gemini generateContent).
Ground truth is the fake's request log: the requests that carry the job's ``memory_task_v1``, their
count, their bytes (each body serialized compactly) and ``ceil(bytes / 4)`` as tokens, the same
estimate as ``bench/agent_cost.py``; "fixed" is the first request's bytes besides the conversation
(system prompt, tools and the CLI's own additions). The ledger's row for the job is shown beside it
(the tokens the CLI reported, which here are the fake's own counts of ``bytes / 4``).
Usage: ``python bench/agentcli_tokens.py [--write] [--label before|after]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import compact_size, machine, play_codex_session, write_section

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel

PROMPTS = ("I prefer tabs over spaces in Go code.", "My main project is a small Rust CLI called tidewatch.")
CACHE = os.environ.get("CM_HOST_CACHE") or os.path.expanduser("~/.cache/cm-test-hosts")
BINARIES = {"claude-code": f"{CACHE}/claude-2.1.328/node_modules/.bin/claude",
            "codex": f"{CACHE}/codex-0.169.0/node_modules/.bin/codex",
            "gemini": f"{CACHE}/gemini-0.61.0/node_modules/.bin/gemini"}
GEMINI_MODEL = "gemini-2.5-flash"


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _setup(runtime: str, root: str, model: fakemodel.FakeModel) -> tuple[str, dict[str, str]]:
    """The home and the environment the hooks (and so the drain and the CLI) run with."""
    home = os.path.join(root, "home")
    data = config_mod.default_config(home)
    scratch = os.path.join(root, "scratchhome")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "GEMINI_", "GOOGLE_",
                                                                    "OPENAI_", "CODEX_"))}
    env.update({"HOME": scratch, "CM_TEST_DRAIN_LINGER_MS": "0", "NO_COLOR": "1"})
    if runtime == "http":
        data["remote"] = {"provider": "openai-compatible", "baseUrl": model.base_url, "model": "synthetic-bench",
                          "apiKeyEnv": "COMMON_MEMORY_API_KEY", "apiKeySource": "private-env", "api": "responses",
                          "proxy": {"mode": "direct"}}
    else:
        data["remote"] = {"provider": "agent-cli", "agent": runtime, "agentPath": BINARIES[runtime]}
    if runtime == "claude-code":
        _write(os.path.join(scratch, ".claude.json"), json.dumps({"hasCompletedOnboarding": True}))
        env.update({"ANTHROPIC_BASE_URL": model.root_url, "ANTHROPIC_AUTH_TOKEN": "bench-not-a-secret",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"})
    elif runtime == "codex":
        codex_home = os.path.join(root, "codexhome")
        _write(os.path.join(codex_home, "config.toml"),
               f'model = "fake-model"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n'
               f'[model_providers.fake]\nname = "Fake"\nbase_url = "{model.base_url}"\nenv_key = "FAKE_API_KEY"\n'
               f'wire_api = "responses"\n[analytics]\nenabled = false\n')
        env.update({"CODEX_HOME": codex_home, "FAKE_API_KEY": "bench-not-a-secret"})
    elif runtime == "gemini":
        data["remote"]["model"] = GEMINI_MODEL
        _write(os.path.join(scratch, ".gemini", "settings.json"), json.dumps(
            {"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": False}}))
        env.update({"GOOGLE_GEMINI_BASE_URL": model.root_url, "GEMINI_API_KEY": "bench-not-a-secret"})
    config_mod.save(home, data)
    if runtime == "http":
        envfile.update(home, {"COMMON_MEMORY_API_KEY": "bench-key-not-a-secret"})
    return home, env


def play(runtime: str) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-cli-")
    saved = dict(os.environ)
    try:
        with fakemodel.running(os.path.join(root, "model"), {"policy": "remember_user_turns"},
                               lifetime_seconds=900) as model:
            home, env = _setup(runtime, root, model)
            os.environ.clear()
            os.environ.update(env)
            started = time.monotonic()
            play_codex_session(root, home, PROMPTS, "Done.", "bench")
            seconds = time.monotonic() - started
            requests = [r for r in model.model_requests() if "memory_task_v1" in json.dumps(r["body"])]
        db = DataPaths(config_mod.load(home).data_root).db
        conn = sqlite3.connect(db)
        ledger = conn.execute("SELECT SUM(input_tokens), SUM(output_tokens), GROUP_CONCAT(DISTINCT token_source), "
                              "GROUP_CONCAT(DISTINCT outcome) FROM ledger").fetchone()
        jobs = conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        conn.close()
        sizes = [compact_size(r["body"]) for r in requests]
        first = requests[0]["body"] if requests else {}
        conversation = first.get("input") or first.get("messages") or first.get("contents") or []
        return {"runtime": runtime, "requests": len(requests), "bytes": sum(sizes),
                "tokens": sum(math.ceil(s / 4) for s in sizes), "fixed": compact_size(first) - compact_size(conversation),
                "ledger": ledger, "jobs": dict(jobs), "seconds": seconds}
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--runtimes", default="http,claude-code,codex,gemini")
    parser.add_argument("--label", choices=("before", "after"), default="after",
                        help="which table --write replaces: before or after a change to the runtimes")
    args = parser.parse_args()
    rows = ["| runtime | jobs | model requests | bytes sent | tokens (est., bytes/4) | fixed bytes of the first "
            "request (system, tools, the CLI's own parts) | ledger tokens in / out (source) | wall time |",
            "|---|---|---:|---:|---:|---:|---|---:|"]
    for runtime in args.runtimes.split(","):
        r = play(runtime)
        ins, outs, source, outcome = r["ledger"]
        jobs = ", ".join(f"{n} {state}" for state, n in sorted(r["jobs"].items()))
        rows.append(f"| {runtime} | {jobs} | {r['requests']} | {r['bytes']:,} | {r['tokens']:,} | {r['fixed']:,} | "
                    f"{ins or 0:,} / {outs or 0:,} ({source}; {outcome}) | {r['seconds']:.1f} s |")
        print(rows[-1], flush=True)
    body = "\n".join([f"Machine: {machine()}. Method: bench/agentcli_tokens.py docstring (one job: the demo's two "
                      "Codex turns; the fake model on 127.0.0.1 as every runtime's provider).", "", *rows])
    print(body)
    if args.write:
        write_section("agent-cli-tokens" + ("-before" if args.label == "before" else ""), body)


if __name__ == "__main__":
    main()
