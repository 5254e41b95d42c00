"""Installation checks: what cm can prove about an installed integration, and what it cannot.

Contract:
- Checks change nothing. Per installed host: every owned file exists with the bytes cm wrote; for
  Codex roots the six hooks are pinned to an existing interpreter and this home, their trust state
  is computed the way Codex 0.169 computes it (``doctor.trust_hash``), and the read MCP server
  starts with its configured command line and lists exactly ``memory_read`` and ``memory_status``
  (it reads no memory and starts no Writer); for Pi the wrapper's interpreter exists and no second
  bridge is present.
  For Claude Code and Gemini CLI: every entry cm recorded is in the settings file as cm wrote it,
  the hooks are pinned to an existing interpreter and this home, and the read server starts and
  lists exactly the read tools.
- ``Report.cannot`` says what no file check can prove: that a running host has loaded the
  configuration, and that Codex itself (not cm's computation) considers the hooks trusted.
- ``host_groups`` is ``cm doctor``'s per-host part: one group per host cm knows. A host cm
  installed gets the checks above; Codex set up by hand (its profile file exists, or
  ``--codex-home`` was given) gets ``doctor.codex_profile``; a host found here but not connected
  is a ``warn`` saying how to connect it; a host that is not here is a ``skip``, never a failure.
"""

from __future__ import annotations

import os
import shlex
import tomllib
from dataclasses import dataclass, field

from cmrunner.core.errors import CmError
from cmrunner.manage import doctor, hostconfig
from cmrunner.manage.doctor import Check
from cmrunner.manage.integrations import (
    codexroot,
    discovery,
    jsonedit,
    jsonhosts,
    manifest as manifest_mod,
    pi as pi_mod,
    txn,
)
from cmrunner.manage.integrations.tomledit import Entry


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.state == "fail" for c in self.checks)


def _load(path: str) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _files(host: str, manifest: dict) -> Check:
    owned = {p: i for p, i in manifest["files"].items() if host in i["owners"]}
    problems = []
    for path, info in owned.items():
        try:
            data = txn.read_bytes(path)
        except Exception:
            data = None
        if data is None:
            problems.append(f"{path} missing")
        elif txn.digest(data) != info["sha256"]:
            problems.append(f"{path} changed since cm wrote it")
    name = f"{discovery.TITLES[host]} files"
    if problems:
        return Check(name, "fail", "; ".join(problems) + "; reinstall from Agent Integration")
    return Check(name, "ok", f"{len(owned)} files exactly as cm wrote them")


def _ours(group: dict) -> bool:
    return any("cmrunner" in h.get("command", "") and " hook " in h.get("command", "") for h in group.get("hooks", []))


def _base_hooks(home: str, base_path: str, base: dict) -> tuple[Check, Check]:
    """Hooks cm added to the base config.toml: pinning and computed trust (keys are positional)."""
    hooks = base.get("hooks", {})
    trusted = hooks.get("state", {})
    found, states = [], {}
    for event in hostconfig.HOOK_EVENTS:
        groups = hooks.get(event) or []
        index = next((i for i, g in enumerate(groups) if _ours(g)), None)
        if index is None:
            states[event] = "missing"
            continue
        group = groups[index]
        handler = group["hooks"][0]
        found.append((event, group, handler))
        entry = trusted.get(f"{base_path}:{doctor.event_snake(event)}:{index}:0", {})
        states[event] = ("trusted" if entry.get("trusted_hash") == doctor.trust_hash(event, group, handler)
                         else "untrusted" if "trusted_hash" not in entry else "modified")
    pinned, _ = doctor._check_hooks(home, {"hooks": {e: [g] for e, g, _h in found}})
    legacy = doctor.legacy_hooks([(e, h.get("command", "")) for e, _g, h in found])
    if legacy:
        pinned = doctor.legacy_check(legacy, "cm agents install chatgpt") if pinned.state == "ok" else pinned
    if all(s == "trusted" for s in states.values()):
        trust = Check("hook trust", "ok", "all six hooks trusted (computed as Codex 0.169 does)")
    else:
        pending = ", ".join(f"{e} {s}" for e, s in states.items() if s != "trusted")
        trust = Check("hook trust", "warn", f"{pending}: restart the app or Codex and trust them in /hooks")
    return pinned, trust


