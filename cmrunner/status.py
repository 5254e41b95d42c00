"""What ``cm status`` reports, gathered without creating or repairing anything.

Contract: resolves the configuration and storage paths, opens ``runtime.sqlite`` read-only only
if it exists, and never writes. Counts are of durable rows: inbox rows, observations and jobs by
state, isolated sessions; the drain is "alive" only if the lease holder's identity still matches a
running process. Secrets are reported as present/absent, never shown.
"""

from __future__ import annotations

import os

from cmrunner import config as config_mod, drainlease, envfile, migrations, store
from cmrunner.errors import CmError
from cmrunner.home import DataPaths, config_path, env_path


def _counts(conn, sql: str) -> dict[str, int]:
    return {row[0]: int(row[1]) for row in conn.execute(sql)}


def gather(home: str) -> dict:
    report: dict = {
        "home": home,
        "config": {"path": config_path(home), "exists": os.path.isfile(config_path(home))},
        "env": {"path": env_path(home), "exists": os.path.isfile(env_path(home))},
    }
    try:
        cfg = config_mod.load(home)
    except CmError as exc:
        report["config"]["error"] = {"code": exc.code, "message": exc.message}
        return report
    remote = cfg.remote
    report["config"]["schemaVersion"] = cfg.data["schemaVersion"]
    report["model"] = None
    if remote is not None:
        try:
            key_present = envfile.get_secret(home, remote["apiKeyEnv"]) is not None
        except CmError:
            key_present = False
        report["model"] = {
            "baseUrl": remote["baseUrl"], "model": remote["model"], "api": remote.get("api", "responses"),
            "apiKeyEnv": remote["apiKeyEnv"], "apiKeyConfigured": key_present,
            "proxy": remote.get("proxy", {}).get("mode", "legacy"),
        }
    paths = DataPaths(cfg.data_root)
    report["paths"] = {
        "dataRoot": paths.root, "memory": paths.memory, "database": paths.db,
        "runtime": paths.runtime, "projects": paths.registry,
    }
    try:  # sections the read path withholds because they look like secrets (never a value)
        from cmrunner import secretreport

        report["secrets"] = secretreport.summary(home)
    except CmError as exc:
        report["secrets"] = {"error": {"code": exc.code, "message": exc.message}}
    report["store"] = {"exists": os.path.isfile(paths.db), "schemaVersion": None, "codeSchemaVersion": migrations.LATEST}
    report["inbox"] = {"codex": 0, "pi": 0, "candidates": 0}
    report["observations"] = {}
    report["jobs"] = {}
    report["isolatedSessions"] = []
    report["drain"] = {"alive": False}
    conn = store.open_existing(paths)
    if conn is None:
        return report
    try:
        version = migrations.check_readable(conn)
        report["store"]["schemaVersion"] = version
        if version < 1:
            return report
        report["inbox"] = {
            "codex": conn.execute("SELECT COUNT(*) FROM codex_inbox").fetchone()[0],
            "pi": conn.execute("SELECT COUNT(*) FROM pi_inbox").fetchone()[0],
            "candidates": conn.execute("SELECT COUNT(*) FROM codex_candidates WHERE text IS NOT NULL").fetchone()[0],
        }
        report["observations"] = _counts(conn, "SELECT state, COUNT(*) FROM observations GROUP BY state ORDER BY state")
        report["jobs"] = _counts(conn, "SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state")
        report["isolatedSessions"] = [
            {"recoveryId": row[0], "issue": row[1], "failedAt": row[2]}
            for row in conn.execute("SELECT recovery_id, issue, failed_at FROM codex_failures ORDER BY failed_at")
        ]
        holder = drainlease.live_holder(conn)
        report["drain"] = {"alive": holder is not None, "pid": holder.pid if holder else None}
    finally:
        conn.close()
    return report
