"""Plan and apply an Agent Integration selection as one transaction.

Contract:
- ``plan(home, selected, init, grant)`` turns the wanted selection into file changes: checking a
  host installs its resources, unchecking one removes only what cm owns for it, keeping one keeps
  (and refreshes pins in) its resources. Resources shared by Codex and ChatGPT in one Codex root
  stay while either owner needs them. Nothing is written while planning.
- Claude Code and Gemini CLI (``jsonhosts``) get entries in the user's own JSON settings, edited
  losslessly by ``jsonedit``; the manifest records the containers (and files) cm created for them,
  so a removal takes out exactly what cm added. Every user file an entry edit changes is backed up
  first (``txn``).
- Fail closed, before anything is written: a newly selected host that is unavailable
  (``HOST_UNAVAILABLE``); a file cm would create that already exists (``UNMANAGED_FILE``) or a TOML
  or JSON entry that exists without cm having written it (``UNMANAGED_ENTRY``); a host settings
  file that does not parse (``HOST_CONFIG_INVALID``, naming it); an owned file or entry the
  user changed since cm wrote it (``HOST_FILE_MODIFIED``); a second Pi bridge
  (``PI_BRIDGE_DUPLICATE``); ChatGPT's import server without ``agent_observation`` disclosure and
  without the user's confirmation (``DISCLOSURE_CONFIRMATION_REQUIRED``).
- ``apply`` hands the plan to ``txn.apply``: the host files, the disclosure change in
  ``config.json`` (when confirmed) and the new manifest commit together or not at all. Planning
  and applying run under ``txn.locked``; callers that plan and apply at once (``cm agents``, the
  UI) hold it across both, and every change is guarded by the digest its plan saw anyway.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field

from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError
from cmrunner.core.home import config_path
from cmrunner.manage import bundles
from cmrunner.manage.hostconfig import Pins
from cmrunner.manage.integrations import (
    codexroot,
    discovery,
    jsonedit,
    jsonhosts,
    manifest as manifest_mod,
    pi as pi_mod,
    tomledit,
    txn,
)
from cmrunner.manage.integrations.tomledit import Entry

CODEX_HOSTS = ("codex", "chatgpt")
# cm adds entries to a host settings file up to this size (parsing takes a few times the file in
# memory); removing them has no limit, so a grown file never keeps cm's entries in.
ADD_LIMIT = 256 << 20
Keys = set[tuple[str, ...]]


@dataclass
class Plan:
    selected: list[str]
    install: list[str]
    remove: list[str]
    keep: list[str]
    init: bool
    grant: bool
    changes: list[txn.Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.changes


def installed(home: str) -> dict[str, dict]:
    """The hosts the manifest says cm installed: ``{host: {root, installedAt, init?}}``."""
    return manifest_mod.load(home)["hosts"]


def _text(path: str) -> tuple[str, bool]:
    """The file's text (``""`` when absent) and whether it exists; read whatever its size."""
    data = txn.read_bytes(path)
    if data is None:
        return "", False
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        raise CmError("HOST_CONFIG_INVALID", f"{path} is not UTF-8 text; fix it first, nothing was changed") from None


def _needs_grant(cfg: config_mod.Config) -> bool:
    return "agent_observation" not in cfg.disclosure.allowed_provenance


def _roots(selected: list[str], recorded: dict, hosts: dict[str, discovery.Host]) -> dict[str, str]:
    return {h: recorded[h]["root"] if h in recorded else hosts[h].root for h in selected}


def _mcp_files(selected: list[str], recorded: dict, hosts: dict[str, discovery.Host]) -> dict[str, str]:
    """Claude Code's ``.claude.json``, as recorded at install (it does not follow from the root)."""
    if "claude-code" not in selected:
        return {}
    info = recorded.get("claude-code")
    path = info["mcpFile"] if info else hosts["claude-code"].mcp_file
    assert path is not None
    return {"claude-code": path}


