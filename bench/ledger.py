"""What the disclosure ledger and the spend caps cost, on a real store (fsync on every commit).

(1) record: ``Meter.record`` of one request (one ``BEGIN IMMEDIATE`` + insert + COMMIT, the WAL
    fsynced), as the Memory Agent does after every model request; N rounds.
(2) cap check: ``Meter.blocked`` (the three caps' windows summed from the ledger), as before every
    model request and at every claim, on a ledger holding ``--rows`` rows spread over the last
    400 days (the retention), so the check's cost at the ledger's largest size is visible.
(3) ``cm usage --json`` and ``cm status --json`` as subprocesses on that ledger: spawn to exit.
Usage: `python bench/ledger.py [--rounds 300] [--rows 100000] [--write]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, summary, write_section

from cmrunner.agentrt.meter import Grant, Meter
from cmrunner.core import config as config_mod, ledger, spend, store
from cmrunner.core.home import DataPaths

REMOTE = {"baseUrl": "https://api.example.com/v1", "model": "gpt-x", "api": "responses"}
GRANT = Grant(("global",), ("user_explicit",))


class _Wire:
    sent, received, accepted = 24_000, 3_000, True


def _fill(conn, rows: int, now: int) -> None:
    span = ledger.RETENTION_MS
    entries = [ledger.Entry(now - span + i * span // rows, "memory_agent", "job", 1, 1, "api.example.com", "gpt-x",
                            "responses", ("global",), ("user_explicit",), 24_000, 3_000, 6_000, None, 120, None,
                            "provider", 900, "ok") for i in range(rows)]
    with store.immediate(conn):
        for entry in entries:
            ledger.append(conn, entry)


def _cli(args: list[str], env: dict[str, str], runs: int) -> dict:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([CM, *args], env=env, capture_output=True, check=True, timeout=60)
        times.append((time.perf_counter() - started) * 1000)
    return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="cm-bench-ledger-")
    try:
        home = os.path.join(root, "home")
        config_mod.save(home, config_mod.default_config(home))
        cfg = config_mod.load(home)
        conn = store.open_store(DataPaths(cfg.data_root))
        caps = spend.Caps.of(cfg.spend)
        meter = Meter(conn, ledger.MEMORY_AGENT, REMOTE, GRANT, caps, "job", 1)
        record, check = [], []
        for n in range(args.rounds):
            started = time.perf_counter()
            meter.record(n, meter.start(), b"{}", _Wire(), {"input_tokens": 6000, "output_tokens": 120}, b"", "ok")
            record.append((time.perf_counter() - started) * 1000)
        _fill(conn, args.rows, int(time.time() * 1000))
        for _ in range(args.rounds):
            started = time.perf_counter()
            meter.blocked()
            check.append((time.perf_counter() - started) * 1000)
        conn.close()
        env = dict(os.environ, COMMON_MEMORY_HOME=home)
        usage_cli = _cli(["usage", "--json"], env, 10)
        status_cli = _cli(["status", "--json"], env, 10)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    r, c = summary(record), summary(check)
    body = "\n".join([
        f"Machine: {machine()}; {args.rounds} rounds; the cap check and the commands on a ledger of "
        f"{args.rows:,} rows over 400 days.",
        "",
        "| measurement | n | median (ms) | p95 (ms) | max (ms) |",
        "|---|---:|---:|---:|---:|",
        f"| one request's ledger row (`Meter.record`: own transaction, fsync) | {r['n']} | {r['median']:.2f} | "
        f"{r['p95']:.2f} | {r['max']:.2f} |",
        f"| spend cap check before a request (`Meter.blocked`, three windows) | {c['n']} | {c['median']:.2f} | "
        f"{c['p95']:.2f} | {c['max']:.2f} |",
        f"| `cm usage --json`, spawn to exit | {usage_cli['n']} | {usage_cli['median']:.0f} | "
        f"{usage_cli['p95']:.0f} | {usage_cli['max']:.0f} |",
        f"| `cm status --json`, spawn to exit | {status_cli['n']} | {status_cli['median']:.0f} | "
        f"{status_cli['p95']:.0f} | {status_cli['max']:.0f} |",
    ])
    print(body)
    if args.write:
        write_section("ledger", body)


if __name__ == "__main__":
    main()
