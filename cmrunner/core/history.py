"""Section history and the trash: the store's record of every version of every memory section.

Contract:
- A section is named by its key ``<target>:<digest>`` (``sections.unit_key``: sha256 of the title;
  the untitled text before the first section has the title ``""``; the n-th section of a title a
  hand edit repeated has ``title + NUL + n``); its
  versions form a chain v1 → v2 → … (``parent_id`` links each to the one it replaced). A version
  holds the section's exact text after it (heading line included) or ``NULL`` when it removed the
  section, and who made it: ``memory_agent`` (with the decision kind, receipt, client, session and
  model) or ``user`` (a hand edit found at the next commit, or an undo/restore the user asked for).
- A commit adds its versions in two steps, so that history and the published documents never
  disagree, even across a crash: ``stage`` writes what the commit will add (the user's edits since
  history last saw each changed document, then the commit's own changes) in a transaction of its
  own before anything is published; ``settle``, called from the commit's database side
  (``commit.apply_receipt``, which a crash replay runs too), turns those rows into versions in the
  commit's transaction. ``settle`` runs inside the repository lock, so it does no more than one
  indexed lookup of each section's newest version and the inserts; all comparing is ``stage``'s.
  A commit that is abandoned leaves staged rows the next ``stage`` deletes.
- A section that never had a version gets a ``baseline`` one the first time its document changes.
- A version that removed a section puts it in the trash; the trash only points at the removing
  version (its parent holds the text), so removed text lives in exactly one row. ``expire_trash``
  purges what stayed longer than the configured retention (``history.trashRetentionDays``).
- The only SQL for ``section_versions``, ``section_changes_pending`` and ``trash`` is here (``tests/test_table_owners.py``). Nothing here is ever written to the
  Markdown or the receipts: the receipt format is the specification's.
"""

from __future__ import annotations

import datetime
import difflib
import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from typing import NamedTuple

from cmrunner.core import migrations, sections, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.sections import Document

AGENT = "memory_agent"
USER = "user"
USER_KINDS = ("baseline", "hand_edit")
RESTORING_KINDS = ("undo", "restore")  # a section they bring back leaves the trash
SYNC_CONFLICT = "sync_conflict"  # a removal that keeps this machine's text when a sync kept the remote's
TRASHING_KINDS = ("remove", SYNC_CONFLICT, "sync")  # a removal of these kinds puts the text in the trash


class Change(NamedTuple):
    """One section's difference between two versions of a document (``None``: absent)."""

    target: str
    key: str
    title: str
    before: str | None
    after: str | None
    kind: str  # put | replace | remove | baseline | hand_edit


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
    decision: str | None
    receipt_id: str | None
    client: str | None
    session_id: str | None
    model: str | None
    at: int
    purged_at: int | None


class Provenance(NamedTuple):
    """Who makes a commit's own changes (the user's edits it finds are always ``USER``'s)."""

    author: str
    client: str | None = None
    session_id: str | None = None
    model: str | None = None


class Summary(NamedTuple):
    """How much history the store keeps (``cm status``)."""

    versions: int  # every recorded version, purged ones included (their rows stay, without text)
    trashed: int  # sections in the trash now
    oldest_removed_at: int | None  # when the oldest of them was removed (ms), None if the trash is empty


class TrashEntry(NamedTuple):
    id: str
    version_id: int
    target: str
    key: str
    removed_at: int
    state: str


_COLUMNS = ("id, target, section_key, version, parent_id, title, text, kind, author, decision, receipt_id, "
            "client, session_id, model, at, purged_at")


def iso(ms: int) -> str:
    """A version's or trash entry's time (ms since the epoch) as an ISO 8601 UTC second."""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def open_read(paths: DataPaths) -> sqlite3.Connection | None:
    """The store opened read-only for history's readers; ``None`` when it does not exist or predates
    history (nothing is created or migrated)."""
    conn = store.open_existing(paths)
    if conn is None:
        return None
    if not recorded(migrations.check_readable(conn)):
        conn.close()
        return None
    return conn


def recorded(schema_version: int) -> bool:
    """Whether a store at ``schema_version`` has history's tables."""
    return schema_version >= migrations.MIGRATIONS.index(migrations.m006_section_history) + 1


def summary(conn: sqlite3.Connection) -> Summary:
    """Counts for ``cm status``: versions recorded, sections in the trash, the oldest removal."""
    (versions,) = conn.execute("SELECT COUNT(*) FROM section_versions").fetchone()
    trashed, oldest = conn.execute("SELECT COUNT(*), MIN(removed_at) FROM trash WHERE state = 'trashed'").fetchone()
    return Summary(versions, trashed, oldest)


def section_texts(doc: Document) -> dict[str, tuple[str, str]]:
    """``{key: (title, exact section text)}`` of a parsed document."""
    return {sections.unit_key(doc.target, s): (s.title, doc.data[s.start:s.end].decode("utf-8"))
            for s in doc.sections}