def _collect(home: str, pins: Pins, roots: dict[str, str], init: bool, recorded_entries: list[dict],
             mcp_files: dict[str, str]) -> tuple[dict, dict]:
    """Desired ``files {path: (bytes, owners, prune)}`` and ``entries {file: [(Entry, owners)]}``."""
    files: dict[str, tuple[bytes, list[str], list[str]]] = {}
    entries: dict[str, list[tuple[Entry, list[str]]]] = {}
    codex_owners: dict[str, set[str]] = {}
    for host in CODEX_HOSTS:
        if host in roots:
            codex_owners.setdefault(roots[host], set()).add(host)
    for root, owners in codex_owners.items():
        base = os.path.join(root, codexroot.BASE_FILE)
        ours = any(e["file"] == base and tuple(e["key"]) == ("mcp_servers", "common_memory_init")
                   for e in recorded_entries)
        foreign_init = bundles.base_has_init_server(base) and not ours
        want = codexroot.desired(root, pins, owners, init, foreign_init)
        for path, data in want.files.items():
            owner = ["codex"] if path.endswith(codexroot.PROFILE_FILE) else sorted(owners)
            files[path] = (data, owner, want.prune.get(path, []))
        for path, listed in want.entries.items():
            entries[path] = [(e, ["chatgpt"] if e.key[-1] == "common_memory_init" else sorted(owners)) for e in listed]
    if "pi" in roots:
        for path, data in pi_mod.desired(roots["pi"], pins).items():
            files[path] = (data, ["pi"], pi_mod.prune_dirs(roots["pi"]))
    for host in jsonhosts.HOSTS:
        if host in roots:
            for path, listed in jsonhosts.desired(host, roots[host], mcp_files.get(host), pins).items():
                entries.setdefault(path, []).extend((e, [host]) for e in listed)
    return files, entries


def _file_changes(recorded: dict, files: dict, prune_of: dict[str, list[str]]) -> list[txn.Change]:
    changes = []
    for path, info in recorded.items():
        if path in files:
            continue
        current = txn.read_bytes(path)
        if current is None:
            continue
        if txn.digest(current) != info["sha256"]:
            raise CmError("HOST_FILE_MODIFIED", f"{path} was changed since cm wrote it; move it aside or restore it, "
                                                "nothing was changed")
        changes.append(txn.Change(path, info["sha256"], None, prune=prune_of.get(path, [])))
    for path, (data, _owners, _prune) in files.items():
        current = txn.read_bytes(path)
        if path not in recorded:
            if current is not None:
                raise CmError("UNMANAGED_FILE", f"{path} already exists and cm did not write it; move it aside or keep "
                                                "this agent managed by hand")
            changes.append(txn.Change(path, None, data))
        elif current is None:
            changes.append(txn.Change(path, None, data))
        elif current != data:
            if txn.digest(current) != recorded[path]["sha256"]:
                raise CmError("HOST_FILE_MODIFIED", f"{path} was changed since cm wrote it; move it aside or restore "
                                                    "it, nothing was changed")
            changes.append(txn.Change(path, txn.digest(current), data))
    return changes


def _find(text: str, entry: Entry, path: str) -> int | None:
    if entry.fmt == "toml":
        return tomledit.find(text, entry, path)
    return jsonedit.find(text, entry, path, entry.fmt == "jsonc")


def _present_key(text: str, entry: Entry, path: str) -> bool:
    if entry.fmt == "toml":
        return tomledit.present_key(text, entry, path)
    return jsonedit.present_key(text, entry, path, entry.fmt == "jsonc")


def without(text: str, entries: list[Entry], path: str) -> str:
    """``text`` with cm's recorded ``entries`` taken out, whatever the file's grammar."""
    if not entries or entries[0].fmt == "toml":
        return tomledit.remove(text, entries, path)
    return jsonedit.remove(text, entries, path, entries[0].fmt == "jsonc")


def _edit(fmt: str, text: str, exists: bool, gone: list[Entry], added: list[Entry], path: str, created: Keys,
          blank: str | None) -> tuple[str | None, Keys, list[str | None]]:
    """The file's new text (``None``: delete it), the containers cm created in it and the exact
    text of each added entry."""
    if fmt == "toml":
        result = tomledit.add(tomledit.remove(text, gone, path), added, path)
        return (result if result.strip() or text.strip() else None), set(), [None] * len(added)
    comments = fmt == "jsonc"
    result, made = jsonedit.add(jsonedit.remove(text, gone, path, comments, created), added, path, comments)
    if exists:
        made.discard(())  # a file that was there, even empty, is the user's: never cm's to delete
    created = jsonedit.existing(result, created | made, path, comments)
    texts: list[str | None] = list(jsonedit.inserted(result, added, path, comments))
    if jsonedit.is_empty(result):
        if () in created:
            return None, set(), texts  # cm made this file and nothing else is left in it
        if blank is not None:
            return blank, set(), texts  # the user's blank file, given back as it was
    return result, created, texts


