"""``cm why <document> [section]``: why each section of a memory document says what it says.

Contract:
- For each section of the live document (or the one ``section`` names, by title or ``sec_`` ref):
  the versions that produced and changed it (receipt, time, decision, client, model, from
  ``core.history``), whether its current text is a hand edit ("edited by you"), and its
  evidence — the observations linked to it (``core.records``) with the user's exact words while
  they are kept, and host, agent instance, session, time and provenance class (``user_explicit``,
  ``agent_observation``, ``document_import``).
- Evidence whose words are gone says why: forgotten or purged at the user's request (its words are
  tombstoned), or pruned by the 7-day rule after processing. Nothing is shown as if it never existed.
- A section never seen by history (written before history existed, or by hand since the last
  commit) says so. A secret-looking section is withheld, as ``cm history`` withholds it.
- Read-only: the store is opened read-only and never created or migrated.
"""

from __future__ import annotations

from cmrunner.capture import observations
from cmrunner.core import history, records, sections
from cmrunner.core.errors import CmError
from cmrunner.secrets import allowlist
from cmrunner.views import history as history_view
from cmrunner.writer_proc import commit

PRUNE_DAYS = observations.PRUNE_AFTER_MS // 86_400_000


def _evidence(item: observations.Evidence) -> dict:
    words = item.text
    if words is not None:
        gone = None
    elif item.forgotten:
        gone = "forgotten or purged at your request"
    elif item.state == "processed" and item.processed_at is not None:
        gone = f"pruned by the {PRUNE_DAYS}-day rule ({history.iso(item.processed_at)[:10]} + {PRUNE_DAYS} days)"
    else:
        gone = "no longer kept"
    return {"id": item.id, "words": words, "gone": gone, "provenance": item.provenance, "host": item.source,
            "agentInstance": item.agent_instance, "session": item.namespace, "at": item.observed_at}


def explain(home: str, target: str, section: str | None = None) -> list[dict]:
    sections.target_title(target)  # INVALID_TARGET_REFERENCE for anything else
    paths = history_view.data_paths(home)
    doc = commit.read_document(paths, target)
    current = history.section_texts(doc)
    wanted = list(current)
    if section is not None:
        found = doc.named(section)
        if found is None:
            raise CmError("UNKNOWN_SECTION", f"{target} has no current section with that title or ref; "
                                             f"run `cm why {target}` to list them")
        wanted = [sections.section_key(target, found.title)]
    conn = history_view.open_read(home)
    allowed = allowlist.load(home)
    out = []
    try:
        for key in wanted:
            title, text = current[key]
            chain = history.versions(conn, target, key) if conn else []
            links = observations.evidence(conn, records.sources_of(conn, target, key)) if conn else []
            head = chain[0] if chain else None
            secret = history_view.secret_rules(text, allowed)
            out.append({
                "target": target, "section": title, "ref": "sec_" + key.rsplit(":", 1)[1][:12],
                "editedByYou": history.iso(head.at) if head and head.kind == "hand_edit" else None,
                "known": head is not None and head.text == text,
                "versions": [{"id": f"v{v.id}", "kind": v.kind, "author": v.author, "decision": v.decision,
                              "receipt": v.receipt_id, "client": v.client, "model": v.model,
                              "at": history.iso(v.at)} for v in chain],
                "withheld": secret,
                "evidence": [] if secret else [_evidence(item) for item in links],
            })
    finally:
        if conn is not None:
            conn.close()
    return out


def lines(found: list[dict]) -> list[str]:
    """The plain-text report of ``cm why``."""
    out: list[str] = []
    for s in found:
        out.append(f"{s['target']} / {s['section']}  ({s['ref']})")
        if s["editedByYou"]:
            out.append(f"  edited by you on {s['editedByYou']}")
        elif not s["known"]:
            out.append("  not in history yet: written before history began, or by hand since the last commit")
        for v in s["versions"]:
            where = "".join(f" {k} {v[k]}" for k in ("receipt", "client", "model") if v[k])
            out.append(f"  {v['id']} {v['kind']} by {history_view.author(v)} {v['at']}{where}")
        if s["withheld"]:
            out.append(f"  evidence withheld: the section looks like a secret ({', '.join(s['withheld'])})")
        elif not s["evidence"]:
            out.append("  no evidence linked (a hand edit or an import keeps none)")
        for e in s["evidence"]:
            said = f"“{e['words']}”" if e["words"] is not None else f"(words {e['gone']})"
            via = f"{e['host']} ({e['agentInstance']})" if e["agentInstance"] else e["host"]
            out.append(f"  evidence #{e['id']} {e['provenance'] or 'unknown provenance'} via {via}, "
                       f"session {e['session']}, {e['at']}: {said}")
        out.append("")
    return out
