"""Benchmark: one misbehaving provider stream against a real ``cm flush`` process.

The synthetic model answers the first model request with an 80 MiB stream of small text deltas
(``flood``), every later request with HTTP 401, so the flush makes exactly one flooded attempt,
then one short attempt that ends the job (``AUTHENTICATION`` is permanent). Measured per API and
per whole-attempt deadline (``remote.deadlineMs``): the flush's wall time, its peak RSS (the
child's ``ru_maxrss`` from ``os.wait4``, so only the ``cm flush`` process counts, not the model),
and the job outcomes the flush printed. The wall time includes the 1 s backoff before the
second attempt. A baseline row runs the same flush with no flood (401 at once).
Usage: `python bench/provider.py [--write]`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, write_section

from cmrunner.capture import observations
from cmrunner.core import config as config_mod, envfile, store
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel

KEY = "COMMON_MEMORY_API_KEY"
FLOOD = 80 * 1024 * 1024


def _home(root: str, base_url: str, api: str, deadline_ms: int) -> tuple[str, DataPaths]:
    home = os.path.join(root, "home")
    data = config_mod.default_config(home)
    data["remote"] = {"provider": "openai-compatible", "baseUrl": base_url, "model": "synthetic", "apiKeyEnv": KEY,
                      "api": api, "proxy": {"mode": "direct"}, "deadlineMs": deadline_ms}
    config_mod.save(home, data)
    envfile.update(home, {KEY: "bench-key-not-a-secret"})
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    conn = store.open_store(paths)
    with store.immediate(conn):
        observations.admit(conn, agent="bench", namespace="bench", entry_id="e1", text="I prefer tabs over spaces.", scope="global",
                           source="codex_user_delivery", observed_at="2026-11-30T00:00:00.000Z", batch_id="batch-1")
    conn.close()
    return home, paths


def one(api: str, deadline_ms: int, flood: int, nest: int = 0) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-provider-")
    try:
        first = {"text": "misbehaving", **({"flood": flood} if flood else {}), **({"nest": nest} if nest else {})}
        replies = [first] if flood or nest else []
        script = {"replies": replies, "default": {"error": {"status": 401}}}
        with fakemodel.running(os.path.join(root, "model"), script, lifetime_seconds=600) as model:
            home, _paths = _home(root, model.base_url, api, deadline_ms)
            env = dict(os.environ, COMMON_MEMORY_HOME=home, COMMON_MEMORY_HOST_INSTANCE="bench")
            out_path, err_path = os.path.join(root, "flush.out"), os.path.join(root, "flush.err")
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                started = time.perf_counter()
                proc = subprocess.Popen([CM, "flush"], env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
                _pid, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, nobody else's
                wall = time.perf_counter() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
        with open(err_path, "rb") as handle:
            stderr = handle.read().decode("utf-8", "replace")
        with open(out_path, "rb") as handle:
            outcomes = re.findall(r"^job [0-9a-f]+: (.+)$", handle.read().decode("utf-8", "replace"), re.M)
        return {"wall_s": wall, "rss_mib": usage.ru_maxrss / 1024, "rc": proc.returncode, "stderr": stderr,
                "outcomes": outcomes}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--label", default="after")
    args = parser.parse_args()
    rows = []
    cases = [("responses", 60_000, 0, 0), ("responses", 3_000, FLOOD, 0), ("responses", 60_000, FLOOD, 0),
             ("chat_completions", 60_000, FLOOD, 0), ("responses", 60_000, 0, 100_000)]
    for api, deadline_ms, flood, nest in cases:
        r = one(api, deadline_ms, flood, nest)
        traceback = "Traceback" in r["stderr"]
        sent = "80 MiB of text deltas" if flood else "one event nested 100,000 deep" if nest else "nothing (baseline)"
        rows.append(f"| {api} | {deadline_ms // 1000} s | {sent} | {r['wall_s']:.2f} | {r['rss_mib']:.0f} | {r['rc']} | "
                    f"{' → '.join(r['outcomes']) or '-'} | {'yes' if traceback else 'no'} |")
        print(rows[-1], flush=True)
    body = "\n".join([
        f"Machine: {machine()}. Label: {args.label}.",
        "",
        "| API | deadline | first reply | `cm flush` wall (s) | peak RSS (MiB) | exit | outcomes printed | traceback |",
        "|---|---|---|---:|---:|---:|---|---|",
        *rows,
    ])
    print(body)
    if args.write:
        write_section(f"provider-{args.label}", body)


if __name__ == "__main__":
    main()