def _too_large(path: str, size: int) -> CmError:
    return CmError("HOST_FILE_TOO_LARGE", f"{path} is {size >> 20} MiB, over the {ADD_LIMIT >> 20} MiB cm edits to "
                                          "add entries; add them by hand (`cm mcp-config` prints them), nothing was "
                                          "changed")


def _entry_changes(recorded: list[dict], entries: dict, before: dict
                   ) -> tuple[list[txn.Change], dict[str, list], dict[str, dict], list[str]]:
    """The edits of files with entries, and what the manifest records after them: the entries cm
    owns (with owners), the containers cm created, the blank files cm filled; plus notes.

    Only an entry cm adds is cm's; one the user already had, identical to cm's, stays theirs."""
    changes = []
    owned: dict[str, list] = {}
    after: dict[str, dict] = {"created": {}, "blank": {}}
    notes = []
    key = lambda e: (e.key, e.item, e.fingerprint())  # noqa: E731
    for path in sorted({e["file"] for e in recorded} | set(entries)):
        old = [Entry.from_json(e) for e in recorded if e["file"] == path]
        wanted = entries.get(path, [])
        new = [e for e, _owners in wanted]
        fmt = (new or old)[0].fmt
        mine = {key(o): o for o in old}
        gone = [e for e in old if key(e) not in {key(n) for n in new}]
        created = {tuple(k) for k in before.get("created", {}).get(path, [])}
        blank = before.get("blank", {}).get(path)
        size = os.lstat(path).st_size if os.path.lexists(path) else 0
        if size > ADD_LIMIT and not gone:
            # Over the limit cm only takes out: a file it may have to add to is refused unread,
            # and one where it only keeps what it has is left as it is, unread (no parse of a huge
            # file for a change elsewhere).
            if any(key(e) not in mine for e in new):
                raise _too_large(path, size)
            owned[path] = [(dataclasses.replace(e, text=mine[key(e)].text), o) for e, o in wanted]
            after["created"].update({path: sorted(list(k) for k in created)} if created else {})
            after["blank"].update({path: blank} if blank is not None else {})
            continue
        text, exists = _text(path)
        present = {key(e) for e in new if _find(text, e, path) is not None}
        added = [e for e in new if key(e) not in present]
        for entry in added:
            if key(entry) in mine and not entry.item and _present_key(text, entry, path):
                raise CmError("HOST_FILE_MODIFIED", f"{'.'.join(entry.key)} in {path} was changed since cm wrote it; "
                                                    "restore or remove it by hand, nothing was changed")
        if added and size > ADD_LIMIT:
            raise _too_large(path, size)
        for entry in new:
            if key(entry) in present and key(entry) not in mine:
                notes.append(f"{'.'.join(entry.key)} in {path} was already there: it stays yours, cm will not "
                             "remove it")
        if blank is None and exists and added and jsonedit.is_blank(text):
            blank = text
        result: str | None = text
        texts: list[str | None] = [None] * len(added)  # TOML: no text recorded
        if gone or added:
            result, created, texts = _edit(fmt, text, exists, gone, added, path, created, blank)
        text_of = {key(e): t for e, t in zip(added, texts)}
        owned[path] = []
        for entry, owners in wanted:
            if key(entry) in text_of:
                exact = text_of[key(entry)]
            elif key(entry) in mine and key(entry) in present:
                exact = mine[key(entry)].text
            else:
                continue  # the user's own copy
            owned[path].append((dataclasses.replace(entry, text=exact), owners))
        if created:
            after["created"][path] = sorted(list(k) for k in created)
        if blank is not None and result is not None and not jsonedit.is_blank(result):
            after["blank"][path] = blank
        if not gone and not added:
            continue
        after_bytes = None if result is None else result.encode("utf-8")
        if after_bytes is None and not exists:
            continue
        changes.append(txn.Change(path, txn.digest(text.encode("utf-8")) if exists else None, after_bytes,
                                  backup=exists))
    return changes, owned, after, notes


def plan(home: str, selected: list[str], init: bool = False, grant: bool = False,
         hosts: dict[str, discovery.Host] | None = None) -> Plan:
    """The changes that make ``selected`` the installed set (see module contract); under the
    host-configuration lock, so no other transaction is half-done while it reads."""
    with txn.locked(home):
        return _plan(home, selected, init, grant, hosts)


