"""``cm restore <trash-id>``: bring a section the Memory Agent removed back from the trash.

Contract: the section's text before its removal is appended to its document, exactly, by one
commit through the Writer's path (``usercommit``), recorded as the user's ``restore``; the same
commit marks the trash entry restored (``history.settle``), so it is injected again from the next
session on. Fails closed, publishing nothing: ``UNKNOWN_TRASH_ID``, ``ALREADY_RESTORED``,
``VERSION_PURGED`` (its retention ended or it was purged), ``SECTION_EXISTS`` (a section with
that title was created again meanwhile: rename or remove it first). A section a sync conflict
put in the trash (its removal's kind is ``sync_conflict``: the other machine's text was kept in
its place) comes back in place of that text, which stays in history.
"""

from __future__ import annotations

from cmrunner.core import history, sections
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import commit, usercommit


class Restored:
    __slots__ = ("receipt_id", "target", "title")

    def __init__(self, receipt_id: str, target: str, title: str) -> None:
        self.receipt_id = receipt_id
        self.target = target
        self.title = title


def run(paths: DataPaths, home: str, trash_id: str) -> Restored:
    with usercommit.exclusive(paths, home) as session:
        entry = history.trash_get(session.conn, trash_id)
        if entry is None:
            raise CmError("UNKNOWN_TRASH_ID", f"nothing in the trash has id {trash_id[:40]!r}; `cm trash` lists them")
        if entry.state == "restored":
            raise CmError("ALREADY_RESTORED", f"{trash_id} was restored already; `cm history {entry.target}` shows it")
        removing = history.get(session.conn, entry.version_id)
        before = history.get(session.conn, removing.parent_id) if removing and removing.parent_id else None
        if entry.state == "purged" or before is None or before.text is None:
            raise CmError("VERSION_PURGED", f"the text of {trash_id} was purged; it cannot come back")
        doc = commit.read_document(paths, entry.target)
        current = doc.by_title(before.title)
        if current is not None and removing is not None and removing.kind == history.SYNC_CONFLICT:
            swapped = sections.put_section_text(doc, current.ref, before.title, before.text)
            receipt_id = usercommit.commit_change(session, {entry.target: doc}, {entry.target: swapped}, "restore")
            return Restored(receipt_id, entry.target, before.title)
        if current is not None:
            raise CmError("SECTION_EXISTS", f"{entry.target} has a section with that title again; rename or remove it, "
                                            f"then run `cm restore {trash_id}` again")
        restored = sections.put_section_text(doc, None, before.title, before.text)
        receipt_id = usercommit.commit_change(session, {entry.target: doc}, {entry.target: restored}, "restore")
        return Restored(receipt_id, entry.target, before.title)
