"""``cm history`` and ``cm trash``: what changed in the memory, version by version, and what was removed.

Contract:
- ``versions(home, target=None, section=None)`` lists versions newest first across every document
  (by version id, which commits hand out in order), each with a unified diff from the version it
  replaced (``--- v<parent>`` / ``+++ v<id>``; the first version of a section diffs from nothing).
  ``v<id>`` is the one numbering the text shows (and ``cm undo`` takes); ``version`` in the JSON
  counts the versions of that one section. ``target`` is ``profile``, ``preferences`` or ``project:<id>``;
  ``section`` a title (current or former) or a ``sec_`` ref, resolved among the sections that
  target's history knows (``UNKNOWN_SECTION`` / ``AMBIGUOUS_SECTION``).
- ``trash(home)`` lists the sections in the trash with the decision and receipt that removed them.
- A version whose text looks like a secret (the deep scan of ``safety``, minus the home's
  allow-list) is shown withheld: no text, no diff, the rules named, as ``cm show`` would.
- Each version carries ``said``: the user's words its commit processed, trimmed to one line
  (``user_words``; an import's text, not its envelope), ``None`` for a hand edit, words no longer
  kept, or a withheld version or quote. The text line quotes it under the headline; the terminal
  UI's list row, shorter, on the row.
- Read-only: the store is opened read-only and never created or migrated; a store that predates
  history reads as empty. Purged text shows as ``None`` with ``purgedAt``.
"""

from __future__ import annotations

import sqlite3

from cmrunner.capture import observations
from cmrunner.core import config as config_mod, history, records, sections
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.secrets import allowlist, safety
from cmrunner.views import sources


def data_paths(home: str) -> DataPaths:
    return DataPaths(config_mod.load(home).data_root)


def open_read(home: str) -> sqlite3.Connection | None:
    return history.open_read(data_paths(home))


def secret_rules(text: str | None, allowed: frozenset[str]) -> list[str]:
    if not text:
        return []
    return sorted({rule for _, rule, core in safety.findings(text, deep=True)
                   if rule in safety.SECRET_RULES and safety.fingerprint(rule, core) not in allowed})


def _label(version: history.Version) -> str:
    """A version's section as people read it: the untitled text before the first section has a
    label of its own (a purged version's title is empty too, and stays so)."""
    if not version.title and version.key == f"{version.target}:{sections.unit_digest('')}":
        return sections.UNTITLED_LABEL
    return version.title


def import_files(conn: sqlite3.Connection, sessions: set[str | None]) -> dict[str, str]:
    """The file name behind each import namespace among ``sessions`` (while its words are kept)."""
    wanted = sorted(s for s in sessions if s and s.startswith(sources.IMPORT_PREFIX))
    found = {}
    for namespace, text in observations.first_texts(conn, wanted).items():
        part = sources.imported(text)
        if part is not None and part[0]:
            found[namespace] = part[0]
    return found


def user_words(conn: sqlite3.Connection, version: history.Version, allowed: frozenset[str],
               cache: dict[str, list[str]]) -> str | None:
    """The user's words behind a version, trimmed to one line (``sources.quote``): the kept text of
    the first observation its commit processed (an import's text, never its envelope), preferring
    those still linked to the section; ``None`` for a hand edit, words no longer kept, or a quote
    that looks like a secret (it is withheld, as the version's text would be)."""
    if not version.receipt_id or version.author != "memory_agent":
        return None
    if version.receipt_id not in cache:
        ids = observations.ids_of_job(conn, version.receipt_id)
        linked = set(records.sources_of(conn, version.target, version.key))
        ids = [i for i in ids if i in linked] + [i for i in ids if i not in linked]
        kept = observations.texts(conn, ids)
        said = []
        for i in ids:
            text = kept.get(i)
            part = sources.imported(text)
            words = part[1] if part is not None else text
            if words and words.strip():
                said.append(sources.quote(words))
        cache[version.receipt_id] = said
    said = cache[version.receipt_id]
    if not said or secret_rules(said[0], allowed):
        return None
    return said[0] + (f" (+{len(said) - 1} more)" if len(said) > 1 else "")


def _view(version: history.Version, parent: history.Version | None, allowed: frozenset[str],
          files: dict[str, str], said: str | None = None) -> dict:
    withheld = secret_rules(version.text, allowed) + secret_rules(parent.text if parent else None, allowed)
    return {
        "id": f"v{version.id}", "target": version.target, "section": _label(version),
        "ref": "sec_" + version.key.rsplit(":", 1)[1][:12], "version": version.version,
        "parent": f"v{parent.id}" if parent else None, "kind": version.kind, "author": version.author,
        "decision": version.decision, "receipt": version.receipt_id, "client": version.client,
        "session": version.session_id, "model": version.model, "at": history.iso(version.at),
        "source": sources.place(version.client, version.session_id, None, files.get(version.session_id or "")),
        "said": None if withheld else said,
        "removed": version.text is None, "purgedAt": history.iso(version.purged_at) if version.purged_at else None,
        "withheld": sorted(set(withheld)),
        "diff": history.unified(parent.text if parent else None, version.text, f"v{parent.id}" if parent else "(none)",
                                f"v{version.id}") if version.purged_at is None and not withheld else "",
    }


