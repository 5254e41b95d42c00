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
  ``config.json`` (when confirmed) and the new manifest commit together or not at all.
"""

from __future__ import annotations

import copy
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


def _text(path: str) -> str:
    data = txn.read_bytes(path)
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
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


def _edit(fmt: str, text: str, gone: list[Entry], added: list[Entry], path: str, created: Keys
          ) -> tuple[str | None, Keys]:
    """The file's new text (``None``: delete it) and the containers cm created in it."""
    if fmt == "toml":
        result = tomledit.add(tomledit.remove(text, gone, path), added, path)
        return (result if result.strip() or text.strip() else None), set()
    comments = fmt == "jsonc"
    result, made = jsonedit.add(jsonedit.remove(text, gone, path, comments, created), added, path, comments)
    created = jsonedit.existing(result, created | made, path, comments)
    if () in created and jsonedit.is_empty(result):
        return None, set()  # cm made this file and nothing else is left in it
    return result, created


def _entry_changes(recorded: list[dict], entries: dict, created_before: dict[str, list]
                   ) -> tuple[list[txn.Change], dict[str, list]]:
    changes = []
    created_after: dict[str, list] = {}
    for path in sorted({e["file"] for e in recorded} | set(entries)):
        old = [Entry.from_json(e) for e in recorded if e["file"] == path]
        new = [e for e, _owners in entries.get(path, [])]
        fmt = (new or old)[0].fmt
        key = lambda e: (e.key, e.item, e.fingerprint())  # noqa: E731
        gone = [e for e in old if key(e) not in {key(n) for n in new}]
        text = _text(path)
        added = [e for e in new if _find(text, e, path) is None]
        for entry in added:
            if key(entry) in {key(o) for o in old} and not entry.item and _present_key(text, entry, path):
                raise CmError("HOST_FILE_MODIFIED", f"{'.'.join(entry.key)} in {path} was changed since cm wrote it; "
                                                    "restore or remove it by hand, nothing was changed")
        created = {tuple(k) for k in created_before.get(path, [])}
        if not gone and not added:
            if created:
                created_after[path] = sorted(list(k) for k in created)
            continue
        result, created = _edit(fmt, text, gone, added, path, created)
        if created:
            created_after[path] = sorted(list(k) for k in created)
        after = None if result is None else result.encode("utf-8")
        if after is None and not os.path.lexists(path):
            continue
        exists = os.path.lexists(path)
        changes.append(txn.Change(path, txn.digest(text.encode("utf-8")) if exists else None, after,
                                  backup=exists))
    return changes, created_after


def plan(home: str, selected: list[str], init: bool = False, grant: bool = False,
         hosts: dict[str, discovery.Host] | None = None) -> Plan:
    """The changes that make ``selected`` the installed set (see module contract)."""
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
    entry_changes, created = _entry_changes(manifest["entries"], entries, manifest.get("created", {}))
    result.changes = _file_changes(manifest["files"], files, prune_of) + entry_changes
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
    new_manifest = _manifest(manifest, selected, roots, init, files, entries, mcp_files, created)
    if result.changes or new_manifest != manifest:
        path = manifest_mod.path_of(home)
        current = txn.read_bytes(path)
        after = manifest_mod.render(new_manifest) if new_manifest["hosts"] else None
        if not (after is None and current is None):
            result.changes.append(txn.Change(path, txn.digest(current), after, 0o600))
    return result


def _manifest(old: dict, selected: list[str], roots: dict[str, str], init: bool, files: dict, entries: dict,
              mcp_files: dict[str, str], created: dict[str, list]) -> dict:
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
    result = {"version": 1, "hosts": hosts,
              "files": {p: {"sha256": txn.digest(d), "owners": o, "createdDirs": made[p]}
                        for p, (d, o, _prune) in sorted(files.items())},
              "entries": [{"file": p, **e.as_json(), "owners": o} for p in sorted(entries) for e, o in entries[p]]}
    if created:
        result["created"] = created  # containers (and files: []) cm made for its JSON entries
    return result


def apply(home: str, planned: Plan) -> None:
    txn.apply(home, planned.changes)
