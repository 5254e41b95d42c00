"""Benchmarks of the network Memory Agent path against the synthetic model (loopback, no network).

(1) cm's own overhead per batch, excluding model time: a sealed 10-turn Codex-like batch is run
    through ``Writer.run_once`` with the real ``NetworkAgent`` (Responses, then Chat Completions)
    against the synthetic model in its diligent-model mode. Overhead = wall time of ``run_once``
    minus the time spent inside ``ModelClient.stream`` (request, waiting, streaming). It covers
    task build, tool serving, validation, rendering, staging and commit.
(2) Bytes sent to the provider per interaction: a scripted 21-turn session (sealed 10 + 10 + 1)
    processed end to end; the request bodies the synthetic model logged, summed, divided by 21.
(3) ``cm demo`` wall time (the README's main job), as a subprocess.
Usage: `python bench/agent.py [--batches 20] [--write]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, summary, write_section

from cmrunner.agentrt import netclient
from cmrunner.agentrt.agent import NetworkAgent
from cmrunner.capture import sessions
from cmrunner.core import config as config_mod, envfile, store
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel
from cmrunner.writer_proc.writer import Writer

KEY = "COMMON_MEMORY_API_KEY"


def _home(root: str, base_url: str, api: str) -> tuple[DataPaths, config_mod.Config]:
    home = os.path.join(root, "home")
    data = config_mod.default_config(home)
    data["remote"] = {"provider": "openai-compatible", "baseUrl": base_url, "model": "synthetic", "apiKeyEnv": KEY,
                      "api": api, "proxy": {"mode": "direct"}}
    config_mod.save(home, data)
    envfile.update(home, {KEY: "bench-key-not-a-secret"})
    cfg = config_mod.load(home)
    return DataPaths(cfg.data_root), cfg


def _session(paths: DataPaths, name: str, turns: int) -> None:
    conn = store.open_store(paths)
    with store.immediate(conn):
        conn.execute("INSERT INTO sessions VALUES (?, 'codex', 'h', ?, 0, 0)", (name, name))
        for n in range(turns):
            turn = f"{name}-t{n}"
            sessions.open_turn(conn, name, turn)
            sessions.capture_user(conn, name, turn, f"{name}-u{n}", f"In {name} turn {n} I said something worth keeping.",
                                  "global", "codex_user_delivery", "2026-11-30T00:00:00Z", 1 << 24)
            sessions.capture_context(conn, name, turn, f"{name}-a{n}", "assistant", f"reply {n}", "global",
                                     "2026-11-30T00:00:01Z", 1 << 24)
            sessions.settle(conn, name, turn, "settled")
        sessions.end(conn, name)
    conn.close()


def overhead(api: str, batches: int) -> tuple[dict, float]:
    root = tempfile.mkdtemp(prefix="cm-bench-agent-")
    in_model = [0.0]
    original = netclient.ModelClient.stream

    def timed(self, path, body, deadline, *rest):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            with original(self, path, body, deadline, *rest) as events:
                yield from [events]
        finally:
            in_model[0] += time.perf_counter() - started

    from contextlib import contextmanager

    netclient.ModelClient.stream = contextmanager(timed)  # type: ignore[assignment]
    try:
        with fakemodel.running(os.path.join(root, "model"), {"policy": "remember_user_turns", "batch": True},
                               lifetime_seconds=900) as model:
            paths, cfg = _home(root, model.base_url, api)
            results = []
            for b in range(batches):
                for name in os.listdir(paths.memory) if os.path.isdir(paths.memory) else []:
                    os.unlink(os.path.join(paths.memory, name))  # a fresh document each batch (16 KiB budget)
                conn = store.open_store(paths)
                with store.immediate(conn):
                    conn.execute("DELETE FROM document_versions")
                    conn.execute("DELETE FROM associations")
                conn.close()
                _session(paths, f"s{b}", 10)
                agent = NetworkAgent.from_config(cfg)
                writer = Writer(paths, cfg, agent)
                in_model[0] = 0.0
                started = time.perf_counter()
                outcome = writer.run_once()
                wall = time.perf_counter() - started
                writer.close()
                agent.close()
                assert outcome is not None and outcome.state == "committed", outcome
                results.append((wall - in_model[0]) * 1000)
            sent = sum(len(json.dumps(r["body"])) for r in model.model_requests())
            return summary(results), sent / batches
    finally:
        netclient.ModelClient.stream = original  # type: ignore[assignment]
        shutil.rmtree(root, ignore_errors=True)


def bytes_per_interaction() -> tuple[float, int]:
    root = tempfile.mkdtemp(prefix="cm-bench-bytes-")
    try:
        with fakemodel.running(os.path.join(root, "model"), {"policy": "remember_user_turns", "batch": True}) as model:
            paths, cfg = _home(root, model.base_url, "responses")
            conn = store.open_store(paths)
            with store.immediate(conn):
                conn.execute("INSERT INTO sessions VALUES ('long', 'codex', 'h', 'long', 0, 0)")
                for n in range(21):
                    turn = f"t{n}"
                    sessions.open_turn(conn, "long", turn)
                    sessions.capture_user(conn, "long", turn, f"u{n}", f"Turn {n}: a fact worth keeping.", "global",
                                          "codex_user_delivery", "2026-11-30T00:00:00Z", 1 << 24)
                    sessions.settle(conn, "long", turn, "settled")
                sessions.end(conn, "long")
            conn.close()
            agent = NetworkAgent.from_config(cfg)
            writer = Writer(paths, cfg, agent)
            jobs = 0
            while writer.run_once() is not None:
                jobs += 1
            writer.close()
            agent.close()
            sent = sum(len(json.dumps(r["body"]).encode()) for r in model.model_requests())
            return sent / 21, jobs
    finally:
        shutil.rmtree(root, ignore_errors=True)


def demo_wall(runs: int = 3) -> dict:
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run([CM, "demo"], capture_output=True, timeout=300)
        walls.append((time.perf_counter() - started) * 1000)
        assert done.returncode == 0, done.stderr[-500:]
    return summary(walls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    for api in ("responses", "chat_completions"):
        s, sent = overhead(api, args.batches)
        rows.append(f"| cm overhead per 10-turn batch, {api} (model time excluded) | {s['n']} | {s['median']:.1f} | "
                    f"{s['p95']:.1f} | {sent / 1024:.0f} KiB sent per batch |")
    per_turn, jobs = bytes_per_interaction()
    demo = demo_wall()
    body = "\n".join([
        f"Machine: {machine()}. Synthetic model on 127.0.0.1, diligent-model policy, batched tool calls.",
        "",
        "| measurement | n | median (ms) | p95 (ms) | note |",
        "|---|---:|---:|---:|---|",
        *rows,
        f"| `cm demo` wall time (whole loop, subprocess) | {demo['n']} | {demo['median']:.0f} | {demo['p95']:.0f} | README main job |",
        "",
        f"Bytes sent to the provider for a scripted 21-turn session ({jobs} jobs: 10 + 10 + 1): "
        f"**{per_turn / 1024:.1f} KiB per interaction** (request bodies as the model received them).",
    ])
    print(body)
    if args.write:
        write_section("agent", body)


if __name__ == "__main__":
    main()
