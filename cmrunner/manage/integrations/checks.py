"""Installation checks: what cm can prove about an installed integration, and what it cannot.

Contract:
- Checks change nothing. Per installed host: every owned file exists with the bytes cm wrote; for
  Codex roots the six hooks are pinned to an existing interpreter and this home, their trust state
  is computed the way Codex 0.169 computes it (``doctor.trust_hash``), and the read MCP server
  starts with its configured command line and lists exactly ``memory_read`` and ``memory_status``
  (it reads no memory and starts no Writer); for Pi the wrapper's interpreter exists and no second
  bridge is present.
- ``Report.cannot`` says what no file check can prove: that a running host has loaded the
  configuration, and that Codex itself (not cm's computation) considers the hooks trusted.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field

from cmrunner.core.errors import CmError
from cmrunner.manage import doctor, hostconfig
from cmrunner.manage.doctor import Check
from cmrunner.manage.integrations import codexroot, discovery, manifest as manifest_mod, pi as pi_mod, txn


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
        server = profile.get("mcp_servers", {}).get("common_memory")
    mcp = doctor._check_mcp({"mcp_servers": {"common_memory": server}} if server else {})
    return [pinned, trust, mcp]


def run(home: str, start_servers: bool = True) -> Report:
    manifest = manifest_mod.load(home)
    report = Report()
    hosts = manifest["hosts"]
    if not hosts:
        report.cannot.append("no agent is installed by cm")
        return report
    for host in hosts:
        report.checks.append(_files(host, manifest))
    codex_roots: dict[str, list[str]] = {}
    for host in ("codex", "chatgpt"):
        if host in hosts:
            codex_roots.setdefault(hosts[host]["root"], []).append(host)
    for root, owners in codex_roots.items():
        checks = _codex_root(home, root, owners) if start_servers else []
        report.checks.extend(Check(f"{'/'.join(discovery.TITLES[o] for o in owners)} {c.name}", c.state, c.detail)
                             for c in checks)
    if "pi" in hosts:
        root = hosts["pi"]["root"]
        duplicates = pi_mod.duplicates(root)
        report.checks.append(Check("Pi bridge", "fail" if duplicates else "ok",
                                   ("also loaded from " + "; ".join(duplicates)) if duplicates
                                   else "one copy in extensions/common-memory, pinned to an existing interpreter"
                                   if os.path.exists(hostconfig.Pins.current(home).python) else "interpreter missing"))
    report.cannot.append("these checks read files and start the read server; they cannot prove that a running agent "
                         "has loaded the configuration: restart Pi, Codex or ChatGPT after a change")
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

