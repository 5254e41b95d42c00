"""Benchmarks of the Writer with the scripted agent (no network), in one process.

(1) seal → published: for each of N sealed one-turn batches, the wall time from the admission
    commit to the end of ``Writer.run_once`` (claim, reads, render, stage, publish, DB commit),
    and the time the repository lock is held inside it.
(2) claim latency with 20,000 pending observations (2,000 sealed batches of 10): ``jobs.claim``
    inside ``BEGIN IMMEDIATE``, rolled back each time so the queue stays the same size.
(3) recovery with 5,000 historical receipts on disk and in the database: ``Writer.recover()``
    (repository lock, transaction scan, replay of nothing, prune of old bodies).
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
from cmrunner.core import config as config_mod, store
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import commit, jobs
from cmrunner.writer_proc.port import ScriptedPort
from cmrunner.writer_proc.writer import Writer


def _setup(root: str) -> tuple[DataPaths, config_mod.Config]:
    home = os.path.join(root, "home")
    config_mod.save(home, config_mod.default_config(home))
    cfg = config_mod.load(home)
    return DataPaths(cfg.data_root), cfg


def _retain(task: dict, reads) -> dict:
    ev = sorted(s.evidence_ref for s in reads.sources.values())
    n = ev[0][3:]
    return {"version": "memory_maintenance_v2", "request_id": task["request_id"], "decisions": [
        {"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": ev, "reason": "r",
         "admission": "remember", "lifetime": "stable",
         "operations": [{"op": "put_section", "target": "profile", "section": None, "title": f"Fact {n}",
                         "body": f"fact {n}\n"}]}]}


def seal_to_published(batches: int) -> tuple[dict, dict]:
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
                observations.admit(conn, namespace="bench", entry_id=f"e{i}", text=f"observation {i}", scope="global",
                                   source="codex_user_delivery", observed_at="2026-11-30T00:00:00Z", batch_id=f"b{i}")
            started = time.perf_counter()
            outcome = writer.run_once()
            walls.append((time.perf_counter() - started) * 1000)
            assert outcome is not None and outcome.state == "committed", outcome
        commit.repository_lock = original
        conn.close()
        writer.close()
        # Only the commit's lock holds (recovery in run_once does not take the lock on this path).
        return summary(walls), summary(holds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def claim_latency(pending: int = 20_000, samples: int = 200) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-claim-")
    try:
        paths, cfg = _setup(root)
        conn = store.open_store(paths)
        with store.immediate(conn):
            for i in range(pending):
                observations.admit(conn, namespace="bench", entry_id=f"e{i}", text=f"turn {i}", scope="global",
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
            writer.recover()
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
    ])
    print(body)
    if args.write:
        write_section("writer", body)


if __name__ == "__main__":
    main()
