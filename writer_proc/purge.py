"""``cm purge``: make a section's text really gone from the store and every file under the home.

Contract:
- ``run(paths, home, target_or_trash_id, section, all_history)`` names a trash entry (``t_…``) or a
  section of a document (a title or ``sec_`` ref, current or only in history). It destroys, in
  this order, each step in its own transaction and safe to run again after a crash:
  1. the evidence: the text of the observations linked to the section (tombstoned in their scope,
     as a forget leaves them, so the same words are not admitted again), their links, and every
     copy of the purged text in kept observations, session messages and prompt candidates, and
     frozen session snapshots;
  2. the section itself, when it is still in its document: removed by a commit of the user's
     (``usercommit``, decision ``purge``), through the Writer's lock, CAS and publish;
  3. the text and title of its versions in history — the versions since it was last created
     (``history.incarnation``), or every version with ``all_history`` — and its trash entries;
     the section's own text and body are tombstoned in the document's scope too, so a stale
     import of them is refused.
  Then the database is compacted so no freed page keeps a copy: WAL checkpoint (TRUNCATE),
  ``VACUUM``, checkpoint again; pre-upgrade backups (``runtime/upgrade-backups``) are deleted,
  since they are copies of the database from before the purge.
- Errors: ``UNKNOWN_TRASH_ID``, ``UNKNOWN_SECTION``, ``ALREADY_PURGED``.
- What cannot be guaranteed: the storage medium itself (a copy-on-write file system, an SSD's
  remapped blocks or a backup/snapshot of the disk may keep old blocks), and text the host keeps in
  its own transcripts. ``PurgeReport.incomplete`` is set when the WAL could not be truncated
  because another process was reading (run ``cm purge`` again later).
"""

from __future__ import annotations

import os
import shutil
import sqlite3

from cmrunner.capture import activations, codex_inbox, hook_inbox, observations, sessions
from cmrunner.core import history, records, scopes, sections, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import commit, usercommit


class PurgeReport:
    __slots__ = ("target", "versions", "observations", "removed_from_document", "backups_removed", "incomplete")

    def __init__(self, target: str) -> None:
        self.target = target
        self.versions = 0
        self.observations = 0
        self.removed_from_document = False
        self.backups_removed = 0
        self.incomplete = False


def _locate(session: usercommit.Session, name: str, section: str | None) -> tuple[str, str, int | None]:
    """(target, section key, newest version id to purge from, or None for the newest)."""
    conn = session.conn
    if section is None:
        entry = history.trash_get(conn, name)
        if entry is None:
            raise CmError("UNKNOWN_TRASH_ID", f"nothing in the trash has id {name[:40]!r}; `cm trash` lists them, "
                                              "or name a document and a section")
        if entry.state == "purged":
            raise CmError("ALREADY_PURGED", f"{name} was purged already")
        return entry.target, entry.key, entry.version_id
    sections.target_title(name)  # INVALID_TARGET_REFERENCE for anything else
    doc = commit.read_document(session.paths, name)
    found = doc.named(section)
    if found is not None:
        return name, sections.section_key(name, found.title), None
    return name, history.resolve_section(conn, name, section), None


def _bodies(texts: list[str]) -> list[str]:
    """Each section text and its body alone (what a stale import could carry)."""
    out = []
    for text in texts:
        out.append(text)
        body = text.split("\n", 1)[1] if "\n" in text else ""
        if body.strip():
            out.append(body)
    return out


def _compact(paths: DataPaths, conn: sqlite3.Connection, report: PurgeReport) -> None:
    # VACUUM rewrites every page, so no freed page keeps old text; the checkpoints move the WAL's
    # frames (old ones included) into the database and truncate the WAL file to nothing.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    report.incomplete = bool(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
    if os.path.isdir(paths.backups):
        for name in os.listdir(paths.backups):
            shutil.rmtree(os.path.join(paths.backups, name), ignore_errors=True)
            report.backups_removed += 1


def run(paths: DataPaths, home: str, name: str, section: str | None = None, all_history: bool = False) -> PurgeReport:
    with usercommit.exclusive(paths, home) as session:
        conn = session.conn
        target, key, newest = _locate(session, name, section)
        report = PurgeReport(target)
        scope = scopes.target_scope(target)
        chain = history.versions(conn, target, key)
        chosen = chain if all_history else history.incarnation(chain, newest)
        doc = commit.read_document(paths, target)
        live = history.section_texts(doc).get(key)
        texts = sorted({v.text for v in chosen if v.text} | ({live[1]} if live else set()))
        if not texts and not live:
            raise CmError("ALREADY_PURGED", f"no text of that section of {target} is left to purge")
        needles = _bodies(texts)
        evidence = records.sources_of(conn, target, key)
        with store.immediate(conn):  # 1. the evidence and every copy of the text outside history
            for source_id in evidence:
                observations.forget(conn, source_id)
            records.unlink_section(conn, target, key)
            report.observations = len(evidence) + observations.clear_containing(conn, needles)
            sessions.clear_texts(conn, evidence, needles)
            codex_inbox.clear_candidates_containing(conn, needles)
            hook_inbox.clear_containing(conn, needles)
            activations.drop_snapshots_containing(conn, needles)
            for text in needles:
                observations.tombstone_text(conn, scope, text)
        if live is not None:  # 2. out of the document, by a commit of the user's
            current = doc.by_title(live[0])
            assert current is not None
            usercommit.commit_change(session, {target: doc}, {target: sections.remove_section(doc, current.ref)},
                                     "purge")
            report.removed_from_document = True
            chain = history.versions(conn, target, key)
            chosen = chain if all_history else history.incarnation(chain)
        with store.immediate(conn):  # 3. history and the trash
            history.purge_versions(conn, key, [v.id for v in chosen], usercommit.now_ms())
        report.versions = sum(1 for v in chosen if v.text is not None)
        _compact(paths, conn, report)
        return report