def _compare(target: str, old: Mapping[str, tuple[str, str]], new: Mapping[str, tuple[str, str]],
             kind: Callable[[str, str], str]) -> list[Change]:
    """Sections present in ``new`` but not ``old`` (put), the reverse (remove), or with other text
    (replace), by key, sorted; ``kind(key, shape)`` names each change."""
    out = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key), new.get(key)
        if was is None:
            assert now is not None
            out.append(Change(target, key, now[0], None, now[1], kind(key, "put")))
        elif now is None:
            out.append(Change(target, key, was[0], was[1], None, kind(key, "remove")))
        elif was[1] != now[1]:
            out.append(Change(target, key, now[0], was[1], now[1], kind(key, "replace")))
    return out


def diff_documents(before: Document, after: Document) -> list[Change]:
    """The sections ``after`` added, replaced or removed relative to ``before`` (by key, sorted)."""
    return _compare(after.target, section_texts(before), section_texts(after), lambda _key, shape: shape)


def unified(before: str | None, after: str | None, from_label: str, to_label: str) -> str:
    """A unified diff of two section texts (``None``: absent), ending in a newline when not empty."""
    lines = difflib.unified_diff((before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
                                 from_label, to_label)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def latest(conn: sqlite3.Connection, target: str) -> dict[str, Version]:
    """The newest version of every section key of ``target`` that history knows."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM section_versions v WHERE target = ? AND version = "
        "(SELECT MAX(version) FROM section_versions w WHERE w.section_key = v.section_key)", (target,)).fetchall()
    return {row[2]: Version(*row) for row in rows}


def _user_edits(conn: sqlite3.Connection, doc: Document) -> list[Change]:
    """What ``doc`` holds that its sections' newest versions do not: baselines and hand edits."""
    known = latest(conn, doc.target)
    seen = {key: (head.title, head.text) for key, head in known.items() if head.text is not None}
    return _compare(doc.target, seen, section_texts(doc),
                    lambda key, shape: "baseline" if key not in known else "hand_edit")


def stage(conn: sqlite3.Connection, job_id: str, befores: Mapping[str, Document], afters: Mapping[str, Document],
          decisions: Mapping[str, str], who: Provenance, at: int, kind: str | None = None,
          trashed: frozenset[str] = frozenset()) -> int:
    """Write what the commit of ``job_id`` will add to history, before it publishes; returns rows.

    ``befores`` is the snapshot the commit's CAS holds each live file to; ``decisions`` maps a
    section key to the decision kind that changed it; ``kind`` names the commit's own changes
    (``undo``, ``restore``, ``sync``) instead of put/replace/remove; a section whose key is in
    ``trashed`` and that the commit replaces is first removed as a ``sync_conflict`` (its text goes
    to the trash, restorable), then put anew. The caller holds the drain lease, and
    recovery has replayed every marked commit before an attempt starts, so no other commit's
    staged rows can still settle: they are deleted."""
    conn.execute("DELETE FROM section_changes_pending")
    rows: list[tuple[Change, str, str | None]] = []
    for target in sorted(afters):
        rows += [(change, USER, None) for change in _user_edits(conn, befores[target])]
        for change in diff_documents(befores[target], afters[target]):
            if change.key in trashed and change.before is not None and change.after is not None:
                rows.append((change._replace(after=None, kind=SYNC_CONFLICT), who.author, "sync conflict"))
                rows.append((change._replace(before=None, kind=kind or "put"), who.author, None))
            else:
                rows.append((change._replace(kind=kind) if kind else change, who.author, decisions.get(change.key)))
    conn.executemany(
        "INSERT INTO section_changes_pending(job_id, seq, target, section_key, title, text, kind, author, decision, "
        "client, session_id, model, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(job_id, seq, c.target, c.key, c.title, c.after, c.kind, author, decision,
          *((None, None, None) if c.kind in USER_KINDS else (who.client, who.session_id, who.model)), at)
         for seq, (c, author, decision) in enumerate(rows)])
    return len(rows)


def settle(conn: sqlite3.Connection, job_id: str, at: int) -> list[int]:
    """Turn the staged changes of ``job_id`` into versions, inside the commit's transaction.

    Each becomes the next version of its section; a commit's own removal also goes to the trash,
    and a section an undo or restore brings back leaves it. Returns the new version ids (none when
    nothing was staged)."""
    staged = conn.execute(
        "SELECT target, section_key, title, text, kind, author, decision, client, session_id, model, at "
        "FROM section_changes_pending WHERE job_id = ? ORDER BY seq", (job_id,)).fetchall()
    heads: dict[str, tuple[int, int] | None] = {}  # section key -> (id, number) of its newest version
    ids = []
    for target, key, title, text, kind, author, decision, client, session_id, model, staged_at in staged:
        parent = heads[key] if key in heads else _head(conn, key)
        receipt_id = None if kind in USER_KINDS else job_id
        number = parent[1] + 1 if parent else 1
        cursor = conn.execute(
            "INSERT INTO section_versions(target, section_key, version, parent_id, title, text, kind, author, "
            "decision, receipt_id, client, session_id, model, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (target, key, number, parent[0] if parent else None, title, text, kind, author, decision, receipt_id,
             client, session_id, model, staged_at))
        assert cursor.lastrowid is not None
        version_id = cursor.lastrowid
        heads[key] = (version_id, number)
        if text is None and kind in TRASHING_KINDS:
            trash_put(conn, version_id, target, key, at)
        elif text is not None and kind in RESTORING_KINDS:
            conn.execute("UPDATE trash SET state = 'restored' WHERE section_key = ? AND state = 'trashed'", (key,))
        ids.append(version_id)
    conn.execute("DELETE FROM section_changes_pending WHERE job_id = ?", (job_id,))
    return ids


