"""Benchmarks of the Writer with the scripted agent (no network), in one process.

(1) seal → published: for each of N sealed one-turn batches, the wall time from the admission
    commit to the end of ``Writer.run_once`` (claim, reads, render, stage, publish, DB commit),
    and the time the repository lock is held inside it.
(2) claim latency with 20,000 pending observations (2,000 sealed batches of 10): ``jobs.claim``
    inside ``BEGIN IMMEDIATE``, rolled back each time so the queue stays the same size.
(3) recovery with 5,000 historical receipts on disk and in the database: the drain-start
    housekeeping, ``housekeeping.at_drain_start`` (no transaction directory, so no repository lock
    and no replay; the retention rules' updates, which match nothing).
(4) section history: (1) again with history recording switched off in this process (its two
    steps replaced by no-ops: what the Writer did before it existed), alternating on/off in
    rounds on the same machine state; and store growth per 1,000 commits that each put one
    ~200-byte section, history on vs off (database size after a TRUNCATE checkpoint).
Usage: `python bench/writer.py [--batches 200] [--write]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import machine, summary, write_section

from cmrunner.capture import observations
from cmrunner.core import config as config_mod, history, store
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import commit, housekeeping, jobs
from cmrunner.writer_proc.port import ScriptedPort
from cmrunner.writer_proc.writer import Writer


def _setup(root: str) -> tuple[DataPaths, config_mod.Config]:
    home = os.path.join(root, "home")
    config_mod.save(home, config_mod.default_config(home))
    cfg = config_mod.load(home)
    return DataPaths(cfg.data_root), cfg


BODY = "fact {n}: " + "the user prefers small, reviewable commits with messages that say why. " * 3 + "\n"


def _retain(task: dict, reads) -> dict:
    ev = sorted(s.evidence_ref for s in reads.sources.values())
    n = ev[0][3:]
    return {"version": "memory_maintenance_v2", "request_id": task["request_id"], "decisions": [
        {"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": ev, "reason": "r",
         "admission": "remember", "lifetime": "stable",
         "operations": [{"op": "put_section", "target": "profile", "section": None, "title": f"Fact {n}",
                         "body": BODY.format(n=n)}]}]}


@contextmanager
def history_off(off: bool):
    """Replace history's two Writer steps with no-ops (the Writer before history existed)."""
    saved = history.stage, history.settle
    if off:
        history.stage = lambda *args, **kwargs: 0  # type: ignore[assignment]
        history.settle = lambda *args, **kwargs: []  # type: ignore[assignment]
    try:
        yield
    finally:
        history.stage, history.settle = saved


def seal_to_published(batches: int, raw: bool = False) -> tuple:
    root = tempfile.mkdtemp(prefix="cm-bench-writer-")
    try:
        paths, cfg = _setup(root)
        cfg.data["scheduler"]["leaseMs"] = 120_000
        writer = Writer(paths, cfg, ScriptedPort(_retain))
        holds: list[float] = []
        original = commit.repository_lock

        @contextmanager
        def timed_lock(p):
            with original(p):
                started = time.perf_counter()
                try:
                    yield
                finally:
                    holds.append((time.perf_counter() - started) * 1000)

        commit.repository_lock = timed_lock
        walls = []
        conn = store.open_store(paths)
        for i in range(batches):
            if i % 40 == 0:  # keep the profile under its 16 KiB budget: a fresh document every 40 facts
                for name in os.listdir(paths.memory) if os.path.isdir(paths.memory) else []:
                    if name.endswith(".md"):
                        os.unlink(os.path.join(paths.memory, name))
                with store.immediate(conn):
                    conn.execute("DELETE FROM document_versions")
                    conn.execute("DELETE FROM associations")
            with store.immediate(conn):
                observations.admit(conn, agent="bench", namespace="bench", entry_id=f"e{i}", text=f"observation {i}", scope="global",
                                   source="codex_user_delivery", observed_at="2026-11-30T00:00:00Z", batch_id=f"b{i}")
            started = time.perf_counter()
            outcome = writer.run_once()
            walls.append((time.perf_counter() - started) * 1000)
            assert outcome is not None and outcome.state == "committed", outcome
        commit.repository_lock = original
        conn.close()
        writer.close()
        # Only the commit's lock holds (recovery in run_once does not take the lock on this path).
        return (walls, holds) if raw else (summary(walls), summary(holds))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def store_growth(commits: int, off: bool) -> int:
    """Bytes the database grows by over ``commits`` commits of one section each (history on/off)."""
    root = tempfile.mkdtemp(prefix="cm-bench-growth-")
    try:
        paths, cfg = _setup(root)
        with history_off(off):
            writer = Writer(paths, cfg, ScriptedPort(_retain))
            conn = store.open_store(paths)

            def size() -> int:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                return os.path.getsize(paths.db)

            start = size()
            for i in range(commits):
                if i % 40 == 0:  # the profile's 16 KiB budget, as in (1)
                    if os.path.exists(paths.document("profile")):
                        os.unlink(paths.document("profile"))
                    with store.immediate(conn):
                        conn.execute("DELETE FROM document_versions")
                with store.immediate(conn):
                    observations.admit(conn, agent="bench", namespace="bench", entry_id=f"e{i}", text=f"observation {i}",
                                       scope="global", source="codex_user_delivery",
                                       observed_at="2026-11-30T00:00:00Z", batch_id=f"b{i}")
                outcome = writer.run_once()
                assert outcome is not None and outcome.state == "committed", outcome
            grown = size() - start
            conn.close()
            writer.close()
        return grown
    finally:
        shutil.rmtree(root, ignore_errors=True)


