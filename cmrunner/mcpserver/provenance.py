"""Per-section provenance for MCP reads that ask for it (``memory_read {provenance: true}``).

Contract: for every section of every document a read returned — exactly the sections in the
delivered text, so a section withheld as a secret (or its title) never shows up here — the last
change that history knows (receipt id, time, client, author) and the provenance classes of the
observations linked to it as evidence (``user_explicit``, ``agent_observation``,
``document_import``). A section whose current text history has not seen (written before history
existed, or by hand since the last commit) has ``lastReceipt`` null and ``author`` ``unknown``.
Read-only; never the evidence's words. The default read output is the specification's, unchanged.
"""

from __future__ import annotations

from cmrunner.capture import observations
from cmrunner.core import history, records, sections
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths


def of_documents(paths: DataPaths, documents: list[dict]) -> list[dict]:
    """``[{target, section, ref, lastReceipt, at, client, author, provenance}]`` for ``documents``
    (the ``documents`` list of a consumer read)."""
    conn = history.open_read(paths)
    out = []
    try:
        for document in documents:
            if document["empty"]:
                continue
            try:
                doc = sections.parse(document["target"], document["content"])
            except CmError:
                continue  # a withheld placeholder can break the section grammar: say nothing rather than guess
            heads = history.latest(conn, doc.target) if conn else {}
            for key, (title, text) in history.section_texts(doc).items():
                head = heads.get(key)
                known = head is not None and head.text == text
                sources = records.sources_of(conn, doc.target, key) if conn else []
                classes = sorted({p for p in observations.provenances(conn, sources).values() if p}) if conn else []
                out.append({
                    "target": doc.target, "section": title, "ref": "sec_" + key.rsplit(":", 1)[1][:12],
                    "lastReceipt": head.receipt_id if known and head else None,
                    "at": history.iso(head.at) if known and head else None,
                    "client": head.client if known and head else None,
                    "author": head.author if known and head else "unknown",
                    "provenance": classes,
                })
    finally:
        if conn is not None:
            conn.close()
    return out
