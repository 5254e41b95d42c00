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
- Words are quoted trimmed (``views.sources.quote``); an import's evidence is the imported text and
  its file name, never the import envelope. Origins are plain labels (``views.sources.place``).
- ``section`` may also name a section no longer in the document (a title or ref its history knows):
  it is reported ``removed``, with its versions. A section whose links were dropped (removed, then
  undone or restored) shows the evidence of the commits that wrote its text (``fromCommits``).
- Read-only: the store is opened read-only and never created or migrated.
"""

from __future__ import annotations

import sqlite3

from cmrunner.capture import observations
from cmrunner.core import history, records, sections
from cmrunner.core.errors import CmError
from cmrunner.secrets import allowlist
from cmrunner.views import history as history_view, sources
from cmrunner.writer_proc import commit

PRUNE_DAYS = observations.PRUNE_AFTER_MS // 86_400_000
PLAIN = {"user_explicit": "you said", "agent_observation": "an agent noted", "document_import": "you imported"}


def _evidence(item: observations.Evidence) -> dict:
    words, file_name = item.text, None
    part = sources.imported(words)
    if part is not None:
        file_name, words = part
    if words is not None:
        words = sources.quote(words)
        gone = None
    elif item.forgotten:
        gone = "forgotten or purged at your request"
    elif item.state == "processed" and item.processed_at is not None:
        gone = f"pruned by the {PRUNE_DAYS}-day rule ({history.iso(item.processed_at)[:10]} + {PRUNE_DAYS} days)"
    else:
        gone = "no longer kept"
    return {"id": item.id, "words": words, "gone": gone, "provenance": item.provenance, "host": item.source,
            "agentInstance": item.agent_instance, "session": item.namespace, "at": item.observed_at,
            "file": file_name,
            "from": sources.place(item.agent_instance, item.namespace, item.observed_at, file_name, item.source)}


def _written_by(conn: sqlite3.Connection, chain: list[history.Version]) -> list[int]:
    """The observations of the Memory Agent's commits that wrote this section's text."""
    ids: set[int] = set()
    for v in chain:
        if v.author == "memory_agent" and v.text is not None and v.receipt_id:
            ids.update(observations.ids_of_job(conn, v.receipt_id))
    return sorted(ids)


def explain(home: str, target: str, section: str | None = None) -> list[dict]:
    sections.target_title(target)  # INVALID_TARGET_REFERENCE for anything else
    paths = history_view.data_paths(home)
    doc = commit.read_document(paths, target)
    current = history.section_texts(doc)
    wanted = list(current)
    conn = history_view.open_read(home)
    if section is not None:
        found = doc.named(section)
        if found is not None:
            wanted = [sections.section_key(target, found.title)]
        elif conn is not None:
            try:  # a removed section is still explained from its history
                wanted = [history.resolve_section(conn, target, section)]
            except CmError:
                conn.close()
                raise CmError("UNKNOWN_SECTION", f"{target} has no section with that title or ref, now or in its "
                                                 f"history; run `cm why {target}` to list them") from None
        else:
            raise CmError("UNKNOWN_SECTION", f"{target} has no current section with that title or ref; "
                                             f"run `cm why {target}` to list them")
    allowed = allowlist.load(home)
    out = []
    try:
        for key in wanted:
            chain = history.versions(conn, target, key) if conn else []
            head = chain[0] if chain else None
            removed = key not in current
            if removed:
                assert head is not None
                title = next((v.title for v in chain if v.title), head.title)
                text = next((v.text for v in chain if v.text is not None), "")
            else:
                title, text = current[key]
            linked = records.sources_of(conn, target, key) if conn else []
            from_commits = not linked and bool(chain) and conn is not None
            if from_commits and conn is not None:
                linked = _written_by(conn, chain)
            links = observations.evidence(conn, linked) if conn else []
            secret = history_view.secret_rules(text, allowed)
            files = history_view.import_files(conn, {v.session_id for v in chain}) if conn else {}
            out.append({
                "target": target, "section": title, "ref": "sec_" + key.rsplit(":", 1)[1][:12],
                "removed": removed, "fromCommits": from_commits and bool(links),
                "editedByYou": history.iso(head.at) if head and head.kind == "hand_edit" and not removed else None,
                "known": head is not None and (removed or head.text == text),
                "versions": [{"id": f"v{v.id}", "kind": v.kind, "author": v.author, "decision": v.decision,
                              "receipt": v.receipt_id, "client": v.client, "model": v.model,
                              "at": history.iso(v.at),
                              "source": sources.place(v.client, v.session_id, None,
                                                      files.get(v.session_id or ""))} for v in chain],
                "withheld": secret,
                "evidence": [] if secret else [_evidence(item) for item in links],
            })
    finally:
        if conn is not None:
            conn.close()
    return out


def lines(found: list[dict]) -> list[str]:
    """The plain-text report of ``cm why``: the words first, then the commits."""
    out: list[str] = []
    for s in found:
        out.append(f"{s['target']} / {s['section']}  ({s['ref']})")
        if s["removed"]:
            out.append(f"  not in the document now: removed by {s['versions'][0]['id']}; `cm trash` lists it")
        elif s["editedByYou"]:
            out.append(f"  edited by you on {s['editedByYou']}")
        elif not s["known"]:
            out.append("  not in history yet: written before history began, or by hand since the last commit")
        if s["withheld"]:
            out.append(f"  evidence withheld: the section looks like a secret ({', '.join(s['withheld'])})")
        elif not s["evidence"]:
            out.append("  no evidence linked (a hand edit keeps none)")
        elif s["fromCommits"]:
            out.append("  evidence of the commits that wrote its text:")
        for e in s["evidence"]:
            said = f"“{e['words']}”" if e["words"] is not None else f"(words {e['gone']})"
            kind = PLAIN.get(e["provenance"] or "", "of unknown origin")
            out.append(f"  evidence #{e['id']}, {kind}, {e['from'] or e['host']}: {said}")
        for v in s["versions"]:
            where = f" ({v['source']})" if v["source"] else ""
            where += "".join(f" {k} {v[k]}" for k in ("receipt", "model") if v[k])
            out.append(f"  {v['id']} {v['kind']} by {history_view.author(v)} {v['at']}{where}")
        out.append("")
    return out