def _codex_root(home: str, root: str, owners: list[str]) -> list[Check]:
    base_path = os.path.join(root, codexroot.BASE_FILE)
    profile_path = os.path.join(root, codexroot.PROFILE_FILE)
    base = _load(base_path)
    if "chatgpt" in owners:
        pinned, trust = _base_hooks(home, base_path, base)
        server = base.get("mcp_servers", {}).get("common_memory")
    else:
        profile = _load(profile_path)
        pinned, found = doctor._check_hooks(home, profile)
        trust = doctor._check_trust(profile_path, found, [base, profile])
        legacy = doctor.legacy_hooks([(e, h.get("command", "")) for e, _g, h in found])
        if legacy and pinned.state == "ok":
            pinned = doctor.legacy_check(legacy, "cm agents install codex")
        server = profile.get("mcp_servers", {}).get("common_memory")
    mcp = doctor._check_mcp({"mcp_servers": {"common_memory": server}} if server else {})
    return [pinned, trust, mcp]


def _entries_line(host: str, recorded: list[dict]) -> str:
    """What the settings check proved: cm's own entries; those the user had before are not cm's."""
    keys = {tuple(e["key"]) for e in recorded}
    hooks = sum(("hooks", event) in keys for event in jsonhosts.events(host))
    has_server = ("mcpServers", jsonhosts.SERVER) in keys
    line = f"{hooks} hooks{' and the read MCP server' if has_server else ''} exactly as cm wrote them"
    theirs = [f"hooks.{e}" for e in jsonhosts.events(host) if ("hooks", e) not in keys]
    theirs += [] if has_server else [f"mcpServers.{jsonhosts.SERVER}"]
    return line + (f"; not cm's (you had them before), not checked: {', '.join(theirs)}" if theirs else "")


def _json_host(home: str, host: str, manifest: dict, start_servers: bool) -> list[Check]:
    """Claude Code / Gemini CLI: entries in place, hooks pinned, the read server answering."""
    recorded = [e for e in manifest["entries"] if host in e["owners"]]
    problems, handlers, server = [], [], None
    for path in sorted({e["file"] for e in recorded}):
        try:
            text = (txn.read_bytes(path) or b"").decode("utf-8")
            for raw in (e for e in recorded if e["file"] == path):
                entry = Entry.from_json(raw)
                if jsonedit.find(text, entry, path, entry.fmt == "jsonc") is None:
                    problems.append(f"{'.'.join(entry.key)} missing or changed in {path}")
                elif entry.key[0] == "hooks":
                    handlers += [(entry.key[-1], h) for h in entry.value["hooks"]]
                else:
                    server = entry.value
        except (CmError, UnicodeDecodeError) as exc:
            problems.append(exc.message if isinstance(exc, CmError) else f"{path} is not UTF-8 text")
    settings = (Check("settings", "fail", "HOST_FILE_MODIFIED: " + "; ".join(problems)
                      + f"; reinstall with `cm agents remove {host}` then `cm agents install {host}`")
                if problems else Check("settings", "ok", _entries_line(host, recorded)))
    unpinned = []
    for event, handler in handlers:
        try:
            argv = shlex.split(handler.get("command", ""))
        except ValueError:
            argv = []
        problem = doctor.pinned_problem(home, argv)
        if problem:
            unpinned.append(f"{event} {problem}")
    hooks = (Check("hooks", "fail", "HOOK_NOT_PINNED: " + "; ".join(unpinned)
                   + f"; run `cm agents install {host}` again from this installation") if unpinned else
             Check("hooks", "ok", f"{len(handlers)} hooks pinned to an existing interpreter and this home"))
    result = [settings, hooks]
    legacy = doctor.legacy_hooks([(event, handler.get("command", "")) for event, handler in handlers])
    if legacy:
        result.append(doctor.legacy_check(legacy, f"cm agents install {discovery.public_id(host)}"))
    if start_servers and server is not None:
        result.append(doctor._check_mcp({"mcp_servers": {"common_memory": server}}))
    return result


def _pi(home: str, root: str) -> Check:
    duplicates = pi_mod.duplicates(root)
    if duplicates:
        return Check("bridge", "fail", "PI_BRIDGE_DUPLICATE: also loaded from " + "; ".join(duplicates))
    if not os.path.exists(hostconfig.Pins.current(home).python):
        return Check("bridge", "fail", "INTERPRETER_NOT_FOUND: the pinned interpreter is gone; reinstall Pi from "
                                       "this installation (`cm agents install pi`)")
    return Check("bridge", "ok", "one copy in extensions/common-memory, pinned to an existing interpreter")