def _head(conn: sqlite3.Connection, key: str) -> tuple[int, int] | None:
    """``(id, number)`` of one section's newest version: one lookup in the ``(section_key,
    version)`` index, because settle runs inside the repository lock and must not slow down as
    the document's history grows."""
    row = conn.execute("SELECT id, version FROM section_versions WHERE section_key = ? ORDER BY version DESC LIMIT 1",
                       (key,)).fetchone()
    return (row[0], row[1]) if row else None


def targets(conn: sqlite3.Connection) -> list[str]:
    """The documents history knows: profile, preferences, then projects by id."""
    found = [r[0] for r in conn.execute("SELECT DISTINCT target FROM section_versions")]
    return sorted(found, key=lambda t: (t != "profile", t != "preferences", t))


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


def trash_put(conn: sqlite3.Connection, version_id: int, target: str, key: str, at: int) -> str:
    """Put the section a removing version took away into the trash; returns its short id."""
    trash_id = "t_" + os.urandom(5).hex()
    conn.execute("INSERT INTO trash(id, version_id, target, section_key, removed_at) VALUES (?, ?, ?, ?, ?)",
                 (trash_id, version_id, target, key, at))
    return trash_id


def trash_list(conn: sqlite3.Connection, state: str = "trashed") -> list[TrashEntry]:
    rows = conn.execute("SELECT id, version_id, target, section_key, removed_at, state FROM trash "
                        "WHERE state = ? ORDER BY removed_at DESC, id", (state,))
    return [TrashEntry(*row) for row in rows]


def trash_get(conn: sqlite3.Connection, trash_id: str) -> TrashEntry | None:
    row = conn.execute("SELECT id, version_id, target, section_key, removed_at, state FROM trash "
                       "WHERE id = ?", (trash_id,)).fetchone()
    return TrashEntry(*row) if row else None


def incarnation(chain: list[Version], newest_id: int | None = None) -> list[Version]:
    """The versions of one section since it was last created, newest first, from ``newest_id``
    (default: the newest): a removal ends an incarnation, and the version after it starts one."""
    out: list[Version] = []
    for version in chain:  # newest first
        if newest_id is not None and version.id > newest_id:
            continue
        if out and version.text is None and version.purged_at is None:
            break  # an earlier removal: what came before it is another incarnation
        out.append(version)
    return out


def purge_versions(conn: sqlite3.Connection, key: str, ids: list[int], at: int) -> int:
    """Destroy the text and title of those versions of a section, keeping who and when; trash entries
    that point at one of them end as purged. Returns how many versions lost text."""
    cursor = conn.execute("UPDATE section_versions SET text = NULL, title = '', purged_at = ? WHERE section_key = ? "
                          "AND purged_at IS NULL AND id IN (SELECT value FROM json_each(?))", (at, key, json.dumps(ids)))
    conn.execute("DELETE FROM section_changes_pending WHERE section_key = ?", (key,))
    conn.execute("UPDATE trash SET state = 'purged' WHERE section_key = ? AND state = 'trashed' AND version_id IN "
                 "(SELECT value FROM json_each(?))", (key, json.dumps(ids)))
    return cursor.rowcount


def expire_trash(conn: sqlite3.Connection, now: int, retention_ms: int) -> int:
    """Purge every trashed section kept ``retention_ms``: the incarnation its removal ended."""
    expired = conn.execute("SELECT target, section_key, version_id FROM trash WHERE state = 'trashed' AND "
                           "removed_at <= ?", (now - retention_ms,)).fetchall()
    for target, key, version_id in expired:
        purge_versions(conn, key, [v.id for v in incarnation(versions(conn, target, key), version_id)], now)
    return len(expired)


def resolve_section(conn: sqlite3.Connection, target: str, section: str) -> str:
    """The section key ``section`` (a title, current or former, or a ``sec_`` ref) names in ``target``'s history."""
    known = versions(conn, target)
    titles = {v.title: v.key for v in known if v.title}
    untitled = f"{target}:{sections.unit_digest('')}"
    if section == sections.UNTITLED_LABEL and any(v.key == untitled for v in known):
        return untitled
    if section in titles:
        return titles[section]
    if section.startswith("sec_") and len(section) >= 16:
        digits = section[len("sec_"):]
        found = sorted({v.key for v in known if v.key.rsplit(":", 1)[1].startswith(digits)})
        if len(found) == 1:
            return found[0]
        if found:
            raise CmError("AMBIGUOUS_SECTION", f"{section} matches several sections of {target}; use a longer ref")
    raise CmError("UNKNOWN_SECTION", f"{target} has no section with that title or ref in its history; "
                                     f"run `cm history {target}` to list them")
