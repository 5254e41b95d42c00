"""Helpers for Writer tests: a configured home, direct admission, scripted decisions."""

from __future__ import annotations

import os

from cmrunner.capture import observations
from cmrunner.core import config as config_mod, store
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc.port import ScriptedPort
from cmrunner.writer_proc.writer import Writer


def configure(home: str, **disclosure: object) -> tuple[DataPaths, config_mod.Config]:
    data = config_mod.default_config(home)
    data["disclosure"]["allowedProvenance"] = ["user_explicit", "agent_observation", "document_import"]
    data["disclosure"].update(disclosure)
    config_mod.save(home, data)
    cfg = config_mod.load(home)
    return DataPaths(cfg.data_root), cfg


def admit(paths: DataPaths, text: str, entry: str, scope: str = "global", source: str = "codex_user_delivery",
          batch: str | None = "batch-1", observed_at: str = "2026-11-30T00:00:00.000Z",
          task_kind: str = "observation", agent: str = "codex") -> int:
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            return observations.admit(conn, namespace="test", entry_id=entry, text=text, scope=scope, source=source,
                                      observed_at=observed_at, agent=agent, batch_id=batch, task_kind=task_kind).id
    finally:
        conn.close()


def decision(task: dict, *decisions: dict, edit_result: str | None = None) -> dict:
    body = {"version": "memory_maintenance_v2", "request_id": task["request_id"], "decisions": list(decisions)}
    if edit_result is not None:
        body["edit_result"] = edit_result
    return body


def retain(evidence: list[str], *ops: dict, admission: str = "remember", applicability: str = "global") -> dict:
    return {"kind": "retain", "applicability": applicability, "confidence": 0.9, "evidence": evidence,
            "reason": "r", "admission": admission, "lifetime": "stable", "operations": list(ops)}


def put(target: str, title: str, body: str, section: str | None = None) -> dict:
    return {"op": "put_section", "target": target, "section": section, "title": title, "body": body}


def all_evidence(reads) -> list[str]:
    return sorted(s.evidence_ref for s in reads.sources.values() if not s.context_only)


def writer(paths: DataPaths, cfg: config_mod.Config, script, now=None) -> tuple[Writer, ScriptedPort]:
    port = ScriptedPort(script)
    kwargs = {"now": now} if now else {}
    return Writer(paths, cfg, port, **kwargs), port


def read(paths: DataPaths, target: str) -> str | None:
    path = paths.document(target)
    return open(path, encoding="utf-8").read() if os.path.exists(path) else None


def rows(paths: DataPaths, sql: str, params: tuple = ()) -> list[tuple]:
    conn = store.connect(paths.db, 1000)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def user_said_diet(paths: DataPaths, cfg: config_mod.Config) -> str:
    """Commit a user turn's Profile section "Diet"; returns the Profile as it then reads."""
    admit(paths, "I am a vegetarian", "u1", batch="b1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads),
                                                                        put("profile", "Diet", "vegetarian\n"))))
    assert w.run_once().state == "committed"
    w.close()
    profile = read(paths, "profile")
    assert profile is not None
    return profile


def check_import_guard(paths: DataPaths, cfg: config_mod.Config, before: str, title: str, overwrite: bool) -> None:
    """Process the queued import with a decision that appends ``title`` and (``overwrite``) also
    replaces the user's first section: the append commits, the replacement refuses the whole job."""
    import time

    def script(task, reads):
        ops = [put("profile", title, "eats fish (imported, unverified)\n")]
        if overwrite:
            ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"][0]["ref"]
            ops.append(put("profile", "Diet", "pescatarian\n", section=ref))
        return decision(task, retain(all_evidence(reads), *ops))

    w, _ = writer(paths, cfg, script, now=lambda: int(time.time() * 1000) + 60_000)
    w.force = True
    outcome = w.run_once()
    w.close()
    if overwrite:  # all or nothing: the valid append is not committed either
        assert outcome.code == "UNAUTHORIZED_IMPORT_OVERWRITE"
        assert read(paths, "profile") == before
    else:
        assert outcome.state == "committed"
        after = read(paths, "profile")
        assert after is not None and after.startswith(before) and title in after
