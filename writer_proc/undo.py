"""``cm undo <receipt-or-version>``: put back what one commit (or one version) replaced.

Contract:
- ``v<id>`` names one version of one section; a receipt id every version that commit made. Each
  section goes back to the version its undone one replaced: its exact text, or no section at all
  when the undone version created it. The result is one new commit through the Writer's path
  (``usercommit``), recorded in history as the user's ``undo`` with its own receipt. A hand edit's
  version can be undone too; a ``baseline`` (the first version cm saw) cannot.
- Fails closed, publishing nothing: ``UNKNOWN_VERSION`` (no such version or receipt),
  ``UNDO_OF_UNDO`` (the target is itself an undo), ``VERSION_PURGED`` (the text needed is gone),
  ``SECTION_CHANGED_SINCE`` (the live section is no longer what that version wrote — a later
  commit or a hand edit; ``ChangedSince.diff`` shows how) unless ``force``, ``NOTHING_TO_UNDO``
  (a baseline, or the document already holds what the undo would write).
"""

from __future__ import annotations

import re
import sqlite3

from cmrunner.core import history, sections
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.sections import Document
from cmrunner.writer_proc import commit, usercommit

_VERSION_RE = re.compile(r"v([0-9]{1,18})")


class ChangedSince(CmError):
    """``SECTION_CHANGED_SINCE``, with the diff from what the undone version wrote to what is there now."""

    def __init__(self, message: str, diff: str) -> None:
        super().__init__("SECTION_CHANGED_SINCE", message)
        self.diff = diff


class Undone:
    __slots__ = ("receipt_id", "sections")

    def __init__(self, receipt_id: str, undone: list[tuple[str, str, str]]) -> None:
        self.receipt_id = receipt_id
        self.sections = undone  # (version id, target, title)


def _versions(conn: sqlite3.Connection, ref: str) -> list[history.Version]:
    m = _VERSION_RE.fullmatch(ref)
    found = [v for v in [history.get(conn, int(m.group(1)))] if v is not None] if m else history.by_receipt(conn, ref)
    if not found:
        raise CmError("UNKNOWN_VERSION", f"no commit or version {ref[:80]!r} to undo; `cm history` lists them "
                                         "(a version is v<number>, a commit its receipt id)")
    if any(v.kind == "baseline" for v in found):
        raise CmError("NOTHING_TO_UNDO", f"{ref[:80]} is the first version cm saw of that section; nothing came "
                                         "before it")
    if any(v.kind == "undo" for v in found):
        raise CmError("UNDO_OF_UNDO", f"{ref[:80]} is itself an undo; to go forward again, undo nothing: "
                                      "`cm history` shows the text it replaced, to restore by hand")
    return found


def apply_undo(doc: Document, version: history.Version, parent: history.Version | None, force: bool) -> Document:
    """``doc`` with ``version``'s section put back as ``parent`` had it (see module contract)."""
    live = history.section_texts(doc).get(version.key)
    live_text = live[1] if live else None
    if live_text != version.text and not force:
        raise ChangedSince(f"{version.target} / {version.title} changed since v{version.id} wrote it; nothing was "
                           "changed: review the diff, then undo with --force to replace it anyway",
                           history.unified(version.text, live_text, f"v{version.id}", "now"))
    current = doc.by_title(live[0]) if live else None
    if parent is None or parent.text is None:
        return sections.remove_section(doc, current.ref) if current else doc
    return sections.put_section_text(doc, current.ref if current else None, parent.title, parent.text)


def run(paths: DataPaths, home: str, ref: str, force: bool = False) -> Undone:
    with usercommit.exclusive(paths, home) as session:
        found = _versions(session.conn, ref)
        snapshot = {t: commit.read_document(paths, t) for t in sorted({v.target for v in found})}
        docs = dict(snapshot)
        for version in found:
            parent = history.get(session.conn, version.parent_id) if version.parent_id else None
            if version.purged_at is not None or (parent is not None and parent.purged_at is not None):
                raise CmError("VERSION_PURGED", f"the text v{version.id} replaced was purged; it cannot come back")
            docs[version.target] = apply_undo(docs[version.target], version, parent, force)
        changed = {t: d for t, d in docs.items() if d.data != snapshot[t].data}
        if not changed:
            raise CmError("NOTHING_TO_UNDO", f"the memory already holds what undoing {ref[:80]} would write")
        receipt_id = usercommit.commit_change(session, {t: snapshot[t] for t in changed}, changed, "undo")
        return Undone(receipt_id, [(f"v{v.id}", v.target, v.title) for v in found])