def _titled(title: str, checks: list[Check], group: str = "") -> list[Check]:
    """``checks`` named ``<title> <name>`` (the installation check) or in ``group`` (``cm doctor``)."""
    return [Check(f"{title} {c.name}" if title else c.name, c.state, c.detail, group) for c in checks]


def run(home: str, start_servers: bool = True) -> Report:
    manifest = manifest_mod.load(home)
    report = Report()
    hosts = manifest["hosts"]
    if not hosts:
        report.cannot.append("no agent is installed by cm")
        return report
    for host in hosts:
        if host not in jsonhosts.HOSTS:  # those own entries in the user's files, not files
            report.checks.append(_files(host, manifest))
    codex_roots: dict[str, list[str]] = {}
    for host in ("codex", "chatgpt"):
        if host in hosts:
            codex_roots.setdefault(hosts[host]["root"], []).append(host)
    for root, owners in codex_roots.items():
        checks = _codex_root(home, root, owners) if start_servers else []
        report.checks.extend(Check(f"{'/'.join(discovery.TITLES[o] for o in owners)} {c.name}", c.state, c.detail)
                             for c in checks)
    for host in jsonhosts.HOSTS:
        if host in hosts:
            report.checks.extend(_titled(discovery.TITLES[host], _json_host(home, host, manifest, start_servers)))
    if "pi" in hosts:
        report.checks.extend(_titled("Pi", [_pi(home, hosts["pi"]["root"])]))
    report.cannot.append("these checks read files and start the read server; they cannot prove that a running agent "
                         "has loaded the configuration: restart the agent after a change")
    if any(h in hosts for h in jsonhosts.HOSTS):
        report.cannot.append("Claude Code and Gemini CLI run user hooks and servers only in folders they trust; "
                             "cm cannot see which folders you trusted")
    if codex_roots:
        report.cannot.append("hook trust is computed the way Codex 0.169 does; only Codex's /hooks screen is "
                             "authoritative")
    return report


def summary_lines(home: str) -> list[str]:
    """The check as lines for a screen: what was proved, then what could not be."""
    try:
        report = run(home)
    except CmError as exc:
        return [f"the check failed: {exc.code}: {exc.message}"]
    return [f"{c.state:<4} {c.name}: {c.detail}" for c in report.checks] + [f"not proven: {line}" for line in report.cannot]


def host_groups(home: str, codex_home: str, profile_name: str = "common-memory", codex_explicit: bool = False,
                hosts: dict[str, discovery.Host] | None = None) -> list[Check]:
    """``cm doctor``'s per-host groups (see module contract)."""
    hosts = hosts or discovery.discover()
    try:
        manifest = manifest_mod.load(home)
    except CmError as exc:
        return [Check("integrations manifest", "fail", f"{exc.code}: {exc.message}", "Agents")]
    installed = manifest["hosts"]
    result: list[Check] = []
    for host in discovery.LISTED:
        found = hosts[host]
        title = found.title
        public = discovery.public_id(host)
        if host in jsonhosts.HOSTS and host in installed:
            result += _titled("", _json_host(home, host, manifest, True), title)
        elif host in installed:
            checks = [_files(host, manifest)]
            if host == "pi":
                checks.append(_pi(home, installed["pi"]["root"]))
            else:
                root = installed[host]["root"]
                owners = [h for h in ("codex", "chatgpt") if installed.get(h, {}).get("root") == root]
                if owners[0] == host:  # a shared Codex root is checked once, under its first owner
                    checks += _codex_root(home, root, owners)
            result += _titled("", checks, title)
        elif host == "codex" and (codex_explicit or os.path.exists(
                os.path.join(codex_home, f"{profile_name}.config.toml"))):
            result += _titled("", doctor.codex_profile(home, codex_home, profile_name), title)
        elif found.available:
            result.append(Check("integration", "warn", f"found ({found.found}) but cm is not connected: run "
                                                       f"`cm agents install {public}`", title))
        else:
            result.append(Check("integration", "skip", "not on this machine; nothing to check", title))
    return result
