"""``cm agents``: the Agent Integration of the terminal UI, scriptable, one host at a time.

Contract:
- ``listing`` reports every host cm knows, in ``discovery.LISTED`` order, with its public id,
  whether cm installed it (the manifest), whether it was found here, and its version: the first
  version-looking word of ``<binary> --version`` (run with a bounded timeout, all at once), or
  ``None`` when there is no binary or it did not answer. Nothing is written.
- ``install`` and ``remove`` change the selection by one host and hand it to ``manager.plan`` and
  ``manager.apply``: the same checks, transaction, rollback and ownership manifest as the UI.
  Installing an installed host refreshes its pins; removing one cm did not install changes nothing.
  ChatGPT Work's import server is kept as it was unless ``init`` says otherwise. The manifest is
  read, planned on and replaced under one hold of the host-configuration lock (``txn.locked``), so
  two ``cm agents`` (or one and the UI) never lose each other's change.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from cmrunner.manage.integrations import discovery, manager, txn

VERSION_TIMEOUT_S = 15
_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.]+)?")


@dataclass
class Row:
    id: str
    public_id: str
    title: str
    installed: bool
    found: bool
    detail: str
    version: str | None

    def as_json(self) -> dict:
        return {"id": self.public_id, "title": self.title, "installed": self.installed, "found": self.found,
                "version": self.version, "detail": self.detail}


def version_of(binary: str | None) -> str | None:
    if binary is None:
        return None
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_RE.search(proc.stdout or "") if proc.returncode == 0 else None
    return match.group(0) if match else None


def listing(home: str, hosts: dict[str, discovery.Host] | None = None) -> list[Row]:
    hosts = hosts or discovery.discover()
    installed = manager.installed(home)
    order = [hosts[h] for h in discovery.LISTED]
    with ThreadPoolExecutor(max_workers=len(order)) as pool:
        versions = list(pool.map(lambda h: version_of(h.binary), order))
    return [Row(h.id, discovery.public_id(h.id), h.title, h.id in installed, h.available,
                h.found if h.available or h.found != "not found" else h.limits, version)
            for h, version in zip(order, versions)]


def install(home: str, host: str, init: bool | None = None, grant: bool = False,
            hosts: dict[str, discovery.Host] | None = None) -> manager.Plan:
    with txn.locked(home):  # the manifest read here is the one planned on
        installed = manager.installed(home)
        keep_init = bool(installed.get("chatgpt", {}).get("init"))
        planned = manager.plan(home, [*installed, host], keep_init if init is None else init, grant, hosts)
        manager.apply(home, planned)
    return planned


def remove(home: str, host: str, hosts: dict[str, discovery.Host] | None = None) -> manager.Plan | None:
    if host not in manager.installed(home):
        return None
    with txn.locked(home):
        installed = manager.installed(home)
        if host not in installed:
            return None
        keep_init = bool(installed.get("chatgpt", {}).get("init"))
        planned = manager.plan(home, [h for h in installed if h != host], keep_init, False, hosts)
        manager.apply(home, planned)
    return planned
