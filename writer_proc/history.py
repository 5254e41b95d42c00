"""Section history and the trash: the store's record of every version of every memory section.

Contract:
- A section is named by its key ``<target>:<sha256(title)>`` (``sections.section_key``); its
  versions form a chain v1 → v2 → … (``parent_id`` links each to the one it replaced). A version
  holds the section's exact text after it (heading line included) or ``NULL`` when it removed the
  section, and who made it: ``memory_agent`` (with the receipt, client, session and model) or
  ``user`` (a hand edit found at the next commit, or an undo/restore the user asked for).
- ``diff_documents(before, after)`` is the per-section difference of two parses of one document;
  ``record`` appends one version per change inside the caller's transaction (the Writer's commit
  transaction, so history and the published document never disagree after a crash).
- ``observe(conn, doc, at)`` brings the chain up to what ``doc`` holds before a commit changes it:
  a section never seen gets a ``baseline`` version, one whose text differs from its latest version
  gets a ``hand_edit`` version by the user, and a seen section now absent a ``hand_edit`` removal.
- A version that removed a section may be put in the trash (``trash_put``) with an expiry; the
  trash only points at versions, so the removed text lives in exactly one row.
- The only SQL for ``section_versions``, ``trash`` and ``purge_tombstones`` is here
  (``tests/test_table_owners.py``). Never the receipts: their format is the specification's.
"""

from __future__ import annotations

import os
import sqlite3
from typing import NamedTuple

from cmrunner.core import sections
from cmrunner.core.sections import Document

AGENT = "memory_agent"
USER = "user"


class Change(NamedTuple):
    """One section's difference between two versions of a document (``None``: absent)."""

    target: str
    key: str
    title: str
    before: str | None
    after: str | None

    @property
    def kind(self) -> str:
        if self.before is None:
            return "put"
        return "remove" if self.after is None else "replace"


class Version(NamedTuple):
    id: int
    target: str
    key: str
    version: int
    parent_id: int | None
    title: str
    text: str | None
    kind: str
    author: str
    receipt_id: str | None
    client: str | None
    session_id: str | None
    model: str | None
    at: int
    purged_at: int | None


class Provenance(NamedTuple):
    """Who made a version: the receipt's job and the host that captured its evidence."""

    author: str
    receipt_id: str | None = None
    client: str | None = None
    session_id: str | None = None
    model: str | None = None


_COLUMNS = ("id, target, section_key, version, parent_id, title, text, kind, author, receipt_id, client, "
            "session_id, model, at, purged_at")


def section_texts(doc: Document) -> dict[str, tuple[str, str]]:
    """``{key: (title, exact section text)}`` of a parsed document."""
    return {sections.section_key(doc.target, s.title): (s.title, doc.data[s.start:s.end].decode("utf-8"))
            for s in doc.sections}


def diff_documents(before: Document, after: Document) -> list[Change]:
    """The sections ``after`` added, replaced or removed relative to ``before`` (by key, sorted)."""
    old, new = section_texts(before), section_texts(after)
    out = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key), new.get(key)
        if was is not None and now is not None and was[1] == now[1]:
            continue
        title = now[0] if now is not None else was[0] if was is not None else ""
        out.append(Change(after.target, key, title, was[1] if was else None, now[1] if now else None))
    return out