def claim_latency(pending: int = 20_000, samples: int = 200) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-claim-")
    try:
        paths, cfg = _setup(root)
        conn = store.open_store(paths)
        with store.immediate(conn):
            for i in range(pending):
                observations.admit(conn, agent="bench", namespace="bench", entry_id=f"e{i}", text=f"turn {i}", scope="global",
                                   source="codex_user_delivery", observed_at="2026-11-30T00:00:00Z",
                                   batch_id=f"b{i // 10}")
        times = []
        for _ in range(samples):
            conn.execute("BEGIN IMMEDIATE")
            started = time.perf_counter()
            job = jobs.claim(conn, cfg.data["scheduler"], int(time.time() * 1000))
            times.append((time.perf_counter() - started) * 1000)
            assert job is not None and len(job.observation_ids) == 10
            conn.execute("ROLLBACK")
        conn.close()
        return summary(times)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def recovery_time(receipts: int = 5_000, samples: int = 50) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-recover-")
    try:
        paths, cfg = _setup(root)
        conn = store.open_store(paths)
        os.makedirs(paths.receipts, exist_ok=True)
        now = int(time.time() * 1000)
        with store.immediate(conn):
            for i in range(receipts):
                job_id = f"job{i:05d}"
                conn.execute("INSERT INTO jobs(id, token, generation, state, scope, provenance, created_at, updated_at)"
                             " VALUES (?, 't', 1, 'done', 'global', 'user_explicit', ?, ?)", (job_id, now, now))
                conn.execute("INSERT INTO receipts(id, job_id, committed_at) VALUES (?, ?, ?)", (job_id, job_id, now))
                with open(os.path.join(paths.receipts, f"{job_id}.json"), "w") as handle:
                    handle.write(json.dumps({"id": job_id}, separators=(",", ":")) + "\n")
        conn.close()
        writer = Writer(paths, cfg, ScriptedPort(_retain))
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            housekeeping.at_drain_start(paths, writer.conn, cfg, writer.now)
            times.append((time.perf_counter() - started) * 1000)
        writer.close()
        return summary(times)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    wall, hold = seal_to_published(args.batches)
    claim = claim_latency()
    recover = recovery_time()

    rounds = {False: ([], []), True: ([], [])}
    for _ in range(2):  # alternate, so both see the same machine state
        for off in (True, False):
            with history_off(off):
                w, h = seal_to_published(max(args.batches // 2, 20), raw=True)
            rounds[off][0].extend(w)
            rounds[off][1].extend(h)
    growth = {off: store_growth(1000, off) for off in (False, True)}

    def ok(value: float, target: float) -> str:
        return "met" if value <= target else "NOT met"

    body = "\n".join([
        f"Machine: {machine()}. Scripted agent, no network; fsync on every publish and commit.",
        "",
        "| measurement | n | median (ms) | p95 (ms) | max (ms) | target |",
        "|---|---:|---:|---:|---:|---|",
        f"| seal → published, one-turn batch | {wall['n']} | {wall['median']:.2f} | {wall['p95']:.2f} | {wall['max']:.2f} | median ≤ 10: {ok(wall['median'], 10)} |",
        f"| repository lock held per commit | {hold['n']} | {hold['median']:.2f} | {hold['p95']:.2f} | {hold['max']:.2f} | p95 ≤ 5: {ok(hold['p95'], 5)} |",
        f"| claim with 20,000 pending observations | {claim['n']} | {claim['median']:.3f} | {claim['p95']:.3f} | {claim['max']:.3f} | ≤ 1: {ok(claim['median'], 1)} |",
        f"| recovery with 5,000 historical receipts | {recover['n']} | {recover['median']:.3f} | {recover['p95']:.3f} | {recover['max']:.3f} | ≤ 5: {ok(recover['median'], 5)} |",
        "",
        "Section history on vs off (alternating rounds, same run):",
        "",
        "| measurement | history | n | median (ms) | p95 (ms) | max (ms) |",
        "|---|---|---:|---:|---:|---:|",
        *[f"| {label} | {'off' if off else 'on'} | {s['n']} | {s['median']:.2f} | {s['p95']:.2f} | {s['max']:.2f} |"
          for label, index in (("seal → published", 0), ("repository lock held", 1))
          for off in (True, False) for s in [summary(rounds[off][index])]],
        "",
        f"Store growth per 1,000 commits of one ~{len(BODY) + 10}-byte section each: history off "
        f"{growth[True] / 1024:.0f} KiB, on {growth[False] / 1024:.0f} KiB "
        f"(+{(growth[False] - growth[True]) / 1024:.0f} KiB, {(growth[False] - growth[True]) / 1000:.0f} bytes per commit).",
    ])
    print(body)
    if args.write:
        write_section("writer", body)


if __name__ == "__main__":
    main()
