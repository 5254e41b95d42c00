"""Helpers to run real drain processes with the scripted Memory Agent and check the end state."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess

from conftest import CM, hook_env

from cmrunner.core import history, sections
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import usercommit

# Each job touches two documents (so a commit stages three files: two documents and the receipt).
TEMPLATES = {"decisions": [[
    {"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": "$EVIDENCE", "reason": "r",
     "admission": "remember", "lifetime": "stable",
     "operations": [{"op": "put_section", "target": "profile", "section": None, "title": "Fact {first}",
                     "body": "fact number {first}\n"},
                    {"op": "put_section", "target": "preferences", "section": None, "title": "Pref {first}",
                     "body": "preference number {first}\n"}]},
]]}

MIXED = {"decisions": [
    TEMPLATES["decisions"][0],
    [{"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": "$EVIDENCE", "reason": "r"}],
    [{"kind": "retain", "applicability": "global", "confidence": 0.5, "evidence": "$EVIDENCE", "reason": "r",
      "admission": "update", "lifetime": "until_changed",
      "operations": [{"op": "put_section", "target": "profile", "section": None, "title": "Update {first}",
                      "body": "updated {first}\n"}]}],
    [{"kind": "retain", "applicability": "global", "confidence": 0.5, "evidence": ["ev_999999"], "reason": "r",
      "admission": "remember", "lifetime": "stable",
      "operations": [{"op": "put_section", "target": "profile", "section": None, "title": "Bad {first}",
                      "body": "never written\n"}]}],
]}


def write_script(tmp: str, templates: dict) -> str:
    path = os.path.join(tmp, "agent-script.json")
    with open(path, "w") as handle:
        json.dump(templates, handle)
    return path


def drain_env(script: str, calls: str, **extra: str) -> dict[str, str]:
    return hook_env(CM_TEST_AGENT_SCRIPT=script, CM_TEST_AGENT_CALLS=calls,
                    CM_TEST_DRAIN_LINGER_MS="0", **extra)


def start_drain(home: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([CM, "session-drain", "--home", home], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def check_end_state(paths: DataPaths, receipts: int, published: int | None = None) -> dict:
    """The invariants every crash must leave true; returns a few facts for further asserts.

    ``receipts`` is how many commits (agent and user receipts together) the test expects the store
    to hold, and ``published`` how many of them changed a document (default: all). A commit that
    changed nothing (an ``ignore``) has its receipt row but no receipt file; every other one has
    its file, and each file is checked. So a missing file, or counts that are not the test's own,
    fail instead of checking nothing."""
    conn = sqlite3.connect(paths.db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        found = {r[0]: r[1] for r in conn.execute("SELECT id, committed_at FROM receipts")}
        done = {r[0] for r in conn.execute("SELECT id FROM jobs WHERE state = 'done'")}
        agents = {r for r in found if not r.startswith(usercommit.RECEIPT_PREFIX)}  # a user action has no job
        assert agents == done, "a job is done exactly when its receipt row exists"
        processed_without_receipt = conn.execute(
            "SELECT COUNT(*) FROM observations o WHERE o.state = 'processed'"
            " AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.id = o.job_id)").fetchone()[0]
        assert processed_without_receipt == 0
        order = [r[0] for r in conn.execute("SELECT id FROM receipts ORDER BY committed_at, rowid")]
    finally:
        conn.close()
    assert len(order) == receipts, f"expected {receipts} receipts, the store holds {len(order)}"
    # Every document equals the after-hash of the last receipt that touched it.
    last_after: dict[str, str] = {}
    checked = 0
    for job_id in order:
        path = os.path.join(paths.receipts, f"{job_id}.json")
        if os.path.exists(path):
            documents = json.load(open(path))["documents"]
            assert documents, f"receipt {job_id} has a file but published nothing"
            for doc in documents:
                last_after[doc["target"]] = doc["after"]
            checked += 1
    expected = receipts if published is None else published
    assert checked == expected, f"{expected} receipt files expected (commits that changed a document), found {checked}"
    for target, after in last_after.items():
        with open(paths.document(target), "rb") as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == after, target
    _check_history(paths, last_after)
    return {"receipts": order, "last_after": last_after}


def _check_history(paths: DataPaths, committed: dict[str, str]) -> None:
    """Every committed document's sections are exactly the newest versions its history holds (these
    tests never edit by hand), and nothing staged for history outlives its commit."""
    conn = sqlite3.connect(paths.db)
    try:
        with conn:
            for target in committed:
                doc = sections.parse(target, open(paths.document(target), "rb").read())
                heads = {k: v.text for k, v in history.latest(conn, target).items() if v.text is not None}
                assert heads == {k: text for k, (_title, text) in history.section_texts(doc).items()}, target
            staged = {r[0] for r in conn.execute("SELECT DISTINCT job_id FROM section_changes_pending")}
            done = {r[0] for r in conn.execute("SELECT id FROM receipts")}
            assert not staged & done, "a committed job's history rows were left staged"
    finally:
        conn.close()


def transaction_dirs(paths: DataPaths) -> list[str]:
    return os.listdir(paths.transactions) if os.path.isdir(paths.transactions) else []


def check_crash_state(paths: DataPaths, receipts: int, published: int | None = None) -> None:
    """Right after a kill, before any recovery: either the end-state invariants hold, or a marked
    transaction is pending and every live document sits at that journal's before or after hash
    (recovery will publish it forward and replay its receipt). ``receipts`` as for ``check_end_state``."""
    pending = [d for d in transaction_dirs(paths) if not d.startswith("done.")]
    marked = [d for d in pending if os.path.exists(os.path.join(paths.transactions, d, "COMMITTING"))]
    if not marked:
        check_end_state(paths, receipts, published)
        return
    assert len(marked) == 1, marked
    conn = sqlite3.connect(paths.db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    journal = json.load(open(os.path.join(paths.transactions, marked[0], "journal.json")))
    for entry in journal["files"]:
        live = os.path.join(paths.root, entry["path"])
        digest = hashlib.sha256(open(live, "rb").read()).hexdigest() if os.path.exists(live) else "missing"
        assert digest in (entry["before"], entry["after"]), entry["path"]

