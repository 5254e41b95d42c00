"""What re-importing a file after a one-section edit costs, against what its first import cost.

Method: a fresh temporary home points at the project's fake model (``cmrunner.synthetic.fakemodel``,
127.0.0.1) in its diligent-model mode (policy ``ignore``: it reads every page it is offered, the
memory manifest and every non-empty document, then submits; one tool call per response, the
Responses protocol). A realistic instruction file of 40 sections (a title, 13 areas of a short
intro and two topics each, lists and prose, about 20 KB; seeded, so every run imports the same
bytes) is imported with ``cm import FILE --yes`` (the foreground Writer loop) in a subprocess; one
topic in the middle is edited (one list item reworded) and the file is imported again; then it is
imported a third time unchanged. For each step the disclosure ledger's new rows give requests,
bytes sent and tokens (input + output: the fake model's report, a quarter of each body's bytes),
the fake model's request log gives the o200k_base count of what it received, and the plan line
``cm import`` printed gives the estimate. ``--label before`` records a run on code without
per-section identity (the re-import sends the whole file); ``after`` the current code.
Usage: `python bench/import_delta.py [--runs 3] [--write] [--label before|after]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, write_section
from import_cost import _home as bench_home  # the same fake-model home as the import-cost bench

from cmrunner.agentrt import tokencount
from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel

WORDS = ("build", "cache", "module", "review", "tests", "merge", "deploy", "rollback", "logs", "notes", "decision",
         "service", "schema", "migration", "fixture", "release", "branch", "lint", "types", "docs", "queue")


def instruction_file(seed: int = 26) -> str:
    """40 sections: a title, then 13 areas of an intro and two topics (lists and prose)."""
    rng = random.Random(seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18))).capitalize() + "."

    out = ["# Engineering handbook\n\n" + " ".join(sentence() for _ in range(3)) + "\n"]
    for area in range(1, 14):
        out.append(f"\n## Area {area}: {rng.choice(WORDS)}\n\n" + " ".join(sentence() for _ in range(2)) + "\n")
        for topic in ("Conventions", "Checks"):
            items = "".join(f"- {sentence()}\n" for _ in range(rng.randint(3, 6)))
            out.append(f"\n### {topic} ({area})\n\n{items}\n" + " ".join(sentence() for _ in range(4)) + "\n")
    return "".join(out)


def _ledger(home: str) -> tuple[int, int, int]:
    db = DataPaths(config_mod.load(home).data_root).db
    if not os.path.exists(db):  # before the first import
        return 0, 0, 0
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT COUNT(*), SUM(request_bytes), SUM(input_tokens + output_tokens) FROM ledger").fetchone()
    finally:
        conn.close()
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def _step(home: str, path: str, model: fakemodel.FakeModel) -> dict:
    before, seen = _ledger(home), len(model.model_requests())
    done = subprocess.run([CM, "--home", home, "import", path, "--yes"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"cm import exited {done.returncode}: {done.stderr.strip()}")
    after = _ledger(home)
    received = model.model_requests()[seen:]
    o200k = sum(tokencount.estimate(json.dumps(r["body"], ensure_ascii=False, separators=(",", ":")).encode())[0]
                for r in received)
    plan = next((line for line in done.stdout.splitlines() if line.startswith("plan: ")), "")
    estimate = int(plan.split("about ", 1)[1].split(" tokens", 1)[0].replace(",", "")) if "about " in plan else 0
    return {"requests": after[0] - before[0], "bytes": after[1] - before[1], "tokens": after[2] - before[2],
            "o200k": o200k, "estimate": estimate}


def run_once() -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-delta-")
    try:
        with fakemodel.running(os.path.join(root, "model"), {"policy": "ignore"}, lifetime_seconds=900) as model:
            home = bench_home(root, model.base_url, caps_off=False)
            text = instruction_file()
            path = os.path.join(root, "AGENTS.md")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            first = _step(home, path, model)
            marker = "\n### Checks (7)\n\n- "
            edited = text.replace(marker, marker + "Always run the migration tests first. ", 1)
            assert edited != text
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(edited)
            changed = _step(home, path, model)
            unchanged = _step(home, path, model)
        return {"file_bytes": len(text.encode()), "first": first, "changed": changed, "unchanged": unchanged}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--label", choices=("before", "after"), default="after")
    parser.add_argument("--code", default="this checkout", help="which code was installed, for the record")
    args = parser.parse_args()
    results = [run_once() for _ in range(args.runs)]
    for r in results:
        print(json.dumps(r), flush=True)
    rows = ["| step | requests | bytes sent | tokens (ledger) | o200k of the requests | plan's estimate |",
            "|---|---:|---:|---:|---:|---:|"]
    for step, name in (("first", "first import"), ("changed", "re-import after a 1-section edit"),
                       ("unchanged", "re-import, unchanged")):
        med = {k: statistics.median(r[step][k] for r in results) for k in results[0][step]}
        rows.append(f"| {name} | {med['requests']:.0f} | {med['bytes']:,.0f} | {med['tokens']:,.0f} | "
                    f"{med['o200k']:,.0f} | {med['estimate']:,.0f} |")
    body = "\n".join([f"Machine: {machine()}. A 40-section instruction file ({results[0]['file_bytes']:,} bytes), "
                      f"`cm import FILE --yes` (foreground Writer loop), fake model on 127.0.0.1 (diligent reader, "
                      f"policy ignore, Responses protocol); code: {args.code}; median of {len(results)} runs, each in a "
                      "fresh home.",
                      "", *rows])
    print(body)
    if args.write:
        write_section(f"import-delta-{args.label}", body)


if __name__ == "__main__":
    main()
