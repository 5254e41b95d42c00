"""Hand-edited memory files and the queue (issue 32): does one hand edit of profile.md stop the memory?

Method: for each shape of a hand edit (the issue's list, plus a file cm cannot parse: a code fence
never closed), a fresh temporary home configured for the loopback fake model (policy
``remember_user_turns``: each user turn becomes a section of profile.md), profile.md written in that
shape, ``--turns`` user turns admitted as ``--turns`` sealed batches (one job each) through the
chosen cm's own Python, then one real ``cm flush``. Counted from the store afterwards: jobs done /
dead / waiting to retry, observations processed / still queued (pending, claimed, in a job that
waits) / set aside dead, and whether profile.md still starts with the bytes the user wrote.

Usage: ``python bench/hand_edits.py [--cm PATH] [--turns 10] [--label after] [--write]``. ``--cm``
picks another installed cm (e.g. a venv of main's code for the "before" figures; its own Python
admits the turns, so the store has that cm's schema); ``--write`` adds the run to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, write_section

RESULTS = os.path.join(tempfile.gettempdir(), "cm-hand-edits-results.json")  # both runs, for the table

SHAPES = {
    "bullets under `# Profile`, no `## `": "# Profile\n\n- Lives in Lisbon.\n- Drinks green tea.\n",
    "changed H1": "# About me\n\n## Location\nLives in Lisbon.\n",
    "YAML front matter": "---\ntitle: me\n# a YAML comment\n---\n# Profile\n\n## Location\nLives in Lisbon.\n",
    "HTML comment": "# Profile\n<!-- mine:\n## not a section\n-->\n\n## Location\nLives in Lisbon.\n",
    "two sections, one title": "# Profile\n\n## Notes\nLisbon.\n\n## Notes\nTea.\n",
    "emptied file": "",
    "unclosed fence (cannot parse)": "# Profile\n\n## Location\nLisbon.\n```\nunclosed\n",
}

ADMIT = r"""
import sys
from cmrunner.capture import observations
from cmrunner.core import config as c, envfile, store
from cmrunner.core.home import DataPaths
home, url, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = c.default_config(home)
data["remote"] = {"provider": "openai-compatible", "baseUrl": url, "model": "fake-model", "apiKeyEnv": "CM_BENCH_KEY",
                  "api": "responses", "proxy": {"mode": "direct"}}
c.save(home, data)
envfile.update(home, {"CM_BENCH_KEY": "sk-test-7Qm2Xr9Lk4Vb8Nc1Zt6Hy3Wd5Pf0Gj2A"})
paths = DataPaths(c.load(home).data_root)
conn = store.open_store(paths)
for i in range(turns):
    with store.immediate(conn):
        observations.admit(conn, namespace="bench", entry_id=f"e{i}", text=f"I use tool number {i} for task {i}.",
                           scope="global", source="codex_user_delivery", observed_at="2026-11-30T00:00:00.000Z",
                           agent="codex", batch_id=f"b{i}", task_kind="observation")
conn.close()
print(paths.root)
"""


def _one(cm: str, shape: str, text: str, turns: int) -> dict:
    from cmrunner.synthetic import fakemodel

    python = os.path.join(os.path.dirname(cm), "python")
    with tempfile.TemporaryDirectory(prefix="cm-hand-edits-") as tmp:
        home = os.path.join(tmp, "home")
        env = {**os.environ, "COMMON_MEMORY_HOME": home}
        with fakemodel.running(os.path.join(tmp, "fm"), {"policy": "remember_user_turns"}) as fm:
            root = subprocess.run([python, "-I", "-c", ADMIT, home, fm.base_url, str(turns)], env=env, check=True,
                                  capture_output=True, text=True).stdout.strip()
            profile = os.path.join(root, "memory", "profile.md")
            os.makedirs(os.path.dirname(profile), mode=0o700, exist_ok=True)
            with open(profile, "w", encoding="utf-8") as handle:
                handle.write(text)
            started = time.monotonic()
            flush = subprocess.run([cm, "--home", home, "flush"], env=env, capture_output=True, text=True, timeout=600)
            seconds = time.monotonic() - started
        conn = sqlite3.connect(os.path.join(root, "runtime.sqlite"))
        try:
            jobs = dict(conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
            obs = dict(conn.execute("SELECT state, COUNT(*) FROM observations GROUP BY state").fetchall())
        finally:
            conn.close()
        with open(profile, encoding="utf-8") as handle:
            kept = handle.read().startswith(text)
    queued = sum(obs.get(s, 0) for s in ("pending", "claimed", "retry", "running"))
    return {"shape": shape, "exit": flush.returncode, "seconds": round(seconds, 1), "jobs_done": jobs.get("done", 0),
            "jobs_dead": jobs.get("dead", 0), "jobs_retry": jobs.get("retry", 0),
            "obs_processed": obs.get("processed", 0), "obs_queued": queued, "obs_dead": obs.get("dead", 0),
            "user_bytes_kept": kept}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cm", default=CM)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--label", default="after")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = [_one(args.cm, shape, text, args.turns) for shape, text in SHAPES.items()]
    for row in rows:
        print(json.dumps(row))
    stored = {}
    if os.path.exists(RESULTS):
        with open(RESULTS, encoding="utf-8") as handle:
            stored = json.load(handle)
    stored[args.label] = {"turns": args.turns, "rows": rows}
    with open(RESULTS, "w", encoding="utf-8") as handle:
        json.dump(stored, handle)
    if args.write:
        lines = [f"Machine: {machine()}. {args.turns} user turns, one job each, one `cm flush`.", "",
                 "| run | shape of profile.md | flush exit | jobs done / dead / retry | observations processed / "
                 "queued / dead | user's bytes kept | flush s |", "|---|---|---|---|---|---|---|"]
        for label, run in stored.items():
            for r in run["rows"]:
                lines.append(f"| {label} | {r['shape']} | {r['exit']} | {r['jobs_done']} / {r['jobs_dead']} / "
                             f"{r['jobs_retry']} | {r['obs_processed']} / {r['obs_queued']} / {r['obs_dead']} | "
                             f"{'yes' if r['user_bytes_kept'] else 'no'} | {r['seconds']} |")
        write_section("hand_edits", "\n".join(lines))


if __name__ == "__main__":
    main()
