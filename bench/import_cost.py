"""What `cm import` of one Markdown file costs, measured through the real detached drain.

Method: for each size, a fresh temporary home points at the project's fake model
(``cmrunner.synthetic.fakemodel``, 127.0.0.1) in its diligent-model mode (one tool call per
response: it reads every page it is offered, the snapshot manifest and every non-empty document,
then submits; policy ``ignore``, so the cost is that of reading the file, not of a model's mistakes:
a policy that copies a large source into one section only measures its own rejections). A generated Markdown file of
prose under headings (seeded, so every run imports the same bytes) is imported with
``cm import --no-wait --yes`` in a subprocess; the detached drain runs the real Memory Agent
over the Responses protocol. Once no drain is left for the home (or the time bound passed: the
row says so), the disclosure ledger is the ground truth for requests, bytes sent and tokens
(input + output, as the spend caps count them: here the fake model's own report, a quarter of
each body's bytes), and the fake model's request log gives the largest single request body as
received and, tokenized with o200k_base (``agentrt.tokencount``), what a real provider of
that tokenizer would count; the plan's estimate (what `cm import` printed) stands beside both.

Readers: ``--readers bulk,blocks`` runs each size once per reading style of the fake model: ``bulk``
(the bulk ``read_ingest``) and ``blocks`` (the reference protocol's page-by-page reader:
``inspect_ingest`` of each bundle, then each block from offset 0 following ``next``).
Caps: ``--caps default`` keeps the default spend caps (a run stops where a new user's would);
``--caps off`` lifts them to see the whole cost of a file.
Usage: `python bench/import_cost.py [--sizes 10k,100k,1m,5m] [--caps default|off] [--bound 900]
[--readers bulk,blocks] [--write] [--label before|after]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, drain_pids, machine, write_section

from cmrunner.agentrt import tokencount
from cmrunner.core import config as config_mod, envfile
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel

KEY = "COMMON_MEMORY_API_KEY"
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000, "2m": 2 * 1024 * 1024, "5m": 5_000_000}
WORDS = ("the", "build", "cache", "keeps", "each", "module", "small", "and", "review", "tests", "before", "merging",
         "we", "prefer", "plain", "files", "over", "services", "when", "a", "deploy", "fails", "roll", "back",
         "first", "then", "read", "logs", "project", "notes", "record", "why", "decisions", "changed", "over",
         "time", "so", "newcomers", "find", "context", "quickly", "without", "asking")


def markdown(size: int, seed: int = 24) -> str:
    """Headings every ten paragraphs of 40-90 words, until ``size`` bytes (ASCII, so bytes = chars)."""
    rng = random.Random(seed)
    parts: list[str] = ["# Team handbook\n\n"]
    total, paragraph = len(parts[0]), 0
    while total < size:
        if paragraph % 10 == 0:
            piece = f"## Chapter {paragraph // 10 + 1}\n\n"
        else:
            words = [rng.choice(WORDS) for _ in range(rng.randint(40, 90))]
            piece = " ".join(words).capitalize() + ".\n\n"
        parts.append(piece)
        total += len(piece)
        paragraph += 1
    return "".join(parts)


def _home(root: str, base_url: str, caps_off: bool) -> str:
    home = os.path.join(root, "home")
    data = config_mod.default_config(home)
    data["remote"] = {"provider": "openai-compatible", "baseUrl": base_url, "model": "synthetic-bench",
                      "apiKeyEnv": KEY, "apiKeySource": "private-env", "api": "responses",
                      "proxy": {"mode": "direct"}}
    data["disclosure"]["allowedProvenance"] = ["user_explicit", "document_import"]
    if caps_off:
        data["spend"] = {"requestsPerHour": None, "tokensPerDay": None, "tokensPerMonth": None}
    config_mod.save(home, data)
    envfile.update(home, {KEY: "bench-key-not-a-secret"})
    return home


def _ledger(home: str) -> dict:
    db = DataPaths(config_mod.load(home).data_root).db
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT COUNT(*), SUM(request_bytes), SUM(input_tokens), SUM(output_tokens), "
                           "MAX(request_bytes) FROM ledger").fetchone()
        jobs = dict(conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        parts = dict(conn.execute("SELECT state, COUNT(*) FROM observations GROUP BY state").fetchall())
    finally:
        conn.close()
    requests, sent, inputs, outputs, largest = (int(v or 0) for v in row)
    return {"requests": requests, "bytes": sent, "tokens": inputs + outputs, "largest_ledger": largest,
            "jobs": jobs, "parts": parts}


def run_one(label: str, size: int, caps_off: bool, bound: float, reader: str = "bulk") -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-import-")
    try:
        script = {"policy": "ignore", "reading": reader}
        with fakemodel.running(os.path.join(root, "model"), script, lifetime_seconds=bound + 120) as model:
            home = _home(root, model.base_url, caps_off)
            path = os.path.join(root, f"handbook-{label}.md")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(markdown(size))
            started = time.monotonic()
            cmd = [CM, "--home", home, "import", path, "--no-wait"]
            done = subprocess.run(cmd + ["--yes"], capture_output=True, text=True, timeout=600)
            if done.returncode == 2 and "--yes" in done.stderr:  # main's code before `--yes` existed
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"cm import exited {done.returncode}: {done.stderr.strip()}")
            timed_out = False
            time.sleep(0.5)
            while drain_pids(home):
                if time.monotonic() - started > bound:
                    timed_out = True
                    break
                time.sleep(0.5)
            seconds = time.monotonic() - started
            for pid in drain_pids(home):  # only this home's drain, started by this run
                os.kill(pid, 15)
            requests = model.model_requests()
            largest = max((r.get("bytes") or 0 for r in requests), default=0)
            o200k = sum(tokencount.estimate(json.dumps(r["body"], ensure_ascii=False, separators=(",", ":"))
                                            .encode("utf-8"))[0] for r in requests)
            result = _ledger(home)
        planned = next((line for line in done.stdout.splitlines() if line.startswith("plan: ")), "")
        estimate = planned.split("about ", 1)[1].split(" tokens", 1)[0] if "about " in planned else "-"
        result.update({"estimate": estimate, "o200k": o200k, "size": os.path.getsize(path), "largest": largest, "seconds": seconds, "timed_out": timed_out,
                       "import_exit": done.returncode, "import_out": done.stdout.strip().splitlines()[:6],
                       "fake_requests": len(requests)})
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _row(label: str, r: dict) -> str:
    end = "time bound reached" if r["timed_out"] else "settled"
    jobs = ", ".join(f"{k} {v}" for k, v in sorted(r["jobs"].items()))
    parts = ", ".join(f"{k} {v}" for k, v in sorted(r["parts"].items()))
    return (f"| {label} ({r['size']:,} B) | {r['requests']} | {r['bytes']:,} | {r['bytes'] / r['size']:.1f}× | "
            f"{r['tokens']:,} | {r['o200k']:,} | {r['estimate']} | {r['largest']:,} | {r['seconds']:.0f} s, {end} | {parts} | {jobs} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10k,100k,1m,5m")
    parser.add_argument("--caps", choices=("default", "off"), default="default")
    parser.add_argument("--bound", type=float, default=900.0, help="seconds to wait for one import's drain")
    parser.add_argument("--readers", default="bulk")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--label", choices=("before", "after"), default="after")
    args = parser.parse_args()
    rows = ["| file (reader) | requests | bytes sent | sent / file | tokens (ledger) | o200k of the requests | plan's estimate | largest request (bytes) | "
            "time | parts (observations) | jobs |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for label in args.sizes.split(","):
        for reader in args.readers.split(","):
            result = run_one(label, SIZES[label], args.caps == "off", args.bound, reader)
            print(json.dumps({f"{label} {reader}": result}), flush=True)
            rows.append(_row(f"{label}, {reader}", result))
    body = "\n".join([f"Machine: {machine()}. `cm import --no-wait` of generated Markdown prose, real detached "
                      f"drain, fake model on 127.0.0.1 (diligent reader, policy ignore, one call per response, Responses protocol; reader: "
                      f"{args.readers}); "
                      f"spend caps: {args.caps}; tokens are the ledger's (input + output).", "", *rows])
    print(body)
    if args.write:
        write_section(f"import-cost-{args.label}-caps-{args.caps}", body)


if __name__ == "__main__":
    main()