def latest(conn: sqlite3.Connection, target: str) -> dict[str, Version]:
    """The newest version of every section key of ``target`` that history knows."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM section_versions v WHERE target = ? AND version = "
        "(SELECT MAX(version) FROM section_versions w WHERE w.section_key = v.section_key)", (target,)).fetchall()
    return {row[2]: Version(*row) for row in rows}


def _append(conn: sqlite3.Connection, target: str, key: str, title: str, text: str | None, kind: str,
            who: Provenance, at: int, parent: Version | None) -> int:
    cursor = conn.execute(
        "INSERT INTO section_versions(target, section_key, version, parent_id, title, text, kind, author, "
        "receipt_id, client, session_id, model, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (target, key, parent.version + 1 if parent else 1, parent.id if parent else None, title, text, kind,
         who.author, who.receipt_id, who.client, who.session_id, who.model, at))
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def observe(conn: sqlite3.Connection, doc: Document, at: int) -> int:
    """Record what changed in ``doc`` outside the Writer since history last saw it; returns versions added."""
    known = latest(conn, doc.target)
    current = section_texts(doc)
    added = 0
    for key in sorted(known.keys() | current.keys()):
        head, now = known.get(key), current.get(key)
        if head is None:
            assert now is not None
            _append(conn, doc.target, key, now[0], now[1], "baseline", Provenance(USER), at, None)
        elif now is None:
            if head.text is None:
                continue
            _append(conn, doc.target, key, head.title, None, "hand_edit", Provenance(USER), at, head)
        elif head.text != now[1]:
            _append(conn, doc.target, key, now[0], now[1], "hand_edit", Provenance(USER), at, head)
        else:
            continue
        added += 1
    return added


def record(conn: sqlite3.Connection, changes: list[Change], who: Provenance, at: int,
           kind: str | None = None) -> list[int]:
    """Append one version per change (``kind`` overrides put/replace/remove, e.g. ``undo``)."""
    ids = []
    heads: dict[str, dict[str, Version]] = {}
    for change in changes:
        head = heads.setdefault(change.target, latest(conn, change.target)).get(change.key)
        ids.append(_append(conn, change.target, change.key, change.title, change.after, kind or change.kind,
                           who, at, head))
    return ids


def versions(conn: sqlite3.Connection, target: str, key: str | None = None) -> list[Version]:
    """Every version of ``target`` (or of one section key), newest first."""
    if key is None:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM section_versions WHERE target = ? ORDER BY id DESC", (target,))
    else:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM section_versions WHERE section_key = ? ORDER BY id DESC",
                            (key,))
    return [Version(*row) for row in rows]


def by_receipt(conn: sqlite3.Connection, receipt_id: str) -> list[Version]:
    """The versions one commit made."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM section_versions WHERE receipt_id = ? ORDER BY id", (receipt_id,))
    return [Version(*row) for row in rows]


def get(conn: sqlite3.Connection, version_id: int) -> Version | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM section_versions WHERE id = ?", (version_id,)).fetchone()
    return Version(*row) if row else None


class TrashEntry(NamedTuple):
    id: str
    version_id: int
    target: str
    key: str
    removed_at: int
    expires_at: int
    state: str


def trash_put(conn: sqlite3.Connection, version_id: int, target: str, key: str, at: int, retention_ms: int) -> str:
    """Put the section a removing version took away into the trash; returns its short id."""
    trash_id = "t_" + os.urandom(5).hex()
    conn.execute("INSERT INTO trash(id, version_id, target, section_key, removed_at, expires_at) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (trash_id, version_id, target, key, at, at + retention_ms))
    return trash_id


def trash_list(conn: sqlite3.Connection, state: str = "trashed") -> list[TrashEntry]:
    rows = conn.execute("SELECT id, version_id, target, section_key, removed_at, expires_at, state FROM trash "
                        "WHERE state = ? ORDER BY removed_at DESC, id", (state,))
    return [TrashEntry(*row) for row in rows]


def tombstone(conn: sqlite3.Connection, scope: str, digest: str, at: int) -> None:
    """Remember that text with this digest was purged from ``scope`` (the digest only, no content)."""
    conn.execute("INSERT OR IGNORE INTO purge_tombstones(digest, scope, purged_at) VALUES (?, ?, ?)",
                 (digest, scope, at))


def tombstoned(conn: sqlite3.Connection, scope: str, digest: str) -> bool:
    return conn.execute("SELECT 1 FROM purge_tombstones WHERE digest = ? AND scope = ?",
                        (digest, scope)).fetchone() is not None