def versions(home: str, target: str | None = None, section: str | None = None) -> list[dict]:
    if target is not None:
        sections.target_title(target)  # INVALID_TARGET_REFERENCE for anything else
    conn = open_read(home)
    if conn is None:
        if section is not None:
            raise CmError("UNKNOWN_SECTION", "no history is recorded yet; it starts with the next commit")
        return []
    try:
        targets = [target] if target is not None else history.targets(conn)
        key = history.resolve_section(conn, target, section) if target is not None and section is not None else None
        allowed = allowlist.load(home)
        out = []
        said: dict[str, list[str]] = {}  # receipt → the user's words its commit processed
        for name in targets:
            every = history.versions(conn, name)
            by_id = {v.id: v for v in every}
            files = import_files(conn, {v.session_id for v in every})
            out += [_view(v, by_id.get(v.parent_id) if v.parent_id else None, allowed, files,
                          user_words(conn, v, allowed, said))
                    for v in every if key is None or v.key == key]
        # Newest first across every document: version ids are given in commit order.
        return sorted(out, key=lambda v: int(v["id"][1:]), reverse=True)
    finally:
        conn.close()


CHANGE_WORDS = {"put": "added", "replace": "changed", "remove": "removed"}


def changes_of(home: str, receipts: list[str]) -> list[str]:
    """What the commits with these receipt (job) ids did, one ``target / section added|changed|removed``
    per section version, in commit order; empty when they changed no section."""
    conn = open_read(home)
    if conn is None:
        return []
    try:
        return [f"{v.target} / {_label(v)} {CHANGE_WORDS.get(v.kind, v.kind)}"
                for receipt in receipts for v in history.by_receipt(conn, receipt)]
    finally:
        conn.close()


def trash(home: str) -> list[dict]:
    conn = open_read(home)
    if conn is None:
        return []
    try:
        retention = config_mod.load(home).trash_retention_ms
        out = []
        for entry in history.trash_list(conn):
            removing = history.get(conn, entry.version_id)
            assert removing is not None
            out.append({"id": entry.id, "target": entry.target, "section": _label(removing),
                        "removedAt": history.iso(entry.removed_at), "expiresAt": history.iso(entry.removed_at + retention),
                        "decision": removing.decision, "receipt": removing.receipt_id, "version": f"v{removing.id}",
                        "reason": _trash_reason(removing.kind)})
        return out
    finally:
        conn.close()


def _trash_reason(kind: str) -> str | None:
    """Why a sync put a section in the trash: a conflict (this machine's text lost to the remote's)
    or a removal made on another machine; ``None`` for the Memory Agent's own removals."""
    return {history.SYNC_CONFLICT: "sync conflict", "sync": "removed on another machine"}.get(kind)


# -- text rendering (cm history / cm trash and the terminal UI) ------------------------------------

def author(v: dict) -> str:
    """Who made a version: its author, and the Memory Agent's decision kind when there is one."""
    return v["author"] if v["decision"] is None else f"{v['author']} ({v['decision']})"


LIST_QUOTE_CHARS = 60  # the terminal UI's History list quotes shorter: one list row at 80 columns


def version_line(v: dict, where: bool = True) -> str:
    """One version's headline with where it came from in plain words (``sources.place``) and the
    user's words behind it (``said``, trimmed); ``where`` adds its receipt and model, and without
    it (the terminal UI's list) the quote is cut shorter."""
    line = f"{v['id']}  {v['target']} / {v['section']}  {v['kind']} by {author(v)}  {v['at']}"
    if v.get("source"):
        line += f"  ({v['source']})"
    extra = " ".join(f"{name} {v[name]}" for name in ("receipt", "model") if v[name])
    if where and extra:
        line += f"  {extra}"
    said = v.get("said")
    if said:
        if not where and len(said) > LIST_QUOTE_CHARS:
            said = said[:LIST_QUOTE_CHARS - 1].rstrip() + "…"
        line += f"\n    “{said}”" if where else f"  “{said}”"
    return line


def version_detail(v: dict) -> str:
    """The version's diff, or why it has none."""
    if v["purgedAt"]:
        return f"(purged {v['purgedAt']})"
    if v["withheld"]:
        return f"(withheld: looks like a secret: {', '.join(v['withheld'])}; see `cm secrets list`)"
    return v["diff"].rstrip("\n") or "(no text change)"


def trash_line(t: dict, where: bool = True) -> str:
    """One trash entry; ``where`` adds its id and the receipt that removed it."""
    if t.get("reason") == "sync conflict":
        why = "by a sync conflict (the other machine's text was kept in its place)"
    elif t.get("reason"):
        why = "on another machine (brought by `cm sync`)"
    else:
        why = f"by a {t['decision']} decision" if t["decision"] else "by the Memory Agent"
    line = f"{t['target']} / {t['section']}  removed {t['removedAt'][:10]} {why}, kept until {t['expiresAt'][:10]}"
    return f"{t['id']}  {line} (receipt {t['receipt']})" if where else line