def _plan(home: str, selected: list[str], init: bool, grant: bool, hosts: dict[str, discovery.Host] | None
          ) -> Plan:
    txn.recover(home)
    hosts = hosts or discovery.discover()
    manifest = manifest_mod.load(home)
    recorded = manifest["hosts"]
    selected = [h for h in discovery.HOST_IDS if h in selected]
    init = init and "chatgpt" in selected
    for host in selected:
        if host not in recorded and not hosts[host].available:
            raise CmError("HOST_UNAVAILABLE", f"{hosts[host].title} {hosts[host].unavailable}")
    if "pi" in selected and "pi" not in recorded:
        pi_mod.check_no_duplicates(hosts["pi"].root)
    cfg = config_mod.load(home)
    result = Plan(selected, [h for h in selected if h not in recorded],
                  [h for h in discovery.HOST_IDS if h in recorded and h not in selected],
                  [h for h in selected if h in recorded], init, False)
    pins = Pins.current(home)
    roots = _roots(selected, recorded, hosts)
    mcp_files = _mcp_files(selected, recorded, hosts)
    files, entries = _collect(home, pins, roots, init, manifest["entries"], mcp_files)
    prune_of = {path: prune for path, (_d, _o, prune) in files.items()}
    for host, info in recorded.items():
        if host == "pi":
            for path in pi_mod.desired(info["root"], pins):
                prune_of.setdefault(path, pi_mod.prune_dirs(info["root"]))
        else:
            skill_root = os.path.join(info["root"], codexroot.SKILL_DIR)
            for path in manifest["files"]:
                if path.startswith(skill_root + os.sep):
                    prune_of.setdefault(path, [skill_root, os.path.join(skill_root, "agents")])
    for path, info in manifest["files"].items():
        prune_of[path] = prune_of.get(path, []) + info.get("createdDirs", [])
    entry_changes, owned, made, notes = _entry_changes(manifest["entries"], entries, manifest)
    result.changes = _file_changes(manifest["files"], files, prune_of) + entry_changes
    result.notes += notes
    if init and _needs_grant(cfg):
        if not grant:
            raise CmError("DISCLOSURE_CONFIRMATION_REQUIRED", "AI Understanding Import needs agent_observation in "
                                                              "disclosure.allowedProvenance; confirm the disclosure")
        data = copy.deepcopy(cfg.data)
        data["disclosure"]["allowedProvenance"].append("agent_observation")
        config_mod.validate(data)
        body = (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        result.changes.append(txn.Change(config_path(home), txn.digest(txn.read_bytes(config_path(home))), body, 0o600))
        result.grant = True
    for host in result.remove:
        if host in CODEX_HOSTS:
            other = [h for h in CODEX_HOSTS if h != host and h in selected and roots.get(h) == recorded[host]["root"]]
            if other:
                result.notes.append(f"the shared hooks, read server and memory-refresh skill stay: "
                                    f"{discovery.TITLES[other[0]]} still uses them")
    new_manifest = _manifest(manifest, selected, roots, init, files, owned, mcp_files, made)
    if result.changes or new_manifest != manifest:
        path = manifest_mod.path_of(home)
        current = txn.read_bytes(path)
        after = manifest_mod.render(new_manifest) if new_manifest["hosts"] else None
        if not (after is None and current is None):
            result.changes.append(txn.Change(path, txn.digest(current), after, 0o600))
    return result


def _manifest(old: dict, selected: list[str], roots: dict[str, str], init: bool, files: dict, entries: dict,
              mcp_files: dict[str, str], json_made: dict[str, dict]) -> dict:
    now = int(time.time() * 1000)
    hosts = {}
    for host in selected:
        info = dict(old["hosts"].get(host) or {"installedAt": now})
        info["root"] = roots[host]
        if host == "chatgpt":
            info["init"] = init
        if host in mcp_files:
            info["mcpFile"] = mcp_files[host]
        hosts[host] = info
    recorded = old["files"]
    # Folders cm had to create for a file are cm's too: they go when the file goes, if empty.
    made = {p: recorded[p].get("createdDirs", []) if p in recorded else txn.missing_dirs(p) for p in files}
    result = {"version": manifest_mod.VERSION, "hosts": hosts,
              "files": {p: {"sha256": txn.digest(d), "owners": o, "createdDirs": made[p]}
                        for p, (d, o, _prune) in sorted(files.items())},
              "entries": [{"file": p, **e.as_json(), "owners": o} for p in sorted(entries) for e, o in entries[p]]}
    for name in ("created", "blank"):  # containers (and files: []) cm made; blank files it filled
        if json_made[name]:
            result[name] = json_made[name]
    return result


def apply(home: str, planned: Plan) -> None:
    txn.apply(home, planned.changes)
