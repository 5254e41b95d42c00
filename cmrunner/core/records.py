"""What the Writer's commits leave in SQLite: receipts, source links, document versions and
correction watermarks. The repository of the ``receipts``, ``associations``,
``document_versions`` and ``correction_watermarks`` tables.

Contract:
- SQL only. The commit order and its policy are ``cmrunner.writer_proc.commit``; MCP item status
  reads the links here without importing the Writer's room.
- Every function runs inside the caller's connection and transaction and never begins, commits
  or rolls back one: a commit's database side stays one transaction.
- A receipt row is written last in a commit's database side; its presence means that commit was
  applied (``applied``), which makes the replay after a crash a no-op.
- Links of a target are replaced whole (``replace_links``); a watermark only moves forward:
  the later ``at`` wins, and at the same ``at`` the larger source id.
Stdlib only.
"""

from __future__ import annotations

import sqlite3


def applied(conn: sqlite3.Connection, job_id: str) -> bool:
    return conn.execute("SELECT 1 FROM receipts WHERE id = ?", (job_id,)).fetchone() is not None


def add_receipt(conn: sqlite3.Connection, job_id: str, now: int) -> None:
    conn.execute("INSERT INTO receipts(id, job_id, committed_at) VALUES (?, ?, ?)", (job_id, job_id, now))


def latest_commit_at(conn: sqlite3.Connection) -> int | None:
    """When the newest commit (the Memory Agent's or the user's) was recorded, ms; None if none."""
    row = conn.execute("SELECT MAX(committed_at) FROM receipts").fetchone()
    return row[0] if row else None


def set_version(conn: sqlite3.Connection, target: str, hash_: str) -> None:
    """The hash the Writer last published for ``target``."""
    conn.execute("INSERT OR REPLACE INTO document_versions(target, hash) VALUES (?, ?)", (target, hash_))


def versions(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT target, hash FROM document_versions").fetchall())


def replace_links(conn: sqlite3.Connection, targets: list[str], links: list[tuple[str, str, int]]) -> None:
    """Drop every link of ``targets``, then add ``links`` as (target, section key, source id)."""
    conn.executemany("DELETE FROM associations WHERE target = ?", [(t,) for t in targets])
    conn.executemany("INSERT OR IGNORE INTO associations(target, section_key, source_id) VALUES (?, ?, ?)", links)


def links(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
    """Every link as (target, section key, source id)."""
    return conn.execute("SELECT target, section_key, source_id FROM associations").fetchall()


def sources_of(conn: sqlite3.Connection, target: str, key: str) -> list[int]:
    """The source ids linked to one section, oldest first."""
    return [r[0] for r in conn.execute(
        "SELECT source_id FROM associations WHERE target = ? AND section_key = ? ORDER BY source_id", (target, key))]


def unlink_section(conn: sqlite3.Connection, target: str, key: str) -> None:
    conn.execute("DELETE FROM associations WHERE target = ? AND section_key = ?", (target, key))


def targets_of_source(conn: sqlite3.Connection, source_id: int) -> list[str]:
    """The documents that keep a link to ``source_id``, by name."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT target FROM associations WHERE source_id = ? ORDER BY target", (source_id,))]


def raise_watermark(conn: sqlite3.Connection, target: str, at: int, source_id: int) -> None:
    conn.execute(
        "INSERT INTO correction_watermarks(target, at, source_id) VALUES (?, ?, ?)"
        " ON CONFLICT(target) DO UPDATE SET at = MAX(at, excluded.at), source_id = CASE"
        " WHEN excluded.at > at OR (excluded.at = at AND excluded.source_id > source_id) THEN excluded.source_id"
        " ELSE source_id END",
        (target, at, source_id),
    )


def watermarks(conn: sqlite3.Connection) -> list[tuple[str, int, int | None]]:
    """Every watermark as (target, at, source id)."""
    return conn.execute("SELECT target, at, source_id FROM correction_watermarks").fetchall()
